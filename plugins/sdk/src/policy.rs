//! The trait a policy plugin implements.

use crate::PluginError;
use crate::mm2;

/// How topics are named on the target cluster, answered one topic at a time.
///
/// This is MirrorMaker 2's `ReplicationPolicy`. [`export_policy!`](crate::export_policy) turns an
/// implementation into the batched `replication-policy` WIT interface. Every answer must be a pure
/// function of the policy's config and the arguments: the host caches answers per topic.
///
/// The provided methods follow the defaults of MirrorMaker 2's `ReplicationPolicy` interface, which
/// use `.` as the separator in internal topic names. A policy with a configurable separator can
/// delegate them to [`mm2::DefaultReplicationPolicy`] instead.
pub trait ReplicationPolicy: Sized + 'static {
    /// The plugin's name, as reported by `lifecycle.info`.
    const NAME: &'static str;
    /// The plugin's version, as reported by `lifecycle.info`.
    const VERSION: &'static str;

    /// Builds the policy from its config table, given as TOML text (empty when there is none).
    ///
    /// Report an unusable config with [`PluginError::invalid_config`], naming the key and the
    /// reason; [`ConfigTable`](crate::config::ConfigTable) does that for you.
    fn from_config(config: &str) -> Result<Self, PluginError>;

    /// The name `topic` from cluster `source_cluster` gets on the target (`formatRemoteTopic`).
    fn format_remote_topic(&self, source_cluster: &str, topic: &str) -> String;

    /// The cluster a topic was replicated from, `None` for a local topic (`topicSource`).
    fn topic_source(&self, topic: &str) -> Option<String>;

    /// The topic's name one hop upstream, `None` for a local topic (`upstreamTopic`).
    fn upstream_topic(&self, topic: &str) -> Option<String>;

    /// Whether a topic is internal and never mirrored (`isInternalTopic`).
    fn is_internal_topic(&self, topic: &str) -> bool {
        mm2::is_internal_topic(topic, mm2::DEFAULT_SEPARATOR)
    }

    /// The name of the heartbeats topic (`heartbeatsTopic`).
    fn heartbeats_topic(&self) -> String {
        mm2::HEARTBEATS_TOPIC.to_owned()
    }

    /// The offset-syncs topic for a cluster alias (`offsetSyncsTopic`).
    fn offset_syncs_topic(&self, cluster_alias: &str) -> String {
        mm2::offset_syncs_topic(cluster_alias, mm2::DEFAULT_SEPARATOR)
    }

    /// The checkpoints topic for a cluster alias (`checkpointsTopic`).
    fn checkpoints_topic(&self, cluster_alias: &str) -> String {
        mm2::checkpoints_topic(cluster_alias, mm2::DEFAULT_SEPARATOR)
    }
}
