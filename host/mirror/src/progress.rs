//! Per-partition acknowledgement tracking: the source position that is safe to commit is the one
//! just past the longest run of acknowledged offsets, so a crash at any instant loses nothing.

use std::collections::VecDeque;

use crate::degraded::Reason;

/// A delivery that failed for good (after the producer's own retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFailure {
    /// The source offset of the record whose output failed.
    pub offset: i64,
    /// Its category.
    pub reason: Reason,
    /// The producer's error.
    pub error: String,
}

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
    /// The first delivery that failed for good since the last [`PartitionProgress::take_failure`];
    /// the watermark stops before it, so nothing past it is committed.
    failure: Option<DeliveryFailure>,
    /// Outputs handed to the producer whose delivery report has not arrived yet.
    outstanding: u64,
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
        self.outstanding += u64::from(outputs);
        self.advance();
    }

    /// Records the target's acknowledgement of one output of source record `offset`;
    /// `downstream` is its target offset when it went to the record's own remote partition.
    pub fn acked(&mut self, offset: i64, downstream: Option<i64>) {
        self.outstanding = self.outstanding.saturating_sub(1);
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

    /// Records that an output of source record `offset` could not be delivered: the record stays
    /// unacknowledged, so the watermark never passes it.
    pub fn failed(&mut self, offset: i64, reason: Reason, error: String) {
        self.outstanding = self.outstanding.saturating_sub(1);
        if self.failure.is_none() {
            self.failure = Some(DeliveryFailure {
                offset,
                reason,
                error,
            });
        }
    }

    /// The first delivery failure since the last call.
    pub fn take_failure(&mut self) -> Option<DeliveryFailure> {
        self.failure.take()
    }

    /// Whether every output handed to the producer has its delivery report.
    pub fn settled(&self) -> bool {
        self.outstanding == 0
    }

    /// Forgets every record not yet covered by the watermark, so they can be read and sent
    /// again, and returns the source offset to read again from (the first of them). Only call
    /// it when [`settled`](Self::settled): a late report would otherwise count for a resend.
    pub fn rewind(&mut self) -> Option<i64> {
        debug_assert!(self.settled());
        let first = self.inflight.front().map(|p| p.offset);
        self.inflight.clear();
        first
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

    /// The first delivery failure not yet taken, if any.
    pub fn failure(&self) -> Option<&DeliveryFailure> {
        self.failure.as_ref()
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
    fn first_failure_is_kept_until_taken() {
        let mut p = PartitionProgress::default();
        p.sent(7, 1);
        p.sent(8, 1);
        p.failed(7, Reason::Produce, "timed out".into());
        p.failed(8, Reason::RecordTooLarge, "later".into());
        let first = DeliveryFailure {
            offset: 7,
            reason: Reason::Produce,
            error: "timed out".into(),
        };
        assert_eq!(p.failure(), Some(&first));
        assert_eq!(p.take_failure(), Some(first));
        assert_eq!(p.take_failure(), None);
        assert_eq!(p.committable(), None);
    }

    /// A failed record holds the watermark, later acknowledgements do not move it; once every
    /// report is in, rewinding restarts from the first unacknowledged record and the watermark
    /// follows the records sent again.
    #[test]
    fn failure_holds_the_watermark_and_rewind_resends_from_it() {
        let mut p = PartitionProgress::default();
        for o in 10..15 {
            p.sent(o, 1);
        }
        p.sent(15, 2); // fanned out
        p.acked(10, Some(100));
        p.acked(11, Some(101));
        p.failed(12, Reason::RecordTooLarge, "too large".into());
        p.acked(13, Some(102));
        assert_eq!(p.committable(), Some(12));
        assert!(!p.settled(), "14 and both outputs of 15 still in flight");
        p.failed(14, Reason::RecordTooLarge, "too large".into());
        p.acked(15, None);
        assert!(!p.settled());
        p.acked(15, Some(103));
        assert!(p.settled());
        assert_eq!(p.committable(), Some(12), "never past the failed record");
        assert_eq!(p.rewind(), Some(12));
        assert_eq!(p.in_flight(), 0);
        assert_eq!(p.committable(), Some(12));
        for o in 12..16 {
            p.sent(o, 1);
        }
        for (o, d) in [(12, 104), (13, 105), (14, 106), (15, 107)] {
            p.acked(o, Some(d));
        }
        assert_eq!(p.committable(), Some(16));
        assert_eq!(p.downstream_next(), Some(108));
        assert!(p.settled());
        // Nothing in flight: nothing to read again.
        assert_eq!(p.rewind(), None);
    }
}
