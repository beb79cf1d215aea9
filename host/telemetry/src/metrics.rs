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
//!
//! This module is the registry (registration, removal, name and label rules); the clocks, the
//! handles, the stats' windows and the text exposition are its submodules, re-exported here.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

mod clock;
mod exposition;
mod handles;
mod stat;

pub use clock::{Clock, ManualClock, MonotonicClock};
pub use handles::{Counter, Gauge, Histogram};
pub use stat::{Stat, StatBatch, StatSnapshot, DEFAULT_STAT_WINDOW, STAT_SLOTS};

use handles::HistogramCell;
use stat::StatCell;

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
#[cfg(test)]
mod tests {
    use super::*;

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
}
