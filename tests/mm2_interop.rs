//! refract next to the real Apache Kafka MirrorMaker 2 (4.3.1, dedicated mode, from the jars the
//! test harness resolves): MM2's own `RemoteClusterUtils` reads the checkpoints refract writes,
//! refract reads the offset syncs and checkpoints MM2 writes, and `refract run` on MM2's own
//! properties file takes over a flow from a stopped MM2 without copying anything again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use refract_mm2::connect_offsets::default_offsets_topic;
use refract_mm2::{Checkpoint, Mm2Positions, OffsetSync};

/// Partitions of every test topic.
const PARTITIONS: i32 = 3;

/// (topic, partition) → offset, as both translation tools print it.
/// Longest MirrorMaker 2 may take from its start to its first mirrored record: a JVM that starts
/// a Kafka Connect worker, three connectors and their tasks, on a 2-core machine that runs other
/// tests' brokers too.
const MM2_START_DEADLINE: Duration = Duration::from_secs(240);

/// A log4j2 configuration that writes warnings and errors to `file` (plus MM2's own info lines:
/// what it replicates, when it starts), or warnings and errors to stderr.
fn quiet_log4j(dir: &Path, file: Option<&Path>) -> PathBuf {
    let appender = match file {
        Some(f) => format!(
            "appender.o.type=File\nappender.o.fileName={}\n",
            f.display()
        ),
        None => "appender.o.type=Console\nappender.o.target=SYSTEM_ERR\n".to_string(),
    };
    let mirror = if file.is_some() { "INFO" } else { "WARN" };
    let path = dir.join(if file.is_some() {
        "log4j2-file.properties"
    } else {
        "log4j2-stderr.properties"
    });
    std::fs::write(
        &path,
        format!(
            "rootLogger.level=WARN\nrootLogger.appenderRef.o.ref=O\n{appender}appender.o.name=O\n\
             logger.mirror.name=org.apache.kafka.connect.mirror\nlogger.mirror.level={mirror}\n\
             appender.o.layout.type=PatternLayout\nappender.o.layout.pattern=[%d] %p %m (%c)%n\n"
        ),
    )
    .expect("log4j2 config");
    path
}

/// A MirrorMaker 2 properties file for clusters `a` and `b`: only `a->b`, only `topic`, every
/// internal topic with replication factor 1, every interval short; `extra` entries replace or
/// add to those. MM2's Connect worker for `a->b` reads `offset.flush.interval.ms` only from
/// the target's settings (`b.offset.flush.interval.ms`; `MirrorMakerConfig.workerConfig` passes
/// no top-level key of that name); the top-level one is refract's commit interval.
fn mm2_properties(a: &Broker, b: &Broker, topic: &str, extra: &[(&str, &str)]) -> String {
    let mut props: Vec<(String, String)> = [
        ("clusters", "a, b"),
        ("a.bootstrap.servers", a.bootstrap.as_str()),
        ("b.bootstrap.servers", b.bootstrap.as_str()),
        ("a->b.enabled", "true"),
        ("b->a.enabled", "false"),
        ("b->a.emit.heartbeats.enabled", "false"),
        ("topics", topic),
        ("groups", ".*"),
        ("replication.factor", "1"),
        ("checkpoints.topic.replication.factor", "1"),
        ("heartbeats.topic.replication.factor", "1"),
        ("offset-syncs.topic.replication.factor", "1"),
        ("offset.storage.replication.factor", "1"),
        ("status.storage.replication.factor", "1"),
        ("config.storage.replication.factor", "1"),
        ("refresh.topics.interval.seconds", "1"),
        ("refresh.groups.interval.seconds", "1"),
        ("emit.checkpoints.interval.seconds", "1"),
        ("sync.group.offsets.interval.seconds", "1"),
        ("offset.flush.interval.ms", "1000"),
        ("b.offset.flush.interval.ms", "1000"),
        ("sync.topic.acls.enabled", "false"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in extra {
        props.retain(|(key, _)| key != k);
        props.push((k.to_string(), v.to_string()));
    }
    props.iter().map(|(k, v)| format!("{k} = {v}\n")).collect()
}

/// A MirrorMaker 2 process in dedicated mode (`org.apache.kafka.connect.mirror.MirrorMaker`),
/// killed when dropped.
struct Mm2 {
    child: Option<Child>,
    dir: PathBuf,
    started: Instant,
}

impl Mm2 {
    /// Starts MM2 on `properties`, logging warnings to `mm2.log` next to it.
    fn start(properties: &Path) -> Self {
        let dir = properties.parent().expect("folder").to_path_buf();
        let log4j = quiet_log4j(&dir, Some(&dir.join("mm2.log")));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("mm2.out"))
            .expect("mm2.out");
        let mut cmd = kafka_java();
        cmd.args(["-Xms64m", "-Xmx512m", "-XX:+UseSerialGC"])
            .args(["-XX:TieredStopAtLevel=1", "-XX:-UsePerfData"])
            .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
            .arg("org.apache.kafka.connect.mirror.MirrorMaker")
            .arg(properties)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("out"))
            .stderr(out);
        let started = Instant::now();
        let child = spawn_owned(cmd).expect("start MirrorMaker 2");
        Self {
            child: Some(child),
            dir,
            started,
        }
    }

    /// Stops it with SIGTERM, as an operator would, and waits for it to exit: Kafka Connect
    /// stops the tasks and flushes their source offsets first.
    fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("MM2 is running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let mut status = None;
        wait_or_explain(
            "MirrorMaker 2 to stop on SIGTERM",
            || {
                status = child.try_wait().ok().flatten();
                status.is_some()
            },
            || self.log(),
        );
        status.expect("exited")
    }

    /// Kills it with SIGKILL: no chance to flush anything.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn log(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        format!("{}{}", read("mm2.out"), read("mm2.log"))
    }

    /// Waits for `cond` while MM2 may still be starting (up to [`MM2_START_DEADLINE`] after
    /// its start); returns how long after its start `cond` held.
    fn wait_after_start(&self, what: &str, cond: impl FnMut() -> bool) -> Duration {
        wait_before(
            &format!("{what} ({MM2_START_DEADLINE:?} after MirrorMaker 2 started)"),
            self.started + MM2_START_DEADLINE,
            cond,
            || self.log(),
        );
        let took = self.started.elapsed();
        eprintln!("MirrorMaker 2: {what} {took:?} after start");
        took
    }

    /// Waits until MM2 has mirrored its first record to `remote` on `target`.
    fn wait_started(&self, target: &Broker, remote: &str) -> Duration {
        self.wait_after_start("first record on the target", || {
            target.topics().contains_key(remote) && target.counts(remote).iter().sum::<i64>() > 0
        })
    }
}

impl Drop for Mm2 {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `refract run FILE` (a `.properties` file here), logging to `refract.log` beside it.
struct RefractRun {
    child: Option<Child>,
    log: PathBuf,
    started: Instant,
}

impl RefractRun {
    fn start(file: &Path) -> Self {
        let log = file.with_file_name("refract.log");
        let out = std::fs::File::create(&log).expect("refract.log");
        let child = Command::new(Refract::bin())
            .arg("run")
            .arg(file)
            .env("RUST_LOG", "info,refract_mirror=debug")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("refract run");
        Self {
            child: Some(child),
            log,
            started: Instant::now(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait(&self, what: &str, cond: impl FnMut() -> bool) {
        wait_or_explain(what, cond, || format!("refract log:\n{}", self.log()));
    }

    /// SIGTERM, then its exit status.
    fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("refract is running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        child.wait().expect("wait for refract")
    }
}

impl Drop for RefractRun {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// MirrorMaker 2's `RemoteClusterUtils.translateOffsets(target, source_alias, group)`, run by
/// the Java peer `tests/java/TranslateOffsets.java`.
fn mm2_translate(target: &Broker, source_alias: &str, group: &str) -> Offsets {
    let peer = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/java/TranslateOffsets.java");
    let dir = tempfile::tempdir().expect("tmp");
    let log4j = quiet_log4j(dir.path(), None);
    let out = kafka_java()
        .args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"])
        .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
        .arg(&peer)
        .args([target.bootstrap.as_str(), source_alias, group])
        .output()
        .expect("run the Java peer");
    assert!(
        out.status.success(),
        "TranslateOffsets failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_offsets(&String::from_utf8_lossy(&out.stdout))
}

/// MM2's positions for flows from `a`, read from its Connect offsets topic on `b`, as
/// partition → last replicated offset of `topic`.
fn mm2_positions(b: &Broker, topic: &str) -> BTreeMap<i32, i64> {
    let offsets_topic = default_offsets_topic("a");
    if !b.topics().contains_key(&offsets_topic) {
        return BTreeMap::new();
    }
    let mut positions = Mm2Positions::new("a");
    for record in b.read_all_raw(&offsets_topic).into_iter().flatten() {
        positions.apply(record.key.as_deref(), record.value.as_deref());
    }
    assert_eq!(positions.malformed(), 0, "every MM2 record parses");
    positions
        .iter()
        .filter(|((t, _), _)| t == topic)
        .map(|((_, p), n)| (*p, *n))
        .collect()
}

/// The expected translation for the test group: (topic, partition) → offset.
fn expected(remote: &str, pairs: &[(i32, i64)]) -> Offsets {
    pairs
        .iter()
        .map(|(p, o)| ((remote.to_string(), *p), *o))
        .collect()
}

/// refract mirrors a->b with checkpoints; MirrorMaker 2's own `RemoteClusterUtils` reads them and
/// returns exactly what `refract offsets translate` prints.
#[test]
fn mm2_translate_offsets_reads_refract_checkpoints() {
    let t0 = Instant::now();
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("orders");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, PARTITIONS);
    a.produce(&topic, &sample_records(&topic, PARTITIONS, 300));
    let group = unique("billing");
    // partition 0 read to its end, partition 1 not at all, partition 2 part-way
    a.commit_group(&group, &topic, &[(0, 100), (1, 0), (2, 37)]);
    let flows = format!("[[flow]]\nsource = \"a\"\ntarget = \"b\"\n{FAST}");
    let refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    refract.wait("the mirror to catch up", || {
        b.counts(&remote) == vec![100; PARTITIONS as usize]
    });
    // The end of partition 0 and the start of partition 1 translate exactly; partition 2 to
    // the sync at or before 37 (+1 when not exact).
    let mut ours = Offsets::new();
    refract.wait("checkpoints at the end of partition 0", || {
        ours = Refract::translate(&refract.pipeline, &group, "a", "b");
        ours.len() == 3 && ours[&(remote.clone(), 0)] == 100
    });
    let mut theirs = Offsets::new();
    refract.wait("MM2's RemoteClusterUtils to read the same offsets", || {
        theirs = mm2_translate(&b, "a", &group);
        ours = Refract::translate(&refract.pipeline, &group, "a", "b");
        theirs == ours
    });
    assert_eq!(theirs, ours);
    let p2 = theirs[&(remote.clone(), 2)];
    assert!((1..=37).contains(&p2), "partition 2 translated to {p2}");
    assert_eq!(theirs, expected(&remote, &[(0, 100), (1, 0), (2, p2)]));
    eprintln!(
        "mm2_translate_offsets_reads_refract_checkpoints took {:?}",
        t0.elapsed()
    );
}

/// MirrorMaker 2 mirrors a->b; refract's `offsets translate` on MM2's own properties file reads
/// MM2's checkpoints exactly as MM2's `RemoteClusterUtils` does, and refract's decoders read
/// every record of MM2's offset-syncs, checkpoints and Connect offsets topics.
#[test]
fn refract_reads_offset_syncs_and_checkpoints_mm2_wrote() {
    let t0 = Instant::now();
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("ledger");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, PARTITIONS);
    let records = sample_records(&topic, PARTITIONS, 300);
    a.produce(&topic, &records);
    let group = unique("billing");
    a.commit_group(&group, &topic, &[(0, 100), (1, 0), (2, 37)]);
    let dir = tempfile::tempdir().expect("tmp");
    let properties = dir.path().join("mm2.properties");
    std::fs::write(&properties, mm2_properties(&a, &b, &topic, &[])).expect("write");
    let mm2 = Mm2::start(&properties);
    mm2.wait_started(&b, &remote);
    mm2.wait_after_start("all 300 records on the target", || {
        b.counts(&remote) == vec![100; PARTITIONS as usize]
    });
    assert_eq!(b.read_all(&remote), by_partition(&records, PARTITIONS));

    let mut ours = Offsets::new();
    mm2.wait_after_start(
        "a checkpoint for every partition, at the end of partition 0",
        || {
            ours = Refract::translate(&properties, &group, "a", "b");
            ours.len() == 3 && ours[&(remote.clone(), 0)] == 100
        },
    );
    let mut theirs = Offsets::new();
    mm2.wait_after_start("RemoteClusterUtils and refract agreeing", || {
        theirs = mm2_translate(&b, "a", &group);
        ours = Refract::translate(&properties, &group, "a", "b");
        theirs == ours
    });
    let p2 = theirs[&(remote.clone(), 2)];
    assert!((1..=37).contains(&p2), "partition 2 translated to {p2}");
    assert_eq!(ours, expected(&remote, &[(0, 100), (1, 0), (2, p2)]));

    // Every record of MM2's internal topics decodes.
    let syncs: Vec<OffsetSync> = a
        .read_raw("mm2-offset-syncs.b.internal")
        .iter()
        .map(|(k, v)| OffsetSync::decode(k, v).expect("an MM2 offset sync decodes"))
        .collect();
    for p in 0..PARTITIONS {
        let mine: Vec<&OffsetSync> = syncs
            .iter()
            .filter(|s| s.topic == topic && s.partition == p)
            .collect();
        assert_eq!(
            (mine[0].upstream_offset, mine[0].downstream_offset),
            (0, 0),
            "partition {p}: first record synced: {syncs:?}"
        );
        assert!(
            mine.iter()
                .all(|s| s.upstream_offset == s.downstream_offset),
            "a fresh remote topic keeps offsets: {syncs:?}"
        );
    }
    assert!(syncs.iter().all(|s| s.topic == topic), "{syncs:?}");
    let checkpoints: Vec<Checkpoint> = b
        .read_raw("a.checkpoints.internal")
        .iter()
        .map(|(k, v)| Checkpoint::decode(k, v).expect("an MM2 checkpoint decodes"))
        .collect();
    assert!(!checkpoints.is_empty());
    let mut latest = Offsets::new();
    for c in &checkpoints {
        assert_eq!(
            (c.group.as_str(), c.topic.as_str()),
            (group.as_str(), remote.as_str())
        );
        assert!(c.downstream_offset <= c.upstream_offset, "{c:?}");
        latest.insert((c.topic.clone(), c.partition), c.downstream_offset);
    }
    assert_eq!(
        latest, ours,
        "the latest checkpoints are what both tools print"
    );
    assert!(checkpoints
        .iter()
        .any(|c| c.partition == 2 && c.upstream_offset == 37));
    // MM2's own positions, as refract reads them to take over: the last record of each partition.
    mm2.wait_after_start("its positions flushed at the end of each partition", || {
        mm2_positions(&b, &topic) == BTreeMap::from([(0, 99), (1, 99), (2, 99)])
    });
    eprintln!(
        "refract_reads_offset_syncs_and_checkpoints_mm2_wrote took {:?}",
        t0.elapsed()
    );
}

/// Starts MM2 on `properties`, waits until the target holds `want` records per partition of
/// `remote`, and stops it with SIGTERM; prints how long each step took.
fn mirror_with_mm2(properties: &Path, b: &Broker, remote: &str, want: &[i64]) {
    let mut mm2 = Mm2::start(properties);
    mm2.wait_started(b, remote);
    mm2.wait_after_start("every record on the target", || {
        b.topics().contains_key(remote) && b.counts(remote) == want
    });
    let mirrored = mm2.started.elapsed();
    let t = Instant::now();
    let status = mm2.stop();
    eprintln!(
        "MirrorMaker 2: {want:?} records on the target {mirrored:?} after start; stopped (SIGTERM, {status}) in {:?}",
        t.elapsed()
    );
}

/// The migration: MirrorMaker 2 mirrors part of a topic and is stopped gracefully, more records
/// arrive, and `refract run` on MM2's own properties file continues exactly where MM2 stopped:
/// every record once, in order, byte for byte.
#[test]
fn refract_takes_over_from_a_stopped_mm2_without_recopying() {
    let t0 = Instant::now();
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("payments");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, PARTITIONS);
    let first = sample_records(&format!("{topic}-mm2"), PARTITIONS, 300);
    a.produce(&topic, &first);
    let dir = tempfile::tempdir().expect("tmp");
    let properties = dir.path().join("mm2.properties");
    std::fs::write(&properties, mm2_properties(&a, &b, &topic, &[])).expect("write");
    mirror_with_mm2(&properties, &b, &remote, &[100, 100, 100]);
    assert_eq!(
        mm2_positions(&b, &topic),
        BTreeMap::from([(0, 99), (1, 99), (2, 99)]),
        "a graceful stop flushes MM2's positions"
    );

    // More records while nothing mirrors, then refract on the same file.
    let second = sample_records(&format!("{topic}-refract"), PARTITIONS, 150);
    a.produce(&topic, &second);
    let mut run = RefractRun::start(&properties);
    run.wait("refract to mirror the rest", || {
        b.counts(&remote) == vec![150; PARTITIONS as usize]
    });
    eprintln!("refract: caught up {:?} after start", run.started.elapsed());
    let all: Vec<TestRecord> = first.iter().chain(&second).cloned().collect();
    assert_eq!(
        b.read_all(&remote),
        by_partition(&all, PARTITIONS),
        "every record once, in order, byte for byte"
    );
    let log = run.log();
    let line = format!(
        "took over from MirrorMaker 2: 3 partitions resume at MM2's positions ({topic}[0]=100 {topic}[1]=100 {topic}[2]=100)"
    );
    assert!(log.contains(&line), "{line}\n{log}");
    assert!(!log.contains("mirrored again"), "no duplicates:\n{log}");
    // refract verify on the same file: source and target match.
    let verify = Refract::output(&["verify", "--config", properties.to_str().expect("path")]);
    let report = String::from_utf8_lossy(&verify.stdout);
    assert!(
        verify.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(report.contains("OK"), "{report}");
    assert!(run.stop().success(), "{}", run.log());
    eprintln!(
        "refract_takes_over_from_a_stopped_mm2_without_recopying took {:?}",
        t0.elapsed()
    );
}

/// MirrorMaker 2 is killed (SIGKILL) after writing records it never recorded a position for:
/// refract resumes at MM2's last flushed position, loses nothing, and counts exactly the records
/// on the target past that position as duplicates.
#[test]
fn refract_counts_what_a_killed_mm2_wrote_past_its_position() {
    let t0 = Instant::now();
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("refunds");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, PARTITIONS);
    let first = sample_records(&format!("{topic}-1"), PARTITIONS, 300);
    a.produce(&topic, &first);
    let dir = tempfile::tempdir().expect("tmp");
    let properties = dir.path().join("mm2.properties");
    // Positions are flushed only when MM2 stops cleanly (never on the interval in this test).
    let slow_flush = [("b.offset.flush.interval.ms", "600000")];
    std::fs::write(&properties, mm2_properties(&a, &b, &topic, &slow_flush)).expect("write");
    mirror_with_mm2(&properties, &b, &remote, &[100, 100, 100]);
    assert_eq!(
        mm2_positions(&b, &topic),
        BTreeMap::from([(0, 99), (1, 99), (2, 99)])
    );

    // A second MM2 run mirrors more, then dies without flushing its positions.
    let second = sample_records(&format!("{topic}-2"), PARTITIONS, 90);
    let mut mm2 = Mm2::start(&properties);
    a.produce(&topic, &second);
    mm2.wait_after_start("the second batch on the target", || {
        b.counts(&remote) == vec![130; PARTITIONS as usize]
    });
    mm2.kill();
    let stored = mm2_positions(&b, &topic);
    let on_target = b.counts(&remote);
    let expected_duplicates: i64 = (0..PARTITIONS)
        .map(|p| on_target[p as usize] - (stored[&p] + 1))
        .sum();
    eprintln!("killed MM2: positions {stored:?}, target {on_target:?}, {expected_duplicates} records past them");
    assert_eq!(
        stored,
        BTreeMap::from([(0, 99), (1, 99), (2, 99)]),
        "no flush since the first run's clean stop"
    );
    assert_eq!(expected_duplicates, 90, "the whole second batch");

    let third = sample_records(&format!("{topic}-3"), PARTITIONS, 60);
    a.produce(&topic, &third);
    let source = a.read_all(&topic);
    let run = RefractRun::start(&properties);
    // The target keeps what MM2 wrote and gets everything after MM2's position once more.
    let want: Vec<Vec<TestRecord>> = (0..PARTITIONS as usize)
        .map(|p| {
            let kept = &source[p][..on_target[p] as usize];
            let resumed = &source[p][(stored[&(p as i32)] + 1) as usize..];
            kept.iter().chain(resumed).cloned().collect()
        })
        .collect();
    let want_counts: Vec<i64> = want.iter().map(|p| p.len() as i64).collect();
    run.wait("refract to mirror from MM2's position", || {
        b.counts(&remote) == want_counts
    });
    eprintln!("refract: caught up {:?} after start", run.started.elapsed());
    assert_eq!(
        b.read_all(&remote),
        want,
        "nothing missing, duplicates only past MM2's position"
    );
    let log = run.log();
    let positions: Vec<String> = (0..PARTITIONS)
        .map(|p| format!("{topic}[{p}]={}", stored[&p] + 1))
        .collect();
    let line = format!(
        "took over from MirrorMaker 2: 3 partitions resume at MM2's positions ({})",
        positions.join(" ")
    );
    assert!(log.contains(&line), "{line}\n{log}");
    let warning = format!(
        "resuming after an unclean stop: {expected_duplicates} records already on the target past the last committed position will be mirrored again (duplicates)"
    );
    assert!(log.contains(&warning), "{warning}\n{log}");
    eprintln!(
        "refract_counts_what_a_killed_mm2_wrote_past_its_position took {:?}",
        t0.elapsed()
    );
}
