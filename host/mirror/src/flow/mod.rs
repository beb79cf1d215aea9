//! One running flow: source consumer → policy → target producer, with the source position
//! committed only up to what the target has acknowledged.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use rdkafka::producer::Producer;

use tracing::{debug, info, warn};

use refract_config::{ClientRole, Cluster, Flow, OnError};
use refract_plugin::{PolicyPlugin, Processor, ProcessorPlugin, ReplicationPolicy};

use crate::chain::Chain;
use crate::cluster::TaskId;
use crate::source_queue::SourceQueue;

use crate::clients::REQUEST_TIMEOUT;
use crate::planner::{TopicPlan, TopicPlanner};
use refract_telemetry::{FlowMetrics, FlowState, Metrics};

mod board;
mod delivery;
mod discovery;
mod events;
mod forwarding;
mod health;
mod internals;
mod provenance;
mod slots;
mod status;
mod transactions;

pub use board::FlowBoard;
use delivery::{flush_producer, poll_producer, Clients, Progress};
use forwarding::publish_stats;
use internals::Internals;
pub use provenance::*;
use slots::Slots;
pub use status::*;
pub use transactions::Fenced;
use transactions::Transactions;

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
    format!("refract-{}-{}", flow.source, flow.target)
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
}

/// The `transactional.id` of an exactly-once task's target producer: the same in every process
/// that runs the task, so the newest fences the others: `refract-<source>-<target>` for a flow
/// of one task, `refract-<source>-<target>-<task>` when it has several.
pub fn transactional_id(flow: &Flow, task: TaskId) -> String {
    if task.count <= 1 {
        format!("refract-{}-{}", flow.source, flow.target)
    } else {
        format!("refract-{}-{}-{}", flow.source, flow.target, task.index)
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
    /// Whether it also writes the reverse pair's heartbeats; a reload can turn it off live.
    reverse_heartbeats: AtomicBool,
    metrics: Metrics,
    flow_metrics: Option<FlowMetrics>,
    /// Shutdown's budget for flushing and committing.
    drain: Duration,
    /// Acknowledged source positions summed, and when that sum last grew (stall detection).
    progress_mark: Mutex<(i64, Instant)>,
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
            reverse_heartbeats: AtomicBool::new(false),
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
        let mut txn = if self.exactly_once() {
            Some(self.start_transactions(&clients)?)
        } else {
            None
        };
        let result = self.mirror(&name, &mut clients, &progress, &mut txn);
        match (result, &txn) {
            (Err(e), Some(_)) if self.abort_transaction(&clients, &e) => {
                Err(anyhow::Error::new(self.fenced()).context(format!("{e:#}")))
            }
            (result, _) => result,
        }
    }

    /// The run loop: discover, forward, commit, until stopped; then drain.
    fn mirror(
        &self,
        name: &str,
        clients: &mut Clients,
        progress: &Progress,
        txn: &mut Option<Transactions>,
    ) -> Result<()> {
        let name = name.to_string();
        let progress = progress.clone();
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
        let mut next_commit = Instant::now() + self.flow.delivery.commit_interval;
        let mut next_stats = Instant::now() + STATS_INTERVAL;
        let mut internals = self.internals(clients, &mut policy)?;

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
                    clients,
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
                        // Config and ACL sync are once-per-flow duties: task 0's.
                        if self.task.duties() && Instant::now() >= internals.next_config_sync {
                            self.sync_configs(clients, &plan, &mut internals);
                        }
                        if self.task.duties()
                            && !internals.acl_sync_off
                            && Instant::now() >= internals.next_acl_sync
                        {
                            self.sync_acls(clients, &plan, &mut internals);
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
                // A task waiting for task 0 to create a remote topic looks again soon.
                next_discovery = Instant::now()
                    + if slots.awaiting_remote {
                        AWAIT_REMOTE_INTERVAL.min(self.flow.refresh_topics_interval)
                    } else {
                        self.flow.refresh_topics_interval
                    };
            }
            self.forward_batch(clients, &queue, &mut slots, &progress, &mut chain)?;
            poll_producer(clients, Duration::ZERO);
            if let Some(t) = txn.as_mut() {
                // Any failed record fails the whole transaction: abort, start over from the
                // last committed positions (never a partition retried inside a transaction).
                self.transaction_failure(clients, &progress)?;
                if Instant::now() >= t.due {
                    self.commit_transaction(
                        clients,
                        &mut slots,
                        &progress,
                        &mut internals,
                        t,
                        REQUEST_TIMEOUT,
                        false,
                    )?;
                }
            } else {
                self.replace_failed_producer(
                    &name,
                    &mut clients.producer,
                    &progress,
                    &mut fatal_streak,
                )?;
            }
            if Instant::now() >= next_stats {
                publish_stats(&progress);
                next_stats = Instant::now() + STATS_INTERVAL;
            }
            self.emit_internals(clients, &slots, &progress, &mut internals, false);
            // A partition whose delivery failed is paused and retried on its own; the flow
            // and its other partitions go on.
            self.tend(clients, &mut slots, &progress);
            if Instant::now() >= next_commit {
                self.update_lag(clients, &slots, &progress);
                self.emit_internals(clients, &slots, &progress, &mut internals, true);
                // A source that does not answer cannot take commits; positions wait (nothing is
                // lost) instead of a request that blocks the flow until it times out. Under
                // exactly-once the source group is committed after each transaction only.
                if !self.unreachable("source") && txn.is_none() {
                    match self.commit(clients, &mut slots, &progress, REQUEST_TIMEOUT) {
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
                next_commit = Instant::now() + self.flow.delivery.commit_interval;
            }
        }
        self.drain(&name, clients, &mut slots, &progress, &mut internals, txn);
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
        txn: &mut Option<Transactions>,
    ) {
        let deadline = Instant::now() + self.drain;
        let left = || deadline.saturating_duration_since(Instant::now());
        if let Some(t) = txn.as_mut() {
            info!(flow = %name, "stopping: committing the open transaction on cluster {} (up to {:?})", self.target.alias, self.drain);
            let committed = self.transaction_failure(clients, progress).and_then(|()| {
                self.commit_transaction(clients, slots, progress, internals, t, left(), true)
            });
            if let Err(e) = committed {
                warn!(flow = %name, "{e:#}; the records since the last committed transaction will be mirrored again on the next start (read_committed consumers see them once)");
                self.abort_transaction(clients, &e);
            }
            if let Some(p) = &clients.source_producer {
                let _ = p.flush(left().min(Duration::from_secs(5)));
            }
            *txn = None;
            return;
        }
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

    /// Whether a partition with no committed position is read from its beginning.
    fn starts_from_earliest(&self) -> bool {
        let reset = self.source.client_config(ClientRole::Consumer);
        matches!(
            reset.get("auto.offset.reset").map(String::as_str),
            None | Some("earliest" | "smallest" | "beginning")
        )
    }
}
