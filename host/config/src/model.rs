use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use crate::duration::parse_duration;
use crate::error::{ConfigError, Locator};
use crate::flow::{
    defaults, AclSyncSettings, CheckpointSettings, ConfigSyncSettings, DefaultsFrom, DeliveryMode,
    DeliverySettings, Flow, HeartbeatSettings, OffsetSyncSettings, OffsetSyncsLocation,
    OffsetTranslation, PluginSpec,
};
use crate::raw::{RawCluster, RawClusterMode, RawFlow, RawOAuthBearer, RawPipeline};
use crate::rules::{check_alias, BUILTIN_POLICIES, COMPRESSION_TYPES, RESERVED_CLIENT_KEYS};
use crate::secrets::{self, EnvLookup, Resolver, Value};
mod plugin_specs;

use crate::topics::{
    PatternList, TopicFilter, DEFAULT_CONFIG_PROPERTIES_EXCLUDE, DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS_EXCLUDE,
};

/// A validated pipeline: clusters and the flows between them.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// The file it was read from.
    pub file: PathBuf,
    /// Clusters by alias.
    pub clusters: BTreeMap<String, Cluster>,
    /// Enabled flows, in file order.
    pub flows: Vec<Flow>,
    /// Things worth logging that do not stop the pipeline: for a MirrorMaker 2 `.properties`
    /// file, the settings refract ignores and what the conversion assumed. Empty for TOML.
    pub warnings: Vec<String>,
    /// `[metrics] listen`: the address of the HTTP endpoint (`/metrics`, `/health`, `/status`,
    /// `POST /reload`), when set.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// `[cluster]`: several processes with this pipeline share each flow's tasks through a
    /// consumer group on the flow's source cluster; `None` runs every task in this process.
    pub cluster: Option<ClusterMode>,
}

/// `[cluster]`: how this process takes part in sharing the flows' work with others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMode {
    /// `instance`: this process's stable name: static group membership (`group.instance.id`),
    /// so a restart within the session timeout keeps its tasks; `None`: dynamic membership.
    pub instance: Option<String>,
    /// `session_timeout`: how long a process may stop answering before its tasks move.
    pub session_timeout: Duration,
}

/// One Kafka cluster and how to reach it.
///
/// Client settings may hold secrets: `Debug` shows values that came from `${env:…}` /
/// `${file:…}` references as written and literal values of sensitive keys
/// ([`crate::is_sensitive_key`]) as `[redacted]`; only [`Cluster::client_config`] and
/// [`Cluster::static_oauth_token`] give the resolved values.
#[derive(Clone, PartialEq, Eq)]
pub struct Cluster {
    /// The alias used in flows and remote topic names.
    pub alias: String,
    /// `bootstrap.servers`, references resolved.
    pub bootstrap: String,
    /// `bootstrap` as written, when it held references.
    bootstrap_written: Option<String>,
    client: BTreeMap<String, Value>,
    consumer: BTreeMap<String, Value>,
    producer: BTreeMap<String, Value>,
    admin: BTreeMap<String, Value>,
    oauthbearer_token: Option<StaticToken>,
}

/// `[clusters.<alias>.oauthbearer] token`: resolved, and how to read it again.
#[derive(Clone, PartialEq, Eq)]
struct StaticToken {
    value: Value,
    /// The pipeline file and key, for errors when it is read again.
    file: PathBuf,
    key: String,
    /// The pipeline file's folder: relative `${file:…}` paths start there.
    base: PathBuf,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |table: &BTreeMap<String, Value>| -> BTreeMap<String, String> {
            table.iter().map(|(k, v)| (k.clone(), v.shown(k))).collect()
        };
        f.debug_struct("Cluster")
            .field("alias", &self.alias)
            .field("bootstrap", &self.bootstrap_shown())
            .field("client", &shown(&self.client))
            .field("consumer", &shown(&self.consumer))
            .field("producer", &shown(&self.producer))
            .field("admin", &shown(&self.admin))
            // `Value`'s Debug shows the reference as written or `[redacted]`, never the token.
            .field(
                "oauthbearer_token",
                &self.oauthbearer_token.as_ref().map(|t| &t.value),
            )
            .finish()
    }
}

/// Which kind of client a librdkafka configuration is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRole {
    /// Reads records.
    Consumer,
    /// Writes records.
    Producer,
    /// Creates topics, reads metadata.
    Admin,
}

impl Cluster {
    /// librdkafka properties for a client of `role`: bootstrap, then `client`, then the
    /// role's own table (later wins). References are resolved: these values may be secrets, so
    /// never log them; [`Cluster::display_settings`] is for showing.
    /// With OIDC (`sasl.oauthbearer.method = "oidc"`), the OIDC settings are left out: refract
    /// fetches the token itself ([`Cluster::oidc`]).
    pub fn client_config(&self, role: ClientRole) -> BTreeMap<String, String> {
        let mut out = self.merged(role);
        if crate::oidc::is_oidc(&out) {
            out.retain(|k, _| !crate::oidc::is_oidc_key(k));
        }
        out
    }

    /// How clients of `role` fetch an OIDC token, when their settings ask for OIDC
    /// (validated when the pipeline was loaded).
    pub fn oidc(&self, role: ClientRole) -> Option<crate::Oidc> {
        crate::oidc::from_settings(&self.merged(role))
            .ok()
            .flatten()
    }

    fn merged(&self, role: ClientRole) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        out.insert("bootstrap.servers".to_string(), self.bootstrap.clone());
        for (k, v) in self.client.iter().chain(self.role_table(role)) {
            out.insert(k.clone(), v.resolved.clone());
        }
        out
    }

    /// The same settings as [`Cluster::client_config`], safe to show in logs and status output:
    /// values that came from references as written (e.g. `${env:KAFKA_PASS}`), literal values of
    /// sensitive keys ([`crate::is_sensitive_key`]) as `[redacted]`, the rest as they are.
    pub fn display_settings(&self, role: ClientRole) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        out.insert("bootstrap.servers".to_string(), self.bootstrap_shown());
        for (k, v) in self.client.iter().chain(self.role_table(role)) {
            out.insert(k.clone(), v.shown(k));
        }
        out
    }

    /// The static OAUTHBEARER token of `[clusters.<alias>.oauthbearer] token`, resolved when
    /// the pipeline was loaded: what refract hands every client of the cluster as its token
    /// (`rd_kafka_oauthbearer_set_token`, see refract-mirror's `oauth`).
    pub fn static_oauth_token(&self) -> Option<&str> {
        self.oauthbearer_token
            .as_ref()
            .map(|t| t.value.resolved.as_str())
    }

    /// Reads the static OAUTHBEARER token again, resolving its references now (a token file
    /// that an agent rotates): for each token refresh. `Ok(None)` when the cluster has none.
    /// The error names the pipeline file, the key and the reference, never the token.
    pub fn read_static_oauth_token(&self) -> Result<Option<String>, ConfigError> {
        let Some(token) = &self.oauthbearer_token else {
            return Ok(None);
        };
        let Some(written) = &token.value.written else {
            return Ok(Some(token.value.resolved.clone()));
        };
        let env = |name: &str| std::env::var(name);
        let resolver = Resolver {
            base: &token.base,
            env: &env,
        };
        let error = |message: String| ConfigError {
            file: token.file.clone(),
            line: None,
            key: token.key.clone(),
            message,
        };
        let value = resolver.resolve(written).map_err(error)?;
        if value.resolved.trim().is_empty() {
            return Err(error("the token is empty".into()));
        }
        Ok(Some(value.resolved))
    }

    fn role_table(&self, role: ClientRole) -> &BTreeMap<String, Value> {
        match role {
            ClientRole::Consumer => &self.consumer,
            ClientRole::Producer => &self.producer,
            ClientRole::Admin => &self.admin,
        }
    }

    fn bootstrap_shown(&self) -> String {
        self.bootstrap_written
            .clone()
            .unwrap_or_else(|| self.bootstrap.clone())
    }
}

impl Pipeline {
    /// Validates pipeline text; `path` names it in errors and anchors relative plugin paths
    /// and `${file:…}` references, which are resolved now, as `${env:…}` ones are.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        Self::parse_with_env(path, text, &|name: &str| std::env::var(name))
    }

    /// [`Pipeline::parse`] with `env` looking up environment variables.
    pub(crate) fn parse_with_env(
        path: &Path,
        text: &str,
        env: EnvLookup<'_>,
    ) -> Result<Self, ConfigError> {
        let loc = Locator::new(path.to_path_buf(), text);
        let raw: RawPipeline = toml::from_str(text).map_err(|e| {
            let key = e
                .message()
                .split('`')
                .nth(1)
                .unwrap_or_default()
                .to_string();
            loc.error(e.span(), key, e.message().trim().to_string())
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Builder {
            loc: &loc,
            base,
            env,
        }
        .pipeline(raw)
    }

    /// The flows whose target is one of `targets` (MM2's `--clusters`); all flows when empty.
    pub fn flows_for_targets(&self, targets: &[String]) -> Vec<&Flow> {
        self.flows
            .iter()
            .filter(|f| targets.is_empty() || targets.contains(&f.target))
            .collect()
    }
}

struct Builder<'a> {
    loc: &'a Locator,
    base: PathBuf,
    env: EnvLookup<'a>,
}

impl Builder<'_> {
    fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        key: String,
        msg: String,
    ) -> Result<T, ConfigError> {
        Err(self.loc.error(Some(span), key, msg))
    }

    fn pipeline(&self, raw: RawPipeline) -> Result<Pipeline, ConfigError> {
        if raw.clusters.is_empty() {
            return Err(self.loc.error(
                None,
                "clusters",
                "no clusters are defined; add a [clusters.<alias>] table",
            ));
        }
        let mut clusters = BTreeMap::new();
        for (alias, cluster) in raw.clusters {
            let c = self.cluster(&alias, cluster)?;
            clusters.insert(c.alias.clone(), c);
        }
        if raw.flow.is_empty() {
            return Err(self
                .loc
                .error(None, "flow", "no flows are defined; add a [[flow]] table"));
        }
        let mut flows: Vec<Flow> = Vec::new();
        for (i, flow) in raw.flow.into_iter().enumerate() {
            let span = flow.span();
            let Some(f) = self.flow(i, flow.into_inner(), &clusters)? else {
                continue;
            };
            if flows
                .iter()
                .any(|o| o.source == f.source && o.target == f.target)
            {
                return self.err(
                    span,
                    format!("flow[{i}]"),
                    format!("flow {} is defined twice", f.name()),
                );
            }
            flows.push(f);
        }
        let metrics_listen = match raw.metrics {
            None => None,
            Some(m) => Some(m.listen.get_ref().parse().map_err(|e| {
                self.loc.error(
                    Some(m.listen.span()),
                    "metrics.listen",
                    format!(
                        "`{}` is not a socket address ({e}); use e.g. \"127.0.0.1:9464\"",
                        m.listen.get_ref()
                    ),
                )
            })?),
        };
        let cluster = match raw.cluster {
            None => None,
            Some(c) => self.cluster_mode(c)?,
        };
        Ok(Pipeline {
            file: self.loc.file.clone(),
            clusters,
            flows,
            warnings: Vec::new(),
            metrics_listen,
            cluster,
        })
    }

    /// `[cluster]`.
    fn cluster_mode(
        &self,
        raw: Spanned<RawClusterMode>,
    ) -> Result<Option<ClusterMode>, ConfigError> {
        let raw = raw.into_inner();
        let session_timeout = self.duration(
            "cluster.session_timeout",
            raw.session_timeout.clone(),
            defaults::SESSION_TIMEOUT,
        )?;
        if let Some(t) = &raw.session_timeout {
            if session_timeout < Duration::from_secs(1)
                || session_timeout > Duration::from_secs(1800)
            {
                return self.err(
                    t.span(),
                    "cluster.session_timeout".into(),
                    "must be between 1s and 30m (brokers accept 6s to 30m unless group.min.session.timeout.ms / group.max.session.timeout.ms say otherwise)".into(),
                );
            }
        }
        let instance = match raw.instance {
            None => None,
            Some(i) => {
                let value = self.resolve(i.span(), "cluster.instance", i.get_ref())?;
                let name = value.resolved.trim().to_string();
                if let Err(problem) = check_instance(&name) {
                    return self.err(
                        i.span(),
                        "cluster.instance".into(),
                        format!("`{name}` {problem}"),
                    );
                }
                Some(name)
            }
        };
        if raw.enabled == Some(false) {
            return Ok(None);
        }
        Ok(Some(ClusterMode {
            instance,
            session_timeout,
        }))
    }

    fn cluster(
        &self,
        alias: &Spanned<String>,
        raw: Spanned<RawCluster>,
    ) -> Result<Cluster, ConfigError> {
        let name = alias.get_ref().clone();
        let alias_span = alias.span();
        let key = format!("clusters.{name}");
        if let Err(problem) = check_alias(&name) {
            return self.err(alias.span(), key, problem.into());
        }
        let raw = raw.into_inner();
        let bootstrap = self.resolve(
            raw.bootstrap.span(),
            &format!("{key}.bootstrap"),
            raw.bootstrap.get_ref(),
        )?;
        if bootstrap.resolved.trim().is_empty() {
            return self.err(
                raw.bootstrap.span(),
                format!("{key}.bootstrap"),
                "bootstrap is empty; give host:port[,host:port]".into(),
            );
        }
        let raw_token_span = raw.oauthbearer.as_ref().map(|t| t.get_ref().token.span());
        let oauthbearer_token = match raw.oauthbearer {
            None => None,
            Some(table) => Some(self.static_token(&key, table.into_inner())?),
        };
        let cluster = Cluster {
            alias: name,
            bootstrap: bootstrap.resolved,
            bootstrap_written: bootstrap.written,
            client: self.client_table(&format!("{key}.client"), raw.client)?,
            consumer: self.client_table(&format!("{key}.consumer"), raw.consumer)?,
            producer: self.client_table(&format!("{key}.producer"), raw.producer)?,
            admin: self.client_table(&format!("{key}.admin"), raw.admin)?,
            oauthbearer_token,
        };
        self.check_static_token(&key, &cluster, raw_token_span)?;
        for (role, table) in [
            (ClientRole::Consumer, "consumer"),
            (ClientRole::Producer, "producer"),
            (ClientRole::Admin, "admin"),
        ] {
            if let Err(problem) = crate::oidc::from_settings(&cluster.merged(role)) {
                return Err(self.loc.error(
                    Some(alias_span.clone()),
                    format!("{key}.client"),
                    format!("OIDC settings of the cluster's {table} clients: {problem}"),
                ));
            }
        }
        Ok(cluster)
    }

    /// Resolves the references in a value; errors name the key and the reference.
    fn resolve(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        text: &str,
    ) -> Result<Value, ConfigError> {
        Resolver {
            base: &self.base,
            env: self.env,
        }
        .resolve(text)
        .map_err(|message| self.loc.error(Some(span), key, message))
    }

    /// `[clusters.<alias>.oauthbearer]`.
    fn static_token(&self, key: &str, raw: RawOAuthBearer) -> Result<StaticToken, ConfigError> {
        let key = format!("{key}.oauthbearer.token");
        let value = self.resolve(raw.token.span(), &key, raw.token.get_ref())?;
        if value.resolved.trim().is_empty() {
            return self.err(raw.token.span(), key, "the token is empty".into());
        }
        Ok(StaticToken {
            value,
            file: self.loc.file.clone(),
            key,
            base: self.base.clone(),
        })
    }

    /// A static token is what refract hands every client as its OAUTHBEARER token: every
    /// client of the cluster must use OAUTHBEARER, and not librdkafka's own token sources.
    fn check_static_token(
        &self,
        key: &str,
        cluster: &Cluster,
        span: Option<std::ops::Range<usize>>,
    ) -> Result<(), ConfigError> {
        if cluster.oauthbearer_token.is_none() {
            return Ok(());
        }
        let key = format!("{key}.oauthbearer.token");
        for role in [
            ClientRole::Consumer,
            ClientRole::Producer,
            ClientRole::Admin,
        ] {
            let cfg = cluster.client_config(role);
            let mechanisms: Vec<&String> = ["sasl.mechanism", "sasl.mechanisms"]
                .iter()
                .filter_map(|k| cfg.get(*k))
                .collect();
            if mechanisms.is_empty()
                || !mechanisms
                    .iter()
                    .all(|m| m.trim().eq_ignore_ascii_case("OAUTHBEARER"))
            {
                return Err(self.loc.error(
                    span,
                    key,
                    format!(
                        "a static OAUTHBEARER token needs \"sasl.mechanism\" = \"OAUTHBEARER\" for every client: set it in [clusters.{}.client]",
                        cluster.alias
                    ),
                ));
            }
            let oidc = cfg
                .get("sasl.oauthbearer.method")
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("oidc"));
            let unsecure = cfg
                .get("enable.sasl.oauthbearer.unsecure.jwt")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
            if oidc || unsecure {
                let other = if oidc {
                    "sasl.oauthbearer.method = \"oidc\""
                } else {
                    "enable.sasl.oauthbearer.unsecure.jwt = true"
                };
                return Err(self.loc.error(
                    span,
                    key,
                    format!(
                        "a static token and {other} both supply the OAUTHBEARER token; keep one"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn client_table(
        &self,
        key: &str,
        table: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    ) -> Result<BTreeMap<String, Value>, ConfigError> {
        let mut out = BTreeMap::new();
        for (k, v) in table {
            let name = k.get_ref().clone();
            let full = format!("{key}.\"{name}\"");
            if RESERVED_CLIENT_KEYS.contains(&name.as_str()) {
                let hint = if name == "bootstrap.servers" {
                    "set the cluster's `bootstrap` instead"
                } else {
                    "refract sets it itself (idempotent producer, acks=all, manual commits)"
                };
                return self.err(
                    k.span(),
                    full,
                    format!("`{name}` cannot be set here: {hint}"),
                );
            }
            let java_only = match name.as_str() {
                "sasl.jaas.config" => Some("librdkafka takes SASL credentials as \"sasl.username\" and \"sasl.password\" (PLAIN, SCRAM), \"sasl.oauthbearer.*\" settings or [clusters.<alias>.oauthbearer] token (OAUTHBEARER), \"sasl.kerberos.*\" settings (GSSAPI); `refract convert` translates an MM2 file's login module"),
                "ssl.keystore.type" => Some("librdkafka reads a PKCS#12 file from \"ssl.keystore.location\", or PEM from \"ssl.certificate.location\" and \"ssl.key.location\"; remove it"),
                _ => None,
            };
            if let Some(hint) = java_only {
                return self.err(
                    k.span(),
                    full,
                    format!("`{name}` is a Java client setting; {hint}"),
                );
            }
            if name.starts_with("ssl.truststore.") {
                let mut hint = "librdkafka has no trust stores: set \"ssl.ca.location\" to a PEM file of the CA certificates (or \"ssl.ca.pem\" to the PEM text)".to_string();
                if name == "ssl.truststore.location" {
                    if let toml::Value::String(path) = v.get_ref() {
                        let path = self.resolve(v.span(), &full, path)?.resolved;
                        if secrets::is_jks(Path::new(&path)) {
                            hint = secrets::truststore_hint(&path);
                        }
                    }
                }
                return self.err(
                    k.span(),
                    full,
                    format!("`{name}` is a Java client setting; {hint}"),
                );
            }
            let span = v.span();
            let value = match v.into_inner() {
                toml::Value::String(s) => self.resolve(span.clone(), &full, &s)?,
                toml::Value::Integer(n) => Value::literal(n.to_string()),
                toml::Value::Float(n) => Value::literal(n.to_string()),
                toml::Value::Boolean(b) => Value::literal(b.to_string()),
                other => {
                    return self.err(
                        span,
                        full,
                        format!(
                            "librdkafka properties are strings, numbers or booleans, not {}",
                            other.type_str()
                        ),
                    );
                }
            };
            let store = match name.as_str() {
                "ssl.keystore.location" => Some(secrets::keystore_hint as fn(&str) -> String),
                "ssl.ca.location" => Some(secrets::truststore_hint as fn(&str) -> String),
                _ => None,
            };
            if let Some(hint) = store {
                // as librdkafka opens it: relative to the working directory
                if secrets::is_jks(Path::new(&value.resolved)) {
                    return self.err(
                        span,
                        full,
                        format!(
                            "`{}` is a Java KeyStore (JKS); {}",
                            value.resolved,
                            hint(&value.resolved)
                        ),
                    );
                }
            }
            out.insert(name, value);
        }
        Ok(out)
    }

    fn flow(
        &self,
        i: usize,
        raw: RawFlow,
        clusters: &BTreeMap<String, Cluster>,
    ) -> Result<Option<Flow>, ConfigError> {
        let key = format!("flow[{i}]");
        for (field, alias) in [("source", &raw.source), ("target", &raw.target)] {
            if !clusters.contains_key(alias.get_ref()) {
                let known: Vec<&str> = clusters.keys().map(String::as_str).collect();
                return self.err(
                    alias.span(),
                    format!("{key}.{field}"),
                    format!(
                        "unknown cluster `{}` (defined: {})",
                        alias.get_ref(),
                        known.join(", ")
                    ),
                );
            }
        }
        if raw.source.get_ref() == raw.target.get_ref() {
            return self.err(
                raw.target.span(),
                format!("{key}.target"),
                format!(
                    "a flow cannot mirror cluster `{}` into itself",
                    raw.source.get_ref()
                ),
            );
        }
        let include = match raw.topics {
            Some(list) => self.patterns(&format!("{key}.topics"), list)?,
            None => self.patterns(
                &format!("{key}.topics"),
                vec![Spanned::new(0..0, ".*".to_string())],
            )?,
        };
        let exclude = match raw.topics_exclude {
            Some(list) => self.patterns(&format!("{key}.topics_exclude"), list)?,
            None => PatternList::new(
                DEFAULT_TOPICS_EXCLUDE
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            )
            .map_err(|(_, e)| self.loc.error(None, format!("{key}.topics_exclude"), e))?,
        };
        let policy = match raw.policy {
            Some(p) => self.plugin(&format!("{key}.policy"), p, BUILTIN_POLICIES)?,
            None => PluginSpec::builtin("builtin:default", &format!("{key}.policy")),
        };
        let refresh_topics_interval = self.duration(
            &format!("{key}.refresh_topics_interval"),
            raw.refresh_topics_interval,
            defaults::REFRESH_TOPICS_INTERVAL,
        )?;
        let commit_interval = self.duration(
            &format!("{key}.commit_interval"),
            raw.commit_interval,
            defaults::COMMIT_INTERVAL,
        )?;
        let replication_factor =
            self.replication_factor(&format!("{key}.replication_factor"), raw.replication_factor)?;
        let internal_replication_factor = self.replication_factor(
            &format!("{key}.internal_replication_factor"),
            raw.internal_replication_factor,
        )?;
        let groups = TopicFilter {
            include: match raw.groups {
                Some(list) => self.patterns(&format!("{key}.groups"), list)?,
                None => self.defaults(&format!("{key}.groups"), defaults::GROUPS)?,
            },
            exclude: match raw.groups_exclude {
                Some(list) => self.patterns(&format!("{key}.groups_exclude"), list)?,
                None => self.defaults(&format!("{key}.groups_exclude"), DEFAULT_GROUPS_EXCLUDE)?,
            },
        };
        let config_properties_exclude = match raw.config_properties_exclude {
            Some(list) => self.patterns(&format!("{key}.config_properties_exclude"), list)?,
            None => self.defaults(
                &format!("{key}.config_properties_exclude"),
                DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
            )?,
        };
        let offset_syncs_location = match raw.offset_syncs_location {
            None => OffsetSyncsLocation::Source,
            Some(v) => match v.get_ref().as_str() {
                "source" => OffsetSyncsLocation::Source,
                "target" => OffsetSyncsLocation::Target,
                other => {
                    return self.err(
                        v.span(),
                        format!("{key}.offset_syncs_location"),
                        format!("unknown value `{other}` (use \"source\" or \"target\")"),
                    )
                }
            },
        };
        let offset_translation = match raw.offset_translation {
            None => OffsetTranslation::default(),
            Some(v) => match v.get_ref().as_str() {
                "mm2" => OffsetTranslation::Mm2,
                "exact" => OffsetTranslation::Exact,
                other => {
                    return self.err(
                        v.span(),
                        format!("{key}.offset_translation"),
                        format!("unknown value `{other}` (use \"exact\" or \"mm2\")"),
                    )
                }
            },
        };
        let use_defaults_from = match raw.use_defaults_from {
            None => DefaultsFrom::Target,
            Some(v) => match v.get_ref().as_str() {
                "target" => DefaultsFrom::Target,
                "source" => DefaultsFrom::Source,
                other => {
                    return self.err(
                        v.span(),
                        format!("{key}.use_defaults_from"),
                        format!("unknown value `{other}` (use \"target\" or \"source\")"),
                    )
                }
            },
        };
        let offset_lag_max = match raw.offset_lag_max {
            None => defaults::OFFSET_LAG_MAX,
            Some(v) if *v.get_ref() >= 0 => *v.get_ref(),
            Some(v) => {
                return self.err(
                    v.span(),
                    format!("{key}.offset_lag_max"),
                    "must be 0 or more".into(),
                )
            }
        };
        let emit_offset_syncs = raw.emit_offset_syncs.unwrap_or(defaults::EMIT_OFFSET_SYNCS);
        let emit_checkpoints = raw.emit_checkpoints.unwrap_or(emit_offset_syncs);
        if emit_checkpoints && !emit_offset_syncs {
            return self.err(
                raw.source.span(),
                format!("{key}.emit_checkpoints"),
                "checkpoints need offset syncs: set emit_offset_syncs = true or emit_checkpoints = false".into(),
            );
        }
        let sync_group_offsets = raw
            .sync_group_offsets
            .unwrap_or(defaults::SYNC_GROUP_OFFSETS);
        if sync_group_offsets && !emit_checkpoints {
            return self.err(
                raw.source.span(),
                format!("{key}.sync_group_offsets"),
                "group offset sync needs checkpoints: set emit_checkpoints = true".into(),
            );
        }
        let interval = |name: &str, raw: Option<Spanned<String>>, default: Duration| {
            self.duration(&format!("{key}.{name}"), raw, default)
        };
        let checkpoint_interval = interval(
            "checkpoint_interval",
            raw.checkpoint_interval,
            defaults::CHECKPOINT_INTERVAL,
        )?;
        let refresh_groups_interval = interval(
            "refresh_groups_interval",
            raw.refresh_groups_interval,
            defaults::REFRESH_GROUPS_INTERVAL,
        )?;
        let sync_group_offsets_interval = interval(
            "sync_group_offsets_interval",
            raw.sync_group_offsets_interval,
            defaults::SYNC_GROUP_OFFSETS_INTERVAL,
        )?;
        let heartbeat_interval = interval(
            "heartbeat_interval",
            raw.heartbeat_interval,
            defaults::HEARTBEAT_INTERVAL,
        )?;
        let sync_topic_configs_interval = interval(
            "sync_topic_configs_interval",
            raw.sync_topic_configs_interval,
            defaults::SYNC_TOPIC_CONFIGS_INTERVAL,
        )?;
        let sync_topic_acls_interval = interval(
            "sync_topic_acls_interval",
            raw.sync_topic_acls_interval,
            defaults::SYNC_TOPIC_ACLS_INTERVAL,
        )?;
        let mut processors = Vec::new();
        for (j, p) in raw.processors.unwrap_or_default().into_iter().enumerate() {
            processors.push(self.processor(&format!("{key}.processors[{j}]"), p)?);
        }
        let dead_letter_topic = match raw.dead_letter_topic {
            Some(t) if t.get_ref().trim().is_empty() => {
                return self.err(
                    t.span(),
                    format!("{key}.dead_letter_topic"),
                    "must not be empty".into(),
                );
            }
            Some(t) => t.into_inner(),
            None => defaults::dead_letter_topic(raw.source.get_ref()),
        };
        let mm2_offsets_topic = match raw.mm2_offsets_topic {
            Some(t) if t.get_ref().trim().is_empty() => {
                return self.err(
                    t.span(),
                    format!("{key}.mm2_offsets_topic"),
                    "must not be empty".into(),
                );
            }
            Some(t) => t.into_inner(),
            None => defaults::mm2_offsets_topic(raw.source.get_ref()),
        };
        let mode = match raw.delivery {
            None => defaults::DELIVERY,
            Some(v) => match v.get_ref().as_str() {
                "at-least-once" => DeliveryMode::AtLeastOnce,
                "exactly-once" => DeliveryMode::ExactlyOnce,
                other => {
                    return self.err(
                        v.span(),
                        format!("{key}.delivery"),
                        format!(
                            "unknown value `{other}` (use \"at-least-once\" or \"exactly-once\")"
                        ),
                    )
                }
            },
        };
        let transaction_interval = self.duration(
            &format!("{key}.transaction_interval"),
            raw.transaction_interval,
            commit_interval,
        )?;
        let compression = match raw.compression {
            None => None,
            Some(c) if COMPRESSION_TYPES.contains(&c.get_ref().as_str()) => Some(c.into_inner()),
            Some(c) => {
                return self.err(
                    c.span(),
                    format!("{key}.compression"),
                    format!(
                    "unknown value `{}` (use \"none\", \"gzip\", \"snappy\", \"lz4\" or \"zstd\")",
                    c.get_ref()
                ),
                )
            }
        };
        let tasks = match raw.tasks {
            None => defaults::TASKS,
            Some(t) => match u32::try_from(*t.get_ref()) {
                Ok(n) if (1..=defaults::MAX_TASKS).contains(&n) => n,
                _ => {
                    return self.err(
                        t.span(),
                        format!("{key}.tasks"),
                        format!("must be between 1 and {}", defaults::MAX_TASKS),
                    )
                }
            },
        };
        if raw.enabled == Some(false) {
            return Ok(None);
        }
        Ok(Some(Flow {
            tasks,
            source: raw.source.into_inner(),
            target: raw.target.into_inner(),
            topics: TopicFilter { include, exclude },
            policy,
            processors,
            refresh_topics_interval,
            replication_factor,
            internal_replication_factor,
            provenance_header: raw.provenance_header.unwrap_or(defaults::PROVENANCE_HEADER),
            mm2_offsets_topic,
            delivery: DeliverySettings {
                mode,
                transaction_interval,
                commit_interval,
                compression,
                dead_letter_topic,
            },
            checkpoints: CheckpointSettings {
                enabled: emit_checkpoints,
                groups,
                interval: checkpoint_interval,
                refresh_groups_interval,
                sync_group_offsets,
                sync_group_offsets_interval,
            },
            offset_syncs: OffsetSyncSettings {
                enabled: emit_offset_syncs,
                location: offset_syncs_location,
                lag_max: offset_lag_max,
                translation: offset_translation,
            },
            heartbeats: HeartbeatSettings {
                enabled: raw.emit_heartbeats.unwrap_or(defaults::EMIT_HEARTBEATS),
                interval: heartbeat_interval,
                replication: raw
                    .heartbeats_replication
                    .unwrap_or(defaults::HEARTBEATS_REPLICATION),
            },
            config_sync: ConfigSyncSettings {
                enabled: raw
                    .sync_topic_configs
                    .unwrap_or(defaults::SYNC_TOPIC_CONFIGS),
                interval: sync_topic_configs_interval,
                exclude: config_properties_exclude,
                use_defaults_from,
            },
            acl_sync: AclSyncSettings {
                enabled: raw.sync_topic_acls.unwrap_or(defaults::SYNC_TOPIC_ACLS),
                interval: sync_topic_acls_interval,
            },
        }))
    }

    fn replication_factor(&self, key: &str, raw: Option<Spanned<i64>>) -> Result<i32, ConfigError> {
        match raw {
            None => Ok(defaults::REPLICATION_FACTOR),
            Some(rf) => match i32::try_from(*rf.get_ref()) {
                Ok(n) if n == -1 || n >= 1 => Ok(n),
                _ => self.err(
                    rf.span(),
                    key.to_string(),
                    "must be -1 (broker default) or at least 1".into(),
                ),
            },
        }
    }

    fn defaults(&self, key: &str, patterns: &[&str]) -> Result<PatternList, ConfigError> {
        PatternList::new(patterns.iter().map(|s| s.to_string()).collect())
            .map_err(|(_, e)| self.loc.error(None, key, e))
    }

    fn patterns(&self, key: &str, list: Vec<Spanned<String>>) -> Result<PatternList, ConfigError> {
        let spans: Vec<_> = list.iter().map(|s| s.span()).collect();
        PatternList::new(list.into_iter().map(Spanned::into_inner).collect()).map_err(|(i, e)| {
            let span = spans.get(i).cloned().filter(|s| !s.is_empty());
            let first = e.lines().last().unwrap_or(&e).trim().to_string();
            self.loc.error(
                span,
                format!("{key}[{i}]"),
                format!("invalid regex: {first}"),
            )
        })
    }

    fn duration(
        &self,
        key: &str,
        raw: Option<Spanned<String>>,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        let Some(raw) = raw else {
            return Ok(default);
        };
        let (span, text) = (Some(raw.span()), raw.into_inner());
        match parse_duration(&text) {
            Ok(d) if d.is_zero() => Err(self.loc.error(span, key, "must be greater than zero")),
            Ok(d) => Ok(d),
            Err(e) => Err(self.loc.error(span, key, e)),
        }
    }
}

/// Why `name` cannot be a `[cluster] instance` (a `group.instance.id` and a metrics label).
fn check_instance(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty: name this process (e.g. \"${env:HOSTNAME}\")");
    }
    if name.len() > 200 {
        return Err("is longer than 200 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err("may only hold ASCII letters, digits, `.`, `_` and `-`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::PluginLocation;

    const GOOD: &str = r#"
[clusters.a]
bootstrap = "127.0.0.1:9092"
[clusters.a.client]
"socket.timeout.ms" = 3000
"client.id" = "x"
[clusters.a.consumer]
"auto.offset.reset" = "earliest"

[clusters.b]
bootstrap = "127.0.0.1:9093"

[[flow]]
source = "a"
target = "b"
topics = ["orders", "pay.*"]
policy = { plugin = "builtin:identity", config = { separator = "_" } }
refresh_topics_interval = "2s"

[[flow]]
source = "b"
target = "a"
"#;

    fn parse(text: &str) -> Result<Pipeline, ConfigError> {
        Pipeline::parse(Path::new("/tmp/p.toml"), text)
    }

    #[test]
    fn parses_a_good_pipeline() {
        let p = parse(GOOD).unwrap();
        assert_eq!(p.flows.len(), 2);
        let f = &p.flows[0];
        assert_eq!(f.name(), "a->b");
        assert!(f.topics.should_replicate("orders"));
        assert!(f.topics.should_replicate("payments"));
        assert!(!f.topics.should_replicate("orders-v1"));
        assert_eq!(f.refresh_topics_interval, Duration::from_secs(2));
        assert_eq!(
            f.policy.location,
            PluginLocation::Builtin("builtin:identity".into())
        );
        assert_eq!(f.policy.config.trim(), "separator = \"_\"");
        let back = &p.flows[1];
        assert_eq!(
            back.policy.location,
            PluginLocation::Builtin("builtin:default".into())
        );
        assert_eq!(back.refresh_topics_interval, Duration::from_secs(30));
        assert!(!back.topics.should_replicate("__consumer_offsets"));
        let cfg = p.clusters["a"].client_config(ClientRole::Consumer);
        assert_eq!(cfg["bootstrap.servers"], "127.0.0.1:9092");
        assert_eq!(cfg["socket.timeout.ms"], "3000");
        assert_eq!(cfg["auto.offset.reset"], "earliest");
        assert!(!p.clusters["a"]
            .client_config(ClientRole::Producer)
            .contains_key("auto.offset.reset"));
        assert_eq!(p.flows_for_targets(&["a".into()]).len(), 1);
        assert_eq!(p.flows_for_targets(&[]).len(), 2);
    }

    /// Each bad pipeline gives an error naming the line and key.
    #[test]
    fn bad_pipelines_name_line_and_key() {
        let cases: &[(&str, &str, usize, &str)] = &[
            ("unknown key", "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopicz = [\"x\"]\n", 17, "topicz"),
            ("bad regex", "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"ok\", \"(\"]\n", 17, "flow[0].topics[1]"),
            ("unknown alias", "[[flow]]\nsource = \"a\"\ntarget = \"c\"\n", 16, "flow[0].target"),
            ("self flow", "[[flow]]\nsource = \"a\"\ntarget = \"a\"\n", 16, "flow[0].target"),
            ("missing plugin", "[[flow]]\nsource = \"a\"\ntarget = \"b\"\npolicy = { plugin = \"nope/missing.wasm\" }\n", 17, "flow[0].policy.plugin"),
            ("unknown builtin", "[[flow]]\nsource = \"a\"\ntarget = \"b\"\npolicy = { plugin = \"builtin:nope\" }\n", 17, "flow[0].policy.plugin"),
            ("bad duration", "[[flow]]\nsource = \"a\"\ntarget = \"b\"\nrefresh_topics_interval = \"30\"\n", 17, "flow[0].refresh_topics_interval"),
            ("reserved client key", "[[flow]]\nsource = \"a\"\ntarget = \"b\"\n[clusters.a.producer]\nacks = \"1\"\n", 18, "clusters.a.producer.\"acks\""),
        ];
        let head = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n\n\n\n\n\n\n\n\n\n";
        assert_eq!(head.lines().count(), 13);
        for (name, body, line, key) in cases {
            let err = parse(&format!("{head}{body}")).expect_err(name);
            assert_eq!(err.line, Some(*line), "{name}: {err}");
            assert!(
                err.key == *key || err.to_string().contains(key),
                "{name}: {err}"
            );
            assert!(err.to_string().starts_with("/tmp/p.toml:"), "{name}: {err}");
        }
    }

    #[test]
    fn duplicate_flow_and_empty_pipeline_are_errors() {
        let dup = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";
        let err = parse(dup).unwrap_err();
        assert!(err.message.contains("defined twice"), "{err}");
        assert_eq!(err.line, Some(8));
        let err = parse("").unwrap_err();
        assert_eq!(err.key, "clusters");
    }

    #[test]
    fn plugin_paths_resolve_against_the_pipeline_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.wasm"), b"\0asm").unwrap();
        let text = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\npolicy = { plugin = \"p.wasm\", config = { rules = [{ match = \"a\", replace = \"b\" }] } }\n";
        let path = dir.path().join("pipeline.toml");
        std::fs::write(&path, text).unwrap();
        let p = Pipeline::load(&path).unwrap();
        assert_eq!(
            p.flows[0].policy.location,
            PluginLocation::File(dir.path().join("p.wasm"))
        );
        let cfg: toml::Table = toml::from_str(&p.flows[0].policy.config).unwrap();
        assert_eq!(cfg["rules"][0]["replace"].as_str(), Some("b"));
    }

    #[test]
    fn disabled_flows_are_skipped() {
        let text = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\nenabled = false\n[[flow]]\nsource = \"b\"\ntarget = \"a\"\n";
        let p = parse(text).unwrap();
        assert_eq!(p.flows.len(), 1);
        assert_eq!(p.flows[0].name(), "b->a");
    }
}

#[cfg(test)]
mod processor_tests {
    use super::*;
    use crate::flow::{OnError, PluginLimitSettings, PluginLocation};

    const HEAD: &str = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";

    #[test]
    fn processors_parse_in_order_with_on_error() {
        let text = format!(
            "{HEAD}processors = [\n  {{ plugin = \"builtin:filter\", config = {{ header = \"env\" }} }},\n  {{ plugin = \"builtin:json-mask\", on_error = \"dead-letter\" }},\n  {{ plugin = \"builtin:headers\", on_error = \"skip\" }},\n]\n"
        );
        let p = Pipeline::parse(Path::new("p.toml"), &text).unwrap();
        let procs = &p.flows[0].processors;
        assert_eq!(procs.len(), 3);
        assert_eq!(
            procs[0].plugin.location,
            PluginLocation::Builtin("builtin:filter".into())
        );
        assert_eq!(procs[0].on_error, OnError::Stop);
        assert_eq!(procs[0].plugin.config.trim(), "header = \"env\"");
        assert_eq!(procs[0].plugin.key, "flow[0].processors[0]");
        assert_eq!(procs[1].on_error, OnError::DeadLetter);
        assert_eq!(procs[2].on_error, OnError::Skip);
        assert_eq!(
            p.flows[0].delivery.dead_letter_topic,
            "refract.dlq.a.internal"
        );
    }

    #[test]
    fn sandbox_limits_parse_per_plugin() {
        let text = format!(
            "{HEAD}policy = {{ plugin = \"builtin:default\", call_timeout = \"2s\", max_output_bytes = \"1MiB\" }}\nprocessors = [{{ plugin = \"builtin:json-mask\", memory_limit = \"128MiB\", call_timeout = \"250ms\", max_outputs_per_record = 10, max_outputs_per_call = 500, max_output_bytes = \"8MiB\" }}]\n"
        );
        let p = Pipeline::parse(Path::new("p.toml"), &text).unwrap();
        assert_eq!(
            p.flows[0].processors[0].plugin.limits,
            PluginLimitSettings {
                memory_limit: Some(128 << 20),
                call_timeout: Some(std::time::Duration::from_millis(250)),
                max_outputs_per_record: Some(10),
                max_outputs_per_call: Some(500),
                max_output_bytes: Some(8 << 20),
            }
        );
        assert_eq!(
            p.flows[0].policy.limits,
            PluginLimitSettings {
                call_timeout: Some(std::time::Duration::from_secs(2)),
                max_output_bytes: Some(1 << 20),
                ..PluginLimitSettings::default()
            }
        );
    }

    #[test]
    fn mm2_offsets_topic_defaults_to_the_dedicated_mode_name() {
        let p = Pipeline::parse(Path::new("p.toml"), HEAD).unwrap();
        assert_eq!(p.flows[0].mm2_offsets_topic, "mm2-offsets.a.internal");
        let text = format!("{HEAD}mm2_offsets_topic = \"connect-offsets\"\n");
        let p = Pipeline::parse(Path::new("p.toml"), &text).unwrap();
        assert_eq!(p.flows[0].mm2_offsets_topic, "connect-offsets");
        let text = format!("{HEAD}mm2_offsets_topic = \" \"\n");
        let e = Pipeline::parse(Path::new("p.toml"), &text).unwrap_err();
        assert!(e.to_string().contains("flow[0].mm2_offsets_topic"), "{e}");
    }

    #[test]
    fn bad_processors_name_line_and_key() {
        let cases = [
            (
                "processors = [{ plugin = \"builtin:filter\", on_error = \"retry\" }]",
                "flow[0].processors[0].on_error",
                "unknown value `retry`",
            ),
            (
                "processors = [{ plugin = \"builtin:default\" }]",
                "flow[0].processors[0].plugin",
                "unknown built-in plugin",
            ),
            (
                "processors = [{ plugin = \"nope.wasm\" }]",
                "flow[0].processors[0].plugin",
                "does not exist",
            ),
            (
                "processors = [{ plugin = \"builtin:filter\", when = 1 }]",
                "when",
                "unknown field",
            ),
            (
                "dead_letter_topic = \" \"",
                "flow[0].dead_letter_topic",
                "must not be empty",
            ),
            (
                "processors = [{ plugin = \"builtin:filter\", max_outputs_per_record = 0 }]",
                "flow[0].processors[0].max_outputs_per_record",
                "must be a whole number from 1",
            ),
            (
                "processors = [{ plugin = \"builtin:filter\", max_outputs_per_call = -5 }]",
                "flow[0].processors[0].max_outputs_per_call",
                "must be a whole number from 1",
            ),
            (
                "processors = [{ plugin = \"builtin:filter\", max_output_bytes = \"lots\" }]",
                "flow[0].processors[0].max_output_bytes",
                "",
            ),
        ];
        for (body, key, message) in cases {
            let err = Pipeline::parse(Path::new("p.toml"), &format!("{HEAD}{body}\n")).unwrap_err();
            assert_eq!(err.line, Some(8), "{body}: {err}");
            assert!(
                err.key == key || err.to_string().contains(key),
                "{body}: {err}"
            );
            assert!(err.message.contains(message), "{body}: {err}");
        }
    }
}

#[cfg(test)]
mod mm2_settings_tests {
    use super::*;

    const HEAD: &str = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";

    fn parse(body: &str) -> Result<Pipeline, ConfigError> {
        Pipeline::parse(Path::new("p.toml"), &format!("{HEAD}{body}\n"))
    }

    #[test]
    fn tasks_and_cluster_mode_parse_and_are_checked() {
        let p = parse("").unwrap();
        assert_eq!(p.flows[0].tasks, 1);
        assert_eq!(p.cluster, None, "cluster mode is off without [cluster]");
        assert_eq!(parse("tasks = 6").unwrap().flows[0].tasks, 6);
        for bad in ["tasks = 0", "tasks = -1", "tasks = 1025"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.key, "flow[0].tasks", "{bad}");
            assert!(e.message.contains("between 1 and 1024"), "{e}");
        }
        let with = |cluster: &str| {
            let text = format!("[cluster]\n{cluster}\n{HEAD}");
            Pipeline::parse_with_env(Path::new("p.toml"), &text, &|name: &str| match name {
                "POD" => Ok("refract-7d9f-x2".to_string()),
                _ => Err(std::env::VarError::NotPresent),
            })
        };
        let c = with("").unwrap().cluster.unwrap();
        assert_eq!(c.instance, None);
        assert_eq!(c.session_timeout, defaults::SESSION_TIMEOUT);
        let c = with("instance = \"${env:POD}\"\nsession_timeout = \"6s\"")
            .unwrap()
            .cluster
            .unwrap();
        assert_eq!(c.instance.as_deref(), Some("refract-7d9f-x2"));
        assert_eq!(c.session_timeout, Duration::from_secs(6));
        assert_eq!(with("enabled = false").unwrap().cluster, None);
        let cases = [
            ("instance = \"a b\"", "cluster.instance", "`a b` may only hold"),
            ("instance = \"\"", "cluster.instance", "is empty"),
            ("instance = \"${env:NOPE}\"", "cluster.instance", "NOPE"),
            ("session_timeout = \"500ms\"", "cluster.session_timeout", "between 1s and 30m"),
            ("sessions = 3", "sessions", "unknown field `sessions`, expected one of `enabled`, `instance`, `session_timeout`"),
        ];
        for (text, key, says) in cases {
            let e = with(text).unwrap_err();
            assert_eq!(e.key, key, "{text}: {e}");
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn mm2_defaults() {
        let p = parse("").unwrap();
        let f = &p.flows[0];
        assert!(f.checkpoints.groups.should_replicate("payments-app"));
        assert!(!f
            .checkpoints
            .groups
            .should_replicate("console-consumer-123"));
        assert!(!f.checkpoints.groups.should_replicate("connect-sink"));
        assert!(!f.checkpoints.groups.should_replicate("__internal"));
        assert!(f.checkpoints.enabled && f.offset_syncs.enabled && f.heartbeats.enabled);
        assert!(!f.checkpoints.sync_group_offsets);
        assert_eq!(f.offset_syncs.lag_max, 100);
        assert_eq!(f.offset_syncs.location, OffsetSyncsLocation::Source);
        assert_eq!(f.checkpoints.interval, Duration::from_secs(60));
        assert_eq!(f.heartbeats.interval, Duration::from_secs(1));
        assert!(f.config_sync.exclude.matches("min.insync.replicas"));
        assert!(!f.config_sync.exclude.matches("retention.ms"));
        assert_eq!(f.config_sync.use_defaults_from, DefaultsFrom::Target);
        assert!(f.config_sync.enabled && f.acl_sync.enabled && f.provenance_header);
        assert_eq!(f.internal_replication_factor, -1);
    }

    /// The README's example pipeline writes every flow setting with its default value (except
    /// where its comment says otherwise): loading it must give what an empty `[[flow]]` gives.
    #[test]
    fn the_readme_example_pipeline_shows_the_defaults() {
        let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"));
        let block = readme
            .split("## A pipeline\n\n```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("README has a `## A pipeline` TOML block");
        let flow = block
            .split("[[flow]]")
            .nth(1)
            .expect("the README pipeline has a [[flow]]");
        let clusters =
            "[clusters.primary]\nbootstrap = \"h:1\"\n[clusters.backup]\nbootstrap = \"h:2\"\n";
        let shown = Pipeline::parse(Path::new("p.toml"), &format!("{clusters}[[flow]]{flow}"))
            .unwrap()
            .flows
            .remove(0);
        let plain = Pipeline::parse(
            Path::new("p.toml"),
            &format!("{clusters}[[flow]]\nsource = \"primary\"\ntarget = \"backup\"\n"),
        )
        .unwrap()
        .flows
        .remove(0);
        assert_eq!(shown.topics.exclude, plain.topics.exclude);
        assert_eq!(shown.refresh_topics_interval, plain.refresh_topics_interval);
        assert_eq!(shown.replication_factor, plain.replication_factor);
        assert_eq!(
            shown.internal_replication_factor,
            plain.internal_replication_factor
        );
        assert_eq!(shown.provenance_header, plain.provenance_header);
        assert_eq!(shown.delivery, plain.delivery);
        assert_eq!(shown.checkpoints, plain.checkpoints);
        assert_eq!(shown.offset_syncs, plain.offset_syncs);
        assert_eq!(shown.heartbeats, plain.heartbeats);
        assert_eq!(shown.acl_sync, plain.acl_sync);
        // config_properties_exclude is shown with one pattern, "MM2's six defaults when omitted".
        assert_eq!(shown.config_sync.enabled, plain.config_sync.enabled);
        assert_eq!(shown.config_sync.interval, plain.config_sync.interval);
        assert_eq!(
            shown.config_sync.use_defaults_from,
            plain.config_sync.use_defaults_from
        );
        assert_eq!(plain.delivery.commit_interval, defaults::COMMIT_INTERVAL);
        assert_eq!(plain.checkpoints.interval, defaults::CHECKPOINT_INTERVAL);
    }

    #[test]
    fn delivery_mode_and_transaction_interval() {
        let f = parse("").unwrap().flows.remove(0);
        assert_eq!(f.delivery.mode, DeliveryMode::AtLeastOnce);
        assert_eq!(f.delivery.transaction_interval, defaults::COMMIT_INTERVAL);
        let f = parse("delivery = \"exactly-once\"\ncommit_interval = \"700ms\"")
            .unwrap()
            .flows
            .remove(0);
        assert_eq!(f.delivery.mode, DeliveryMode::ExactlyOnce);
        // Unless set, a transaction lasts the flow's commit interval.
        assert_eq!(f.delivery.transaction_interval, Duration::from_millis(700));
        let f = parse("delivery = \"exactly-once\"\ntransaction_interval = \"100ms\"")
            .unwrap()
            .flows
            .remove(0);
        assert_eq!(f.delivery.transaction_interval, Duration::from_millis(100));
        let e = parse("delivery = \"exactly-twice\"").unwrap_err();
        assert_eq!(e.key, "flow[0].delivery");
        assert!(e.message.contains("`exactly-twice`"), "{e}");
        let e = parse("transaction_interval = \"0s\"").unwrap_err();
        assert_eq!(e.key, "flow[0].transaction_interval");
    }

    #[test]
    fn mm2_settings_parse_and_are_checked() {
        let p = parse(
            "groups = [\"app-.*\"]\ngroups_exclude = []\nsync_group_offsets = true\noffset_syncs_location = \"target\"\noffset_lag_max = 0\ncheckpoint_interval = \"1s\"\nuse_defaults_from = \"source\"\ninternal_replication_factor = 3",
        )
        .unwrap();
        let f = &p.flows[0];
        assert!(f.checkpoints.groups.should_replicate("app-1"));
        assert!(!f.checkpoints.groups.should_replicate("other"));
        assert!(f.checkpoints.sync_group_offsets);
        assert_eq!(f.offset_syncs.location, OffsetSyncsLocation::Target);
        assert_eq!(f.offset_syncs.lag_max, 0);
        assert_eq!(f.offset_syncs.translation, OffsetTranslation::Exact);
        assert_eq!(f.checkpoints.interval, Duration::from_secs(1));
        assert_eq!(f.config_sync.use_defaults_from, DefaultsFrom::Source);
        assert_eq!(f.internal_replication_factor, 3);
        let cases = [
            (
                "offset_syncs_location = \"middle\"",
                "flow[0].offset_syncs_location",
            ),
            ("offset_lag_max = -1", "flow[0].offset_lag_max"),
            (
                "offset_translation = \"precise\"",
                "flow[0].offset_translation",
            ),
            ("use_defaults_from = \"x\"", "flow[0].use_defaults_from"),
            ("groups = [\"(\"]", "flow[0].groups[0]"),
            (
                "emit_offset_syncs = false\nemit_checkpoints = true",
                "flow[0].emit_checkpoints",
            ),
            (
                "emit_checkpoints = false\nsync_group_offsets = true",
                "flow[0].sync_group_offsets",
            ),
            (
                "internal_replication_factor = 0",
                "flow[0].internal_replication_factor",
            ),
        ];
        for (body, key) in cases {
            let err = parse(body).unwrap_err();
            assert_eq!(err.key, key, "{body}: {err}");
        }
        let with_metrics = Pipeline::parse(
            Path::new("p.toml"),
            &format!("[metrics]\nlisten = \"127.0.0.1:9464\"\n{HEAD}"),
        )
        .unwrap();
        assert_eq!(with_metrics.metrics_listen.map(|a| a.port()), Some(9464));
        let err = Pipeline::parse(
            Path::new("p.toml"),
            &format!("[metrics]\nlisten = \"localhost\"\n{HEAD}"),
        )
        .unwrap_err();
        assert_eq!((err.key.as_str(), err.line), ("metrics.listen", Some(2)));
        // Turning off offset syncs turns off checkpoints by default.
        let p = parse("emit_offset_syncs = false").unwrap();
        assert!(!p.flows[0].checkpoints.enabled);
    }
}

#[cfg(test)]
mod secrets_tests {
    use super::*;
    use std::env::VarError;

    fn env(name: &str) -> Result<String, VarError> {
        match name {
            "KAFKA_PASS" => Ok("s3cr3t-env".into()),
            "BOOT" => Ok("k1:9093,k2:9093".into()),
            "USER" => Ok("alice".into()),
            _ => Err(VarError::NotPresent),
        }
    }

    const TAIL: &str =
        "[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";

    fn parse_in(dir: &Path, text: &str) -> Result<Pipeline, ConfigError> {
        Pipeline::parse_with_env(&dir.join("p.toml"), text, &env)
    }

    #[test]
    fn references_resolve_and_are_shown_as_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("key.pem"),
            "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("creds.properties"),
            "# kafka\nsasl.password=from-props\n",
        )
        .unwrap();
        let text = format!(
            "[clusters.a]\nbootstrap = \"${{env:BOOT}}\"\n[clusters.a.client]\n\"sasl.username\" = \"${{env:USER}}-svc\"\n\"sasl.password\" = \"${{env:KAFKA_PASS}}\"\n\"ssl.key.password\" = \"literal-pass\"\n\"socket.timeout.ms\" = 3000\n[clusters.a.consumer]\n\"ssl.key.pem\" = \"${{file:key.pem}}\"\n[clusters.a.producer]\n\"sasl.password\" = \"${{file:{}:sasl.password}}\"\n{TAIL}",
            dir.path().join("creds.properties").display()
        );
        let p = parse_in(dir.path(), &text).unwrap();
        let a = &p.clusters["a"];
        assert_eq!(a.bootstrap, "k1:9093,k2:9093");
        let consumer = a.client_config(ClientRole::Consumer);
        assert_eq!(consumer["bootstrap.servers"], "k1:9093,k2:9093");
        assert_eq!(consumer["sasl.username"], "alice-svc");
        assert_eq!(consumer["sasl.password"], "s3cr3t-env");
        assert_eq!(consumer["ssl.key.password"], "literal-pass");
        assert_eq!(
            consumer["ssl.key.pem"],
            "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----"
        );
        assert_eq!(
            a.client_config(ClientRole::Producer)["sasl.password"],
            "from-props"
        );
        let shown = a.display_settings(ClientRole::Consumer);
        let want: BTreeMap<String, String> = [
            ("bootstrap.servers", "${env:BOOT}"),
            ("sasl.password", "${env:KAFKA_PASS}"),
            ("sasl.username", "${env:USER}-svc"),
            ("socket.timeout.ms", "3000"),
            ("ssl.key.password", "[redacted]"),
            ("ssl.key.pem", "${file:key.pem}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(shown, want);
        let debug = format!("{:?}", p.clusters["b"]);
        assert_eq!(
            debug,
            "Cluster { alias: \"b\", bootstrap: \"h:2\", client: {}, consumer: {}, producer: {}, admin: {}, oauthbearer_token: None }"
        );
        let debug = format!("{p:?}");
        for secret in ["s3cr3t-env", "literal-pass", "from-props", "abc", "alice"] {
            assert!(!debug.contains(secret), "{secret} in {debug}");
        }
        assert!(
            debug.contains("\"sasl.password\": \"${env:KAFKA_PASS}\""),
            "{debug}"
        );
        assert!(
            debug.contains("\"ssl.key.password\": \"[redacted]\""),
            "{debug}"
        );
    }

    #[test]
    fn reference_errors_name_file_line_key_and_reference_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        let head = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.client]\n";
        let cases = [
            (
                "\"sasl.password\" = \"${env:NOPE}\"",
                "clusters.a.client.\"sasl.password\"",
                "reference `${env:NOPE}`: environment variable `NOPE` is not set",
            ),
            (
                "\"sasl.password\" = \"pa${ss-word\"",
                "clusters.a.client.\"sasl.password\"",
                "unterminated `${`: a reference is `${env:NAME}`, `${file:/path}` or `${file:/path:key}`",
            ),
            (
                "\"sasl.password\" = \"${vault:kv/kafka}\"",
                "clusters.a.client.\"sasl.password\"",
                "reference `${vault:kv/kafka}`: unknown provider `vault`: refract resolves `${env:NAME}`, `${file:/path}` and `${file:/path:key}`",
            ),
            (
                "\"sasl.password\" = \"${env:KAFKA_PASS}${file:missing.txt}\"",
                "clusters.a.client.\"sasl.password\"",
                "reference `${file:missing.txt}`: cannot read `",
            ),
        ];
        for (line, key, message) in cases {
            let err = parse_in(dir.path(), &format!("{head}{line}\n{TAIL}")).unwrap_err();
            assert_eq!(err.file, file);
            assert_eq!(err.line, Some(4), "{err}");
            assert_eq!(err.key, key, "{err}");
            assert!(err.message.starts_with(message), "{err}");
            let shown = err.to_string();
            assert!(
                !shown.contains("s3cr3t-env") && !shown.contains("ss-word"),
                "{shown}"
            );
        }
        let err = parse_in(
            dir.path(),
            &format!("[clusters.a]\nbootstrap = \"${{env:NOPE}}\"\n{TAIL}"),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}:2: clusters.a.bootstrap: reference `${{env:NOPE}}`: environment variable `NOPE` is not set", file.display())
        );
    }

    #[test]
    fn java_key_stores_are_refused_with_a_conversion_hint() {
        let dir = tempfile::tempdir().unwrap();
        let disguised = dir.path().join("client.p12");
        std::fs::write(&disguised, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let pem = dir.path().join("ca.pem");
        std::fs::write(&pem, "-----BEGIN CERTIFICATE-----\n").unwrap();
        let head = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.client]\n";
        let d = disguised.display();
        let err = parse_in(
            dir.path(),
            &format!("{head}\"ssl.keystore.location\" = \"{d}\"\n{TAIL}"),
        )
        .unwrap_err();
        assert_eq!(err.key, "clusters.a.client.\"ssl.keystore.location\"");
        assert_eq!(err.line, Some(4));
        let p12 = dir.path().join("client.p12").with_extension("p12");
        assert_eq!(
            err.message,
            format!("`{d}` is a Java KeyStore (JKS); librdkafka cannot read Java KeyStores (JKS); convert it to PKCS#12 with `keytool -importkeystore -srckeystore {d} -destkeystore {} -deststoretype PKCS12`, then set ssl.keystore.location = \"{}\" and ssl.keystore.password", p12.display(), p12.display())
        );
        let err = parse_in(
            dir.path(),
            &format!("{head}[clusters.a.consumer]\n\"ssl.ca.location\" = \"/etc/kafka/trust.jks\"\n{TAIL}"),
        )
        .unwrap_err();
        assert_eq!(err.key, "clusters.a.consumer.\"ssl.ca.location\"");
        assert!(err.message.starts_with("`/etc/kafka/trust.jks` is a Java KeyStore (JKS); librdkafka has no trust stores and reads CA certificates from PEM; export them with `keytool -exportcert -rfc -alias <alias> -keystore /etc/kafka/trust.jks -file /etc/kafka/ca.pem`"), "{err}");
        let err = parse_in(
            dir.path(),
            &format!(
                "{head}\"ssl.truststore.location\" = \"{}\"\n{TAIL}",
                pem.display()
            ),
        )
        .unwrap_err();
        assert_eq!(err.key, "clusters.a.client.\"ssl.truststore.location\"");
        assert_eq!(err.message, "`ssl.truststore.location` is a Java client setting; librdkafka has no trust stores: set \"ssl.ca.location\" to a PEM file of the CA certificates (or \"ssl.ca.pem\" to the PEM text)");
        let err = parse_in(
            dir.path(),
            &format!("{head}\"ssl.truststore.location\" = \"{d}\"\n{TAIL}"),
        )
        .unwrap_err();
        assert!(err.message.starts_with("`ssl.truststore.location` is a Java client setting; librdkafka has no trust stores and reads CA certificates from PEM; export them with `keytool -exportcert"), "{err}");
        let err = parse_in(
            dir.path(),
            &format!("{head}\"ssl.truststore.password\" = \"x\"\n{TAIL}"),
        )
        .unwrap_err();
        assert_eq!(err.key, "clusters.a.client.\"ssl.truststore.password\"");
        for (key, hint) in [
            ("sasl.jaas.config", "`sasl.jaas.config` is a Java client setting; librdkafka takes SASL credentials as \"sasl.username\" and \"sasl.password\""),
            ("ssl.keystore.type", "`ssl.keystore.type` is a Java client setting; librdkafka reads a PKCS#12 file from \"ssl.keystore.location\""),
        ] {
            let err = parse_in(dir.path(), &format!("{head}\"{key}\" = \"x\"\n{TAIL}")).unwrap_err();
            assert_eq!(err.key, format!("clusters.a.client.\"{key}\""));
            assert_eq!(err.line, Some(4));
            assert!(err.message.starts_with(hint), "{err}");
        }
        // PEM and PKCS#12 files are fine.
        let p = parse_in(
            dir.path(),
            &format!("{head}\"ssl.ca.location\" = \"{}\"\n\"ssl.keystore.location\" = \"/etc/kafka/client.p12\"\n{TAIL}", pem.display()),
        )
        .unwrap();
        assert_eq!(
            p.clusters["a"].client_config(ClientRole::Admin)["ssl.keystore.location"],
            "/etc/kafka/client.p12"
        );
    }

    #[test]
    fn static_oauthbearer_token() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "eyJhbGciOi.first.sig\n").unwrap();
        let oauth = "[clusters.a.client]\n\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"OAUTHBEARER\"\n";
        let text = format!(
            "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.oauthbearer]\ntoken = \"${{file:token}}\"\n{oauth}{TAIL}"
        );
        let p = parse_in(dir.path(), &text).unwrap();
        let a = &p.clusters["a"];
        assert_eq!(a.static_oauth_token(), Some("eyJhbGciOi.first.sig"));
        assert_eq!(p.clusters["b"].static_oauth_token(), None);
        let debug = format!("{a:?}");
        assert!(
            debug.ends_with("oauthbearer_token: Some(\"${file:token}\") }"),
            "{debug}"
        );
        assert!(!debug.contains("first.sig"));
        assert!(!a
            .display_settings(ClientRole::Consumer)
            .values()
            .any(|v| v.contains("sig")));
        // A rotated token file is read again on demand.
        std::fs::write(&token, "eyJhbGciOi.second.sig\n").unwrap();
        assert_eq!(
            a.read_static_oauth_token().unwrap().as_deref(),
            Some("eyJhbGciOi.second.sig")
        );
        assert_eq!(a.static_oauth_token(), Some("eyJhbGciOi.first.sig"));
        std::fs::remove_file(&token).unwrap();
        let err = a.read_static_oauth_token().unwrap_err();
        assert_eq!(err.key, "clusters.a.oauthbearer.token");
        assert!(
            err.message
                .starts_with("reference `${file:token}`: cannot read"),
            "{err}"
        );
        std::fs::write(&token, "t\n").unwrap();
        // A literal token is redacted.
        let literal = format!("[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.oauthbearer]\ntoken = \"eyJ.literal\"\n{oauth}{TAIL}");
        let p = parse_in(dir.path(), &literal).unwrap();
        let debug = format!("{:?}", p.clusters["a"]);
        assert!(
            debug.ends_with("oauthbearer_token: Some(\"[redacted]\") }"),
            "{debug}"
        );
        assert_eq!(
            p.clusters["a"]
                .read_static_oauth_token()
                .unwrap()
                .as_deref(),
            Some("eyJ.literal")
        );

        let cases = [
            ("token = \"\"\n", oauth.to_string(), "clusters.a.oauthbearer.token", "the token is empty"),
            ("token = \"t\"\n", String::new(), "clusters.a.oauthbearer.token", "a static OAUTHBEARER token needs \"sasl.mechanism\" = \"OAUTHBEARER\" for every client: set it in [clusters.a.client]"),
            ("token = \"t\"\n", format!("{oauth}[clusters.a.admin]\n\"sasl.mechanism\" = \"PLAIN\"\n"), "clusters.a.oauthbearer.token", "a static OAUTHBEARER token needs \"sasl.mechanism\" = \"OAUTHBEARER\" for every client: set it in [clusters.a.client]"),
            ("token = \"t\"\n", format!("{oauth}\"enable.sasl.oauthbearer.unsecure.jwt\" = true\n"), "clusters.a.oauthbearer.token", "a static token and enable.sasl.oauthbearer.unsecure.jwt = true both supply the OAUTHBEARER token; keep one"),
        ];
        // OIDC without its token endpoint: refused up front, naming the setting.
        let text = format!("[clusters.a]\nbootstrap = \"h:1\"\n{oauth}\"sasl.oauthbearer.method\" = \"oidc\"\n\"sasl.oauthbearer.client.secret\" = \"s3cret\"\n{TAIL}");
        let err = parse_in(dir.path(), &text).unwrap_err();
        assert_eq!(err.key, "clusters.a.client", "{err}");
        assert_eq!(
            err.message,
            "OIDC settings of the cluster's consumer clients: sasl.oauthbearer.method = \"oidc\" needs \"sasl.oauthbearer.token.endpoint.url\"",
        );
        // Complete: librdkafka gets none of the OIDC settings; refract's token client gets all.
        let text = format!("[clusters.a]\nbootstrap = \"h:1\"\n{oauth}\"sasl.oauthbearer.method\" = \"oidc\"\n\"sasl.oauthbearer.client.secret\" = \"s3cret\"\n\"sasl.oauthbearer.client.id\" = \"refract\"\n\"sasl.oauthbearer.token.endpoint.url\" = \"https://idp/token\"\n\"https.ca.location\" = \"ca.pem\"\n{TAIL}");
        let p = parse_in(dir.path(), &text).unwrap();
        let a = &p.clusters["a"];
        for role in [
            ClientRole::Consumer,
            ClientRole::Producer,
            ClientRole::Admin,
        ] {
            let librdkafka = a.client_config(role);
            assert!(
                librdkafka
                    .keys()
                    .all(|k| !k.starts_with("sasl.oauthbearer.") && !k.starts_with("https.")),
                "{librdkafka:?}"
            );
            assert_eq!(librdkafka["sasl.mechanism"], "OAUTHBEARER");
            let oidc = a.oidc(role).expect("oidc");
            assert_eq!(oidc.client_secret, "s3cret");
            assert_eq!(oidc.ca_location.as_deref(), Some("ca.pem"));
        }
        assert!(!format!("{a:?}").contains("s3cret"));
        for (table, client, key, message) in cases {
            let text = format!("[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.oauthbearer]\n{table}{client}{TAIL}");
            let err = parse_in(dir.path(), &text).unwrap_err();
            assert_eq!(
                (err.key.as_str(), err.message.as_str()),
                (key, message),
                "{text}"
            );
            assert_eq!(err.line, Some(4), "{err}");
        }
        let err = parse_in(
            dir.path(),
            &format!(
                "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.oauthbearer]\ntokn = \"t\"\n{TAIL}"
            ),
        )
        .unwrap_err();
        assert_eq!(err.line, Some(4));
        assert!(err.message.contains("unknown field `tokn`"), "{err}");
    }

    #[test]
    fn flow_compression() {
        let dir = tempfile::tempdir().unwrap();
        let head = "[clusters.a]\nbootstrap = \"h:1\"\n";
        let p = parse_in(dir.path(), &format!("{head}{TAIL}")).unwrap();
        assert_eq!(p.flows[0].delivery.compression, None);
        for c in COMPRESSION_TYPES {
            let p = parse_in(dir.path(), &format!("{head}{TAIL}compression = \"{c}\"\n")).unwrap();
            assert_eq!(p.flows[0].delivery.compression.as_deref(), Some(*c));
        }
        for bad in ["brotli", "ZSTD", ""] {
            let err = parse_in(
                dir.path(),
                &format!("{head}{TAIL}compression = \"{bad}\"\n"),
            )
            .unwrap_err();
            assert_eq!(err.key, "flow[0].compression");
            assert_eq!(err.line, Some(8));
            assert_eq!(
                err.message,
                format!("unknown value `{bad}` (use \"none\", \"gzip\", \"snappy\", \"lz4\" or \"zstd\")")
            );
        }
        // compression.level stays a plain producer setting.
        let p = parse_in(
            dir.path(),
            &format!("{head}[clusters.a.producer]\n\"compression.level\" = 6\n{TAIL}compression = \"zstd\"\n"),
        )
        .unwrap();
        assert_eq!(
            p.clusters["a"].client_config(ClientRole::Producer)["compression.level"],
            "6"
        );
    }
}
