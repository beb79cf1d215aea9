//! Schema-id translation (`schemas = "translate"`) between two real Apicurio registries whose
//! ids differ, on real Kafka: keys and values, versions, a version registered mid-run, a
//! referenced Protobuf schema with message indexes, JSON Schema with a `$ref`, unframed records,
//! an unknown id, a schema the target refuses, subjects without traffic, a source registry killed
//! and restarted mid-stream, exactly-once, a target registry rebuilt, cluster mode, and the
//! schema-registries guide's walkthrough as written.

use std::sync::OnceLock;

use serde_json::Value;

use crate::support::*;

pub(crate) const ORDER_V1: &str = r#"{"type":"record","name":"Order","namespace":"acme","fields":[{"name":"id","type":"string"}]}"#;
pub(crate) const ORDER_V2: &str = r#"{"type":"record","name":"Order","namespace":"acme","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int","default":1}]}"#;
const ORDER_V3: &str = r#"{"type":"record","name":"Order","namespace":"acme","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int","default":1},{"name":"note","type":"string","default":""}]}"#;
const KEY: &str = r#""string""#;
const MONEY_PROTO: &str = "syntax = \"proto3\";\npackage acme;\nmessage Money { string currency = 1; int64 units = 2; }\n";
const PAYMENT_PROTO: &str = "syntax = \"proto3\";\npackage acme;\nimport \"acme/money.proto\";\nmessage Header { string id = 1; }\nmessage Payment { string id = 1; acme.Money amount = 2; }\n";

/// The registries shared by this module's tests: `a`'s and `b`'s. `b` holds a few schemas of
/// its own first, so the same schema has another id there.
fn registries() -> &'static (Registry, Registry) {
    static SHARED: OnceLock<(Registry, Registry)> = OnceLock::new();
    SHARED.get_or_init(|| {
        let a = Registry::start();
        let b = Registry::start();
        register_unrelated(&b, "F", 5);
        (a, b)
    })
}

/// Registers `n` schemas of no test's topic on `registry` (Avro fixed types named
/// `<name>0`, `<name>1`, …), so the ids it gives later differ from another registry's; the
/// last id.
pub(crate) fn register_unrelated(registry: &Registry, name: &str, n: usize) -> u32 {
    (0..n)
        .map(|i| {
            registry.register(
                &format!("unrelated-{name}{i}"),
                &format!(
                    "{{\"type\":\"fixed\",\"name\":\"{name}{i}\",\"size\":{}}}",
                    i + 1
                ),
                "AVRO",
                &[],
            )
        })
        .last()
        .unwrap_or(0)
}

/// A framed record: magic byte, schema id, then `payload`.
pub(crate) fn framed(id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An Avro string (zig-zag varint length, then the bytes; short strings only).
pub(crate) fn avro_string(s: &str) -> Vec<u8> {
    assert!(s.len() < 64);
    let mut out = vec![(s.len() as u8) << 1];
    out.extend_from_slice(s.as_bytes());
    out
}

/// The schema id of framed bytes.
pub(crate) fn id_of(bytes: &[u8]) -> u32 {
    assert_eq!(bytes[0], 0, "not framed: {bytes:?}");
    u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]])
}

fn record(i: usize, key: Option<Vec<u8>>, value: Option<Vec<u8>>) -> TestRecord {
    TestRecord {
        partition: 0,
        key,
        value,
        headers: Vec::new(),
        timestamp: 1_700_000_000_000 + i as i64,
    }
}

/// Clusters `a` and `target` (broker `b`) with their registries, and `flows`. Flows towards
/// `b` that run at once under exactly-once need target aliases of their own: the alias names
/// the transactional id (`refract-a-<target>`), and two processes with one id fence each other.
fn pipeline_with_registries(
    target: &str,
    a_registry: &str,
    b_registry: &str,
    flows: &str,
) -> String {
    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n\n{}\n[clusters.a.schema_registry]\nurl = \"{a_registry}\"\ntimeout = \"2s\"\n[clusters.{target}.schema_registry]\nurl = \"{b_registry}\"\ntimeout = \"2s\"\n",
        pipeline(&[("a", a), (target, b)], flows)
    )
}

/// Checks a mirrored field: the same bytes after the id, and an id whose schema on `target`
/// is the one `source_id` names on `source`.
fn assert_translated(source: &Registry, target: &Registry, from: &[u8], to: &[u8]) {
    assert_eq!(from[5..], to[5..], "payload bytes changed");
    let (source_id, target_id) = (id_of(from), id_of(to));
    let want = source.schema_by_id(source_id).expect("source schema");
    let got = target.schema_by_id(target_id).unwrap_or_else(|| {
        panic!("target id {target_id} (source {source_id}) is unknown to the target registry")
    });
    assert_eq!(got, want, "target id {target_id} names another schema");
}

fn status_schemas(refract: &Refract) -> Value {
    let (_, body) = http(&refract.metrics_addr(), "GET", "/status");
    let status: Value = serde_json::from_str(&body).expect("status JSON");
    status["flows"][0]["schemas"].clone()
}

#[test]
fn framed_keys_and_values_get_the_target_registry_ids() {
    let (ra, rb) = registries();
    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    let topic = unique("orders");
    let payments = unique("payments");
    let quiet = unique("quiet");
    let dlq = unique("dlq");
    for t in [&topic, &payments, &quiet] {
        a.create_topic(t, 1);
    }
    let key_id = ra.register(&format!("{topic}-key"), KEY, "AVRO", &[]);
    let v1 = ra.register(&format!("{topic}-value"), ORDER_V1, "AVRO", &[]);
    let v2 = ra.register(&format!("{topic}-value"), ORDER_V2, "AVRO", &[]);
    let money_subject = unique("acme-money");
    let money = ra.register(&money_subject, MONEY_PROTO, "PROTOBUF", &[]);
    let payment = ra.register(
        &format!("{payments}-value"),
        PAYMENT_PROTO,
        "PROTOBUF",
        &[("acme/money.proto", &money_subject, 1)],
    );
    // A subject with no traffic, and a compatibility level of its own.
    ra.register(&format!("{quiet}-value"), ORDER_V1, "AVRO", &[]);
    ra.register(&format!("{quiet}-value"), ORDER_V2, "AVRO", &[]);
    ra.set_compatibility(&format!("{quiet}-value"), "BACKWARD");
    // TopicRecordNameStrategy: `<topic>-<record full name>`.
    ra.register(&format!("{quiet}-acme.Order"), ORDER_V1, "AVRO", &[]);
    assert!(money > 0 && payment > 0);

    let mut orders: Vec<TestRecord> = Vec::new();
    for i in 0..20 {
        let value = framed(
            if i % 2 == 0 { v1 } else { v2 },
            &avro_string(&format!("o{i}")),
        );
        orders.push(record(
            i,
            Some(framed(key_id, &avro_string(&format!("k{i}")))),
            Some(value),
        ));
    }
    // Unframed records pass as they are: JSON text, a tombstone, 4 bytes starting with 0.
    orders.push(record(
        20,
        Some(b"plain".to_vec()),
        Some(b"{\"json\":true}".to_vec()),
    ));
    orders.push(record(21, Some(framed(key_id, &avro_string("gone"))), None));
    orders.push(record(22, None, Some(vec![0, 0, 0, 1])));
    a.produce(&topic, &orders);
    // Protobuf: message indexes [1] (the second message, Payment) before the payload.
    let proto_payload = [2u8, 2, 0x0a, 2, b'p', b'1'];
    let pays: Vec<TestRecord> = (0..5)
        .map(|i| record(i, None, Some(framed(payment, &proto_payload))))
        .collect();
    a.produce(&payments, &pays);

    let flows = flow(
        "a",
        "b",
        &format!("topics = [\"{topic}\", \"{payments}\", \"{quiet}\"]\nschemas = \"translate\"\nschema_on_error = \"dead-letter\"\ndead_letter_topic = \"{dlq}\"\n"),
    );
    let mut refract = Refract::start(
        &pipeline_with_registries("b", &ra.url(), &rb.url(), &flows),
        &[],
    );
    let (remote, remote_payments) = (format!("a.{topic}"), format!("a.{payments}"));
    refract.wait("the orders and payments on b", || {
        b.counts(&remote).iter().sum::<i64>() == orders.len() as i64
            && b.counts(&remote_payments).iter().sum::<i64>() == 5
    });
    let mirrored = b.read_all(&remote).remove(0);
    for (from, to) in orders.iter().zip(&mirrored) {
        match (&from.value, &to.value) {
            (Some(f), Some(t)) if f.len() >= 5 && f[0] == 0 => assert_translated(ra, rb, f, t),
            (f, t) => assert_eq!(f, t, "an unframed value changed"),
        }
        match (&from.key, &to.key) {
            (Some(f), Some(t)) if f.len() >= 5 && f[0] == 0 => assert_translated(ra, rb, f, t),
            (f, t) => assert_eq!(f, t, "an unframed key changed"),
        }
    }
    // The ids differ (b held other schemas first), and the subjects follow the remote topic.
    assert_ne!(id_of(mirrored[0].value.as_deref().unwrap()), v1);
    assert_eq!(rb.versions(&format!("{remote}-value")).len(), 2);
    assert_eq!(rb.versions(&format!("{remote}-key")).len(), 1);
    for (from, to) in pays.iter().zip(&b.read_all(&remote_payments).remove(0)) {
        let t = to.value.as_deref().unwrap();
        assert_translated(ra, rb, from.value.as_deref().unwrap(), t);
        // The reference points at the referenced schema as the target registered it.
        let refs = rb.references(id_of(t));
        assert_eq!(refs.len(), 1, "{refs:?}");
        assert_eq!(refs[0].0, "acme/money.proto");
        assert_eq!(refs[0].1, money_subject);
        assert_eq!(rb.versions(&money_subject), vec![refs[0].2]);
    }

    // The subject without traffic is copied with its versions and level.
    let quiet_subject = format!("a.{quiet}-value");
    refract.wait("the quiet subject on b", || {
        rb.versions(&quiet_subject).len() == 2
    });
    refract.wait("its compatibility level", || {
        rb.compatibility(&quiet_subject).as_deref() == Some("BACKWARD")
    });
    refract.wait("the quiet topic's <topic>-<record> subject on b", || {
        rb.versions(&format!("a.{quiet}-acme.Order")).len() == 1
    });

    // A version registered mid-run is picked up when its first record arrives; an id the
    // source registry does not know is dead-lettered, naming it, and the rest goes on.
    let v3 = ra.register(&format!("{topic}-value"), ORDER_V3, "AVRO", &[]);
    let late = vec![
        record(30, None, Some(framed(v3, &avro_string("late")))),
        record(31, None, Some(framed(987_654, &avro_string("bad")))),
        record(32, None, Some(framed(v1, &avro_string("after")))),
    ];
    a.produce(&topic, &late);
    let total = orders.len() as i64 + 2;
    refract.wait("the late records on b", || {
        b.counts(&remote).iter().sum::<i64>() == total
    });
    let mirrored = b.read_all(&remote).remove(0);
    let tail = &mirrored[orders.len()..];
    assert_translated(
        ra,
        rb,
        late[0].value.as_deref().unwrap(),
        tail[0].value.as_deref().unwrap(),
    );
    assert_translated(
        ra,
        rb,
        late[2].value.as_deref().unwrap(),
        tail[1].value.as_deref().unwrap(),
    );
    refract.wait("the dead letter", || {
        b.counts(&dlq).iter().sum::<i64>() == 1
    });
    let dead = b.read_all(&dlq).remove(0).remove(0);
    assert_eq!(
        dead.value, late[1].value,
        "a dead letter keeps the bytes it was read with"
    );
    let header = |name: &str| dead.header_text(name);
    assert_eq!(header("refract.error.plugin"), "schema-translation");
    assert!(
        header("refract.error.message").contains("987654"),
        "{}",
        header("refract.error.message")
    );

    // Visible: the series and /status.
    let (_, metrics) = http(&refract.metrics_addr(), "GET", "/metrics");
    let flow_label = [("flow", "a->b")];
    let translated =
        series(&metrics, "refract_schema_translations_total", &flow_label).unwrap_or(0.0);
    // 20 keys + 20 values + 1 tombstone's key + 5 payments + 2 late values.
    assert!(translated >= 48.0, "{translated} translations");
    let schemas = status_schemas(&refract);
    assert_eq!(schemas["source_registry"], ra.url());
    assert!(
        schemas["registered"].as_u64().unwrap_or(0) >= 5,
        "{schemas}"
    );
    assert_eq!(refract.stop(), Some(0));
}

const ADDRESS_JSON: &str = r#"{"$id":"address.json","type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#;
const CUSTOMER_JSON: &str = r#"{"type":"object","properties":{"name":{"type":"string"},"address":{"$ref":"address.json"}},"required":["name"]}"#;

/// JSON Schema with a `$ref` to a schema of its own subject, and an Avro schema the target
/// registry refuses (incompatible with the version its subject holds there under BACKWARD): the
/// JSON records get the target's id, their reference re-pointed; the refused record is
/// dead-lettered naming the id, the target subject and the registry's answer, and the records
/// after it go on.
#[test]
fn json_schema_with_a_reference_and_a_schema_the_target_refuses() {
    let (ra, rb) = registries();
    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    let customers = unique("customers");
    let refused = unique("refused");
    let dlq = unique("dlq");
    for t in [&customers, &refused] {
        a.create_topic(t, 1);
    }
    let address_subject = unique("address-json");
    ra.register(&address_subject, ADDRESS_JSON, "JSON", &[]);
    let customer = ra.register(
        &format!("{customers}-value"),
        CUSTOMER_JSON,
        "JSON",
        &[("address.json", &address_subject, 1)],
    );
    // The target holds `a.<refused>-value` already, with an `id` of type string, under
    // BACKWARD: the source's version, whose `id` is an int without a default, cannot be read
    // with it.
    let remote_refused = format!("a.{refused}");
    let target_subject = format!("{remote_refused}-value");
    rb.register(&target_subject, ORDER_V1, "AVRO", &[]);
    rb.set_compatibility(&target_subject, "BACKWARD");
    const ORDER_INT: &str = r#"{"type":"record","name":"Order","namespace":"acme","fields":[{"name":"id","type":"int"},{"name":"extra","type":"long"}]}"#;
    let incompatible = ra.register(&format!("{refused}-value"), ORDER_INT, "AVRO", &[]);
    let compatible = ra.register(&format!("{refused}-other"), KEY, "AVRO", &[]);
    assert!(
        rb.try_register(&target_subject, ORDER_INT, "AVRO", &[])
            .is_err(),
        "the target registry accepts the incompatible schema: the test proves nothing"
    );

    let people: Vec<TestRecord> = (0..6)
        .map(|i| {
            let json = format!("{{\"name\":\"n{i}\",\"address\":{{\"city\":\"c{i}\"}}}}");
            record(i, None, Some(framed(customer, json.as_bytes())))
        })
        .collect();
    a.produce(&customers, &people);
    let odd = vec![
        record(0, None, Some(framed(incompatible, &[2, 4]))),
        record(1, None, Some(framed(compatible, &avro_string("after")))),
    ];
    a.produce(&refused, &odd);

    let flows = flow(
        "a",
        "b",
        &format!("topics = [\"{customers}\", \"{refused}\"]\nschemas = \"translate\"\nschema_fields = [\"value\"]\nschema_on_error = \"dead-letter\"\ndead_letter_topic = \"{dlq}\"\n"),
    );
    let mut refract = Refract::start(
        &pipeline_with_registries("b", &ra.url(), &rb.url(), &flows),
        &[],
    );
    let remote_customers = format!("a.{customers}");
    refract.wait(
        "the customers, the record after the refused one, the dead letter",
        || {
            b.counts(&remote_customers).iter().sum::<i64>() == 6
                && b.counts(&remote_refused).iter().sum::<i64>() == 1
                && b.counts(&dlq).iter().sum::<i64>() == 1
        },
    );
    for (from, to) in people.iter().zip(&b.read_all(&remote_customers).remove(0)) {
        let to = to.value.as_deref().unwrap();
        assert_translated(ra, rb, from.value.as_deref().unwrap(), to);
        let refs = rb.references(id_of(to));
        assert_eq!(refs.len(), 1, "{refs:?}");
        assert_eq!(refs[0].0, "address.json");
        assert_eq!(refs[0].1, address_subject);
        assert_eq!(rb.versions(&address_subject), vec![refs[0].2]);
    }
    let after = b.read_all(&remote_refused).remove(0).remove(0);
    assert_translated(
        ra,
        rb,
        odd[1].value.as_deref().unwrap(),
        after.value.as_deref().unwrap(),
    );
    // Refused: dead-lettered with its source bytes, naming the id, the subject and the answer;
    // the target subject still holds its one version.
    let dead = b.read_all(&dlq).remove(0).remove(0);
    assert_eq!(
        dead.value, odd[0].value,
        "a dead letter keeps the bytes it was read with"
    );
    let message = dead.header_text("refract.error.message");
    for named in [
        incompatible.to_string(),
        target_subject.clone(),
        "409".to_string(),
    ] {
        assert!(message.contains(&named), "{named} not in: {message}");
    }
    assert_eq!(rb.versions(&target_subject).len(), 1);
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn a_source_registry_outage_holds_records_and_loses_none() {
    registry_outage("at-least-once");
}

#[test]
fn a_source_registry_outage_under_exactly_once() {
    registry_outage("exactly-once");
}

/// Kills the source registry while records with a schema id refract has not seen yet arrive:
/// they wait (their partitions degraded, /health not ok), none leaves untranslated, and once
/// the registry is back every record is on the target, in order, once.
fn registry_outage(delivery: &str) {
    let target = if delivery == "exactly-once" {
        "outage"
    } else {
        "b"
    };
    let rb = &registries().1;
    // A registry of its own: this test kills it.
    let ra = Registry::start();
    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    let topic = unique("outage");
    a.create_topic(&topic, 2);
    let subject = format!("{topic}-value");
    let first = ra.register(&subject, ORDER_V1, "AVRO", &[]);
    let flows = flow(
        "a",
        target,
        &format!("topics = [\"{topic}\"]\nschemas = \"translate\"\nschema_fields = [\"value\"]\ndelivery = \"{delivery}\"\nmm2_offsets_topic = \"{}\"\n", unique("offsets")),
    );
    let mut refract = Refract::start(
        &pipeline_with_registries(target, &ra.url(), &rb.url(), &flows),
        &[],
    );
    let remote = format!("a.{topic}");
    let batch = |from: usize, id: u32| -> Vec<TestRecord> {
        (from..from + 10)
            .map(|i| TestRecord {
                partition: (i % 2) as i32,
                ..record(
                    i,
                    Some(format!("k{i}").into_bytes()),
                    Some(framed(id, &avro_string(&format!("v{i}")))),
                )
            })
            .collect()
    };
    let before = batch(0, first);
    a.produce(&topic, &before);
    refract.wait("the first records on b", || {
        b.read_isolated(&remote, "read_committed")
            .iter()
            .map(Vec::len)
            .sum::<usize>()
            == 10
    });
    // The start's subject sync is done: the next version is known to refract only from its
    // records.
    refract.wait("the start's subject sync", || {
        status_schemas(&refract)["synced_subjects"].as_u64() == Some(1)
    });
    let second = ra.register(&subject, ORDER_V2, "AVRO", &[]);

    // Down: records with an id not seen yet wait, their partitions degraded.
    ra.kill();
    let during = batch(10, second);
    a.produce(&topic, &during);
    let addr = refract.metrics_addr();
    refract.wait("a partition degraded for the schema registry", || {
        let (_, body) = http(&addr, "GET", "/status");
        body.contains("schema_registry")
    });
    let (code, health) = http(&addr, "GET", "/health");
    assert_ne!(
        code, 200,
        "healthy while records wait for the registry: {health}"
    );
    assert_eq!(
        b.read_isolated(&remote, "read_uncommitted")
            .iter()
            .map(Vec::len)
            .sum::<usize>(),
        10,
        "a record left untranslated"
    );

    // Back, with what it held (its storage survives a kill, as a production registry's does).
    ra.restart();
    assert_eq!(ra.register(&subject, ORDER_V2, "AVRO", &[]), second);
    refract.wait("every record on b", || {
        b.read_isolated(&remote, "read_committed")
            .iter()
            .map(Vec::len)
            .sum::<usize>()
            == 20
    });
    let all: Vec<TestRecord> = before.iter().chain(&during).cloned().collect();
    let mirrored = b.read_isolated(&remote, "read_committed");
    for p in 0..2 {
        let sent: Vec<&TestRecord> = all.iter().filter(|r| r.partition == p).collect();
        assert_eq!(mirrored[p as usize].len(), sent.len(), "partition {p}");
        for (from, to) in sent.iter().zip(&mirrored[p as usize]) {
            assert_eq!(from.key, to.key, "partition {p}: out of order");
            assert_translated(
                &ra,
                rb,
                from.value.as_deref().unwrap(),
                to.value.as_deref().unwrap(),
            );
        }
    }
    refract.wait("healthy again", || http(&addr, "GET", "/health").0 == 200);
    // An outage is reported (WARN, degraded), not an error an operator must act on: under
    // exactly-once no transaction fails for it.
    assert_eq!(refract.log_count("ERROR"), 0, "{}", refract.log());
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn translation_under_exactly_once() {
    let (ra, rb) = registries();
    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    let topic = unique("eos");
    a.create_topic(&topic, 2);
    let id = ra.register(&format!("{topic}-value"), ORDER_V1, "AVRO", &[]);
    let records: Vec<TestRecord> = (0..200)
        .map(|i| TestRecord {
            partition: (i % 2) as i32,
            ..record(
                i,
                Some(format!("k{i}").into_bytes()),
                Some(framed(id, &avro_string(&format!("e{i}")))),
            )
        })
        .collect();
    a.produce(&topic, &records);
    let flows = flow(
        "a",
        "eos",
        &format!("topics = [\"{topic}\"]\nschemas = \"translate\"\ndelivery = \"exactly-once\"\nmm2_offsets_topic = \"{}\"\n", unique("offsets")),
    );
    let text = pipeline_with_registries("eos", &ra.url(), &rb.url(), &flows);
    let mut refract = Refract::start(&text, &[]);
    let remote = format!("a.{topic}");
    refract.wait("every record committed on b", || {
        b.read_isolated(&remote, "read_committed")
            .iter()
            .map(Vec::len)
            .sum::<usize>()
            == 200
    });
    let committed = b.read_isolated(&remote, "read_committed");
    for p in 0..2 {
        let sent: Vec<&TestRecord> = records.iter().filter(|r| r.partition == p).collect();
        assert_eq!(
            committed[p as usize].len(),
            sent.len(),
            "partition {p}: duplicates or gaps"
        );
        for (from, to) in sent.iter().zip(&committed[p as usize]) {
            assert_eq!(from.key, to.key);
            assert_translated(
                ra,
                rb,
                from.value.as_deref().unwrap(),
                to.value.as_deref().unwrap(),
            );
        }
    }
    assert_eq!(refract.stop(), Some(0));
}

/// A target registry that loses its data and is rebuilt, its ids now naming other schemas:
/// the cached ids are checked every `schema_sync_interval`, the one that names another schema
/// now is forgotten, and the next records get the id the target gives the schema anew, never
/// the old one (which would point consumers at the wrong schema).
#[test]
fn a_target_registry_rebuilt_with_other_ids_is_translated_again() {
    let (ra, _) = registries();
    let rc = Registry::start();
    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    let topic = unique("rebuilt");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 1);
    let id = ra.register(&format!("{topic}-value"), ORDER_V1, "AVRO", &[]);
    let records: Vec<TestRecord> = (0..10)
        .map(|i| {
            record(
                i,
                Some(format!("k{i}").into_bytes()),
                Some(framed(id, &avro_string(&format!("l{i}")))),
            )
        })
        .collect();
    a.produce(&topic, &records[..5]);
    let flows = flow(
        "a",
        "rebuilt",
        &format!(
            "topics = [\"{topic}\"]\nschemas = \"translate\"\nschema_sync_interval = \"1s\"\n"
        ),
    );
    let text = pipeline_with_registries("rebuilt", &ra.url(), &rc.url(), &flows);
    let mut refract = Refract::start(&text, &[]);
    refract.wait("the first 5 records on b", || {
        b.counts(&remote).iter().sum::<i64>() == 5
    });
    let first = b.read_all(&remote)[0].clone();
    let old = id_of(first[0].value.as_deref().unwrap());
    assert_translated(
        ra,
        &rc,
        records[0].value.as_deref().unwrap(),
        first[0].value.as_deref().unwrap(),
    );
    // Rebuilt empty, other schemas take the ids again, the old one included.
    rc.wipe();
    let mut taken = 0;
    for i in 0.. {
        taken = rc.register(
            &format!("unrelated-{i}"),
            &format!(
                "{{\"type\":\"fixed\",\"name\":\"G{i}\",\"size\":{}}}",
                i + 1
            ),
            "AVRO",
            &[],
        );
        if taken >= old {
            break;
        }
    }
    assert!(taken >= old);
    assert_ne!(
        rc.schema_by_id(old),
        ra.schema_by_id(id),
        "id {old} still names the schema"
    );
    refract.wait("the old target id forgotten", || {
        refract.log_count(&format!("target id {old}")) > 0
    });
    a.produce(&topic, &records[5..]);
    refract.wait("all 10 records on b", || {
        b.counts(&remote).iter().sum::<i64>() == 10
    });
    let mirrored = b.read_all(&remote)[0].clone();
    for (from, to) in records[5..].iter().zip(&mirrored[5..]) {
        let to = to.value.as_deref().unwrap();
        assert_ne!(id_of(to), old, "a record left with the old id");
        assert_translated(ra, &rc, from.value.as_deref().unwrap(), to);
    }
    assert_eq!(refract.stop(), Some(0));
}

/// Cluster mode: two processes share a translating flow's two tasks, each translating (and
/// registering) for the partitions it mirrors; both register the same subject, which the
/// target holds once.
#[test]
fn translation_in_cluster_mode() {
    let (ra, rb) = registries();
    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    let topic = unique("clustered");
    a.create_topic(&topic, 4);
    let id = ra.register(&format!("{topic}-value"), ORDER_V1, "AVRO", &[]);
    // A target alias of its own: the cluster group (`refract-a-<target>-cluster`) and the
    // flow's internal topics are named by it.
    let flows = flow(
        "a",
        "clustered",
        &format!("topics = [\"{topic}\"]\nschemas = \"translate\"\ntasks = 2\n"),
    );
    let text = format!(
        "[cluster]\ninstance = \"${{env:REFRACT_INSTANCE}}\"\n\n{}",
        pipeline_with_registries("clustered", &ra.url(), &rb.url(), &flows)
    );
    let one = Refract::start_env(&text, &[], &[("REFRACT_INSTANCE", "one")]);
    let two = Refract::start_env(&text, &[], &[("REFRACT_INSTANCE", "two")]);
    let flow_of = |r: &Refract| -> Value {
        let (_, body) = http(&r.metrics_addr(), "GET", "/status");
        serde_json::from_str::<Value>(&body).expect("status JSON")["flows"][0].clone()
    };
    let tasks = |r: &Refract| flow_of(r)["tasks"].as_array().map_or(0, Vec::len);
    one.wait("each process running one of the two tasks", || {
        tasks(&one) == 1 && tasks(&two) == 1
    });
    let records: Vec<TestRecord> = (0..200)
        .map(|i| TestRecord {
            partition: (i % 4) as i32,
            ..record(
                i,
                Some(format!("k{i}").into_bytes()),
                Some(framed(id, &avro_string(&format!("c{i}")))),
            )
        })
        .collect();
    a.produce(&topic, &records);
    let remote = format!("a.{topic}");
    one.wait("every record on b", || {
        b.counts(&remote).iter().sum::<i64>() >= 200
    });
    let mirrored = b.read_all(&remote);
    for p in 0..4 {
        let sent: Vec<&TestRecord> = records.iter().filter(|r| r.partition == p).collect();
        assert_eq!(mirrored[p as usize].len(), sent.len(), "partition {p}");
        for (from, to) in sent.iter().zip(&mirrored[p as usize]) {
            assert_eq!(from.key, to.key, "partition {p}: order");
            assert_translated(
                ra,
                rb,
                from.value.as_deref().unwrap(),
                to.value.as_deref().unwrap(),
            );
        }
    }
    // Each process translated the values of its own partitions (keys are not framed).
    let translated = |r: &Refract| flow_of(r)["schemas"]["translated"].as_u64().unwrap_or(0);
    let (by_one, by_two) = (translated(&one), translated(&two));
    assert!(by_one > 0 && by_two > 0, "one {by_one}, two {by_two}");
    assert_eq!(by_one + by_two, 200, "one {by_one}, two {by_two}");
    assert_eq!(rb.versions(&format!("{remote}-value")).len(), 1);
    for mut r in [one, two] {
        assert_eq!(r.stop(), Some(0), "{}", r.log());
    }
}

#[test]
fn check_connect_probes_both_registries_and_check_refuses_a_missing_one() {
    let ra = &registries().0;
    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    let dir = tempfile::tempdir().expect("temp dir");
    let topic = unique("checked");
    let closed = format!("http://127.0.0.1:{}", free_port());
    let flows = flow(
        "a",
        "b",
        &format!("topics = [\"{topic}\"]\nschemas = \"translate\"\n"),
    );
    let text = format!(
        "{}\n[clusters.a.schema_registry]\nurl = \"{}\"\nuser = \"mirror\"\npassword = \"s3cret-registry-pass\"\n[clusters.b.schema_registry]\nurl = \"{closed}\"\ntimeout = \"2s\"\n",
        pipeline(&[("a", a), ("b", b)], &flows),
        ra.url()
    );
    let path = write_pipeline(dir.path(), &text);
    let out = Refract::output(&["check", "--connect", &path_str(&path)]);
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!shown.contains("s3cret-registry-pass"), "{shown}");
    assert_ne!(out.status.code(), Some(0), "{shown}");
    let yes = shown
        .lines()
        .find(|l| l.contains("cluster a's schema registry") && l.trim_start().starts_with("yes"));
    assert!(yes.is_some(), "{shown}");
    let no = shown
        .lines()
        .find(|l| l.contains(&closed) && l.trim_start().starts_with("no"));
    assert!(no.is_some(), "{shown}");

    // Without a registry on b, `check` refuses the file, naming the key and the cluster.
    let without = text
        .split("[clusters.b.schema_registry]")
        .next()
        .unwrap_or_default();
    let path = write_pipeline(dir.path(), without);
    let out = Refract::output(&["check", &path_str(&path)]);
    let shown = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        shown.contains("flow[0].schemas") && shown.contains("`b`"),
        "{shown}"
    );
}

/// The text of `page` from the heading `heading` to the next heading of any level.
fn guide_section<'a>(page: &'a str, heading: &str) -> &'a str {
    let start = page
        .find(heading)
        .unwrap_or_else(|| panic!("the guide has no `{heading}`"));
    let body = &page[start + heading.len()..];
    let end = body.find("\n#").unwrap_or(body.len());
    &body[..end]
}

/// The fenced code blocks of `text` (```` ``` ```` fences at the start of a line).
fn fenced(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut open: Option<String> = None;
    for line in text.lines() {
        match (&mut open, line.starts_with("```")) {
            (None, true) => open = Some(String::new()),
            (Some(_), true) => out.extend(open.take()),
            (Some(block), false) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, false) => {}
        }
    }
    out
}

/// The bytes a `printf` format of octal escapes and plain characters writes.
fn printf_bytes(format: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek().copied()) {
            ('\\', Some('n')) => {
                chars.next();
                out.push(b'\n');
            }
            ('\\', Some(d)) if d.is_ascii_digit() => {
                let octal: String = (0..3).filter_map(|_| chars.next()).collect();
                out.push(u8::from_str_radix(&octal, 8).expect("an octal escape"));
            }
            _ => out.push(c as u8),
        }
    }
    out
}

/// The numbers `od -A d -t u1` prints after its offset column, from a quoted output line.
fn od_bytes(line: &str) -> Vec<u8> {
    line.split_whitespace()
        .skip(1)
        .map(|n| n.parse().expect("a byte"))
        .collect()
}

/// The schema-registries guide's walkthrough, as the page writes it: its curl registrations on
/// two fresh registries (the ids it says they answer), its printf-framed record, its pipeline
/// (addresses, and the topic for a name of this test's own, replaced), and the target's
/// subjects, record bytes and `/status` it says a reader sees. A change to the page or to the
/// code that makes the page wrong fails here.
#[test]
fn the_guide_walkthrough_works_as_written() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/src/guides/schema-registries.md"),
    )
    .expect("read docs/src/guides/schema-registries.md");
    let (primary, backup) = std::thread::scope(|s| {
        let primary = s.spawn(Registry::start);
        let backup = Registry::start();
        (primary.join().expect("primary's registry"), backup)
    });
    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    let topic = unique("orders");
    let local = |text: &str| {
        text.replace("http://127.0.0.1:18081/apis/ccompat/v7", &primary.url())
            .replace("http://127.0.0.1:28081/apis/ccompat/v7", &backup.url())
            .replace("127.0.0.1:19092", &a.bootstrap)
            .replace("127.0.0.1:29092", &b.bootstrap)
            .replace("127.0.0.1:9464", "127.0.0.1:0")
            .replace("orders", &topic)
    };

    // Step 3: the registrations, in the page's order, each on the registry its port names.
    let step3 = guide_section(&page, "### 3. A schema and a framed record");
    let blocks = fenced(step3);
    let mut ids = Vec::new();
    for curl in blocks[0].split("curl ").skip(1) {
        let data = curl
            .split("--data '")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .expect("a curl --data '…'");
        let url = curl
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .map(|w| w.trim_end_matches(';'))
            .expect("a curl URL");
        let body: Value = serde_json::from_str(data).expect("the --data JSON");
        let subject = url
            .split("/subjects/")
            .nth(1)
            .and_then(|s| s.strip_suffix("/versions"))
            .expect("a subject's versions URL");
        let registry = if url.contains(":18081/") {
            &primary
        } else {
            assert!(url.contains(":28081/"), "{url}");
            &backup
        };
        let schema = body["schema"].as_str().expect("the schema text");
        ids.push(registry.register(&local(subject), schema, "AVRO", &[]));
    }
    assert!(
        step3.contains("Both answer `{\"id\":1}`"),
        "the page changed"
    );
    assert_eq!(
        ids,
        vec![1, 1],
        "the page says both registrations answer id 1"
    );

    // The record: the bytes of the printf the producer is fed, and what `od` says they are.
    let produced = blocks[1]
        .lines()
        .find(|l| l.starts_with("printf") && l.contains("ConsoleProducer"))
        .and_then(|l| l.split('\'').nth(1))
        .map(printf_bytes)
        .expect("the producer's printf");
    let value = produced
        .strip_suffix(b"\n")
        .expect("one line for the console producer")
        .to_vec();
    let shown = step3
        .split("`od` prints `")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .expect("the od output the page shows");
    assert_eq!(
        od_bytes(shown),
        value,
        "the page's od line is not its printf"
    );
    a.create_topic(&topic, 1);
    a.produce(&topic, &[record(0, None, Some(value.clone()))]);

    // Step 4: the pipeline as written; step 5: run it.
    let toml = fenced(guide_section(&page, "### 4. The pipeline"))
        .into_iter()
        .find(|b| b.contains("[[flow]]"))
        .expect("the pipeline block");
    let mut refract = Refract::start(&local(&toml), &[]);
    let remote = format!("primary.{topic}");
    refract.wait("the record on backup", || {
        b.counts(&remote).iter().sum::<i64>() == 1
    });

    // Step 6: what the page says the reader sees.
    let step6 = guide_section(&page, "### 6. Look at the target");
    let subjects = step6
        .split("The first prints `")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .expect("the subjects the page shows");
    let subjects: Vec<String> = serde_json::from_str(&local(subjects)).expect("a JSON list");
    assert_eq!(backup.subjects(), subjects);
    assert!(
        step6.contains("version 1 with\n`\"id\":2`"),
        "the page changed"
    );
    let subject = format!("{remote}-value");
    assert_eq!(backup.versions(&subject), vec![1]);
    assert_eq!(
        backup.register(&subject, &primary.schema_by_id(1).unwrap().0, "AVRO", &[]),
        2
    );
    let mirrored = b.read_all(&remote).remove(0).remove(0);
    let shown = step6
        .split("`od` prints `")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .expect("the od output of the mirrored record");
    let mut want = od_bytes(shown);
    assert_eq!(want.pop(), Some(10), "the console consumer's line break");
    assert_eq!(mirrored.value, Some(want));
    // The start's subject sync may end after the record arrived.
    refract.wait("the start's subject sync", || {
        status_schemas(&refract)["synced_subjects"]
            .as_u64()
            .is_some_and(|n| n > 0)
    });
    let status = status_schemas(&refract);
    for (field, stated) in [
        ("translated", "`\"translated\":1`"),
        ("synced_subjects", "`\"synced_subjects\":1`"),
    ] {
        assert!(step6.contains(stated), "the page no longer says {stated}");
        assert_eq!(status[field], 1, "{field}: {status}");
    }
    assert!(step6.contains("`\"last_error\":null`"));
    assert_eq!(status["last_error"], Value::Null, "{status}");
    assert_eq!(refract.stop(), Some(0));
}
