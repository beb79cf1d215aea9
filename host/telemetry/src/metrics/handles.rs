//! The series handles the hot path keeps: counters, gauges and histograms. Each wraps the
//! `prometheus` crate's own (lock-free, shared with the family that renders it) and keeps
//! refract's small API over it: integer helpers for gauges, durations for histograms, and
//! histograms that ignore `NaN`. Apart from the registry because these are what the per-record
//! hot path touches.

use std::time::Duration;

/// Handle to a monotonically increasing `u64` counter series.
#[derive(Debug, Clone)]
pub struct Counter(pub(super) prometheus::IntCounter);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.inc();
    }

    /// Adds `n`.
    pub fn inc_by(&self, n: u64) {
        self.0.inc_by(n);
    }

    /// Current value.
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

/// Handle to a counter of time spent, exposed in seconds.
#[derive(Debug, Clone)]
pub struct SecondsCounter(pub(super) prometheus::Counter);

impl SecondsCounter {
    /// Adds `d`.
    pub fn add(&self, d: Duration) {
        self.0.inc_by(d.as_secs_f64());
    }

    /// Current value, in seconds.
    pub fn get(&self) -> f64 {
        self.0.get()
    }
}

/// Handle to a gauge series: an `f64` that can be set or moved either way.
///
/// Integers are stored as `f64`, exact up to 2^53.
#[derive(Debug, Clone)]
pub struct Gauge(pub(super) prometheus::Gauge);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, v: f64) {
        self.0.set(v);
    }

    /// Adds `delta` (negative to subtract).
    pub fn add(&self, delta: f64) {
        self.0.add(delta);
    }

    /// Sets the value from an integer.
    pub fn set_i64(&self, v: i64) {
        self.set(v as f64);
    }

    /// Adds an integer `delta` (negative to subtract).
    pub fn add_i64(&self, delta: i64) {
        self.add(delta as f64);
    }

    /// Current value.
    pub fn get(&self) -> f64 {
        self.0.get()
    }
}

/// Handle to a histogram series with the fixed bucket bounds given at registration.
///
/// Bounds are inclusive upper limits (`le`); `+Inf` is implicit. `NaN` observations are
/// ignored (the crate would count them in `+Inf` and turn the sum into `NaN`).
#[derive(Debug, Clone)]
pub struct Histogram(pub(super) prometheus::Histogram);

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, v: f64) {
        if !v.is_nan() {
            self.0.observe(v);
        }
    }

    /// Records a duration in seconds.
    pub fn observe_duration(&self, d: Duration) {
        self.observe(d.as_secs_f64());
    }

    /// Number of observations so far.
    pub fn count(&self) -> u64 {
        self.0.get_sample_count()
    }

    /// Sum of observations so far.
    pub fn sum(&self) -> f64 {
        self.0.get_sample_sum()
    }
}
