//! @NAME@: a refract record filter (which records are mirrored).
//!
//! It starts by keeping every record. Change `keep` — the one place that decides.

use refract_plugin_sdk::config::ConfigTable;
use refract_plugin_sdk::{BatchInfo, PluginError, Record, RecordFilter};

struct Filter;

impl RecordFilter for Filter {
    const NAME: &'static str = "@NAME@";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let table = ConfigTable::parse(config)?;
        // Read keys of your own here, e.g. `table.string("header")?`.
        table.finish()?; // rejects keys nobody read, naming them
        Ok(Filter)
    }

    /// CHANGE ME: whether `record` is mirrored, e.g.
    /// `record.header("env") != Some(b"test".as_slice())`.
    fn keep(&self, _batch: &BatchInfo, _record: &Record) -> bool {
        true
    }
}

refract_plugin_sdk::export_filter!(Filter);
