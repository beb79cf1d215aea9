//! `offset_translation = "exact"` against real Apache Kafka brokers: consumer groups resume on the
//! target at the very record they stopped at — for a burst-mirrored topic (where MirrorMaker 2's
//! rule sends every group back to the sparse sync before it), a flow whose filter drops every third
//! record, an exactly-once target whose transaction markers shift the offsets, and a failover and
//! failback 10,000 records behind the head — and `refract offsets translate` says so per partition.
//! Records the source deletes before they are mirrored are a gap too: they are counted and
//! reported (log, `/status`, `refract status`, the metric, `refract verify`), and a group whose
//! position is inside the gap resumes at the first record after it.

use std::collections::BTreeMap;

use crate::support::*;

/// `refract offsets translate` of the running pipeline, with the translation column.
fn translate(
    refract: &Refract,
    group: &str,
    from: &str,
    to: &str,
) -> BTreeMap<(String, i32), (i64, String)> {
    Refract::translate_lines(&refract.pipeline, group, from, to)
}

/// Waits until every partition in `want` translates to exactly its offset, with `exact`.
fn wait_exact(
    refract: &Refract,
    group: &str,
    from: &str,
    to: &str,
    remote: &str,
    want: &[(i32, i64)],
) {
    let last = std::cell::RefCell::new(BTreeMap::new());
    wait_or_explain(
        "exact checkpoints for every partition",
        || {
            let now = translate(refract, group, from, to);
            let done = want.iter().all(|(p, o)| {
                now.get(&(remote.to_string(), *p))
                    .is_some_and(|(d, how)| d == o && how == "exact")
            });
            *last.borrow_mut() = now;
            done
        },
        || format!("{:?}\n{}", last.borrow(), refract.log()),
    );
}

/// The keys a consumer reads from `offset` to the end of `topic`'s partition `p` on `broker`.
fn keys_from(broker: &Broker, topic: &str, p: i32, offset: i64) -> Vec<Vec<u8>> {
    broker.read_all(topic)[p as usize][offset as usize..]
        .iter()
        .map(|r| r.key.clone().unwrap_or_default())
        .collect()
}

/// A consumer of `broker` assigned to partition 0 of `topic` at `offset`.
fn reader_at(broker: &Broker, topic: &str, offset: i64) -> rdkafka::consumer::BaseConsumer {
    use rdkafka::consumer::Consumer;
    let consumer = broker.consumer();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Offset(offset))
        .expect("partition offset");
    consumer.assign(&tpl).expect("assign");
    consumer
}

/// The keys of the records a consumer reads from `offset` on partition 0 of `topic` (commit
/// markers are skipped by the client), waiting for `n` of them.
fn keys_from_offset(broker: &Broker, topic: &str, offset: i64, n: usize) -> Vec<Vec<u8>> {
    use rdkafka::Message;
    let consumer = reader_at(broker, topic, offset);
    let mut keys = Vec::new();
    wait_until("the records after the offset", || {
        while let Some(Ok(m)) = consumer.poll(std::time::Duration::from_millis(100)) {
            keys.push(m.key().unwrap_or_default().to_vec());
        }
        keys.len() >= n
    });
    keys
}

/// The keys the source group has not consumed yet on partition `p`, minus those `kept` drops.
fn unconsumed(
    records: &[Vec<TestRecord>],
    p: i32,
    from: i64,
    kept: impl Fn(&TestRecord) -> bool,
) -> Vec<Vec<u8>> {
    records[p as usize][from as usize..]
        .iter()
        .filter(|r| kept(r))
        .map(|r| r.key.clone().unwrap_or_default())
        .collect()
}

/// The scenario: 3 partitions of 100 records mirrored in one burst with
/// `offset_lag_max = 10`. MirrorMaker 2's store keeps syncs 99, 88, 66, 44, 0, so groups at 40,
/// 30 and 33 all translate to 1; exact translation gives 40, 30 and 33.
#[test]
fn burst_mirrored_groups_translate_exactly() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("burst");
    a.create_topic(&topic, 3);
    let records = sample_records(&topic, 3, 300);
    a.produce(&topic, &records);
    let group = unique("burst-group");
    let committed = [(0, 40i64), (1, 30), (2, 33)];
    a.commit_group(&group, &topic, &committed);
    let flows = flow(
        "a",
        "b",
        &format!("topics = [\"{topic}\"]\ngroups = [\"{group}\"]\noffset_lag_max = 10\noffset_translation = \"exact\""),
    );
    let mut refract = Refract::start(&pipeline(&[("a", a), ("b", b)], &flows), &[]);
    let remote = format!("a.{topic}");
    refract.wait("the burst mirrored", || {
        b.counts(&remote).iter().sum::<i64>() == 300
    });
    wait_exact(&refract, &group, "a", "b", &remote, &committed);
    let source = by_partition(&records, 3);
    for (p, c) in committed {
        assert_eq!(
            keys_from(b, &remote, p, c),
            unconsumed(&source, p, c, |_| true),
            "partition {p}: the failed-over consumer reads exactly what the group had not read"
        );
    }
    assert_eq!(refract.stop(), Some(0));
}

/// A filter drops every third record: the source offsets have gaps on the target. Each group
/// resumes at the first mirrored record at or after its position.
#[test]
fn filtered_gaps_translate_to_the_next_mirrored_record() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("filtered");
    a.create_topic(&topic, 2);
    let records: Vec<TestRecord> = (0..400)
        .map(|i| TestRecord {
            partition: i % 2,
            key: Some(format!("k{i}").into_bytes()),
            value: Some(format!("v{i}").into_bytes()),
            // Every third record of each partition carries drop=yes.
            headers: if (i / 2) % 3 == 2 {
                vec![("drop".to_string(), Some(b"yes".to_vec()))]
            } else {
                vec![]
            },
            timestamp: 1_650_000_000_000 + i as i64,
        })
        .collect();
    a.produce(&topic, &records);
    let source = by_partition(&records, 2);
    let kept = |r: &TestRecord| r.headers.is_empty();
    let group = unique("filtered-group");
    // 41 and 77 sit on dropped records, 60 on a kept one.
    let committed = [(0, 41i64), (1, 60)];
    a.commit_group(&group, &topic, &committed);
    let flows = flow(
        "a",
        "b",
        &format!("topics = [\"{topic}\"]\ngroups = [\"{group}\"]\noffset_translation = \"exact\"\nprocessors = [{{ plugin = \"builtin:filter\", config = {{ header = \"drop\", header_value = \"yes\" }} }}]"),
    );
    let mut refract = Refract::start(&pipeline(&[("a", a), ("b", b)], &flows), &[]);
    let remote = format!("a.{topic}");
    let total_kept = records.iter().filter(|r| kept(r)).count() as i64;
    refract.wait("the kept records mirrored", || {
        b.counts(&remote).iter().sum::<i64>() == total_kept
    });
    // The exact answer: how many records before the group's position were kept.
    let want: Vec<(i32, i64)> = committed
        .iter()
        .map(|(p, c)| {
            let before = source[*p as usize][..*c as usize]
                .iter()
                .filter(|r| kept(r))
                .count() as i64;
            (*p, before)
        })
        .collect();
    wait_exact(&refract, &group, "a", "b", &remote, &want);
    for ((p, c), (_, d)) in committed.iter().zip(&want) {
        assert_eq!(
            keys_from(b, &remote, *p, *d),
            unconsumed(&source, *p, *c, kept),
            "partition {p}"
        );
    }
    assert_eq!(refract.stop(), Some(0));
}

/// An exactly-once flow: every transaction leaves a commit marker on the target, so target
/// offsets run ahead of the source's. Groups still land on their very record.
#[test]
fn transaction_markers_on_the_target_translate_exactly() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("markers");
    a.create_topic(&topic, 1);
    let group = unique("markers-group");
    let flows = flow(
        "a",
        "b",
        &format!("topics = [\"{topic}\"]\ngroups = [\"{group}\"]\noffset_translation = \"exact\"\ndelivery = \"exactly-once\""),
    );
    let mut refract = Refract::start(&pipeline(&[("a", a), ("b", b)], &flows), &[]);
    let remote = format!("a.{topic}");
    // Several small bursts, so several transactions (and markers) lie between the records.
    let mut records = Vec::new();
    for burst in 0..6 {
        let more: Vec<TestRecord> = sample_records(&format!("{topic}-{burst}"), 1, 40);
        a.produce(&topic, &more);
        records.extend(more);
        let want = records.len() as i64;
        refract.wait("the burst mirrored", || {
            b.read_isolated(&remote, "read_committed")
                .first()
                .map_or(0, Vec::len) as i64
                == want
        });
    }
    let end = b.counts(&remote).iter().sum::<i64>();
    assert!(end > 240, "markers take offsets on the target ({end})");
    let committed = [(0, 130i64)];
    a.commit_group(&group, &topic, &committed);
    let last = std::cell::RefCell::new(BTreeMap::new());
    wait_or_explain(
        "an exact checkpoint past the markers",
        || {
            let now = translate(&refract, &group, "a", "b");
            let done = now
                .get(&(remote.clone(), 0))
                .is_some_and(|(_, how)| how == "exact");
            *last.borrow_mut() = now;
            done
        },
        || format!("{:?}", last.borrow()),
    );
    let (offset, _) = last.borrow()[&(remote.clone(), 0)].clone();
    assert!(
        offset > 130,
        "the markers before it shift the record's offset ({offset})"
    );
    let want: Vec<Vec<u8>> = records[130..]
        .iter()
        .map(|r| r.key.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        keys_from_offset(b, &remote, offset, want.len()),
        want,
        "a consumer resuming at {offset} reads exactly the records from the 131st on"
    );
    assert_eq!(refract.stop(), Some(0));
}

/// A group 10,000 records behind the head fails over and back: it re-reads nothing either way.
#[test]
fn failover_and_failback_far_behind_reread_nothing() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("far");
    a.create_topic(&topic, 1);
    let records = sample_records(&topic, 1, 12_000);
    a.produce(&topic, &records);
    let group = unique("far-group");
    let committed = [(0, 2_000i64)];
    a.commit_group(&group, &topic, &committed);
    let exact = "offset_translation = \"exact\"";
    let flows = format!(
        "{}{}",
        flow("a", "b", &format!("groups = [\"{group}\"]\n{exact}")),
        flow("b", "a", &format!("groups = [\"{group}\"]\n{exact}"))
    );
    let mut refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    let remote = format!("a.{topic}");
    refract.wait("12,000 records mirrored", || {
        b.counts(&remote).iter().sum::<i64>() == 12_000
    });
    wait_exact(&refract, &group, "a", "b", &remote, &committed);
    let source = by_partition(&records, 1);
    assert_eq!(
        keys_from(&b, &remote, 0, 2_000),
        unconsumed(&source, 0, 2_000, |_| true)
    );

    // Failover: the group now works on b, on b's own topic, 10,000 records behind its head.
    let local = unique("far-back");
    b.create_topic(&local, 1);
    let newer = sample_records(&local, 1, 12_000);
    b.produce(&local, &newer);
    b.commit_group(&group, &local, &[(0, 2_000)]);
    let remote_back = format!("b.{local}");
    refract.wait("the way back mirrored", || {
        a.counts(&remote_back).iter().sum::<i64>() == 12_000
    });
    wait_exact(&refract, &group, "b", "a", &remote_back, &[(0, 2_000)]);
    assert_eq!(
        keys_from(&a, &remote_back, 0, 2_000),
        unconsumed(&by_partition(&newer, 1), 0, 2_000, |_| true)
    );
    assert_eq!(refract.stop(), Some(0));
}

/// (offset, key) of every record on partition 0 of `topic`, read with a plain consumer.
fn offsets_and_keys(broker: &Broker, topic: &str) -> Vec<(i64, Vec<u8>)> {
    use rdkafka::consumer::Consumer;
    use rdkafka::Message;
    let (low, high) = broker
        .consumer()
        .fetch_watermarks(topic, 0, std::time::Duration::from_secs(10))
        .expect("watermarks");
    let consumer = reader_at(broker, topic, low);
    let mut out: Vec<(i64, Vec<u8>)> = Vec::new();
    wait_until("the partition read to its end", || {
        while let Some(Ok(m)) = consumer.poll(std::time::Duration::from_millis(100)) {
            out.push((m.offset(), m.key().unwrap_or_default().to_vec()));
        }
        out.last().is_some_and(|(o, _)| *o >= high - 1) || high == low
    });
    out
}

/// A compacted source topic: the cleaner removed older records of each key, so the source offsets
/// have gaps. A group positioned inside a gap resumes at the first record after it.
#[test]
fn compacted_gaps_translate_to_the_next_surviving_record() {
    let a = Broker::start_with("a", &[("log.cleaner.backoff.ms", "100")]);
    let b = Broker::shared("b");
    let topic = unique("compacted");
    a.create_topic_with(
        &topic,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("delete.retention.ms", "100"),
        ],
    );
    // 200 records, half of them over 10 keys, then one filler record per check until the cleaner has removed
    // older duplicates (the active segment is never cleaned; fillers roll it).
    let dups: Vec<TestRecord> = (0..200)
        .map(|i| TestRecord {
            partition: 0,
            // Every other record repeats one of 10 keys; the others are unique, so the cleaner
            // leaves gaps between surviving records.
            key: Some(
                if i % 2 == 0 {
                    format!("dup{}", i % 20)
                } else {
                    format!("u{i}")
                }
                .into_bytes(),
            ),
            value: Some(format!("v{i}").into_bytes()),
            headers: vec![],
            timestamp: 1_650_000_000_000 + i,
        })
        .collect();
    a.produce(&topic, &dups);
    let mut fillers = 0;
    wait_until("the cleaner to compact the topic", || {
        fillers += 1;
        a.produce(
            &topic,
            &[TestRecord {
                partition: 0,
                key: Some(format!("filler{fillers}").into_bytes()),
                value: Some(b"f".to_vec()),
                headers: vec![],
                timestamp: 1_650_000_001_000 + fillers,
            }],
        );
        offsets_and_keys(&a, &topic)
            .iter()
            .filter(|(_, k)| k.starts_with(b"dup"))
            .count()
            < 100
    });
    // The cleaner may still be at work: take the topic once two reads in a row agree.
    let mut source = offsets_and_keys(&a, &topic);
    wait_until("the compacted topic to settle", || {
        let again = offsets_and_keys(&a, &topic);
        std::mem::replace(&mut source, again) == source
    });
    // The first missing offset: inside a gap.
    let gap = source
        .windows(2)
        .find(|w| w[1].0 > w[0].0 + 1)
        .map(|w| w[0].0 + 1)
        .expect("a gap");
    let want = source
        .iter()
        .position(|(o, _)| *o >= gap)
        .expect("a record after the gap") as i64;
    let group = unique("compacted-group");
    a.commit_group(&group, &topic, &[(0, gap)]);
    let flows = flow(
        "a",
        "b",
        &format!("topics = [\"{topic}\"]\ngroups = [\"{group}\"]\noffset_translation = \"exact\""),
    );
    let mut refract = Refract::start(&pipeline(&[("a", &a), ("b", b)], &flows), &[]);
    let remote = format!("a.{topic}");
    refract.wait("the surviving records mirrored", || {
        b.counts(&remote).first().copied().unwrap_or(0) >= source.len() as i64
    });
    wait_exact(&refract, &group, "a", "b", &remote, &[(0, want)]);
    let rest: Vec<Vec<u8>> = source
        .iter()
        .filter(|(o, _)| *o >= gap)
        .map(|(_, k)| k.clone())
        .collect();
    assert_eq!(keys_from(b, &remote, 0, want)[..rest.len()], rest[..]);
    assert_eq!(refract.stop(), Some(0));
}

/// With `offset_translation = "mm2"`, checkpoints are what MirrorMaker 2's OffsetSyncStore
/// algorithm (refract's port, checked against MM2's own test cases) gives for the offset syncs
/// on the topic, and `offsets translate` says `mm2`.
#[test]
fn mm2_mode_checkpoints_equal_the_mm2_algorithm_on_the_same_syncs() {
    use refract_mm2::{OffsetSync, OffsetSyncStore, Translation};
    let a = Broker::shared("a");
    let c = Broker::shared("c");
    let topic = unique("mm2-mode");
    a.create_topic(&topic, 3);
    let records = sample_records(&topic, 3, 300);
    a.produce(&topic, &records);
    let group = unique("mm2-mode-group");
    let committed = [(0, 40i64), (1, 30), (2, 33)];
    a.commit_group(&group, &topic, &committed);
    let flows = flow(
        "a",
        "c",
        &format!("topics = [\"{topic}\"]\ngroups = [\"{group}\"]\noffset_lag_max = 10\noffset_translation = \"mm2\""),
    );
    let mut refract = Refract::start(&pipeline(&[("a", a), ("c", c)], &flows), &[]);
    let remote = format!("a.{topic}");
    refract.wait("the burst mirrored", || {
        c.counts(&remote).iter().sum::<i64>() == 300
    });
    let last = std::cell::RefCell::new((BTreeMap::new(), BTreeMap::new()));
    wait_or_explain(
        "checkpoints equal to the MM2 algorithm's translation of the syncs on the topic",
        || {
            let mut store = OffsetSyncStore::new();
            for (k, v) in a.read_raw("mm2-offset-syncs.c.internal") {
                if let Ok(sync) = OffsetSync::decode(&k, &v) {
                    if sync.topic == topic {
                        store.insert(&sync);
                    }
                }
            }
            let want: BTreeMap<i32, Option<i64>> = committed
                .iter()
                .map(|(p, g)| {
                    let t = store.translate_downstream(&topic, *p, *g);
                    (
                        *p,
                        matches!(t, Translation::Offset(_))
                            .then(|| t.offset())
                            .flatten(),
                    )
                })
                .collect();
            let got = translate(&refract, &group, "a", "c");
            let done = committed.iter().all(|(p, _)| {
                got.get(&(remote.clone(), *p))
                    .is_some_and(|(o, how)| Some(*o) == want[p] && how == "mm2")
            });
            *last.borrow_mut() = (got, want);
            done
        },
        || format!("{:?}", last.borrow()),
    );
    let (got, _) = last.into_inner();
    // MM2's rule on a burst: every group is sent back to a sync well before its position.
    for (p, g) in committed {
        let (o, _) = &got[&(remote.clone(), p)];
        assert!(*o < g, "partition {p}: MM2's rule gives {o} for {g}");
    }
    assert_eq!(refract.stop(), Some(0));
}

/// The `[metrics]` table for a refract whose endpoint the test reads.
const METRICS: &str = "[metrics]\nlisten = \"127.0.0.1:0\"\n";

/// The `/status` JSON of the refract at `addr`.
/// `refract status` of the running pipeline, asked at `addr`.
fn refract_status(refract: &Refract, addr: &str) -> std::process::Output {
    Refract::output(&[
        "status",
        "--config",
        refract.pipeline.to_str().expect("path"),
        "--addr",
        addr,
    ])
}

fn status_of(addr: &str) -> serde_json::Value {
    let (code, body) = http(addr, "GET", "/status");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("/status is JSON")
}

/// The scenario: 100 records mirrored, refract stopped, 100 more produced, the source's
/// records before offset 150 deleted with `kafka-delete-records`, refract started: offsets
/// 100..=149 never reach the target. They are reported exactly (log, `/status`, `refract status`,
/// the metric, `refract verify`), nothing else is lost, and a group at 120 resumes on the target
/// at the copy of record 150.
#[test]
fn records_deleted_before_they_were_mirrored_are_reported_and_translated_past() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("deleted");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 1);
    let records = sample_records(&topic, 1, 200);
    a.produce(&topic, &records[..100]);
    let group = unique("deleted-group");
    let text = format!(
        "{METRICS}{}",
        pipeline(
            &[("a", a), ("b", b)],
            &flow(
                "a",
                "b",
                &format!("topics = [\"{topic}\"]\ngroups = [\"{group}\"]\noffset_lag_max = 10"),
            ),
        )
    );
    let mut first = Refract::start(&text, &[]);
    first.wait("the first 100 records mirrored", || {
        b.counts(&remote) == [100]
    });
    assert_eq!(first.stop(), Some(0));
    assert_eq!(a.group_offsets("refract-a-b", &topic, 1), [Some(100)]);

    a.produce(&topic, &records[100..]);
    a.delete_records(&topic, 0, 150);
    a.commit_group(&group, &topic, &[(0, 120)]);
    let started = std::time::Instant::now();
    let mut refract = Refract::start(&text, &[]);
    let line = format!("{topic}[0]: 50 records lost: source offsets 100..=149 were deleted");
    refract.wait("the gap reported", || refract.log_count(&line) == 1);
    eprintln!("gap reported {:?} after refract started", started.elapsed());
    refract.wait("the records after the gap mirrored", || {
        b.counts(&remote) == [150]
    });
    // Nothing else lost, nothing twice: the target holds source offsets 0..=99 and 150..=199.
    let want = [&records[..100], &records[150..]].concat();
    assert_eq!(b.read_all(&remote), [want], "byte for byte");
    let log = refract.log();
    let reported: Vec<&str> = log.lines().filter(|l| l.contains(&line)).collect();
    assert_eq!(reported.len(), 1, "{log}");
    for part in [
        "ERROR",
        "a->b",
        "on cluster a (retention, or a DeleteRecords request) while the flow was stopped or behind",
        &format!("before they were mirrored to {remote} on cluster b"),
        "the partition's log now starts at offset 150; going on from offset 150 (on_lost_records = \"continue\")",
    ] {
        assert!(reported[0].contains(part), "{part:?} in {}", reported[0]);
    }
    assert_eq!(
        refract.log_count("records lost"),
        1,
        "one line per gap:\n{log}"
    );
    assert!(
        !log.contains("Offset out of range"),
        "no silent offset reset:\n{log}"
    );

    let addr = refract.metrics_addr();
    let status = status_of(&addr);
    let flow = &status["flows"][0];
    assert_eq!(status["healthy"], true, "{status}");
    assert_eq!(flow["state"], "running", "{status}");
    assert_eq!(flow["records_lost"], 50, "{status}");
    let lost = flow["lost"].as_array().expect("lost list");
    assert_eq!(lost.len(), 1, "{status}");
    for (key, want) in [
        ("topic", serde_json::json!(topic)),
        ("remote_topic", serde_json::json!(remote)),
        ("partition", serde_json::json!(0)),
        ("first", serde_json::json!(100)),
        ("last", serde_json::json!(149)),
        ("count", serde_json::json!(50)),
    ] {
        assert_eq!(lost[0][key], want, "{key} in {status}");
    }
    let metrics = http(&addr, "GET", "/metrics").1;
    assert_eq!(
        series(
            &metrics,
            "refract_records_lost_total",
            &[
                ("source", "a"),
                ("target", "b"),
                ("topic", remote.as_str()),
                ("partition", "0")
            ]
        ),
        Some(50.0),
        "{metrics}"
    );
    let out = refract_status(&refract, &addr);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("records lost at the source before they were mirrored: 50"),
        "{printed}"
    );
    assert!(
        printed.contains(&format!(
            "LOST {topic}[0] 50 records (offsets 100..=149) deleted at the source before they were mirrored"
        )),
        "{printed}"
    );

    // The group at 120 (inside the gap) resumes at the copy of record 150, target offset 100,
    // and reads exactly the records after the gap.
    wait_exact(&refract, &group, "a", "b", &remote, &[(0, 100)]);
    assert_eq!(
        keys_from(b, &remote, 0, 100),
        records[150..]
            .iter()
            .map(|r| r.key.clone().unwrap_or_default())
            .collect::<Vec<_>>()
    );
    // The commit moved past the gap: a restart does not find it again.
    refract.wait("the position committed past the gap", || {
        a.group_offsets("refract-a-b", &topic, 1) == [Some(200)]
    });
    assert_eq!(refract.stop(), Some(0));

    let out = Refract::output(&[
        "verify",
        "--config",
        refract.pipeline.to_str().expect("path"),
        "--topics",
        &remote,
    ]);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{printed}");
    let lines: Vec<&str> = printed.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("LOST      {remote} partition 0")))
        .unwrap_or_else(|| panic!("a LOST line in {printed}"));
    assert!(
        lines[at].contains("source 50 records, offsets 150..200")
            && lines[at].contains("target 150 records, offsets 0..150"),
        "{printed}"
    );
    assert!(
        lines[at + 1].trim().starts_with(
            "50 records lost: source offsets 100..=149 were deleted at the source (retention, or a DeleteRecords request) before they were mirrored; the target holds the 100 records before them and every record from offset 150 on"
        ),
        "{printed}"
    );
    assert!(
        printed.contains(
            "50 records in 1 partitions were deleted at the source before they were mirrored"
        ),
        "{printed}"
    );
}

/// `on_lost_records = "halt"`: the gap is reported and the flow halts without reading or
/// committing past it.
#[test]
fn on_lost_records_halt_stops_the_flow_at_the_gap() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("halting");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 1);
    let records = sample_records(&topic, 1, 20);
    a.produce(&topic, &records[..10]);
    let text = format!(
        "{METRICS}{}",
        pipeline(
            &[("a", a), ("b", b)],
            &flow(
                "a",
                "b",
                &format!("topics = [\"{topic}\"]\non_lost_records = \"halt\""),
            ),
        )
    );
    let mut first = Refract::start(&text, &[]);
    first.wait("10 records mirrored", || b.counts(&remote) == [10]);
    assert_eq!(first.stop(), Some(0));
    a.produce(&topic, &records[10..]);
    a.delete_records(&topic, 0, 15);
    let refract = Refract::start(&text, &[]);
    let addr = refract.metrics_addr();
    refract.wait("the flow halted", || {
        status_of(&addr)["flows"][0]["state"] == "halted"
    });
    let status = status_of(&addr);
    let flow = &status["flows"][0];
    assert_eq!(flow["records_lost"], 5, "{status}");
    assert_eq!(flow["lost"][0]["first"], 10, "{status}");
    assert_eq!(flow["lost"][0]["last"], 14, "{status}");
    let halted = flow["halted"].as_str().unwrap_or_default();
    assert!(
        halted.contains(&format!(
            "flow a->b halted: {topic}[0]: 5 records lost (offsets 10..=14)"
        )) && halted
            .contains("set on_lost_records = \"continue\" and reload to go on from offset 15"),
        "{status}"
    );
    assert_eq!(
        refract.log_count(&format!(
            "{topic}[0]: 5 records lost: source offsets 10..=14"
        )),
        1,
        "{}",
        refract.log()
    );
    assert!(refract
        .log()
        .contains("halting the flow (on_lost_records = \"halt\")"));
    // Nothing read or committed past the gap.
    assert_eq!(b.counts(&remote), [10]);
    assert_eq!(a.group_offsets("refract-a-b", &topic, 1), [Some(10)]);
}

/// Records deleted while the mirror reads behind them: the source consumer reports the fetch
/// below the log start (`auto.offset.reset=error`) instead of jumping silently; the gap is exactly
/// the offsets between what was read and the new log start.
#[test]
fn records_deleted_while_the_flow_is_behind_are_reported_at_the_fetch() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("behind");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 1);
    let records = sample_records(&topic, 1, 60);
    // One record per batch, and a consumer that fetches one batch at a time only when its
    // queue is empty: under a 10 records/s limit the flow reads well behind the head.
    a.produce_with(&topic, &records, &[("batch.size", "1"), ("linger.ms", "0")]);
    let text = format!(
        "{METRICS}{}[clusters.a.consumer]\n\"queued.min.messages\" = \"1\"\n\"fetch.message.max.bytes\" = \"1\"\n",
        pipeline(
            &[("a", a), ("b", b)],
            &flow(
                "a",
                "b",
                &format!("topics = [\"{topic}\"]\nmax_records_per_second = 10"),
            ),
        )
    );
    let refract = Refract::start(&text, &[]);
    let mirrored = || b.counts(&remote).first().copied().unwrap_or(0);
    refract.wait("some records mirrored", || mirrored() >= 5);
    a.delete_records(&topic, 0, 40);
    let deleted = std::time::Instant::now();
    refract.wait("the gap reported", || {
        refract.log_count("records lost: source offsets") == 1
    });
    eprintln!(
        "gap found while reading {:?} after the deletion, {} records mirrored by then",
        deleted.elapsed(),
        mirrored()
    );
    refract.wait("the rest mirrored", || {
        read_keys(b, &remote).last() == records[59].key.as_ref()
    });
    let addr = refract.metrics_addr();
    let status = status_of(&addr);
    let lost = &status["flows"][0]["lost"];
    let first = lost[0]["first"].as_i64().expect("a gap in /status");
    assert!((5..40).contains(&first), "{status}");
    assert_eq!(lost[0]["last"], 39, "{status}");
    assert_eq!(lost[0]["count"], 40 - first, "{status}");
    assert_eq!(status["flows"][0]["records_lost"], 40 - first, "{status}");
    let line = format!(
        "{topic}[0]: {} records lost: source offsets {first}..=39 were deleted on cluster a (retention, or a DeleteRecords request) while the flow was behind",
        40 - first
    );
    assert_eq!(refract.log_count(&line), 1, "{}", refract.log());
    let want = [&records[..first as usize], &records[40..]].concat();
    assert_eq!(
        b.read_all(&remote),
        [want],
        "nothing else lost, nothing twice"
    );
}

/// The keys of single-partition `topic` on `broker`, in order.
fn read_keys(broker: &Broker, topic: &str) -> Vec<Vec<u8>> {
    broker
        .read_all(topic)
        .first()
        .map(|p| {
            p.iter()
                .map(|r| r.key.clone().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default()
}

/// The scenario: 100 records mirrored, the source topic deleted and created again
/// (1 partition), 10 records produced to it. The flow finds the new topic id within a discovery
/// (`refresh_topics_interval = "1s"` here), stops that topic and says what to do; nothing of the new
/// topic reaches the remote topic. Asked to (`on_recreated_topic = "rewind"`, a reload), it
/// mirrors the new topic from its beginning after the old one — the restarted flow recognises
/// the recreated topic by the id its last commit recorded — and a group at offset 5 of the new
/// topic translates to the copy of that record.
#[test]
fn a_recreated_source_topic_is_stopped_then_rewound_on_request() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("recreated");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 1);
    let old = sample_records(&format!("{topic}-old"), 1, 100);
    a.produce(&topic, &old);
    let text = |on: &str| {
        format!(
            "{METRICS}{}",
            pipeline(
                &[("a", a), ("b", b)],
                &flow(
                    "a",
                    "b",
                    &format!(
                        "topics = [\"{topic}\"]\noffset_translation = \"exact\"\non_recreated_topic = \"{on}\""
                    ),
                ),
            )
        )
    };
    let refract = Refract::start(&text("stop"), &[]);
    refract.wait("the old topic mirrored and committed", || {
        b.counts(&remote) == [100] && b.group_offsets("refract-a-b", &remote, 1) == [Some(100)]
    });

    let deleted = std::time::Instant::now();
    a.recreate_topic(&topic, 1);
    let recreated = deleted.elapsed();
    let new = sample_records(&format!("{topic}-new"), 1, 10);
    a.produce(&topic, &new);
    let found =
        format!("source topic {topic} on cluster a was deleted and created again (topic id ");
    refract.wait("the recreated topic reported", || {
        refract.log_count(&found) == 1
    });
    eprintln!(
        "recreated topic found {:?} after its deletion (deleted and created again in {recreated:?})",
        deleted.elapsed()
    );
    let addr = refract.metrics_addr();
    let status = status_of(&addr);
    let degraded = &status["flows"][0]["degraded"][0];
    assert_eq!(degraded["reason"], "recreated", "{status}");
    assert_eq!(degraded["topic"], topic.as_str(), "{status}");
    assert_eq!(degraded["partition"], 0, "{status}");
    let error = degraded["error"].as_str().expect("an error");
    assert!(
        error.contains("set on_recreated_topic = \"rewind\" and reload"),
        "{error}"
    );
    let out = refract_status(&refract, &addr);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{printed}");
    assert!(
        printed.contains(&format!("DEGRADED {topic}[0] recreated")),
        "{printed}"
    );
    // The flow saw the new topic (the report above); none of its records were mirrored.
    let old_keys: Vec<Vec<u8>> = old
        .iter()
        .map(|r| r.key.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        read_keys(b, &remote),
        old_keys,
        "nothing of the new topic mixed in"
    );

    // Rewind on request: the new topic follows the old one in the remote topic.
    std::fs::write(&refract.pipeline, text("rewind")).expect("edit the pipeline");
    let mut want = old_keys.clone();
    want.extend(new.iter().map(|r| r.key.clone().unwrap_or_default()));
    refract.wait("the new topic mirrored after the old one", || {
        read_keys(b, &remote) == want
    });
    assert_eq!(
        refract.log_count(&format!(
            "mirroring {topic} again from its beginning into {remote} on cluster b (on_recreated_topic = \"rewind\")"
        )),
        1,
        "{}",
        refract.log()
    );
    let group = unique("recreated-group");
    a.commit_group(&group, &topic, &[(0, 5)]);
    wait_exact(&refract, &group, "a", "b", &remote, &[(0, 105)]);
}

/// A remote topic deleted on the target while the flow runs: the flow stops mirroring into it
/// and does not create it again (another topic of the flow created and mirrored later shows
/// that discovery went on). Asked to rewind (a reload), the restarted flow recognises the
/// remote topic it creates as new by the id its last source commit recorded, and mirrors the
/// source topic into it again from its beginning.
#[test]
fn a_deleted_remote_topic_is_stopped_then_mirrored_again_on_request() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let prefix = unique("gone");
    let (one, two) = (format!("{prefix}-one"), format!("{prefix}-two"));
    let (remote_one, remote_two) = (format!("a.{one}"), format!("a.{two}"));
    a.create_topic(&one, 1);
    let records = sample_records(&one, 1, 60);
    a.produce(&one, &records[..50]);
    let text = |on: &str| {
        format!(
            "{METRICS}{}",
            pipeline(
                &[("a", a), ("b", b)],
                &flow(
                    "a",
                    "b",
                    &format!("topics = [\"{prefix}-.*\"]\non_recreated_topic = \"{on}\""),
                ),
            )
        )
    };
    let refract = Refract::start(&text("stop"), &[]);
    // Mirrored, and committed with the remote topic's id (known from the discovery after it
    // was created).
    refract.wait(
        "the topic mirrored and its remote topic's id committed",
        || {
            b.counts(&remote_one) == [50]
                && a.committed_metadata("refract-a-b", &one, 0)
                    .is_some_and(|m| !m.ends_with("remote=-"))
        },
    );

    b.delete_topic(&remote_one);
    let gone = format!("remote topic {remote_one} on cluster b (topic id ");
    refract.wait("the deleted remote topic reported", || {
        refract.log_count(&gone) == 1
    });
    a.produce(&one, &records[50..]);
    a.create_topic(&two, 1);
    a.produce(&two, &sample_records(&two, 1, 5));
    refract.wait("a later topic created and mirrored", || {
        b.counts(&remote_two) == [5]
    });
    assert!(
        !b.topics().contains_key(&remote_one),
        "the deleted remote topic is not created again while stopped"
    );
    let status = status_of(&refract.metrics_addr());
    let degraded = &status["flows"][0]["degraded"][0];
    assert_eq!(degraded["reason"], "recreated", "{status}");
    assert_eq!(degraded["topic"], one.as_str(), "{status}");

    // Rewind on request: the whole source topic goes into the new remote topic.
    std::fs::write(&refract.pipeline, text("rewind")).expect("edit the pipeline");
    let want: Vec<Vec<u8>> = records
        .iter()
        .map(|r| r.key.clone().unwrap_or_default())
        .collect();
    refract.wait(
        "the source topic mirrored again into a new remote topic",
        || read_keys(b, &remote_one) == want,
    );
    assert_eq!(
        refract.log_count(&format!(
            "mirroring {one} again from its beginning into {remote_one} on cluster b (on_recreated_topic = \"rewind\")"
        )),
        1,
        "{}",
        refract.log()
    );
}
