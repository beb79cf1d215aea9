//! Which source topics a flow mirrors and what they are called on the target, and the names of
//! the flow's own topics (checkpoints, offset syncs, heartbeats) its policy gives: no name the
//! policy returns may land on a topic Kafka, the tools beside it, MirrorMaker 2 or refract own
//! (the one list is [`refract_config::ReservedTopic`]).

use std::collections::{HashMap, HashSet};

use refract_config::{Flow, FlowTopics, OffsetSyncsLocation, ReservedTopic, TopicFilter};
use refract_plugin::{topic_name_problem, PluginError, ReplicationPolicy};

/// A source topic and the remote topic it is mirrored to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Topic on the source cluster.
    pub source_topic: String,
    /// Topic on the target cluster, as the policy names it.
    pub remote_topic: String,
    /// Partition count on the source.
    pub partitions: i32,
}

/// Why a source topic is not mirrored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// Not included by `topics`, or excluded by `topics_exclude`.
    Filtered,
    /// Internal per the policy (`__x`, `x.internal`, MM2's own topics).
    Internal,
    /// Its name says it came from the target: mirroring it would loop.
    Cycle,
    /// Another source topic already maps to the same remote name.
    Conflict {
        /// The source topic that keeps the remote name.
        with: String,
        /// The shared remote name.
        remote: String,
    },
    /// The policy named it something Kafka does not accept as a topic name.
    IllegalName {
        /// The name the policy gave.
        remote: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// The policy named it after a topic that is not the flow's to write data to (a Kafka,
    /// Schema Registry, Connect, MirrorMaker 2 or refract topic, or one of the flow's own).
    Reserved {
        /// The name the policy gave.
        remote: String,
        /// Whose topic that is.
        owner: ReservedTopic,
    },
}

/// A name the flow's replication policy gave that refract refuses to write to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("flow {flow}: the replication policy {plugin} names {what} `{name}` on cluster {cluster}, which {problem}; refract does not write {writes} there. {remedy}")]
pub struct RefusedName {
    /// The flow, `source->target`.
    pub flow: String,
    /// The policy plugin's name.
    pub plugin: String,
    /// What the name is for: a source topic's remote topic, or one of the flow's own topics.
    pub named: Named,
    /// The name the policy gave.
    pub name: String,
    /// The cluster the topic would be on.
    pub cluster: String,
    /// Why it is refused.
    pub problem: NameProblem,
    what: String,
    writes: &'static str,
    remedy: &'static str,
}

/// What a name the policy gave is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// The remote topic of this source topic.
    Remote {
        /// The source topic.
        source_topic: String,
    },
    /// The flow's checkpoints or offset-syncs topic, or its heartbeats topic.
    Own(ReservedTopic),
}

/// Why a name the policy gave is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameProblem {
    /// It is a topic that belongs to someone else.
    Reserved(ReservedTopic),
    /// Kafka does not accept it as a topic name: which rule it breaks.
    Illegal(String),
    /// The policy itself does not count it as an internal topic, so flows would mirror it as
    /// data (an internal topic must be internal by the policy's own `is-internal-topics`).
    NotInternal,
}

impl std::fmt::Display for NameProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameProblem::Reserved(owner) => write!(f, "is {owner}"),
            NameProblem::Illegal(reason) => write!(f, "is not a legal Kafka topic name: {reason}"),
            NameProblem::NotInternal => f.write_str(
                "the policy itself does not count as internal (its is-internal-topics says no), so flows would mirror it as data",
            ),
        }
    }
}

impl RefusedName {
    /// The refusal of `name`, which `policy` gave for `named` in `flow`, for `problem`.
    pub fn new(
        flow: &Flow,
        policy: &ReplicationPolicy,
        named: Named,
        name: &str,
        problem: NameProblem,
    ) -> Self {
        let cluster = match &named {
            Named::Own(ReservedTopic::OffsetSyncs)
                if flow.offset_syncs.location == OffsetSyncsLocation::Source =>
            {
                &flow.source
            }
            _ => &flow.target,
        };
        let (what, writes, remedy) = match &named {
            Named::Remote { source_topic } => (
                format!("the remote topic of source topic {source_topic}"),
                "mirrored records (nor copy the source's ACLs onto it)",
                "Change the policy, or leave the topic out with `topics_exclude`; the flow's other topics are mirrored.",
            ),
            Named::Own(kind) => (
                match kind {
                    ReservedTopic::Checkpoints => "the checkpoints topic".to_string(),
                    ReservedTopic::OffsetSyncs => "the offset-syncs topic".to_string(),
                    _ => "the heartbeats topic".to_string(),
                },
                match kind {
                    ReservedTopic::Checkpoints => "checkpoints",
                    ReservedTopic::OffsetSyncs => "offset syncs",
                    _ => "heartbeats",
                },
                "Change the policy's name for it (MirrorMaker 2's are `<source>.checkpoints.internal`, `mm2-offset-syncs.<cluster>.internal` and `heartbeats`); the flow does not start until then.",
            ),
        };
        Self {
            flow: flow.name(),
            plugin: policy.plugin().name().to_string(),
            named,
            name: name.to_string(),
            cluster: cluster.clone(),
            problem,
            what,
            writes,
            remedy,
        }
    }
}

/// Why the flow's own topics could not be named.
#[derive(Debug, thiserror::Error)]
pub enum OwnTopicsError {
    /// The policy failed to answer.
    #[error("flow {flow}: naming its {what} topic: {source}")]
    Plugin {
        /// The flow, `source->target`.
        flow: String,
        /// Which topic it was asked for.
        what: &'static str,
        /// The policy's failure.
        source: PluginError,
    },
    /// The policy gave a name refract refuses.
    #[error(transparent)]
    Refused(Box<RefusedName>),
}

impl From<RefusedName> for OwnTopicsError {
    fn from(refused: RefusedName) -> Self {
        Self::Refused(Box::new(refused))
    }
}

/// The topics a flow writes besides its remote topics, named by its settings and its policy and
/// checked: none is a topic someone else owns, none is another of them, and the checkpoints and
/// offset-syncs topics are internal by the policy's own rule (so no flow mirrors them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnTopics {
    /// The offset-syncs topic (on the cluster `offset_syncs_location` says).
    pub offset_syncs: String,
    /// The checkpoints topic, on the target.
    pub checkpoints: String,
    /// The heartbeats topic.
    pub heartbeats: String,
    /// Every topic the flow owns, by name: what no remote topic and no re-routed record may be.
    pub all: FlowTopics,
}

impl OwnTopics {
    /// Asks `policy` for `flow`'s checkpoints, offset-syncs and heartbeats topics and checks
    /// them (a topic the flow does not write, its checkpoints when checkpoints are off, is
    /// still named and checked: turning them on must not change what is refused).
    pub fn name(flow: &Flow, policy: &mut ReplicationPolicy) -> Result<Self, OwnTopicsError> {
        let asked = |what: &'static str| {
            move |source: PluginError| OwnTopicsError::Plugin {
                flow: flow.name(),
                what,
                source,
            }
        };
        let syncs_named_after = match flow.offset_syncs.location {
            OffsetSyncsLocation::Source => &flow.target,
            OffsetSyncsLocation::Target => &flow.source,
        };
        let checkpoints = policy
            .checkpoints_topic(&flow.source)
            .map_err(asked("checkpoints"))?;
        let offset_syncs = policy
            .offset_syncs_topic(syncs_named_after)
            .map_err(asked("offset-syncs"))?;
        let heartbeats = policy.heartbeats_topic().map_err(asked("heartbeats"))?;
        let mut all = FlowTopics::of(flow);
        for (kind, name) in [
            (ReservedTopic::Checkpoints, &checkpoints),
            (ReservedTopic::OffsetSyncs, &offset_syncs),
        ] {
            let internal = policy.is_internal_topic(name).map_err(asked(match kind {
                ReservedTopic::Checkpoints => "checkpoints",
                _ => "offset-syncs",
            }))?;
            let problem = own_name_problem(&all, name, ReservedTopic::Internal)
                .or_else(|| (!internal).then_some(NameProblem::NotInternal));
            if let Some(problem) = problem {
                return Err(RefusedName::new(flow, policy, Named::Own(kind), name, problem).into());
            }
            all = all.with(kind, name.clone());
        }
        if let Some(problem) = own_name_problem(&all, &heartbeats, ReservedTopic::Heartbeats) {
            let named = Named::Own(ReservedTopic::Heartbeats);
            return Err(RefusedName::new(flow, policy, named, &heartbeats, problem).into());
        }
        all = all.with_heartbeats(heartbeats.clone());
        Ok(Self {
            offset_syncs,
            checkpoints,
            heartbeats,
            all,
        })
    }
}

/// Why `name` cannot be one of the flow's own topics, given those named so far (`taken`): it is
/// illegal, or someone else's; `fits` is the shared rule its name may match (`.internal` for
/// checkpoints and offset syncs, `heartbeats` for heartbeats).
fn own_name_problem(taken: &FlowTopics, name: &str, fits: ReservedTopic) -> Option<NameProblem> {
    if let Some(reason) = topic_name_problem(name) {
        return Some(NameProblem::Illegal(reason));
    }
    taken
        .reserved(name)
        .filter(|owner| *owner != fits)
        .map(NameProblem::Reserved)
}

/// The outcome of one discovery: what is mirrored where, and what is not and why.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TopicPlan {
    /// Topics to mirror, sorted by source name.
    pub routes: Vec<Route>,
    /// Topics left out, sorted by source name.
    pub skipped: Vec<(String, Skip)>,
    /// The remote topics of `routes`.
    remotes: HashSet<String>,
    /// The source topics of `routes` that are heartbeats topics (per the policy).
    heartbeats: HashSet<String>,
}

impl TopicPlan {
    /// Whether `topic` is the remote topic of one of the routes.
    pub fn is_remote(&self, topic: &str) -> bool {
        self.remotes.contains(topic)
    }

    /// Whether source topic `topic` is a heartbeats topic the flow mirrors: its records are
    /// MirrorMaker 2's, never framed for a schema registry.
    pub fn is_heartbeats(&self, topic: &str) -> bool {
        self.heartbeats.contains(topic)
    }
}

/// Applies MirrorMaker 2's replication decision to the source's topics:
/// `(filter(t) || heartbeats(t)) && !internal(t) && !cycle(t)`.
#[derive(Debug, Clone)]
pub struct TopicPlanner {
    source: String,
    target: String,
    filter: TopicFilter,
    heartbeats_replication: bool,
    /// The flow's own topics, which no remote topic may be.
    own: FlowTopics,
}

impl TopicPlanner {
    /// A planner for `flow` that knows the topics its settings name; [`Self::own_topics`] adds
    /// those its policy names.
    pub fn new(flow: &Flow) -> Self {
        Self {
            source: flow.source.clone(),
            target: flow.target.clone(),
            filter: flow.topics.clone(),
            heartbeats_replication: flow.heartbeats.replication,
            own: FlowTopics::of(flow),
        }
    }

    /// The flow's own topics, by name, as far as they are known.
    pub fn own(&self) -> &FlowTopics {
        &self.own
    }

    /// Refuses from now on every remote topic named like one of `own` (see [`OwnTopics`]).
    pub fn own_topics(mut self, own: &OwnTopics) -> Self {
        self.own = own.all.clone();
        self
    }

    /// Plans `topics` (name, partition count) as listed by the source cluster.
    pub fn plan(
        &self,
        policy: &mut ReplicationPolicy,
        topics: &[(String, i32)],
    ) -> Result<TopicPlan, PluginError> {
        let mut topics: Vec<(String, i32)> = topics.to_vec();
        topics.sort();
        let names: Vec<String> = topics.iter().map(|(t, _)| t.clone()).collect();
        policy.prefetch(&names)?;
        let mut plan = TopicPlan::default();
        let mut chosen = Vec::new();
        for (topic, partitions) in topics {
            let heartbeats = policy.is_heartbeats_topic(&topic)?;
            let included =
                self.filter.should_replicate(&topic) || (self.heartbeats_replication && heartbeats);
            let skip = if !included {
                Some(Skip::Filtered)
            } else if policy.is_internal_topic(&topic)? {
                Some(Skip::Internal)
            } else if policy.is_cycle(&topic, &self.target)? {
                Some(Skip::Cycle)
            } else {
                None
            };
            match skip {
                Some(s) => plan.skipped.push((topic, s)),
                None => chosen.push((topic, partitions, heartbeats)),
            }
        }
        let names: Vec<String> = chosen.iter().map(|(t, _, _)| t.clone()).collect();
        let remotes = policy.format_remote_topics(&self.source, &names)?;
        let mut owner: HashMap<String, String> = HashMap::new();
        for ((source_topic, partitions, heartbeats), remote_topic) in
            chosen.into_iter().zip(remotes)
        {
            if let Some(reason) = topic_name_problem(&remote_topic) {
                plan.skipped.push((
                    source_topic,
                    Skip::IllegalName {
                        remote: remote_topic,
                        reason,
                    },
                ));
                continue;
            }
            // Heartbeats are mirrored into heartbeats topics; nothing else goes to a reserved one.
            let reserved = self
                .own
                .reserved(&remote_topic)
                .filter(|r| !(heartbeats && *r == ReservedTopic::Heartbeats));
            if let Some(owner) = reserved {
                plan.skipped.push((
                    source_topic,
                    Skip::Reserved {
                        remote: remote_topic,
                        owner,
                    },
                ));
                continue;
            }
            if let Some(first) = owner.get(&remote_topic) {
                plan.skipped.push((
                    source_topic,
                    Skip::Conflict {
                        with: first.clone(),
                        remote: remote_topic,
                    },
                ));
                continue;
            }
            owner.insert(remote_topic.clone(), source_topic.clone());
            plan.remotes.insert(remote_topic.clone());
            if heartbeats {
                plan.heartbeats.insert(source_topic.clone());
            }
            plan.routes.push(Route {
                source_topic,
                remote_topic,
                partitions,
            });
        }
        plan.skipped.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use refract_config::Pipeline;
    use refract_plugin::{PluginLimits, PluginRuntime, PolicyPlugin};

    use super::*;

    fn flow_of(flow_toml: &str) -> Flow {
        let text = format!(
            "[clusters.source]\nbootstrap = \"h:1\"\n[clusters.target]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"source\"\ntarget = \"target\"\n{flow_toml}"
        );
        let pipeline = Pipeline::parse(Path::new("test.toml"), &text).unwrap();
        pipeline.flows[0].clone()
    }

    fn planner_and_policy(flow_toml: &str) -> (TopicPlanner, ReplicationPolicy) {
        let flow = &flow_of(flow_toml);
        let runtime = PluginRuntime::new(PluginLimits::default()).unwrap();
        let plugin = PolicyPlugin::load(&runtime, &flow.policy).unwrap();
        (TopicPlanner::new(flow), ReplicationPolicy::new(plugin))
    }

    fn decide(flow_toml: &str, topics: &[&str]) -> Vec<(String, Result<String, Skip>)> {
        let (planner, mut policy) = planner_and_policy(flow_toml);
        let listed: Vec<(String, i32)> = topics.iter().map(|t| (t.to_string(), 1)).collect();
        let plan = planner.plan(&mut policy, &listed).unwrap();
        let mut out: Vec<(String, Result<String, Skip>)> = plan
            .routes
            .into_iter()
            .map(|r| (r.source_topic, Ok(r.remote_topic)))
            .chain(plan.skipped.into_iter().map(|(t, s)| (t, Err(s))))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// MirrorMaker 2's MirrorSourceConnectorTest.testNoCycles and its neighbours, default policy.
    #[test]
    fn default_policy_cycles_internal_and_heartbeats() {
        let got = decide(
            "",
            &[
                "topic1",
                "source.topic1",
                "target.topic1",
                "target.source.topic1",
                "source.target.topic1",
                "target.source.target.topic1",
                "source.target.source.topic1",
                "__consumer_offsets",
                "x.internal",
                "x-internal",
                "heartbeats",
                "other.heartbeats",
                "target.heartbeats",
            ],
        );
        let want: Vec<(&str, Result<&str, Skip>)> = vec![
            ("__consumer_offsets", Err(Skip::Filtered)),
            ("heartbeats", Ok("source.heartbeats")),
            ("other.heartbeats", Ok("source.other.heartbeats")),
            ("source.target.source.topic1", Err(Skip::Cycle)),
            ("source.target.topic1", Err(Skip::Cycle)),
            ("source.topic1", Ok("source.source.topic1")),
            ("target.heartbeats", Err(Skip::Cycle)),
            ("target.source.target.topic1", Err(Skip::Cycle)),
            ("target.source.topic1", Err(Skip::Cycle)),
            ("target.topic1", Err(Skip::Cycle)),
            ("topic1", Ok("source.topic1")),
            ("x-internal", Err(Skip::Filtered)),
            ("x.internal", Err(Skip::Filtered)),
        ];
        let want: Vec<(String, Result<String, Skip>)> = want
            .into_iter()
            .map(|(t, r)| (t.to_string(), r.map(str::to_string)))
            .collect();
        assert_eq!(got, want);
    }

    /// A remote name Kafka would refuse is reported per topic; the other topics still mirror.
    #[test]
    fn illegal_remote_names_are_skipped_with_the_reason() {
        let got = decide(
            "policy = { plugin = \"builtin:default\", config = { separator = \"/\" } }",
            &["orders"],
        );
        assert_eq!(got.len(), 1);
        match &got[0] {
            (topic, Err(Skip::IllegalName { remote, reason })) => {
                assert_eq!(topic, "orders");
                assert_eq!(remote, "source/orders");
                assert!(reason.contains("\"/\""), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// Internal topics are never mirrored, even when the filter includes everything.
    #[test]
    fn internal_topics_are_skipped_even_when_included() {
        let got = decide(
            "topics = [\".*\"]\ntopics_exclude = []\n",
            &["__x", "x.internal", "mm2-offset-syncs.b.internal", "y"],
        );
        assert_eq!(got[0], ("__x".to_string(), Err(Skip::Internal)));
        assert_eq!(
            got[1],
            (
                "mm2-offset-syncs.b.internal".to_string(),
                Err(Skip::Internal)
            )
        );
        assert_eq!(got[2], ("x.internal".to_string(), Err(Skip::Internal)));
        assert_eq!(got[3], ("y".to_string(), Ok("source.y".to_string())));
    }

    /// Heartbeats are mirrored despite the filter, unless heartbeats replication is off.
    #[test]
    fn heartbeats_despite_filter() {
        let got = decide(
            "topics = [\"orders\"]\n",
            &["orders", "payments", "heartbeats", "x.heartbeats"],
        );
        let routed: Vec<&str> = got
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(t, _)| t.as_str())
            .collect();
        assert_eq!(routed, vec!["heartbeats", "orders", "x.heartbeats"]);
        let got = decide(
            "topics = [\"orders\"]\nheartbeats_replication = false\n",
            &["orders", "heartbeats"],
        );
        let routed: Vec<&str> = got
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(t, _)| t.as_str())
            .collect();
        assert_eq!(routed, vec!["orders"]);
    }

    /// With separator "_", `us-west.heartbeats` is no longer a heartbeats topic.
    #[test]
    fn separator_changes_what_counts_as_heartbeats() {
        let got = decide(
            "topics = [\"orders\"]\npolicy = { plugin = \"builtin:default\", config = { separator = \"_\" } }\n",
            &["us-west.heartbeats", "us-west_heartbeats", "orders"],
        );
        assert_eq!(
            got[0],
            ("orders".to_string(), Ok("source_orders".to_string()))
        );
        assert_eq!(
            got[1],
            ("us-west.heartbeats".to_string(), Err(Skip::Filtered))
        );
        assert_eq!(
            got[2],
            (
                "us-west_heartbeats".to_string(),
                Ok("source_us-west_heartbeats".to_string())
            )
        );
    }

    /// Identity keeps names; it cannot see data cycles but still stops heartbeat chains.
    #[test]
    fn identity_policy() {
        let got = decide(
            "policy = { plugin = \"builtin:identity\" }\n",
            &[
                "topic1",
                "target.topic1",
                "source.target.topic1",
                "heartbeats",
                "target.heartbeats",
                "source.heartbeats",
            ],
        );
        let want: Vec<(String, Result<String, Skip>)> = vec![
            ("heartbeats", Ok("source.heartbeats")),
            ("source.heartbeats", Ok("source.source.heartbeats")),
            ("source.target.topic1", Ok("source.target.topic1")),
            ("target.heartbeats", Err(Skip::Cycle)),
            ("target.topic1", Ok("target.topic1")),
            ("topic1", Ok("topic1")),
        ]
        .into_iter()
        .map(|(t, r): (&str, Result<&str, Skip>)| (t.to_string(), r.map(str::to_string)))
        .collect();
        assert_eq!(got, want);
    }

    /// A policy that maps data onto a topic Kafka, a tool beside it, MirrorMaker 2 or refract
    /// owns has that topic refused, naming whose the topic is; the flow's other topics mirror.
    #[test]
    fn remote_names_on_reserved_topics_are_refused() {
        use ReservedTopic::*;
        let rename = refract_plugin::guest_dir().join("rename.wasm");
        let rules: Vec<String> = [
            ("t1", "_schemas"),
            ("t2", "__consumer_offsets"),
            ("t3", "__transaction_state"),
            ("t4", "connect-offsets"),
            ("t5", "_confluent-metrics"),
            ("t6", "source.checkpoints.internal"),
            ("t7", "mm2-offset-syncs.target.internal"),
            ("t8", "failed-records"),
            ("t9", "mm2-offsets.source.internal"),
            ("t10", "refract-tasks.source-target.internal"),
            ("t11", "heartbeats"),
            ("t12", "mm2-configs.source.internal"),
        ]
        .iter()
        .map(|(m, r)| format!("{{ match = \"{m}\", replace = \"{r}\" }}"))
        .collect();
        let toml = format!(
            "dead_letter_topic = \"failed-records\"\npolicy = {{ plugin = \"{}\", config = {{ rules = [{}] }} }}\n",
            rename.display(),
            rules.join(", ")
        );
        let (planner, mut policy) = planner_and_policy(&toml);
        let own = OwnTopics::name(&flow_of(&toml), &mut policy).unwrap();
        let planner = planner.own_topics(&own);
        let names = [
            "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10", "t11", "t12", "t13",
        ];
        let listed: Vec<(String, i32)> = names.iter().map(|t| (t.to_string(), 1)).collect();
        let plan = planner.plan(&mut policy, &listed).unwrap();
        let want: Vec<(&str, ReservedTopic)> = vec![
            ("t1", SchemaRegistry),
            ("t10", Tasks),
            ("t11", Heartbeats),
            ("t12", Internal),
            ("t2", Kafka),
            ("t3", Kafka),
            ("t4", Connect),
            ("t5", Confluent),
            ("t6", Checkpoints),
            ("t7", OffsetSyncs),
            ("t8", DeadLetter),
            ("t9", Mm2Offsets),
        ];
        let got: Vec<(&str, ReservedTopic)> = plan
            .skipped
            .iter()
            .map(|(t, s)| match s {
                Skip::Reserved { owner, .. } => (t.as_str(), *owner),
                other => panic!("{t}: {other:?}"),
            })
            .collect();
        assert_eq!(got, want);
        let routes: Vec<(&str, &str)> = plan
            .routes
            .iter()
            .map(|r| (r.source_topic.as_str(), r.remote_topic.as_str()))
            .collect();
        assert_eq!(routes, vec![("t13", "t13")]);
        // The error a user sees names the flow, the plugin, the source topic, the remote name
        // and whose topic it is.
        let (topic, Skip::Reserved { remote, owner }) = &plan.skipped[0] else {
            unreachable!()
        };
        let named = Named::Remote {
            source_topic: topic.clone(),
        };
        let refused = RefusedName::new(
            &flow_of(&toml),
            &policy,
            named,
            remote,
            NameProblem::Reserved(*owner),
        );
        assert_eq!(
            refused.to_string(),
            format!("flow source->target: the replication policy {} names the remote topic of source topic t1 `_schemas` on cluster target, which is Schema Registry's topic (`_schemas`); refract does not write mirrored records (nor copy the source's ACLs onto it) there. Change the policy, or leave the topic out with `topics_exclude`; the flow's other topics are mirrored.", rename.display())
        );
    }

    /// A heartbeats topic is mirrored into a heartbeats topic; a data topic is not.
    #[test]
    fn only_heartbeats_are_mirrored_into_heartbeats_topics() {
        let rename = refract_plugin::guest_dir().join("rename.wasm");
        let toml = format!(
            "policy = {{ plugin = \"{}\", config = {{ rules = [{{ match = \"orders\", replace = \"x.heartbeats\" }}] }} }}\n",
            rename.display()
        );
        let got = decide(&toml, &["orders", "heartbeats"]);
        assert_eq!(
            got,
            vec![
                (
                    "heartbeats".to_string(),
                    Ok("source.heartbeats".to_string())
                ),
                (
                    "orders".to_string(),
                    Err(Skip::Reserved {
                        remote: "x.heartbeats".into(),
                        owner: ReservedTopic::Heartbeats
                    })
                ),
            ]
        );
    }

    /// The checkpoints and offset-syncs topics a policy names: each case is the flow's settings
    /// and the misbehaving test policy's config, and what is refused.
    #[test]
    fn own_topic_names_are_checked() {
        use ReservedTopic::*;
        let policy = refract_plugin::guest_dir().join("misbehaving_policy.wasm");
        type Case = (
            &'static str,
            &'static str,
            Option<(ReservedTopic, NameProblem)>,
        );
        let cases: &[Case] = &[
            ("", "", None),
            (
                "",
                "checkpoints_topic = \"__consumer_offsets\"",
                Some((Checkpoints, NameProblem::Reserved(Kafka))),
            ),
            (
                "",
                "checkpoints_topic = \"_schemas\"",
                Some((Checkpoints, NameProblem::Reserved(SchemaRegistry))),
            ),
            (
                "",
                "offset_syncs_topic = \"connect-offsets\"",
                Some((OffsetSyncs, NameProblem::Reserved(Connect))),
            ),
            (
                "",
                "offset_syncs_topic = \"_confluent-command\"",
                Some((OffsetSyncs, NameProblem::Reserved(Confluent))),
            ),
            (
                "",
                "offset_syncs_topic = \"source.checkpoints.internal\"",
                Some((OffsetSyncs, NameProblem::Reserved(Checkpoints))),
            ),
            (
                "",
                "checkpoints_topic = \"refract-tasks.source-target.internal\"",
                Some((Checkpoints, NameProblem::Reserved(Tasks))),
            ),
            (
                "dead_letter_topic = \"dlq.internal\"\n",
                "checkpoints_topic = \"dlq.internal\"",
                Some((Checkpoints, NameProblem::Reserved(DeadLetter))),
            ),
            (
                "",
                "offset_syncs_topic = \"mm2-offsets.source.internal\"",
                Some((OffsetSyncs, NameProblem::Reserved(Mm2Offsets))),
            ),
            (
                "",
                "checkpoints_topic = \"orders\"",
                Some((Checkpoints, NameProblem::NotInternal)),
            ),
            (
                "",
                "offset_syncs_topic = \"syncs/a\"",
                Some((
                    OffsetSyncs,
                    NameProblem::Illegal(
                        "it contains \"/\"; Kafka allows only ASCII letters, digits, `.`, `_` and `-`"
                            .into(),
                    ),
                )),
            ),
        ];
        for (settings, config, want) in cases {
            let toml = format!(
                "{settings}policy = {{ plugin = \"{}\", config = {{ {config} }} }}\n",
                policy.display()
            );
            let (_, mut policy) = planner_and_policy(&toml);
            let got = OwnTopics::name(&flow_of(&toml), &mut policy);
            match (got, want) {
                (Ok(own), None) => {
                    assert_eq!(own.checkpoints, "source.checkpoints.internal");
                    assert_eq!(own.offset_syncs, "mm2-offset-syncs.target.internal");
                    assert_eq!(own.heartbeats, "heartbeats");
                }
                (Err(OwnTopicsError::Refused(e)), Some((kind, problem))) => {
                    assert_eq!(
                        (&e.named, &e.problem),
                        (&Named::Own(*kind), problem),
                        "{config}"
                    );
                    let cluster = if *kind == OffsetSyncs {
                        "source"
                    } else {
                        "target"
                    };
                    assert_eq!(e.cluster, cluster, "{config}");
                    let text = e.to_string();
                    for needle in ["flow source->target", "misbehaving_policy.wasm", &e.name] {
                        assert!(text.contains(needle), "{needle} in {text}");
                    }
                }
                (got, want) => panic!("{config}: {got:?}, want {want:?}"),
            }
        }
    }

    /// Two source topics renamed to the same remote topic: the first keeps it.
    #[test]
    fn remote_name_conflicts_are_skipped() {
        let dir = refract_plugin::guest_dir();
        let rename = dir.join("rename.wasm");
        let toml = format!(
            "policy = {{ plugin = \"{}\", config = {{ rules = [{{ match = \"orders-v[0-9]+\", replace = \"orders\" }}] }} }}\n",
            rename.display()
        );
        let got = decide(&toml, &["orders-v1", "orders-v2", "payments"]);
        assert_eq!(got[0], ("orders-v1".to_string(), Ok("orders".to_string())));
        assert_eq!(
            got[1],
            (
                "orders-v2".to_string(),
                Err(Skip::Conflict {
                    with: "orders-v1".into(),
                    remote: "orders".into()
                })
            )
        );
        assert_eq!(got[2], ("payments".to_string(), Ok("payments".to_string())));
    }
}
