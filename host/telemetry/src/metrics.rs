//! refract's metrics registry: labeled counters, gauges, histograms and MirrorMaker 2 style
//! Value/Min/Max/Avg "stats" on the `prometheus` crate's [`Registry`], rendered by its text
//! encoder (exposition format 0.0.4).
//!
//! Why a layer over the crate: refract registers series lazily and from many places (a
//! partition's series when it is first mirrored, a plugin's when its flow starts), always
//! asking for one series by name and label pairs. The crate wants each family created and
//! registered once with its label names. This registry keeps the families by name, creates
//! and registers each on its first series, finds the same series when asked again, adds the
//! process's constant labels (e.g. `instance`) to every family, and removes series by label
//! match when a reload removes a flow or its partitions.
//!
//! Registration (`Metrics::counter` and friends) takes the registry lock and allocates; it
//! returns a handle the caller keeps. Updating through a handle is lock-free (counters,
//! gauges, histograms) or takes one uncontended per-series lock (stats) and never allocates,
//! so handles are meant for the per-record hot path.
//!
//! Rules:
//! - Registering the same name and label set again returns the same series (label order does
//!   not matter). The first registration's help text wins.
//! - A family's kind, label names and (histograms) bucket bounds are fixed by its first
//!   registration. Registering it as another kind, with other label names or other buckets, is
//!   a [`MetricsError`]; so is anything the crate refuses (invalid names, a label given twice,
//!   a family name another family already exposes, such as a stat `x`'s `x_min`).
//! - Rendering is deterministic: families sorted by exposed name, series by their label values
//!   (label pairs sorted by name, constant labels included, `le` last).
//! - Constant labels ([`Metrics::with_const_labels`]) are part of every family; callers do not
//!   pass them, [`Metrics::remove`] never matches them, and a series cannot have a label of
//!   the same name.
//!
//! This module is the registry (registration, removal, rendering); the clocks, the handles,
//! the stats' windows and the stats' collector are its submodules, re-exported here.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus::core::{Collector, Desc, MetricVec, MetricVecBuilder};
use prometheus::{
    CounterVec, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry,
};

mod clock;
mod handles;
mod stat;
mod stat_family;

pub use clock::{Clock, ManualClock, MonotonicClock};
pub use handles::{Counter, Gauge, Histogram, SecondsCounter};
pub use stat::{Stat, StatBatch, StatSnapshot, DEFAULT_STAT_WINDOW, STAT_SLOTS};

use stat_family::StatFamily;

/// Why a series could not be registered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricsError {
    /// The `prometheus` crate refused the family or the series: an invalid metric or label
    /// name, a label given twice, an empty help text, or a family name it already has (a stat
    /// `x` has `x`, `x_min`, `x_max` and `x_avg`).
    #[error("metric `{name}` cannot be registered: {reason}")]
    Rejected {
        /// The metric being registered.
        name: String,
        /// The crate's reason.
        reason: String,
    },
    /// A label name the crate accepts but refract does not allow for this metric.
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
    /// The family is already registered with other label names.
    #[error(
        "metric `{name}` is already registered with the labels {existing:?}, not {requested:?}"
    )]
    LabelsConflict {
        /// The metric name.
        name: String,
        /// Label names of the existing family, sorted.
        existing: Vec<String>,
        /// Label names of this registration, sorted.
        requested: Vec<String>,
    },
    /// A constant label name is not valid (see [`Metrics::with_const_labels`]).
    #[error("constant label `{label}` is not allowed: {reason}")]
    InvalidConstLabel {
        /// The rejected label name.
        label: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Histogram bucket bounds are not finite and strictly increasing, or there are none.
    #[error("histogram `{name}`: bucket bounds must be finite and strictly increasing (at least one), got {buckets:?}")]
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

/// [`MetricsError::Rejected`] for what the crate said about `name`.
fn rejected(name: &str, e: prometheus::Error) -> MetricsError {
    MetricsError::Rejected {
        name: name.to_owned(),
        reason: e.to_string(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    SecondsCounter,
    Gauge,
    Stat,
    Histogram,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::SecondsCounter => "seconds counter",
            Kind::Gauge => "gauge",
            Kind::Stat => "stat",
            Kind::Histogram => "histogram",
        }
    }
}

/// A registered family: the crate's metric vector (or refract's stat collector).
#[derive(Clone)]
enum Vecs {
    Counter(IntCounterVec),
    SecondsCounter(CounterVec),
    Gauge(GaugeVec),
    Histogram(HistogramVec, Arc<[f64]>),
    Stat(StatFamily),
}

impl Vecs {
    fn kind(&self) -> Kind {
        match self {
            Vecs::Counter(_) => Kind::Counter,
            Vecs::SecondsCounter(_) => Kind::SecondsCounter,
            Vecs::Gauge(_) => Kind::Gauge,
            Vecs::Histogram(..) => Kind::Histogram,
            Vecs::Stat(_) => Kind::Stat,
        }
    }

    /// The collector the crate's registry renders (it shares the series with `self`).
    fn collector(&self) -> Box<dyn Collector> {
        match self {
            Vecs::Counter(v) => Box::new(v.clone()),
            Vecs::SecondsCounter(v) => Box::new(v.clone()),
            Vecs::Gauge(v) => Box::new(v.clone()),
            Vecs::Histogram(v, _) => Box::new(v.clone()),
            Vecs::Stat(s) => Box::new(s.clone()),
        }
    }
}

struct Family {
    /// Label names of every series, sorted; a series is addressed by its values in this order.
    labels: Box<[String]>,
    vecs: Vecs,
}

impl Family {
    /// Removes the series whose labels include all of `labels`; returns how many went.
    fn remove_matching(&self, labels: &[(&str, &str)]) -> usize {
        let mut filter = Vec::with_capacity(labels.len());
        for (label, value) in labels {
            match self.labels.binary_search_by(|l| l.as_str().cmp(label)) {
                Ok(i) => filter.push((i, *value)),
                // No series of this family has the label.
                Err(_) => return 0,
            }
        }
        match &self.vecs {
            Vecs::Counter(v) => remove_from(v, &self.labels, &filter),
            Vecs::SecondsCounter(v) => remove_from(v, &self.labels, &filter),
            Vecs::Gauge(v) => remove_from(v, &self.labels, &filter),
            Vecs::Histogram(v, _) => remove_from(v, &self.labels, &filter),
            Vecs::Stat(s) => s.remove_matching(&filter),
        }
    }
}

/// Removes the series of `vec` whose label value at each position of `filter` is the one
/// given there (the crate removes by complete label values only, so the matching ones are
/// found in what it collects).
fn remove_from<T: MetricVecBuilder>(
    vec: &MetricVec<T>,
    names: &[String],
    filter: &[(usize, &str)],
) -> usize {
    let mut removed = 0;
    for family in vec.collect() {
        for metric in family.get_metric() {
            // The collected pairs include the constant labels; keep the family's own.
            let values: Vec<&str> = metric
                .get_label()
                .iter()
                .filter(|p| names.binary_search_by(|n| n.as_str().cmp(p.name())).is_ok())
                .map(|p| p.value())
                .collect();
            let matches = filter.iter().all(|(i, v)| values.get(*i) == Some(v));
            if matches && vec.remove_label_values(&values).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

struct Inner {
    registry: Registry,
    families: Mutex<BTreeMap<String, Family>>,
    clock: Arc<dyn Clock>,
    stat_window: Duration,
    /// Labels of every family, sorted by name.
    const_labels: BTreeMap<String, String>,
    /// Length of the last rendering, so the next one sizes its buffer once.
    rendered_len: AtomicUsize,
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

    /// An empty registry like [`Metrics::new`] whose every family has the labels `labels`
    /// (e.g. `[("instance", "mirror-1")]`) on every sample. Label names follow the rules of
    /// series labels, and `le` is refused too (histogram buckets need it); values are escaped
    /// like any label value.
    ///
    /// Callers never pass constant labels when registering, and [`Metrics::remove`] never
    /// matches them; a series cannot have a label of the same name.
    pub fn with_const_labels(labels: &[(&str, &str)]) -> Result<Self, MetricsError> {
        let mut set = BTreeMap::new();
        for (label, value) in labels {
            let invalid = |reason: String| MetricsError::InvalidConstLabel {
                label: (*label).to_owned(),
                reason,
            };
            if let Some(reason) = reserved_label(label) {
                return Err(invalid(reason.to_owned()));
            }
            if *label == "le" {
                return Err(invalid("`le` is reserved for histogram buckets".to_owned()));
            }
            // The crate's own rules for a label name, asked of a throwaway descriptor.
            let one = HashMap::from([((*label).to_owned(), String::new())]);
            if let Err(e) = Desc::new("up".to_owned(), "-".to_owned(), Vec::new(), one) {
                return Err(invalid(e.to_string()));
            }
            if set
                .insert((*label).to_owned(), (*value).to_owned())
                .is_some()
            {
                return Err(invalid("the label is given twice".to_owned()));
            }
        }
        Ok(Self::build(
            Arc::new(MonotonicClock::new()),
            DEFAULT_STAT_WINDOW,
            set,
        ))
    }

    /// An empty registry whose stats use `clock` and a window of `stat_window`, without
    /// constant labels.
    pub fn with_clock(clock: Arc<dyn Clock>, stat_window: Duration) -> Self {
        Self::build(clock, stat_window, BTreeMap::new())
    }

    fn build(
        clock: Arc<dyn Clock>,
        stat_window: Duration,
        const_labels: BTreeMap<String, String>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                registry: Registry::new(),
                families: Mutex::new(BTreeMap::new()),
                clock,
                stat_window,
                const_labels,
                rendered_len: AtomicUsize::new(0),
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
        match self.family(name, help, Kind::Counter, None, labels)? {
            (Vecs::Counter(v), values) => v
                .get_metric_with_label_values(&values)
                .map(Counter)
                .map_err(|e| rejected(name, e)),
            (other, _) => Err(kind_conflict(name, other.kind(), Kind::Counter)),
        }
    }

    /// Registers (or finds) a counter of time spent, in seconds (exposed as a counter whose
    /// values are fractional).
    pub fn seconds_counter(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
    ) -> Result<SecondsCounter, MetricsError> {
        match self.family(name, help, Kind::SecondsCounter, None, labels)? {
            (Vecs::SecondsCounter(v), values) => v
                .get_metric_with_label_values(&values)
                .map(SecondsCounter)
                .map_err(|e| rejected(name, e)),
            (other, _) => Err(kind_conflict(name, other.kind(), Kind::SecondsCounter)),
        }
    }

    /// Registers (or finds) a gauge series; a new gauge starts at 0.
    pub fn gauge(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
    ) -> Result<Gauge, MetricsError> {
        match self.family(name, help, Kind::Gauge, None, labels)? {
            (Vecs::Gauge(v), values) => v
                .get_metric_with_label_values(&values)
                .map(Gauge)
                .map_err(|e| rejected(name, e)),
            (other, _) => Err(kind_conflict(name, other.kind(), Kind::Gauge)),
        }
    }

    /// Registers (or finds) a stat series, exposed as `name`, `name_min`, `name_max`, `name_avg`.
    pub fn stat(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
    ) -> Result<Stat, MetricsError> {
        match self.family(name, help, Kind::Stat, None, labels)? {
            (Vecs::Stat(s), values) => Ok(s.series(&values)),
            (other, _) => Err(kind_conflict(name, other.kind(), Kind::Stat)),
        }
    }

    /// Registers (or finds) a histogram series with the given finite, increasing bucket bounds
    /// (at least one; `+Inf` is implicit).
    pub fn histogram(
        &self,
        name: &str,
        help: &str,
        buckets: &[f64],
        labels: &[(&str, &str)],
    ) -> Result<Histogram, MetricsError> {
        let increasing = buckets.windows(2).all(|w| w[0] < w[1]);
        if buckets.is_empty() || !increasing || buckets.iter().any(|b| !b.is_finite()) {
            return Err(MetricsError::InvalidBuckets {
                name: name.to_owned(),
                buckets: buckets.to_vec(),
            });
        }
        match self.family(name, help, Kind::Histogram, Some(buckets), labels)? {
            (Vecs::Histogram(v, _), values) => v
                .get_metric_with_label_values(&values)
                .map(Histogram)
                .map_err(|e| rejected(name, e)),
            (other, _) => Err(kind_conflict(name, other.kind(), Kind::Histogram)),
        }
    }

    /// Removes the series of every family whose name starts with `name_prefix` and whose labels
    /// include all of `labels` (a stat matches by its registered name, and its four exposed
    /// families go together); returns how many series went away. `labels` match the labels the
    /// series were registered with, never the constant labels. Handles to removed series
    /// keep working but are no longer rendered; registering them again starts a fresh series.
    pub fn remove(&self, name_prefix: &str, labels: &[(&str, &str)]) -> usize {
        self.lock()
            .iter()
            .filter(|(name, _)| name.starts_with(name_prefix))
            .map(|(_, family)| family.remove_matching(labels))
            .sum()
    }

    /// The whole registry in Prometheus text exposition format 0.0.4.
    pub fn render(&self) -> String {
        let families = self.inner.registry.gather();
        let mut out = String::with_capacity(self.inner.rendered_len.load(Ordering::Relaxed));
        if let Err(e) = prometheus::TextEncoder::new().encode_utf8(&families, &mut out) {
            // The encoder refuses only a family without samples or without a name, and the
            // registry's gathering leaves out the first while every family here has a name.
            tracing::warn!("metrics exposition cut short: {e}");
        }
        self.inner.rendered_len.store(out.len(), Ordering::Relaxed);
        out
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Family>> {
        // Registry critical sections do not panic; a poisoned lock still holds consistent maps.
        self.inner
            .families
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The family `name` of `kind` with the label names of `labels`, registered now if it is
    /// new, and the values of `labels` in the family's label order.
    fn family<'l>(
        &self,
        name: &str,
        help: &str,
        kind: Kind,
        buckets: Option<&[f64]>,
        labels: &[(&'l str, &'l str)],
    ) -> Result<(Vecs, Vec<&'l str>), MetricsError> {
        let mut sorted = labels.to_vec();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let values = sorted.iter().map(|(_, v)| *v).collect();
        let mut families = self.lock();
        if let Some(family) = families.get(name) {
            let existing = family.vecs.kind();
            if existing != kind {
                return Err(kind_conflict(name, existing, kind));
            }
            if !family
                .labels
                .iter()
                .map(String::as_str)
                .eq(sorted.iter().map(|l| l.0))
            {
                return Err(MetricsError::LabelsConflict {
                    name: name.to_owned(),
                    existing: family.labels.to_vec(),
                    requested: sorted.iter().map(|l| l.0.to_owned()).collect(),
                });
            }
            if let (Vecs::Histogram(_, existing), Some(requested)) = (&family.vecs, buckets) {
                if **existing != *requested {
                    return Err(MetricsError::BucketsConflict {
                        name: name.to_owned(),
                        existing: existing.to_vec(),
                        requested: requested.to_vec(),
                    });
                }
            }
            return Ok((family.vecs.clone(), values));
        }
        for (label, _) in &sorted {
            let reason = reserved_label(label)
                .or_else(|| {
                    (kind == Kind::Histogram && *label == "le")
                        .then_some("`le` is reserved for histogram buckets")
                })
                .or_else(|| {
                    self.inner
                        .const_labels
                        .contains_key(*label)
                        .then_some("it is a constant label of this registry")
                });
            if let Some(reason) = reason {
                return Err(MetricsError::InvalidLabel {
                    name: name.to_owned(),
                    label: (*label).to_owned(),
                    reason,
                });
            }
        }
        let label_names: Box<[String]> = sorted.iter().map(|l| l.0.to_owned()).collect();
        let vecs = self
            .create(name, help, kind, &label_names, buckets)
            .map_err(|e| rejected(name, e))?;
        self.inner
            .registry
            .register(vecs.collector())
            .map_err(|e| rejected(name, e))?;
        families.insert(
            name.to_owned(),
            Family {
                labels: label_names,
                vecs: vecs.clone(),
            },
        );
        Ok((vecs, values))
    }

    /// A new, unregistered family.
    fn create(
        &self,
        name: &str,
        help: &str,
        kind: Kind,
        label_names: &[String],
        buckets: Option<&[f64]>,
    ) -> prometheus::Result<Vecs> {
        let const_labels: HashMap<String, String> = self
            .inner
            .const_labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let labels: Vec<&str> = label_names.iter().map(String::as_str).collect();
        let opts = Opts::new(name, help).const_labels(const_labels.clone());
        Ok(match kind {
            Kind::Counter => Vecs::Counter(IntCounterVec::new(opts, &labels)?),
            Kind::SecondsCounter => Vecs::SecondsCounter(CounterVec::new(opts, &labels)?),
            Kind::Gauge => Vecs::Gauge(GaugeVec::new(opts, &labels)?),
            Kind::Histogram => {
                let buckets = buckets.unwrap_or_default();
                let opts = HistogramOpts::from(opts).buckets(buckets.to_vec());
                Vecs::Histogram(HistogramVec::new(opts, &labels)?, Arc::from(buckets))
            }
            Kind::Stat => Vecs::Stat(StatFamily::new(
                name,
                help,
                label_names,
                &const_labels,
                Arc::clone(&self.inner.clock),
                self.inner.stat_window,
            )?),
        })
    }
}

fn kind_conflict(name: &str, existing: Kind, requested: Kind) -> MetricsError {
    MetricsError::KindConflict {
        name: name.to_owned(),
        existing: existing.describe(),
        requested: requested.describe(),
    }
}

/// Why a label name the crate accepts is still refused, if it is: Prometheus reserves `__`.
fn reserved_label(label: &str) -> Option<&'static str> {
    label
        .starts_with("__")
        .then_some("names starting with `__` are reserved")
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
        assert!(matches!(
            m.histogram("x", "h", &[1.0], &[]),
            Err(MetricsError::KindConflict { .. })
        ));
        // A stat's families are the crate's to keep apart, either way round.
        assert_eq!(
            m.gauge("s_min", "h", &[]).unwrap_err().to_string(),
            "metric `s_min` cannot be registered: Duplicate metrics collector registration attempted"
        );
        m.gauge("t_avg", "h", &[]).unwrap();
        assert!(matches!(
            m.stat("t", "h", &[]),
            Err(MetricsError::Rejected { name, .. }) if name == "t"
        ));
        // What the crate refuses comes back with the metric's name and the crate's reason.
        for (name, help, labels) in [
            ("1bad", "h", &[][..]),
            ("", "h", &[]),
            ("ok", "", &[]),
            ("ok", "h", &[("9a", "v")]),
            ("ok", "h", &[("a-b", "v")]),
            ("ok", "h", &[("", "v")]),
            ("ok", "h", &[("a", "1"), ("a", "2")]),
        ] {
            let err = m.counter(name, help, labels).unwrap_err();
            assert!(
                matches!(&err, MetricsError::Rejected { name: n, .. } if n == name),
                "{err}"
            );
        }
        assert_eq!(
            m.counter("1bad", "h", &[]).unwrap_err().to_string(),
            "metric `1bad` cannot be registered: Error: '1bad' is not a valid metric name"
        );
        assert!(matches!(
            m.counter("ok", "h", &[("__x", "v")]),
            Err(MetricsError::InvalidLabel { .. })
        ));
        assert!(matches!(
            m.histogram("h2", "h", &[1.0], &[("le", "1")]),
            Err(MetricsError::InvalidLabel { .. })
        ));
        m.counter("c", "h", &[("a", "1")]).unwrap();
        assert_eq!(
            m.counter("c", "h", &[("b", "1"), ("a", "1")]).unwrap_err(),
            MetricsError::LabelsConflict {
                name: "c".into(),
                existing: vec!["a".into()],
                requested: vec!["a".into(), "b".into()]
            }
        );
        for bad in [
            &[2.0, 1.0][..],
            &[1.0, 1.0],
            &[f64::NAN],
            &[1.0, f64::INFINITY],
            &[],
        ] {
            assert!(matches!(
                m.histogram("h3", "h", bad, &[]),
                Err(MetricsError::InvalidBuckets { .. })
            ));
        }
        assert!(matches!(
            m.histogram("h", "h", &[2.0], &[]),
            Err(MetricsError::BucketsConflict { .. })
        ));
        // Failed registrations left nothing behind: every family they tried is free.
        assert!(!m.render().contains("ok"));
        m.gauge("ok", "h", &[]).unwrap();
        m.gauge("h2", "h", &[]).unwrap();
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
    }

    #[test]
    fn remove_by_prefix_and_labels() {
        let m = Metrics::new();
        let keep = m
            .counter("a_x", "h", &[("flow", "f2"), ("p", "0")])
            .unwrap();
        let gone = m
            .counter("a_x", "h", &[("flow", "f1"), ("p", "0")])
            .unwrap();
        m.stat("a_s", "h", &[("flow", "f1")]).unwrap();
        m.gauge("b_x", "h", &[("flow", "f1")]).unwrap();
        m.gauge("a_other", "h", &[("p", "0")]).unwrap();
        assert_eq!(m.remove("a_", &[("flow", "f1")]), 2);
        assert_eq!(m.remove("a_", &[("flow", "f1")]), 0);
        gone.inc();
        keep.inc();
        let text = m.render();
        assert!(!text.contains("f1\",p") && !text.contains("a_s"), "{text}");
        assert!(text.contains("a_x{flow=\"f2\",p=\"0\"} 1") && text.contains("b_x{flow=\"f1\"} 0"));
        // Re-registering after removal starts fresh; the kind is still remembered.
        assert_eq!(
            m.counter("a_x", "h", &[("flow", "f1"), ("p", "0")])
                .unwrap()
                .get(),
            0
        );
        assert!(m.gauge("a_s", "h", &[]).is_err());
        assert_eq!(m.remove("", &[]), 4);
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
        // A series cannot have a label the registry adds itself.
        assert!(matches!(
            m.gauge("g", "h", &[("instance", "own")]),
            Err(MetricsError::InvalidLabel { label, .. }) if label == "instance"
        ));
        assert_eq!(m.remove("c", &[("instance", "i1")]), 0);
        assert_eq!(m.remove("c", &[("flow", "f")]), 1);
        assert_eq!(m.render(), "");
        assert_eq!(Metrics::new().render(), "");
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
    fn const_labels_sort_with_the_series_own_labels_and_le_stays_last() {
        let m = Metrics::with_const_labels(&[("instance", "mirror \"1\"\\\n"), ("zz", "last")])
            .unwrap();
        m.gauge("g", "A gauge.", &[("zone", "2"), ("az", "x")])
            .unwrap()
            .set(1.0);
        m.gauge("g", "A gauge.", &[("zone", "1"), ("az", "y")])
            .unwrap()
            .set(2.0);
        let h = m
            .histogram("d_seconds", "Duration.", &[0.5, 1.0], &[("f", "x")])
            .unwrap();
        h.observe(0.25);
        h.observe(2.0);
        let s = m.stat("lat_ms", "Latency.", &[("p", "0")]).unwrap();
        s.record(4.0);
        s.record(2.0);
        let expected = "\
# HELP d_seconds Duration.
# TYPE d_seconds histogram
d_seconds_bucket{f=\"x\",instance=\"mirror \\\"1\\\"\\\\\\n\",zz=\"last\",le=\"0.5\"} 1
d_seconds_bucket{f=\"x\",instance=\"mirror \\\"1\\\"\\\\\\n\",zz=\"last\",le=\"1\"} 1
d_seconds_bucket{f=\"x\",instance=\"mirror \\\"1\\\"\\\\\\n\",zz=\"last\",le=\"+Inf\"} 2
d_seconds_sum{f=\"x\",instance=\"mirror \\\"1\\\"\\\\\\n\",zz=\"last\"} 2.25
d_seconds_count{f=\"x\",instance=\"mirror \\\"1\\\"\\\\\\n\",zz=\"last\"} 2
# HELP g A gauge.
# TYPE g gauge
g{az=\"x\",instance=\"mirror \\\"1\\\"\\\\\\n\",zone=\"2\",zz=\"last\"} 1
g{az=\"y\",instance=\"mirror \\\"1\\\"\\\\\\n\",zone=\"1\",zz=\"last\"} 2
# HELP lat_ms Latency. (last recorded value)
# TYPE lat_ms gauge
lat_ms{instance=\"mirror \\\"1\\\"\\\\\\n\",p=\"0\",zz=\"last\"} 2
# HELP lat_ms_avg Latency. (average over the last 30s)
# TYPE lat_ms_avg gauge
lat_ms_avg{instance=\"mirror \\\"1\\\"\\\\\\n\",p=\"0\",zz=\"last\"} 3
# HELP lat_ms_max Latency. (maximum over the last 30s)
# TYPE lat_ms_max gauge
lat_ms_max{instance=\"mirror \\\"1\\\"\\\\\\n\",p=\"0\",zz=\"last\"} 4
# HELP lat_ms_min Latency. (minimum over the last 30s)
# TYPE lat_ms_min gauge
lat_ms_min{instance=\"mirror \\\"1\\\"\\\\\\n\",p=\"0\",zz=\"last\"} 2
";
        assert_eq!(m.render(), expected);
    }

    #[test]
    fn float_formatting() {
        // Rust's shortest round-trip formatting, never an exponent; the crate writes
        // infinities as `inf`/`-inf`, which Prometheus parses like `+Inf`/`-Inf`.
        let cases = [
            (1.0, "1"),
            (0.00001, "0.00001"),
            (1e-7, "0.0000001"),
            (-2.5, "-2.5"),
            (1e21, "1000000000000000000000"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "NaN"),
        ];
        for (v, want) in cases {
            let m = Metrics::new();
            m.gauge("g", "h", &[]).unwrap().set(v);
            assert_eq!(
                m.render(),
                format!("# HELP g h\n# TYPE g gauge\ng {want}\n")
            );
        }
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
