//! @NAME@: a refract replication policy (how topics are named on the target cluster).
//!
//! It starts as MirrorMaker 2's DefaultReplicationPolicy (`orders` from cluster `primary` becomes
//! `primary.orders`). Change `format_remote_topic` — the one place that names remote topics —
//! and, if your names no longer carry the source alias, `topic_source` and `upstream_topic`.

use refract_plugin_sdk::config::ConfigTable;
use refract_plugin_sdk::mm2::DefaultReplicationPolicy;
use refract_plugin_sdk::{PluginError, ReplicationPolicy};

struct Policy {
    /// MirrorMaker 2's rules, with the `separator` and `internal_topic_separator_enabled` keys.
    default: DefaultReplicationPolicy,
}

impl ReplicationPolicy for Policy {
    const NAME: &'static str = "@NAME@";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let mut table = ConfigTable::parse(config)?;
        let default = DefaultReplicationPolicy::from_table(&mut table)?;
        // Read keys of your own here, e.g. `table.string("prefix")?`.
        table.finish()?; // rejects keys nobody read, naming them
        Ok(Self { default })
    }

    /// CHANGE ME: the name `topic` from `source_cluster` gets on the target.
    fn format_remote_topic(&self, source_cluster: &str, topic: &str) -> String {
        self.default.format_remote_topic(source_cluster, topic)
    }

    fn topic_source(&self, topic: &str) -> Option<String> {
        self.default.topic_source(topic)
    }

    fn upstream_topic(&self, topic: &str) -> Option<String> {
        self.default.upstream_topic(topic)
    }

    fn is_internal_topic(&self, topic: &str) -> bool {
        self.default.is_internal_topic(topic)
    }

    fn offset_syncs_topic(&self, cluster_alias: &str) -> String {
        self.default.offset_syncs_topic(cluster_alias)
    }

    fn checkpoints_topic(&self, cluster_alias: &str) -> String {
        self.default.checkpoints_topic(cluster_alias)
    }
}

refract_plugin_sdk::export_policy!(Policy);
