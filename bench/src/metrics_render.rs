//! `refract-bench metrics-render`: how long one `/metrics` scrape takes to render and how big
//! it is when a process mirrors many partitions. One flow mirrors `topics` × `partitions`
//! partitions with every per-partition series registered and set (MirrorMaker 2's record and
//! byte counts, record age and replication latency stats, the lag, and one checkpointed
//! group's checkpoint latency), plus the flow's and one plugin's series; the registry is then
//! rendered `renders` times and the median time printed. No broker is involved.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use refract_mirror::{FlowState, RecordEvent, RefractSeries};
use refract_telemetry::Metrics;

/// Sizes of the registry rendered.
#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Topics the flow mirrors
    #[arg(long, value_name = "N", default_value_t = 200)]
    topics: usize,
    /// Partitions of each topic
    #[arg(long, value_name = "N", default_value_t = 10)]
    partitions: i32,
    /// Renders measured (after one warm-up render)
    #[arg(long, value_name = "N", default_value_t = 50)]
    renders: usize,
    /// One series per topic instead of per partition (`[metrics] partition_series = false`)
    #[arg(long)]
    per_topic: bool,
}

/// Registers the series, renders them `opts.renders` times and prints the median.
pub fn main(opts: Opts) -> Result<()> {
    ensure!(opts.renders > 0, "--renders must be at least 1");
    let metrics = Metrics::new();
    let flow = metrics.flow("src->dst")?;
    flow.set_state(FlowState::Running);
    flow.count(RecordEvent::Sent, 1_000_000);
    flow.inflight_bytes.set_i64(65_536);
    let plugin = metrics.plugin("mask", "src->dst")?;
    plugin.calls.inc_by(1_000_000);
    plugin.call_duration.observe(0.000_04);
    let mut series = 0;
    for t in 0..opts.topics {
        let remote = format!("src.topic-{t:03}");
        for p in 0..opts.partitions {
            let partition = (!opts.per_topic).then_some(p);
            let s = metrics.source_partition("src", "dst", &remote, partition)?;
            s.record_count.inc_by(1_000 + p as u64);
            s.byte_count.inc_by(1_024_000);
            s.record_age_ms.record(12.5);
            s.record_age_ms.record(3.0);
            s.replication_latency_ms.record(45.25);
            s.replication_lag_records.set_i64(i64::from(p) * 7);
            metrics
                .checkpoint_latency_ms("src", "dst", "orders-app", &remote, partition)?
                .record(8.0);
            series += 1;
        }
    }
    let bytes = metrics.render().len();
    let mut times: Vec<Duration> = (0..opts.renders)
        .map(|_| {
            let start = Instant::now();
            let text = metrics.render();
            let took = start.elapsed();
            std::hint::black_box(text);
            took
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "metrics render: {series} partitions{}, {bytes} bytes, {} lines; median {:.2} ms (min {:.2}, max {:.2}) over {} renders",
        if opts.per_topic { " (series per topic)" } else { "" },
        metrics.render().lines().count(),
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1]),
        opts.renders
    );
    Ok(())
}
