//! Tasks: the units a flow's partitions are divided into (MirrorMaker 2's `tasks.max`).
//!
//! A partition belongs to one task, by a function of its topic name and number only, so the
//! division is the same in every process and stays put when topics or partitions are added: a
//! task keeps its partitions (and, under exactly-once, its `transactional.id`) wherever it runs.

use std::fmt;

/// One task of a flow: its number and how many the flow has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    /// Its number, `0..count`.
    pub index: u32,
    /// The flow's `tasks`.
    pub count: u32,
}

impl TaskId {
    /// The only task of a flow with `tasks = 1`: every partition.
    pub const WHOLE: TaskId = TaskId { index: 0, count: 1 };

    /// Task `index` of `count`.
    pub fn new(index: u32, count: u32) -> Self {
        Self {
            index,
            count: count.max(1),
        }
    }

    /// Whether partition `partition` of `topic` is this task's.
    pub fn owns(&self, topic: &str, partition: i32) -> bool {
        task_of(topic, partition, self.count) == self.index
    }

    /// Whether this task also does the flow's once-per-flow duties: creating remote topics,
    /// heartbeats, checkpoints and group offset sync, config and ACL sync (task 0).
    pub fn duties(&self) -> bool {
        self.index == 0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}/{}", self.index, self.count)
    }
}

/// The task partition `partition` of `topic` belongs to among `tasks`: the topic name's FNV-1a
/// hash plus the partition number, modulo `tasks`. Consecutive partitions of a topic go to
/// consecutive tasks (an even spread per topic), and topics start at different tasks.
pub fn task_of(topic: &str, partition: i32, tasks: u32) -> u32 {
    if tasks <= 1 {
        return 0;
    }
    let hash = fnv1a(topic.as_bytes());
    let sum = u64::from(hash) + u64::from(partition.max(0).unsigned_abs());
    (sum % u64::from(tasks)) as u32
}

/// 32-bit FNV-1a: fixed here forever, since it decides which task owns which partition.
fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_division_is_fixed_and_even_per_topic() {
        // Fixed values: a change here moves partitions between tasks in running clusters.
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"orders"), 0x325e_96ec);
        let tasks: Vec<u32> = (0..8).map(|p| task_of("orders", p, 3)).collect();
        assert_eq!(tasks, [2, 0, 1, 2, 0, 1, 2, 0]);
        // 3 topics x 8 partitions over 3 tasks: 8 each.
        let mut per_task = [0; 3];
        for topic in ["a", "b", "c"] {
            for p in 0..8 {
                per_task[task_of(topic, p, 3) as usize] += 1;
            }
        }
        assert_eq!(per_task.iter().sum::<i32>(), 24);
        assert!(
            per_task.iter().all(|&n| (7..=9).contains(&n)),
            "{per_task:?}"
        );
    }

    #[test]
    fn one_task_owns_everything_and_every_partition_has_one_owner() {
        assert!(TaskId::WHOLE.owns("x", 17));
        for p in 0..50 {
            let owners = (0..4)
                .filter(|&i| TaskId::new(i, 4).owns("topic", p))
                .count();
            assert_eq!(owners, 1);
        }
        assert!(TaskId::new(0, 4).duties());
        assert!(!TaskId::new(1, 4).duties());
        assert_eq!(TaskId::new(2, 4).to_string(), "task 2/4");
    }
}
