//! The target's topics as a flow's output checks see them ([`TargetTopics`] over the flow's
//! clients): partition counts from the target's metadata and timestamp limits from its topic
//! configs, each looked up once per `refresh_topics_interval`; topics created for a processor's
//! outputs, counted per processor for as long as the flow runs in this process; and a creation
//! the target refused, remembered for the same interval so the records routed there meanwhile
//! follow `on_error` at once instead of each waiting for another refused request.

use std::collections::HashMap;
use std::time::Instant;

use rdkafka::consumer::Consumer;
use rdkafka::types::RDKafkaRespErr;
use tracing::{info, warn};

use refract_config::{FlowTopics, ReservedTopic};
use refract_kafka::clients::{create_topic, REQUEST_TIMEOUT};

use crate::outputs::{TargetTopics, TimestampLimits, TopicFacts};
use crate::planner::TopicPlan;
use crate::topic_configs::describe_many;

use super::delivery::Clients;
use super::{lock, FlowRunner};
use crate::clock::now_ms;

/// What a flow learnt of the topics its outputs go to; it outlives a run.
#[derive(Debug, Default)]
pub(super) struct OutputTopics {
    /// Partition counts, and when they were read.
    facts: HashMap<String, (TopicFacts, Instant)>,
    /// Timestamp limits, and when they were read.
    limits: HashMap<String, (TimestampLimits, Instant)>,
    /// Creations the target refused: why, and when.
    refused: HashMap<String, (String, Instant)>,
    /// Topics created for each processor's outputs (by its key).
    created: HashMap<String, u32>,
}

/// The target as one run of the chain over one source topic sees it.
pub(super) struct Targets<'a> {
    runner: &'a FlowRunner,
    clients: &'a Clients,
    plan: &'a TopicPlan,
    own: &'a FlowTopics,
    /// Partitions of the source topic being processed.
    source_partitions: i32,
}

impl<'a> Targets<'a> {
    /// The target of `runner`'s flow through `clients`, with the remote topics of `plan` and the
    /// flow's `own` topics, for records of a source topic with `source_partitions` partitions.
    pub(super) fn new(
        runner: &'a FlowRunner,
        clients: &'a Clients,
        plan: &'a TopicPlan,
        own: &'a FlowTopics,
        source_partitions: i32,
    ) -> Self {
        Self {
            runner,
            clients,
            plan,
            own,
            source_partitions,
        }
    }

    /// Whether what was read at `at` is still current.
    fn fresh(&self, at: Instant) -> bool {
        at.elapsed() < self.runner.flow.refresh_topics_interval
    }
}

impl TargetTopics for Targets<'_> {
    fn facts(&mut self, topic: &str) -> Result<Option<TopicFacts>, String> {
        if let Some((facts, at)) = lock(&self.runner.output_topics).facts.get(topic) {
            if self.fresh(*at) {
                return Ok(Some(*facts));
            }
        }
        // Through the metadata consumer: it never asks the broker to create the topic.
        let metadata = self
            .clients
            .target_meta
            .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
            .map_err(|e| e.to_string())?;
        let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Ok(None);
        };
        match found.error() {
            Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) => return Ok(None),
            Some(e) => return Err(format!("{e:?}")),
            None if found.partitions().is_empty() => return Ok(None),
            None => {}
        }
        let facts = TopicFacts {
            partitions: found.partitions().len() as i32,
        };
        lock(&self.runner.output_topics)
            .facts
            .insert(topic.to_string(), (facts, Instant::now()));
        lock(&self.runner.known_outputs).insert(topic.to_string());
        Ok(Some(facts))
    }

    fn timestamp_limits(&mut self, topic: &str) -> Result<TimestampLimits, String> {
        if let Some((limits, at)) = lock(&self.runner.output_topics).limits.get(topic) {
            if self.fresh(*at) {
                return Ok(*limits);
            }
        }
        let entries = describe_many(&self.clients.admin, &[topic.to_string()])
            .pop()
            .unwrap_or_else(|| Err(format!("no configs of {topic}")))?;
        let value = |name: &str| {
            entries
                .iter()
                .find(|e| e.name == name)
                .and_then(|e| e.value.clone())
        };
        let millis = |name: &str| value(name).and_then(|v| v.parse::<i64>().ok());
        let limits = if value("message.timestamp.type").as_deref() == Some("LogAppendTime") {
            TimestampLimits::default()
        } else {
            // Brokers before Kafka 3.6 bound both sides with `difference.max.ms`.
            let difference = millis("message.timestamp.difference.max.ms");
            TimestampLimits {
                before_max_ms: millis("message.timestamp.before.max.ms").or(difference),
                after_max_ms: millis("message.timestamp.after.max.ms").or(difference),
            }
        };
        lock(&self.runner.output_topics)
            .limits
            .insert(topic.to_string(), (limits, Instant::now()));
        Ok(limits)
    }

    fn create(
        &mut self,
        topic: &str,
        partitions: i32,
        processor: &str,
    ) -> Result<TopicFacts, String> {
        let runner = self.runner;
        if let Some((why, at)) = lock(&runner.output_topics).refused.get(topic) {
            if self.fresh(*at) {
                return Err(format!(
                    "{why} (tried {} s ago; tried again after refresh_topics_interval)",
                    at.elapsed().as_secs()
                ));
            }
        }
        let (flow, target) = (runner.flow.name(), &runner.target.alias);
        match create_topic(
            &self.clients.admin,
            topic,
            partitions,
            runner.flow.replication_factor,
            &[],
        ) {
            Ok(()) => {
                info!(flow = %flow, "created {topic} on {target} with {partitions} partitions for the outputs of {processor}");
                let facts = TopicFacts { partitions };
                let mut state = lock(&runner.output_topics);
                *state.created.entry(processor.to_string()).or_default() += 1;
                state
                    .facts
                    .insert(topic.to_string(), (facts, Instant::now()));
                drop(state);
                lock(&runner.known_outputs).insert(topic.to_string());
                Ok(facts)
            }
            Err(e) => {
                let why = format!("{e:#}");
                warn!(flow = %flow, "cannot create {topic} on {target} for the outputs of {processor}: {why}; its records follow the processor's on_error");
                lock(&runner.output_topics)
                    .refused
                    .insert(topic.to_string(), (why.clone(), Instant::now()));
                Err(why)
            }
        }
    }

    fn created(&self, processor: &str) -> u32 {
        lock(&self.runner.output_topics)
            .created
            .get(processor)
            .copied()
            .unwrap_or(0)
    }

    fn is_remote(&self, topic: &str) -> bool {
        self.plan.is_remote(topic)
    }

    fn reserved(&self, topic: &str) -> Option<ReservedTopic> {
        self.own.reserved(topic)
    }

    fn source_partitions(&self) -> i32 {
        self.source_partitions
    }

    fn now_ms(&self) -> i64 {
        now_ms()
    }
}
