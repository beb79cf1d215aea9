//! One run of a flow task, from connecting to draining. A [`Run`] is built when the task starts
//! running and owns what lives only as long as the run: the clients, the mirrored partitions
//! (slots) and their delivery progress, MirrorMaker 2's side channels, the plugins in use, and
//! the delivery mode ([`Delivery`], with the open transaction under exactly-once). Its run loop
//! discovers, forwards, delivers and commits until stopped, then drains. What outlives a run
//! (settings, plugins handed in, the stop flag, status and series) stays on the
//! [`FlowRunner`], which the run borrows.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::producer::Producer;
use tracing::{debug, error, info, warn};

use refract_config::Side;
use refract_kafka::clients::REQUEST_TIMEOUT;
use refract_kafka::source_queue::SourceQueue;
use refract_plugin::ReplicationPolicy;

use crate::chain::Chain;
use crate::planner::{OwnTopics, TopicPlan, TopicPlanner};
use crate::series::FlowState;

use super::delivery::{Clients, Progress};
use super::internals::{Internals, Syncs};
use super::slots::Slots;
use super::throttle::TaskThrottle;
use super::transactions::{abort_transaction, AfterCommit, Transactions};
use super::{lock, FlowRunner, AWAIT_REMOTE_INTERVAL, STATS_INTERVAL};

/// How a run delivers records.
pub(super) enum Delivery {
    /// Source positions are committed once the target acknowledged their records; after a crash
    /// the records since the last commit are mirrored again.
    AtLeastOnce,
    /// Records, heartbeats, offset syncs and the source positions they reach go to the target
    /// in transactions (see [`super::transactions`]); this is the open one.
    ExactlyOnce(Transactions),
}

impl Delivery {
    /// What a run that failed with `e` ends with: under exactly-once the open transaction is
    /// aborted first, and a producer that turns out to be fenced stops the flow with
    /// [`super::Fenced`] (a restart would fence the process that runs the flow now).
    pub(super) fn failed(
        &self,
        runner: &FlowRunner,
        clients: &Clients,
        e: anyhow::Error,
    ) -> anyhow::Error {
        match self {
            Delivery::ExactlyOnce(_) if abort_transaction(runner, clients, &e) => {
                anyhow::Error::new(runner.fenced()).context(format!("{e:#}"))
            }
            _ => e,
        }
    }
}

/// One run of a flow task: what it owns until it stops or fails (a restart builds a new one).
pub(super) struct Run<'r> {
    /// The task's runner: settings, status and series, which outlive the run.
    pub(super) runner: &'r FlowRunner,
    /// The flow's name, `source->target`.
    pub(super) name: String,
    /// Its consumer, producers and admin clients on both clusters.
    pub(super) clients: Clients,
    /// The mirrored source partitions.
    pub(super) slots: Slots,
    /// Their delivery state, shared with the producer's delivery reports.
    pub(super) progress: Progress,
    /// Offset syncs, heartbeats, and the schedule of topic config and ACL sync.
    pub(super) internals: Internals,
    /// At-least-once, or exactly-once with the open transaction.
    pub(super) delivery: Delivery,
    /// Names remote topics (the latest swapped-in plugins' policy).
    pub(super) policy: ReplicationPolicy,
    /// The processors records go through.
    pub(super) chain: Chain,
    /// Which source topics are mirrored, and to what.
    pub(super) planner: TopicPlanner,
    /// What the last discovery found.
    pub(super) plan: TopicPlan,
    /// Fatal producer failures in a row (at-least-once: the producer is replaced each time).
    pub(super) fatal_streak: u32,
    /// The earliest a producer that failed fatally again is replaced (see
    /// [`Run::replace_failed_producer`]).
    pub(super) replace_after: Option<Instant>,
    /// How many lag computations this run made (see [`Run::update_lag`]).
    pub(super) lag_round: usize,
    /// Failed commits of source positions in a row.
    commit_failures: u32,
    /// This task's share of the flow's read rate limits.
    pub(super) throttle: TaskThrottle,
}

impl<'r> Run<'r> {
    /// Starts a run of `runner`'s task: connects the clients, begins the first transaction under
    /// exactly-once, takes up plugins handed in meanwhile and readies the MM2 internal topics.
    pub(super) fn start(runner: &'r FlowRunner) -> Result<Self> {
        let name = runner.flow.name();
        let progress = Progress::default();
        let clients = runner.connect(&name, progress.clone())?;
        let delivery = if runner.exactly_once() {
            Delivery::ExactlyOnce(Transactions::start(runner, &clients)?)
        } else {
            Delivery::AtLeastOnce
        };
        // A fresh start reads every partition again: earlier degraded marks no longer hold.
        runner.forget_degraded();
        runner.set_state(FlowState::Running);
        runner.refresh_state();
        if let Some(set) = lock(&runner.pending_swap).take() {
            *lock(&runner.plugins) = set;
        }
        let (mut policy, chain) = {
            let set = lock(&runner.plugins);
            (
                ReplicationPolicy::new(set.policy.clone()),
                runner.chain_of(&set),
            )
        };
        // A policy that names the flow's own topics after someone else's never starts it.
        let own = match OwnTopics::name(&runner.flow, &mut policy) {
            Ok(own) => own,
            Err(e) => return Err(delivery.failed(runner, &clients, e.into())),
        };
        let internals = match Internals::create(runner, &clients, &own) {
            Ok(internals) => internals,
            Err(e) => return Err(delivery.failed(runner, &clients, e)),
        };
        Ok(Self {
            runner,
            name,
            clients,
            slots: Slots::default(),
            progress,
            internals,
            delivery,
            policy,
            chain,
            planner: TopicPlanner::new(&runner.flow).own_topics(&own),
            plan: TopicPlan::default(),
            fatal_streak: 0,
            replace_after: None,
            lag_round: 0,
            commit_failures: 0,
            throttle: TaskThrottle::new(Arc::clone(&runner.throttle), runner.task.count),
        })
    }

    /// The run loop: discover, forward, deliver, commit, until stopped; then drain. An error
    /// needs a fresh start: [`Run::failed`] says how the run ends.
    pub(super) fn mirror(&mut self) -> Result<()> {
        // The queue holds a handle of its own on the consumer, so the run stays free to change.
        let consumer = Arc::clone(&self.clients.consumer);
        let queue = SourceQueue::new(&consumer)
            .with_context(|| format!("flow {}: the source consumer has no queue", self.name))?;
        let flow = &self.runner.flow;
        let mut next_discovery = Instant::now();
        let mut next_commit = Instant::now() + flow.delivery.commit_interval;
        let mut next_stats = Instant::now() + STATS_INTERVAL;
        while !self.runner.stop.load(Ordering::Relaxed) {
            self.take_swapped_plugins();
            if Instant::now() >= next_discovery {
                self.discover_round()?;
                // A task waiting for task 0 to create a remote topic looks again soon.
                next_discovery = Instant::now()
                    + if self.slots.awaiting_remote {
                        AWAIT_REMOTE_INTERVAL.min(flow.refresh_topics_interval)
                    } else {
                        flow.refresh_topics_interval
                    };
            }
            // Over the flow's read rate: wait (briefly) instead of reading.
            let pause = self.throttle.pause();
            if pause.is_zero() {
                self.forward_batch(&queue)?;
            } else {
                std::thread::sleep(pause);
            }
            self.clients.poll_producer(Duration::ZERO);
            self.deliver()?;
            if Instant::now() >= next_stats {
                self.runner.add_throttled(self.throttle.take_throttled());
                self.publish_stats();
                next_stats = Instant::now() + STATS_INTERVAL;
            }
            self.emit_internals(Syncs::Due);
            // A partition whose delivery failed is paused and retried on its own; the flow
            // and its other partitions go on.
            self.tend();
            if Instant::now() >= next_commit {
                self.update_lag();
                self.emit_internals(Syncs::All);
                self.commit_round();
                next_commit = Instant::now() + flow.delivery.commit_interval;
            }
        }
        self.drain();
        self.runner.set_state(FlowState::Stopped);
        info!(flow = %self.name, "stopped");
        Ok(())
    }

    /// How a run that failed with `e` ends (see [`Delivery::failed`]).
    pub(super) fn failed(&self, e: anyhow::Error) -> anyhow::Error {
        self.delivery.failed(self.runner, &self.clients, e)
    }

    /// Switches to plugins handed in by [`FlowRunner::swap_plugins`], between two batches. A
    /// set whose policy names the flow's own topics after someone else's is refused (logged and
    /// shown as the flow's last error); the plugins in use keep running.
    fn take_swapped_plugins(&mut self) {
        if let Some(set) = lock(&self.runner.pending_swap).take() {
            let mut policy = ReplicationPolicy::new(set.policy.clone());
            let own = match OwnTopics::name(&self.runner.flow, &mut policy) {
                Ok(own) => own,
                Err(e) => {
                    let message = format!("{e}; the new plugins are not swapped in, the flow keeps running with those in use");
                    error!(flow = %self.name, "{message}");
                    lock(&self.runner.status).last_error = Some(message);
                    return;
                }
            };
            self.policy = policy;
            self.planner = self.planner.clone().own_topics(&own);
            self.chain = self.runner.chain_of(&set);
            let names: Vec<String> = std::iter::once(set.policy.name().to_string())
                .chain(set.processors.iter().map(|(p, _)| p.name().to_string()))
                .collect();
            let positions: Vec<String> = self
                .slots
                .slots
                .iter()
                .filter_map(|s| {
                    s.position
                        .map(|p| format!("{}[{}]@{p}", s.topic, s.partition))
                })
                .collect();
            info!(flow = %self.name, "swapped in plugins {} before source offsets {}", names.join(", "), positions.join(" "));
            *lock(&self.runner.plugins) = set;
            lock(&self.runner.status).plugin_swaps += 1;
        }
    }

    /// Discovers topics and partitions, then runs the once-per-flow duties that follow it. A
    /// failure is logged and tried again at the next round, except a halt on lost records
    /// ([`super::LostHalt`]), which ends the run.
    fn discover_round(&mut self) -> Result<()> {
        let interval = self.runner.flow.refresh_topics_interval;
        match self.discover() {
            Ok(plan) => {
                // The source answered: a failure of its reads is over.
                if let Some(d) = self.slots.source.answered() {
                    info!(flow = %self.name, "source reads recovered ({} cleared after {} more failures); mirroring again", d.reason.as_str(), d.retries);
                    self.runner.set_partition_gauge("", None, false);
                    self.publish_degraded();
                }
                // Config and ACL sync are once-per-flow duties: task 0's.
                let duties = self.runner.task.duties();
                if duties && Instant::now() >= self.internals.next_config_sync {
                    self.sync_configs(&plan);
                }
                if duties
                    && !self.internals.acl_sync_off
                    && Instant::now() >= self.internals.next_acl_sync
                {
                    self.sync_acls(&plan);
                }
                if let Some(t) = &self.runner.schemas {
                    t.note_topics(
                        self.slots
                            .slots
                            .iter()
                            .map(|s| (s.topic.clone(), s.remote.clone())),
                    );
                }
                self.plan = plan
            }
            Err(e) if e.downcast_ref::<super::LostHalt>().is_some() => return Err(e),
            // Reported once by the watch when a cluster does not answer.
            Err(e)
                if self.runner.unreachable(Side::Source)
                    || self.runner.unreachable(Side::Target) =>
            {
                debug!(flow = %self.name, "topic discovery failed, retrying in {interval:?}: {e:#}")
            }
            Err(e) => {
                warn!(flow = %self.name, "topic discovery failed, retrying in {interval:?}: {e:#}")
            }
        }
        Ok(())
    }

    /// After a batch: under exactly-once, fails the transaction on a failed record and commits
    /// it when due; at-least-once, replaces a producer that failed fatally.
    fn deliver(&mut self) -> Result<()> {
        let in_flight = self.clients.producer.in_flight_count();
        match &mut self.delivery {
            Delivery::ExactlyOnce(txn) => {
                txn.first_in_flight(in_flight);
                let due = txn.due;
                // Any failed record fails the whole transaction: abort, start over from the
                // last committed positions (never a partition retried inside a transaction).
                self.transaction_failure()?;
                if Instant::now() >= due {
                    self.commit_transaction(REQUEST_TIMEOUT, AfterCommit::BeginNext)?;
                }
                Ok(())
            }
            Delivery::AtLeastOnce => self.replace_failed_producer(),
        }
    }

    /// At-least-once: commits the acknowledged source positions, logging the first of a run of
    /// failures and the recovery. A source that does not answer cannot take commits; positions
    /// wait (nothing is lost) instead of a request that blocks the flow until it times out.
    /// Under exactly-once the source group is committed after each transaction only.
    fn commit_round(&mut self) {
        if self.runner.unreachable(Side::Source)
            || matches!(self.delivery, Delivery::ExactlyOnce(_))
        {
            return;
        }
        match self.commit(REQUEST_TIMEOUT) {
            Ok(()) if self.commit_failures > 0 => {
                info!(flow = %self.name, "committing source positions to cluster {} works again after {} failed attempts", self.runner.source.alias, self.commit_failures);
                self.commit_failures = 0;
            }
            Ok(()) => {}
            Err(e) => {
                self.commit_failures += 1;
                if self.commit_failures == 1 {
                    warn!(flow = %self.name, "{e:#}; the positions stay uncommitted and are retried every commit interval (nothing is lost: after a crash the records since the last commit would be mirrored again)");
                } else {
                    debug!(flow = %self.name, "commit attempt {} failed: {e:#}", self.commit_failures);
                }
            }
        }
    }

    /// Shutdown: waits (within the drain timeout) for the target to acknowledge what was sent,
    /// commits what was acknowledged, and says in one line what could not be done. Never longer
    /// than the drain timeout plus one request; closing the clients happens off this thread.
    fn drain(&mut self) {
        let (name, drain, target) = (&self.name, self.runner.drain, &self.runner.target.alias);
        let deadline = Instant::now() + drain;
        let left = || deadline.saturating_duration_since(Instant::now());
        if let Delivery::ExactlyOnce(_) = self.delivery {
            info!(flow = %name, "stopping: committing the open transaction on cluster {target} (up to {drain:?})");
            let committed = self
                .transaction_failure()
                .and_then(|()| self.commit_transaction(left(), AfterCommit::Stop));
            if let Err(e) = committed {
                warn!(flow = %self.name, "{e:#}; the records since the last committed transaction will be mirrored again on the next start (read_committed consumers see them once)");
                abort_transaction(self.runner, &self.clients, &e);
            }
            if let Some(p) = &self.clients.source_producer {
                let _ = p.flush(left().min(Duration::from_secs(5)));
            }
            return;
        }
        info!(flow = %name, "stopping: waiting up to {drain:?} for cluster {target} to acknowledge in-flight records");
        let producer = &self.clients.producer;
        if self.clients.flush_producer(left()).is_err() || producer.in_flight_count() > 0 {
            warn!(flow = %name, "{} records were not acknowledged by cluster {target} within the drain timeout ({drain:?}); they are not committed and will be mirrored again on the next start", producer.in_flight_count());
        }
        self.clients.poll_producer(Duration::ZERO);
        self.publish_stats();
        self.emit_internals(Syncs::All);
        if let Some(p) = &self.clients.source_producer {
            let _ = p.flush(left().min(Duration::from_secs(5)));
        }
        let budget = left().max(Duration::from_secs(1)).min(REQUEST_TIMEOUT);
        if let Err(e) = self.commit(budget) {
            warn!(flow = %self.name, "{e:#}; the records mirrored since the last commit will be mirrored again on the next start");
        }
    }
}
