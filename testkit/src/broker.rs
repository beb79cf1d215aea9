//! The Apache Kafka broker launcher: single-node KRaft clusters (combined broker and controller)
//! started with `java` from the jars `.ci/install-kafka` resolves, on free loopback ports, plus
//! the broker's process itself (start, readiness, kill, freeze, resume); the admin, produce and
//! read helpers the tests use on a broker are in `broker/clients.rs`, and three-node clusters of
//! these brokers in `broker/cluster3.rs`.

mod clients;
mod cluster3;

pub use cluster3::Cluster3;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use tempfile::TempDir;

use crate::ports::{cluster_id, free_port};
use crate::wait::DEADLINE;

/// The folder of Apache Kafka jars (broker, tools, MirrorMaker 2): `REFRACT_KAFKA_LIBS`, else what
/// `.ci/install-kafka` resolves (once per test binary; a no-op when its cache is warm).
pub fn kafka_libs() -> &'static Path {
    static LIBS: OnceLock<PathBuf> = OnceLock::new();
    LIBS.get_or_init(|| {
        if let Some(p) = std::env::var_os("REFRACT_KAFKA_LIBS") {
            return PathBuf::from(p);
        }
        // This crate is `testkit/` at the repository's root.
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/install-kafka");
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

/// Stops the process in `slot` (taking it out): SIGTERM, then SIGKILL if it still runs after
/// `grace`. Whether it exited by itself (`false`: killed, or not running).
pub fn stop_child(slot: &Mutex<Option<Child>>, grace: Duration) -> bool {
    let Some(mut c) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return false;
    };
    if matches!(c.try_wait(), Ok(Some(_))) {
        return true;
    }
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(c.id().to_string())
        .status();
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(c.try_wait(), Ok(Some(_))) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = c.kill();
    let _ = c.wait();
    false
}

/// Kills the process in `slot` (SIGKILL), taking it out, and reaps it.
pub fn kill_child(slot: &Mutex<Option<Child>>) {
    if let Some(mut c) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = c.kill();
        let _ = c.wait();
    }
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
                // SAFETY: the hook runs in the forked child before exec and only calls prctl,
                // which is async-signal-safe, and reads errno; it touches no shared state.
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

/// The shared brokers by cluster name ([`Broker::shared`]), each started on first use.
static SHARED: Mutex<BTreeMap<String, &'static OnceLock<Broker>>> = Mutex::new(BTreeMap::new());

/// Has [`stop_shared_brokers`] run at exit. A shared broker is never dropped, so without it its
/// `TempDir` is never deleted: each test run left every shared broker's folder in the temp
/// directory (0.4 GB after four runs on one machine).
fn stop_shared_at_exit() {
    #[cfg(target_os = "linux")]
    {
        static REGISTER: std::sync::Once = std::sync::Once::new();
        REGISTER.call_once(|| {
            // SAFETY: registers a plain `extern "C" fn` with the C library, which calls it once
            // from `exit` (the test harness exits through it, passed or failed).
            unsafe {
                libc::atexit(stop_shared_brokers);
            }
        });
    }
}

/// At exit: kills each shared broker (and waits for it), then removes its folder.
#[cfg(target_os = "linux")]
extern "C" fn stop_shared_brokers() {
    let cells: Vec<&'static OnceLock<Broker>> = match SHARED.try_lock() {
        Ok(shared) => shared.values().copied().collect(),
        Err(std::sync::TryLockError::Poisoned(shared)) => {
            shared.into_inner().values().copied().collect()
        }
        // Held by a thread `exit` interrupted: leave the folders rather than wait.
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for broker in cells.into_iter().filter_map(|cell| cell.get()) {
        broker.kill();
        let _ = std::fs::remove_dir_all(&broker.dir);
    }
}

/// Broker settings every broker gets: one node (node id and quorum from its [`Node`]), replication
/// factor 1, quick group joins (as
/// Kafka's shipped `server.properties`), topics created only when asked for (as on most
/// production clusters); otherwise Kafka's defaults.
const BROKER_DEFAULTS: &[(&str, &str)] = &[
    ("process.roles", "broker,controller"),
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
];

/// What [`BrokerOptions::default`] adds to [`BROKER_DEFAULTS`] for the tests.
const TEST_SETTINGS: &[(&str, &str)] = &[
    ("log.flush.interval.messages", "9223372036854775807"),
    // Test records carry timestamps from 2020 (sample_records): with the default 7-day time
    // retention, the broker's first retention check (30 s after start) would delete them.
    ("log.retention.ms", "-1"),
];

/// The JVM options of a test broker: a small heap and a quick start.
const TEST_JVM: &[&str] = &[
    "-Xms64m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
];

/// Where one KRaft node sits in its cluster: its id, its ports and the quorum it votes in. A
/// single-node cluster is [`Node::single`]; [`Cluster3`] lays out three.
pub(crate) struct Node {
    /// `node.id`.
    pub(crate) id: i32,
    /// The port of its `PLAINTEXT` listener.
    pub(crate) port: u16,
    /// The port of its `CONTROLLER` listener.
    pub(crate) controller_port: u16,
    /// `controller.quorum.voters`: the same on every node of the cluster.
    pub(crate) voters: String,
    /// The cluster id its storage is formatted with: the same on every node.
    pub(crate) cluster_id: String,
    /// What clients of the cluster are given ([`Broker::bootstrap`]); `None`: this node only.
    pub(crate) bootstrap: Option<String>,
    /// `server.properties` entries of the cluster's shape (replication factors), before
    /// [`BrokerOptions::props`].
    pub(crate) props: Vec<(String, String)>,
}

impl Node {
    /// The one node of a single-node cluster, on free ports.
    fn single() -> Self {
        let (port, controller_port) = (free_port(), free_port());
        Self {
            id: 1,
            port,
            controller_port,
            voters: format!("1@127.0.0.1:{controller_port}"),
            cluster_id: cluster_id(),
            bootstrap: None,
            props: Vec::new(),
        }
    }
}

/// How [`Broker::launch`] starts a broker. [`BrokerOptions::default`] is what the tests use:
/// a small quickly started JVM, a temp folder, SIGKILL when dropped.
#[derive(Clone, Debug)]
pub struct BrokerOptions {
    /// The `java` to run; `None`: [`java()`].
    pub java: Option<PathBuf>,
    /// The folder of Kafka jars; `None`: [`kafka_libs()`] (runs `.ci/install-kafka`).
    pub kafka_libs: Option<PathBuf>,
    /// The broker JVM's options (heap, collector).
    pub jvm: Vec<String>,
    /// `server.properties` entries added after the built-in ones, replacing any of the same key.
    pub props: Vec<(String, String)>,
    /// Listeners besides `PLAINTEXT` (which the harness itself uses): (name, security
    /// protocol), e.g. `("MTLS", "SSL")`; each gets a free port ([`Broker::listener`]).
    pub listeners: Vec<(String, String)>,
    /// SCRAM users (name, password) stored when the storage is formatted, for SCRAM-SHA-256 and
    /// SCRAM-SHA-512.
    pub scram_users: Vec<(String, String)>,
    /// Where the broker's folder (data, configuration, logs) goes: `<folder>/<name>-<attempt>`,
    /// kept after the broker stops. `None`: a temp folder removed when the [`Broker`] drops.
    pub parent_dir: Option<PathBuf>,
    /// How the broker stops when dropped: `None` kills it (SIGKILL, as the tests do); `Some`
    /// sends SIGTERM and waits that long before SIGKILL.
    pub stop_grace: Option<Duration>,
}

impl Default for BrokerOptions {
    fn default() -> Self {
        Self {
            java: None,
            kafka_libs: None,
            jvm: TEST_JVM.iter().map(|s| s.to_string()).collect(),
            props: TEST_SETTINGS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            listeners: Vec::new(),
            scram_users: Vec::new(),
            parent_dir: None,
            stop_grace: None,
        }
    }
}

impl BrokerOptions {
    /// Adds `server.properties` entries (replacing earlier ones of the same key).
    pub fn props<'a>(mut self, props: impl IntoIterator<Item = &'a (&'a str, &'a str)>) -> Self {
        for (k, v) in props {
            self.props.retain(|(key, _)| key != k);
            self.props.push((k.to_string(), v.to_string()));
        }
        self
    }
}

/// One Apache Kafka broker = one single-node KRaft cluster (combined broker and controller) with
/// its data in a folder of its own, started from the jars `.ci/install-kafka` resolves.
pub struct Broker {
    child: Mutex<Option<Child>>,
    /// `host:port` of its PLAINTEXT listener; on a node of a [`Cluster3`], every node's
    /// (this one first), so the client helpers reach the cluster whichever node is down.
    pub bootstrap: String,
    /// `host:port` of every listener by name (`PLAINTEXT` and [`BrokerOptions::listeners`]).
    pub listeners: BTreeMap<String, String>,
    /// Its data (`data/`), `server.properties`, `broker.log` and `stdout.log`.
    pub dir: PathBuf,
    /// The temp folder `dir` is, unless [`BrokerOptions::parent_dir`] was given.
    _temp: Option<TempDir>,
    /// The cluster's name in test output (with the node's, in a [`Cluster3`]).
    pub name: String,
    /// Its `node.id` (1 on a single-node cluster).
    pub node_id: i32,
    java: PathBuf,
    kafka_libs: PathBuf,
    jvm: Vec<String>,
    stop_grace: Option<Duration>,
}

impl Broker {
    /// Starts a broker of its own for this test and waits until it serves metadata.
    pub fn start(cluster: &str) -> Self {
        Self::start_with(cluster, &[])
    }

    /// Starts a broker of its own with extra `server.properties` entries (an authorizer, say).
    pub fn start_with(cluster: &str, extra: &[(&str, &str)]) -> Self {
        Self::start_options(cluster, &BrokerOptions::default().props(extra))
    }

    /// Starts a broker with `options` and waits until it serves metadata; panics if it does not.
    pub fn start_options(cluster: &str, options: &BrokerOptions) -> Self {
        Self::launch(cluster, options).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Formats a broker's storage, starts it and waits until it serves metadata (at most
    /// [`DEADLINE`]). When another process takes one of its ports before it binds them, it
    /// retries with new ports (up to 4 attempts).
    pub fn launch(cluster: &str, options: &BrokerOptions) -> anyhow::Result<Self> {
        let mut last = String::new();
        for attempt in 0..4 {
            let broker = Self::prepare(cluster, options, &Node::single(), attempt)?;
            match broker.run() {
                Ok(()) => return Ok(broker),
                Err(log) if log.contains("Address already in use") => {
                    // another process took a port between free_port() and the bind: new ports
                    last = log;
                    continue;
                }
                Err(log) => bail!("Kafka broker {cluster} failed to start:\n{log}"),
            }
        }
        bail!("Kafka broker {cluster} found no free ports:\n{last}")
    }

    /// Writes the folder of `node` (named `name`) of a cluster, `server.properties` and the log
    /// configuration included, and formats its storage; the JVM is not started yet.
    fn prepare(
        name: &str,
        options: &BrokerOptions,
        node: &Node,
        attempt: usize,
    ) -> anyhow::Result<Self> {
        let java = options.java.clone().unwrap_or_else(java);
        let kafka_libs = match &options.kafka_libs {
            Some(libs) => libs.clone(),
            None => kafka_libs().to_path_buf(),
        };
        let (dir, temp) = match &options.parent_dir {
            Some(parent) => {
                let dir = parent.join(format!("{name}-{attempt}"));
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                (dir, None)
            }
            None => {
                let temp = tempfile::tempdir().context("creating a temp folder")?;
                (temp.path().to_path_buf(), Some(temp))
            }
        };
        let mut listeners = BTreeMap::new();
        listeners.insert("PLAINTEXT".to_string(), format!("127.0.0.1:{}", node.port));
        let mut protocols = vec![
            "PLAINTEXT:PLAINTEXT".to_string(),
            "CONTROLLER:PLAINTEXT".to_string(),
        ];
        for (listener, protocol) in &options.listeners {
            listeners.insert(listener.clone(), format!("127.0.0.1:{}", free_port()));
            protocols.push(format!("{listener}:{protocol}"));
        }
        let advertised: Vec<String> = listeners
            .iter()
            .map(|(listener, addr)| format!("{listener}://{addr}"))
            .collect();
        let mut props: Vec<(String, String)> = BROKER_DEFAULTS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        props.extend([
            ("node.id".into(), node.id.to_string()),
            (
                "listeners".into(),
                format!(
                    "{},CONTROLLER://127.0.0.1:{}",
                    advertised.join(","),
                    node.controller_port
                ),
            ),
            ("advertised.listeners".into(), advertised.join(",")),
            ("listener.security.protocol.map".into(), protocols.join(",")),
            ("controller.quorum.voters".into(), node.voters.clone()),
            ("log.dirs".into(), dir.join("data").display().to_string()),
        ]);
        for (k, v) in node.props.iter().chain(&options.props) {
            props.retain(|(key, _)| key != k);
            props.push((k.clone(), v.clone()));
        }
        let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        let server = dir.join("server.properties");
        std::fs::write(&server, text).with_context(|| format!("writing {}", server.display()))?;
        let log4j = dir.join("log4j2.properties");
        std::fs::write(
            &log4j,
            format!(
                "rootLogger.level=WARN\nrootLogger.appenderRef.f.ref=F\n\
                 appender.f.type=File\nappender.f.name=F\nappender.f.fileName={}\n\
                 appender.f.layout.type=PatternLayout\n\
                 appender.f.layout.pattern=[%d] %p %m (%c)%n\n",
                dir.join("broker.log").display()
            ),
        )
        .with_context(|| format!("writing {}", log4j.display()))?;
        let mut format = Command::new(&java);
        format
            .arg("-cp")
            .arg(format!("{}/*", kafka_libs.display()))
            .args(["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"])
            .args([
                "kafka.tools.StorageTool",
                "format",
                &format!("--cluster-id={}", node.cluster_id),
                "-c",
            ])
            .arg(&server);
        for (user, password) in &options.scram_users {
            for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
                format
                    .arg("--add-scram")
                    .arg(format!("{mechanism}=[name={user},password={password}]"));
            }
        }
        let format = format.output().with_context(|| {
            format!(
                "running {} (is Java 17+ installed? JAVA_HOME)",
                java.display()
            )
        })?;
        if !format.status.success() {
            bail!(
                "kafka-storage format failed for {name}: {}{}",
                String::from_utf8_lossy(&format.stdout),
                String::from_utf8_lossy(&format.stderr)
            );
        }
        Ok(Self {
            child: Mutex::new(None),
            bootstrap: node
                .bootstrap
                .clone()
                .unwrap_or_else(|| format!("127.0.0.1:{}", node.port)),
            listeners,
            dir,
            _temp: temp,
            name: name.to_string(),
            node_id: node.id,
            java,
            kafka_libs,
            jvm: options.jvm.clone(),
            stop_grace: options.stop_grace,
        })
    }

    /// The `host:port` of listener `name`.
    pub fn listener(&self, name: &str) -> &str {
        self.listeners
            .get(name)
            .unwrap_or_else(|| panic!("{} has no {name} listener", self.name))
    }

    /// A broker shared by every test of this test binary that asks for `cluster`; started on
    /// first use, stopped and its folder removed when the binary exits. Safe for tests that use
    /// only topics and groups named by [`unique`](crate::unique) and pipelines that select only
    /// those topics.
    pub fn shared(cluster: &str) -> &'static Broker {
        let cell: &'static OnceLock<Broker> = SHARED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(cluster.to_string())
            .or_insert_with(|| {
                stop_shared_at_exit();
                Box::leak(Box::new(OnceLock::new()))
            });
        cell.get_or_init(|| Broker::start(cluster))
    }

    /// Starts the JVM on this broker's folder and waits until it serves metadata; on failure
    /// returns its log.
    fn run(&self) -> Result<(), String> {
        self.spawn()?;
        self.wait_serving()
    }

    /// Starts the JVM on this broker's folder; on failure says why.
    pub(crate) fn spawn(&self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("stdout.log"))
            .map_err(|e| format!("opening {}: {e}", self.dir.join("stdout.log").display()))?;
        let log_err = log.try_clone().map_err(|e| format!("broker log: {e}"))?;
        let mut cmd = Command::new(&self.java);
        cmd.args(&self.jvm)
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                self.dir.join("log4j2.properties").display()
            ))
            .arg("-cp")
            .arg(format!("{}/*", self.kafka_libs.display()))
            .arg("kafka.Kafka")
            .arg(self.dir.join("server.properties"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        let child = spawn_owned(cmd).map_err(|e| {
            format!(
                "cannot start Kafka with {}: {e}; is Java 17+ installed (JAVA_HOME)?",
                self.java.display()
            )
        })?;
        *self.child.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
        Ok(())
    }

    /// Waits until the started JVM serves metadata on its own listener (at most [`DEADLINE`]);
    /// on failure returns its log.
    pub(crate) fn wait_serving(&self) -> Result<(), String> {
        let own = self.listener("PLAINTEXT");
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.exited() {
                return Err(format!("exited with {status}\n{}", self.log()));
            }
            // A new client each round: one client's reconnect backoff grows to 10 s while the
            // JVM starts, which would add seconds to every broker start.
            let probe: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", own)
                .create()
                .map_err(|e| format!("metadata probe: {e}"))?;
            let ready = probe
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

    fn exited(&self) -> Option<ExitStatus> {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// What the broker logged (warnings and errors) and printed.
    pub fn log(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        format!("{}{}", read("stdout.log"), read("broker.log"))
    }

    /// The last `lines` lines of [`Broker::log`].
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops the broker: SIGTERM, then SIGKILL if it still runs after `grace`. Whether it exited
    /// by itself (`false`: killed, or not running).
    pub fn stop(&self, grace: Duration) -> bool {
        stop_child(&self.child, grace)
    }

    /// Kills the broker (SIGKILL, like a crashed machine); its data stays for [`Broker::resume`].
    pub fn kill(&self) {
        kill_child(&self.child);
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
        self.run()
            .unwrap_or_else(|log| panic!("Kafka broker {} failed to restart:\n{log}", self.name));
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        match self.stop_grace {
            Some(grace) => {
                self.stop(grace);
            }
            None => self.kill(),
        }
    }
}
