//! When the source side emits an offset sync: MM2's `OffsetSyncWriter` rules.
//!
//! Every acknowledged record gives an upstream→downstream offset pair. Sending all of them would
//! double the write load, so MM2 sends a pair only when the checkpoint side could not otherwise
//! translate accurately, and keeps the newest unsent pair of each partition as a *delayed* sync
//! that goes out on the next periodic flush, so partitions that go idle still converge to their
//! end (KAFKA-15906).
//!
//! Translation (see [`super::sync_store`]) maps a group offset past a sync to the sync's
//! downstream offset + 1, never further, because records after the sync may have been dropped.
//! `offset_lag_max` therefore bounds how many downstream records a failed-over consumer re-reads.

use std::collections::HashMap;

use crate::wire::OffsetSync;

/// Decides, per source partition, which offset pairs become offset-sync records.
///
/// One writer serves one source task's lifetime: the first record of each partition always
/// flags a sync, so a restarted task must start with a new writer. How syncs are sent (MM2 caps
/// them at 10 in flight) is the caller's business: a sync left pending is simply replaced by a
/// newer one for the same partition.
#[derive(Debug)]
pub struct OffsetSyncWriter {
    offset_lag_max: i64,
    /// `offset_translation = "exact"`: also flag a downstream jump, so that between two syncs
    /// both offsets advance by one per record (see [`super::exact`]).
    exact: bool,
    partitions: HashMap<String, HashMap<i32, PartitionState>>,
    /// Partitions with a pending sync, in the order they got one since the last take.
    pending_order: Vec<(String, i32)>,
    /// Partitions that got a delayed sync since the last promotion (some may have lost it since
    /// to a flagged one); each listed once.
    delayed_order: Vec<(String, i32)>,
}

/// What the writer remembers about one source partition.
#[derive(Debug, Default)]
struct PartitionState {
    previous_upstream: i64,
    previous_downstream: i64,
    /// Downstream offset of the last flagged sync; `None` until this partition's first record.
    last_sync_downstream: Option<i64>,
    /// Flagged (or promoted) sync waiting for [`OffsetSyncWriter::take_pending`].
    pending: Option<(i64, i64)>,
    /// Newest unflagged pair, waiting for [`OffsetSyncWriter::promote_delayed`].
    delayed: Option<(i64, i64)>,
    /// Whether this partition is in `delayed_order`.
    delayed_listed: bool,
    /// Upstream offset of the last sync taken for this partition: the previous link of the
    /// next one's chain.
    last_taken: Option<i64>,
    /// Offsets the source deleted before they were mirrored (see [`OffsetSyncWriter::lost`]),
    /// until the first pair after them arrives.
    lost: Option<(i64, i64)>,
    /// The last pair before such a gap, taken before the pending sync (the first pair after it).
    before_gap: Option<(i64, i64)>,
}

impl PartitionState {
    /// Whether `upstream` is the first pair after a gap [`OffsetSyncWriter::lost`] reported; if
    /// so, keeps the pair before the gap for [`OffsetSyncWriter::take_pending_chained`] unless it
    /// was synced already, or, in a writer that has not seen the partition yet, chains the next
    /// sync to where the previous writer's last one is expected.
    fn after_gap(&mut self, upstream: i64) -> bool {
        let Some((first, _)) = self.lost.filter(|&(_, last)| upstream > last) else {
            return false;
        };
        self.lost = None;
        if self.last_sync_downstream.is_none() {
            // A restarted writer: the previous one synced `first - 1` before `first` was
            // committed. The reader links the two only if that sync is the newest it has.
            self.last_taken.get_or_insert(first - 1);
            return true;
        }
        let previous = (self.previous_upstream, self.previous_downstream);
        if previous.0 < first && self.last_taken != Some(previous.0) {
            self.before_gap = Some(previous);
            if self.delayed == Some(previous) {
                self.delayed = None;
            }
            if self.pending == Some(previous) {
                self.pending = None;
            }
        }
        true
    }

    /// Whether the pair must be synced now rather than waiting for the next flush.
    fn flags(&self, upstream: i64, downstream: i64, offset_lag_max: i64, exact: bool) -> bool {
        let Some(last_sync) = self.last_sync_downstream else {
            // First record of this partition in this writer's lifetime.
            return true;
        };
        // A group just past the last sync translates to last_sync + 1; this many records would
        // be re-read after a fail-over.
        let stale = downstream.saturating_sub(last_sync.saturating_add(1)) >= offset_lag_max;
        // Upstream records skipped (compaction, transaction markers, filtering) or rewound:
        // translating across the gap by counting would be wrong.
        let upstream_gap = upstream.wrapping_sub(self.previous_upstream) != 1;
        // The target partition was truncated or recreated.
        let downstream_rewound = downstream < self.previous_downstream;
        // Exact mode: the target skipped offsets (transaction markers, another writer, fan-out).
        let downstream_jump = exact && downstream.wrapping_sub(self.previous_downstream) != 1;
        stale || upstream_gap || downstream_rewound || downstream_jump
    }
}

impl OffsetSyncWriter {
    /// A writer that flags a sync at least every `offset_lag_max` downstream records per
    /// partition (MM2's `offset.lag.max`, default 100); 0 flags every record.
    pub fn new(offset_lag_max: i64) -> Self {
        Self {
            offset_lag_max,
            exact: false,
            partitions: HashMap::new(),
            pending_order: Vec::new(),
            delayed_order: Vec::new(),
        }
    }

    /// A writer for `offset_translation = "exact"`: as [`OffsetSyncWriter::new`], and it also
    /// flags a sync where the downstream offsets jump, so consecutive syncs bound contiguous runs
    /// on both sides. Take its syncs with [`OffsetSyncWriter::take_pending_chained`].
    pub fn exact(offset_lag_max: i64) -> Self {
        Self {
            exact: true,
            ..Self::new(offset_lag_max)
        }
    }

    /// Whether this writer was made with [`OffsetSyncWriter::exact`].
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// The `offset_lag_max` this writer was made with.
    pub fn offset_lag_max(&self) -> i64 {
        self.offset_lag_max
    }

    /// Records that the source record at `upstream` in `topic`/`partition` was acknowledged by
    /// the target at offset `downstream`. Call it in acknowledgement order per partition, only
    /// for records written to the same-numbered partition of the remote topic.
    ///
    /// A flagged pair becomes the partition's pending sync (replacing an older pending one and
    /// dropping its delayed one); any other pair becomes its delayed sync. Negative offsets (an
    /// acknowledgement that carried no offset) are ignored, as MM2 does.
    pub fn update(&mut self, topic: &str, partition: i32, upstream: i64, downstream: i64) {
        if upstream < 0 || downstream < 0 {
            return;
        }
        let partitions = match self.partitions.get_mut(topic) {
            Some(partitions) => partitions,
            None => self.partitions.entry(topic.to_owned()).or_default(),
        };
        let state = partitions.entry(partition).or_default();
        let listed = state.pending.is_some() || state.before_gap.is_some();
        let after_gap = state.after_gap(upstream);
        let flagged =
            after_gap || state.flags(upstream, downstream, self.offset_lag_max, self.exact);
        state.previous_upstream = upstream;
        state.previous_downstream = downstream;
        if flagged {
            state.last_sync_downstream = Some(downstream);
            state.delayed = None;
            if state.pending.replace((upstream, downstream)).is_none() && !listed {
                self.pending_order.push((topic.to_owned(), partition));
            }
        } else {
            state.delayed = Some((upstream, downstream));
            if !state.delayed_listed {
                state.delayed_listed = true;
                self.delayed_order.push((topic.to_owned(), partition));
            }
        }
    }

    /// Records that the source deleted offsets `first..=last` of `topic`/`partition` before they
    /// were mirrored (retention, a DeleteRecords request), so the next pair is the first after a
    /// gap. That pair is synced anyway (an upstream gap, or a restarted writer's first record);
    /// this also syncs the last pair before the gap unless it was already, so that a group whose
    /// offset lies inside the gap translates to the first record after it (MM2's rule: the sync
    /// before it, downstream + 1), never to an earlier one. A writer that has not seen the
    /// partition yet (the gap was found on a restart) chains the sync after the gap to
    /// `first - 1`, where the previous run synced before it committed `first`.
    pub fn lost(&mut self, topic: &str, partition: i32, first: i64, last: i64) {
        if last < first {
            return;
        }
        let partitions = match self.partitions.get_mut(topic) {
            Some(partitions) => partitions,
            None => self.partitions.entry(topic.to_owned()).or_default(),
        };
        partitions.entry(partition).or_default().lost = Some((first, last));
    }

    /// The syncs to send now, at most one per partition (two around a gap of
    /// [`OffsetSyncWriter::lost`]: the last pair before it first), in the order their partitions
    /// got a pending sync; they are no longer pending afterwards.
    pub fn take_pending(&mut self) -> Vec<OffsetSync> {
        self.take_pending_chained()
            .into_iter()
            .map(|(sync, _)| sync)
            .collect()
    }

    /// [`OffsetSyncWriter::take_pending`], each sync with the upstream offset of the sync taken
    /// before it for the same partition (`None` for the first): the value of its
    /// [`PREVIOUS_HEADER`](super::exact::PREVIOUS_HEADER) header.
    pub fn take_pending_chained(&mut self) -> Vec<(OffsetSync, Option<i64>)> {
        let order = std::mem::take(&mut self.pending_order);
        let mut syncs = Vec::with_capacity(order.len());
        for (topic, partition) in order {
            let Some(state) = self
                .partitions
                .get_mut(&topic)
                .and_then(|partitions| partitions.get_mut(&partition))
            else {
                continue;
            };
            if let Some((upstream_offset, downstream_offset)) = state.before_gap.take() {
                let previous = state.last_taken.replace(upstream_offset);
                syncs.push((
                    OffsetSync {
                        topic: topic.clone(),
                        partition,
                        upstream_offset,
                        downstream_offset,
                    },
                    previous,
                ));
            }
            if let Some((upstream_offset, downstream_offset)) = state.pending.take() {
                let previous = state.last_taken.replace(upstream_offset);
                syncs.push((
                    OffsetSync {
                        topic,
                        partition,
                        upstream_offset,
                        downstream_offset,
                    },
                    previous,
                ));
            }
        }
        syncs
    }

    /// Makes every partition's delayed sync pending (replacing an older pending one). Call it on
    /// each periodic flush (MM2 does on every `commit()`, i.e. `offset.flush.interval.ms`) so a
    /// partition that stops receiving records still gets a sync for its last record.
    pub fn promote_delayed(&mut self) {
        for (topic, partition) in std::mem::take(&mut self.delayed_order) {
            let Some(state) = self
                .partitions
                .get_mut(&topic)
                .and_then(|partitions| partitions.get_mut(&partition))
            else {
                continue;
            };
            state.delayed_listed = false;
            if let Some(delayed) = state.delayed.take() {
                if state.pending.replace(delayed).is_none() {
                    self.pending_order.push((topic, partition));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sync(topic: &str, partition: i32, up: i64, down: i64) -> OffsetSync {
        OffsetSync {
            topic: topic.into(),
            partition,
            upstream_offset: up,
            downstream_offset: down,
        }
    }

    /// Feeds `(upstream, downstream, flagged)` steps to one partition and checks after each that
    /// exactly the flagged ones came out of `take_pending`.
    fn assert_flags(offset_lag_max: i64, steps: &[(i64, i64, bool)]) {
        let mut w = OffsetSyncWriter::new(offset_lag_max);
        for &(up, down, flagged) in steps {
            w.update("t", 0, up, down);
            let expected = if flagged {
                vec![sync("t", 0, up, down)]
            } else {
                vec![]
            };
            assert_eq!(
                w.take_pending(),
                expected,
                "lag {offset_lag_max}: ({up}, {down})"
            );
        }
    }

    #[test]
    fn mm2_offset_sync_example() {
        // MirrorSourceTaskTest.testOffsetSync, offset.lag.max = 50.
        assert_flags(
            50,
            &[
                (0, 100, true),  // first record
                (2, 102, true),  // upstream skipped an offset
                (3, 152, false), // 152 - (102 + 1) = 49 < 50
                (4, 153, true),  // 153 - 103 = 50: one past the lag bound
                (5, 154, false),
                (6, 203, false), // 203 - 154 = 49
                (7, 204, true),  // 50
                (2, 206, true),  // upstream reset
                (3, 207, false),
                (4, 3, true), // downstream reset
                (5, 4, false),
                (7, 6, true), // upstream gap
                (7, 6, true), // upstream did not advance
                // MM2's PartitionState test flags this one too, but only because that test does
                // not call reset() in between; OffsetSyncWriter always does, so it is not a sync.
                (8, 7, false),
                (10, 57, true),
                (11, 58, false),
            ],
        );
    }

    #[test]
    fn zero_lag_syncs_every_record() {
        // MirrorSourceTaskTest.testZeroOffsetSync.
        let steps = [
            (0, 100),
            (2, 102),
            (3, 153),
            (4, 154),
            (5, 155),
            (6, 207),
            (2, 208),
            (3, 209),
            (4, 3),
            (5, 4),
            (7, 6),
            (7, 6),
            (8, 7),
            (10, 57),
            (11, 58),
        ];
        let steps: Vec<_> = steps.iter().map(|&(u, d)| (u, d, true)).collect();
        assert_flags(0, &steps);
    }

    #[test]
    fn lag_bound_is_counted_from_one_past_the_last_sync() {
        assert_flags(
            3,
            &[
                (0, 0, true),
                (1, 1, false),
                (2, 2, false),
                (3, 3, false), // 3 - (0 + 1) = 2
                (4, 4, true),  // 3
                (5, 5, false),
                (6, 6, false),
                (7, 7, false),
                (8, 8, true),
            ],
        );
        assert_flags(
            1,
            &[(0, 0, true), (1, 1, false), (2, 2, true), (3, 3, false)],
        );
    }

    #[test]
    fn downstream_rewind_flags_a_sync() {
        assert_flags(
            100,
            &[(0, 100, true), (1, 101, false), (2, 5, true), (3, 6, false)],
        );
    }

    #[test]
    fn first_sync_is_pending_and_the_next_delayed() {
        // OffsetSyncWriterTest.testMaybeQueueOffsetSyncs, offset.lag.max = 2.
        let mut w = OffsetSyncWriter::new(2);
        w.update("topic", 0, 0, 1);
        w.update("topic", 0, 1, 2);
        assert_eq!(w.take_pending(), vec![sync("topic", 0, 0, 1)]);
        assert_eq!(w.take_pending(), vec![]);
        w.promote_delayed();
        assert_eq!(w.take_pending(), vec![sync("topic", 0, 1, 2)]);
    }

    #[test]
    fn promotion_replaces_an_unsent_pending_sync() {
        // OffsetSyncWriterTest.testPromoteDelayedOffsetSyncs, offset.lag.max = 50.
        let mut w = OffsetSyncWriter::new(50);
        w.update("topic", 0, 0, 100);
        w.update("topic", 0, 1, 101);
        w.promote_delayed();
        assert_eq!(w.take_pending(), vec![sync("topic", 0, 1, 101)]);
        w.promote_delayed();
        assert_eq!(w.take_pending(), vec![]);
    }

    #[test]
    fn flagged_sync_replaces_pending_and_drops_delayed() {
        let mut w = OffsetSyncWriter::new(10);
        w.update("t", 0, 0, 0); // flagged
        w.update("t", 0, 1, 1); // delayed
        w.update("t", 0, 3, 2); // gap: flagged, replaces (0, 0), drops (1, 1)
        w.promote_delayed();
        assert_eq!(w.take_pending(), vec![sync("t", 0, 3, 2)]);
        w.promote_delayed();
        assert_eq!(w.take_pending(), vec![]);
    }

    #[test]
    fn idle_partition_converges_to_its_last_record() {
        let mut w = OffsetSyncWriter::new(100);
        for i in 0..10 {
            w.update("t", 0, i, 1000 + i);
        }
        assert_eq!(w.take_pending(), vec![sync("t", 0, 0, 1000)]);
        w.promote_delayed();
        assert_eq!(w.take_pending(), vec![sync("t", 0, 9, 1009)]);
        // Nothing new arrived: nothing more to send.
        w.promote_delayed();
        assert_eq!(w.take_pending(), vec![]);
        // The promoted sync does not reset the lag bound, which counts from the last flagged one.
        for i in 10..=101 {
            w.update("t", 0, i, 1000 + i);
        }
        // 1101 - (1000 + 1) = 100
        assert_eq!(w.take_pending(), vec![sync("t", 0, 101, 1101)]);
    }

    #[test]
    fn partitions_are_independent() {
        let mut w = OffsetSyncWriter::new(5);
        w.update("a", 0, 10, 20);
        w.update("a", 1, 10, 30);
        w.update("b", 0, 0, 0);
        assert_eq!(
            w.take_pending(),
            vec![
                sync("a", 0, 10, 20),
                sync("a", 1, 10, 30),
                sync("b", 0, 0, 0)
            ]
        );
        // Consecutive on every partition: only delayed.
        w.update("a", 1, 11, 31);
        w.update("a", 0, 11, 21);
        w.update("b", 0, 1, 1);
        assert_eq!(w.take_pending(), vec![]);
        // A gap on "a"/0 only flags "a"/0.
        w.update("a", 0, 13, 22);
        w.update("a", 1, 12, 32);
        assert_eq!(w.take_pending(), vec![sync("a", 0, 13, 22)]);
        // The same offsets on another topic and another partition number are separate state.
        w.update("b", 1, 0, 0);
        assert_eq!(w.take_pending(), vec![sync("b", 1, 0, 0)]);
        // Promotion brings each partition's newest delayed pair, in first-delayed order.
        w.promote_delayed();
        assert_eq!(
            w.take_pending(),
            vec![sync("a", 1, 12, 32), sync("b", 0, 1, 1)]
        );
    }

    #[test]
    fn pending_order_is_first_pending_order() {
        let mut w = OffsetSyncWriter::new(0);
        w.update("x", 2, 0, 0);
        w.update("x", 1, 0, 0);
        w.update("x", 2, 1, 1); // replaces x/2's pending sync in place
        assert_eq!(
            w.take_pending(),
            vec![sync("x", 2, 1, 1), sync("x", 1, 0, 0)]
        );
    }

    #[test]
    fn negative_offsets_are_ignored() {
        let mut w = OffsetSyncWriter::new(10);
        w.update("t", 0, 5, -1);
        w.update("t", 0, -1, 5);
        assert_eq!(w.take_pending(), vec![]);
        // The partition's first real record is still its first.
        w.update("t", 0, 6, 6);
        assert_eq!(w.take_pending(), vec![sync("t", 0, 6, 6)]);
    }

    #[test]
    fn bookkeeping_stays_bounded_between_flushes() {
        // Alternating flagged and delayed pairs must not list the partition again and again.
        let mut w = OffsetSyncWriter::new(1);
        for i in 0..1000 {
            w.update("t", 0, i, i);
        }
        assert_eq!(w.delayed_order.len(), 1);
        assert_eq!(w.pending_order.len(), 1);
        assert_eq!(w.take_pending(), vec![sync("t", 0, 998, 998)]);
        w.promote_delayed();
        assert_eq!(w.take_pending(), vec![sync("t", 0, 999, 999)]);
        assert!(w.delayed_order.is_empty() && w.pending_order.is_empty());
    }

    /// Records deleted at the source while the writer runs: the last pair before the gap, only
    /// delayed until then, goes out right before the first pair after it, chained in order.
    #[test]
    fn a_lost_gap_syncs_the_pairs_on_both_sides() {
        for exact in [false, true] {
            let mut w = if exact {
                OffsetSyncWriter::exact(100)
            } else {
                OffsetSyncWriter::new(100)
            };
            for i in 0..100 {
                w.update("t", 0, i, i);
            }
            assert_eq!(w.take_pending_chained(), vec![(sync("t", 0, 0, 0), None)]);
            w.lost("t", 0, 100, 149);
            w.update("t", 0, 150, 100);
            assert_eq!(
                w.take_pending_chained(),
                vec![
                    (sync("t", 0, 99, 99), Some(0)),
                    (sync("t", 0, 150, 100), Some(99))
                ],
                "exact: {exact}"
            );
            w.update("t", 0, 151, 101);
            assert_eq!(w.take_pending(), vec![]);
            w.promote_delayed();
            assert_eq!(w.take_pending(), vec![sync("t", 0, 151, 101)]);
        }
        // The pair before the gap was synced already: only the one after it.
        let mut w = OffsetSyncWriter::new(100);
        w.update("t", 0, 0, 0);
        assert_eq!(w.take_pending(), vec![sync("t", 0, 0, 0)]);
        w.update("t", 0, 1, 1);
        w.promote_delayed();
        assert_eq!(w.take_pending(), vec![sync("t", 0, 1, 1)]);
        w.lost("t", 0, 2, 9);
        w.update("t", 0, 10, 2);
        assert_eq!(w.take_pending(), vec![sync("t", 0, 10, 2)]);
        // Pairs acknowledged before the gap's first offset do not close it.
        let mut w = OffsetSyncWriter::new(100);
        w.update("t", 0, 0, 0);
        w.take_pending();
        w.lost("t", 0, 5, 9);
        for i in 1..5 {
            w.update("t", 0, i, i);
        }
        assert_eq!(w.take_pending(), vec![]);
        w.update("t", 0, 10, 5);
        assert_eq!(
            w.take_pending(),
            vec![sync("t", 0, 4, 4), sync("t", 0, 10, 5)]
        );
        assert_eq!(w.pending_order.len(), 0);
    }

    /// What a gap's syncs mean to the checkpoint side: a group whose offset lies inside the gap
    /// translates to the first record after it, with MM2's rule and exactly, and never earlier.
    #[test]
    fn groups_inside_a_lost_gap_translate_to_the_first_record_after_it() {
        use crate::exact::ExactHistory;
        use crate::sync_store::{OffsetSyncStore, Translation};
        // 100 records mirrored one to one, offsets 100..=149 deleted, 150.. mirrored from
        // target offset 100 on; `offset_lag_max` 7 leaves only sparse syncs before the gap, the
        // last at 96.
        for exact in [false, true] {
            let mut w = if exact {
                OffsetSyncWriter::exact(7)
            } else {
                OffsetSyncWriter::new(7)
            };
            let mut syncs = Vec::new();
            for i in 0..100 {
                w.update("t", 0, i, i);
                syncs.extend(w.take_pending_chained());
            }
            w.lost("t", 0, 100, 149);
            for i in 150..160 {
                w.update("t", 0, i, i - 50);
                syncs.extend(w.take_pending_chained());
            }
            w.promote_delayed();
            syncs.extend(w.take_pending_chained());
            let mut store = OffsetSyncStore::new();
            let mut history = ExactHistory::new();
            for (sync, previous) in &syncs {
                store.insert(sync);
                history.insert(
                    "t",
                    0,
                    sync.upstream_offset,
                    sync.downstream_offset,
                    exact.then_some(*previous),
                );
            }
            for group in [100, 120, 149, 150] {
                assert_eq!(
                    store.translate_downstream("t", 0, group),
                    Translation::Offset(100),
                    "MM2's rule, group at {group}, exact writer: {exact}"
                );
                if exact {
                    assert_eq!(
                        history.translate("t", 0, group),
                        Some(Ok(100)),
                        "group at {group}"
                    );
                }
            }
        }
    }

    /// A gap found on a restart: the writer has not seen the partition; its first sync is the
    /// record after the gap, chained to the sync the previous writer wrote before the gap.
    #[test]
    fn a_lost_gap_found_on_restart_chains_to_the_previous_writer() {
        let mut w = OffsetSyncWriter::exact(100);
        w.lost("t", 0, 100, 149);
        w.update("t", 0, 150, 100);
        w.update("t", 0, 151, 101);
        assert_eq!(
            w.take_pending_chained(),
            vec![(sync("t", 0, 150, 100), Some(99))]
        );
        // Without a gap a new writer starts a new chain, as before.
        let mut w = OffsetSyncWriter::exact(100);
        w.update("t", 0, 150, 100);
        assert_eq!(
            w.take_pending_chained(),
            vec![(sync("t", 0, 150, 100), None)]
        );
    }

    #[test]
    fn empty_writer_has_nothing_to_send() {
        let mut w = OffsetSyncWriter::new(100);
        assert_eq!(w.offset_lag_max(), 100);
        w.promote_delayed();
        assert_eq!(w.take_pending(), vec![]);
    }
}
