//! Which translated group offsets become checkpoints, and the latest checkpoint per group
//! partition: MM2's `MirrorCheckpointTask` filter and `CheckpointStore` (3.8+), plus what a client
//! makes of the checkpoints topic (`RemoteClusterUtils.translateOffsets`).
//!
//! Translation of a fixed upstream offset can move backwards when the offset-sync store expires
//! the sync it used (or restarts with less history). A consumer failing over must never be sent
//! back over records it already had, so a checkpoint may only rewind downstream when the group
//! itself rewound upstream.

use std::collections::BTreeMap;

use crate::wire::Checkpoint;

/// Whether a checkpoint at `upstream`/`downstream` should be emitted after `previous`, the last
/// one emitted for the same group partition (MM2's `checkpointIsMoreRecent`): always when there
/// is none; when the group rewound upstream (the checkpoint follows it back); when the downstream
/// offset advanced. Otherwise not: the same checkpoint again, or a downstream rewind caused only
/// by less precise translation.
pub fn is_more_recent(previous: Option<&Checkpoint>, upstream: i64, downstream: i64) -> bool {
    match previous {
        None => true,
        Some(previous) => {
            upstream < previous.upstream_offset || downstream > previous.downstream_offset
        }
    }
}

/// The latest checkpoint of each (group, downstream topic, partition): loaded from the
/// checkpoints topic at start and updated with every checkpoint emitted, so the
/// [`is_more_recent`] rule holds across restarts.
#[derive(Debug, Clone, Default)]
pub struct CheckpointStore {
    groups: BTreeMap<String, BTreeMap<String, BTreeMap<i32, Checkpoint>>>,
}

impl CheckpointStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `checkpoint` as the latest for its group partition; returns the one it replaces.
    pub fn insert(&mut self, checkpoint: Checkpoint) -> Option<Checkpoint> {
        self.groups
            .entry(checkpoint.group.clone())
            .or_default()
            .entry(checkpoint.topic.clone())
            .or_default()
            .insert(checkpoint.partition, checkpoint)
    }

    /// The latest checkpoint of `group` for `topic` (downstream name) and `partition`.
    pub fn get(&self, group: &str, topic: &str, partition: i32) -> Option<&Checkpoint> {
        self.groups.get(group)?.get(topic)?.get(&partition)
    }

    /// The latest checkpoints of `group`, ordered by topic then partition.
    pub fn for_group<'a>(&'a self, group: &str) -> impl Iterator<Item = &'a Checkpoint> + 'a {
        self.groups
            .get(group)
            .into_iter()
            .flat_map(|topics| topics.values())
            .flat_map(|partitions| partitions.values())
    }

    /// Every latest checkpoint, ordered by group, topic, then partition.
    pub fn all(&self) -> impl Iterator<Item = &Checkpoint> + '_ {
        self.groups
            .values()
            .flat_map(|topics| topics.values())
            .flat_map(|partitions| partitions.values())
    }

    /// The groups with at least one checkpoint, in order.
    pub fn groups(&self) -> impl Iterator<Item = &str> + '_ {
        self.groups.keys().map(String::as_str)
    }

    /// How many group partitions have a checkpoint.
    pub fn len(&self) -> usize {
        self.groups
            .values()
            .flat_map(|topics| topics.values())
            .map(BTreeMap::len)
            .sum()
    }

    /// Whether no checkpoint has been recorded.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

/// The checkpoints of `group` keyed by (downstream topic, partition), the last record of each
/// winning: what `RemoteClusterUtils.translateOffsets` returns after reading the checkpoints topic
/// from the beginning. A consumer failing over seeks each partition to `downstream_offset`.
pub fn latest_for_group(
    records: impl IntoIterator<Item = Checkpoint>,
    group: &str,
) -> BTreeMap<(String, i32), Checkpoint> {
    let mut latest = BTreeMap::new();
    for checkpoint in records {
        if checkpoint.group == group {
            latest.insert((checkpoint.topic.clone(), checkpoint.partition), checkpoint);
        }
    }
    latest
}

/// The topic names a replication policy gives, as the checkpoint rename rule needs them.
pub trait TopicNaming {
    /// The error naming fails with.
    type Error;
    /// The cluster `topic` came from, if its name says so.
    fn topic_source(&mut self, topic: &str) -> Result<Option<String>, Self::Error>;
    /// `topic` with every remote prefix removed.
    fn original_topic(&mut self, topic: &str) -> Result<String, Self::Error>;
    /// The name `topic` of cluster `source` has on another cluster.
    fn remote_topic(&mut self, source: &str, topic: &str) -> Result<String, Self::Error>;
}

/// The topic a checkpoint names for a group's position on source `topic` (MM2's
/// `MirrorCheckpointTask` rename rule): a topic that came from the `target` goes back to its
/// original name there (failback: `target.t` → `t`); any other gets its remote name
/// (`source.t`).
pub fn checkpoint_topic<N: TopicNaming>(
    naming: &mut N,
    source: &str,
    target: &str,
    topic: &str,
) -> Result<String, N::Error> {
    if naming.topic_source(topic)?.as_deref() == Some(target) {
        return naming.original_topic(topic);
    }
    naming.remote_topic(source, topic)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync_store::{OffsetSyncStore, Translation};
    use crate::wire::OffsetSync;

    fn cp(group: &str, topic: &str, partition: i32, up: i64, down: i64) -> Checkpoint {
        Checkpoint {
            group: group.into(),
            topic: topic.into(),
            partition,
            upstream_offset: up,
            downstream_offset: down,
            metadata: String::new(),
        }
    }

    fn sync(topic: &str, partition: i32, up: i64, down: i64) -> OffsetSync {
        OffsetSync {
            topic: topic.into(),
            partition,
            upstream_offset: up,
            downstream_offset: down,
        }
    }

    /// MM2's `DefaultReplicationPolicy` with its "." separator.
    struct Dotted;

    impl TopicNaming for Dotted {
        type Error = std::convert::Infallible;
        fn topic_source(&mut self, topic: &str) -> Result<Option<String>, Self::Error> {
            Ok(topic.split_once('.').map(|(s, _)| s.to_string()))
        }
        fn original_topic(&mut self, topic: &str) -> Result<String, Self::Error> {
            Ok(topic.rsplit('.').next().unwrap_or(topic).to_string())
        }
        fn remote_topic(&mut self, source: &str, topic: &str) -> Result<String, Self::Error> {
            Ok(format!("{source}.{topic}"))
        }
    }

    /// `MirrorCheckpointTask`'s pipeline for one group partition (flow `source1->target2`, default
    /// replication policy): translate, drop untranslatable, rename, drop if not more recent,
    /// remember.
    fn checkpoint(
        syncs: &OffsetSyncStore,
        store: &mut CheckpointStore,
        group: &str,
        topic: &str,
        partition: i32,
        upstream: i64,
    ) -> Option<Checkpoint> {
        let downstream = syncs
            .translate_downstream(topic, partition, upstream)
            .offset()?;
        let Ok(remote) = checkpoint_topic(&mut Dotted, "source1", "target2", topic);
        if !is_more_recent(store.get(group, &remote, partition), upstream, downstream) {
            return None;
        }
        let c = cp(group, &remote, partition, upstream, downstream);
        store.insert(c.clone());
        Some(c)
    }

    #[test]
    fn more_recent_rule() {
        let previous = cp("g", "t", 0, 100, 50);
        for (up, down, expected, why) in [
            (90, 40, true, "group rewound: follow it, even downstream"),
            (90, 60, true, "group rewound"),
            (100, 51, true, "downstream advanced"),
            (200, 51, true, "both advanced"),
            (100, 50, false, "repeat"),
            (200, 50, false, "upstream advanced, translation did not"),
            (100, 49, false, "downstream rewind without a group rewind"),
            (200, 49, false, "store lost precision"),
        ] {
            assert_eq!(is_more_recent(Some(&previous), up, down), expected, "{why}");
        }
        assert!(is_more_recent(None, 0, 0));
        assert!(is_more_recent(None, 100, -5));
    }

    #[test]
    fn store_keeps_latest_per_group_partition() {
        let mut store = CheckpointStore::new();
        assert!(store.is_empty());
        assert_eq!(store.insert(cp("g1", "s.b", 1, 10, 11)), None);
        assert_eq!(store.insert(cp("g1", "s.a", 0, 20, 21)), None);
        assert_eq!(store.insert(cp("g1", "s.b", 0, 30, 31)), None);
        assert_eq!(store.insert(cp("g2", "s.a", 0, 40, 41)), None);
        assert_eq!(
            store.insert(cp("g1", "s.b", 1, 12, 13)),
            Some(cp("g1", "s.b", 1, 10, 11))
        );
        assert_eq!(store.len(), 4);
        assert!(!store.is_empty());
        assert_eq!(store.get("g1", "s.b", 1), Some(&cp("g1", "s.b", 1, 12, 13)));
        assert_eq!(store.get("g2", "s.a", 0), Some(&cp("g2", "s.a", 0, 40, 41)));
        assert_eq!(store.get("g2", "s.b", 1), None);
        assert_eq!(store.get("g1", "s.b", 2), None);
        assert_eq!(store.get("g3", "s.a", 0), None);
        let g1: Vec<_> = store.for_group("g1").cloned().collect();
        assert_eq!(
            g1,
            vec![
                cp("g1", "s.a", 0, 20, 21),
                cp("g1", "s.b", 0, 30, 31),
                cp("g1", "s.b", 1, 12, 13),
            ]
        );
        assert_eq!(store.for_group("g3").count(), 0);
        assert_eq!(store.groups().collect::<Vec<_>>(), vec!["g1", "g2"]);
        let all: Vec<_> = store.all().cloned().collect();
        assert_eq!(all[..3], g1[..]);
        assert_eq!(all[3..], [cp("g2", "s.a", 0, 40, 41)]);
    }

    #[test]
    fn latest_for_group_last_record_wins() {
        let records = vec![
            cp("g", "s.t", 0, 10, 10),
            cp("other", "s.t", 0, 99, 99),
            cp("g", "s.t", 1, 5, 6),
            Checkpoint {
                metadata: "m".into(),
                ..cp("g", "s.t", 0, 20, 18)
            },
            cp("g", "s.u", 0, 1, 1),
            // A rewound checkpoint (the group rewound upstream) still wins: it is the latest.
            cp("g", "s.t", 1, 3, 4),
        ];
        let latest = latest_for_group(records.clone(), "g");
        let expected: BTreeMap<_, _> = [
            (
                ("s.t".to_string(), 0),
                Checkpoint {
                    metadata: "m".into(),
                    ..cp("g", "s.t", 0, 20, 18)
                },
            ),
            (("s.t".to_string(), 1), cp("g", "s.t", 1, 3, 4)),
            (("s.u".to_string(), 0), cp("g", "s.u", 0, 1, 1)),
        ]
        .into_iter()
        .collect();
        assert_eq!(latest, expected);
        assert_eq!(
            latest_for_group(records.clone(), "other").len(),
            1,
            "only its own group"
        );
        assert!(latest_for_group(records, "none").is_empty());
        assert!(latest_for_group(Vec::new(), "g").is_empty());
    }

    #[test]
    fn mm2_checkpoint_values() {
        // MirrorCheckpointTaskTest.testCheckpoint and testNoCheckpointForTopicWithoutOffsetSyncs.
        let mut syncs = OffsetSyncStore::new();
        let mut store = CheckpointStore::new();
        syncs.insert(&sync("topic1", 2, 3, 4));
        syncs.insert(&sync("target2.topic5", 6, 7, 8));
        let c = checkpoint(&syncs, &mut store, "group9", "topic1", 2, 10);
        assert_eq!(c, Some(cp("group9", "source1.topic1", 2, 10, 5)));
        // Failback: a topic that came from the target goes back to its original name.
        let c = checkpoint(&syncs, &mut store, "group11", "target2.topic5", 6, 12);
        assert_eq!(c, Some(cp("group11", "topic5", 6, 12, 9)));
        let c = checkpoint(&syncs, &mut store, "group13", "target2.topic5", 6, 7);
        assert_eq!(c, Some(cp("group13", "topic5", 6, 7, 8)));
        assert_eq!(
            checkpoint(&syncs, &mut store, "group9", "topic1", 1, 10),
            None
        );
        // Older than every sync: no checkpoint either.
        assert_eq!(
            checkpoint(&syncs, &mut store, "group9", "topic1", 2, 2),
            None
        );
    }

    #[test]
    fn mm2_checkpoints_monotonic_if_store_rewinds() {
        // MirrorCheckpointTaskTest.testCheckpointRecordsMonotonicIfStoreRewinds.
        let mut syncs = OffsetSyncStore::new();
        let mut store = CheckpointStore::new();
        syncs.insert(&sync("topic1", 0, 11, 4));
        syncs.insert(&sync("topic1", 0, 12, 5));
        let group_offset = 13;
        assert_eq!(
            syncs.translate_downstream("topic1", 0, group_offset),
            Translation::Offset(6)
        );
        let first = checkpoint(&syncs, &mut store, "g1", "topic1", 0, group_offset);
        assert_eq!(first, Some(cp("g1", "source1.topic1", 0, 13, 6)));

        // Syncs 13..=17 make the store drop 12→5 (and 13→6): the same group offset now
        // translates lower.
        for (up, down) in [(13, 6), (14, 7), (15, 8), (16, 9), (17, 10)] {
            syncs.insert(&sync("topic1", 0, up, down));
        }
        let again = syncs.translate_downstream("topic1", 0, group_offset);
        assert_ne!(again, Translation::Offset(6));
        assert!(again.offset().is_some_and(|d| d < 6), "{again:?}");
        // The checkpoint would go backwards: suppressed.
        assert_eq!(
            checkpoint(&syncs, &mut store, "g1", "topic1", 0, group_offset),
            None
        );
        assert_eq!(store.get("g1", "source1.topic1", 0), first.as_ref());
        // The group itself rewinds: the checkpoint follows it back.
        let rewound = checkpoint(&syncs, &mut store, "g1", "topic1", 0, group_offset - 1);
        assert!(rewound.is_some_and(|c| c.upstream_offset == 12 && c.downstream_offset < 6));
    }

    #[test]
    fn mm2_restart_uses_existing_checkpoints() {
        // MirrorCheckpointTaskTest.testCheckpointsTaskRestartUsesExistingCheckpoints.
        let mut syncs = OffsetSyncStore::new();
        for up in [100, 200, 300] {
            syncs.insert(&sync("t1", 0, up, up));
        }
        let mut store = CheckpointStore::new();
        let c = checkpoint(&syncs, &mut store, "group1", "t1", 0, 250);
        assert_eq!(c, Some(cp("group1", "source1.t1", 0, 250, 201)));

        // Restart: more syncs were written meanwhile and the new store no longer has 200→200;
        // the checkpoints are loaded from the checkpoints topic.
        let mut syncs = OffsetSyncStore::new();
        for up in [175, 275, 375, 475] {
            syncs.insert(&sync("t1", 0, up, up));
        }
        let mut store: CheckpointStore = {
            let mut s = CheckpointStore::new();
            s.insert(cp("group1", "source1.t1", 0, 250, 201));
            s
        };
        assert_eq!(
            syncs.translate_downstream("t1", 0, 250),
            Translation::Offset(176)
        );
        assert_eq!(
            syncs.translate_downstream("t1", 0, 370),
            Translation::Offset(176)
        );
        assert_eq!(checkpoint(&syncs, &mut store, "group1", "t1", 0, 250), None);
        assert_eq!(checkpoint(&syncs, &mut store, "group1", "t1", 0, 370), None);
        let c = checkpoint(&syncs, &mut store, "group1", "t1", 0, 400);
        assert_eq!(c, Some(cp("group1", "source1.t1", 0, 400, 376)));
    }
}
