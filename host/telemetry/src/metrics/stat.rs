//! MirrorMaker 2 style stats: one recorded value feeding Value/Min/Max/Avg over a sliding
//! window of slots, and the batches that hand a hot path's observations over at once. Apart from
//! the registry because the window arithmetic is the subtle part and is tested on its own.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::clock::duration_nanos;
use super::Clock;

/// Default span over which a [`Stat`]'s min/max/avg are computed (Kafka's default sample window).
pub const DEFAULT_STAT_WINDOW: Duration = Duration::from_secs(30);

/// Number of slots a stat window is divided into; see [`Stat`] for what that means for expiry.
pub const STAT_SLOTS: usize = 6;
/// Handle to a MirrorMaker 2 style stat: one [`record`](Stat::record) feeds the four exposed
/// families `<name>` (last recorded value), `<name>_min`, `<name>_max` and `<name>_avg`.
///
/// Window: the stat window (30 s by default) is divided into [`STAT_SLOTS`] slots of
/// window/6 (5 s) aligned to the clock's origin. Min/max/avg combine the samples of the slot
/// the clock is in now and of the 5 slots before it, so they cover the last 25–30 s: a sample
/// stops counting once 6 slot boundaries have passed since it was recorded. With no sample in
/// that span they are `NaN`, as Kafka reports them. (Kafka's own default keeps 2 samples of
/// 30 s, i.e. 30–60 s of history; finer slots track recent behaviour more closely.) The value
/// is `NaN` until the first record and then stays at the last recorded value regardless of age.
/// `NaN` inputs are ignored.
#[derive(Clone)]
pub struct Stat(pub(super) Arc<StatCell>);

/// What a [`Stat`] currently reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatSnapshot {
    /// Last recorded value (`NaN` before the first record).
    pub value: f64,
    /// Minimum over the window (`NaN` if the window is empty).
    pub min: f64,
    /// Maximum over the window (`NaN` if the window is empty).
    pub max: f64,
    /// Mean over the window (`NaN` if the window is empty).
    pub avg: f64,
}

impl Stat {
    /// Records one observation.
    pub fn record(&self, v: f64) {
        self.0.record(v);
    }

    /// What the stat reports right now.
    pub fn snapshot(&self) -> StatSnapshot {
        self.0.snapshot()
    }

    /// Adds every observation gathered in `batch` at once (one lock, one clock read) and empties
    /// it; the result is the same as recording each value in turn now.
    pub fn record_all(&self, batch: &mut StatBatch) {
        if batch.count > 0 {
            self.0.merge(batch);
        }
        *batch = StatBatch::new();
    }
}

/// Observations of one [`Stat`] gathered by a single thread without locking or reading the
/// clock, for per-record series on a hot path; hand them over with [`Stat::record_all`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatBatch {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    last: f64,
}

impl Default for StatBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl StatBatch {
    /// An empty batch.
    pub const fn new() -> Self {
        Self {
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            last: f64::NAN,
        }
    }

    /// Gathers one observation (`NaN` is ignored, as by [`Stat::record`]).
    pub fn record(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.last = v;
    }

    /// Observations gathered since the last hand-over.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether nothing was gathered since the last hand-over.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl fmt::Debug for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Stat").field(&self.snapshot()).finish()
    }
}

pub(super) struct StatCell {
    clock: Arc<dyn Clock>,
    slot_nanos: u64,
    state: Mutex<StatState>,
}

struct StatState {
    last: f64,
    slots: [Slot; STAT_SLOTS],
}

#[derive(Clone, Copy)]
struct Slot {
    /// Index of the slot-length period this slot holds samples of; `u64::MAX` = never used.
    epoch: u64,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl Slot {
    const UNUSED: Slot = Slot {
        epoch: u64::MAX,
        count: 0,
        sum: 0.0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
    };
}

impl StatCell {
    pub(super) fn new(clock: Arc<dyn Clock>, window: Duration) -> Self {
        Self {
            clock,
            slot_nanos: (duration_nanos(window) / STAT_SLOTS as u64).max(1),
            state: Mutex::new(StatState {
                last: f64::NAN,
                slots: [Slot::UNUSED; STAT_SLOTS],
            }),
        }
    }

    fn epoch_now(&self) -> u64 {
        duration_nanos(self.clock.now()) / self.slot_nanos
    }

    fn lock(&self) -> MutexGuard<'_, StatState> {
        // The critical sections cannot panic, but never let a poisoned lock stop metrics.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record(&self, v: f64) {
        let mut one = StatBatch::new();
        one.record(v);
        if !one.is_empty() {
            self.merge(&one);
        }
    }

    fn merge(&self, batch: &StatBatch) {
        let epoch = self.epoch_now();
        let mut state = self.lock();
        state.last = batch.last;
        let slot = &mut state.slots[(epoch % STAT_SLOTS as u64) as usize];
        if slot.epoch != epoch {
            *slot = Slot {
                epoch,
                ..Slot::UNUSED
            };
        }
        slot.count += batch.count;
        slot.sum += batch.sum;
        slot.min = slot.min.min(batch.min);
        slot.max = slot.max.max(batch.max);
    }

    pub(super) fn snapshot(&self) -> StatSnapshot {
        let now = self.epoch_now();
        let state = self.lock();
        let (mut count, mut sum) = (0u64, 0.0);
        let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
        for slot in &state.slots {
            let live = slot.epoch <= now && now - slot.epoch < STAT_SLOTS as u64;
            if live && slot.count > 0 {
                count += slot.count;
                sum += slot.sum;
                min = min.min(slot.min);
                max = max.max(slot.max);
            }
        }
        if count == 0 {
            return StatSnapshot {
                value: state.last,
                min: f64::NAN,
                max: f64::NAN,
                avg: f64::NAN,
            };
        }
        StatSnapshot {
            value: state.last,
            min,
            max,
            avg: sum / count as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{ManualClock, Metrics};

    fn manual() -> (Arc<ManualClock>, Metrics) {
        let clock = Arc::new(ManualClock::new());
        let metrics = Metrics::with_clock(clock.clone(), Duration::from_secs(30));
        (clock, metrics)
    }
    #[test]
    fn stat_value_min_max_avg() {
        let (_clock, m) = manual();
        let s = m.stat("lat_ms", "Latency in ms.", &[("p", "0")]).unwrap();
        let empty = s.snapshot();
        assert!(empty.value.is_nan() && empty.min.is_nan() && empty.max.is_nan());
        assert!(empty.avg.is_nan());
        for v in [5.0, 1.0, 9.0, f64::NAN] {
            s.record(v);
        }
        assert_eq!(
            s.snapshot(),
            StatSnapshot {
                value: 9.0,
                min: 1.0,
                max: 9.0,
                avg: 5.0
            }
        );
        let expected = "\
# HELP lat_ms Latency in ms. (last recorded value)
# TYPE lat_ms gauge
lat_ms{p=\"0\"} 9
# HELP lat_ms_avg Latency in ms. (average over the last 30s)
# TYPE lat_ms_avg gauge
lat_ms_avg{p=\"0\"} 5
# HELP lat_ms_max Latency in ms. (maximum over the last 30s)
# TYPE lat_ms_max gauge
lat_ms_max{p=\"0\"} 9
# HELP lat_ms_min Latency in ms. (minimum over the last 30s)
# TYPE lat_ms_min gauge
lat_ms_min{p=\"0\"} 1
";
        assert_eq!(m.render(), expected);
    }

    #[test]
    fn stat_batch_equals_recording_each_value() {
        let (clock, m) = manual();
        let one = m.stat("one", "h", &[]).unwrap();
        let all = m.stat("all", "h", &[]).unwrap();
        let mut batch = StatBatch::new();
        assert!(batch.is_empty());
        for v in [5.0, f64::NAN, -2.0, 9.5, 3.0] {
            one.record(v);
            batch.record(v);
        }
        assert_eq!(batch.len(), 4);
        all.record_all(&mut batch);
        assert!(batch.is_empty(), "handing over empties the batch");
        assert_eq!(one.snapshot(), all.snapshot());
        assert_eq!(
            all.snapshot(),
            StatSnapshot {
                value: 3.0,
                min: -2.0,
                max: 9.5,
                avg: 15.5 / 4.0
            }
        );
        // An empty hand-over changes nothing; a later one lands in the slot it is made in.
        all.record_all(&mut batch);
        assert_eq!(one.snapshot(), all.snapshot());
        clock.advance(Duration::from_secs(31));
        batch.record(1.0);
        all.record_all(&mut batch);
        let snap = all.snapshot();
        assert_eq!(
            (snap.value, snap.min, snap.max, snap.avg),
            (1.0, 1.0, 1.0, 1.0)
        );
    }

    #[test]
    fn stat_window_expires_per_slot() {
        let (clock, m) = manual();
        let s = m.stat("s", "h", &[]).unwrap();
        s.record(100.0); // slot 0 (0–5 s)
        clock.advance(Duration::from_secs(20));
        s.record(1.0); // slot 4 (20–25 s)
        let snap = s.snapshot();
        assert_eq!((snap.min, snap.max, snap.avg), (1.0, 100.0, 50.5));
        // At 29.9 s slot 0 is still among the last 6 slots.
        clock.advance(Duration::from_millis(9_900));
        assert_eq!(s.snapshot().max, 100.0);
        // At 30 s slot 0 has left the window; slot 4 has not.
        clock.advance(Duration::from_millis(100));
        let snap = s.snapshot();
        assert_eq!(
            (snap.value, snap.min, snap.max, snap.avg),
            (1.0, 1.0, 1.0, 1.0)
        );
        // A slot index reused by a later period starts from scratch.
        s.record(7.0); // slot 6 → ring position 0
        assert_eq!((s.snapshot().min, s.snapshot().max), (1.0, 7.0));
        clock.advance(Duration::from_secs(60));
        let snap = s.snapshot();
        assert_eq!(snap.value, 7.0);
        assert!(snap.min.is_nan() && snap.max.is_nan() && snap.avg.is_nan());
        assert!(m.render().contains("s_min NaN\n"));
    }
}
