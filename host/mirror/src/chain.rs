//! A flow's processor chain: filters and transforms applied in order to the records of one
//! source partition, with each processor's `on_error` deciding what a failure costs.
//!
//! Records travel through the chain without being copied: an [`Item`] read from the source
//! borrows the consumer's fetched bytes, a processor call lowers them straight into the guest,
//! and a record the processor keeps is the same `Item` moved on. Only what a transform writes
//! (`replace`) is owned.

use std::borrow::Cow;

use refract_config::OnError;
use refract_plugin::{
    cut_head, BatchView, HeaderView, Outcome, PluginError, Processor, RecordView, MESSAGE_CAP,
};
use refract_telemetry::Metrics;

use crate::outputs::{OutputRules, TargetTopics};
use crate::series::{PluginMetrics, RefractSeries};

/// A record on its way to the target, remembering the source offset it came from. Bytes are
/// borrowed from the fetched source record until a processor replaces them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item<'m> {
    /// Source offset of the record this one derives from.
    pub offset: i64,
    /// Target topic.
    pub topic: Cow<'m, str>,
    /// Target partition.
    pub partition: i32,
    /// Record timestamp (ms), if any.
    pub timestamp: Option<i64>,
    /// Key bytes; `None` is a null key.
    pub key: Option<Cow<'m, [u8]>>,
    /// Value bytes; `None` is a tombstone.
    pub value: Option<Cow<'m, [u8]>>,
    /// Headers in order; a `None` value is a null header value.
    pub headers: Vec<HeaderPair<'m>>,
}

/// A header's name and value (`None` = null), borrowed until a processor replaces them. The
/// name is bytes: Kafka does not require UTF-8 there, and a record is forwarded as it was read.
pub type HeaderPair<'m> = (Cow<'m, [u8]>, Option<Cow<'m, [u8]>>);

/// A record a processor failed on, bound for the dead-letter topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter<'m> {
    /// The record as the failing processor received it.
    pub item: Item<'m>,
    /// The processor's name.
    pub plugin: String,
    /// What went wrong.
    pub error: String,
}

/// What the chain made of one run of records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ChainOutput<'m> {
    /// Records to produce, in source offset order.
    pub forward: Vec<Item<'m>>,
    /// Records for the dead-letter topic, in source offset order.
    pub dead: Vec<DeadLetter<'m>>,
    /// Records a filter or transform dropped on purpose.
    pub filtered: u64,
    /// Records dropped because a processor with `on_error = "skip"` failed on them, in source
    /// offset order.
    pub skipped: Vec<Skipped>,
}

/// A record dropped because a processor with `on_error = "skip"` failed on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its source offset.
    pub offset: i64,
    /// The processor's name.
    pub plugin: String,
    /// What went wrong.
    pub error: String,
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
    /// Where its outputs may go.
    rules: OutputRules,
}

impl Stage {
    /// One call into the plugin, counted and timed.
    fn process(&mut self, batch: &BatchView<'_>) -> Result<Vec<Outcome>, PluginError> {
        let started = std::time::Instant::now();
        let result = self.processor.process(batch);
        if let Some(m) = &self.metrics {
            m.count_call(started.elapsed(), &result);
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
    /// A chain for a flow reading `source_cluster`; each processor's outputs may go where its
    /// rules say.
    pub fn new(source_cluster: &str, stages: Vec<(Processor, OnError, OutputRules)>) -> Self {
        Self {
            source_cluster: source_cluster.to_string(),
            stages: stages
                .into_iter()
                .map(|(processor, on_error, rules)| Stage {
                    processor,
                    on_error,
                    metrics: None,
                    rules,
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
    /// processor in order. A record a transform writes is checked against `target` (see
    /// [`crate::outputs`]); one it may not produce is a rejection of its input record.
    pub fn run<'m>(
        &mut self,
        source_topic: &str,
        source_partition: i32,
        items: Vec<Item<'m>>,
        target: &mut dyn TargetTopics,
    ) -> Result<ChainOutput<'m>, Halt> {
        let mut out = ChainOutput {
            forward: items,
            ..ChainOutput::default()
        };
        let at = Position {
            source_cluster: &self.source_cluster,
            source_topic,
            source_partition,
        };
        for stage in &mut self.stages {
            let items = std::mem::take(&mut out.forward);
            out.forward.reserve(items.len());
            // One call per run of records bound for the same target topic.
            for run in runs_by_topic(items) {
                let result = {
                    let names = lossy_names(&run);
                    let batch = view(&at, &run, &names);
                    stage.process(&batch)
                };
                match result {
                    Ok(outcomes) => {
                        for (item, outcome) in run.into_iter().zip(outcomes) {
                            apply(stage, &at, item, outcome, target, &mut out)?;
                        }
                    }
                    Err(e) => fail_run(stage, &at, run, &e, target, &mut out)?,
                }
            }
        }
        Ok(out)
    }
}

/// Where a run of records came from.
struct Position<'a> {
    source_cluster: &'a str,
    source_topic: &'a str,
    source_partition: i32,
}

/// Splits `items` into consecutive runs with the same target topic (one run, not re-allocated,
/// in the common case of a single target topic).
fn runs_by_topic(items: Vec<Item<'_>>) -> Vec<Vec<Item<'_>>> {
    if items.windows(2).all(|w| w[0].topic == w[1].topic) {
        return vec![items];
    }
    let mut runs: Vec<Vec<Item<'_>>> = Vec::new();
    for item in items {
        match runs.last_mut() {
            Some(run) if run.last().is_some_and(|l| l.topic == item.topic) => run.push(item),
            _ => runs.push(vec![item]),
        }
    }
    runs
}

/// The header names in `items` that are not UTF-8, in order, as the text a plugin receives
/// (the contract's `header.key` is a string): each invalid sequence becomes U+FFFD. Empty, and
/// allocating nothing, in the usual case. A record a processor keeps still leaves with its
/// original name bytes.
fn lossy_names(items: &[Item<'_>]) -> Vec<String> {
    items
        .iter()
        .flat_map(|i| &i.headers)
        .filter(|(k, _)| std::str::from_utf8(k).is_err())
        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
        .collect()
}

/// The batch one call sends: borrowed from the items, nothing copied; names that are not UTF-8
/// are taken from `lossy`, [`lossy_names`] of the same items.
fn view<'v>(at: &Position<'v>, items: &'v [Item<'_>], lossy: &'v [String]) -> BatchView<'v> {
    let mut lossy = lossy.iter().map(String::as_str);
    BatchView {
        source_cluster: at.source_cluster,
        topic: at.source_topic,
        target_topic: items.first().map_or("", |i| &i.topic),
        records: items
            .iter()
            .map(|i| RecordView {
                partition: i.partition,
                offset: i.offset,
                timestamp_ms: i.timestamp.unwrap_or(-1),
                key: i.key.as_deref(),
                value: i.value.as_deref(),
                headers: i
                    .headers
                    .iter()
                    .map(|(k, v)| HeaderView {
                        key: std::str::from_utf8(k)
                            .ok()
                            .or_else(|| lossy.next())
                            .unwrap_or_default(),
                        value: v.as_deref(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn apply<'m>(
    stage: &Stage,
    at: &Position<'_>,
    item: Item<'m>,
    outcome: Outcome,
    target: &mut dyn TargetTopics,
    out: &mut ChainOutput<'m>,
) -> Result<(), Halt> {
    // An output that may not be produced rejects its input record, which follows `on_error`.
    let outcome = match outcome {
        Outcome::Replace(records) => match records
            .iter()
            .find_map(|r| stage.rules.refusal(target, &item, r))
        {
            Some(reason) => return fail_item(stage, at, item, reason, out),
            None => Outcome::Replace(records),
        },
        other => other,
    };
    match outcome {
        Outcome::Keep => out.forward.push(item),
        Outcome::Drop => out.filtered += 1,
        Outcome::Replace(records) => {
            if records.is_empty() {
                out.filtered += 1;
            }
            for r in records {
                out.forward.push(Item {
                    offset: item.offset,
                    topic: r.topic.map_or_else(|| item.topic.clone(), Cow::Owned),
                    partition: r.partition.unwrap_or(item.partition),
                    timestamp: r.timestamp_ms.or(item.timestamp),
                    key: r.key.map(Cow::Owned),
                    value: r.value.map(Cow::Owned),
                    headers: r
                        .headers
                        .into_iter()
                        .map(|h| (Cow::Owned(h.key.into_bytes()), h.value.map(Cow::Owned)))
                        .collect(),
                });
            }
        }
        Outcome::Reject(reason) => {
            let error = format!("rejected: {}", cut_head(&reason, MESSAGE_CAP));
            fail_item(stage, at, item, error, out)?;
        }
    }
    Ok(())
}

fn fail_item<'m>(
    stage: &Stage,
    at: &Position<'_>,
    item: Item<'m>,
    error: String,
    out: &mut ChainOutput<'m>,
) -> Result<(), Halt> {
    let plugin = stage.processor.plugin().name().to_string();
    match stage.on_error {
        OnError::Stop => Err(Halt {
            plugin,
            topic: at.source_topic.to_string(),
            partition: at.source_partition,
            offset: item.offset,
            reason: error,
        }),
        OnError::Skip => {
            out.skipped.push(Skipped {
                offset: item.offset,
                plugin,
                error,
            });
            Ok(())
        }
        OnError::DeadLetter => {
            out.dead.push(DeadLetter {
                item,
                plugin,
                error,
            });
            Ok(())
        }
    }
}

/// A whole call failed (trap, deadline, memory, plugin error). With `dead-letter` and `skip`,
/// each record is retried alone on a fresh instance so only the records that fail on their own
/// are dead-lettered or skipped; the others continue. With `stop` the flow halts at the run.
fn fail_run<'m>(
    stage: &mut Stage,
    at: &Position<'_>,
    run: Vec<Item<'m>>,
    error: &PluginError,
    target: &mut dyn TargetTopics,
    out: &mut ChainOutput<'m>,
) -> Result<(), Halt> {
    if stage.on_error == OnError::Stop || run.len() == 1 {
        for item in run {
            fail_item(stage, at, item, error.to_string(), out)?;
        }
        return Ok(());
    }
    for item in run {
        let result = {
            let single = std::slice::from_ref(&item);
            let names = lossy_names(single);
            let single = view(at, single, &names);
            stage.process(&single)
        };
        match result {
            Ok(mut outcomes) => match outcomes.pop() {
                Some(outcome) => apply(stage, at, item, outcome, target, out)?,
                None => fail_item(stage, at, item, "no outcome".into(), out)?,
            },
            Err(e) => fail_item(stage, at, item, e.to_string(), out)?,
        }
    }
    Ok(())
}
