//! A flow's processor chain: filters and transforms applied in order to the records of one
//! source partition, with each processor's `on_error` deciding what a failure costs.

use refract_config::OnError;
use refract_plugin::{Header, KafkaRecord, Outcome, PluginError, Processor, RecordBatch};
use refract_telemetry::{Metrics, PluginMetrics};
use tracing::warn;

/// A record on its way to the target, remembering the source offset it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Source offset of the record this one derives from.
    pub offset: i64,
    /// Target topic.
    pub topic: String,
    /// Target partition.
    pub partition: i32,
    /// Record timestamp (ms), if any.
    pub timestamp: Option<i64>,
    /// Key bytes; `None` is a null key.
    pub key: Option<Vec<u8>>,
    /// Value bytes; `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    /// Headers in order; a `None` value is a null header value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// A record a processor failed on, bound for the dead-letter topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The record as the failing processor received it.
    pub item: Item,
    /// The processor's name.
    pub plugin: String,
    /// What went wrong.
    pub error: String,
}

/// What the chain made of one run of records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ChainOutput {
    /// Records to produce, in order.
    pub forward: Vec<Item>,
    /// Records for the dead-letter topic.
    pub dead: Vec<DeadLetter>,
    /// Records a processor dropped on purpose.
    pub dropped: u64,
    /// Records dropped because a processor with `on_error = "skip"` failed on them.
    pub skipped: u64,
}

/// A processor with `on_error = "stop"` failed: the flow must halt without committing past it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("processor {plugin} failed on {topic}[{partition}] at offset {offset} and its on_error is \"stop\": {reason}")]
pub struct Halt {
    /// The processor's name.
    pub plugin: String,
    /// Source topic.
    pub topic: String,
    /// Source partition.
    pub partition: i32,
    /// First source offset affected.
    pub offset: i64,
    /// What went wrong.
    pub reason: String,
}

struct Stage {
    processor: Processor,
    on_error: OnError,
    metrics: Option<PluginMetrics>,
}

impl Stage {
    /// One call into the plugin, counted and timed.
    fn process(&mut self, batch: &RecordBatch) -> Result<Vec<Outcome>, PluginError> {
        let started = std::time::Instant::now();
        let result = self.processor.process(batch);
        if let Some(m) = &self.metrics {
            m.calls.inc();
            m.call_duration.observe_duration(started.elapsed());
            if let Err(e) = &result {
                m.errors.inc();
                if matches!(e, PluginError::Trap { reason, .. } if reason.contains("call deadline"))
                {
                    m.timeouts.inc();
                }
            }
        }
        result
    }
}

/// The processors of one flow, each with its own live instance.
pub struct Chain {
    source_cluster: String,
    stages: Vec<Stage>,
}

impl Chain {
    /// A chain for a flow reading `source_cluster`.
    pub fn new(source_cluster: &str, stages: Vec<(Processor, OnError)>) -> Self {
        Self {
            source_cluster: source_cluster.to_string(),
            stages: stages
                .into_iter()
                .map(|(processor, on_error)| Stage {
                    processor,
                    on_error,
                    metrics: None,
                })
                .collect(),
        }
    }

    /// Counts and times every plugin call in `metrics`, labelled with the plugin and `flow`.
    pub fn with_metrics(mut self, metrics: &Metrics, flow: &str) -> Self {
        for stage in &mut self.stages {
            stage.metrics = metrics.plugin(stage.processor.plugin().name(), flow).ok();
        }
        self
    }

    /// Whether the chain has no processors.
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Runs `items` (one source partition of `source_topic`, in offset order) through every
    /// processor in order.
    pub fn run(
        &mut self,
        source_topic: &str,
        source_partition: i32,
        items: Vec<Item>,
    ) -> Result<ChainOutput, Halt> {
        let mut out = ChainOutput {
            forward: items,
            ..ChainOutput::default()
        };
        for stage in &mut self.stages {
            let items = std::mem::take(&mut out.forward);
            // One call per run of records bound for the same target topic.
            let mut start = 0;
            while start < items.len() {
                let topic = items[start].topic.clone();
                let end = items[start..]
                    .iter()
                    .position(|i| i.topic != topic)
                    .map_or(items.len(), |n| start + n);
                let run = &items[start..end];
                let batch = to_batch(&self.source_cluster, source_topic, &topic, run);
                match stage.process(&batch) {
                    Ok(outcomes) => {
                        for (item, outcome) in run.iter().zip(outcomes) {
                            apply(
                                stage,
                                source_topic,
                                source_partition,
                                item,
                                outcome,
                                &mut out,
                            )?;
                        }
                    }
                    Err(e) => fail_run(
                        stage,
                        &self.source_cluster,
                        source_topic,
                        source_partition,
                        &topic,
                        run,
                        &e,
                        &mut out,
                    )?,
                }
                start = end;
            }
        }
        Ok(out)
    }
}

fn to_batch(
    source_cluster: &str,
    source_topic: &str,
    target_topic: &str,
    items: &[Item],
) -> RecordBatch {
    RecordBatch {
        source_cluster: source_cluster.to_string(),
        topic: source_topic.to_string(),
        target_topic: target_topic.to_string(),
        records: items
            .iter()
            .map(|i| KafkaRecord {
                partition: i.partition,
                offset: i.offset,
                timestamp_ms: i.timestamp.unwrap_or(-1),
                key: i.key.clone(),
                value: i.value.clone(),
                headers: i
                    .headers
                    .iter()
                    .map(|(k, v)| Header {
                        key: k.clone(),
                        value: v.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn apply(
    stage: &Stage,
    source_topic: &str,
    source_partition: i32,
    item: &Item,
    outcome: Outcome,
    out: &mut ChainOutput,
) -> Result<(), Halt> {
    match outcome {
        Outcome::Keep => out.forward.push(item.clone()),
        Outcome::Drop => out.dropped += 1,
        Outcome::Replace(records) => {
            if records.is_empty() {
                out.dropped += 1;
            }
            for r in records {
                out.forward.push(Item {
                    offset: item.offset,
                    topic: r.topic.unwrap_or_else(|| item.topic.clone()),
                    partition: r.partition.unwrap_or(item.partition),
                    timestamp: r.timestamp_ms.or(item.timestamp),
                    key: r.key,
                    value: r.value,
                    headers: r.headers.into_iter().map(|h| (h.key, h.value)).collect(),
                });
            }
        }
        Outcome::Reject(reason) => {
            let error = format!("rejected: {reason}");
            fail_item(stage, source_topic, source_partition, item, error, out)?;
        }
    }
    Ok(())
}

fn fail_item(
    stage: &Stage,
    source_topic: &str,
    source_partition: i32,
    item: &Item,
    error: String,
    out: &mut ChainOutput,
) -> Result<(), Halt> {
    let plugin = stage.processor.plugin().name().to_string();
    match stage.on_error {
        OnError::Stop => Err(Halt {
            plugin,
            topic: source_topic.to_string(),
            partition: source_partition,
            offset: item.offset,
            reason: error,
        }),
        OnError::Skip => {
            warn!(
                plugin,
                "skipping {source_topic}[{source_partition}] offset {}: {error}", item.offset
            );
            out.skipped += 1;
            Ok(())
        }
        OnError::DeadLetter => {
            out.dead.push(DeadLetter {
                item: item.clone(),
                plugin,
                error,
            });
            Ok(())
        }
    }
}

/// A whole call failed (trap, deadline, memory, plugin error). With `dead-letter`, each record
/// is retried alone on a fresh instance so only the records that fail on their own are
/// dead-lettered; the others continue.
#[allow(clippy::too_many_arguments)]
fn fail_run(
    stage: &mut Stage,
    source_cluster: &str,
    source_topic: &str,
    source_partition: i32,
    target_topic: &str,
    run: &[Item],
    error: &PluginError,
    out: &mut ChainOutput,
) -> Result<(), Halt> {
    if stage.on_error != OnError::DeadLetter || run.len() == 1 {
        for item in run {
            fail_item(
                stage,
                source_topic,
                source_partition,
                item,
                error.to_string(),
                out,
            )?;
        }
        return Ok(());
    }
    for item in run {
        let single = to_batch(
            source_cluster,
            source_topic,
            target_topic,
            std::slice::from_ref(item),
        );
        match stage.process(&single) {
            Ok(mut outcomes) => match outcomes.pop() {
                Some(outcome) => apply(stage, source_topic, source_partition, item, outcome, out)?,
                None => fail_item(
                    stage,
                    source_topic,
                    source_partition,
                    item,
                    "no outcome".into(),
                    out,
                )?,
            },
            Err(e) => fail_item(
                stage,
                source_topic,
                source_partition,
                item,
                e.to_string(),
                out,
            )?,
        }
    }
    Ok(())
}
