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
    cut_head, BatchView, CallBudget, HeaderView, Outcome, PluginError, Processor, RecordView,
    TrapKind, MESSAGE_CAP,
};
use refract_telemetry::Metrics;

use crate::budget::BatchBudget;
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
    /// One call into the plugin within what is left of the batch's `budget`, counted, timed and
    /// taken off the budget; the error is the reason its records fail with.
    fn process(
        &mut self,
        batch: &BatchView<'_>,
        budget: &mut BatchBudget,
    ) -> Result<Vec<Outcome>, String> {
        let call = budget.next_call()?;
        let started = std::time::Instant::now();
        let result = self.processor.process_within(batch, &call);
        let took = started.elapsed();
        if let Some(m) = &self.metrics {
            m.count_call(took, &result);
        }
        let input = batch.size_in_bytes();
        match result {
            Ok(outcomes) => budget
                .spend(took, input, Some(&outcomes))
                .map(|()| outcomes),
            Err(e) => {
                // Spent even though it failed; an error that is not the plugin's (it hit what
                // was left of the batch's budget) says so.
                let _ = budget.spend(took, input, None);
                Err(Self::call_error(&e, &call, budget))
            }
        }
    }

    /// The reason records fail with after a call failed with `e` under `call`; a call stopped by
    /// what was left of the batch's budget leaves the budget spent.
    fn call_error(e: &PluginError, call: &CallBudget, budget: &mut BatchBudget) -> String {
        let setting = match e {
            PluginError::Trap {
                kind: kind @ (TrapKind::Deadline | TrapKind::OutputBytes),
                ..
            } if budget.cut(call) => kind.setting(),
            _ => None,
        };
        if let Some(setting) = setting {
            budget.exhaust(&format!("a call ran into what was left of its {setting}"));
            format!("{e} (what was left of the batch's budget: the processor's call_timeout and max_output_bytes are shared by its calls on the batch, the retries of its records one by one included)")
        } else {
            e.to_string()
        }
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
            // One budget per batch for all of the stage's calls on it, retries included.
            let mut budget = BatchBudget::new(stage.processor.plugin().limits());
            let items = std::mem::take(&mut out.forward);
            out.forward.reserve(items.len());
            // One call per run of records bound for the same target topic.
            for run in runs_by_topic(items) {
                let result = {
                    let names = lossy_names(&run);
                    let batch = view(&at, &run, &names);
                    stage.process(&batch, &mut budget)
                };
                match result {
                    Ok(outcomes) => {
                        for (item, outcome) in run.into_iter().zip(outcomes) {
                            apply(stage, &at, item, outcome, target, &mut out)?;
                        }
                    }
                    Err(e) => fail_run(stage, &at, run, &e, &mut budget, target, &mut out)?,
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

/// A whole call failed (trap, deadline, memory, plugin error, or the batch's budget was spent).
/// With `dead-letter` and `skip`, each record is retried alone on a fresh instance, within what
/// is left of the batch's `budget`, so only the records that fail on their own are
/// dead-lettered or skipped; the others continue. Once the budget is spent the records left
/// fail without a call. With `stop` the flow halts at the run.
fn fail_run<'m>(
    stage: &mut Stage,
    at: &Position<'_>,
    run: Vec<Item<'m>>,
    error: &str,
    budget: &mut BatchBudget,
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
            stage.process(&single, budget)
        };
        match result {
            Ok(mut outcomes) => match outcomes.pop() {
                Some(outcome) => apply(stage, at, item, outcome, target, out)?,
                None => fail_item(stage, at, item, "no outcome".into(), out)?,
            },
            Err(e) => fail_item(stage, at, item, e, out)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use refract_config::{PluginLimitSettings, PluginLocation, PluginSpec, ReservedTopic};
    use refract_plugin::{PluginLimits, PluginRuntime, ProcessorPlugin};

    use super::*;
    use crate::outputs::{TimestampLimits, TopicFacts};

    /// A target where every topic is the flow's own and exists; the budget tests change none.
    struct Anywhere;

    impl TargetTopics for Anywhere {
        fn facts(&mut self, _: &str) -> Result<Option<TopicFacts>, String> {
            Ok(Some(TopicFacts { partitions: 1 }))
        }
        fn timestamp_limits(&mut self, _: &str) -> Result<TimestampLimits, String> {
            Ok(TimestampLimits::default())
        }
        fn create(&mut self, _: &str, partitions: i32, _: &str) -> Result<TopicFacts, String> {
            Ok(TopicFacts { partitions })
        }
        fn created(&self, _: &str) -> u32 {
            0
        }
        fn is_remote(&self, _: &str) -> bool {
            true
        }
        fn reserved(&self, _: &str) -> Option<ReservedTopic> {
            None
        }
        fn source_partitions(&self) -> i32 {
            1
        }
        fn now_ms(&self) -> i64 {
            0
        }
    }

    /// A chain of the hostile test transform with `config` (TOML lines) and `limits`, whose
    /// `on_error` is `dead-letter`.
    fn hostile_chain(config: &str, limits: PluginLimitSettings) -> Chain {
        let runtime = PluginRuntime::new(PluginLimits::default()).unwrap();
        let spec = PluginSpec {
            location: PluginLocation::File(refract_plugin::guest_dir().join("hostile.wasm")),
            config: format!("on = \"\"\n{config}"),
            key: "flow[0].processors[0]".into(),
            limits,
        };
        let plugin = ProcessorPlugin::load(&runtime, &spec).unwrap();
        let stage = (
            Processor::new(plugin),
            OnError::DeadLetter,
            OutputRules::remote_only("flow[0].processors[0]"),
        );
        Chain::new("a", vec![stage])
    }

    /// `n` records of a 10-byte value bound for `a.t`.
    fn records(n: i64) -> Vec<Item<'static>> {
        (0..n)
            .map(|offset| Item {
                offset,
                topic: Cow::Borrowed("a.t"),
                partition: 0,
                timestamp: Some(1_700_000_000_000),
                key: None,
                value: Some(Cow::Borrowed(b"0123456789".as_slice())),
                headers: Vec::new(),
            })
            .collect()
    }

    /// Value bytes of the records the chain forwards: what it holds until the run is produced.
    fn held(out: &ChainOutput<'_>) -> usize {
        out.forward
            .iter()
            .map(|i| i.value.as_ref().map_or(0, |v| v.len()))
            .sum()
    }

    /// A transform that fails every batch of more than one record and answers each record
    /// alone with a 1 MiB value, under `max_output_bytes = "4MiB"`: each of the 200 retries had
    /// a fresh 4 MiB budget, so the chain held all 200 MiB (measured); now the retries share
    /// the batch's 12 MiB (3 x max_output_bytes): 12 records are forwarded (12 MiB held), the
    /// 13th is stopped at what was left of it, and the other 187 are dead-lettered without a
    /// call.
    #[test]
    fn retries_share_one_output_budget_per_batch() {
        let mut chain = hostile_chain(
            "attack = \"fail-batches\"\ncount = 1\nsize = 1048576\n",
            PluginLimitSettings {
                call_timeout: Some(Duration::from_secs(30)),
                max_output_bytes: Some(4 << 20),
                ..PluginLimitSettings::default()
            },
        );
        let out = chain.run("t", 0, records(200), &mut Anywhere).unwrap();
        assert_eq!(held(&out), 12 << 20, "one batch budget: 3 x 4 MiB");
        assert_eq!(out.forward.len(), 12);
        assert_eq!(out.dead.len(), 188);
        assert!(
            out.dead[0].error.contains("max_output_bytes")
                && out.dead[0].error.contains("batch's budget"),
            "{}",
            out.dead[0].error
        );
        assert!(
            out.dead[1..].iter().all(|d| d
                .error
                .starts_with("not processed: the batch's budget is spent")),
            "{:?}",
            out.dead[1].error
        );
        let offsets: Vec<i64> = out.forward.iter().map(|i| i.offset).collect();
        assert_eq!(offsets, (0..12).collect::<Vec<_>>());
    }

    /// A transform that fails every batch of more than one record and spins on each record
    /// alone, under `call_timeout = "200ms"`: each of the 20 retries ran to its own deadline,
    /// 4.0 s for the batch (measured); now they share the batch's 600 ms (3 x call_timeout):
    /// three retries run to a deadline (four when ticks stop one early; the last to what was
    /// left), and the other records are dead-lettered without a call.
    #[test]
    fn retries_share_one_deadline_per_batch() {
        let call_timeout = Duration::from_millis(200);
        let mut chain = hostile_chain(
            "attack = \"fail-batches\"\nspin = true\n",
            PluginLimitSettings {
                call_timeout: Some(call_timeout),
                ..PluginLimitSettings::default()
            },
        );
        let started = Instant::now();
        let out = chain.run("t", 0, records(20), &mut Anywhere).unwrap();
        let took = started.elapsed();
        assert!(out.forward.is_empty());
        assert_eq!(out.dead.len(), 20);
        let reasons: Vec<&str> = out.dead.iter().map(|d| d.error.as_str()).collect();
        // Deadlines come in epoch ticks of 10 ms, so a call may stop a little early and leave
        // a sliver of the budget to a fourth.
        let called = reasons
            .iter()
            .take_while(|r| !r.starts_with("not processed"))
            .count();
        assert!((3..=4).contains(&called), "{reasons:?}");
        assert!(
            reasons[..called].iter().all(|r| r.contains("call_timeout")),
            "{reasons:?}"
        );
        // The rest were not sent: the last call ran into what was left of the budget, or to
        // its own deadline just as the budget ran out.
        assert!(
            reasons[called..]
                .iter()
                .all(|r| r.starts_with("not processed: the batch's")
                    && r.contains("budget is spent")),
            "{reasons:?}"
        );
        // One budget of three deadlines, plus instantiating the plugin after each trap and the
        // epoch tick (10 ms).
        assert!(
            took < 3 * call_timeout + Duration::from_millis(600),
            "the batch took {took:?}"
        );
    }
}
