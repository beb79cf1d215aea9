//! Three-node clusters (`Cluster3`: replication factor 3, `min.insync.replicas` 2) under load:
//! an at-least-once and an exactly-once flow side by side in one refract process while a
//! source partition's leader is killed (-9) and restarted, the target node coordinating the
//! exactly-once flow's transactions likewise (partition leaders and the coordinator move), and
//! both clusters are restarted one node at a time. Every record arrives in order, each once for
//! `read_committed` readers of the exactly-once flow; the flows never halt and refract logs no
//! ERROR. The longest pause each fault causes is printed per flow.
//!
//! One test on one pair of clusters started for it: six JVMs are as much as the suite's 2-core
//! machine takes beside the build. It took 4½–6 minutes there, most of it Kafka starting nodes
//! again and their replicas catching up (20–40 s a node, eight times).
//! `log_levels_are_read_without_colours` holds the ERROR check to refract's coloured log (a
//! check that read the level as the second word of the raw line found none, ERROR or not).

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::support::*;

/// Partitions of each source topic.
const PARTITIONS: i32 = 3;

/// Records per 5 ms tick of each producer: about 1,000 a second per topic.
const PER_TICK: u64 = 5;

/// A flow seen from the target: its remote topic, read as its consumers read it.
struct Watched {
    /// `at-least-once` or `exactly-once`.
    delivery: &'static str,
    /// The remote topic on the target.
    remote: String,
    /// `read_uncommitted`, or `read_committed` for exactly-once: then the ends below are the
    /// last stable offsets, what `read_committed` readers can see.
    isolation: &'static str,
}

impl Watched {
    /// A reader of the remote topic's ends on the target.
    fn reader(&self, b: &Cluster3) -> BaseConsumer {
        ClientConfig::new()
            .set("bootstrap.servers", &b.bootstrap)
            .set("group.id", unique("pause-reader"))
            .set("isolation.level", self.isolation)
            .create()
            .expect("reader")
    }
}

/// Per partition of `topic`, the end offset `reader` sees (`None`: no answer within 500 ms,
/// e.g. while its leader moves).
fn ends(reader: &BaseConsumer, topic: &str) -> Vec<Option<i64>> {
    let ends: Vec<Option<i64>> = (0..PARTITIONS)
        .map(|p| {
            reader
                .fetch_watermarks(topic, p, Duration::from_millis(500))
                .ok()
                .map(|(_, high)| high)
        })
        .collect();
    if ends.contains(&None) {
        // A reader that subscribes to nothing keeps asking a dead leader (its transport fails,
        // nothing refreshes the metadata): ask for the topic's new leaders.
        let _ = reader.fetch_metadata(Some(topic), Duration::from_millis(500));
    }
    ends
}

/// The longest time a partition of each flow went without a new record on the target (its end
/// as the flow's readers see it) from the start of `fault` until every partition had a new one
/// after `fault` returned: what the fault cost each flow, partition leaders moving included.
fn pause(
    flows: &[Watched],
    b: &Cluster3,
    refract: &Refract,
    fault: impl FnOnce(),
) -> Vec<Duration> {
    let readers: Vec<BaseConsumer> = flows.iter().map(|f| f.reader(b)).collect();
    let mut last: Vec<Vec<i64>> = Vec::new();
    for (f, r) in flows.iter().zip(&readers) {
        let mut known = Vec::new();
        wait_until(&format!("the ends of {}", f.remote), || {
            known = ends(r, &f.remote).into_iter().flatten().collect();
            known.len() == PARTITIONS as usize
        });
        last.push(known);
    }
    let started = Instant::now();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let watch = s.spawn(|| {
            let n = PARTITIONS as usize;
            let mut progressed = vec![vec![started; n]; flows.len()];
            let mut longest = vec![Duration::ZERO; flows.len()];
            // Set when the fault is over: then each partition needs one record more.
            let mut over: Option<Instant> = None;
            let deadline = started + DEADLINE;
            loop {
                for (i, (f, r)) in flows.iter().zip(&readers).enumerate() {
                    for (p, end) in ends(r, &f.remote).into_iter().enumerate() {
                        if end.is_some_and(|e| e > last[i][p]) {
                            let now = Instant::now();
                            longest[i] = longest[i].max(now - progressed[i][p]);
                            progressed[i][p] = now;
                            last[i][p] = end.unwrap_or_default();
                        }
                    }
                }
                if over.is_none() && done.load(std::sync::atomic::Ordering::Acquire) {
                    over = Some(Instant::now());
                }
                if let Some(over) = over {
                    if progressed.iter().flatten().all(|t| *t > over) {
                        return Ok(longest);
                    }
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "the flows did not progress on every partition within {DEADLINE:?} of a fault: ends {last:?} (stuck since {:?})\n{}",
                        progressed
                            .iter()
                            .map(|f| f.iter().map(|t| t.elapsed()).collect::<Vec<_>>())
                            .collect::<Vec<_>>(),
                        explain(flows, b, refract)
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        fault();
        done.store(true, std::sync::atomic::Ordering::Release);
        watch
            .join()
            .expect("pause watch")
            .unwrap_or_else(|e| panic!("{e}"))
    })
}

/// What a stuck flow looks like: the remote topics' partitions on the target (leader, replicas
/// in sync) and their ends seen by a new reader, and the end of refract's log.
fn explain(flows: &[Watched], b: &Cluster3, refract: &Refract) -> String {
    let mut out = String::new();
    for f in flows {
        let reader = f.reader(b);
        let md = reader.fetch_metadata(Some(&f.remote), Duration::from_secs(5));
        let partitions: Vec<String> = md
            .iter()
            .flat_map(|md| md.topics().first())
            .flat_map(|t| t.partitions())
            .map(|p| format!("[{}] leader {} isr {:?}", p.id(), p.leader(), p.isr()))
            .collect();
        out.push_str(&format!(
            "{} {}: {partitions:?}, ends {:?}\n",
            f.delivery,
            f.remote,
            ends(&reader, &f.remote)
        ));
    }
    let log = refract.log();
    let lines: Vec<&str> = log.lines().collect();
    out.push_str("refract log (last 200 lines):\n");
    out.push_str(&lines[lines.len().saturating_sub(200)..].join("\n"));
    out
}

/// A `[[flow]]` of the topic `topic` from `source` to `target` with `extra` settings.
fn flow(source: &str, target: &str, topic: &str, extra: &str) -> String {
    format!(
        "[[flow]]\nsource = \"{source}\"\ntarget = \"{target}\"\ntopics = [\"{topic}\"]\n\
         commit_interval = \"500ms\"\nrefresh_topics_interval = \"2s\"\nemit_checkpoints = false\n\
         replication_factor = 3\ninternal_replication_factor = 3\n{extra}\n"
    )
}

/// `line` without its terminal colours (`ESC [ … m`).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn log_levels_are_read_without_colours() {
    let line = "\u{1b}[2m2026-12-05T12:53:10.966869Z\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m committing";
    assert_eq!(plain(line), "2026-12-05T12:53:10.966869Z  WARN committing");
    assert_eq!(plain(line).split_whitespace().nth(1), Some("WARN"));
}

/// The lines of refract's log at `level` (`ERROR`, `WARN`): the level is the second word of a
/// line, once the colours are taken out.
fn lines_at(refract: &Refract, level: &str) -> Vec<String> {
    refract
        .log()
        .lines()
        .map(plain)
        .filter(|l| l.split_whitespace().nth(1) == Some(level))
        .collect()
}

/// Both deliveries through a source leader killed and restarted, the target's transaction
/// coordinator killed and restarted, and a rolling restart of both clusters, under load.
#[test]
fn both_deliveries_survive_leader_kills_and_rolling_restarts_of_three_node_clusters() {
    let began = Instant::now();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| Cluster3::start("a3"));
        let b = Cluster3::start("b3");
        (a.join().expect("cluster a3"), b)
    });
    let ready = began.elapsed();
    println!("two 3-node clusters ready in {ready:?}");
    let (alo, eos) = (unique("m3-alo"), unique("m3-eos"));
    for topic in [&alo, &eos] {
        a.client().create_topic(topic, PARTITIONS);
    }
    let producing = [
        Producing::at(a.client(), &alo, PARTITIONS, PER_TICK),
        Producing::at(a.client(), &eos, PARTITIONS, PER_TICK),
    ];
    // Two aliases per cluster: two flows between the same clusters, one of each delivery.
    let text = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n{}",
        pipeline(
            &[
                ("a", a.client()),
                ("b", b.client()),
                ("ea", a.client()),
                ("eb", b.client()),
            ],
            &format!(
                "{}{}",
                flow("a", "b", &alo, ""),
                flow(
                    "ea",
                    "eb",
                    &eos,
                    "delivery = \"exactly-once\"\ntransaction_interval = \"500ms\""
                )
            ),
        )
    );
    let mut refract = Refract::start(&text, &[]);
    let addr = refract.metrics_addr();
    let flows = [
        Watched {
            delivery: "at-least-once",
            remote: format!("a.{alo}"),
            isolation: "read_uncommitted",
        },
        Watched {
            delivery: "exactly-once",
            remote: format!("ea.{eos}"),
            isolation: "read_committed",
        },
    ];
    refract.wait("both flows to mirror on every partition", || {
        flows.iter().all(|f| {
            let reader = f.reader(&b);
            ends(&reader, &f.remote)
                .iter()
                .all(|e| e.is_some_and(|e| e > 0))
        })
    });
    let mut pauses: Vec<(String, Vec<Duration>)> = Vec::new();
    let mut record = |what: String, p: Vec<Duration>| {
        println!(
            "{what}: pause {p:?} (at-least-once, exactly-once), at {:?}",
            began.elapsed()
        );
        pauses.push((what, p));
    };

    // Where the at-least-once flow commits its source positions (for the record).
    let group_node = a.group_coordinator("refract-a-b");
    assert!((1..=3).contains(&group_node), "{group_node}");
    println!("refract-a-b's group coordinator: a3 node {group_node}");

    // The leader of a source partition killed, then restarted.
    let leader = a.leader(&alo, 0);
    let p = pause(&flows, &b, &refract, || a.kill(leader));
    record(format!("a3 node {leader} (leader of {alo}[0]) killed"), p);
    let p = pause(&flows, &b, &refract, || {
        a.restart(leader);
        a.wait_in_sync();
    });
    record(format!("a3 node {leader} restarted and in sync"), p);

    // The target node coordinating the exactly-once flow's transactions killed, then restarted.
    let id = refract
        .log()
        .lines()
        .find_map(|l| l.split("exactly-once: transactional.id ").nth(1))
        .and_then(|rest| rest.split(',').next())
        .map(str::to_string)
        .expect("the transactional id in refract's log");
    let coordinator = b.transaction_coordinator(&id);
    let p = pause(&flows, &b, &refract, || b.kill(coordinator));
    record(
        format!("b3 node {coordinator} (transaction coordinator of {id}) killed"),
        p,
    );
    let moved = b.transaction_coordinator(&id);
    assert_ne!(moved, coordinator, "the coordinator moved to a live node");
    let p = pause(&flows, &b, &refract, || {
        b.restart(coordinator);
        b.wait_in_sync();
    });
    record(format!("b3 node {coordinator} restarted and in sync"), p);

    // A rolling restart of both clusters, each one node at a time (SIGTERM: controlled
    // shutdown); node i of a3 and of b3 together, which halves the test's longest phase.
    for node in 1..=3 {
        let p = pause(&flows, &b, &refract, || {
            std::thread::scope(|s| {
                for cluster in [&a, &b] {
                    s.spawn(move || {
                        assert!(
                            cluster.stop(node, Duration::from_secs(60)),
                            "{} node {node} stops cleanly",
                            cluster.name
                        );
                        cluster.restart(node);
                        cluster.wait_in_sync();
                    });
                }
            });
        });
        record(format!("rolling: a3 and b3 node {node} restarted"), p);
    }

    let produced: Vec<u64> = producing.into_iter().map(Producing::finish).collect();
    // At-least-once: every record in order per partition.
    let want = a.client().read_all(&alo);
    refract.wait("the at-least-once flow to hold every source record", || {
        holds_last_records(&want, &b.client().read_all(&flows[0].remote))
    });
    let duplicates = assert_mirrored_in_order(&want, &b.client().read_all(&flows[0].remote));
    // Exactly-once: each record once, in order, for read_committed readers.
    let want = a.client().read_all(&eos);
    let mut got = Vec::new();
    refract.wait(
        "read_committed readers to see every exactly-once record",
        || {
            got = b.client().read_isolated(&flows[1].remote, "read_committed");
            got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| g.len() >= w.len())
        },
    );
    assert_eq!(
        got, want,
        "exactly-once: each source record once, in order, for read_committed readers"
    );
    // Never halted: both flows run, the process never exited, nothing an operator must act on.
    let status: serde_json::Value =
        serde_json::from_str(&http(&addr, "GET", "/status").1).expect("status JSON");
    for f in status["flows"].as_array().expect("flows") {
        assert_eq!(f["state"], "running", "{status}");
        assert!(f["halted"].is_null(), "{status}");
    }
    let restarts: Vec<u64> = status["flows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| f["restarts"].as_u64().unwrap_or(u64::MAX))
        .collect();
    assert_eq!(restarts, [0, 0], "no flow failed and restarted: {status}");
    assert!(refract.running(), "refract never exited");
    assert_eq!(http(&addr, "GET", "/health").0, 200, "{status}");
    let errors = lines_at(&refract, "ERROR");
    assert!(
        errors.is_empty(),
        "no ERROR on three-node clusters:\n{}",
        errors.join("\n")
    );
    println!(
        "3-node clusters: {produced:?} records (at-least-once, exactly-once), {duplicates} at-least-once duplicates, 0 exactly-once; flow restarts {restarts:?}; clusters ready in {ready:?}, test {:?}",
        began.elapsed()
    );
    let warnings = lines_at(&refract, "WARN");
    println!("{} WARN lines:\n{}", warnings.len(), warnings.join("\n"));
    for (what, p) in &pauses {
        println!(
            "  {what}: {}",
            flows
                .iter()
                .zip(p)
                .map(|(f, d)| format!("{} {:.1} s", f.delivery, d.as_secs_f64()))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}
