//! `refract-bench kafka-compare`: refract side by side with Apache Kafka's MirrorMaker 2, both
//! mirroring between two real single-node Apache Kafka brokers (KRaft). `bench/mm2-compare`
//! resolves Kafka, builds everything and runs this mode in a temp folder it removes afterwards.
//!
//! The source topic is filled once; every run then mirrors it under a source and target alias of
//! its own (`s<n>`, `t<n>`: a fresh remote topic `s<n>.bench`, fresh progress group, fresh MM2
//! Connect topics), and every topic it made on either broker is deleted afterwards. The rate runs
//! from the first record landing on the target to the last (the remote topic's high watermarks),
//! and the mirror process's CPU (utime + stime from /proc) is counted over the same span.
//!
//! The scaling scenarios (`refract-x1`, `refract-x2`, `refract-x3`, run only when `--only` names
//! them) run the same flow in cluster mode with 1, 2 and 3 `refract run` processes started at
//! once, dividing the flow's [`CLUSTER_TASKS`] tasks: their CPU is the sum over the processes,
//! their peak RSS the largest of the processes' peaks.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::task::{Poll, Wake, Waker};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};
use refract_testkit::{free_port, BrokerOptions};

const TOPIC: &str = "bench";
/// A scratch topic on both brokers, filled and deleted before the runs.
const WARM_DATA: &str = "bench-warm-up-data";

/// What `kafka-server-start.sh` gives a broker: a 1 GiB heap and `kafka-run-class.sh`'s
/// `KAFKA_JVM_PERFORMANCE_OPTS` (G1, the JVM's default collector).
const BROKER_JVM: &[&str] = &[
    "-Xms1g",
    "-Xmx1g",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
];

/// What `connect-mirror-maker.sh` gives MirrorMaker 2: `-Xms256M -Xmx2G` and the same
/// performance options.
const MM2_JVM: &[&str] = &[
    "-Xms256m",
    "-Xmx2g",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
];

/// The pass-through filter of `bench/run`'s scenario (c): a WASM component (embedded in the
/// binary, built from plugins/ by host/plugin's build.rs) called on every batch, keeping all.
const PASS_THROUGH: &str =
    "{ plugin = \"builtin:filter\", config = { action = \"keep\", topic = \".*\" } }";

/// The flow's `tasks` in the cluster-mode scenarios: the partitions are divided into this many
/// tasks, and the processes divide the tasks (2 each for 3 processes).
const CLUSTER_TASKS: u32 = 6;
/// `[cluster] session_timeout` in the cluster-mode scenarios.
const CLUSTER_SESSION_TIMEOUT: &str = "10s";

/// The source topics: `bench`, or `bench-0000`, `bench-0001`, … with `--topics` above 1.
fn topic_names(opts: &Opts) -> Vec<String> {
    if opts.topics <= 1 {
        vec![TOPIC.into()]
    } else {
        (0..opts.topics)
            .map(|i| format!("{TOPIC}-{i:04}"))
            .collect()
    }
}

/// The source topics as the flow's `topics` entry and MM2's `topics` (a regular expression).
fn topic_selection(opts: &Opts) -> &'static str {
    if opts.topics <= 1 {
        TOPIC
    } else {
        "bench-[0-9]+"
    }
}

/// The options of `refract-bench kafka-compare` (bench/mm2-compare passes `--kafka-libs`,
/// `--java`, `--refract` and `--work-dir`, and adds its own arguments).
#[derive(clap::Args, Debug)]
pub struct Opts {
    /// The folder of Apache Kafka jars (what .ci/install-kafka prints)
    #[arg(long, value_name = "DIR")]
    kafka_libs: PathBuf,
    /// The java to run the brokers and MirrorMaker 2 with [default: $JAVA_HOME/bin/java, else
    /// java]
    #[arg(long, value_name = "PATH", default_value_os_t = refract_testkit::java(), hide_default_value = true)]
    java: PathBuf,
    /// The refract binary
    #[arg(long, value_name = "PATH", default_value = "target/release/refract")]
    refract: PathBuf,
    /// The folder for brokers, configurations and logs
    #[arg(long = "work-dir", value_name = "DIR")]
    work: PathBuf,
    /// Records in the source topic
    #[arg(long, value_name = "N", default_value_t = 2_000_000)]
    records: usize,
    /// Partitions of each source topic
    #[arg(long, value_name = "N", default_value_t = 32)]
    partitions: i32,
    /// Source topics: 1 is the topic `bench`; more are `bench-0000`, `bench-0001`, … (an
    /// estate: the records are spread round-robin over every partition of every topic)
    #[arg(long, value_name = "N", default_value_t = 1)]
    topics: usize,
    /// After the last record landed, how long the mirror runs idle (nothing to mirror) before
    /// it is stopped; over the second half of it, its idle CPU, RSS and thread count are read,
    /// and refract's `/status` and `/metrics` are timed (0: stop at once)
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    idle: u64,
    /// A librdkafka setting for refract's source consumer (`[clusters.<source>] consumer`), e.g.
    /// `fetch.wait.max.ms=2000`; repeatable
    #[arg(long = "source-consumer", value_name = "KEY=VALUE")]
    source_consumer: Vec<String>,
    /// Extra `[[flow]]` lines for the refract scenarios, e.g. `tasks = 4`
    #[arg(long = "flow-extra", value_name = "TOML", default_value = "")]
    flow_extra: String,
    /// Bytes per record value (at least 100)
    #[arg(long, value_name = "N", default_value_t = 1024)]
    value_bytes: usize,
    /// Runs of each scenario (the table shows the median run and the range)
    #[arg(long, value_name = "N", default_value_t = 1)]
    repeat: usize,
    /// Comma-separated scenarios to run (refract, refract-wasm, mm2, mm2-tuned, refract-x1,
    /// refract-x2, refract-x3) [default: the first four]
    // Set, not the default Append: a second --only replaces the first (as it always did)
    #[arg(long, value_name = "LIST", value_delimiter = ',', action = clap::ArgAction::Set)]
    only: Option<Vec<String>>,
    /// tasks.max of the mm2-tuned scenario
    #[arg(long, value_name = "N", default_value_t = 1)]
    mm2_tasks: u32,
    /// MirrorMaker 2's log level
    #[arg(long, value_name = "LEVEL", default_value = "WARN")]
    mm2_log_level: String,
    /// Skips the untimed mirror run before the measured ones
    #[arg(long = "no-warm-up", action = clap::ArgAction::SetFalse)]
    warm_up_run: bool,
}

enum Mirror {
    Refract {
        processors: &'static str,
    },
    /// `processes` refract processes in cluster mode sharing one flow of [`CLUSTER_TASKS`] tasks.
    RefractCluster {
        processes: usize,
    },
    Mm2 {
        tuned: bool,
    },
}

struct Scenario {
    key: &'static str,
    name: String,
    mirror: Mirror,
    /// Whether it runs without `--only`.
    default: bool,
}

struct Outcome {
    rate: f64,
    /// Records that landed between the first and the last.
    records: f64,
    /// CPU seconds of the mirror process over that span.
    cpu_seconds: f64,
    peak_rss_kib: u64,
    /// From starting the process to the first record on the target.
    to_first: Duration,
    /// CPU seconds before the first record landed.
    startup_cpu: f64,
    /// From starting the process to the last record on the target.
    caught_up: Duration,
    /// With `--idle`: the caught-up mirror with nothing to do.
    idle: Option<Idle>,
    /// Per process of a cluster-mode run: what it held and did (printed under the run).
    details: Vec<String>,
}

pub fn main(mut opts: Opts) -> Result<()> {
    opts.repeat = opts.repeat.max(1);
    if opts.value_bytes < 100 {
        bail!("--value-bytes must be at least 100");
    }
    let started = Instant::now();
    let mut all = vec![
        Scenario {
            key: "refract",
            name: "refract, no processor".into(),
            mirror: Mirror::Refract { processors: "" },
            default: true,
        },
        Scenario {
            key: "refract-wasm",
            name: "refract + pass-through WASM filter".into(),
            mirror: Mirror::Refract {
                processors: PASS_THROUGH,
            },
            default: true,
        },
        Scenario {
            key: "mm2",
            name: "MM2 dedicated mode, defaults".into(),
            mirror: Mirror::Mm2 { tuned: false },
            default: true,
        },
        Scenario {
            key: "mm2-tuned",
            name: format!(
                "MM2, producer linger.ms 20, batch.size 512 KiB, tasks.max {}",
                opts.mm2_tasks
            ),
            mirror: Mirror::Mm2 { tuned: true },
            default: true,
        },
    ];
    for (key, processes) in [("refract-x1", 1), ("refract-x2", 2), ("refract-x3", 3)] {
        all.push(Scenario {
            key,
            name: format!(
                "refract cluster mode, {processes} process{}, {CLUSTER_TASKS} tasks",
                if processes == 1 { "" } else { "es" }
            ),
            mirror: Mirror::RefractCluster { processes },
            default: false,
        });
    }
    let keys: Vec<&str> = all.iter().map(|s| s.key).collect();
    if let Some(unknown) = opts
        .only
        .iter()
        .flatten()
        .find(|k| !keys.contains(&k.as_str()))
    {
        bail!(
            "--only: no scenario {unknown} (there are {})",
            keys.join(", ")
        );
    }
    let scenarios: Vec<Scenario> = all
        .into_iter()
        .filter(|s| {
            opts.only
                .as_ref()
                .map_or(s.default, |o| o.iter().any(|k| k == s.key))
        })
        .collect();
    if scenarios.is_empty() {
        bail!("--only selects no scenario ({})", keys.join(", "));
    }
    let clustered = scenarios
        .iter()
        .any(|s| matches!(s.mirror, Mirror::RefractCluster { .. }));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());

    eprintln!("starting two Kafka brokers in {}", opts.work.display());
    let source = Broker::start(&opts, "source")?;
    let target = Broker::start(&opts, "target")?;
    // Kafka makes __consumer_offsets and __transaction_state on first use (a group commit, an
    // idempotent producer's PID); a production cluster has them, so they are made here, before
    // any run, rather than in the first run that needs them.
    source.warm_up()?;
    target.warm_up()?;
    // Both brokers' produce paths are JIT-compiled before the fill is timed and before the first
    // run writes to the target.
    for broker in [&source, &target] {
        broker.create_topic(WARM_DATA, opts.partitions)?;
        fill(
            &broker.bootstrap,
            &[WARM_DATA.to_string()],
            opts.records.min(300_000),
            &opts,
        )?;
    }
    let topics = topic_names(&opts);
    let created = Instant::now();
    source.create_topics(&topics, opts.partitions)?;
    if topics.len() > 1 {
        eprintln!(
            "source: {} topics x {} partitions created in {:.1} s",
            topics.len(),
            opts.partitions,
            created.elapsed().as_secs_f64()
        );
    }
    let produce = fill(&source.bootstrap, &topics, opts.records, &opts)?;
    // Reading the topic once warms the source's fetch path and gives the broker-only fetch rate.
    let fetch = fetch_all(&source.bootstrap, &topics, opts.partitions, opts.records)?;
    clean_up(&source, &target, &topics)?;
    settle()?;
    let mb = |rate: f64| rate * opts.value_bytes as f64 / 1e6;
    let fill_line = format!(
        "source: {} records x {} B over {} topic(s) x {} partitions; broker only (rdkafka client, source broker): produce {:.0} rec/s ({:.1} MB/s; the fill: linger.ms 5, acks all), fetch {:.0} rec/s ({:.1} MB/s)",
        opts.records,
        opts.value_bytes,
        topics.len(),
        opts.partitions,
        produce,
        mb(produce),
        fetch,
        mb(fetch)
    );
    eprintln!("{fill_line}");
    warm_compile_cache(&opts)?;

    // One untimed refract run first: the first run after the fill was consistently slower (and
    // used more CPU per record) than later ones, whichever mirror it was, so the brokers get the
    // same warm-up a long-running cluster has before anything is measured.
    if opts.warm_up_run {
        eprintln!("warm-up run (not counted): refract, no processor ...");
        let warm = Scenario {
            key: "warm-up",
            name: "warm-up".into(),
            mirror: Mirror::Refract { processors: "" },
            default: false,
        };
        let r = run_once(&opts, &source, &target, &warm, 0).context("the warm-up run")?;
        eprintln!("  {:.0} rec/s (uptime: {})", r.rate, loadavg());
        clean_up(&source, &target, &topics)?;
        settle()?;
    }

    // Runs interleave the scenarios (1 2 3 4 1 2 3 4 ...), so a slow spell on the shared machine
    // does not land on one scenario's runs only.
    let mut runs: Vec<Vec<Outcome>> = scenarios.iter().map(|_| Vec::new()).collect();
    let mut failures: Vec<(String, String)> = Vec::new();
    let mut n = 0;
    for round in 0..opts.repeat {
        for (i, s) in scenarios.iter().enumerate() {
            n += 1;
            eprintln!(
                "run {}/{}: {} ...",
                round * scenarios.len() + i + 1,
                opts.repeat * scenarios.len(),
                s.name
            );
            let r = match run_once(&opts, &source, &target, s, n) {
                Ok(r) => r,
                // An estate can be more than a mirror manages: said in the table, and the
                // other scenarios still run.
                Err(e) if opts.topics > 1 => {
                    let why = format!("{e:#}");
                    let first = why.lines().next().unwrap_or_default().to_string();
                    eprintln!("  failed: {why}");
                    failures.push((s.name.clone(), first));
                    clean_up(&source, &target, &topics)?;
                    settle()?;
                    continue;
                }
                Err(e) => return Err(e).with_context(|| format!("scenario {} (run {n})", s.name)),
            };
            eprintln!(
                "  {:.0} rec/s, {:.1} CPU s / M records, peak RSS {:.0} MiB, first record after {:.1} s (uptime: {})",
                r.rate,
                r.cpu_seconds / (r.records / 1e6),
                r.peak_rss_kib as f64 / 1024.0,
                r.to_first.as_secs_f64(),
                loadavg()
            );
            if let Some(idle) = &r.idle {
                eprintln!(
                    "  caught up {:.1} s after start; idle: {:.1} % of a core, RSS {:.0} MiB, {} threads",
                    r.caught_up.as_secs_f64(),
                    idle.cpu_share * 100.0,
                    idle.rss_kib as f64 / 1024.0,
                    idle.threads
                );
            }
            for line in &r.details {
                eprintln!("    {line}");
            }
            runs[i].push(r);
            if let Mirror::RefractCluster { .. } = s.mirror {
                cluster_leftovers(&source, n, true)?;
            }
            clean_up(&source, &target, &topics)?;
            if let Mirror::RefractCluster { .. } = s.mirror {
                cluster_leftovers(&source, n, false)?;
            }
            settle()?;
        }
    }

    let medians: Vec<(&Scenario, Outcome, (f64, f64))> = scenarios
        .iter()
        .zip(runs)
        .filter(|(_, v)| !v.is_empty())
        .map(|(s, mut v)| {
            v.sort_by(|x, y| x.rate.total_cmp(&y.rate));
            let range = (v[0].rate, v[v.len() - 1].rate);
            let median = v.swap_remove(v.len() / 2);
            (s, median, range)
        })
        .collect();
    let mm2 = medians
        .iter()
        .find(|(s, _, _)| s.key == "mm2")
        .map(|(_, r, _)| r.rate);

    println!();
    println!("{fill_line}");
    println!(
        "machine: {cores} cores (available_parallelism), shared by both brokers and the mirror process(es){}",
        if clustered {
            "; refract-x2 and refract-x3 run 2 and 3 refract processes on them"
        } else {
            ""
        }
    );
    if opts.repeat > 1 {
        println!(
            "median of {} runs per scenario (by records/s; range = slowest..fastest run)",
            opts.repeat
        );
    }
    let range_col = opts.repeat > 1;
    println!(
        "| scenario | records/s |{} MB/s | vs MM2 default | CPU s / M records | peak RSS MiB | time to first record s |",
        if range_col { " range |" } else { "" }
    );
    println!(
        "|---|---:|{}---:|---:|---:|---:|---:|",
        if range_col { "---:|" } else { "" }
    );
    for (s, r, range) in &medians {
        println!(
            "| {} | {:.0} |{} {:.1} | {} | {:.1} | {:.0} | {:.1} |",
            s.name,
            r.rate,
            if range_col {
                format!(" {:.0}k–{:.0}k |", range.0 / 1e3, range.1 / 1e3)
            } else {
                String::new()
            },
            mb(r.rate),
            mm2.map_or("-".into(), |m| format!("{:.2}", r.rate / m)),
            r.cpu_seconds / (r.records / 1e6),
            r.peak_rss_kib as f64 / 1024.0,
            r.to_first.as_secs_f64()
        );
    }
    println!();
    if opts.idle > 0 {
        println!(
            "{} partitions; caught up = from start to the last record on the target; idle = the last {} s of {} s with nothing to mirror; /status and /metrics: the fastest of 3 GETs",
            topics.len() * opts.partitions as usize,
            opts.idle / 2,
            opts.idle
        );
        println!("| scenario | time to first record s | caught up s | peak RSS MiB | idle RSS MiB | idle CPU % of a core | threads | /status ms, KiB | /metrics ms, KiB |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        let served = |x: &Option<(Duration, usize)>| {
            x.map_or("-".into(), |(t, n)| {
                format!("{:.0}, {:.0}", t.as_secs_f64() * 1e3, n as f64 / 1024.0)
            })
        };
        for (s, r, _) in &medians {
            let Some(idle) = &r.idle else { continue };
            println!(
                "| {} | {:.1} | {:.1} | {:.0} | {:.0} | {:.1} | {} | {} | {} |",
                s.name,
                r.to_first.as_secs_f64(),
                r.caught_up.as_secs_f64(),
                r.peak_rss_kib as f64 / 1024.0,
                idle.rss_kib as f64 / 1024.0,
                idle.cpu_share * 100.0,
                idle.threads,
                served(&idle.status),
                served(&idle.metrics)
            );
        }
        println!();
    }
    for (name, why) in &failures {
        println!("{name}: failed: {why}");
    }
    if clustered {
        println!(
            "cluster mode (tasks = {CLUSTER_TASKS}, session_timeout = \"{CLUSTER_SESSION_TIMEOUT}\", processes started at once): CPU s / M records and start-up CPU are summed over the processes; peak RSS MiB is the largest single process's peak; time to first record counts from starting the processes"
        );
    }
    for (s, r, _) in &medians {
        println!(
            "{}: start-up CPU {:.2} s (before the first record; not in CPU s / M records)",
            s.name, r.startup_cpu
        );
        if !r.details.is_empty() && opts.repeat > 1 {
            println!("    in the median run:");
        }
        for line in &r.details {
            println!("    {line}");
        }
    }
    println!(
        "took {:.0} s; load average at the end: {}",
        started.elapsed().as_secs_f64(),
        loadavg()
    );
    Ok(())
}

/// Writes the dirty page cache out (`sync`): Kafka does not fsync, so the gigabytes the fill or
/// a run wrote would otherwise be written back by the kernel during the next run.
fn settle() -> Result<()> {
    let status = Command::new("sync").status().context("running sync")?;
    if !status.success() {
        bail!("sync failed ({status})");
    }
    Ok(())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Compiles the pass-through filter into the run's compile cache before any run, as it would be
/// on a machine that has run refract before (`refract check` loads every plugin).
fn warm_compile_cache(opts: &Opts) -> Result<()> {
    let path = opts.work.join("check.toml");
    let pipeline = format!(
        "[clusters.a]\nbootstrap = \"127.0.0.1:1\"\n[clusters.b]\nbootstrap = \"127.0.0.1:2\"\n\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{TOPIC}\"]\nprocessors = [{PASS_THROUGH}]\n"
    );
    std::fs::write(&path, pipeline).with_context(|| format!("writing {}", path.display()))?;
    let out = Command::new(&opts.refract)
        .arg("check")
        .arg(&path)
        .env("REFRACT_CACHE_DIR", opts.work.join("components"))
        .output()
        .with_context(|| format!("running {} check", opts.refract.display()))?;
    if !out.status.success() {
        bail!(
            "refract check failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Fills `topic` with `records` JSON records padded to `value_bytes`, round-robin over its
/// partitions (as `bench/run` does), and returns the produce rate.
fn fill(bootstrap: &str, topics: &[String], records: usize, opts: &Opts) -> Result<f64> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000")
        // A retried request must not write a record twice: the counts are checked exactly.
        .set("enable.idempotence", "true")
        .create()
        .context("fill producer")?;
    let pad = "x".repeat(opts.value_bytes.saturating_sub(80));
    let started = Instant::now();
    for i in 0..records {
        let key = format!("k{i}");
        let mut value = format!("{{\"id\":{i},\"email\":\"user{i}@example.com\",\"pad\":\"{pad}");
        value.truncate(opts.value_bytes - 2);
        while value.len() < opts.value_bytes - 2 {
            value.push('x');
        }
        value.push_str("\"}");
        let partitions = opts.partitions as usize;
        let slot = i % (partitions * topics.len());
        let rec = BaseRecord::to(&topics[slot / partitions])
            .key(&key)
            .payload(&value)
            .partition((slot % partitions) as i32);
        crate::send_waiting(&producer, rec);
        if i % 250_000 == 0 && i > 0 {
            eprintln!("  {}: {i} records", topics[0]);
        }
    }
    producer
        .flush(Duration::from_secs(300))
        .context("flushing the fill")?;
    let rate = records as f64 / started.elapsed().as_secs_f64();
    // The counter the runs use (one ListOffsets request), checked against per-partition
    // watermark queries.
    // A fresh client may not know every leader at first: asked again for up to 30 s.
    let counter = Counter::new(bootstrap, topics, opts.partitions)?;
    let asked = Instant::now();
    let mut n = counter.count();
    while n != records as i64 && asked.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
        n = counter.count();
    }
    let check: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .context("watermark consumer")?;
    // One topic's partitions, one request each (an estate's thousands are left to the counter).
    let topic = &topics[0];
    let mut sum = 0;
    for p in 0..opts.partitions {
        sum += check
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .with_context(|| format!("watermarks of {topic}/{p}"))?
            .1;
    }
    let expected_first = (0..records)
        .filter(|i| i % (opts.partitions as usize * topics.len()) < opts.partitions as usize)
        .count() as i64;
    if n != records as i64 || sum != expected_first {
        bail!("{topic} holds {sum} records by watermarks (not {expected_first}); all topics {n} by ListOffsets, not {records}");
    }
    Ok(rate)
}

/// Reads the source topic from the beginning with one consumer and returns the rate.
fn fetch_all(bootstrap: &str, topics: &[String], partitions: i32, records: usize) -> Result<f64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "bench-fetch")
        .set("enable.auto.commit", "false")
        .create()
        .context("fetch consumer")?;
    let mut tpl = TopicPartitionList::new();
    for topic in topics {
        for p in 0..partitions {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .context("partition list")?;
        }
    }
    consumer
        .assign(&tpl)
        .context("assigning the source topic")?;
    // Per partition number, over all topics.
    let per_number = records / partitions as usize;
    let mut per_partition = vec![0usize; partitions as usize];
    let started = Instant::now();
    let mut n = 0;
    while n < records {
        match consumer.poll(Duration::from_secs(30)) {
            Some(Ok(m)) => {
                n += 1;
                if let Some(c) = per_partition.get_mut(m.partition() as usize) {
                    *c += 1;
                }
            }
            Some(Err(e)) => bail!("fetch: {e}"),
            None => {
                let short: Vec<String> = per_partition
                    .iter()
                    .enumerate()
                    .filter(|(_, &c)| c < per_number)
                    .map(|(p, c)| format!("{p}: {c}"))
                    .collect();
                bail!(
                    "fetch stalled at {n} of {records} records for 30 s; partitions behind: {}",
                    short.join(", ")
                );
            }
        }
    }
    Ok(records as f64 / started.elapsed().as_secs_f64())
}

/// One mirror process to start: its command, where its output goes, and (cluster mode) the
/// port its `/status` is served on.
struct Launch {
    label: String,
    cmd: Command,
    log: PathBuf,
    status_port: Option<u16>,
}

/// A started mirror process.
struct Running {
    label: String,
    proc: Proc,
    status_port: Option<u16>,
}

fn refract_command(opts: &Opts, pipeline: &Path, rust_log: &str) -> Command {
    let mut c = Command::new(&opts.refract);
    c.arg("run")
        .arg(pipeline)
        .env("RUST_LOG", rust_log)
        .env("REFRACT_CACHE_DIR", opts.work.join("components"));
    c
}

fn run_once(
    opts: &Opts,
    source: &Broker,
    target: &Broker,
    scenario: &Scenario,
    n: usize,
) -> Result<Outcome> {
    let (sa, ta) = (format!("s{n}"), format!("t{n}"));
    let remotes: Vec<String> = topic_names(opts)
        .iter()
        .map(|t| format!("{sa}.{t}"))
        .collect();
    let selection = topic_selection(opts);
    let dir = opts.work.join(format!("run{n}-{}", scenario.key));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let consumer: Vec<String> = opts
        .source_consumer
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| format!("\"{k}\" = \"{v}\""))
        .collect();
    let consumer = if consumer.is_empty() {
        String::new()
    } else {
        format!("consumer = {{ {} }}\n", consumer.join(", "))
    };
    let clusters = format!(
        "[clusters.{sa}]\nbootstrap = \"{}\"\n{consumer}[clusters.{ta}]\nbootstrap = \"{}\"\n",
        source.bootstrap, target.bootstrap
    );
    let launches: Vec<Launch> = match &scenario.mirror {
        Mirror::Refract { processors } => {
            // With an idle phase, /status and /metrics are served (and timed at its end).
            let port = (opts.idle > 0).then(free_port);
            let metrics = port.map_or(String::new(), |port| {
                format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n")
            });
            let pipeline = format!(
                "{clusters}\n{metrics}[[flow]]\nsource = \"{sa}\"\ntarget = \"{ta}\"\ntopics = [\"{selection}\"]\nprocessors = [{processors}]\n{}\n",
                opts.flow_extra
            );
            let path = dir.join("pipeline.toml");
            std::fs::write(&path, pipeline)
                .with_context(|| format!("writing {}", path.display()))?;
            let rust_log = std::env::var("BENCH_RUST_LOG").unwrap_or_else(|_| "warn".into());
            vec![Launch {
                label: "refract".into(),
                cmd: refract_command(opts, &path, &rust_log),
                log: dir.join("mirror.log"),
                status_port: port,
            }]
        }
        Mirror::RefractCluster { processes } => {
            // The membership module's info lines say which tasks each process took and gave away.
            let rust_log = std::env::var("BENCH_RUST_LOG")
                .unwrap_or_else(|_| "warn,refract_mirror::membership=info".into());
            let mut launches = Vec::new();
            for i in 1..=*processes {
                let label = format!("p{i}");
                let port = free_port();
                let pipeline = format!(
                    "{clusters}\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n[cluster]\ninstance = \"{label}\"\nsession_timeout = \"{CLUSTER_SESSION_TIMEOUT}\"\n\n[[flow]]\nsource = \"{sa}\"\ntarget = \"{ta}\"\ntopics = [\"{selection}\"]\ntasks = {CLUSTER_TASKS}\n"
                );
                let path = dir.join(format!("{label}.toml"));
                std::fs::write(&path, pipeline)
                    .with_context(|| format!("writing {}", path.display()))?;
                let mut cmd = refract_command(opts, &path, &rust_log);
                cmd.env("NO_COLOR", "1");
                launches.push(Launch {
                    log: dir.join(format!("{label}.log")),
                    label,
                    cmd,
                    status_port: Some(port),
                });
            }
            launches
        }
        Mirror::Mm2 { tuned } => {
            let mut props = format!(
                "clusters = {sa}, {ta}\n\
                 {sa}.bootstrap.servers = {}\n\
                 {ta}.bootstrap.servers = {}\n\
                 {sa}->{ta}.enabled = true\n\
                 {sa}->{ta}.topics = {selection}\n\
                 replication.factor = 1\n\
                 offset-syncs.topic.replication.factor = 1\n\
                 checkpoints.topic.replication.factor = 1\n\
                 heartbeats.topic.replication.factor = 1\n\
                 config.storage.replication.factor = 1\n\
                 offset.storage.replication.factor = 1\n\
                 status.storage.replication.factor = 1\n",
                source.bootstrap, target.bootstrap
            );
            if *tuned {
                props.push_str(&format!(
                    "tasks.max = {}\n\
                     {ta}.producer.linger.ms = 20\n\
                     {ta}.producer.batch.size = 524288\n\
                     {ta}.producer.compression.type = none\n",
                    opts.mm2_tasks
                ));
            }
            let path = dir.join("mm2.properties");
            std::fs::write(&path, props).with_context(|| format!("writing {}", path.display()))?;
            let log4j = dir.join("log4j2.properties");
            write_log4j(&log4j, &dir.join("mm2.log"), &opts.mm2_log_level)?;
            let mut c = Command::new(&opts.java);
            c.args(MM2_JVM)
                .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
                .arg("-cp")
                .arg(classpath(opts))
                .arg("org.apache.kafka.connect.mirror.MirrorMaker")
                .arg(&path);
            vec![Launch {
                label: "MM2".into(),
                cmd: c,
                log: dir.join("mirror.log"),
                status_port: None,
            }]
        }
    };

    // Every process is started at once; a process that does not start stops the ones that did
    // (dropping a Proc stops it).
    let spawned = Instant::now();
    let mut running = Vec::with_capacity(launches.len());
    for Launch {
        label,
        mut cmd,
        log,
        status_port,
    } in launches
    {
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out
            .try_clone()
            .with_context(|| format!("opening {} again", log.display()))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {} ({label})", scenario.name))?;
        running.push(Running {
            label,
            proc: Proc {
                child,
                log,
                grace: Duration::from_secs(60),
            },
            status_port,
        });
    }

    let expected = opts.records as i64;
    let counter = Counter::new(&target.bootstrap, &remotes, opts.partitions)?;
    // An estate's counter asks for thousands of partitions: not every 20 ms.
    let first_poll = if remotes.len() > 1 { 100 } else { 20 };
    let first_deadline = spawned + Duration::from_secs(300);
    let trace = std::env::var_os("BENCH_TRACE").is_some();
    let (first_at, first_count, startup) = loop {
        let c = counter.count();
        if c > 0 {
            break (Instant::now(), c, usages(&running)?);
        }
        if trace {
            eprintln!(
                "{:>7} ms after start: no record yet",
                spawned.elapsed().as_millis()
            );
        }
        check_all_alive(&mut running)?;
        if Instant::now() > first_deadline {
            bail!(
                "no record on the target after {:?}\n{}",
                first_deadline - spawned,
                log_tails(&running)
            );
        }
        std::thread::sleep(Duration::from_millis(first_poll));
    };
    let (mut last, mut last_change) = (first_count, Instant::now());
    loop {
        let c = counter.count();
        if trace {
            eprintln!("{:>7} ms {c}", first_at.elapsed().as_millis());
        }
        if c >= expected {
            break;
        }
        if c != last {
            (last, last_change) = (c, Instant::now());
        } else if last_change.elapsed() > Duration::from_secs(120) {
            bail!(
                "stalled at {c} of {expected} records for 120 s\n{}",
                log_tails(&running)
            );
        }
        check_all_alive(&mut running)?;
        std::thread::sleep(Duration::from_millis(100));
    }
    let elapsed = first_at.elapsed().as_secs_f64();
    let caught_up = spawned.elapsed();
    let end = usages(&running)?;
    let idle = if opts.idle > 0 && running.len() == 1 {
        Some(idle_phase(opts, &mut running[0])?)
    } else {
        None
    };
    // Read after the span: what each process held and sent, and how far its log went before the
    // stop (the stop's own hand-over is not part of the run's task history).
    let statuses: Vec<Option<Result<ProcessStatus>>> = running
        .iter()
        .map(|r| r.status_port.map(process_status))
        .collect();
    let log_lengths: Vec<u64> = running
        .iter()
        .map(|r| std::fs::metadata(&r.proc.log).map_or(0, |m| m.len()))
        .collect();
    let stopping = Instant::now();
    let exits = stop_all(&mut running);
    let stop_took = stopping.elapsed();
    let after = counter.count();
    if after != expected {
        eprintln!("  note: the target holds {after} records for {expected} in the source");
    }
    let mut details = Vec::new();
    let is_refract = !matches!(scenario.mirror, Mirror::Mm2 { .. });
    for (r, exit) in running.iter().zip(&exits) {
        match exit {
            Some(s) if s.success() || !is_refract => {}
            Some(s) => details.push(format!("{} exited with {s} after SIGTERM", r.label)),
            None => details.push(format!(
                "{} did not stop within {:?} of SIGTERM: killed",
                r.label, r.proc.grace
            )),
        }
    }
    if let Mirror::RefractCluster { .. } = scenario.mirror {
        let mut sent_sum = 0.0;
        for (i, r) in running.iter().enumerate() {
            let status = match &statuses[i] {
                Some(Ok(s)) => {
                    sent_sum += s.records_sent;
                    format!(
                        "tasks {:?} ({} partitions), {:.0} records sent",
                        s.tasks, s.partitions, s.records_sent
                    )
                }
                Some(Err(e)) => format!("/status: {e:#}"),
                None => "/status: not served".into(),
            };
            let log = LogSummary::read(&r.proc.log, log_lengths[i]);
            details.push(format!(
                "{}: {status}; CPU {:.1} s over the span (+{:.1} s before the first record), peak RSS {:.0} MiB; tasks taken/given before the stop: {}; {} WARN, {} ERROR lines{}",
                r.label,
                end[i].0 - startup[i].0,
                startup[i].0,
                end[i].1 as f64 / 1024.0,
                if log.history.is_empty() {
                    "none".into()
                } else {
                    log.history.join(" ")
                },
                log.warn,
                log.error,
                log.first_problem
                    .as_ref()
                    .map_or(String::new(), |l| format!(" (first: {l})"))
            ));
        }
        details.push(format!(
            "records sent by all processes (their /status): {sent_sum:.0} for {expected}; SIGTERM to all processes: all stopped {:.1} s later",
            stop_took.as_secs_f64()
        ));
    }
    let cpu: f64 = end.iter().map(|u| u.0).sum();
    let startup_cpu: f64 = startup.iter().map(|u| u.0).sum();
    let moved = (expected - first_count) as f64;
    Ok(Outcome {
        rate: moved / elapsed.max(1e-6),
        records: moved,
        cpu_seconds: cpu - startup_cpu,
        peak_rss_kib: end.iter().map(|u| u.1).max().unwrap_or(0),
        to_first: first_at - spawned,
        startup_cpu,
        caught_up,
        idle,
        details,
    })
}

/// What a mirror with nothing to mirror costs, read over the second half of `--idle`.
struct Idle {
    /// CPU over the span, as a share of one core.
    cpu_share: f64,
    rss_kib: u64,
    threads: u64,
    /// `/status` and `/metrics` (refract): time to the whole answer and its size.
    status: Option<(Duration, usize)>,
    metrics: Option<(Duration, usize)>,
}

/// Lets the caught-up mirror sit for `--idle` seconds: the first half lets start-up work
/// (discovery, first checkpoints) settle, the second is measured.
fn idle_phase(opts: &Opts, running: &mut Running) -> Result<Idle> {
    let half = Duration::from_secs(opts.idle) / 2;
    std::thread::sleep(half);
    running.proc.check_alive()?;
    let pid = running.proc.child.id();
    let (cpu0, _) = crate::usage(pid)?;
    let t0 = Instant::now();
    std::thread::sleep(half);
    running.proc.check_alive()?;
    let (cpu1, _) = crate::usage(pid)?;
    let cpu_share = (cpu1 - cpu0) / t0.elapsed().as_secs_f64();
    let status_text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let field = |name: &str| -> u64 {
        status_text
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let timed = |path: &str| -> Result<(Duration, usize)> {
        let Some(port) = running.status_port else {
            bail!("not served");
        };
        // The fastest of three: the first also pays for a fresh snapshot or registry walk.
        let mut best: Option<(Duration, usize)> = None;
        for _ in 0..3 {
            let t = Instant::now();
            let body = http_get(port, path)?;
            let took = t.elapsed();
            if best.is_none_or(|(b, _)| took < b) {
                best = Some((took, body.len()));
            }
        }
        best.context("no answer")
    };
    Ok(Idle {
        cpu_share,
        rss_kib: field("VmRSS:"),
        threads: field("Threads:"),
        status: timed("/status").ok(),
        metrics: timed("/metrics").ok(),
    })
}

/// CPU seconds (utime + stime) and peak RSS (KiB) of each process.
fn usages(running: &[Running]) -> Result<Vec<(f64, u64)>> {
    running
        .iter()
        .map(|r| {
            let pid = r.proc.child.id();
            crate::usage(pid).with_context(|| format!("reading /proc for {} (pid {pid})", r.label))
        })
        .collect()
}

fn check_all_alive(running: &mut [Running]) -> Result<()> {
    for r in running {
        r.proc
            .check_alive()
            .with_context(|| format!("mirror process {}", r.label))?;
    }
    Ok(())
}

fn log_tails(running: &[Running]) -> String {
    running
        .iter()
        .map(|r| r.proc.log_tail())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Sends SIGTERM to every process at once, then waits for them all (SIGKILL for any still
/// running after the grace period). Each one's exit status; `None` for one that was killed.
fn stop_all(running: &mut [Running]) -> Vec<Option<ExitStatus>> {
    for r in running.iter_mut() {
        r.proc.terminate();
    }
    let grace = running
        .iter()
        .map(|r| r.proc.grace)
        .max()
        .unwrap_or_default();
    let deadline = Instant::now() + grace;
    running
        .iter_mut()
        .map(|r| r.proc.wait_until(deadline))
        .collect()
}

/// What a cluster-mode process's `/status` says of its flow.
struct ProcessStatus {
    tasks: Vec<u32>,
    partitions: usize,
    records_sent: f64,
}

fn process_status(port: u16) -> Result<ProcessStatus> {
    let body = http_get(port, "/status")?;
    let json: serde_json::Value = serde_json::from_str(&body).context("parsing /status")?;
    let flow = &json["flows"][0];
    let tasks = flow["tasks"]
        .as_array()
        .context("/status: flows[0].tasks is not an array")?
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .filter_map(|t| u32::try_from(t).ok())
        .collect();
    let partitions = flow["partitions"]
        .as_array()
        .context("/status: flows[0].partitions is not an array")?
        .len();
    let records_sent = flow["records_sent"]
        .as_f64()
        .context("/status: flows[0].records_sent is not a number")?;
    Ok(ProcessStatus {
        tasks,
        partitions,
        records_sent,
    })
}

/// A GET on 127.0.0.1:`port` (the server answers with `Connection: close`): the body of a
/// 200 answer.
fn http_get(port: u16, path: &str) -> Result<String> {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("connecting to {addr}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .context("setting a read timeout")?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .with_context(|| format!("sending GET {path} to {addr}"))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .with_context(|| format!("reading the answer to GET {path} from {addr}"))?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .with_context(|| format!("GET {path} from {addr}: no end of headers"))?;
    let status_line = head.lines().next().unwrap_or_default();
    if status_line.split_whitespace().nth(1) != Some("200") {
        bail!("GET {path} from {addr}: {status_line}");
    }
    Ok(body.to_string())
}

/// What a cluster-mode process's log says up to a point: the tasks it took over (`+[..]`) and
/// handed over (`-[..]`) in order, and its WARN and ERROR lines.
struct LogSummary {
    history: Vec<String>,
    warn: usize,
    error: usize,
    first_problem: Option<String>,
}

impl LogSummary {
    /// `history` from the first `until` bytes, the WARN and ERROR counts from all of it.
    fn read(path: &Path, until: u64) -> Self {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut s = Self {
            history: Vec::new(),
            warn: 0,
            error: 0,
            first_problem: None,
        };
        let mut offset = 0u64;
        for line in text.lines() {
            let before_stop = offset < until;
            offset += line.len() as u64 + 1;
            let level = line.split_whitespace().nth(1).unwrap_or_default();
            if level == "WARN" || level == "ERROR" {
                if level == "WARN" {
                    s.warn += 1;
                } else {
                    s.error += 1;
                }
                if s.first_problem.is_none() {
                    s.first_problem = Some(line.chars().take(240).collect());
                }
            }
            if !before_stop {
                continue;
            }
            if let Some(rest) = line.split("cluster: took over tasks ").nth(1) {
                s.history
                    .push(format!("+{}", rest.split(';').next().unwrap_or(rest)));
            } else if let Some(rest) = line.split("cluster: handed over tasks ").nth(1) {
                s.history
                    .push(format!("-{}", rest.split(" in ").next().unwrap_or(rest)));
            }
        }
        s
    }
}

/// Cluster mode makes, on the source, a coordination topic and a group of its own besides the
/// flow's progress group. Before the clean-up (`before`): notes any of the three the run did not
/// make (the names would be wrong); after it: fails if any is left.
fn cluster_leftovers(source: &Broker, n: usize, before: bool) -> Result<()> {
    let topic = format!("refract-tasks.s{n}-t{n}.internal");
    let groups = [
        format!("refract-s{n}-t{n}"),
        format!("refract-s{n}-t{n}-cluster"),
    ];
    let topics = source.topics()?;
    let listed = source.group_names()?;
    let mut present: Vec<&str> = Vec::new();
    let mut absent: Vec<&str> = Vec::new();
    for (name, there) in std::iter::once((topic.as_str(), topics.contains(&topic)))
        .chain(groups.iter().map(|g| (g.as_str(), listed.contains(g))))
    {
        if there {
            present.push(name);
        } else {
            absent.push(name);
        }
    }
    if before && !absent.is_empty() {
        eprintln!(
            "  note: not on the source after the run: {}",
            absent.join(", ")
        );
    }
    if !before && !present.is_empty() {
        bail!(
            "still on the source {} after the clean-up: {}",
            source.bootstrap,
            present.join(", ")
        );
    }
    Ok(())
}

/// Deletes every topic the run made: on the target all but Kafka's own, on the source all but
/// Kafka's own and the benchmark topic (offset syncs, heartbeats, MM2's reverse-pair topics).
fn clean_up(source: &Broker, target: &Broker, topics: &[String]) -> Result<()> {
    let keep: Vec<&str> = topics.iter().map(String::as_str).collect();
    source.delete_topics_except(&keep)?;
    target.delete_topics_except(&[])?;
    // ... and every consumer group (refract's progress groups, MM2's Connect worker groups), so
    // no run checkpoints another run's groups.
    source.delete_groups()?;
    target.delete_groups()?;
    Ok(())
}

/// Sum of the high watermarks of a topic's partitions on one cluster (0 until the topic exists
/// with all its partitions), read with one ListOffsets request (timestamp -1, "latest") for all
/// partitions, so that polling loads the target broker little. Until the topic exists, a metadata
/// request says so at once (a ListOffsets request for an unknown topic waits out its timeout).
struct Counter {
    consumer: BaseConsumer,
    topics: Vec<String>,
    partitions: i32,
    /// Per topic: whether it exists with all its partitions led (asked until all do).
    ready: std::cell::RefCell<Vec<bool>>,
    /// The ready topics' partitions in lists of at most [`COUNTER_CHUNK`], each with the last
    /// count read for it: a lookup that fails (librdkafka fails all of one list until its client
    /// knows every partition's leader, which for thousands of new partitions took ~25 s) counts
    /// as that, and the lists it already knows count.
    chunks: std::cell::RefCell<Vec<(TopicPartitionList, i64)>>,
}

/// Partitions per ListOffsets lookup of [`Counter`].
const COUNTER_CHUNK: usize = 500;

impl Counter {
    fn new(bootstrap: &str, topics: &[String], partitions: i32) -> Result<Self> {
        let consumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("topic.metadata.refresh.interval.ms", "1000")
            .create()
            .context("watermark consumer")?;
        Ok(Self {
            consumer,
            topics: topics.to_vec(),
            partitions,
            ready: std::cell::RefCell::new(vec![false; topics.len()]),
            chunks: std::cell::RefCell::new(Vec::new()),
        })
    }

    fn count(&self) -> i64 {
        let mut ready = self.ready.borrow_mut();
        if ready.iter().any(|r| !r) {
            // One topic: ask for it alone; an estate: one request for all topics.
            let asked = (self.topics.len() == 1).then(|| self.topics[0].as_str());
            let Ok(md) = self.consumer.fetch_metadata(asked, Duration::from_secs(5)) else {
                return self.chunks.borrow().iter().map(|(_, n)| n).sum();
            };
            let led: std::collections::HashSet<&str> = md
                .topics()
                .iter()
                .filter(|t| {
                    t.error().is_none()
                        && t.partitions().len() == self.partitions as usize
                        && t.partitions().iter().all(|p| p.leader() >= 0)
                })
                .map(|t| t.name())
                .collect();
            let mut chunks = self.chunks.borrow_mut();
            for (i, topic) in self.topics.iter().enumerate() {
                if !ready[i] && led.contains(topic.as_str()) {
                    ready[i] = true;
                    if chunks
                        .last()
                        .is_none_or(|(tpl, _)| tpl.count() >= COUNTER_CHUNK)
                    {
                        chunks.push((TopicPartitionList::new(), 0));
                    }
                    if let Some((tpl, _)) = chunks.last_mut() {
                        for p in 0..self.partitions {
                            // Cannot fail: a valid partition number.
                            let _ = tpl.add_partition_offset(topic, p, Offset::End);
                        }
                    }
                }
            }
        }
        let mut chunks = self.chunks.borrow_mut();
        // One topic: the 5 s the single lookup always had; an estate: 1 s per list.
        let timeout = Duration::from_secs(if chunks.len() > 1 { 1 } else { 5 });
        for (tpl, last) in chunks.iter_mut() {
            if let Ok(answer) = self.consumer.offsets_for_times(tpl.clone(), timeout) {
                let n: i64 = answer
                    .elements()
                    .iter()
                    .filter(|e| e.error().is_ok())
                    .filter_map(|e| match e.offset() {
                        Offset::Offset(n) => Some(n),
                        _ => None,
                    })
                    .sum();
                *last = (*last).max(n);
            }
        }
        chunks.iter().map(|(_, n)| n).sum()
    }
}

/// A child process stopped with SIGTERM (then SIGKILL after `grace`) when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
    grace: Duration,
}

impl Proc {
    fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait().context("waiting for a child")? {
            bail!("exited early ({status})\n{}", self.log_tail());
        }
        Ok(())
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(40);
        format!("{}:\n{}", self.log.display(), lines[from..].join("\n"))
    }

    /// Sends SIGTERM, unless it has exited.
    fn terminate(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
    }

    /// Waits for it to exit until `deadline`, then kills it. Its exit status; `None` if killed.
    fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }

    fn stop(&mut self) {
        self.terminate();
        self.wait_until(Instant::now() + self.grace);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

fn classpath(opts: &Opts) -> String {
    format!("{}/*", opts.kafka_libs.display())
}

fn write_log4j(path: &Path, log: &Path, level: &str) -> Result<()> {
    let text = format!(
        "rootLogger.level={level}\nrootLogger.appenderRef.f.ref=F\n\
         appender.f.type=File\nappender.f.name=F\nappender.f.fileName={}\n\
         appender.f.layout.type=PatternLayout\n\
         appender.f.layout.pattern=[%d] %p %m (%c)%n\n",
        log.display()
    );
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// One Apache Kafka broker: a single-node KRaft cluster (combined broker and controller) with its
/// data under the work folder, started by refract-testkit's launcher with what
/// `kafka-server-start.sh` would give it, and otherwise Kafka's defaults.
struct Broker(refract_testkit::Broker);

impl std::ops::Deref for Broker {
    type Target = refract_testkit::Broker;
    fn deref(&self) -> &refract_testkit::Broker {
        &self.0
    }
}

impl Broker {
    fn start(opts: &Opts, name: &str) -> Result<Self> {
        let options = BrokerOptions {
            java: Some(opts.java.clone()),
            kafka_libs: Some(opts.kafka_libs.clone()),
            jvm: BROKER_JVM.iter().map(|s| s.to_string()).collect(),
            // none of the tests' settings (no time retention, say): Kafka's defaults
            props: Vec::new(),
            parent_dir: Some(opts.work.clone()),
            stop_grace: Some(Duration::from_secs(30)),
            ..BrokerOptions::default()
        };
        let broker = refract_testkit::Broker::launch(name, &options)?;
        eprintln!("{name} broker at {}", broker.bootstrap);
        Ok(Self(broker))
    }

    /// Creates the broker's internal topics for groups and producer ids by using them once.
    fn warm_up(&self) -> Result<()> {
        const WARM: &str = "bench-warm-up";
        self.create_topic(WARM, 1)?;
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("enable.idempotence", "true")
            .create()
            .context("warm-up producer")?;
        crate::send_waiting(&producer, BaseRecord::to(WARM).key("k").payload("v"));
        producer
            .flush(Duration::from_secs(120))
            .context("warm-up produce (idempotent)")?;
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", WARM)
            .set("enable.auto.commit", "false")
            .create()
            .context("warm-up consumer")?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(WARM, 0, Offset::Offset(1))
            .context("partition list")?;
        let deadline = Instant::now() + Duration::from_secs(120);
        while let Err(e) = consumer.commit(&tpl, CommitMode::Sync) {
            if Instant::now() > deadline {
                bail!("warm-up group commit on {}: {e}", self.bootstrap);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    fn admin(&self) -> Result<AdminClient<DefaultClientContext>> {
        ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .context("admin client")
    }

    fn topics(&self) -> Result<Vec<String>> {
        let probe: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .context("metadata consumer")?;
        let md = probe
            .fetch_metadata(None, Duration::from_secs(10))
            .with_context(|| format!("metadata from {}", self.bootstrap))?;
        Ok(md.topics().iter().map(|t| t.name().to_string()).collect())
    }

    fn create_topic(&self, name: &str, partitions: i32) -> Result<()> {
        let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        let results = block_on(self.admin()?.create_topics([&topic], &AdminOptions::new()))
            .with_context(|| format!("creating {name}"))?;
        for r in results {
            r.map_err(|(t, e)| anyhow::anyhow!("creating {t}: {e}"))?;
        }
        self.wait_for("the topic to appear", |t| t.iter().any(|x| x == name))
    }

    /// Creates `names` with one CreateTopics request per 500 topics.
    fn create_topics(&self, names: &[String], partitions: i32) -> Result<()> {
        if let [one] = names {
            return self.create_topic(one, partitions);
        }
        let admin = self.admin()?;
        for chunk in names.chunks(500) {
            let new: Vec<NewTopic> = chunk
                .iter()
                .map(|n| NewTopic::new(n, partitions, TopicReplication::Fixed(1)))
                .collect();
            let results = block_on(admin.create_topics(&new, &AdminOptions::new()))
                .with_context(|| format!("creating {} topics", chunk.len()))?;
            for r in results {
                r.map_err(|(t, e)| anyhow::anyhow!("creating {t}: {e}"))?;
            }
        }
        self.wait_for("the topics to appear", |t| {
            let have: std::collections::HashSet<&str> = t.iter().map(String::as_str).collect();
            names.iter().all(|n| have.contains(n.as_str()))
        })
    }

    fn delete_topics_except(&self, keep: &[&str]) -> Result<()> {
        let doomed: Vec<String> = self
            .topics()?
            .into_iter()
            .filter(|t| !t.starts_with("__") && !keep.contains(&t.as_str()))
            .collect();
        if doomed.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = doomed.iter().map(String::as_str).collect();
        let results = block_on(self.admin()?.delete_topics(&names, &AdminOptions::new()))
            .context("deleting topics")?;
        for r in results {
            r.map_err(|(t, e)| anyhow::anyhow!("deleting {t}: {e}"))?;
        }
        self.wait_for("deleted topics to go", |t| {
            !t.iter().any(|x| doomed.contains(x))
        })
    }

    fn group_names(&self) -> Result<Vec<String>> {
        let probe: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .context("group list consumer")?;
        Ok(probe
            .fetch_group_list(None, Duration::from_secs(10))
            .with_context(|| format!("listing groups on {}", self.bootstrap))?
            .groups()
            .iter()
            .map(|g| g.name().to_string())
            .collect())
    }

    /// Deletes every group. A group a member did not leave (a process stopped without leaving
    /// it) stays non-empty until the member's session times out: it is deleted again every
    /// second for up to 60 s.
    fn delete_groups(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let groups = self.group_names()?;
            if groups.is_empty() {
                return Ok(());
            }
            let names: Vec<&str> = groups.iter().map(String::as_str).collect();
            let results = block_on(self.admin()?.delete_groups(&names, &AdminOptions::new()))
                .context("deleting groups")?;
            let mut busy = Vec::new();
            for r in results {
                match r {
                    Ok(_) | Err((_, RDKafkaErrorCode::GroupIdNotFound)) => {}
                    Err((g, RDKafkaErrorCode::NonEmptyGroup)) if Instant::now() < deadline => {
                        busy.push(g)
                    }
                    Err((g, e)) => bail!("deleting group {g} on {}: {e}", self.bootstrap),
                }
            }
            if busy.is_empty() {
                return Ok(());
            }
            eprintln!(
                "  note: group(s) {} on {} still have members; deleting again in 1 s",
                busy.join(", "),
                self.bootstrap
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    fn wait_for(&self, what: &str, done: impl Fn(&[String]) -> bool) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if done(&self.topics()?) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("timed out waiting for {what} on {}", self.bootstrap);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Runs a future to completion on this thread (rdkafka's admin calls are futures; its default
/// runtime needs no executor of its own).
fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_summary_keeps_the_task_history_before_the_stop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p1.log");
        let before = "2025-01-01T00:00:00.000000Z  INFO cluster: joining group g\n\
            2025-01-01T00:00:01.000000Z  INFO cluster: took over tasks [0, 1, 2]; this process now runs [0, 1, 2] flow=s1->t1\n\
            2025-01-01T00:00:02.000000Z  WARN something slow\n\
            2025-01-01T00:00:03.000000Z  INFO cluster: handed over tasks [2] in 40 ms flow=s1->t1\n";
        let after = "2025-01-01T00:00:09.000000Z  INFO cluster: handed over tasks [0, 1] in 3 ms\n\
            2025-01-01T00:00:09.500000Z ERROR at the end\n";
        std::fs::write(&path, format!("{before}{after}")).unwrap();
        let s = LogSummary::read(&path, before.len() as u64);
        assert_eq!(s.history, ["+[0, 1, 2]", "-[2]"]);
        assert_eq!((s.warn, s.error), (1, 1));
        assert!(s.first_problem.unwrap().contains("something slow"));
    }
}

#[cfg(test)]
mod opts_tests {
    use clap::Parser;

    use crate::{Cli, Mode};

    fn opts(args: &[&str]) -> super::Opts {
        let all = [
            "refract-bench",
            "kafka-compare",
            "--kafka-libs",
            "/libs",
            "--work-dir",
            "/w",
        ];
        let cli = Cli::try_parse_from(all.iter().chain(args).copied())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        match cli.mode {
            Some(Mode::KafkaCompare(opts)) => opts,
            other => panic!("{other:?}"),
        }
    }

    /// The flags bench/mm2-compare and the README pass, with the meanings the hand-written
    /// parser gave them.
    #[test]
    fn kafka_compare_flags_parse_as_before() {
        let d = opts(&[]);
        assert_eq!(
            (d.kafka_libs.to_str(), d.work.to_str()),
            (Some("/libs"), Some("/w"))
        );
        assert_eq!(d.refract.to_str(), Some("target/release/refract"));
        assert_eq!(
            (d.records, d.partitions, d.value_bytes),
            (2_000_000, 32, 1024)
        );
        assert_eq!(
            (d.repeat, d.mm2_tasks, d.mm2_log_level.as_str()),
            (1, 1, "WARN")
        );
        assert!(d.only.is_none() && d.warm_up_run);
        assert_eq!(d.java, refract_testkit::java());

        let o = opts(&[
            "--java",
            "/jdk/bin/java",
            "--refract",
            "/r",
            "--records",
            "1000000",
            "--repeat",
            "3",
            "--only",
            "refract,refract-x1,mm2",
            "--mm2-tasks",
            "2",
            "--partitions",
            "4",
            "--value-bytes",
            "200",
            "--mm2-log-level",
            "INFO",
            "--no-warm-up",
        ]);
        assert_eq!(
            (o.java.to_str(), o.refract.to_str()),
            (Some("/jdk/bin/java"), Some("/r"))
        );
        assert_eq!((o.records, o.repeat, o.mm2_tasks), (1_000_000, 3, 2));
        assert_eq!(
            o.only.as_deref(),
            Some(&["refract", "refract-x1", "mm2"].map(String::from)[..])
        );
        assert_eq!((o.partitions, o.value_bytes), (4, 200));
        assert_eq!(o.mm2_log_level, "INFO");
        assert!(!o.warm_up_run);

        // --kafka-libs and --work-dir are required (bench/mm2-compare passes them).
        assert!(
            Cli::try_parse_from(["refract-bench", "kafka-compare", "--work-dir", "/w"]).is_err()
        );
        assert!(
            Cli::try_parse_from(["refract-bench", "kafka-compare", "--kafka-libs", "/l"]).is_err()
        );
    }
}
