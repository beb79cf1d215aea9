//! A flow's read rate limit (`max_bytes_per_second`, `max_records_per_second`): a token bucket
//! per task, on the record thread, holding one second's worth. The flow's limit is divided
//! evenly among its tasks (in cluster mode too, so the processes together keep it); within a
//! task the consumer's fetches, which take every assigned partition in turn, keep it fair across
//! partitions. A reload changes the limit live: the buckets read it before every batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use refract_config::Throttle;

/// The longest single wait: the run loop goes on serving delivery reports, commits and stop
/// requests at least this often.
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// A flow's limits, shared by its tasks and changed by a reload (0: unlimited).
#[derive(Debug, Default)]
pub struct Limits {
    bytes: AtomicU64,
    records: AtomicU64,
}

impl Limits {
    /// The limits of `throttle`.
    pub fn new(throttle: Throttle) -> Arc<Self> {
        let limits = Arc::new(Self::default());
        limits.set(throttle);
        limits
    }

    /// Applies new limits from the next batch on.
    pub fn set(&self, throttle: Throttle) {
        self.bytes
            .store(throttle.bytes_per_second.unwrap_or(0), Ordering::Relaxed);
        self.records
            .store(throttle.records_per_second.unwrap_or(0), Ordering::Relaxed);
    }
}

/// One limit's bucket: tokens refill at `rate` per second up to one second's worth; reading
/// takes them, and may take them below zero (a batch is not split), which the next wait repays.
#[derive(Debug, Default)]
struct Bucket {
    tokens: f64,
}

impl Bucket {
    fn refill(&mut self, rate: f64, elapsed: f64) {
        self.tokens = (self.tokens + rate * elapsed).min(rate);
    }

    /// How long until the bucket is no longer in debt.
    fn wait(&self, rate: f64) -> Duration {
        if self.tokens >= 0.0 || rate <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / rate)
        }
    }
}

/// One task's share of its flow's limits.
#[derive(Debug)]
pub struct TaskThrottle {
    limits: Arc<Limits>,
    /// The flow's task count: this task's share is 1/tasks of the limit.
    tasks: u32,
    bytes: Bucket,
    records: Bucket,
    last: Instant,
    /// Time spent waiting, not yet reported.
    throttled: Duration,
}

impl TaskThrottle {
    /// The share of one of `tasks` tasks of `limits`.
    pub fn new(limits: Arc<Limits>, tasks: u32) -> Self {
        Self {
            limits,
            tasks: tasks.max(1),
            bytes: Bucket::default(),
            records: Bucket::default(),
            last: Instant::now(),
            throttled: Duration::ZERO,
        }
    }

    fn rates(&self) -> (f64, f64) {
        let share = |limit: &AtomicU64| limit.load(Ordering::Relaxed) as f64 / self.tasks as f64;
        (share(&self.limits.bytes), share(&self.limits.records))
    }

    /// How long to wait before reading the next batch (at most [`MAX_PAUSE`]); zero when
    /// within the limits (or none is set).
    pub fn pause(&mut self) -> Duration {
        let now = Instant::now();
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        let (bytes, records) = self.rates();
        if bytes <= 0.0 {
            self.bytes = Bucket::default();
        } else {
            self.bytes.refill(bytes, elapsed);
        }
        if records <= 0.0 {
            self.records = Bucket::default();
        } else {
            self.records.refill(records, elapsed);
        }
        let wait = self.bytes.wait(bytes).max(self.records.wait(records));
        let pause = wait.min(MAX_PAUSE);
        self.throttled += pause;
        pause
    }

    /// What may be read now without waiting: (bytes, records), `u64::MAX` for no limit.
    pub fn allowance(&self) -> (u64, u64) {
        let (byte_rate, record_rate) = self.rates();
        let left = |bucket: &Bucket, rate: f64| {
            if rate > 0.0 {
                bucket.tokens.max(0.0) as u64
            } else {
                u64::MAX
            }
        };
        (
            left(&self.bytes, byte_rate),
            left(&self.records, record_rate),
        )
    }

    /// A batch of `records` records and `bytes` bytes was read.
    pub fn took(&mut self, bytes: u64, records: u64) {
        let (byte_rate, record_rate) = self.rates();
        if byte_rate > 0.0 {
            self.bytes.tokens -= bytes as f64;
        }
        if record_rate > 0.0 {
            self.records.tokens -= records as f64;
        }
    }

    /// The time spent waiting since the last call.
    pub fn take_throttled(&mut self) -> Duration {
        std::mem::take(&mut self.throttled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle(bytes: Option<u64>, records: Option<u64>) -> Throttle {
        Throttle {
            bytes_per_second: bytes,
            records_per_second: records,
        }
    }

    /// Simulates reading batches as fast as the throttle allows for `seconds`, returning the
    /// bytes read (the clock is real, the waits are not slept but accounted).
    fn simulate(t: &mut TaskThrottle, batch_bytes: u64, seconds: f64) -> u64 {
        let mut clock = 0.0;
        let mut read = 0;
        while clock < seconds {
            let (bytes, _) = t.rates();
            let wait = t.bytes.wait(bytes);
            if wait > Duration::ZERO {
                let step = wait.min(MAX_PAUSE).as_secs_f64();
                t.bytes.refill(bytes, step);
                clock += step;
                continue;
            }
            t.took(batch_bytes, 1);
            read += batch_bytes;
            // Reading itself takes a millisecond.
            t.bytes.refill(bytes, 0.001);
            clock += 0.001;
        }
        read
    }

    #[test]
    fn the_rate_holds_over_time_and_is_shared_among_tasks() {
        let limits = Limits::new(throttle(Some(2_000_000), None));
        let mut one = TaskThrottle::new(limits.clone(), 1);
        let read = simulate(&mut one, 64 * 1024, 30.0) as f64;
        // One second's burst on top of 30 s at the rate.
        assert!(
            (read - 62_000_000.0).abs() < 2_000_000.0,
            "{read} bytes in 30 s at 2 MB/s"
        );
        let mut half = TaskThrottle::new(limits.clone(), 2);
        let read = simulate(&mut half, 64 * 1024, 30.0) as f64;
        assert!((read - 31_000_000.0).abs() < 1_000_000.0, "{read}");
    }

    #[test]
    fn unlimited_never_pauses_and_a_reload_applies_at_once() {
        let limits = Limits::new(Throttle::default());
        let mut t = TaskThrottle::new(limits.clone(), 1);
        t.took(u64::MAX / 2, 1_000_000);
        assert_eq!(t.pause(), Duration::ZERO);
        limits.set(throttle(None, Some(10)));
        t.took(0, 20);
        let pause = t.pause();
        assert!(pause > Duration::ZERO && pause <= MAX_PAUSE, "{pause:?}");
        assert_eq!(t.take_throttled(), pause);
        assert_eq!(t.take_throttled(), Duration::ZERO);
        limits.set(Throttle::default());
        assert_eq!(t.pause(), Duration::ZERO);
        assert_eq!(t.allowance(), (u64::MAX, u64::MAX));
    }
}
