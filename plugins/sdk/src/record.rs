//! Records and batches as filters and transforms see them.

use crate::bindings::refract::plugin::types::{KafkaRecord, RecordBatch};

/// A record as read from a source topic-partition (the WIT `kafka-record`).
pub type Record = KafkaRecord;

/// What a batch says about all of its records: where they come from and where they go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BatchInfo {
    /// Alias of the cluster the records were read from.
    pub source_cluster: String,
    /// The topic they were read from.
    pub topic: String,
    /// The topic the replication policy named for them on the target.
    pub target_topic: String,
}

impl BatchInfo {
    /// Splits a WIT batch into its metadata and its records, without copying either.
    pub fn split(batch: RecordBatch) -> (Self, Vec<Record>) {
        let RecordBatch {
            source_cluster,
            topic,
            target_topic,
            records,
        } = batch;
        let info = Self {
            source_cluster,
            topic,
            target_topic,
        };
        (info, records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_metadata_and_records() {
        let batch = RecordBatch {
            source_cluster: "A".to_owned(),
            topic: "t".to_owned(),
            target_topic: "A.t".to_owned(),
            records: vec![Record {
                partition: 0,
                offset: 0,
                timestamp_ms: 0,
                key: None,
                value: None,
                headers: Vec::new(),
            }],
        };
        let (info, records) = BatchInfo::split(batch);
        assert_eq!(info.source_cluster, "A");
        assert_eq!(info.topic, "t");
        assert_eq!(info.target_topic, "A.t");
        assert_eq!(records.len(), 1);
    }
}
