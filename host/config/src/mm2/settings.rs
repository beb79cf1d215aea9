//! MirrorMaker 2's settings: each refract flow setting, the MM2 keys it is read from and how its
//! value is read.

use crate::rules::RESERVED_CLIENT_KEYS;

/// How an MM2 flow setting's value is read and written to TOML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Comma-separated, trimmed, empty entries dropped → array of strings.
    List,
    /// `true`/`false`, any case → boolean.
    Bool,
    /// Whole seconds, more than zero → `"<n>s"`.
    Seconds,
    /// Whole milliseconds, more than zero → `"<n>ms"`.
    Millis,
    /// Whole number → integer.
    Int,
    /// Trimmed text → string.
    Text,
    /// Several MM2 settings for one refract setting: the largest whole number of those set.
    Largest,
}

/// One refract flow setting and the MM2 settings it comes from.
pub(super) struct Setting {
    /// Key in `[[flow]]`.
    pub(super) toml: &'static str,
    /// MM2 names: the name, then its 3.x aliases; for [`Kind::Largest`], all names combined.
    pub(super) mm2: &'static [&'static str],
    pub(super) kind: Kind,
}

/// MM2's replication factors of its internal topics; refract has one for all of them.
pub(super) const INTERNAL_REPLICATION_FACTORS: &[&str] = &[
    "checkpoints.topic.replication.factor",
    "heartbeats.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
];

/// Flow settings with a direct refract equivalent, in the order they are written.
#[rustfmt::skip]
pub(super) const SETTINGS: &[Setting] = &[
    row("topics", &["topics"], Kind::List),
    row("topics_exclude", &["topics.exclude", "topics.blacklist"], Kind::List),
    row("refresh_topics_interval", &["refresh.topics.interval.seconds"], Kind::Seconds),
    row("commit_interval", &["offset.flush.interval.ms"], Kind::Millis),
    row("replication_factor", &["replication.factor"], Kind::Int),
    row("internal_replication_factor", INTERNAL_REPLICATION_FACTORS, Kind::Largest),
    row("heartbeats_replication", &["heartbeats.replication.enabled"], Kind::Bool),
    row("sync_topic_configs", &["sync.topic.configs.enabled"], Kind::Bool),
    row("sync_topic_configs_interval", &["sync.topic.configs.interval.seconds"], Kind::Seconds),
    row("config_properties_exclude", &["config.properties.exclude", "config.properties.blacklist"], Kind::List),
    row("use_defaults_from", &["use.defaults.from"], Kind::Text),
    row("sync_topic_acls", &["sync.topic.acls.enabled"], Kind::Bool),
    row("sync_topic_acls_interval", &["sync.topic.acls.interval.seconds"], Kind::Seconds),
    row("groups", &["groups"], Kind::List),
    row("groups_exclude", &["groups.exclude", "groups.blacklist"], Kind::List),
    row("refresh_groups_interval", &["refresh.groups.interval.seconds"], Kind::Seconds),
    row("emit_checkpoints", &["emit.checkpoints.enabled"], Kind::Bool),
    row("checkpoint_interval", &["emit.checkpoints.interval.seconds"], Kind::Seconds),
    row("sync_group_offsets", &["sync.group.offsets.enabled"], Kind::Bool),
    row("sync_group_offsets_interval", &["sync.group.offsets.interval.seconds"], Kind::Seconds),
    row("emit_offset_syncs", &["emit.offset-syncs.enabled"], Kind::Bool),
    row("offset_syncs_location", &["offset-syncs.topic.location"], Kind::Text),
    row("offset_lag_max", &["offset.lag.max"], Kind::Int),
    row("emit_heartbeats", &["emit.heartbeats.enabled"], Kind::Bool),
    row("heartbeat_interval", &["emit.heartbeats.interval.seconds"], Kind::Seconds),
    row("compression", &["producer.compression.type"], Kind::Text),
    row("tasks", &["tasks.max"], Kind::Int),
];

pub(super) const fn row(toml: &'static str, mm2: &'static [&'static str], kind: Kind) -> Setting {
    Setting { toml, mm2, kind }
}

/// The Kafka Connect worker setting naming the topic where MM2 keeps its replication positions
/// (top level, or `<target alias>.offset.storage.topic`); refract reads it to take over.
pub(super) const OFFSET_STORAGE_TOPIC: &str = "offset.storage.topic";

/// The Kafka Connect worker setting (KIP-618) that turns on exactly-once source delivery
/// (top level, or `<target alias>.exactly.once.source.support`); `enabled` maps to
/// `delivery = "exactly-once"`.
pub(super) const EXACTLY_ONCE_SUPPORT: &str = "exactly.once.source.support";

pub(super) const POLICY_CLASS: &str = "replication.policy.class";
pub(super) const POLICY_SEPARATOR: &str = "replication.policy.separator";
pub(super) const POLICY_INTERNAL_SEPARATOR: &str =
    "replication.policy.internal.topic.separator.enabled";
pub(super) const MM2_PACKAGE: &str = "org.apache.kafka.connect.mirror.";

/// MM2's replication policies and the built-in policies that behave the same.
pub(super) const POLICIES: &[(&str, &str)] = &[
    ("DefaultReplicationPolicy", "builtin:default"),
    ("IdentityReplicationPolicy", "builtin:identity"),
];

/// Switches refract cannot turn off, and what it does instead.
pub(super) const ALWAYS_ON: &[(&str, &str)] = &[
    (
        "refresh.topics.enabled",
        "refract always rediscovers topics; set a long refresh.topics.interval.seconds instead",
    ),
    (
        "refresh.groups.enabled",
        "refract always relists consumer groups; set a long refresh.groups.interval.seconds instead",
    ),
];

/// Pluggable classes whose MM2 default is what refract does: accepted when set to the default.
pub(super) const DEFAULT_CLASSES: &[(&str, &str)] = &[
    (
        "topic.filter.class",
        "org.apache.kafka.connect.mirror.DefaultTopicFilter",
    ),
    (
        "group.filter.class",
        "org.apache.kafka.connect.mirror.DefaultGroupFilter",
    ),
    (
        "config.property.filter.class",
        "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
    ),
    (
        "forwarding.admin.class",
        "org.apache.kafka.clients.admin.ForwardingAdmin",
    ),
];

/// Kafka Connect settings refract has no use for, by prefix, and why they are ignored.
pub(super) const NOT_NEEDED: &[(&[&str], &str)] = &[
    (
        &["key.converter", "value.converter", "header.converter"],
        "refract copies keys, values and headers as bytes, like MM2's ByteArrayConverter",
    ),
    (
        &["offset.storage.", "config.storage.", "status.storage."],
        "refract keeps no Kafka Connect state topics of its own: at-least-once progress is committed to the source group `refract-<source>-<target>`; the offsets topic is read to take over from MM2 and written by exactly-once flows, created when missing with `internal_replication_factor`",
    ),
];

/// Why a Kafka Connect setting refract has no use for is ignored, if `key` is one
/// ([`NOT_NEEDED`]).
pub(super) fn not_needed(key: &str) -> Option<&'static str> {
    NOT_NEEDED
        .iter()
        .find(|(prefixes, _)| prefixes.iter().any(|p| key.starts_with(p)))
        .map(|(_, reason)| *reason)
}

/// Java client settings that librdkafka reads under the same name with the same meaning.
pub(super) const LIBRDKAFKA_SAME: &[&str] = &[
    "allow.auto.create.topics",
    "auto.offset.reset",
    "batch.size",
    "check.crcs",
    "client.id",
    "client.rack",
    "compression.type",
    "connections.max.idle.ms",
    "delivery.timeout.ms",
    "fetch.max.bytes",
    "fetch.min.bytes",
    "heartbeat.interval.ms",
    "isolation.level",
    "linger.ms",
    "max.in.flight.requests.per.connection",
    "max.partition.fetch.bytes",
    "max.poll.interval.ms",
    "metadata.max.age.ms",
    "reconnect.backoff.max.ms",
    "reconnect.backoff.ms",
    "request.timeout.ms",
    "retries",
    "retry.backoff.max.ms",
    "retry.backoff.ms",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.service.name",
    "sasl.mechanism",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.token.endpoint.url",
    "security.protocol",
    "session.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "ssl.endpoint.identification.algorithm",
];

/// Java client settings librdkafka reads under another name: (Java, librdkafka).
pub(super) const LIBRDKAFKA_RENAMED: &[(&str, &str)] =
    &[("fetch.max.wait.ms", "fetch.wait.max.ms")];

/// What becomes of a Java client setting.
pub(super) enum ClientKey {
    /// Passed to librdkafka under this name.
    Pass(&'static str),
    /// refract sets it itself.
    Reserved,
    /// No librdkafka equivalent; what to do instead, when known.
    Unsupported(Option<&'static str>),
}

pub(super) fn client_key(java: &str) -> ClientKey {
    if RESERVED_CLIENT_KEYS.contains(&java) {
        return ClientKey::Reserved;
    }
    if let Some(same) = LIBRDKAFKA_SAME.iter().find(|k| **k == java) {
        return ClientKey::Pass(same);
    }
    if let Some((_, renamed)) = LIBRDKAFKA_RENAMED.iter().find(|(k, _)| *k == java) {
        return ClientKey::Pass(renamed);
    }
    ClientKey::Unsupported(
        JAVA_ONLY
            .iter()
            .find(|(pattern, _)| match pattern.strip_suffix('*') {
                Some(prefix) => java.starts_with(prefix),
                None => java == *pattern,
            })
            .map(|(_, hint)| *hint),
    )
}

/// Java-only client settings (left after the store conversion in `security`) and what to do
/// instead; a name ending in `*` is a prefix.
pub(super) const JAVA_ONLY: &[(&str, &str)] = &[
    ("ssl.truststore.*", "librdkafka reads CA certificates from PEM: set ssl.ca.location in the cluster's client table in the converted pipeline"),
    ("ssl.keystore.*", KEYSTORE_HINT),
    ("ssl.key.password", KEYSTORE_HINT),
];

const KEYSTORE_HINT: &str = "librdkafka reads the client certificate from PEM (ssl.certificate.location, ssl.key.location, ssl.key.password) or PKCS#12 (ssl.keystore.location, ssl.keystore.password); set them in the cluster's client table in the converted pipeline";

/// Whether a per-cluster key is one MM2 gives that cluster's clients (besides bootstrap).
pub(super) fn is_cluster_client_key(key: &str) -> bool {
    is_shared_client_key(key) || key == "client.id"
}

/// Whether a top-level key is one MM2 gives every cluster's clients as a fallback.
pub(super) fn is_shared_client_key(key: &str) -> bool {
    key == "security.protocol" || key.starts_with("ssl.") || key.starts_with("sasl.")
}

/// Whether `key` is read by flows (and so validated there, not reported as unsupported).
pub(super) fn is_flow_setting(key: &str) -> bool {
    key == POLICY_CLASS
        || key == POLICY_SEPARATOR
        || key == POLICY_INTERNAL_SEPARATOR
        || ALWAYS_ON.iter().any(|(k, _)| *k == key)
        || SETTINGS.iter().any(|s| s.mm2.contains(&key))
}

/// Whether `key` names a pluggable class and `value` is its MM2 default (full or short name).
pub(super) fn is_default_class(key: &str, value: &str) -> bool {
    let value = value.trim();
    DEFAULT_CLASSES
        .iter()
        .any(|(k, class)| *k == key && (value == *class || class.rsplit('.').next() == Some(value)))
}
