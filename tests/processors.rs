//! Record processors (filters and transforms) on real records through real flows between two
//! Apache Kafka brokers, with real `.wasm` components: the built-ins and a test transform.

mod support;

use support::*;

/// A flow a->b on one 2-partition topic with `processors` (TOML), fed `records`.
/// Returns the brokers, the running refract, the source topic and the remote topic.
/// The brokers are shared by this binary's tests: each flow selects only its own topic.
fn start(
    records: &[TestRecord],
    processors: &str,
) -> (&'static Broker, &'static Broker, Refract, String, String) {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("orders");
    a.create_topic(&topic, 2);
    a.produce(&topic, records);
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\ncommit_interval = \"300ms\"\nprocessors = [\n{processors}\n]\n"
    );
    let refract = Refract::start(&pipeline(&[("a", a), ("b", b)], &flows), &[]);
    let remote = format!("a.{topic}");
    (a, b, refract, topic, remote)
}

fn record(partition: i32, i: usize, value: &str, headers: &[(&str, &str)]) -> TestRecord {
    TestRecord {
        partition,
        key: Some(format!("k{i}").into_bytes()),
        value: Some(value.as_bytes().to_vec()),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.as_bytes().to_vec())))
            .collect(),
        timestamp: 1_650_000_000_000 + i as i64,
    }
}

fn total(b: &Broker, topic: &str) -> i64 {
    b.counts(topic).iter().sum()
}

#[test]
fn builtin_filter_drops_matching_records() {
    let records: Vec<TestRecord> = (0..40)
        .map(|i| {
            let env = if i % 4 == 0 { "test" } else { "prod" };
            record((i % 2) as i32, i, &format!("v{i}"), &[("env", env)])
        })
        .collect();
    let (_a, b, mut refract, _, remote) = start(
        &records,
        "{ plugin = \"builtin:filter\", config = { header = \"env\", header_value = \"test\" } }",
    );
    refract.wait("30 records on the target", || total(b, &remote) == 30);
    let kept: Vec<TestRecord> = records
        .iter()
        .filter(|r| r.headers[0].1.as_deref() != Some(b"test"))
        .cloned()
        .collect();
    assert_eq!(b.read_all(&remote), by_partition(&kept, 2));
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn builtin_headers_stamps_and_removes_headers() {
    let records: Vec<TestRecord> = (0..20)
        .map(|i| {
            record(
                (i % 2) as i32,
                i,
                &format!("v{i}"),
                &[("trace", "t"), ("keep", "yes")],
            )
        })
        .collect();
    let (_a, b, mut refract, topic, remote) = start(
        &records,
        "{ plugin = \"builtin:headers\", config = { add = { \"mirrored-from\" = \"${source_cluster}/${topic}\" }, remove = [\"trace\"] } }",
    );
    refract.wait("20 records on the target", || total(b, &remote) == 20);
    let want: Vec<TestRecord> = records
        .iter()
        .map(|r| TestRecord {
            headers: vec![
                ("keep".to_string(), Some(b"yes".to_vec())),
                (
                    "mirrored-from".to_string(),
                    Some(format!("a/{topic}").into_bytes()),
                ),
            ],
            ..r.clone()
        })
        .collect();
    assert_eq!(b.read_all(&remote), by_partition(&want, 2));
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn builtin_json_mask_redacts_fields() {
    let records: Vec<TestRecord> = (0..20)
        .map(|i| {
            let value = if i == 7 {
                "not json".to_string()
            } else {
                format!("{{\"id\":{i},\"email\":\"user{i}@example.com\",\"profile\":{{\"ssn\":\"123-{i}\",\"city\":\"Oslo\"}}}}")
            };
            record((i % 2) as i32, i, &value, &[])
        })
        .collect();
    let (_a, b, mut refract, _, remote) = start(
        &records,
        "{ plugin = \"builtin:json-mask\", config = { fields = [\"email\", \"profile.ssn\"] } }",
    );
    refract.wait("20 records on the target", || total(b, &remote) == 20);
    let want: Vec<TestRecord> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if i == 7 {
                return r.clone();
            }
            let masked = format!("{{\"id\":{i},\"email\":\"***\",\"profile\":{{\"ssn\":\"***\",\"city\":\"Oslo\"}}}}");
            TestRecord { value: Some(masked.into_bytes()), ..r.clone() }
        })
        .collect();
    assert_eq!(b.read_all(&remote), by_partition(&want, 2));
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn builtin_route_sends_records_to_another_topic() {
    let records: Vec<TestRecord> = (0..30)
        .map(|i| {
            let region = if i % 3 == 0 { "eu" } else { "us" };
            record((i % 2) as i32, i, &format!("v{i}"), &[("region", region)])
        })
        .collect();
    let (_a, b, mut refract, _, remote) = start(
        &records,
        "{ plugin = \"builtin:route\", config = { routes = [{ header = \"region\", header_value = \"eu\", topic = \"${target_topic}-eu\" }] } }",
    );
    let eu = format!("{remote}-eu");
    refract.wait("10 records routed and 20 kept", || {
        total(b, &eu) == 10 && total(b, &remote) == 20
    });
    let (to_eu, rest): (Vec<TestRecord>, Vec<TestRecord>) = records
        .iter()
        .cloned()
        .partition(|r| r.headers[0].1.as_deref() == Some(b"eu"));
    assert_eq!(
        b.read_all(&eu),
        by_partition(&to_eu, 2),
        "same partition, key, value, headers, timestamp"
    );
    assert_eq!(b.read_all(&remote), by_partition(&rest, 2));
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn transform_fans_one_record_out_into_three() {
    let records: Vec<TestRecord> = (0..10)
        .map(|i| record((i % 2) as i32, i, &format!("v{i}"), &[]))
        .collect();
    let plugin = guest("test_transform.wasm");
    let (_a, b, mut refract, _, remote) = start(
        &records,
        &format!(
            "{{ plugin = \"{}\", config = {{ copies = 3 }} }}",
            plugin.display()
        ),
    );
    refract.wait("30 records on the target", || total(b, &remote) == 30);
    let want: Vec<TestRecord> = records
        .iter()
        .flat_map(|r| {
            (1..=3).map(move |c| TestRecord {
                headers: vec![("copy".to_string(), Some(c.to_string().into_bytes()))],
                ..r.clone()
            })
        })
        .collect();
    assert_eq!(b.read_all(&remote), by_partition(&want, 2));
    assert_eq!(refract.stop(), Some(0));
}

/// A transform that traps on one record, loops on another, hoards memory on a third and rejects
/// a fourth: with `dead-letter`, exactly those four land in the dead-letter topic with headers
/// naming the plugin, the error and the source position; every other record is mirrored.
#[test]
fn dead_letter_holds_exactly_the_failed_records() {
    let records: Vec<TestRecord> = (0..24)
        .map(|i| record(0, i, &format!("v{i}"), &[("h", "x")]))
        .collect();
    let plugin = guest("test_transform.wasm");
    let (_a, b, mut refract, topic, remote) = start(
        &records,
        &format!(
            "{{ plugin = \"{}\", config = {{ panic_on = \"v3\", loop_on = \"v5\", grow_on = \"v7\", reject_on = \"v9\" }}, on_error = \"dead-letter\" }}",
            plugin.display()
        ),
    );
    let dlq = "refract.dlq.a.internal";
    refract.wait("20 records mirrored and 4 dead-lettered", || {
        total(b, &remote) == 20 && total(b, dlq) == 4
    });
    let bad = [3usize, 5, 7, 9];
    let good: Vec<TestRecord> = records
        .iter()
        .enumerate()
        .filter(|(i, _)| !bad.contains(i))
        .map(|(_, r)| r.clone())
        .collect();
    assert_eq!(
        b.read_all(&remote),
        by_partition(&good, 2)[..1]
            .to_vec()
            .into_iter()
            .chain([vec![]])
            .collect::<Vec<_>>()
    );
    let dead: Vec<TestRecord> = b.read_all(dlq).into_iter().flatten().collect();
    assert_eq!(dead.len(), 4);
    let plugin_name = plugin.display().to_string();
    for (d, (i, expect)) in dead.iter().zip([
        (3, "panicked on purpose"),
        (5, "call deadline"),
        (7, "memory past"),
        (9, "rejects this value"),
    ]) {
        let header = |k: &str| {
            d.headers
                .iter()
                .find(|(n, _)| n == k)
                .and_then(|(_, v)| v.clone())
                .map(|v| String::from_utf8_lossy(&v).into_owned())
        };
        assert_eq!(d.value, records[i].value, "dead letter {i} keeps the value");
        assert_eq!(d.key, records[i].key);
        assert_eq!(header("h").as_deref(), Some("x"), "original headers kept");
        assert_eq!(header("refract.error.plugin"), Some(plugin_name.clone()));
        assert!(
            header("refract.error.message").is_some_and(|m| m.contains(expect)),
            "{i}: {:?}",
            header("refract.error.message")
        );
        assert_eq!(header("refract.source.cluster").as_deref(), Some("a"));
        assert_eq!(header("refract.source.topic"), Some(topic.clone()));
        assert_eq!(header("refract.source.partition").as_deref(), Some("0"));
        assert_eq!(header("refract.source.offset"), Some(i.to_string()));
    }
    assert_eq!(refract.stop(), Some(0));
}

/// With `stop`, a failing processor halts its flow without committing past the failed batch;
/// restarted with a fixed config, the flow mirrors every record.
#[test]
fn stop_halts_the_flow_and_a_restart_loses_nothing() {
    let records: Vec<TestRecord> = (0..20)
        .map(|i| record((i % 2) as i32, i, &format!("v{i}"), &[]))
        .collect();
    let plugin = guest("test_transform.wasm");
    let bad = format!(
        "{{ plugin = \"{}\", config = {{ panic_on = \"v13\" }}, on_error = \"stop\" }}",
        plugin.display()
    );
    let (_a, b, mut refract, _, remote) = start(&records, &bad);
    refract.wait("the flow to halt", || refract.log().contains("flow halted"));
    assert!(
        refract.running(),
        "the process keeps running; only the flow halted"
    );
    let before = total(b, &remote);
    assert!(before < 20, "the failed batch was not mirrored ({before})");
    refract.stop();

    let fixed = std::fs::read_to_string(&refract.pipeline)
        .expect("pipeline")
        .replace(", config = { panic_on = \"v13\" }", "");
    std::fs::write(&refract.pipeline, fixed).expect("rewrite pipeline");
    refract.restart(&[]);
    refract.wait("every record on the target", || total(b, &remote) >= 20);
    let got = b.read_all(&remote);
    for (p, want) in by_partition(&records, 2).iter().enumerate() {
        for w in want {
            assert!(got[p].contains(w), "partition {p} lost {:?}", w.value);
        }
    }
    assert_eq!(refract.stop(), Some(0));
}

/// Every thing that happens to a record is counted once, alike in `/status`, in its Prometheus
/// series and (for skipped records) in the log: 40 records, 10 dropped by a filter, 2 a
/// transform fails on under `on_error = "skip"`, 28 sent.
#[test]
fn record_events_agree_in_status_metrics_and_log() {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("events");
    a.create_topic(&topic, 2);
    let records: Vec<TestRecord> = (0..40)
        .map(|i| {
            let env = if i % 4 == 0 { "test" } else { "prod" };
            record((i % 2) as i32, i, &format!("v{i}"), &[("env", env)])
        })
        .collect();
    a.produce(&topic, &records);
    let flows = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n\n{}",
        pipeline(
            &[("a", a), ("b", b)],
            &format!(
                "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nheartbeats_replication = false\nemit_heartbeats = false\ncommit_interval = \"300ms\"\nprocessors = [\n\
                 {{ plugin = \"builtin:filter\", config = {{ header = \"env\", header_value = \"test\" }} }},\n\
                 {{ plugin = \"{}\", config = {{ panic_on = \"v3\", reject_on = \"v9\" }}, on_error = \"skip\" }},\n]\n",
                guest("test_transform.wasm").display()
            )
        )
    );
    let refract = Refract::start(&flows, &[]);
    let remote = format!("a.{topic}");
    let addr = refract.metrics_addr();
    let status = || -> serde_json::Value {
        serde_json::from_str(&http(&addr, "GET", "/status").1).unwrap_or_default()
    };
    refract.wait("28 records on the target and 2 skipped", || {
        total(b, &remote) == 28 && status()["flows"][0]["records_skipped"] == 2
    });
    let flow = status()["flows"][0].clone();
    let metrics = http(&addr, "GET", "/metrics").1;
    let labels = [("flow", "a->b")];
    for (field, series_name, want) in [
        ("records_sent", "refract_records_sent_total", 28),
        ("records_filtered", "refract_records_filtered_total", 10),
        ("records_skipped", "refract_records_skipped_total", 2),
        ("records_skipped", "refract_records_dropped_total", 2),
        (
            "records_dead_lettered",
            "refract_dead_lettered_records_total",
            0,
        ),
        ("records_looped", "refract_records_looped_total", 0),
    ] {
        assert_eq!(flow[field], want, "{field} in {flow}");
        assert_eq!(
            series(&metrics, series_name, &labels),
            Some(want as f64),
            "{series_name}"
        );
    }
    assert_eq!(
        refract.log_count(&format!("skipping {topic}[")),
        2,
        "{}",
        refract.log()
    );
    let mut refract = refract;
    assert_eq!(refract.stop(), Some(0));
}
