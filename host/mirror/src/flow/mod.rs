//! One running flow: source consumer → policy → target producer, with the source position
//! committed only up to what the target has acknowledged.
//!
//! A [`FlowRunner`] runs one task of a flow and keeps what outlives a run: the settings, the
//! plugins, the stop flag, the status and the series. Each run (from connecting to draining, a
//! restart starts a new one) is a `run::Run`, which owns the clients, the partitions and their
//! progress, the MM2 side channels and the delivery mode; the other files of this module are its
//! parts.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
pub use throttle::Limits as ThrottleLimits;

use anyhow::{Context, Result};
use rdkafka::{Offset, TopicPartitionList};

use refract_config::{ClientRole, Cluster, DeliveryMode, Flow, OnError, Side, TaskId};
use refract_plugin::{PolicyPlugin, Processor, ProcessorPlugin};
use refract_telemetry::Metrics;

use crate::chain::Chain;
use crate::outputs::OutputRules;
use crate::series::{FlowMetrics, RefractSeries};

mod board;
mod delivery;
mod discovery;
mod events;
mod forwarding;
mod health;
mod internals;
mod lost;
mod members;
mod provenance;
mod record_log;
mod recreated;
mod run;
pub(crate) mod schemas;
mod slots;
mod status;
mod targets;
mod throttle;
mod transactions;

pub use board::FlowBoard;
pub use lost::{LostHalt, LostRecords};
pub use members::{ClusterView, Member};
pub use provenance::*;
use run::Run;
use slots::Slot;
pub use status::*;
pub use transactions::Fenced;

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

/// How often a task other than task 0 looks again for remote topics task 0 has yet to create.
const AWAIT_REMOTE_INTERVAL: Duration = Duration::from_secs(1);

/// How often gathered per-record observations are handed to the metrics registry.
const STATS_INTERVAL: Duration = Duration::from_millis(100);

/// Locks a mutex, recovering the data if another thread panicked while holding it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The consumer group on the source under which a flow commits its progress.
pub fn progress_group(flow: &Flow) -> String {
    flow.id().progress_group()
}

/// What a thread of one flow (a task, its checkpoints) starts from: the flow's settings, its
/// two clusters, the thread's stop signal and the board its status is merged on.
#[derive(Clone)]
pub struct FlowContext {
    /// The flow's settings.
    pub flow: Flow,
    /// Its source cluster.
    pub source: Cluster,
    /// Its target cluster.
    pub target: Cluster,
    /// Set to stop the thread.
    pub stop: Arc<AtomicBool>,
    /// Where the flow's status is put together.
    pub board: Arc<FlowBoard>,
    /// The flow's read rate limits, shared by its tasks and changed by a reload.
    pub throttle: Arc<ThrottleLimits>,
    /// MirrorMaker 2's series (records, bytes, record age, latency, lag) per partition, as MM2
    /// exports them, or (`false`, `[metrics] partition_series = false`) one per topic with its
    /// partitions summed up.
    pub partition_series: bool,
    /// The flow's schema-id translator (`schemas = "translate"`), shared by its tasks.
    pub schemas: Option<Arc<refract_schema::Translator>>,
}

/// The `transactional.id` of an exactly-once task's target producer: the same in every process
/// that runs the task, so the newest fences the others: `refract-<source>-<target>` for a flow
/// of one task, `refract-<source>-<target>-<task>` when it has several.
pub fn transactional_id(flow: &Flow, task: TaskId) -> String {
    flow.id().transactional_id(task.index, task.count)
}

/// A flow's plugins: its policy and its processors in order.
#[derive(Clone)]
pub struct PluginSet {
    /// Names remote topics.
    pub policy: Arc<PolicyPlugin>,
    /// Processors in order, each with its `on_error`.
    pub processors: Vec<(Arc<ProcessorPlugin>, OnError)>,
}

/// Runs one task of a flow (the whole flow when it has one task) until asked to stop.
pub struct FlowRunner {
    flow: Flow,
    source: Cluster,
    target: Cluster,
    /// Which of the flow's partitions it mirrors, and whether it does the once-per-flow duties.
    task: TaskId,
    /// Where its status is merged with the flow's other tasks'.
    board: Arc<FlowBoard>,
    /// The plugins in use (a restart picks up the latest swapped-in set).
    plugins: Mutex<PluginSet>,
    /// A set handed in by [`FlowRunner::swap_plugins`], taken at the next batch boundary.
    pending_swap: Mutex<Option<PluginSet>>,
    stop: Arc<AtomicBool>,
    status: SharedStatus,
    known_outputs: Mutex<HashSet<String>>,
    /// What the flow learnt of the topics transforms send records to.
    output_topics: Mutex<targets::OutputTopics>,
    /// Whether it also writes the reverse pair's heartbeats; a reload can turn it off live.
    reverse_heartbeats: AtomicBool,
    metrics: Metrics,
    flow_metrics: Option<FlowMetrics>,
    /// Shutdown's budget for flushing and committing.
    drain: Duration,
    /// Acknowledged source positions summed, and when that sum last grew (stall detection).
    progress_mark: Mutex<(i64, Instant)>,
    /// The flow's read rate limits.
    throttle: Arc<ThrottleLimits>,
    /// See [`FlowContext::partition_series`].
    partition_series: bool,
    /// See [`FlowContext::schemas`].
    schemas: Option<Arc<refract_schema::Translator>>,
    /// Its per-record warnings in the current minute (see `record_log`).
    record_log: Mutex<record_log::RecordLog>,
}

impl FlowRunner {
    /// A runner for `task` of the flow in `context`, with `plugins`.
    pub fn new(context: FlowContext, task: TaskId, plugins: PluginSet) -> Self {
        let FlowContext {
            flow,
            source,
            target,
            stop,
            board,
            throttle,
            partition_series,
            schemas,
        } = context;
        let status = board.add_task(task.index);
        Self {
            flow,
            source,
            target,
            task,
            board,
            plugins: Mutex::new(plugins),
            pending_swap: Mutex::new(None),
            stop,
            status,
            known_outputs: Mutex::new(HashSet::new()),
            output_topics: Mutex::default(),
            reverse_heartbeats: AtomicBool::new(false),
            metrics: Metrics::new(),
            flow_metrics: None,
            drain: DRAIN_TIMEOUT,
            progress_mark: Mutex::new((0, Instant::now())),
            throttle,
            partition_series,
            schemas,
            record_log: Mutex::default(),
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

    /// Records this flow's series in `metrics` (a private registry otherwise).
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.flow_metrics = metrics.flow(&self.flow.name()).ok();
        self.metrics = metrics;
        self
    }

    /// Also emits the reverse pair's heartbeats (`target->source`) into the source cluster, as
    /// MirrorMaker 2's default heartbeat connectors for every cluster pair do; set when the
    /// pipeline has no flow in the other direction to do it.
    pub fn with_reverse_heartbeats(self, yes: bool) -> Self {
        self.reverse_heartbeats.store(yes, Ordering::Relaxed);
        self
    }

    /// Stops writing the reverse pair's heartbeats (a flow in the other direction now does),
    /// without a restart.
    pub fn stop_reverse_heartbeats(&self) {
        self.reverse_heartbeats.store(false, Ordering::Relaxed);
    }

    fn reverse_heartbeats(&self) -> bool {
        self.reverse_heartbeats.load(Ordering::Relaxed)
    }

    /// Hands in plugins that were loaded, instantiated and initialised off the data path; the
    /// flow switches to them between two batches (records polled before the switch are
    /// processed by the old plugins, every later record by the new ones). A new policy names the
    /// topics discovered after the switch; mirrored topics keep their remote names.
    pub fn swap_plugins(&self, set: PluginSet) {
        *lock(&self.pending_swap) = Some(set);
    }

    fn chain_of(&self, set: &PluginSet) -> Chain {
        // A swap brings new plugin files for the same processor entries (changed entries
        // rebuild the flow), so the entries of the flow's settings give each its rules.
        Chain::new(
            &self.source.alias,
            set.processors
                .iter()
                .enumerate()
                .map(|(i, (p, on_error))| {
                    let rules = self
                        .flow
                        .processors
                        .get(i)
                        .map_or_else(|| OutputRules::remote_only(p.name()), OutputRules::of);
                    (Processor::new(p.clone()), *on_error, rules)
                })
                .collect(),
        )
        .with_metrics(&self.metrics, &self.flow.name())
    }

    /// Runs until stopped (Ok) or until something fails that needs a fresh start (Err).
    pub fn run(&self) -> Result<()> {
        let mut run = Run::start(self)?;
        run.mirror().map_err(|e| run.failed(e))
    }

    /// Whether the watch reports the flow's `side` cluster unreachable.
    fn unreachable(&self, side: Side) -> bool {
        lock(&self.status)
            .unreachable
            .iter()
            .any(|u| u.side == side)
    }

    /// Whether the flow runs exactly-once.
    fn exactly_once(&self) -> bool {
        self.flow.delivery.mode == DeliveryMode::ExactlyOnce
    }

    /// The error for a fenced producer.
    fn fenced(&self) -> Fenced {
        Fenced {
            flow: self.flow.name(),
            id: transactional_id(&self.flow, self.task),
            cluster: self.target.alias.clone(),
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
}
