//! What tests do on a running broker through Kafka's clients: create and grow topics, read
//! configs and group offsets, produce test records and read them back (plain, raw, isolated).
//! Kept apart from the launcher so each file has one job.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::records::{Deliveries, TestRecord, PROVENANCE};
use crate::wait::{unique, wait_or_explain, wait_until, DEADLINE};

use super::Broker;

/// The replication factor of the topics tests create: the cluster's `default.replication.factor`
/// (1 on a single broker, 3 on a [`Cluster3`](super::Cluster3)).
const REPLICATION: TopicReplication<'static> = TopicReplication::Fixed(-1);

impl Broker {
    /// A consumer with no group, for metadata and reads.
    pub fn consumer(&self) -> BaseConsumer {
        ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("enable.auto.commit", "false")
            .set("group.id", unique("reader"))
            .create()
            .expect("consumer")
    }

    /// Creates a topic.
    pub fn create_topic(&self, name: &str, partitions: i32) {
        self.create_topic_with(name, partitions, &[]);
    }

    /// Creates a topic with topic configs.
    pub fn create_topic_with(&self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        let mut topic = NewTopic::new(name, partitions, REPLICATION);
        for (k, v) in configs {
            topic = topic.set(k, v);
        }
        let res =
            futures_executor::block_on(self.admin().create_topics([&topic], &AdminOptions::new()))
                .expect("create topics");
        for r in res {
            r.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
        }
        self.wait_for_leaders(name, partitions);
    }

    /// Creates single-partition `names` with one CreateTopics request and waits until every one
    /// has a leader (one metadata request per look, however many topics).
    pub fn create_topics(&self, names: &[String]) {
        let new: Vec<NewTopic<'_>> = names
            .iter()
            .map(|n| NewTopic::new(n, 1, REPLICATION))
            .collect();
        let res = futures_executor::block_on(
            self.admin().create_topics(new.iter(), &AdminOptions::new()),
        )
        .expect("create topics");
        for r in res {
            r.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
        }
        let c = self.consumer();
        wait_until(
            &format!(
                "{} new topics on {} to have leaders",
                names.len(),
                self.name
            ),
            || {
                let Ok(md) = c.fetch_metadata(None, Duration::from_secs(10)) else {
                    return false;
                };
                let ready: std::collections::HashSet<&str> = md
                    .topics()
                    .iter()
                    .filter(|t| {
                        t.error().is_none()
                            && t.partitions()
                                .iter()
                                .all(|p| p.error().is_none() && p.leader() >= 0)
                    })
                    .map(|t| t.name())
                    .collect();
                names.iter().all(|n| ready.contains(n.as_str()))
            },
        );
    }

    /// Produces one record to partition 0 of each of `topics` (its key is the topic's name) with
    /// one producer, and waits for every acknowledgement.
    pub fn produce_one_each(&self, topics: &[String]) {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("linger.ms", "5")
            .create()
            .expect("producer");
        for t in topics {
            producer
                .send(BaseRecord::<str, str>::to(t).partition(0).key(t).payload(t))
                .unwrap_or_else(|(e, _)| panic!("producing to {t}: {e}"));
        }
        producer
            .flush(Duration::from_secs(60))
            .expect("every record acknowledged");
    }

    /// The end offset of partition 0 of each of `topics` (0 for a topic that does not exist),
    /// read with one consumer.
    pub fn ends(&self, topics: &[String]) -> Vec<i64> {
        let c = self.consumer();
        topics
            .iter()
            .map(|t| {
                c.fetch_watermarks(t, 0, Duration::from_secs(10))
                    .map_or(0, |(_, high)| high)
            })
            .collect()
    }

    /// Deletes `topic` (the broker answers once the controller has it deleted).
    pub fn delete_topic(&self, name: &str) {
        let deleted =
            futures_executor::block_on(self.admin().delete_topics(&[name], &AdminOptions::new()))
                .expect("delete topics");
        for r in deleted {
            r.unwrap_or_else(|(t, e)| panic!("deleting {t} on {}: {e}", self.name));
        }
    }

    /// The metadata `group` committed with its position on `topic`'s partition `partition`
    /// (`None`: no position committed).
    pub fn committed_metadata(&self, group: &str, topic: &str, partition: i32) -> Option<String> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(topic, partition);
        let got = self
            .group_consumer(group)
            .committed_offsets(tpl, Duration::from_secs(10))
            .expect("committed offsets");
        let elem = got.find_partition(topic, partition)?;
        matches!(elem.offset(), Offset::Offset(_)).then(|| elem.metadata().to_string())
    }

    /// Deletes `topic` and creates it again with `partitions` partitions (what a "reset" of a
    /// topic in a development cluster does): a new topic id, offsets from 0. Creating it is
    /// retried while the broker still finishes the deletion.
    pub fn recreate_topic(&self, name: &str, partitions: i32) {
        self.delete_topic(name);
        let admin = self.admin();
        let topic = NewTopic::new(name, partitions, REPLICATION);
        let last = std::cell::RefCell::new(String::new());
        wait_or_explain(
            &format!("{name} to be created again on {}", self.name),
            || {
                let res =
                    futures_executor::block_on(admin.create_topics([&topic], &AdminOptions::new()))
                        .expect("create topics");
                match res.into_iter().next() {
                    Some(Ok(_)) => true,
                    Some(Err((_, e))) => {
                        *last.borrow_mut() = e.to_string();
                        false
                    }
                    None => false,
                }
            },
            || last.borrow().clone(),
        );
        self.wait_for_leaders(name, partitions);
    }

    /// Waits until every partition of `topic` has a leader that answers ListOffsets: a topic
    /// the controller just created is in the metadata a moment before its partitions serve.
    pub fn wait_for_leaders(&self, topic: &str, partitions: i32) {
        let c = self.consumer();
        wait_or_explain(
            &format!(
                "every partition of {topic} on {} to have a leader",
                self.name
            ),
            || {
                let ready = c
                    .fetch_metadata(Some(topic), Duration::from_secs(5))
                    .ok()
                    .and_then(|md| {
                        md.topics().first().map(|t| {
                            t.error().is_none()
                                && t.partitions().len() as i32 == partitions
                                && t.partitions()
                                    .iter()
                                    .all(|p| p.error().is_none() && p.leader() >= 0)
                        })
                    })
                    .unwrap_or(false);
                ready
                    && (0..partitions)
                        .all(|p| c.fetch_watermarks(topic, p, Duration::from_secs(5)).is_ok())
            },
            || self.log(),
        );
    }

    /// Grows `topic` to `total` partitions (CreatePartitions).
    pub fn add_partitions(&self, topic: &str, total: usize) {
        let res = futures_executor::block_on(self.admin().create_partitions(
            [&rdkafka::admin::NewPartitions::new(topic, total)],
            &AdminOptions::new(),
        ))
        .expect("create partitions");
        for r in res {
            r.unwrap_or_else(|(t, e)| panic!("adding partitions to {t}: {e}"));
        }
        self.wait_for_leaders(topic, total as i32);
    }

    /// Runs one of Kafka's own command-line tools (`class`, e.g.
    /// `org.apache.kafka.tools.AclCommand`) against this broker, `--bootstrap-server` first;
    /// panics unless it succeeds, and returns what it printed.
    pub fn tool(&self, class: &str, args: &[&str]) -> String {
        let out = Command::new(&self.java)
            .arg("-cp")
            .arg(format!("{}/*", self.kafka_libs.display()))
            .args(["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"])
            .arg(class)
            .args(["--bootstrap-server", &self.bootstrap])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run a Kafka tool");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "{class} {args:?} on {} failed:\n{text}",
            self.name
        );
        text
    }

    /// An admin client of this cluster.
    pub fn admin(&self) -> AdminClient<DefaultClientContext> {
        ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .expect("admin")
    }

    /// Every config entry of topic `name`, as the broker describes them.
    pub fn describe_topic(&self, name: &str) -> Vec<rdkafka::admin::ConfigEntry> {
        let res = futures_executor::block_on(self.admin().describe_configs(
            [&rdkafka::admin::ResourceSpecifier::Topic(name)],
            &AdminOptions::new(),
        ))
        .expect("describe configs");
        res.into_iter()
            .flat_map(|r| r.expect("describe").entries)
            .collect()
    }

    /// The configs set on `topic` itself (not defaults), as the broker describes them.
    pub fn topic_overrides(&self, name: &str) -> BTreeMap<String, String> {
        self.describe_topic(name)
            .into_iter()
            .filter(|e| e.source == rdkafka::admin::ConfigSource::DynamicTopic)
            .filter_map(|e| e.value.map(|v| (e.name, v)))
            .collect()
    }

    /// A topic's configs as the broker describes them.
    pub fn topic_configs(&self, name: &str) -> BTreeMap<String, String> {
        self.describe_topic(name)
            .into_iter()
            .filter_map(|e| e.value.map(|v| (e.name, v)))
            .collect()
    }

    /// A consumer in `group` that commits only when told.
    fn group_consumer(&self, group: &str) -> BaseConsumer {
        ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer")
    }

    /// Commits `offsets` (partition → next offset) for `group` on `topic`, as a consumer that
    /// read that far would.
    pub fn commit_group(&self, group: &str, topic: &str, offsets: &[(i32, i64)]) {
        let c = self.group_consumer(group);
        let mut tpl = TopicPartitionList::new();
        for (p, o) in offsets {
            tpl.add_partition_offset(topic, *p, Offset::Offset(*o))
                .expect("tpl");
        }
        c.commit(&tpl, rdkafka::consumer::CommitMode::Sync)
            .expect("commit");
    }

    /// Deletes the records of `topic`'s partition `partition` before offset `before` (a
    /// DeleteRecords request, what `kafka-delete-records` sends) and waits until the partition's
    /// log starts there.
    pub fn delete_records(&self, topic: &str, partition: i32, before: i64) {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(before))
            .expect("tpl");
        let done =
            futures_executor::block_on(self.admin().delete_records(&tpl, &AdminOptions::new()))
                .unwrap_or_else(|e| {
                    panic!(
                        "deleting records of {topic}[{partition}] on {}: {e}",
                        self.name
                    )
                });
        for elem in done.elements() {
            elem.error().unwrap_or_else(|e| {
                panic!(
                    "deleting records of {topic}[{partition}] on {}: {e}",
                    self.name
                )
            });
        }
        let c = self.consumer();
        wait_until(
            &format!(
                "{topic}[{partition}] on {} to start at offset {before}",
                self.name
            ),
            || {
                c.fetch_watermarks(topic, partition, Duration::from_secs(10))
                    .is_ok_and(|(low, _)| low == before)
            },
        );
    }

    /// `group`'s committed offsets on `partitions` partitions of `topic` (None: no commit).
    pub fn group_offsets(&self, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
        let c = self.group_consumer(group);
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        let got = c
            .committed_offsets(tpl, Duration::from_secs(10))
            .expect("committed offsets");
        (0..partitions)
            .map(|p| match got.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => Some(o),
                _ => None,
            })
            .collect()
    }

    /// The raw (key, value) of every record of single-partition `topic`.
    pub fn read_raw(&self, topic: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.read_all_raw(topic)
            .into_iter()
            .flatten()
            .map(|r| (r.key.unwrap_or_default(), r.value.unwrap_or_default()))
            .collect()
    }

    /// Topic name → partition count.
    pub fn topics(&self) -> BTreeMap<String, i32> {
        let md = self
            .consumer()
            .fetch_metadata(None, Duration::from_secs(10))
            .expect("metadata");
        md.topics()
            .iter()
            .map(|t| (t.name().to_string(), t.partitions().len() as i32))
            .collect()
    }

    /// User topics only: no `__` broker internals and none of the MirrorMaker 2 internal topics
    /// (`heartbeats`, `<alias>.heartbeats`, offset syncs, checkpoints, dead letters: `*internal`).
    pub fn user_topics(&self) -> Vec<String> {
        self.topics()
            .into_keys()
            .filter(|t| {
                // any separator: `a.heartbeats`, `a_heartbeats`, `a_checkpoints_internal`
                !t.starts_with("__") && !t.ends_with("heartbeats") && !t.ends_with("internal")
            })
            .collect()
    }

    /// Records per partition (high watermark − low watermark).
    pub fn counts(&self, topic: &str) -> Vec<i64> {
        let c = self.consumer();
        let partitions = self.topics().get(topic).copied().unwrap_or(0);
        (0..partitions)
            .map(|p| {
                // A partition whose leader is moving (a topic just created, a broker just
                // restarted) answers with a retriable error for a moment.
                let mut last = None;
                for _ in 0..50 {
                    match c.fetch_watermarks(topic, p, Duration::from_secs(10)) {
                        Ok((lo, hi)) => return hi - lo,
                        Err(e) => last = Some(e),
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                panic!("watermarks of {topic}[{p}] on {}: {last:?}", self.name)
            })
            .collect()
    }

    /// Produces `records` and waits for every acknowledgement.
    pub fn produce(&self, topic: &str, records: &[TestRecord]) {
        self.produce_with(topic, records, &[]);
    }

    /// Produces `records` with extra producer settings (`compression.type`, say) and waits for
    /// every acknowledgement.
    pub fn produce_with(&self, topic: &str, records: &[TestRecord], settings: &[(&str, &str)]) {
        let before: i64 = self.counts(topic).iter().sum();
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "5");
        for (k, v) in settings {
            config.set(*k, *v);
        }
        let producer: BaseProducer<Deliveries> = config
            .create_with_context(Deliveries::default())
            .expect("producer");
        for r in records {
            let headers = r.headers.iter().fold(OwnedHeaders::new(), |h, (k, v)| {
                h.insert(Header {
                    key: k,
                    value: v.as_deref(),
                })
            });
            let mut rec: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic)
                .partition(r.partition)
                .timestamp(r.timestamp)
                .headers(headers);
            rec.key = r.key.as_deref();
            rec.payload = r.value.as_deref();
            let mut rec = rec;
            loop {
                match producer.send(rec) {
                    Ok(()) => break,
                    Err((_, back)) => {
                        rec = back;
                        producer.poll(Duration::from_millis(50));
                    }
                }
            }
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(60)).expect("flush");
        let failed = producer
            .context()
            .failed
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        assert!(
            failed.is_empty(),
            "{} records to {topic} on {} failed: {:?}",
            failed.len(),
            self.name,
            failed.first()
        );
        // At least: a mirror may write into the same topic meanwhile (active/active with
        // identity names), so the count can grow by more than these records.
        let after: i64 = self.counts(topic).iter().sum();
        assert!(
            after - before >= records.len() as i64,
            "every record produced to {topic} must be acknowledged: {} of {} are on {}",
            after - before,
            records.len(),
            self.name
        );
    }

    /// The compression codec of every record batch stored in partition `partition` of `topic`
    /// (`none`, `gzip`, `snappy`, `lz4`, `zstd`), read from the broker's log segments: what a
    /// producer really wrote, which a consumer (which decompresses) cannot tell.
    pub fn batch_codecs(&self, topic: &str, partition: i32) -> Vec<&'static str> {
        let dir = self.dir.join("data").join(format!("{topic}-{partition}"));
        let mut segments: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        segments.sort();
        let mut out = Vec::new();
        for seg in segments {
            let bytes = std::fs::read(&seg).expect("segment");
            // v2 batch: baseOffset i64, batchLength i32, leaderEpoch i32, magic i8, crc u32,
            // attributes i16 (codec in the low 3 bits); the next batch follows batchLength.
            let mut at = 0;
            while at + 23 <= bytes.len() {
                let len = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("len"));
                if len <= 0 {
                    break; // preallocated, unwritten tail
                }
                let attributes = i16::from_be_bytes(bytes[at + 21..at + 23].try_into().expect("a"));
                out.push(match attributes & 7 {
                    0 => "none",
                    1 => "gzip",
                    2 => "snappy",
                    3 => "lz4",
                    4 => "zstd",
                    _ => "unknown",
                });
                at += 12 + len as usize;
            }
        }
        out
    }

    /// Every record of `topic`, per partition, in offset order, without refract's provenance
    /// header (see [`Broker::read_all_raw`]).
    pub fn read_all(&self, topic: &str) -> Vec<Vec<TestRecord>> {
        let mut all = self.read_all_raw(topic);
        for r in all.iter_mut().flatten() {
            r.headers.retain(|(k, _)| k != PROVENANCE);
        }
        all
    }

    /// Every record of `topic` a consumer with `isolation.level` = `isolation`
    /// (`read_committed` or `read_uncommitted`) sees, per partition, in offset order, without
    /// refract's provenance header: read until every partition reports its end (a
    /// transactional topic's watermarks count commit markers and aborted records too).
    pub fn read_isolated(&self, topic: &str, isolation: &str) -> Vec<Vec<TestRecord>> {
        let partitions = self.counts(topic).len();
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("enable.auto.commit", "false")
            .set("group.id", unique("reader"))
            .set("isolation.level", isolation)
            .set("enable.partition.eof", "true")
            .create()
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions as i32 {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .expect("tpl");
        }
        c.assign(&tpl).expect("assign");
        let mut out: Vec<Vec<TestRecord>> = vec![Vec::new(); partitions];
        let mut ended = std::collections::BTreeSet::new();
        let deadline = Instant::now() + DEADLINE;
        while ended.len() < partitions {
            assert!(
                Instant::now() < deadline,
                "timed out reading {topic} ({isolation})"
            );
            match c.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => {
                    let mut r = TestRecord::from_message(&m);
                    r.headers.retain(|(k, _)| k != PROVENANCE);
                    out[m.partition() as usize].push(r);
                }
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                    ended.insert(p);
                }
                Some(Err(e)) => panic!("reading {topic}: {e}"),
                None => {}
            }
        }
        out
    }

    /// Every record of `topic`, per partition, in offset order, exactly as stored.
    pub fn read_all_raw(&self, topic: &str) -> Vec<Vec<TestRecord>> {
        let counts = self.counts(topic);
        let c = self.consumer();
        let mut tpl = TopicPartitionList::new();
        for p in 0..counts.len() as i32 {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .expect("tpl");
        }
        c.assign(&tpl).expect("assign");
        let mut out: Vec<Vec<TestRecord>> = vec![Vec::new(); counts.len()];
        let deadline = Instant::now() + DEADLINE;
        while out.iter().zip(&counts).any(|(o, n)| (o.len() as i64) < *n) {
            assert!(Instant::now() < deadline, "timed out reading {topic}");
            if let Some(m) = c.poll(Duration::from_millis(200)) {
                let m = m.expect("read");
                out[m.partition() as usize].push(TestRecord::from_message(&m));
            }
        }
        out
    }
}
