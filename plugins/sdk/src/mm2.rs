//! MirrorMaker 2's built-in replication policies, reproduced name for name.
//!
//! Both policies read the same config keys:
//!
//! - `separator` (string, default `"."`): goes between the source cluster alias and the topic;
//!   must not be empty.
//! - `internal_topic_separator_enabled` (bool, default `true`): whether internal topic names
//!   (offset syncs, checkpoints) use `separator` too; when `false` they use `"."`.
//!
//! Any other key is rejected.

use crate::config::ConfigTable;
use crate::{PluginError, ReplicationPolicy};

/// The separator MirrorMaker 2 uses when none is configured.
pub const DEFAULT_SEPARATOR: &str = ".";

/// The name of MirrorMaker 2's heartbeats topic.
pub const HEARTBEATS_TOPIC: &str = "heartbeats";

/// Config key of the separator.
pub const SEPARATOR_KEY: &str = "separator";

/// Config key of the switch that applies the separator to internal topic names.
pub const INTERNAL_TOPIC_SEPARATOR_ENABLED_KEY: &str = "internal_topic_separator_enabled";

/// `topicSource`: the first token of Java's `topic.split(Pattern.quote(separator))`, if there
/// are at least two tokens once trailing empty tokens are dropped.
pub(crate) fn topic_source<'a>(topic: &'a str, separator: &str) -> Option<&'a str> {
    let mut tokens = topic.split(separator);
    let first = tokens.next()?;
    tokens.any(|token| !token.is_empty()).then_some(first)
}

/// `upstreamTopic`: what follows the source alias and the separator.
pub(crate) fn upstream_topic<'a>(topic: &'a str, separator: &str) -> Option<&'a str> {
    let source = topic_source(topic, separator)?;
    topic.get(source.len() + separator.len()..)
}

/// `isMM2InternalTopic`: ends with the internal separator followed by `internal`.
pub(crate) fn is_mm2_internal_topic(topic: &str, internal_separator: &str) -> bool {
    topic
        .strip_suffix("internal")
        .is_some_and(|rest| rest.ends_with(internal_separator))
}

/// `isInternalTopic`: MirrorMaker 2 internal, Kafka internal (`__`, `.`) or Connect internal
/// (`-internal`, `.internal`).
pub(crate) fn is_internal_topic(topic: &str, internal_separator: &str) -> bool {
    is_mm2_internal_topic(topic, internal_separator)
        || topic.starts_with("__")
        || topic.starts_with('.')
        || topic.ends_with("-internal")
        || topic.ends_with(".internal")
}

/// `offsetSyncsTopic`: `mm2-offset-syncs<i><alias><i>internal`.
pub(crate) fn offset_syncs_topic(cluster_alias: &str, internal_separator: &str) -> String {
    format!("mm2-offset-syncs{internal_separator}{cluster_alias}{internal_separator}internal")
}

/// `checkpointsTopic`: `<alias><i>checkpoints<i>internal`.
pub(crate) fn checkpoints_topic(cluster_alias: &str, internal_separator: &str) -> String {
    format!("{cluster_alias}{internal_separator}checkpoints{internal_separator}internal")
}

/// MirrorMaker 2's `DefaultReplicationPolicy`: remote topics are `<source><separator><topic>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultReplicationPolicy {
    separator: String,
    internal_topic_separator_enabled: bool,
}

impl Default for DefaultReplicationPolicy {
    fn default() -> Self {
        Self {
            separator: DEFAULT_SEPARATOR.to_owned(),
            internal_topic_separator_enabled: true,
        }
    }
}

impl DefaultReplicationPolicy {
    /// A policy with the given separator; fails with `invalid-config` if it is empty.
    pub fn new(
        separator: impl Into<String>,
        internal_topic_separator_enabled: bool,
    ) -> Result<Self, PluginError> {
        let separator = separator.into();
        if separator.is_empty() {
            return Err(PluginError::invalid_config(format!(
                "{SEPARATOR_KEY}: must not be empty"
            )));
        }
        Ok(Self {
            separator,
            internal_topic_separator_enabled,
        })
    }

    /// Reads `separator` and `internal_topic_separator_enabled` from `table`, leaving other keys.
    pub fn from_table(table: &mut ConfigTable) -> Result<Self, PluginError> {
        let separator = table.string(SEPARATOR_KEY)?;
        let internal_topic_separator_enabled = table
            .bool(INTERNAL_TOPIC_SEPARATOR_ENABLED_KEY)?
            .unwrap_or(true);
        let separator = separator.unwrap_or_else(|| DEFAULT_SEPARATOR.to_owned());
        if separator.is_empty() {
            return Err(table.error(SEPARATOR_KEY, "must not be empty"));
        }
        if separator != DEFAULT_SEPARATOR {
            crate::info(&format!(
                "using custom remote topic separator `{separator}`"
            ));
            if !internal_topic_separator_enabled {
                crate::warn(&format!(
                    "internal topic names use `{DEFAULT_SEPARATOR}` instead of the separator `{separator}`"
                ));
            }
        }
        Ok(Self {
            separator,
            internal_topic_separator_enabled,
        })
    }

    /// The separator between the source cluster alias and the topic.
    pub fn separator(&self) -> &str {
        &self.separator
    }

    /// Whether internal topic names use the separator (otherwise they use `.`).
    pub fn internal_topic_separator_enabled(&self) -> bool {
        self.internal_topic_separator_enabled
    }

    /// The separator used in internal topic names.
    pub fn internal_separator(&self) -> &str {
        if self.internal_topic_separator_enabled {
            &self.separator
        } else {
            DEFAULT_SEPARATOR
        }
    }

    /// Whether `topic` is one of MirrorMaker 2's own internal topics (`isMM2InternalTopic`).
    pub fn is_mm2_internal_topic(&self, topic: &str) -> bool {
        is_mm2_internal_topic(topic, self.internal_separator())
    }

    /// Whether `topic` is a checkpoints topic (`isCheckpointsTopic`).
    pub fn is_checkpoints_topic(&self, topic: &str) -> bool {
        let internal_separator = self.internal_separator();
        topic.ends_with(&format!(
            "{internal_separator}checkpoints{internal_separator}internal"
        ))
    }
}

impl ReplicationPolicy for DefaultReplicationPolicy {
    const NAME: &'static str = "builtin:default";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let mut table = ConfigTable::parse(config)?;
        let policy = Self::from_table(&mut table)?;
        table.finish()?;
        Ok(policy)
    }

    fn format_remote_topic(&self, source_cluster: &str, topic: &str) -> String {
        format!("{source_cluster}{}{topic}", self.separator)
    }

    fn topic_source(&self, topic: &str) -> Option<String> {
        topic_source(topic, &self.separator).map(str::to_owned)
    }

    fn upstream_topic(&self, topic: &str) -> Option<String> {
        upstream_topic(topic, &self.separator).map(str::to_owned)
    }

    fn is_internal_topic(&self, topic: &str) -> bool {
        is_internal_topic(topic, self.internal_separator())
    }

    fn heartbeats_topic(&self) -> String {
        HEARTBEATS_TOPIC.to_owned()
    }

    fn offset_syncs_topic(&self, cluster_alias: &str) -> String {
        offset_syncs_topic(cluster_alias, self.internal_separator())
    }

    fn checkpoints_topic(&self, cluster_alias: &str) -> String {
        checkpoints_topic(cluster_alias, self.internal_separator())
    }
}

/// MirrorMaker 2's `IdentityReplicationPolicy`: remote topics keep their names, except
/// heartbeats, which follow [`DefaultReplicationPolicy`].
///
/// A topic whose name ends with the heartbeats topic's name is heartbeat-like. For any other
/// topic, `topic_source` and `upstream_topic` are `None`: refract has no `source.cluster.alias`
/// setting, and without it MirrorMaker 2 reports no source either, so cycle detection comes out
/// the same.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityReplicationPolicy {
    default: DefaultReplicationPolicy,
}

impl IdentityReplicationPolicy {
    /// An identity policy whose heartbeat and internal topic names follow `default`.
    pub fn new(default: DefaultReplicationPolicy) -> Self {
        Self { default }
    }

    /// Reads the keys of [`DefaultReplicationPolicy::from_table`] from `table`.
    pub fn from_table(table: &mut ConfigTable) -> Result<Self, PluginError> {
        DefaultReplicationPolicy::from_table(table).map(Self::new)
    }

    /// The default policy used for heartbeats and internal topic names.
    pub fn default_policy(&self) -> &DefaultReplicationPolicy {
        &self.default
    }

    /// Whether `topic` ends with the heartbeats topic's name (`looksLikeHeartbeat`).
    pub fn looks_like_heartbeat(&self, topic: &str) -> bool {
        topic.ends_with(HEARTBEATS_TOPIC)
    }
}

impl ReplicationPolicy for IdentityReplicationPolicy {
    const NAME: &'static str = "builtin:identity";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        DefaultReplicationPolicy::from_config(config).map(Self::new)
    }

    fn format_remote_topic(&self, source_cluster: &str, topic: &str) -> String {
        if self.looks_like_heartbeat(topic) {
            self.default.format_remote_topic(source_cluster, topic)
        } else {
            topic.to_owned()
        }
    }

    fn topic_source(&self, topic: &str) -> Option<String> {
        if self.looks_like_heartbeat(topic) {
            self.default.topic_source(topic)
        } else {
            None
        }
    }

    fn upstream_topic(&self, topic: &str) -> Option<String> {
        if self.looks_like_heartbeat(topic) {
            self.default.upstream_topic(topic)
        } else {
            None
        }
    }

    fn is_internal_topic(&self, topic: &str) -> bool {
        self.default.is_internal_topic(topic)
    }

    fn heartbeats_topic(&self) -> String {
        self.default.heartbeats_topic()
    }

    fn offset_syncs_topic(&self, cluster_alias: &str) -> String {
        self.default.offset_syncs_topic(cluster_alias)
    }

    fn checkpoints_topic(&self, cluster_alias: &str) -> String {
        self.default.checkpoints_topic(cluster_alias)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_policy(separator: &str, internal_enabled: bool) -> DefaultReplicationPolicy {
        DefaultReplicationPolicy::new(separator, internal_enabled).unwrap()
    }

    /// MirrorMaker 2's `MirrorSourceConnector.isCycle`, for checking cycle-related answers.
    fn is_cycle(policy: &impl ReplicationPolicy, target: &str, topic: &str) -> bool {
        match policy.topic_source(topic) {
            None => false,
            Some(source) if source == target => true,
            Some(_) => match policy.upstream_topic(topic) {
                None => false,
                Some(upstream) if upstream == topic => false,
                Some(upstream) => is_cycle(policy, target, &upstream),
            },
        }
    }

    #[test]
    fn topic_source_and_upstream_follow_java_split() {
        let cases: &[(&str, &str, Option<&str>, Option<&str>)] = &[
            (".", "topic1", None, None),
            (".", "", None, None),
            (".", ".", None, None),
            (".", "..", None, None),
            (".", "a.", None, None),
            (".", "a..", None, None),
            (".", ".b", Some(""), Some("b")),
            (".", "..b", Some(""), Some(".b")),
            (".", "a.b", Some("a"), Some("b")),
            (".", "a.b.c", Some("a"), Some("b.c")),
            (".", "a..b", Some("a"), Some(".b")),
            (".", "a.b.", Some("a"), Some("b.")),
            (".", "source1.topic4", Some("source1"), Some("topic4")),
            (
                ".",
                "source1.source2.topic5",
                Some("source1"),
                Some("source2.topic5"),
            ),
            (
                ".",
                "target.source.topic1",
                Some("target"),
                Some("source.topic1"),
            ),
            (
                ".",
                "source.target.topic1",
                Some("source"),
                Some("target.topic1"),
            ),
            (
                ".",
                "us-west.heartbeats",
                Some("us-west"),
                Some("heartbeats"),
            ),
            ("__", "source1__topic4", Some("source1"), Some("topic4")),
            (
                "__",
                "source1__source2__topic5",
                Some("source1"),
                Some("source2__topic5"),
            ),
            ("__", "source1_topic4", None, None),
            ("__", "a___b", Some("a"), Some("_b")),
            ("__", "a____b", Some("a"), Some("__b")),
            ("__", "a__", None, None),
            ("__", "a____", None, None),
            ("__", "__b", Some(""), Some("b")),
            ("-", "us-west.topic1", Some("us"), Some("west.topic1")),
            ("::", "a::b", Some("a"), Some("b")),
            ("é", "aébéc", Some("a"), Some("béc")),
        ];
        for &(separator, topic, source, upstream) in cases {
            let policy = default_policy(separator, true);
            assert_eq!(
                policy.topic_source(topic).as_deref(),
                source,
                "topic_source({topic:?}) with separator {separator:?}"
            );
            assert_eq!(
                policy.upstream_topic(topic).as_deref(),
                upstream,
                "upstream_topic({topic:?}) with separator {separator:?}"
            );
        }
    }

    #[test]
    fn format_remote_topic_prepends_source_and_separator() {
        let cases = [
            (".", "us-west", "topic1", "us-west.topic1"),
            (".", "primary", "heartbeats", "primary.heartbeats"),
            (".", "b", "a.topic1", "b.a.topic1"),
            ("__", "source1", "topic4", "source1__topic4"),
            ("-", "A", "", "A-"),
        ];
        for (separator, source, topic, remote) in cases {
            let policy = default_policy(separator, true);
            assert_eq!(policy.format_remote_topic(source, topic), remote);
            if !topic.is_empty() {
                assert_eq!(policy.topic_source(remote).as_deref(), Some(source));
                assert_eq!(policy.upstream_topic(remote).as_deref(), Some(topic));
            }
        }
    }

    #[test]
    fn internal_topic_names() {
        let cases = [
            (
                "__",
                true,
                "mm2-offset-syncs__CLUSTER__internal",
                "CLUSTER__checkpoints__internal",
            ),
            (
                "__",
                false,
                "mm2-offset-syncs.CLUSTER.internal",
                "CLUSTER.checkpoints.internal",
            ),
            (
                ".",
                true,
                "mm2-offset-syncs.CLUSTER.internal",
                "CLUSTER.checkpoints.internal",
            ),
            (
                ".",
                false,
                "mm2-offset-syncs.CLUSTER.internal",
                "CLUSTER.checkpoints.internal",
            ),
            (
                "_",
                true,
                "mm2-offset-syncs_CLUSTER_internal",
                "CLUSTER_checkpoints_internal",
            ),
        ];
        for (separator, internal_enabled, offset_syncs, checkpoints) in cases {
            let policy = default_policy(separator, internal_enabled);
            assert_eq!(policy.offset_syncs_topic("CLUSTER"), offset_syncs);
            assert_eq!(policy.checkpoints_topic("CLUSTER"), checkpoints);
            assert_eq!(policy.heartbeats_topic(), "heartbeats");
            assert!(policy.is_internal_topic(offset_syncs));
            assert!(policy.is_internal_topic(checkpoints));
            assert!(policy.is_mm2_internal_topic(offset_syncs));
            assert!(policy.is_checkpoints_topic(checkpoints));
            assert!(!policy.is_checkpoints_topic(offset_syncs));
            assert!(!policy.is_internal_topic("heartbeats"));
        }
    }

    #[test]
    fn is_internal_topic_follows_mm2() {
        let cases = [
            ("__", true, "__consumer_offsets", true),
            ("__", true, ".hiddentopic", true),
            ("__", true, "mm2-offsets.CLUSTER.internal", true),
            ("__", true, "mm2-offsets-CLUSTER-internal", true),
            ("__", true, "mm2-offsets_CLUSTER_internal", false),
            ("__", true, "mm2-offsets__CLUSTER__internal", true),
            ("__", false, "mm2-offsets__CLUSTER__internal", false),
            ("_", true, "mm2-offsets_CLUSTER_internal", true),
            ("_", false, "mm2-offsets_CLUSTER_internal", false),
            (".", true, "mm2-offsets_CLUSTER_internal", false),
            (".", true, "connect-configs", false),
            (".", true, "internal", false),
            (".", true, "topic1", false),
            (".", true, "_single_underscore", false),
            (".", true, "source.topic1", false),
            (".", true, "source.heartbeats", false),
            (".", true, "x.internal", true),
        ];
        for (separator, internal_enabled, topic, internal) in cases {
            let policy = default_policy(separator, internal_enabled);
            assert_eq!(
                policy.is_internal_topic(topic),
                internal,
                "is_internal_topic({topic:?}) with separator {separator:?}, internal separator {internal_enabled}"
            );
        }
    }

    #[test]
    fn trait_defaults_match_the_dotted_default_policy() {
        struct Bare;
        impl ReplicationPolicy for Bare {
            const NAME: &'static str = "bare";
            const VERSION: &'static str = "0";
            fn from_config(_: &str) -> Result<Self, PluginError> {
                Ok(Self)
            }
            fn format_remote_topic(&self, _: &str, topic: &str) -> String {
                topic.to_owned()
            }
            fn topic_source(&self, _: &str) -> Option<String> {
                None
            }
            fn upstream_topic(&self, _: &str) -> Option<String> {
                None
            }
        }
        let dotted = DefaultReplicationPolicy::default();
        for topic in [
            "__consumer_offsets",
            ".hidden",
            "a-internal",
            "a.internal",
            "a_internal",
            "topic1",
        ] {
            assert_eq!(
                Bare.is_internal_topic(topic),
                dotted.is_internal_topic(topic)
            );
        }
        assert_eq!(Bare.heartbeats_topic(), dotted.heartbeats_topic());
        assert_eq!(Bare.offset_syncs_topic("A"), dotted.offset_syncs_topic("A"));
        assert_eq!(Bare.checkpoints_topic("A"), dotted.checkpoints_topic("A"));
    }

    #[test]
    fn default_policy_detects_cycles_like_mm2() {
        let policy = DefaultReplicationPolicy::default();
        let cases = [
            ("target.topic1", true),
            ("target.source.topic1", true),
            ("source.target.topic1", true),
            ("source.target.source.topic1", true),
            ("topic1", false),
            ("source.topic1", false),
            ("other.source.topic1", false),
            ("target.", false),
        ];
        for (topic, cycle) in cases {
            assert_eq!(is_cycle(&policy, "target", topic), cycle, "{topic}");
        }
    }

    #[test]
    fn identity_policy_follows_mm2() {
        let policy = IdentityReplicationPolicy::default();
        assert_eq!(policy.format_remote_topic("primary", "topic1"), "topic1");
        assert_eq!(policy.format_remote_topic("primary", "a.b"), "a.b");
        assert_eq!(policy.topic_source("topic1"), None);
        assert_eq!(policy.topic_source("primary.topic1"), None);
        assert_eq!(policy.upstream_topic("primary.topic1"), None);
        assert_eq!(
            policy.format_remote_topic("backup", "heartbeats"),
            "backup.heartbeats"
        );
        assert_eq!(
            policy.format_remote_topic("backup", "primary.heartbeats"),
            "backup.primary.heartbeats"
        );
        assert_eq!(
            policy.format_remote_topic("backup", "myheartbeats"),
            "backup.myheartbeats"
        );
        assert_eq!(
            policy.topic_source("backup.heartbeats").as_deref(),
            Some("backup")
        );
        assert_eq!(
            policy.upstream_topic("backup.heartbeats").as_deref(),
            Some("heartbeats")
        );
        assert_eq!(policy.topic_source("heartbeats"), None);
        assert_eq!(policy.heartbeats_topic(), "heartbeats");
        assert_eq!(
            policy.offset_syncs_topic("A"),
            "mm2-offset-syncs.A.internal"
        );
        assert_eq!(policy.checkpoints_topic("A"), "A.checkpoints.internal");

        let cases = [
            ("target.topic1", false),
            ("target.source.topic1", false),
            ("source.target.topic1", false),
            ("topic1", false),
            ("othersource.topic1", false),
            ("target.heartbeats", true),
            ("target.source.heartbeats", true),
            ("source.target.heartbeats", true),
            ("heartbeats", false),
            ("othersource.heartbeats", false),
        ];
        for (topic, cycle) in cases {
            assert_eq!(is_cycle(&policy, "target", topic), cycle, "{topic}");
        }
    }

    #[test]
    fn identity_policy_uses_the_configured_separator_for_heartbeats() {
        let policy = IdentityReplicationPolicy::from_config(
            "separator = \"__\"\ninternal_topic_separator_enabled = false",
        )
        .unwrap();
        assert_eq!(
            policy.format_remote_topic("A", "heartbeats"),
            "A__heartbeats"
        );
        assert_eq!(policy.format_remote_topic("A", "orders"), "orders");
        assert_eq!(policy.topic_source("A__heartbeats").as_deref(), Some("A"));
        assert_eq!(
            policy.upstream_topic("B__A__heartbeats").as_deref(),
            Some("A__heartbeats")
        );
        assert_eq!(
            policy.offset_syncs_topic("A"),
            "mm2-offset-syncs.A.internal"
        );
    }

    #[test]
    fn config_is_read_and_checked() {
        assert_eq!(
            DefaultReplicationPolicy::from_config(""),
            Ok(DefaultReplicationPolicy::default())
        );
        assert_eq!(
            DefaultReplicationPolicy::from_config("separator = \"__\""),
            Ok(default_policy("__", true))
        );
        assert_eq!(
            DefaultReplicationPolicy::from_config(
                "separator = \"__\"\ninternal_topic_separator_enabled = false"
            ),
            Ok(default_policy("__", false))
        );
        let invalid = |text: &str| Err(PluginError::invalid_config(text));
        assert_eq!(
            DefaultReplicationPolicy::from_config("separator = \"\""),
            invalid("separator: must not be empty")
        );
        assert_eq!(
            DefaultReplicationPolicy::from_config("separator = 1"),
            invalid("separator: expected a string, found integer")
        );
        assert_eq!(
            DefaultReplicationPolicy::from_config("internal_topic_separator_enabled = \"false\""),
            invalid("internal_topic_separator_enabled: expected a boolean, found string")
        );
        assert_eq!(
            DefaultReplicationPolicy::from_config("replication.policy.separator = \"_\""),
            invalid(
                "replication: unknown key; expected one of: internal_topic_separator_enabled, separator"
            )
        );
        assert_eq!(
            IdentityReplicationPolicy::from_config("sep = \"_\"").map(|_| ()),
            Err::<(), _>(PluginError::invalid_config(
                "sep: unknown key; expected one of: internal_topic_separator_enabled, separator"
            ))
        );
        assert_eq!(
            DefaultReplicationPolicy::new("", true),
            invalid("separator: must not be empty")
        );
        assert!(matches!(
            DefaultReplicationPolicy::from_config("separator = "),
            Err(PluginError::InvalidConfig(_))
        ));
    }
}
