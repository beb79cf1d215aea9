//! Running a flow's tasks in this process: which partitions a task owns ([`TaskId`], from
//! refract-config so every process divides a flow the same way), the supervisor that runs each
//! task with its cluster watch and restarts it after a failure, and the backoff between
//! restarts. Every mode uses it: standalone runs all of a flow's tasks, cluster mode
//! ([`crate::membership`]) the share its group assigns.

mod backoff;
mod supervisor;

pub use refract_config::{task_of, TaskId};

pub(crate) use backoff::Backoff;
pub(crate) use supervisor::FlowTasks;
