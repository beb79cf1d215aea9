//! The topics no plugin may send records to: the one list of names that belong to Kafka, the
//! tools that run beside it (Schema Registry, Confluent Platform, Kafka Connect), MirrorMaker 2
//! and refract itself.
//!
//! A replication policy names remote topics and may name the checkpoints and offset-syncs
//! topics; a transform may re-route records to other topics. Either could point mirrored data
//! at a topic a cluster depends on (`__consumer_offsets`, `_schemas`, `connect-offsets`, a
//! flow's checkpoints), and ACL sync would then copy the source's ACLs onto it. Every check of
//! such a name goes through [`ReservedTopic::of`] (the rules every flow shares) or
//! [`FlowTopics::reserved`] (those plus the names one flow's settings and policy gave its own
//! topics), so the list is written down once.

use std::fmt;

use crate::flow::Flow;

/// Whose a reserved topic is, and so why nothing mirrored or re-routed may be written to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReservedTopic {
    /// Kafka's own topics: names starting with `__` (`__consumer_offsets`,
    /// `__transaction_state`) or `.`.
    Kafka,
    /// Schema Registry's `_schemas`.
    SchemaRegistry,
    /// Confluent Platform's `_confluent-*` topics (metrics, licensing, command topics).
    Confluent,
    /// Kafka Connect's `connect-*` topics (its configs, offsets and status).
    Connect,
    /// An internal topic of MirrorMaker 2 or refract by its suffix, `.internal` or `-internal`
    /// (offset syncs, checkpoints, Connect offsets, dead letters, tasks).
    Internal,
    /// A heartbeats topic (`heartbeats`, `<alias>.heartbeats`): the mirror writes those.
    Heartbeats,
    /// The flow's `dead_letter_topic`.
    DeadLetter,
    /// The flow's `mm2_offsets_topic`: MirrorMaker 2's positions, and an exactly-once flow's.
    Mm2Offsets,
    /// The topic whose partitions stand for a cluster-mode flow's tasks.
    Tasks,
    /// The checkpoints topic the flow's policy names.
    Checkpoints,
    /// The offset-syncs topic the flow's policy names.
    OffsetSyncs,
}

impl ReservedTopic {
    /// Which shared rule reserves `name`, whatever the flow; `None` when none does.
    pub fn of(name: &str) -> Option<Self> {
        if name.starts_with("__") || name.starts_with('.') {
            Some(Self::Kafka)
        } else if name == "_schemas" {
            Some(Self::SchemaRegistry)
        } else if name.starts_with("_confluent-") {
            Some(Self::Confluent)
        } else if name.starts_with("connect-") {
            Some(Self::Connect)
        } else if name.ends_with(".internal") || name.ends_with("-internal") {
            Some(Self::Internal)
        } else if name == "heartbeats" || name.ends_with(".heartbeats") {
            Some(Self::Heartbeats)
        } else {
            None
        }
    }

    /// What the topic is, for an error that names it ("Kafka Connect's topics (`connect-*`)").
    pub fn describe(self) -> &'static str {
        match self {
            Self::Kafka => "one of Kafka's internal topics (names starting with `__` or `.`)",
            Self::SchemaRegistry => "Schema Registry's topic (`_schemas`)",
            Self::Confluent => "one of Confluent Platform's topics (`_confluent-*`)",
            Self::Connect => "one of Kafka Connect's topics (`connect-*`: configs, offsets, status)",
            Self::Internal => "an internal topic of MirrorMaker 2 or refract (names ending with `.internal` or `-internal`: offset syncs, checkpoints, Connect offsets, dead letters, tasks)",
            Self::Heartbeats => "a heartbeats topic, which the mirror writes itself",
            Self::DeadLetter => "the flow's dead-letter topic (`dead_letter_topic`)",
            Self::Mm2Offsets => "the flow's positions topic (`mm2_offsets_topic`, MirrorMaker 2's Connect offsets)",
            Self::Tasks => "the flow's tasks topic (cluster mode)",
            Self::Checkpoints => "the flow's checkpoints topic",
            Self::OffsetSyncs => "the flow's offset-syncs topic",
        }
    }
}

impl fmt::Display for ReservedTopic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Why `name` is reserved for Kafka, the tools beside it, MirrorMaker 2 or refract itself and
/// must never receive a plugin's output, or `None` when a plugin may route records there (the
/// shared rules of [`ReservedTopic::of`]; a flow's own names are [`FlowTopics::reserved`]).
pub fn internal_topic_reason(name: &str) -> Option<&'static str> {
    ReservedTopic::of(name).map(ReservedTopic::describe)
}

/// The topics one flow writes besides its remote topics, by name: those its settings name
/// (dead letters, positions, tasks) and, once its policy was asked, the checkpoints and
/// offset-syncs topics (and the heartbeats topic, which only heartbeats may be mirrored into).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowTopics {
    named: Vec<(ReservedTopic, String)>,
    heartbeats: Option<String>,
}

impl FlowTopics {
    /// The topics `flow`'s settings name.
    pub fn of(flow: &Flow) -> Self {
        Self {
            named: vec![
                (
                    ReservedTopic::DeadLetter,
                    flow.delivery.dead_letter_topic.clone(),
                ),
                (ReservedTopic::Mm2Offsets, flow.mm2_offsets_topic.clone()),
                (ReservedTopic::Tasks, flow.id().tasks_topic()),
            ],
            heartbeats: None,
        }
    }

    /// Adds a topic the flow's policy named (checkpoints, offset syncs).
    pub fn with(mut self, kind: ReservedTopic, name: impl Into<String>) -> Self {
        self.named.push((kind, name.into()));
        self
    }

    /// Adds the heartbeats topic the flow's policy named.
    pub fn with_heartbeats(mut self, name: impl Into<String>) -> Self {
        self.heartbeats = Some(name.into());
        self
    }

    /// The name of the flow's topic of `kind`, when it has one.
    pub fn name_of(&self, kind: ReservedTopic) -> Option<&str> {
        self.named
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, n)| n.as_str())
    }

    /// Whose `name` is: one of the flow's own topics (by its exact name, the first that matches
    /// in the order they were added), else what the shared rules say; `None` when records may be
    /// written there.
    pub fn reserved(&self, name: &str) -> Option<ReservedTopic> {
        self.named
            .iter()
            .find(|(_, n)| n == name)
            .map(|(k, _)| *k)
            .or_else(|| {
                (self.heartbeats.as_deref() == Some(name)).then_some(ReservedTopic::Heartbeats)
            })
            .or_else(|| ReservedTopic::of(name))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::Pipeline;

    #[test]
    fn shared_rules_name_whose_topic_it_is() {
        use ReservedTopic::*;
        let cases: &[(&str, Option<ReservedTopic>)] = &[
            ("__consumer_offsets", Some(Kafka)),
            ("__transaction_state", Some(Kafka)),
            (".hidden", Some(Kafka)),
            ("_schemas", Some(SchemaRegistry)),
            ("_confluent-metrics", Some(Confluent)),
            ("_confluent-command", Some(Confluent)),
            ("connect-offsets", Some(Connect)),
            ("connect-configs", Some(Connect)),
            ("connect-status", Some(Connect)),
            ("mm2-offset-syncs.b.internal", Some(Internal)),
            ("a.checkpoints.internal", Some(Internal)),
            ("mm2-offsets.a.internal", Some(Internal)),
            ("mm2-configs.a.internal", Some(Internal)),
            ("mm2-status.a.internal", Some(Internal)),
            ("refract.dlq.a.internal", Some(Internal)),
            ("refract-tasks.a-b.internal", Some(Internal)),
            ("app-internal", Some(Internal)),
            ("heartbeats", Some(Heartbeats)),
            ("a.heartbeats", Some(Heartbeats)),
            ("orders", None),
            ("a.orders", None),
            ("internal.orders", None),
            ("heartbeats-app", None),
            ("x_internal", None),
            ("_schemas-v2", None),
            ("schemas", None),
            ("my-connect-offsets", None),
            ("_confluent", None),
        ];
        for (name, want) in cases {
            assert_eq!(ReservedTopic::of(name), *want, "{name}");
            assert_eq!(
                internal_topic_reason(name).is_some(),
                want.is_some(),
                "{name}"
            );
        }
    }

    #[test]
    fn a_flow_reserves_the_topics_its_settings_and_policy_name() {
        use ReservedTopic::*;
        let text = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\ndead_letter_topic = \"failed-records\"\nmm2_offsets_topic = \"mm2-positions\"\n";
        let pipeline = Pipeline::parse(Path::new("t.toml"), text).unwrap();
        let topics = FlowTopics::of(&pipeline.flows[0])
            .with(Checkpoints, "a__checkpoints__internal")
            .with(OffsetSyncs, "syncs")
            .with_heartbeats("hb");
        let cases: &[(&str, Option<ReservedTopic>)] = &[
            ("failed-records", Some(DeadLetter)),
            ("mm2-positions", Some(Mm2Offsets)),
            ("refract-tasks.a-b.internal", Some(Tasks)),
            ("a__checkpoints__internal", Some(Checkpoints)),
            ("syncs", Some(OffsetSyncs)),
            ("hb", Some(Heartbeats)),
            ("_schemas", Some(SchemaRegistry)),
            ("refract.dlq.a.internal", Some(Internal)),
            ("orders", None),
        ];
        for (name, want) in cases {
            assert_eq!(topics.reserved(name), *want, "{name}");
        }
        assert_eq!(topics.name_of(OffsetSyncs), Some("syncs"));
        assert_eq!(
            FlowTopics::of(&pipeline.flows[0]).name_of(OffsetSyncs),
            None
        );
    }
}
