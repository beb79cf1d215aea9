//! A flow's status in this process, put together from its tasks: each task runner reports into
//! a status of its own; the board merges them with what belongs to the flow as a whole
//! (checkpoints, the cluster view, counters of tasks that moved away) into the one status
//! `/status` shows and the one `refract_flow_state` series.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::series::{FlowMetrics, FlowState};

use super::lock;
use super::status::{FlowStatus, SharedStatus};

/// Worst first: the merged state of several tasks is the first of these any task is in.
const SEVERITY: [FlowState; 6] = [
    FlowState::Halted,
    FlowState::Restarting,
    FlowState::Degraded,
    FlowState::Starting,
    FlowState::Running,
    FlowState::Stopped,
];

/// The statuses of one flow's tasks in this process, and the flow's own.
pub struct FlowBoard {
    /// What belongs to the flow, not to one task: checkpoints and group offset sync, the
    /// cluster view, and the counters of tasks that left this process.
    shared: SharedStatus,
    tasks: Mutex<BTreeMap<u32, SharedStatus>>,
    metrics: Option<FlowMetrics>,
    /// In cluster mode, holding no task is `standby`; otherwise it means not started yet.
    clustered: bool,
    /// The flow's schema-id translator, when it translates.
    schemas: Mutex<Option<Arc<refract_schema::Translator>>>,
}

impl FlowBoard {
    /// A board for a flow with its `refract_flow_state` series in `metrics`.
    pub fn new(metrics: Option<FlowMetrics>, clustered: bool) -> Arc<Self> {
        Arc::new(Self {
            shared: Arc::new(Mutex::new(FlowStatus::default())),
            tasks: Mutex::new(BTreeMap::new()),
            metrics,
            clustered,
            schemas: Mutex::new(None),
        })
    }

    /// Shows `translator`'s state in the flow's status.
    pub fn set_schemas(&self, translator: Option<Arc<refract_schema::Translator>>) {
        *lock(&self.schemas) = translator;
    }

    /// The flow's own status (checkpoints, cluster view).
    pub fn shared(&self) -> &SharedStatus {
        &self.shared
    }

    /// A fresh status for task `index`, merged into the flow's from now on.
    pub fn add_task(&self, index: u32) -> SharedStatus {
        let status: SharedStatus = Arc::new(Mutex::new(FlowStatus::default()));
        lock(&self.tasks).insert(index, status.clone());
        self.publish_state();
        status
    }

    /// Task `index` left this process: its counters stay in the flow's (they never go back),
    /// its partitions, lag and failures go with it.
    pub fn remove_task(&self, index: u32) {
        if let Some(status) = lock(&self.tasks).remove(&index) {
            let gone = lock(&status).clone();
            lock(&self.shared).add_counters(&gone);
        }
        self.publish_state();
    }

    /// Indexes of the tasks this process runs now.
    pub fn task_indexes(&self) -> Vec<u32> {
        lock(&self.tasks).keys().copied().collect()
    }

    /// The flow's status: its tasks' merged with its own.
    pub fn status(&self) -> FlowStatus {
        let tasks: Vec<(u32, FlowStatus)> = lock(&self.tasks)
            .iter()
            .map(|(i, s)| (*i, lock(s).clone()))
            .collect();
        let mut merged = lock(&self.shared).clone();
        merged.state = if tasks.is_empty() {
            if (self.clustered && merged.cluster.is_some()) || merged.held_elsewhere.is_some() {
                FlowState::Standby
            } else {
                FlowState::Starting
            }
        } else {
            SEVERITY
                .into_iter()
                .find(|s| tasks.iter().any(|(_, t)| t.state == *s))
                .unwrap_or(FlowState::Starting)
        };
        for (i, t) in &tasks {
            merged.tasks.push(*i);
            merged.add_counters(t);
            merged.add_partitions(t);
        }
        merged.state = merged.health();
        merged.schemas = lock(&self.schemas)
            .as_deref()
            .map(super::status::SchemaView::of);
        merged
    }

    /// Sets `refract_flow_state` from the merged status.
    pub fn publish_state(&self) {
        if let Some(m) = &self.metrics {
            let status = self.status();
            m.set_state(status.state);
            m.set_degraded(&status.degraded_causes());
        }
    }
}

impl FlowStatus {
    /// Adds `other`'s counters (records, transactions, restarts, ...) to these.
    pub(crate) fn add_counters(&mut self, other: &FlowStatus) {
        self.records_sent += other.records_sent;
        self.duplicates += other.duplicates;
        self.records_lost += other.records_lost;
        self.restarts += other.restarts;
        self.records_filtered += other.records_filtered;
        self.records_skipped += other.records_skipped;
        self.records_dead_lettered += other.records_dead_lettered;
        self.records_looped += other.records_looped;
        self.offset_syncs += other.offset_syncs;
        self.heartbeats += other.heartbeats;
        self.checkpoints += other.checkpoints;
        self.group_offsets_synced += other.group_offsets_synced;
        self.plugin_swaps += other.plugin_swaps;
        self.transactions_committed += other.transactions_committed;
        self.transactions_aborted += other.transactions_aborted;
        self.throttled_ms += other.throttled_ms;
    }

    /// Adds what `other` (a task) says about its partitions and clusters to these.
    fn add_partitions(&mut self, other: &FlowStatus) {
        self.routes
            .extend(other.routes.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.partitions.extend(other.partitions.iter().cloned());
        self.partitions.sort();
        self.partitions.dedup();
        self.lost.extend(other.lost.iter().cloned());
        self.lost.sort_by_key(|l| l.since_ms);
        self.degraded.extend(other.degraded.iter().cloned());
        self.degraded
            .sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        self.lag
            .extend(other.lag.iter().map(|(k, v)| (k.clone(), *v)));
        if self.lag_unknown.is_none() {
            self.lag_unknown.clone_from(&other.lag_unknown);
        }
        for u in &other.unreachable {
            if !self.unreachable.iter().any(|x| x.cluster == u.cluster) {
                self.unreachable.push(u.clone());
            }
        }
        if self.stalled.is_none() {
            self.stalled.clone_from(&other.stalled);
        }
        if self.halted.is_none() {
            self.halted.clone_from(&other.halted);
        }
        if other.last_error.is_some() {
            self.last_error.clone_from(&other.last_error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_merge_into_one_status_and_counters_survive_a_task_leaving() {
        let board = FlowBoard::new(None, true);
        assert_eq!(board.status().state, FlowState::Starting);
        lock(board.shared()).cluster = Some(Default::default());
        assert_eq!(board.status().state, FlowState::Standby);
        let a = board.add_task(0);
        let b = board.add_task(2);
        {
            let mut a = lock(&a);
            a.state = FlowState::Running;
            a.records_sent = 10;
            a.partitions = vec!["t[0]".into()];
            a.lag.insert("t[0]".into(), 3);
        }
        {
            let mut b = lock(&b);
            b.state = FlowState::Restarting;
            b.records_sent = 5;
            b.partitions = vec!["t[2]".into()];
        }
        let s = board.status();
        assert_eq!(s.state, FlowState::Restarting);
        assert_eq!(s.records_sent, 15);
        assert_eq!(s.tasks, [0, 2]);
        assert_eq!(s.partitions, ["t[0]", "t[2]"]);
        board.remove_task(2);
        let s = board.status();
        assert_eq!(s.state, FlowState::Running);
        assert_eq!(s.records_sent, 15, "a task that left keeps its counts");
        assert_eq!(s.partitions, ["t[0]"]);
        assert_eq!(s.tasks, [0]);
    }
}
