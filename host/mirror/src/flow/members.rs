//! What `/status` shows of a flow in cluster mode: the group's members and this process's part
//! in it. Status data, so it lives with the flow's status; [`crate::membership`] fills it in.

/// What `/status` shows of a flow in cluster mode.
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    /// The consumer group on the source.
    pub group: String,
    /// This process's name (`[cluster] instance`, or host and process id).
    pub instance: String,
    /// Whether this process runs the flow's once-per-flow duties (it holds task 0).
    pub duties: bool,
    /// Task assignments and revocations this process went through.
    pub rebalances: u64,
    /// How long the last hand-over of tasks away from this process took (flush, commit, stop).
    pub last_handover_ms: Option<u64>,
    /// The group's members as last described, in instance order.
    pub members: Vec<Member>,
    /// Why the members could not be described, when they could not.
    pub members_error: Option<String>,
    /// Why the process is not in the group now (it retries), when it is not.
    pub error: Option<String>,
}

/// One process of a flow's group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its instance name (static membership) or client id.
    pub instance: String,
    /// The host it connects from.
    pub host: String,
    /// The tasks it holds.
    pub tasks: Vec<u32>,
    /// Source partitions of those tasks.
    pub partitions: usize,
    /// Records of those partitions not yet mirrored (source end minus the flow's committed
    /// position), when known.
    pub lag: Option<i64>,
}
