//! The checkpoint side's memory of offset syncs and the translation of upstream consumer-group
//! offsets into downstream ones: MM2's `OffsetSyncStore` as of 3.8 (KAFKA-14666, KAFKA-15202,
//! KAFKA-15905).
//!
//! For each source partition the store keeps [`SYNCS_PER_PARTITION`] slots holding offset syncs
//! spaced roughly exponentially: dense near the newest sync, sparse towards the oldest one. Group
//! offsets near the live end, where most groups are, translate precisely; groups far behind still
//! translate, with more re-reading. With `s[i]` the slot `i` (0 = newest) and `u` its upstream
//! offset, after every insert:
//!
//! - A: `s[0]` is the latest sync inserted.
//! - B: for `i < j` holding different syncs, `s[i].u <= s[j].u + 2^j - 2^i` (no slot is too old
//!   for its position).
//! - C: for `i < j` holding different syncs, `s[i].u >= s[j].u + 2^max(i-2, 0)` (distinct syncs
//!   are not too close together).
//! - D: `s[63]` is the earliest sync still usable: the first one inserted, or the one that last
//!   cleared the history.
//!
//! The first sync of a partition fills every slot, and so does a sync whose upstream offset is
//! below the newest one's (the source partition was recreated or truncated): older syncs then
//! describe data that no longer exists.
//!
//! Checking adjacent slots is enough to keep B and C for all pairs, so an insert costs one pass
//! over the slots and, with regularly spaced syncs, expires at most one older sync.

use std::collections::HashMap;

use crate::wire::OffsetSync;

/// Slots per source partition: one per bit of an offset, as in MM2.
pub const SYNCS_PER_PARTITION: usize = 64;

/// One stored sync. `id` is unique per insert, standing in for MM2's object identity: two syncs
/// with equal offsets received separately are still different syncs for the invariants.
#[derive(Debug, Clone, Copy)]
struct Slot {
    upstream: i64,
    downstream: i64,
    id: u64,
}

type Syncs = [Slot; SYNCS_PER_PARTITION];

/// What an upstream consumer-group offset translates to downstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Translation {
    /// No sync was ever seen for the partition (nothing replicated yet): emit no checkpoint.
    NoSyncs,
    /// The offset is older than every retained sync: it cannot be translated without risking
    /// skipped records (MM2 returns -1 and drops the checkpoint).
    TooOld,
    /// The downstream offset a consumer can resume from without skipping any replicated record.
    Offset(i64),
}

impl Translation {
    /// The translated offset, if there is one.
    pub fn offset(self) -> Option<i64> {
        match self {
            Self::Offset(offset) => Some(offset),
            Self::NoSyncs | Self::TooOld => None,
        }
    }
}

/// Offset syncs per source partition, and translation of group offsets through them.
///
/// MM2's lifecycle, which the caller drives: read the offset-syncs topic from the beginning,
/// [`insert`](Self::insert)ing every record in topic order; translate nothing until that initial
/// read has reached the end of the topic (translations during it could be stale); then keep
/// inserting new syncs as they arrive. If the previous checkpoints could not be loaded, wrap the
/// initial read in [`clear_history_on_insert`](Self::clear_history_on_insert) (see there).
#[derive(Debug, Default)]
pub struct OffsetSyncStore {
    partitions: HashMap<String, HashMap<i32, Box<Syncs>>>,
    next_id: u64,
    clear_history: bool,
}

impl OffsetSyncStore {
    /// An empty store that keeps full history.
    pub fn new() -> Self {
        Self::default()
    }

    /// While `yes`, every insert replaces the partition's whole history with the new sync, so
    /// only the latest sync of each partition survives.
    ///
    /// MM2 does this during the initial read of the offset-syncs topic when it could not load the
    /// previously emitted checkpoints (`initializationMustReadToEnd`): without them it cannot keep
    /// checkpoints monotonic, so it refuses to translate offsets older than the last sync written
    /// before it started, which earlier checkpoints may already have gone past (KAFKA-13659).
    /// Switch it off once the initial read reaches the end of the topic.
    pub fn clear_history_on_insert(&mut self, yes: bool) {
        self.clear_history = yes;
    }

    /// Adds a sync read from the offset-syncs topic; call in topic order.
    pub fn insert(&mut self, sync: &OffsetSync) {
        let slot = Slot {
            upstream: sync.upstream_offset,
            downstream: sync.downstream_offset,
            id: self.next_id,
        };
        self.next_id = self.next_id.wrapping_add(1);
        let partitions = match self.partitions.get_mut(&sync.topic) {
            Some(partitions) => partitions,
            None => self.partitions.entry(sync.topic.clone()).or_default(),
        };
        match partitions.get_mut(&sync.partition) {
            None => {
                partitions.insert(sync.partition, Box::new([slot; SYNCS_PER_PARTITION]));
            }
            Some(syncs) if self.clear_history || slot.upstream < syncs[0].upstream => {
                **syncs = [slot; SYNCS_PER_PARTITION];
            }
            Some(syncs) => push(syncs, slot),
        }
    }

    /// Translates the upstream offset of a group on `topic`/`partition` (source names) into a
    /// downstream offset, using the newest retained sync at or before it: the sync's own
    /// downstream offset on an exact match, else one past it. Going further would guess how many
    /// of the records after the sync were replicated and could skip some; going one past means a
    /// group at the end of the partition lands at its end, at the price of re-reading records
    /// after an old sync.
    pub fn translate_downstream(
        &self,
        topic: &str,
        partition: i32,
        upstream_offset: i64,
    ) -> Translation {
        let Some(syncs) = self
            .partitions
            .get(topic)
            .and_then(|partitions| partitions.get(&partition))
        else {
            return Translation::NoSyncs;
        };
        let sync = syncs
            .iter()
            .find(|s| s.upstream <= upstream_offset)
            .unwrap_or(&syncs[SYNCS_PER_PARTITION - 1]);
        if sync.upstream > upstream_offset {
            Translation::TooOld
        } else if sync.upstream == upstream_offset {
            Translation::Offset(sync.downstream)
        } else {
            Translation::Offset(sync.downstream.saturating_add(1))
        }
    }
}

/// Makes `sync` (no older than `syncs[0]`) the newest sync and restores invariants B and C,
/// keeping as many of the older syncs as it can.
///
/// Walking from slot 1 outwards, each slot that has become too old for its position (B) is
/// replaced by the best candidate: the newest sync, or an older one from the previous contents
/// that fits here and stays apart from its neighbours (C). Once a slot satisfies B, so do all
/// later ones and the walk stops.
fn push(syncs: &mut Syncs, sync: Slot) {
    let original = *syncs;
    let mut replacement = sync;
    // Next slot of `original` to consider as a replacement; it never passes `current`, so older
    // syncs only ever move to higher slots.
    let mut candidate = 0;
    syncs[0] = sync;
    for current in 1..SYNCS_PER_PARTITION {
        let previous = current - 1;
        loop {
            let old = original[candidate];
            // Recent enough for this slot? If not, it may still fit a later, sparser one.
            let fits = invariant_b(syncs[previous], old, previous, current);
            // Too close to the previous slot: it will not fit any later slot either.
            let apart_from_previous = invariant_c(syncs[previous], old, previous);
            // Too close to the next slot: prefer keeping the older, sparser sync there.
            let apart_from_next =
                current + 1 >= SYNCS_PER_PARTITION || invariant_c(old, syncs[current + 1], current);
            let duplicate =
                candidate + 1 < SYNCS_PER_PARTITION && old.id == original[candidate + 1].id;
            let promote = fits && apart_from_previous && apart_from_next;
            if promote {
                replacement = old;
            }
            let skip = duplicate || !apart_from_previous;
            if promote || skip {
                candidate += 1;
            }
            if !(skip && candidate < current) {
                break;
            }
        }
        debug_assert!(invariant_b(syncs[previous], replacement, previous, current));
        debug_assert!(invariant_c(syncs[previous], replacement, previous));
        if invariant_b(syncs[previous], syncs[current], previous, current) {
            break;
        }
        syncs[current] = replacement;
    }
}

/// Invariant B for slots `i < j`: `s_i` is not too far ahead of `s_j`. Wrapping arithmetic as in
/// MM2: a negative bound means the true bound exceeds every offset.
fn invariant_b(s_i: Slot, s_j: Slot, i: usize, j: usize) -> bool {
    let bound = s_j
        .upstream
        .wrapping_add(1_i64 << j)
        .wrapping_sub(1_i64 << i);
    s_i.id == s_j.id || bound < 0 || s_i.upstream <= bound
}

/// Invariant C for slots `i < j`: `s_i` is at least `2^max(i-2, 0)` ahead of `s_j`.
fn invariant_c(s_i: Slot, s_j: Slot, i: usize) -> bool {
    let bound = s_j.upstream.wrapping_add(1_i64 << i.saturating_sub(2));
    s_i.id == s_j.id || (bound >= 0 && s_i.upstream >= bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync_writer::OffsetSyncWriter;
    use Translation::{NoSyncs, Offset, TooOld};

    const T: &str = "topic1";
    const P: i32 = 2;

    fn sync(up: i64, down: i64) -> OffsetSync {
        OffsetSync {
            topic: T.into(),
            partition: P,
            upstream_offset: up,
            downstream_offset: down,
        }
    }

    fn slots<'a>(store: &'a OffsetSyncStore, topic: &str, partition: i32) -> &'a Syncs {
        &store.partitions[topic][&partition]
    }

    fn tr(store: &OffsetSyncStore, up: i64) -> Translation {
        store.translate_downstream(T, P, up)
    }

    /// A deterministic pseudo-random sequence (Knuth's MMIX LCG), high bits only.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0
        }

        /// Uniform in `lo..hi`.
        fn range(&mut self, lo: i64, hi: i64) -> i64 {
            let span = (hi - lo) as u128;
            lo + ((u128::from(self.next()) * span) >> 64) as i64
        }

        fn chance(&mut self, percent: i64) -> bool {
            self.range(0, 100) < percent
        }
    }

    /// Invariants B and C over all pairs, comparing upstream offsets as MM2's test does.
    fn assert_spacing_invariants(syncs: &Syncs) {
        for j in 0..SYNCS_PER_PARTITION {
            for i in 0..j {
                let (up_i, up_j) = (syncs[i].upstream, syncs[j].upstream);
                if up_i == up_j {
                    continue;
                }
                let lower = up_j.wrapping_add(1 << i.saturating_sub(2));
                if lower >= 0 {
                    assert!(up_i >= lower, "C({i},{j}): {up_i} < {lower}; {syncs:?}");
                }
                let upper = up_j.wrapping_add(1 << j).wrapping_sub(1 << i);
                if upper >= 0 {
                    assert!(up_i <= upper, "B({i},{j}): {up_i} > {upper}; {syncs:?}");
                }
            }
        }
    }

    fn distinct(syncs: &Syncs) -> usize {
        1 + syncs.windows(2).filter(|w| w[0].id != w[1].id).count()
    }

    /// MM2's assertSparseSync: `sync_offset` is a retained sync (upstream == downstream) and
    /// `previous` the retained one before it (-1 for none).
    fn assert_sparse_sync(store: &OffsetSyncStore, sync_offset: i64, previous: i64) {
        let before = if previous == -1 {
            TooOld
        } else {
            Offset(previous + 1)
        };
        assert_eq!(
            tr(store, sync_offset - 1),
            before,
            "tr({})",
            sync_offset - 1
        );
        assert_eq!(
            tr(store, sync_offset),
            Offset(sync_offset),
            "tr({sync_offset})"
        );
        assert_eq!(tr(store, sync_offset + 1), Offset(sync_offset + 1));
        assert_eq!(tr(store, sync_offset + 2), Offset(sync_offset + 1));
    }

    #[test]
    fn mm2_offset_translation() {
        // OffsetSyncStoreTest.testOffsetTranslation.
        let mut store = OffsetSyncStore::new();
        store.insert(&sync(100, 200));
        // Past the sync: one past its downstream, no dead reckoning.
        assert_eq!(tr(&store, 150), Offset(201));
        // Exact.
        store.insert(&sync(150, 251));
        assert_eq!(tr(&store, 150), Offset(251));
        // Before every sync.
        assert_eq!(tr(&store, 5), TooOld);
        // Downstream reset.
        store.insert(&sync(200, 10));
        assert_eq!(tr(&store, 200), Offset(10));
        // Upstream reset.
        store.insert(&sync(20, 20));
        assert_eq!(tr(&store, 20), Offset(20));
        assert_eq!(tr(&store, 19), TooOld);
        assert_eq!(tr(&store, 150), Offset(21));
    }

    #[test]
    fn no_syncs_no_translation() {
        let mut store = OffsetSyncStore::new();
        assert_eq!(tr(&store, 0), NoSyncs);
        store.insert(&sync(3, 4));
        assert_eq!(store.translate_downstream(T, P + 1, 10), NoSyncs);
        assert_eq!(store.translate_downstream("other", P, 10), NoSyncs);
        assert_eq!(tr(&store, 10), Offset(5));
        assert_eq!(Offset(5).offset(), Some(5));
        assert_eq!(TooOld.offset(), None);
        assert_eq!(NoSyncs.offset(), None);
    }

    #[test]
    fn first_sync_fills_every_slot() {
        let mut store = OffsetSyncStore::new();
        store.insert(&sync(100, 200));
        let syncs = slots(&store, T, P);
        assert!(syncs
            .iter()
            .all(|s| (s.upstream, s.downstream) == (100, 200)));
        assert_eq!(distinct(syncs), 1);
        assert_eq!(tr(&store, 0), TooOld);
        assert_eq!(tr(&store, 99), TooOld);
        assert_eq!(tr(&store, 100), Offset(200));
        assert_eq!(tr(&store, 200), Offset(201));
    }

    #[test]
    fn mm2_past_offset_translation_after_clearing_startup() {
        // OffsetSyncStoreTest.testPastOffsetTranslation: checkpoints could not be loaded, so the
        // initial read keeps only the last sync.
        let mut store = OffsetSyncStore::new();
        store.clear_history_on_insert(true);
        for offset in (0..=1000).step_by(10) {
            store.insert(&sync(offset, offset));
            assert_spacing_invariants(slots(&store, T, P));
        }
        store.clear_history_on_insert(false);
        // Only the last sync of the initial read is translatable.
        assert_sparse_sync(&store, 1000, -1);
        for offset in (1010..=10_000).step_by(10) {
            store.insert(&sync(offset, offset));
            assert_spacing_invariants(slots(&store, T, P));
        }
        // Invariant D: still nothing older than the last startup sync.
        assert_sparse_sync(&store, 1000, -1);
        // Older offsets translate with less precision.
        for (sync_offset, previous) in [
            (4840, 1000),
            (6760, 4840),
            (8680, 6760),
            (9160, 8680),
            (9640, 9160),
            (9880, 9640),
            (9940, 9880),
            (9970, 9940),
            (9990, 9970),
            (10_000, 9990),
        ] {
            assert_sparse_sync(&store, sync_offset, previous);
        }
        // The reference's summary of this example.
        assert_eq!(tr(&store, 999), TooOld);
        assert_eq!(tr(&store, 4839), Offset(1001));
        assert_eq!(tr(&store, 9999), Offset(9991));
        assert_eq!(tr(&store, 10_001), Offset(10_001));

        // An upstream rewind clears all history.
        store.insert(&sync(1500, 11_000));
        assert_spacing_invariants(slots(&store, T, P));
        assert_eq!(tr(&store, 1499), TooOld);
        assert_eq!(tr(&store, 1500), Offset(11_000));
        assert_eq!(tr(&store, 2000), Offset(11_001));
    }

    #[test]
    fn mm2_past_offset_translation_keeping_startup_history() {
        // OffsetSyncStoreTest.testPastOffsetTranslationWithoutInitializationReadToEnd.
        let mut store = OffsetSyncStore::new();
        for offset in (0..=1000).step_by(10) {
            store.insert(&sync(offset, offset));
            assert_spacing_invariants(slots(&store, T, P));
        }
        assert_sparse_sync(&store, 480, 0);
        assert_sparse_sync(&store, 720, 480);
        assert_sparse_sync(&store, 1000, 990);
        for offset in (1000..=10_000).step_by(10) {
            store.insert(&sync(offset, offset));
            assert_spacing_invariants(slots(&store, T, P));
        }
        // 1000 has been expired: below 3840 only the first sync (0) is left.
        for (sync_offset, previous) in [
            (3840, 0),
            (7680, 3840),
            (8640, 7680),
            (9120, 8640),
            (9600, 9120),
            (9840, 9600),
            (9900, 9840),
            (9960, 9900),
            (9990, 9960),
            (10_000, 9990),
        ] {
            assert_sparse_sync(&store, sync_offset, previous);
        }
        store.insert(&sync(1500, 11_000));
        assert_spacing_invariants(slots(&store, T, P));
        assert_eq!(tr(&store, 1499), TooOld);
        assert_eq!(tr(&store, 1500), Offset(11_000));
        assert_eq!(tr(&store, 2000), Offset(11_001));
    }

    #[test]
    fn clearing_mode_keeps_only_the_latest_sync_per_partition() {
        let mut store = OffsetSyncStore::new();
        store.insert(&sync(5, 5));
        store.clear_history_on_insert(true);
        store.insert(&sync(10, 20));
        store.insert(&OffsetSync {
            partition: P + 1,
            ..sync(7, 7)
        });
        assert_eq!(distinct(slots(&store, T, P)), 1);
        assert_eq!(tr(&store, 9), TooOld);
        assert_eq!(tr(&store, 10), Offset(20));
        assert_eq!(store.translate_downstream(T, P + 1, 7), Offset(7));
        store.clear_history_on_insert(false);
        store.insert(&sync(20, 30));
        assert_eq!(distinct(slots(&store, T, P)), 2);
        assert_eq!(tr(&store, 15), Offset(21));
    }

    #[test]
    fn repeated_upstream_offset_uses_the_newest_sync() {
        // A restarted source task re-replicates from its last committed offset.
        let mut store = OffsetSyncStore::new();
        store.insert(&sync(100, 100));
        store.insert(&sync(100, 150));
        assert_eq!(tr(&store, 100), Offset(150));
        assert_eq!(tr(&store, 120), Offset(151));
        assert_eq!(slots(&store, T, P)[1].downstream, 100);
        assert_spacing_invariants(slots(&store, T, P));
    }

    /// MM2's assertSyncSpacingHasBoundedExpirations: feed syncs at `first` + the running sum of
    /// `steps`, and check no insert expires more than `max_expired` distinct syncs.
    fn assert_bounded_expirations(
        first: i64,
        steps: impl IntoIterator<Item = i64>,
        max_expired: i64,
    ) {
        let mut store = OffsetSyncStore::new();
        store.insert(&sync(first, first));
        let mut offset = first;
        let mut last_count = 1;
        for step in steps {
            offset = offset.checked_add(step).expect("test offsets overflowed");
            store.insert(&sync(offset, offset));
            let syncs = slots(&store, T, P);
            assert_eq!(syncs[0].upstream, offset, "invariant A");
            assert_eq!(
                syncs[SYNCS_PER_PARTITION - 1].upstream,
                first,
                "invariant D"
            );
            let count = distinct(syncs) as i64;
            let expired = last_count - count + 1;
            assert!(
                expired <= max_expired,
                "expired {expired} > {max_expired} syncs after {offset} (first {first})"
            );
            last_count = count;
        }
    }

    #[test]
    fn consistently_spaced_syncs_expire_at_most_one() {
        // OffsetSyncStoreTest.testConsistentlySpacedSyncs.
        let iterations = 100;
        let max_step = i64::MAX / iterations;
        let mut step = 1;
        while step < max_step {
            for first in 0..30 {
                assert_bounded_expirations(first, (0..iterations).map(|_| step), 1);
            }
            step = step * 2 + 1;
        }
    }

    #[test]
    fn randomly_spaced_syncs_expire_at_most_n_plus_two() {
        // OffsetSyncStoreTest.testRandomlySpacedSyncs: steps differing in at most n bits.
        let mut rng = Lcg(0);
        let iterations = 1 << 10;
        for n in 1..(64 - 10) {
            let max_difference = 1_i64 << n;
            let steps: Vec<i64> = (0..iterations)
                .map(|_| rng.range(0, max_difference))
                .collect();
            assert_bounded_expirations(0, steps, n + 2);
            let lag = 1 << 16;
            let steps: Vec<i64> = (0..iterations)
                .map(|_| rng.range(lag, lag + max_difference))
                .collect();
            assert_bounded_expirations(0, steps, n + 2);
        }
    }

    #[test]
    fn dropped_syncs_expire_at_most_two() {
        // OffsetSyncStoreTest.testDroppedSyncsSpacing: half the gaps twice the usual.
        let mut rng = Lcg(1);
        let steps: Vec<i64> = (0..10_000)
            .map(|_| if rng.chance(50) { 200 } else { 100 })
            .collect();
        assert_bounded_expirations(0, steps, 2);
    }

    /// The downstream offset a consumer at upstream `q` must resume from to miss nothing: that of
    /// the first replicated record at or after `q`, or the end of the target partition.
    fn exact_downstream(records: &[(i64, i64)], q: i64) -> i64 {
        // Records are in upstream order.
        let i = records.partition_point(|&(up, _)| up < q);
        match records.get(i) {
            Some(&(_, down)) => down,
            None => records.last().map_or(0, |&(_, down)| down + 1),
        }
    }

    #[test]
    fn invariants_hold_and_translation_never_skips_data() {
        for seed in 0..6 {
            let mut rng = Lcg(seed);
            let lag = rng.range(0, 40);
            let mut writer = OffsetSyncWriter::new(lag);
            let mut store = OffsetSyncStore::new();
            let mut records: Vec<(i64, i64)> = Vec::new();
            let mut first_id = None;
            let (mut up, mut down) = (rng.range(0, 1000), rng.range(0, 1000));
            for n in 0..2500 {
                // Gaps upstream (compaction, transaction markers, filtered records) and
                // downstream (markers of transactional writes).
                up += if rng.chance(10) { rng.range(2, 300) } else { 1 };
                down += if rng.chance(3) { 2 } else { 1 };
                records.push((up, down));
                writer.update(T, P, up, down);
                if rng.chance(2) {
                    writer.promote_delayed();
                }
                for s in writer.take_pending() {
                    store.insert(&s);
                    let syncs = slots(&store, T, P);
                    first_id.get_or_insert(syncs[0].id);
                    assert_eq!(
                        (syncs[0].upstream, syncs[0].downstream),
                        (s.upstream_offset, s.downstream_offset),
                        "invariant A"
                    );
                    assert_eq!(
                        Some(syncs[SYNCS_PER_PARTITION - 1].id),
                        first_id,
                        "invariant D"
                    );
                    assert_spacing_invariants(syncs);
                }
                if n % 250 != 249 {
                    continue;
                }
                let syncs = slots(&store, T, P);
                let oldest = syncs[SYNCS_PER_PARTITION - 1].upstream;
                let mut previous = i64::MIN;
                for q in records[0].0 - 2..up + 3 {
                    match tr(&store, q) {
                        Offset(t) => {
                            let exact = exact_downstream(&records, q);
                            assert!(t <= exact, "seed {seed}: tr({q}) = {t} skips past {exact}");
                            assert!(t >= previous, "seed {seed}: tr({q}) = {t} < {previous}");
                            previous = t;
                        }
                        TooOld => assert!(q < oldest, "seed {seed}: tr({q}) too old"),
                        NoSyncs => panic!("seed {seed}: no syncs"),
                    }
                }
            }
        }
    }

    #[test]
    fn invariants_hold_across_rewinds_and_partitions() {
        let mut rng = Lcg(42);
        let mut store = OffsetSyncStore::new();
        // Per partition: the id of the sync that invariant D names (first or last rewind).
        let mut earliest: HashMap<i32, u64> = HashMap::new();
        let mut latest: HashMap<i32, i64> = HashMap::new();
        for _ in 0..20_000 {
            let partition = rng.range(0, 4) as i32;
            let previous = latest.get(&partition).copied();
            let up = match previous {
                Some(prev) if rng.chance(1) => rng.range(0, prev + 1), // rewind (or repeat)
                Some(prev) => {
                    let bits = rng.range(0, 20);
                    prev + rng.range(0, 1 << bits)
                }
                None => rng.range(0, 1 << 30),
            };
            let down = rng.range(0, 1 << 40);
            store.insert(&OffsetSync {
                topic: T.into(),
                partition,
                upstream_offset: up,
                downstream_offset: down,
            });
            latest.insert(partition, up);
            let syncs = slots(&store, T, partition);
            if previous.is_none_or(|prev| up < prev) {
                earliest.insert(partition, syncs[0].id);
                assert_eq!(
                    distinct(syncs),
                    1,
                    "a new or rewound partition has one sync"
                );
            }
            assert_eq!((syncs[0].upstream, syncs[0].downstream), (up, down), "A");
            assert_eq!(syncs[SYNCS_PER_PARTITION - 1].id, earliest[&partition], "D");
            assert_spacing_invariants(syncs);
            assert_eq!(store.translate_downstream(T, partition, up), Offset(down));
        }
    }
}
