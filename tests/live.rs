//! Live operations against real Apache Kafka brokers: plugins swapped on disk while records flow, a
//! corrupt plugin rejected, and a pipeline edited while running.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use crate::support::*;

/// Produces records keyed 0, 1, 2, … (decimal) round-robin over `partitions` until `stop`.
fn keep_producing(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    let bootstrap = broker.bootstrap.clone();
    let topic = topic.to_string();
    std::thread::spawn(move || {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .create()
            .expect("producer");
        let mut n: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..10 {
                let key = n.to_string();
                let value = format!("value-{n}");
                let rec = BaseRecord::<str, str>::to(&topic)
                    .key(&key)
                    .payload(&value)
                    .partition((n % partitions as u64) as i32);
                if producer.send(rec).is_ok() {
                    n += 1;
                }
            }
            producer.poll(Duration::ZERO);
            producer.flush(Duration::from_secs(30)).expect("flush");
            sent.store(n, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

/// Replaces `path` atomically (write beside it, then rename), as a deployment would.
fn replace_file(path: &Path, from: &Path) {
    let tmp = path.with_extension("tmp");
    std::fs::copy(from, &tmp).expect("copy plugin");
    std::fs::rename(&tmp, path).expect("rename plugin");
}

fn key_number(r: &TestRecord) -> u64 {
    std::str::from_utf8(r.key.as_deref().expect("key"))
        .expect("utf8")
        .parse()
        .expect("number")
}

/// Walks one partition's source records against what reached the target, with the rules
/// `keep even`, `keep odd`, … in turn: every source record either follows the current rule (kept
/// and next on the target, or dropped because the rule drops it) or a swap happened right
/// before it. Returns how many swaps the partition saw.
fn rule_segments(source: &[TestRecord], target: &[TestRecord]) -> usize {
    let mut segment = 0usize; // even number: keep-even; odd number: keep-odd
    let mut next = 0usize;
    for r in source {
        let keeps = |segment: usize| key_number(r) % 2 == (segment % 2) as u64;
        let kept = target.get(next) == Some(r);
        if keeps(segment) != kept {
            segment += 1; // the rule changed before this record
            assert_eq!(
                keeps(segment),
                kept,
                "record {} follows neither rule",
                key_number(r)
            );
        }
        if kept {
            next += 1;
        }
    }
    assert_eq!(
        next,
        target.len(),
        "the target holds nothing but source records, once each, in order"
    );
    segment
}

/// A filter replaced on disk three times under continuous production: every record follows the
/// rule of the plugin version in place when it was processed, source = target + filtered
/// exactly; then a corrupt file is rejected and mirroring goes on with the last good plugin.
#[test]
fn plugin_hot_swap_under_continuous_production() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("events");
    a.create_topic(&topic, 2);
    let dir = tempfile::tempdir().expect("tmp");
    let plugin = dir.path().join("filter.wasm");
    let (even, odd) = (
        Refract::guest("keep_even.wasm"),
        Refract::guest("keep_odd.wasm"),
    );
    std::fs::copy(&even, &plugin).expect("plugin");
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nrefresh_topics_interval = \"1s\"\ncommit_interval = \"500ms\"\nreplication_factor = 1\nemit_checkpoints = false\nprocessors = [{{ plugin = \"{}\" }}]\n",
        plugin.display()
    );
    let refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    let remote = format!("a.{topic}");
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let producer = keep_producing(&a, &topic, 2, stop.clone(), sent.clone());
    let on_target = || b.counts(&remote).iter().sum::<i64>();
    refract.wait("records flowing", || on_target() >= 40);
    for (i, next) in [&odd, &even, &odd].into_iter().enumerate() {
        replace_file(&plugin, next);
        refract.wait(&format!("swap {}", i + 1), || {
            refract.log().matches("swapped in plugins").count() == i + 1
        });
        let at = on_target();
        refract.wait("more records after the swap", || on_target() >= at + 40);
    }
    // A corrupt plugin: rejected, the old one (keep-odd) keeps running.
    std::fs::write(&plugin, b"\0asm not really").expect("corrupt");
    refract.wait("the corrupt plugin rejected", || {
        refract.log().contains("reload rejected")
    });
    let at = on_target();
    refract.wait("mirroring to go on", || on_target() >= at + 40);
    stop.store(true, Ordering::Relaxed);
    producer.join().expect("producer");
    let total = sent.load(Ordering::Relaxed) as i64;
    assert_eq!(a.counts(&topic).iter().sum::<i64>(), total);
    // Wait until the flow has committed everything (the target then holds all it will hold).
    refract.wait("the mirror to catch up", || {
        a.group_offsets("refract-a-b", &topic, 2)
            .iter()
            .zip(a.counts(&topic))
            .all(|(c, n)| *c == Some(n))
    });
    let log = refract.log();
    assert_eq!(log.matches("swapped in plugins").count(), 3, "{log}");
    let source = a.read_all(&topic);
    let target = b.read_all(&remote);
    let mut kept = 0;
    for p in 0..2 {
        let swaps = rule_segments(&source[p], &target[p]);
        assert!(
            swaps <= 3,
            "partition {p}: {swaps} rule changes for 3 swaps"
        );
        kept += target[p].len();
    }
    // Every source record is on the target or was filtered; the flow's drop count says which.
    let dropped = total - kept as i64;
    assert!(dropped > 0 && kept > 0);
    assert!(
        log.contains("new plugins for a->b"),
        "reload summary names the flow: {log}"
    );
}

/// `max_bytes_per_second = 2 MB/s` on a flow with a 60 MB backlog: the target receives 2 MB/s
/// (within 10 %, measured over 12 s after the first second's burst); a reload to 6 MB/s applies
/// without a restart and the rate rises with it.
#[test]
fn a_throttled_flow_keeps_its_rate_and_a_reload_raises_it() {
    use std::time::Instant;
    const SIZE: usize = 20_000;
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("throttled");
    a.create_topic(&topic, 2);
    let records: Vec<TestRecord> = (0..3_000)
        .map(|i| TestRecord {
            partition: i % 2,
            key: None,
            value: Some(vec![b'x'; SIZE]),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect();
    a.produce(&topic, &records);
    let flow = |limit: u64| {
        "[metrics]\nlisten = \"127.0.0.1:0\"\n".to_string()
            + &pipeline(
            &[("a", a), ("b", b)],
            &format!("[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nrefresh_topics_interval = \"1s\"\ncommit_interval = \"500ms\"\nreplication_factor = 1\nemit_checkpoints = false\nmax_bytes_per_second = {limit}\n"),
        )
    };
    let refract = Refract::start(&flow(2_000_000), &[]);
    let remote = format!("a.{topic}");
    let on_target = || b.counts(&remote).iter().sum::<i64>();
    // Past the bucket's first second (2 MB = 100 records) before measuring.
    refract.wait("the first 3 MB on the target", || on_target() >= 150);
    let rate_over = |window: Duration| {
        let (start, from) = (Instant::now(), on_target());
        let mut to = from;
        refract.wait("the measuring window", || {
            to = on_target();
            start.elapsed() >= window
        });
        (to - from) as f64 * SIZE as f64 / start.elapsed().as_secs_f64()
    };
    let slow = rate_over(Duration::from_secs(12));
    assert!(
        (slow - 2_000_000.0).abs() <= 200_000.0,
        "{slow:.0} B/s at max_bytes_per_second = 2000000"
    );
    std::fs::write(&refract.pipeline, flow(6_000_000)).expect("edit");
    refract.wait("the reload", || {
        refract.log().contains("new read rate limits for a->b")
    });
    let fast = rate_over(Duration::from_secs(3));
    eprintln!("2 MB/s limit: {slow:.0} B/s; after the reload to 6 MB/s: {fast:.0} B/s");
    assert!(
        fast > 4_000_000.0,
        "{fast:.0} B/s after raising the limit to 6 MB/s"
    );
    let log = refract.log();
    assert!(!log.contains("rebuilt a->b"), "not restarted: {log}");
    refract.wait("everything mirrored", || on_target() == 3_000);
    // The time spent waiting shows in /status.
    let addr = refract.metrics_addr();
    let mut throttled = 0;
    refract.wait("the throttled time in /status", || {
        let status: serde_json::Value =
            serde_json::from_str(&http(&addr, "GET", "/status").1).unwrap_or_default();
        throttled = status["flows"][0]["throttled_ms"].as_u64().unwrap_or(0);
        throttled >= 5_000
    });
    assert!(throttled <= 60_000, "{throttled} ms");
    // And in the metric, in seconds (it is at least what /status showed a moment ago).
    let seconds = series(
        &http(&addr, "GET", "/metrics").1,
        "refract_throttled_seconds_total",
        &[("flow", "a->b")],
    )
    .unwrap_or(0.0);
    assert!(
        seconds * 1000.0 >= throttled as f64 - 1.0 && seconds <= 60.0,
        "refract_throttled_seconds_total {seconds} against {throttled} ms in /status"
    );
}

/// Edits the pipeline while it runs: one flow unchanged, one with a new topic list, one removed,
/// one added. Only the changed ones restart; the unchanged flow keeps mirroring without a
/// duplicate.
#[test]
fn pipeline_edit_applies_without_restarting_unchanged_flows() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let c = Broker::start("c");
    let (t1, t2, t3, t4) = (
        unique("keep"),
        unique("two"),
        unique("three"),
        unique("four"),
    );
    for t in [&t1, &t2, &t3] {
        a.create_topic(t, 1);
        a.produce(t, &sample_records(t, 1, 10));
    }
    b.create_topic(&t4, 1);
    b.produce(&t4, &sample_records(&t4, 1, 10));
    let common = "refresh_topics_interval = \"1s\"\ncommit_interval = \"500ms\"\nreplication_factor = 1\nemit_checkpoints = false\n";
    let before = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{t1}\"]\n{common}\n[[flow]]\nsource = \"a\"\ntarget = \"c\"\ntopics = [\"{t2}\"]\n{common}\n[[flow]]\nsource = \"b\"\ntarget = \"c\"\ntopics = [\"{t4}\"]\n{common}\n"
    );
    let clusters = [("a", &a), ("b", &b), ("c", &c)];
    let refract = Refract::start(&pipeline(&clusters, &before), &[]);
    refract.wait("first round", || {
        b.counts(&format!("a.{t1}")).iter().sum::<i64>() == 10
            && c.counts(&format!("a.{t2}")).iter().sum::<i64>() == 10
            && c.counts(&format!("b.{t4}")).iter().sum::<i64>() == 10
    });
    let after = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{t1}\"]\n{common}\n[[flow]]\nsource = \"a\"\ntarget = \"c\"\ntopics = [\"{t2}\", \"{t3}\"]\n{common}\n[[flow]]\nsource = \"b\"\ntarget = \"a\"\ntopics = [\"{t4}\"]\n{common}\n"
    );
    std::fs::write(&refract.pipeline, pipeline(&clusters, &after)).expect("edit");
    refract.wait("the reload", || refract.log().contains("reload: "));
    let log = refract.log();
    let summary = log
        .lines()
        .find(|l| l.contains("reload: "))
        .expect("summary")
        .to_string();
    assert!(summary.contains("rebuilt a->c"), "{summary}");
    assert!(summary.contains("removed b->c"), "{summary}");
    assert!(summary.contains("added b->a"), "{summary}");
    // a->b is not restarted; it only leaves the b->a heartbeats it wrote (no flow ran b->a) to
    // the new b->a flow.
    assert!(
        !summary.contains("rebuilt a->b") && !summary.contains("removed a->b"),
        "the unchanged flow is not restarted: {summary}"
    );
    assert!(
        summary.contains("a->b leaves the reverse heartbeats to the new reverse flow"),
        "{summary}"
    );
    refract.wait("the changed regex and the added flow", || {
        c.counts(&format!("a.{t3}")).iter().sum::<i64>() == 10
            && a.counts(&format!("b.{t4}")).iter().sum::<i64>() == 10
    });
    // The unchanged flow keeps going, without duplicates.
    a.produce(&t1, &sample_records("later", 1, 5));
    refract.wait("the unchanged flow to go on", || {
        b.counts(&format!("a.{t1}")).iter().sum::<i64>() >= 15
    });
    // The removed flow no longer mirrors.
    b.produce(&t4, &sample_records("after-removal", 1, 5));
    // The added b->a reads the same records the removed b->c would have.
    refract.wait("b->a to mirror the new records", || {
        a.counts(&format!("b.{t4}")).iter().sum::<i64>() == 15
    });
    assert_eq!(
        b.counts(&format!("a.{t1}")).iter().sum::<i64>(),
        15,
        "no duplicates"
    );
    assert_eq!(
        c.counts(&format!("b.{t4}")).iter().sum::<i64>(),
        10,
        "b->c stopped"
    );
    assert_eq!(
        log.matches("started flow=a->b").count()
            + refract
                .log()
                .matches("started \u{1b}[3mflow\u{1b}[0m\u{1b}[2m=\u{1b}[0ma->b")
                .count(),
        1,
        "a->b started once:\n{log}"
    );
    // An invalid edit changes nothing.
    std::fs::write(&refract.pipeline, "this is not toml").expect("edit");
    refract.wait("the rejection", || {
        refract.log().contains("reload rejected")
    });
    a.produce(&t1, &sample_records("still", 1, 5));
    refract.wait("still mirroring", || {
        b.counts(&format!("a.{t1}")).iter().sum::<i64>() == 20
    });
}

/// SIGTERM while records flow: refract stops fetching, drains what it sent, commits and exits 0
/// well within its 30 s flush bound; a restart mirrors the rest without a single duplicate.
#[test]
fn sigterm_drains_commits_and_restarts_without_duplicates() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("stream");
    a.create_topic(&topic, 2);
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nrefresh_topics_interval = \"1s\"\ncommit_interval = \"5s\"\nreplication_factor = 1\n"
    );
    let mut refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    let remote = format!("a.{topic}");
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let producer = keep_producing(&a, &topic, 2, stop.clone(), sent.clone());
    refract.wait("records flowing", || {
        b.counts(&remote).iter().sum::<i64>() >= 100
    });
    let started = std::time::Instant::now();
    assert_eq!(
        refract.stop(),
        Some(0),
        "exit 0 on SIGTERM:\n{}",
        refract.log()
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "stopped in {took:?}");
    // (Anything the stopped process still sent would show up below as a duplicate.)
    let at_stop = b.counts(&remote).iter().sum::<i64>();
    refract.restart(&[]);
    refract.wait("the restarted process to mirror new records", || {
        b.counts(&remote).iter().sum::<i64>() > at_stop + 100
    });
    stop.store(true, Ordering::Relaxed);
    producer.join().expect("producer");
    let total = sent.load(Ordering::Relaxed) as i64;
    assert_eq!(a.counts(&topic).iter().sum::<i64>(), total);
    // Per partition, the last record arriving means everything before it (duplicates a
    // restart would re-send come first) has arrived.
    refract.wait("every partition mirrored to its end", || {
        b.counts(&remote)
            .iter()
            .zip(a.counts(&topic))
            .all(|(got, want)| *got >= want)
    });
    assert_eq!(
        b.counts(&remote).iter().sum::<i64>(),
        total,
        "no duplicates after a clean stop"
    );
    assert_eq!(
        b.read_all(&remote),
        a.read_all(&topic),
        "same records, same order"
    );
    assert!(!refract.log().contains("unclean stop"), "{}", refract.log());
}

/// `/metrics` after a known number of records: MM2's series with exact counts, lag back to 0,
/// `/health`, `/status` and `POST /reload`.
#[test]
fn metrics_health_status_and_reload_endpoints() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("metered");
    a.create_topic(&topic, 2);
    let records = sample_records(&topic, 2, 40);
    a.produce(&topic, &records);
    // Port 0: the endpoint binds a free port itself and logs it (no port picked here that
    // another process could take first).
    let text = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n{}",
        pipeline(
            &[("a", &a), ("b", &b)],
            &format!("[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nrefresh_topics_interval = \"1s\"\ncommit_interval = \"500ms\"\nreplication_factor = 1\nprocessors = [{{ plugin = \"builtin:filter\", config = {{ action = \"keep\", topic = \".*\" }} }}]\n")
        )
    );
    let refract = Refract::start(&text, &[]);
    let addr = refract.metrics_addr();
    let remote = format!("a.{topic}");
    refract.wait("mirrored", || b.counts(&remote).iter().sum::<i64>() == 40);
    let lag_zero = |body: &str| {
        (0..2).all(|p| {
            series(
                body,
                "refract_replication_lag_records",
                &[("topic", &remote), ("partition", &p.to_string())],
            ) == Some(0.0)
        })
    };
    let mut body = String::new();
    let acked = |body: &str| {
        (0..2).all(|p| {
            series(
                body,
                "kafka_connect_mirror_mirrorsourceconnector_record_count",
                &[("topic", &remote), ("partition", &p.to_string())],
            ) == Some(20.0)
        })
    };
    let status_lag_zero = || {
        let status: serde_json::Value =
            serde_json::from_str(&http(&addr, "GET", "/status").1).unwrap_or_default();
        (0..2).all(|p| status["flows"][0]["lag"][format!("{topic}[{p}]")] == 0)
    };
    // Heartbeat topics are mirrored like data, so a heartbeat may be in flight at any scrape:
    // wait for a scrape with nothing in flight.
    let nothing_inflight =
        |body: &str| series(body, "refract_inflight_bytes", &[("flow", "a->b")]) == Some(0.0);
    refract.wait("every record acknowledged and the lag back to 0", || {
        body = http(&addr, "GET", "/metrics").1;
        acked(&body) && status_lag_zero() && lag_zero(&body) && nothing_inflight(&body)
    });
    for p in 0..2 {
        let labels = [
            ("source", "a"),
            ("target", "b"),
            ("topic", remote.as_str()),
            ("partition", &p.to_string()),
        ];
        assert_eq!(
            series(
                &body,
                "kafka_connect_mirror_mirrorsourceconnector_record_count",
                &labels
            ),
            Some(20.0),
            "{}",
            body.lines()
                .filter(|l| l.contains("record_count"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let value_bytes: usize = records
            .iter()
            .filter(|r| r.partition == p)
            .map(|r| r.value.as_ref().map_or(0, Vec::len))
            .sum();
        assert_eq!(
            series(
                &body,
                "kafka_connect_mirror_mirrorsourceconnector_byte_count",
                &labels
            ),
            Some(value_bytes as f64),
            "{body}"
        );
        // The sample records carry 2020 timestamps: their age and latency are years.
        let latency = series(
            &body,
            "kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_max",
            &labels,
        )
        .expect("latency");
        assert!(latency > 1e9, "{latency}");
        assert!(series(
            &body,
            "kafka_connect_mirror_mirrorsourceconnector_record_age_ms_avg",
            &labels
        )
        .is_some());
    }
    assert_eq!(
        series(&body, "refract_flow_up", &[("flow", "a->b")]),
        Some(1.0)
    );
    assert_eq!(
        series(&body, "refract_inflight_bytes", &[("flow", "a->b")]),
        Some(0.0),
        "all acknowledged"
    );
    let calls = series(&body, "refract_plugin_calls_total", &[("flow", "a->b")]).unwrap_or(0.0);
    assert!(
        calls >= 2.0,
        "one call per batch, at least one per partition: {body}"
    );
    assert_eq!(
        series(&body, "refract_plugin_errors_total", &[("flow", "a->b")]),
        Some(0.0)
    );
    assert_eq!(
        series(
            &body,
            "refract_plugin_call_duration_seconds_count",
            &[("flow", "a->b")]
        ),
        Some(calls)
    );
    assert_eq!(
        http(&addr, "GET", "/health"),
        (200, "a->b: running\n".to_string())
    );
    let (code, status) = http(&addr, "GET", "/status");
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&status).expect("json");
    assert_eq!(status["flows"][0]["flow"], "a->b");
    // 40 records plus the heartbeats this flow mirrors from a's `heartbeats` topic.
    assert!(
        status["flows"][0]["records_sent"]
            .as_u64()
            .is_some_and(|n| n >= 40),
        "{status}"
    );
    assert_eq!(
        status["flows"][0]["lag"][format!("{topic}[0]")],
        0,
        "{status}"
    );
    let (code, reply) = http(&addr, "POST", "/reload");
    assert_eq!((code, reply.as_str()), (200, "reloaded: nothing changed\n"));
    let body = http(&addr, "GET", "/metrics").1;
    assert_eq!(
        series(&body, "refract_reloads_total", &[("result", "ok")]),
        Some(1.0),
        "{body}"
    );
    assert_eq!(http(&addr, "GET", "/nope").0, 404);
    // `refract status` reads the same endpoint (named, since the pipeline says port 0). A
    // heartbeat written to the source a moment earlier shows as lag 1 until it is mirrored:
    // wait for a status taken with nothing in flight.
    let status = || {
        refract_cmd(&[
            "status",
            "--config",
            refract.pipeline.to_str().expect("path"),
            "--addr",
            &addr,
        ])
    };
    let mut out = status();
    refract.wait("refract status to show lag 0", || {
        out = status();
        String::from_utf8_lossy(&out.stdout).contains("lag 0 records over")
    });
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("flow a->b: running"), "{text}");
    assert!(text.contains("lag 0 records over"), "{text}");
    assert!(text.contains(&format!("{topic} -> {remote}")), "{text}");
}

fn refract_cmd(args: &[&str]) -> std::process::Output {
    Refract::output(args)
}

/// Migration mode: `run --until-caught-up` mirrors everything, verifies and exits 0; the target
/// holds exactly the source's records.
#[test]
fn until_caught_up_mirrors_verifies_and_exits() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("migrate");
    a.create_topic(&topic, 2);
    let records = sample_records(&topic, 2, 300);
    a.produce(&topic, &records);
    let dir = tempfile::tempdir().expect("tmp");
    let path = write_pipeline(
        dir.path(),
        &pipeline(
            &[("a", &a), ("b", &b)],
            &format!("[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nrefresh_topics_interval = \"1s\"\ncommit_interval = \"500ms\"\nreplication_factor = 1\n"),
        ),
    );
    let out = refract_cmd(&["run", path.to_str().expect("path"), "--until-caught-up"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("caught up"), "{stderr}");
    let remote = format!("a.{topic}");
    assert_eq!(b.read_all(&remote), by_partition(&records, 2));
    assert!(
        !stdout.contains("MISMATCH") && stdout.contains(&remote),
        "{stdout}"
    );
}

/// `--log-format json`: every log line is one JSON object with a level and a message.
#[test]
fn json_logs() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let mut refract = Refract::start(
        &pipeline(
            &[("a", &a), ("b", &b)],
            "[[flow]]\nsource = \"a\"\ntarget = \"b\"\nreplication_factor = 1\n",
        ),
        &["--log-format", "json"],
    );
    refract.wait("the flow to start", || refract.log().contains("started"));
    assert_eq!(refract.stop(), Some(0));
    let log = refract.log();
    let mut lines = 0;
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            v["level"].is_string() && v["fields"]["message"].is_string()
                || v["message"].is_string(),
            "{line}"
        );
        lines += 1;
    }
    assert!(lines >= 2, "{log}");
}

/// A discovery of 300 new topics creates their remote topics with one CreateTopics request
/// (their configs read with one DescribeConfigs request), not one request per topic, and every
/// topic is mirrored; `[metrics] partition_series = false` exports one series per topic.
#[test]
fn three_hundred_new_topics_are_created_in_one_request_and_mirrored() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let prefix = unique("estate");
    let topics: Vec<String> = (0..300).map(|i| format!("{prefix}-{i:03}")).collect();
    let remotes: Vec<String> = topics.iter().map(|t| format!("a.{t}")).collect();
    a.create_topics(&topics);
    a.produce_one_each(&topics);
    let started = std::time::Instant::now();
    // With one series per topic, as a large estate would scrape them.
    let refract = Refract::start(
        &format!(
            "[metrics]\nlisten = \"127.0.0.1:0\"\npartition_series = false\n{}",
            pipeline(
                &[("a", a), ("b", b)],
                &flow("a", "b", &format!("topics = [\"{prefix}-.*\"]")),
            )
        ),
        &[],
    );
    refract.wait("every topic mirrored", || {
        b.ends(&remotes).iter().all(|&end| end == 1)
    });
    eprintln!(
        "300 topics created and mirrored {:?} after start",
        started.elapsed()
    );
    let addr = refract.metrics_addr();
    let record_count = "kafka_connect_mirror_mirrorsourceconnector_record_count";
    // Every acknowledgement counted: one series per topic, no partition label.
    refract.wait("every topic's record count", || {
        let text = http(&addr, "GET", "/metrics").1;
        remotes
            .iter()
            .all(|r| series(&text, record_count, &[("topic", r.as_str())]) == Some(1.0))
    });
    eprintln!(
        "300 topics' acknowledgements counted {:?} after start",
        started.elapsed()
    );
    let text = http(&addr, "GET", "/metrics").1;
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with(record_count) && l.contains("partition=")),
        "per-topic series have no partition label"
    );
    // The first discovery found them all: one request for all of them (and the heartbeats
    // topic, when this broker does not have it yet).
    let log = refract.log();
    let created: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("missing remote topics on b with"))
        .collect();
    assert_eq!(created.len(), 1, "{log}");
    eprintln!("{}", created[0]);
    assert!(
        created[0].contains("with 1 CreateTopics request(s)")
            && (created[0].contains("created 300 of 300 ")
                || created[0].contains("created 301 of 301 ")),
        "{}",
        created[0]
    );
}
