//! Where stat windows get their time: the [`Clock`] trait, the monotonic clock the registry uses
//! by default and the manual clock tests move by hand. Apart from the registry so the stats'
//! window arithmetic and its tests can share one notion of "now".

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Monotonic time source for stat windows; injectable so tests can move time by hand.
pub trait Clock: Send + Sync {
    /// Time elapsed since an arbitrary fixed origin; must never go backwards.
    fn now(&self) -> Duration;
}

/// [`Clock`] backed by [`Instant`]; the default.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// [`Clock`] that only moves when told to; for tests of window expiry.
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock standing at its origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.nanos.fetch_add(duration_nanos(by), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

/// `d` in nanoseconds, saturating at `u64::MAX`.
pub(super) fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
