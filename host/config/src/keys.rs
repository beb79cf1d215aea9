//! Every key of the pipeline file, declared once: its type, its default and what it does.
//!
//! [`KEYS`] is the single declaration the pipeline reference (`docs/src/reference/pipeline.md`,
//! rendered by [`render_reference`]) is generated from; the value lists of keys that name one of
//! a few values ([`DELIVERY`], [`ON_ERROR`], …) are the ones the validation messages list. The
//! tests check that every field of the raw TOML structs has a [`KeyDoc`] and each [`KeyDoc`]
//! names a real field, and that writing a documented default explicitly gives the same
//! pipeline as leaving the key out.

use std::time::Duration;

use crate::flow::defaults;
use crate::rules::COMPRESSION_TYPES;
use crate::topics::{
    DEFAULT_CONFIG_PROPERTIES_EXCLUDE, DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS_EXCLUDE,
};

/// `delivery`'s values.
pub const DELIVERY: &[&str] = &["at-least-once", "exactly-once"];
/// `on_lost_records`' values.
pub const ON_LOST_RECORDS: &[&str] = &["continue", "halt"];
/// `on_recreated_topic`'s values.
pub const ON_RECREATED_TOPIC: &[&str] = &["stop", "rewind"];
/// `offset_syncs_location`'s values.
pub const OFFSET_SYNCS_LOCATION: &[&str] = &["source", "target"];
/// `offset_translation`'s values.
pub const OFFSET_TRANSLATION: &[&str] = &["exact", "mm2"];
/// `use_defaults_from`'s values.
pub const USE_DEFAULTS_FROM: &[&str] = &["target", "source"];
/// `schemas`' values.
pub const SCHEMAS: &[&str] = &["off", "translate"];
/// `schema_subjects`' values.
pub const SCHEMA_SUBJECTS: &[&str] = &["topic", "all"];
/// A processor's `on_error` values.
pub const ON_ERROR: &[&str] = &["dead-letter", "skip", "stop"];

/// A key's default, as the reference shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDefault {
    /// The key must be set.
    Required,
    /// No value is assumed; the text says what happens when the key is left out.
    Unset(&'static str),
    /// A TOML value, as it would be written in the file.
    Toml(&'static str),
    /// A boolean.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A duration, written as `"<n>s"` (or `"<n>ms"`).
    Duration(Duration),
    /// An array of strings.
    List(&'static [&'static str]),
    /// A string naming the flow's source cluster as `<source>`.
    PerSource(&'static str),
    /// A plugin sandbox limit the pipeline leaves to the plugin runtime: the runtime's default
    /// as TOML value text (checked against refract-plugin's `PluginLimits` by the refract
    /// binary's tests, which see both crates).
    Runtime(&'static str),
}

impl KeyDefault {
    /// The default as TOML value text, `<source>` replaced by `source`; `None` when there is
    /// no default value.
    pub fn toml(&self, source: &str) -> Option<String> {
        let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
        Some(match self {
            KeyDefault::Required | KeyDefault::Unset(_) | KeyDefault::Runtime(_) => return None,
            KeyDefault::Toml(text) => text.to_string(),
            KeyDefault::Bool(b) => b.to_string(),
            KeyDefault::Int(n) => n.to_string(),
            KeyDefault::Duration(d) if d.subsec_nanos() == 0 => quote(&format!("{}s", d.as_secs())),
            KeyDefault::Duration(d) => quote(&format!("{}ms", d.as_millis())),
            KeyDefault::List(items) => {
                let items: Vec<String> = items.iter().map(|s| quote(s)).collect();
                format!("[{}]", items.join(", "))
            }
            KeyDefault::PerSource(text) => quote(&text.replace("<source>", source)),
        })
    }
}

/// One key of the pipeline file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyDoc {
    /// Where it is written: the section's prefix (see [`SECTIONS`]) and the key, e.g.
    /// `flow.topics` or `clusters.<alias>.bootstrap`.
    pub path: &'static str,
    /// The TOML type and what the text means (`duration`, `size`, `array of regexes`…).
    pub ty: &'static str,
    /// What an omitted key means.
    pub default: KeyDefault,
    /// For a key naming one of a few values: the values.
    pub choices: &'static [&'static str],
    /// What it does.
    pub description: &'static str,
}

/// One table of the pipeline file and the raw struct it is read into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// The prefix of its keys' paths (empty for the top level).
    pub prefix: &'static str,
    /// How it is written in the file.
    pub written: &'static str,
    /// The name of the serde struct that reads it.
    pub raw: &'static str,
    /// What it is.
    pub about: &'static str,
}

/// The pipeline file's tables, in the order the reference shows them.
pub const SECTIONS: &[Section] = &[
    Section {
        prefix: "",
        written: "top level",
        raw: "RawPipeline",
        about: "The tables a pipeline file holds. At least one cluster and one flow are required.",
    },
    Section {
        prefix: "clusters.<alias>",
        written: "[clusters.<alias>]",
        raw: "RawCluster",
        about: "One Kafka cluster. The alias names it in flows, remote topic names (`<alias>.orders`) and metrics; it may not contain spaces, `,` or `>`. Client settings are librdkafka properties; values may hold `${env:NAME}`, `${file:/path}` and `${file:/path:key}` references, resolved when the pipeline is loaded. refract sets `bootstrap.servers`, `enable.idempotence`, `acks`, `enable.auto.commit`, `enable.auto.offset.store` and `group.id` itself.",
    },
    Section {
        prefix: "clusters.<alias>.oauthbearer",
        written: "[clusters.<alias>.oauthbearer]",
        raw: "RawOAuthBearer",
        about: "A static OAUTHBEARER token for every client of the cluster (for OIDC, set librdkafka's `sasl.oauthbearer.*` client settings instead).",
    },
    Section {
        prefix: "clusters.<alias>.schema_registry",
        written: "[clusters.<alias>.schema_registry]",
        raw: "RawSchemaRegistry",
        about: "The cluster's Confluent-compatible schema registry (Confluent Schema Registry, Apicurio Registry's `/apis/ccompat/v7`, Karapace, Redpanda), for flows that translate schema ids (`schemas = \"translate\"`). Values may hold references.",
    },
    Section {
        prefix: "flow",
        written: "[[flow]]",
        raw: "RawFlow",
        about: "One directed replication flow `source->target`. Its defaults are MirrorMaker 2's, except where a description says otherwise.",
    },
    Section {
        prefix: "flow.policy",
        written: "[[flow]] policy = { … }",
        raw: "RawPlugin",
        about: "The replication policy: the plugin that names remote topics.",
    },
    Section {
        prefix: "flow.processors",
        written: "[[flow]] processors = [{ … }, …]",
        raw: "RawProcessor",
        about: "A filter or transform; a flow runs its processors in order after the policy named the target topic.",
    },
    Section {
        prefix: "metrics",
        written: "[metrics]",
        raw: "RawMetrics",
        about: "The HTTP endpoint: `/metrics` (Prometheus), `/health`, `/status` and `POST /reload`.",
    },
    Section {
        prefix: "cluster",
        written: "[cluster]",
        raw: "RawClusterMode",
        about: "Cluster mode: several processes with this pipeline share each flow's tasks through a consumer group on the flow's source cluster.",
    },
];

const fn key(
    path: &'static str,
    ty: &'static str,
    default: KeyDefault,
    description: &'static str,
) -> KeyDoc {
    KeyDoc {
        path,
        ty,
        default,
        choices: &[],
        description,
    }
}

const fn one_of(
    path: &'static str,
    default: KeyDefault,
    choices: &'static [&'static str],
    description: &'static str,
) -> KeyDoc {
    KeyDoc {
        path,
        ty: "string",
        default,
        choices,
        description,
    }
}

use KeyDefault::{Bool, Int, List, PerSource, Required, Runtime, Toml, Unset};

/// Every key of the pipeline file, by section in [`SECTIONS`] order.
#[rustfmt::skip]
pub const KEYS: &[KeyDoc] = &[
    // Top level.
    key("clusters", "table of tables", Required, "The Kafka clusters, by alias: `[clusters.<alias>]`."),
    key("flow", "array of tables", Required, "The flows: one `[[flow]]` each. Two flows with the same source and target are an error."),
    key("metrics", "table", Unset("no HTTP endpoint"), "The HTTP endpoint: `[metrics]`."),
    key("cluster", "table", Unset("every task of every flow runs in this process"), "Cluster mode: `[cluster]`."),
    // [clusters.<alias>]
    key("clusters.<alias>.bootstrap", "string", Required, "The brokers, `host:port[,host:port]` (librdkafka's `bootstrap.servers`). May hold references."),
    key("clusters.<alias>.client", "table", Toml("{}"), "librdkafka properties for every client of the cluster (`\"security.protocol\" = \"SASL_SSL\"`, …)."),
    key("clusters.<alias>.consumer", "table", Toml("{}"), "librdkafka properties for its consumers only; they win over `client`."),
    key("clusters.<alias>.producer", "table", Toml("{}"), "librdkafka properties for its producers only; they win over `client`."),
    key("clusters.<alias>.admin", "table", Toml("{}"), "librdkafka properties for its admin clients only; they win over `client`."),
    key("clusters.<alias>.oauthbearer", "table", Unset("no static token"), "A static OAUTHBEARER token: `[clusters.<alias>.oauthbearer]`."),
    // [clusters.<alias>.oauthbearer]
    key("clusters.<alias>.oauthbearer.token", "string", Required, "The token every client of the cluster presents, usually `${file:/path/to/token}`: the file is read again at each token refresh, so an agent may rotate it."),
    key("clusters.<alias>.schema_registry", "table", Unset("no registry"), "The cluster's Confluent-compatible schema registry: `[clusters.<alias>.schema_registry]`, needed on both clusters of a flow with `schemas = \"translate\"`."),
    // [clusters.<alias>.schema_registry]
    key("clusters.<alias>.schema_registry.url", "string", Required, "The registry's base URL, `http://` or `https://` (Apicurio: `…/apis/ccompat/v7`); no credentials in it. May hold references."),
    key("clusters.<alias>.schema_registry.user", "string", Unset("no basic authentication"), "User for HTTP basic authentication, with `password`."),
    key("clusters.<alias>.schema_registry.password", "string", Unset("no basic authentication"), "Password for HTTP basic authentication, usually `${env:…}` or `${file:…}`; never shown."),
    key("clusters.<alias>.schema_registry.token", "string", Unset("no bearer token"), "A token sent as `Authorization: Bearer`, instead of `user` and `password`; never shown."),
    key("clusters.<alias>.schema_registry.ca", "string", Unset("the system's CAs"), "PEM file of CAs the registry's certificate is checked against, besides the system's; relative to the pipeline file's folder."),
    key("clusters.<alias>.schema_registry.cert", "string", Unset("no client certificate"), "PEM client certificate for mutual TLS; needs `key`."),
    key("clusters.<alias>.schema_registry.key", "string", Unset("no client certificate"), "PEM (PKCS#8) private key of `cert`."),
    key("clusters.<alias>.schema_registry.timeout", "duration", KeyDefault::Duration(crate::schema_defaults::TIMEOUT), "The longest one request to the registry may take."),
    // [[flow]]
    key("flow.source", "string", Required, "The alias of the cluster records are read from."),
    key("flow.target", "string", Required, "The alias of the cluster records are written to; not the source."),
    key("flow.enabled", "boolean", Bool(true), "`false` keeps the flow in the file without running it."),
    key("flow.topics", "array of regexes", Toml("[\".*\"]"), "Source topics to mirror; each regex matches whole topic names."),
    key("flow.topics_exclude", "array of regexes", List(DEFAULT_TOPICS_EXCLUDE), "Source topics never mirrored, even when `topics` matches them."),
    key("flow.policy", "inline table", Toml("{ plugin = \"builtin:default\" }"), "The replication policy that names remote topics (`builtin:default`: `<source>.<topic>`, `builtin:identity`: the same name, or a `.wasm` component)."),
    key("flow.refresh_topics_interval", "duration", KeyDefault::Duration(defaults::REFRESH_TOPICS_INTERVAL), "How often source topics and partitions are discovered again."),
    key("flow.commit_interval", "duration", KeyDefault::Duration(defaults::COMMIT_INTERVAL), "How often the acknowledged source position is committed (MM2's `offset.flush.interval.ms`)."),
    key("flow.max_bytes_per_second", "integer or size", Unset("unlimited"), "Key and value bytes the flow reads from its source per second, across its tasks (`2000000` or `\"2MiB\"`); a reload changes it without a restart."),
    key("flow.max_records_per_second", "integer", Unset("unlimited"), "Records the flow reads from its source per second, across its tasks; a reload changes it without a restart."),
    key("flow.replication_factor", "integer", Int(defaults::REPLICATION_FACTOR as i64), "Replication factor of the remote topics refract creates, and of the dead-letter and routed topics; `-1`: the broker's default."),
    key("flow.heartbeats_replication", "boolean", Bool(defaults::HEARTBEATS_REPLICATION), "Mirror `heartbeats` topics even when `topics` does not include them (MM2's default)."),
    key("flow.processors", "array of inline tables", Toml("[]"), "Filters and transforms, run in order on each record after the policy named its target topic."),
    key("flow.dead_letter_topic", "string", PerSource("refract.dlq.<source>.internal"), "Topic on the target that receives the records a processor with `on_error = \"dead-letter\"` failed on."),
    key("flow.groups", "array of regexes", List(defaults::GROUPS), "Source consumer groups whose offsets are checkpointed."),
    key("flow.groups_exclude", "array of regexes", List(DEFAULT_GROUPS_EXCLUDE), "Source consumer groups never checkpointed."),
    key("flow.emit_checkpoints", "boolean", Bool(defaults::EMIT_OFFSET_SYNCS), "Write MM2 checkpoints to `<source>.checkpoints.internal` on the target. Unless set, it follows `emit_offset_syncs`, which checkpoints need."),
    key("flow.checkpoint_interval", "duration", KeyDefault::Duration(defaults::CHECKPOINT_INTERVAL), "How often group offsets are translated and checkpointed (MM2's `emit.checkpoints.interval.seconds`)."),
    key("flow.refresh_groups_interval", "duration", KeyDefault::Duration(defaults::REFRESH_GROUPS_INTERVAL), "How often the source's consumer groups are listed again (MM2: 10 minutes)."),
    key("flow.sync_group_offsets", "boolean", Bool(defaults::SYNC_GROUP_OFFSETS), "Commit translated offsets to target groups that have no active members (MM2's `sync.group.offsets.enabled`); needs checkpoints."),
    key("flow.sync_group_offsets_interval", "duration", KeyDefault::Duration(defaults::SYNC_GROUP_OFFSETS_INTERVAL), "How often translated offsets are committed to target groups."),
    key("flow.emit_offset_syncs", "boolean", Bool(defaults::EMIT_OFFSET_SYNCS), "Write MM2 offset syncs, which checkpoints translate with."),
    one_of("flow.offset_syncs_location", Toml("\"source\""), OFFSET_SYNCS_LOCATION, "The cluster holding the offset-syncs topic: `mm2-offset-syncs.<target>.internal` on the source, or `mm2-offset-syncs.<source>.internal` on the target (MM2's `offset-syncs.topic.location`)."),
    key("flow.offset_lag_max", "integer", Int(defaults::OFFSET_LAG_MAX), "A new offset sync is written once the target offset is this far past the last one; `0` or more."),
    one_of("flow.offset_translation", Toml("\"exact\""), OFFSET_TRANSLATION, "How checkpoints translate group offsets: `exact` syncs at every discontinuity and translates inside a proven run to the exact offset (MM2's rule elsewhere, and for syncs MirrorMaker 2 wrote); `mm2` uses MirrorMaker 2's rule, the last sync at or before the offset plus one."),
    key("flow.emit_heartbeats", "boolean", Bool(defaults::EMIT_HEARTBEATS), "Write MM2 heartbeats to `heartbeats` on the target."),
    key("flow.heartbeat_interval", "duration", KeyDefault::Duration(defaults::HEARTBEAT_INTERVAL), "How often a heartbeat is written (MM2's `emit.heartbeats.interval.seconds`)."),
    key("flow.sync_topic_configs", "boolean", Bool(defaults::SYNC_TOPIC_CONFIGS), "Create remote topics with the source topic's configs and keep them in sync."),
    key("flow.sync_topic_configs_interval", "duration", KeyDefault::Duration(defaults::SYNC_TOPIC_CONFIGS_INTERVAL), "How often topic configs are synced again (MM2: 10 minutes)."),
    key("flow.config_properties_exclude", "array of regexes", List(DEFAULT_CONFIG_PROPERTIES_EXCLUDE), "Topic configs never copied. Setting the key replaces the whole list."),
    one_of("flow.use_defaults_from", Toml("\"target\""), USE_DEFAULTS_FROM, "Where a topic config the source leaves at its default takes its value from: `target` removes any override on the target, `source` sets the source broker's default (MM2's `use.defaults.from`)."),
    key("flow.sync_topic_acls", "boolean", Bool(defaults::SYNC_TOPIC_ACLS), "Copy literal topic ACLs to the target (MM2's rules: additive only, `ALL` becomes `READ`)."),
    key("flow.sync_topic_acls_interval", "duration", KeyDefault::Duration(defaults::SYNC_TOPIC_ACLS_INTERVAL), "How often ACLs are synced again (MM2: 10 minutes)."),
    key("flow.internal_replication_factor", "integer", Int(defaults::REPLICATION_FACTOR as i64), "Replication factor of the MM2 internal topics (offset syncs, checkpoints, heartbeats) and of the Connect offsets topic of exactly-once flows; `-1`: the broker's default."),
    key("flow.provenance_header", "boolean", Bool(defaults::PROVENANCE_HEADER), "Stamp every mirrored record with the `refract.provenance` header (the clusters it passed through) and never send a record back to a cluster it came from."),
    key("flow.mm2_offsets_topic", "string", PerSource("mm2-offsets.<source>.internal"), "Kafka Connect offsets topic on the target where a MirrorMaker 2 that ran this flow kept its positions (MM2's `offset.storage.topic`): a partition refract has no position for yet resumes where MM2 stopped. Exactly-once flows keep their positions there."),
    one_of("flow.compression", Unset("the target cluster's producer settings, else librdkafka's `none`"), COMPRESSION_TYPES, "The `compression.type` of the flow's target producer."),
    one_of("flow.delivery", Toml("\"at-least-once\""), DELIVERY, "`at-least-once`: records acknowledged but not yet committed when refract stops uncleanly are mirrored again. `exactly-once`: the target producer is transactional, so a `read_committed` consumer of the target sees every record once."),
    key("flow.transaction_interval", "duration", Unset("the flow's `commit_interval`"), "Exactly-once only: how long one transaction collects records before it commits; a `read_committed` reader sees records up to this much later."),
    one_of("flow.on_lost_records", Toml("\"continue\""), ON_LOST_RECORDS, "When the source deleted records the flow had not mirrored yet (retention, DeleteRecords): `continue` reports the gap and goes on from the log start; `halt` reports it and halts the flow without committing past it."),
    one_of("flow.on_recreated_topic", Toml("\"stop\""), ON_RECREATED_TOPIC, "When a source topic, or the remote topic it mirrors into, was deleted and created again: `stop` stops mirroring that topic and reports it; `rewind` mirrors it again from its beginning into the same remote topic."),
    one_of("flow.schemas", Toml("\"off\""), SCHEMAS, "`translate`: keys and values framed for a schema registry (byte 0, a 4-byte schema id, …) get the target registry's id for their schema, which refract registers there under the subject the policy names (`<remote topic>-value`); `off`: they are copied as bytes. Needs `schema_registry` on both clusters."),
    key("flow.schema_fields", "array of strings", List(&["key", "value"]), "Which parts of a record `translate` reads as framed: `\"key\"`, `\"value\"` (leave out `key` when keys are plain bytes that may start with byte 0, e.g. big-endian integers)."),
    one_of("flow.schema_on_error", Toml("\"stop\""), ON_ERROR, "What happens to a record that can never be translated (an id the source registry does not know, a schema the target registry refuses): `dead-letter`, `skip` or `stop`, as a processor's `on_error`. A registry that does not answer holds the partition and retries; it never lets a record through untranslated."),
    one_of("flow.schema_subjects", Toml("\"topic\""), SCHEMA_SUBJECTS, "`topic`: subjects named after the topic (`<topic>-key`, `<topic>-value`, `<topic>-<record>`) follow the topic's remote name, other subjects keep theirs; `all`: other subjects are renamed by the replication policy too."),
    key("flow.schema_sync_interval", "duration", KeyDefault::Duration(crate::schema_defaults::SYNC_INTERVAL), "How often the subjects of the flow's topics (every version, and the subject's compatibility level) are copied to the target registry, also at start, so consumers can read after a failover before any record arrives; each round first checks the cached ids on both registries and forgets those that no longer name the same schema."),
    key("flow.tasks", "integer", Int(defaults::TASKS as i64), "Units of work the flow's partitions are divided into (MM2's `tasks.max`), from 1 to 1024: each task owns a stable subset of partitions (and with exactly-once its own `transactional.id`); in cluster mode the processes divide them."),
    // policy = { … }
    key("flow.policy.plugin", "string", Required, "`builtin:default`, `builtin:identity`, or a `.wasm` component file, relative to the pipeline file's folder."),
    key("flow.policy.config", "table", Unset("`init` receives an empty config"), "The plugin's config, handed to its `init` as TOML text."),
    key("flow.policy.memory_limit", "size", Runtime("\"64MiB\""), "One budget for every linear memory and table of the plugin's instance (`\"128MiB\"`)."),
    key("flow.policy.call_timeout", "duration", Runtime("\"1s\""), "The longest one call into the plugin may run."),
    key("flow.policy.max_outputs_per_record", "integer", Runtime("1000"), "Records a transform may return for one input record."),
    key("flow.policy.max_outputs_per_call", "integer", Runtime("100000"), "Records a transform may return in one call."),
    key("flow.policy.max_output_bytes", "size", Runtime("\"64MiB\""), "Bytes a call may pass to the host beyond the size of its input."),
    key("flow.policy.max_wasm_bytes", "size", Runtime("\"64MiB\""), "The largest `.wasm` file refract reads and compiles; a larger one is refused before it is read."),
    key("flow.policy.compile_timeout", "duration", Runtime("\"600s\""), "The longest compiling the plugin may take (the compiled plugin is cached, so this is paid once per plugin version); past it the compiler process is killed and the plugin refused."),
    key("flow.policy.compile_memory_limit", "size", Runtime("\"2GiB\""), "The most memory (address space) the process compiling the plugin may use; past it the compilation is stopped and the plugin refused."),
    // processors = [{ … }]
    key("flow.processors.plugin", "string", Required, "`builtin:filter`, `builtin:headers`, `builtin:json-mask`, `builtin:route`, or a `.wasm` component file, relative to the pipeline file's folder."),
    key("flow.processors.config", "table", Unset("`init` receives an empty config"), "The plugin's config, handed to its `init` as TOML text."),
    one_of("flow.processors.on_error", Toml("\"stop\""), ON_ERROR, "What happens to the records of a batch the processor traps, times out or fails on, and to a record it rejects: `dead-letter` sends them to `dead_letter_topic` with headers naming the plugin and the error, `skip` drops and counts them, `stop` halts the flow without committing past them (other flows keep running)."),
    key("flow.processors.output_topics", "array of regexes", Unset("the flow's own remote topics"), "Topics a transform may send records to (`output-record.topic`); each regex matches whole topic names. A record sent elsewhere, or to a topic that belongs to Kafka, Schema Registry, Confluent, Kafka Connect, MirrorMaker 2 or refract (whatever this list says), is refused and follows `on_error`."),
    key("flow.processors.max_new_output_topics", "integer", Int(defaults::MAX_NEW_OUTPUT_TOPICS as i64), "Topics missing on the target that the transform's outputs may have refract create (each with the source topic's partition count), per process; a record for one more follows `on_error`. `0`: only existing topics."),
    key("flow.processors.memory_limit", "size", Runtime("\"64MiB\""), "One budget for every linear memory and table of the plugin's instance (`\"128MiB\"`)."),
    key("flow.processors.call_timeout", "duration", Runtime("\"1s\""), "The longest one call into the plugin may run."),
    key("flow.processors.max_outputs_per_record", "integer", Runtime("1000"), "Records a transform may return for one input record."),
    key("flow.processors.max_outputs_per_call", "integer", Runtime("100000"), "Records a transform may return in one call."),
    key("flow.processors.max_output_bytes", "size", Runtime("\"64MiB\""), "Bytes a call may pass to the host beyond the size of its input."),
    key("flow.processors.max_wasm_bytes", "size", Runtime("\"64MiB\""), "The largest `.wasm` file refract reads and compiles; a larger one is refused before it is read."),
    key("flow.processors.compile_timeout", "duration", Runtime("\"600s\""), "The longest compiling the plugin may take (the compiled plugin is cached, so this is paid once per plugin version); past it the compiler process is killed and the plugin refused."),
    key("flow.processors.compile_memory_limit", "size", Runtime("\"2GiB\""), "The most memory (address space) the process compiling the plugin may use; past it the compilation is stopped and the plugin refused."),
    // [metrics]
    key("metrics.listen", "string", Required, "The address the endpoint listens on, e.g. `\"127.0.0.1:9464\"`."),
    key("metrics.reload", "boolean", Unset("`true` on a loopback `listen`; on any other address (`0.0.0.0` too) `POST /reload` answers 403 unless `reload_token` is set"), "Whether `POST /reload` reloads the pipeline; `false`: it answers 404. `true` lets anyone who reaches the endpoint reload when no `reload_token` is set (refract warns at start on a non-loopback `listen`)."),
    key("metrics.reload_token", "string", Unset("see `reload`"), "Only requests with `Authorization: Bearer <token>` may reload; at least 16 characters, usually `${file:…}`. Over plain HTTP on a non-loopback `listen` refract warns at start that the token crosses the network in clear: set `tls_cert` and `tls_key`."),
    key("metrics.tls_cert", "string", Unset("plain HTTP"), "PEM certificate chain (leaf first) for HTTPS, relative to the pipeline file's folder; needs `tls_key`."),
    key("metrics.tls_key", "string", Unset("plain HTTP"), "PEM private key (unencrypted) for HTTPS; needs `tls_cert`."),
    key("metrics.allowed_hosts", "array of strings", Toml("[]"), "Host names requests may use besides IP addresses and `localhost` (no port)."),
    key("metrics.partition_series", "boolean", Bool(true), "MirrorMaker 2's series per partition (`true`, as MM2 exports them) or per topic with the partitions summed up (`false`), for estates whose per-partition output is too large to scrape."),
    // [cluster]
    key("cluster.enabled", "boolean", Bool(true), "`false` keeps the table in the file and runs every task in this process."),
    key("cluster.instance", "string", Unset("dynamic group membership"), "This process's stable name (static membership, `group.instance.id`): a restart within the session timeout keeps its tasks. ASCII letters, digits, `.`, `_` and `-`; may hold references, e.g. `\"${env:HOSTNAME}\"`."),
    key("cluster.session_timeout", "duration", KeyDefault::Duration(defaults::SESSION_TIMEOUT), "How long a process may stop answering before its tasks move to the others; from 1s to 30m."),
];

impl KeyDoc {
    /// The key as written in its table: the last part of its path.
    pub fn name(&self) -> &'static str {
        self.path.rsplit('.').next().unwrap_or(self.path)
    }
}

/// The documented key whose name is closest to `unknown` (at most two edits away), for the
/// error about a key the pipeline may not hold.
pub(crate) fn closest(unknown: &str) -> Option<&'static KeyDoc> {
    KEYS.iter()
        .map(|k| (edit_distance(unknown, k.name()), k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// `values` as a validation message lists them: `"a", "b" or "c"`.
pub(crate) fn choices_text(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// The section a key path belongs to: the longest prefix in [`SECTIONS`].
pub fn section_of(path: &str) -> Option<&'static Section> {
    SECTIONS
        .iter()
        .filter(|s| {
            if s.prefix.is_empty() {
                !path.contains('.')
            } else {
                path.strip_prefix(s.prefix)
                    .and_then(|rest| rest.strip_prefix('.'))
                    .is_some_and(|rest| !rest.contains('.'))
            }
        })
        .max_by_key(|s| s.prefix.len())
}

/// The pipeline reference in Markdown: one table per section, every key of [`KEYS`].
pub fn render_reference(header: &str) -> String {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut out = String::new();
    out.push_str(header);
    out.push_str("# Pipeline keys\n\n");
    out.push_str(
        "Every key a pipeline file may hold, with its type, its default and what it does. A key \
         not listed here is an error. Durations are written like `\"500ms\"`, `\"30s\"`, `\"5m\"` \
         or `\"1h\"`; sizes like `\"64MiB\"`. Regexes match whole names.\n",
    );
    for section in SECTIONS {
        let title = if section.prefix.is_empty() {
            "Top level".to_string()
        } else {
            format!("`{}`", section.written)
        };
        out.push_str(&format!("\n## {title}\n\n{}\n\n", section.about));
        out.push_str("| Key | Type | Default | Description |\n|---|---|---|---|\n");
        for k in KEYS
            .iter()
            .filter(|k| section_of(k.path).is_some_and(|s| s == section))
        {
            let name = if section.prefix.is_empty() {
                k.path
            } else {
                &k.path[section.prefix.len() + 1..]
            };
            let default = match &k.default {
                KeyDefault::Required => "required".to_string(),
                KeyDefault::Unset(what) => format!("unset: {what}"),
                KeyDefault::Runtime(value) => format!("`{value}` (the plugin runtime's)"),
                other => format!("`{}`", other.toml("<source>").unwrap_or_default()),
            };
            let mut description = k.description.to_string();
            if !k.choices.is_empty() {
                let values: Vec<String> = k.choices.iter().map(|c| format!("`\"{c}\"`")).collect();
                description.push_str(&format!(" One of {}.", values.join(", ")));
            }
            out.push_str(&format!(
                "| `{name}` | {} | {} | {} |\n",
                cell(k.ty),
                cell(&default),
                cell(&description)
            ));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use serde::Deserialize;

    use super::*;
    use crate::model::Pipeline;
    use crate::raw::*;

    /// Compares a generated page with the committed `docs/src/reference/<name>`;
    /// `REFRACT_BLESS=1` writes it instead.
    pub(crate) fn assert_page(name: &str, test: &str, text: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/src/reference")
            .join(name);
        refract_testkit::golden::assert_golden(
            &path,
            &format!("docs/src/reference/{name}"),
            text,
            &format!("REFRACT_BLESS=1 cargo test -p refract-config --lib {test}"),
        );
    }

    /// The header of a generated page.
    pub(crate) fn header(test: &str) -> String {
        format!("<!-- generated by refract-config's {test} test; do not edit: REFRACT_BLESS=1 cargo test -p refract-config --lib {test} -->\n\n")
    }

    #[test]
    fn pipeline_reference_is_current() {
        let test = "pipeline_reference_is_current";
        assert_page("pipeline.md", test, &render_reference(&header(test)));
    }

    /// What serde passed to `deserialize_struct`: the struct's name and its fields.
    #[derive(Debug)]
    struct Fields(&'static str, &'static [&'static str]);

    impl std::fmt::Display for Fields {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {:?}", self.0, self.1)
        }
    }

    impl std::error::Error for Fields {}

    impl serde::de::Error for Fields {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Fields("", &[])
        }
    }

    /// A deserializer that only records the fields a derived struct asks for.
    struct Recorder;

    impl<'de> serde::Deserializer<'de> for Recorder {
        type Error = Fields;

        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
            Err(Fields("", &[]))
        }

        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Fields> {
            Err(Fields(name, fields))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    fn fields<'de, T: Deserialize<'de>>() -> Fields {
        match T::deserialize(Recorder) {
            Err(f) => f,
            Ok(_) => unreachable!("the recorder never yields a value"),
        }
    }

    /// Every raw struct's fields, as serde reads them.
    fn raw_structs() -> Vec<Fields> {
        vec![
            fields::<RawPipeline>(),
            fields::<RawCluster>(),
            fields::<RawOAuthBearer>(),
            fields::<RawSchemaRegistry>(),
            fields::<RawFlow>(),
            fields::<RawPlugin>(),
            fields::<RawProcessor>(),
            fields::<RawMetrics>(),
            fields::<RawClusterMode>(),
        ]
    }

    #[test]
    fn every_key_is_documented_and_every_doc_is_a_key() {
        let structs = raw_structs();
        let mut problems = Vec::new();
        for Fields(name, fields) in &structs {
            let Some(section) = SECTIONS.iter().find(|s| s.raw == *name) else {
                problems.push(format!("{name} has no entry in keys::SECTIONS"));
                continue;
            };
            for field in *fields {
                let path = if section.prefix.is_empty() {
                    field.to_string()
                } else {
                    format!("{}.{field}", section.prefix)
                };
                if !KEYS.iter().any(|k| k.path == path) {
                    problems.push(format!(
                        "`{path}` ({name}.{field}) has no KeyDoc in host/config/src/keys.rs"
                    ));
                }
            }
        }
        for section in SECTIONS {
            if !structs.iter().any(|f| f.0 == section.raw) {
                problems.push(format!("section {} names no raw struct", section.raw));
            }
        }
        for k in KEYS {
            let Some(section) = section_of(k.path) else {
                problems.push(format!("KeyDoc `{}` is in no section", k.path));
                continue;
            };
            let field = k.path.rsplit('.').next().unwrap_or_default();
            let real = structs
                .iter()
                .any(|Fields(name, fields)| *name == section.raw && fields.contains(&field));
            if !real {
                problems.push(format!(
                    "KeyDoc `{}` names no field of {}",
                    k.path, section.raw
                ));
            }
            if KEYS.iter().filter(|o| o.path == k.path).count() > 1 {
                problems.push(format!("KeyDoc `{}` is declared twice", k.path));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// A pipeline with every section, the key at `path` set to `value` when given.
    fn pipeline_with(path: &str, value: Option<&str>) -> String {
        let set = |prefix: &str| -> String {
            match (value, path.strip_prefix(prefix)) {
                (Some(v), Some(rest)) if !rest.contains('.') => format!("{rest} = {v}\n"),
                _ => String::new(),
            }
        };
        let inline = |prefix: &str| -> String {
            match (value, path.strip_prefix(prefix)) {
                (Some(v), Some(rest)) if !rest.contains('.') => format!(", {rest} = {v}"),
                _ => String::new(),
            }
        };
        let mut flow = set("flow.");
        if path.starts_with("flow.processors.") {
            flow.push_str(&format!(
                "processors = [{{ plugin = \"builtin:filter\"{} }}]\n",
                inline("flow.processors.")
            ));
        }
        if path.starts_with("flow.policy.") {
            flow.push_str(&format!(
                "policy = {{ plugin = \"builtin:default\"{} }}\n",
                inline("flow.policy.")
            ));
        }
        format!(
            "[metrics]\nlisten = \"127.0.0.1:9464\"\n{}[cluster]\n{}[clusters.a]\nbootstrap = \"h:1\"\n{}[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n{flow}",
            set("metrics."),
            set("cluster."),
            set("clusters.<alias>."),
        )
    }

    /// Writing each documented default explicitly gives the pipeline that leaving the key out
    /// gives: the reference's defaults are the model's.
    #[test]
    fn documented_defaults_are_the_models() {
        let parse = |text: &str| {
            Pipeline::parse(Path::new("p.toml"), text)
                .map(|p| format!("{p:#?}"))
                .unwrap_or_else(|e| panic!("{e}\n{text}"))
        };
        let mut checked = 0;
        let mut problems = Vec::new();
        for k in KEYS {
            let Some(value) = k.default.toml("a") else {
                continue;
            };
            if !k.path.contains('.') {
                // The top-level tables' defaults are checked key by key.
                continue;
            }
            let omitted = parse(&pipeline_with(k.path, None));
            let explicit = parse(&pipeline_with(k.path, Some(&value)));
            if omitted != explicit {
                let diff: Vec<String> = omitted
                    .lines()
                    .zip(explicit.lines())
                    .filter(|(a, b)| a != b)
                    .map(|(a, b)| format!("    omitted: {}\n    {value}: {}", a.trim(), b.trim()))
                    .collect();
                problems.push(format!(
                    "`{}`: the reference says its default is {value}, but setting it gives another pipeline than leaving it out:\n{}",
                    k.path,
                    diff.join("\n")
                ));
            }
            checked += 1;
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert!(checked > 40, "only {checked} defaults checked");
    }

    /// An unknown key is answered with the documented key it most likely meant.
    #[test]
    fn unknown_keys_suggest_the_documented_one() {
        let text = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopicz = [\"x\"]\n";
        let e = Pipeline::parse(Path::new("p.toml"), text).unwrap_err();
        assert_eq!((e.key.as_str(), e.line), ("topicz", Some(8)));
        assert!(
            e.message.starts_with("unknown field `topicz`, expected one of")
                && e.message.ends_with(
                    "; did you mean `topics`? (flow.topics: Source topics to mirror; each regex matches whole topic names.)"
                ),
            "{e}"
        );
        let far = text.replace("topicz", "colour");
        let e = Pipeline::parse(Path::new("p.toml"), &far).unwrap_err();
        assert!(!e.message.contains("did you mean"), "{e}");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(
            closest("heartbeat_intervals").map(|k| k.path),
            Some("flow.heartbeat_interval")
        );
    }

    #[test]
    fn choices_read_as_the_messages_list_them() {
        assert_eq!(choices_text(ON_LOST_RECORDS), "\"continue\" or \"halt\"");
        assert_eq!(
            choices_text(COMPRESSION_TYPES),
            "\"none\", \"gzip\", \"snappy\", \"lz4\" or \"zstd\""
        );
        assert_eq!(choices_text(&["x"]), "\"x\"");
    }
}
