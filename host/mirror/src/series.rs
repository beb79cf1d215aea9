//! refract's series: every metric name, help text and label set is defined here, and the
//! mirror registers them through [`RefractSeries`], the typed constructors this module adds to
//! refract-telemetry's generic [`Metrics`] registry. They live with the engine because they
//! are its vocabulary (flows, plugins, partitions, cluster mode); the registry knows none of it.
//!
//! The `kafka_connect_mirror_*` series carry the names and labels Strimzi's JMX exporter gives
//! MirrorMaker 2's metrics, so existing MM2 dashboards and alerts keep working.
//!
//! The `refract_cluster_*` series ([`Metrics::cluster`]) describe cluster mode, where several
//! processes share a flow's tasks through a consumer group and the process holding task 0 runs
//! the flow's once-per-flow duties. A process registers them only for flows it runs in cluster
//! mode, so without cluster mode they are not exported at all.

use refract_telemetry::{Counter, Gauge, Histogram, Metrics, MetricsError, SecondsCounter, Stat};

mod cluster;
mod schemas;

pub use cluster::ClusterMetrics;

/// Metric names and shared constants.
pub mod names {
    pub use super::cluster::{
        CLUSTER_DUTIES, CLUSTER_HANDOVER_BUCKETS, CLUSTER_HANDOVER_SECONDS, CLUSTER_MEMBERS,
        CLUSTER_REBALANCES_TOTAL, CLUSTER_TASKS,
    };
    pub use super::schemas::{
        SCHEMA_CACHE_MISSES_TOTAL, SCHEMA_REGISTERED_TOTAL, SCHEMA_REGISTRY_ERRORS_TOTAL,
        SCHEMA_TRANSLATIONS_TOTAL,
    };

    /// Prefix of every MirrorSourceConnector series (for [`Metrics::remove`](refract_telemetry::Metrics::remove)).
    pub const MIRROR_SOURCE_PREFIX: &str = "kafka_connect_mirror_mirrorsourceconnector_";
    /// Prefix of every MirrorCheckpointConnector series.
    pub const MIRROR_CHECKPOINT_PREFIX: &str = "kafka_connect_mirror_mirrorcheckpointconnector_";
    /// Prefix of refract's own series.
    pub const REFRACT_PREFIX: &str = "refract_";

    /// MM2 `record-count`: records replicated and acknowledged, per remote topic partition.
    pub const RECORD_COUNT: &str = "kafka_connect_mirror_mirrorsourceconnector_record_count";
    /// MM2 `byte-count`: record value bytes replicated, per remote topic partition.
    pub const BYTE_COUNT: &str = "kafka_connect_mirror_mirrorsourceconnector_byte_count";
    /// MM2 `record-age-ms` (+ `_min`/`_max`/`_avg`): record age when read from the source.
    pub const RECORD_AGE_MS: &str = "kafka_connect_mirror_mirrorsourceconnector_record_age_ms";
    /// MM2 `replication-latency-ms` (+ `_min`/`_max`/`_avg`): record timestamp to target ack.
    pub const REPLICATION_LATENCY_MS: &str =
        "kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms";
    /// MM2 `checkpoint-latency-ms` (+ `_min`/`_max`/`_avg`): checkpoint creation to target ack.
    pub const CHECKPOINT_LATENCY_MS: &str =
        "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms";

    /// Source high watermark minus committed position, per source partition.
    pub const REPLICATION_LAG_RECORDS: &str = "refract_replication_lag_records";
    /// Value bytes handed to the target producer and not yet acknowledged or failed, per flow.
    pub const INFLIGHT_BYTES: &str = "refract_inflight_bytes";
    /// Plugin calls, per plugin and flow.
    pub const PLUGIN_CALLS_TOTAL: &str = "refract_plugin_calls_total";
    /// Plugin calls that failed, per plugin and flow.
    pub const PLUGIN_ERRORS_TOTAL: &str = "refract_plugin_errors_total";
    /// Plugin calls that ran out of time, per plugin and flow.
    pub const PLUGIN_TIMEOUTS_TOTAL: &str = "refract_plugin_timeouts_total";
    /// Duration of plugin calls, per plugin and flow.
    pub const PLUGIN_CALL_DURATION_SECONDS: &str = "refract_plugin_call_duration_seconds";
    /// Plugin calls a sandbox budget stopped, per plugin, flow and limit (`deadline`,
    /// `memory`, `outputs`, `bytes`).
    pub const PLUGIN_LIMIT_HITS_TOTAL: &str = "refract_plugin_limit_hits_total";
    /// Records sent to the dead-letter topic, per flow.
    pub const DEAD_LETTERED_RECORDS_TOTAL: &str = "refract_dead_lettered_records_total";
    /// Records handed to the target producer (mirrored records and transform outputs; not dead
    /// letters), per flow.
    pub const RECORDS_SENT_TOTAL: &str = "refract_records_sent_total";
    /// Records a filter or transform dropped on purpose, per flow.
    pub const RECORDS_FILTERED_TOTAL: &str = "refract_records_filtered_total";
    /// Records dropped under `on_error = "skip"`, per flow.
    pub const RECORDS_SKIPPED_TOTAL: &str = "refract_records_skipped_total";
    /// Deprecated name of [`RECORDS_SKIPPED_TOTAL`] (the same count), kept for existing alerts.
    pub const RECORDS_DROPPED_TOTAL: &str = "refract_records_dropped_total";
    /// Records not mirrored because their provenance header shows they came from the target,
    /// per flow.
    pub const RECORDS_LOOPED_TOTAL: &str = "refract_records_looped_total";
    /// Time the flow's record threads waited to keep to its throttle, per flow.
    pub const THROTTLED_SECONDS_TOTAL: &str = "refract_throttled_seconds_total";
    /// Transactions of an exactly-once flow, per flow and result (`committed`, `aborted`).
    pub const TRANSACTIONS_TOTAL: &str = "refract_transactions_total";
    /// Duration of an exactly-once flow's transactions, begin to commit, per flow.
    pub const TRANSACTION_DURATION_SECONDS: &str = "refract_transaction_duration_seconds";
    /// Configuration reloads, per result.
    pub const RELOADS_TOTAL: &str = "refract_reloads_total";
    /// 1 while a flow is running, degraded or on standby, else 0.
    pub const FLOW_UP: &str = "refract_flow_up";
    /// 1 for a flow's current state, 0 for the others.
    pub const FLOW_STATE: &str = "refract_flow_state";
    /// 1 for each cause that makes a flow degraded now, 0 for the others, per flow and cause.
    pub const FLOW_DEGRADED: &str = "refract_flow_degraded";
    /// Failures of one source partition (a delivery or a read that failed for good, and each
    /// failed retry), per flow, source topic, partition and reason.
    pub const PARTITION_ERRORS_TOTAL: &str = "refract_partition_errors_total";
    /// 1 while a source partition is degraded (paused and retried), 0 once it recovered; only
    /// partitions that failed at least once have the series.
    pub const PARTITION_DEGRADED: &str = "refract_partition_degraded";
    /// Records the source deleted before the flow mirrored them (retention, DeleteRecords), per
    /// replicated partition.
    pub const RECORDS_LOST_TOTAL: &str = "refract_records_lost_total";

    /// Every series name above.
    pub const ALL: &[&str] = &[
        RECORD_COUNT,
        BYTE_COUNT,
        RECORD_AGE_MS,
        REPLICATION_LATENCY_MS,
        CHECKPOINT_LATENCY_MS,
        REPLICATION_LAG_RECORDS,
        INFLIGHT_BYTES,
        PLUGIN_CALLS_TOTAL,
        PLUGIN_ERRORS_TOTAL,
        PLUGIN_TIMEOUTS_TOTAL,
        PLUGIN_CALL_DURATION_SECONDS,
        PLUGIN_LIMIT_HITS_TOTAL,
        DEAD_LETTERED_RECORDS_TOTAL,
        RECORDS_SENT_TOTAL,
        RECORDS_FILTERED_TOTAL,
        RECORDS_SKIPPED_TOTAL,
        RECORDS_DROPPED_TOTAL,
        RECORDS_LOOPED_TOTAL,
        THROTTLED_SECONDS_TOTAL,
        TRANSACTIONS_TOTAL,
        TRANSACTION_DURATION_SECONDS,
        RELOADS_TOTAL,
        FLOW_UP,
        FLOW_STATE,
        FLOW_DEGRADED,
        PARTITION_ERRORS_TOTAL,
        PARTITION_DEGRADED,
        RECORDS_LOST_TOTAL,
        SCHEMA_TRANSLATIONS_TOTAL,
        SCHEMA_CACHE_MISSES_TOTAL,
        SCHEMA_REGISTERED_TOTAL,
        SCHEMA_REGISTRY_ERRORS_TOTAL,
        CLUSTER_TASKS,
        CLUSTER_MEMBERS,
        CLUSTER_DUTIES,
        CLUSTER_REBALANCES_TOTAL,
        CLUSTER_HANDOVER_SECONDS,
    ];

    /// Bucket bounds of [`TRANSACTION_DURATION_SECONDS`]: 10 ms to 60 s.
    pub const TRANSACTION_DURATION_BUCKETS: &[f64] = &[
        0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    ];

    /// Bucket bounds of [`PLUGIN_CALL_DURATION_SECONDS`]: 10 µs to 1 s, 1-2.5-5 per decade.
    pub const PLUGIN_CALL_DURATION_BUCKETS: &[f64] = &[
        0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01,
        0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    ];
}

use names::*;

const RECORD_COUNT_HELP: &str = "Records replicated to the target and acknowledged by it, per remote topic partition (records; MirrorMaker 2 record-count).";
const BYTE_COUNT_HELP: &str = "Bytes of record values (not keys or headers) read for replication, per remote topic partition (bytes; MirrorMaker 2 byte-count).";
const RECORD_AGE_HELP: &str = "Age of a record when read from the source, now minus the record timestamp (milliseconds; MirrorMaker 2 record-age-ms).";
const REPLICATION_LATENCY_HELP: &str = "Time from a record's timestamp to the target's acknowledgement of its copy (milliseconds; MirrorMaker 2 replication-latency-ms).";
const CHECKPOINT_LATENCY_HELP: &str = "Time from creating a consumer-group checkpoint to the target's acknowledgement of it (milliseconds; MirrorMaker 2 checkpoint-latency-ms).";
const LAG_HELP: &str = "Records of the source partition not yet replicated: source high watermark minus the committed position (records).";
const INFLIGHT_HELP: &str =
    "Record value bytes handed to the target producer and not yet acknowledged or failed (bytes).";
const PLUGIN_CALLS_HELP: &str = "Calls into the WebAssembly plugin (calls).";
const PLUGIN_ERRORS_HELP: &str =
    "Plugin calls that returned an error, trapped or rejected a record (calls).";
const PLUGIN_TIMEOUTS_HELP: &str =
    "Plugin calls interrupted for exceeding their time limit (calls).";
const PLUGIN_DURATION_HELP: &str = "Wall-clock duration of one plugin call (seconds).";
const PLUGIN_LIMIT_HITS_HELP: &str = "Plugin calls stopped by a sandbox budget: deadline (call_timeout), memory (memory_limit), outputs (max_outputs_per_record, max_outputs_per_call) or bytes (max_output_bytes) (calls).";
const DEAD_LETTERED_HELP: &str =
    "Records a processor failed on that were sent to the flow's dead-letter topic (records).";
const SKIPPED_HELP: &str =
    "Records a processor failed on that were dropped under on_error = \"skip\" (records).";
const DROPPED_HELP: &str = "Deprecated: the same count as refract_records_skipped_total (records).";
const SENT_HELP: &str = "Records handed to the target producer: mirrored records and transform outputs, not dead letters (records).";
const FILTERED_HELP: &str = "Records a filter or transform dropped on purpose (records).";
const THROTTLED_HELP: &str = "Time the flow's record threads waited to keep to max_bytes_per_second and max_records_per_second, summed over its tasks (seconds).";
const LOOPED_HELP: &str = "Records not mirrored because their refract.provenance header shows they came from the target cluster (records).";
const TRANSACTIONS_HELP: &str = "Transactions of an exactly-once flow by result: committed (its records and source positions are visible to read_committed consumers) or aborted (its records are sent again from the last committed position) (transactions).";
const TRANSACTION_DURATION_HELP: &str =
    "Duration of an exactly-once flow's transactions, from begin to commit (seconds).";
const RELOADS_HELP: &str = "Configuration reloads by result: ok (applied) or rejected (invalid; the running configuration was kept) (reloads).";
const FLOW_UP_HELP: &str = "Whether the flow does its job on this process (1: running, degraded, or standby, a member of the flow's process group that holds no task and is ready to take over) or not (0: starting, restarting, halted, stopped).";
const FLOW_STATE_HELP: &str =
    "The flow's state: 1 for the current one of running, degraded, standby, restarting, halted, stopped; 0 for the others.";
const PARTITION_ERRORS_HELP: &str = "Failures of a source partition that stopped its progress: the first failure and each failed retry, by reason (failures; topic is the source topic; empty topic and partition: a failure of the flow's source reads with no partition).";
const FLOW_DEGRADED_HELP: &str = "Why the flow is degraded: 1 for each cause that holds now (partition: a source partition paused and retried; recreated: a topic deleted and created again, or a partition truncated, stopped until told what to do; unreachable: a cluster does not answer; stalled: records behind and none acknowledged for a while; checkpoints: checkpoints or group offset sync failing), 0 for the others.";
const PARTITION_DEGRADED_HELP: &str = "Whether a source partition is degraded: paused and retried with backoff while the other partitions keep flowing (1) or flowing again (0).";
const RECORDS_LOST_HELP: &str = "Records the source deleted (retention, DeleteRecords) before they were mirrored, per replicated partition: offsets between the flow's position and the partition's log start (records; topic is the remote topic).";

/// Series of one replicated partition: MirrorSourceConnector's MBean plus refract's lag.
#[derive(Debug, Clone)]
pub struct SourcePartitionMetrics {
    /// Count records acknowledged by the target (MM2 counts at `commitRecord`).
    pub record_count: Counter,
    /// Count value bytes of records read (MM2 counts at poll; keys and headers excluded).
    pub byte_count: Counter,
    /// Record `now − record timestamp` in ms when a record is read.
    pub record_age_ms: Stat,
    /// Record `now − record timestamp` in ms when the target acknowledges a record.
    pub replication_latency_ms: Stat,
    /// Set to source high watermark minus committed position.
    pub replication_lag_records: Gauge,
}

/// Series of one flow.
#[derive(Debug, Clone)]
pub struct FlowMetrics {
    /// Add value bytes when handed to the producer, subtract on their delivery report.
    pub inflight_bytes: Gauge,
    /// One counter per [`RecordEvent`], in its order; skipped records also count in the
    /// deprecated `refract_records_dropped_total`.
    records: [Counter; 5],
    records_dropped: Counter,
    /// Time waited for the throttle.
    pub throttled: SecondsCounter,
    /// Committed and aborted transactions (exactly-once flows).
    transactions: [Counter; 2],
    /// Duration of committed transactions.
    pub transaction_duration: Histogram,
    up: Gauge,
    /// One gauge per state of [`FlowState::ALL`].
    states: Box<[(FlowState, Gauge)]>,
    /// One gauge per cause of [`DegradedCause::ALL`], in its order.
    degraded: Box<[Gauge]>,
}

/// Something that happened to records in a flow, counted in its status and in one series each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordEvent {
    /// Handed to the target producer: mirrored records and transform outputs, not dead letters
    /// (`refract_records_sent_total`).
    Sent,
    /// Dropped on purpose by a filter or transform (`refract_records_filtered_total`).
    Filtered,
    /// Dropped because a processor with `on_error = "skip"` failed on it
    /// (`refract_records_skipped_total`, and the deprecated `refract_records_dropped_total`).
    Skipped,
    /// Sent to the dead-letter topic (`refract_dead_lettered_records_total`).
    DeadLettered,
    /// Not mirrored: its provenance shows it came from the target (`refract_records_looped_total`).
    Looped,
}

impl FlowMetrics {
    /// Counts `n` records of `event`.
    pub fn count(&self, event: RecordEvent, n: u64) {
        if n == 0 {
            return;
        }
        self.records[event as usize].inc_by(n);
        if event == RecordEvent::Skipped {
            self.records_dropped.inc_by(n);
        }
    }

    /// The count of `event` so far.
    pub fn get(&self, event: RecordEvent) -> u64 {
        self.records[event as usize].get()
    }

    /// Counts a committed (`true`) or aborted transaction.
    pub fn transaction(&self, committed: bool) {
        self.transactions[usize::from(!committed)].inc();
    }
}

/// Lifecycle state of a flow, as exposed by `refract_flow_state{state=...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowState {
    /// Not connected yet (every `refract_flow_state` series is 0).
    #[default]
    Starting,
    /// Replicating.
    Running,
    /// Replicating, but at least one partition cannot make progress and is retried.
    Degraded,
    /// A member of the flow's process group that holds no task (cluster mode): healthy, ready
    /// to take over. Counts as up: the process is doing its job.
    Standby,
    /// Recovering from a failure; will run again.
    Restarting,
    /// Stopped by a processor failure under `on_error = "stop"`; needs attention.
    Halted,
    /// Stopped on purpose (shutdown or removed by a reload).
    Stopped,
}

/// Why a flow is degraded (`refract_flow_degraded`'s `cause`): what `/health` reports as not
/// healthy while the flow's other partitions keep flowing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DegradedCause {
    /// A source partition is paused and retried (a delivery or read that keeps failing).
    Partition,
    /// A topic was deleted and created again, or a partition's position is past its end
    /// (truncated): the partition is stopped until the operator decides.
    Recreated,
    /// One of the flow's clusters does not answer.
    Unreachable,
    /// Records are behind and none was acknowledged for a while.
    Stalled,
    /// The flow's checkpoints (or group offset sync) fail.
    Checkpoints,
}

impl DegradedCause {
    /// Every cause, in the order of their series.
    pub const ALL: [DegradedCause; 5] = [
        DegradedCause::Partition,
        DegradedCause::Recreated,
        DegradedCause::Unreachable,
        DegradedCause::Stalled,
        DegradedCause::Checkpoints,
    ];

    /// The `cause` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            DegradedCause::Partition => "partition",
            DegradedCause::Recreated => "recreated",
            DegradedCause::Unreachable => "unreachable",
            DegradedCause::Stalled => "stalled",
            DegradedCause::Checkpoints => "checkpoints",
        }
    }
}

impl FlowState {
    /// Every state that has a `refract_flow_state` series (all but [`FlowState::Starting`]).
    pub const ALL: [FlowState; 6] = [
        FlowState::Running,
        FlowState::Degraded,
        FlowState::Standby,
        FlowState::Restarting,
        FlowState::Halted,
        FlowState::Stopped,
    ];

    /// The `state` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowState::Starting => "starting",
            FlowState::Running => "running",
            FlowState::Degraded => "degraded",
            FlowState::Standby => "standby",
            FlowState::Restarting => "restarting",
            FlowState::Halted => "halted",
            FlowState::Stopped => "stopped",
        }
    }

    /// Whether `refract_flow_up` is 1 in this state: running, degraded or standby (a standby
    /// process is doing its job: ready to take over the flow's tasks).
    pub fn is_up(self) -> bool {
        match self {
            FlowState::Running | FlowState::Degraded | FlowState::Standby => true,
            FlowState::Starting
            | FlowState::Restarting
            | FlowState::Halted
            | FlowState::Stopped => false,
        }
    }
}

impl FlowMetrics {
    /// Sets `refract_flow_state` to 1 for `state` and 0 for the others, and `refract_flow_up`
    /// to 1 when the flow does its job: running, degraded (its healthy partitions flow) or
    /// standby (a member of the flow's process group ready to take over).
    pub fn set_state(&self, state: FlowState) {
        for (s, gauge) in self.states.iter() {
            gauge.set(if *s == state { 1.0 } else { 0.0 });
        }
        self.up.set(if state.is_up() { 1.0 } else { 0.0 });
    }

    /// Sets `refract_flow_degraded` to 1 for each of `causes` and 0 for the others.
    pub fn set_degraded(&self, causes: &[DegradedCause]) {
        for (cause, gauge) in DegradedCause::ALL.iter().zip(self.degraded.iter()) {
            gauge.set(if causes.contains(cause) { 1.0 } else { 0.0 });
        }
    }
}

/// Series of one plugin in one flow.
#[derive(Debug, Clone)]
pub struct PluginMetrics {
    /// Count every call.
    pub calls: Counter,
    /// Count calls that failed (error, trap, rejection).
    pub errors: Counter,
    /// Count calls interrupted by the time limit.
    pub timeouts: Counter,
    /// Observe each call's duration.
    pub call_duration: Histogram,
    /// Count calls a sandbox budget stopped, one counter per
    /// [`SANDBOX_BUDGETS`](refract_plugin::SANDBOX_BUDGETS) entry, in its order.
    pub limit_hits: [Counter; 4],
}

impl PluginMetrics {
    /// Counts one call that took `elapsed` and ended with `result`: a failure counts as an
    /// error, and a call a sandbox budget stopped also counts under its limit (a timeout also
    /// in `refract_plugin_timeouts_total`).
    pub fn count_call<T>(
        &self,
        elapsed: std::time::Duration,
        result: &Result<T, refract_plugin::PluginError>,
    ) {
        self.calls.inc();
        self.call_duration.observe_duration(elapsed);
        let Err(e) = result else {
            return;
        };
        self.errors.inc();
        if matches!(
            e,
            refract_plugin::PluginError::Trap {
                kind: refract_plugin::TrapKind::Deadline,
                ..
            }
        ) {
            self.timeouts.inc();
        }
        let budget = e.budget();
        if let Some(at) = refract_plugin::SANDBOX_BUDGETS
            .iter()
            .position(|b| Some(*b) == budget)
        {
            self.limit_hits[at].inc();
        }
    }
}

/// Outcome of a configuration reload, the `result` label of `refract_reloads_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadResult {
    /// The new configuration was applied.
    Ok,
    /// The new configuration was invalid or failed to apply; the old one keeps running.
    Rejected,
}

impl ReloadResult {
    /// The `result` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadResult::Ok => "ok",
            ReloadResult::Rejected => "rejected",
        }
    }
}

/// refract's series, registered on a generic [`Metrics`] registry: the typed constructors
/// the mirror uses instead of naming series, help texts and labels itself, and the removals
/// a reload needs. Implemented for [`Metrics`] only.
pub trait RefractSeries {
    /// Registers (or finds) the series of one replicated partition. `remote_topic` is the
    /// topic's name on the target, as MirrorMaker 2 labels it. `partition` `None`: the topic's
    /// series without a `partition` label, which all its partitions share (their counts and
    /// stats add up; the lag gauge is set to their sum by whoever computes it).
    fn source_partition(
        &self,
        source: &str,
        target: &str,
        remote_topic: &str,
        partition: Option<i32>,
    ) -> Result<SourcePartitionMetrics, MetricsError>;

    /// Removes the partition series of the flow `source->target`: every replicated partition's
    /// (MirrorSourceConnector's and the lag) and every checkpointed group's
    /// (MirrorCheckpointConnector's). Called when the flow is removed or rebuilt by a reload;
    /// a rebuilt flow registers the partitions it mirrors again.
    fn remove_flow_partitions(&self, source: &str, target: &str) -> usize;

    /// Registers (or finds) the checkpoint latency stat of one group's remote topic partition
    /// (`partition` `None`: of the topic, shared by its partitions).
    fn checkpoint_latency_ms(
        &self,
        source: &str,
        target: &str,
        group: &str,
        remote_topic: &str,
        partition: Option<i32>,
    ) -> Result<Stat, MetricsError>;

    /// Registers (or finds) the series of one flow. A new flow's state series are all 0 until
    /// [`FlowMetrics::set_state`] is called.
    fn flow(&self, flow: &str) -> Result<FlowMetrics, MetricsError>;

    /// Registers (or finds) the cluster-mode series of one flow. Call it only for a flow run in
    /// cluster mode; the gauges start at 0.
    fn cluster(&self, flow: &str) -> Result<ClusterMetrics, MetricsError>;

    /// Registers (or finds) the schema-translation series of flow `flow` between clusters
    /// `source` and `target`.
    fn schemas(
        &self,
        flow: &str,
        source: &str,
        target: &str,
    ) -> Result<refract_schema::SchemaCounters, MetricsError>;

    /// Removes every `refract_*` series of a flow (its own, its plugins', its partitions'
    /// failure series and its cluster-mode series).
    fn remove_flow(&self, flow: &str) -> usize;

    /// Registers (or finds) the series of one plugin in one flow.
    fn plugin(&self, plugin: &str, flow: &str) -> Result<PluginMetrics, MetricsError>;

    /// Registers (or finds) the failure counter of one source partition of a flow for one
    /// reason (`topic` and `partition` empty for a flow-wide read failure). Registered on the
    /// first failure only, so healthy partitions add no series.
    fn partition_errors(
        &self,
        flow: &str,
        topic: &str,
        partition: Option<i32>,
        reason: &str,
    ) -> Result<Counter, MetricsError>;

    /// Registers (or finds) the degraded gauge of one source partition of a flow (`topic` and
    /// `partition` empty for the flow's own reads).
    fn partition_degraded(
        &self,
        flow: &str,
        topic: &str,
        partition: Option<i32>,
    ) -> Result<Gauge, MetricsError>;

    /// Registers (or finds) the reload counter for one result.
    fn reloads(&self, result: ReloadResult) -> Result<Counter, MetricsError>;

    /// Registers (or finds) the counter of records the source deleted before they were
    /// mirrored, of one replicated partition (labelled like
    /// [`RefractSeries::source_partition`]); registered on the first loss only.
    fn records_lost(
        &self,
        source: &str,
        target: &str,
        remote_topic: &str,
        partition: i32,
    ) -> Result<Counter, MetricsError>;
}

impl RefractSeries for Metrics {
    fn source_partition(
        &self,
        source: &str,
        target: &str,
        remote_topic: &str,
        partition: Option<i32>,
    ) -> Result<SourcePartitionMetrics, MetricsError> {
        let partition = partition.map(|p| p.to_string());
        let mut labels = vec![
            ("source", source),
            ("target", target),
            ("topic", remote_topic),
        ];
        if let Some(p) = &partition {
            labels.push(("partition", p.as_str()));
        }
        Ok(SourcePartitionMetrics {
            record_count: self.counter(RECORD_COUNT, RECORD_COUNT_HELP, &labels)?,
            byte_count: self.counter(BYTE_COUNT, BYTE_COUNT_HELP, &labels)?,
            record_age_ms: self.stat(RECORD_AGE_MS, RECORD_AGE_HELP, &labels)?,
            replication_latency_ms: self.stat(
                REPLICATION_LATENCY_MS,
                REPLICATION_LATENCY_HELP,
                &labels,
            )?,
            replication_lag_records: self.gauge(REPLICATION_LAG_RECORDS, LAG_HELP, &labels)?,
        })
    }

    fn remove_flow_partitions(&self, source: &str, target: &str) -> usize {
        let labels = [("source", source), ("target", target)];
        self.remove(MIRROR_SOURCE_PREFIX, &labels)
            + self.remove(REPLICATION_LAG_RECORDS, &labels)
            + self.remove(RECORDS_LOST_TOTAL, &labels)
            + self.remove(MIRROR_CHECKPOINT_PREFIX, &labels)
    }

    fn checkpoint_latency_ms(
        &self,
        source: &str,
        target: &str,
        group: &str,
        remote_topic: &str,
        partition: Option<i32>,
    ) -> Result<Stat, MetricsError> {
        let partition = partition.map(|p| p.to_string());
        let mut labels = vec![
            ("source", source),
            ("target", target),
            ("group", group),
            ("topic", remote_topic),
        ];
        if let Some(p) = &partition {
            labels.push(("partition", p.as_str()));
        }
        self.stat(CHECKPOINT_LATENCY_MS, CHECKPOINT_LATENCY_HELP, &labels)
    }

    fn flow(&self, flow: &str) -> Result<FlowMetrics, MetricsError> {
        let labels = [("flow", flow)];
        let state = |s: FlowState| {
            self.gauge(
                FLOW_STATE,
                FLOW_STATE_HELP,
                &[("flow", flow), ("state", s.as_str())],
            )
            .map(|g| (s, g))
        };
        Ok(FlowMetrics {
            inflight_bytes: self.gauge(INFLIGHT_BYTES, INFLIGHT_HELP, &labels)?,
            records: [
                self.counter(RECORDS_SENT_TOTAL, SENT_HELP, &labels)?,
                self.counter(RECORDS_FILTERED_TOTAL, FILTERED_HELP, &labels)?,
                self.counter(RECORDS_SKIPPED_TOTAL, SKIPPED_HELP, &labels)?,
                self.counter(DEAD_LETTERED_RECORDS_TOTAL, DEAD_LETTERED_HELP, &labels)?,
                self.counter(RECORDS_LOOPED_TOTAL, LOOPED_HELP, &labels)?,
            ],
            records_dropped: self.counter(RECORDS_DROPPED_TOTAL, DROPPED_HELP, &labels)?,
            throttled: self.seconds_counter(THROTTLED_SECONDS_TOTAL, THROTTLED_HELP, &labels)?,
            transactions: [
                self.counter(
                    TRANSACTIONS_TOTAL,
                    TRANSACTIONS_HELP,
                    &[("flow", flow), ("result", "committed")],
                )?,
                self.counter(
                    TRANSACTIONS_TOTAL,
                    TRANSACTIONS_HELP,
                    &[("flow", flow), ("result", "aborted")],
                )?,
            ],
            transaction_duration: self.histogram(
                TRANSACTION_DURATION_SECONDS,
                TRANSACTION_DURATION_HELP,
                TRANSACTION_DURATION_BUCKETS,
                &labels,
            )?,
            up: self.gauge(FLOW_UP, FLOW_UP_HELP, &labels)?,
            states: FlowState::ALL
                .into_iter()
                .map(state)
                .collect::<Result<_, _>>()?,
            degraded: DegradedCause::ALL
                .into_iter()
                .map(|c| {
                    self.gauge(
                        FLOW_DEGRADED,
                        FLOW_DEGRADED_HELP,
                        &[("flow", flow), ("cause", c.as_str())],
                    )
                })
                .collect::<Result<_, _>>()?,
        })
    }

    fn cluster(&self, flow: &str) -> Result<ClusterMetrics, MetricsError> {
        cluster::metrics(self, flow)
    }

    fn remove_flow(&self, flow: &str) -> usize {
        self.remove(REFRACT_PREFIX, &[("flow", flow)])
    }

    fn schemas(
        &self,
        flow: &str,
        source: &str,
        target: &str,
    ) -> Result<refract_schema::SchemaCounters, MetricsError> {
        schemas::counters(self, flow, source, target)
    }

    fn plugin(&self, plugin: &str, flow: &str) -> Result<PluginMetrics, MetricsError> {
        let labels = [("plugin", plugin), ("flow", flow)];
        Ok(PluginMetrics {
            calls: self.counter(PLUGIN_CALLS_TOTAL, PLUGIN_CALLS_HELP, &labels)?,
            errors: self.counter(PLUGIN_ERRORS_TOTAL, PLUGIN_ERRORS_HELP, &labels)?,
            timeouts: self.counter(PLUGIN_TIMEOUTS_TOTAL, PLUGIN_TIMEOUTS_HELP, &labels)?,
            call_duration: self.histogram(
                PLUGIN_CALL_DURATION_SECONDS,
                PLUGIN_DURATION_HELP,
                PLUGIN_CALL_DURATION_BUCKETS,
                &labels,
            )?,
            limit_hits: {
                let hits = |limit: &str| {
                    self.counter(
                        PLUGIN_LIMIT_HITS_TOTAL,
                        PLUGIN_LIMIT_HITS_HELP,
                        &[("plugin", plugin), ("flow", flow), ("limit", limit)],
                    )
                };
                let [a, b, c, d] = refract_plugin::SANDBOX_BUDGETS;
                [hits(a)?, hits(b)?, hits(c)?, hits(d)?]
            },
        })
    }

    fn partition_errors(
        &self,
        flow: &str,
        topic: &str,
        partition: Option<i32>,
        reason: &str,
    ) -> Result<Counter, MetricsError> {
        let partition = partition.map(|p| p.to_string()).unwrap_or_default();
        self.counter(
            PARTITION_ERRORS_TOTAL,
            PARTITION_ERRORS_HELP,
            &[
                ("flow", flow),
                ("topic", topic),
                ("partition", partition.as_str()),
                ("reason", reason),
            ],
        )
    }

    fn partition_degraded(
        &self,
        flow: &str,
        topic: &str,
        partition: Option<i32>,
    ) -> Result<Gauge, MetricsError> {
        let partition = partition.map(|p| p.to_string()).unwrap_or_default();
        self.gauge(
            PARTITION_DEGRADED,
            PARTITION_DEGRADED_HELP,
            &[
                ("flow", flow),
                ("topic", topic),
                ("partition", partition.as_str()),
            ],
        )
    }

    fn reloads(&self, result: ReloadResult) -> Result<Counter, MetricsError> {
        self.counter(RELOADS_TOTAL, RELOADS_HELP, &[("result", result.as_str())])
    }

    fn records_lost(
        &self,
        source: &str,
        target: &str,
        remote_topic: &str,
        partition: i32,
    ) -> Result<Counter, MetricsError> {
        let partition = partition.to_string();
        let labels = [
            ("source", source),
            ("target", target),
            ("topic", remote_topic),
            ("partition", partition.as_str()),
        ];
        self.counter(RECORDS_LOST_TOTAL, RECORDS_LOST_HELP, &labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn source_partition_uses_mm2_names_and_labels() {
        let m = Metrics::new();
        let p = m
            .source_partition("us", "eu", "us.orders", Some(3))
            .unwrap();
        p.record_count.inc_by(2);
        p.byte_count.inc_by(100);
        p.record_age_ms.record(7.0);
        p.replication_latency_ms.record(9.0);
        p.replication_lag_records.set_i64(5);
        m.checkpoint_latency_ms("us", "eu", "g1", "us.orders", Some(3))
            .unwrap()
            .record(4.0);
        let text = m.render();
        let labels = r#"{partition="3",source="us",target="eu",topic="us.orders"}"#;
        let want = [
            format!("{RECORD_COUNT}{labels} 2"),
            format!("{BYTE_COUNT}{labels} 100"),
            format!("{RECORD_AGE_MS}_max{labels} 7"),
            format!("{REPLICATION_LATENCY_MS}_avg{labels} 9"),
            format!("{REPLICATION_LAG_RECORDS}{labels} 5"),
            format!(
                r#"{CHECKPOINT_LATENCY_MS}_min{{group="g1",partition="3",source="us",target="eu",topic="us.orders"}} 4"#
            ),
        ];
        for line in &want {
            assert!(samples(&text).contains(&line.as_str()), "{line} in\n{text}");
        }
        assert!(text.contains(&format!("# TYPE {RECORD_COUNT} counter\n")));
        assert!(text.contains(&format!("# TYPE {RECORD_AGE_MS}_min gauge\n")));
        // Registering again finds the same series.
        m.source_partition("us", "eu", "us.orders", Some(3))
            .unwrap()
            .record_count
            .inc();
        assert_eq!(p.record_count.get(), 3);
        m.source_partition("us", "ap", "us.orders", Some(3))
            .unwrap();
        // 4 record series, the lag, and the checkpoint latency of g1.
        assert_eq!(m.remove_flow_partitions("us", "eu"), 6);
        let text = m.render();
        assert!(!text.contains(r#"target="eu""#), "{text}");
        assert!(text.contains(r#"target="ap""#), "{text}");
    }

    /// `[metrics] partition_series = false`: the MirrorMaker 2 source series carry no
    /// `partition` label and a topic's partitions add up in them; every dashboard query over
    /// them neither filters nor groups by `partition`, so the panels show the same data in
    /// either mode.
    #[test]
    fn per_topic_series_add_up_and_the_dashboard_reads_them() {
        let m = Metrics::new();
        let p0 = m.source_partition("a", "b", "a.orders", None).unwrap();
        let p1 = m.source_partition("a", "b", "a.orders", None).unwrap();
        p0.record_count.inc_by(3);
        p1.record_count.inc_by(4);
        p1.replication_lag_records.set_i64(9);
        let text = m.render();
        let count = format!(r#"{RECORD_COUNT}{{source="a",target="b",topic="a.orders"}} 7"#);
        assert!(samples(&text).contains(&count.as_str()), "{text}");
        let lag =
            format!(r#"{REPLICATION_LAG_RECORDS}{{source="a",target="b",topic="a.orders"}} 9"#);
        assert!(samples(&text).contains(&lag.as_str()), "{text}");
        assert!(!text.contains("partition=\""), "{text}");

        let dashboard = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/monitoring/grafana-dashboard.json"
        ))
        .unwrap();
        let exprs: Vec<&str> = dashboard
            .match_indices("\"expr\": \"")
            .map(|(at, m)| {
                let rest = &dashboard[at + m.len()..];
                &rest[..rest
                    .find("\",\n")
                    .or_else(|| rest.find("\"\n"))
                    .unwrap_or(rest.len())]
            })
            .filter(|e| e.contains(MIRROR_SOURCE_PREFIX) || e.contains(REPLICATION_LAG_RECORDS))
            .collect();
        assert!(exprs.len() >= 5, "{exprs:?}");
        for expr in exprs {
            assert!(
                !expr.contains("partition"),
                "a dashboard query needs partition series: {expr}"
            );
        }
    }

    /// The dashboard, the alert rules and the monitoring README name only series refract
    /// has (a renamed series would otherwise leave a panel or an alert silently empty); the
    /// README's tables list every series, and the dashboard shows every cluster-mode series.
    #[test]
    fn the_monitoring_examples_name_only_series_that_exist() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/monitoring");
        let mut seen = 0;
        let mut named = std::collections::BTreeMap::<&str, Vec<String>>::new();
        for file in ["grafana-dashboard.json", "alerts.yml", "README.md"] {
            let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
            for prefix in [REFRACT_PREFIX, "kafka_connect_mirror_"] {
                for (at, _) in text.match_indices(prefix) {
                    let name: String = text[at..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    if name.ends_with('_') {
                        continue; // a prefix, as in `kafka_connect_mirror_*`
                    }
                    let base = ["_bucket", "_sum", "_count", "_min", "_max", "_avg"]
                        .iter()
                        .find_map(|s| name.strip_suffix(s).filter(|b| ALL.contains(b)))
                        .unwrap_or(&name);
                    assert!(
                        ALL.contains(&base),
                        "{file} names {name}, which refract does not export"
                    );
                    named.entry(file).or_default().push(base.to_owned());
                    seen += 1;
                }
            }
        }
        assert!(seen > 20, "only {seen} series names found");
        let names = |file: &str| named.get(file).cloned().unwrap_or_default();
        for name in ALL {
            assert!(
                names("README.md").iter().any(|n| n == name),
                "README.md does not list {name}"
            );
        }
        for name in [
            CLUSTER_TASKS,
            CLUSTER_MEMBERS,
            CLUSTER_DUTIES,
            CLUSTER_REBALANCES_TOTAL,
            CLUSTER_HANDOVER_SECONDS,
        ] {
            assert!(
                names("grafana-dashboard.json").iter().any(|n| n == name),
                "the dashboard does not show {name}"
            );
        }
        // Every bad state an operator must act on has an alert: down, halted, degraded (with
        // its cause), a degraded partition, lost records, unowned duties.
        for name in [
            CLUSTER_DUTIES,
            CLUSTER_MEMBERS,
            FLOW_UP,
            FLOW_STATE,
            FLOW_DEGRADED,
            PARTITION_DEGRADED,
            RECORDS_LOST_TOTAL,
        ] {
            assert!(
                names("alerts.yml").iter().any(|n| n == name),
                "alerts.yml does not use {name}"
            );
        }
    }

    /// The monitoring README's alert table lists every rule of alerts.yml, and every alert the
    /// book names exists (the troubleshooting page once cited an alert nobody had written).
    #[test]
    fn every_alert_is_listed_and_every_alert_the_book_names_exists() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).unwrap();
        let rules: Vec<String> = read("examples/monitoring/alerts.yml")
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- alert: ").map(str::to_string))
            .collect();
        assert!(rules.len() >= 15, "{rules:?}");
        let readme = read("examples/monitoring/README.md");
        for rule in &rules {
            assert!(
                readme.contains(&format!("| `{rule}` |")),
                "examples/monitoring/README.md's alert table misses {rule}"
            );
        }
        let mut pages = vec![std::path::PathBuf::from(format!("{root}/docs/src"))];
        let mut cited = 0;
        while let Some(path) = pages.pop() {
            if path.is_dir() {
                pages.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // "the `X` alert", "`X` fires", "alert `X`".
            let words: Vec<&str> = text.split_whitespace().collect();
            for (i, w) in words.iter().enumerate() {
                let Some(name) = w
                    .trim_matches(|c: char| !c.is_alphanumeric() && c != '`')
                    .strip_prefix('`')
                    .and_then(|n| n.strip_suffix('`'))
                else {
                    continue;
                };
                let near = |j: usize| words.get(j).is_some_and(|n| n.starts_with("alert"));
                if name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    && name.chars().all(|c| c.is_ascii_alphanumeric())
                    && (near(i + 1) || (i > 0 && near(i - 1)) || words.get(i + 1) == Some(&"fires"))
                {
                    cited += 1;
                    assert!(
                        rules.iter().any(|r| r == name),
                        "{} names the alert {name}, which examples/monitoring/alerts.yml does not have",
                        path.display()
                    );
                }
            }
        }
        assert!(cited > 0, "no alert named in the book");
    }

    /// A real plugin run out of each sandbox budget in turn (the hostile transform of
    /// `plugins/testing/hostile`) counts once under that budget's `limit`, and nowhere else.
    #[test]
    fn each_sandbox_limit_a_plugin_hits_is_counted_under_its_label() {
        use refract_config::{PluginLimitSettings, PluginLocation, PluginSpec};
        use refract_plugin::{
            guest_dir, BatchView, PluginLimits, PluginRuntime, Processor, ProcessorPlugin,
            RecordView,
        };
        let runtime = PluginRuntime::new(PluginLimits::default()).unwrap();
        let m = Metrics::new();
        let metrics = m.plugin("hostile", "a->b").unwrap();
        let none = PluginLimitSettings::default();
        let cases = [
            (
                "deadline",
                "attack = \"spin-clock\"",
                PluginLimitSettings {
                    call_timeout: Some(std::time::Duration::from_millis(100)),
                    ..none
                },
            ),
            (
                // One 32 MiB value, in an instance allowed 16 MiB.
                "memory",
                "attack = \"big-copies\"\ncount = 1\nsize = 33554432",
                PluginLimitSettings {
                    memory_limit: Some(16 << 20),
                    ..none
                },
            ),
            (
                "outputs",
                "attack = \"fan-out\"\ncount = 11",
                PluginLimitSettings {
                    max_outputs_per_record: Some(10),
                    ..none
                },
            ),
            (
                "bytes",
                "attack = \"big-copies\"\ncount = 4\nsize = 524288",
                PluginLimitSettings {
                    max_output_bytes: Some(1 << 20),
                    ..none
                },
            ),
        ];
        let hits = |text: &str, limit: &str| {
            let series = format!(
                "refract_plugin_limit_hits_total{{flow=\"a->b\",limit=\"{limit}\",plugin=\"hostile\"}} "
            );
            samples(text)
                .iter()
                .find_map(|l| l.strip_prefix(series.as_str()))
                .map(|v| v.to_string())
        };
        let before = m.render();
        for (limit, _, _) in &cases {
            assert_eq!(hits(&before, limit).as_deref(), Some("0"), "{limit}");
        }
        for (n, (limit, attack, limits)) in cases.into_iter().enumerate() {
            let spec = PluginSpec {
                location: PluginLocation::File(guest_dir().join("hostile.wasm")),
                config: format!("{attack}\non = \"x\""),
                key: "flow[0].processors[0]".into(),
                limits,
            };
            let mut processor = Processor::new(ProcessorPlugin::load(&runtime, &spec).unwrap());
            let record = RecordView {
                partition: 0,
                offset: 0,
                timestamp_ms: 0,
                key: None,
                value: Some(b"x"),
                headers: vec![],
            };
            let batch = BatchView {
                source_cluster: "a",
                topic: "t",
                target_topic: "a.t",
                records: vec![record],
            };
            let started = std::time::Instant::now();
            let result = processor.process(&batch);
            assert_eq!(
                result.as_ref().err().and_then(|e| e.budget()),
                Some(limit),
                "{result:?}"
            );
            metrics.count_call(started.elapsed(), &result);
            let text = m.render();
            for (i, other) in refract_plugin::SANDBOX_BUDGETS.iter().enumerate() {
                let want = if i <= n { "1" } else { "0" };
                assert_eq!(
                    hits(&text, other).as_deref(),
                    Some(want),
                    "{limit}: {other}"
                );
            }
        }
        let text = m.render();
        assert!(samples(&text)
            .contains(&r#"refract_plugin_errors_total{flow="a->b",plugin="hostile"} 4"#));
        assert!(samples(&text)
            .contains(&r#"refract_plugin_timeouts_total{flow="a->b",plugin="hostile"} 1"#));
    }

    #[test]
    fn flow_state_is_one_hot_and_drives_up() {
        let m = Metrics::new();
        let f = m.flow("a->b").unwrap();
        f.set_state(FlowState::Halted);
        f.set_state(FlowState::Running);
        f.inflight_bytes.add_i64(10);
        f.count(RecordEvent::Skipped, 2);
        let text = m.render();
        assert!(samples(&text).contains(&r#"refract_records_skipped_total{flow="a->b"} 2"#));
        assert!(samples(&text).contains(&r#"refract_records_dropped_total{flow="a->b"} 2"#));
        assert_eq!(f.get(RecordEvent::Skipped), 2);
        assert_eq!(f.get(RecordEvent::Sent), 0);
        let state_lines: Vec<&str> = samples(&text)
            .into_iter()
            .filter(|l| l.starts_with(FLOW_STATE))
            .collect();
        assert_eq!(
            state_lines,
            [
                r#"refract_flow_state{flow="a->b",state="degraded"} 0"#,
                r#"refract_flow_state{flow="a->b",state="halted"} 0"#,
                r#"refract_flow_state{flow="a->b",state="restarting"} 0"#,
                r#"refract_flow_state{flow="a->b",state="running"} 1"#,
                r#"refract_flow_state{flow="a->b",state="standby"} 0"#,
                r#"refract_flow_state{flow="a->b",state="stopped"} 0"#,
            ]
        );
        assert!(samples(&text).contains(&r#"refract_flow_up{flow="a->b"} 1"#));
        for (state, up) in [
            (FlowState::Degraded, 1),
            (FlowState::Standby, 1),
            (FlowState::Restarting, 0),
            (FlowState::Halted, 0),
            (FlowState::Stopped, 0),
            (FlowState::Starting, 0),
            (FlowState::Running, 1),
        ] {
            f.set_state(state);
            let text = m.render();
            let up_line = format!(r#"refract_flow_up{{flow="a->b"}} {up}"#);
            assert!(samples(&text).contains(&up_line.as_str()), "{state:?}");
            assert_eq!(state.is_up(), up == 1);
            let current: Vec<&str> = samples(&text)
                .into_iter()
                .filter(|l| l.starts_with(FLOW_STATE) && l.ends_with(" 1"))
                .collect();
            let want = format!(
                r#"refract_flow_state{{flow="a->b",state="{}"}} 1"#,
                state.as_str()
            );
            if state == FlowState::Starting {
                assert!(current.is_empty(), "{current:?}");
            } else {
                assert_eq!(current, [want.as_str()]);
            }
        }
        // Each cause of a degraded flow is its own series, so an alert can say which.
        f.set_degraded(&[DegradedCause::Recreated, DegradedCause::Checkpoints]);
        let degraded = |text: &str| -> Vec<String> {
            samples(text)
                .into_iter()
                .filter(|l| l.starts_with(FLOW_DEGRADED))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            degraded(&m.render()),
            [
                r#"refract_flow_degraded{cause="checkpoints",flow="a->b"} 1"#,
                r#"refract_flow_degraded{cause="partition",flow="a->b"} 0"#,
                r#"refract_flow_degraded{cause="recreated",flow="a->b"} 1"#,
                r#"refract_flow_degraded{cause="stalled",flow="a->b"} 0"#,
                r#"refract_flow_degraded{cause="unreachable",flow="a->b"} 0"#,
            ]
        );
        f.set_degraded(&[]);
        assert!(degraded(&m.render()).iter().all(|l| l.ends_with(" 0")));
        f.set_state(FlowState::Standby);
        assert!(
            samples(&m.render()).contains(&r#"refract_flow_state{flow="a->b",state="standby"} 1"#)
        );
        let p = m.plugin("mask", "a->b").unwrap();
        p.calls.inc();
        m.plugin("mask", "other").unwrap();
        m.partition_degraded("a->b", "t", Some(0)).unwrap().set(1.0);
        // 6 state + 5 degraded causes + up + inflight + 5 record events + dropped + throttled
        // + 2 transactions + 1 duration + 4 plugin series + 4 plugin limit hits + degraded.
        assert_eq!(m.remove_flow("a->b"), 32);
        assert!(!m.render().contains("a->b"));
        assert!(m.render().contains(r#"flow="other""#));
    }

    #[test]
    fn standby_is_a_state_with_its_own_series() {
        assert_eq!(FlowState::Standby.as_str(), "standby");
        assert!(FlowState::ALL.contains(&FlowState::Standby));
        assert!(!FlowState::ALL.contains(&FlowState::Starting));
        let m = Metrics::new();
        m.flow("f").unwrap().set_state(FlowState::Standby);
        let text = m.render();
        let expected = "\
# HELP refract_flow_state The flow's state: 1 for the current one of running, degraded, standby, restarting, halted, stopped; 0 for the others.
# TYPE refract_flow_state gauge
refract_flow_state{flow=\"f\",state=\"degraded\"} 0
refract_flow_state{flow=\"f\",state=\"halted\"} 0
refract_flow_state{flow=\"f\",state=\"restarting\"} 0
refract_flow_state{flow=\"f\",state=\"running\"} 0
refract_flow_state{flow=\"f\",state=\"standby\"} 1
refract_flow_state{flow=\"f\",state=\"stopped\"} 0
# HELP refract_flow_up Whether the flow does its job on this process (1: running, degraded, or standby, a member of the flow's process group that holds no task and is ready to take over) or not (0: starting, restarting, halted, stopped).
# TYPE refract_flow_up gauge
refract_flow_up{flow=\"f\"} 1
";
        assert!(text.contains(expected), "{text}");
    }

    #[test]
    fn cluster_series_render_and_go_with_the_flow() {
        let m = Metrics::with_const_labels(&[("instance", "p1")]).unwrap();
        let c = m.cluster("a->b").unwrap();
        c.tasks.set_i64(3);
        c.members.set_i64(2);
        c.set_duties(true);
        c.rebalances.inc_by(2);
        c.handover.observe(0.2);
        c.handover
            .observe_duration(std::time::Duration::from_secs(90));
        let expected = "\
# HELP refract_cluster_duties Whether this process runs the flow's once-per-flow duties (heartbeats, checkpoints, topic creation, config sync) because it holds task 0 (1) or not (0) (cluster mode).
# TYPE refract_cluster_duties gauge
refract_cluster_duties{flow=\"a->b\",instance=\"p1\"} 1
# HELP refract_cluster_handover_seconds Time to drain and release tasks of the flow that moved to another process: flush, commit and stop (cluster mode; seconds).
# TYPE refract_cluster_handover_seconds histogram
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"0.05\"} 0
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"0.1\"} 0
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"0.25\"} 1
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"0.5\"} 1
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"1\"} 1
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"2.5\"} 1
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"5\"} 1
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"10\"} 1
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"30\"} 1
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"60\"} 1
refract_cluster_handover_seconds_bucket{flow=\"a->b\",instance=\"p1\",le=\"+Inf\"} 2
refract_cluster_handover_seconds_sum{flow=\"a->b\",instance=\"p1\"} 90.2
refract_cluster_handover_seconds_count{flow=\"a->b\",instance=\"p1\"} 2
# HELP refract_cluster_members Members of the flow's process group as last seen, 0 when unknown (cluster mode; processes).
# TYPE refract_cluster_members gauge
refract_cluster_members{flow=\"a->b\",instance=\"p1\"} 2
# HELP refract_cluster_rebalances_total Task assignments this process received for the flow, each assign or revoke (cluster mode; assignments).
# TYPE refract_cluster_rebalances_total counter
refract_cluster_rebalances_total{flow=\"a->b\",instance=\"p1\"} 2
# HELP refract_cluster_tasks Tasks of the flow this process holds now (cluster mode; tasks).
# TYPE refract_cluster_tasks gauge
refract_cluster_tasks{flow=\"a->b\",instance=\"p1\"} 3
";
        assert_eq!(m.render(), expected);
        c.set_duties(false);
        assert_eq!(c.duties.get(), 0.0);
        // Registering again finds the same series.
        assert_eq!(m.cluster("a->b").unwrap().rebalances.get(), 2);

        // remove_flow takes the cluster series with the flow's others, and only that flow's.
        m.flow("a->b").unwrap();
        m.cluster("c->d").unwrap().tasks.set_i64(1);
        // 5 cluster series + 23 of the flow (6 state, 5 degraded causes, up, inflight, 5 record
        // events, dropped, throttled, 2 transactions, transaction duration).
        assert_eq!(m.remove_flow("a->b"), 5 + 23);
        assert_eq!(m.remove_flow("a->b"), 0);
        let text = m.render();
        assert!(!text.contains("a->b"), "{text}");
        assert!(
            samples(&text).contains(&r#"refract_cluster_tasks{flow="c->d",instance="p1"} 1"#),
            "{text}"
        );
        assert_eq!(m.remove_flow("c->d"), 5);
        assert_eq!(m.render(), "");
    }

    #[test]
    fn plugin_histogram_spans_10us_to_1s() {
        let m = Metrics::new();
        let p = m.plugin("mask", "f").unwrap();
        p.call_duration
            .observe_duration(std::time::Duration::from_micros(30));
        let text = m.render();
        let buckets: Vec<&str> = samples(&text)
            .into_iter()
            .filter(|l| l.starts_with("refract_plugin_call_duration_seconds_bucket"))
            .collect();
        assert_eq!(buckets.len(), PLUGIN_CALL_DURATION_BUCKETS.len() + 1);
        assert!(buckets[0].contains(r#"le="0.00001""#) && buckets[0].ends_with(" 0"));
        assert!(buckets[2].contains(r#"le="0.00005""#) && buckets[2].ends_with(" 1"));
        assert!(buckets[15].contains(r#"le="1""#));
        assert!(buckets[16].contains(r#"le="+Inf""#));
    }

    #[test]
    fn partition_series_carry_flow_topic_partition_and_reason() {
        let m = Metrics::new();
        let errors = m
            .partition_errors("a->b", "big", Some(0), "record_too_large")
            .unwrap();
        errors.inc();
        m.partition_errors("a->b", "big", Some(0), "record_too_large")
            .unwrap()
            .inc();
        m.partition_degraded("a->b", "big", Some(0))
            .unwrap()
            .set(1.0);
        m.partition_errors("a->b", "", None, "fetch").unwrap().inc();
        let text = m.render();
        for line in [
            r#"refract_partition_errors_total{flow="a->b",partition="0",reason="record_too_large",topic="big"} 2"#,
            r#"refract_partition_degraded{flow="a->b",partition="0",topic="big"} 1"#,
            r#"refract_partition_errors_total{flow="a->b",partition="",reason="fetch",topic=""} 1"#,
        ] {
            assert!(samples(&text).contains(&line), "{line} in\n{text}");
        }
        assert!(text.contains(&format!("# TYPE {PARTITION_ERRORS_TOTAL} counter\n")));
        assert!(text.contains(&format!("# TYPE {PARTITION_DEGRADED} gauge\n")));
    }

    #[test]
    fn records_lost_carry_the_partition_labels_and_go_with_the_flow() {
        let m = Metrics::new();
        m.records_lost("a", "b", "a.t", 0).unwrap().inc_by(50);
        let text = m.render();
        let line =
            r#"refract_records_lost_total{partition="0",source="a",target="b",topic="a.t"} 50"#;
        assert!(samples(&text).contains(&line), "{line} in\n{text}");
        assert!(text.contains(&format!("# TYPE {RECORDS_LOST_TOTAL} counter\n")));
        assert_eq!(m.remove_flow_partitions("a", "b"), 1);
    }

    #[test]
    fn reloads_by_result() {
        let m = Metrics::new();
        m.reloads(ReloadResult::Ok).unwrap().inc();
        m.reloads(ReloadResult::Rejected).unwrap().inc_by(2);
        let text = m.render();
        assert!(samples(&text).contains(&r#"refract_reloads_total{result="ok"} 1"#));
        assert!(samples(&text).contains(&r#"refract_reloads_total{result="rejected"} 2"#));
    }

    /// Compares a whole exposition with the golden file `tests/golden/<name>`, byte for byte.
    /// `REFRACT_BLESS=1` writes the file instead (then review its diff: every changed byte is
    /// a change a scraper sees).
    fn assert_golden(name: &str, text: &str) {
        let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
        refract_testkit::golden::assert_golden(
            std::path::Path::new(&path),
            &format!("host/mirror/tests/golden/{name}"),
            text,
            "REFRACT_BLESS=1 cargo test -p refract-mirror --lib series",
        );
    }

    /// The whole `/metrics` of one process mirroring `a->b` (one topic of 2 partitions, one
    /// processor plugin, a checkpointed group, reloads, a degraded partition), recorded the
    /// way the mirror records. The clock is a manual one, so the stats' windows are exact.
    #[test]
    fn golden_metrics_of_a_small_pipeline() {
        let clock = std::sync::Arc::new(refract_telemetry::ManualClock::new());
        let m = Metrics::with_clock(clock.clone(), std::time::Duration::from_secs(30));
        let flow = m.flow("a->b").unwrap();
        flow.set_state(FlowState::Running);
        flow.inflight_bytes.add_i64(1536);
        flow.inflight_bytes.add_i64(-512);
        for (event, n) in [
            (RecordEvent::Sent, 10),
            (RecordEvent::Filtered, 2),
            (RecordEvent::Skipped, 1),
            (RecordEvent::DeadLettered, 1),
            (RecordEvent::Looped, 3),
        ] {
            flow.count(event, n);
        }
        flow.transaction(true);
        flow.transaction(true);
        flow.transaction(false);
        flow.transaction_duration.observe(0.03);
        flow.transaction_duration
            .observe_duration(std::time::Duration::from_millis(1200));
        flow.throttled.add(std::time::Duration::from_millis(1250));

        let p0 = m.source_partition("a", "b", "a.orders", Some(0)).unwrap();
        let p1 = m.source_partition("a", "b", "a.orders", Some(1)).unwrap();
        // Read-side observations are handed over in batches, as the mirror's slots do; the
        // first one leaves the window before the render.
        let mut age = refract_telemetry::StatBatch::new();
        age.record(100.0);
        p0.record_age_ms.record_all(&mut age);
        clock.advance(std::time::Duration::from_secs(31));
        for v in [5.0, 7.0, 6.5] {
            age.record(v);
        }
        p0.record_age_ms.record_all(&mut age);
        p0.byte_count.inc_by(4096);
        p0.record_count.inc_by(6);
        p0.replication_latency_ms.record(12.25);
        p0.replication_latency_ms.record(0.5);
        p0.replication_lag_records.set_i64(0);
        p1.byte_count.inc_by(100);
        p1.record_count.inc_by(1);
        p1.record_age_ms.record(0.000_1);
        p1.replication_lag_records.set_i64(42);

        m.checkpoint_latency_ms("a", "b", "g1", "a.orders", Some(0))
            .unwrap()
            .record(3.0);
        // Group ids are free text: quotes and backslashes are escaped.
        m.checkpoint_latency_ms("a", "b", "billing \"eu\" \\ 2", "a.orders", Some(1))
            .unwrap();

        let plugin = m.plugin("mask", "a->b").unwrap();
        plugin.calls.inc_by(13);
        plugin.errors.inc();
        plugin
            .call_duration
            .observe_duration(std::time::Duration::from_micros(30));
        plugin.call_duration.observe(0.002);
        plugin.call_duration.observe(3.0);

        m.reloads(ReloadResult::Ok).unwrap().inc();
        m.reloads(ReloadResult::Rejected).unwrap().inc_by(2);
        m.partition_errors("a->b", "a.orders", Some(1), "record_too_large")
            .unwrap()
            .inc();
        m.partition_degraded("a->b", "a.orders", Some(1))
            .unwrap()
            .set(1.0);
        m.partition_errors("a->b", "", None, "fetch")
            .unwrap()
            .inc_by(3);

        assert_golden("metrics.txt", &m.render());
    }

    /// The whole `/metrics` of one process of a cluster-mode flow: every series carries the
    /// process's `instance`, and the cluster series exist. No stat is recorded (this registry
    /// has the real clock), so they render as MirrorMaker 2's empty windows do: `NaN`.
    #[test]
    fn golden_metrics_in_cluster_mode() {
        let m = Metrics::with_const_labels(&[("instance", "mirror-1")]).unwrap();
        let flow = m.flow("a->b").unwrap();
        flow.set_state(FlowState::Standby);
        flow.count(RecordEvent::Sent, 5);
        let cluster = m.cluster("a->b").unwrap();
        cluster.tasks.set_i64(2);
        cluster.members.set_i64(3);
        cluster.set_duties(true);
        cluster.rebalances.inc_by(4);
        cluster.handover.observe(0.2);
        cluster
            .handover
            .observe_duration(std::time::Duration::from_secs(90));
        let p0 = m.source_partition("a", "b", "a.orders", Some(0)).unwrap();
        p0.record_count.inc_by(5);
        p0.replication_lag_records.set_i64(7);
        m.checkpoint_latency_ms("a", "b", "g1", "a.orders", Some(0))
            .unwrap();
        m.reloads(ReloadResult::Ok).unwrap().inc();
        assert_golden("metrics-cluster.txt", &m.render());
    }

    #[test]
    fn every_refract_series_registers_together() {
        // All families in one registry: no kind conflicts or name clashes between them.
        let m = Metrics::new();
        m.source_partition("s", "t", "s.x", Some(0)).unwrap();
        m.checkpoint_latency_ms("s", "t", "g", "s.x", Some(0))
            .unwrap();
        m.flow("f").unwrap();
        m.plugin("p", "f").unwrap();
        m.reloads(ReloadResult::Ok).unwrap();
        m.partition_errors("f", "x", Some(0), "produce").unwrap();
        m.partition_degraded("f", "x", Some(0)).unwrap();
        m.cluster("f").unwrap();
        m.records_lost("s", "t", "s.x", 0).unwrap();
        m.schemas("f", "s", "t").unwrap();
        let text = m.render();
        let helps = text.lines().filter(|l| l.starts_with("# HELP")).count();
        // 2 counters + 2 stats×4 + lag + checkpoint stat×4 + 13 flow (inflight, 5 record
        // events, the deprecated dropped, throttled, transactions, transaction duration, up,
        // state, degraded) + 5 plugin + reloads + 2 partition + 5 cluster + lost + 4 schema.
        assert_eq!(helps, 2 + 8 + 1 + 4 + 13 + 5 + 1 + 2 + 5 + 1 + 4);
        // Every name in `ALL` was registered.
        for name in ALL {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} not registered"
            );
        }
    }
    /// Every family as a scraper sees it: exposed name → (type, HELP, label → values seen).
    type Families = std::collections::BTreeMap<
        String,
        (
            String,
            String,
            std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        ),
    >;

    /// Reads an exposition into [`Families`]; a histogram's `_bucket`, `_sum` and `_count`
    /// samples count as its family's, and its `le` label is left out.
    fn families(text: &str) -> Families {
        let mut out = Families::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                out.entry(name.to_string()).or_default().1 = help.to_string();
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
                out.entry(name.to_string()).or_default().0 = kind.to_string();
            } else if let Some((name, labels)) = line.split_once('{') {
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| {
                        name.strip_suffix(suffix)
                            .filter(|base| out.get(*base).is_some_and(|f| f.0 == "histogram"))
                    })
                    .unwrap_or(name);
                let labels = labels.rsplit_once('}').map_or("", |(l, _)| l);
                let entry = out.entry(family.to_string()).or_default();
                for pair in labels.split("\",") {
                    let Some((label, value)) = pair.split_once("=\"") else {
                        continue;
                    };
                    if label != "le" {
                        let value = value.trim_end_matches('"').to_string();
                        entry.2.entry(label.to_string()).or_default().insert(value);
                    }
                }
            }
        }
        out
    }

    /// Every series registered once, the MirrorMaker 2 ones per partition (`per_partition`)
    /// or per topic, as the mirror registers them.
    fn every_series(per_partition: bool) -> String {
        let m = Metrics::new();
        let partition = per_partition.then_some(0);
        m.source_partition("<source>", "<target>", "<topic>", partition)
            .unwrap();
        m.checkpoint_latency_ms("<source>", "<target>", "<group>", "<topic>", partition)
            .unwrap();
        m.flow("<flow>").unwrap();
        m.plugin("<plugin>", "<flow>").unwrap();
        m.reloads(ReloadResult::Ok).unwrap();
        m.reloads(ReloadResult::Rejected).unwrap();
        m.partition_errors("<flow>", "<topic>", Some(0), "<reason>")
            .unwrap();
        m.partition_degraded("<flow>", "<topic>", Some(0)).unwrap();
        m.cluster("<flow>").unwrap();
        m.records_lost("<source>", "<target>", "<topic>", 0)
            .unwrap();
        m.schemas("<flow>", "<cluster>", "<cluster>").unwrap();
        m.render()
    }

    /// The metrics reference in Markdown: every family with its type, labels and HELP.
    fn render_reference(header: &str) -> String {
        let per_partition = families(&every_series(true));
        let per_topic = families(&every_series(false));
        let labels =
            |labels: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>| {
                let shown: Vec<String> = labels
                    .iter()
                    .map(|(label, values)| {
                        if values.len() > 1 {
                            let values: Vec<&str> = values.iter().map(String::as_str).collect();
                            format!("`{label}` ({})", values.join(", "))
                        } else {
                            format!("`{label}`")
                        }
                    })
                    .collect();
                if shown.is_empty() {
                    "none".to_string()
                } else {
                    shown.join(", ")
                }
            };
        let cell = |s: &str| s.replace('|', "\\|");
        let mut out = String::from(header);
        out.push_str("# Metrics\n\n");
        out.push_str(
            "Every series refract exports on `[metrics] listen` at `/metrics`, in the Prometheus \
             text format. The `kafka_connect_mirror_*` series carry the names and labels \
             Strimzi's JMX exporter gives MirrorMaker 2's metrics, so MM2 dashboards and alerts \
             keep working. In cluster mode (`[cluster]`) every series also carries the \
             process's `instance` label, and the `refract_cluster_*` series exist only for flows \
             run in cluster mode.\n\n",
        );
        out.push_str(
            "A stat (MirrorMaker 2's `-ms` metrics) is four gauges: the last recorded value and \
             its `_min`, `_max` and `_avg` over the last 30 seconds (`NaN` when nothing was \
             recorded in the window). A histogram has `_bucket` (with `le`), `_sum` and `_count` \
             samples.\n\n",
        );
        out.push_str(
            "With `[metrics] partition_series = false` the series marked so below carry no \
             `partition` label: one series per topic, its partitions summed up (or, for the \
             stats, recorded together).\n\n",
        );
        out.push_str("| Name | Type | Labels | Help |\n|---|---|---|---|\n");
        for (name, (kind, help, by_label)) in &per_partition {
            let stat_part = ["_min", "_max", "_avg"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .is_some_and(|base| per_partition.contains_key(base))
            });
            if stat_part {
                continue;
            }
            let is_stat = per_partition.contains_key(&format!("{name}_avg"));
            let kind = if is_stat {
                "stat (gauge + `_min`, `_max`, `_avg`)".to_string()
            } else {
                kind.clone()
            };
            let help = if is_stat {
                help.strip_suffix(" (last recorded value)").unwrap_or(help)
            } else {
                help.as_str()
            };
            let mut shown = labels(by_label);
            match per_topic.get(name) {
                Some((_, _, topic_labels)) if topic_labels != by_label => {
                    shown.push_str(&format!(
                        "; with `partition_series = false`: {}",
                        labels(topic_labels)
                    ));
                }
                _ => {}
            }
            out.push_str(&format!(
                "| `{name}` | {kind} | {} | {} |\n",
                cell(&shown),
                cell(help)
            ));
        }
        out
    }

    /// `docs/src/reference/metrics.md` is what the series definitions render to.
    #[test]
    fn metrics_reference_is_current() {
        let test = "metrics_reference_is_current";
        let header = format!("<!-- generated by refract-mirror's {test} test; do not edit: REFRACT_BLESS=1 cargo test -p refract-mirror --lib {test} -->\n\n");
        let text = render_reference(&header);
        for name in ALL {
            assert!(text.contains(&format!("| `{name}` |")), "{name} is missing");
        }
        let path = format!(
            "{}/../../docs/src/reference/metrics.md",
            env!("CARGO_MANIFEST_DIR")
        );
        refract_testkit::golden::assert_golden(
            std::path::Path::new(&path),
            "docs/src/reference/metrics.md",
            &text,
            &format!("REFRACT_BLESS=1 cargo test -p refract-mirror --lib {test}"),
        );
    }
}
