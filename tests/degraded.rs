//! A partition that cannot make progress is degraded, not fatal: on real Apache Kafka brokers, a
//! record larger than the remote topic's `max.message.bytes` stops its partition (paused, retried
//! with backoff, its commit held before the record) while the other partition keeps flowing;
//! `/health`, `/status`, `/metrics`, `refract status` and the log say so, and the partition
//! recovers by itself once the target accepts the record.

use rdkafka::admin::{AdminOptions, AlterConfig, ResourceSpecifier};

use crate::support::*;

/// `n` small records for `partition`, tagged `tag`.
fn small(tag: &str, partition: i32, n: usize) -> Vec<TestRecord> {
    (0..n)
        .map(|i| TestRecord {
            partition,
            key: Some(format!("{tag}-{partition}-{i}").into_bytes()),
            value: Some(format!("{tag}-value-{i}-\u{00e9}\u{0000}").into_bytes()),
            headers: vec![("h".to_string(), Some(vec![1, 2, (i % 256) as u8]))],
            timestamp: 1_600_000_000_000 + i as i64,
        })
        .collect()
}

#[test]
fn an_oversized_record_degrades_its_partition_only_and_recovers_once_accepted() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("big");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 2);
    // The remote topic exists with a 2 KiB record limit; the flow does not sync topic configs,
    // so refract mirrors into it as it is.
    b.create_topic_with(&remote, 2, &[("max.message.bytes", "2048")]);
    let before = [small("before", 0, 5), small("before", 1, 10)].concat();
    a.produce(&topic, &before);
    let text = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n{}",
        pipeline(
            &[("a", &a), ("b", &b)],
            &format!("[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nrefresh_topics_interval = \"1s\"\ncommit_interval = \"500ms\"\nreplication_factor = 1\nsync_topic_configs = false\n")
        )
    );
    let refract = Refract::start(&text, &[]);
    let addr = refract.metrics_addr();
    refract.wait("the first records mirrored", || {
        b.counts(&remote) == [5, 10]
    });
    assert_eq!(
        http(&addr, "GET", "/health"),
        (200, "a->b: running\n".to_string())
    );

    // Partition 0: a 10 KiB record between small ones; partition 1: small records only.
    let mut big = small("after", 0, 1);
    big[0].value = Some(vec![0xAB; 10 * 1024]);
    let after0 = [big, small("after", 0, 5)].concat();
    a.produce(&topic, &after0);
    let errors_labels = [
        ("flow", "a->b"),
        ("topic", topic.as_str()),
        ("partition", "0"),
        ("reason", "record_too_large"),
    ];
    let gauge_labels = [
        ("flow", "a->b"),
        ("topic", topic.as_str()),
        ("partition", "0"),
    ];
    let metrics = || http(&addr, "GET", "/metrics").1;
    refract.wait("partition 0 to fail with record_too_large", || {
        series(&metrics(), "refract_partition_errors_total", &errors_labels)
            .is_some_and(|n| n >= 1.0)
    });
    // The other partition keeps flowing while partition 0 is degraded.
    let after1 = small("after", 1, 10);
    a.produce(&topic, &after1);
    refract.wait("partition 1 mirrored while partition 0 is degraded", || {
        b.counts(&remote)[1] == 20
    });
    let got = b.read_all(&remote);
    let want = by_partition(&[before.clone(), after1.clone()].concat(), 2);
    assert_eq!(got[1], want[1], "partition 1 byte for byte");
    assert_eq!(got[0], want[0], "partition 0 up to the big record");

    // A retry provably happened (and failed) before the log is checked for a single warning.
    refract.wait("a failed retry of partition 0", || {
        series(&metrics(), "refract_partition_errors_total", &errors_labels)
            .is_some_and(|n| n >= 2.0)
    });
    let body = metrics();
    assert_eq!(
        series(&body, "refract_partition_degraded", &gauge_labels),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        series(
            &body,
            "refract_partition_degraded",
            &[
                ("flow", "a->b"),
                ("topic", topic.as_str()),
                ("partition", "1")
            ]
        ),
        None,
        "only partitions that failed have series"
    );
    assert_eq!(
        series(
            &body,
            "refract_flow_state",
            &[("flow", "a->b"), ("state", "degraded")]
        ),
        Some(1.0),
        "{body}"
    );
    // refract_flow_up stays 1 (its other partition flows): the cause series says why.
    for (cause, want) in [("partition", 1.0), ("recreated", 0.0), ("unreachable", 0.0)] {
        assert_eq!(
            series(
                &body,
                "refract_flow_degraded",
                &[("cause", cause), ("flow", "a->b")]
            ),
            Some(want),
            "{cause}: {body}"
        );
    }
    assert_eq!(
        b.counts(&remote)[0],
        5,
        "nothing of partition 0 past the big record"
    );
    let warning = format!("{topic}[0] degraded (record_too_large) at source offset 5");
    assert_eq!(refract.log_count(&warning), 1, "{}", refract.log());
    assert_eq!(
        refract.log_count("degraded ("),
        1,
        "one warning, not one per retry:\n{}",
        refract.log()
    );
    assert!(
        !refract.log().contains("flow failed"),
        "the flow does not restart:\n{}",
        refract.log()
    );
    // Progress is committed per partition: all of partition 1, partition 0 up to the big record.
    refract.wait("partition 1's progress committed", || {
        a.group_offsets("refract-a-b", &topic, 2)[1] == Some(20)
    });
    assert_eq!(a.group_offsets("refract-a-b", &topic, 2)[0], Some(5));

    let (code, health) = http(&addr, "GET", "/health");
    assert_eq!(
        (code, health.as_str()),
        (
            503,
            format!("a->b: degraded\nflow a->b degraded: {topic}[0] record_too_large: writing to cluster b: Broker: Message size too large (offset 5)\n").as_str()
        )
    );
    let (code, status) = http(&addr, "GET", "/status");
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&status).expect("json");
    assert_eq!(status["healthy"], false);
    let flow = &status["flows"][0];
    assert_eq!(flow["state"], "degraded", "{status}");
    let degraded = flow["degraded"].as_array().expect("degraded list");
    assert_eq!(degraded.len(), 1, "{status}");
    let d = &degraded[0];
    assert_eq!(d["topic"], topic.as_str());
    assert_eq!(d["remote_topic"], remote.as_str());
    assert_eq!(d["partition"], 0);
    assert_eq!(d["reason"], "record_too_large");
    assert_eq!(
        d["error"],
        "writing to cluster b: Broker: Message size too large"
    );
    assert_eq!(d["offset"], 5);
    assert!(d["retries"].as_u64().is_some_and(|n| n >= 1), "{d}");
    assert!(
        d["since_ms"]
            .as_i64()
            .is_some_and(|ms| ms > 1_600_000_000_000),
        "{d}"
    );
    let out = refract_status(&refract, &addr);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{printed}");
    assert!(printed.contains("NOT healthy"), "{printed}");
    assert!(printed.contains("flow a->b: degraded"), "{printed}");
    assert!(
        printed.contains(&format!("DEGRADED {topic}[0] record_too_large at offset 5")),
        "{printed}"
    );

    // Fix the cause: the target accepts the record now, and the next retry delivers it.
    raise_record_limit(&b, &remote);
    refract.wait("partition 0 mirrored to its end after the fix", || {
        b.counts(&remote)[0] == 11
    });
    let got = b.read_all(&remote);
    let want = by_partition(&[before, after0, after1].concat(), 2);
    assert_eq!(got, want, "every record, once, in order, byte for byte");
    refract.wait("the degraded gauges back to 0 and /health 200", || {
        let body = metrics();
        series(&body, "refract_partition_degraded", &gauge_labels) == Some(0.0)
            && series(
                &body,
                "refract_flow_degraded",
                &[("cause", "partition"), ("flow", "a->b")],
            ) == Some(0.0)
            && http(&addr, "GET", "/health") == (200, "a->b: running\n".to_string())
    });
    let (_, status) = http(&addr, "GET", "/status");
    let status: serde_json::Value = serde_json::from_str(&status).expect("json");
    assert_eq!(status["flows"][0]["state"], "running", "{status}");
    assert_eq!(status["flows"][0]["degraded"], serde_json::json!([]));
    assert_eq!(
        refract.log_count(&format!("{topic}[0] recovered: record_too_large cleared")),
        1,
        "{}",
        refract.log()
    );
    let out = refract_status(&refract, &addr);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    refract.wait(
        "partition 0's progress committed past the big record",
        || a.group_offsets("refract-a-b", &topic, 2) == [Some(11), Some(20)],
    );
}

/// `refract status` against the running process.
fn refract_status(refract: &Refract, addr: &str) -> std::process::Output {
    Refract::output(&[
        "status",
        "--config",
        refract.pipeline.to_str().expect("path"),
        "--addr",
        addr,
    ])
}

/// Raises `topic`'s `max.message.bytes` on `broker` to 1 MiB and waits until the broker says so.
fn raise_record_limit(broker: &Broker, topic: &str) {
    let change =
        AlterConfig::new(ResourceSpecifier::Topic(topic)).set("max.message.bytes", "1048576");
    let results = futures_executor::block_on(
        broker
            .admin()
            .alter_configs([&change], &AdminOptions::new()),
    )
    .expect("alter configs");
    for r in results {
        r.unwrap_or_else(|(resource, e)| panic!("altering {resource:?}: {e}"));
    }
    wait_until(&format!("{topic} to accept 1 MiB records"), || {
        broker
            .topic_configs(topic)
            .get("max.message.bytes")
            .is_some_and(|v| v == "1048576")
    });
}
