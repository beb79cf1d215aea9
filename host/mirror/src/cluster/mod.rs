//! Running a flow's tasks: all of them in this process, or — in cluster mode — the share a
//! consumer group on the source cluster gives this process, handed over between processes as
//! they come and go.
//!
//! The group (`refract-<source>-<target>-cluster`) subscribes to a coordination topic on the
//! source (`refract-tasks.<source>-<target>.internal`) with one partition per task: Kafka's
//! group protocol (cooperative-sticky) assigns partition `i` to the process that runs task `i`.
//! Nothing is written to that topic; it only gives the group something to divide. A task that
//! moves is stopped — its records flushed and its positions committed — inside the revoke
//! callback, before the group hands it to another process.

mod group;
mod local;
mod task;

use std::time::Duration;

use refract_config::Flow;

pub use task::{task_of, TaskId};

pub(crate) use group::run as run_group;
pub(crate) use local::FlowTasks;

/// How often a process describes its flow's group for `/status`.
const DESCRIBE_INTERVAL: Duration = Duration::from_secs(5);

/// The consumer group the processes of a flow divide its tasks in.
pub fn coordination_group(flow: &Flow) -> String {
    format!("refract-{}-{}-cluster", flow.source, flow.target)
}

/// The topic on the source whose partitions stand for the flow's tasks.
pub fn coordination_topic(flow: &Flow) -> String {
    format!("refract-tasks.{}-{}.internal", flow.source, flow.target)
}

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

/// This process's name when `[cluster] instance` does not give one: the host name and the
/// process id.
pub fn default_instance() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "refract".to_string());
    format!("{host}-{}", std::process::id())
}
