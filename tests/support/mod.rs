//! Test harness: real tansu brokers on loopback ports, the real `refract` binary, and Kafka
//! helpers to produce and read back records.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use tempfile::TempDir;

/// Generous deadline for anything a test waits on.
pub const DEADLINE: Duration = Duration::from_secs(90);

/// A name no other test uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{nanos:x}{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Polls `cond` until it holds or `DEADLINE` passes; panics with `what` on timeout.
pub fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    wait_or_explain(what, cond, String::new);
}

/// Like [`wait_until`], adding `explain()` (e.g. a process log) to the panic message.
pub fn wait_or_explain(what: &str, mut cond: impl FnMut() -> bool, explain: impl Fn() -> String) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            explain()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tansu_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("TANSU_BIN") {
        return PathBuf::from(p);
    }
    if let Some(home) = std::env::var_os("HOME") {
        let p = Path::new(&home).join(".cargo/bin/tansu");
        if p.exists() {
            return p;
        }
    }
    PathBuf::from("tansu")
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// One tansu broker = one single-node Kafka cluster with sqlite storage in a temp folder.
pub struct Broker {
    child: Child,
    pub bootstrap: String,
    pub dir: TempDir,
}

impl Broker {
    /// Starts a broker and waits until it answers metadata requests.
    pub fn start(cluster: &str) -> Self {
        Self::start_with(cluster, &format!("sqlite://{cluster}.db"))
    }

    /// Starts a broker with in-memory storage: the only tansu engine that describes consumer
    /// groups (DescribeGroups, group states), which the sqlite engine cannot (TEST-BROKERS.md).
    pub fn start_memory(cluster: &str) -> Self {
        Self::start_with(cluster, &format!("memory://{cluster}/"))
    }

    fn start_with(cluster: &str, storage: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let url = format!("tcp://127.0.0.1:{port}");
        let log = std::fs::File::create(dir.path().join("broker.log")).expect("broker log");
        let child = Command::new(tansu_binary())
            .current_dir(dir.path())
            .args(["broker", "--cluster-id", cluster, "--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", storage])
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start tansu ({}): {e}; run .ci/run or `cargo install tansu --version 0.6.0 --locked --features dynostore,libsql`", tansu_binary().display()));
        let broker = Self {
            child,
            bootstrap: format!("127.0.0.1:{port}"),
            dir,
        };
        wait_until("the broker to listen", || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        wait_until("the broker to serve metadata", || {
            broker
                .consumer()
                .fetch_metadata(None, Duration::from_secs(2))
                .is_ok()
        });
        broker
    }

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
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .expect("admin");
        let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        let res = futures_executor::block_on(admin.create_topics([&topic], &AdminOptions::new()))
            .expect("create topics");
        for r in res {
            r.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
        }
        wait_until("the topic to appear", || self.topics().contains_key(name));
    }

    /// Creates a topic with topic configs.
    pub fn create_topic_with(&self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .expect("admin");
        let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        for (k, v) in configs {
            topic = topic.set(k, v);
        }
        let res = futures_executor::block_on(admin.create_topics([&topic], &AdminOptions::new()))
            .expect("create topics");
        for r in res {
            r.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
        }
        wait_until("the topic to appear", || self.topics().contains_key(name));
    }

    /// A topic's configs as the broker describes them.
    pub fn topic_configs(&self, name: &str) -> BTreeMap<String, String> {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .expect("admin");
        let res = futures_executor::block_on(admin.describe_configs(
            [&rdkafka::admin::ResourceSpecifier::Topic(name)],
            &AdminOptions::new(),
        ))
        .expect("describe configs");
        res.into_iter()
            .flat_map(|r| r.expect("describe").entries)
            .filter_map(|e| e.value.map(|v| (e.name, v)))
            .collect()
    }

    /// Commits `offsets` (partition → next offset) for `group` on `topic`, as a consumer that
    /// read that far would.
    pub fn commit_group(&self, group: &str, topic: &str, offsets: &[(i32, i64)]) {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        for (p, o) in offsets {
            tpl.add_partition_offset(topic, *p, Offset::Offset(*o))
                .expect("tpl");
        }
        c.commit(&tpl, rdkafka::consumer::CommitMode::Sync)
            .expect("commit");
    }

    /// `group`'s committed offsets on `partitions` partitions of `topic` (None: no commit).
    pub fn group_offsets(&self, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
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
                let (lo, hi) = c
                    .fetch_watermarks(topic, p, Duration::from_secs(10))
                    .expect("watermarks");
                hi - lo
            })
            .collect()
    }

    /// Produces `records` and waits for every acknowledgement.
    pub fn produce(&self, topic: &str, records: &[TestRecord]) {
        let before: i64 = self.counts(topic).iter().sum();
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .create()
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
        let after: i64 = self.counts(topic).iter().sum();
        assert_eq!(
            after - before,
            records.len() as i64,
            "every record produced to {topic} must be acknowledged"
        );
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
                out[m.partition() as usize].push(TestRecord {
                    partition: m.partition(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers: m
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                                .collect()
                        })
                        .unwrap_or_default(),
                    timestamp: m.timestamp().to_millis().unwrap_or(-1),
                });
            }
        }
        out
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The header refract stamps on mirrored records: the clusters they came through.
pub const PROVENANCE: &str = "refract.provenance";

/// A record as produced and as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRecord {
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: i64,
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

/// A `refract` process started from a pipeline text, logging to a file.
pub struct Refract {
    child: Option<Child>,
    pub dir: TempDir,
    pub pipeline: PathBuf,
}

/// The path of the refract binary under test.
pub fn refract_bin() -> &'static str {
    env!("CARGO_BIN_EXE_refract")
}

/// Writes `pipeline` into a temp folder (with `files` beside it) and returns its path.
pub fn write_pipeline(dir: &Path, pipeline: &str) -> PathBuf {
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, pipeline).expect("write pipeline");
    path
}

impl Refract {
    /// Starts `refract run` on `pipeline` with extra `args`.
    pub fn start(pipeline: &str, args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write_pipeline(dir.path(), pipeline);
        let mut r = Self {
            child: None,
            dir,
            pipeline: path,
        };
        r.restart(args);
        r
    }

    /// Starts the process again on the same pipeline, appending to the same log.
    pub fn restart(&mut self, args: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("refract.log"))
            .expect("log");
        let child = Command::new(refract_bin())
            .arg("run")
            .arg(&self.pipeline)
            .args(args)
            .env("RUST_LOG", "info,refract_mirror=debug")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start refract");
        self.child = Some(child);
    }

    /// Kills the process with SIGKILL (no chance to flush or commit).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the process with SIGTERM and returns its exit status.
    pub fn stop(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        let status = c.wait().ok()?;
        status.code()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits for `cond`, showing this process's log if it never holds.
    pub fn wait(&self, what: &str, cond: impl FnMut() -> bool) {
        wait_or_explain(what, cond, || format!("refract log:\n{}", self.log()));
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("refract.log")).unwrap_or_default()
    }
}

impl Drop for Refract {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs the refract binary to completion.
pub fn refract(args: &[&str]) -> Output {
    Command::new(refract_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run refract")
}

/// A pipeline with clusters `a` (and `b`, `c` as given) and the flows in `flows` (TOML text).
pub fn pipeline(clusters: &[(&str, &Broker)], flows: &str) -> String {
    let mut text = String::new();
    for (alias, broker) in clusters {
        text.push_str(&format!(
            "[clusters.{alias}]\nbootstrap = \"{}\"\n",
            broker.bootstrap
        ));
    }
    text.push('\n');
    text.push_str(flows);
    text
}

/// The folder holding the guest plugins built from `plugins/`.
pub fn guest(name: &str) -> PathBuf {
    refract_plugin::guest_dir().join(name)
}
