//! Exact offset translation (`offset_translation = "exact"`): the full run-length history of the
//! offset syncs refract's own writer chained together, per source partition.
//!
//! MM2's rule ([`super::sync_store`]) translates a group offset past a sync to the sync's
//! downstream offset + 1, because it cannot know what happened to the records after the sync.
//! refract's writer, in exact mode, emits a sync at every discontinuity on either side (an
//! upstream gap — compaction, a filtered record, a transaction marker —, a downstream jump, a
//! rewind) and marks every sync with the upstream offset of the sync it emitted before it for the
//! same partition (header [`PREVIOUS_HEADER`]). Between two consecutive syncs of one chain, both
//! offsets therefore advance by one per record, and a group offset `g` with `u_i <= g` translates
//! to `min(d_i + (g - u_i), d_{i+1})`: exact, not a guess.
//!
//! A link the checkpoint side cannot prove — a sync without the header (MM2's, or refract's with
//! `offset_translation = "mm2"`), a sync whose predecessor is not the one before it in the topic
//! (a sync lost in a crash or a failed send), an offset past the newest sync, or one older than
//! the retained history — is answered with MM2's rule, and the caller is told why.
//!
//! The history is bounded: [`MAX_RUNS_PER_PARTITION`] syncs per partition (24 bytes each, so at
//! most about 2.3 MiB per partition); past it the oldest syncs are dropped and offsets before the
//! oldest one left fall back to MM2's rule.

use std::collections::{HashMap, VecDeque};

/// The header on an offset-sync record that marks it as written by refract's exact writer: the
/// upstream offset of the previous sync of the same chain (decimal), or empty at a chain's start.
/// MirrorMaker 2 ignores record headers, so the record stays byte-compatible.
pub const PREVIOUS_HEADER: &str = "refract.sync.previous";

/// Syncs kept per source partition.
pub const MAX_RUNS_PER_PARTITION: usize = 100_000;

/// One sync in the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    upstream: i64,
    downstream: i64,
    /// Written by refract's exact writer.
    exact: bool,
    /// Its chain names the entry before it as its predecessor: the run between them is
    /// contiguous on both sides.
    linked: bool,
}

/// Why an offset was translated with MM2's rule instead of exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coarse {
    /// No sync of refract's exact writer surrounds the offset (MM2 wrote them, or refract with
    /// `offset_translation = "mm2"`).
    NotExactSyncs,
    /// The syncs around the offset do not form one chain: one between them was lost (a crash
    /// before it was sent, a failed send) or the writer restarted.
    ChainBroken,
    /// The offset is past the newest sync by more than one record: what happened after it is
    /// not known yet.
    AheadOfSyncs,
    /// The offset is older than the oldest sync still kept.
    OlderThanHistory,
}

impl Coarse {
    /// The reason in words, for `offsets translate` and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Coarse::NotExactSyncs => "offset syncs not written by refract's exact writer",
            Coarse::ChainBroken => "an offset sync was lost around it (restart or failed send)",
            Coarse::AheadOfSyncs => "past the newest offset sync",
            Coarse::OlderThanHistory => "older than the retained offset-sync history",
        }
    }
}

/// The exact history of every source partition.
#[derive(Debug, Default)]
pub struct ExactHistory {
    partitions: HashMap<String, HashMap<i32, VecDeque<Entry>>>,
    cap: usize,
}

impl ExactHistory {
    /// An empty history keeping at most [`MAX_RUNS_PER_PARTITION`] syncs per partition.
    pub fn new() -> Self {
        Self::with_cap(MAX_RUNS_PER_PARTITION)
    }

    /// An empty history keeping at most `cap` syncs per partition (at least 2).
    pub fn with_cap(cap: usize) -> Self {
        Self {
            partitions: HashMap::new(),
            cap: cap.max(2),
        }
    }

    /// Adds a sync read from the offset-syncs topic, in topic order. `previous` is the value of
    /// its [`PREVIOUS_HEADER`] header: `None` without the header, `Some(None)` at a chain's start.
    /// A sync at or below the newest one's upstream offset (a rewind, or re-mirroring after a
    /// restart) replaces every sync from that offset on.
    pub fn insert(
        &mut self,
        topic: &str,
        partition: i32,
        upstream: i64,
        downstream: i64,
        previous: Option<Option<i64>>,
    ) {
        let partitions = match self.partitions.get_mut(topic) {
            Some(p) => p,
            None => self.partitions.entry(topic.to_owned()).or_default(),
        };
        let entries = partitions.entry(partition).or_default();
        while entries.back().is_some_and(|e| e.upstream >= upstream) {
            entries.pop_back();
        }
        let linked = match (entries.back(), previous) {
            (Some(last), Some(Some(prev))) => last.exact && last.upstream == prev,
            _ => false,
        };
        entries.push_back(Entry {
            upstream,
            downstream,
            exact: previous.is_some(),
            linked,
        });
        while entries.len() > self.cap {
            entries.pop_front();
        }
    }

    /// Forgets every partition's history but its newest sync (MM2's start-up rule when the
    /// previous checkpoints could not be read; see `OffsetSyncStore::clear_history_on_insert`).
    pub fn keep_only_newest(&mut self) {
        for entries in self.partitions.values_mut().flat_map(HashMap::values_mut) {
            while entries.len() > 1 {
                entries.pop_front();
            }
        }
    }

    /// The exact downstream offset for group offset `upstream` on `topic`/`partition`, or why
    /// there is none (`None` history at all: no sync seen). A consumer that resumes at the
    /// returned offset reads exactly the mirrored records at or after `upstream`, none twice.
    pub fn translate(
        &self,
        topic: &str,
        partition: i32,
        upstream: i64,
    ) -> Option<Result<i64, Coarse>> {
        let entries = self.partitions.get(topic)?.get(&partition)?;
        let at = entries.partition_point(|e| e.upstream <= upstream);
        let Some(i) = at.checked_sub(1) else {
            return Some(Err(Coarse::OlderThanHistory));
        };
        let e = entries[i];
        if e.upstream == upstream {
            // A sync's own pair is exact whoever wrote it.
            return Some(Ok(e.downstream));
        }
        let ahead = upstream - e.upstream;
        Some(match entries.get(i + 1) {
            Some(next) if next.linked => {
                Ok(e.downstream.saturating_add(ahead).min(next.downstream))
            }
            Some(next) if e.exact && next.exact => Err(Coarse::ChainBroken),
            Some(_) => Err(Coarse::NotExactSyncs),
            // The newest sync: the record right after it is the next one downstream, whatever
            // comes later; beyond that nothing is known yet.
            None if ahead == 1 && e.exact => Ok(e.downstream.saturating_add(1)),
            None if e.exact => Err(Coarse::AheadOfSyncs),
            None => Err(Coarse::NotExactSyncs),
        })
    }

    /// Syncs kept for `topic`/`partition` (for tests and memory figures).
    pub fn len(&self, topic: &str, partition: i32) -> usize {
        self.partitions
            .get(topic)
            .and_then(|p| p.get(&partition))
            .map_or(0, VecDeque::len)
    }

    /// Whether no sync is kept at all.
    pub fn is_empty(&self) -> bool {
        self.partitions
            .values()
            .flat_map(HashMap::values)
            .all(VecDeque::is_empty)
    }
}

/// The value of a [`PREVIOUS_HEADER`] header: `Some(None)` for an empty value (a chain's start),
/// `Some(Some(offset))` for a decimal offset, `None` for anything else (treated as no header).
pub fn parse_previous(value: Option<&[u8]>) -> Option<Option<i64>> {
    let text = std::str::from_utf8(value?).ok()?;
    if text.is_empty() {
        return Some(None);
    }
    text.parse::<i64>().ok().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync_store::{OffsetSyncStore, Translation};
    use crate::sync_writer::OffsetSyncWriter;

    const T: &str = "t";

    /// Feeds `(upstream, downstream)` acknowledgements of one partition through an exact writer
    /// flushing every `flush_every` records, into a history and an MM2 store.
    fn mirrored(
        pairs: &[(i64, i64)],
        lag_max: i64,
        flush_every: usize,
    ) -> (ExactHistory, OffsetSyncStore) {
        let mut writer = OffsetSyncWriter::exact(lag_max);
        let mut history = ExactHistory::new();
        let mut store = OffsetSyncStore::new();
        let mut emit = |writer: &mut OffsetSyncWriter| {
            for (sync, previous) in writer.take_pending_chained() {
                history.insert(
                    &sync.topic,
                    sync.partition,
                    sync.upstream_offset,
                    sync.downstream_offset,
                    Some(previous),
                );
                store.insert(&sync);
            }
        };
        for (n, (up, down)) in pairs.iter().enumerate() {
            writer.update(T, 0, *up, *down);
            emit(&mut writer);
            if (n + 1) % flush_every == 0 {
                writer.promote_delayed();
                emit(&mut writer);
            }
        }
        writer.promote_delayed();
        emit(&mut writer);
        (history, store)
    }

    /// The scenario: 100 records burst-mirrored with offset.lag.max = 10. MM2's store
    /// keeps syncs 99, 88, 66, 44, 0 and sends groups at 40, 30 and 33 back to offset 1; the
    /// exact history gives 40, 30 and 33.
    #[test]
    fn burst_mirrored_groups_translate_exactly() {
        let pairs: Vec<(i64, i64)> = (0..100).map(|i| (i, i)).collect();
        let (history, store) = mirrored(&pairs, 10, 1000);
        for group in [40, 30, 33, 0, 99, 100] {
            assert_eq!(history.translate(T, 0, group), Some(Ok(group)), "{group}");
        }
        assert_eq!(
            store.translate_downstream(T, 0, 40),
            Translation::Offset(1),
            "MM2's rule on the same syncs"
        );
        assert_eq!(
            history.translate(T, 0, 101),
            Some(Err(Coarse::AheadOfSyncs))
        );
    }

    /// Every third record dropped by a filter (upstream gaps): a group anywhere resumes at the
    /// first mirrored record at or after its offset.
    #[test]
    fn filtered_records_translate_to_the_next_mirrored_one() {
        let mut pairs = Vec::new();
        let mut down = 0;
        for up in 0..300 {
            if up % 3 != 2 {
                pairs.push((up, down));
                down += 1;
            }
        }
        let (history, _) = mirrored(&pairs, 100, 50);
        for group in 0..300 {
            let want = pairs
                .iter()
                .find(|(u, _)| *u >= group)
                .map_or(down, |(_, d)| *d);
            assert_eq!(history.translate(T, 0, group), Some(Ok(want)), "{group}");
        }
    }

    /// Downstream jumps (transaction markers on the target: each commit adds one offset).
    #[test]
    fn downstream_markers_translate_exactly() {
        let mut pairs = Vec::new();
        let mut down = 0;
        for up in 0..200 {
            pairs.push((up, down));
            down += 1;
            if up % 7 == 6 {
                down += 1; // a commit marker
            }
        }
        let (history, _) = mirrored(&pairs, 100, 30);
        for (up, d) in &pairs {
            assert_eq!(history.translate(T, 0, *up), Some(Ok(*d)), "{up}");
        }
    }

    #[test]
    fn unproven_links_fall_back_with_a_reason() {
        let mut h = ExactHistory::new();
        // MM2's syncs (no header).
        h.insert(T, 0, 0, 0, None);
        h.insert(T, 0, 10, 10, None);
        assert_eq!(h.translate(T, 0, 5), Some(Err(Coarse::NotExactSyncs)));
        assert_eq!(h.translate(T, 0, 10), Some(Ok(10)));
        // An exact chain whose middle sync was lost: 20 names 15 as its predecessor.
        h.insert(T, 0, 12, 12, Some(None));
        h.insert(T, 0, 20, 17, Some(Some(15)));
        assert_eq!(h.translate(T, 0, 14), Some(Err(Coarse::ChainBroken)));
        h.insert(T, 0, 30, 27, Some(Some(20)));
        assert_eq!(h.translate(T, 0, 25), Some(Ok(22)));
        assert_eq!(h.translate(T, 0, 31), Some(Ok(28)));
        assert_eq!(h.translate(T, 0, 32), Some(Err(Coarse::AheadOfSyncs)));
        assert_eq!(h.translate(T, 1, 5), None);
        // A rewind (re-mirroring after a restart) replaces what it covers.
        h.insert(T, 0, 25, 40, Some(None));
        assert_eq!(h.translate(T, 0, 25), Some(Ok(40)));
        assert_eq!(h.translate(T, 0, 22), Some(Err(Coarse::ChainBroken)));
    }

    #[test]
    fn the_history_is_bounded() {
        let mut h = ExactHistory::with_cap(4);
        let mut prev = None;
        for u in 0..10 {
            h.insert(T, 0, u * 10, u * 10, Some(prev));
            prev = Some(u * 10);
        }
        assert_eq!(h.len(T, 0), 4);
        assert_eq!(h.translate(T, 0, 65), Some(Ok(65)));
        assert_eq!(h.translate(T, 0, 55), Some(Err(Coarse::OlderThanHistory)));
    }

    #[test]
    fn header_values() {
        assert_eq!(parse_previous(None), None);
        assert_eq!(parse_previous(Some(b"")), Some(None));
        assert_eq!(parse_previous(Some(b"42")), Some(Some(42)));
        assert_eq!(parse_previous(Some(b"x")), None);
    }

    /// Memory of the history: 24 bytes per kept sync, and how many syncs a million mirrored
    /// records make (MM2's default offset_lag_max of 100, a flush every 5,000 records).
    #[test]
    fn memory_per_million_records() {
        assert_eq!(std::mem::size_of::<Entry>(), 24);
        let contiguous: Vec<(i64, i64)> = (0..1_000_000).map(|i| (i, i)).collect();
        let (history, _) = mirrored(&contiguous, 100, 5_000);
        let kept = history.len(T, 0);
        // One sync per 100 records, plus the flushed ones: about 10,100 syncs, 240 KB.
        assert!((10_000..=10_300).contains(&kept), "{kept}");
        // A filter dropping every third record: a sync after every gap, capped by the bound.
        let filtered: Vec<(i64, i64)> = (0..1_000_000)
            .filter(|i| i % 3 != 2)
            .enumerate()
            .map(|(d, u)| (u, d as i64))
            .collect();
        let (history, _) = mirrored(&filtered, 100, 5_000);
        assert_eq!(history.len(T, 0), MAX_RUNS_PER_PARTITION);
        // The newest 100,000 syncs cover the last 300,000 source offsets exactly.
        let want = |g: i64| filtered.iter().find(|(u, _)| *u >= g).map(|(_, d)| *d);
        assert_eq!(
            history.translate(T, 0, 800_002),
            Some(Ok(want(800_002).unwrap_or(-1)))
        );
        assert_eq!(
            history.translate(T, 0, 999_998),
            Some(Ok(want(999_998).unwrap_or(-1)))
        );
        assert_eq!(
            history.translate(T, 0, 600_000),
            Some(Err(Coarse::OlderThanHistory))
        );
    }
}
