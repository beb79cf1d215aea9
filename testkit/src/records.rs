//! Records as produced and read back, sample data, a background producer, and the check that a
//! target topic holds a source topic's records in order.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::message::BorrowedMessage;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::Message;

use crate::c_api::message_headers;
use crate::Broker;

/// A producer context that keeps every delivery failure, so a test sees them.
#[derive(Default)]
pub struct Deliveries {
    /// The error of each record the broker did not acknowledge.
    pub failed: Mutex<Vec<String>>,
}

impl rdkafka::ClientContext for Deliveries {}

impl rdkafka::producer::ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(e.to_string());
        }
    }
}

/// The header refract stamps on mirrored records: the clusters they came through.
pub const PROVENANCE: &str = "refract.provenance";

/// A record as produced and as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRecord {
    /// The partition it was produced to or read from.
    pub partition: i32,
    /// Its key (`None`: no key).
    pub key: Option<Vec<u8>>,
    /// Its value (`None`: a tombstone).
    pub value: Option<Vec<u8>>,
    /// Its headers in order (a `None` value: a null header).
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Its timestamp in ms since the epoch (-1: none).
    pub timestamp: i64,
}

impl TestRecord {
    /// The first header named `name`, as lossy text; empty when there is none (or it is null).
    pub fn header_text(&self, name: &str) -> String {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    }

    /// A record as a consumer read it: key, value, every header and the timestamp. A header
    /// name that is not UTF-8 is kept lossily here (rdkafka's own header reader would panic);
    /// [`crate::c_api`] reads names as bytes.
    pub fn from_message(m: &BorrowedMessage<'_>) -> Self {
        Self {
            partition: m.partition(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers: message_headers(m)
                .into_iter()
                .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v))
                .collect(),
            timestamp: m.timestamp().to_millis().unwrap_or(-1),
        }
    }
}

/// `n` records spread over `partitions`: keys, two headers (one null), explicit timestamps,
/// every seventh a tombstone, every eleventh with no key, one with an empty value.
pub fn sample_records(tag: &str, partitions: i32, n: usize) -> Vec<TestRecord> {
    (0..n)
        .map(|i| TestRecord {
            partition: (i % partitions as usize) as i32,
            key: (i % 11 != 3).then(|| format!("{tag}-key-{i}").into_bytes()),
            value: match i {
                _ if i % 7 == 6 => None,
                5 => Some(Vec::new()),
                _ => Some(format!("{tag}-value-{i}-\u{00e9}\u{0000}\u{00ff}").into_bytes()),
            },
            headers: vec![
                ("trace".to_string(), Some(vec![0, 1, 2, (i % 256) as u8])),
                ("empty".to_string(), None),
            ],
            timestamp: 1_600_000_000_000 + (i as i64) * 7,
        })
        .collect()
}

/// Groups records by partition, keeping order.
pub fn by_partition(records: &[TestRecord], partitions: i32) -> Vec<Vec<TestRecord>> {
    let mut out = vec![Vec::new(); partitions as usize];
    for r in records {
        out[r.partition as usize].push(r.clone());
    }
    out
}

/// Whether each partition of `got` (a target topic read per partition) holds the last record of
/// the same partition of `want` (the source): mirrored in order, the target has then caught up.
/// A record count says less: the duplicates of a restart make a target partition as long as
/// its source while its last records are still on the way.
pub fn holds_last_records(want: &[Vec<TestRecord>], got: &[Vec<TestRecord>]) -> bool {
    got.len() == want.len()
        && want.iter().zip(got).all(|(want, got)| {
            want.last()
                .is_none_or(|last| got.iter().rev().any(|r| r.value == last.value))
        })
}

/// Checks that `got` (a target topic read per partition) holds every record of `want` (the
/// source, per partition) in order: the first occurrence of each value comes in source order
/// and nothing else is there. Returns the number of duplicates refract added (records on the
/// target beyond those on the source).
pub fn assert_mirrored_in_order(want: &[Vec<TestRecord>], got: &[Vec<TestRecord>]) -> usize {
    assert_eq!(want.len(), got.len(), "partitions");
    let mut duplicates = 0;
    for (p, (want, got)) in want.iter().zip(got).enumerate() {
        let mut seen = std::collections::BTreeSet::new();
        let firsts: Vec<&TestRecord> = got
            .iter()
            .filter(|r| seen.insert(r.value.clone()))
            .collect();
        let lost: Vec<_> = want
            .iter()
            .filter(|w| !seen.contains(&w.value))
            .map(|w| String::from_utf8_lossy(w.value.as_deref().unwrap_or_default()).to_string())
            .take(5)
            .collect();
        assert!(
            lost.is_empty(),
            "partition {p} lost records, first: {lost:?}"
        );
        // The source itself may hold a record twice (a producer's retry across a broker
        // restart): compare first occurrences on both sides.
        let mut seen_want = std::collections::BTreeSet::new();
        let want_firsts: Vec<&TestRecord> = want
            .iter()
            .filter(|r| seen_want.insert(r.value.clone()))
            .collect();
        assert_eq!(
            firsts.len(),
            want_firsts.len(),
            "partition {p}: records not from the source"
        );
        assert!(
            firsts.iter().zip(&want_firsts).all(|(g, w)| g == w),
            "partition {p}: records out of order or changed"
        );
        duplicates += got.len() - want.len();
    }
    duplicates
}

/// Records produced to a topic continuously from a thread of their own (values `r<n>`, round
/// robin over the partitions, about 200 a second unless [`Producing::at`] says more) until
/// [`Producing::finish`]; librdkafka holds them while the broker is away and sends them when it
/// is back.
pub struct Producing {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl Producing {
    /// Starts producing to `topic` on `broker`, one record every 5 ms.
    pub fn start(broker: &Broker, topic: &str, partitions: i32) -> Self {
        Self::at(broker, topic, partitions, 1)
    }

    /// Starts producing to `topic` on `broker`, `per_tick` records every 5 ms (about
    /// 200 × `per_tick` a second).
    pub fn at(broker: &Broker, topic: &str, partitions: i32, per_tick: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &broker.bootstrap)
            .set("enable.idempotence", "true")
            .set("message.timeout.ms", "0")
            .set("linger.ms", "5")
            .create()
            .expect("test producer");
        let topic = topic.to_string();
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                for _ in 0..per_tick {
                    let value = format!("r{n}");
                    let key = format!("k{n}");
                    let record = BaseRecord::to(&topic)
                        .partition((n % partitions as u64) as i32)
                        .key(&key)
                        .payload(&value);
                    if producer.send(record).is_ok() {
                        n += 1;
                    }
                }
                producer.poll(Duration::ZERO);
                std::thread::sleep(Duration::from_millis(5));
            }
            producer
                .flush(Duration::from_secs(180))
                .expect("every produced record acknowledged");
            n
        });
        Self {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops producing, waits until the broker acknowledged every record, and returns how many
    /// were produced.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .map(|h| h.join().expect("producer thread"))
            .unwrap_or(0)
    }
}

impl Drop for Producing {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
