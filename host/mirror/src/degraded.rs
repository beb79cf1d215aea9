//! Source partitions that cannot make progress. A partition whose records the target refuses
//! for good, or whose reads fail, is *degraded*: it stops being read while its other partitions
//! keep flowing, and is retried with exponential backoff until it makes progress again. This
//! module is the bookkeeping: the reason categories, the retry cycle, and which failures are a
//! transition worth a log line (the first one, a change of reason, the recovery) rather than
//! another failed retry.

use std::time::{Duration, Instant};

use rdkafka::types::RDKafkaErrorCode;

/// Wait before the first retry of a degraded partition.
pub const RETRY_FIRST: Duration = Duration::from_secs(5);
/// Longest wait between two retries.
pub const RETRY_MAX: Duration = Duration::from_secs(300);
/// A partition retried after a read failure, read again without a new error for this long,
/// counts as recovered even when it has no new records to show for it.
pub const READ_RECOVERED_AFTER: Duration = Duration::from_secs(10);

/// Why a partition cannot make progress: the `reason` of `/status`, `/health` and
/// `refract_partition_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The target refuses a record (batch) as larger than the topic's `max.message.bytes`.
    RecordTooLarge,
    /// Reading or writing was refused by the cluster's authorizer (topic, group, cluster).
    Authorization,
    /// The source or target topic (or partition) does not exist (any more).
    UnknownTopic,
    /// A fetched record batch could not be decompressed.
    Decompression,
    /// A fetched record is malformed.
    Corrupt,
    /// Any other delivery failure after the producer's own retries (e.g. a delivery timeout).
    Produce,
    /// Any other read failure.
    Fetch,
    /// The topic was deleted and created again (on the source, or its remote topic on the
    /// target), or the partition's position is past its end: the partition is stopped, not
    /// retried (see `flow::recreated`).
    Recreated,
    /// A schema registry did not answer while a record's schema id was translated
    /// (`schemas = "translate"`): the record waits, untranslated records never leave.
    SchemaRegistry,
}

impl Reason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::RecordTooLarge => "record_too_large",
            Reason::Authorization => "authorization",
            Reason::UnknownTopic => "unknown_topic",
            Reason::Decompression => "decompression",
            Reason::Corrupt => "corrupt",
            Reason::Produce => "produce",
            Reason::Fetch => "fetch",
            Reason::Recreated => "recreated",
            Reason::SchemaRegistry => "schema_registry",
        }
    }

    /// The category of a delivery the producer reported as failed.
    pub fn of_delivery(code: RDKafkaErrorCode) -> Self {
        Self::common(code).unwrap_or(match code {
            RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::MessageBatchTooLarge => {
                Reason::RecordTooLarge
            }
            _ => Reason::Produce,
        })
    }

    /// The category of an error the consumer reported.
    pub fn of_read(code: RDKafkaErrorCode) -> Self {
        Self::common(code).unwrap_or(match code {
            RDKafkaErrorCode::BadCompression | RDKafkaErrorCode::UnsupportedCompressionType => {
                Reason::Decompression
            }
            RDKafkaErrorCode::BadMessage
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord => Reason::Corrupt,
            _ => Reason::Fetch,
        })
    }

    fn common(code: RDKafkaErrorCode) -> Option<Self> {
        match code {
            RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::GroupAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::TransactionalIdAuthorizationFailed
            | RDKafkaErrorCode::Authentication
            | RDKafkaErrorCode::SaslAuthenticationFailed => Some(Reason::Authorization),
            RDKafkaErrorCode::UnknownTopicOrPartition
            | RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::UnknownPartition
            | RDKafkaErrorCode::UnknownTopicId => Some(Reason::UnknownTopic),
            _ => None,
        }
    }
}

/// Which side a failure came from; it decides what counts as recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The target did not acknowledge a record: recovered once the acknowledged position passes
    /// the failed record.
    Delivery,
    /// The source could not be read: recovered once a record is read again, or after
    /// [`READ_RECOVERED_AFTER`] of reading without a new error.
    Read,
}

/// What is known about a degraded partition (what `/status` shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Degraded {
    /// The latest failure's category.
    pub reason: Reason,
    /// The latest failure's message.
    pub error: String,
    /// Wall-clock ms since the epoch when the partition became degraded.
    pub since_ms: i64,
    /// Retries that failed since then.
    pub retries: u32,
    /// The source offset that failed (a delivery: the first record not acknowledged; a read:
    /// where the fetch failed), when known.
    pub offset: Option<i64>,
    origin: Origin,
}

/// What a failure changed, so that the cause is logged once per transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The partition was healthy and is now degraded (log a warning).
    Degraded,
    /// It was degraded for another reason (log a warning naming the old one).
    ReasonChanged(Reason),
    /// Another failure for the same reason: a retry that failed (log at debug).
    StillFailing,
}

/// Where a partition is in its read → fail → drain → wait → retry cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Read and sent (the normal case, and a retry in progress).
    Flowing,
    /// Failed: not read any more; waiting for the records still in flight to be acknowledged
    /// or failed before its position is rewound.
    Draining,
    /// Not read until the instant of its next retry.
    Waiting(Instant),
    /// Not read again by this run of the flow (its topic was recreated): never retried.
    Stopped,
}

/// One source partition's health: its degraded mark and its retry cycle.
#[derive(Debug, Clone)]
pub struct PartitionHealth {
    degraded: Option<Degraded>,
    phase: Phase,
    /// Wait before the next retry.
    backoff: Duration,
    /// When the partition was last handed back to the consumer for a retry.
    retried_at: Option<Instant>,
}

impl Default for PartitionHealth {
    fn default() -> Self {
        Self {
            degraded: None,
            phase: Phase::Flowing,
            backoff: RETRY_FIRST,
            retried_at: None,
        }
    }
}

impl PartitionHealth {
    /// The degraded mark, if any.
    pub fn degraded(&self) -> Option<&Degraded> {
        self.degraded.as_ref()
    }

    /// Where it is in its retry cycle.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether its records are read and sent.
    pub fn flowing(&self) -> bool {
        self.phase == Phase::Flowing
    }

    /// Records a failure at `offset`. Only a failure while flowing counts (one failure event per
    /// attempt: the other records of a failed attempt report the same cause); the partition then
    /// stops being read and drains. `None` when the failure was not counted.
    pub fn failed(
        &mut self,
        origin: Origin,
        reason: Reason,
        error: String,
        offset: Option<i64>,
        now_ms: i64,
    ) -> Option<Change> {
        if self.phase != Phase::Flowing {
            return None;
        }
        self.phase = Phase::Draining;
        let change = match &mut self.degraded {
            None => {
                self.degraded = Some(Degraded {
                    reason,
                    error,
                    since_ms: now_ms,
                    retries: 0,
                    offset,
                    origin,
                });
                Change::Degraded
            }
            Some(d) => {
                d.retries += 1;
                let old = d.reason;
                d.reason = reason;
                d.error = error;
                d.origin = origin;
                if offset.is_some() {
                    d.offset = offset;
                }
                if old == reason {
                    Change::StillFailing
                } else {
                    Change::ReasonChanged(old)
                }
            }
        };
        Some(change)
    }

    /// Stops the partition for good in this run (`reason`, `error`, at `offset`): it keeps its
    /// degraded mark and is never retried. `None` when it was stopped already.
    pub fn stop(
        &mut self,
        reason: Reason,
        error: String,
        offset: Option<i64>,
        now_ms: i64,
    ) -> Option<Change> {
        if self.phase == Phase::Stopped {
            return None;
        }
        self.phase = Phase::Stopped;
        let old = self.degraded.replace(Degraded {
            reason,
            error,
            since_ms: now_ms,
            retries: 0,
            offset,
            origin: Origin::Read,
        });
        Some(match old {
            Some(d) if d.reason != reason => Change::ReasonChanged(d.reason),
            Some(_) => Change::StillFailing,
            None => Change::Degraded,
        })
    }

    /// Whether it was stopped for good ([`PartitionHealth::stop`]).
    pub fn stopped(&self) -> bool {
        self.phase == Phase::Stopped
    }

    /// Its records in flight are all settled: wait for the next retry, the backoff doubling
    /// each time up to [`RETRY_MAX`]. Returns the wait.
    pub fn drained(&mut self, now: Instant) -> Duration {
        let wait = self.backoff;
        self.phase = Phase::Waiting(now + wait);
        self.backoff = (self.backoff * 2).min(RETRY_MAX);
        wait
    }

    /// Whether its retry is due.
    pub fn retry_due(&self, now: Instant) -> bool {
        matches!(self.phase, Phase::Waiting(at) if now >= at)
    }

    /// It is read again (a retry).
    pub fn retrying(&mut self, now: Instant) {
        self.phase = Phase::Flowing;
        self.retried_at = Some(now);
    }

    /// Notes progress: `acked_next` is the source offset after the last acknowledged record,
    /// `read` whether a record of the partition was read, `now` the time. Returns the cleared
    /// mark when the partition recovered (log it once).
    pub fn progressed(
        &mut self,
        acked_next: Option<i64>,
        read: bool,
        now: Instant,
    ) -> Option<Degraded> {
        let d = self.degraded.as_ref()?;
        if self.phase != Phase::Flowing {
            return None;
        }
        let recovered = if d.origin == Origin::Delivery {
            // The failed record itself acknowledged (an unknown offset: anything acknowledged).
            match (acked_next, d.offset) {
                (Some(next), Some(failed)) => next > failed,
                (Some(_), None) => true,
                (None, _) => false,
            }
        } else {
            read || self
                .retried_at
                .is_some_and(|at| now.duration_since(at) >= READ_RECOVERED_AFTER)
        };
        if !recovered {
            return None;
        }
        self.backoff = RETRY_FIRST;
        self.retried_at = None;
        self.degraded.take()
    }
}

/// A failure of the flow's own reads that names no partition (all brokers down, an
/// authentication failure): the flow is marked degraded until it reads again.
#[derive(Debug, Clone, Default)]
pub struct FlowHealth {
    degraded: Option<Degraded>,
}

impl FlowHealth {
    /// The degraded mark, if any.
    pub fn degraded(&self) -> Option<&Degraded> {
        self.degraded.as_ref()
    }

    /// Records a failure; every one counts (there is no retry cycle to fold them into).
    pub fn failed(&mut self, reason: Reason, error: String, now_ms: i64) -> Change {
        match &mut self.degraded {
            None => {
                self.degraded = Some(Degraded {
                    reason,
                    error,
                    since_ms: now_ms,
                    retries: 0,
                    offset: None,
                    origin: Origin::Read,
                });
                Change::Degraded
            }
            Some(d) => {
                d.retries += 1;
                let old = d.reason;
                d.reason = reason;
                d.error = error;
                if old == reason {
                    Change::StillFailing
                } else {
                    Change::ReasonChanged(old)
                }
            }
        }
    }

    /// The source answered (a record read, topics listed): returns the cleared mark, if any.
    pub fn answered(&mut self) -> Option<Degraded> {
        self.degraded.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_map_to_reasons() {
        use RDKafkaErrorCode as C;
        let delivery = [
            (C::MessageSizeTooLarge, "record_too_large"),
            (C::MessageBatchTooLarge, "record_too_large"),
            (C::TopicAuthorizationFailed, "authorization"),
            (C::ClusterAuthorizationFailed, "authorization"),
            (C::UnknownTopicOrPartition, "unknown_topic"),
            (C::UnknownPartition, "unknown_topic"),
            (C::MessageTimedOut, "produce"),
            (C::NotEnoughReplicas, "produce"),
        ];
        for (code, want) in delivery {
            assert_eq!(Reason::of_delivery(code).as_str(), want, "{code:?}");
        }
        let read = [
            (C::BadCompression, "decompression"),
            (C::BadMessage, "corrupt"),
            (C::InvalidRecord, "corrupt"),
            (C::TopicAuthorizationFailed, "authorization"),
            (C::GroupAuthorizationFailed, "authorization"),
            (C::UnknownTopic, "unknown_topic"),
            (C::UnknownTopicOrPartition, "unknown_topic"),
            (C::AllBrokersDown, "fetch"),
            (C::OffsetOutOfRange, "fetch"),
        ];
        for (code, want) in read {
            assert_eq!(Reason::of_read(code).as_str(), want, "{code:?}");
        }
    }

    fn fail(h: &mut PartitionHealth, reason: Reason, offset: i64) -> Option<Change> {
        h.failed(
            Origin::Delivery,
            reason,
            format!("{} at {offset}", reason.as_str()),
            Some(offset),
            1_000,
        )
    }

    /// First failure, failed retries, a change of reason, recovery: which are transitions.
    #[test]
    fn a_cause_is_a_transition_once_and_retries_are_not() {
        let t0 = Instant::now();
        let mut h = PartitionHealth::default();
        assert!(h.flowing());
        assert_eq!(
            fail(&mut h, Reason::RecordTooLarge, 42),
            Some(Change::Degraded)
        );
        assert_eq!(h.phase(), Phase::Draining);
        // The rest of the failed attempt reports the same cause: not another failure event.
        assert_eq!(fail(&mut h, Reason::RecordTooLarge, 43), None);
        assert_eq!(h.drained(t0), RETRY_FIRST);
        assert_eq!(fail(&mut h, Reason::RecordTooLarge, 44), None, "waiting");
        assert!(!h.retry_due(t0 + Duration::from_secs(4)));
        assert!(h.retry_due(t0 + RETRY_FIRST));
        h.retrying(t0 + RETRY_FIRST);
        assert_eq!(
            fail(&mut h, Reason::RecordTooLarge, 42),
            Some(Change::StillFailing)
        );
        h.drained(t0);
        h.retrying(t0);
        assert_eq!(
            fail(&mut h, Reason::Produce, 42),
            Some(Change::ReasonChanged(Reason::RecordTooLarge))
        );
        let d = h.degraded().expect("degraded").clone();
        assert_eq!(
            (d.reason, d.retries, d.offset, d.since_ms),
            (Reason::Produce, 2, Some(42), 1_000)
        );
        assert_eq!(d.error, "produce at 42");
    }

    #[test]
    fn a_stopped_partition_is_never_retried_nor_recovered() {
        let t0 = Instant::now();
        let mut h = PartitionHealth::default();
        assert_eq!(
            fail(&mut h, Reason::UnknownTopic, 7),
            Some(Change::Degraded)
        );
        assert_eq!(
            h.stop(Reason::Recreated, "recreated".into(), Some(100), 2_000),
            Some(Change::ReasonChanged(Reason::UnknownTopic))
        );
        assert!(h.stopped() && !h.flowing());
        assert_eq!(h.stop(Reason::Recreated, "again".into(), None, 3_000), None);
        // Failures of records still in flight do not count, no retry comes due, and progress
        // does not clear the mark.
        assert_eq!(fail(&mut h, Reason::Produce, 101), None);
        assert!(!h.retry_due(t0 + RETRY_MAX * 2));
        assert_eq!(h.progressed(Some(200), true, t0 + RETRY_MAX), None);
        let d = h.degraded().expect("degraded");
        assert_eq!(
            (d.reason, d.offset, d.error.as_str()),
            (Reason::Recreated, Some(100), "recreated")
        );
        let mut fresh = PartitionHealth::default();
        assert_eq!(
            fresh.stop(Reason::Recreated, "past the end".into(), None, 1),
            Some(Change::Degraded)
        );
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_resets_on_recovery() {
        let t0 = Instant::now();
        let mut h = PartitionHealth::default();
        let mut waits = Vec::new();
        for _ in 0..9 {
            fail(&mut h, Reason::Produce, 7);
            waits.push(h.drained(t0).as_secs());
            h.retrying(t0);
        }
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        // Acknowledged up to the failed record, not past it: still degraded.
        assert_eq!(h.progressed(Some(7), false, t0), None);
        let cleared = h.progressed(Some(8), false, t0).expect("recovered");
        assert_eq!(cleared.retries, 8);
        assert!(h.degraded().is_none());
        // Healthy again: nothing to clear, and the next failure starts over.
        assert_eq!(h.progressed(Some(9), true, t0), None);
        fail(&mut h, Reason::Produce, 9);
        assert_eq!(h.drained(t0), RETRY_FIRST);
    }

    #[test]
    fn no_recovery_while_not_flowing() {
        let t0 = Instant::now();
        let mut h = PartitionHealth::default();
        fail(&mut h, Reason::Produce, 3);
        // Records acknowledged while draining were sent before the failure.
        assert_eq!(h.progressed(Some(10), true, t0), None);
        h.drained(t0);
        assert_eq!(h.progressed(Some(10), true, t0), None);
    }

    #[test]
    fn a_read_failure_recovers_on_a_read_or_after_a_quiet_retry() {
        let t0 = Instant::now();
        let mut h = PartitionHealth::default();
        let read_fail = |h: &mut PartitionHealth| {
            h.failed(
                Origin::Read,
                Reason::Authorization,
                "Broker: Topic authorization failed".into(),
                Some(5),
                0,
            )
        };
        assert_eq!(read_fail(&mut h), Some(Change::Degraded));
        h.drained(t0);
        h.retrying(t0);
        // Acknowledgements do not prove the source can be read.
        assert_eq!(h.progressed(Some(100), false, t0), None);
        assert!(h.progressed(None, true, t0).is_some(), "a record was read");
        assert_eq!(read_fail(&mut h), Some(Change::Degraded));
        h.drained(t0);
        h.retrying(t0);
        assert_eq!(
            h.progressed(None, false, t0 + READ_RECOVERED_AFTER / 2),
            None
        );
        assert!(h
            .progressed(None, false, t0 + READ_RECOVERED_AFTER)
            .is_some());
    }

    #[test]
    fn flow_wide_failures_count_each_and_clear_on_an_answer() {
        let mut f = FlowHealth::default();
        assert_eq!(f.answered(), None);
        assert_eq!(
            f.failed(Reason::Fetch, "all brokers down".into(), 5),
            Change::Degraded
        );
        assert_eq!(
            f.failed(Reason::Fetch, "all brokers down".into(), 6),
            Change::StillFailing
        );
        assert_eq!(
            f.failed(Reason::Authorization, "SASL".into(), 7),
            Change::ReasonChanged(Reason::Fetch)
        );
        let d = f.answered().expect("cleared");
        assert_eq!(
            (d.reason, d.retries, d.since_ms),
            (Reason::Authorization, 2, 5)
        );
        assert!(f.degraded().is_none());
    }
}
