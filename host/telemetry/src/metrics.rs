//! A small Prometheus metrics registry: labeled counters, gauges, MirrorMaker 2 style
//! Value/Min/Max/Avg "stats" and histograms, rendered in text exposition format 0.0.4.
//!
//! Registration (`Metrics::counter` and friends) takes the registry lock and allocates; it
//! returns a handle the caller keeps. Updating through a handle is lock-free (counters, gauges,
//! histograms) or takes one uncontended per-series lock (stats) and never allocates, so handles
//! are meant for the per-record hot path.
//!
//! Rules:
//! - Registering the same name and label set again returns the same series (label order does
//!   not matter). The first registration's help text wins.
//! - Registering a name as a different kind, or one whose exposed sample names would clash with
//!   another family's (a stat `x` owns `x_min`/`x_max`/`x_avg`, a histogram `h` owns
//!   `h_bucket`/`h_sum`/`h_count`), is a [`MetricsError`]; nothing is registered.
//! - Rendering is deterministic: families sorted by exposed name, series by their label set
//!   as exposed, constant labels included (label pairs sorted by label name, then compared
//!   pair by pair).
//! - Constant labels ([`Metrics::with_const_labels`], e.g. `instance`) are added to every
//!   sample of every family when rendering; they are not part of a series' identity, so
//!   registration and [`Metrics::remove`] never see them. A series registered with a label of
//!   the same name keeps its own value.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Default span over which a [`Stat`]'s min/max/avg are computed (Kafka's default sample window).
pub const DEFAULT_STAT_WINDOW: Duration = Duration::from_secs(30);

/// Number of slots a stat window is divided into; see [`Stat`] for what that means for expiry.
pub const STAT_SLOTS: usize = 6;

/// Why a series could not be registered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricsError {
    /// The metric name is not a valid Prometheus metric name.
    #[error("metric name `{name}` is not valid: use ASCII letters, digits, `_` and `:`, not starting with a digit")]
    InvalidName {
        /// The rejected name.
        name: String,
    },
    /// A label name is not valid or not allowed for this metric.
    #[error("label `{label}` of metric `{name}` is not allowed: {reason}")]
    InvalidLabel {
        /// The metric being registered.
        name: String,
        /// The rejected label name.
        label: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The name is already registered as another kind of metric.
    #[error("metric `{name}` is already registered as a {existing}; it cannot also be a {requested} (pick another name)")]
    KindConflict {
        /// The metric name.
        name: String,
        /// The kind it was first registered as.
        existing: &'static str,
        /// The kind of this registration.
        requested: &'static str,
    },
    /// The new family would expose a sample name another family already exposes.
    #[error("{requested} `{name}` clashes with {existing} `{other}`: both would expose samples named `{sample}` (pick another name)")]
    NameClash {
        /// The metric being registered.
        name: String,
        /// Its kind.
        requested: &'static str,
        /// The already registered family it clashes with.
        other: String,
        /// That family's kind.
        existing: &'static str,
        /// The sample name both would expose.
        sample: String,
    },
    /// A constant label name is not valid (see [`Metrics::with_const_labels`]).
    #[error("constant label `{label}` is not allowed: {reason}")]
    InvalidConstLabel {
        /// The rejected label name.
        label: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Histogram bucket bounds are not finite and strictly increasing.
    #[error(
        "histogram `{name}`: bucket bounds must be finite and strictly increasing, got {buckets:?}"
    )]
    InvalidBuckets {
        /// The histogram name.
        name: String,
        /// The rejected bounds.
        buckets: Vec<f64>,
    },
    /// The histogram is already registered with other bucket bounds.
    #[error(
        "histogram `{name}` is already registered with buckets {existing:?}, not {requested:?}"
    )]
    BucketsConflict {
        /// The histogram name.
        name: String,
        /// Bounds of the existing registration.
        existing: Vec<f64>,
        /// Bounds of this registration.
        requested: Vec<f64>,
    },
}

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

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Handle to a monotonically increasing `u64` counter series.
#[derive(Debug, Clone)]
pub struct Counter(Arc<AtomicU64>);

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
pub struct Gauge(Arc<AtomicU64>);

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
pub struct Stat(Arc<StatCell>);

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

struct StatCell {
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
    fn new(clock: Arc<dyn Clock>, window: Duration) -> Self {
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

    fn snapshot(&self) -> StatSnapshot {
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

/// Handle to a histogram series with the fixed bucket bounds given at registration.
///
/// Bounds are inclusive upper limits (`le`); `+Inf` is implicit. `NaN` observations are ignored.
#[derive(Debug, Clone)]
pub struct Histogram(Arc<HistogramCell>);

#[derive(Debug)]
struct HistogramCell {
    bounds: Arc<[f64]>,
    /// Per-bucket (not cumulative) counts; the last one is the `+Inf` overflow bucket.
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Stat,
    Histogram,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Stat => "stat",
            Kind::Histogram => "histogram",
        }
    }

    /// Sample names a family of this kind exposes (its own name included, for HELP/TYPE).
    fn exposed_names(self, name: &str) -> Vec<String> {
        let suffixes: &[&str] = match self {
            Kind::Counter | Kind::Gauge => &[""],
            Kind::Stat => &["", "_min", "_max", "_avg"],
            Kind::Histogram => &["", "_bucket", "_sum", "_count"],
        };
        suffixes.iter().map(|s| format!("{name}{s}")).collect()
    }
}

#[derive(Clone)]
enum Cell {
    Counter(Arc<AtomicU64>),
    Gauge(Arc<AtomicU64>),
    Stat(Arc<StatCell>),
    Histogram(Arc<HistogramCell>),
}

/// Label pairs sorted by label name: the identity of a series within its family.
type LabelSet = Box<[(String, String)]>;

struct Family {
    help: String,
    kind: Kind,
    buckets: Option<Arc<[f64]>>,
    series: BTreeMap<LabelSet, Cell>,
}

struct Inner {
    families: Mutex<BTreeMap<String, Family>>,
    clock: Arc<dyn Clock>,
    stat_window: Duration,
    /// Labels added to every rendered sample, sorted by name.
    const_labels: LabelSet,
}

/// Thread-safe registry of labeled series; cheap to clone (all clones share the series and the
/// constant labels).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("families", &self.lock().len())
            .field("stat_window", &self.inner.stat_window)
            .field("const_labels", &self.inner.const_labels)
            .finish()
    }
}

/// One block of the exposition: a family under the name it is exposed as.
struct Block<'a> {
    name: String,
    family: &'a Family,
    part: Part,
}

#[derive(Clone, Copy)]
enum Part {
    Whole,
    StatValue,
    StatMin,
    StatMax,
    StatAvg,
}

impl Metrics {
    /// An empty registry with the monotonic clock, the default 30 s stat window and no
    /// constant labels.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(MonotonicClock::new()), DEFAULT_STAT_WINDOW)
    }

    /// An empty registry like [`Metrics::new`] whose rendering adds `labels` (e.g.
    /// `[("instance", "mirror-1")]`) to every sample of every family. Label names follow the
    /// rules of series labels, and `le` is refused too (histogram buckets need it); values are
    /// escaped like any label value.
    ///
    /// Constant labels are not part of a series' identity: registration and
    /// [`Metrics::remove`] never see them, and callers do not pass them. A series registered
    /// with a label of the same name renders its own value instead.
    pub fn with_const_labels(labels: &[(&str, &str)]) -> Result<Self, MetricsError> {
        let mut set: Vec<(String, String)> = Vec::with_capacity(labels.len());
        for (label, value) in labels {
            let reason = label_name_problem(label)
                .or_else(|| (*label == "le").then_some("`le` is reserved for histogram buckets"));
            if let Some(reason) = reason {
                return Err(MetricsError::InvalidConstLabel {
                    label: (*label).to_owned(),
                    reason,
                });
            }
            set.push(((*label).to_owned(), (*value).to_owned()));
        }
        set.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(w) = set.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(MetricsError::InvalidConstLabel {
                label: w[0].0.clone(),
                reason: "the label is given twice",
            });
        }
        Ok(Self::build(
            Arc::new(MonotonicClock::new()),
            DEFAULT_STAT_WINDOW,
            set.into_boxed_slice(),
        ))
    }

    /// An empty registry whose stats use `clock` and a window of `stat_window`, without
    /// constant labels.
    pub fn with_clock(clock: Arc<dyn Clock>, stat_window: Duration) -> Self {
        Self::build(clock, stat_window, LabelSet::default())
    }

    fn build(clock: Arc<dyn Clock>, stat_window: Duration, const_labels: LabelSet) -> Self {
        Self {
            inner: Arc::new(Inner {
                families: Mutex::new(BTreeMap::new()),
                clock,
                stat_window,
                const_labels,
            }),
        }
    }

    /// Registers (or finds) a counter series.
    pub fn counter(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
    ) -> Result<Counter, MetricsError> {
        match self.register(name, help, Kind::Counter, labels, None)? {
            Cell::Counter(c) => Ok(Counter(c)),
            _ => Err(self.kind_conflict(name, Kind::Counter)),
        }
    }

    /// Registers (or finds) a gauge series; a new gauge starts at 0.
    pub fn gauge(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
    ) -> Result<Gauge, MetricsError> {
        match self.register(name, help, Kind::Gauge, labels, None)? {
            Cell::Gauge(g) => Ok(Gauge(g)),
            _ => Err(self.kind_conflict(name, Kind::Gauge)),
        }
    }

    /// Registers (or finds) a stat series, exposed as `name`, `name_min`, `name_max`, `name_avg`.
    pub fn stat(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
    ) -> Result<Stat, MetricsError> {
        match self.register(name, help, Kind::Stat, labels, None)? {
            Cell::Stat(s) => Ok(Stat(s)),
            _ => Err(self.kind_conflict(name, Kind::Stat)),
        }
    }

    /// Registers (or finds) a histogram series with the given finite, increasing bucket bounds.
    pub fn histogram(
        &self,
        name: &str,
        help: &str,
        buckets: &[f64],
        labels: &[(&str, &str)],
    ) -> Result<Histogram, MetricsError> {
        let increasing = buckets.windows(2).all(|w| w[0] < w[1]);
        if !increasing || buckets.iter().any(|b| !b.is_finite()) {
            return Err(MetricsError::InvalidBuckets {
                name: name.to_owned(),
                buckets: buckets.to_vec(),
            });
        }
        match self.register(name, help, Kind::Histogram, labels, Some(buckets))? {
            Cell::Histogram(h) => Ok(Histogram(h)),
            _ => Err(self.kind_conflict(name, Kind::Histogram)),
        }
    }

    /// Removes the series of every family whose name starts with `name_prefix` and whose labels
    /// include all of `labels` (a stat matches by its registered name, and its four exposed
    /// families go together); returns how many series went away. `labels` match the labels the
    /// series were registered with, never the constant labels. Handles to removed series
    /// keep working but are no longer rendered; registering them again starts a fresh series.
    pub fn remove(&self, name_prefix: &str, labels: &[(&str, &str)]) -> usize {
        let mut families = self.lock();
        let mut removed = 0;
        for (_, family) in families
            .iter_mut()
            .filter(|(name, _)| name.starts_with(name_prefix))
        {
            let before = family.series.len();
            family.series.retain(|set, _| {
                !labels
                    .iter()
                    .all(|(k, v)| set.iter().any(|(sk, sv)| sk == k && sv == v))
            });
            removed += before - family.series.len();
        }
        removed
    }

    /// The whole registry in Prometheus text exposition format 0.0.4.
    pub fn render(&self) -> String {
        let families = self.lock();
        let mut blocks = Vec::new();
        for (name, family) in families.iter().filter(|(_, f)| !f.series.is_empty()) {
            if family.kind == Kind::Stat {
                for (suffix, part) in [
                    ("", Part::StatValue),
                    ("_min", Part::StatMin),
                    ("_max", Part::StatMax),
                    ("_avg", Part::StatAvg),
                ] {
                    blocks.push(Block {
                        name: format!("{name}{suffix}"),
                        family,
                        part,
                    });
                }
            } else {
                blocks.push(Block {
                    name: name.clone(),
                    family,
                    part: Part::Whole,
                });
            }
        }
        blocks.sort_by(|a, b| a.name.cmp(&b.name));
        let mut out = String::new();
        for block in &blocks {
            self.render_block(&mut out, block);
        }
        out
    }

    fn render_block(&self, out: &mut String, block: &Block<'_>) {
        let Block { name, family, part } = block;
        let window = self.inner.stat_window;
        out.push_str("# HELP ");
        out.push_str(name);
        out.push(' ');
        escape_into(out, &family.help, false);
        let _ = match part {
            Part::Whole => Ok(()),
            Part::StatValue => write!(out, " (last recorded value)"),
            Part::StatMin => write!(out, " (minimum over the last {window:?})"),
            Part::StatMax => write!(out, " (maximum over the last {window:?})"),
            Part::StatAvg => write!(out, " (average over the last {window:?})"),
        };
        let type_name = match family.kind {
            Kind::Counter => "counter",
            Kind::Gauge | Kind::Stat => "gauge",
            Kind::Histogram => "histogram",
        };
        let _ = writeln!(out, "\n# TYPE {name} {type_name}");
        let consts = &self.inner.const_labels;
        let mut series: Vec<(Vec<&(String, String)>, &Cell)> = family
            .series
            .iter()
            .map(|(own, cell)| (exposed_labels(own, consts), cell))
            .collect();
        if !consts.is_empty() {
            // A series' own label replacing a constant one can change the order.
            series.sort_by(|a, b| a.0.cmp(&b.0));
        }
        for (labels, cell) in &series {
            let labels = labels.as_slice();
            match cell {
                Cell::Counter(c) => {
                    sample_prefix(out, name, "", labels, None);
                    let _ = writeln!(out, "{}", c.load(Ordering::Relaxed));
                }
                Cell::Gauge(g) => {
                    sample_prefix(out, name, "", labels, None);
                    push_f64(out, f64::from_bits(g.load(Ordering::Relaxed)));
                }
                Cell::Stat(s) => {
                    let snap = s.snapshot();
                    let v = match part {
                        Part::StatMin => snap.min,
                        Part::StatMax => snap.max,
                        Part::StatAvg => snap.avg,
                        Part::StatValue | Part::Whole => snap.value,
                    };
                    sample_prefix(out, name, "", labels, None);
                    push_f64(out, v);
                }
                Cell::Histogram(h) => render_histogram(out, name, labels, h),
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Family>> {
        // Registry critical sections do not panic; a poisoned lock still holds consistent maps.
        self.inner
            .families
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn kind_conflict(&self, name: &str, requested: Kind) -> MetricsError {
        let existing = self
            .lock()
            .get(name)
            .map_or("different kind", |f| f.kind.describe());
        MetricsError::KindConflict {
            name: name.to_owned(),
            existing,
            requested: requested.describe(),
        }
    }

    fn register(
        &self,
        name: &str,
        help: &str,
        kind: Kind,
        labels: &[(&str, &str)],
        buckets: Option<&[f64]>,
    ) -> Result<Cell, MetricsError> {
        validate_name(name)?;
        let key = label_set(name, kind, labels)?;
        let mut families = self.lock();
        if let Some(family) = families.get_mut(name) {
            if family.kind != kind {
                return Err(MetricsError::KindConflict {
                    name: name.to_owned(),
                    existing: family.kind.describe(),
                    requested: kind.describe(),
                });
            }
            if let (Some(existing), Some(requested)) = (&family.buckets, buckets) {
                if **existing != *requested {
                    return Err(MetricsError::BucketsConflict {
                        name: name.to_owned(),
                        existing: existing.to_vec(),
                        requested: requested.to_vec(),
                    });
                }
            }
            if let Some(cell) = family.series.get(&key) {
                return Ok(cell.clone());
            }
            let cell = self.new_cell(kind, family.buckets.as_ref());
            family.series.insert(key, cell.clone());
            return Ok(cell);
        }
        check_clash(&families, name, kind)?;
        let buckets: Option<Arc<[f64]>> = buckets.map(Arc::from);
        let cell = self.new_cell(kind, buckets.as_ref());
        families.insert(
            name.to_owned(),
            Family {
                help: help.to_owned(),
                kind,
                buckets,
                series: BTreeMap::from([(key, cell.clone())]),
            },
        );
        Ok(cell)
    }

    fn new_cell(&self, kind: Kind, buckets: Option<&Arc<[f64]>>) -> Cell {
        match kind {
            Kind::Counter => Cell::Counter(Arc::new(AtomicU64::new(0))),
            Kind::Gauge => Cell::Gauge(Arc::new(AtomicU64::new(0.0f64.to_bits()))),
            Kind::Stat => Cell::Stat(Arc::new(StatCell::new(
                Arc::clone(&self.inner.clock),
                self.inner.stat_window,
            ))),
            Kind::Histogram => {
                let bounds = buckets.cloned().unwrap_or_else(|| Arc::from(Vec::new()));
                let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
                Cell::Histogram(Arc::new(HistogramCell {
                    bounds,
                    counts,
                    sum: AtomicU64::new(0.0f64.to_bits()),
                }))
            }
        }
    }
}

fn check_clash(
    families: &BTreeMap<String, Family>,
    name: &str,
    kind: Kind,
) -> Result<(), MetricsError> {
    let mine = kind.exposed_names(name);
    for (other, family) in families {
        let theirs = family.kind.exposed_names(other);
        if let Some(sample) = mine.iter().find(|n| theirs.contains(n)) {
            return Err(MetricsError::NameClash {
                name: name.to_owned(),
                requested: kind.describe(),
                other: other.clone(),
                existing: family.kind.describe(),
                sample: sample.clone(),
            });
        }
    }
    Ok(())
}

fn validate_name(name: &str) -> Result<(), MetricsError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        Ok(())
    } else {
        Err(MetricsError::InvalidName {
            name: name.to_owned(),
        })
    }
}

fn label_set(name: &str, kind: Kind, labels: &[(&str, &str)]) -> Result<LabelSet, MetricsError> {
    let invalid = |label: &str, reason| MetricsError::InvalidLabel {
        name: name.to_owned(),
        label: label.to_owned(),
        reason,
    };
    let mut set: Vec<(String, String)> = Vec::with_capacity(labels.len());
    for (label, value) in labels {
        if let Some(reason) = label_name_problem(label) {
            return Err(invalid(label, reason));
        }
        if kind == Kind::Histogram && *label == "le" {
            return Err(invalid(label, "`le` is reserved for histogram buckets"));
        }
        set.push(((*label).to_owned(), (*value).to_owned()));
    }
    set.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(w) = set.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(invalid(&w[0].0, "the label is given twice"));
    }
    Ok(set.into_boxed_slice())
}

/// What is wrong with a label name, if anything.
fn label_name_problem(label: &str) -> Option<&'static str> {
    let mut chars = label.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some("use ASCII letters, digits and `_`, not starting with a digit");
    }
    if label.starts_with("__") {
        return Some("names starting with `__` are reserved");
    }
    None
}

/// A series' labels as rendered: its own plus the constant labels it has no label of the same
/// name for, sorted by label name.
fn exposed_labels<'a>(
    own: &'a [(String, String)],
    consts: &'a [(String, String)],
) -> Vec<&'a (String, String)> {
    let mut labels: Vec<&(String, String)> = own.iter().collect();
    if !consts.is_empty() {
        labels.extend(
            consts
                .iter()
                .filter(|(k, _)| !own.iter().any(|(own_k, _)| own_k == k)),
        );
        labels.sort_by(|a, b| a.0.cmp(&b.0));
    }
    labels
}

/// Writes `name<suffix>{labels[,le="…"]} ` (the sample up to its value).
fn sample_prefix(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[&(String, String)],
    le: Option<f64>,
) {
    out.push_str(name);
    out.push_str(suffix);
    if !labels.is_empty() || le.is_some() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            escape_into(out, v, true);
            out.push('"');
        }
        if let Some(le) = le {
            if !labels.is_empty() {
                out.push(',');
            }
            out.push_str("le=\"");
            push_f64_raw(out, le);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
}

fn render_histogram(out: &mut String, name: &str, labels: &[&(String, String)], h: &HistogramCell) {
    let mut cumulative = 0u64;
    for (i, count) in h.counts.iter().enumerate() {
        cumulative += count.load(Ordering::Relaxed);
        let le = h.bounds.get(i).copied().unwrap_or(f64::INFINITY);
        sample_prefix(out, name, "_bucket", labels, Some(le));
        let _ = writeln!(out, "{cumulative}");
    }
    sample_prefix(out, name, "_sum", labels, None);
    push_f64(out, f64::from_bits(h.sum.load(Ordering::Relaxed)));
    sample_prefix(out, name, "_count", labels, None);
    let _ = writeln!(out, "{cumulative}");
}

/// Writes `v` as Prometheus expects it, then a newline.
fn push_f64(out: &mut String, v: f64) {
    push_f64_raw(out, v);
    out.push('\n');
}

fn push_f64_raw(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let _ = write!(out, "{v}");
    }
}

/// Escapes `\` and newline (HELP text), plus `"` for label values.
fn escape_into(out: &mut String, s: &str, quote: bool) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manual() -> (Arc<ManualClock>, Metrics) {
        let clock = Arc::new(ManualClock::new());
        let metrics = Metrics::with_clock(clock.clone(), Duration::from_secs(30));
        (clock, metrics)
    }

    #[test]
    fn renders_sorted_families_series_and_escapes() {
        let m = Metrics::new();
        m.gauge("zeta", "Last family.", &[]).unwrap().set(-1.5);
        let c = m
            .counter(
                "alpha_total",
                "Help with \\ and\nnewline \"kept\".",
                &[("flow", "b")],
            )
            .unwrap();
        c.inc_by(3);
        m.counter("alpha_total", "ignored", &[("flow", "a\\\"\nz")])
            .unwrap()
            .inc();
        m.gauge(
            "mid",
            "Two labels, given out of order.",
            &[("z", "1"), ("a", "2")],
        )
        .unwrap()
        .set_i64(42);
        let expected = "\
# HELP alpha_total Help with \\\\ and\\nnewline \"kept\".
# TYPE alpha_total counter
alpha_total{flow=\"a\\\\\\\"\\nz\"} 1
alpha_total{flow=\"b\"} 3
# HELP mid Two labels, given out of order.
# TYPE mid gauge
mid{a=\"2\",z=\"1\"} 42
# HELP zeta Last family.
# TYPE zeta gauge
zeta -1.5
";
        assert_eq!(m.render(), expected);
    }

    #[test]
    fn same_name_and_labels_is_the_same_series() {
        let m = Metrics::new();
        let a = m.counter("c", "h", &[("x", "1"), ("y", "2")]).unwrap();
        let b = m.counter("c", "h", &[("y", "2"), ("x", "1")]).unwrap();
        a.inc();
        b.inc_by(2);
        assert_eq!(a.get(), 3);
        let other = m.counter("c", "h", &[("x", "2"), ("y", "2")]).unwrap();
        assert_eq!(other.get(), 0);
        let g1 = m.gauge("g", "h", &[]).unwrap();
        m.gauge("g", "h", &[]).unwrap().add_i64(5);
        g1.add(-1.5);
        assert_eq!(g1.get(), 3.5);
    }

    #[test]
    fn registration_errors() {
        let m = Metrics::new();
        m.counter("x", "h", &[]).unwrap();
        m.stat("s", "h", &[]).unwrap();
        m.histogram("h", "h", &[1.0], &[]).unwrap();
        let kind = m.gauge("x", "h", &[]).unwrap_err();
        assert_eq!(
            kind,
            MetricsError::KindConflict {
                name: "x".into(),
                existing: "counter",
                requested: "gauge"
            }
        );
        assert!(kind.to_string().contains("already registered as a counter"));
        let cases: Vec<(MetricsError, &str)> = vec![
            (m.gauge("s_min", "h", &[]).unwrap_err(), "s_min"),
            (m.counter("h_count", "h", &[]).unwrap_err(), "h_count"),
            (m.gauge("h_bucket", "h", &[]).unwrap_err(), "h_bucket"),
            (m.histogram("x", "h", &[], &[]).unwrap_err(), "x"),
        ];
        for (err, name) in cases {
            assert!(
                matches!(&err, MetricsError::NameClash { name: n, .. } | MetricsError::KindConflict { name: n, .. } if n == name),
                "{err}"
            );
        }
        // A stat's derived name registered first blocks the stat.
        m.gauge("t_avg", "h", &[]).unwrap();
        assert!(matches!(
            m.stat("t", "h", &[]),
            Err(MetricsError::NameClash { sample, .. }) if sample == "t_avg"
        ));
        assert!(matches!(
            m.counter("1bad", "h", &[]),
            Err(MetricsError::InvalidName { .. })
        ));
        assert!(matches!(
            m.counter("", "h", &[]),
            Err(MetricsError::InvalidName { .. })
        ));
        for label in ["9a", "a-b", "__x", ""] {
            assert!(
                matches!(
                    m.counter("ok", "h", &[(label, "v")]),
                    Err(MetricsError::InvalidLabel { .. })
                ),
                "{label}"
            );
        }
        assert!(matches!(
            m.counter("ok", "h", &[("a", "1"), ("a", "2")]),
            Err(MetricsError::InvalidLabel { .. })
        ));
        assert!(matches!(
            m.histogram("h2", "h", &[1.0], &[("le", "1")]),
            Err(MetricsError::InvalidLabel { .. })
        ));
        for bad in [
            &[2.0, 1.0][..],
            &[1.0, 1.0],
            &[f64::NAN],
            &[1.0, f64::INFINITY],
        ] {
            assert!(matches!(
                m.histogram("h3", "h", bad, &[]),
                Err(MetricsError::InvalidBuckets { .. })
            ));
        }
        assert!(matches!(
            m.histogram("h", "h", &[2.0], &[("a", "b")]),
            Err(MetricsError::BucketsConflict { .. })
        ));
        // Failed registrations left nothing behind.
        assert!(!m.render().contains("ok"));
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

    #[test]
    fn histogram_buckets_sum_count() {
        let m = Metrics::new();
        let h = m
            .histogram("d_seconds", "Duration.", &[0.5, 1.0], &[("f", "x")])
            .unwrap();
        for v in [0.25, 0.5, 0.75, 2.0, f64::NAN] {
            h.observe(v);
        }
        h.observe_duration(Duration::from_millis(500));
        assert_eq!((h.count(), h.sum()), (5, 4.0));
        let expected = "\
# HELP d_seconds Duration.
# TYPE d_seconds histogram
d_seconds_bucket{f=\"x\",le=\"0.5\"} 3
d_seconds_bucket{f=\"x\",le=\"1\"} 4
d_seconds_bucket{f=\"x\",le=\"+Inf\"} 5
d_seconds_sum{f=\"x\"} 4
d_seconds_count{f=\"x\"} 5
";
        assert_eq!(m.render(), expected);
        let bare = Metrics::new();
        bare.histogram("b", "h", &[], &[]).unwrap().observe(3.0);
        assert!(bare
            .render()
            .ends_with("b_bucket{le=\"+Inf\"} 1\nb_sum 3\nb_count 1\n"));
    }

    #[test]
    fn remove_by_prefix_and_labels() {
        let m = Metrics::new();
        let keep = m.counter("a_x", "h", &[("flow", "f2")]).unwrap();
        let gone = m
            .counter("a_x", "h", &[("flow", "f1"), ("p", "0")])
            .unwrap();
        m.stat("a_s", "h", &[("flow", "f1")]).unwrap();
        m.gauge("b_x", "h", &[("flow", "f1")]).unwrap();
        assert_eq!(m.remove("a_", &[("flow", "f1")]), 2);
        assert_eq!(m.remove("a_", &[("flow", "f1")]), 0);
        gone.inc();
        keep.inc();
        let text = m.render();
        assert!(!text.contains("f1\"} 1") && !text.contains("a_s"), "{text}");
        assert!(text.contains("a_x{flow=\"f2\"} 1") && text.contains("b_x{flow=\"f1\"} 0"));
        // Re-registering after removal starts fresh; the kind is still remembered.
        assert_eq!(
            m.counter("a_x", "h", &[("flow", "f1"), ("p", "0")])
                .unwrap()
                .get(),
            0
        );
        assert!(m.gauge("a_s", "h", &[]).is_err());
        assert_eq!(m.remove("", &[]), 3);
        assert_eq!(m.render(), "");
    }

    #[test]
    fn const_labels_on_counters_and_gauges_with_escaping_and_clashes() {
        let m =
            Metrics::with_const_labels(&[("instance", "mirror \"1\"\\\n"), ("az", "b")]).unwrap();
        m.counter("c_total", "A counter.", &[("flow", "a->b")])
            .unwrap()
            .inc_by(2);
        m.counter("c_total", "A counter.", &[]).unwrap().inc();
        // A series' own `instance` or `az` wins over the constant one (values are escaped
        // like any label value).
        m.gauge("g", "A gauge.", &[("zone", "1")]).unwrap().set(1.0);
        m.gauge("g", "A gauge.", &[("instance", "own")])
            .unwrap()
            .set(2.0);
        m.gauge("g", "A gauge.", &[("instance", "0"), ("az", "own")])
            .unwrap()
            .set(3.0);
        let expected = "\
# HELP c_total A counter.
# TYPE c_total counter
c_total{az=\"b\",flow=\"a->b\",instance=\"mirror \\\"1\\\"\\\\\\n\"} 2
c_total{az=\"b\",instance=\"mirror \\\"1\\\"\\\\\\n\"} 1
# HELP g A gauge.
# TYPE g gauge
g{az=\"b\",instance=\"mirror \\\"1\\\"\\\\\\n\",zone=\"1\"} 1
g{az=\"b\",instance=\"own\"} 2
g{az=\"own\",instance=\"0\"} 3
";
        assert_eq!(m.render(), expected);
    }

    #[test]
    fn const_labels_sort_with_the_series_own_labels() {
        let m = Metrics::with_const_labels(&[("instance", "a")]).unwrap();
        m.gauge("g", "h", &[("zone", "1")]).unwrap().set(1.0);
        m.gauge("g", "h", &[("instance", "b")]).unwrap().set(2.0);
        m.gauge("g", "h", &[("flow", "f"), ("zone", "2")])
            .unwrap()
            .set(3.0);
        // Registered order by own labels would be instance="b", then zone="1"; as exposed,
        // {instance="a",zone="1"} sorts before {instance="b"}.
        let expected = "\
# HELP g h
# TYPE g gauge
g{flow=\"f\",instance=\"a\",zone=\"2\"} 3
g{instance=\"a\",zone=\"1\"} 1
g{instance=\"b\"} 2
";
        assert_eq!(m.render(), expected);
    }

    #[test]
    fn const_labels_on_all_four_stat_families() {
        let m = Metrics::with_const_labels(&[("instance", "i1")]).unwrap();
        let s = m.stat("lat_ms", "Latency.", &[("p", "0")]).unwrap();
        s.record(4.0);
        s.record(2.0);
        m.stat("lat_ms", "Latency.", &[]).unwrap();
        let expected = "\
# HELP lat_ms Latency. (last recorded value)
# TYPE lat_ms gauge
lat_ms{instance=\"i1\"} NaN
lat_ms{instance=\"i1\",p=\"0\"} 2
# HELP lat_ms_avg Latency. (average over the last 30s)
# TYPE lat_ms_avg gauge
lat_ms_avg{instance=\"i1\"} NaN
lat_ms_avg{instance=\"i1\",p=\"0\"} 3
# HELP lat_ms_max Latency. (maximum over the last 30s)
# TYPE lat_ms_max gauge
lat_ms_max{instance=\"i1\"} NaN
lat_ms_max{instance=\"i1\",p=\"0\"} 4
# HELP lat_ms_min Latency. (minimum over the last 30s)
# TYPE lat_ms_min gauge
lat_ms_min{instance=\"i1\"} NaN
lat_ms_min{instance=\"i1\",p=\"0\"} 2
";
        assert_eq!(m.render(), expected);
    }

    #[test]
    fn const_labels_on_histograms_keep_le_last() {
        let m = Metrics::with_const_labels(&[("zz", "last"), ("instance", "i1")]).unwrap();
        let h = m
            .histogram("d_seconds", "Duration.", &[0.5, 1.0], &[("f", "x")])
            .unwrap();
        h.observe(0.25);
        h.observe(2.0);
        m.histogram("d_seconds", "Duration.", &[0.5, 1.0], &[])
            .unwrap()
            .observe(0.75);
        let expected = "\
# HELP d_seconds Duration.
# TYPE d_seconds histogram
d_seconds_bucket{f=\"x\",instance=\"i1\",zz=\"last\",le=\"0.5\"} 1
d_seconds_bucket{f=\"x\",instance=\"i1\",zz=\"last\",le=\"1\"} 1
d_seconds_bucket{f=\"x\",instance=\"i1\",zz=\"last\",le=\"+Inf\"} 2
d_seconds_sum{f=\"x\",instance=\"i1\",zz=\"last\"} 2.25
d_seconds_count{f=\"x\",instance=\"i1\",zz=\"last\"} 2
d_seconds_bucket{instance=\"i1\",zz=\"last\",le=\"0.5\"} 0
d_seconds_bucket{instance=\"i1\",zz=\"last\",le=\"1\"} 1
d_seconds_bucket{instance=\"i1\",zz=\"last\",le=\"+Inf\"} 1
d_seconds_sum{instance=\"i1\",zz=\"last\"} 0.75
d_seconds_count{instance=\"i1\",zz=\"last\"} 1
";
        assert_eq!(m.render(), expected);
    }

    #[test]
    fn const_labels_are_validated_shared_by_clones_and_ignored_by_remove() {
        for (labels, bad) in [
            (&[("9a", "v")][..], "9a"),
            (&[("a-b", "v")], "a-b"),
            (&[("__x", "v")], "__x"),
            (&[("", "v")], ""),
            (&[("le", "1")], "le"),
            (&[("b", "1"), ("a", "1"), ("b", "2")], "b"),
        ] {
            let err = Metrics::with_const_labels(labels).unwrap_err();
            assert!(
                matches!(&err, MetricsError::InvalidConstLabel { label, .. } if label == bad),
                "{err}"
            );
        }
        assert_eq!(
            Metrics::with_const_labels(&[("le", "1")])
                .unwrap_err()
                .to_string(),
            "constant label `le` is not allowed: `le` is reserved for histogram buckets"
        );
        // No constant labels at all is the same as `new`.
        let plain = Metrics::with_const_labels(&[]).unwrap();
        plain.counter("c", "h", &[]).unwrap().inc();
        assert_eq!(plain.render(), "# HELP c h\n# TYPE c counter\nc 1\n");

        let m = Metrics::with_const_labels(&[("instance", "i1")]).unwrap();
        let clone = m.clone();
        clone.counter("c", "h", &[("flow", "f")]).unwrap().inc();
        let expected = "# HELP c h\n# TYPE c counter\nc{flow=\"f\",instance=\"i1\"} 1\n";
        assert_eq!(m.render(), expected);
        assert_eq!(clone.render(), expected);
        // Registering with the constant label named explicitly is another series.
        assert_eq!(
            m.counter("c", "h", &[("flow", "f"), ("instance", "i1")])
                .unwrap()
                .get(),
            0
        );
        assert_eq!(m.remove("c", &[("instance", "i1")]), 1);
        assert_eq!(m.remove("c", &[("flow", "f")]), 1);
        assert_eq!(m.render(), "");
        assert_eq!(Metrics::new().render(), "");
    }

    #[test]
    fn concurrent_updates_are_exact() {
        let m = Metrics::new();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let m = m.clone();
                std::thread::spawn(move || {
                    // Each thread registers on its own: all must land on the same series.
                    let c = m.counter("hits_total", "h", &[("k", "v")]).unwrap();
                    let g = m.gauge("level", "h", &[]).unwrap();
                    let h = m.histogram("h", "h", &[1.0], &[]).unwrap();
                    let s = m.stat("s", "h", &[]).unwrap();
                    for _ in 0..10_000 {
                        c.inc();
                        g.add_i64(2);
                        g.add_i64(-1);
                        h.observe(0.5);
                        s.record(f64::from(i));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            m.counter("hits_total", "h", &[("k", "v")]).unwrap().get(),
            80_000
        );
        assert_eq!(m.gauge("level", "h", &[]).unwrap().get(), 80_000.0);
        assert_eq!(m.histogram("h", "h", &[1.0], &[]).unwrap().count(), 80_000);
        let snap = m.stat("s", "h", &[]).unwrap().snapshot();
        assert_eq!((snap.min, snap.max, snap.avg), (0.0, 7.0, 3.5));
    }

    #[test]
    fn float_formatting() {
        let cases = [
            (1.0, "1"),
            (0.00001, "0.00001"),
            (-2.5, "-2.5"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ];
        for (v, want) in cases {
            let mut s = String::new();
            push_f64_raw(&mut s, v);
            assert_eq!(s, want);
        }
    }
}
