//! Per-partition acknowledgement tracking: the source position that is safe to commit is the one
//! just past the longest run of acknowledged offsets, so a crash at any instant loses nothing.

use std::collections::VecDeque;

/// One source partition's records sent to the target and not yet covered by the watermark.
#[derive(Debug, Default)]
pub struct PartitionProgress {
    /// Source records in send order (source offsets increase): how many of their outputs are
    /// not yet acknowledged, and the target offset of the last one written to the record's own
    /// remote partition.
    inflight: VecDeque<Pending>,
    /// Source offset after the last contiguously acknowledged record.
    acked_next: Option<i64>,
    /// Target offset after the last contiguously acknowledged record.
    downstream_next: Option<i64>,
    /// A delivery that failed for good; the flow must stop before committing past it.
    failure: Option<String>,
    /// Whether completed (source, target) offset pairs are kept for offset syncs.
    track_pairs: bool,
    /// (source offset, target offset) of records completed in order since the last take.
    completed: Vec<(i64, i64)>,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    offset: i64,
    remaining: u32,
    downstream: Option<i64>,
}

impl PartitionProgress {
    /// A progress that also keeps, in completion order, the (source offset, target offset) of
    /// each completed record that went to its own remote partition (for MM2 offset syncs).
    pub fn tracking_pairs() -> Self {
        Self {
            track_pairs: true,
            ..Self::default()
        }
    }

    /// The (source offset, target offset) pairs completed since the last call.
    pub fn take_completed(&mut self) -> Vec<(i64, i64)> {
        std::mem::take(&mut self.completed)
    }

    /// Records that source record `offset` was handed to the producer as `outputs` records
    /// (0 when it was dropped: it then completes as soon as everything before it has).
    pub fn sent(&mut self, offset: i64, outputs: u32) {
        debug_assert!(self.inflight.back().is_none_or(|p| p.offset < offset));
        self.inflight.push_back(Pending {
            offset,
            remaining: outputs,
            downstream: None,
        });
        self.advance();
    }

    /// Records the target's acknowledgement of one output of source record `offset`;
    /// `downstream` is its target offset when it went to the record's own remote partition.
    pub fn acked(&mut self, offset: i64, downstream: Option<i64>) {
        if let Ok(i) = self.inflight.binary_search_by_key(&offset, |p| p.offset) {
            let p = &mut self.inflight[i];
            p.remaining = p.remaining.saturating_sub(1);
            if downstream.is_some() {
                p.downstream = downstream;
            }
        }
        self.advance();
    }

    fn advance(&mut self) {
        while let Some(p) = self.inflight.front().copied() {
            if p.remaining > 0 {
                break;
            }
            self.acked_next = Some(p.offset + 1);
            if let Some(d) = p.downstream {
                self.downstream_next = Some(d + 1);
                if self.track_pairs {
                    self.completed.push((p.offset, d));
                }
            }
            self.inflight.pop_front();
        }
    }

    /// Records that `offset` could not be delivered.
    pub fn failed(&mut self, offset: i64, reason: String) {
        if self.failure.is_none() {
            self.failure = Some(format!("offset {offset}: {reason}"));
        }
    }

    /// The source offset to commit (next to read after a restart), if anything was acknowledged.
    pub fn committable(&self) -> Option<i64> {
        self.acked_next
    }

    /// The target offset just after the last acknowledged record.
    pub fn downstream_next(&self) -> Option<i64> {
        self.downstream_next
    }

    /// Records sent and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// The first delivery failure, if any.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (sent offsets, acks as (offset, downstream), expected committable, expected in flight)
    #[test]
    fn watermark_only_covers_contiguous_acks() {
        type Case = (&'static [i64], &'static [(i64, i64)], Option<i64>, usize);
        let cases: &[Case] = &[
            (&[], &[], None, 0),
            (&[0, 1, 2], &[], None, 3),
            (&[0, 1, 2], &[(0, 10)], Some(1), 2),
            (&[0, 1, 2], &[(1, 11), (2, 12)], None, 3),
            (&[0, 1, 2], &[(1, 11), (2, 12), (0, 10)], Some(3), 0),
            (&[5, 9, 10], &[(5, 0), (10, 2)], Some(6), 2),
            (&[5, 9, 10], &[(5, 0), (10, 2), (9, 1)], Some(11), 0),
            // an ack for an offset never sent changes nothing
            (&[3], &[(4, 0)], None, 1),
        ];
        for (i, (sent, acks, want, inflight)) in cases.iter().enumerate() {
            let mut p = PartitionProgress::default();
            for o in *sent {
                p.sent(*o, 1);
            }
            for (o, d) in *acks {
                p.acked(*o, Some(*d));
            }
            assert_eq!(p.committable(), *want, "case {i}");
            assert_eq!(p.in_flight(), *inflight, "case {i}");
        }
    }

    #[test]
    fn completed_pairs_come_out_in_source_order() {
        let mut p = PartitionProgress::tracking_pairs();
        for o in [3, 4, 5, 6] {
            p.sent(o, 1);
        }
        p.sent(7, 0); // dropped by a processor: no pair, an upstream gap for offset syncs
        p.sent(8, 1);
        p.acked(4, Some(11));
        assert!(p.take_completed().is_empty());
        p.acked(3, Some(10));
        p.acked(6, Some(13));
        assert_eq!(p.take_completed(), vec![(3, 10), (4, 11)]);
        p.acked(5, Some(12));
        p.acked(8, Some(14));
        assert_eq!(p.take_completed(), vec![(5, 12), (6, 13), (8, 14)]);
        let mut untracked = PartitionProgress::default();
        untracked.sent(0, 1);
        untracked.acked(0, Some(0));
        assert!(untracked.take_completed().is_empty());
    }

    #[test]
    fn downstream_position_follows_the_watermark() {
        let mut p = PartitionProgress::default();
        p.sent(0, 1);
        p.sent(1, 1);
        p.acked(1, Some(41));
        assert_eq!(p.downstream_next(), None);
        p.acked(0, Some(40));
        assert_eq!(p.downstream_next(), Some(42));
    }

    /// A fanned-out record completes when all its outputs are acked; a dropped one (0 outputs)
    /// completes as soon as everything before it has.
    #[test]
    fn fan_out_and_drops() {
        let mut p = PartitionProgress::default();
        p.sent(0, 3);
        p.sent(1, 0);
        p.sent(2, 1);
        p.acked(0, Some(10));
        p.acked(0, None);
        assert_eq!(p.committable(), None);
        p.acked(2, Some(13));
        assert_eq!(p.committable(), None);
        p.acked(0, Some(12));
        assert_eq!(p.committable(), Some(3));
        assert_eq!(p.downstream_next(), Some(14));
        p.sent(3, 0);
        assert_eq!(p.committable(), Some(4));
        assert_eq!(p.in_flight(), 0);
    }

    #[test]
    fn first_failure_is_kept() {
        let mut p = PartitionProgress::default();
        p.sent(7, 1);
        p.sent(8, 1);
        p.failed(7, "timed out".into());
        p.failed(8, "later".into());
        assert_eq!(p.failure(), Some("offset 7: timed out"));
        assert_eq!(p.committable(), None);
    }
}
