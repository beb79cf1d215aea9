//! The trait a filter plugin implements.

use crate::{BatchInfo, PluginError, Record};

/// Decides per record whether it is mirrored.
///
/// [`export_filter!`](crate::export_filter) turns an implementation into the `record-filter` WIT
/// interface: `filter` answers one flag per record, in order, from [`keep`](Self::keep), unless
/// [`filter_batch`](Self::filter_batch) is overridden to decide a whole batch at once.
pub trait RecordFilter: Sized + 'static {
    /// The plugin's name, as reported by `lifecycle.info`.
    const NAME: &'static str;
    /// The plugin's version, as reported by `lifecycle.info`.
    const VERSION: &'static str;

    /// Builds the filter from its config table, given as TOML text (empty when there is none).
    ///
    /// Report an unusable config with [`PluginError::invalid_config`], naming the key and the
    /// reason; [`ConfigTable`](crate::config::ConfigTable) does that for you.
    fn from_config(config: &str) -> Result<Self, PluginError>;

    /// Whether `record` of `batch` is mirrored.
    fn keep(&self, batch: &BatchInfo, record: &Record) -> bool;

    /// One flag per record of the batch, in order (`true` = keep); by default from [`keep`](Self::keep).
    ///
    /// An error fails the whole batch; the answer must have exactly one flag per record.
    fn filter_batch(
        &self,
        batch: &BatchInfo,
        records: &[Record],
    ) -> Result<Vec<bool>, PluginError> {
        Ok(records
            .iter()
            .map(|record| self.keep(batch, record))
            .collect())
    }
}
