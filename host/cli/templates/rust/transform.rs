//! @NAME@: a refract record transform (rewrites, drops, fans out or re-routes records).
//!
//! It starts by forwarding every record unchanged. Change `transform` — the one place that
//! decides — to return `Outcome::Drop`, `Outcome::Replace(records)` or `Outcome::Reject(reason)`.

use refract_plugin_sdk::config::ConfigTable;
use refract_plugin_sdk::{BatchInfo, Outcome, PluginError, Record, RecordTransform};

struct Transform;

impl RecordTransform for Transform {
    const NAME: &'static str = "@NAME@";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let table = ConfigTable::parse(config)?;
        // Read keys of your own here, e.g. `table.string("field")?`.
        table.finish()?; // rejects keys nobody read, naming them
        Ok(Transform)
    }

    /// CHANGE ME: what happens to `record`, e.g. a copy with a new value:
    /// `Outcome::replace_with(record.to_output().with_value(Some(b"new".to_vec())))`.
    fn transform(&self, _batch: &BatchInfo, _record: &Record) -> Outcome {
        Outcome::Keep
    }
}

refract_plugin_sdk::export_transform!(Transform);
