//! Cluster mode: the group of refract processes that share a flow's tasks — this process's
//! membership in it, the share of tasks the group gives it, handed over between processes as
//! they come and go (the tasks themselves run in [`crate::tasks`]).
//!
//! The group (`refract-<source>-<target>-cluster`) subscribes to a coordination topic on the
//! source (`refract-tasks.<source>-<target>.internal`) with one partition per task: Kafka's
//! group protocol (cooperative-sticky) assigns partition `i` to the process that runs task `i`.
//! Nothing is written to that topic; it only gives the group something to divide. A task that
//! moves is stopped — its records flushed and its positions committed — inside the revoke
//! callback, before the group hands it to another process.

mod group;
mod solo;

use std::time::Duration;

use refract_config::Flow;

pub(crate) use group::run as run_group;
pub(crate) use solo::run as run_solo;
pub use solo::{others_running, solo_group, OtherProcess};

/// How often a process describes its flow's group for `/status`.
const DESCRIBE_INTERVAL: Duration = Duration::from_secs(5);

/// The consumer group the processes of a flow divide its tasks in.
pub fn coordination_group(flow: &Flow) -> String {
    flow.id().membership_group()
}

/// The topic on the source whose partitions stand for the flow's tasks.
pub fn coordination_topic(flow: &Flow) -> String {
    flow.id().tasks_topic()
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
