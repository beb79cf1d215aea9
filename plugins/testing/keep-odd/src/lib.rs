//! Keeps records whose key is an odd decimal number; drops every other record. Two builds of
//! opposite parity let the hot-swap tests tell which plugin version handled each record.

use refract_plugin_sdk::{BatchInfo, PluginError, Record, RecordFilter};

struct Keep;

impl RecordFilter for Keep {
    const NAME: &'static str = "keep-odd";
    const VERSION: &'static str = "0.1.0";

    fn from_config(_config: &str) -> Result<Self, PluginError> {
        Ok(Keep)
    }

    fn keep(&self, _batch: &BatchInfo, record: &Record) -> bool {
        record
            .key
            .as_deref()
            .and_then(|k| std::str::from_utf8(k).ok())
            .and_then(|k| k.parse::<u64>().ok())
            .is_some_and(|n| n % 2 == 1)
    }
}

refract_plugin_sdk::export_filter!(Keep);
