//! `/health` without a handler thread: a thread of the endpoint's asks [`Endpoints::health`]
//! every [`HEALTH_REFRESH`] and publishes the answer, and a probe is answered on the endpoint's
//! own thread from the last one published. A probe therefore waits for no handler thread, no
//! queue and no lock that anyone holds longer than it takes to swap an `Arc`, however many
//! `/metrics` and `/status` requests arrive at once or however long a reload runs.

use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hyper::body::Bytes;
use hyper::StatusCode;

use super::pool::Threads;
use super::{Endpoints, HANDLER_TIMEOUT};

/// How often the health is read; a probe's answer is at most this old.
pub const HEALTH_REFRESH: Duration = Duration::from_millis(250);
/// A health read older than this (the handler is stuck) is not trusted: `/health` is 503, as it
/// was when a handler did not answer within [`HANDLER_TIMEOUT`].
const HEALTH_STALE: Duration = HANDLER_TIMEOUT;
/// How long [`Health::start`] waits for the first read, so that the first probe has an answer.
const FIRST_READ: Duration = Duration::from_secs(1);

/// One read of the health.
struct Reading {
    healthy: bool,
    body: Bytes,
    taken: Instant,
}

#[derive(Default)]
struct Inner {
    latest: Option<Arc<Reading>>,
    stop: bool,
}

/// What the reading thread and the probes share.
#[derive(Default)]
struct State {
    inner: Mutex<Inner>,
    /// A new reading, or the stop.
    changed: Condvar,
}

impl State {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The published health and the thread that keeps it fresh; stops on drop.
pub(super) struct Health {
    state: Arc<State>,
    threads: Threads,
}

impl Health {
    /// Starts reading `handler`'s health; returns once the first reading is published (or
    /// after [`FIRST_READ`], if the handler is that slow).
    pub(super) fn start(handler: Arc<dyn Endpoints>) -> io::Result<Self> {
        let state = Arc::new(State::default());
        let mut threads = Threads::new();
        let reader = Arc::clone(&state);
        threads.spawn("refract-http-health", move || read(&*handler, &reader))?;
        let guard = state.lock();
        let _ = state
            .changed
            .wait_timeout_while(guard, FIRST_READ, |i| i.latest.is_none())
            .unwrap_or_else(|e| e.into_inner());
        Ok(Self { state, threads })
    }

    /// The answer to a probe: the status and body of the last reading.
    pub(super) fn answer(&self) -> (StatusCode, Bytes) {
        let latest = self.state.lock().latest.clone();
        match latest {
            None => (
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"starting: the health has not been read yet\n"),
            ),
            Some(r) if r.taken.elapsed() > HEALTH_STALE => {
                let age = r.taken.elapsed().as_secs();
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
}

impl Drop for Health {
    fn drop(&mut self) {
        self.state.lock().stop = true;
        self.state.changed.notify_all();
        self.threads.join_within(Duration::from_secs(1));
    }
}

/// The reading thread: reads, publishes, waits [`HEALTH_REFRESH`], until stopped.
fn read(handler: &dyn Endpoints, state: &State) {
    let mut panicked = false;
    loop {
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
        let reading = Arc::new(Reading {
            healthy,
            body: Bytes::from(body),
            taken: Instant::now(),
        });
        let mut inner = state.lock();
        inner.latest = Some(reading);
        state.changed.notify_all();
        let (inner, _) = state
            .changed
            .wait_timeout_while(inner, HEALTH_REFRESH, |i| !i.stop)
            .unwrap_or_else(|e| e.into_inner());
        if inner.stop {
            return;
        }
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

    #[test]
    fn the_first_reading_is_there_at_start_and_changes_show_within_the_refresh() {
        let probe = Arc::new(Probe::default());
        probe.healthy.store(true, Ordering::SeqCst);
        let health = Health::start(probe.clone()).unwrap();
        assert_eq!(
            health.answer(),
            (StatusCode::OK, Bytes::from_static(b"healthy true\n"))
        );
        probe.healthy.store(false, Ordering::SeqCst);
        let changed = Instant::now();
        let until = changed + Duration::from_secs(10);
        while health.answer().0 == StatusCode::OK {
            assert!(Instant::now() < until, "the change never showed");
            std::thread::yield_now();
        }
        assert!(
            changed.elapsed() < HEALTH_REFRESH * 4,
            "{:?}",
            changed.elapsed()
        );
        assert_eq!(
            health.answer(),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"healthy false\n")
            )
        );
    }

    #[test]
    fn a_stuck_handler_is_answered_from_the_last_reading_then_as_unknown() {
        let probe = Arc::new(Probe::default());
        probe.healthy.store(true, Ordering::SeqCst);
        probe.stuck.store(true, Ordering::SeqCst);
        let health = Health::start(probe.clone()).unwrap();
        // The second read is stuck: probes are answered at once from the first.
        let started = Instant::now();
        for _ in 0..100 {
            assert_eq!(health.answer().0, StatusCode::OK);
        }
        assert!(started.elapsed() < Duration::from_millis(100));
        // Pretend the reading is older than the staleness limit.
        {
            let mut inner = health.state.lock();
            let old = inner.latest.take().unwrap();
            inner.latest = Some(Arc::new(Reading {
                healthy: true,
                body: old.body.clone(),
                taken: Instant::now()
                    .checked_sub(HEALTH_STALE + Duration::from_secs(1))
                    .unwrap(),
            }));
        }
        let (status, body) = health.answer();
        let body = String::from_utf8_lossy(&body).into_owned();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            body.starts_with("unknown: reading the health has taken over 5s")
                && body.ends_with("said:\nhealthy true\n"),
            "{body}"
        );
        probe.stuck.store(false, Ordering::SeqCst);
        drop(health);
    }
}
