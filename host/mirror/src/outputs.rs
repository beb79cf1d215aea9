//! Where a transform's outputs may go. A transform may set an output record's topic, partition
//! and timestamp; each field it changes is checked here before anything is produced, so a bad
//! output becomes a rejection of its input record and follows the processor's `on_error` (with a
//! reason naming the topic and partition) instead of a flow that restarts or a partition retried
//! for ever:
//!
//! - a topic that belongs to someone else (the one list, [`refract_config::FlowTopics`]), that is
//!   not a legal name, or that the processor's `output_topics` (by default: the flow's own remote
//!   topics) does not allow;
//! - a topic missing on the target once the processor had `max_new_output_topics` created, or
//!   whose creation failed;
//! - a partition the topic does not have;
//! - a timestamp the topic would refuse (`message.timestamp.before.max.ms` /
//!   `message.timestamp.after.max.ms` of a `CreateTime` topic).
//!
//! The checks are pure; what the target holds comes through [`TargetTopics`], which the flow
//! implements over its clients and tests with a table.

use refract_config::{PatternList, ProcessorSpec, ReservedTopic};
use refract_plugin::{cut_head, topic_name_problem, OutputRecord, MESSAGE_CAP};

use crate::chain::Item;

/// What a flow knows of a topic on its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicFacts {
    /// Its partition count.
    pub partitions: i32,
}

/// The timestamps a `CreateTime` topic accepts, relative to the broker's clock (`None`: no
/// bound that way; a `LogAppendTime` topic has neither).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimestampLimits {
    /// `message.timestamp.before.max.ms`: how far in the past.
    pub before_max_ms: Option<i64>,
    /// `message.timestamp.after.max.ms`: how far in the future.
    pub after_max_ms: Option<i64>,
}

/// The target's topics as the output checks need them.
pub trait TargetTopics {
    /// What `topic` is on the target; `Ok(None)` when it does not exist.
    fn facts(&mut self, topic: &str) -> Result<Option<TopicFacts>, String>;
    /// The timestamps `topic` accepts.
    fn timestamp_limits(&mut self, topic: &str) -> Result<TimestampLimits, String>;
    /// Creates `topic` with `partitions` partitions for the outputs of `processor` (its key in
    /// the pipeline, `flow[0].processors[1]`), counted against it.
    fn create(
        &mut self,
        topic: &str,
        partitions: i32,
        processor: &str,
    ) -> Result<TopicFacts, String>;
    /// How many topics were created for `processor`'s outputs.
    fn created(&self, processor: &str) -> u32;
    /// Whether `topic` is one of the flow's remote topics.
    fn is_remote(&self, topic: &str) -> bool;
    /// Whose `topic` is, when it is reserved (the flow's own topics and the shared rules).
    fn reserved(&self, topic: &str) -> Option<ReservedTopic>;
    /// Partitions of the source topic being processed: a topic created for outputs gets as many.
    fn source_partitions(&self) -> i32;
    /// The wall clock, in ms since the epoch.
    fn now_ms(&self) -> i64;
}

/// One processor's limits on where its outputs go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputRules {
    /// Its key in the pipeline (`flow[0].processors[1]`).
    pub processor: String,
    /// `output_topics`; `None`: the flow's own remote topics.
    pub allow: Option<PatternList>,
    /// `max_new_output_topics`.
    pub max_new: u32,
}

impl OutputRules {
    /// The rules `spec` sets.
    pub fn of(spec: &ProcessorSpec) -> Self {
        Self {
            processor: spec.plugin.key.clone(),
            allow: spec.output_topics.clone(),
            max_new: spec.max_new_output_topics,
        }
    }

    /// Rules for a processor outside a pipeline (tests, benchmarks): the flow's remote topics
    /// only, no new topics.
    pub fn remote_only(processor: &str) -> Self {
        Self {
            processor: processor.to_string(),
            allow: None,
            max_new: 0,
        }
    }

    /// Why `output`, one of the records a transform returned for `input`, may not be produced,
    /// or `None` when it may (after creating its topic when it is allowed and missing).
    pub fn refusal(
        &self,
        target: &mut dyn TargetTopics,
        input: &Item<'_>,
        output: &OutputRecord,
    ) -> Option<String> {
        let topic = output.topic.as_deref().unwrap_or(&input.topic);
        let rerouted = *topic != *input.topic;
        let partition = output.partition.unwrap_or(input.partition);
        let moved = rerouted || partition != input.partition;
        let timestamp = output.timestamp_ms.filter(|t| Some(*t) != input.timestamp);
        if !moved && timestamp.is_none() {
            return None;
        }
        let shown = cut_head(topic, MESSAGE_CAP);
        let refused = |why: String| Some(format!("refract refused its output: {why}"));
        if rerouted {
            if let Some(owner) = target.reserved(topic) {
                return refused(format!("it routed a record to `{shown}`, which is {owner}; plugin output is never written there"));
            }
            if let Some(problem) = topic_name_problem(topic) {
                return refused(format!(
                    "it routed a record to `{shown}`, which is not a legal topic name: {problem}"
                ));
            }
            let allowed = match &self.allow {
                Some(list) => list.matches(topic),
                None => target.is_remote(topic),
            };
            if !allowed {
                return refused(match &self.allow {
                    Some(list) => format!(
                        "it routed a record to `{shown}`, which its output_topics ({}) does not allow",
                        list.patterns().join(", ")
                    ),
                    None => format!(
                        "it routed a record to `{shown}`, which is not one of the flow's remote topics (set the processor's output_topics to allow others)"
                    ),
                });
            }
        }
        let facts = match target.facts(topic) {
            Ok(Some(facts)) => facts,
            Ok(None) if !rerouted => return None, // its own remote topic, created by discovery
            Ok(None) => {
                let created = target.created(&self.processor);
                if created >= self.max_new {
                    return refused(format!(
                        "it routed a record to `{shown}`, which does not exist on the target, and refract already created {created} topics for its outputs (max_new_output_topics = {})",
                        self.max_new
                    ));
                }
                let partitions = target.source_partitions();
                match target.create(topic, partitions, &self.processor) {
                    Ok(facts) => facts,
                    Err(e) => {
                        return refused(format!(
                            "it routed a record to `{shown}`, which does not exist on the target and could not be created: {e}"
                        ))
                    }
                }
            }
            Err(e) => {
                return refused(format!(
                    "it routed a record to `{shown}`, which refract could not look up on the target: {e}"
                ))
            }
        };
        if moved && !(0..facts.partitions).contains(&partition) {
            return refused(format!(
                "it sent a record to partition {partition} of `{shown}`, which has {} partitions (0 to {})",
                facts.partitions,
                facts.partitions - 1
            ));
        }
        let ts = timestamp.filter(|t| *t != -1)?;
        let limits = match target.timestamp_limits(topic) {
            Ok(limits) => limits,
            Err(e) => {
                return refused(format!(
                    "it set the timestamp {ts} on a record for `{shown}`[{partition}], and refract could not read the topic's timestamp limits: {e}"
                ))
            }
        };
        let now = target.now_ms();
        let past = limits
            .before_max_ms
            .filter(|max| ts < now.saturating_sub(*max))
            .map(|max| ("message.timestamp.before.max.ms", max, "before"));
        let future = limits
            .after_max_ms
            .filter(|max| ts > now.saturating_add(*max))
            .map(|max| ("message.timestamp.after.max.ms", max, "after"));
        let (key, max, side) = past.or(future)?;
        refused(format!(
            "it set the timestamp {ts} on a record for `{shown}`[{partition}], more than {max} ms {side} now ({now}): the topic refuses it ({key} = {max})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::collections::HashMap;

    use super::*;

    /// A target of named topics: partition counts, timestamp limits, and topics whose creation
    /// fails.
    #[derive(Default)]
    struct Table {
        topics: HashMap<String, i32>,
        limits: TimestampLimits,
        failing: Vec<String>,
        created: HashMap<String, u32>,
        remote: Vec<String>,
    }

    impl TargetTopics for Table {
        fn facts(&mut self, topic: &str) -> Result<Option<TopicFacts>, String> {
            Ok(self
                .topics
                .get(topic)
                .map(|&partitions| TopicFacts { partitions }))
        }
        fn timestamp_limits(&mut self, _topic: &str) -> Result<TimestampLimits, String> {
            Ok(self.limits)
        }
        fn create(
            &mut self,
            topic: &str,
            partitions: i32,
            processor: &str,
        ) -> Result<TopicFacts, String> {
            if self.failing.iter().any(|t| t == topic) {
                return Err("Broker: Policy violation".into());
            }
            self.topics.insert(topic.to_string(), partitions);
            *self.created.entry(processor.to_string()).or_default() += 1;
            Ok(TopicFacts { partitions })
        }
        fn created(&self, processor: &str) -> u32 {
            self.created.get(processor).copied().unwrap_or(0)
        }
        fn is_remote(&self, topic: &str) -> bool {
            self.remote.iter().any(|t| t == topic)
        }
        fn reserved(&self, topic: &str) -> Option<ReservedTopic> {
            (topic == "failed-records")
                .then_some(ReservedTopic::DeadLetter)
                .or_else(|| ReservedTopic::of(topic))
        }
        fn source_partitions(&self) -> i32 {
            2
        }
        fn now_ms(&self) -> i64 {
            1_000_000_000
        }
    }

    fn input() -> Item<'static> {
        Item {
            offset: 7,
            topic: Cow::Borrowed("a.orders"),
            partition: 1,
            timestamp: Some(999_000_000),
            key: None,
            value: None,
            headers: Vec::new(),
        }
    }

    fn output(topic: Option<&str>, partition: Option<i32>, ts: Option<i64>) -> OutputRecord {
        OutputRecord {
            topic: topic.map(str::to_string),
            partition,
            timestamp_ms: ts,
            key: None,
            value: None,
            headers: Vec::new(),
        }
    }

    fn rules(allow: Option<&[&str]>, max_new: u32) -> OutputRules {
        OutputRules {
            processor: "flow[0].processors[0]".into(),
            allow: allow
                .map(|a| PatternList::new(a.iter().map(|s| s.to_string()).collect()).unwrap()),
            max_new,
        }
    }

    /// Each case: the rules, the output's topic/partition/timestamp, and the words of the
    /// refusal (`None`: produced).
    #[test]
    fn outputs_are_checked_field_by_field() {
        type Case = (
            Option<&'static [&'static str]>,
            u32,
            (Option<&'static str>, Option<i32>, Option<i64>),
            Option<&'static [&'static str]>,
        );
        let before = TimestampLimits {
            before_max_ms: Some(1_000),
            after_max_ms: Some(3_600_000),
        };
        let cases: &[Case] = &[
            // Unchanged fields are never checked.
            (None, 0, (None, None, None), None),
            (
                None,
                0,
                (Some("a.orders"), Some(1), Some(999_000_000)),
                None,
            ),
            // The default allow-list: the flow's remote topics.
            (None, 0, (Some("a.payments"), None, None), None),
            (
                None,
                0,
                (Some("audit"), None, None),
                Some(&[
                    "`audit`",
                    "not one of the flow's remote topics",
                    "output_topics",
                ]),
            ),
            // An allow-list; a new topic within the cap is created.
            (Some(&["audit-.*"]), 1, (Some("audit-eu"), None, None), None),
            (
                Some(&["audit-.*"]),
                1,
                (Some("other"), None, None),
                Some(&["`other`", "its output_topics (audit-.*) does not allow"]),
            ),
            // Reserved names whatever the allow-list says.
            (
                Some(&[".*"]),
                9,
                (Some("_schemas"), None, None),
                Some(&["`_schemas`", "Schema Registry"]),
            ),
            (
                Some(&[".*"]),
                9,
                (Some("connect-offsets"), None, None),
                Some(&["`connect-offsets`", "Kafka Connect"]),
            ),
            (
                Some(&[".*"]),
                9,
                (Some("_confluent-metrics"), None, None),
                Some(&["Confluent Platform"]),
            ),
            (
                Some(&[".*"]),
                9,
                (Some("failed-records"), None, None),
                Some(&["`failed-records`", "dead-letter topic"]),
            ),
            (
                Some(&[".*"]),
                9,
                (Some("a/b"), None, None),
                Some(&["not a legal topic name"]),
            ),
            // The cap on new topics, and a creation the target refuses.
            (
                Some(&[".*"]),
                0,
                (Some("new-one"), None, None),
                Some(&["`new-one`", "does not exist", "max_new_output_topics = 0"]),
            ),
            (
                Some(&[".*"]),
                9,
                (Some("forbidden"), None, None),
                Some(&["`forbidden`", "could not be created", "Policy violation"]),
            ),
            // Partitions that do not exist, on the own topic and on another.
            (
                None,
                0,
                (None, Some(5), None),
                Some(&["partition 5 of `a.orders`", "has 3 partitions"]),
            ),
            (
                None,
                0,
                (None, Some(-1), None),
                Some(&["partition -1 of `a.orders`"]),
            ),
            (None, 0, (Some("a.payments"), None, None), None),
            (
                None,
                0,
                (Some("a.small"), None, None),
                Some(&["partition 1 of `a.small`", "has 1 partitions"]),
            ),
            (None, 0, (None, Some(2), None), None),
            // Timestamps the topic refuses.
            (
                None,
                0,
                (None, None, Some(1_000_000_000 + 3_600_001)),
                Some(&[
                    "timestamp 1003600001",
                    "`a.orders`[1]",
                    "message.timestamp.after.max.ms = 3600000",
                ]),
            ),
            (None, 0, (None, None, Some(1_000_000_000 + 3_600_000)), None),
            (None, 0, (None, None, Some(-1)), None),
        ];
        for (allow, max_new, (topic, partition, ts), want) in cases {
            let mut table = Table {
                topics: [("a.orders", 3), ("a.payments", 2), ("a.small", 1)]
                    .into_iter()
                    .map(|(t, n)| (t.to_string(), n))
                    .collect(),
                limits: TimestampLimits {
                    before_max_ms: None,
                    ..before
                },
                failing: vec!["forbidden".into()],
                remote: vec!["a.orders".into(), "a.payments".into(), "a.small".into()],
                ..Table::default()
            };
            let got = rules(*allow, *max_new).refusal(
                &mut table,
                &input(),
                &output(*topic, *partition, *ts),
            );
            match (got, want) {
                (None, None) => {}
                (Some(why), Some(words)) => {
                    assert!(why.starts_with("refract refused its output: "), "{why}");
                    for w in *words {
                        assert!(why.contains(w), "{w:?} in {why}");
                    }
                }
                (got, want) => panic!("{topic:?} {partition:?} {ts:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    /// A new topic is created once with the source's partition count and counted; the next
    /// output to it finds it.
    #[test]
    fn new_topics_are_created_once_and_counted() {
        let mut table = Table::default();
        let rules = rules(Some(&["audit-.*"]), 2);
        for topic in ["audit-1", "audit-1", "audit-2"] {
            assert_eq!(
                rules.refusal(&mut table, &input(), &output(Some(topic), None, None)),
                None
            );
        }
        assert_eq!(table.created("flow[0].processors[0]"), 2);
        assert_eq!(table.topics.get("audit-2"), Some(&2));
        let third = rules.refusal(&mut table, &input(), &output(Some("audit-3"), None, None));
        assert!(third.is_some_and(|w| w.contains("already created 2 topics")));
    }

    /// A timestamp older than `message.timestamp.before.max.ms` is refused.
    #[test]
    fn old_timestamps_are_refused_when_the_topic_bounds_them() {
        let mut table = Table {
            topics: [("a.orders".to_string(), 3)].into(),
            limits: TimestampLimits {
                before_max_ms: Some(60_000),
                after_max_ms: None,
            },
            ..Table::default()
        };
        let rules = rules(None, 0);
        let old = rules.refusal(
            &mut table,
            &input(),
            &output(None, None, Some(1_000_000_000 - 60_001)),
        );
        assert!(old.is_some_and(|w| w.contains("message.timestamp.before.max.ms = 60000")));
        let far_future = rules.refusal(&mut table, &input(), &output(None, None, Some(i64::MAX)));
        assert_eq!(far_future, None, "no after bound");
    }
}
