//! The trait a transform plugin implements.

use crate::{BatchInfo, Outcome, PluginError, Record};

/// Rewrites, drops, fans out or re-routes records.
///
/// [`export_transform!`](crate::export_transform) turns an implementation into the
/// `record-transform` WIT interface: `transform` answers one [`Outcome`] per record, in order, from
/// [`transform`](Self::transform), unless [`transform_batch`](Self::transform_batch) is overridden.
pub trait RecordTransform: Sized + 'static {
    /// The plugin's name, as reported by `lifecycle.info`.
    const NAME: &'static str;
    /// The plugin's version, as reported by `lifecycle.info`.
    const VERSION: &'static str;

    /// Builds the transform from its config table, given as TOML text (empty when there is none).
    ///
    /// Report an unusable config with [`PluginError::invalid_config`], naming the key and the
    /// reason; [`ConfigTable`](crate::config::ConfigTable) does that for you.
    fn from_config(config: &str) -> Result<Self, PluginError>;

    /// What happens to `record` of `batch`.
    ///
    /// Return [`Outcome::Keep`] for a record that is forwarded unchanged: it costs nothing to send
    /// back. Build replacements with [`Record::to_output`] and the `OutputRecord::with_*` methods.
    fn transform(&self, batch: &BatchInfo, record: &Record) -> Outcome;

    /// One outcome per record of the batch, in order; by default from [`transform`](Self::transform).
    ///
    /// Override it to take the records by value (e.g. with [`Record::into_output`]) or to decide
    /// across records. An error fails the whole batch; the answer must have exactly one outcome
    /// per record.
    fn transform_batch(
        &self,
        batch: &BatchInfo,
        records: Vec<Record>,
    ) -> Result<Vec<Outcome>, PluginError> {
        Ok(records
            .iter()
            .map(|record| self.transform(batch, record))
            .collect())
    }
}
