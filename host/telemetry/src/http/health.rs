//! `/health` without a handler thread: a thread of the endpoint's reads
//! [`Endpoints::health`] when a probe asks (and every [`HEALTH_REFRESH`] anyway) and publishes
//! the reading; a probe is answered on the endpoint's own thread from the published reading,
//! waiting at most [`FRESH_WAIT`] for one taken after it arrived. A probe therefore waits for
//! no handler thread, no queue and no lock that anyone holds longer than it takes to swap an
//! `Arc`, however many `/metrics` and `/status` requests arrive at once or however long a
//! reload runs; and in the usual case it still sees the state as of its own arrival.

use std::io;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hyper::body::Bytes;
use hyper::StatusCode;
use tokio::sync::watch;

use super::pool::Threads;
use super::{Endpoints, HANDLER_TIMEOUT};

/// How often the health is read when no probe asks.
pub const HEALTH_REFRESH: Duration = Duration::from_millis(250);
/// How long a probe waits for a reading taken after it arrived before it is answered from the
/// last one (the handler is slow).
pub const FRESH_WAIT: Duration = Duration::from_millis(100);
/// A reading older than this (the handler is stuck) is not trusted: `/health` is 503, as it
/// was when a handler did not answer within [`HANDLER_TIMEOUT`].
const HEALTH_STALE: Duration = HANDLER_TIMEOUT;
/// How long [`Health::start`] waits for the first reading, so that the first probe has one.
const FIRST_READ: Duration = Duration::from_secs(1);

/// One reading of the health.
struct Reading {
    healthy: bool,
    body: Bytes,
    /// When the read began: a probe that arrived before it may take it as fresh.
    started: Instant,
    /// When it ended.
    taken: Instant,
}

/// The last reading, published for the probes.
type Published = Option<Arc<Reading>>;

/// What the reading thread waits for.
#[derive(Default)]
struct Flags {
    /// A probe wants a fresh reading.
    asked: bool,
    stop: bool,
    /// Readings published so far.
    readings: u64,
}

/// Wakes the reading thread, and tells [`Health::start`] about the first reading.
#[derive(Default)]
struct Wake {
    flags: Mutex<Flags>,
    changed: Condvar,
}

impl Wake {
    fn lock(&self) -> MutexGuard<'_, Flags> {
        self.flags.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, f: impl FnOnce(&mut Flags)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }
}

/// The published health and the thread that reads it; stops on drop.
pub(super) struct Health {
    wake: Arc<Wake>,
    published: watch::Receiver<Published>,
    threads: Threads,
}

impl Health {
    /// Starts reading `handler`'s health; returns once the first reading is published (or
    /// after [`FIRST_READ`], if the handler is that slow). If the reading thread is still in
    /// the handler when dropped and the grace period is over, it is counted in `left_running`.
    pub(super) fn start(
        handler: Arc<dyn Endpoints>,
        left_running: &Arc<AtomicUsize>,
    ) -> io::Result<Self> {
        let wake = Arc::new(Wake::default());
        let (publish, published) = watch::channel(None);
        let mut threads = Threads::new(left_running);
        let reader = Arc::clone(&wake);
        threads.spawn("refract-http-health", move || {
            read(&*handler, &reader, &publish)
        })?;
        let flags = wake.lock();
        let _ = wake
            .changed
            .wait_timeout_while(flags, FIRST_READ, |f| f.readings == 0)
            .unwrap_or_else(|e| e.into_inner());
        Ok(Self {
            wake,
            published,
            threads,
        })
    }

    /// The answer to a probe: the status and body of a reading taken after it arrived, or of
    /// the last one if none comes within [`FRESH_WAIT`].
    pub(super) async fn answer(&self) -> (StatusCode, Bytes) {
        let arrived = Instant::now();
        self.wake.set(|f| f.asked = true);
        let mut published = self.published.clone();
        let fresh = |r: &Published| r.as_ref().is_some_and(|r| r.started >= arrived);
        let _ = tokio::time::timeout(FRESH_WAIT, published.wait_for(fresh)).await;
        let latest = published.borrow().clone();
        verdict(latest.as_deref(), Instant::now())
    }
}

impl Drop for Health {
    fn drop(&mut self) {
        self.wake.set(|f| f.stop = true);
        self.threads.join_within(Duration::from_secs(1));
    }
}

/// What a probe is told at `now` when `latest` is the last reading.
fn verdict(latest: Option<&Reading>, now: Instant) -> (StatusCode, Bytes) {
    match latest {
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Bytes::from_static(b"starting: the health has not been read yet\n"),
        ),
        Some(r) if now.saturating_duration_since(r.taken) > HEALTH_STALE => {
            let age = now.saturating_duration_since(r.taken).as_secs();
            let said = String::from_utf8_lossy(&r.body);
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from(format!(
                    "unknown: reading the health has taken over {HEALTH_STALE:?}; the last reading ({age} s ago) said:\n{said}"
                )),
            )
        }
        Some(r) if r.healthy => (StatusCode::OK, r.body.clone()),
        Some(r) => (StatusCode::SERVICE_UNAVAILABLE, r.body.clone()),
    }
}

/// The reading thread: reads and publishes when a probe asks or [`HEALTH_REFRESH`] has passed,
/// until stopped.
fn read(handler: &dyn Endpoints, wake: &Wake, publish: &watch::Sender<Published>) {
    let mut panicked = false;
    loop {
        let started = Instant::now();
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler.health()));
        let (healthy, body) = match read {
            Ok(answer) => {
                panicked = false;
                answer
            }
            Err(_) => {
                if !panicked {
                    tracing::error!("HTTP endpoint: the /health handler panicked");
                }
                panicked = true;
                (false, "internal error: the /health handler failed\n".into())
            }
        };
        publish.send_replace(Some(Arc::new(Reading {
            healthy,
            body: Bytes::from(body),
            started,
            taken: Instant::now(),
        })));
        let mut flags = wake.lock();
        flags.readings += 1;
        wake.changed.notify_all();
        let (mut flags, _) = wake
            .changed
            .wait_timeout_while(flags, HEALTH_REFRESH, |f| !f.asked && !f.stop)
            .unwrap_or_else(|e| e.into_inner());
        if flags.stop {
            return;
        }
        // Probes that ask from now on want a reading that starts after this point.
        flags.asked = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    #[derive(Default)]
    struct Probe {
        healthy: AtomicBool,
        reads: AtomicU32,
        /// Each read after the first blocks until this is false.
        stuck: AtomicBool,
    }

    impl Endpoints for Probe {
        fn metrics(&self) -> String {
            String::new()
        }
        fn health(&self) -> (bool, String) {
            let n = self.reads.fetch_add(1, Ordering::SeqCst);
            while n > 0 && self.stuck.load(Ordering::SeqCst) {
                std::thread::park_timeout(Duration::from_millis(5));
            }
            let healthy = self.healthy.load(Ordering::SeqCst);
            (healthy, format!("healthy {healthy}\n"))
        }
        fn reload(&self, _: bool) -> (bool, String) {
            (false, String::new())
        }
        fn status(&self) -> String {
            String::new()
        }
    }

    fn said(answer: (StatusCode, Bytes)) -> (u16, String) {
        (
            answer.0.as_u16(),
            String::from_utf8_lossy(&answer.1).into_owned(),
        )
    }

    #[tokio::test]
    async fn a_probe_sees_the_state_as_of_its_arrival() {
        let probe = Arc::new(Probe::default());
        probe.healthy.store(true, Ordering::SeqCst);
        let health = Health::start(probe.clone(), &Arc::default()).unwrap();
        assert_eq!(
            probe.reads.load(Ordering::SeqCst),
            1,
            "read before start returns"
        );
        assert_eq!(said(health.answer().await), (200, "healthy true\n".into()));
        for healthy in [false, true, false] {
            probe.healthy.store(healthy, Ordering::SeqCst);
            let asked = Instant::now();
            let answer = said(health.answer().await);
            assert_eq!(
                answer,
                (
                    if healthy { 200 } else { 503 },
                    format!("healthy {healthy}\n")
                )
            );
            assert!(asked.elapsed() < FRESH_WAIT, "{:?}", asked.elapsed());
        }
    }

    #[tokio::test]
    async fn a_stuck_handler_is_answered_from_the_last_reading() {
        let probe = Arc::new(Probe::default());
        probe.healthy.store(true, Ordering::SeqCst);
        probe.stuck.store(true, Ordering::SeqCst);
        let health = Health::start(probe.clone(), &Arc::default()).unwrap();
        // The second read never ends: each probe waits FRESH_WAIT, then gets the first.
        for _ in 0..3 {
            let asked = Instant::now();
            assert_eq!(said(health.answer().await), (200, "healthy true\n".into()));
            let took = asked.elapsed();
            assert!(took >= FRESH_WAIT && took < FRESH_WAIT * 5, "{took:?}");
        }
        probe.stuck.store(false, Ordering::SeqCst);
    }

    #[test]
    fn verdicts() {
        let now = Instant::now();
        let reading = |healthy, age: Duration| Reading {
            healthy,
            body: Bytes::from_static(b"a->b: running\n"),
            started: now - age,
            taken: now - age,
        };
        let cases = [
            (None, 503, "starting: the health has not been read yet\n"),
            (Some(reading(true, Duration::ZERO)), 200, "a->b: running\n"),
            (Some(reading(false, Duration::ZERO)), 503, "a->b: running\n"),
            (Some(reading(true, HEALTH_STALE)), 200, "a->b: running\n"),
            (
                Some(reading(true, HEALTH_STALE + Duration::from_secs(2))),
                503,
                "unknown: reading the health has taken over 5s; the last reading (7 s ago) said:\na->b: running\n",
            ),
        ];
        for (latest, status, body) in cases {
            assert_eq!(said(verdict(latest.as_ref(), now)), (status, body.into()));
        }
    }
}
