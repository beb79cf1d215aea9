//! Test harness: real Apache Kafka brokers (single-node KRaft clusters from the jars
//! `.ci/install-kafka` resolves) on loopback ports, the real `refract` binary, and Kafka helpers
//! to produce and read back records.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use tempfile::TempDir;

pub mod hostile;
pub mod tls;

/// Generous deadline for anything a test waits on (a loaded 2-core machine compiling a Python
/// or JavaScript plugin while brokers start needs more than a minute).
pub const DEADLINE: Duration = Duration::from_secs(180);

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
pub fn wait_or_explain(what: &str, cond: impl FnMut() -> bool, explain: impl Fn() -> String) {
    wait_before(what, Instant::now() + DEADLINE, cond, explain);
}

/// Polls `cond` until it holds; panics with `what` and `explain()` once `deadline` passes.
pub fn wait_before(
    what: &str,
    deadline: Instant,
    mut cond: impl FnMut() -> bool,
    explain: impl Fn() -> String,
) {
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            explain()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The folder of Apache Kafka jars (broker, tools, MirrorMaker 2): `REFRACT_KAFKA_LIBS`, else what
/// `.ci/install-kafka` resolves (once per test binary; a no-op when its cache is warm).
pub fn kafka_libs() -> &'static Path {
    static LIBS: OnceLock<PathBuf> = OnceLock::new();
    LIBS.get_or_init(|| {
        if let Some(p) = std::env::var_os("REFRACT_KAFKA_LIBS") {
            return PathBuf::from(p);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/install-kafka");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} failed: Apache Kafka could not be resolved from Maven Central",
            script.display()
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(stdout.lines().last().unwrap_or_default().trim())
    })
}

/// The `java` to run Kafka with: `$JAVA_HOME/bin/java`, else the one on the PATH.
pub fn java() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|h| Path::new(&h).join("bin/java"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("java"))
}

/// `java` with a classpath of every Kafka jar.
pub fn kafka_java() -> Command {
    let mut cmd = Command::new(java());
    cmd.arg("-cp").arg(format!("{}/*", kafka_libs().display()));
    cmd
}

/// Spawns `cmd` from one thread that lives as long as the test process, with a parent-death
/// signal: a broker (or MirrorMaker 2) never outlives the test binary, even when a shared broker
/// is never dropped or the binary aborts. (The signal follows the spawning *thread*, so it must
/// not be a test thread, which ends with its test.)
pub fn spawn_owned(cmd: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let tx = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::spawn(move || {
            for (mut cmd, reply) in rx {
                #[cfg(target_os = "linux")]
                unsafe {
                    use std::os::unix::process::CommandExt;
                    cmd.pre_exec(|| {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                let _ = reply.send(cmd.spawn());
            }
        });
        Mutex::new(tx)
    });
    let (reply, answer) = mpsc::channel();
    tx.lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, reply))
        .expect("spawner thread");
    answer.recv().expect("spawner reply")
}

/// A loopback port nobody in this process has been given before and that was free a moment ago.
/// Another process can still take it before the broker binds it: [`Broker`] retries with new
/// ports when its broker reports the address in use.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = l.local_addr().expect("local addr").port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A random KRaft cluster id (16 bytes, base64url without padding, as `kafka-storage random-uuid`).
fn cluster_id() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        ^ (u64::from(std::process::id()) << 32)
        ^ unique("id").len() as u64;
    let mut bits = String::new();
    for _ in 0..22 {
        // xorshift: random enough for an id nobody else on this machine uses
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        bits.push(ALPHABET[(seed % 64) as usize] as char);
    }
    // the 22nd character carries only 2 bits of the 128: keep it a valid base64 end
    bits.pop();
    bits.push('A');
    bits
}

/// Broker settings every test broker gets: one node, replication factor 1, quick group joins,
/// topics created only when asked for (as on most production clusters).
const BROKER_DEFAULTS: &[(&str, &str)] = &[
    ("process.roles", "broker,controller"),
    ("node.id", "1"),
    ("controller.listener.names", "CONTROLLER"),
    ("inter.broker.listener.name", "PLAINTEXT"),
    ("offsets.topic.replication.factor", "1"),
    ("offsets.topic.num.partitions", "1"),
    ("transaction.state.log.replication.factor", "1"),
    ("transaction.state.log.min.isr", "1"),
    ("transaction.state.log.num.partitions", "1"),
    ("share.coordinator.state.topic.replication.factor", "1"),
    ("share.coordinator.state.topic.min.isr", "1"),
    ("group.initial.rebalance.delay.ms", "0"),
    ("auto.create.topics.enable", "false"),
    ("num.partitions", "1"),
    ("log.flush.interval.messages", "9223372036854775807"),
    // Test records carry timestamps from 2020 (sample_records): with the default 7-day time
    // retention, the broker's first retention check (30 s after start) would delete them.
    ("log.retention.ms", "-1"),
];

/// The listeners [`Broker::start_secure`] adds.
const SECURE_LISTENERS: [&str; 4] = ["SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT"];

/// How a secure test broker authenticates clients.
pub struct Secure<'a> {
    /// The broker's certificate (its `bundle` is the PEM key store).
    pub server: &'a tls::Issued,
    /// The CA the broker trusts for client certificates (`MTLS`).
    pub client_ca: &'a Path,
    /// SASL users and passwords (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512).
    pub users: &'a [(&'a str, &'a str)],
}

impl Secure<'_> {
    fn props(&self) -> Vec<(String, String)> {
        let mut p: Vec<(String, String)> = vec![
            ("ssl.keystore.type".into(), "PEM".into()),
            (
                "ssl.keystore.location".into(),
                self.server.bundle.display().to_string(),
            ),
            ("ssl.truststore.type".into(), "PEM".into()),
            (
                "ssl.truststore.location".into(),
                self.client_ca.display().to_string(),
            ),
            (
                "listener.name.mtls.ssl.client.auth".into(),
                "required".into(),
            ),
            // A client certificate's principal is its CN (`User:<cn>`), not the whole DN.
            (
                "ssl.principal.mapping.rules".into(),
                "RULE:^CN=([^,]+),.*$/$1/,DEFAULT".into(),
            ),
            (
                "sasl.enabled.mechanisms".into(),
                "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER".into(),
            ),
        ];
        let plain_users: String = self
            .users
            .iter()
            .map(|(u, pw)| format!(" user_{u}=\"{pw}\""))
            .collect();
        for listener in ["sasl_ssl", "sasl_plaintext"] {
            let prefix = format!("listener.name.{listener}");
            p.push((
                format!("{prefix}.plain.sasl.jaas.config"),
                format!(
                    "org.apache.kafka.common.security.plain.PlainLoginModule required{plain_users};"
                ),
            ));
            for m in ["scram-sha-256", "scram-sha-512"] {
                p.push((
                    format!("{prefix}.{m}.sasl.jaas.config"),
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;".into(),
                ));
            }
            // Unsecured JWTs (the broker's default OAUTHBEARER validator): the token's `sub`
            // is the principal.
            p.push((
                format!("{prefix}.oauthbearer.sasl.jaas.config"),
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                 unsecuredLoginStringClaim_sub=\"broker\";"
                    .into(),
            ));
        }
        p
    }
}

/// Password of the SASL user `mirror` (the principal refract runs as) on every secure test broker.
pub const MIRROR_PASSWORD: &str = "mirror-pw-7f3a9c";
/// Password of the SASL user `admin` on every secure test broker.
pub const ADMIN_PASSWORD: &str = "admin-pw-18d2e4";

/// [`Broker::start_secure`] with `server`'s certificate, trusting client certificates `ca`
/// issued, and the SASL users `mirror` and `admin`.
pub fn secure_broker(
    alias: &str,
    ca: &tls::Ca,
    server: &tls::Issued,
    extra: &[(&str, &str)],
) -> Broker {
    Broker::start_secure(
        alias,
        &Secure {
            server,
            client_ca: &ca.ca_pem(),
            users: &[("mirror", MIRROR_PASSWORD), ("admin", ADMIN_PASSWORD)],
        },
        extra,
    )
}

/// A path as text for a pipeline file.
pub fn path_str(path: &Path) -> String {
    path.display().to_string()
}

/// One Apache Kafka broker = one single-node KRaft cluster (combined broker and controller) with
/// its data in a temp folder, started from the jars `.ci/install-kafka` resolves.
pub struct Broker {
    child: Mutex<Option<Child>>,
    /// `host:port` of its PLAINTEXT listener.
    pub bootstrap: String,
    /// `host:port` of every listener by name (`PLAINTEXT`, and with [`Broker::start_secure`]
    /// `SSL`, `MTLS`, `SASL_SSL`, `SASL_PLAINTEXT`).
    pub listeners: BTreeMap<String, String>,
    /// Its data, configuration and `broker.log`.
    pub dir: TempDir,
    /// The cluster's name in test output.
    pub name: String,
    jvm: Vec<String>,
}

impl Broker {
    /// Starts a broker of its own for this test and waits until it serves metadata.
    pub fn start(cluster: &str) -> Self {
        Self::start_with(cluster, &[])
    }

    /// Starts a broker of its own with extra `server.properties` entries (an authorizer, say).
    pub fn start_with(cluster: &str, extra: &[(&str, &str)]) -> Self {
        Self::start_full(cluster, extra, None)
    }

    /// Starts a broker that also listens with TLS and SASL: `SSL` (server certificate only),
    /// `MTLS` (client certificate required), `SASL_SSL` and `SASL_PLAINTEXT` (PLAIN,
    /// SCRAM-SHA-256, SCRAM-SHA-512 and unsecured-JWT OAUTHBEARER), beside the PLAINTEXT
    /// listener the harness itself uses. [`Broker::listener`] gives each one's address.
    pub fn start_secure(cluster: &str, secure: &Secure<'_>, extra: &[(&str, &str)]) -> Self {
        Self::start_full(cluster, extra, Some(secure))
    }

    fn start_full(cluster: &str, extra: &[(&str, &str)], secure: Option<&Secure<'_>>) -> Self {
        let mut last = String::new();
        for _attempt in 0..4 {
            let dir = tempfile::tempdir().expect("temp dir");
            let (port, cport) = (free_port(), free_port());
            let mut listeners = BTreeMap::new();
            listeners.insert("PLAINTEXT".to_string(), format!("127.0.0.1:{port}"));
            if secure.is_some() {
                for name in SECURE_LISTENERS {
                    listeners.insert(name.to_string(), format!("127.0.0.1:{}", free_port()));
                }
            }
            let advertised: Vec<String> = listeners
                .iter()
                .map(|(name, addr)| format!("{name}://{addr}"))
                .collect();
            let mut props: Vec<(String, String)> = BROKER_DEFAULTS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            props.extend([
                (
                    "listeners".into(),
                    format!("{},CONTROLLER://127.0.0.1:{cport}", advertised.join(",")),
                ),
                ("advertised.listeners".into(), advertised.join(",")),
                (
                    "listener.security.protocol.map".into(),
                    "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,MTLS:SSL,\
                     SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
                        .into(),
                ),
                (
                    "controller.quorum.voters".into(),
                    format!("1@127.0.0.1:{cport}"),
                ),
                (
                    "log.dirs".into(),
                    dir.path().join("data").display().to_string(),
                ),
            ]);
            if let Some(secure) = secure {
                props.extend(secure.props());
            }
            for (k, v) in extra {
                props.retain(|(key, _)| key != k);
                props.push((k.to_string(), v.to_string()));
            }
            let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
            std::fs::write(dir.path().join("server.properties"), text).expect("server.properties");
            std::fs::write(
                dir.path().join("log4j2.properties"),
                format!(
                    "rootLogger.level=WARN\nrootLogger.appenderRef.f.ref=F\n\
                     appender.f.type=File\nappender.f.name=F\nappender.f.fileName={}\n\
                     appender.f.layout.type=PatternLayout\n\
                     appender.f.layout.pattern=[%d] %p %m (%c)%n\n",
                    dir.path().join("broker.log").display()
                ),
            )
            .expect("log4j2.properties");
            let mut format = kafka_java();
            format
                .args(["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"])
                .args([
                    "kafka.tools.StorageTool",
                    "format",
                    &format!("--cluster-id={}", cluster_id()),
                    "-c",
                ])
                .arg(dir.path().join("server.properties"));
            for (user, password) in secure.map_or(&[][..], |s| s.users) {
                for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
                    format
                        .arg("--add-scram")
                        .arg(format!("{mechanism}=[name={user},password={password}]"));
                }
            }
            let format = format.output().expect("run kafka-storage format");
            assert!(
                format.status.success(),
                "kafka-storage format failed for {cluster}: {}{}",
                String::from_utf8_lossy(&format.stdout),
                String::from_utf8_lossy(&format.stderr)
            );
            let broker = Self {
                child: Mutex::new(None),
                bootstrap: format!("127.0.0.1:{port}"),
                listeners,
                dir,
                name: cluster.to_string(),
                jvm: vec![
                    "-Xms64m".into(),
                    "-Xmx512m".into(),
                    "-XX:+UseSerialGC".into(),
                    "-XX:TieredStopAtLevel=1".into(),
                    "-XX:-UsePerfData".into(),
                ],
            };
            match broker.launch() {
                Ok(()) => return broker,
                Err(log) if log.contains("Address already in use") => {
                    // another process took a port between free_port() and the bind: new ports
                    last = log;
                    continue;
                }
                Err(log) => panic!("Kafka broker {cluster} failed to start:\n{log}"),
            }
        }
        panic!("Kafka broker {cluster} found no free ports:\n{last}");
    }

    /// The `host:port` of listener `name`.
    pub fn listener(&self, name: &str) -> &str {
        self.listeners
            .get(name)
            .unwrap_or_else(|| panic!("{} has no {name} listener", self.name))
    }

    /// A broker shared by every test of this test binary that asks for `cluster`; started on
    /// first use and stopped when the binary exits. Safe for tests that use only topics and groups
    /// named by [`unique`] and pipelines that select only those topics.
    pub fn shared(cluster: &str) -> &'static Broker {
        static SHARED: Mutex<BTreeMap<String, &'static OnceLock<Broker>>> =
            Mutex::new(BTreeMap::new());
        let cell: &'static OnceLock<Broker> = SHARED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(cluster.to_string())
            .or_insert_with(|| Box::leak(Box::new(OnceLock::new())));
        cell.get_or_init(|| Broker::start(cluster))
    }

    /// Starts the JVM on this broker's folder and waits until it serves metadata; on failure
    /// returns its log.
    fn launch(&self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("stdout.log"))
            .expect("broker stdout log");
        let mut cmd = Command::new(java());
        cmd.args(&self.jvm)
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                self.dir.path().join("log4j2.properties").display()
            ))
            .arg("-cp")
            .arg(format!("{}/*", kafka_libs().display()))
            .arg("kafka.Kafka")
            .arg(self.dir.path().join("server.properties"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        let child = spawn_owned(cmd).unwrap_or_else(|e| {
            panic!(
                "cannot start Kafka with {}: {e}; is Java 17+ installed (JAVA_HOME)?",
                java().display()
            )
        });
        *self.child.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.exited() {
                return Err(format!("exited with {status}\n{}", self.log()));
            }
            let ready = self
                .consumer()
                .fetch_metadata(None, Duration::from_secs(1))
                .is_ok_and(|md| !md.brokers().is_empty());
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "not serving metadata after {DEADLINE:?}\n{}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn exited(&self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// What the broker logged (warnings and errors) and printed.
    pub fn log(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
        format!("{}{}", read("stdout.log"), read("broker.log"))
    }

    /// Kills the broker (SIGKILL, like a crashed machine); its data stays for [`Broker::resume`].
    pub fn kill(&self) {
        if let Some(mut c) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Freezes the broker (SIGSTOP): its sockets stay open and accept connections, but nothing
    /// answers — a network partition without namespaces. [`Broker::thaw`] continues it.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Continues a frozen broker (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let pid = child.as_ref().map(|c| c.id()).expect("the broker runs");
        let ok = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {signal} {pid}");
    }

    /// Starts a killed broker again on the same ports and data, and waits until it serves.
    pub fn resume(&self) {
        self.launch()
            .unwrap_or_else(|log| panic!("Kafka broker {} failed to restart:\n{log}", self.name));
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
        self.create_topic_with(name, partitions, &[]);
    }

    /// Creates a topic with topic configs.
    pub fn create_topic_with(&self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
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
        let out = kafka_java()
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
        let after: i64 = self.counts(topic).iter().sum();
        assert_eq!(
            after - before,
            records.len() as i64,
            "every record produced to {topic} must be acknowledged"
        );
    }

    /// The compression codec of every record batch stored in `topic`[`partition`] (`none`,
    /// `gzip`, `snappy`, `lz4`, `zstd`), read from the broker's log segments: what a producer
    /// really wrote, which a consumer (which decompresses) cannot tell.
    pub fn batch_codecs(&self, topic: &str, partition: i32) -> Vec<&'static str> {
        let dir = self
            .dir
            .path()
            .join("data")
            .join(format!("{topic}-{partition}"));
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

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

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
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: i64,
}

impl TestRecord {
    /// A record as a consumer read it: key, value, every header and the timestamp.
    pub fn from_message(m: &impl Message) -> Self {
        Self {
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

/// A `refract` process started from a pipeline text, logging to a file.
pub struct Refract {
    child: Option<Child>,
    pub dir: TempDir,
    pub pipeline: PathBuf,
    env: Vec<(String, String)>,
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
        Self::start_env(pipeline, args, &[])
    }

    /// Starts `refract run` on `pipeline` with extra `args` and environment variables.
    pub fn start_env(pipeline: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write_pipeline(dir.path(), pipeline);
        let mut r = Self {
            child: None,
            dir,
            pipeline: path,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
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
        let mut cmd = Command::new(refract_bin());
        cmd.arg("run")
            .arg(&self.pipeline)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(
                "RUST_LOG",
                std::env::var("REFRACT_TEST_LOG")
                    .unwrap_or_else(|_| "info,refract_mirror=debug".to_string()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        // Owned by the test binary: never left running when a test aborts.
        let child = spawn_owned(cmd).expect("start refract");
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

    /// Sends SIGTERM and waits up to `limit` for the process to exit: (how long it took, its
    /// exit code). A process still running after `limit` is killed and the test fails.
    pub fn terminate_within(&mut self, limit: Duration) -> (Duration, Option<i32>) {
        let mut c = self.child.take().expect("refract runs");
        let started = Instant::now();
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        loop {
            if let Ok(Some(status)) = c.try_wait() {
                return (started.elapsed(), status.code());
            }
            if started.elapsed() > limit {
                let _ = c.kill();
                let _ = c.wait();
                panic!(
                    "refract did not exit within {limit:?} of SIGTERM; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The duplicates refract said it re-sends after unclean stops (its "resuming after an
    /// unclean stop: N" lines, summed).
    pub fn counted_duplicates(&self) -> usize {
        self.log()
            .lines()
            .filter_map(|l| l.split("resuming after an unclean stop: ").nth(1))
            .filter_map(|rest| rest.split_whitespace().next()?.parse::<usize>().ok())
            .sum()
    }

    /// The most memory the process has held resident so far, in bytes (`VmHWM` of
    /// `/proc/<pid>/status`).
    pub fn peak_rss(&self) -> u64 {
        let pid = self.child.as_ref().expect("refract runs").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
            .expect("VmHWM in /proc/<pid>/status")
            * 1024
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

    /// The address its metrics endpoint bound (`[metrics] listen = "127.0.0.1:0"`), from its log.
    pub fn metrics_addr(&self) -> String {
        let mut addr = String::new();
        self.wait("the metrics endpoint's address in the log", || {
            let log = self.log();
            let found = log
                .lines()
                .find_map(|l| l.split("on http://").nth(1))
                .map(|rest| rest.split_whitespace().next().unwrap_or("").to_string());
            addr = found.unwrap_or_default();
            !addr.is_empty()
        });
        addr
    }

    /// How many lines of its log contain `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        self.log().lines().filter(|l| l.contains(needle)).count()
    }

    /// Waits until `needle` appears in `n` more log lines than it does now: a positive event
    /// (another discovery round, another sync) to wait for before checking that something did
    /// *not* happen.
    pub fn wait_more_logs(&self, needle: &str, n: usize) {
        let before = self.log_count(needle);
        self.wait(&format!("{n} more log lines with {needle:?}"), || {
            self.log_count(needle) >= before + n
        });
    }
}

impl Drop for Refract {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A plain HTTP/1.1 request to the metrics endpoint: (status code, body).
pub fn http(addr: &str, method: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The value of the series `name` whose labels include all of `labels`.
pub fn series(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
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

/// Offsets per (topic, partition).
pub type Offsets = BTreeMap<(String, i32), i64>;

/// The `TOPIC PARTITION OFFSET` lines `refract offsets translate` (and the MM2 Java peer) print.
pub fn parse_offsets(text: &str) -> Offsets {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("TOPIC"))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((
                (f.next()?.to_string(), f.next()?.parse().ok()?),
                f.next()?.parse().ok()?,
            ))
        })
        .collect()
}

/// `refract offsets translate` on `config`: where `group` resumes on `to` after failing over
/// from `from`; empty when the command fails (nothing to translate yet).
pub fn refract_translate(config: &Path, group: &str, from: &str, to: &str) -> Offsets {
    translate_lines(config, group, from, to)
        .into_iter()
        .map(|(tp, (offset, _))| (tp, offset))
        .collect()
}

/// `refract offsets translate` for `group` from `from` to `to`: per (remote topic, partition)
/// the offset and its TRANSLATION column (`exact`, `mm2`, `mm2: <reason>`); empty when the
/// command fails (no checkpoints yet).
pub fn translate_lines(
    config: &Path,
    group: &str,
    from: &str,
    to: &str,
) -> BTreeMap<(String, i32), (i64, String)> {
    let config = config.to_str().expect("path");
    let out = refract(&[
        "offsets",
        "translate",
        "--config",
        config,
        "--group",
        group,
        "--from",
        from,
        "--to",
        to,
    ]);
    if !out.status.success() {
        return BTreeMap::new();
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("TOPIC"))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let topic = f.next()?.to_string();
            let partition = f.next()?.parse().ok()?;
            let offset = f.next()?.parse().ok()?;
            let how = f.collect::<Vec<_>>().join(" ");
            Some(((topic, partition), (offset, how)))
        })
        .collect()
}

/// Intervals short enough that a test sees discovery, commits, checkpoints and heartbeats
/// within seconds.
pub const FAST: &str = "refresh_topics_interval = \"1s\"\ncommit_interval = \"500ms\"\ncheckpoint_interval = \"1s\"\nrefresh_groups_interval = \"1s\"\nheartbeat_interval = \"500ms\"\nreplication_factor = 1\n";

/// A `[[flow]]` from `source` to `target` with the [`FAST`] intervals and `extra` settings.
pub fn flow(source: &str, target: &str, extra: &str) -> String {
    format!("[[flow]]\nsource = \"{source}\"\ntarget = \"{target}\"\n{FAST}{extra}\n")
}

/// The folder holding the guest plugins built from `plugins/`.
pub fn guest(name: &str) -> PathBuf {
    refract_plugin::guest_dir().join(name)
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
/// robin over the partitions, about 200 a second) until [`Producing::finish`]; librdkafka holds
/// them while the broker is away and sends them when it is back.
pub struct Producing {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl Producing {
    /// Starts producing to `topic` on `broker`.
    pub fn start(broker: &Broker, topic: &str, partitions: i32) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
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
                let value = format!("r{n}");
                let key = format!("k{n}");
                let record = BaseRecord::to(&topic)
                    .partition((n % partitions as u64) as i32)
                    .key(&key)
                    .payload(&value);
                if producer.send(record).is_ok() {
                    n += 1;
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
