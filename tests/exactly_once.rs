//! `delivery = "exactly-once"` against real Apache Kafka brokers: whatever happens to refract
//! or the target, a `read_committed` consumer of the target sees every source record exactly
//! once, in order per partition. Each test starts its own two brokers (they are killed).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::support::*;

fn flows(topic: &str, extra: &str) -> String {
    format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\ndelivery = \"exactly-once\"\n\
         transaction_interval = \"300ms\"\nrefresh_topics_interval = \"2s\"\nemit_checkpoints = false\n\
         replication_factor = 1\ninternal_replication_factor = 1\n{extra}"
    )
}

/// A pause of 0–999 ms that differs from run to run: a kill lands anywhere in a transaction.
fn random_pause() -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Duration::from_millis(u64::from(nanos % 1000))
}

/// Records a `read_committed` consumer of `topic` on `b` sees, once it sees at least as many
/// per partition as `want` has.
fn committed_at_least(
    refract: &Refract,
    b: &Broker,
    topic: &str,
    want: &[Vec<TestRecord>],
) -> Vec<Vec<TestRecord>> {
    let mut got = Vec::new();
    refract.wait(
        "read_committed consumers of the target to see every record",
        || {
            got = b.read_isolated(topic, "read_committed");
            got.len() == want.len() && got.iter().zip(want).all(|(g, w)| g.len() >= w.len())
        },
    );
    got
}

/// Aborted transactions leave records that only `read_uncommitted` consumers see: each is an
/// earlier attempt at a record a committed transaction holds (never other data). Returns how
/// many there are.
fn aborted_are_earlier_attempts(b: &Broker, topic: &str, committed: &[Vec<TestRecord>]) -> usize {
    let everything = b.read_isolated(topic, "read_uncommitted");
    let mut aborted = 0;
    for (p, (all, kept)) in everything.iter().zip(committed).enumerate() {
        assert!(all.len() >= kept.len(), "partition {p}");
        for r in all {
            assert!(
                kept.contains(r),
                "partition {p}: {:?} is in no committed transaction",
                r.value
            );
        }
        aborted += all.len() - kept.len();
    }
    aborted
}

/// kill -9 ten times at random moments while records keep arriving on three partitions: a
/// `read_committed` consumer sees each source record once, in order (keys and values).
#[test]
fn ten_sigkills_and_read_committed_sees_each_record_once() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("eos-kills");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 3);
    let producing = Producing::start(&a, &topic, 3);
    let text = pipeline(&[("a", &a), ("b", &b)], &flows(&topic, ""));
    let mut refract = Refract::start(&text, &[]);
    for round in 0..10 {
        let mark: i64 = b.counts(&remote).iter().sum();
        refract.wait(&format!("progress before kill {}", round + 1), || {
            b.counts(&remote).iter().sum::<i64>() > mark + 30
        });
        std::thread::sleep(random_pause());
        refract.kill();
        refract.restart(&[]);
    }
    let produced = producing.finish();
    let want = a.read_all(&topic);
    let got = committed_at_least(&refract, &b, &remote, &want);
    assert_eq!(
        got, want,
        "read_committed: each source record once, in order"
    );
    let aborted = aborted_are_earlier_attempts(&b, &remote, &got);
    println!(
        "10 SIGKILLs, exactly-once: {produced} records, each once for read_committed; {aborted} records of aborted transactions seen only by read_uncommitted"
    );
    // `refract verify` reads the target read_committed: every partition matches its source.
    let verified = Refract::output(&["verify", "--config", &path_str(&refract.pipeline)]);
    let report = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{report}");
    assert_eq!(
        report.lines().filter(|l| l.starts_with("OK ")).count(),
        3,
        "{report}"
    );
    assert!(
        !refract.log().contains("fenced"),
        "a restart is never fenced by the process it replaces:\n{}",
        refract.log()
    );
}

/// A zombie: the first process freezes (SIGSTOP) mid-stream, drops out of the flow's solo group,
/// and a second process on the same pipeline takes over; when the first wakes up, the second has
/// fenced it, and it stops that flow with an error naming the transactional id. The target
/// still holds each record once.
#[test]
fn a_second_process_fences_the_first_and_each_record_lands_once() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("eos-fence");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 2);
    let producing = Producing::start(&a, &topic, 2);
    let text = pipeline(&[("a", &a), ("b", &b)], &flows(&topic, ""));
    let first = Refract::start(&text, &[]);
    first.wait("mirroring under way", || {
        b.counts(&remote).iter().sum::<i64>() > 100
    });
    // Frozen, the first process stops heartbeating; the second waits on standby until the group
    // drops it (its session timeout), then takes over.
    first.signal("STOP");
    let mut second = Refract::start(&text, &[]);
    second.wait(
        "the second process to take over from the frozen one",
        || second.log().contains("joined group refract-a-b-solo-"),
    );
    first.signal("CONT");
    first.wait("the first process to report it was fenced", || {
        first
            .log()
            .contains("was fenced by a newer one on cluster b")
    });
    assert!(
        first.log().contains("transactional.id refract-a-b"),
        "{}",
        first.log()
    );
    let produced = producing.finish();
    let want = a.read_all(&topic);
    let got = committed_at_least(&second, &b, &remote, &want);
    assert_eq!(
        got, want,
        "read_committed: each source record once, in order"
    );
    println!("fenced: {produced} records, each once");
    assert_eq!(second.stop(), Some(0));
    drop(first);
}

/// A transform that fans each record out ×3 and dead-letters one, under three kill -9s: each
/// output once for `read_committed` consumers, the dead letter included.
#[test]
fn fan_out_and_dead_letters_under_sigkills_land_once() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("eos-fan");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 2);
    let producing = Producing::start(&a, &topic, 2);
    let processors = format!(
        "processors = [ {{ plugin = \"{}\", config = {{ copies = 3, reject_on = \"r40\" }}, on_error = \"dead-letter\" }} ]\n",
        Refract::guest("test_transform.wasm").display()
    );
    let text = pipeline(&[("a", &a), ("b", &b)], &flows(&topic, &processors));
    let mut refract = Refract::start(&text, &[]);
    for round in 0..3 {
        let mark: i64 = b.counts(&remote).iter().sum();
        refract.wait(&format!("progress before kill {}", round + 1), || {
            b.counts(&remote).iter().sum::<i64>() > mark + 90
        });
        std::thread::sleep(random_pause());
        refract.kill();
        refract.restart(&[]);
    }
    producing.finish();
    let source = a.read_all(&topic);
    let want: Vec<Vec<TestRecord>> = source
        .iter()
        .map(|partition| {
            partition
                .iter()
                .filter(|r| r.value.as_deref() != Some(b"r40".as_slice()))
                .flat_map(|r| {
                    (1..=3).map(move |c| TestRecord {
                        headers: vec![("copy".to_string(), Some(c.to_string().into_bytes()))],
                        ..r.clone()
                    })
                })
                .collect()
        })
        .collect();
    let got = committed_at_least(&refract, &b, &remote, &want);
    assert_eq!(got, want, "each of the three copies once, in order");
    let dead: Vec<TestRecord> = b
        .read_isolated("refract.dlq.a.internal", "read_committed")
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(dead.len(), 1, "the dead letter once: {dead:?}");
    assert_eq!(dead[0].value.as_deref(), Some(b"r40".as_slice()));
}

/// The target broker stopped for 30 s mid-stream and started again: the open transaction is
/// aborted, the flow starts over from the last committed positions, each record lands once.
#[test]
fn a_target_outage_of_30_s_keeps_each_record_once() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("eos-outage");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 2);
    let producing = Producing::start(&a, &topic, 2);
    let text = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n{}",
        pipeline(&[("a", &a), ("b", &b)], &flows(&topic, ""))
    );
    let refract = Refract::start(&text, &[]);
    let addr = refract.metrics_addr();
    refract.wait("mirroring under way", || {
        b.counts(&remote).iter().sum::<i64>() > 100
    });
    let stopped = Instant::now();
    b.kill();
    refract.wait("/health to name the target unreachable", || {
        http(&addr, "GET", "/health").1.contains("cluster b (")
    });
    // The outage itself: 30 s from the stop, whatever the detection took.
    std::thread::sleep(Duration::from_secs(30).saturating_sub(stopped.elapsed()));
    b.resume();
    let produced = producing.finish();
    let want = a.read_all(&topic);
    let got = committed_at_least(&refract, &b, &remote, &want);
    assert_eq!(
        got, want,
        "read_committed: each source record once, in order"
    );
    let metrics = http(&addr, "GET", "/metrics").1;
    let committed = series(
        &metrics,
        "refract_transactions_total",
        &[("flow", "a->b"), ("result", "committed")],
    );
    println!("target down 30 s, exactly-once: {produced} records, each once; transactions committed {committed:?}");
    assert!(committed.is_some_and(|n| n > 0.0), "{metrics}");
}

/// Errors injected into the target's transaction requests (librdkafka's mock cluster; a real
/// broker cannot be told to fail one request): a refused AddPartitionsToTxn aborts the
/// transaction before any of its records is written, and the flow starts over from the last
/// committed position; retriable Produce and EndTxn errors are retried inside the transaction.
/// Every source record arrives exactly once. (The mock cluster reports no aborted transactions
/// to readers, so a Produce error that aborts a transaction after some of its records were
/// written is checked on real Kafka above, by the kills and the outage.)
#[test]
fn injected_transaction_errors_are_aborted_or_retried_on_the_mock_cluster() {
    use rdkafka::mocking::MockCluster;
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
    let source = MockCluster::new(1).expect("source mock cluster");
    let target = MockCluster::new(1).expect("target mock cluster");
    // The mock cluster has no CreateTopics: what refract would create, created ahead.
    source.create_topic("orders", 1, 1).expect("topic");
    target.create_topic("a.orders", 1, 1).expect("topic");
    target
        .create_topic("mm2-offsets.a.internal", 25, 1)
        .expect("topic");
    let producer: rdkafka::producer::BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", source.bootstrap_servers())
        .create()
        .expect("producer");
    for i in 0..300 {
        let (key, value) = (format!("k{i}"), format!("v{i}"));
        producer
            .send(
                rdkafka::producer::BaseRecord::to("orders")
                    .key(&key)
                    .payload(&value),
            )
            .expect("queued");
    }
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(30)).expect("flushed");
    target.request_errors(
        RDKafkaApiKey::AddPartitionsToTxn,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED],
    );
    target.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS; 3],
    );
    target.request_errors(
        RDKafkaApiKey::EndTxn,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_COORDINATOR; 2],
    );
    let text = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n\n[clusters.a]\nbootstrap = \"{}\"\n\n[clusters.b]\nbootstrap = \"{}\"\n\n\
         [[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"orders\"]\ndelivery = \"exactly-once\"\n\
         transaction_interval = \"200ms\"\nemit_heartbeats = false\nemit_offset_syncs = false\n\
         emit_checkpoints = false\nsync_topic_configs = false\nsync_topic_acls = false\n",
        source.bootstrap_servers(),
        target.bootstrap_servers()
    );
    let mut refract = Refract::start(&text, &[]);
    let addr = refract.metrics_addr();
    let count = |result: &str| {
        series(
            &http(&addr, "GET", "/metrics").1,
            "refract_transactions_total",
            &[("flow", "a->b"), ("result", result)],
        )
        .unwrap_or(0.0)
    };
    let read = || -> Vec<String> {
        let consumer: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", target.bootstrap_servers())
            .set("group.id", unique("reader"))
            .set("enable.partition.eof", "true")
            .create()
            .expect("consumer");
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset("a.orders", 0, rdkafka::Offset::Beginning)
            .expect("tpl");
        rdkafka::consumer::Consumer::assign(&consumer, &tpl).expect("assign");
        let mut out = Vec::new();
        loop {
            match consumer.poll(Duration::from_secs(5)) {
                Some(Ok(m)) => out.push(
                    String::from_utf8_lossy(rdkafka::Message::payload(&m).unwrap_or_default())
                        .into_owned(),
                ),
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) | None => return out,
                Some(Err(e)) => panic!("reading a.orders: {e}"),
            }
        }
    };
    refract.wait(
        "300 records mirrored and a transaction committed after the abort",
        || count("aborted") >= 1.0 && count("committed") >= 1.0 && read().len() >= 300,
    );
    let want: Vec<String> = (0..300).map(|i| format!("v{i}")).collect();
    assert_eq!(read(), want, "each record once, in order");
    // /status counts the same transactions as the series (one event path).
    let status: serde_json::Value =
        serde_json::from_str(&http(&addr, "GET", "/status").1).expect("status json");
    let flow = &status["flows"][0];
    for result in ["committed", "aborted"] {
        let field = flow[format!("transactions_{result}")].as_u64().unwrap_or(0);
        assert!(field >= 1, "{flow}");
        assert!(field as f64 <= count(result), "{flow}");
    }
    println!(
        "mock cluster, injected errors: {} aborted, {} committed transactions",
        count("aborted"),
        count("committed")
    );
    assert_eq!(refract.stop(), Some(0));
}
