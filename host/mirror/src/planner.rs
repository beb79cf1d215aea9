//! Which source topics a flow mirrors and what they are called on the target.

use std::collections::HashMap;

use refract_config::{Flow, TopicFilter};
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
}

/// The outcome of one discovery: what is mirrored where, and what is not and why.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TopicPlan {
    /// Topics to mirror, sorted by source name.
    pub routes: Vec<Route>,
    /// Topics left out, sorted by source name.
    pub skipped: Vec<(String, Skip)>,
}

/// Applies MirrorMaker 2's replication decision to the source's topics:
/// `(filter(t) || heartbeats(t)) && !internal(t) && !cycle(t)`.
#[derive(Debug, Clone)]
pub struct TopicPlanner {
    source: String,
    target: String,
    filter: TopicFilter,
    heartbeats_replication: bool,
}

impl TopicPlanner {
    /// A planner for `flow`.
    pub fn new(flow: &Flow) -> Self {
        Self {
            source: flow.source.clone(),
            target: flow.target.clone(),
            filter: flow.topics.clone(),
            heartbeats_replication: flow.heartbeats.replication,
        }
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
            let included = self.filter.should_replicate(&topic)
                || (self.heartbeats_replication && policy.is_heartbeats_topic(&topic)?);
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
                None => chosen.push((topic, partitions)),
            }
        }
        let names: Vec<String> = chosen.iter().map(|(t, _)| t.clone()).collect();
        let remotes = policy.format_remote_topics(&self.source, &names)?;
        let mut owner: HashMap<String, String> = HashMap::new();
        for ((source_topic, partitions), remote_topic) in chosen.into_iter().zip(remotes) {
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

    fn planner_and_policy(flow_toml: &str) -> (TopicPlanner, ReplicationPolicy) {
        let text = format!(
            "[clusters.source]\nbootstrap = \"h:1\"\n[clusters.target]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"source\"\ntarget = \"target\"\n{flow_toml}"
        );
        let pipeline = Pipeline::parse(Path::new("test.toml"), &text).unwrap();
        let flow = &pipeline.flows[0];
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
