//! Cluster mode against real Apache Kafka brokers: several `refract run` processes with one
//! pipeline divide a flow's tasks through a consumer group on the source, hand them over when a
//! process stops, is killed or joins, and never run the flow's once-per-flow duties twice.
//! Each test starts its own two brokers and its own processes (named by `REFRACT_INSTANCE`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::Value;

/// The group's session timeout in these tests (the brokers allow 1 s and up here).
const SESSION: Duration = Duration::from_secs(3);

/// Three topics of eight partitions, produced to continuously.
struct Load {
    topics: Vec<String>,
    producing: Vec<Producing>,
}

impl Load {
    fn start(a: &Broker, prefix: &str) -> Self {
        let topics: Vec<String> = (0..3).map(|i| unique(&format!("{prefix}{i}"))).collect();
        for t in &topics {
            a.create_topic(t, 8);
        }
        let producing = topics.iter().map(|t| Producing::start(a, t, 8)).collect();
        Self { topics, producing }
    }

    /// Stops producing; the records produced, per topic.
    fn finish(self) -> u64 {
        self.producing.into_iter().map(Producing::finish).sum()
    }

    fn partitions(&self) -> BTreeSet<String> {
        self.topics
            .iter()
            .flat_map(|t| (0..8).map(move |p| format!("{t}[{p}]")))
            .collect()
    }
}

fn cluster_pipeline(a: &Broker, b: &Broker, topics: &[String], extra: &str) -> String {
    let list = topics
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n\n[cluster]\ninstance = \"${{env:REFRACT_INSTANCE}}\"\n\
         session_timeout = \"{}s\"\n\n{}",
        SESSION.as_secs(),
        pipeline(
            &[("a", a), ("b", b)],
            &format!(
                "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [{list}]\ntasks = 6\n\
                 refresh_topics_interval = \"2s\"\ncommit_interval = \"1s\"\n\
                 replication_factor = 1\ninternal_replication_factor = 1\n{extra}"
            )
        )
    )
}

/// One process of the cluster.
struct Process {
    name: String,
    refract: Refract,
    addr: Option<String>,
}

impl Process {
    fn start(text: &str, name: &str) -> Self {
        let refract = Refract::start_env(text, &[], &[("REFRACT_INSTANCE", name)]);
        let mut p = Self {
            name: name.to_string(),
            refract,
            addr: None,
        };
        p.addr = Some(p.refract.metrics_addr());
        p
    }

    /// Starts it again after a stop or kill (a new metrics address).
    fn restart(&mut self) {
        let before = self.refract.log_count("on http://");
        self.refract.restart(&[]);
        self.refract.wait("the restarted process's endpoint", || {
            self.refract.log_count("on http://") > before
        });
        let log = self.refract.log();
        self.addr = log
            .lines()
            .rev()
            .find_map(|l| l.split("on http://").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_string);
    }

    /// Its `/status` flow, when it answers.
    fn flow(&self) -> Option<Value> {
        let addr = self.addr.as_deref()?;
        // A process that is gone has no status (and `http` would panic on it).
        std::net::TcpStream::connect(addr).ok()?;
        let (code, body) = http(addr, "GET", "/status");
        if code != 200 {
            return None;
        }
        let v: Value = serde_json::from_str(&body).ok()?;
        Some(v["flows"][0].clone())
    }

    /// The source partitions it mirrors now.
    fn partitions(&self) -> BTreeSet<String> {
        self.flow()
            .and_then(|f| f["partitions"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect()
    }

    fn tasks(&self) -> Vec<u64> {
        self.flow()
            .and_then(|f| f["tasks"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(Value::as_u64)
            .collect()
    }

    fn duties(&self) -> bool {
        self.flow()
            .is_some_and(|f| f["cluster"]["duties"] == Value::Bool(true))
    }

    fn heartbeats(&self) -> u64 {
        self.flow()
            .map_or(0, |f| f["heartbeats"].as_u64().unwrap_or(0))
    }
}

fn logs(processes: &[&Process]) -> String {
    processes
        .iter()
        .map(|p| format!("==== {} ====\n{}", p.name, p.refract.log()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Who owns each partition, from every live process's `/status`; panics when two processes
/// claim one partition at the same time.
fn owners(processes: &[&Process]) -> BTreeMap<String, String> {
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    for p in processes {
        for part in p.partitions() {
            if let Some(other) = owner.insert(part.clone(), p.name.clone()) {
                panic!(
                    "{part} is mirrored by {other} and {} at once\n{}",
                    p.name,
                    logs(processes)
                );
            }
        }
    }
    owner
}

/// Waits until the live processes together own every partition (each exactly once) and each
/// of them holds at least one task.
fn wait_spread(processes: &[&Process], load: &Load) -> BTreeMap<String, String> {
    let want = load.partitions();
    let mut got = BTreeMap::new();
    wait_or_explain(
        "every partition owned by exactly one process, each process holding tasks",
        || {
            got = owners(processes);
            // The flow also mirrors the source's `heartbeats` topic.
            got.retain(|p, _| want.contains(p));
            got.keys().cloned().collect::<BTreeSet<_>>() == want
                && processes.iter().all(|p| !p.tasks().is_empty())
        },
        || logs(processes),
    );
    got
}

/// Every source record is on the target, in order per partition (at-least-once: duplicates
/// allowed, counted); returns the duplicates.
fn every_record_arrived(a: &Broker, b: &Broker, load: &Load, processes: &[&Process]) -> usize {
    let mut duplicates = 0;
    for t in &load.topics {
        let want = a.read_all(t);
        let remote = format!("a.{t}");
        let mut got = Vec::new();
        wait_or_explain(
            &format!("every record of {t} on the target"),
            || {
                got = b.read_all(&remote);
                got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| g.len() >= w.len())
            },
            || logs(processes),
        );
        for (p, (g, w)) in got.iter().zip(&want).enumerate() {
            let values: BTreeSet<_> = g.iter().map(|r| r.value.clone()).collect();
            for r in w {
                assert!(
                    values.contains(&r.value),
                    "{t}[{p}]: {:?} never reached the target",
                    r.value
                );
            }
            duplicates += g.len() - w.len();
        }
    }
    duplicates
}

/// Three processes share one flow of 3 topics x 8 partitions under continuous production: each
/// partition has one owner at a time; one process killed with SIGKILL has its partitions
/// resumed by the other two after the session timeout; it comes back and gets tasks again; the
/// target holds every record.
#[test]
fn three_processes_share_a_flow_and_take_over_from_a_killed_one() {
    let a = Broker::start_with("a", &[("group.min.session.timeout.ms", "1000")]);
    let b = Broker::start("b");
    let load = Load::start(&a, "share");
    let text = cluster_pipeline(&a, &b, &load.topics, "emit_checkpoints = false\n");
    let p1 = Process::start(&text, "p1");
    let p2 = Process::start(&text, "p2");
    let mut p3 = Process::start(&text, "p3");
    let spread = wait_spread(&[&p1, &p2, &p3], &load);
    let per_process: BTreeMap<&String, usize> =
        spread.values().fold(BTreeMap::new(), |mut m, o| {
            *m.entry(o).or_default() += 1;
            m
        });
    println!("24 partitions over 3 processes: {per_process:?}");

    // Each process shows the whole group (described every few seconds): three members, the
    // six tasks and the 24 partitions between them, each member's lag.
    wait_or_explain(
        "p1's status to show three members holding six tasks and 24 partitions",
        || {
            let view = p1.flow().unwrap_or_default();
            let members = view["cluster"]["members"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let tasks: usize = members
                .iter()
                .map(|m| m["tasks"].as_array().map_or(0, Vec::len))
                .sum();
            let partitions: u64 = members
                .iter()
                .map(|m| m["partitions"].as_u64().unwrap_or(0))
                .sum();
            members.len() == 3
                && tasks == 6
                && partitions >= 24
                && members.iter().all(|m| m["lag"].is_i64())
        },
        || format!("{:#}", p1.flow().unwrap_or_default()),
    );

    // kill -9 p3: the others take its partitions over once the group drops it, and mirror them.
    let orphaned: Vec<String> = spread
        .iter()
        .filter(|(_, o)| *o == "p3")
        .map(|(p, _)| p.clone())
        .collect();
    assert!(!orphaned.is_empty());
    let counts = |part: &str| -> i64 {
        let (topic, p) = part.trim_end_matches(']').split_once('[').expect("t[p]");
        b.counts(&format!("a.{topic}"))[p.parse::<usize>().expect("partition")]
    };
    let before: Vec<i64> = orphaned.iter().map(|p| counts(p)).collect();
    let killed = Instant::now();
    p3.refract.kill();
    let mut taken = Duration::ZERO;
    wait_or_explain(
        "p1 and p2 to own and mirror p3's partitions",
        || {
            let owned = owners(&[&p1, &p2]);
            let all = orphaned.iter().all(|p| owned.contains_key(p));
            let moving = orphaned
                .iter()
                .zip(&before)
                .all(|(p, n)| counts(p) > *n + 2);
            if all && taken.is_zero() {
                taken = killed.elapsed();
            }
            all && moving
        },
        || logs(&[&p1, &p2]),
    );
    let resumed = killed.elapsed();
    println!(
        "kill -9 of one of three: its {} partitions owned by the others after {:.1} s and mirrored again after {:.1} s (session timeout {} s)",
        orphaned.len(),
        taken.as_secs_f64(),
        resumed.as_secs_f64(),
        SESSION.as_secs()
    );
    wait_spread(&[&p1, &p2], &load);

    // p3 comes back and gets a share again.
    p3.restart();
    wait_spread(&[&p1, &p2, &p3], &load);

    let produced = load_finish(load, &a, &b, &[&p1, &p2, &p3]);
    println!("{produced}");
}

fn load_finish(load: Load, a: &Broker, b: &Broker, processes: &[&Process]) -> String {
    let topics = Load {
        topics: load.topics.clone(),
        producing: Vec::new(),
    };
    let produced = load.finish();
    let duplicates = every_record_arrived(a, b, &topics, processes);
    format!(
        "{produced} records produced; all on the target; {duplicates} duplicates (at-least-once)"
    )
}

/// Exactly-once, three processes, each restarted in turn (SIGTERM, start again) under load:
/// tasks move with their transactional ids, and a read_committed consumer of the target sees
/// each source record exactly once, in order.
#[test]
fn exactly_once_survives_a_rolling_restart_without_a_duplicate() {
    let a = Broker::start_with("a", &[("group.min.session.timeout.ms", "1000")]);
    let b = Broker::start("b");
    let load = Load::start(&a, "roll");
    let text = cluster_pipeline(
        &a,
        &b,
        &load.topics,
        "emit_checkpoints = false\ndelivery = \"exactly-once\"\ntransaction_interval = \"300ms\"\n",
    );
    let mut processes = [
        Process::start(&text, "p1"),
        Process::start(&text, "p2"),
        Process::start(&text, "p3"),
    ];
    wait_spread(&processes.iter().collect::<Vec<_>>(), &load);
    for i in 0..processes.len() {
        let mark: i64 = load
            .topics
            .iter()
            .map(|t| b.counts(&format!("a.{t}")).iter().sum::<i64>())
            .sum();
        let (took, code) = processes[i]
            .refract
            .terminate_within(Duration::from_secs(60));
        assert_eq!(code, Some(0), "{}", processes[i].refract.log());
        println!(
            "{} stopped in {:.1} s",
            processes[i].name,
            took.as_secs_f64()
        );
        processes[i].restart();
        wait_spread(&processes.iter().collect::<Vec<_>>(), &load);
        wait_until("mirroring to go on after the restart", || {
            load.topics
                .iter()
                .map(|t| b.counts(&format!("a.{t}")).iter().sum::<i64>())
                .sum::<i64>()
                > mark + 100
        });
    }
    let all: Vec<&Process> = processes.iter().collect();
    let topics = load.topics.clone();
    let produced = load.finish();
    for t in &topics {
        let want = a.read_all(t);
        let remote = format!("a.{t}");
        let mut got = Vec::new();
        wait_or_explain(
            &format!("read_committed consumers of a.{t} to see every record"),
            || {
                got = b.read_isolated(&remote, "read_committed");
                got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| g.len() >= w.len())
            },
            || logs(&all),
        );
        assert_eq!(got, want, "{t}: each record exactly once, in order");
    }
    println!("rolling restart of 3 processes, exactly-once: {produced} records, each once for read_committed");
}

/// One process, then three, then one again, under load: the work spreads and comes back; the
/// flow's heartbeats (a once-per-flow duty) are written by one process at a time and never stop
/// for longer than a session timeout.
#[test]
fn scaling_one_three_one_keeps_duties_single() {
    let a = Broker::start_with("a", &[("group.min.session.timeout.ms", "1000")]);
    let b = Broker::start("b");
    let load = Load::start(&a, "scale");
    let text = cluster_pipeline(
        &a,
        &b,
        &load.topics,
        "emit_checkpoints = false\nheartbeat_interval = \"1s\"\n",
    );
    let load_partitions = load.partitions();
    let started = Instant::now();
    let p1 = Process::start(&text, "p1");
    wait_spread(&[&p1], &load);
    let mut p2 = Process::start(&text, "p2");
    let mut p3 = Process::start(&text, "p3");
    let mut samples = Vec::new();
    // Sample who runs the duties while the work spreads, then while it comes back.
    let mut sample = |ps: &[&Process]| {
        let holders: Vec<String> = ps
            .iter()
            .filter(|p| p.duties())
            .map(|p| p.name.clone())
            .collect();
        assert!(
            holders.len() <= 1,
            "the flow's duties run in {holders:?} at once\n{}",
            logs(ps)
        );
        samples.push(holders);
    };
    wait_or_explain(
        "the work to spread over three processes",
        || {
            sample(&[&p1, &p2, &p3]);
            let owned = owners(&[&p1, &p2, &p3]);
            load_partitions.iter().all(|p| owned.contains_key(p))
                && [&p1, &p2, &p3].iter().all(|p| !p.tasks().is_empty())
        },
        || logs(&[&p1, &p2, &p3]),
    );
    let mut spread = owners(&[&p1, &p2, &p3]);
    spread.retain(|p, _| load_partitions.contains(p));
    let (took2, _) = p2.refract.terminate_within(Duration::from_secs(60));
    let (took3, _) = p3.refract.terminate_within(Duration::from_secs(60));
    println!(
        "scaled down: p2 stopped in {:.1} s, p3 in {:.1} s",
        took2.as_secs_f64(),
        took3.as_secs_f64()
    );
    wait_or_explain(
        "the work to come back to one process",
        || {
            sample(&[&p1]);
            let owned = owners(&[&p1]);
            load_partitions.iter().all(|p| owned.contains_key(p))
        },
        || logs(&[&p1, &p2, &p3]),
    );
    let held_by_others = spread.values().filter(|o| *o != "p1").count();
    assert!(held_by_others > 0, "the work had spread: {spread:?}");
    // Heartbeats on the target: one process at a time wrote them, at the heartbeat interval.
    let produced = load_finish(load, &a, &b, &[&p1, &p2, &p3]);
    let elapsed = started.elapsed();
    let beats = heartbeat_times(&b);
    assert!(!beats.is_empty(), "no heartbeats on the target");
    let longest_gap = beats.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    let per_process: u64 = p1.heartbeats();
    println!(
        "scale 1 -> 3 -> 1: {} heartbeats in {:.0} s (p1 wrote {per_process} since its start), longest gap {} ms; duty holders sampled {} times; {produced}",
        beats.len(),
        elapsed.as_secs_f64(),
        longest_gap,
        samples.len()
    );
    assert!(
        Duration::from_millis(u64::try_from(longest_gap).unwrap_or(0))
            <= SESSION + Duration::from_secs(2),
        "heartbeats stopped for {longest_gap} ms"
    );
    // Two writers at once would double the count: at most one per interval, plus one per
    // hand-over (a new holder writes at once).
    assert!(
        beats.len() as u64 <= elapsed.as_secs() + 4,
        "{} heartbeats in {} s: written twice at once",
        beats.len(),
        elapsed.as_secs()
    );
}

/// Timestamps (ms) of the `a->b` heartbeats on the target's `heartbeats` topic, in order.
fn heartbeat_times(b: &Broker) -> Vec<i64> {
    let mut times: Vec<i64> = b
        .read_all("heartbeats")
        .into_iter()
        .flatten()
        .map(|r| r.timestamp)
        .collect();
    times.sort_unstable();
    times
}

/// Outside cluster mode one process runs every task of a flow, each with its own consumer,
/// producer and (exactly-once) `transactional.id`: `refract-a-b-0`, `-1`, `-2`.
#[test]
fn one_process_runs_every_task_each_with_its_own_transactional_id() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("tasks");
    a.create_topic(&topic, 6);
    let records = sample_records("tasks", 6, 600);
    a.produce(&topic, &records);
    let text = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n\n{}",
        pipeline(
            &[("a", &a), ("b", &b)],
            &format!(
                "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\ntasks = 3\n\
                 delivery = \"exactly-once\"\ntransaction_interval = \"300ms\"\n\
                 emit_checkpoints = false\nreplication_factor = 1\ninternal_replication_factor = 1\n"
            )
        )
    );
    let refract = Refract::start(&text, &[]);
    let want = by_partition(&records, 6);
    let remote = format!("a.{topic}");
    let mut got = Vec::new();
    refract.wait("read_committed consumers to see every record", || {
        got = b.read_isolated(&remote, "read_committed");
        got.len() == 6 && got.iter().zip(&want).all(|(g, w)| g.len() >= w.len())
    });
    let values = |rs: &[Vec<TestRecord>]| -> Vec<Vec<Option<Vec<u8>>>> {
        rs.iter()
            .map(|p| p.iter().map(|r| r.value.clone()).collect())
            .collect()
    };
    assert_eq!(values(&got), values(&want), "each record once, in order");
    let log = refract.log();
    for task in 0..3 {
        assert!(
            log.contains(&format!("transactional.id refract-a-b-{task},")),
            "task {task}'s transactional id:\n{log}"
        );
    }
    let (_, body) = http(&refract.metrics_addr(), "GET", "/status");
    let status: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(status["flows"][0]["tasks"], serde_json::json!([0, 1, 2]));
    let partitions = status["flows"][0]["partitions"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(partitions >= 6, "{status:#}");
}

/// A process that holds no task (two processes, one task) stands by: `/health` says 200 and its
/// flow `standby`; when the holder is killed it takes the task over and mirrors on.
#[test]
fn a_process_without_a_task_stands_by_healthy_and_takes_over() {
    let a = Broker::start_with("a", &[("group.min.session.timeout.ms", "1000")]);
    let b = Broker::start("b");
    let topic = unique("standby");
    a.create_topic(&topic, 2);
    let producing = Producing::start(&a, &topic, 2);
    let text = cluster_pipeline(
        &a,
        &b,
        std::slice::from_ref(&topic),
        "emit_checkpoints = false\n",
    )
    .replace("tasks = 6", "tasks = 1");
    let mut p1 = Process::start(&text, "p1");
    wait_or_explain("p1 to hold the task", || p1.tasks() == [0], || logs(&[&p1]));
    let p2 = Process::start(&text, "p2");
    wait_or_explain(
        "p2 to join and stand by (two members in p1's view)",
        || {
            p1.flow()
                .is_some_and(|f| f["cluster"]["members"].as_array().map_or(0, Vec::len) == 2)
                && p2.flow().is_some_and(|f| f["state"] == "standby")
        },
        || logs(&[&p1, &p2]),
    );
    let addr = p2.addr.clone().expect("p2's endpoint");
    let (code, text_health) = http(&addr, "GET", "/health");
    assert_eq!(code, 200, "a standby process is healthy: {text_health}");
    assert!(p2.tasks().is_empty());
    assert!(!p2.duties());
    let remote = format!("a.{topic}");
    let mark: i64 = b.counts(&remote).iter().sum();
    p1.refract.kill();
    wait_or_explain(
        "p2 to take the task over and mirror on",
        || p2.tasks() == [0] && b.counts(&remote).iter().sum::<i64>() > mark + 50,
        || logs(&[&p2]),
    );
    assert!(p2.duties(), "task 0's holder runs the flow's duties");
    let produced = producing.finish();
    let want = a.read_all(&topic);
    let mut got = Vec::new();
    wait_or_explain(
        "every record on the target",
        || {
            got = b.read_all(&remote);
            got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| g.len() >= w.len())
        },
        || logs(&[&p2]),
    );
    for (g, w) in got.iter().zip(&want) {
        let values: BTreeSet<_> = g.iter().map(|r| r.value.clone()).collect();
        assert!(
            w.iter().all(|r| values.contains(&r.value)),
            "a record was lost"
        );
    }
    println!("standby took over: {produced} records, none lost");
}

/// A pipeline without `[cluster]`: one flow a -> b of `topic`, and the metrics endpoint.
fn solo_pipeline(a: &Broker, b: &Broker, topic: &str) -> String {
    format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n\n{}",
        pipeline(
            &[("a", a), ("b", b)],
            &format!(
                "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\n\
                 refresh_topics_interval = \"2s\"\ncommit_interval = \"1s\"\n\
                 replication_factor = 1\ninternal_replication_factor = 1\n\
                 emit_checkpoints = false\n"
            )
        )
    )
}

/// Two `refract run` processes on one pipeline without `[cluster]`: the second finds the first
/// in the flow's solo group and waits on standby (named in its log, `/status` and
/// `check --connect`) while the first mirrors; when the first stops, the second takes over from
/// its commits. The target holds every source record exactly once.
#[test]
fn a_second_process_without_cluster_waits_for_the_first_and_takes_over() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("solo");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 4);
    let producing = Producing::start(&a, &topic, 4);
    let text = solo_pipeline(&a, &b, &topic);
    let mut first = Process::start(&text, "first");
    let first_pid = first.refract.pid().expect("first runs");
    first.refract.wait("the first process to mirror", || {
        b.topics().contains_key(&remote) && b.counts(&remote).iter().sum::<i64>() > 0
    });
    first
        .refract
        .wait("the first process in the solo group", || {
            first
                .refract
                .log()
                .contains("joined group refract-a-b-solo-")
        });

    let second = Process::start(&text, "second");
    second.refract.wait("the second process on standby", || {
        second
            .flow()
            .is_some_and(|f| f["state"] == "standby" && f["held_elsewhere"].is_string())
    });
    let status = second.flow().expect("status");
    let held = status["held_elsewhere"].as_str().unwrap_or_default();
    assert!(
        held.contains(&format!("-{first_pid} ")),
        "names the first process (pid {first_pid}): {held}"
    );
    assert!(
        second
            .refract
            .log()
            .contains("runs this flow: this process waits on standby"),
        "{}",
        second.refract.log()
    );
    // check --connect names the process that runs the flow.
    let out = Refract::output(&[
        "check",
        "--connect",
        second.refract.pipeline.to_str().expect("utf-8 path"),
    ]);
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.lines()
            .any(|l| l.contains("run now by refract process")
                && l.contains(&format!("-{first_pid} "))),
        "{out}"
    );
    // The first keeps mirroring while the second waits and sends nothing.
    let before = b.counts(&remote).iter().sum::<i64>();
    first
        .refract
        .wait("the first process to go on mirroring", || {
            b.counts(&remote).iter().sum::<i64>() > before + 200
        });
    let waiting = second.flow().expect("status");
    assert_eq!(waiting["state"], "standby", "{waiting}");
    assert_eq!(waiting["records_sent"], 0, "{waiting}");

    // The first stops: the second takes over from its commits.
    assert_eq!(first.refract.stop(), Some(0));
    second.refract.wait("the second process to take over", || {
        second.flow().is_some_and(|f| f["state"] == "running")
            && second
                .refract
                .log()
                .contains("no longer runs this flow: starting it here")
    });
    let produced = producing.finish();
    let want = a.read_all(&topic);
    second.refract.wait("every record on b", || {
        b.counts(&remote).iter().sum::<i64>() >= produced as i64
    });
    assert_eq!(
        b.read_all(&remote),
        want,
        "each source record once, in order, although two processes ran the pipeline"
    );
    let sent = second.flow().expect("status")["records_sent"]
        .as_u64()
        .unwrap_or(0);
    assert!(sent > 0, "the second process mirrored the rest");
    println!("solo guard: {produced} records, each once; the second process mirrored {sent}");
}

/// Two processes started at the same moment on one pipeline without `[cluster]`: each claims
/// the flow by joining its solo group before reading, one of them mirrors, the other waits on
/// standby, and no record reaches the target twice (before claims, both mirrored the first
/// seconds).
#[test]
fn two_processes_started_together_mirror_each_record_once() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("together");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 4);
    let producing = Producing::start(&a, &topic, 4);
    let text = solo_pipeline(&a, &b, &topic);
    let one = Process::start(&text, "one");
    let two = Process::start(&text, "two");
    let both = [&one, &two];
    let states = || -> Vec<String> {
        both.iter()
            .map(|p| {
                p.flow()
                    .map(|f| f["state"].as_str().unwrap_or_default().to_string())
                    .unwrap_or_default()
            })
            .collect()
    };
    one.refract
        .wait("one process running and the other on standby", || {
            let mut s = states();
            s.sort();
            s == ["running", "standby"]
        });
    let runner = if states()[0] == "running" { &one } else { &two };
    let standby = if std::ptr::eq(runner, &one) {
        &two
    } else {
        &one
    };
    // The runner mirrors on while the other waits: enough time for a second reader to have
    // written duplicates.
    let before = b.counts(&remote).iter().sum::<i64>();
    runner.refract.wait("the runner to go on mirroring", || {
        b.counts(&remote).iter().sum::<i64>() > before + 200
    });
    let waiting = standby.flow().expect("status");
    assert_eq!(waiting["state"], "standby", "{waiting}");
    assert!(waiting["held_elsewhere"].is_string(), "{waiting}");
    let produced = producing.finish();
    runner.refract.wait("every record on b", || {
        b.counts(&remote).iter().sum::<i64>() >= produced as i64
    });
    assert_eq!(
        b.read_all(&remote),
        a.read_all(&topic),
        "each source record once, in order, although two processes started together:\n{}",
        logs(&both)
    );
    println!(
        "started together: {produced} records, each once; {} ran the flow",
        runner.name
    );
}
