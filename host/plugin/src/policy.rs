use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::component::Component;
use wasmtime::Store;

use refract_config::PluginSpec;

use crate::bindings::{PolicyPlugin as PolicyWorld, PolicyPluginPre, WitPluginError};
use crate::error::{describe_trap, PluginError};
use crate::runtime::{PluginRuntime, PluginState, SUPPORTED_VERSION};

const PACKAGE: &str = "refract:plugin/";
const POLICY_INTERFACE: &str = "replication-policy";
/// Longest chain of upstream names followed when deriving an original topic.
const MAX_HOPS: usize = 64;

/// A replication-policy plugin that compiled, linked and accepted its config.
/// Cheap to share; each flow makes its own [`ReplicationPolicy`] from it.
pub struct PolicyPlugin {
    runtime: Arc<PluginRuntime>,
    pre: PolicyPluginPre<PluginState>,
    name: Arc<str>,
    config: String,
    info: (String, String),
}

impl std::fmt::Debug for PolicyPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyPlugin")
            .field("name", &self.name)
            .field("info", &self.info)
            .finish()
    }
}

impl PolicyPlugin {
    /// Loads `spec`, checks it exports the `policy-plugin` world at a compatible version, and
    /// instantiates it once with its config so a bad plugin is rejected before any flow starts.
    pub fn load(runtime: &Arc<PluginRuntime>, spec: &PluginSpec) -> Result<Arc<Self>, PluginError> {
        let name: Arc<str> = spec.location.to_string().into();
        let component = runtime.compile(&spec.location)?;
        check_exports(runtime, &component, &name)?;
        let instance_pre =
            runtime
                .linker
                .instantiate_pre(&component)
                .map_err(|e| PluginError::Link {
                    plugin: name.to_string(),
                    reason: format!("{e:#}"),
                })?;
        let pre = PolicyPluginPre::new(instance_pre).map_err(|e| PluginError::WrongWorld {
            plugin: name.to_string(),
            reason: format!("its exports do not match the policy-plugin world: {e:#}"),
        })?;
        let mut plugin = Self {
            runtime: runtime.clone(),
            pre,
            name,
            config: spec.config.clone(),
            info: Default::default(),
        };
        let mut instance = plugin.instantiate()?;
        let info = instance.call("info", |w, s| {
            w.refract_plugin_lifecycle().call_info(s).map(Ok)
        })?;
        plugin.info = (info.name, info.version);
        Ok(Arc::new(plugin))
    }

    /// The name refract uses for it: the built-in name or the file path.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name and version the plugin reports about itself.
    pub fn info(&self) -> (&str, &str) {
        (&self.info.0, &self.info.1)
    }

    /// A new instance in a fresh store, initialised with the plugin's config.
    fn instantiate(&self) -> Result<Instance, PluginError> {
        let mut store = self.runtime.new_store(self.name.clone());
        let world = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| PluginError::Trap {
                plugin: self.name.to_string(),
                call: "instantiation".into(),
                reason: format!("{e:#}"),
            })?;
        let mut instance = Instance {
            plugin_name: self.name.clone(),
            runtime: self.runtime.clone(),
            store,
            world,
        };
        let config = self.config.clone();
        instance
            .call("init", |w, s| {
                w.refract_plugin_lifecycle().call_init(s, &config)
            })
            .map_err(|e| match e {
                PluginError::Failed { plugin, reason, .. } => PluginError::Init { plugin, reason },
                other => other,
            })?;
        Ok(instance)
    }
}

/// Checks the component's `refract:plugin` exports: the policy interface present, at a version
/// this host supports. Says what the component is instead when it is another kind of plugin.
fn check_exports(
    runtime: &PluginRuntime,
    component: &Component,
    name: &str,
) -> Result<(), PluginError> {
    let exports: Vec<String> = component
        .component_type()
        .exports(&runtime.engine)
        .map(|(n, _)| n.to_string())
        .collect();
    let ours: Vec<(&str, &str)> = exports
        .iter()
        .filter_map(|e| e.strip_prefix(PACKAGE))
        .map(|rest| rest.split_once('@').unwrap_or((rest, "")))
        .collect();
    if ours.is_empty() {
        return Err(PluginError::WrongWorld {
            plugin: name.to_string(),
            reason: format!(
                "it exports no refract:plugin interface (exports: {}); a policy plugin exports refract:plugin/replication-policy",
                if exports.is_empty() { "nothing".to_string() } else { exports.join(", ") }
            ),
        });
    }
    for (_, version) in &ours {
        if !version_supported(version) {
            return Err(PluginError::IncompatibleVersion {
                plugin: name.to_string(),
                found: version.to_string(),
                supported: format!("{}.{}.x", SUPPORTED_VERSION.0, SUPPORTED_VERSION.1),
            });
        }
    }
    if !ours.iter().any(|(iface, _)| *iface == POLICY_INTERFACE) {
        let kind = ours.iter().find_map(|(iface, _)| match *iface {
            "record-filter" => Some("a filter plugin"),
            "record-transform" => Some("a transform plugin"),
            _ => None,
        });
        let found: Vec<String> = ours.iter().map(|(i, _)| format!("{PACKAGE}{i}")).collect();
        return Err(PluginError::WrongWorld {
            plugin: name.to_string(),
            reason: format!(
                "it is {} (exports {}), but a replication policy must export {PACKAGE}{POLICY_INTERFACE} (world policy-plugin)",
                kind.unwrap_or("not a policy plugin"),
                found.join(", ")
            ),
        });
    }
    Ok(())
}

fn version_supported(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u64>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => {
            if SUPPORTED_VERSION.0 == 0 {
                major == 0 && minor == SUPPORTED_VERSION.1
            } else {
                major == SUPPORTED_VERSION.0
            }
        }
        _ => false,
    }
}

/// One live instance and its store.
struct Instance {
    plugin_name: Arc<str>,
    runtime: Arc<PluginRuntime>,
    store: Store<PluginState>,
    world: PolicyWorld,
}

impl Instance {
    /// Calls into the guest under the deadline; maps traps and plugin errors to [`PluginError`].
    fn call<R>(
        &mut self,
        call: &str,
        f: impl FnOnce(
            &PolicyWorld,
            &mut Store<PluginState>,
        ) -> wasmtime::Result<Result<R, WitPluginError>>,
    ) -> Result<R, PluginError> {
        self.store.set_epoch_deadline(self.runtime.deadline_ticks());
        match f(&self.world, &mut self.store) {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(PluginError::Failed {
                plugin: self.plugin_name.to_string(),
                call: call.to_string(),
                reason: match e {
                    WitPluginError::InvalidConfig(m) => format!("invalid config: {m}"),
                    WitPluginError::Unsupported(m) => format!("unsupported: {m}"),
                    WitPluginError::Failed(m) => m,
                },
            }),
            Err(trap) => {
                let stderr =
                    String::from_utf8_lossy(&self.store.data().stderr.contents()).into_owned();
                Err(PluginError::Trap {
                    plugin: self.plugin_name.to_string(),
                    call: call.to_string(),
                    reason: describe_trap(
                        &trap,
                        self.runtime.limits.call_deadline,
                        self.runtime.limits.memory_bytes,
                        &stderr,
                    ),
                })
            }
        }
    }
}

/// A flow's view of its replication policy: MirrorMaker 2's ReplicationPolicy answered by the
/// plugin, cached per topic, plus the rules MM2 derives from it (original topic, heartbeats
/// topics, cycle detection). A trapped instance is dropped and replaced on the next call.
pub struct ReplicationPolicy {
    plugin: Arc<PolicyPlugin>,
    instance: Option<Instance>,
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
            plugin,
            instance: None,
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

    fn with_instance<R>(
        &mut self,
        call: &str,
        f: impl FnOnce(
            &PolicyWorld,
            &mut Store<PluginState>,
        ) -> wasmtime::Result<Result<R, WitPluginError>>,
    ) -> Result<R, PluginError> {
        if self.instance.is_none() {
            self.instance = Some(self.plugin.instantiate()?);
        }
        let Some(instance) = self.instance.as_mut() else {
            unreachable!("instance was just created")
        };
        let result = instance.call(call, f);
        if matches!(result, Err(PluginError::Trap { .. })) {
            // A trapped store cannot be entered again.
            self.instance = None;
        }
        result
    }

    fn check_len<T>(&self, call: &str, got: Vec<T>, want: usize) -> Result<Vec<T>, PluginError> {
        if got.len() == want {
            Ok(got)
        } else {
            Err(PluginError::Contract {
                plugin: self.plugin.name.to_string(),
                call: call.to_string(),
                reason: format!("returned {} answers for {want} topics", got.len()),
            })
        }
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
            let answers = self.with_instance("format-remote-topics", |w, s| {
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
        let answers = self.with_instance(call, |w, s| f(w, s, &missing))?;
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
        let h = self.with_instance("heartbeats-topic", |w, s| {
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
        self.with_instance("offset-syncs-topic", |w, s| {
            w.refract_plugin_replication_policy()
                .call_offset_syncs_topic(s, cluster)
                .map(Ok)
        })
    }

    /// The checkpoints topic for `cluster` (`checkpointsTopic`).
    pub fn checkpoints_topic(&mut self, cluster: &str) -> Result<String, PluginError> {
        self.with_instance("checkpoints-topic", |w, s| {
            w.refract_plugin_replication_policy()
                .call_checkpoints_topic(s, cluster)
                .map(Ok)
        })
    }
}
