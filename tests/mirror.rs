//! Integration tests: the `refract` binary mirroring between real Apache Kafka brokers through real
//! WebAssembly policy components.

use std::collections::BTreeSet;
use std::time::Duration;

use rdkafka::consumer::Consumer;

use crate::support::*;

/// Mirrors 3 topics × 4 partitions × 250 records with `policy` and checks the target holds the
/// same records, per partition, in order, byte for byte, under the names `remote` gives.
fn mirror_and_compare(policy: &str, topics: &[&str], remote: impl Fn(&str) -> String) {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let mut sent = Vec::new();
    for t in topics {
        a.create_topic(t, 4);
        let records = sample_records(t, 4, 1000); // 250 per partition
        a.produce(t, &records);
        sent.push((t.to_string(), records));
    }
    let flows = format!("[[flow]]\nsource = \"a\"\ntarget = \"b\"\nrefresh_topics_interval = \"2s\"\ncommit_interval = \"500ms\"\nreplication_factor = 1\n{policy}\n");
    let mut refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    for (t, records) in &sent {
        let r = remote(t);
        refract.wait(&format!("{r} to hold 1000 records"), || {
            b.counts(&r).iter().sum::<i64>() >= 1000
        });
        assert_eq!(b.topics()[&r], 4, "{r} has the source's partition count");
        let raw = b.read_all_raw(&r);
        for rec in raw.iter().flatten() {
            let stamps: Vec<_> = rec
                .headers
                .iter()
                .filter(|(k, _)| k == PROVENANCE)
                .collect();
            assert_eq!(stamps.len(), 1, "{r}: one provenance header per record");
            assert_eq!(
                stamps[0].1.as_deref(),
                Some(&b"a"[..]),
                "{r}: provenance names the source"
            );
        }
        let got = b.read_all(&r);
        let want = by_partition(records, 4);
        assert_eq!(
            got.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![250; 4],
            "{r}: per-partition counts"
        );
        for p in 0..4 {
            for (i, (g, w)) in got[p].iter().zip(&want[p]).enumerate() {
                assert_eq!(g, w, "{r} partition {p} record {i}");
            }
        }
    }
    assert_eq!(
        refract.stop(),
        Some(0),
        "clean shutdown; log:\n{}",
        refract.log()
    );
    let mut want_topics: Vec<String> = topics.iter().map(|t| remote(t)).collect();
    want_topics.sort();
    assert_eq!(
        b.user_topics(),
        want_topics,
        "nothing else is created on the target"
    );
}

#[test]
fn default_policy_mirrors_records_byte_for_byte() {
    let topics = [unique("orders"), unique("payments"), unique("inventory")];
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    mirror_and_compare("", &names, |t| format!("a.{t}"));
}

#[test]
fn default_policy_with_custom_separator() {
    let topics = [unique("orders")];
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    mirror_and_compare(
        "policy = { plugin = \"builtin:default\", config = { separator = \"_\" } }",
        &names,
        |t| format!("a_{t}"),
    );
}

#[test]
fn identity_policy_keeps_names() {
    let topics = [unique("orders"), unique("payments"), unique("inventory")];
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    mirror_and_compare(
        "policy = { plugin = \"builtin:identity\" }",
        &names,
        str::to_string,
    );
}

#[test]
fn rename_plugin_loaded_from_its_file() {
    let base = unique("orders");
    let topics = [
        format!("{base}-v1"),
        unique("payments"),
        format!("{base}-legacy"),
    ];
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let plugin = Refract::guest("rename.wasm");
    let policy = format!(
        "policy = {{ plugin = \"{}\", config = {{ rules = [{{ match = \"(.*)-v1\", replace = \"$1\" }}, {{ match = \"(.*)-legacy\", replace = \"$1-old\" }}] }} }}",
        plugin.display()
    );
    let b2 = base.clone();
    mirror_and_compare(&policy, &names, move |t| {
        if t == format!("{b2}-v1") {
            b2.clone()
        } else if t == format!("{b2}-legacy") {
            format!("{b2}-old")
        } else {
            t.to_string()
        }
    });
}

#[test]
fn topic_created_after_start_is_mirrored() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let first = unique("first");
    a.create_topic(&first, 2);
    a.produce(&first, &sample_records(&first, 2, 20));
    let flows = "[[flow]]\nsource = \"a\"\ntarget = \"b\"\nrefresh_topics_interval = \"2s\"\ncommit_interval = \"500ms\"\n";
    let mut refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], flows), &[]);
    refract.wait("the first topic to be mirrored", || {
        b.counts(&format!("a.{first}")).iter().sum::<i64>() == 20
    });

    let late = unique("late");
    a.create_topic(&late, 3);
    let records = sample_records(&late, 3, 30);
    a.produce(&late, &records);
    let remote = format!("a.{late}");
    refract.wait("the late topic to be mirrored", || {
        b.counts(&remote).iter().sum::<i64>() == 30
    });
    assert_eq!(b.topics()[&remote], 3);
    assert_eq!(b.read_all(&remote), by_partition(&records, 3));
    assert!(
        refract
            .log()
            .contains(&format!("mirroring {late} -> {remote}")),
        "{}",
        refract.log()
    );
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn excluded_and_internal_topics_are_not_created() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let keep = unique("keep");
    let skip = unique("skip");
    let internal_dot = format!("{}.internal", unique("x"));
    let internal_dash = format!("{}-internal", unique("y"));
    let dunder = format!("__{}", unique("z"));
    for t in [&keep, &skip, &internal_dot, &internal_dash, &dunder] {
        a.create_topic(t, 1);
        a.produce(t, &sample_records(t, 1, 5));
    }
    // topics_exclude replaces MM2's default list, so internal topics are kept out by the policy.
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\".*\"]\ntopics_exclude = [\"{skip}\"]\nrefresh_topics_interval = \"1s\"\n"
    );
    let mut refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    refract.wait("the kept topic to be mirrored", || {
        b.counts(&format!("a.{keep}")).iter().sum::<i64>() == 5
    });
    // A topic created now is mirrored by a later discovery round, which saw the others again.
    let marker = unique("marker");
    a.create_topic(&marker, 1);
    refract.wait("a discovery round after the start", || {
        b.topics().contains_key(&format!("a.{marker}"))
    });
    let mut want = vec![format!("a.{keep}"), format!("a.{marker}")];
    want.sort();
    assert_eq!(b.user_topics(), want);
    assert!(refract.running());
    refract.stop();
}

#[test]
fn active_active_never_loops() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("orders");
    a.create_topic(&topic, 2);
    b.create_topic(&topic, 2);
    a.produce(&topic, &sample_records("from-a", 2, 40));
    b.produce(&topic, &sample_records("from-b", 2, 60));
    let flows = "[[flow]]\nsource = \"a\"\ntarget = \"b\"\nrefresh_topics_interval = \"1s\"\n\n[[flow]]\nsource = \"b\"\ntarget = \"a\"\nrefresh_topics_interval = \"1s\"\n";
    let mut refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], flows), &[]);
    refract.wait("a's topic on b", || {
        b.counts(&format!("a.{topic}")).iter().sum::<i64>() == 40
    });
    refract.wait("b's topic on a", || {
        a.counts(&format!("b.{topic}")).iter().sum::<i64>() == 60
    });
    // Topics created now are mirrored by discovery rounds that also saw the remote copies:
    // those must never be mirrored back.
    let (ma, mb) = (unique("marker-a"), unique("marker-b"));
    a.create_topic(&ma, 1);
    b.create_topic(&mb, 1);
    refract.wait("a discovery round on each side", || {
        b.topics().contains_key(&format!("a.{ma}")) && a.topics().contains_key(&format!("b.{mb}"))
    });
    let on_a: BTreeSet<String> = a.user_topics().into_iter().collect();
    let on_b: BTreeSet<String> = b.user_topics().into_iter().collect();
    assert_eq!(
        on_a,
        BTreeSet::from([
            topic.clone(),
            format!("b.{topic}"),
            ma.clone(),
            format!("b.{mb}")
        ])
    );
    assert_eq!(
        on_b,
        BTreeSet::from([
            topic.clone(),
            format!("a.{topic}"),
            mb.clone(),
            format!("a.{ma}")
        ])
    );
    assert_eq!(
        a.counts(&topic).iter().sum::<i64>(),
        40,
        "local topic untouched"
    );
    assert_eq!(
        b.counts(&topic).iter().sum::<i64>(),
        60,
        "local topic untouched"
    );
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn dedicated_mode_runs_only_flows_into_the_named_cluster() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let ta = unique("ta");
    let tb = unique("tb");
    a.create_topic(&ta, 1);
    b.create_topic(&tb, 1);
    a.produce(&ta, &sample_records(&ta, 1, 10));
    b.produce(&tb, &sample_records(&tb, 1, 10));
    let flows = "[[flow]]\nsource = \"a\"\ntarget = \"b\"\nrefresh_topics_interval = \"1s\"\n\n[[flow]]\nsource = \"b\"\ntarget = \"a\"\nrefresh_topics_interval = \"1s\"\n";
    let mut refract = Refract::start(
        &pipeline(&[("a", &a), ("b", &b)], flows),
        &["--clusters", "b"],
    );
    refract.wait("a->b to mirror", || {
        b.counts(&format!("a.{ta}")).iter().sum::<i64>() == 10
    });
    // A topic created on b now would be mirrored by b->a's discovery; one created on a is
    // mirrored by a->b's, which proves discovery rounds ran meanwhile.
    let (ma, mb) = (unique("marker-a"), unique("marker-b"));
    b.create_topic(&mb, 1);
    a.create_topic(&ma, 1);
    refract.wait("a->b's discovery of a topic created after b's", || {
        b.topics().contains_key(&format!("a.{ma}"))
    });
    let mut want = vec![ta.clone(), ma.clone()];
    want.sort();
    assert_eq!(a.user_topics(), want, "b->a must not run");
    assert_eq!(refract.stop(), Some(0));
}

/// Kill -9 in the middle of mirroring 20,000 records, restart, and find every record.
#[test]
fn sigkill_mid_flow_loses_nothing() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("bulk");
    a.create_topic(&topic, 4);
    let records: Vec<TestRecord> = (0..20_000)
        .map(|i| TestRecord {
            partition: i % 4,
            key: Some(format!("k{i}").into_bytes()),
            // ~1 KiB values: 20 MiB take the mirror a few seconds, so the kill lands mid-flow.
            value: Some(format!("v{i}-{}", "x".repeat(1000)).into_bytes()),
            headers: vec![],
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect();
    a.produce(&topic, &records);
    // No heartbeats: refract's duplicate count covers every mirrored partition, and a heartbeat
    // mirrored twice would count too; this test compares it with the data topic's duplicates.
    let flows = "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ncommit_interval = \"200ms\"\nemit_heartbeats = false\n";
    let text = pipeline(&[("a", &a), ("b", &b)], flows);
    let mut refract = Refract::start(&text, &[]);
    let remote = format!("a.{topic}");
    // Kill as soon as the first records land, watching with one long-lived client so the
    // kill is not late.
    let watcher = b.consumer();
    let landed = |c: &rdkafka::consumer::BaseConsumer| -> i64 {
        (0..4)
            .filter_map(|p| c.fetch_watermarks(&remote, p, Duration::from_secs(1)).ok())
            .map(|(lo, hi)| hi - lo)
            .sum()
    };
    refract.wait("mirroring to be under way", || landed(&watcher) > 0);
    refract.kill();
    let at_kill: i64 = b.counts(&remote).iter().sum();
    assert!(
        at_kill < 20_000,
        "the kill must land mid-flow (target had {at_kill})"
    );
    refract.restart(&[]);
    let want = by_partition(&records, 4);
    refract.wait("all records on the target", || {
        holds_last_records(&want, &b.read_all(&remote))
    });
    let duplicates = assert_mirrored_in_order(&want, &b.read_all(&remote));
    let log = refract.log();
    let counted = refract.counted_duplicates();
    println!("sigkill at {at_kill} of 20000 records: 0 lost, {duplicates} duplicates on the target, {counted} counted by refract");
    if duplicates > 0 {
        assert!(
            counted > 0,
            "refract logs the duplicates it re-sends:\n{log}"
        );
    }
    assert!(
        counted <= duplicates,
        "refract never over-counts duplicates ({counted} > {duplicates})"
    );
    assert_eq!(refract.stop(), Some(0));
}

/// A remote topic that already exists is used as it is; when it has fewer partitions than the
/// source, the flow adds the missing ones (CreatePartitions) and mirrors every partition.
#[test]
fn existing_remote_topic_with_fewer_partitions() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("narrow");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 4);
    b.create_topic(&remote, 2);
    let records = sample_records(&topic, 4, 40);
    a.produce(&topic, &records);
    let flows = "[[flow]]\nsource = \"a\"\ntarget = \"b\"\nrefresh_topics_interval = \"1s\"\n";
    let mut refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], flows), &[]);
    refract.wait("all four partitions mirrored", || {
        b.topics().get(&remote) == Some(&4) && b.counts(&remote) == vec![10, 10, 10, 10]
    });
    assert_eq!(b.read_all(&remote), by_partition(&records, 4));
    assert!(
        refract
            .log()
            .contains(&format!("added partitions to {remote} on b: 2 -> 4")),
        "{}",
        refract.log()
    );
    assert_eq!(refract.stop(), Some(0));
}

/// A replication policy that maps a data topic onto Schema Registry's `_schemas` has that topic
/// refused, with an error naming the flow, the plugin, the source topic, the remote name and whose
/// topic it is; nothing is written to `_schemas` and the flow's other topics are mirrored. One
/// that names the checkpoints topic after Kafka Connect's offsets topic never starts the flow.
#[test]
fn policy_names_onto_reserved_topics_are_refused() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let hijacked = unique("hijacked");
    let plain = unique("plain");
    for t in [&hijacked, &plain] {
        a.create_topic(t, 1);
        a.produce(t, &sample_records(t, 1, 5));
    }
    let policy = Refract::guest("misbehaving_policy.wasm");
    let flow = |config: &str| {
        format!(
            "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{hijacked}\", \"{plain}\"]\nrefresh_topics_interval = \"1s\"\npolicy = {{ plugin = \"{}\", config = {{ {config} }} }}\n",
            policy.display()
        )
    };
    let clusters = [("a", a), ("b", b)];
    let mut refract = Refract::start(
        &pipeline(
            &clusters,
            &flow(&format!(
                "remote_topic = \"_schemas\", remote_topic_of = \"{hijacked}\""
            )),
        ),
        &[],
    );
    refract.wait("the plain topic mirrored", || {
        b.counts(&format!("a.{plain}")).iter().sum::<i64>() == 5
    });
    let refusal = format!("not mirroring {hijacked}: flow a->b: the replication policy {} names the remote topic of source topic {hijacked} `_schemas` on cluster b, which is Schema Registry's topic (`_schemas`)", policy.display());
    refract.wait("the refusal logged", || refract.log().contains(&refusal));
    assert!(
        !b.topics().contains_key("_schemas"),
        "_schemas created on b"
    );
    assert_eq!(refract.stop(), Some(0));

    let plain_too = unique("plain");
    a.create_topic(&plain_too, 1);
    a.produce(&plain_too, &sample_records(&plain_too, 1, 5));
    let flows = flow("checkpoints_topic = \"connect-offsets\"")
        .replace(&format!("\"{plain}\""), &format!("\"{plain_too}\""));
    let mut refract = Refract::start(&pipeline(&clusters, &flows), &[]);
    refract.wait("the refusal logged", || {
        let log = refract.log();
        log.contains("names the checkpoints topic `connect-offsets` on cluster b, which is one of Kafka Connect's topics")
    });
    assert_eq!(
        b.counts(&format!("a.{plain_too}")).iter().sum::<i64>(),
        0,
        "the flow did not start"
    );
    assert!(!b.topics().contains_key("connect-offsets"));
    refract.stop();
}

/// A header name that is not UTF-8 is legal on the wire (C clients write them). Such records,
/// written through librdkafka's C API, are mirrored with every name byte for byte, both on the
/// plain path and through a processor chain (the plugin sees the name as lossy text, the record
/// it keeps leaves as it came), and `refract verify` reads them too. Before, rdkafka's header
/// reader panicked on the first such record and the flow halted again after every restart.
#[test]
fn header_names_that_are_not_utf8_are_mirrored_byte_for_byte() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let (plain, chained) = (unique("c-client"), unique("c-client-chain"));
    let names: [&[u8]; 4] = [b"\xff\xfe-bin", b"plain", b"caf\xc3\xa9", b"half \xe2\x82"];
    let values: [Option<&[u8]>; 4] = [Some(b"v1"), None, Some(b""), Some(b"\x00\x01")];
    let headers: Vec<(&[u8], Option<&[u8]>)> = names.into_iter().zip(values).collect();
    let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = headers
        .iter()
        .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
        .collect();
    for t in [&plain, &chained] {
        a.create_topic(t, 2);
        for i in 0..6 {
            a.produce_c_api(t, i % 2, format!("v{i}").as_bytes(), &headers);
        }
    }
    // Two aliases of the same broker: one flow without processors, one through a filter that
    // keeps every record (it drops `env = test`, which none of them has).
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{plain}\"]\ncommit_interval = \"300ms\"\nreplication_factor = 1\n\
         [[flow]]\nsource = \"c\"\ntarget = \"b\"\ntopics = [\"{chained}\"]\ncommit_interval = \"300ms\"\nreplication_factor = 1\n\
         processors = [{{ plugin = \"builtin:filter\", config = {{ header = \"env\", header_value = \"test\" }} }}]\n"
    );
    let mut refract = Refract::start(&pipeline(&[("a", a), ("c", a), ("b", b)], &flows), &[]);
    for (alias, t) in [("a", &plain), ("c", &chained)] {
        let remote = format!("{alias}.{t}");
        refract.wait(&format!("{remote} to hold 6 records"), || {
            b.topics().contains_key(&remote) && b.counts(&remote) == vec![3, 3]
        });
        for (p, records) in b.read_headers_c_api(&remote).iter().enumerate() {
            for (i, got) in records.iter().enumerate() {
                let (stamp, rest): (Vec<_>, Vec<_>) = got
                    .iter()
                    .cloned()
                    .partition(|(k, _)| k == PROVENANCE.as_bytes());
                assert_eq!(
                    rest, want,
                    "{remote} partition {p} record {i}: every header"
                );
                assert_eq!(
                    stamp,
                    vec![(
                        PROVENANCE.as_bytes().to_vec(),
                        Some(alias.as_bytes().to_vec())
                    )],
                    "{remote} partition {p} record {i}: one provenance stamp"
                );
            }
        }
    }
    assert_eq!(
        refract.stop(),
        Some(0),
        "clean shutdown; log:\n{}",
        refract.log()
    );
    assert!(!refract.log().contains("panicked"), "{}", refract.log());
    let config = refract.pipeline.clone();
    let out = Refract::output(&["verify", "--config", config.to_str().expect("utf-8 path")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "verify reads them too:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("OK ")).count(),
        4,
        "{stdout}"
    );
}
