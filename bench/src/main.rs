//! Measures refract's throughput against a plain librdkafka consume→produce loop between two
//! librdkafka mock clusters (in-process, so the mirror is measured, not a broker); the
//! `kafka-compare` mode (`mm2_compare`, run by bench/mm2-compare) compares refract with
//! MirrorMaker 2 on real Apache Kafka brokers; the `metrics-render` mode (`metrics_render`)
//! times rendering `/metrics` for thousands of partitions, without brokers.
//!
//! The source is pre-filled once; every scenario mirrors it into a fresh target cluster, in its
//! own process, so each one's CPU time and peak RSS are its own. Rates are measured from the
//! first record landing on the target to the last, so process start and plugin compilation are
//! not counted; CPU is counted over the same span, with the CPU spent before it reported apart.
//! Broker-only produce and fetch rates are measured in the same run.
//!
//! Scenarios (j) and (k) mirror a second source topic whose values are framed for a schema
//! registry (byte 0, a 4-byte schema id, the same JSON), with a real Apicurio Registry for each
//! cluster (refract-testkit's `Registry`): (j) copies them as bytes (`schemas = "off"`), (k)
//! translates their id (`schemas = "translate"`), so (k)/(j) is what translation costs on its
//! cache-hit path.
//!
//! With `--repeat`, the scenarios take turns, forwards then backwards (a b c, c b a, a b c …),
//! so a change in the shared machine's load falls on every scenario alike rather than on one,
//! and none always runs right after the same other one.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

mod metrics_render;
mod mm2_compare;

use refract_testkit::Registry;

const TOPIC: &str = "bench";
const REMOTE: &str = "source.bench";
/// The source topic of the schema scenarios (j, k): the same records, values framed.
const FRAMED_TOPIC: &str = "framed";
const FRAMED_REMOTE: &str = "source.framed";
/// The schema of the framed values, registered on the source registry before the runs.
const FRAMED_SCHEMA: &str = r#"{"type":"object","properties":{"id":{"type":"integer"},"email":{"type":"string"},"pad":{"type":"string"}}}"#;
const LATENCY_TOPIC: &str = "latency";
const LATENCY_REMOTE: &str = "source.latency";
/// Enough partitions that a few seconds of small records stay under the mock cluster's 5 MiB
/// per-partition log.
const LATENCY_PARTITIONS: i32 = 32;
const LATENCY_VALUE_BYTES: usize = 100;

/// refract's throughput and latency on librdkafka mock clusters (bench/run), or, with
/// `kafka-compare`, refract against MirrorMaker 2 on real Kafka brokers (bench/mm2-compare).
#[derive(clap::Parser, Debug)]
#[command(
    name = "refract-bench",
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    #[command(flatten)]
    args: Args,
}

#[derive(clap::Subcommand, Debug)]
enum Mode {
    /// refract against MirrorMaker 2 on two real Apache Kafka brokers (run by bench/mm2-compare)
    #[command(args_override_self = true)]
    KafkaCompare(mm2_compare::Opts),
    /// Time and size of one /metrics render with thousands of partitions (no brokers)
    MetricsRender(metrics_render::Opts),
    /// The baseline scenario's consume→produce loop (the benchmark starts it itself)
    #[command(hide = true)]
    BaselinePipe {
        /// Source bootstrap servers
        source: String,
        /// Target bootstrap servers
        target: String,
        /// Partitions of the topic
        partitions: i32,
    },
}

#[derive(clap::Args, Debug)]
struct Args {
    /// The refract binary
    #[arg(long, value_name = "PATH", default_value = "target/release/refract")]
    refract: PathBuf,
    /// Records in the source topic
    #[arg(long, value_name = "N", default_value_t = 120_000)]
    records: usize,
    /// Partitions of the source topic
    #[arg(long, value_name = "N", default_value_t = 32)]
    partitions: i32,
    /// Bytes per record value
    #[arg(long, value_name = "N", default_value_t = 1024)]
    value_bytes: usize,
    /// Comma-separated scenario letters to run (a to k) and `latency` [default: all]
    // Set, not the default Append: a second --only replaces the first (as it always did)
    #[arg(long, value_name = "LIST", value_delimiter = ',', action = clap::ArgAction::Set)]
    only: Option<Vec<String>>,
    /// The Python filter of scenario (f), run when the file exists
    #[arg(
        long,
        value_name = "PATH",
        default_value = "examples/plugins/python/filter.wasm"
    )]
    python_filter: Option<PathBuf>,
    /// Overrides the latency run's rate in records/s (default: half of (b)'s measured rate).
    #[arg(long, value_name = "RATE")]
    latency_rate: Option<f64>,
    /// Runs of each scenario; the table shows the median run and the spread.
    #[arg(long, value_name = "N", default_value_t = 1)]
    repeat: usize,
    /// Extra `[[flow]]` settings for every refract scenario (TOML lines), for experiments.
    #[arg(
        long,
        value_name = "TOML",
        default_value = "",
        allow_hyphen_values = true
    )]
    flow_extra: String,
    /// linger.ms of the latency run's load generator.
    #[arg(long, value_name = "MS", default_value_t = 5)]
    latency_linger_ms: u32,
}

fn main() -> Result<()> {
    let cli = <Cli as clap::Parser>::parse();
    let mut args = match cli.mode {
        // refract against MirrorMaker 2 on real Apache Kafka brokers (bench/mm2-compare)
        Some(Mode::KafkaCompare(opts)) => return mm2_compare::main(opts),
        Some(Mode::MetricsRender(opts)) => return metrics_render::main(opts),
        Some(Mode::BaselinePipe {
            source,
            target,
            partitions,
        }) => return baseline_pipe(&source, &target, partitions),
        None => cli.args,
    };
    args.repeat = args.repeat.max(1);
    // A compile cache of this run's own: the first scenario that uses a plugin pays for compiling
    // it (its start CPU shows that), later runs of that plugin load it.
    let cache = tempfile::tempdir()?;
    std::env::set_var("REFRACT_CACHE_DIR", cache.path());
    let source = MockCluster::new(1)?;
    source.create_topic(TOPIC, args.partitions, 1)?;
    source.create_topic(LATENCY_TOPIC, LATENCY_PARTITIONS, 1)?;
    // MirrorMaker 2's internal topics, which refract would create itself on a real cluster (the
    // mock cluster has no CreateTopics): the reverse heartbeats and every scenario's offset syncs.
    source.create_topic("heartbeats", 1, 1)?;
    source.create_topic("mm2-offset-syncs.lat.internal", 1, 1)?;
    let bytes = args.records * args.value_bytes;
    let produce = prefill(&source.bootstrap_servers(), &args, TOPIC, None)?;
    let fetch = fetch_all(&source.bootstrap_servers(), args.partitions, args.records)?;
    println!(
        "source: {} records x {} B over {} partitions; broker-only produce {:.0} rec/s ({:.1} MB/s), fetch {:.0} rec/s ({:.1} MB/s)",
        args.records,
        args.value_bytes,
        args.partitions,
        produce,
        produce * args.value_bytes as f64 / 1e6,
        fetch,
        fetch * args.value_bytes as f64 / 1e6
    );
    let _ = bytes;

    let scenario = |name, processors: Option<&str>, share, extra| Scenario {
        name,
        processors: processors.map(str::to_string),
        share,
        extra,
        schemas: None,
    };
    let mut scenarios = vec![
        scenario("a baseline: librdkafka pipe", None, 1.0, ""),
        scenario("b refract, no processor", Some(""), 1.0, ""),
        scenario(
            "c refract + pass-through WASM filter",
            Some("{ plugin = \"builtin:filter\", config = { action = \"keep\", topic = \".*\" } }"),
            1.0,
            "",
        ),
        scenario(
            "d refract + WASM filter dropping 50%",
            Some("{ plugin = \"builtin:filter\", config = { key = \"k[0-9]*[02468]\" } }"),
            0.5,
            "",
        ),
        scenario(
            "e refract + json-mask",
            Some("{ plugin = \"builtin:json-mask\", config = { fields = [\"email\"] } }"),
            1.0,
            "",
        ),
        scenario(
            "g refract exactly-once, transaction_interval 100ms",
            Some(""),
            1.0,
            EXACTLY_ONCE_100MS,
        ),
        scenario(
            "h refract exactly-once, transaction_interval 1s",
            Some(""),
            1.0,
            EXACTLY_ONCE_1S,
        ),
        scenario(
            "i refract exactly-once, transaction_interval 5s",
            Some(""),
            1.0,
            "delivery = \"exactly-once\"\ntransaction_interval = \"5s\"\n",
        ),
        Scenario {
            schemas: Some(Schemas::Off),
            ..scenario("j refract, framed values, schemas off", Some(""), 1.0, "")
        },
        Scenario {
            schemas: Some(Schemas::Translate),
            ..scenario(
                "k refract, framed values, schemas translate",
                Some(""),
                1.0,
                "",
            )
        },
    ];
    let python = match args.python_filter.as_ref().filter(|p| p.exists()) {
        Some(py) => Some(format!(
            "{{ plugin = \"{}\", config = {{ header = \"env\", equals = \"test\" }} }}",
            py.canonicalize()?.display()
        )),
        None => None,
    };
    if let Some(py) = &python {
        scenarios.push(scenario("f refract + Python filter", Some(py), 1.0, ""));
    }
    // (index in the full list, scenario) of those --only selects.
    let mut selected: Vec<(usize, Scenario)> = scenarios
        .into_iter()
        .enumerate()
        .filter(|(_, s)| args.only.as_ref().is_none_or(|o| o.contains(&s.letter())))
        .collect();
    // The framed topic and both registries, when a schema scenario runs. A run of every
    // scenario leaves (j) and (k) out when the registries cannot start (no Java 21, say), as it
    // leaves (f) out without the Python filter; one that names them fails.
    let registries = if selected.iter().any(|(_, s)| s.schemas.is_some()) {
        match Registries::start() {
            Ok(registries) => {
                source.create_topic(FRAMED_TOPIC, args.partitions, 1)?;
                prefill(
                    &source.bootstrap_servers(),
                    &args,
                    FRAMED_TOPIC,
                    Some(registries.id),
                )?;
                Some(registries)
            }
            Err(e) if args.only.is_none() => {
                eprintln!("scenarios j and k left out: the schema registries did not start: {e:#}");
                selected.retain(|(_, s)| s.schemas.is_none());
                None
            }
            Err(e) => return Err(e.context("scenarios j and k need two schema registries")),
        }
    } else {
        None
    };
    // Every scenario's runs, in the order they ran; the scenarios take turns, in the order
    // given in even rounds and the reverse in odd ones, so none always runs first (after a
    // scenario, the brokers' caches and JVMs are warmer for the next).
    let mut runs: Vec<Vec<Outcome>> = selected.iter().map(|_| Vec::new()).collect();
    for run in 0..args.repeat {
        let mut turn: Vec<_> = selected.iter().zip(&mut runs).collect();
        if run % 2 == 1 {
            turn.reverse();
        }
        for ((index, s), done) in turn {
            let expected = (args.records as f64 * s.share) as i64;
            // Every run mirrors into its own target alias, so it has its own progress group and
            // starts from the beginning of the source.
            let alias = format!("t{index}r{run}");
            source.create_topic(&format!("mm2-offset-syncs.{alias}.internal"), 1, 1)?;
            let input = match (s.schemas, &registries) {
                (Some(schemas), Some(registries)) => Input::Framed {
                    schemas,
                    registries,
                },
                _ => Input::Plain,
            };
            let r = run_scenario(
                &args,
                &source.bootstrap_servers(),
                s.processors.as_deref(),
                s.extra,
                expected,
                &alias,
                &input,
            )
            .with_context(|| format!("scenario {}", s.name))?;
            eprintln!("{}: {:.0} rec/s", s.name, r.rate);
            done.push(r);
        }
    }
    let mut results = Vec::new();
    // Each round's translate/passthrough ratio, (k)/(j), in the order they ran, and the median
    // CPU µs per record of (j) and (k) over all their runs.
    let mut translation_rounds = Vec::new();
    let mut translation_cpu = None;
    if let (Some(j), Some(k)) = (
        selected
            .iter()
            .position(|(_, s)| s.schemas == Some(Schemas::Off)),
        selected
            .iter()
            .position(|(_, s)| s.schemas == Some(Schemas::Translate)),
    ) {
        translation_rounds = runs[j]
            .iter()
            .zip(&runs[k])
            .map(|(j, k)| k.rate / j.rate)
            .collect();
        let cpu_us = |runs: &[Outcome]| {
            let mut per: Vec<f64> = runs
                .iter()
                .map(|r| r.cpu_seconds / r.records * 1e6)
                .collect();
            per.sort_by(f64::total_cmp);
            per[per.len() / 2]
        };
        translation_cpu = Some((cpu_us(&runs[j]), cpu_us(&runs[k])));
    }
    for ((_, s), mut runs) in selected.iter().zip(runs) {
        runs.sort_by(|x, y| x.rate.total_cmp(&y.rate));
        let spread = (runs[0].rate, runs[runs.len() - 1].rate);
        let mut median = runs.swap_remove(runs.len() / 2);
        median.spread = spread;
        results.push((s.name, median));
    }
    let b_rate = results
        .iter()
        .find(|(n, _)| n.starts_with('b'))
        .map(|(_, r)| r.rate);
    let latency = match b_rate {
        Some(rate)
            if args
                .only
                .as_ref()
                .is_none_or(|o| o.iter().any(|x| x == "latency")) =>
        {
            let rate = args.latency_rate.unwrap_or(rate / 2.0);
            let bootstrap = source.bootstrap_servers();
            Some((
                measure_latency(&args, &bootstrap, rate, "")?,
                measure_latency(&args, &bootstrap, rate, EXACTLY_ONCE_1S)?,
            ))
        }
        _ => None,
    };
    let base = results.first().map(|(_, r)| r.rate).unwrap_or(1.0);
    let b = results
        .iter()
        .find(|(n, _)| n.starts_with('b'))
        .map(|(_, r)| r.rate);
    println!();
    if args.repeat > 1 {
        println!(
            "median of {} runs per scenario; range = slowest..fastest run",
            args.repeat
        );
    }
    println!(
        "| scenario | records/s | range | MB/s | vs (a) | vs (b) | CPU s / M records | start CPU s | peak RSS MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, r) in &results {
        println!(
            "| {name} | {:.0} | {:.0}k–{:.0}k | {:.1} | {:.2} | {} | {:.1} | {:.2} | {:.0} |",
            r.rate,
            r.spread.0 / 1e3,
            r.spread.1 / 1e3,
            r.rate * args.value_bytes as f64 / 1e6,
            r.rate / base,
            b.map_or("-".to_string(), |b| format!("{:.2}", r.rate / b)),
            r.cpu_seconds / (r.records / 1e6),
            r.startup_cpu,
            r.peak_rss_kib as f64 / 1024.0
        );
    }
    let rate_of = |letter: char| {
        results
            .iter()
            .find(|(n, _)| n.starts_with(letter))
            .map(|(_, r)| r.rate)
    };
    if let (Some(j), Some(k)) = (rate_of('j'), rate_of('k')) {
        let rounds: Vec<String> = translation_rounds
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect();
        println!();
        println!(
            "schema-id translation on its cache-hit path: (k)/(j) = {:.2} (medians; each round: {})",
            k / j,
            rounds.join(", ")
        );
        if let Some((j, k)) = translation_cpu {
            println!(
                "CPU per record (medians of all runs): (j) {j:.3} µs, (k) {k:.3} µs, (k)/(j) = {:.3}",
                k / j
            );
        }
    }
    if let Some((l, eos)) = latency {
        println!();
        println!(
            "latency at {:.0} rec/s (half of (b)), {} records of {LATENCY_VALUE_BYTES} B: end to end through refract p50 {} ms, p99 {} ms; broker only (source produce to source fetch) p50 {} ms, p99 {} ms; added by refract (per record, source fetch to target fetch) p50 {} ms, p99 {} ms",
            l.rate, l.records, l.mirror.0, l.mirror.1, l.broker.0, l.broker.1,
            l.added.0, l.added.1
        );
        println!(
            "latency with delivery = \"exactly-once\", transaction_interval 1s, same rate: end to end p50 {} ms, p99 {} ms; added by refract p50 {} ms, p99 {} ms (records are written as they arrive and committed every second; the mock cluster shows them before the commit, so this is the write latency, and a read_committed reader waits for the commit: up to 1 s more)",
            eos.mirror.0, eos.mirror.1, eos.added.0, eos.added.1
        );
    }
    Ok(())
}

/// One scenario of the table.
struct Scenario {
    /// Its letter, a space, what it runs.
    name: &'static str,
    /// The flow's processors (TOML array items); `None`: the baseline pipe instead of refract.
    processors: Option<String>,
    /// Share of the records that reach the target.
    share: f64,
    /// Extra `[[flow]]` settings.
    extra: &'static str,
    /// `Some`: mirrors the framed topic, with a schema registry on both clusters.
    schemas: Option<Schemas>,
}

impl Scenario {
    /// The letter `--only` names it by.
    fn letter(&self) -> String {
        self.name
            .split_whitespace()
            .next()
            .unwrap_or(self.name)
            .to_string()
    }
}

/// The flow's `schemas` setting in a schema scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schemas {
    /// Framed values copied as bytes.
    Off,
    /// Framed values get the target registry's id.
    Translate,
}

impl Schemas {
    fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Translate => "translate",
        }
    }
}

/// What a run mirrors.
enum Input<'a> {
    /// The plain topic (`bench`), as every scenario but the schema ones.
    Plain,
    /// The framed topic, with a registry on each cluster.
    Framed {
        schemas: Schemas,
        registries: &'a Registries,
    },
}

/// The schema scenarios' registries: two Apicurio Registries, one per cluster, shared by every
/// run (the first translating run registers the schema on the target, later ones find it there;
/// either way each run asks at most once, then reads its cache).
struct Registries {
    source: Registry,
    target: Registry,
    /// The framed values' schema id on the source.
    id: u32,
}

impl Registries {
    /// Starts both registries (together: about 3 s each) and registers the values' schema on
    /// the source.
    fn start() -> Result<Self> {
        let (source, target) = std::thread::scope(|scope| {
            let source = scope.spawn(Registry::launch);
            let target = scope.spawn(Registry::launch);
            (source.join(), target.join())
        });
        let started = |r: std::thread::Result<Result<Registry>>| {
            r.map_err(|_| anyhow::anyhow!("starting a registry panicked"))?
        };
        let (source, target) = (started(source)?, started(target)?);
        // Both number schemas from 1: one of the target's own first, so the benchmark's schema
        // has another id there and a translated value differs from a copied one.
        target
            .try_register("unrelated-value", "\"string\"", "AVRO", &[])
            .context("registering a schema on the target registry")?;
        let id = source
            .try_register(&format!("{FRAMED_TOPIC}-value"), FRAMED_SCHEMA, "JSON", &[])
            .context("registering the values' schema on the source registry")?;
        Ok(Self { source, target, id })
    }

    /// Whether `got`, a mirrored value's schema id, is what `schemas` promises: the source's
    /// id when copied; when translated, another id under which the target holds the same schema.
    fn check(&self, schemas: Schemas, got: u32) -> bool {
        match schemas {
            Schemas::Off => got == self.id,
            Schemas::Translate => {
                got != self.id
                    && self.target.schema_by_id(got).is_some()
                    && self.target.schema_by_id(got) == self.source.schema_by_id(self.id)
            }
        }
    }
}

/// Flow settings of the exactly-once scenarios.
const EXACTLY_ONCE_100MS: &str = "delivery = \"exactly-once\"\ntransaction_interval = \"100ms\"\n";
const EXACTLY_ONCE_1S: &str = "delivery = \"exactly-once\"\ntransaction_interval = \"1s\"\n";

struct Latency {
    rate: f64,
    records: usize,
    /// (p50, p99) in ms, produce on the source to fetch on the target.
    mirror: (i64, i64),
    /// (p50, p99) in ms, produce on the source to fetch on the source.
    broker: (i64, i64),
    /// (p50, p99) in ms, per record: fetch on the source to fetch on the target.
    added: (i64, i64),
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Produces to a fresh source topic at `rate` for a few seconds while refract mirrors it, and
/// reads it on both sides: record timestamp (set at produce) to arrival.
///
/// librdkafka's mock broker answers a fetch that finds no data only after the request's full
/// `fetch.wait.max.ms` and is not woken by new records (a real broker answers as soon as data
/// arrives), so a caught-up consumer with the 500 ms default sees up to 500 ms of artificial delay.
/// Both readers and refract's source consumer therefore use 5 ms here.
fn measure_latency(args: &Args, source: &str, rate: f64, extra: &str) -> Result<Latency> {
    let target = MockCluster::new(1)?;
    target.create_topic(LATENCY_REMOTE, LATENCY_PARTITIONS, 1)?;
    create_target_internals(&target)?;
    let dir = tempfile::tempdir()?;
    let pipeline = format!(
        "[clusters.source]\nbootstrap = \"{source}\"\nconsumer = {{ \"fetch.wait.max.ms\" = \"5\" }}\n[clusters.lat]\nbootstrap = \"{}\"\n\n[[flow]]\nsource = \"source\"\ntarget = \"lat\"\ntopics = [\"{LATENCY_TOPIC}\"]\n{ADMIN_ONLY_OFF}{extra}",
        target.bootstrap_servers()
    );
    let path = dir.path().join("latency.toml");
    std::fs::write(&path, pipeline)?;
    let mut child = Command::new(&args.refract)
        .arg("run")
        .arg(&path)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()?;
    let reader = |bootstrap: &str, topic: &str| -> Result<BaseConsumer> {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "bench-latency")
            .set("fetch.wait.max.ms", "5")
            .create()?;
        assign_all(&c, topic, LATENCY_PARTITIONS, Offset::End)?;
        Ok(c)
    };
    let on_target = reader(&target.bootstrap_servers(), LATENCY_REMOTE)?;
    let on_source = reader(source, LATENCY_TOPIC)?;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", source)
        // Batches like an ordinary application producer (and like refract's own producer) by
        // default: with linger.ms 0 the load generator sends a request per few records.
        .set("linger.ms", args.latency_linger_ms.to_string())
        .create()?;
    // Measure only once refract is mirroring and both readers are positioned: warm-up records
    // (keys the readers ignore) are produced until one has arrived on each side.
    let ready_by = Instant::now() + Duration::from_secs(180);
    let (mut on_source_ready, mut on_target_ready) = (false, false);
    while !(on_source_ready && on_target_ready) {
        for p in 0..LATENCY_PARTITIONS {
            send_waiting(
                &producer,
                BaseRecord::<str, str>::to(LATENCY_TOPIC)
                    .key("warm-up")
                    .payload("")
                    .partition(p),
            );
        }
        producer.flush(Duration::from_secs(10))?;
        let round = Instant::now() + Duration::from_secs(1);
        while Instant::now() < round {
            on_target_ready |= matches!(on_target.poll(Duration::from_millis(20)), Some(Ok(_)));
            on_source_ready |= matches!(on_source.poll(Duration::ZERO), Some(Ok(_)));
        }
        check_alive(&mut child, ready_by)?;
    }
    let seconds = 2.0;
    let total = (rate * seconds) as usize;
    let done = AtomicBool::new(false);
    let started = Instant::now();
    // Producer and both readers on their own threads, so one cannot delay another's timestamps.
    // Every record's key is its sequence number; arrival times are matched per record.
    let (produced, (at_source, at_target)) = std::thread::scope(|scope| -> Result<_> {
        let read = |c: BaseConsumer| {
            let done = &done;
            scope.spawn(move || {
                let mut arrived = vec![None; total];
                let mut count = 0;
                let mut last = Instant::now();
                while count < total
                    && !done.load(Ordering::Relaxed)
                    && last.elapsed() < Duration::from_secs(10)
                {
                    while let Some(Ok(m)) = c.poll(Duration::from_millis(1)) {
                        let seq = m
                            .key()
                            .and_then(|k| <[u8; 8]>::try_from(k).ok())
                            .map(|k| u64::from_be_bytes(k) as usize);
                        if let Some(slot) = seq.and_then(|s| arrived.get_mut(s)) {
                            if slot.is_none() {
                                count += 1;
                            }
                            *slot = Some(now_ms());
                            last = Instant::now();
                        }
                    }
                }
                arrived
            })
        };
        let source_reader = read(on_source);
        let target_reader = read(on_target);
        let value = "x".repeat(LATENCY_VALUE_BYTES);
        let mut produced = vec![0i64; total];
        let mut sent = 0;
        while sent < total {
            let due = ((started.elapsed().as_secs_f64() * rate) as usize).min(total);
            while sent < due {
                let key = (sent as u64).to_be_bytes();
                let ts = now_ms();
                let rec = BaseRecord::<[u8], str>::to(LATENCY_TOPIC)
                    .key(&key[..])
                    .payload(&value)
                    .partition((sent % LATENCY_PARTITIONS as usize) as i32)
                    .timestamp(ts);
                if producer.send(rec).is_err() {
                    producer.poll(Duration::from_millis(1));
                    continue;
                }
                produced[sent] = ts;
                sent += 1;
            }
            producer.poll(Duration::ZERO);
            std::thread::sleep(Duration::from_millis(1));
        }
        producer.flush(Duration::from_secs(10))?;
        // Wait for the mirror to deliver everything (the target reader stops when it has every
        // record or after 10 s without one).
        let deadline = Instant::now() + Duration::from_secs(60);
        while !target_reader.is_finished() {
            check_alive(&mut child, deadline)?;
            std::thread::sleep(Duration::from_millis(50));
        }
        done.store(true, Ordering::Relaxed);
        let join = |h: std::thread::ScopedJoinHandle<'_, Vec<Option<i64>>>| {
            h.join()
                .map_err(|_| anyhow::anyhow!("a latency reader panicked"))
        };
        Ok((produced, (join(source_reader)?, join(target_reader)?)))
    })?;
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
    let missing = at_target.iter().filter(|t| t.is_none()).count();
    if missing > 0 {
        bail!("{missing} of {total} latency records never reached the target");
    }
    let mut mirror = Vec::with_capacity(total);
    let mut broker = Vec::with_capacity(total);
    let mut added = Vec::with_capacity(total);
    for ((p, s), t) in produced.iter().zip(&at_source).zip(&at_target) {
        if let (Some(s), Some(t)) = (s, t) {
            mirror.push(t - p);
            broker.push(s - p);
            added.push(t - s);
        }
    }
    let pct = |v: &mut Vec<i64>| -> (i64, i64) {
        v.sort_unstable();
        let at = |q: f64| {
            v.get(((v.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0)
        };
        (at(0.5), at(0.99))
    };
    Ok(Latency {
        rate,
        records: total,
        mirror: pct(&mut mirror),
        broker: pct(&mut broker),
        added: pct(&mut added),
    })
}

struct Outcome {
    rate: f64,
    /// Source records mirrored between the first record landing and the last.
    records: f64,
    /// CPU seconds the mirror process used over that span.
    cpu_seconds: f64,
    /// CPU seconds it used before the first record landed (start, plugin compilation).
    startup_cpu: f64,
    peak_rss_kib: u64,
    /// Slowest and fastest rate over the repeated runs.
    spread: (f64, f64),
}

fn run_scenario(
    args: &Args,
    source: &str,
    processors: Option<&str>,
    extra: &str,
    expected: i64,
    alias: &str,
    input: &Input<'_>,
) -> Result<Outcome> {
    let (topic, remote) = match input {
        Input::Plain => (TOPIC, REMOTE),
        Input::Framed { .. } => (FRAMED_TOPIC, FRAMED_REMOTE),
    };
    let target = MockCluster::new(1)?;
    target.create_topic(remote, args.partitions, 1)?;
    create_target_internals(&target)?;
    let dir = tempfile::tempdir()?;
    // The schema scenarios: both clusters name a registry, the flow translates or not, and
    // the metrics endpoint says how many values were translated and how many missed the cache.
    let registries = match input {
        Input::Framed { registries, .. } => Some(*registries),
        Input::Plain => None,
    };
    let registry_line = |r: Option<&Registry>| {
        r.map_or(String::new(), |r| {
            format!("schema_registry = {{ url = \"{}\" }}\n", r.url())
        })
    };
    let (metrics_addr, schemas_lines) = match input {
        Input::Framed { schemas, .. } => {
            let addr = format!("127.0.0.1:{}", refract_testkit::free_port());
            let lines = (
                format!("[metrics]\nlisten = \"{addr}\"\n"),
                format!("schemas = \"{}\"\n", schemas.as_str()),
            );
            (addr, lines)
        }
        Input::Plain => Default::default(),
    };
    let mut child = match processors {
        None => Command::new(std::env::current_exe()?)
            .args([
                "baseline-pipe",
                source,
                &target.bootstrap_servers(),
                &args.partitions.to_string(),
            ])
            .stdout(Stdio::null())
            .spawn()?,
        Some(procs) => {
            let pipeline = format!(
                "{}[clusters.source]\nbootstrap = \"{source}\"\n{}[clusters.{alias}]\nbootstrap = \"{}\"\n{}\n[[flow]]\nsource = \"source\"\ntarget = \"{alias}\"\ntopics = [\"{topic}\"]\nprocessors = [{procs}]\n{ADMIN_ONLY_OFF}{}{extra}{}\n",
                schemas_lines.0,
                registry_line(registries.map(|r| &r.source)),
                target.bootstrap_servers(),
                registry_line(registries.map(|r| &r.target)),
                schemas_lines.1,
                args.flow_extra
            );
            let path = dir.path().join("bench.toml");
            std::fs::write(&path, pipeline)?;
            Command::new(&args.refract)
                .arg("run")
                .arg(&path)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .spawn()
                .with_context(|| format!("starting {}", args.refract.display()))?
        }
    };
    let counter: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", target.bootstrap_servers())
        .create()?;
    let count = || -> i64 {
        (0..args.partitions)
            .filter_map(|p| {
                counter
                    .fetch_watermarks(remote, p, Duration::from_secs(5))
                    .ok()
            })
            .map(|(lo, hi)| hi - lo)
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(600);
    let (first_at, first_count, startup_cpu) = loop {
        let n = count();
        if n > 0 {
            break (Instant::now(), n, usage(child.id())?.0);
        }
        check_alive(&mut child, deadline)?;
        std::thread::sleep(Duration::from_millis(5));
    };
    // BENCH_TRACE=1 prints the target's record count over time (to see stalls).
    let trace = std::env::var_os("BENCH_TRACE").is_some();
    loop {
        let n = count();
        if trace {
            eprintln!("{:>6} ms {n}", first_at.elapsed().as_millis());
        }
        if n >= expected {
            break;
        }
        check_alive(&mut child, deadline)?;
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = first_at.elapsed().as_secs_f64();
    let (cpu_seconds, peak_rss_kib) = usage(child.id())?;
    let schema_series = registries.map(|_| {
        let (_, text) = refract_testkit::http(&metrics_addr, "GET", "/metrics");
        let value = |name| refract_testkit::series(&text, name, &[]).unwrap_or(0.0);
        (
            value("refract_schema_translations_total"),
            value("refract_schema_cache_misses_total"),
        )
    });
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
    if let (
        Input::Framed {
            schemas,
            registries,
        },
        Some((translated, misses)),
    ) = (input, schema_series)
    {
        // A mirrored value must carry the id its setting promises.
        let got = first_framed_id(&target.bootstrap_servers(), remote)?;
        if !registries.check(*schemas, got) {
            bail!(
                "a value on the target has schema id {got} with schemas = {} (source id {})",
                schemas.as_str(),
                registries.id
            );
        }
        eprintln!(
            "  schemas = {}: value schema id {} on the source, {got} on the target; {translated} fields translated, {misses} cache misses",
            schemas.as_str(),
            registries.id
        );
    }
    let moved = expected.max(1) - first_count;
    // The rate counts source records processed, so a 50% filter is compared like for like.
    let source_records = (moved as f64 / expected.max(1) as f64) * args.records as f64;
    Ok(Outcome {
        rate: source_records / elapsed.max(1e-6),
        records: source_records,
        cpu_seconds: cpu_seconds - startup_cpu,
        startup_cpu,
        peak_rss_kib,
        spread: (0.0, 0.0),
    })
}

/// Flow settings for the mock cluster: topic-config and ACL sync need admin requests the mock
/// cluster cannot answer (each would wait out its 10 s timeout at start). They touch no record;
/// offset syncs, heartbeats and checkpoints stay on, as in production.
const ADMIN_ONLY_OFF: &str = "sync_topic_configs = false\nsync_topic_acls = false\n";

/// The MM2 internal topics a flow writes on its target (created ahead: no CreateTopics here).
fn create_target_internals(
    target: &MockCluster<'_, rdkafka::producer::DefaultProducerContext>,
) -> Result<()> {
    for topic in [
        "heartbeats",
        "source.heartbeats",
        "source.checkpoints.internal",
    ] {
        target.create_topic(topic, 1, 1)?;
    }
    // Where exactly-once flows keep their source positions (Connect's 25 partitions).
    target.create_topic("mm2-offsets.source.internal", 25, 1)?;
    Ok(())
}

fn check_alive(child: &mut Child, deadline: Instant) -> Result<()> {
    if let Some(status) = child.try_wait()? {
        bail!("the mirror exited early ({status})");
    }
    if Instant::now() > deadline {
        let _ = child.kill();
        bail!("timed out");
    }
    Ok(())
}

/// CPU seconds (user + system, at 100 ticks/s) and peak RSS of a running process.
fn usage(pid: u32) -> Result<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after_comm = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|u| u.parse().ok()).unwrap_or(0)
        + fields
            .get(12)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    Ok((ticks as f64 / 100.0, hwm))
}

/// The schema id of the first value in partition 0 of `topic`.
fn first_framed_id(bootstrap: &str, topic: &str) -> Result<u32> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "bench-check")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&tpl)?;
    match consumer.poll(Duration::from_secs(10)) {
        Some(Ok(m)) => match m.payload() {
            Some([0, a, b, c, d, ..]) => Ok(u32::from_be_bytes([*a, *b, *c, *d])),
            other => bail!("a value on the target of {topic} is not framed: {other:?}"),
        },
        Some(Err(e)) => bail!("reading {topic} on the target: {e}"),
        None => bail!("no record in {topic} on the target"),
    }
}

/// Fills `topic` with `args.records` JSON records of about `args.value_bytes` B, each value
/// framed with schema id `frame` (byte 0, the id, then the same JSON) when given; the
/// broker-only produce rate.
fn prefill(bootstrap: &str, args: &Args, topic: &str, frame: Option<u32>) -> Result<f64> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000")
        .create()?;
    // A framed value is as long as a plain one: its 5-byte header takes the place of padding.
    let header = frame.map_or(0, |_| 5);
    let pad = "x".repeat(args.value_bytes.saturating_sub(80 + header));
    let started = Instant::now();
    for i in 0..args.records {
        let key = format!("k{i}");
        let json = format!("{{\"id\":{i},\"email\":\"user{i}@example.com\",\"pad\":\"{pad}\"}}");
        let value = match frame {
            Some(id) => [&[0][..], &id.to_be_bytes(), json.as_bytes()].concat(),
            None => json.into_bytes(),
        };
        let rec = BaseRecord::to(topic)
            .key(&key)
            .payload(&value)
            .partition((i % args.partitions as usize) as i32);
        send_waiting(&producer, rec);
    }
    producer.flush(Duration::from_secs(120))?;
    Ok(args.records as f64 / started.elapsed().as_secs_f64())
}

fn fetch_all(bootstrap: &str, partitions: i32, records: usize) -> Result<f64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "bench-fetch")
        .create()?;
    assign_all(&consumer, TOPIC, partitions, Offset::Beginning)?;
    let started = Instant::now();
    let mut n = 0;
    while n < records {
        match consumer.poll(Duration::from_secs(10)) {
            Some(Ok(_)) => n += 1,
            Some(Err(e)) => bail!("fetch: {e}"),
            None => bail!("fetch stalled at {n} of {records}"),
        }
    }
    Ok(records as f64 / started.elapsed().as_secs_f64())
}

/// The baseline: a plain consume→produce loop with the same client settings refract uses
/// (idempotent producer, acks=all, linger 5 ms, fetch.queue.backoff.ms 10; same partition, key,
/// value, headers and timestamp).
fn baseline_pipe(source: &str, target: &str, partitions: i32) -> Result<()> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", source)
        .set("group.id", "bench-baseline")
        .set("enable.auto.commit", "false")
        .set("fetch.queue.backoff.ms", "10")
        .create()?;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", target)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()?;
    assign_all(&consumer, TOPIC, partitions, Offset::Beginning)?;
    loop {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let mut rec: BaseRecord<'_, [u8], [u8]> =
                BaseRecord::to(REMOTE).partition(m.partition());
            rec.key = m.key();
            rec.payload = m.payload();
            rec.timestamp = m.timestamp().to_millis();
            rec.headers = m.headers().map(rdkafka::message::BorrowedHeaders::detach);
            send_waiting(&producer, rec);
        }
        producer.poll(Duration::ZERO);
    }
}

/// Sends `rec`, serving delivery reports while the producer queue is full.
fn send_waiting<K, P>(producer: &BaseProducer, mut rec: BaseRecord<'_, K, P>)
where
    K: rdkafka::message::ToBytes + ?Sized,
    P: rdkafka::message::ToBytes + ?Sized,
{
    loop {
        match producer.send(rec) {
            Ok(()) => return,
            Err((_, back)) => {
                rec = back;
                producer.poll(Duration::from_millis(5));
            }
        }
    }
}

/// Assigns every partition of `topic` to `consumer`, starting at `offset`.
fn assign_all(consumer: &BaseConsumer, topic: &str, partitions: i32, offset: Offset) -> Result<()> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, offset)?;
    }
    consumer.assign(&tpl)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Mode};

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("refract-bench").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// The flags bench/run and the README pass, with the meanings the hand-written parser gave
    /// them.
    #[test]
    fn bench_run_flags_parse_as_before() {
        let defaults = parse(&[]).args;
        assert_eq!(defaults.refract.to_str(), Some("target/release/refract"));
        assert_eq!(
            (defaults.records, defaults.partitions, defaults.value_bytes),
            (120_000, 32, 1024)
        );
        assert_eq!((defaults.repeat, defaults.latency_linger_ms), (1, 5));
        assert!(defaults.only.is_none() && defaults.latency_rate.is_none());
        assert_eq!(
            defaults.python_filter.as_deref().and_then(|p| p.to_str()),
            Some("examples/plugins/python/filter.wasm")
        );
        assert_eq!(defaults.flow_extra, "");

        let a = parse(&[
            "--refract",
            "target/release/refract",
            "--records",
            "60000",
            "--only",
            "a,b,c,latency",
            "--repeat",
            "5",
            "--flow-extra",
            "provenance_header = false",
            "--latency-linger-ms",
            "0",
            "--partitions",
            "8",
            "--value-bytes",
            "100",
            "--python-filter",
            "f.wasm",
            "--latency-rate",
            "2500.5",
        ])
        .args;
        assert_eq!(a.records, 60_000);
        assert_eq!(
            a.only.as_deref(),
            Some(&["a", "b", "c", "latency"].map(String::from)[..])
        );
        assert_eq!((a.repeat, a.latency_linger_ms), (5, 0));
        assert_eq!(a.flow_extra, "provenance_header = false");
        assert_eq!((a.partitions, a.value_bytes), (8, 100));
        assert_eq!(
            a.python_filter.as_deref().and_then(|p| p.to_str()),
            Some("f.wasm")
        );
        assert_eq!(a.latency_rate, Some(2500.5));

        // As before: a flag given twice takes its last value; a value may start with '-'.
        let twice = parse(&[
            "--only",
            "a",
            "--only",
            "b",
            "--flow-extra",
            "-x",
            "--repeat",
            "3",
        ]);
        assert_eq!(twice.args.only.as_deref(), Some(&["b".to_string()][..]));
        assert_eq!(twice.args.flow_extra, "-x");
        assert!(Cli::try_parse_from(["refract-bench", "--unknown"]).is_err());
    }

    #[test]
    fn baseline_pipe_takes_three_positional_arguments() {
        match parse(&["baseline-pipe", "127.0.0.1:1", "127.0.0.1:2", "32"]).mode {
            Some(Mode::BaselinePipe {
                source,
                target,
                partitions,
            }) => assert_eq!(
                (&*source, &*target, partitions),
                ("127.0.0.1:1", "127.0.0.1:2", 32)
            ),
            other => panic!("{other:?}"),
        }
    }
}
