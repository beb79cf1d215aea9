//! Rules both pipeline formats (TOML and MirrorMaker 2 properties) follow: built-in plugin
//! names, the client keys refract sets itself, what a cluster alias may be.

/// Names of the policies embedded in the binary.
pub const BUILTIN_POLICIES: &[&str] = &["builtin:default", "builtin:identity"];

/// Names of the record processors embedded in the binary.
pub const BUILTIN_PROCESSORS: &[&str] = &[
    "builtin:filter",
    "builtin:headers",
    "builtin:json-mask",
    "builtin:route",
];

/// The values of a flow's `compression` (librdkafka's and Kafka's `compression.type`).
pub const COMPRESSION_TYPES: &[&str] = &["none", "gzip", "snappy", "lz4", "zstd"];

/// Client properties refract sets itself; a pipeline may not override them.
pub(crate) const RESERVED_CLIENT_KEYS: &[&str] = &[
    "bootstrap.servers",
    "enable.idempotence",
    "acks",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "group.id",
];

/// Whether `name` can be a cluster alias: it appears in flow names (`a->b`) and MM2 lists.
pub(crate) fn check_alias(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == ',' || c == '>') {
        Err("a cluster alias must be non-empty without spaces, ',' or '>'")
    } else {
        Ok(())
    }
}
