use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::Store;

use refract_config::PluginSpec;

use crate::bindings::policy::PolicyPlugin as PolicyWorld;
use crate::bindings::WitPluginError;
use crate::component::{compile_checked, Live, Plugin};
use crate::error::PluginError;
use crate::guest_text::{plugin_text, MESSAGE_CAP};
use crate::runtime::{PluginRuntime, PluginState};

/// Longest chain of upstream names followed when deriving an original topic.
const MAX_HOPS: usize = 64;

/// The longest topic name Kafka accepts.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Why Kafka would refuse `name` as a topic name (its rules: 1 to 249 characters out of ASCII
/// letters, digits, `.`, `_` and `-`, and neither `.` nor `..`), or `None` when it is legal.
pub fn topic_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".into());
    }
    if name == "." || name == ".." {
        return Some(format!("`{name}` is not allowed as a topic name"));
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Some(format!(
            "it is {} characters long; Kafka allows at most {MAX_TOPIC_NAME_LEN}",
            name.chars().count()
        ));
    }
    let bad: String = name
        .chars()
        .filter(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .fold(String::new(), |mut acc, c| {
            if !acc.contains(c) {
                acc.push(c);
            }
            acc
        });
    (!bad.is_empty()).then(|| {
        format!(
            "it contains {}; Kafka allows only ASCII letters, digits, `.`, `_` and `-`",
            plugin_text(&format!("{bad:?}"), MESSAGE_CAP)
        )
    })
}

/// Bytes of text in `names`, for the output budget of a call that sends them.
fn text_bytes(names: &[String]) -> usize {
    names.iter().map(String::len).sum()
}

/// A replication-policy plugin that compiled, linked and accepted its config.
/// Cheap to share; each flow makes its own [`ReplicationPolicy`] from it.
pub struct PolicyPlugin(Arc<Plugin<PolicyWorld>>);

impl std::fmt::Debug for PolicyPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyPlugin")
            .field("name", &self.0.name)
            .field("info", &self.0.info)
            .finish()
    }
}

impl PolicyPlugin {
    /// Loads `spec`, checks it exports the `policy-plugin` world at a compatible version, and
    /// instantiates it once with its config so a bad plugin is rejected before any flow starts.
    pub fn load(runtime: &Arc<PluginRuntime>, spec: &PluginSpec) -> Result<Arc<Self>, PluginError> {
        let (component, _) = compile_checked(runtime, spec, &["replication-policy"])?;
        Self::from_component(runtime, spec, &component)
    }

    pub(crate) fn from_component(
        runtime: &Arc<PluginRuntime>,
        spec: &PluginSpec,
        component: &wasmtime::component::Component,
    ) -> Result<Arc<Self>, PluginError> {
        Ok(Arc::new(Self(Arc::new(Plugin::from_component(
            runtime, spec, component,
        )?))))
    }

    /// The name refract uses for it: the built-in name or the file path.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The name and version the plugin reports about itself.
    pub fn info(&self) -> (&str, &str) {
        (&self.0.info.0, &self.0.info.1)
    }
}

/// A flow's view of its replication policy: MirrorMaker 2's ReplicationPolicy answered by the
/// plugin, cached per topic, plus the rules MM2 derives from it (original topic, heartbeats
/// topics, cycle detection). A trapped instance is dropped and replaced on the next call.
pub struct ReplicationPolicy {
    plugin: Arc<PolicyPlugin>,
    live: Live<PolicyWorld>,
    remote: HashMap<(String, String), String>,
    source: HashMap<String, Option<String>>,
    upstream: HashMap<String, Option<String>>,
    internal: HashMap<String, bool>,
    heartbeats: Option<String>,
}

impl ReplicationPolicy {
    /// A policy backed by a fresh instance of `plugin`.
    pub fn new(plugin: Arc<PolicyPlugin>) -> Self {
        Self {
            live: Live::new(plugin.0.clone()),
            plugin,
            remote: HashMap::new(),
            source: HashMap::new(),
            upstream: HashMap::new(),
            internal: HashMap::new(),
            heartbeats: None,
        }
    }

    /// The plugin behind this policy.
    pub fn plugin(&self) -> &Arc<PolicyPlugin> {
        &self.plugin
    }

    /// One call on the live instance; `input_bytes` is what it sends (the answer may be as
    /// long again on top of the output budget).
    fn with_instance<R>(
        &mut self,
        call: &str,
        input_bytes: usize,
        f: impl FnOnce(
            &PolicyWorld,
            &mut Store<PluginState>,
        ) -> wasmtime::Result<Result<R, WitPluginError>>,
    ) -> Result<R, PluginError> {
        self.live.call(call, input_bytes, |w, _, s| f(w, s))
    }

    fn check_len<T>(&self, call: &str, got: Vec<T>, want: usize) -> Result<Vec<T>, PluginError> {
        self.live.check_len(call, got, want, "topics")
    }

    /// Remote names for `topics` from `source_cluster` (`formatRemoteTopic`), in order.
    pub fn format_remote_topics(
        &mut self,
        source_cluster: &str,
        topics: &[String],
    ) -> Result<Vec<String>, PluginError> {
        let missing: Vec<String> = topics
            .iter()
            .filter(|t| {
                !self
                    .remote
                    .contains_key(&(source_cluster.to_string(), (*t).clone()))
            })
            .cloned()
            .collect();
        if !missing.is_empty() {
            let input = source_cluster.len() + text_bytes(&missing);
            let answers = self.with_instance("format-remote-topics", input, |w, s| {
                w.refract_plugin_replication_policy()
                    .call_format_remote_topics(s, source_cluster, &missing)
            })?;
            let answers = self.check_len("format-remote-topics", answers, missing.len())?;
            for (t, r) in missing.into_iter().zip(answers) {
                self.remote.insert((source_cluster.to_string(), t), r);
            }
        }
        Ok(topics
            .iter()
            .map(|t| self.remote[&(source_cluster.to_string(), t.clone())].clone())
            .collect())
    }

    /// Asks the plugin about every topic it has not answered for yet, one call per question.
    pub fn prefetch(&mut self, topics: &[String]) -> Result<(), PluginError> {
        self.fill(
            |p| &mut p.source,
            topics,
            "topic-sources",
            |w, s, t| {
                w.refract_plugin_replication_policy()
                    .call_topic_sources(s, t)
            },
        )?;
        self.fill(
            |p| &mut p.upstream,
            topics,
            "upstream-topics",
            |w, s, t| {
                w.refract_plugin_replication_policy()
                    .call_upstream_topics(s, t)
            },
        )?;
        self.fill(
            |p| &mut p.internal,
            topics,
            "is-internal-topics",
            |w, s, t| {
                w.refract_plugin_replication_policy()
                    .call_is_internal_topics(s, t)
            },
        )
    }

    /// Calls `f` once for the topics missing from the cache `pick` selects, and caches the answers.
    fn fill<T>(
        &mut self,
        pick: fn(&mut Self) -> &mut HashMap<String, T>,
        topics: &[String],
        call: &str,
        f: impl FnOnce(
            &PolicyWorld,
            &mut Store<PluginState>,
            &[String],
        ) -> wasmtime::Result<Result<Vec<T>, WitPluginError>>,
    ) -> Result<(), PluginError> {
        let missing: Vec<String> = topics
            .iter()
            .filter(|t| !pick(self).contains_key(*t))
            .cloned()
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let answers = self.with_instance(call, text_bytes(&missing), |w, s| f(w, s, &missing))?;
        let answers = self.check_len(call, answers, missing.len())?;
        pick(self).extend(missing.into_iter().zip(answers));
        Ok(())
    }

    /// The cluster `topic` was replicated from (`topicSource`), `None` for a local topic.
    pub fn topic_source(&mut self, topic: &str) -> Result<Option<String>, PluginError> {
        self.prefetch(&[topic.to_string()])?;
        Ok(self.source[topic].clone())
    }

    /// `topic`'s name one hop upstream (`upstreamTopic`).
    pub fn upstream_topic(&mut self, topic: &str) -> Result<Option<String>, PluginError> {
        self.prefetch(&[topic.to_string()])?;
        Ok(self.upstream[topic].clone())
    }

    /// Whether `topic` is internal and never mirrored (`isInternalTopic`).
    pub fn is_internal_topic(&mut self, topic: &str) -> Result<bool, PluginError> {
        self.prefetch(&[topic.to_string()])?;
        Ok(self.internal[topic])
    }

    /// The topic's name at its origin (`originalTopic`): upstream names followed to the end.
    pub fn original_topic(&mut self, topic: &str) -> Result<String, PluginError> {
        let mut current = topic.to_string();
        for _ in 0..MAX_HOPS {
            match self.upstream_topic(&current)? {
                Some(up) if up != current => current = up,
                _ => return Ok(current),
            }
        }
        Ok(current)
    }

    /// The heartbeats topic name (`heartbeatsTopic`).
    pub fn heartbeats_topic(&mut self) -> Result<String, PluginError> {
        if let Some(h) = &self.heartbeats {
            return Ok(h.clone());
        }
        let h = self.with_instance("heartbeats-topic", 0, |w, s| {
            w.refract_plugin_replication_policy()
                .call_heartbeats_topic(s)
                .map(Ok)
        })?;
        self.heartbeats = Some(h.clone());
        Ok(h)
    }

    /// Whether `topic` is a heartbeats topic, local or replicated (`isHeartbeatsTopic`).
    pub fn is_heartbeats_topic(&mut self, topic: &str) -> Result<bool, PluginError> {
        Ok(self.original_topic(topic)? == self.heartbeats_topic()?)
    }

    /// MirrorMaker 2's `isCycle`: whether mirroring `topic` into `target` would send records back
    /// to a cluster they came from, as far as the topic's name tells.
    pub fn is_cycle(&mut self, topic: &str, target: &str) -> Result<bool, PluginError> {
        let mut current = topic.to_string();
        for _ in 0..MAX_HOPS {
            let Some(source) = self.topic_source(&current)? else {
                return Ok(false);
            };
            if source == target {
                return Ok(true);
            }
            match self.upstream_topic(&current)? {
                Some(up) if up != current => current = up,
                _ => return Ok(false),
            }
        }
        Ok(false)
    }

    /// The offset-syncs topic for `cluster` (`offsetSyncsTopic`).
    pub fn offset_syncs_topic(&mut self, cluster: &str) -> Result<String, PluginError> {
        self.with_instance("offset-syncs-topic", cluster.len(), |w, s| {
            w.refract_plugin_replication_policy()
                .call_offset_syncs_topic(s, cluster)
                .map(Ok)
        })
    }

    /// The checkpoints topic for `cluster` (`checkpointsTopic`).
    pub fn checkpoints_topic(&mut self, cluster: &str) -> Result<String, PluginError> {
        self.with_instance("checkpoints-topic", cluster.len(), |w, s| {
            w.refract_plugin_replication_policy()
                .call_checkpoints_topic(s, cluster)
                .map(Ok)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::topic_name_problem;

    #[test]
    fn kafka_topic_name_rules() {
        for ok in ["orders", "a.orders", "A_b-c.9", &"x".repeat(249)] {
            assert_eq!(topic_name_problem(ok), None, "{ok}");
        }
        assert!(topic_name_problem("").unwrap().contains("empty"));
        assert!(topic_name_problem(".").unwrap().contains("not allowed"));
        assert!(topic_name_problem("..").unwrap().contains("not allowed"));
        assert!(topic_name_problem(&"x".repeat(250))
            .unwrap()
            .contains("250 characters"));
        let bad = topic_name_problem("a/b c/d").unwrap();
        assert!(bad.contains("\"/ \""), "{bad}");
        assert!(topic_name_problem("café").unwrap().contains("é"));
    }
}
