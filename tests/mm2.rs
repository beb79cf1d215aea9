//! MirrorMaker 2 parity against real Apache Kafka brokers: offset syncs, checkpoints and offset
//! translation for failover and failback, group offset sync, heartbeats and topologies.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::support::*;
use refract_mm2::{Checkpoint, Heartbeat, OffsetSync};

/// A consumer that starts at `offsets` on `topic` and reads to the end: the records it gets.
fn resume(broker: &Broker, topic: &str, offsets: &[(i32, i64)]) -> Vec<Vec<TestRecord>> {
    let all = broker.read_all(topic);
    offsets
        .iter()
        .map(|(p, o)| all[*p as usize][*o as usize..].to_vec())
        .collect()
}

/// Consumes part of a topic on the source, fails over with `offsets translate`, and checks the
/// consumer on the target re-reads at most `offset_lag_max` records per partition and skips none.
/// Then the same in the other direction for a topic written on the backup after failover.
#[test]
fn failover_and_failback_resume_near_the_committed_position() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("orders");
    a.create_topic(&topic, 2);
    let records = sample_records(&topic, 2, 1000); // 500 per partition
    a.produce(&topic, &records);
    let group = unique("billing");
    // A consumer a little behind the end, as at a failover. (As in MirrorMaker 2, translation
    // gets coarser the further a group is behind the newest offset sync: the sync history per
    // partition is exponentially spaced.)
    let consumed = [(0, 470i64), (1, 431i64)];
    a.commit_group(&group, &topic, &consumed);

    let flows = format!("{}{}", flow("a", "b", ""), flow("b", "a", ""));
    let refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    let remote = format!("a.{topic}");
    refract.wait("the mirror to catch up", || {
        b.counts(&remote).iter().sum::<i64>() == 1000
    });
    // Checkpoints written while the mirror was still catching up translate to an older sync;
    // once the syncs covering the group's position are read, the checkpoints move up to them.
    let mut translated = BTreeMap::new();
    refract.wait(
        "checkpoints within offset_lag_max for both partitions",
        || {
            translated = Refract::translate(&refract.pipeline, &group, "a", "b");
            translated.len() == 2
                && consumed
                    .iter()
                    .all(|(p, c)| translated[&(remote.clone(), *p)] >= c - 100)
        },
    );
    let want_source = by_partition(&records, 2);
    for (p, committed) in consumed {
        let d = translated[&(remote.clone(), p)];
        assert!(
            (committed - 100..=committed).contains(&d),
            "partition {p}: translated {d} for committed {committed} re-reads at most offset_lag_max (100) and skips nothing"
        );
        // What the failed-over consumer reads is exactly the source's records from d on.
        let got = &resume(&b, &remote, &[(p, d)])[0];
        assert_eq!(
            got.as_slice(),
            &want_source[p as usize][d as usize..],
            "partition {p}"
        );
    }

    // Failover: producers move to b and write a topic of b's own; the group consumes part of it
    // there. Failback to a: the b->a flow's checkpoints translate the group's position.
    let local = unique("after-failover");
    b.create_topic(&local, 2);
    let newer = sample_records(&local, 2, 400);
    b.produce(&local, &newer);
    let back = [(0, 180i64), (1, 151i64)];
    b.commit_group(&group, &local, &back);
    let remote_back = format!("b.{local}");
    refract.wait("the way back to catch up", || {
        a.counts(&remote_back).iter().sum::<i64>() == 400
    });
    let mut failback = BTreeMap::new();
    refract.wait("failback checkpoints", || {
        failback = Refract::translate(&refract.pipeline, &group, "b", "a");
        failback.len() == 2
            && back
                .iter()
                .all(|(p, c)| failback[&(remote_back.clone(), *p)] >= c - 100)
    });
    let want_back = by_partition(&newer, 2);
    for (p, committed) in back {
        let d = failback[&(remote_back.clone(), p)];
        assert!(
            (committed - 100..=committed).contains(&d),
            "failback partition {p}: {d} for {committed}"
        );
        let got = &resume(&a, &remote_back, &[(p, d)])[0];
        assert_eq!(
            got.as_slice(),
            &want_back[p as usize][d as usize..],
            "failback partition {p}"
        );
    }

    // The internal topics hold MM2's formats.
    let syncs: Vec<OffsetSync> = a
        .read_raw("mm2-offset-syncs.b.internal")
        .iter()
        .map(|(k, v)| OffsetSync::decode(k, v).expect("offset sync"))
        .collect();
    assert!(
        syncs
            .iter()
            .any(|s| s.topic == topic && s.partition == 0 && s.upstream_offset == 0),
        "first record synced"
    );
    assert!(
        syncs
            .iter()
            .all(|s| s.upstream_offset == s.downstream_offset),
        "a clean mirror keeps offsets: {syncs:?}"
    );
    let checkpoints: Vec<Checkpoint> = b
        .read_raw("a.checkpoints.internal")
        .iter()
        .map(|(k, v)| Checkpoint::decode(k, v).expect("checkpoint"))
        .collect();
    assert!(checkpoints
        .iter()
        .any(|c| c.group == group && c.topic == remote && c.upstream_offset == 470));
}

/// No checkpoint for a partition nothing was mirrored from; checkpoints never go backwards,
/// also across a restart.
#[test]
fn checkpoints_need_syncs_and_are_monotonic_across_restarts() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("events");
    a.create_topic(&topic, 2);
    // Only partition 0 gets records.
    let records: Vec<TestRecord> = sample_records(&topic, 1, 200);
    a.produce(&topic, &records);
    let group = unique("reader");
    a.commit_group(&group, &topic, &[(0, 120), (1, 0)]);
    let mut refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flow("a", "b", "")), &[]);
    let remote = format!("a.{topic}");
    let read = |b: &Broker| -> Vec<Checkpoint> {
        b.read_raw("a.checkpoints.internal")
            .iter()
            .filter_map(|(k, v)| Checkpoint::decode(k, v).ok())
            .filter(|c| c.group == group)
            .collect()
    };
    refract.wait("a checkpoint for partition 0", || {
        b.topics().contains_key("a.checkpoints.internal") && !read(&b).is_empty()
    });
    // Checkpoint rounds that looked at the empty partition and wrote nothing for it.
    let empty = format!("no checkpoint for {group} {topic}[1]");
    refract.wait_more_logs(&empty, 2);
    refract.stop();
    refract.restart(&[]);
    refract.wait_more_logs(&empty, 2);
    // At the end of the partition: translated exactly (the last sync plus one).
    a.commit_group(&group, &topic, &[(0, 200)]);
    refract.wait("a checkpoint at 200", || {
        read(&b).iter().any(|c| c.upstream_offset == 200)
    });
    refract.stop();
    let all = read(&b);
    assert!(
        all.iter().all(|c| c.topic == remote && c.partition == 0),
        "no checkpoint for the empty partition: {all:?}"
    );
    let downstream: Vec<i64> = all.iter().map(|c| c.downstream_offset).collect();
    assert!(
        downstream.windows(2).all(|w| w[0] <= w[1]),
        "monotonic: {downstream:?}"
    );
    assert!(all.iter().filter(|c| c.upstream_offset == 120).count() >= 1);
    let last = all.last().expect("checkpoints");
    assert_eq!(last.downstream_offset, 200, "{last:?}");
}

/// `sync_group_offsets`: an idle target group gets translated offsets (up to the end of the
/// target partitions), an active one is left alone, one that is ahead is never moved back.
/// The target's group states are Kafka's own: a member polling on the target makes its group
/// active.
#[test]
fn group_offset_sync_skips_active_and_never_rewinds() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("ledger");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 2);
    b.create_topic(&remote, 2);
    a.produce(&topic, &sample_records(&topic, 2, 400));
    let (idle, active, ahead) = (unique("idle"), unique("active"), unique("ahead"));
    a.commit_group(&idle, &topic, &[(0, 150), (1, 150)]);
    a.commit_group(&active, &topic, &[(0, 100), (1, 100)]);
    a.commit_group(&ahead, &topic, &[(0, 50), (1, 50)]);
    b.commit_group(&ahead, &remote, &[(0, 190), (1, 190)]);
    // A live member of `active` on the target, with its own positions.
    let member: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &b.bootstrap)
        .set("group.id", &active)
        .set("enable.auto.commit", "false")
        .create()
        .expect("member");
    member.subscribe(&[&remote]).expect("subscribe");
    wait_until("the member to join", || {
        member.poll(Duration::from_millis(100));
        member.assignment().map(|a| a.count() == 2).unwrap_or(false)
    });
    let mut own = TopicPartitionList::new();
    own.add_partition_offset(&remote, 0, Offset::Offset(7))
        .expect("tpl");
    own.add_partition_offset(&remote, 1, Offset::Offset(7))
        .expect("tpl");
    member
        .commit(&own, rdkafka::consumer::CommitMode::Sync)
        .expect("member commit");
    let keep_alive = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let alive = keep_alive.clone();
    let poller = std::thread::spawn(move || {
        while alive.load(std::sync::atomic::Ordering::Relaxed) {
            member.poll(Duration::from_millis(100));
        }
    });

    let flows = flow(
        "a",
        "b",
        "sync_group_offsets = true\nsync_group_offsets_interval = \"1s\"",
    );
    let refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    refract.wait("the idle group to be synced", || {
        b.group_offsets(&idle, &remote, 2)
            .iter()
            .all(|o| o.is_some_and(|o| (50..=150).contains(&o)))
    });
    // The source group reads to the end: the target group follows, to exactly the end.
    a.commit_group(&idle, &topic, &[(0, 200), (1, 200)]);
    refract.wait("the idle group at the end of the target partitions", || {
        b.group_offsets(&idle, &remote, 2) == vec![Some(200), Some(200)]
    });
    a.commit_group(&active, &topic, &[(0, 180), (1, 180)]);
    // Sync rounds after that commit, which found the group active and left it alone.
    refract.wait_more_logs(&format!("group {active} is active on b"), 2);
    assert_eq!(
        b.group_offsets(&active, &remote, 2),
        vec![Some(7), Some(7)],
        "active group untouched"
    );
    assert_eq!(
        b.group_offsets(&ahead, &remote, 2),
        vec![Some(190), Some(190)],
        "never moved back"
    );
    keep_alive.store(false, std::sync::atomic::Ordering::Relaxed);
    poller.join().expect("poller");
}

fn heartbeats(broker: &Broker, topic: &str) -> Vec<Heartbeat> {
    broker
        .read_raw(topic)
        .iter()
        .filter_map(|(k, v)| Heartbeat::decode(k, v).ok())
        .collect()
}

fn topology(pipeline: &std::path::Path) -> String {
    let out = Refract::output(&["topology", "--config", pipeline.to_str().expect("path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines `refract topology` prints for one cluster.
fn section<'a>(text: &'a str, cluster: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| *l != format!("{cluster}:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect()
}

/// Chain a -> b -> c: `a.heartbeats` reaches c as `b.a.heartbeats`, two hops.
#[test]
fn chain_topology_counts_hops_from_heartbeats() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let c = Broker::start("c");
    let topic = unique("t");
    a.create_topic(&topic, 1);
    a.produce(&topic, &sample_records(&topic, 1, 10));
    let flows = format!("{}{}", flow("a", "b", ""), flow("b", "c", ""));
    let refract = Refract::start(&pipeline(&[("a", &a), ("b", &b), ("c", &c)], &flows), &[]);
    refract.wait("b.a.heartbeats on c", || {
        c.topics().contains_key("b.a.heartbeats") && !heartbeats(&c, "b.a.heartbeats").is_empty()
    });
    refract.wait("data through two hops", || {
        c.counts(&format!("b.a.{topic}")).iter().sum::<i64>() == 10
    });
    // The heartbeats a->b writes into b, and those mirrored from a (written there for the
    // reverse pair, as MM2's heartbeat connectors do), keep their keys through the hops.
    assert!(heartbeats(&b, "heartbeats")
        .iter()
        .any(|h| h.source_alias == "a" && h.target_alias == "b"));
    assert!(heartbeats(&c, "b.heartbeats")
        .iter()
        .any(|h| h.source_alias == "a" && h.target_alias == "b"));
    assert!(heartbeats(&c, "heartbeats")
        .iter()
        .any(|h| h.source_alias == "b" && h.target_alias == "c"));
    let text = topology(&refract.pipeline);
    let on_c = section(&text, "c");
    assert!(
        on_c.iter()
            .any(|l| l.contains("upstream b ") && l.contains("hops 1")),
        "{text}"
    );
    assert!(
        on_c.iter().any(|l| l.contains("upstream a ")
            && l.contains("hops 2")
            && l.contains("b.a.heartbeats")),
        "{text}"
    );
    let on_b = section(&text, "b");
    assert!(
        on_b.iter()
            .any(|l| l.contains("upstream a ") && l.contains("hops 1")),
        "{text}"
    );
    assert!(!on_b.iter().any(|l| l.contains("upstream c ")), "{text}");
}

/// Hub and spoke: a -> k and b -> k; k sees both spokes one hop away.
#[test]
fn hub_and_spoke_aggregates_both_spokes() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let k = Broker::start("k");
    let topic = unique("metrics");
    for (broker, n) in [(&a, 30), (&b, 50)] {
        broker.create_topic(&topic, 2);
        broker.produce(&topic, &sample_records(&topic, 2, n));
    }
    let flows = format!("{}{}", flow("a", "k", ""), flow("b", "k", ""));
    let refract = Refract::start(&pipeline(&[("a", &a), ("b", &b), ("k", &k)], &flows), &[]);
    refract.wait("both spokes on the hub", || {
        k.counts(&format!("a.{topic}")).iter().sum::<i64>() == 30
            && k.counts(&format!("b.{topic}")).iter().sum::<i64>() == 50
    });
    refract.wait("heartbeats from both spokes", || {
        let hb = heartbeats(&k, "heartbeats");
        hb.iter().any(|h| h.source_alias == "a") && hb.iter().any(|h| h.source_alias == "b")
    });
    refract.wait("both spokes' heartbeat topics mirrored", || {
        k.topics().contains_key("a.heartbeats") && k.topics().contains_key("b.heartbeats")
    });
    let text = topology(&refract.pipeline);
    let on_k = section(&text, "k");
    assert!(
        on_k.iter()
            .any(|l| l.contains("upstream a ") && l.contains("hops 1")),
        "{text}"
    );
    assert!(
        on_k.iter()
            .any(|l| l.contains("upstream b ") && l.contains("hops 1")),
        "{text}"
    );
    assert_eq!(
        k.counts(&topic).iter().sum::<i64>(),
        0,
        "the hub's own topic of that name is untouched"
    );
}

/// Active/active with identity naming on both sides: each cluster ends with its own records and
/// the other's, once each, and nothing loops (the provenance header stops the way back).
#[test]
fn active_active_identity_does_not_loop() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("shared");
    a.create_topic(&topic, 2);
    b.create_topic(&topic, 2);
    a.produce(&topic, &sample_records("from-a", 2, 40));
    b.produce(&topic, &sample_records("from-b", 2, 60));
    let identity = "policy = { plugin = \"builtin:identity\" }";
    let flows = format!("{}{}", flow("a", "b", identity), flow("b", "a", identity));
    let refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    refract.wait("both sides to hold 100", || {
        a.counts(&topic).iter().sum::<i64>() >= 100 && b.counts(&topic).iter().sum::<i64>() >= 100
    });
    // A marker produced now on each partition of each side comes after the other side's
    // records there: once it has crossed, each flow has read (and not sent back) every record
    // that came from the other side.
    a.produce(&topic, &sample_records("mark-a", 2, 2));
    b.produce(&topic, &sample_records("mark-b", 2, 2));
    refract.wait("the markers to cross", || {
        a.counts(&topic).iter().sum::<i64>() >= 104 && b.counts(&topic).iter().sum::<i64>() >= 104
    });
    for (name, broker) in [("a", &a), ("b", &b)] {
        let all: Vec<TestRecord> = broker.read_all_raw(&topic).into_iter().flatten().collect();
        assert_eq!(
            all.len(),
            104,
            "{name}: 40 + 60 records and 4 markers, once each"
        );
        let from = |prefix: &str| {
            all.iter()
                .filter(|r| {
                    r.key
                        .as_deref()
                        .is_some_and(|k| k.starts_with(prefix.as_bytes()))
                        || r.value
                            .as_deref()
                            .is_some_and(|v| v.starts_with(prefix.as_bytes()))
                })
                .count()
        };
        assert_eq!(from("from-a"), 40, "{name}");
        assert_eq!(from("from-b"), 60, "{name}");
        // Mirrored records name where they came from; local ones carry no stamp.
        let other = if name == "a" { "b" } else { "a" };
        for r in &all {
            let stamp = r
                .headers
                .iter()
                .find(|(k, _)| k == PROVENANCE)
                .and_then(|(_, v)| v.clone());
            let tags = [format!("from-{other}"), format!("mark-{other}")];
            let mirrored = [&r.key, &r.value].iter().any(|f| {
                f.as_deref()
                    .is_some_and(|v| tags.iter().any(|t| v.starts_with(t.as_bytes())))
            });
            if mirrored {
                assert_eq!(stamp.as_deref(), Some(other.as_bytes()), "{name}");
            } else if r.value.is_some() || r.key.is_some() {
                assert_eq!(stamp, None, "{name}: local record");
            }
        }
    }
}

/// Remote topics are created with the configs set on the source topic; MM2's exclude list and
/// the source's defaults are never copied. Without an authorizer on the brokers, ACL sync finds
/// nothing to copy and does not fail.
#[test]
fn remote_topics_get_the_source_topic_configs() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("configured");
    a.create_topic_with(
        &topic,
        1,
        &[
            ("retention.ms", "12345678"),
            ("min.insync.replicas", "1"),
            ("cleanup.policy", "compact"),
        ],
    );
    // A compacted topic accepts only keyed records.
    let keyed: Vec<TestRecord> = sample_records(&topic, 1, 5)
        .into_iter()
        .enumerate()
        .map(|(i, r)| TestRecord {
            key: Some(format!("k{i}").into_bytes()),
            ..r
        })
        .collect();
    a.produce(&topic, &keyed);
    let refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flow("a", "b", "")), &[]);
    let remote = format!("a.{topic}");
    refract.wait("the remote topic", || {
        b.counts(&remote).iter().sum::<i64>() == 5
    });
    let configs = b.topic_configs(&remote);
    assert_eq!(
        configs.get("retention.ms").map(String::as_str),
        Some("12345678"),
        "{configs:?}"
    );
    assert_eq!(
        configs.get("cleanup.policy").map(String::as_str),
        Some("compact"),
        "{configs:?}"
    );
    assert!(
        !b.topic_overrides(&remote)
            .contains_key("min.insync.replicas"),
        "excluded by default: {configs:?}"
    );
    assert_eq!(
        b.topic_overrides(&remote).keys().collect::<Vec<_>>(),
        ["cleanup.policy", "retention.ms"],
        "only what the source topic sets, not its defaults"
    );
    // Without an authorizer Kafka answers DescribeAcls with SECURITY_DISABLED, which librdkafka
    // 2.12 drops (it returns an empty list): the source looks like one without topic ACLs.
    refract.wait("an ACL sync round", || {
        refract.log_count("ACL sync: no topic ACLs to copy") >= 1
    });
    assert!(
        !refract
            .log()
            .lines()
            .any(|l| l.contains("WARN") && l.contains("ACL sync")),
        "{}",
        refract.log()
    );
}

/// Every MirrorMaker 2 properties file in the fixtures converts with `refract convert` and runs
/// as it is with `refract run`, only its bootstrap addresses and replication factors pointed at
/// single-node test brokers: a topic its `topics` setting selects arrives under the name its
/// policy gives.
#[test]
fn mm2_properties_fixtures_convert_and_run() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/tests/fixtures/mm2");
    // (file, source alias, target alias, source topic, remote topic)
    let id = unique("x").replace('-', "");
    let cases = [
        (
            "active-active.properties",
            "us-east",
            "us-west",
            format!("orders.{id}"),
            format!("us-east_orders.{id}"),
        ),
        (
            "active-standby.properties",
            "primary",
            "backup",
            format!("inventory-{id}"),
            format!("primary.inventory-{id}"),
        ),
        (
            "identity-dr.properties",
            "dc1",
            "dc2",
            format!("ledger{id}"),
            format!("ledger{id}"),
        ),
        (
            "two-clusters-regex.properties",
            "kafka1",
            "kafka2",
            format!("foo{id}"),
            format!("kafka1.foo{id}"),
        ),
    ];
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !name.ends_with(".properties") {
            continue; // NAME.out: its conversion snapshot (host/config/tests/mm2_ui.rs)
        }
        assert!(
            cases.iter().any(|c| c.0 == name),
            "{name}: every fixture needs a case here"
        );
    }
    for (file, source, target, topic, remote) in &cases {
        let text = std::fs::read_to_string(dir.join(file)).expect("fixture");
        let converted = Refract::output(&["convert", dir.join(file).to_str().expect("path")]);
        assert!(
            converted.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&converted.stderr)
        );
        let toml = String::from_utf8_lossy(&converted.stdout);
        assert!(
            toml.contains(&format!("source = \"{source}\""))
                && toml.contains(&format!("target = \"{target}\"")),
            "{file}:\n{toml}"
        );

        let src = Broker::start(source);
        let tgt = Broker::start(target);
        // Point the bootstrap addresses at the test brokers and the replication factors at their
        // single node; everything else stays as it is.
        let pointed: String = text
            .lines()
            .map(|l| {
                let key = l.split('=').next().unwrap_or("").trim();
                if key.ends_with("replication.factor") && !key.starts_with('#') {
                    format!("{key} = 1")
                } else if key == format!("{source}.bootstrap.servers") {
                    format!("{key} = {}", src.bootstrap)
                } else if key == format!("{target}.bootstrap.servers") {
                    format!("{key} = {}", tgt.bootstrap)
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        src.create_topic(topic, 2);
        src.produce(topic, &sample_records(topic, 2, 20));
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join(file);
        std::fs::write(&path, pointed).expect("write");
        let log = tmp.path().join("refract.log");
        let mut cmd = std::process::Command::new(Refract::bin());
        cmd.arg("run")
            .arg(&path)
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(std::fs::File::create(tmp.path().join("err.log")).expect("log"));
        // Owned by the test binary: killed with it if a wait below fails.
        let mut child = spawn_owned(cmd).expect("refract run");
        wait_or_explain(
            &format!("{file}: {topic} mirrored as {remote}"),
            || tgt.counts(remote).iter().sum::<i64>() == 20,
            || std::fs::read_to_string(tmp.path().join("err.log")).unwrap_or_default(),
        );
        assert_eq!(
            tgt.read_all(remote),
            by_partition(&sample_records(topic, 2, 20), 2),
            "{file}"
        );
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let status = child.wait().expect("wait");
        assert!(status.success(), "{file}: clean exit");
        seen += 1;
    }
    assert_eq!(seen, 4);
}
