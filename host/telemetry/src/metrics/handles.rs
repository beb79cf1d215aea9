//! The lock-free series handles: counters, gauges and histograms, each an atomic cell shared
//! with the registry, which renders it. Apart from the registry because these are what the
//! per-record hot path touches.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Handle to a monotonically increasing `u64` counter series.
#[derive(Debug, Clone)]
pub struct Counter(pub(super) Arc<AtomicU64>);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.inc_by(1);
    }

    /// Adds `n`.
    pub fn inc_by(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Handle to a gauge series: an `f64` that can be set or moved either way.
///
/// Integers are stored as `f64`, exact up to 2^53.
#[derive(Debug, Clone)]
pub struct Gauge(pub(super) Arc<AtomicU64>);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }

    /// Adds `delta` (negative to subtract).
    pub fn add(&self, delta: f64) {
        add_f64(&self.0, delta);
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
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

fn add_f64(cell: &AtomicU64, delta: f64) {
    // The closure always returns Some, so this cannot fail; the Err arm is unreachable.
    let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
        Some((f64::from_bits(bits) + delta).to_bits())
    });
}
/// Handle to a histogram series with the fixed bucket bounds given at registration.
///
/// Bounds are inclusive upper limits (`le`); `+Inf` is implicit. `NaN` observations are ignored.
#[derive(Debug, Clone)]
pub struct Histogram(pub(super) Arc<HistogramCell>);

#[derive(Debug)]
pub(super) struct HistogramCell {
    pub(super) bounds: Arc<[f64]>,
    /// Per-bucket (not cumulative) counts; the last one is the `+Inf` overflow bucket.
    pub(super) counts: Box<[AtomicU64]>,
    pub(super) sum: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, v: f64) {
        if v.is_nan() {
            return;
        }
        let cell = &self.0;
        let bucket = cell.bounds.partition_point(|&le| le < v);
        cell.counts[bucket].fetch_add(1, Ordering::Relaxed);
        add_f64(&cell.sum, v);
    }

    /// Records a duration in seconds.
    pub fn observe_duration(&self, d: Duration) {
        self.observe(d.as_secs_f64());
    }

    /// Number of observations so far.
    pub fn count(&self) -> u64 {
        self.0
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// Sum of observations so far.
    pub fn sum(&self) -> f64 {
        f64::from_bits(self.0.sum.load(Ordering::Relaxed))
    }
}
