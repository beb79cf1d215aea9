//! The partitions a flow mirrors, as the run loop tracks them: where each is read, what was
//! committed, its series and its health.

use std::collections::HashMap;

use rdkafka::consumer::BaseConsumer;

use refract_schema::LastIds;
use refract_telemetry::StatBatch;

use crate::degraded::{FlowHealth, PartitionHealth};
use crate::series::SourcePartitionMetrics;

/// One mirrored source partition.
pub(super) struct Slot {
    pub(super) topic: String,
    pub(super) remote: String,
    pub(super) partition: i32,
    /// Next source offset to fetch, once something was read or a commit found.
    pub(super) position: Option<i64>,
    /// Last committed source offset.
    pub(super) committed: Option<i64>,
    /// The topic ids committed with it (see `recreated`): a newly learnt id is committed even
    /// when the position did not move.
    pub(super) committed_ids: String,
    /// Its MirrorMaker 2 series (none when the registry refused them).
    pub(super) metrics: Option<SourcePartitionMetrics>,
    /// Value bytes and record ages read since the last hand-over to `metrics`.
    pub(super) read_bytes: u64,
    pub(super) age: StatBatch,
    /// Whether it is degraded, and where it is in its retry cycle.
    pub(super) health: PartitionHealth,
    /// Whether a record of it was read since the last `Run::tend`.
    pub(super) read: bool,
    /// Whether a record of it was read since the last `Run::update_lag`.
    pub(super) read_since_lag: bool,
    /// The high watermark it was caught up to at the last `Run::update_lag`.
    pub(super) caught_up_at: Option<i64>,
    /// Whether its records' schema ids are translated (the flow translates, and it is not a
    /// heartbeats topic), and the last ids translated on the direct path.
    pub(super) translates: bool,
    pub(super) last_ids: LastIds,
}

impl Slot {
    /// Hands what was gathered while reading to the series.
    pub(super) fn publish(&mut self) {
        if let Some(m) = &self.metrics {
            m.record_age_ms.record_all(&mut self.age);
            m.byte_count.inc_by(std::mem::take(&mut self.read_bytes));
        }
    }
}

#[derive(Default)]
pub(super) struct Slots {
    pub(super) slots: Vec<Slot>,
    pub(super) by_topic: HashMap<String, Vec<Option<usize>>>,
    /// Failures of the source reads that name no partition.
    pub(super) source: FlowHealth,
    /// Partitions added whose resume (or assignment) failed: tried again at the next
    /// discovery, so a failed read of their positions cannot leave them unread.
    pub(super) unresumed: Vec<usize>,
    /// A remote topic this task mirrors into does not exist yet and only task 0 creates it.
    pub(super) awaiting_remote: bool,
    /// The ids of the mirrored topics, and the topics stopped because they were recreated.
    pub(super) incarnations: super::recreated::Incarnations,
}

impl Slots {
    pub(super) fn find(&self, topic: &str, partition: i32) -> Option<usize> {
        self.by_topic
            .get(topic)?
            .get(usize::try_from(partition).ok()?)
            .copied()
            .flatten()
    }

    /// The source topic-partitions of the slots `indices`, in that order (for one batched
    /// lookup of all their watermarks).
    pub(super) fn source_partitions(&self, indices: &[usize]) -> Vec<(&str, i32)> {
        indices
            .iter()
            .map(|&i| (self.slots[i].topic.as_str(), self.slots[i].partition))
            .collect()
    }

    /// The remote topic-partitions of the slots `indices`, in that order.
    pub(super) fn remote_partitions(&self, indices: &[usize]) -> Vec<(&str, i32)> {
        indices
            .iter()
            .map(|&i| (self.slots[i].remote.as_str(), self.slots[i].partition))
            .collect()
    }
}

/// The high watermark librdkafka last saw for a partition in a fetch response (no request).
pub(super) fn cached_high_watermark(
    consumer: &BaseConsumer,
    topic: &str,
    partition: i32,
) -> Option<i64> {
    refract_kafka::cached_high_watermark(consumer, topic, partition)
}
