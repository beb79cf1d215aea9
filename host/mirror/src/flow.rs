//! One running flow: source consumer → policy → target producer, with the source position
//! committed only up to what the target has acknowledged.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::admin::AdminClient;
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::consumer::{BaseConsumer, Consumer, DefaultConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Header, Headers, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};
use tracing::{debug, info, warn};

use refract_config::{ClientRole, Cluster, Flow, OffsetSyncsLocation, OnError};
use refract_plugin::{PolicyPlugin, Processor, ProcessorPlugin, ReplicationPolicy};

use crate::acls;
use crate::admin_ffi::commit_within;
use crate::chain::{Chain, HeaderPair, Item};
use crate::degraded::{Change, Degraded, FlowHealth, Origin, PartitionHealth, Phase, Reason};
use crate::source_queue::{Polled, SourceError, SourceMessage, SourceQueue};

use crate::clients::{
    await_partitions, client_config, create_topic, ensure_topic, grow_topic, list_topics,
    Authenticated, Detached, REQUEST_TIMEOUT,
};
use crate::mm2::{Heartbeat, OffsetSync, OffsetSyncWriter};
use crate::planner::{Skip, TopicPlan, TopicPlanner};
use crate::progress::PartitionProgress;
use crate::takeover::Mm2Takeover;
use crate::topic_configs;
use refract_telemetry::{
    FlowMetrics, FlowState, Gauge, Metrics, SourcePartitionMetrics, StatBatch,
};

/// Header naming the clusters a record has been mirrored from, oldest first, comma-separated.
pub const PROVENANCE_HEADER: &str = "refract.provenance";
/// Token slot of records that belong to no source partition (heartbeats, offset syncs on the
/// target): their delivery reports are ignored.
const NO_SLOT: usize = usize::MAX;

/// Most records forwarded between two checks of timers and delivery reports.
const MAX_POLL_BATCH: usize = 1000;
/// How long shutdown waits for the target to acknowledge what was sent, and commits, unless
/// `refract run --drain-timeout` says otherwise.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a flow may go without any record acknowledged while records are behind before it is
/// `stalled` (degraded).
pub const STALL_AFTER: Duration = Duration::from_secs(60);

/// What a running flow has done, shared with whoever started it.
#[derive(Debug, Default, Clone)]
pub struct FlowStatus {
    /// Source topic → remote topic, for every mirrored topic.
    pub routes: BTreeMap<String, String>,
    /// Records handed to the target producer since start.
    pub records_sent: u64,
    /// Records that were already on the target past the last commit when the flow (re)started,
    /// and so are mirrored a second time.
    pub duplicates: u64,
    /// Times the flow failed and was restarted.
    pub restarts: u64,
    /// Records a processor dropped on purpose.
    pub records_dropped: u64,
    /// Records dropped because a processor with `on_error = "skip"` failed on them.
    pub records_skipped: u64,
    /// Records sent to the dead-letter topic.
    pub records_dead_lettered: u64,
    /// Records not mirrored because their provenance header shows they came from the target.
    pub records_looped: u64,
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
    /// running, degraded (running, with partitions that cannot make progress), restarting,
    /// halted or stopped.
    pub state: &'static str,
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
    /// Clusters that answer again after an outage, not yet reported with their backlog.
    pub recovered: Vec<(String, &'static str, Duration)>,
    /// Why the flow halted (a processor with `on_error = "stop"` failed), if it did.
    pub halted: Option<String>,
    /// The last failure, if any.
    pub last_error: Option<String>,
}

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
    fn new(slot: Option<&Slot>, d: &Degraded) -> Self {
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

/// Wall-clock milliseconds since the epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Locks a mutex, recovering the data if another thread panicked while holding it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The consumer group on the source under which a flow commits its progress.
pub fn progress_group(flow: &Flow) -> String {
    format!("refract-{}-{}", flow.source, flow.target)
}

/// (slot, source offset, whether the output goes to the slot's own remote partition).
type Token = Box<(usize, i64, bool)>;

/// One source partition's delivery state, shared with the delivery callback under one lock:
/// the acknowledgement watermark and the MM2 series that acknowledgements feed.
struct Tracked {
    progress: PartitionProgress,
    /// Its MirrorMaker 2 series (none when the registry refused them).
    metrics: Option<SourcePartitionMetrics>,
    /// Records acknowledged and their replication latency since the last hand-over to `metrics`
    /// (handed over every [`STATS_INTERVAL`], so the hot path reads no clock and takes no lock
    /// of its own per record).
    acked: u64,
    latency: StatBatch,
}

impl Tracked {
    fn new(progress: PartitionProgress, metrics: Option<SourcePartitionMetrics>) -> Self {
        Self {
            progress,
            metrics,
            acked: 0,
            latency: StatBatch::new(),
        }
    }

    /// Hands gathered observations to the series: latency first, so a reader that sees the new
    /// record count also sees their latency.
    fn publish(&mut self) {
        if let Some(m) = &self.metrics {
            m.replication_latency_ms.record_all(&mut self.latency);
            m.record_count.inc_by(std::mem::take(&mut self.acked));
        }
    }
}

impl std::ops::Deref for Tracked {
    type Target = PartitionProgress;
    fn deref(&self) -> &PartitionProgress {
        &self.progress
    }
}

impl std::ops::DerefMut for Tracked {
    fn deref_mut(&mut self) -> &mut PartitionProgress {
        &mut self.progress
    }
}

/// Every slot's delivery state, indexed like [`Slots::slots`].
type Progress = Arc<Mutex<Vec<Tracked>>>;

/// How often gathered per-record observations are handed to the metrics registry.
const STATS_INTERVAL: Duration = Duration::from_millis(100);

/// Routes delivery reports to the partition progress they belong to.
struct DeliveryContext {
    progress: Progress,
    /// Value bytes handed to the producer and not yet acknowledged or failed.
    inflight: Option<Gauge>,
    /// Wall-clock ms when the flow last served delivery reports ([`poll_producer`]); delivery
    /// callbacks run inside that call, so it stands for "now" in them without a clock read each.
    now_ms: AtomicI64,
    /// The target cluster's alias, for the failure a partition is marked with.
    target: String,
    /// The producer's own handle, set once it exists: delivery reports are only served while it
    /// lives, and a fatal error's cause is read from it.
    native: std::sync::atomic::AtomicPtr<rdkafka_sys::rd_kafka_t>,
    /// Whether the target acknowledged any record of this producer.
    acked_any: std::sync::atomic::AtomicBool,
}

impl DeliveryContext {
    /// The producer's fatal error (idempotence lost: a PID refused, a sequence gap), which
    /// librdkafka reports on each failed record only as "Fatal error" or "Purged".
    fn fatal(&self) -> Option<(RDKafkaErrorCode, String)> {
        let native = self.native.load(Ordering::Acquire);
        if native.is_null() {
            return None;
        }
        let mut buf = [0 as std::os::raw::c_char; 512];
        // SAFETY: `native` is the handle of the producer that owns this context and is alive
        // while its delivery reports are served; librdkafka NUL-terminates `buf`.
        let code =
            unsafe { rdkafka_sys::rd_kafka_fatal_error(native, buf.as_mut_ptr(), buf.len()) };
        if code == rdkafka_sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return None;
        }
        // SAFETY: see above.
        let text = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Some((code.into(), text))
    }
}

impl ClientContext for DeliveryContext {}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = Token;

    fn delivery(&self, result: &DeliveryResult<'_>, token: Token) {
        let (slot, offset, primary) = *token;
        // Heartbeats and offset syncs (NO_SLOT) are not counted in flight.
        if let Some(g) = self.inflight.as_ref().filter(|_| slot != NO_SLOT) {
            let len = match result {
                Ok(m) => m.payload().map_or(0, <[u8]>::len),
                Err((_, m)) => m.payload().map_or(0, <[u8]>::len),
            };
            g.add(-(len as f64));
        }
        let mut progress = lock(&self.progress);
        let Some(p) = progress.get_mut(slot) else {
            return;
        };
        match result {
            Ok(m) => {
                self.acked_any.store(true, Ordering::Relaxed);
                p.acked(offset, primary.then(|| m.offset()));
                if primary && p.metrics.is_some() {
                    p.acked += 1;
                    if let Some(ts) = m.timestamp().to_millis() {
                        let now = self.now_ms.load(Ordering::Relaxed);
                        p.latency.record((now - ts) as f64);
                    }
                }
            }
            Err((e, _)) => {
                let (reason, error) = match (e.rdkafka_error_code(), self.fatal()) {
                    (_, Some((code, why))) => (
                        Reason::of_delivery(code),
                        format!(
                            "writing to cluster {}: the producer failed fatally: {}: {why}",
                            self.target,
                            describe(code)
                        ),
                    ),
                    (Some(code), None) => (
                        Reason::of_delivery(code),
                        format!("writing to cluster {}: {}", self.target, describe(code)),
                    ),
                    (None, None) => (
                        Reason::Produce,
                        format!("writing to cluster {}: {e}", self.target),
                    ),
                };
                p.failed(offset, reason, error);
            }
        }
    }
}

/// Serves the producer's delivery reports (waiting up to `timeout` for one).
fn poll_producer(clients: &Clients, timeout: Duration) {
    clients
        .producer
        .context()
        .now_ms
        .store(now_ms(), Ordering::Relaxed);
    clients.producer.poll(timeout);
}

/// Waits up to `timeout` for the target to acknowledge everything sent, serving delivery
/// reports meanwhile.
fn flush_producer(clients: &Clients, timeout: Duration) -> rdkafka::error::KafkaResult<()> {
    let deadline = Instant::now() + timeout;
    while clients.producer.in_flight_count() > 0 && Instant::now() < deadline {
        poll_producer(clients, Duration::from_millis(20));
    }
    clients.producer.flush(Duration::ZERO)
}

/// One mirrored source partition.
struct Slot {
    topic: String,
    remote: String,
    partition: i32,
    /// Next source offset to fetch, once something was read or a commit found.
    position: Option<i64>,
    /// Last committed source offset.
    committed: Option<i64>,
    /// Its MirrorMaker 2 series (none when the registry refused them).
    metrics: Option<SourcePartitionMetrics>,
    /// Value bytes and record ages read since the last hand-over to `metrics`.
    read_bytes: u64,
    age: StatBatch,
    /// Whether it is degraded, and where it is in its retry cycle.
    health: PartitionHealth,
    /// Whether a record of it was read since the last [`FlowRunner::tend`].
    read: bool,
}

impl Slot {
    /// Hands what was gathered while reading to the series.
    fn publish(&mut self) {
        if let Some(m) = &self.metrics {
            m.record_age_ms.record_all(&mut self.age);
            m.byte_count.inc_by(std::mem::take(&mut self.read_bytes));
        }
    }
}

/// A flow's plugins: its policy and its processors in order.
#[derive(Clone)]
pub struct PluginSet {
    /// Names remote topics.
    pub policy: Arc<PolicyPlugin>,
    /// Processors in order, each with its `on_error`.
    pub processors: Vec<(Arc<ProcessorPlugin>, OnError)>,
}

/// Runs one flow until asked to stop.
pub struct FlowRunner {
    flow: Flow,
    source: Cluster,
    target: Cluster,
    /// The plugins in use (a restart picks up the latest swapped-in set).
    plugins: Mutex<PluginSet>,
    /// A set handed in by [`FlowRunner::swap_plugins`], taken at the next batch boundary.
    pending_swap: Mutex<Option<PluginSet>>,
    stop: Arc<AtomicBool>,
    status: SharedStatus,
    known_outputs: Mutex<HashSet<String>>,
    reverse_heartbeats: bool,
    metrics: Metrics,
    flow_metrics: Option<FlowMetrics>,
    /// Shutdown's budget for flushing and committing.
    drain: Duration,
    /// Acknowledged source positions summed, and when that sum last grew (stall detection).
    progress_mark: Mutex<(i64, Instant)>,
}

/// The flow's clients. Each is closed on a thread of its own when dropped ([`Detached`]):
/// closing a consumer waits for its group coordinator, which may never answer, and a restart or
/// a shutdown must not wait for that.
struct Clients {
    consumer: Detached<Authenticated<BaseConsumer>>,
    target_meta: Detached<Authenticated<BaseConsumer>>,
    admin: Detached<Authenticated<AdminClient<DefaultClientContext>>>,
    producer: Detached<Authenticated<BaseProducer<DeliveryContext>>>,
    source_admin: Detached<Authenticated<AdminClient<DefaultClientContext>>>,
    /// Writes offset syncs (location = source) and the reverse pair's heartbeats to the source.
    source_producer: Option<Detached<Authenticated<BaseProducer>>>,
}

/// MirrorMaker 2's side channels of a flow: offset syncs and heartbeats.
struct Internals {
    writer: Option<OffsetSyncWriter>,
    sync_topic: String,
    heartbeats_topic: String,
    next_heartbeat: Instant,
    /// Remote topic → (source topic, wanted configs) last applied, for periodic re-sync.
    next_config_sync: Instant,
    config_sync_unsupported: bool,
    next_acl_sync: Instant,
    acl_sync_off: bool,
}

#[derive(Default)]
struct Slots {
    slots: Vec<Slot>,
    by_topic: HashMap<String, Vec<Option<usize>>>,
    /// Failures of the source reads that name no partition.
    source: FlowHealth,
}

impl Slots {
    fn find(&self, topic: &str, partition: i32) -> Option<usize> {
        self.by_topic
            .get(topic)?
            .get(usize::try_from(partition).ok()?)
            .copied()
            .flatten()
    }
}

impl FlowRunner {
    /// A runner for `flow` between `source` and `target`, naming topics with `plugin`.
    pub fn new(
        flow: Flow,
        source: Cluster,
        target: Cluster,
        plugin: Arc<PolicyPlugin>,
        processors: Vec<(Arc<ProcessorPlugin>, OnError)>,
        stop: Arc<AtomicBool>,
        status: SharedStatus,
    ) -> Self {
        Self {
            flow,
            source,
            target,
            plugins: Mutex::new(PluginSet {
                policy: plugin,
                processors,
            }),
            pending_swap: Mutex::new(None),
            stop,
            status,
            known_outputs: Mutex::new(HashSet::new()),
            reverse_heartbeats: false,
            metrics: Metrics::new(),
            flow_metrics: None,
            drain: DRAIN_TIMEOUT,
            progress_mark: Mutex::new((0, Instant::now())),
        }
    }

    /// Shutdown's budget for flushing and committing ([`DRAIN_TIMEOUT`] unless set).
    pub fn with_drain_timeout(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Watches the flow's clusters until the flow stops (run it on a thread of its own): an
    /// outage makes the flow degraded, naming the cluster and the cause.
    pub fn watch_clusters(&self) {
        crate::watch::run(
            &self.flow.name(),
            &self.source,
            &self.target,
            self,
            &self.stop,
        );
    }

    /// Running or degraded, from what is known now: degraded partitions, clusters that do not
    /// answer, a stall. Other states (restarting, halted, stopped) are left as they are.
    fn refresh_state(&self) {
        let mut status = lock(&self.status);
        let live = [FlowState::Running.as_str(), FlowState::Degraded.as_str()];
        if !live.contains(&status.state) {
            return;
        }
        let state = if status.degraded.is_empty()
            && status.unreachable.is_empty()
            && status.stalled.is_none()
        {
            FlowState::Running
        } else {
            FlowState::Degraded
        };
        status.state = state.as_str();
        drop(status);
        if let Some(m) = &self.flow_metrics {
            m.set_state(state);
        }
    }

    /// Records this flow's series in `metrics` (a private registry otherwise).
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.flow_metrics = metrics.flow(&self.flow.name()).ok();
        self.metrics = metrics;
        self
    }

    fn set_state(&self, state: FlowState) {
        if let Some(m) = &self.flow_metrics {
            m.set_state(state);
        }
        lock(&self.status).state = state.as_str();
    }

    /// Also emits the reverse pair's heartbeats (`target->source`) into the source cluster, as
    /// MirrorMaker 2's default heartbeat connectors for every cluster pair do; set when the
    /// pipeline has no flow in the other direction to do it.
    pub fn with_reverse_heartbeats(mut self, yes: bool) -> Self {
        self.reverse_heartbeats = yes;
        self
    }

    /// The flow's settings.
    pub fn flow(&self) -> &Flow {
        &self.flow
    }

    /// Hands in plugins that were loaded, instantiated and initialised off the data path; the
    /// flow switches to them between two batches (records polled before the switch are
    /// processed by the old plugins, every later record by the new ones). A new policy names the
    /// topics discovered after the switch; mirrored topics keep their remote names.
    pub fn swap_plugins(&self, set: PluginSet) {
        *lock(&self.pending_swap) = Some(set);
    }

    fn chain_of(&self, set: &PluginSet) -> Chain {
        Chain::new(
            &self.source.alias,
            set.processors
                .iter()
                .map(|(p, on_error)| (Processor::new(p.clone()), *on_error))
                .collect(),
        )
        .with_metrics(&self.metrics, &self.flow.name())
    }

    /// Runs until stopped (Ok) or until something fails that needs a fresh start (Err).
    pub fn run(&self) -> Result<()> {
        let name = self.flow.name();
        let progress = Arc::new(Mutex::new(Vec::new()));
        let mut clients = self.connect(&name, progress.clone())?;
        let mut fatal_streak = 0u32;
        let mut commit_failures = 0u32;
        let queue = SourceQueue::new(&clients.consumer)
            .with_context(|| format!("flow {name}: the source consumer has no queue"))?;
        // A fresh start reads every partition again: earlier degraded marks no longer hold.
        self.forget_degraded();
        self.set_state(FlowState::Running);
        self.refresh_state();
        if let Some(set) = lock(&self.pending_swap).take() {
            *lock(&self.plugins) = set;
        }
        let (mut policy, mut chain) = {
            let set = lock(&self.plugins);
            (
                ReplicationPolicy::new(set.policy.clone()),
                self.chain_of(&set),
            )
        };
        let planner = TopicPlanner::new(&self.flow);
        let mut slots = Slots::default();
        let mut last_plan = TopicPlan::default();
        let mut next_discovery = Instant::now();
        let mut next_commit = Instant::now() + self.flow.commit_interval;
        let mut next_stats = Instant::now() + STATS_INTERVAL;
        let mut internals = self.internals(&clients, &mut policy)?;

        while !self.stop.load(Ordering::Relaxed) {
            if let Some(set) = lock(&self.pending_swap).take() {
                policy = ReplicationPolicy::new(set.policy.clone());
                chain = self.chain_of(&set);
                let names: Vec<String> = std::iter::once(set.policy.name().to_string())
                    .chain(set.processors.iter().map(|(p, _)| p.name().to_string()))
                    .collect();
                let positions: Vec<String> = slots
                    .slots
                    .iter()
                    .filter_map(|s| {
                        s.position
                            .map(|p| format!("{}[{}]@{p}", s.topic, s.partition))
                    })
                    .collect();
                info!(flow = %name, "swapped in plugins {} before source offsets {}", names.join(", "), positions.join(" "));
                *lock(&self.plugins) = set;
                lock(&self.status).plugin_swaps += 1;
            }
            if Instant::now() >= next_discovery {
                match self.discover(
                    &clients,
                    &mut policy,
                    &planner,
                    &mut slots,
                    &progress,
                    &last_plan,
                ) {
                    Ok(plan) => {
                        // The source answered: a failure of its reads is over.
                        if let Some(d) = slots.source.answered() {
                            info!(flow = %name, "source reads recovered ({} cleared after {} more failures); mirroring again", d.reason.as_str(), d.retries);
                            self.set_partition_gauge("", None, false);
                            self.publish_degraded(&slots);
                        }
                        if Instant::now() >= internals.next_config_sync {
                            self.sync_configs(&clients, &plan, &mut internals);
                        }
                        if !internals.acl_sync_off && Instant::now() >= internals.next_acl_sync {
                            self.sync_acls(&clients, &plan, &mut internals);
                        }
                        last_plan = plan
                    }
                    // Reported once by the watch when a cluster does not answer.
                    Err(e) if self.unreachable("source") || self.unreachable("target") => {
                        debug!(flow = %name, "topic discovery failed, retrying in {:?}: {e:#}", self.flow.refresh_topics_interval)
                    }
                    Err(e) => {
                        warn!(flow = %name, "topic discovery failed, retrying in {:?}: {e:#}", self.flow.refresh_topics_interval)
                    }
                }
                next_discovery = Instant::now() + self.flow.refresh_topics_interval;
            }
            self.forward_batch(&clients, &queue, &mut slots, &progress, &mut chain)?;
            poll_producer(&clients, Duration::ZERO);
            self.replace_failed_producer(
                &name,
                &mut clients.producer,
                &progress,
                &mut fatal_streak,
            )?;
            if Instant::now() >= next_stats {
                publish_stats(&progress);
                next_stats = Instant::now() + STATS_INTERVAL;
            }
            self.emit_internals(&clients, &slots, &progress, &mut internals, false);
            // A partition whose delivery failed is paused and retried on its own; the flow
            // and its other partitions go on.
            self.tend(&clients, &mut slots, &progress);
            if Instant::now() >= next_commit {
                self.update_lag(&clients, &slots, &progress);
                self.emit_internals(&clients, &slots, &progress, &mut internals, true);
                // A source that does not answer cannot take commits; positions wait (nothing is
                // lost) instead of a request that blocks the flow until it times out.
                if !self.unreachable("source") {
                    match self.commit(&clients, &mut slots, &progress, REQUEST_TIMEOUT) {
                        Ok(()) if commit_failures > 0 => {
                            info!(flow = %name, "committing source positions to cluster {} works again after {commit_failures} failed attempts", self.source.alias);
                            commit_failures = 0;
                        }
                        Ok(()) => {}
                        Err(e) => {
                            commit_failures += 1;
                            if commit_failures == 1 {
                                warn!(flow = %name, "{e:#}; the positions stay uncommitted and are retried every commit interval (nothing is lost: after a crash the records since the last commit would be mirrored again)");
                            } else {
                                debug!(flow = %name, "commit attempt {commit_failures} failed: {e:#}");
                            }
                        }
                    }
                }
                next_commit = Instant::now() + self.flow.commit_interval;
            }
        }
        self.drain(&name, &clients, &mut slots, &progress, &mut internals);
        self.set_state(FlowState::Stopped);
        info!(flow = %name, "stopped");
        Ok(())
    }

    /// Shutdown: waits (within the drain timeout) for the target to acknowledge what was sent,
    /// commits what was acknowledged, and says in one line what could not be done. Never longer
    /// than the drain timeout plus one request; closing the clients happens off this thread.
    fn drain(
        &self,
        name: &str,
        clients: &Clients,
        slots: &mut Slots,
        progress: &Progress,
        internals: &mut Internals,
    ) {
        let deadline = Instant::now() + self.drain;
        let left = || deadline.saturating_duration_since(Instant::now());
        info!(flow = %name, "stopping: waiting up to {:?} for cluster {} to acknowledge in-flight records", self.drain, self.target.alias);
        if flush_producer(clients, left()).is_err() || clients.producer.in_flight_count() > 0 {
            warn!(flow = %name, "{} records were not acknowledged by cluster {} within the drain timeout ({:?}); they are not committed and will be mirrored again on the next start", clients.producer.in_flight_count(), self.target.alias, self.drain);
        }
        poll_producer(clients, Duration::ZERO);
        publish_stats(progress);
        self.emit_internals(clients, slots, progress, internals, true);
        if let Some(p) = &clients.source_producer {
            let _ = p.flush(left().min(Duration::from_secs(5)));
        }
        let budget = left().max(Duration::from_secs(1)).min(REQUEST_TIMEOUT);
        if let Err(e) = self.commit(clients, slots, progress, budget) {
            warn!(flow = %name, "{e:#}; the records mirrored since the last commit will be mirrored again on the next start");
        }
    }

    /// Whether the watch reports the flow's `role` cluster (`source`, `target`) unreachable.
    fn unreachable(&self, role: &str) -> bool {
        lock(&self.status)
            .unreachable
            .iter()
            .any(|u| u.role == role)
    }

    fn connect(&self, name: &str, progress: Progress) -> Result<Clients> {
        // A cluster refract cannot authenticate to (TLS, SASL, wrong protocol) fails the flow
        // with the cause named, instead of clients that retry silently; one that does not answer
        // yet is only reported, and librdkafka keeps trying it.
        for cluster in [&self.source, &self.target] {
            if let Err(e) = crate::doctor::preflight(cluster) {
                match e.downcast_ref::<crate::doctor::ConnectError>() {
                    Some(c)
                        if matches!(
                            c.cause,
                            crate::doctor::Cause::Tls(_)
                                | crate::doctor::Cause::Authentication(_)
                                | crate::doctor::Cause::WrongProtocol(_)
                                | crate::doctor::Cause::Config(_)
                        ) =>
                    {
                        return Err(e.context(format!("flow {name}")));
                    }
                    _ => warn!(flow = %name, "{e:#}; connecting anyway, librdkafka keeps trying"),
                }
            }
        }
        let id = format!("refract-{}-{}", self.flow.source, self.flow.target);
        let group = progress_group(&self.flow);
        let consumer: Authenticated<BaseConsumer> = client_config(
            &self.source,
            ClientRole::Consumer,
            &id,
            // librdkafka postpones a partition's next fetch by fetch.queue.backoff.ms (1 s)
            // whenever its local queue is over the prefetch thresholds; a mirror that is briefly
            // busier than a plain reader then stalls on a second-long tail. 10 ms keeps it fed.
            &[
                ("auto.offset.reset", "earliest"),
                ("fetch.queue.backoff.ms", "10"),
            ],
            &[
                ("group.id", group.as_str()),
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
                ("enable.partition.eof", "false"),
            ],
        )
        .create()
        .with_context(|| {
            format!(
                "flow {name}: creating the consumer for source cluster {}",
                self.source.alias
            )
        })?;
        // Also commits, under the same group name on the target, the target position just past the
        // last acknowledged record of each remote partition: on restart the records between it
        // and the target's end are the ones that will be mirrored twice.
        let target_meta: Authenticated<BaseConsumer> = client_config(
            &self.target,
            ClientRole::Admin,
            &id,
            &[],
            &[
                ("group.id", group.as_str()),
                ("enable.auto.commit", "false"),
            ],
        )
        .create()
        .with_context(|| {
            format!(
                "flow {name}: creating the metadata client for target cluster {}",
                self.target.alias
            )
        })?;
        let admin: Authenticated<AdminClient<DefaultClientContext>> =
            client_config(&self.target, ClientRole::Admin, &id, &[], &[])
                .create()
                .with_context(|| {
                    format!(
                        "flow {name}: creating the admin client for target cluster {}",
                        self.target.alias
                    )
                })?;
        let producer = self.producer(name, &id, progress)?;
        let source_admin: Authenticated<AdminClient<DefaultClientContext>> =
            client_config(&self.source, ClientRole::Admin, &id, &[], &[])
                .create()
                .with_context(|| {
                    format!(
                        "flow {name}: creating the admin client for source cluster {}",
                        self.source.alias
                    )
                })?;
        let needs_source_producer = (self.flow.emit_offset_syncs
            && self.flow.offset_syncs_location == OffsetSyncsLocation::Source)
            || (self.flow.emit_heartbeats && self.reverse_heartbeats);
        let source_producer = if needs_source_producer {
            Some(
                client_config(
                    &self.source,
                    ClientRole::Producer,
                    &id,
                    &[("linger.ms", "5")],
                    &[],
                )
                .create::<BaseProducer>()
                .with_context(|| {
                    format!(
                        "flow {name}: creating the offset-sync producer for source cluster {}",
                        self.source.alias
                    )
                })?,
            )
        } else {
            None
        };
        Ok(Clients {
            consumer: Detached::new(consumer),
            target_meta: Detached::new(target_meta),
            admin: Detached::new(admin),
            producer: Detached::new(producer),
            source_admin: Detached::new(source_admin),
            source_producer: source_producer.map(Detached::new),
        })
    }

    /// The flow's producer on the target: idempotent, `acks=all`, delivery reports routed to
    /// the partitions' progress.
    fn producer(
        &self,
        name: &str,
        id: &str,
        progress: Progress,
    ) -> Result<Authenticated<BaseProducer<DeliveryContext>>> {
        // The flow's `compression` wins over the target cluster's producer table.
        let mut forced = vec![("enable.idempotence", "true"), ("acks", "all")];
        if let Some(codec) = &self.flow.compression {
            forced.push(("compression.type", codec.as_str()));
        }
        let producer: Authenticated<BaseProducer<DeliveryContext>> = client_config(
            &self.target,
            ClientRole::Producer,
            id,
            &[("linger.ms", "5")],
            &forced,
        )
        .create_with_context(DeliveryContext {
            progress,
            inflight: self.flow_metrics.as_ref().map(|m| m.inflight_bytes.clone()),
            now_ms: AtomicI64::new(now_ms()),
            target: self.target.alias.clone(),
            native: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            acked_any: std::sync::atomic::AtomicBool::new(false),
        })
        .with_context(|| {
            format!(
                "flow {name}: creating the producer for target cluster {}",
                self.target.alias
            )
        })?;
        producer
            .context()
            .native
            .store(producer.client().native_ptr(), Ordering::Release);
        Ok(producer)
    }

    /// A producer that failed fatally (librdkafka's idempotence state is lost: the target
    /// refused a producer id, or sequence numbers broke after a target restart) can send
    /// nothing again. Its unacknowledged records have failed their partitions, which are retried
    /// from their last acknowledged position; this replaces the producer they will be retried
    /// with. Logged once per run of fatal errors.
    fn replace_failed_producer(
        &self,
        name: &str,
        producer: &mut Detached<Authenticated<BaseProducer<DeliveryContext>>>,
        progress: &Progress,
        fatal_streak: &mut u32,
    ) -> Result<()> {
        let Some((code, why)) = producer.context().fatal() else {
            if *fatal_streak > 0 && producer.context().acked_any.load(Ordering::Relaxed) {
                info!(flow = %name, "the producer for cluster {} works again after {} fatal failures", self.target.alias, *fatal_streak);
                *fatal_streak = 0;
            }
            return Ok(());
        };
        // Serve the reports of what it still held, so every failed record reaches its partition.
        producer.context().now_ms.store(now_ms(), Ordering::Relaxed);
        producer.poll(Duration::ZERO);
        let id = format!("refract-{}-{}", self.flow.source, self.flow.target);
        let fresh = Detached::new(self.producer(name, &id, progress.clone())?);
        // The old one is closed off this thread when dropped; its records are already failed.
        drop(std::mem::replace(producer, fresh));
        *fatal_streak += 1;
        if *fatal_streak == 1 {
            warn!(flow = %name, "the producer for cluster {} failed fatally ({}: {why}); replaced with a new one, the partitions it failed are retried from their last acknowledged records", self.target.alias, describe(code));
        } else {
            debug!(flow = %name, "the producer for cluster {} failed fatally again ({}: {why}); replaced", self.target.alias, describe(code));
        }
        Ok(())
    }

    /// Lists source topics, plans them, makes sure remote topics exist, and assigns partitions
    /// that are new to this flow.
    fn discover(
        &self,
        clients: &Clients,
        policy: &mut ReplicationPolicy,
        planner: &TopicPlanner,
        slots: &mut Slots,
        progress: &Progress,
        last_plan: &TopicPlan,
    ) -> Result<TopicPlan> {
        let name = self.flow.name();
        let topics = list_topics(&clients.consumer)
            .with_context(|| format!("listing topics on source cluster {}", self.source.alias))?;
        let plan = planner.plan(policy, &topics)?;
        for (topic, skip) in &plan.skipped {
            if last_plan
                .skipped
                .iter()
                .any(|(t, s)| t == topic && s == skip)
            {
                continue;
            }
            match skip {
                Skip::Conflict { with, remote } => {
                    warn!(flow = %name, "not mirroring {topic}: {with} is already mirrored to {remote}")
                }
                Skip::Cycle => {
                    debug!(flow = %name, "not mirroring {topic}: it came from {} (cycle)", self.flow.target)
                }
                other => debug!(flow = %name, "not mirroring {topic}: {other:?}"),
            }
        }
        let target_topics: HashMap<String, i32> = list_topics(&clients.target_meta)
            .with_context(|| format!("listing topics on target cluster {}", self.target.alias))?
            .into_iter()
            .collect();
        let mut added = Vec::new();
        for route in &plan.routes {
            let usable = match target_topics.get(&route.remote_topic) {
                None => match create_topic(
                    &clients.admin,
                    &route.remote_topic,
                    route.partitions,
                    self.flow.replication_factor,
                    &self.remote_topic_configs(clients, &route.source_topic),
                ) {
                    Ok(()) => {
                        info!(flow = %name, "created {} on {} with {} partitions", route.remote_topic, self.target.alias, route.partitions);
                        route.partitions
                    }
                    Err(e) => {
                        warn!(flow = %name, "cannot create {} on {}; {} is not mirrored yet: {e:#}", route.remote_topic, self.target.alias, route.source_topic);
                        continue;
                    }
                },
                Some(&have) if have < route.partitions => {
                    match grow_topic(&clients.admin, &route.remote_topic, route.partitions)
                        .and_then(|()| {
                            await_partitions(
                                clients.producer.client(),
                                &route.remote_topic,
                                route.partitions,
                                REQUEST_TIMEOUT,
                            )
                        }) {
                        Ok(()) => {
                            info!(flow = %name, "added partitions to {} on {}: {have} -> {}", route.remote_topic, self.target.alias, route.partitions);
                            route.partitions
                        }
                        Err(e) => {
                            if slots.by_topic.get(&route.source_topic).map_or(0, Vec::len)
                                < route.partitions as usize
                            {
                                warn!(
                                    flow = %name,
                                    "{} has {} partitions on {} but {} has {}; partitions {have}.. wait until the target has them: {e:#}",
                                    route.remote_topic, have, self.target.alias, route.source_topic, route.partitions
                                );
                            }
                            have
                        }
                    }
                }
                Some(_) => route.partitions,
            };
            if !last_plan
                .routes
                .iter()
                .any(|r| r.source_topic == route.source_topic)
            {
                info!(flow = %name, "mirroring {} -> {}", route.source_topic, route.remote_topic);
            }
            let entry = slots
                .by_topic
                .entry(route.source_topic.clone())
                .or_default();
            for partition in 0..usable {
                let p = partition as usize;
                if entry.len() <= p {
                    entry.resize(p + 1, None);
                }
                if entry[p].is_none() {
                    entry[p] = Some(slots.slots.len());
                    added.push(slots.slots.len());
                    let metrics = self
                        .metrics
                        .source_partition(
                            &self.source.alias,
                            &self.target.alias,
                            &route.remote_topic,
                            partition,
                        )
                        .ok();
                    let tracked = if self.flow.emit_offset_syncs {
                        PartitionProgress::tracking_pairs()
                    } else {
                        PartitionProgress::default()
                    };
                    lock(progress).push(Tracked::new(tracked, metrics.clone()));
                    slots.slots.push(Slot {
                        topic: route.source_topic.clone(),
                        remote: route.remote_topic.clone(),
                        partition,
                        position: None,
                        committed: None,
                        metrics,
                        read_bytes: 0,
                        age: StatBatch::new(),
                        health: PartitionHealth::default(),
                        read: false,
                    });
                }
            }
        }
        lock(&self.status).routes = plan
            .routes
            .iter()
            .map(|r| (r.source_topic.clone(), r.remote_topic.clone()))
            .collect();
        if !added.is_empty() {
            self.resume(clients, slots, &added, policy)?;
            self.assign(clients, slots)?;
        }
        Ok(plan)
    }

    /// Reads the committed position of newly added partitions and reports how many records past
    /// it are already on the target (they will be mirrored again). A partition with none resumes
    /// where a stopped MirrorMaker 2 left it, if one ran this flow (see `takeover`).
    fn resume(
        &self,
        clients: &Clients,
        slots: &mut Slots,
        added: &[usize],
        policy: &mut ReplicationPolicy,
    ) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for &i in added {
            tpl.add_partition(&slots.slots[i].topic, slots.slots[i].partition);
        }
        let committed = clients
            .consumer
            .committed_offsets(tpl, REQUEST_TIMEOUT)
            .context("reading the flow's committed source positions")?;
        let mut downstream_tpl = TopicPartitionList::new();
        let mut duplicates = 0u64;
        let mut mm2 = Mm2Takeover::new(&self.flow, &self.source, &self.target);
        for elem in committed.elements() {
            let Some(i) = slots.find(elem.topic(), elem.partition()) else {
                continue;
            };
            let Offset::Offset(next) = elem.offset() else {
                let slot = &mut slots.slots[i];
                if let Some(next) = mm2.resume_offset(&slot.topic, &slot.remote, slot.partition)? {
                    slot.position = Some(next);
                    continue;
                }
                // No position yet: whatever the remote partition already holds was mirrored by
                // a run that never committed, and will be mirrored again from the start.
                if !self.starts_from_earliest() {
                    continue;
                }
                if let Ok((low, high)) = clients.target_meta.fetch_watermarks(
                    &slot.remote,
                    slot.partition,
                    REQUEST_TIMEOUT,
                ) {
                    duplicates += u64::try_from(high - low).unwrap_or(0);
                }
                continue;
            };
            let slot = &mut slots.slots[i];
            slot.position = Some(next);
            slot.committed = Some(next);
            downstream_tpl.add_partition(&slot.remote, slot.partition);
            debug!(flow = %self.flow.name(), "{}[{}] resumes at offset {next}", slot.topic, slot.partition);
        }
        if downstream_tpl.count() > 0 {
            let downstream = clients
                .target_meta
                .committed_offsets(downstream_tpl, REQUEST_TIMEOUT)
                .context("reading the flow's committed target positions")?;
            for elem in downstream.elements() {
                let Offset::Offset(acked_end) = elem.offset() else {
                    continue;
                };
                if let Ok((_, high)) = clients.target_meta.fetch_watermarks(
                    elem.topic(),
                    elem.partition(),
                    REQUEST_TIMEOUT,
                ) {
                    duplicates += u64::try_from(high - acked_end).unwrap_or(0);
                }
            }
        }
        duplicates += mm2.finish(&clients.target_meta, policy);
        if duplicates > 0 {
            warn!(
                flow = %self.flow.name(),
                duplicates,
                "resuming after an unclean stop: {duplicates} records already on the target past the last committed position will be mirrored again (duplicates)"
            );
        }
        lock(&self.status).duplicates += duplicates;
        Ok(())
    }

    /// Assigns every partition that is read (not a degraded one waiting for its retry) at its
    /// position.
    fn assign(&self, clients: &Clients, slots: &Slots) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for s in slots.slots.iter().filter(|s| s.health.flowing()) {
            self.add_at_position(&mut tpl, s)?;
        }
        clients
            .consumer
            .assign(&tpl)
            .context("assigning source partitions")?;
        Ok(())
    }

    /// Adds a partition to `tpl` at the position it is read from next.
    fn add_at_position(&self, tpl: &mut TopicPartitionList, s: &Slot) -> Result<()> {
        // With no committed position, start where auto.offset.reset says, explicitly:
        // leaving it to librdkafka costs another committed-offset lookup per partition.
        let fresh = if self.starts_from_earliest() {
            Offset::Beginning
        } else {
            Offset::End
        };
        let offset = s.position.map_or(fresh, Offset::Offset);
        tpl.add_partition_offset(&s.topic, s.partition, offset)
            .with_context(|| format!("assigning {}[{}]", s.topic, s.partition))
    }

    /// Polls up to one batch from the source and hands it to the producer, through the
    /// processor chain when there is one.
    fn forward_batch<'c>(
        &self,
        clients: &'c Clients,
        queue: &SourceQueue<'c, DefaultConsumerContext>,
        slots: &mut Slots,
        progress: &Progress,
        chain: &mut Chain,
    ) -> Result<()> {
        let mut timeout = Duration::from_millis(100);
        let mut polled = 0u64;
        let mut pending: Vec<Fetched<'_>> = Vec::new();
        let mut looped = 0u64;
        let mut now = now_ms();
        // Slots whose read metrics gathered something in this batch.
        let mut touched: Vec<usize> = Vec::new();
        for _ in 0..MAX_POLL_BATCH {
            let msg = match queue.poll(timeout) {
                None => break,
                Some(Polled::Other) => continue,
                Some(Polled::Error(e)) => {
                    timeout = Duration::ZERO;
                    self.read_failed(clients, slots, e)?;
                    continue;
                }
                Some(Polled::Message(msg)) => msg,
            };
            timeout = Duration::ZERO;
            let Some(i) = slots.find(msg.topic(), msg.partition()) else {
                continue;
            };
            let offset = msg.offset();
            let slot = &mut slots.slots[i];
            if !slot.health.flowing() {
                continue; // fetched before it was paused: read again on its retry
            }
            if slot.position.is_some_and(|p| offset < p) {
                continue; // already forwarded in this run
            }
            slot.position = Some(offset + 1);
            slot.read = true;
            polled += 1;
            if slot.metrics.is_some() {
                if slot.read_bytes == 0 && slot.age.is_empty() {
                    touched.push(i);
                }
                slot.read_bytes += msg.payload().map_or(0, <[u8]>::len) as u64;
                if let Some(ts) = msg.timestamp().to_millis() {
                    slot.age.record((now - ts) as f64);
                }
            }
            if polled % 64 == 0 {
                // Serve delivery reports as we go, so acknowledged records leave the producer
                // queue promptly (as a plain consume→produce loop does).
                poll_producer(clients, Duration::ZERO);
                now = now_ms();
            }
            // Parsed once per record (the message keeps them for the chain too).
            let headers = msg.headers();
            let stamp = if self.flow.provenance_header {
                match provenance(headers, &self.source.alias, &self.target.alias) {
                    Some(stamp) => Some(stamp),
                    None => {
                        // It came from the target: sending it back would loop.
                        lock(progress)[i].sent(offset, 0);
                        looped += 1;
                        continue;
                    }
                }
            } else {
                None
            };
            if chain.is_empty() {
                {
                    let mut p = lock(progress);
                    if p[i].failure().is_some() {
                        // Its partition is about to be paused and read again from the failed
                        // record: sending more now would only make duplicates.
                        continue;
                    }
                    p[i].sent(offset, 1);
                }
                let headers = match &stamp {
                    None => headers.map(|h| {
                        h.iter()
                            .fold(OwnedHeaders::new_with_capacity(h.count()), |acc, hd| {
                                acc.insert(Header {
                                    key: hd.key,
                                    value: hd.value,
                                })
                            })
                    }),
                    Some(stamp) => {
                        let mut out =
                            OwnedHeaders::new_with_capacity(headers.map_or(0, |h| h.count()) + 1);
                        if let Some(h) = headers {
                            for hd in h.iter().filter(|hd| hd.key != PROVENANCE_HEADER) {
                                out = out.insert(Header {
                                    key: hd.key,
                                    value: hd.value,
                                });
                            }
                        }
                        Some(out.insert(Header {
                            key: PROVENANCE_HEADER,
                            value: Some(stamp.as_bytes()),
                        }))
                    }
                };
                let output = Output {
                    topic: &slot.remote,
                    partition: Some(slot.partition),
                    key: msg.key(),
                    value: msg.payload(),
                    timestamp: msg.timestamp().to_millis(),
                    headers,
                };
                send(clients, Box::new((i, offset, true)), output)?;
            } else {
                // Kept as fetched: the chain reads (and usually forwards) these very bytes.
                pending.push(Fetched {
                    slot: i,
                    msg,
                    stamp,
                });
            }
        }
        for i in touched {
            slots.slots[i].publish();
        }
        if polled > 0 {
            if let Some(d) = slots.source.answered() {
                info!(flow = %self.flow.name(), "source reads recovered ({} cleared after {} more failures); mirroring again", d.reason.as_str(), d.retries);
                self.set_partition_gauge("", None, false);
                self.publish_degraded(slots);
            }
        }
        if polled > 0 || looped > 0 {
            let mut status = lock(&self.status);
            status.records_sent += polled - looped;
            status.records_looped += looped;
        }
        if !pending.is_empty() {
            self.process(clients, slots, progress, chain, &pending)?;
        }
        Ok(())
    }

    /// Runs polled records through the chain, one source partition at a time, and sends what
    /// comes out: records to their target topics, failures to the dead-letter topic. Records are
    /// handed to the chain borrowed from the fetched messages, not copied.
    fn process(
        &self,
        clients: &Clients,
        slots: &Slots,
        progress: &Progress,
        chain: &mut Chain,
        pending: &[Fetched<'_>],
    ) -> Result<()> {
        // Indices into `pending`, per slot, in poll (= offset) order.
        let mut runs: Vec<(usize, Vec<usize>)> = Vec::new();
        for (k, f) in pending.iter().enumerate() {
            match runs.iter_mut().find(|(s, _)| *s == f.slot) {
                Some((_, run)) => run.push(k),
                None => runs.push((f.slot, vec![k])),
            }
        }
        for (i, run) in runs {
            let slot = &slots.slots[i];
            let (topic, partition, remote) = (&slot.topic, slot.partition, &slot.remote);
            let offsets: Vec<i64> = run.iter().map(|&k| pending[k].msg.offset()).collect();
            let stamps: Vec<Option<&str>> =
                run.iter().map(|&k| pending[k].stamp.as_deref()).collect();
            if lock(progress)[i].failure().is_some() {
                continue; // read again from the failed record once its partition is retried
            }
            let items: Vec<Item<'_>> = run.iter().map(|&k| pending[k].item(remote)).collect();
            let out = chain
                .run(topic, partition, items)
                .map_err(anyhow::Error::new)?;
            // Register every output before sending any, so no acknowledgement can arrive for a
            // record the progress does not know yet. Outputs come in source offset order.
            let mut outputs = vec![0u32; offsets.len()];
            for offset in out
                .forward
                .iter()
                .map(|f| f.offset)
                .chain(out.dead.iter().map(|d| d.item.offset))
            {
                if let Ok(j) = offsets.binary_search(&offset) {
                    outputs[j] += 1;
                }
            }
            {
                let mut p = lock(progress);
                for (offset, n) in offsets.iter().zip(&outputs) {
                    p[i].sent(*offset, *n);
                }
            }
            let source_partitions = slots.by_topic.get(topic).map_or(1, Vec::len) as i32;
            for f in &out.forward {
                if *f.topic != **remote {
                    self.ensure_output_topic(clients, &f.topic, source_partitions)?;
                }
                let primary = *f.topic == **remote && f.partition == partition;
                let stamp = offsets
                    .binary_search(&f.offset)
                    .ok()
                    .and_then(|j| stamps[j]);
                let headers = match stamp {
                    Some(stamp) => owned_headers(
                        f.headers.iter().filter(|(k, _)| k != PROVENANCE_HEADER),
                        &[(PROVENANCE_HEADER, stamp)],
                    ),
                    None => owned_headers(f.headers.iter(), &[]),
                };
                send(
                    clients,
                    Box::new((i, f.offset, primary)),
                    Output::of(f, Some(f.partition), headers),
                )?;
            }
            if !out.dead.is_empty() {
                self.ensure_output_topic(clients, &self.flow.dead_letter_topic, 1)?;
            }
            for d in &out.dead {
                let partition_text = partition.to_string();
                let offset_text = d.item.offset.to_string();
                let extra = [
                    ("refract.error.plugin", d.plugin.as_str()),
                    ("refract.error.message", d.error.as_str()),
                    ("refract.source.cluster", self.source.alias.as_str()),
                    ("refract.source.topic", topic.as_str()),
                    ("refract.source.partition", partition_text.as_str()),
                    ("refract.source.offset", offset_text.as_str()),
                ];
                let mut output =
                    Output::of(&d.item, None, owned_headers(d.item.headers.iter(), &extra));
                output.topic = &self.flow.dead_letter_topic;
                send(clients, Box::new((i, d.item.offset, false)), output)?;
            }
            // Serve delivery reports between runs, as the unprocessed path does while polling.
            poll_producer(clients, Duration::ZERO);
            if let Some(m) = &self.flow_metrics {
                m.dead_lettered_records.inc_by(out.dead.len() as u64);
                m.records_dropped.inc_by(out.skipped);
            }
            let mut status = lock(&self.status);
            status.records_dropped += out.dropped;
            status.records_skipped += out.skipped;
            status.records_dead_lettered += out.dead.len() as u64;
        }
        Ok(())
    }

    /// Makes sure a topic a processor routes to (or the dead-letter topic) exists on the target.
    fn ensure_output_topic(&self, clients: &Clients, topic: &str, partitions: i32) -> Result<()> {
        if lock(&self.known_outputs).contains(topic) {
            return Ok(());
        }
        let created = ensure_topic(
            &clients.target_meta,
            &clients.admin,
            topic,
            partitions,
            self.flow.replication_factor,
            &[],
        )
        .with_context(|| {
            format!(
                "creating {topic} on {} for flow {}",
                self.target.alias,
                self.flow.name()
            )
        })?;
        if created {
            info!(flow = %self.flow.name(), "created {topic} on {} with {partitions} partitions", self.target.alias);
        }
        lock(&self.known_outputs).insert(topic.to_string());
        Ok(())
    }

    /// Commits, per partition, the source offset after the last contiguously acknowledged record.
    fn commit(
        &self,
        clients: &Clients,
        slots: &mut Slots,
        progress: &Progress,
        timeout: Duration,
    ) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        let mut downstream = TopicPartitionList::new();
        let mut changed = Vec::new();
        {
            let progress = lock(progress);
            for (i, slot) in slots.slots.iter().enumerate() {
                let Some(next) = progress[i].committable() else {
                    continue;
                };
                if slot.committed == Some(next) {
                    continue;
                }
                tpl.add_partition_offset(&slot.topic, slot.partition, Offset::Offset(next))?;
                if let Some(d) = progress[i].downstream_next() {
                    downstream.add_partition_offset(
                        &slot.remote,
                        slot.partition,
                        Offset::Offset(d),
                    )?;
                }
                changed.push((i, next));
            }
        }
        if changed.is_empty() {
            return Ok(());
        }
        // Target positions first: a source commit then always has a target commit at or past it,
        // so duplicates are never over-counted. Best effort: they only serve to count duplicates.
        if let Err(e) = commit_within(&clients.target_meta, &downstream, timeout) {
            debug!(flow = %self.flow.name(), "committing target positions: {e}");
        }
        commit_within(&clients.consumer, &tpl, timeout).map_err(|e| {
            anyhow::anyhow!(
                "committing source positions for flow {} to {}: {e}",
                self.flow.name(),
                self.source.alias
            )
        })?;
        for (i, next) in changed {
            slots.slots[i].committed = Some(next);
        }
        Ok(())
    }
}

impl crate::watch::WatchSink for FlowRunner {
    fn unreachable(&self, u: crate::watch::Unreachable) {
        {
            let mut status = lock(&self.status);
            status.unreachable.retain(|x| x.cluster != u.cluster);
            if u.role == "source" {
                status.lag.clear();
                status.lag_unknown = Some(u.summary());
            }
            status.unreachable.push(u);
        }
        self.refresh_state();
    }

    fn reachable(&self, cluster: &str, role: &'static str, outage: Duration) {
        {
            let mut status = lock(&self.status);
            status.unreachable.retain(|x| x.cluster != cluster);
            status.recovered.push((cluster.to_string(), role, outage));
        }
        self.refresh_state();
    }
}

/// What one round of [`FlowRunner::tend`] found for one partition.
enum Tended {
    /// A failure counted (log once per transition, count it).
    Failed(Change),
    /// Its records are settled; it waits this long for its retry.
    Waiting(Duration),
    /// Its retry is due.
    Retry,
    /// It made progress again; the cleared mark.
    Recovered(Degraded),
}

impl FlowRunner {
    /// Looks after the partitions' health: a delivery failure pauses its partition, a paused
    /// partition whose records are all settled is rewound to its first unacknowledged record
    /// and waits for its retry, a due retry reads it again, and a retried partition that made
    /// progress is healthy again.
    fn tend(&self, clients: &Clients, slots: &mut Slots, progress: &Progress) {
        let now = Instant::now();
        let wall = now_ms();
        let mut found: Vec<(usize, Tended)> = Vec::new();
        {
            let mut progress = lock(progress);
            for (i, slot) in slots.slots.iter_mut().enumerate() {
                let p = &mut progress[i];
                if let Some(f) = p.take_failure() {
                    let counted = slot.health.failed(
                        Origin::Delivery,
                        f.reason,
                        f.error,
                        Some(f.offset),
                        wall,
                    );
                    if let Some(change) = counted {
                        found.push((i, Tended::Failed(change)));
                    }
                }
                match slot.health.phase() {
                    Phase::Draining if p.settled() => {
                        if let Some(first) = p.rewind() {
                            slot.position = Some(first);
                        }
                        found.push((i, Tended::Waiting(slot.health.drained(now))));
                    }
                    Phase::Waiting(_) if slot.health.retry_due(now) => {
                        found.push((i, Tended::Retry));
                    }
                    Phase::Flowing if slot.health.degraded().is_some() => {
                        if let Some(d) = slot.health.progressed(p.committable(), slot.read, now) {
                            found.push((i, Tended::Recovered(d)));
                        }
                    }
                    _ => {}
                }
                slot.read = false;
            }
        }
        if found.is_empty() {
            return;
        }
        let name = self.flow.name();
        let mut changed = false;
        for (i, what) in found {
            let slot = &mut slots.slots[i];
            match what {
                Tended::Failed(change) => {
                    self.pause(clients, slot);
                    self.report_failure(slot, change);
                    changed = true;
                }
                Tended::Waiting(wait) => {
                    debug!(flow = %name, "{}[{}] paused; retrying from offset {} in {wait:?}", slot.topic, slot.partition, slot.position.map_or("(start)".into(), |o| o.to_string()));
                }
                Tended::Retry => {
                    slot.health.retrying(now);
                    let mut tpl = TopicPartitionList::new();
                    let assigned = self.add_at_position(&mut tpl, slot).and_then(|()| {
                        clients
                            .consumer
                            .incremental_assign(&tpl)
                            .map_err(anyhow::Error::from)
                    });
                    match assigned {
                        Ok(()) => {
                            debug!(flow = %name, "retrying {}[{}] from offset {}", slot.topic, slot.partition, slot.position.map_or("(start)".into(), |o| o.to_string()))
                        }
                        Err(e) => {
                            // Counts as a failed retry: it waits for the next one.
                            let counted = slot.health.failed(
                                Origin::Read,
                                Reason::Fetch,
                                format!("resuming reads: {e:#}"),
                                slot.position,
                                now_ms(),
                            );
                            slot.health.drained(now);
                            if let Some(change) = counted {
                                self.report_failure(slot, change);
                            }
                        }
                    }
                    changed = true;
                }
                Tended::Recovered(d) => {
                    info!(flow = %name, "{}[{}] recovered: {} cleared after {} failed retries; mirroring it again", slot.topic, slot.partition, d.reason.as_str(), d.retries);
                    self.set_partition_gauge(&slot.topic, Some(slot.partition), false);
                    changed = true;
                }
            }
        }
        if changed {
            self.publish_degraded(slots);
        }
    }

    /// A consumer error: the partition it names stops being read and is retried; one that
    /// names no partition marks the flow's source reads degraded until the source answers.
    fn read_failed(&self, clients: &Clients, slots: &mut Slots, e: SourceError) -> Result<()> {
        let name = self.flow.name();
        if e.fatal {
            bail!(
                "flow {name}: the consumer of source cluster {} failed for good: {}",
                self.source.alias,
                e.message
            );
        }
        let reason = Reason::of_read(e.code);
        match &e.partition {
            Some((topic, partition)) => {
                let Some(i) = slots.find(topic, *partition) else {
                    debug!(flow = %name, "reading {topic}[{partition}] (not mirrored): {}", e.message);
                    return Ok(());
                };
                let slot = &mut slots.slots[i];
                let offset = e.offset.or(slot.position);
                if let Some(change) =
                    slot.health
                        .failed(Origin::Read, reason, e.message, offset, now_ms())
                {
                    self.pause(clients, slot);
                    self.report_failure(slot, change);
                    self.publish_degraded(slots);
                }
            }
            None => match e.code {
                // One broker connection dropped: librdkafka reconnects on its own, and logs it.
                RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::PartitionEOF => {
                    debug!(flow = %name, "reading from {}: {}", self.source.alias, e.message);
                }
                _ => {
                    let change = slots.source.failed(reason, e.message, now_ms());
                    if let Some(d) = slots.source.degraded() {
                        self.log_failure(None, d, change);
                    }
                    self.publish_degraded(slots);
                }
            },
        }
        Ok(())
    }

    /// Stops reading a partition (it is assigned again on its retry).
    fn pause(&self, clients: &Clients, slot: &Slot) {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&slot.topic, slot.partition);
        if let Err(e) = clients.consumer.incremental_unassign(&tpl) {
            debug!(flow = %self.flow.name(), "pausing {}[{}]: {e}", slot.topic, slot.partition);
        }
    }

    /// [`FlowRunner::log_failure`] for a partition.
    fn report_failure(&self, slot: &Slot, change: Change) {
        if let Some(d) = slot.health.degraded() {
            self.log_failure(Some(slot), d, change);
        }
    }

    /// Logs a counted failure once per transition (a failed retry at debug) and counts it in
    /// `refract_partition_errors_total`. `slot` is `None` for the flow's own source reads.
    fn log_failure(&self, slot: Option<&Slot>, d: &Degraded, change: Change) {
        let name = self.flow.name();
        let what = slot.map_or_else(
            || format!("source reads from {}", self.source.alias),
            |s| format!("{}[{}]", s.topic, s.partition),
        );
        let at = d
            .offset
            .map(|o| format!(" at source offset {o}"))
            .unwrap_or_default();
        let reason = d.reason.as_str();
        match change {
            Change::Degraded => {
                warn!(flow = %name, "{what} degraded ({reason}){at}: {}; its other partitions keep flowing, it is retried with backoff", d.error)
            }
            Change::ReasonChanged(old) => {
                warn!(flow = %name, "{what} still degraded, now {reason} (was {}){at}: {}", old.as_str(), d.error)
            }
            Change::StillFailing => {
                debug!(flow = %name, "{what}: retry {} failed ({reason}){at}: {}", d.retries, d.error)
            }
        }
        let (topic, partition) = slot.map_or(("", None), |s| (s.topic.as_str(), Some(s.partition)));
        if let Ok(c) = self
            .metrics
            .partition_errors(&name, topic, partition, reason)
        {
            c.inc();
        }
        self.set_partition_gauge(topic, partition, true);
    }

    /// Sets `refract_partition_degraded` of a partition (the flow's reads: empty topic, none).
    fn set_partition_gauge(&self, topic: &str, partition: Option<i32>, degraded: bool) {
        if let Ok(g) = self
            .metrics
            .partition_degraded(&self.flow.name(), topic, partition)
        {
            g.set(if degraded { 1.0 } else { 0.0 });
        }
    }

    /// Publishes the degraded partitions in the status and the flow's state.
    fn publish_degraded(&self, slots: &Slots) {
        let mut list: Vec<DegradedPartition> = slots
            .source
            .degraded()
            .map(|d| DegradedPartition::new(None, d))
            .into_iter()
            .collect();
        let mut partitions: Vec<DegradedPartition> = slots
            .slots
            .iter()
            .filter_map(|s| {
                s.health
                    .degraded()
                    .map(|d| DegradedPartition::new(Some(s), d))
            })
            .collect();
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        list.extend(partitions);
        lock(&self.status).degraded = list;
        self.refresh_state();
    }

    /// Clears the degraded partitions of an earlier run from the status and the gauges.
    fn forget_degraded(&self) {
        let old = std::mem::take(&mut lock(&self.status).degraded);
        for d in old {
            self.set_partition_gauge(d.topic.as_deref().unwrap_or(""), d.partition, false);
        }
    }

    /// Names and creates the MM2 internal topics this flow writes: the offset-syncs topic (on the
    /// source or the target) and `heartbeats` on the target (and on the source for the reverse
    /// pair). A broker that refuses to create them only costs a warning.
    fn internals(&self, clients: &Clients, policy: &mut ReplicationPolicy) -> Result<Internals> {
        let name = self.flow.name();
        let sync_topic = match self.flow.offset_syncs_location {
            OffsetSyncsLocation::Source => policy.offset_syncs_topic(&self.target.alias),
            OffsetSyncsLocation::Target => policy.offset_syncs_topic(&self.source.alias),
        }
        .with_context(|| format!("flow {name}: naming the offset-syncs topic"))?;
        let heartbeats_topic = policy
            .heartbeats_topic()
            .with_context(|| format!("flow {name}: naming the heartbeats topic"))?;
        let compact = [("cleanup.policy".to_string(), "compact".to_string())];
        let rf = self.flow.internal_replication_factor;
        type Wanted<'a> = (
            &'a BaseConsumer,
            &'a AdminClient<DefaultClientContext>,
            &'a str,
            &'a str,
        );
        let on_source = (
            &clients.consumer,
            &clients.source_admin,
            &*self.source.alias,
        );
        let on_target = (&clients.target_meta, &clients.admin, &*self.target.alias);
        let mut wanted: Vec<Wanted<'_>> = Vec::new();
        if self.flow.emit_offset_syncs {
            let (meta, admin, cluster) = match self.flow.offset_syncs_location {
                OffsetSyncsLocation::Source => on_source,
                OffsetSyncsLocation::Target => on_target,
            };
            wanted.push((meta, admin, cluster, &sync_topic));
        }
        if self.flow.emit_heartbeats {
            wanted.push((on_target.0, on_target.1, on_target.2, &heartbeats_topic));
            if self.reverse_heartbeats {
                wanted.push((on_source.0, on_source.1, on_source.2, &heartbeats_topic));
            }
        }
        for (meta, admin, cluster, topic) in wanted {
            if let Err(e) = ensure_topic(meta, admin, topic, 1, rf, &compact) {
                warn!(flow = %name, "cannot create {topic} on {cluster}: {e:#}");
            }
        }
        Ok(Internals {
            writer: self
                .flow
                .emit_offset_syncs
                .then(|| OffsetSyncWriter::new(self.flow.offset_lag_max)),
            sync_topic,
            heartbeats_topic,
            next_heartbeat: Instant::now(),
            next_config_sync: Instant::now() + self.flow.sync_topic_configs_interval,
            config_sync_unsupported: false,
            next_acl_sync: Instant::now(),
            acl_sync_off: !self.flow.sync_topic_acls,
        })
    }

    /// Writes due offset syncs (all delayed ones too when `flush`) and heartbeats.
    fn emit_internals(
        &self,
        clients: &Clients,
        slots: &Slots,
        progress: &Progress,
        internals: &mut Internals,
        flush: bool,
    ) {
        if let Some(writer) = internals.writer.as_mut() {
            // A sync flagged for a partition replaces one still pending there, so pending syncs
            // are collected after every update: a burst of acknowledgements must not collapse
            // the syncs it needs into its last one.
            let mut syncs = Vec::new();
            {
                let mut progress = lock(progress);
                for (i, slot) in slots.slots.iter().enumerate() {
                    for (up, down) in progress[i].take_completed() {
                        writer.update(&slot.topic, slot.partition, up, down);
                        syncs.extend(writer.take_pending());
                    }
                }
            }
            if flush {
                writer.promote_delayed();
                syncs.extend(writer.take_pending());
            }
            if !syncs.is_empty() {
                let sent = syncs
                    .iter()
                    .filter(|sync| self.send_sync(clients, &internals.sync_topic, sync))
                    .count();
                lock(&self.status).offset_syncs += sent as u64;
            }
        }
        if self.flow.emit_heartbeats && Instant::now() >= internals.next_heartbeat {
            internals.next_heartbeat = Instant::now() + self.flow.heartbeat_interval;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let forward = Heartbeat {
                source_alias: self.source.alias.clone(),
                target_alias: self.target.alias.clone(),
                timestamp: now,
            };
            if let (Ok(key), Ok(value)) = (forward.key_bytes(), forward.value_bytes()) {
                let record = BaseRecord::with_opaque_to(
                    &internals.heartbeats_topic,
                    Box::new((NO_SLOT, 0, false)),
                )
                .partition(0)
                .key(&key)
                .payload(&value)
                .timestamp(now);
                match clients.producer.send::<Vec<u8>, Vec<u8>>(record) {
                    Ok(()) => lock(&self.status).heartbeats += 1,
                    Err((e, _)) => debug!(flow = %self.flow.name(), "heartbeat not sent: {e}"),
                }
            }
            if self.reverse_heartbeats {
                let reverse = Heartbeat {
                    source_alias: self.target.alias.clone(),
                    target_alias: self.source.alias.clone(),
                    timestamp: now,
                };
                if let (Some(p), Ok(key), Ok(value)) = (
                    &clients.source_producer,
                    reverse.key_bytes(),
                    reverse.value_bytes(),
                ) {
                    let record = BaseRecord::to(&internals.heartbeats_topic)
                        .partition(0)
                        .key(&key)
                        .payload(&value)
                        .timestamp(now);
                    if let Err((e, _)) = p.send::<Vec<u8>, Vec<u8>>(record) {
                        debug!(flow = %self.flow.name(), "reverse heartbeat not sent: {e}");
                    }
                    p.poll(Duration::ZERO);
                }
            }
        }
    }

    /// Writes one offset sync to partition 0 of the offset-syncs topic.
    fn send_sync(&self, clients: &Clients, topic: &str, sync: &OffsetSync) -> bool {
        let (Ok(key), Ok(value)) = (sync.key_bytes(), sync.value_bytes()) else {
            warn!(flow = %self.flow.name(), "offset sync for {}[{}] cannot be encoded", sync.topic, sync.partition);
            return false;
        };
        let result = match (self.flow.offset_syncs_location, &clients.source_producer) {
            (OffsetSyncsLocation::Source, Some(p)) => {
                let r = p
                    .send(BaseRecord::to(topic).partition(0).key(&key).payload(&value))
                    .map_err(|(e, _)| e);
                p.poll(Duration::ZERO);
                r
            }
            _ => clients
                .producer
                .send(
                    BaseRecord::with_opaque_to(topic, Box::new((NO_SLOT, 0, false)))
                        .partition(0)
                        .key(&key)
                        .payload(&value),
                )
                .map_err(|(e, _)| e),
        };
        match result {
            Ok(()) => true,
            Err(e) => {
                debug!(flow = %self.flow.name(), "offset sync for {}[{}] not sent: {e}", sync.topic, sync.partition);
                false
            }
        }
    }

    /// The configs a new remote topic of `source_topic` is created with.
    fn remote_topic_configs(&self, clients: &Clients, source_topic: &str) -> Vec<(String, String)> {
        if !self.flow.sync_topic_configs {
            return Vec::new();
        }
        match topic_configs::wanted(&self.flow, &clients.source_admin, source_topic) {
            Ok(configs) => configs,
            Err(e) => {
                warn!(flow = %self.flow.name(), "cannot read the configs of {source_topic} on {}; creating its remote topic with the target's defaults: {e:#}", self.source.alias);
                Vec::new()
            }
        }
    }

    /// Re-applies the source topics' configs to their existing remote topics.
    fn sync_configs(&self, clients: &Clients, plan: &TopicPlan, internals: &mut Internals) {
        internals.next_config_sync = Instant::now() + self.flow.sync_topic_configs_interval;
        if !self.flow.sync_topic_configs || internals.config_sync_unsupported {
            return;
        }
        for route in &plan.routes {
            let wanted =
                match topic_configs::wanted(&self.flow, &clients.source_admin, &route.source_topic)
                {
                    Ok(w) => w,
                    Err(e) => {
                        debug!(flow = %self.flow.name(), "config sync: {e:#}");
                        continue;
                    }
                };
            match topic_configs::resync(&self.flow, &clients.admin, &route.remote_topic, &wanted) {
                Ok(true) => {
                    info!(flow = %self.flow.name(), "synced the configs of {} from {}", route.remote_topic, route.source_topic)
                }
                Ok(false) => {}
                Err(e) if format!("{e:#}").contains("not supported") => {
                    warn!(flow = %self.flow.name(), "{} cannot alter topic configs; remote topics keep the configs they were created with: {e:#}", self.target.alias);
                    internals.config_sync_unsupported = true;
                    return;
                }
                Err(e) => {
                    warn!(flow = %self.flow.name(), "config sync of {}: {e:#}", route.remote_topic)
                }
            }
        }
    }

    /// Per partition: the source's high watermark (as of the consumer's last fetch, no request)
    /// minus the position after the last record the target acknowledged.
    fn update_lag(&self, clients: &Clients, slots: &Slots, progress: &Progress) {
        // Cached watermarks of a source that does not answer are stale: the lag is unknown
        // (set by the watch), never a stale number.
        if self.unreachable("source") {
            return;
        }
        let progress = lock(progress);
        let mut lag = BTreeMap::new();
        let mut acknowledged = 0i64;
        for (i, slot) in slots.slots.iter().enumerate() {
            // librdkafka only knows a partition's watermark after a fetch answered for it.
            let Some(high) = cached_high_watermark(&clients.consumer, &slot.topic, slot.partition)
                .or_else(|| {
                    clients
                        .consumer
                        .fetch_watermarks(&slot.topic, slot.partition, Duration::from_secs(1))
                        .ok()
                        .map(|(_, high)| high)
                })
            else {
                debug!(flow = %self.flow.name(), "lag of {}[{}]: no high watermark", slot.topic, slot.partition);
                continue;
            };
            let done = progress[i]
                .committable()
                .or(slot.committed)
                .or(slot.position);
            let Some(done) = done else {
                debug!(flow = %self.flow.name(), "lag of {}[{}]: no position", slot.topic, slot.partition);
                continue;
            };
            let behind = (high - done).max(0);
            acknowledged += done;
            if let Some(m) = &slot.metrics {
                m.replication_lag_records.set_i64(behind);
            }
            lag.insert(format!("{}[{}]", slot.topic, slot.partition), behind);
        }
        drop(progress);
        let behind: i64 = lag.values().sum();
        let stalled = stall(
            &mut lock(&self.progress_mark),
            acknowledged,
            behind,
            Instant::now(),
        )
        .map(|idle| {
            format!(
                "{behind} records behind and none acknowledged by cluster {} for {} s",
                self.target.alias,
                idle.as_secs()
            )
        });
        let name = self.flow.name();
        let (recovered, was_stalled) = {
            let mut status = lock(&self.status);
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
        for ((cluster, role, outage), partitions) in recovered {
            info!(flow = %name, "cluster {cluster} ({role}) is back after an outage of {:.1} s; backlog {behind} records over {partitions} partitions", outage.as_secs_f64());
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
            self.refresh_state();
        }
    }

    /// Copies the literal topic ACLs of mirrored topics to their remote topics (MM2's rules).
    fn sync_acls(&self, clients: &Clients, plan: &TopicPlan, internals: &mut Internals) {
        internals.next_acl_sync = Instant::now() + self.flow.sync_topic_acls_interval;
        let routes: HashMap<&str, &str> = plan
            .routes
            .iter()
            .map(|r| (r.source_topic.as_str(), r.remote_topic.as_str()))
            .collect();
        let result = acls::sync_once(
            &clients.source_admin,
            &clients.admin,
            |topic| routes.get(topic).map(|r| r.to_string()),
            REQUEST_TIMEOUT,
        );
        match result {
            Ok(0) => debug!(flow = %self.flow.name(), "ACL sync: no topic ACLs to copy"),
            Ok(n) => {
                info!(flow = %self.flow.name(), "ACL sync: {n} topic ACL(s) on {}", self.target.alias)
            }
            Err(acls::AclError::NoAuthorizer(e)) => {
                info!(flow = %self.flow.name(), "ACL sync off: {} or {} has no authorizer ({e})", self.source.alias, self.target.alias);
                internals.acl_sync_off = true;
            }
            Err(e) => warn!(flow = %self.flow.name(), "ACL sync: {e}"),
        }
    }

    /// Whether a partition with no committed position is read from its beginning.
    fn starts_from_earliest(&self) -> bool {
        let reset = self.source.client_config(ClientRole::Consumer);
        matches!(
            reset.get("auto.offset.reset").map(String::as_str),
            None | Some("earliest" | "smallest" | "beginning")
        )
    }

    /// Notes a failed run in the shared status.
    pub fn record_failure(&self, error: &anyhow::Error) {
        let mut status = lock(&self.status);
        status.last_error = Some(format!("{error:#}"));
        let state = match error.downcast_ref::<crate::chain::Halt>() {
            Some(halt) => {
                status.halted = Some(halt.to_string());
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
}

/// One record to produce.
struct Output<'a> {
    topic: &'a str,
    partition: Option<i32>,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    timestamp: Option<i64>,
    headers: Option<OwnedHeaders>,
}

impl<'a> Output<'a> {
    fn of(item: &'a Item<'_>, partition: Option<i32>, headers: OwnedHeaders) -> Self {
        Self {
            topic: &item.topic,
            partition,
            key: item.key.as_deref(),
            value: item.value.as_deref(),
            timestamp: item.timestamp,
            headers: Some(headers),
        }
    }
}

/// A record polled from the source, waiting for the processor chain.
struct Fetched<'m> {
    /// Index of its partition's slot.
    slot: usize,
    msg: SourceMessage<'m>,
    /// Its provenance stamp, when the flow stamps records.
    stamp: Option<Cow<'m, str>>,
}

impl Fetched<'_> {
    /// The record as the chain receives it, borrowing the fetched bytes; the provenance header is
    /// left out when the flow stamps a new one.
    fn item<'s>(&'s self, remote: &'s str) -> Item<'s> {
        let msg = &self.msg;
        let restamp = self.stamp.is_some();
        let headers = msg.headers();
        Item {
            offset: msg.offset(),
            topic: Cow::Borrowed(remote),
            partition: msg.partition(),
            timestamp: msg.timestamp().to_millis(),
            key: msg.key().map(Cow::Borrowed),
            value: msg.payload().map(Cow::Borrowed),
            headers: headers
                .map(|h| {
                    h.iter()
                        .filter(|h| !restamp || h.key != PROVENANCE_HEADER)
                        .map(|h| (Cow::Borrowed(h.key), h.value.map(Cow::Borrowed)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

fn owned_headers<'h: 'i, 'i>(
    headers: impl Iterator<Item = &'i HeaderPair<'h>>,
    extra: &[(&str, &str)],
) -> OwnedHeaders {
    let mut out = OwnedHeaders::new_with_capacity(headers.size_hint().0 + extra.len());
    for (k, v) in headers {
        out = out.insert(Header {
            key: k,
            value: v.as_deref(),
        });
    }
    for (k, v) in extra {
        out = out.insert(Header {
            key: k,
            value: Some(v.as_bytes()),
        });
    }
    out
}

/// Hands every partition's gathered acknowledgement observations to its series.
fn publish_stats(progress: &Progress) {
    for tracked in lock(progress).iter_mut() {
        tracked.publish();
    }
}

/// Hands one record to the producer, waiting while its queue is full.
fn send(clients: &Clients, token: Token, output: Output<'_>) -> Result<()> {
    let (slot, offset, _) = *token;
    let mut record: BaseRecord<'_, [u8], [u8], Token> =
        BaseRecord::with_opaque_to(output.topic, token);
    record.partition = output.partition;
    record.key = output.key;
    record.payload = output.value;
    record.timestamp = output.timestamp;
    record.headers = output.headers;
    let len = record.payload.map_or(0, <[u8]>::len);
    loop {
        match clients.producer.send(record) {
            Ok(()) => {
                if let Some(g) = &clients.producer.context().inflight {
                    g.add(len as f64);
                }
                return Ok(());
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                poll_producer(clients, Duration::from_millis(1));
            }
            // Refused before it left (larger than the producer's message.max.bytes, an unknown
            // partition): a failed delivery of its partition, which is paused and retried.
            Err((KafkaError::MessageProduction(code), _)) if slot != NO_SLOT => {
                let mut progress = lock(&clients.producer.context().progress);
                if let Some(p) = progress.get_mut(slot) {
                    p.failed(offset, Reason::of_delivery(code), describe(code));
                }
                return Ok(());
            }
            Err((e, _)) => bail!(
                "producing source offset {offset} (slot {slot}) to {}: {e}",
                output.topic
            ),
        }
    }
}

/// librdkafka's description of an error code (`Broker: Message size too large`).
fn describe(code: RDKafkaErrorCode) -> String {
    // The code's Display is `Name (description)`.
    let text = code.to_string();
    text.strip_prefix(&format!("{code:?} ("))
        .and_then(|t| t.strip_suffix(')'))
        .map_or_else(|| text.clone(), str::to_string)
}

/// Stall detection: `mark` is (acknowledged positions summed, when that sum last changed or
/// nothing was behind). How long the flow has been stalled, once records are behind and none
/// was acknowledged for [`STALL_AFTER`].
fn stall(
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

/// The provenance header value for a record mirrored from `source` to `target`: the clusters it
/// already passed through plus `source`. `None` when it passed through `target` already (sending
/// it there again would be a loop).
pub fn provenance<'s, H: Headers>(
    headers: Option<&H>,
    source: &'s str,
    target: &str,
) -> Option<Cow<'s, str>> {
    let previous = headers.and_then(|h| {
        h.iter()
            .filter(|hd| hd.key == PROVENANCE_HEADER)
            .last()
            .and_then(|hd| hd.value)
    });
    match previous {
        // The common case, a record produced on the source: no allocation.
        None | Some(b"") => Some(Cow::Borrowed(source)),
        Some(v) => stamp_after(Some(&String::from_utf8_lossy(v)), source, target).map(Cow::Owned),
    }
}

/// [`provenance`] on the header's text.
pub fn stamp_after(previous: Option<&str>, source: &str, target: &str) -> Option<String> {
    match previous.filter(|p| !p.is_empty()) {
        None => Some(source.to_string()),
        Some(p) => {
            if p.split(',').any(|c| c == target) {
                None
            } else if p.split(',').next_back() == Some(source) {
                Some(p.to_string())
            } else {
                Some(format!("{p},{source}"))
            }
        }
    }
}

/// The high watermark librdkafka last saw for a partition in a fetch response (no request).
fn cached_high_watermark(consumer: &BaseConsumer, topic: &str, partition: i32) -> Option<i64> {
    let topic = std::ffi::CString::new(topic).ok()?;
    let (mut low, mut high) = (-1i64, -1i64);
    // SAFETY: the consumer is alive for the call; the out-pointers are valid locals.
    let err = unsafe {
        rdkafka_sys::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            partition,
            &mut low,
            &mut high,
        )
    };
    (err == rdkafka_sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0)
        .then_some(high)
}

#[cfg(test)]
mod provenance_tests {
    use super::stamp_after;

    #[test]
    fn stamps_and_detects_loops() {
        assert_eq!(stamp_after(None, "a", "b").as_deref(), Some("a"));
        assert_eq!(stamp_after(Some(""), "a", "b").as_deref(), Some("a"));
        assert_eq!(stamp_after(Some("a"), "b", "c").as_deref(), Some("a,b"));
        // a -> b -> a: back to where it came from
        assert_eq!(stamp_after(Some("a"), "b", "a"), None);
        assert_eq!(stamp_after(Some("a,b"), "c", "a"), None);
        assert_eq!(stamp_after(Some("a,b"), "c", "b"), None);
        // a cluster alias is matched whole, not as a prefix
        assert_eq!(stamp_after(Some("ab"), "c", "a").as_deref(), Some("ab,c"));
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
