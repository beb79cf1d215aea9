//! MirrorMaker 2's `mm2.properties` turned into a pipeline, so an MM2 deployment can switch to
//! refract without rewriting its config.
//!
//! The file is read exactly as Java's `Properties.load` reads it: `key = value`, `key: value` or
//! `key value`; `#` and `!` comment lines; a line ending in an odd number of backslashes continues
//! on the next (whose leading blanks are dropped); `\t \n \r \f \uXXXX` escapes; and a backslash
//! before any other character is dropped. So `min\.insync\.replicas` reaches MirrorMaker 2 as
//! `min.insync.replicas`, a regex whose dots match any character, and the conversion keeps that
//! meaning (and notes it); `\\.` is how an MM2 file spells a regex-escaped dot. Two deviations:
//! the text is UTF-8 where Java reads ISO-8859-1, and a leading byte-order mark is skipped.
//!
//! Settings resolve as MirrorMaker 2 resolves them: a flow `A->B` runs when `A->B.enabled = true`,
//! and each of its settings is `A->B.<key>` if set, else the top-level `<key>`; the 3.x names
//! `topics.blacklist`, `groups.blacklist` and `config.properties.blacklist` are read when the new
//! name is set at neither level. Settings the file leaves out take refract's defaults, which differ
//! from MM2's for some intervals and replication factors (see the README).
//!
//! Client settings (`A.security.protocol`, `A.ssl.*`, `A.sasl.*`, `A.client.id`, top-level
//! `security.protocol`/`ssl.*`/`sasl.*` as a fallback for every cluster, and `A.consumer.*`,
//! `A.producer.*`, `A.admin.*`) are passed to librdkafka only when librdkafka has a property of
//! the same meaning (`LIBRDKAFKA_SAME`, `LIBRDKAFKA_RENAMED`). `sasl.jaas.config`, key and trust
//! stores and `config.providers` references are converted by [`security`]; other Java-only
//! settings are reported instead of producing a client that fails to start.

mod security;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::error::ConfigError;
use crate::model::Pipeline;
use crate::properties::{parse_properties, Prop};
use crate::rules::{check_alias, RESERVED_CLIENT_KEYS};
use crate::secrets::{redact_toml, EnvLookup};
use security::Provider;

/// A MirrorMaker 2 properties file converted to pipeline TOML.
///
/// The TOML keeps config provider references as refract references (`${file:…}`, `${env:…}`);
/// a secret the properties file holds in clear is carried over as it is (and noted), but `Debug`
/// shows it as `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Mm2Conversion {
    /// The pipeline, with a header comment naming the file, the unsupported settings and notes.
    pub toml: String,
    /// Settings in the file that refract ignores, as written there; sorted, without duplicates.
    pub unsupported: Vec<String>,
    /// What the conversion assumed, renamed or left out on purpose.
    pub notes: Vec<String>,
}

impl std::fmt::Debug for Mm2Conversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mm2Conversion")
            .field("toml", &redact_toml(&self.toml))
            .field("unsupported", &self.unsupported)
            .field("notes", &self.notes)
            .finish()
    }
}

impl Mm2Conversion {
    /// The lines [`Pipeline::load`] puts into [`Pipeline::warnings`] for a `.properties` file.
    pub fn warnings(&self, path: &Path) -> Vec<String> {
        let file = path.display();
        let mut out = Vec::new();
        if !self.unsupported.is_empty() {
            out.push(format!(
                "{file}: ignored MirrorMaker 2 settings refract does not support: {}",
                self.unsupported.join(", ")
            ));
        }
        out.extend(self.notes.iter().map(|n| format!("{file}: {n}")));
        out
    }
}

/// Converts the text of a MirrorMaker 2 properties file to pipeline TOML; `path` names it in
/// errors and in the TOML's header. Every enabled flow `A->B` becomes a `[[flow]]`.
pub fn convert_mm2_properties(path: &Path, text: &str) -> Result<Mm2Conversion, ConfigError> {
    convert(path, text).map(|(conversion, _)| conversion)
}

/// [`Pipeline::load`] for a `.properties` file: converts it, then validates the TOML; errors of the
/// second step name the property the offending TOML came from.
pub(crate) fn load(path: &Path, text: &str) -> Result<Pipeline, ConfigError> {
    load_with_env(path, text, &|name: &str| std::env::var(name))
}

/// [`load`] with `env` looking up environment variables.
pub(crate) fn load_with_env(
    path: &Path,
    text: &str,
    env: EnvLookup<'_>,
) -> Result<Pipeline, ConfigError> {
    let (conversion, origins) = convert(path, text)?;
    let mut pipeline =
        Pipeline::parse_with_env(path, &conversion.toml, env).map_err(|e| origins.map_error(e))?;
    pipeline.warnings = conversion.warnings(path);
    Ok(pipeline)
}

fn convert(path: &Path, text: &str) -> Result<(Mm2Conversion, Origins), ConfigError> {
    let props = parse_properties(path, text)?;
    let mut converter = Converter::new(path, props);
    converter.providers()?;
    let (clusters, flows) = converter.pipeline()?;
    let unsupported: Vec<String> = converter.unsupported.iter().cloned().collect();
    let notes = converter.sorted_notes();
    let mut out = TomlWriter::default();
    out.header(path, &unsupported, &notes);
    for cluster in &clusters {
        out.cluster(cluster);
    }
    for (i, flow) in flows.iter().enumerate() {
        out.flow(i, flow);
    }
    let conversion = Mm2Conversion {
        toml: out.text,
        unsupported,
        notes,
    };
    Ok((conversion, out.origins))
}

// ---------------------------------------------------------------------------------------------
// MirrorMaker 2 settings

/// How an MM2 flow setting's value is read and written to TOML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
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
struct Setting {
    /// Key in `[[flow]]`.
    toml: &'static str,
    /// MM2 names: the name, then its 3.x aliases; for [`Kind::Largest`], all names combined.
    mm2: &'static [&'static str],
    kind: Kind,
}

/// Flow settings with a direct refract equivalent, in the order they are written.
/// MM2's replication factors of its internal topics; refract has one for all of them.
const INTERNAL_REPLICATION_FACTORS: &[&str] = &[
    "checkpoints.topic.replication.factor",
    "heartbeats.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
];

#[rustfmt::skip]
const SETTINGS: &[Setting] = &[
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
];

const fn row(toml: &'static str, mm2: &'static [&'static str], kind: Kind) -> Setting {
    Setting { toml, mm2, kind }
}

/// The Kafka Connect worker setting naming the topic where MM2 keeps its replication positions
/// (top level, or `<target alias>.offset.storage.topic`); refract reads it to take over.
const OFFSET_STORAGE_TOPIC: &str = "offset.storage.topic";

const POLICY_CLASS: &str = "replication.policy.class";
const POLICY_SEPARATOR: &str = "replication.policy.separator";
const POLICY_INTERNAL_SEPARATOR: &str = "replication.policy.internal.topic.separator.enabled";
const MM2_PACKAGE: &str = "org.apache.kafka.connect.mirror.";

/// MM2's replication policies and the built-in policies that behave the same.
const POLICIES: &[(&str, &str)] = &[
    ("DefaultReplicationPolicy", "builtin:default"),
    ("IdentityReplicationPolicy", "builtin:identity"),
];

/// Switches refract cannot turn off, and what it does instead.
const ALWAYS_ON: &[(&str, &str)] = &[
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
const DEFAULT_CLASSES: &[(&str, &str)] = &[
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

/// Why a Kafka Connect setting refract has no use for is ignored, if `key` is one.
fn not_needed(key: &str) -> Option<&'static str> {
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| key.starts_with(p));
    if key == "tasks.max" {
        Some("refract runs each flow as one task on its own thread")
    } else if starts(&["key.converter", "value.converter", "header.converter"]) {
        Some("refract copies keys, values and headers as bytes, like MM2's ByteArrayConverter")
    } else if starts(&["offset.storage.", "config.storage.", "status.storage."]) {
        Some("refract keeps no Kafka Connect state topics; progress is committed to the source group refract-<source>-<target> (MM2's positions in its offsets topic are only read, to take over from it)")
    } else {
        None
    }
}

/// Java client settings that librdkafka reads under the same name with the same meaning.
const LIBRDKAFKA_SAME: &[&str] = &[
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
const LIBRDKAFKA_RENAMED: &[(&str, &str)] = &[("fetch.max.wait.ms", "fetch.wait.max.ms")];

/// What becomes of a Java client setting.
enum ClientKey {
    /// Passed to librdkafka under this name.
    Pass(&'static str),
    /// refract sets it itself.
    Reserved,
    /// No librdkafka equivalent; what to do instead, when known.
    Unsupported(Option<&'static str>),
}

fn client_key(java: &str) -> ClientKey {
    if RESERVED_CLIENT_KEYS.contains(&java) {
        return ClientKey::Reserved;
    }
    if let Some(same) = LIBRDKAFKA_SAME.iter().find(|k| **k == java) {
        return ClientKey::Pass(same);
    }
    if let Some((_, renamed)) = LIBRDKAFKA_RENAMED.iter().find(|(k, _)| *k == java) {
        return ClientKey::Pass(renamed);
    }
    ClientKey::Unsupported(if java.starts_with("ssl.truststore.") {
        Some("librdkafka reads CA certificates from PEM: set ssl.ca.location in the cluster's client table in the converted pipeline")
    } else if java.starts_with("ssl.keystore.") || java == "ssl.key.password" {
        Some("librdkafka reads the client certificate from PEM (ssl.certificate.location, ssl.key.location, ssl.key.password) or PKCS#12 (ssl.keystore.location, ssl.keystore.password); set them in the cluster's client table in the converted pipeline")
    } else {
        None
    })
}

/// Whether a per-cluster key is one MM2 gives that cluster's clients (besides bootstrap).
fn is_cluster_client_key(key: &str) -> bool {
    is_shared_client_key(key) || key == "client.id"
}

/// Whether a top-level key is one MM2 gives every cluster's clients as a fallback.
fn is_shared_client_key(key: &str) -> bool {
    key == "security.protocol" || key.starts_with("ssl.") || key.starts_with("sasl.")
}

/// Whether `key` is read by flows (and so validated there, not reported as unsupported).
fn is_flow_setting(key: &str) -> bool {
    key == POLICY_CLASS
        || key == POLICY_SEPARATOR
        || key == POLICY_INTERNAL_SEPARATOR
        || ALWAYS_ON.iter().any(|(k, _)| *k == key)
        || SETTINGS.iter().any(|s| s.mm2.contains(&key))
}

/// Whether `key` names a pluggable class and `value` is its MM2 default (full or short name).
fn is_default_class(key: &str, value: &str) -> bool {
    let value = value.trim();
    DEFAULT_CLASSES
        .iter()
        .any(|(k, class)| *k == key && (value == *class || class.rsplit('.').next() == Some(value)))
}

// ---------------------------------------------------------------------------------------------
// Conversion

/// Where a piece of the generated TOML came from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    key: String,
    line: usize,
}

impl From<&Prop> for Origin {
    fn from(p: &Prop) -> Self {
        Self {
            key: p.key.clone(),
            line: p.line,
        }
    }
}

/// librdkafka settings of one client table: name → value and where it came from.
type ClientTable = BTreeMap<String, (String, Origin)>;

/// A `[clusters.<alias>]` to write.
struct ClusterOut {
    alias: String,
    origin: Origin,
    bootstrap: (String, Origin),
    /// `client`, `consumer`, `producer`, `admin`: librdkafka name → value.
    tables: [(&'static str, ClientTable); 4],
}

/// A `[[flow]]` to write.
struct FlowOut {
    source: String,
    target: String,
    /// The `A->B.enabled` that turned it on.
    origin: Origin,
    entries: Vec<(&'static str, String, Origin)>,
}

const ROLES: [&str; 3] = ["consumer", "producer", "admin"];

struct Converter<'a> {
    path: &'a Path,
    /// By key; a later duplicate replaced an earlier one, as in `java.util.Properties`.
    props: BTreeMap<String, Prop>,
    unsupported: BTreeSet<String>,
    /// With the line they are about, if one: they are reported in file order.
    notes: Vec<(Option<usize>, String)>,
    /// Java-only client settings by what to do instead: one note per hint, not per key.
    hints: BTreeMap<&'static str, BTreeSet<(usize, String)>>,
    /// `config.providers`: alias → what its references become.
    providers: BTreeMap<String, Provider>,
}

/// The properties by what they configure.
#[derive(Default)]
struct Sorted {
    /// `<alias>.<rest>` by the alias's index in `clusters`: `(<rest>, property)`.
    cluster_keys: BTreeMap<usize, Vec<(String, Prop)>>,
    /// `A->B.<rest>` by the pair's indices in `clusters`: `<rest>` → property.
    flow_keys: BTreeMap<(usize, usize), BTreeMap<String, Prop>>,
    /// Everything else.
    top: BTreeMap<String, Prop>,
}

/// A flow's own settings (`A->B.<key>`, keyed by `<key>`) over the top-level ones.
struct FlowProps<'p> {
    own: BTreeMap<&'p str, &'p Prop>,
    top: &'p BTreeMap<String, Prop>,
}

impl<'p> FlowProps<'p> {
    fn get(&self, key: &str) -> Option<&'p Prop> {
        self.own.get(key).copied().or_else(|| self.top.get(key))
    }
}

impl<'a> Converter<'a> {
    fn new(path: &'a Path, entries: Vec<Prop>) -> Self {
        let mut notes = Vec::new();
        let mut props: BTreeMap<String, Prop> = BTreeMap::new();
        for p in entries {
            if let Some(old) = props.insert(p.key.clone(), p.clone()) {
                let note = format!(
                    "{} (line {}): also set on line {}; the later value wins, as in Java",
                    p.key, p.line, old.line
                );
                notes.push((Some(p.line), note));
            }
        }
        Self {
            path,
            props,
            unsupported: BTreeSet::new(),
            notes,
            hints: BTreeMap::new(),
            providers: BTreeMap::new(),
        }
    }

    /// Adds a note about `line` (or the file as a whole), once.
    fn note(&mut self, line: Option<usize>, note: String) {
        if !self.notes.iter().any(|(_, n)| *n == note) {
            self.notes.push((line, note));
        }
    }

    /// The notes, those about lines first in line order, then those about the whole file.
    fn sorted_notes(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        notes.sort_by_key(|(line, _)| (line.is_none(), *line));
        notes.into_iter().map(|(_, n)| n).collect()
    }

    fn error(&self, line: Option<usize>, key: &str, message: String) -> ConfigError {
        ConfigError {
            file: self.path.to_path_buf(),
            line,
            key: key.to_string(),
            message,
        }
    }

    fn pipeline(&mut self) -> Result<(Vec<ClusterOut>, Vec<FlowOut>), ConfigError> {
        let Some(clusters_prop) = self.props.get("clusters").cloned() else {
            return Err(self.error(
                None,
                "clusters",
                "missing; list the cluster aliases, e.g. `clusters = primary, backup`".into(),
            ));
        };
        let mut aliases: Vec<String> = Vec::new();
        for alias in list(&clusters_prop.value) {
            if let Err(problem) = check_alias(&alias) {
                return Err(self.error(
                    Some(clusters_prop.line),
                    "clusters",
                    format!("`{alias}`: {problem}"),
                ));
            }
            if !aliases.contains(&alias) {
                aliases.push(alias);
            }
        }
        if aliases.len() < 2 {
            return Err(self.error(
                Some(clusters_prop.line),
                "clusters",
                "list at least two cluster aliases, e.g. `clusters = primary, backup`".into(),
            ));
        }
        let Sorted {
            mut cluster_keys,
            mut flow_keys,
            top,
        } = self.sort_keys(&aliases);
        // MM2's worker for `A->B` takes `offset.storage.topic` from the top level, else from B's
        // cluster settings (`MirrorMakerConfig.workerConfig`).
        let offsets_topics: BTreeMap<usize, Prop> = cluster_keys
            .iter()
            .filter_map(|(i, keys)| {
                let (_, p) = keys.iter().find(|(rest, _)| rest == OFFSET_STORAGE_TOPIC)?;
                Some((*i, p.clone()))
            })
            .collect();
        let mut clusters = Vec::new();
        for (i, alias) in aliases.iter().enumerate() {
            let own = cluster_keys.remove(&i).unwrap_or_default();
            clusters.push(self.cluster(alias, &clusters_prop, own, &top)?);
        }
        self.top_level(&top);
        let mut flows = Vec::new();
        let mut heartbeat_only = Vec::new();
        for (s, source) in aliases.iter().enumerate() {
            for (t, target) in aliases.iter().enumerate() {
                if s == t {
                    continue;
                }
                let own = flow_keys.remove(&(s, t)).unwrap_or_default();
                let flow_props = FlowProps {
                    own: own.iter().map(|(k, p)| (k.as_str(), p)).collect(),
                    top: &top,
                };
                let enabled = match own.get("enabled") {
                    Some(p) => self.bool(p)?.then(|| Origin::from(p)),
                    None => None,
                };
                match enabled {
                    Some(origin) => {
                        let offsets_topic = top
                            .get(OFFSET_STORAGE_TOPIC)
                            .or_else(|| offsets_topics.get(&t));
                        let mut flow = self.flow(source, target, origin, &flow_props)?;
                        if let Some(p) = offsets_topic {
                            let topic = toml_string(p.value.trim());
                            flow.entries
                                .push(("mm2_offsets_topic", topic, Origin::from(p)));
                        }
                        flows.push(flow);
                    }
                    None => {
                        // MM2 runs a heartbeat-only herder for such a pair unless heartbeats are
                        // off; it reads this switch leniently (`Boolean.parseBoolean`).
                        let heartbeats = flow_props
                            .get("emit.heartbeats.enabled")
                            .is_none_or(|p| p.value.trim().eq_ignore_ascii_case("true"));
                        if heartbeats {
                            heartbeat_only.push(format!("{source}->{target}"));
                        }
                    }
                }
            }
        }
        if flows.is_empty() {
            let example = format!("{}->{}.enabled", aliases[0], aliases[1]);
            return Err(self.error(
                None,
                &example,
                format!(
                    "no flow is enabled; set `{example} = true` (as in MirrorMaker 2, a flow is off unless enabled)"
                ),
            ));
        }
        for (hint, keys) in std::mem::take(&mut self.hints) {
            let first = keys.first().map(|(line, _)| *line);
            let keys: Vec<String> = keys
                .into_iter()
                .map(|(line, key)| format!("{key} (line {line})"))
                .collect();
            self.note(first, format!("{}: Java-only; {hint}", keys.join(", ")));
        }
        if !heartbeat_only.is_empty() {
            self.note(None, format!(
                "MirrorMaker 2 would also emit heartbeats for {}, whose flows are not enabled; refract emits heartbeats only in enabled flows",
                heartbeat_only.join(", ")
            ));
        }
        Ok((clusters, flows))
    }

    /// Sorts every key but `clusters` into what it configures. Keys naming a pair that is not
    /// two of `aliases` are reported.
    fn sort_keys(&mut self, aliases: &[String]) -> Sorted {
        let mut sorted = Sorted::default();
        for (key, prop) in std::mem::take(&mut self.props) {
            if key == "clusters" {
                continue;
            }
            if let Some((pair, rest)) = flow_key(aliases, &key) {
                let rest = rest.to_string();
                sorted.flow_keys.entry(pair).or_default().insert(rest, prop);
            } else if key.contains("->") {
                if key.ends_with(".enabled") {
                    let note = format!(
                        "{key} (line {}): not a flow between two of the clusters ({})",
                        prop.line,
                        aliases.join(", ")
                    );
                    self.note(Some(prop.line), note);
                }
                self.unsupported.insert(key);
            } else if let Some((alias, rest)) = cluster_key(aliases, &key) {
                let rest = rest.to_string();
                sorted
                    .cluster_keys
                    .entry(alias)
                    .or_default()
                    .push((rest, prop));
            } else {
                sorted.top.insert(key, prop);
            }
        }
        sorted
    }

    /// A cluster from its `<alias>.*` keys, with top-level client keys as a fallback.
    fn cluster(
        &mut self,
        alias: &str,
        clusters_prop: &Prop,
        own: Vec<(String, Prop)>,
        top: &BTreeMap<String, Prop>,
    ) -> Result<ClusterOut, ConfigError> {
        let mut bootstrap = None;
        let mut tables: [(&'static str, ClientTable); 4] = [
            ("client", BTreeMap::new()),
            ("consumer", BTreeMap::new()),
            ("producer", BTreeMap::new()),
            ("admin", BTreeMap::new()),
        ];
        // The Java settings of each table. MM2 gives every cluster the top-level client settings
        // the cluster does not set itself.
        let mut java: [BTreeMap<String, Prop>; 4] = Default::default();
        for (key, prop) in top.iter().filter(|(k, _)| is_shared_client_key(k)) {
            java[0].insert(key.clone(), prop.clone());
        }
        for (rest, prop) in own {
            if rest == "bootstrap.servers" {
                bootstrap = Some(prop);
            } else if let Some((role, name)) = role_key(&rest) {
                let table = ROLES.iter().position(|r| *r == role).map_or(0, |i| i + 1);
                java[table].insert(name.to_string(), prop);
            } else if is_cluster_client_key(&rest) {
                java[0].insert(rest, prop);
            } else {
                self.other_key(&prop, &rest);
            }
        }
        let cluster_keys = java[0].clone();
        for (i, mut keys) in java.into_iter().enumerate() {
            let context = (i > 0).then_some(&cluster_keys);
            let table = &mut tables[i].1;
            self.security(&mut keys, context, table)?;
            for (name, prop) in &keys {
                self.client_setting(alias, name, prop, table)?;
            }
        }
        let bootstrap = match bootstrap.as_ref().or_else(|| top.get("bootstrap.servers")) {
            Some(p) => {
                let servers: Vec<String> = list(&p.value);
                if servers.is_empty() {
                    return Err(self.error(
                        Some(p.line),
                        &p.key,
                        "is empty; give host:port[,host:port]".into(),
                    ));
                }
                (self.references(p, &servers.join(","))?, Origin::from(p))
            }
            None => {
                return Err(self.error(
                    Some(clusters_prop.line),
                    &format!("{alias}.bootstrap.servers"),
                    format!("missing; give the brokers of cluster `{alias}`, e.g. `{alias}.bootstrap.servers = host:9092`"),
                ))
            }
        };
        Ok(ClusterOut {
            alias: alias.to_string(),
            origin: Origin::from(clusters_prop),
            bootstrap,
            tables,
        })
    }

    /// Puts a Java client setting into `table` under its librdkafka name, or reports it.
    fn client_setting(
        &mut self,
        alias: &str,
        java: &str,
        prop: &Prop,
        table: &mut ClientTable,
    ) -> Result<(), ConfigError> {
        let (key, line) = (&prop.key, prop.line);
        match client_key(java) {
            ClientKey::Pass(name) => {
                let mut value = self.references(prop, prop.value.trim())?;
                // Java disables host name verification with an empty value, librdkafka with `none`.
                if name == "ssl.endpoint.identification.algorithm" && value.is_empty() {
                    value = "none".into();
                }
                self.put(table, name, value, prop);
            }
            ClientKey::Reserved => {
                self.unsupported.insert(key.clone());
                let why = if java == "bootstrap.servers" {
                    format!("every client of `{alias}` connects to {alias}.bootstrap.servers")
                } else {
                    format!("refract sets `{java}` itself (idempotent producer with acks=all, manual commits)")
                };
                self.note(Some(line), format!("{key} (line {line}): ignored; {why}"));
            }
            ClientKey::Unsupported(hint) => {
                self.unsupported.insert(key.clone());
                if let Some(hint) = hint {
                    self.hints
                        .entry(hint)
                        .or_default()
                        .insert((line, key.clone()));
                }
            }
        }
        Ok(())
    }

    /// Reports top-level keys that are neither cluster settings nor read by flows.
    fn top_level(&mut self, top: &BTreeMap<String, Prop>) {
        for (key, prop) in top {
            if is_shared_client_key(key) || key == "bootstrap.servers" || is_flow_setting(key) {
                continue;
            }
            self.other_key(prop, key);
        }
    }

    /// A key that configures nothing refract has: accepted, noted or reported.
    fn other_key(&mut self, prop: &Prop, name: &str) {
        // read by the flows that target the cluster (`mm2_offsets_topic`); MM2 reads no
        // per-flow `A->B.offset.storage.topic`
        let offsets_topic = name == OFFSET_STORAGE_TOPIC && !prop.key.contains("->");
        if is_default_class(name, &prop.value) || offsets_topic {
            return;
        }
        match not_needed(name) {
            Some(reason) => {
                let value = prop.value.trim();
                let note = format!(
                    "{} = {value} (line {}): ignored; {reason}",
                    prop.key, prop.line
                );
                self.note(Some(prop.line), note);
            }
            None => {
                self.unsupported.insert(prop.key.clone());
            }
        }
    }

    fn flow(
        &mut self,
        source: &str,
        target: &str,
        origin: Origin,
        props: &FlowProps<'_>,
    ) -> Result<FlowOut, ConfigError> {
        for (rest, prop) in &props.own {
            if *rest != "enabled" && !is_flow_setting(rest) {
                self.other_key(prop, rest);
            }
        }
        for (key, what_instead) in ALWAYS_ON {
            if let Some(p) = props.get(key) {
                if !self.bool(p)? {
                    self.unsupported.insert(p.key.clone());
                    let note = format!("{} (line {}): {what_instead}", p.key, p.line);
                    self.note(Some(p.line), note);
                }
            }
        }
        let mut entries = Vec::new();
        if let Some((policy, origin)) = self.policy(props)? {
            entries.push(("policy", policy, origin));
        }
        for setting in SETTINGS {
            if let Some((value, origin)) = self.setting(setting, props)? {
                entries.push((setting.toml, value, origin));
            }
        }
        Ok(FlowOut {
            source: source.to_string(),
            target: target.to_string(),
            origin,
            entries,
        })
    }

    /// The `policy` inline table, when the file names a policy or configures it.
    fn policy(&mut self, props: &FlowProps<'_>) -> Result<Option<(String, Origin)>, ConfigError> {
        let class = props.get(POLICY_CLASS);
        let separator = props.get(POLICY_SEPARATOR);
        let internal = props.get(POLICY_INTERNAL_SEPARATOR);
        let Some(origin) = class.or(separator).or(internal).map(Origin::from) else {
            return Ok(None);
        };
        let plugin = match class {
            None => "builtin:default",
            Some(p) => {
                let name = p.value.trim();
                let short = name.strip_prefix(MM2_PACKAGE).unwrap_or(name);
                match POLICIES.iter().find(|(class, _)| *class == short) {
                    Some((_, builtin)) => *builtin,
                    None => {
                        return Err(self.error(
                            Some(p.line),
                            &p.key,
                            format!("`{name}` is a Java class; refract runs replication policies as WebAssembly plugins: write one (see the README's \"Replication policy plugins\"), then set `policy = {{ plugin = \"<file>.wasm\" }}` in the pipeline `refract convert` prints"),
                        ));
                    }
                }
            }
        };
        let mut config = Vec::new();
        if let Some(p) = separator {
            // MM2's policies read the separator untrimmed, straight from the properties.
            config.push(format!("separator = {}", toml_string(&p.value)));
        }
        if let Some(p) = internal {
            config.push(format!(
                "internal_topic_separator_enabled = {}",
                self.bool(p)?
            ));
        }
        let mut table = format!("{{ plugin = {}", toml_string(plugin));
        if !config.is_empty() {
            table.push_str(&format!(", config = {{ {} }}", config.join(", ")));
        }
        table.push_str(" }");
        Ok(Some((table, origin)))
    }

    /// One setting of a flow as TOML, when the file sets it.
    fn setting(
        &mut self,
        setting: &Setting,
        props: &FlowProps<'_>,
    ) -> Result<Option<(String, Origin)>, ConfigError> {
        if setting.kind == Kind::Largest {
            return self.largest(setting, props);
        }
        let Some(prop) = self.resolve(setting.mm2, props) else {
            return Ok(None);
        };
        if self.has_provider_reference(&prop.value) {
            return Err(self.error(
                Some(prop.line),
                &prop.key,
                "holds a config provider reference; refract resolves references only in client settings and bootstrap.servers".into(),
            ));
        }
        let value = match setting.kind {
            Kind::List => {
                if let Some(escape) = &prop.dropped_escape {
                    let plain = &escape[1..];
                    let note = format!(
                        "{} (line {}): the .properties format reads `{escape}` as `{plain}`, so MirrorMaker 2 and refract both see `{}`; write `\\{escape}` to keep a regex escape",
                        prop.key,
                        prop.line,
                        prop.value.trim()
                    );
                    self.note(Some(prop.line), note);
                }
                let items: Vec<String> = list(&prop.value).iter().map(|s| toml_string(s)).collect();
                format!("[{}]", items.join(", "))
            }
            Kind::Bool => self.bool(prop)?.to_string(),
            Kind::Seconds => format!("\"{}s\"", self.positive(prop)?),
            Kind::Millis => format!("\"{}ms\"", self.positive(prop)?),
            Kind::Int => self.int(prop)?.to_string(),
            Kind::Text => toml_string(prop.value.trim()),
            Kind::Largest => return self.largest(setting, props),
        };
        Ok(Some((value, Origin::from(prop))))
    }

    /// The setting of `names` (name, then 3.x aliases) a flow uses. As in MM2 3.x
    /// (`ConfigUtils.translateDeprecatedConfigs` after the flow's keys are laid over the
    /// top-level ones), the new name wins over an alias at either level.
    fn resolve<'p>(&mut self, names: &[&str], props: &FlowProps<'p>) -> Option<&'p Prop> {
        let (name, aliases) = names.split_first()?;
        let current = props.get(name);
        for alias in aliases {
            let Some(old) = props.get(alias) else {
                continue;
            };
            match current {
                Some(new) => self.note(
                    Some(old.line),
                    format!(
                        "{} (line {}): ignored; {} is also set and wins, as in MirrorMaker 2 3.x",
                        old.key, old.line, new.key
                    ),
                ),
                None => {
                    let note = format!(
                        "{} (line {}): read as {name} (its MirrorMaker 2 3.x name, removed in 4.0)",
                        old.key, old.line
                    );
                    self.note(Some(old.line), note);
                    return Some(old);
                }
            }
        }
        current
    }

    /// For settings refract has one of where MM2 has several: the largest value set.
    fn largest(
        &mut self,
        setting: &Setting,
        props: &FlowProps<'_>,
    ) -> Result<Option<(String, Origin)>, ConfigError> {
        let mut set = Vec::new();
        for name in setting.mm2 {
            if let Some(p) = props.get(name) {
                set.push((self.int(p)?, p));
            }
        }
        let Some(&(max, prop)) = set.iter().max_by_key(|(n, _)| *n) else {
            return Ok(None);
        };
        if set.iter().any(|(n, _)| *n != max) {
            let values: Vec<String> = set
                .iter()
                .map(|(n, p)| format!("{} = {n}", p.key))
                .collect();
            let note = format!(
                "{}: refract has one {} for all its internal topics; using the largest, {max}",
                values.join(", "),
                setting.toml
            );
            self.note(Some(prop.line), note);
        }
        Ok(Some((max.to_string(), Origin::from(prop))))
    }

    /// A boolean as Java's `ConfigDef` reads it: trimmed, any case.
    fn bool(&self, p: &Prop) -> Result<bool, ConfigError> {
        let v = p.value.trim();
        if v.eq_ignore_ascii_case("true") {
            Ok(true)
        } else if v.eq_ignore_ascii_case("false") {
            Ok(false)
        } else {
            Err(self.error(
                Some(p.line),
                &p.key,
                format!("`{v}` is not a boolean; use true or false"),
            ))
        }
    }

    fn int(&self, p: &Prop) -> Result<i64, ConfigError> {
        let v = p.value.trim();
        v.parse()
            .map_err(|_| self.error(Some(p.line), &p.key, format!("`{v}` is not a whole number")))
    }

    /// A whole number above zero. MM2 reads a negative interval as "never"; refract has no such
    /// reading, and the task's own `.enabled = false` says it plainly.
    fn positive(&self, p: &Prop) -> Result<i64, ConfigError> {
        match self.int(p)? {
            n if n > 0 => Ok(n),
            n => Err(self.error(
                Some(p.line),
                &p.key,
                format!("`{n}` must be greater than zero"),
            )),
        }
    }
}

/// MM2's LIST type: comma-separated, each entry trimmed; empty entries (which could only match
/// an empty name) are dropped.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `A->B.<rest>` for a pair of known aliases: the pair (as indices) and `<rest>`.
fn flow_key<'k>(aliases: &[String], key: &'k str) -> Option<((usize, usize), &'k str)> {
    for (s, source) in aliases.iter().enumerate() {
        let Some(after) = key
            .strip_prefix(source.as_str())
            .and_then(|k| k.strip_prefix("->"))
        else {
            continue;
        };
        for (t, target) in aliases.iter().enumerate() {
            if let Some(rest) = after
                .strip_prefix(target.as_str())
                .and_then(|k| k.strip_prefix('.'))
            {
                if s != t {
                    return Some(((s, t), rest));
                }
            }
        }
    }
    None
}

/// `<alias>.<rest>`: the index of the longest alias that prefixes `key`, and `<rest>`.
fn cluster_key<'k>(aliases: &[String], key: &'k str) -> Option<(usize, &'k str)> {
    aliases
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            key.strip_prefix(a.as_str())
                .and_then(|k| k.strip_prefix('.'))
                .map(|rest| (i, rest))
        })
        .max_by_key(|(i, _)| aliases[*i].len())
}

/// `consumer.<name>` and the like: the role and `<name>`.
fn role_key(rest: &str) -> Option<(&'static str, &str)> {
    ROLES.iter().find_map(|role| {
        rest.strip_prefix(role)
            .and_then(|r| r.strip_prefix('.'))
            .map(|name| (*role, name))
    })
}

/// A TOML string with whatever quoting and escaping its content needs.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A TOML key: bare when it can be, quoted otherwise.
fn toml_key(s: &str) -> String {
    let bare = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        s.to_string()
    } else {
        toml_string(s)
    }
}

/// Text safe inside a `#` comment: control characters are shown escaped.
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// TOML output

/// Which properties the generated TOML came from, by TOML key path and by TOML line.
#[derive(Debug, Default)]
struct Origins {
    paths: Vec<(String, Origin)>,
    lines: BTreeMap<usize, Origin>,
}

impl Origins {
    /// Re-aims an error in the generated TOML at the property it came from.
    fn map_error(&self, e: ConfigError) -> ConfigError {
        let by_path = self
            .paths
            .iter()
            .filter(|(path, _)| {
                e.key
                    .strip_prefix(path.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            })
            .max_by_key(|(path, _)| path.len())
            .map(|(_, origin)| origin);
        match by_path.or_else(|| e.line.and_then(|l| self.lines.get(&l))) {
            Some(origin) => ConfigError {
                file: e.file,
                line: Some(origin.line),
                key: origin.key.clone(),
                message: format!("{} (converted to `{}`)", e.message, e.key),
            },
            None => ConfigError {
                message: format!(
                    "{} (in the pipeline converted from this file{}; `refract convert` prints it)",
                    e.message,
                    e.line.map(|l| format!(", line {l}")).unwrap_or_default()
                ),
                line: None,
                ..e
            },
        }
    }
}

#[derive(Default)]
struct TomlWriter {
    text: String,
    /// Lines written so far.
    lines: usize,
    origins: Origins,
}

impl TomlWriter {
    fn line(&mut self, text: &str) {
        self.text.push_str(text);
        self.text.push('\n');
        self.lines += text.matches('\n').count() + 1;
    }

    /// `key = value`, remembered as coming from `origin`.
    fn entry(&mut self, path: String, key: &str, value: &str, origin: &Origin) {
        self.origins.lines.insert(self.lines + 1, origin.clone());
        self.origins.paths.push((path, origin.clone()));
        self.line(&format!("{key} = {value}"));
    }

    fn header(&mut self, path: &Path, unsupported: &[String], notes: &[String]) {
        self.line(&format!(
            "# Pipeline converted from {} (MirrorMaker 2 properties).",
            comment(&path.display().to_string())
        ));
        if !unsupported.is_empty() {
            self.line("# Settings refract does not support (left out):");
            for key in unsupported {
                self.line(&format!("#   {}", comment(key)));
            }
        }
        if !notes.is_empty() {
            self.line("# Notes:");
            for note in notes {
                self.line(&format!("#   {}", comment(note)));
            }
        }
    }

    fn cluster(&mut self, c: &ClusterOut) {
        let alias = toml_key(&c.alias);
        let path = format!("clusters.{}", c.alias);
        self.line("");
        self.origins.lines.insert(self.lines + 1, c.origin.clone());
        self.origins.paths.push((path.clone(), c.origin.clone()));
        self.line(&format!("[clusters.{alias}]"));
        let (servers, origin) = &c.bootstrap;
        self.entry(
            format!("{path}.bootstrap"),
            "bootstrap",
            &toml_string(servers),
            origin,
        );
        for (table, entries) in &c.tables {
            if entries.is_empty() {
                continue;
            }
            self.line(&format!("[clusters.{alias}.{table}]"));
            for (name, (value, origin)) in entries {
                self.entry(
                    format!("{path}.{table}.\"{name}\""),
                    &toml_string(name),
                    &toml_string(value),
                    origin,
                );
            }
        }
    }

    fn flow(&mut self, i: usize, f: &FlowOut) {
        let path = format!("flow[{i}]");
        self.line("");
        self.origins.lines.insert(self.lines + 1, f.origin.clone());
        self.origins.paths.push((path.clone(), f.origin.clone()));
        self.line("[[flow]]");
        self.entry(
            format!("{path}.source"),
            "source",
            &toml_string(&f.source),
            &f.origin,
        );
        self.entry(
            format!("{path}.target"),
            "target",
            &toml_string(&f.target),
            &f.origin,
        );
        for (key, value, origin) in &f.entries {
            self.entry(format!("{path}.{key}"), key, value, origin);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DefaultsFrom, OffsetSyncsLocation, PluginLocation};
    use std::time::Duration;

    fn convert_text(text: &str) -> Result<Mm2Conversion, ConfigError> {
        convert_mm2_properties(Path::new("mm2.properties"), text)
    }

    /// Converts, then validates as `Pipeline::load` would.
    fn load_text(text: &str) -> Result<Pipeline, ConfigError> {
        load(Path::new("mm2.properties"), text)
    }

    fn props(text: &str) -> Vec<(String, String, usize)> {
        parse_properties(Path::new("p.properties"), text)
            .unwrap()
            .into_iter()
            .map(|p| (p.key, p.value, p.line))
            .collect()
    }

    fn kv(key: &str, value: &str, line: usize) -> (String, String, usize) {
        (key.to_string(), value.to_string(), line)
    }

    const TWO: &str = "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\na->b.enabled = true\n";

    // --- fixtures -----------------------------------------------------------------------------

    const ACTIVE_STANDBY: &str = include_str!("../tests/fixtures/mm2/active-standby.properties");
    const ACTIVE_ACTIVE: &str = include_str!("../tests/fixtures/mm2/active-active.properties");
    const IDENTITY_DR: &str = include_str!("../tests/fixtures/mm2/identity-dr.properties");
    const TWO_CLUSTERS_REGEX: &str =
        include_str!("../tests/fixtures/mm2/two-clusters-regex.properties");

    fn fixture(name: &str, text: &str) -> (Mm2Conversion, Pipeline) {
        let path = Path::new(name);
        let conversion = convert_mm2_properties(path, text).unwrap();
        let pipeline = Pipeline::parse(path, &conversion.toml)
            .unwrap_or_else(|e| panic!("{e}\n{}", conversion.toml));
        (conversion, pipeline)
    }

    #[test]
    fn active_standby() {
        let (c, p) = fixture("active-standby.properties", ACTIVE_STANDBY);
        assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
        assert_eq!(p.flows.len(), 1);
        let f = &p.flows[0];
        assert_eq!(f.name(), "primary->backup");
        assert_eq!(
            p.clusters["primary"].bootstrap,
            "kafka-primary-1:9092,kafka-primary-2:9092,kafka-primary-3:9092"
        );
        for topic in ["orders", "payments", "inventory-eu"] {
            assert!(f.topics.should_replicate(topic), "{topic}");
        }
        // `.*\.internal` is `.*.internal` after Java's unescaping: it excludes `x-internal` too.
        for topic in [
            "orders-v2",
            "app.internal",
            "app-internal",
            "__consumer_offsets",
        ] {
            assert!(!f.topics.should_replicate(topic), "{topic}");
        }
        assert!(f.groups.should_replicate("billing"));
        assert!(!f.groups.should_replicate("console-consumer-7"));
        assert!(
            f.groups.should_replicate("connect-x"),
            "exclude list replaced"
        );
        assert_eq!(f.replication_factor, 3);
        assert_eq!(f.internal_replication_factor, 3);
        assert_eq!(
            f.policy.location,
            PluginLocation::Builtin("builtin:default".into())
        );
        assert_eq!(f.heartbeat_interval, Duration::from_secs(1));
        assert_eq!(f.checkpoint_interval, Duration::from_secs(10));
        assert!(f.sync_topic_configs && f.sync_topic_acls);
        assert_eq!(f.refresh_topics_interval, Duration::from_secs(30));
        assert_eq!(
            c.notes,
            [
                "primary->backup.topics.exclude (line 10): the .properties format reads `\\.` as `.`, so MirrorMaker 2 and refract both see `.*.internal,__.*`; write `\\\\.` to keep a regex escape",
                "tasks.max = 8 (line 27): ignored; refract runs each flow as one task on its own thread",
                "MirrorMaker 2 would also emit heartbeats for backup->primary, whose flows are not enabled; refract emits heartbeats only in enabled flows",
            ]
        );
        assert!(c.toml.starts_with(
            "# Pipeline converted from active-standby.properties (MirrorMaker 2 properties).\n# Notes:\n"
        ));
    }

    #[test]
    fn active_active() {
        let (c, p) = fixture("active-active.properties", ACTIVE_ACTIVE);
        assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
        let names: Vec<String> = p.flows.iter().map(|f| f.name()).collect();
        assert_eq!(names, ["us-east->us-west", "us-west->us-east"]);
        for f in &p.flows {
            assert!(f.topics.should_replicate("orders.eu"));
            assert!(f.topics.should_replicate("orders"));
            assert!(f.topics.should_replicate("payments"));
            assert!(
                !f.topics.should_replicate("orders-test"),
                "topics.blacklist"
            );
            assert!(!f.topics.should_replicate("payments-v2"));
            assert!(f.groups.should_replicate("app-1"));
            assert!(
                !f.groups.should_replicate("console-consumer-1"),
                "MM2's default exclude"
            );
            assert_eq!(f.policy.config.trim(), "separator = \"_\"");
            assert!(f.config_properties_exclude.matches("min.insync.replicas"));
            assert!(f.config_properties_exclude.matches("retention.bytes"));
            assert!(!f.config_properties_exclude.matches("retention.ms"));
        }
        assert!(!p.flows[0].sync_topic_configs, "per-flow override");
        assert!(p.flows[1].sync_topic_configs);
        let east = p.clusters["us-east"].client_config(crate::ClientRole::Producer);
        assert_eq!(east["security.protocol"], "PLAINTEXT");
        let west = &p.clusters["us-west"];
        assert_eq!(
            west.client_config(crate::ClientRole::Consumer)["auto.offset.reset"],
            "earliest"
        );
        assert!(!west
            .client_config(crate::ClientRole::Producer)
            .contains_key("auto.offset.reset"));
        assert_eq!(
            c.notes,
            [
                "topics.blacklist (line 10): read as topics.exclude (its MirrorMaker 2 3.x name, removed in 4.0)",
                "config.properties.exclude (line 14): the .properties format reads `\\.` as `.`, so MirrorMaker 2 and refract both see `min.insync.replicas, retention.bytes`; write `\\\\.` to keep a regex escape",
            ]
        );
    }

    #[test]
    fn identity_dr() {
        let (c, p) = fixture("identity-dr.properties", IDENTITY_DR);
        assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
        assert_eq!(p.flows.len(), 1);
        let f = &p.flows[0];
        assert_eq!(f.name(), "dc1->dc2");
        assert_eq!(
            f.policy.location,
            PluginLocation::Builtin("builtin:identity".into())
        );
        assert!(f.sync_group_offsets);
        assert_eq!(f.offset_lag_max, 10);
        assert_eq!(f.checkpoint_interval, Duration::from_secs(5));
        assert_eq!(f.sync_group_offsets_interval, Duration::from_secs(5));
        assert!(f.topics.should_replicate("anything"));
        assert!(
            !f.topics.should_replicate("__consumer_offsets"),
            "MM2's default exclude still applies"
        );
        assert_eq!(
            c.notes,
            ["MirrorMaker 2 would also emit heartbeats for dc2->dc1, whose flows are not enabled; refract emits heartbeats only in enabled flows"]
        );
    }

    #[test]
    fn two_clusters_regex() {
        let (c, p) = fixture("two-clusters-regex.properties", TWO_CLUSTERS_REGEX);
        assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
        assert_eq!(p.flows.len(), 1);
        let f = &p.flows[0];
        assert_eq!(f.name(), "kafka1->kafka2");
        assert_eq!(f.topics.include.patterns(), ["foo.*", "bar.*"]);
        assert!(f.topics.should_replicate("foo1"));
        assert!(f.topics.should_replicate("bar.x"));
        assert!(!f.topics.should_replicate("baz"));
        assert_eq!(
            p.clusters["kafka2"].bootstrap,
            "dev2:9092,dev3:9092,dev4:9092"
        );
        assert_eq!(
            c.notes,
            [
                "tasks.max = 5 (line 3): ignored; refract runs each flow as one task on its own thread",
                "MirrorMaker 2 would also emit heartbeats for kafka2->kafka1, whose flows are not enabled; refract emits heartbeats only in enabled flows",
            ]
        );
    }

    #[test]
    fn load_dispatches_on_the_extension_and_keeps_warnings() {
        let dir = env!("CARGO_MANIFEST_DIR");
        let path = Path::new(dir).join("tests/fixtures/mm2/active-standby.properties");
        let p = Pipeline::load(&path).unwrap();
        assert_eq!(p.file, path);
        assert_eq!(p.flows[0].name(), "primary->backup");
        assert_eq!(p.warnings.len(), 3);
        assert!(p.warnings[1].starts_with(&format!("{}: tasks.max = 8", path.display())));

        let p = load_text(&format!(
            "{TWO}transforms = x\ntopic.filter.class = com.x.F\n"
        ))
        .unwrap();
        assert_eq!(
            p.warnings[0],
            "mm2.properties: ignored MirrorMaker 2 settings refract does not support: topic.filter.class, transforms"
        );
    }

    // --- properties syntax --------------------------------------------------------------------

    #[test]
    fn separators_comments_and_blanks() {
        let text = "# comment\n! also a comment\n  \n a = 1\nb: 2\nc 3\nd=4\ne   :   5  \nf\ng =\n\th\t=\t= x\n";
        assert_eq!(
            props(text),
            [
                kv("a", "1", 4),
                kv("b", "2", 5),
                kv("c", "3", 6),
                kv("d", "4", 7),
                kv("e", "5  ", 8),
                kv("f", "", 9),
                kv("g", "", 10),
                kv("h", "= x", 11),
            ]
        );
    }

    #[test]
    fn continuations() {
        let text = "topics = a, \\\n    b, \\\n\tc\nnext = 1\nodd = x\\\\\nafter = 2\nlast = y\\";
        assert_eq!(
            props(text),
            [
                kv("topics", "a, b, c", 1),
                kv("next", "1", 4),
                kv("odd", "x\\", 5),
                kv("after", "2", 6),
                kv("last", "y", 7),
            ]
        );
        // A continued line that starts with `#` is not a comment; an empty one ends the entry.
        assert_eq!(
            props("a = 1\\\n  # 2\nb = \\\n\nc = 3\r\nd = 4\re = 5"),
            [
                kv("a", "1# 2", 1),
                kv("b", "", 3),
                kv("c", "3", 5),
                kv("d", "4", 6),
                kv("e", "5", 7),
            ]
        );
        // A comment line ending in a backslash does not continue.
        assert_eq!(props("# x \\\ny = 1"), [kv("y", "1", 2)]);
    }

    #[test]
    fn escapes_follow_java() {
        let text = "min\\.insync = a\\.b\\\\.c\nkey\\ with\\=sep\\:s = v\\ttab\\u00e9\\uD83D\\uDE00\nx = \\#\\!\n";
        assert_eq!(
            props(text),
            [
                kv("min.insync", "a.b\\.c", 1),
                kv("key with=sep:s", "v\ttab\u{e9}\u{1F600}", 2),
                kv("x", "#!", 3),
            ]
        );
        let parsed = parse_properties(Path::new("p"), "a = x\\.y\nb = \\=\\:\\\\").unwrap();
        assert_eq!(parsed[0].dropped_escape.as_deref(), Some("\\."));
        assert_eq!(parsed[1].dropped_escape, None);
        let err = parse_properties(Path::new("p.properties"), "\n\nbad = \\u12G4\n").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert_eq!(err.key, "bad");
        assert!(
            err.to_string()
                .starts_with("p.properties:3: bad: malformed"),
            "{err}"
        );
    }

    #[test]
    fn later_duplicates_win() {
        let c = convert_text(&format!("{TWO}topics = x\ntopics = y\n")).unwrap();
        assert!(c.toml.contains("topics = [\"y\"]"), "{}", c.toml);
        assert_eq!(
            c.notes[0],
            "topics (line 6): also set on line 5; the later value wins, as in Java"
        );
    }

    // --- resolution ---------------------------------------------------------------------------

    #[test]
    fn flow_settings_override_top_level_ones() {
        let text = "clusters = a, b, c\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\nc.bootstrap.servers = h:3\n\
            a->b.enabled = true\na->c.enabled = TRUE\nc->a.enabled = false\n\
            topics = t.*\na->c.topics = only\noffset.lag.max = 7\na->b.offset.lag.max = 0\n\
            emit.heartbeats.enabled = false\n";
        let p = load_text(text).unwrap();
        let names: Vec<String> = p.flows.iter().map(|f| f.name()).collect();
        assert_eq!(names, ["a->b", "a->c"]);
        let (ab, ac) = (&p.flows[0], &p.flows[1]);
        assert!(ab.topics.should_replicate("t1") && !ab.topics.should_replicate("only"));
        assert!(ac.topics.should_replicate("only") && !ac.topics.should_replicate("t1"));
        assert_eq!((ab.offset_lag_max, ac.offset_lag_max), (0, 7));
        assert!(!ab.emit_heartbeats && !ac.emit_heartbeats);
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    }

    #[test]
    fn blacklist_aliases() {
        let text = format!(
            "{TWO}topics.blacklist = x.*\ngroups.blacklist = g1\nconfig.properties.blacklist = c1\n"
        );
        let p = load_text(&text).unwrap();
        let f = &p.flows[0];
        assert!(!f.topics.should_replicate("x1") && f.topics.should_replicate("__y"));
        assert!(!f.groups.should_replicate("g1") && f.groups.should_replicate("connect-1"));
        assert!(f.config_properties_exclude.matches("c1"));
        assert!(!f.config_properties_exclude.matches("min.insync.replicas"));
        assert_eq!(
            p.warnings.len(),
            4,
            "3 aliases and heartbeats: {:?}",
            p.warnings
        );

        // As in MM2 3.x the new name wins over the alias even when the alias is per flow.
        let text = format!("{TWO}topics.exclude = new\na->b.topics.blacklist = old\n");
        let c = convert_text(&text).unwrap();
        assert!(c.toml.contains("topics_exclude = [\"new\"]"), "{}", c.toml);
        assert_eq!(
            c.notes[0],
            "a->b.topics.blacklist (line 6): ignored; topics.exclude is also set and wins, as in MirrorMaker 2 3.x"
        );
    }

    #[test]
    fn every_setting_converts() {
        let text = format!(
            "{TWO}replication.policy.class = IdentityReplicationPolicy\n\
             replication.policy.separator = -\n\
             replication.policy.internal.topic.separator.enabled = False\n\
             refresh.topics.interval.seconds = 11\n\
             offset.flush.interval.ms = 2500\n\
             replication.factor = -1\n\
             checkpoints.topic.replication.factor = 2\n\
             heartbeats.topic.replication.factor = 1\n\
             heartbeats.replication.enabled = false\n\
             sync.topic.configs.enabled = false\n\
             sync.topic.configs.interval.seconds = 12\n\
             use.defaults.from = source\n\
             sync.topic.acls.enabled = false\n\
             sync.topic.acls.interval.seconds = 13\n\
             groups = \n\
             groups.exclude = a, b\n\
             refresh.groups.interval.seconds = 14\n\
             emit.checkpoints.enabled = true\n\
             emit.checkpoints.interval.seconds = 15\n\
             sync.group.offsets.enabled = true\n\
             sync.group.offsets.interval.seconds = 16\n\
             emit.offset-syncs.enabled = true\n\
             offset-syncs.topic.location = target\n\
             offset.lag.max = 0\n\
             emit.heartbeats.enabled = true\n\
             emit.heartbeats.interval.seconds = 17\n\
             refresh.topics.enabled = true\n"
        );
        let p = load_text(&text).unwrap();
        let f = &p.flows[0];
        assert_eq!(
            f.policy.location,
            PluginLocation::Builtin("builtin:identity".into())
        );
        let cfg: toml::Table = toml::from_str(&f.policy.config).unwrap();
        assert_eq!(cfg["separator"].as_str(), Some("-"));
        assert_eq!(
            cfg["internal_topic_separator_enabled"].as_bool(),
            Some(false)
        );
        assert_eq!(f.refresh_topics_interval, Duration::from_secs(11));
        assert_eq!(f.commit_interval, Duration::from_millis(2500));
        assert_eq!(f.replication_factor, -1);
        assert_eq!(f.internal_replication_factor, 2);
        assert!(!f.heartbeats_replication && !f.sync_topic_configs && !f.sync_topic_acls);
        assert_eq!(f.sync_topic_configs_interval, Duration::from_secs(12));
        assert_eq!(f.use_defaults_from, DefaultsFrom::Source);
        assert_eq!(f.sync_topic_acls_interval, Duration::from_secs(13));
        assert!(
            !f.groups.should_replicate("anything"),
            "empty list matches nothing"
        );
        assert!(f.groups.exclude.matches("b") && !f.groups.exclude.matches("connect-x"));
        assert_eq!(f.refresh_groups_interval, Duration::from_secs(14));
        assert!(f.emit_checkpoints && f.sync_group_offsets && f.emit_offset_syncs);
        assert_eq!(f.checkpoint_interval, Duration::from_secs(15));
        assert_eq!(f.sync_group_offsets_interval, Duration::from_secs(16));
        assert_eq!(f.offset_syncs_location, OffsetSyncsLocation::Target);
        assert_eq!(f.offset_lag_max, 0);
        assert!(f.emit_heartbeats);
        assert_eq!(f.heartbeat_interval, Duration::from_secs(17));
        assert_eq!(
            p.warnings,
            [
                "mm2.properties: checkpoints.topic.replication.factor = 2, heartbeats.topic.replication.factor = 1: refract has one internal_replication_factor for all its internal topics; using the largest, 2",
                "mm2.properties: MirrorMaker 2 would also emit heartbeats for b->a, whose flows are not enabled; refract emits heartbeats only in enabled flows",
            ]
        );
    }

    /// MM2's worker for `A->B` keeps its positions in `offset.storage.topic` (top level first,
    /// then the target cluster's), else `mm2-offsets.A.internal`; refract reads the same topic.
    #[test]
    fn offset_storage_topic_names_where_mm2_positions_are() {
        let three = "clusters = a, b, c\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n\
            c.bootstrap.servers = h:3\na->b.enabled = true\na->c.enabled = true\n";
        let topics = |text: &str| -> Vec<String> {
            let p = load_text(text).unwrap();
            assert!(
                !p.warnings
                    .iter()
                    .any(|w| w.contains("offset.storage.topic")),
                "{:?}",
                p.warnings
            );
            p.flows
                .iter()
                .map(|f| f.mm2_offsets_topic.clone())
                .collect()
        };
        assert_eq!(
            topics(three),
            ["mm2-offsets.a.internal", "mm2-offsets.a.internal"]
        );
        assert_eq!(
            topics(&format!("{three}c.offset.storage.topic = c-offsets\n")),
            ["mm2-offsets.a.internal", "c-offsets"]
        );
        assert_eq!(
            topics(&format!(
                "{three}c.offset.storage.topic = c-offsets\noffset.storage.topic = all-offsets\n"
            )),
            ["all-offsets", "all-offsets"]
        );
        let c = convert_text(&format!("{three}b.offset.storage.topic = b-offsets\n")).unwrap();
        assert!(
            c.toml.contains("mm2_offsets_topic = \"b-offsets\""),
            "{}",
            c.toml
        );
        // MM2 reads no per-flow offset.storage.topic: reported as ignored
        let c = convert_text(&format!("{three}a->b.offset.storage.topic = x\n")).unwrap();
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("a->b.offset.storage.topic = x")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn accepted_and_unsupported_keys() {
        let text = format!(
            "{TWO}tasks.max = 4\nkey.converter = org.apache.kafka.connect.converters.ByteArrayConverter\n\
             offset.storage.replication.factor = 1\nb.status.storage.replication.factor = 1\n\
             topic.filter.class = org.apache.kafka.connect.mirror.DefaultTopicFilter\n\
             group.filter.class = DefaultGroupFilter\n\
             a->b.transforms = mask\nconfig.providers = file\nexactly.once.source.support = enabled\n\
             dedicated.mode.enable.internal.rest = true\nrefresh.topics.enabled = false\n\
             a->b.tasks.max = 2\nb->a.transforms = ignored-because-disabled\nx->b.enabled = true\n\
             a.offset.flush.timeout.ms = 5\n\
             config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"
        );
        let c = convert_text(&text).unwrap();
        assert_eq!(
            c.unsupported,
            [
                "a->b.transforms",
                "a.offset.flush.timeout.ms",
                "dedicated.mode.enable.internal.rest",
                "exactly.once.source.support",
                "refresh.topics.enabled",
                "x->b.enabled",
            ]
        );
        let notes = c.notes.join("\n");
        for expected in [
            "tasks.max = 4 (line 5): ignored",
            "a->b.tasks.max = 2 (line 16): ignored",
            "key.converter = org.apache.kafka.connect.converters.ByteArrayConverter (line 6): ignored",
            "offset.storage.replication.factor = 1 (line 7): ignored",
            "b.status.storage.replication.factor = 1 (line 8): ignored",
            "refresh.topics.enabled (line 15): refract always rediscovers topics",
            "x->b.enabled (line 18): not a flow between two of the clusters (a, b)",
        ] {
            assert!(notes.contains(expected), "{expected}\n{notes}");
        }
        for key in &c.unsupported {
            assert!(
                c.toml.contains(&format!("\n#   {key}\n")),
                "{key}\n{}",
                c.toml
            );
        }
        Pipeline::parse(Path::new("mm2.properties"), &c.toml).unwrap();
    }

    #[test]
    fn client_settings() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("creds.properties");
        std::fs::write(&creds, "password = pw-from-file\n").unwrap();
        let text = format!("clusters = a, b\na.bootstrap.servers = h:1 , h:2\nbootstrap.servers = fallback:1\n\
            a->b.enabled = true\n\
            security.protocol = SASL_SSL\nsasl.mechanism = SCRAM-SHA-512\n\
            sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"mirror\" password=\"${{file:{}:password}}\";\n\
            b.security.protocol = SSL\nb.ssl.truststore.location = /t.pem\nb.ssl.endpoint.identification.algorithm =\n\
            a.client.id = mirror\na.consumer.fetch.max.wait.ms = 50\na.consumer.max.poll.records = 9\n\
            a.producer.acks = 1\na.producer.compression.type = zstd \na.admin.bootstrap.servers = x:1\n\
            a.ssl.truststore.password = secret\nconfig.providers = file\n\
            config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n",
            creds.display()
        );
        let c = convert_text(&text).unwrap();
        assert_eq!(
            c.unsupported,
            [
                "a.admin.bootstrap.servers",
                "a.consumer.max.poll.records",
                "a.producer.acks",
            ]
        );
        let notes = c.notes.join("\n");
        assert!(notes.contains("a.producer.acks (line 14): ignored; refract sets `acks` itself"));
        assert!(notes.contains("a.admin.bootstrap.servers (line 16): ignored; every client of `a` connects to a.bootstrap.servers"));
        assert!(notes.contains("a.ssl.truststore.password (line 17): ignored; librdkafka reads CA certificates from PEM, which has no password"));
        assert!(
            !notes.contains("sasl.jaas.config"),
            "the password is a reference: {notes}"
        );
        let reference = format!("\"${{file:{}:password}}\"", creds.display());
        assert!(
            c.toml.contains(&format!("[clusters.a.client]\n\"client.id\" = \"mirror\"\n\"sasl.mechanism\" = \"SCRAM-SHA-512\"\n\"sasl.password\" = {reference}\n\"sasl.username\" = \"mirror\"\n\"security.protocol\" = \"SASL_SSL\"\n")),
            "{}",
            c.toml
        );
        assert!(
            c.toml.contains("\"ssl.ca.location\" = \"/t.pem\""),
            "{}",
            c.toml
        );
        assert!(!c.toml.contains("secret") && !c.toml.contains("pw-from-file"));
        let p = load_text(&text).unwrap();
        use crate::ClientRole::*;
        let a = &p.clusters["a"];
        assert_eq!(a.bootstrap, "h:1,h:2");
        let consumer = a.client_config(Consumer);
        assert_eq!(consumer["security.protocol"], "SASL_SSL");
        assert_eq!(consumer["sasl.mechanism"], "SCRAM-SHA-512");
        assert_eq!(consumer["sasl.username"], "mirror");
        assert_eq!(consumer["sasl.password"], "pw-from-file");
        assert_eq!(
            a.display_settings(Consumer)["sasl.password"],
            reference.trim_matches('"')
        );
        assert_eq!(consumer["client.id"], "mirror");
        assert_eq!(consumer["fetch.wait.max.ms"], "50");
        assert!(!consumer.contains_key("max.poll.records"));
        let producer = a.client_config(Producer);
        assert_eq!(producer["compression.type"], "zstd");
        assert!(!producer.contains_key("acks"));
        assert_eq!(a.client_config(Admin)["bootstrap.servers"], "h:1,h:2");
        let b = &p.clusters["b"];
        assert_eq!(
            b.bootstrap, "fallback:1",
            "top-level bootstrap.servers is a fallback"
        );
        let b = b.client_config(Admin);
        assert_eq!(
            b["security.protocol"], "SSL",
            "the cluster's own setting wins"
        );
        assert_eq!(b["sasl.mechanism"], "SCRAM-SHA-512");
        assert_eq!(b["sasl.password"], "pw-from-file");
        assert_eq!(b["ssl.ca.location"], "/t.pem");
        assert_eq!(b["ssl.endpoint.identification.algorithm"], "none");
        assert!(!format!("{p:?}").contains("pw-from-file"));
    }

    #[test]
    fn kafkas_sample_config_converts_cleanly() {
        // config/connect-mirror-maker.properties as shipped with Apache Kafka.
        let text =
            "clusters = A, B\nA.bootstrap.servers = A_host1:9092, A_host2:9092, A_host3:9092\n\
            B.bootstrap.servers = B_host1:9092, B_host2:9092, B_host3:9092\nreplication.factor=1\n\
            A->B.enabled = true\n# B->A.enabled = true\ncheckpoints.topic.replication.factor=1\n\
            heartbeats.topic.replication.factor=1\noffset-syncs.topic.replication.factor=1\n\
            offset.storage.replication.factor=1\nstatus.storage.replication.factor=1\n\
            config.storage.replication.factor=1\n";
        let p = load_text(text).unwrap();
        assert_eq!(p.flows[0].name(), "A->B");
        assert_eq!(p.flows[0].internal_replication_factor, 1);
        assert!(p.warnings.iter().all(|w| !w.contains("does not support")));
    }

    // --- errors -------------------------------------------------------------------------------

    #[test]
    fn errors_name_file_line_and_key() {
        const AB: &str = "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n";
        // (case, whole file or what follows TWO's 4 lines, line, key, message)
        let cases: &[(&str, &str, Option<usize>, &str, &str)] = &[
            (
                "no clusters",
                "a.bootstrap.servers = h:1\n",
                None,
                "clusters",
                "missing",
            ),
            (
                "one cluster",
                "\nclusters = a\n",
                Some(2),
                "clusters",
                "at least two",
            ),
            (
                "bad alias",
                "clusters = a, b>c\n",
                Some(1),
                "clusters",
                "'>'",
            ),
            (
                "no bootstrap",
                "clusters = a, b\na.bootstrap.servers = h:1\na->b.enabled = true\n",
                Some(1),
                "b.bootstrap.servers",
                "missing",
            ),
            (
                "no flow",
                &join(AB, "b->a.enabled = false\n"),
                None,
                "a->b.enabled",
                "no flow is enabled; set `a->b.enabled = true`",
            ),
            (
                "bad enabled",
                &join(AB, "a->b.enabled = yes\n"),
                Some(4),
                "a->b.enabled",
                "`yes` is not a boolean",
            ),
            (
                "bad bool",
                "x = 1\nsync.group.offsets.enabled = 1\n",
                Some(6),
                "sync.group.offsets.enabled",
                "not a boolean",
            ),
            (
                "bad number",
                "a->b.offset.lag.max = 10k\n",
                Some(5),
                "a->b.offset.lag.max",
                "not a whole number",
            ),
            (
                "zero interval",
                "emit.checkpoints.interval.seconds = 0\n",
                Some(5),
                "emit.checkpoints.interval.seconds",
                "greater than zero",
            ),
            (
                "bad rf",
                "heartbeats.topic.replication.factor = three\n",
                Some(5),
                "heartbeats.topic.replication.factor",
                "not a whole number",
            ),
            (
                "custom policy",
                "\nreplication.policy.class = com.example.PrefixlessPolicy\n",
                Some(6),
                "replication.policy.class",
                "WebAssembly plugin",
            ),
        ];
        for (name, body, line, key, message) in cases {
            let text = if body.contains("clusters") || body.contains(".bootstrap.servers") {
                body.to_string()
            } else {
                format!("{TWO}{body}")
            };
            let err = convert_text(&text).expect_err(name);
            assert_eq!(err.line, *line, "{name}: {err}");
            assert_eq!(err.key, *key, "{name}: {err}");
            assert!(err.message.contains(message), "{name}: {err}");
            assert!(
                err.to_string().starts_with("mm2.properties:"),
                "{name}: {err}"
            );
        }
    }

    fn join(a: &str, b: &str) -> String {
        format!("{a}{b}")
    }

    /// Errors the pipeline model finds in the converted TOML name the property it came from.
    #[test]
    fn validation_errors_point_at_the_property() {
        let cases = [
            (
                "a->b.topics = ok, (\n",
                5,
                "a->b.topics",
                "invalid regex",
                "flow[0].topics[1]",
            ),
            (
                "replication.factor = 0\n",
                5,
                "replication.factor",
                "-1 (broker default)",
                "flow[0].replication_factor",
            ),
            (
                "offset-syncs.topic.location = middle\n",
                5,
                "offset-syncs.topic.location",
                "unknown value",
                "flow[0].offset_syncs_location",
            ),
            (
                "offset.lag.max = -5\n",
                5,
                "offset.lag.max",
                "0 or more",
                "flow[0].offset_lag_max",
            ),
            (
                "emit.checkpoints.enabled = false\nsync.group.offsets.enabled = true\n",
                6,
                "sync.group.offsets.enabled",
                "needs checkpoints",
                "flow[0].sync_group_offsets",
            ),
        ];
        for (body, line, key, message, converted) in cases {
            let err = load_text(&format!("{TWO}{body}")).expect_err(body);
            assert_eq!(err.line, Some(line), "{body}: {err}");
            assert_eq!(err.key, key, "{body}: {err}");
            assert!(err.message.contains(message), "{body}: {err}");
            assert!(
                err.message
                    .ends_with(&format!("(converted to `{converted}`)")),
                "{body}: {err}"
            );
            assert!(err
                .to_string()
                .starts_with(&format!("mm2.properties:{line}: {key}: ")));
        }
    }

    #[test]
    fn odd_values_stay_valid_toml() {
        let text =
            "clusters = \"odd\", b\n\"odd\".bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n\
            \"odd\"->b.enabled = true\ntopics = it's, back\\\\slash, \"quoted\", tab\\there\n\
            replication.policy.separator = '\n";
        let c = convert_text(text).unwrap();
        let p = Pipeline::parse(Path::new("mm2.properties"), &c.toml)
            .unwrap_or_else(|e| panic!("{e}\n{}", c.toml));
        let f = &p.flows[0];
        assert_eq!(f.source, "\"odd\"");
        assert_eq!(
            f.topics.include.patterns(),
            ["it's", "back\\slash", "\"quoted\"", "tab\there"]
        );
        assert_eq!(f.policy.config.trim(), "separator = \"'\"");
    }
}

#[cfg(test)]
mod security_tests {
    use super::*;
    use crate::ClientRole::*;
    use std::env::VarError;

    const TWO: &str = "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\na->b.enabled = true\n";
    const PROVIDERS: &str = "config.providers = file, env, dir, secrets\n\
        config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n\
        config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n\
        config.providers.dir.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider\n\
        config.providers.secrets.class = FileConfigProvider\n";

    fn convert_text(text: &str) -> Result<Mm2Conversion, ConfigError> {
        convert_mm2_properties(Path::new("mm2.properties"), text)
    }

    fn env(name: &str) -> Result<String, VarError> {
        match name {
            "KS_PASS" => Ok("ks-s3cr3t".into()),
            "SCRAM_PASS" => Ok("scram-s3cr3t".into()),
            _ => Err(VarError::NotPresent),
        }
    }

    fn load_text(text: &str) -> Result<Pipeline, ConfigError> {
        load_with_env(Path::new("mm2.properties"), text, &env)
    }

    /// The TOML lines of `[clusters.<alias>.<table>]`.
    fn table(toml: &str, alias: &str, table: &str) -> Vec<String> {
        let header = format!("[clusters.{alias}.{table}]");
        toml.lines()
            .skip_while(|l| *l != header)
            .skip(1)
            .take_while(|l| !l.is_empty() && !l.starts_with('['))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn provider_references_become_refract_references() {
        let text = format!(
            "{TWO}{PROVIDERS}\
             a.ssl.keystore.location = /etc/kafka/a.p12\n\
             a.ssl.keystore.password = ${{env:KS_PASS}}\n\
             a.ssl.key.password = ${{env::KS_PASS}}\n\
             a.ssl.truststore.type = PEM\n\
             a.ssl.truststore.location = ${{dir:/run/secrets:ca.pem}}\n\
             a.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"${{secrets:/etc/kafka/u.properties:user}}\" password=\"${{file:/etc/kafka/u.properties:password}}\";\n\
             config.providers.file.param.allowed.paths = /etc/kafka\n"
        );
        let c = convert_text(&text).unwrap();
        assert_eq!(
            table(&c.toml, "a", "client"),
            [
                "\"sasl.password\" = \"${file:/etc/kafka/u.properties:password}\"",
                "\"sasl.username\" = \"${file:/etc/kafka/u.properties:user}\"",
                "\"ssl.ca.location\" = \"${file:/run/secrets/ca.pem}\"",
                "\"ssl.key.password\" = \"${env:KS_PASS}\"",
                "\"ssl.keystore.location\" = \"/etc/kafka/a.p12\"",
                "\"ssl.keystore.password\" = \"${env:KS_PASS}\"",
            ]
        );
        assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
        assert_eq!(
            c.notes[0],
            "config.providers.file.param.allowed.paths (line 16): ignored; refract's ${file:…} and ${env:…} references read any file and variable the process can"
        );
        assert!(
            !c.notes.iter().any(|n| n.contains("in clear")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn provider_errors_name_the_key() {
        let cases: &[(&str, Option<usize>, &str, &str)] = &[
            (
                "config.providers = vault\nconfig.providers.vault.class = com.hashicorp.VaultConfigProvider\n",
                Some(6),
                "config.providers.vault.class",
                "`com.hashicorp.VaultConfigProvider` is a config provider refract cannot run; it reads references of org.apache.kafka.common.config.provider.FileConfigProvider, EnvVarConfigProvider and DirectoryConfigProvider",
            ),
            (
                "config.providers = file\n",
                Some(5),
                "config.providers.file.class",
                "missing; config.providers lists `file`: name its class, e.g. `config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider`",
            ),
            (
                "a.client.id = ${vault:kv/kafka:pw}\n",
                Some(5),
                "a.client.id",
                "holds `${` that is not a reference to a config provider of this file (config.providers lists none); refract would read it as a reference",
            ),
            (
                "config.providers = file\nconfig.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\na.ssl.key.password = ${file:/only-a-path}\n",
                Some(7),
                "a.ssl.key.password",
                "reference `${file:/only-a-path}` does not fit its provider: write ${<alias>:/path/file.properties:key}",
            ),
            (
                "config.providers = env\nconfig.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\ntopics = ${env:TOPICS}\n",
                Some(7),
                "topics",
                "holds a config provider reference; refract resolves references only in client settings and bootstrap.servers",
            ),
        ];
        for (body, line, key, message) in cases {
            let err = convert_text(&format!("{TWO}{body}")).unwrap_err();
            assert_eq!(
                (err.line, err.key.as_str(), err.message.as_str()),
                (*line, *key, *message),
                "{body}"
            );
        }
    }

    #[test]
    fn jaas_login_modules() {
        let jaas = |module: &str| format!("{TWO}sasl.jaas.config = {module}\n");
        // SCRAM, an escaped quote in a literal password (`\\"` in the file: the properties
        // format turns it into the `\"` JAAS reads): carried over as it is, with a note.
        let c = convert_text(&jaas(
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"mirror\" password=\"p\\\\\"w\";",
        ))
        .unwrap();
        assert_eq!(
            table(&c.toml, "a", "client"),
            [
                "\"sasl.password\" = 'p\"w'",
                "\"sasl.username\" = \"mirror\""
            ]
        );
        assert_eq!(
            c.notes[0],
            "sasl.jaas.config (line 5): a secret written in clear; the converted pipeline carries it as it is: reference it instead, e.g. ${env:NAME} or ${file:/path:key} (in MirrorMaker 2: config.providers)"
        );
        assert!(!format!("{c:?}").contains("p\\\"w"), "{c:?}");
        assert!(format!("{c:?}").contains("\\\"sasl.password\\\" = \\\"[redacted]\\\""));
        let p = load_text(&jaas("PlainLoginModule required username=u password=pw;")).unwrap();
        let b = p.clusters["b"].client_config(Producer);
        assert_eq!(
            (b["sasl.username"].as_str(), b["sasl.password"].as_str()),
            ("u", "pw")
        );

        // OIDC
        let c = convert_text(&format!(
            "{TWO}a.sasl.mechanism = OAUTHBEARER\na.sasl.oauthbearer.token.endpoint.url = https://idp/token\n\
             a.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
             a.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"mm2\" clientSecret=\"${{env:OIDC}}\" scope=\"kafka\" unsecuredLoginStringClaim_sub=\"x\";\n\
             config.providers = env\nconfig.providers.env.class = EnvVarConfigProvider\n"
        ))
        .unwrap();
        assert_eq!(
            table(&c.toml, "a", "client"),
            [
                "\"sasl.mechanism\" = \"OAUTHBEARER\"",
                "\"sasl.oauthbearer.client.id\" = \"mm2\"",
                "\"sasl.oauthbearer.client.secret\" = \"${env:OIDC}\"",
                "\"sasl.oauthbearer.method\" = \"oidc\"",
                "\"sasl.oauthbearer.scope\" = \"kafka\"",
                "\"sasl.oauthbearer.token.endpoint.url\" = \"https://idp/token\"",
            ]
        );
        assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
        assert_eq!(
            c.notes[0],
            "a.sasl.jaas.config (line 8): options of `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule` ignored: unsecuredLoginStringClaim_sub"
        );

        // Unsecured JWT (tests, development), in a role's table.
        let c = convert_text(&format!(
            "{TWO}a.consumer.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"alice\" unsecuredLoginLifetimeSeconds=\"3600\" unsecuredLoginExtension_traceId=\"123\";\n"
        ))
        .unwrap();
        assert_eq!(
            table(&c.toml, "a", "consumer"),
            [
                "\"enable.sasl.oauthbearer.unsecure.jwt\" = \"true\"",
                "\"sasl.oauthbearer.config\" = \"principal=alice lifeSeconds=3600 extension_traceId=123\"",
            ]
        );
        assert!(table(&c.toml, "a", "client").is_empty());
        assert!(
            c.notes.iter().all(|n| !n.contains("in clear")),
            "{:?}",
            c.notes
        );

        // Kerberos
        let c = convert_text(&format!(
            "{TWO}b.sasl.mechanism = GSSAPI\nb.sasl.jaas.config = com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab=\"/etc/security/mm2.keytab\" principal=\"mm2/host@EXAMPLE.COM\";\n"
        ))
        .unwrap();
        assert_eq!(
            table(&c.toml, "b", "client"),
            [
                "\"sasl.kerberos.keytab\" = \"/etc/security/mm2.keytab\"",
                "\"sasl.kerberos.principal\" = \"mm2/host@EXAMPLE.COM\"",
                "\"sasl.mechanism\" = \"GSSAPI\"",
            ]
        );
        assert_eq!(
            c.notes[0],
            "b.sasl.jaas.config (line 6): Kerberos (GSSAPI) needs refract built with the `gssapi` feature (`cargo build --release --features gssapi`, which links the system's Cyrus SASL); librdkafka renews the ticket with kinit and the keytab"
        );
    }

    #[test]
    fn jaas_errors_name_the_key_and_never_the_secret() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "a.sasl.jaas.config = com.example.CustomLoginModule required password=\"hunter2\";\n",
                "a.sasl.jaas.config",
                "login module `com.example.CustomLoginModule` has no librdkafka equivalent; refract converts PlainLoginModule and ScramLoginModule (sasl.username, sasl.password), OAuthBearerLoginModule (OIDC or unsecured JWT) and Krb5LoginModule (GSSAPI)",
            ),
            (
                "sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required password=\"hunter2\";\n",
                "sasl.jaas.config",
                "login module `org.apache.kafka.common.security.plain.PlainLoginModule` needs the options username and password",
            ),
            (
                "a.producer.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"hunter2;\n",
                "a.producer.sasl.jaas.config",
                "login module `org.apache.kafka.common.security.plain.PlainLoginModule`: the value of option `password` has no closing quote",
            ),
            (
                "a.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n",
                "a.sasl.jaas.config",
                "login module `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule` without sasl.oauthbearer.token.endpoint.url gets its token from a Java callback handler, which librdkafka cannot run: give the OIDC token endpoint (with clientId and clientSecret), or set [clusters.<alias>.oauthbearer] token = \"${file:/path/to/token}\" in the converted pipeline",
            ),
            (
                "a.sasl.oauthbearer.token.endpoint.url = https://idp/token\na.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientSecret=\"hunter2\";\n",
                "a.sasl.jaas.config",
                "login module `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule` with sasl.oauthbearer.token.endpoint.url (OIDC) needs the option clientId (or the setting sasl.oauthbearer.client.credentials.client.id)",
            ),
            (
                "config.providers = file\nconfig.providers.file.class = FileConfigProvider\na.sasl.jaas.config = ${file:/etc/kafka/jaas.properties:jaas}\n",
                "a.sasl.jaas.config",
                "is a config provider reference as a whole; refract reads the login module when it converts the file: write the module here and reference only its secrets, e.g. password=\"${file:/path/credentials.properties:password}\"",
            ),
        ];
        for (body, key, message) in cases {
            let err = convert_text(&format!("{TWO}{body}")).unwrap_err();
            assert_eq!(
                (err.key.as_str(), err.message.as_str()),
                (*key, *message),
                "{body}"
            );
            assert!(!err.to_string().contains("hunter2"), "{err}");
        }
        // A Java callback handler without an OIDC endpoint is reported.
        let c = convert_text(&format!(
            "{TWO}sasl.login.callback.handler.class = com.example.Handler\n"
        ))
        .unwrap();
        assert_eq!(c.unsupported, ["sasl.login.callback.handler.class"]);
    }

    #[test]
    fn key_and_trust_stores() {
        let c = convert_text(&format!(
            "{TWO}a.ssl.truststore.location = /etc/kafka/ca.pem\na.ssl.truststore.password = changeit\n\
             a.ssl.keystore.type = PKCS12\na.ssl.keystore.location = /etc/kafka/a.keystore\na.ssl.keystore.password = ${{env:KS_PASS}}\n\
             config.providers = env\nconfig.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n\
             b.ssl.truststore.type = PEM\nb.ssl.truststore.certificates = -----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\n\
             b.ssl.keystore.type = PEM\nb.ssl.keystore.certificate.chain = -----BEGIN CERTIFICATE-----\\nMIIC\\n-----END CERTIFICATE-----\n\
             b.ssl.keystore.key = -----BEGIN ENCRYPTED PRIVATE KEY-----\\nMIIE\\n-----END ENCRYPTED PRIVATE KEY-----\n\
             b.ssl.key.password = ${{env:KEY_PASS}}\nb.ssl.endpoint.identification.algorithm =\n"
        ))
        .unwrap();
        assert_eq!(
            table(&c.toml, "a", "client"),
            [
                "\"ssl.ca.location\" = \"/etc/kafka/ca.pem\"",
                "\"ssl.keystore.location\" = \"/etc/kafka/a.keystore\"",
                "\"ssl.keystore.password\" = \"${env:KS_PASS}\"",
            ]
        );
        assert_eq!(
            table(&c.toml, "b", "client"),
            [
                "\"ssl.ca.pem\" = \"\"\"",
                "-----BEGIN CERTIFICATE-----",
                "MIIB",
                "-----END CERTIFICATE-----\"\"\"",
                "\"ssl.certificate.pem\" = \"\"\"",
                "-----BEGIN CERTIFICATE-----",
                "MIIC",
                "-----END CERTIFICATE-----\"\"\"",
                "\"ssl.endpoint.identification.algorithm\" = \"none\"",
                "\"ssl.key.password\" = \"${env:KEY_PASS}\"",
                "\"ssl.key.pem\" = \"\"\"",
                "-----BEGIN ENCRYPTED PRIVATE KEY-----",
                "MIIE",
                "-----END ENCRYPTED PRIVATE KEY-----\"\"\"",
            ]
        );
        assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
        assert_eq!(
            c.notes,
            [
                "a.ssl.truststore.password (line 6): ignored; librdkafka reads CA certificates from PEM, which has no password",
                "b.ssl.keystore.key (line 16): a secret written in clear; the converted pipeline carries it as it is: reference it instead, e.g. ${env:NAME} or ${file:/path:key} (in MirrorMaker 2: config.providers)",
                "MirrorMaker 2 would also emit heartbeats for b->a, whose flows are not enabled; refract emits heartbeats only in enabled flows",
            ]
        );
        // .p12 without a type is PKCS#12
        let c = convert_text(&format!(
            "{TWO}ssl.keystore.location = /k/a.p12\nssl.keystore.password = pw\n"
        ))
        .unwrap();
        assert_eq!(
            table(&c.toml, "a", "client"),
            [
                "\"ssl.keystore.location\" = \"/k/a.p12\"",
                "\"ssl.keystore.password\" = \"pw\""
            ]
        );
    }

    #[test]
    fn java_stores_are_errors_with_a_hint() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "a.ssl.truststore.location = /etc/kafka/truststore.jks\n",
                "a.ssl.truststore.location",
                "`/etc/kafka/truststore.jks` is a Java KeyStore (JKS) trust store (no type is set and the file name is not .p12, .pfx or .pem, so Kafka reads it as JKS, Java's default); librdkafka has no trust stores and reads CA certificates from PEM; export them with `keytool -exportcert -rfc -alias <alias> -keystore /etc/kafka/truststore.jks -file /etc/kafka/ca.pem` (`keytool -list -keystore /etc/kafka/truststore.jks` lists the aliases), then set ssl.ca.location = \"/etc/kafka/ca.pem\"",
            ),
            (
                "ssl.truststore.type = JKS\nb.ssl.truststore.location = /t/trust.pem\n",
                "b.ssl.truststore.location",
                "`/t/trust.pem` is a Java KeyStore (JKS) trust store; librdkafka has no trust stores and reads CA certificates from PEM; export them with `keytool -exportcert -rfc -alias <alias> -keystore /t/trust.pem -file /t/ca.pem` (`keytool -list -keystore /t/trust.pem` lists the aliases), then set ssl.ca.location = \"/t/ca.pem\"",
            ),
            (
                "a.ssl.truststore.type = PKCS12\na.ssl.truststore.location = /t/trust.p12\n",
                "a.ssl.truststore.location",
                "`/t/trust.p12` is a PKCS#12 trust store; librdkafka has no trust stores and reads CA certificates from PEM: `openssl pkcs12 -in /t/trust.p12 -nokeys -out /t/ca.pem`, then set ssl.ca.location to that file",
            ),
            (
                "a.ssl.keystore.location = /k/client.keystore.jks\na.ssl.keystore.password = hunter2\n",
                "a.ssl.keystore.location",
                "`/k/client.keystore.jks` is a Java KeyStore (JKS) (no type is set and the file name is not .p12, .pfx or .pem, so Kafka reads it as JKS, Java's default); librdkafka cannot read Java KeyStores (JKS); convert it to PKCS#12 with `keytool -importkeystore -srckeystore /k/client.keystore.jks -destkeystore /k/client.keystore.p12 -deststoretype PKCS12`, then set ssl.keystore.location = \"/k/client.keystore.p12\" and ssl.keystore.password",
            ),
            (
                "a.ssl.keystore.type = PEM\na.ssl.keystore.location = /k/client.pem\n",
                "a.ssl.keystore.location",
                "`/k/client.pem` is a PEM key store; librdkafka reads the certificate and the private key from separate settings: set ssl.certificate.location to the certificate chain and ssl.key.location to the private key (with ssl.key.password if it is encrypted), or put the PEM text in ssl.keystore.certificate.chain and ssl.keystore.key",
            ),
            (
                "a.ssl.keystore.type = BCFKS\na.ssl.keystore.location = /k/client.bcfks\n",
                "a.ssl.keystore.location",
                "`BCFKS` is a key store type librdkafka cannot read (it reads PEM and PKCS12)",
            ),
        ];
        for (body, key, message) in cases {
            let err = convert_text(&format!("{TWO}{body}")).unwrap_err();
            assert_eq!(
                (err.key.as_str(), err.message.as_str()),
                (*key, *message),
                "{body}"
            );
            assert!(!err.to_string().contains("hunter2"));
        }
    }

    #[test]
    fn compression_settings() {
        let three = "clusters = a, b, c\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\nc.bootstrap.servers = h:3\na->b.enabled = true\na->c.enabled = true\n";
        let p = load_text(&format!(
            "{three}producer.compression.type = lz4\na->c.producer.compression.type = zstd\nb.producer.compression.type = gzip\n"
        ))
        .unwrap();
        let got: Vec<Option<&str>> = p.flows.iter().map(|f| f.compression.as_deref()).collect();
        assert_eq!(got, [Some("lz4"), Some("zstd")]);
        assert_eq!(
            p.clusters["b"].client_config(Producer)["compression.type"],
            "gzip"
        );
        assert!(
            p.warnings.iter().all(|w| !w.contains("compression")),
            "{:?}",
            p.warnings
        );
        let p = load_text(TWO).unwrap();
        assert_eq!(p.flows[0].compression, None);
        let err =
            load_text(&format!("{TWO}a->b.producer.compression.type = brotli\n")).unwrap_err();
        assert_eq!(err.key, "a->b.producer.compression.type");
        assert_eq!(err.line, Some(5));
        assert_eq!(
            err.message,
            "unknown value `brotli` (use \"none\", \"gzip\", \"snappy\", \"lz4\" or \"zstd\") (converted to `flow[0].compression`)"
        );
    }

    #[test]
    fn convert_keeps_references_and_load_resolves_them() {
        let text = format!(
            "{TWO}{PROVIDERS}a.security.protocol = SASL_SSL\na.sasl.mechanism = SCRAM-SHA-512\n\
             a.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"mm2\" password=\"${{env:SCRAM_PASS}}\";\n\
             a.ssl.keystore.location = /k/a.p12\na.ssl.keystore.password = ${{env:KS_PASS}}\n"
        );
        let c = convert_text(&text).unwrap();
        assert!(
            c.toml.contains("\"sasl.password\" = \"${env:SCRAM_PASS}\""),
            "{}",
            c.toml
        );
        assert!(c
            .toml
            .contains("\"ssl.keystore.password\" = \"${env:KS_PASS}\""));
        assert!(!c.toml.contains("s3cr3t"));
        let p = load_text(&text).unwrap();
        let a = &p.clusters["a"];
        let cfg = a.client_config(Admin);
        assert_eq!(cfg["sasl.password"], "scram-s3cr3t");
        assert_eq!(cfg["ssl.keystore.password"], "ks-s3cr3t");
        let shown = a.display_settings(Admin);
        assert_eq!(shown["sasl.password"], "${env:SCRAM_PASS}");
        assert_eq!(shown["ssl.keystore.password"], "${env:KS_PASS}");
        assert!(!format!("{p:?}").contains("s3cr3t"));
        // An unset variable: the error names the MM2 key, the reference, never a secret.
        let err = load_text(&text.replace("SCRAM_PASS", "UNSET_PASS")).unwrap_err();
        assert_eq!(err.key, "a.sasl.jaas.config");
        assert_eq!(err.line, Some(12));
        assert_eq!(
            err.message,
            "reference `${env:UNSET_PASS}`: environment variable `UNSET_PASS` is not set (converted to `clusters.a.client.\"sasl.password\"`)"
        );
        assert!(!err.to_string().contains("s3cr3t"));
    }
}
