//! The validated pipeline ([`Pipeline`]) and the builder that turns the raw TOML into it: the
//! file-level checks (`[metrics]`, `[cluster]`, duplicate flows) and the helpers every part of
//! the pipeline uses (references, durations). Clusters, flows and plugin entries are built in
//! the sibling modules.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use crate::duration::parse_duration;
use crate::error::{ConfigError, Locator};
use crate::flow::{defaults, Flow};
use crate::raw::{RawClusterMode, RawPipeline};
use crate::secrets::{EnvLookup, Resolver, Value};

mod clusters;
mod endpoint;
mod flow_settings;
mod plugin_specs;
mod schemas;

pub use clusters::{ClientRole, Cluster};
pub use endpoint::{Endpoint, EndpointTls, ReloadAccess};

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
    /// `[metrics]`'s reload access, HTTPS files and allowed host names.
    pub endpoint: Endpoint,
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

impl Pipeline {
    /// Validates pipeline text; `path` names it in errors and anchors relative plugin paths
    /// and `${file:…}` references, which are resolved now, as `${env:…}` ones are.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        Self::parse_with_env(path, text, &|name: &str| std::env::var(name))
    }

    /// Validates pipeline text as [`Pipeline::parse`] does, without reading any other file or
    /// the environment: plugin files are not looked for, and each `${env:…}` / `${file:…}`
    /// reference is checked for its form only and stands for a placeholder value. For checking
    /// examples (the documentation's snippets) that name files of another machine.
    pub fn parse_offline(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let env = |_: &str| Err(std::env::VarError::NotPresent);
        Self::parse_inner(path, text, &env, true)
    }

    /// [`Pipeline::parse`] with `env` looking up environment variables.
    pub(crate) fn parse_with_env(
        path: &Path,
        text: &str,
        env: EnvLookup<'_>,
    ) -> Result<Self, ConfigError> {
        Self::parse_inner(path, text, env, false)
    }

    fn parse_inner(
        path: &Path,
        text: &str,
        env: EnvLookup<'_>,
        offline: bool,
    ) -> Result<Self, ConfigError> {
        let loc = Locator::new(path.to_path_buf(), text);
        let raw: RawPipeline = toml::from_str(text).map_err(|e| {
            let key = e
                .message()
                .split('`')
                .nth(1)
                .unwrap_or_default()
                .to_string();
            let mut message = e.message().trim().to_string();
            if message.starts_with("unknown field") {
                if let Some(known) = crate::keys::closest(&key) {
                    message.push_str(&format!(
                        "; did you mean `{}`? ({}: {})",
                        known.name(),
                        known.path,
                        known.description
                    ));
                }
            }
            loc.error(e.span(), key, message)
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Builder {
            loc: &loc,
            base,
            env,
            offline,
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
    /// [`Pipeline::parse_offline`]: no file but the pipeline is read, no variable looked up.
    offline: bool,
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
        let metrics_listen: Option<std::net::SocketAddr> = match &raw.metrics {
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
        let endpoint = match (&raw.metrics, metrics_listen) {
            (Some(m), Some(listen)) => self.endpoint(m, listen.ip())?,
            _ => Endpoint::default(),
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
            endpoint,
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

    /// Resolves the references in a value; errors name the key and the reference.
    fn resolve(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        text: &str,
    ) -> Result<Value, ConfigError> {
        if self.offline {
            return crate::secrets::check_form(text)
                .map_err(|message| self.loc.error(Some(span), key, message));
        }
        Resolver {
            base: &self.base,
            env: self.env,
        }
        .resolve(text)
        .map_err(|message| self.loc.error(Some(span), key, message))
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

    /// Offline, plugin files and references are not looked for; their form still is.
    #[test]
    fn offline_parsing_reads_no_other_file() {
        let text = "[metrics]\nlisten = \"127.0.0.1:9464\"\nreload_token = \"${file:/nope/token}\"\n[cluster]\ninstance = \"${env:NOPE_HOST}\"\n[clusters.a]\nbootstrap = \"${env:NOPE_BOOT}\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\npolicy = { plugin = \"nope/missing.wasm\" }\n";
        let p = Pipeline::parse_offline(Path::new("/tmp/p.toml"), text).unwrap();
        assert_eq!(
            p.flows[0].policy.location,
            PluginLocation::File("/tmp/nope/missing.wasm".into())
        );
        assert!(parse(text).is_err());
        let bad = text.replace("${env:NOPE_BOOT}", "${vault:x}");
        let err = Pipeline::parse_offline(Path::new("p.toml"), &bad).unwrap_err();
        assert_eq!(err.key, "clusters.a.bootstrap", "{err}");
        let bad = text.replace("target = \"b\"", "target = \"c\"");
        assert!(Pipeline::parse_offline(Path::new("p.toml"), &bad).is_err());
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
            "{HEAD}policy = {{ plugin = \"builtin:default\", call_timeout = \"2s\", max_output_bytes = \"1MiB\" }}\nprocessors = [{{ plugin = \"builtin:json-mask\", memory_limit = \"128MiB\", call_timeout = \"250ms\", max_outputs_per_record = 10, max_outputs_per_call = 500, max_output_bytes = \"8MiB\", max_wasm_bytes = \"1MiB\", compile_timeout = \"30s\", compile_memory_limit = \"1GiB\" }}]\n"
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
                max_wasm_bytes: Some(1 << 20),
                compile_timeout: Some(std::time::Duration::from_secs(30)),
                compile_memory_limit: Some(1 << 30),
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
