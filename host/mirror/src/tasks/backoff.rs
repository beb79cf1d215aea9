//! The pause between attempts of something that keeps failing (a task that errors, a process
//! joining its flow's group): shared by the task supervisor and cluster-mode membership so both
//! back off the same way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Longest pause between restarts of a failing task (or attempts to join a group).
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The pause before the next attempt after a failure: 1 s, doubling up to [`MAX_BACKOFF`],
/// back to 1 s after an attempt that lasted long enough to count as recovered.
pub(crate) struct Backoff {
    next: Duration,
    started: Instant,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Self {
            next: Duration::from_secs(1),
            started: Instant::now(),
        }
    }

    /// An attempt starts now.
    pub(crate) fn attempt(&mut self) {
        self.started = Instant::now();
    }

    /// How long the pause after the attempt that just failed is.
    pub(crate) fn pause(&mut self) -> Duration {
        if self.started.elapsed() > MAX_BACKOFF * 2 {
            self.next = Duration::from_secs(1);
        }
        self.next
    }

    /// Waits the pause (see [`Backoff::pause`]) unless `stop` is set first; returns whether
    /// it was.
    pub(crate) fn wait(&mut self, stop: &AtomicBool) -> bool {
        let until = Instant::now() + self.pause();
        self.next = (self.next * 2).min(MAX_BACKOFF);
        while Instant::now() < until {
            if stop.load(Ordering::Relaxed) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.load(Ordering::Relaxed)
    }
}
