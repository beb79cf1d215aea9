//! `refract check` exercises what it loads: every flow's policy is asked about a few sample
//! topics and every processor is given a sample record, so a plugin that fails on every call, or
//! names remote topics Kafka would refuse, is caught before the pipeline runs.

use std::sync::Arc;

use crate::planner::{OwnTopics, OwnTopicsError};

use refract_plugin::{
    plugin_text, topic_name_problem, BatchView, Header, KafkaRecord, Outcome, Processor,
    RecordBatch, ReplicationPolicy, MESSAGE_CAP,
};

use crate::PreparedFlow;

/// What the probe found for the flows it exercised.
#[derive(Debug, Default)]
pub struct ProbeReport {
    /// One line per plugin call sequence that answered, for the operator.
    pub lines: Vec<String>,
    /// One line per failure, each naming the flow, the plugin and the input it failed on.
    pub problems: Vec<String>,
}

/// The topics a policy is asked about: the flow's literal topic names, plus a plain name, a
/// remote-looking name, the heartbeats topics and two internal ones.
fn sample_topics(flow: &PreparedFlow) -> Vec<String> {
    let f = &flow.flow;
    let mut topics: Vec<String> = f
        .topics
        .include
        .patterns()
        .iter()
        .filter(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
        .take(3)
        .cloned()
        .collect();
    for t in [
        "orders".to_string(),
        format!("{}.orders", f.source),
        "heartbeats".to_string(),
        format!("{}.heartbeats", f.source),
        "__consumer_offsets".to_string(),
        format!("mm2-offset-syncs.{}.internal", f.target),
    ] {
        if !topics.contains(&t) {
            topics.push(t);
        }
    }
    topics
}

/// Exercises every flow's policy and processors (see the module docs).
pub fn probe(flows: &[PreparedFlow]) -> ProbeReport {
    let mut report = ProbeReport::default();
    for p in flows {
        probe_policy(p, &mut report);
        probe_processors(p, &mut report);
    }
    report
}

fn probe_policy(p: &PreparedFlow, report: &mut ProbeReport) {
    let flow = p.flow.name();
    let plugin = p.policy.name().to_string();
    let samples = sample_topics(p);
    let mut policy = ReplicationPolicy::new(Arc::clone(&p.policy));
    let fail = |what: String| format!("flow {flow}: policy {plugin}: {what}");
    if let Err(e) = policy.prefetch(&samples) {
        report.problems.push(fail(format!(
            "failed when asked about the sample topics {samples:?}: {e}"
        )));
        return;
    }
    let mut mirrored = Vec::new();
    for topic in &samples {
        match policy.is_internal_topic(topic) {
            Ok(false) => mirrored.push(topic.clone()),
            Ok(true) => {}
            Err(e) => {
                report.problems.push(fail(format!("{e}")));
                return;
            }
        }
    }
    let remotes = match policy.format_remote_topics(&p.flow.source, &mirrored) {
        Ok(r) => r,
        Err(e) => {
            report.problems.push(fail(format!(
                "failed to name the sample topics {mirrored:?} on the target: {e}"
            )));
            return;
        }
    };
    let mut problems = 0;
    for (topic, remote) in mirrored.iter().zip(&remotes) {
        if let Some(why) = topic_name_problem(remote) {
            problems += 1;
            report.problems.push(fail(format!(
                "names the sample topic {topic} `{}` on {}, which is not a legal Kafka topic name: {why}",
                plugin_text(remote, MESSAGE_CAP),
                p.flow.target
            )));
        }
    }
    let internal = [
        ("heartbeats-topic", policy.heartbeats_topic()),
        (
            "offset-syncs-topic",
            policy.offset_syncs_topic(&p.flow.target),
        ),
        (
            "checkpoints-topic",
            policy.checkpoints_topic(&p.flow.source),
        ),
    ];
    for (call, answer) in internal {
        match answer {
            Ok(name) => {
                if let Some(why) = topic_name_problem(&name) {
                    problems += 1;
                    report.problems.push(fail(format!(
                        "{call} answered `{}`, which is not a legal Kafka topic name: {why}",
                        plugin_text(&name, MESSAGE_CAP)
                    )));
                }
            }
            Err(e) => {
                problems += 1;
                report.problems.push(fail(format!("{e}")));
            }
        }
    }
    // The same check a flow makes before it starts: its own topics are nobody else's.
    if problems == 0 {
        if let Err(OwnTopicsError::Refused(e)) = OwnTopics::name(&p.flow, &mut policy) {
            problems += 1;
            report.problems.push(e.to_string());
        }
    }
    if problems == 0 {
        let shown: Vec<String> = mirrored
            .iter()
            .zip(&remotes)
            .take(3)
            .map(|(t, r)| format!("{t} -> {r}"))
            .collect();
        report.lines.push(format!(
            "  flow {flow}: policy answered {} sample topics ({}, ...)",
            samples.len(),
            shown.join(", ")
        ));
    }
}

fn probe_processors(p: &PreparedFlow, report: &mut ProbeReport) {
    let flow = p.flow.name();
    let topic = sample_topics(p).remove(0);
    let batch = RecordBatch {
        source_cluster: p.flow.source.clone(),
        topic: topic.clone(),
        target_topic: topic,
        records: vec![KafkaRecord {
            partition: 0,
            offset: 0,
            timestamp_ms: 1_600_000_000_000,
            key: Some(b"key-1".to_vec()),
            value: Some(br#"{"id":1,"name":"sample"}"#.to_vec()),
            headers: vec![Header {
                key: "refract-check".into(),
                value: Some(b"sample".to_vec()),
            }],
        }],
    };
    for (index, (plugin, _)) in p.processors.iter().enumerate() {
        let mut processor = Processor::new(Arc::clone(plugin));
        match processor.process(&BatchView::of(&batch)) {
            Ok(outcomes) => {
                let outcome = match outcomes.first() {
                    Some(Outcome::Keep) => "keep".to_string(),
                    Some(Outcome::Drop) => "drop".to_string(),
                    Some(Outcome::Replace(r)) => format!("replace with {} record(s)", r.len()),
                    Some(Outcome::Reject(why)) => format!("reject ({why})"),
                    None => "no answer".to_string(),
                };
                report.lines.push(format!(
                    "  flow {flow}: processors[{index}] {} answered a sample record: {outcome}",
                    plugin.name()
                ));
            }
            Err(e) => report.problems.push(format!(
                "flow {flow}: processors[{index}]: failed on a sample record (topic {}, key \"key-1\", a JSON value): {e}",
                batch.topic
            )),
        }
    }
}
