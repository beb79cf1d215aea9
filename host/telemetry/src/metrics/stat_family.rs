//! MirrorMaker 2's stats as a `prometheus` collector: one family of [`Stat`]s with the same
//! label names, exposed as the four gauge families `<name>` (last recorded value),
//! `<name>_min`, `<name>_max` and `<name>_avg`. The crate has no windowed min/max/avg metric,
//! so this module supplies the [`Collector`]; the window itself is [`stat`](super::stat).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, LabelPair, Metric, MetricFamily, MetricType};

use super::stat::{Stat, StatCell};
use super::Clock;

/// One stat family, registered in the crate's registry as one collector of four families.
/// Cheap to clone: clones share the series.
#[derive(Clone)]
pub(super) struct StatFamily(Arc<Inner>);

struct Inner {
    /// The descriptors of `<name>`, `<name>_min`, `<name>_max` and `<name>_avg`, in that order.
    descs: [Desc; 4],
    clock: Arc<dyn Clock>,
    window: Duration,
    /// The series by their label values (in the order of the descriptors' label names). Sorted,
    /// so they are collected in the order the registry exposes them and its sort of thousands
    /// of samples per family finds them in order already.
    series: Mutex<BTreeMap<Box<[String]>, Series>>,
}

struct Series {
    cell: Arc<StatCell>,
    /// Its labels and the constant ones, sorted by name: what every sample of it carries.
    labels: Vec<LabelPair>,
}

impl StatFamily {
    /// An empty family `name` whose series have the labels `label_names` (sorted) besides
    /// `const_labels`; its min/max/avg cover `window` as `clock` tells time.
    pub(super) fn new(
        name: &str,
        help: &str,
        label_names: &[String],
        const_labels: &HashMap<String, String>,
        clock: Arc<dyn Clock>,
        window: Duration,
    ) -> prometheus::Result<Self> {
        let desc = |suffix: &str, what: String| {
            Desc::new(
                format!("{name}{suffix}"),
                format!("{help} ({what})"),
                label_names.to_vec(),
                const_labels.clone(),
            )
        };
        let descs = [
            desc("", "last recorded value".to_owned())?,
            desc("_min", format!("minimum over the last {window:?}"))?,
            desc("_max", format!("maximum over the last {window:?}"))?,
            desc("_avg", format!("average over the last {window:?}"))?,
        ];
        Ok(Self(Arc::new(Inner {
            descs,
            clock,
            window,
            series: Mutex::new(BTreeMap::new()),
        })))
    }

    /// The series with these label values, created (empty) if it does not exist.
    pub(super) fn series(&self, values: &[&str]) -> Stat {
        let key: Box<[String]> = values.iter().map(|v| (*v).to_owned()).collect();
        let mut series = self.lock();
        if let Some(s) = series.get(&key) {
            return Stat(Arc::clone(&s.cell));
        }
        let desc = &self.0.descs[0];
        let mut labels: Vec<LabelPair> = desc
            .variable_labels
            .iter()
            .zip(key.iter())
            .map(|(name, value)| label_pair(name, value))
            .chain(desc.const_label_pairs.iter().cloned())
            .collect();
        labels.sort();
        let cell = Arc::new(StatCell::new(Arc::clone(&self.0.clock), self.0.window));
        series.insert(
            key,
            Series {
                cell: Arc::clone(&cell),
                labels,
            },
        );
        Stat(cell)
    }

    /// Removes every series whose label value at each position of `filter` is the one given
    /// there; returns how many went.
    pub(super) fn remove_matching(&self, filter: &[(usize, &str)]) -> usize {
        let mut series = self.lock();
        let before = series.len();
        series.retain(|key, _| {
            !filter
                .iter()
                .all(|(i, v)| key.get(*i).is_some_and(|k| k == v))
        });
        before - series.len()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<Box<[String]>, Series>> {
        // The critical sections cannot panic, but never let a poisoned lock stop metrics.
        self.0.series.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn label_pair(name: &str, value: &str) -> LabelPair {
    let mut pair = LabelPair::default();
    pair.set_name(name.to_owned());
    pair.set_value(value.to_owned());
    pair
}

impl Collector for StatFamily {
    fn desc(&self) -> Vec<&Desc> {
        self.0.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let series = self.lock();
        let mut samples: [Vec<Metric>; 4] =
            std::array::from_fn(|_| Vec::with_capacity(series.len()));
        for s in series.values() {
            // One snapshot (one lock of the stat) feeds all four families.
            let snap = s.cell.snapshot();
            let values = [snap.value, snap.min, snap.max, snap.avg];
            for (metrics, value) in samples.iter_mut().zip(values) {
                let mut gauge = proto::Gauge::default();
                gauge.set_value(value);
                let mut metric = Metric::from_gauge(gauge);
                metric.set_label(s.labels.clone());
                metrics.push(metric);
            }
        }
        drop(series);
        self.0
            .descs
            .iter()
            .zip(samples)
            .map(|(desc, metrics)| {
                let mut family = MetricFamily::default();
                family.set_name(desc.fq_name.clone());
                family.set_help(desc.help.clone());
                family.set_field_type(MetricType::GAUGE);
                family.set_metric(metrics);
                family
            })
            .collect()
    }
}
