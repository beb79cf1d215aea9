//! The Prometheus text exposition format 0.0.4: [`Metrics::render`] and the encoder it uses
//! (HELP/TYPE lines, label sets with the constant labels merged in, histogram buckets, number
//! formatting and escaping). Apart from the registry so the wire format reads in one place.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::handles::HistogramCell;
use super::{Cell, Family, Kind, Metrics};

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
