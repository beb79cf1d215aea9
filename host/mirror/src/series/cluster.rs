//! The cluster-mode series of a flow (`refract_cluster_*`): their names, help texts and the
//! gauges, counter and histogram [`RefractSeries::cluster`](super::RefractSeries::cluster)
//! registers. A process registers them only for flows it runs in cluster mode.

use refract_telemetry::{Counter, Gauge, Histogram, Metrics, MetricsError};

/// Tasks of the flow this process holds now, per flow (cluster mode).
pub const CLUSTER_TASKS: &str = "refract_cluster_tasks";
/// Members of the flow's process group as last seen (0 when unknown), per flow (cluster
/// mode).
pub const CLUSTER_MEMBERS: &str = "refract_cluster_members";
/// 1 while this process runs the flow's once-per-flow duties (it holds task 0), else 0,
/// per flow (cluster mode).
pub const CLUSTER_DUTIES: &str = "refract_cluster_duties";
/// Task assignments this process received (each assign or revoke), per flow (cluster mode).
pub const CLUSTER_REBALANCES_TOTAL: &str = "refract_cluster_rebalances_total";
/// Time to drain and release tasks that moved to another process (flush, commit, stop), per
/// flow (cluster mode).
pub const CLUSTER_HANDOVER_SECONDS: &str = "refract_cluster_handover_seconds";

/// Bucket bounds of [`CLUSTER_HANDOVER_SECONDS`]: 50 ms to 60 s.
pub const CLUSTER_HANDOVER_BUCKETS: &[f64] =
    &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

const CLUSTER_TASKS_HELP: &str = "Tasks of the flow this process holds now (cluster mode; tasks).";
const CLUSTER_MEMBERS_HELP: &str =
    "Members of the flow's process group as last seen, 0 when unknown (cluster mode; processes).";
const CLUSTER_DUTIES_HELP: &str = "Whether this process runs the flow's once-per-flow duties (heartbeats, checkpoints, topic creation, config sync) because it holds task 0 (1) or not (0) (cluster mode).";
const CLUSTER_REBALANCES_HELP: &str = "Task assignments this process received for the flow, each assign or revoke (cluster mode; assignments).";
const CLUSTER_HANDOVER_HELP: &str = "Time to drain and release tasks of the flow that moved to another process: flush, commit and stop (cluster mode; seconds).";

/// Series of one flow in cluster mode, where several processes share the flow's tasks through
/// a consumer group. Register them only for a flow run in cluster mode: without it these series
/// do not exist (the example alert `FlowUnowned` relies on that).
#[derive(Debug, Clone)]
pub struct ClusterMetrics {
    /// Set to the number of the flow's tasks this process holds now.
    pub tasks: Gauge,
    /// Set to the number of members of the flow's group as last seen (0 when unknown).
    pub members: Gauge,
    /// 1 while this process holds task 0 and so runs the flow's once-per-flow duties
    /// (heartbeats, checkpoints, topic creation, config sync), else 0; see
    /// [`ClusterMetrics::set_duties`].
    pub duties: Gauge,
    /// Count each task assignment received (each assign or revoke).
    pub rebalances: Counter,
    /// Observe the time to drain and release tasks that moved away (flush, commit, stop).
    pub handover: Histogram,
}

impl ClusterMetrics {
    /// Sets `refract_cluster_duties` to 1 when this process holds the flow's duties, else 0.
    pub fn set_duties(&self, held: bool) {
        self.duties.set(if held { 1.0 } else { 0.0 });
    }
}

/// What [`RefractSeries::cluster`](super::RefractSeries::cluster) registers (or finds): the
/// cluster-mode series of flow `flow`.
pub(super) fn metrics(metrics: &Metrics, flow: &str) -> Result<ClusterMetrics, MetricsError> {
    let labels = [("flow", flow)];
    Ok(ClusterMetrics {
        tasks: metrics.gauge(CLUSTER_TASKS, CLUSTER_TASKS_HELP, &labels)?,
        members: metrics.gauge(CLUSTER_MEMBERS, CLUSTER_MEMBERS_HELP, &labels)?,
        duties: metrics.gauge(CLUSTER_DUTIES, CLUSTER_DUTIES_HELP, &labels)?,
        rebalances: metrics.counter(CLUSTER_REBALANCES_TOTAL, CLUSTER_REBALANCES_HELP, &labels)?,
        handover: metrics.histogram(
            CLUSTER_HANDOVER_SECONDS,
            CLUSTER_HANDOVER_HELP,
            CLUSTER_HANDOVER_BUCKETS,
            &labels,
        )?,
    })
}
