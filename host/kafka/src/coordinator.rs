//! Requests to a group coordinator that may not be ready yet. A freshly started cluster's group
//! coordinator does not answer when its port opens: FindCoordinator, OffsetFetch and
//! OffsetCommit get `COORDINATOR_NOT_AVAILABLE`, `NOT_COORDINATOR` or
//! `COORDINATOR_LOAD_IN_PROGRESS` for a few seconds (longer under load), and librdkafka fails a
//! committed-offsets request at once with its own `_WAIT_COORD` while it knows no coordinator.
//! Those answers are retried here after a short pause, so a flow that starts next to a fresh
//! cluster reads its positions within moments of the coordinator's readiness instead of at its
//! next topic discovery.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;

/// The first pause after an answer that the coordinator is not ready.
pub const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two attempts.
pub const MAX_PAUSE: Duration = Duration::from_secs(2);
/// How long a request is retried in all while the coordinator is not ready.
pub const RETRY_FOR: Duration = Duration::from_secs(30);

/// Whether `code` says the group coordinator is not ready yet (being elected, loading its
/// partition of `__consumer_offsets`, or not known to librdkafka yet): asking again soon
/// succeeds.
pub fn not_ready(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::WaitingForCoordinator
            | RDKafkaErrorCode::CoordinatorLoadInProgress
            | RDKafkaErrorCode::CoordinatorNotAvailable
            | RDKafkaErrorCode::NotCoordinator
    )
}

/// The pauses between attempts: [`FIRST_PAUSE`], doubling up to [`MAX_PAUSE`], for as long as
/// they add up to no more than `budget`.
pub fn pauses(budget: Duration) -> impl Iterator<Item = Duration> {
    let mut total = Duration::ZERO;
    std::iter::successors(Some(FIRST_PAUSE), |p| Some((*p * 2).min(MAX_PAUSE))).map_while(
        move |p| {
            total += p;
            (total <= budget).then_some(p)
        },
    )
}

/// Runs `attempt` until it succeeds, fails for another reason than a coordinator that is not
/// ready ([`not_ready`]), `stop` is set, or the pauses of [`pauses`]`(budget)` are used up;
/// returns its last result. `waiting` is called once, with the first not-ready error, before
/// the first pause (to say so once).
pub fn retry_while_not_ready<T>(
    budget: Duration,
    stop: &AtomicBool,
    mut attempt: impl FnMut() -> KafkaResult<T>,
    waiting: impl FnOnce(&KafkaError),
) -> KafkaResult<T> {
    let mut waiting = Some(waiting);
    let mut pauses = pauses(budget);
    loop {
        let e = match attempt() {
            Err(e) if e.rdkafka_error_code().is_some_and(not_ready) => e,
            done => return done,
        };
        let Some(pause) = pauses.next() else {
            return Err(e);
        };
        if let Some(say) = waiting.take() {
            say(&e);
        }
        let until = Instant::now() + pause;
        while Instant::now() < until {
            if stop.load(Ordering::Relaxed) {
                return Err(e);
            }
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
        }
    }
}

/// The offsets committed for `tpl` in `consumer`'s group, asked again while the coordinator is
/// not ready (for at most [`RETRY_FOR`], see [`retry_while_not_ready`]). A partition-level
/// not-ready error counts as the request's: its offset would otherwise read as "none".
pub fn committed_offsets<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    tpl: &TopicPartitionList,
    timeout: Duration,
    stop: &AtomicBool,
    waiting: impl FnOnce(&KafkaError),
) -> KafkaResult<TopicPartitionList> {
    retry_while_not_ready(
        RETRY_FOR,
        stop,
        || {
            let committed = consumer.committed_offsets(tpl.clone(), timeout)?;
            for elem in committed.elements() {
                if let Err(e) = elem.error() {
                    if e.rdkafka_error_code().is_some_and(not_ready) {
                        return Err(e);
                    }
                }
            }
            Ok(committed)
        },
        waiting,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn pauses_double_to_two_seconds_within_the_budget() {
        let ms = |b: u64| -> Vec<u128> {
            pauses(Duration::from_millis(b))
                .map(|p| p.as_millis())
                .collect()
        };
        assert_eq!(ms(0), Vec::<u128>::new());
        assert_eq!(ms(100), [100]);
        assert_eq!(ms(1_000), [100, 200, 400]);
        assert_eq!(ms(10_000), [100, 200, 400, 800, 1_600, 2_000, 2_000, 2_000]);
        let all: Duration = pauses(RETRY_FOR).sum();
        assert!(all <= RETRY_FOR && all > RETRY_FOR - MAX_PAUSE, "{all:?}");
    }

    #[test]
    fn only_a_coordinator_that_is_not_ready_is_retried() {
        use RDKafkaErrorCode::*;
        for code in [
            WaitingForCoordinator,
            CoordinatorLoadInProgress,
            CoordinatorNotAvailable,
            NotCoordinator,
        ] {
            assert!(not_ready(code), "{code:?}");
        }
        for code in [
            GroupAuthorizationFailed,
            TopicAuthorizationFailed,
            UnknownTopicOrPartition,
            OperationTimedOut,
            BrokerTransportFailure,
        ] {
            assert!(!not_ready(code), "{code:?}");
        }
    }

    #[test]
    fn retries_until_ready_and_says_so_once() {
        let stop = AtomicBool::new(false);
        let loading = || KafkaError::OffsetFetch(RDKafkaErrorCode::CoordinatorLoadInProgress);
        // Loading twice, then ready: three attempts, one notice.
        let calls = Cell::new(0);
        let told = Cell::new(0);
        let got = retry_while_not_ready(
            Duration::from_secs(1),
            &stop,
            || {
                calls.set(calls.get() + 1);
                if calls.get() < 3 {
                    Err(loading())
                } else {
                    Ok(7)
                }
            },
            |e| {
                assert_eq!(
                    e.rdkafka_error_code(),
                    Some(RDKafkaErrorCode::CoordinatorLoadInProgress)
                );
                told.set(told.get() + 1);
            },
        );
        assert_eq!((got.ok(), calls.get(), told.get()), (Some(7), 3, 1));
        // Another error: returned at once, nothing said.
        calls.set(0);
        let got: KafkaResult<()> = retry_while_not_ready(
            Duration::from_secs(1),
            &stop,
            || {
                calls.set(calls.get() + 1);
                Err(KafkaError::OffsetFetch(
                    RDKafkaErrorCode::GroupAuthorizationFailed,
                ))
            },
            |_| panic!("not a coordinator that is loading"),
        );
        assert_eq!(
            (got.err().and_then(|e| e.rdkafka_error_code()), calls.get()),
            (Some(RDKafkaErrorCode::GroupAuthorizationFailed), 1)
        );
        // Never ready: gives up once the budget's pauses (100 + 200 ms) are used up.
        calls.set(0);
        let started = Instant::now();
        let got: KafkaResult<()> = retry_while_not_ready(
            Duration::from_millis(300),
            &stop,
            || {
                calls.set(calls.get() + 1);
                Err(loading())
            },
            |_| {},
        );
        assert!(got.is_err());
        assert_eq!(calls.get(), 3);
        assert!(started.elapsed() >= Duration::from_millis(300));
        // Stopping ends the wait.
        stop.store(true, Ordering::Relaxed);
        calls.set(0);
        let got: KafkaResult<()> = retry_while_not_ready(
            RETRY_FOR,
            &stop,
            || {
                calls.set(calls.get() + 1);
                Err(loading())
            },
            |_| {},
        );
        assert!(got.is_err());
        assert_eq!(calls.get(), 1);
    }
}
