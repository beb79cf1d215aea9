//! The conversion: clusters, flows and client settings of an MM2 file resolved as MirrorMaker 2
//! resolves them, into refract's model.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::registry::{take_registry_keys, RegistryOut};
use super::security::Provider;
use super::settings::{
    client_key, is_cluster_client_key, is_default_class, is_flow_setting, is_shared_client_key,
    not_needed, ClientKey, Kind, Setting, ALWAYS_ON, EXACTLY_ONCE_SUPPORT, MM2_PACKAGE,
    OFFSET_STORAGE_TOPIC, POLICIES, POLICY_CLASS, POLICY_INTERNAL_SEPARATOR, POLICY_SEPARATOR,
    SETTINGS,
};
use crate::error::ConfigError;
use crate::properties::Prop;
use crate::rules::check_alias;

/// Where a piece of the generated TOML came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Origin {
    pub(super) key: String,
    pub(super) line: usize,
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
pub(super) type ClientTable = BTreeMap<String, (String, Origin)>;

/// A `[clusters.<alias>]` to write.
pub(super) struct ClusterOut {
    pub(super) alias: String,
    pub(super) origin: Origin,
    pub(super) bootstrap: (String, Origin),
    /// `client`, `consumer`, `producer`, `admin`: librdkafka name → value.
    pub(super) tables: [(&'static str, ClientTable); 4],
    /// `<alias>.schema.registry.url` (and its basic authentication): the cluster's schema
    /// registry, `[clusters.<alias>.schema_registry]`.
    pub(super) registry: Option<RegistryOut>,
}

/// A `[[flow]]` to write.
pub(super) struct FlowOut {
    pub(super) source: String,
    pub(super) target: String,
    /// The `A->B.enabled` that turned it on.
    pub(super) origin: Origin,
    pub(super) entries: Vec<(&'static str, String, Origin)>,
}

pub(super) const ROLES: [&str; 3] = ["consumer", "producer", "admin"];

pub(super) struct Converter<'a> {
    pub(super) path: &'a Path,
    /// By key; a later duplicate replaced an earlier one, as in `java.util.Properties`.
    pub(super) props: BTreeMap<String, Prop>,
    pub(super) unsupported: BTreeSet<String>,
    /// With the line they are about, if one: they are reported in file order.
    pub(super) notes: Vec<(Option<usize>, String)>,
    /// Java-only client settings by what to do instead: one note per hint, not per key.
    pub(super) hints: BTreeMap<&'static str, BTreeSet<(usize, String)>>,
    /// `config.providers`: alias → what its references become.
    pub(super) providers: BTreeMap<String, Provider>,
}

/// The properties by what they configure.
#[derive(Default)]
pub(super) struct Sorted {
    /// `<alias>.<rest>` by the alias's index in `clusters`: `(<rest>, property)`.
    pub(super) cluster_keys: BTreeMap<usize, Vec<(String, Prop)>>,
    /// `A->B.<rest>` by the pair's indices in `clusters`: `<rest>` → property.
    pub(super) flow_keys: BTreeMap<(usize, usize), BTreeMap<String, Prop>>,
    /// Everything else.
    pub(super) top: BTreeMap<String, Prop>,
}

/// A flow's own settings (`A->B.<key>`, keyed by `<key>`) over the top-level ones.
pub(super) struct FlowProps<'p> {
    pub(super) own: BTreeMap<&'p str, &'p Prop>,
    pub(super) top: &'p BTreeMap<String, Prop>,
}

impl<'p> FlowProps<'p> {
    pub(super) fn get(&self, key: &str) -> Option<&'p Prop> {
        self.own.get(key).copied().or_else(|| self.top.get(key))
    }
}

impl<'a> Converter<'a> {
    pub(super) fn new(path: &'a Path, entries: Vec<Prop>) -> Self {
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
    pub(super) fn note(&mut self, line: Option<usize>, note: String) {
        if !self.notes.iter().any(|(_, n)| *n == note) {
            self.notes.push((line, note));
        }
    }

    /// The notes, those about lines first in line order, then those about the whole file.
    pub(super) fn sorted_notes(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        notes.sort_by_key(|(line, _)| (line.is_none(), *line));
        notes.into_iter().map(|(_, n)| n).collect()
    }

    pub(super) fn error(&self, line: Option<usize>, key: &str, message: String) -> ConfigError {
        ConfigError {
            file: self.path.to_path_buf(),
            line,
            key: key.to_string(),
            message,
        }
    }

    pub(super) fn pipeline(&mut self) -> Result<(Vec<ClusterOut>, Vec<FlowOut>), ConfigError> {
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
        // ... and `exactly.once.source.support` the same way (KIP-618).
        let exactly_once: BTreeMap<usize, Prop> = cluster_keys
            .iter()
            .filter_map(|(i, keys)| {
                let (_, p) = keys.iter().find(|(rest, _)| rest == EXACTLY_ONCE_SUPPORT)?;
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
                        let support = top
                            .get(EXACTLY_ONCE_SUPPORT)
                            .or_else(|| exactly_once.get(&t));
                        if let Some(p) = support {
                            if self.exactly_once(p)? {
                                flow.entries.push((
                                    "delivery",
                                    toml_string("exactly-once"),
                                    Origin::from(p),
                                ));
                            }
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
        self.translate_schemas(&clusters, &mut flows);
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
    pub(super) fn sort_keys(&mut self, aliases: &[String]) -> Sorted {
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
    pub(super) fn cluster(
        &mut self,
        alias: &str,
        clusters_prop: &Prop,
        mut own: Vec<(String, Prop)>,
        top: &BTreeMap<String, Prop>,
    ) -> Result<ClusterOut, ConfigError> {
        let mut bootstrap = None;
        let (registry_url, user_info) = take_registry_keys(&mut own);
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
        let registry = self.registry(alias, registry_url, user_info)?;
        Ok(ClusterOut {
            alias: alias.to_string(),
            origin: Origin::from(clusters_prop),
            bootstrap,
            tables,
            registry,
        })
    }

    /// Puts a Java client setting into `table` under its librdkafka name, or reports it.
    pub(super) fn client_setting(
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
    pub(super) fn top_level(&mut self, top: &BTreeMap<String, Prop>) {
        for (key, prop) in top {
            if is_shared_client_key(key) || key == "bootstrap.servers" || is_flow_setting(key) {
                continue;
            }
            self.other_key(prop, key);
        }
    }

    /// A key that configures nothing refract has: accepted, noted or reported.
    pub(super) fn other_key(&mut self, prop: &Prop, name: &str) {
        // read by the flows that target the cluster (`mm2_offsets_topic`); MM2 reads no
        // per-flow `A->B.offset.storage.topic`
        let offsets_topic = (name == OFFSET_STORAGE_TOPIC || name == EXACTLY_ONCE_SUPPORT)
            && !prop.key.contains("->");
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

    /// `exactly.once.source.support`: `enabled` is exactly-once delivery; `disabled` and
    /// `preparing` (MM2's step before enabling on a running cluster) are at-least-once.
    fn exactly_once(&mut self, prop: &Prop) -> Result<bool, ConfigError> {
        match prop.value.trim().to_ascii_lowercase().as_str() {
            "enabled" => Ok(true),
            "disabled" => Ok(false),
            "preparing" => {
                let note = format!(
                    "{} = preparing (line {}): refract needs no preparing step; the flows stay at-least-once until it says `enabled`",
                    prop.key, prop.line
                );
                self.note(Some(prop.line), note);
                Ok(false)
            }
            other => Err(self.error(
                Some(prop.line),
                &prop.key,
                format!("`{other}` is not one of enabled, preparing, disabled"),
            )),
        }
    }

    pub(super) fn flow(
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
    pub(super) fn policy(
        &mut self,
        props: &FlowProps<'_>,
    ) -> Result<Option<(String, Origin)>, ConfigError> {
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
    pub(super) fn setting(
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
    pub(super) fn resolve<'p>(
        &mut self,
        names: &[&str],
        props: &FlowProps<'p>,
    ) -> Option<&'p Prop> {
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
    pub(super) fn largest(
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
    pub(super) fn bool(&self, p: &Prop) -> Result<bool, ConfigError> {
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

    pub(super) fn int(&self, p: &Prop) -> Result<i64, ConfigError> {
        let v = p.value.trim();
        v.parse()
            .map_err(|_| self.error(Some(p.line), &p.key, format!("`{v}` is not a whole number")))
    }

    /// A whole number above zero. MM2 reads a negative interval as "never"; refract has no such
    /// reading, and the task's own `.enabled = false` says it plainly.
    pub(super) fn positive(&self, p: &Prop) -> Result<i64, ConfigError> {
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
pub(super) fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `A->B.<rest>` for a pair of known aliases: the pair (as indices) and `<rest>`.
pub(super) fn flow_key<'k>(aliases: &[String], key: &'k str) -> Option<((usize, usize), &'k str)> {
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
pub(super) fn cluster_key<'k>(aliases: &[String], key: &'k str) -> Option<(usize, &'k str)> {
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
pub(super) fn role_key(rest: &str) -> Option<(&'static str, &str)> {
    ROLES.iter().find_map(|role| {
        rest.strip_prefix(role)
            .and_then(|r| r.strip_prefix('.'))
            .map(|name| (*role, name))
    })
}

/// A TOML string with whatever quoting and escaping its content needs.
pub(super) fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A TOML key: bare when it can be, quoted otherwise.
pub(super) fn toml_key(s: &str) -> String {
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
pub(super) fn comment(s: &str) -> String {
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
