//! What a running flow shows: its status (counters, state, degraded partitions, clusters that
//! do not answer, lag), how the state is derived, and the lag and stall checks.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use refract_config::Side;

use crate::degraded::{Degraded, Reason};

use crate::series::{DegradedCause, FlowState, RecordEvent, SourcePartitionMetrics};

use super::board::FlowBoard;
use super::run::Run;
use super::slots::{cached_high_watermark, Slot};
use super::{lock, FlowRunner, STALL_AFTER};
use refract_kafka::clients::watermarks_many;

/// Every how many lag computations a caught-up, quiet partition's watermark is looked up
/// anyway (see [`Run::update_lag`]): with the default 5 s commit interval, every 30 s.
const LAG_FULL_EVERY: usize = 6;

/// What a running flow has done, shared with whoever started it.
#[derive(Debug, Default, Clone)]
pub struct FlowStatus {
    /// Source topic → remote topic, for every mirrored topic.
    pub routes: BTreeMap<String, String>,
    /// Records handed to the target producer since start: mirrored records and transform
    /// outputs, not dead letters (`refract_records_sent_total`).
    pub records_sent: u64,
    /// Records that were already on the target past the last commit when the flow (re)started,
    /// and so are mirrored a second time.
    pub duplicates: u64,
    /// Times the flow failed and was restarted.
    pub restarts: u64,
    /// Records a filter or transform dropped on purpose (`refract_records_filtered_total`).
    pub records_filtered: u64,
    /// Records dropped because a processor with `on_error = "skip"` failed on them
    /// (`refract_records_skipped_total`).
    pub records_skipped: u64,
    /// Records sent to the dead-letter topic (`refract_dead_lettered_records_total`).
    pub records_dead_lettered: u64,
    /// Records not mirrored because their provenance header shows they came from the target
    /// (`refract_records_looped_total`).
    pub records_looped: u64,
    /// Records the source deleted before they were mirrored (`refract_records_lost_total`):
    /// offsets between a partition's position and its log start.
    pub records_lost: u64,
    /// Those gaps, oldest first (the newest [`LOST_KEPT`]).
    pub lost: Vec<super::LostRecords>,
    /// MM2 offset syncs written.
    pub offset_syncs: u64,
    /// MM2 heartbeats written.
    pub heartbeats: u64,
    /// MM2 checkpoints written.
    pub checkpoints: u64,
    /// Translated offsets committed to target consumer groups.
    pub group_offsets_synced: u64,
    /// Times new plugins were swapped in while running.
    pub plugin_swaps: u64,
    /// Exactly-once: transactions committed (`refract_transactions_total{result="committed"}`).
    pub transactions_committed: u64,
    /// Exactly-once: transactions aborted (`refract_transactions_total{result="aborted"}`).
    pub transactions_aborted: u64,
    /// Milliseconds the record threads waited to keep to `max_bytes_per_second` /
    /// `max_records_per_second`.
    pub throttled_ms: u64,
    /// starting (before the first run), running, degraded (running, with partitions that cannot
    /// make progress), restarting,
    /// halted or stopped.
    pub state: FlowState,
    /// The partitions that cannot make progress (and a failure of the flow's own reads that
    /// names no partition), in source topic and partition order.
    pub degraded: Vec<DegradedPartition>,
    /// Per mirrored partition (`topic[partition]`): source records not yet acknowledged by the
    /// target, as of the last commit. Empty while it cannot be known ([`FlowStatus::lag_unknown`]).
    pub lag: BTreeMap<String, i64>,
    /// Why the lag is not known now (the source does not answer): never a stale number.
    pub lag_unknown: Option<String>,
    /// The flow's clusters that do not answer (see [`crate::watch`]).
    pub unreachable: Vec<crate::watch::Unreachable>,
    /// Records are behind and none was acknowledged for [`STALL_AFTER`]: why.
    pub stalled: Option<String>,
    /// Why the flow's checkpoints (and group offset sync) fail, while they are restarted (or
    /// that they panicked, and stay stopped until refract restarts them).
    pub checkpoints_failing: Option<String>,
    /// Clusters that answer again after an outage, not yet reported with their backlog.
    pub recovered: Vec<(String, Side, Duration)>,
    /// Why the flow halted (a processor with `on_error = "stop"` failed, the task was fenced, or
    /// it panicked), if it did.
    pub halted: Option<String>,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// The flow's tasks this process runs (all of them outside cluster mode).
    pub tasks: Vec<u32>,
    /// The source partitions (`topic[partition]`) this process mirrors now.
    pub partitions: Vec<String>,
    /// Cluster mode: the flow's group, its members and what each holds.
    pub cluster: Option<super::ClusterView>,
    /// Outside cluster mode: the other refract process that runs this flow, while this one
    /// waits on standby for it to stop (see `membership::solo`).
    pub held_elsewhere: Option<String>,
    /// Schema-id translation (`schemas = "translate"`), when the flow translates.
    pub schemas: Option<SchemaView>,
}

/// What `/status` shows of a flow's schema-id translation.
#[derive(Debug, Default, Clone)]
pub struct SchemaView {
    /// The source cluster's registry URL (as written when it held references).
    pub source_registry: String,
    /// The target cluster's registry URL.
    pub target_registry: String,
    /// Counts and the last failure.
    pub stats: refract_schema::Stats,
    /// Why requests to the source registry fail now, if they do.
    pub source_down: Option<String>,
    /// Why requests to the target registry fail now, if they do.
    pub target_down: Option<String>,
}

impl SchemaView {
    /// The view of `translator` now.
    pub fn of(translator: &refract_schema::Translator) -> Self {
        let (source, target) = translator.registries();
        Self {
            source_registry: source.url_shown().to_string(),
            target_registry: target.url_shown().to_string(),
            stats: translator.stats(),
            source_down: source.down(),
            target_down: target.down(),
        }
    }
}

impl FlowStatus {
    /// Counts `n` records of `event` (see [`FlowRunner::count`], which also updates its series).
    pub fn count(&mut self, event: RecordEvent, n: u64) {
        let counter = match event {
            RecordEvent::Sent => &mut self.records_sent,
            RecordEvent::Filtered => &mut self.records_filtered,
            RecordEvent::Skipped => &mut self.records_skipped,
            RecordEvent::DeadLettered => &mut self.records_dead_lettered,
            RecordEvent::Looped => &mut self.records_looped,
        };
        *counter += n;
    }

    /// Running or degraded, derived from what is known now (degraded partitions, clusters that
    /// do not answer, a stall, failing checkpoints); other states (starting, standby,
    /// restarting, halted, stopped) as they are.
    pub fn health(&self) -> FlowState {
        if !matches!(self.state, FlowState::Running | FlowState::Degraded) {
            return self.state;
        }
        if self.degraded_causes().is_empty() {
            FlowState::Running
        } else {
            FlowState::Degraded
        }
    }

    /// What makes the flow degraded now (empty: nothing), as `refract_flow_degraded` shows it.
    pub fn degraded_causes(&self) -> Vec<DegradedCause> {
        let recreated = |d: &DegradedPartition| d.reason == Reason::Recreated.as_str();
        [
            (
                DegradedCause::Partition,
                self.degraded.iter().any(|d| !recreated(d)),
            ),
            (
                DegradedCause::Recreated,
                self.degraded.iter().any(recreated),
            ),
            (DegradedCause::Unreachable, !self.unreachable.is_empty()),
            (DegradedCause::Stalled, self.stalled.is_some()),
            (
                DegradedCause::Checkpoints,
                self.checkpoints_failing.is_some(),
            ),
        ]
        .into_iter()
        .filter_map(|(cause, holds)| holds.then_some(cause))
        .collect()
    }

    /// Whether the flow is running with nothing degraded, or on standby (cluster mode: this
    /// process holds none of its tasks and is ready to take them over; without it: another
    /// process runs the flow and this one takes over when it stops): what `/health` asks of
    /// every flow.
    pub fn healthy(&self) -> bool {
        matches!(self.health(), FlowState::Running | FlowState::Standby)
    }
}

/// Shows (`Some`) or clears (`None`) a failure of the flow's checkpoints in its status, its
/// state and its `refract_flow_state` series. Returns whether they were failing before.
pub(crate) fn set_checkpoints_failing(board: &FlowBoard, why: Option<String>) -> bool {
    let was = std::mem::replace(&mut lock(board.shared()).checkpoints_failing, why).is_some();
    board.publish_state();
    was
}

/// How many gaps of lost records a flow's status keeps (the count covers them all).
pub const LOST_KEPT: usize = 100;

/// A flow's status, updated while it runs.
pub type SharedStatus = Arc<Mutex<FlowStatus>>;

/// A source partition that cannot make progress: it is not read while the flow's other
/// partitions keep flowing, and is retried with backoff (what `/status` and `/health` show).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DegradedPartition {
    /// The source topic; `None` for a failure of the flow's own reads that names no partition.
    pub topic: Option<String>,
    /// The topic's name on the target.
    pub remote_topic: Option<String>,
    /// The partition (the same number on the source and the target).
    pub partition: Option<i32>,
    /// The failure's category: `record_too_large`, `authorization`, `unknown_topic`,
    /// `decompression`, `corrupt`, `produce` or `fetch`.
    pub reason: &'static str,
    /// The latest failure's message.
    pub error: String,
    /// Wall-clock ms since the epoch when it became degraded.
    pub since_ms: i64,
    /// Retries that failed since then.
    pub retries: u32,
    /// The source offset it is stuck at, when known.
    pub offset: Option<i64>,
}

impl DegradedPartition {
    pub(super) fn new(slot: Option<&Slot>, d: &Degraded) -> Self {
        Self {
            topic: slot.map(|s| s.topic.clone()),
            remote_topic: slot.map(|s| s.remote.clone()),
            partition: slot.map(|s| s.partition),
            reason: d.reason.as_str(),
            error: d.error.clone(),
            since_ms: d.since_ms,
            retries: d.retries,
            offset: d.offset,
        }
    }

    /// One line naming it, its reason and error: `orders[3] record_too_large: Broker: Message
    /// size too large (offset 42)`.
    pub fn summary(&self) -> String {
        let what = match (&self.topic, self.partition) {
            (Some(t), Some(p)) => format!("{t}[{p}]"),
            _ => "source reads".to_string(),
        };
        let at = self
            .offset
            .map(|o| format!(" (offset {o})"))
            .unwrap_or_default();
        format!("{what} {}: {}{at}", self.reason, self.error)
    }
}

impl crate::watch::WatchSink for FlowRunner {
    fn unreachable(&self, u: crate::watch::Unreachable) {
        {
            let mut status = lock(&self.status);
            status.unreachable.retain(|x| x.cluster != u.cluster);
            if u.side == Side::Source {
                status.lag.clear();
                status.lag_unknown = Some(u.summary());
            }
            status.unreachable.push(u);
        }
        self.refresh_state();
    }

    fn reachable(&self, cluster: &str, side: Side, outage: Duration) {
        {
            let mut status = lock(&self.status);
            status.unreachable.retain(|x| x.cluster != cluster);
            status.recovered.push((cluster.to_string(), side, outage));
        }
        self.refresh_state();
    }
}

/// Stall detection: `mark` is (acknowledged positions summed, when that sum last changed or
/// nothing was behind). How long the flow has been stalled, once records are behind and none
/// was acknowledged for [`STALL_AFTER`].
pub(super) fn stall(
    mark: &mut (i64, Instant),
    acknowledged: i64,
    behind: i64,
    now: Instant,
) -> Option<Duration> {
    if acknowledged != mark.0 || behind == 0 {
        *mark = (acknowledged, now);
    }
    let idle = now.saturating_duration_since(mark.1);
    (behind > 0 && idle >= STALL_AFTER).then_some(idle)
}

impl FlowRunner {
    /// Sets the state [`FlowStatus::health`] derives, in the status and its series.
    pub(super) fn refresh_state(&self) {
        let mut status = lock(&self.status);
        let state = status.health();
        status.state = state;
        drop(status);
        self.board.publish_state();
    }

    pub(super) fn set_state(&self, state: FlowState) {
        lock(&self.status).state = state;
        self.board.publish_state();
    }

    /// Notes a failed run in the shared status.
    pub fn record_failure(&self, error: &anyhow::Error) {
        let mut status = lock(&self.status);
        status.last_error = Some(format!("{error:#}"));
        let halt = error
            .downcast_ref::<crate::chain::Halt>()
            .map(ToString::to_string)
            .or_else(|| {
                error
                    .downcast_ref::<super::Fenced>()
                    .map(ToString::to_string)
            })
            .or_else(|| {
                error
                    .downcast_ref::<super::LostHalt>()
                    .map(ToString::to_string)
            });
        let state = match halt {
            Some(halt) => {
                status.halted = Some(halt);
                FlowState::Halted
            }
            None => {
                status.restarts += 1;
                FlowState::Restarting
            }
        };
        drop(status);
        self.set_state(state);
    }

    /// Notes that a run panicked: the task halts, with the panic's message in `halted` and
    /// `last_error` (the supervisor does not restart it; see `tasks::supervisor::supervise`).
    pub(crate) fn record_panic(&self, message: &str) {
        let why = if self.task.count > 1 {
            format!("{} panicked: {message}", self.task)
        } else {
            format!("panicked: {message}")
        };
        let mut status = lock(&self.status);
        status.last_error = Some(why.clone());
        status.halted = Some(why);
        drop(status);
        self.set_state(FlowState::Halted);
    }
}

impl Run<'_> {
    /// Per partition: the source's high watermark (as of the consumer's last fetch; for
    /// partitions no fetch has answered for yet, one batched lookup for all of them) minus the
    /// position after the last record the target acknowledged.
    ///
    /// librdkafka finds a partition's cached watermark by its topic's name, with a linear search
    /// over all topics: at 1,000 topics × 10 partitions the lookups were 12 % of an idle
    /// process's CPU. A partition that was caught up at the last computation, read nothing
    /// since and is healthy keeps its watermark (a record produced to it is fetched, and then
    /// it is looked up again); each is still looked up every [`LAG_FULL_EVERY`]-th computation,
    /// so a partition the consumer cannot fetch is never shown caught up for long.
    pub(super) fn update_lag(&mut self) {
        let (runner, name, clients) = (self.runner, &self.name, &self.clients);
        // Cached watermarks of a source that does not answer are stale: the lag is unknown
        // (set by the watch), never a stale number.
        if runner.unreachable(Side::Source) {
            return;
        }
        let round = self.lag_round;
        self.lag_round = self.lag_round.wrapping_add(1);
        // Partitions no fetch has answered for yet (a flow that just started, new partitions):
        // their watermarks in one batched lookup. One request each, as before, held the run loop
        // for about 3 ms per partition: 15 s before the first record at 5,000 partitions.
        let cached: Vec<Option<i64>> = self
            .slots
            .slots
            .iter()
            .enumerate()
            .map(|(i, slot)| {
                let quiet = !slot.read_since_lag
                    && slot.health.flowing()
                    && slot.health.degraded().is_none()
                    && (i + round) % LAG_FULL_EVERY != 0;
                match slot.caught_up_at {
                    Some(high) if quiet => Some(high),
                    _ => cached_high_watermark(&clients.consumer, &slot.topic, slot.partition),
                }
            })
            .collect();
        let unknown: Vec<(&str, i32)> = self
            .slots
            .slots
            .iter()
            .zip(&cached)
            .filter(|(_, high)| high.is_none())
            .map(|(slot, _)| (slot.topic.as_str(), slot.partition))
            .collect();
        let asked = watermarks_many(&clients.consumer, &unknown, Duration::from_secs(1));
        let progress = lock(&self.progress);
        let mut caught_up: Vec<Option<i64>> = vec![None; self.slots.slots.len()];
        let mut lag = BTreeMap::new();
        let mut acknowledged = 0i64;
        // Per-topic series (`partition_series = false`): each topic's gauge gets the sum.
        let mut per_topic: BTreeMap<&str, (i64, Option<&SourcePartitionMetrics>)> = BTreeMap::new();
        for (i, slot) in self.slots.slots.iter().enumerate() {
            // librdkafka only knows a partition's watermark after a fetch answered for it.
            let Some(high) = cached[i].or_else(|| {
                asked
                    .get(&(slot.topic.clone(), slot.partition))
                    .map(|&(_, high)| high)
            }) else {
                debug!(flow = %name, "lag of {}[{}]: no high watermark", slot.topic, slot.partition);
                continue;
            };
            let done = progress[i]
                .committable()
                .or(slot.committed)
                .or(slot.position);
            let Some(done) = done else {
                debug!(flow = %name, "lag of {}[{}]: no position", slot.topic, slot.partition);
                continue;
            };
            let behind = (high - done).max(0);
            // Caught up: its watermark holds until it reads again (see above).
            caught_up[i] = (behind == 0).then_some(high);
            acknowledged += done;
            if runner.partition_series {
                if let Some(m) = &slot.metrics {
                    m.replication_lag_records.set_i64(behind);
                }
            } else {
                let topic = per_topic.entry(slot.remote.as_str()).or_insert((0, None));
                topic.0 += behind;
                topic.1 = topic.1.or(slot.metrics.as_ref());
            }
            lag.insert(format!("{}[{}]", slot.topic, slot.partition), behind);
        }
        for (behind, metrics) in per_topic.into_values() {
            if let Some(m) = metrics {
                m.replication_lag_records.set_i64(behind);
            }
        }
        drop(progress);
        for (slot, high) in self.slots.slots.iter_mut().zip(caught_up) {
            slot.caught_up_at = high;
            slot.read_since_lag = false;
        }
        let behind: i64 = lag.values().sum();
        let stalled = stall(
            &mut lock(&runner.progress_mark),
            acknowledged,
            behind,
            Instant::now(),
        )
        .map(|idle| {
            format!(
                "{behind} records behind and none acknowledged by cluster {} for {} s",
                runner.target.alias,
                idle.as_secs()
            )
        });
        let (recovered, was_stalled) = {
            let mut status = lock(&runner.status);
            let partitions = lag.len();
            status.lag = lag;
            status.lag_unknown = None;
            let was = status.stalled.clone();
            status.stalled = stalled.clone();
            (
                std::mem::take(&mut status.recovered)
                    .into_iter()
                    .map(|r| (r, partitions))
                    .collect::<Vec<_>>(),
                was,
            )
        };
        for ((cluster, side, outage), partitions) in recovered {
            info!(flow = %name, "cluster {cluster} ({}) is back after an outage of {:.1} s; backlog {behind} records over {partitions} partitions", side.as_str(), outage.as_secs_f64());
        }
        match (&was_stalled, &stalled) {
            (None, Some(why)) => {
                warn!(flow = %name, "stalled: {why}");
            }
            (Some(_), None) => {
                info!(flow = %name, "no longer stalled: records are acknowledged again")
            }
            _ => {}
        }
        if was_stalled.is_some() != stalled.is_some() {
            runner.refresh_state();
        }
    }
}

#[cfg(test)]
mod stall_tests {
    use super::{stall, STALL_AFTER};
    use std::time::{Duration, Instant};

    #[test]
    fn stalled_only_when_behind_and_nothing_acknowledged_for_the_threshold() {
        let t0 = Instant::now();
        let mut mark = (100, t0);
        let later = |d: Duration| t0 + d;
        // Behind, but progress: the mark moves, no stall.
        assert_eq!(stall(&mut mark, 150, 10, later(STALL_AFTER)), None);
        assert_eq!(mark, (150, later(STALL_AFTER)));
        // Behind, no progress, not yet long enough.
        assert_eq!(
            stall(
                &mut mark,
                150,
                10,
                later(STALL_AFTER * 2 - Duration::from_secs(1))
            ),
            None
        );
        // Long enough: stalled for the whole idle time.
        assert_eq!(
            stall(&mut mark, 150, 10, later(STALL_AFTER * 2)),
            Some(STALL_AFTER)
        );
        // Nothing behind: never stalled, and the clock restarts.
        assert_eq!(stall(&mut mark, 150, 0, later(STALL_AFTER * 5)), None);
        assert_eq!(
            stall(
                &mut mark,
                150,
                3,
                later(STALL_AFTER * 5 + Duration::from_secs(1))
            ),
            None
        );
    }
}
