//! Record processors (filters and transforms) on real records through real flows between two
//! Apache Kafka brokers, with real `.wasm` components: the built-ins and a test transform.

use crate::support::hostile;
use crate::support::*;

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
        "{ plugin = \"builtin:route\", config = { routes = [{ header = \"region\", header_value = \"eu\", topic = \"${target_topic}-eu\" }] }, output_topics = [\".*-eu\"] }",
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
    let plugin = Refract::guest("test_transform.wasm");
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
    let plugin = Refract::guest("test_transform.wasm");
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
        (7, "memory budget"),
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

/// A topic of bad records is not a log line per record: of 60 records a processor rejects,
/// all are dead-lettered and counted, and the first 20 of the minute are logged one by one
/// (the rest are summed up in one line when the minute has passed; see the unit tests of
/// `record_log`).
#[test]
fn a_flood_of_dead_letters_is_logged_in_part() {
    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    let topic = unique("flood");
    let dlq = unique("flood-dlq");
    a.create_topic(&topic, 1);
    let records: Vec<TestRecord> = (0..60).map(|i| record(0, i, "v9", &[])).collect();
    a.produce(&topic, &records);
    let plugin = Refract::guest("test_transform.wasm");
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\ndead_letter_topic = \"{dlq}\"\nprocessors = [\n{{ plugin = \"{}\", config = {{ reject_on = \"v9\" }}, on_error = \"dead-letter\" }}\n]\n",
        plugin.display()
    );
    let text = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n\n{}",
        pipeline(&[("a", a), ("b", b)], &flows)
    );
    let mut refract = Refract::start(&text, &[]);
    let addr = refract.metrics_addr();
    let dead_lettered = || {
        let (_, body) = http(&addr, "GET", "/status");
        let status: serde_json::Value = serde_json::from_str(&body).expect("status JSON");
        status["flows"][0]["records_dead_lettered"].as_u64()
    };
    refract.wait("60 records dead-lettered and counted", || {
        total(b, &dlq) == 60 && dead_lettered() == Some(60)
    });
    assert_eq!(
        refract.log_count(&format!("dead-lettering {topic}[0]")),
        20,
        "{}",
        refract.log()
    );
    assert_eq!(refract.stop(), Some(0));
}

/// With `stop`, a failing processor halts its flow without committing past the failed batch;
/// restarted with a fixed config, the flow mirrors every record.
#[test]
fn stop_halts_the_flow_and_a_restart_loses_nothing() {
    let records: Vec<TestRecord> = (0..20)
        .map(|i| record((i % 2) as i32, i, &format!("v{i}"), &[]))
        .collect();
    let plugin = Refract::guest("test_transform.wasm");
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
                Refract::guest("test_transform.wasm").display()
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

// Hostile plugins: each attack runs through a real flow with `on_error =
// "dead-letter"`; the sandbox stops it on the one record that triggers it, and every other record
// is mirrored.

/// A flow a->b whose processors attack on the records `markers`, dead-lettering into a topic of
/// its own (the default one is shared by this binary's flows).
struct Attacked {
    b: &'static Broker,
    refract: Refract,
    topic: String,
    remote: String,
    dlq: String,
    /// What the source holds: partition 0 is `p0-0`, then each marker followed by `p0-<n>`;
    /// partition 1 is `p1-0`..`p1-2` and never attacks.
    records: Vec<TestRecord>,
}

/// The pipeline of a flow a->b on `topic` through `processors` (TOML array entries), with
/// `dlq` as its dead-letter topic.
fn dead_letter_flow(topic: &str, dlq: &str, processors: &str) -> String {
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\ncommit_interval = \"300ms\"\ndead_letter_topic = \"{dlq}\"\nprocessors = [\n{processors}\n]\n"
    );
    pipeline(
        &[("a", Broker::shared("a")), ("b", Broker::shared("b"))],
        &flows,
    )
}

/// Starts a flow a->b on a fresh 2-partition topic through `processors` (TOML array entries).
fn attacked(processors: &str, markers: &[&str]) -> Attacked {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("hostile");
    let dlq = format!("refract.dlq.{topic}.internal");
    a.create_topic(&topic, 2);
    let mut records = vec![record(0, 0, "p0-0", &[("h", "x")])];
    for (n, marker) in markers.iter().enumerate() {
        records.push(record(0, records.len(), marker, &[("h", "x")]));
        records.push(record(
            0,
            records.len(),
            &format!("p0-{}", n + 1),
            &[("h", "x")],
        ));
    }
    for n in 0..3 {
        records.push(record(1, records.len(), &format!("p1-{n}"), &[("h", "x")]));
    }
    a.produce(&topic, &records);
    let refract = Refract::start(&dead_letter_flow(&topic, &dlq, processors), &[]);
    let remote = format!("a.{topic}");
    Attacked {
        b,
        refract,
        topic,
        remote,
        dlq,
        records,
    }
}

impl Attacked {
    /// Waits until every record whose value is not in `dead` is mirrored and those in `dead`
    /// are dead-lettered; checks both topics record for record and returns the dead letters.
    fn settle(&self, dead: &[&str]) -> Vec<TestRecord> {
        let is_dead = |r: &TestRecord| {
            dead.iter()
                .any(|d| r.value.as_deref() == Some(d.as_bytes()))
        };
        let (failed, kept): (Vec<TestRecord>, Vec<TestRecord>) =
            self.records.iter().cloned().partition(is_dead);
        assert_eq!(
            failed.len(),
            dead.len(),
            "each dead value is one source record"
        );
        self.refract.wait(
            &format!(
                "{} records mirrored and {} dead-lettered",
                kept.len(),
                failed.len()
            ),
            || {
                total(self.b, &self.remote) == kept.len() as i64
                    && total(self.b, &self.dlq) == failed.len() as i64
            },
        );
        assert_eq!(self.b.read_all(&self.remote), by_partition(&kept, 2));
        let letters = dead_letters(self.b, &self.dlq);
        for (letter, source) in letters.iter().zip(&failed) {
            assert_eq!(letter.key, source.key, "the dead letter keeps the key");
            assert_eq!(
                letter.value, source.value,
                "the dead letter keeps the value"
            );
            assert_eq!(header(letter, "h").as_deref(), Some("x"), "and the headers");
            assert_eq!(
                header(letter, "refract.source.topic"),
                Some(self.topic.clone())
            );
        }
        letters
    }
}

/// Every record of the dead-letter topic `dlq`, in source order (partition, offset).
fn dead_letters(b: &Broker, dlq: &str) -> Vec<TestRecord> {
    let mut letters: Vec<TestRecord> = b.read_all(dlq).into_iter().flatten().collect();
    letters.sort_by_key(|letter| {
        ["refract.source.partition", "refract.source.offset"]
            .map(|name| header(letter, name).and_then(|v| v.parse::<i64>().ok()))
    });
    letters
}

/// The value of `letter`'s header `name` as text.
fn header(letter: &TestRecord, name: &str) -> Option<String> {
    letter
        .headers
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.as_deref())
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// The `refract.error.message` of `letter`, checked to contain every one of `needles`.
fn error_message(letter: &TestRecord, needles: &[&str]) -> String {
    let message = header(letter, "refract.error.message").expect("refract.error.message");
    for needle in needles {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    message
}

/// The Rust hostile transform as a processor entry with `config` (TOML inline-table body) and
/// `extra` settings, under `on_error = "dead-letter"`.
fn hostile(config: &str, extra: &str) -> String {
    format!(
        "{{ plugin = \"{}\", config = {{ {config} }}, on_error = \"dead-letter\"{extra} }}",
        Refract::guest("hostile.wasm").display()
    )
}

/// Sleeping (Rust `std::thread::sleep`, Python `time.sleep`, an hour each) holds up nothing:
/// plugin clocks are virtual and a sleep returns at once, so the marker record is kept and the
/// flow mirrors everything, hours before either sleep could have ended.
#[test]
fn sleeping_plugins_hold_up_nothing() {
    let python = hostile::python();
    let processors = format!(
        "{},\n{{ plugin = \"{}\", config = {{ attack = \"sleep\", on = \"sleep\" }}, on_error = \"dead-letter\", call_timeout = \"500ms\" }}",
        hostile("attack = \"sleep\", on = \"sleep\"", ", call_timeout = \"500ms\""),
        python.display()
    );
    let mut attacked = attacked(&processors, &["sleep"]);
    attacked.settle(&[]);
    assert_eq!(attacked.refract.stop(), Some(0));
}

/// A plugin that busy-waits for an hour to pass spins in guest code (its virtual clock moves 1 µs
/// per read), where its call deadline stops it.
#[test]
fn spinning_on_the_clock_is_stopped_by_the_call_deadline() {
    let mut attacked = attacked(
        &hostile(
            "attack = \"spin-clock\", on = \"spin\"",
            ", call_timeout = \"500ms\"",
        ),
        &["spin"],
    );
    let letters = attacked.settle(&["spin"]);
    error_message(&letters[0], &["call deadline", "500 ms"]);
    assert_eq!(attacked.refract.stop(), Some(0));
}

/// A component with four linear memories and a table (plugins/testing/hostile-memory) grows
/// them all, touching every page: one budget of `memory_limit` for all memories and tables of
/// the instance stops it ("memory" grows the memories, "tables" the table by 100,000,000
/// elements), and the process's peak resident memory grows by no more than that budget plus a
/// margin. Without the one budget, each memory could take `memory_limit`.
#[test]
fn memories_and_tables_share_one_budget() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plugin = hostile::memory(dir.path());
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("hostile-memory");
    let dlq = format!("refract.dlq.{topic}.internal");
    a.create_topic(&topic, 2);
    let honest = vec![record(0, 0, "p0-0", &[]), record(1, 1, "p1-0", &[])];
    a.produce(&topic, &honest);
    let processor = format!(
        "{{ plugin = \"{}\", on_error = \"dead-letter\", memory_limit = \"128MiB\" }}",
        plugin.display()
    );
    let mut refract = Refract::start(&dead_letter_flow(&topic, &dlq, &processor), &[]);
    let remote = format!("a.{topic}");
    refract.wait("the honest records mirrored", || total(b, &remote) == 2);
    // The process as it runs the flow, the plugin instantiated and called.
    let baseline = refract.peak_rss();

    let attacks = vec![
        record(0, 2, "memory", &[]),
        record(0, 3, "p0-1", &[]),
        record(1, 4, "tables", &[]),
        record(1, 5, "p1-1", &[]),
    ];
    a.produce(&topic, &attacks);
    refract.wait("both attacks dead-lettered and the rest mirrored", || {
        total(b, &dlq) == 2 && total(b, &remote) == 4
    });
    let peak = refract.peak_rss();
    let mut want = honest.clone();
    want.extend([attacks[1].clone(), attacks[3].clone()]);
    assert_eq!(b.read_all(&remote), by_partition(&want, 2));
    let letters = dead_letters(b, &dlq);
    assert_eq!(letters.len(), 2, "{letters:?}");
    for (letter, (value, grown)) in letters.iter().zip([
        ("memory", "grow a linear memory"),
        ("tables", "grow a table"),
    ]) {
        assert_eq!(letter.value.as_deref(), Some(value.as_bytes()));
        error_message(letter, &["memory budget of 128 MiB (memory_limit)", grown]);
    }
    // The attack holds at most 128 MiB at a time (64 MiB in practice: the second memory's first
    // step is refused), in the batch's call and again when the record is retried alone; the
    // bound adds 96 MiB for everything else. Measured: 52 MiB before the attacks, 116 MiB after
    // (+64 MiB: the trapped instance is gone before the retry). Four memories under a limit
    // each would have reached +256 MiB, and the table alone +763 MiB.
    let grown = peak.saturating_sub(baseline) >> 20;
    assert!(
        grown <= 128 + 96,
        "peak RSS grew by {grown} MiB (from {} MiB to {} MiB)",
        baseline >> 20,
        peak >> 20
    );
    assert_eq!(refract.stop(), Some(0));
}

/// The output budgets, on their defaults: one record fanned out into 100,000 is refused by
/// `max_outputs_per_record` (1000), and 200 records of 1 MiB each from one input (one 1 MiB
/// buffer in the plugin, 200 MiB for the host to copy) by `max_output_bytes` (64 MiB). Each
/// record is dead-lettered, the rest of its batch mirrored.
#[test]
fn output_budgets_refuse_fan_out_and_big_copies() {
    let processors = format!(
        "{},\n{}",
        hostile("attack = \"fan-out\", on = \"fan\"", ""),
        hostile("attack = \"big-copies\", on = \"big\"", "")
    );
    let mut attacked = attacked(&processors, &["fan", "big"]);
    let letters = attacked.settle(&["fan", "big"]);
    error_message(&letters[0], &["max_outputs_per_record", "100000 records"]);
    error_message(&letters[1], &["max_output_bytes"]);
    assert_eq!(attacked.refract.stop(), Some(0));
}

/// 100 MiB logged in 64 KiB lines within one call reach the log as a bounded number of lines of
/// at most 1 KiB each, and a warning counts the lines dropped; the record is still mirrored.
#[test]
fn a_log_flood_is_cut_and_rate_limited() {
    let mut attacked = attacked(
        &hostile("attack = \"log-flood\", on = \"flood\"", ""),
        &["flood"],
    );
    attacked.settle(&[]);
    attacked.refract.wait("the dropped log lines reported", || {
        attacked.refract.log().contains("log lines dropped")
    });
    hostile::assert_log_flood_cut(&attacked.refract.log());
    assert_eq!(attacked.refract.stop(), Some(0));
}

/// A Rust panic and a Python exception with 1 MiB messages are dead-lettered with a short
/// `refract.error.message`: the dead letter fits the target's default `max.message.bytes`
/// (1 MiB) and keeps the source record's key, value and headers.
#[test]
fn huge_panic_and_exception_messages_are_cut() {
    let python = hostile::python();
    let processors = format!(
        "{{ plugin = \"{}\", config = {{ attack = \"huge-raise\", on = \"raise\" }}, on_error = \"dead-letter\" }},\n{}",
        python.display(),
        hostile("attack = \"huge-panic\", on = \"panic\"", "")
    );
    let mut attacked = attacked(&processors, &["panic", "raise"]);
    let letters = attacked.settle(&["panic", "raise"]);
    for (letter, own_words) in letters
        .iter()
        .zip(["hostile huge-panic xxx", "ValueError: xxx"])
    {
        let message = error_message(letter, &[own_words, "cut"]);
        assert!(
            message.len() <= DEAD_LETTER_MESSAGE_MAX,
            "refract.error.message of {} bytes",
            message.len()
        );
        let size = letter.key.as_ref().map_or(0, Vec::len)
            + letter.value.as_ref().map_or(0, Vec::len)
            + letter
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
                .sum::<usize>();
        assert!(size < 1 << 20, "a dead letter of {size} bytes");
    }
    assert_eq!(attacked.refract.stop(), Some(0));
}

/// Longest `refract.error.message` a plugin's 1 MiB panic or exception message may cause: the
/// plugin's own words are cut to 512 bytes and the tail of its stderr to 1 KiB.
const DEAD_LETTER_MESSAGE_MAX: usize = 2 << 10;

/// A transform that routes a record to an internal topic (here one named like MirrorMaker 2's
/// offset syncs of a cluster that does not exist) has that record refused: it is dead-lettered
/// and nothing is written there, nor is the topic created.
#[test]
fn routing_to_an_internal_topic_is_refused() {
    let internal = format!("mm2-offset-syncs.{}.internal", unique("zz"));
    let mut attacked = attacked(
        &hostile(
            &format!("attack = \"route\", on = \"route\", topic = \"{internal}\""),
            "",
        ),
        &["route"],
    );
    let letters = attacked.settle(&["route"]);
    error_message(&letters[0], &["internal topic", &internal]);
    let a = Broker::shared("a");
    for (cluster, broker) in [("a", a), ("b", attacked.b)] {
        assert!(
            !broker.topics().contains_key(&internal),
            "{internal} exists on {cluster}"
        );
    }
    assert_eq!(attacked.refract.stop(), Some(0));
}

/// A transform that re-routes a record to a topic its `output_topics` does not allow (by
/// default: the flow's own remote topics) has that record dead-lettered, the reason naming the
/// topic; nothing is written there and the topic is not created.
#[test]
fn rerouting_outside_output_topics_is_dead_lettered() {
    let elsewhere = unique("elsewhere");
    let mut attacked = attacked(
        &hostile(
            &format!("attack = \"route\", on = \"away\", topic = \"{elsewhere}\""),
            "",
        ),
        &["away"],
    );
    let letters = attacked.settle(&["away"]);
    error_message(
        &letters[0],
        &[
            &format!("`{elsewhere}`"),
            "not one of the flow's remote topics",
            "output_topics",
        ],
    );
    assert!(!attacked.b.topics().contains_key(&elsewhere));
    assert_eq!(attacked.refract.stop(), Some(0));
}

/// A record sent to a partition its topic does not have, and one with a timestamp the topic
/// refuses (Kafka's `message.timestamp.after.max.ms`, one hour by default), follow `on_error`
/// (here: dead-lettered, the reason naming topic and partition) instead of a partition retried
/// for ever: the records after them are mirrored, then more records produced later.
#[test]
fn outputs_to_missing_partitions_or_refused_timestamps_follow_on_error() {
    let in_ten_days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
        + 10 * 24 * 3_600_000;
    let processors = format!(
        "{},\n{}",
        hostile("attack = \"route\", on = \"far\", partition = 7", ""),
        hostile(
            &format!("attack = \"route\", on = \"future\", timestamp = {in_ten_days}"),
            ""
        )
    );
    let mut attacked = attacked(&processors, &["far", "future"]);
    let letters = attacked.settle(&["far", "future"]);
    error_message(
        &letters[0],
        &[
            &format!("partition 7 of `{}`", attacked.remote),
            "has 2 partitions",
        ],
    );
    error_message(
        &letters[1],
        &[
            &format!("timestamp {in_ten_days}"),
            &format!("`{}`[0]", attacked.remote),
            "message.timestamp.after.max.ms",
        ],
    );
    // The partition goes on: a record produced now is mirrored too.
    let late = record(0, 100, "p0-late", &[("h", "x")]);
    Broker::shared("a").produce(&attacked.topic, std::slice::from_ref(&late));
    let kept = attacked.records.len() as i64 - 2;
    attacked.refract.wait("the late record mirrored", || {
        total(attacked.b, &attacked.remote) == kept + 1
    });
    assert_eq!(attacked.b.read_all(&attacked.remote)[0].last(), Some(&late));
    assert_eq!(attacked.refract.stop(), Some(0));
}

/// Topics missing on the target are created for a processor's outputs up to its
/// `max_new_output_topics`; a record for one more, and one for a topic the target refuses to
/// create (here its name collides with an existing topic's: `x_y` against `x.y`), are
/// dead-lettered with the reason, and the flow goes on (no restart).
#[test]
fn new_output_topics_are_capped_and_creation_failures_follow_on_error() {
    let prefix = unique("routed");
    let b = Broker::shared("b");
    b.create_topic(&format!("{prefix}.clash"), 1);
    let processors = format!(
        "{},\n{}",
        hostile(
            &format!("attack = \"route\", on = \"capped\", topic = \"{prefix}-capped\""),
            &format!(", output_topics = [\"{prefix}-.*\"], max_new_output_topics = 0")
        ),
        hostile(
            &format!("attack = \"route\", on = \"clash\", topic = \"{prefix}_clash\""),
            &format!(", output_topics = [\"{prefix}_.*\"]")
        )
    );
    let mut attacked = attacked(&processors, &["capped", "clash"]);
    let letters = attacked.settle(&["capped", "clash"]);
    error_message(
        &letters[0],
        &[
            &format!("`{prefix}-capped`"),
            "does not exist",
            "max_new_output_topics = 0",
        ],
    );
    error_message(
        &letters[1],
        &[&format!("`{prefix}_clash`"), "could not be created"],
    );
    let topics = b.topics();
    assert!(!topics.contains_key(&format!("{prefix}-capped")));
    assert!(!topics.contains_key(&format!("{prefix}_clash")));
    assert_eq!(
        attacked.refract.log_count("flow failed, restarting"),
        0,
        "{}",
        attacked.refract.log()
    );
    assert_eq!(attacked.refract.stop(), Some(0));
}
