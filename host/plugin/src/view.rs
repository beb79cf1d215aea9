//! Borrowed forms of the record types a processor call sends, so a batch crosses into the guest
//! straight from the bytes the source consumer fetched: lowering copies each key, value and
//! header once, into the guest's memory, and nothing is copied on the host side first.
//!
//! They type-check against the WIT `record-batch`, `kafka-record` and `header` records exactly
//! like the generated owned types ([`RecordBatch`] and friends), field for field.

use wasmtime::component::{ComponentType, Lower};

use crate::bindings::{Header, KafkaRecord, RecordBatch};

/// A header as sent to a plugin (`header` in `wit/plugin.wit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ComponentType, Lower)]
#[component(record)]
pub struct HeaderView<'a> {
    /// Header name.
    pub key: &'a str,
    /// Header value; `None` is a null value.
    pub value: Option<&'a [u8]>,
}

/// A record as sent to a plugin (`kafka-record`).
#[derive(Debug, Clone, PartialEq, Eq, ComponentType, Lower)]
#[component(record)]
pub struct RecordView<'a> {
    /// Source partition.
    pub partition: i32,
    /// Source offset.
    pub offset: i64,
    /// Timestamp in ms, -1 when the record has none.
    #[component(name = "timestamp-ms")]
    pub timestamp_ms: i64,
    /// Key bytes; `None` is a null key.
    pub key: Option<&'a [u8]>,
    /// Value bytes; `None` is a tombstone.
    pub value: Option<&'a [u8]>,
    /// Headers in order.
    pub headers: Vec<HeaderView<'a>>,
}

/// One call's batch (`record-batch`): a run of records from one source topic-partition.
#[derive(Debug, Clone, PartialEq, Eq, ComponentType, Lower)]
#[component(record)]
pub struct BatchView<'a> {
    /// Alias of the cluster the records were read from.
    #[component(name = "source-cluster")]
    pub source_cluster: &'a str,
    /// The topic they were read from.
    pub topic: &'a str,
    /// The topic the replication policy named for them on the target.
    #[component(name = "target-topic")]
    pub target_topic: &'a str,
    /// The records, in offset order.
    pub records: Vec<RecordView<'a>>,
}

impl<'a> BatchView<'a> {
    /// Bytes of data the batch carries into the guest: names, keys, values and headers.
    pub fn size_in_bytes(&self) -> usize {
        let records: usize = self
            .records
            .iter()
            .map(|r| {
                r.key.map_or(0, <[u8]>::len)
                    + r.value.map_or(0, <[u8]>::len)
                    + r.headers
                        .iter()
                        .map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len))
                        .sum::<usize>()
            })
            .sum();
        self.source_cluster.len() + self.topic.len() + self.target_topic.len() + records
    }

    /// A view of an owned batch.
    pub fn of(batch: &'a RecordBatch) -> Self {
        Self {
            source_cluster: &batch.source_cluster,
            topic: &batch.topic,
            target_topic: &batch.target_topic,
            records: batch.records.iter().map(RecordView::of).collect(),
        }
    }
}

impl<'a> RecordView<'a> {
    /// A view of an owned record.
    pub fn of(record: &'a KafkaRecord) -> Self {
        Self {
            partition: record.partition,
            offset: record.offset,
            timestamp_ms: record.timestamp_ms,
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            headers: record.headers.iter().map(HeaderView::of).collect(),
        }
    }
}

impl<'a> HeaderView<'a> {
    /// A view of an owned header.
    pub fn of(header: &'a Header) -> Self {
        Self {
            key: &header.key,
            value: header.value.as_deref(),
        }
    }
}
