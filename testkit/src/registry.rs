//! A real schema registry for the schema-translation tests: [`Registry`], Apicurio Registry
//! 3.3.3 (what `.ci/install-apicurio` unpacks, run on the Java 21+ it finds) in memory on free
//! loopback ports, and the calls tests make on its Confluent-compatible API (`/apis/ccompat/v7`,
//! [`Registry::url`]). Confluent Schema Registry and Karapace are not installable here; Apicurio
//! speaks the same API with the differences below, which a translator meets too.
//!
//! What Apicurio 3.3.3's ccompat API did when asked (2026-12-05, requests with
//! `Content-Type: application/vnd.schemaregistry.v1+json`):
//!
//! - **Ids.** One id per schema *content* (text + type + references), registry-wide, from 1;
//!   a client cannot choose it (an `id` in the body is ignored). The same schema under two
//!   subjects gets one id (`GET /schemas/ids/N/versions` then lists both subjects); the same
//!   text without its references, or with other references, gets another. Registering what a
//!   subject already has returns its id and adds no version. Ids are not always dense: one
//!   session of registrations, lookups, deletes and a 409 never gave out 3, 10, 18 and 19
//!   (a shorter one with a 409 skipped none), so never assume the next id.
//! - **Invalid schemas.** 422 with `error_code` 42201: `Failed to discover artifact type from
//!   content.` for text it cannot parse, and for JSON Schemas it does not recognise as such:
//!   `{"type":"object"}` and `{"title":"x","type":"object"}` are refused, while
//!   `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}` or
//!   `{"type":"object","properties":{}}` are taken; `Given schema is not from type: JSON` for
//!   `{"type":"string"}` as JSON, `… type: AVRO` for a .proto sent as AVRO.
//! - **What counts as the same schema.** Within a subject, AVRO and JSON that differ from a
//!   version only in whitespace are that version (its id, no new version). Under another
//!   subject the same spaced-out AVRO is new content with a new id, although ccompat reads it
//!   back as the same text (below); so is AVRO with its JSON keys in another order. PROTOBUF:
//!   text as written; whitespace or a comment makes a new id and, in the same subject, a new
//!   version, unless registered with `?normalize=true` (then the two are one).
//! - **Text read back.** `GET /schemas/ids/N` and `GET /subjects/S/versions/V` give AVRO as
//!   Avro's `Schema.toString()` (compact, keys reordered `type, name, namespace, doc, fields`;
//!   `doc`, `default` and unknown properties kept), not the bytes registered (the native v3 API,
//!   `/apis/registry/v3/ids/contentIds/N`, has those); JSON and PROTOBUF as registered, byte
//!   for byte (no normalising, comments kept). `schemaType` is absent for AVRO, `"PROTOBUF"` or
//!   `"JSON"` otherwise; `references` is absent when there are none. `?format=serialized` gives
//!   PROTOBUF as the binary `FileDescriptorProto`.
//! - **References.** `{"name": "acme/common/money.proto", "subject": "money-value",
//!   "version": 1}` is stored and given back as sent on `GET /schemas/ids/N` and on the
//!   subject version; `GET /subjects/S/versions/V/referencedby` lists the ids referring to it.
//!   A PROTOBUF whose `import` has no reference was accepted (Confluent refuses it).
//! - **Lookup.** `POST /subjects/S` with a registered schema answers `{"subject", "version",
//!   "id", "schema"}` (and `references`; no `schemaType`, even for PROTOBUF); an unknown one
//!   404 `{"error_code":40403}`, an unknown subject 404 `{"error_code":40401}`.
//! - **Compatibility.** `PUT /config/S {"compatibility":"BACKWARD"}` answers
//!   `{"compatibility":"BACKWARD","normalize":false}`, also for a subject with no schema yet; a
//!   bad level 422 `{"error_code":42203}`. `GET /config/S` for an existing subject without a
//!   level of its own answers 200 `{"compatibilityLevel":"NONE"}`, whatever the global level
//!   (`?defaultToGlobal=true` gives the global one), so unset and `NONE` look alike there; the
//!   v3 rule `/apis/registry/v3/groups/default/artifacts/S/rules/COMPATIBILITY` is 404 when
//!   unset ([`Registry::compatibility`] reads that). An unknown subject is 404 (40401). An
//!   incompatible registration is 409 with `"error_code":409` and a message naming the
//!   differences (`io.apicurio.registry.rules.violation.RuleViolationException: Incompatible
//!   artifact: orders-value [AVRO], num of incompatible diffs: {1}, list of diff types: [qty at
//!   /fields/1]`). The global level (`GET /config`) starts at `NONE`.
//! - **Deletes.** `DELETE /subjects/S` (soft) hides the subject from `GET /subjects` (not from
//!   `?deleted=true`) and keeps its ids readable; registering the schema again gives the same id
//!   as version 2. `?permanent=true` after it removes the versions; the id stays readable and
//!   the next registration of that content gets it again as version 1.
//!
//! Storage is an H2 file in the registry's temp folder, written at each commit: a kill and a
//! [`Registry::restart`] keep every schema, subject, level and id. Started with a 256 MiB heap, the serial collector and C1
//! only, it answers about 3 s after its start on 2 cores, about 200 MiB resident.
//!
//! With the `tls` feature, `Registry::start_tls` serves it over TLS only, requiring a client
//! certificate: Apicurio serves HTTPS with the kit CA's certificate, behind a gate in this
//! process that requires and checks the client certificate (Apicurio's build fixed
//! `quarkus.http.ssl.client-auth` to `NONE`; see `Registry::launch_tls`). It answers through the gate about 3.5 s after its
//! start (2.7 s for a plain one in the same run; 5 to 8 s while a plain one starts beside it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::broker::{kill_child, spawn_owned, stop_child};
use crate::ports::free_port;
#[cfg(feature = "tls")]
use crate::tls::{Ca, Issued};
use crate::wait::DEADLINE;

/// The path of the Confluent-compatible API.
const CCOMPAT: &str = "/apis/ccompat/v7";

/// The registry JVM's options: it holds a few schemas, so a small heap and a quick start
/// (measured: ~3 s and ~200 MiB resident, against ~5 s and ~290 MiB with the JVM's defaults).
const JVM: &[&str] = &[
    "-Xms32m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
];

/// The kit's HTTP client, before its TLS settings: generous timeouts (a loaded machine).
fn agent() -> ureq::AgentBuilder {
    ureq::AgentBuilder::new()
        .timeout_connect(Duration::from_secs(5))
        .timeout(Duration::from_secs(60))
}

/// How clients reach the registry.
enum Listener {
    /// Plain HTTP on Apicurio's port.
    Http,
    /// HTTPS through the gate that requires client certificates, to Apicurio serving HTTPS.
    #[cfg(feature = "tls")]
    Https(https::Https),
}

impl Listener {
    /// The JVM's `-D` options that make Apicurio listen on `port` as this listener needs.
    fn properties(&self, port: u16) -> Vec<String> {
        match self {
            Self::Http => vec![format!("-Dquarkus.http.port={port}")],
            // The Quarkus TLS registry's default configuration (its PEM key store, key pair
            // `0`) serves the HTTP server, and the management interface too; with
            // `insecure-requests=disabled` no plain HTTP port is opened at all.
            #[cfg(feature = "tls")]
            Self::Https(https) => vec![
                format!("-Dquarkus.http.ssl-port={port}"),
                "-Dquarkus.http.insecure-requests=disabled".to_string(),
                format!(
                    "-Dquarkus.tls.key-store.pem.0.cert={}",
                    https.cert.display()
                ),
                format!("-Dquarkus.tls.key-store.pem.0.key={}", https.key.display()),
            ],
        }
    }
}

/// The Java 21+ to run the registry with and the folder of Apicurio Registry, as
/// `.ci/install-apicurio` prints them (run once per test binary; a no-op when installed).
pub fn apicurio() -> anyhow::Result<(&'static Path, &'static Path)> {
    static FOUND: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        // This crate is `testkit/` at the repository's root.
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/install-apicurio");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut lines = stdout.lines().rev();
        match (out.status.success(), lines.next(), lines.next()) {
            (true, Some(home), Some(java)) => Ok((PathBuf::from(java), PathBuf::from(home))),
            _ => Err(format!(
                "{} failed: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    });
    match found {
        Ok((java, home)) => Ok((java, home)),
        Err(e) => Err(anyhow!("{e}")),
    }
}

/// A refused request: the registry's status and body (status 0: no answer).
#[derive(Debug)]
pub struct RegistryError {
    /// The HTTP status, 0 when the registry did not answer.
    pub status: u16,
    /// The body (`{"message":…,"error_code":…}`), or why there was no answer.
    pub body: String,
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.body)
    }
}

impl std::error::Error for RegistryError {}

/// One Apicurio Registry process on free loopback ports, its storage (an H2 file) and its log
/// (`registry.log`) in a temp folder of its own; killed (SIGKILL) when dropped. Its storage
/// survives [`Registry::kill`] and [`Registry::restart`], as a production registry's does.
pub struct Registry {
    child: Mutex<Option<Child>>,
    /// The port Apicurio serves its API on (HTTP, or HTTPS when [`Listener::Https`]).
    port: u16,
    management_port: u16,
    /// How clients reach it: that port, or the mutual-TLS gate in front of it.
    listener: Listener,
    /// The temp folder: `registry.log` and the JVM's temp files (`tmp/`).
    pub dir: TempDir,
    java: PathBuf,
    home: PathBuf,
    agent: ureq::Agent,
}

impl Registry {
    /// Starts a registry and waits until it answers; panics if it does not.
    pub fn start() -> Self {
        Self::launch().unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Starts a registry and waits until its ccompat API answers (at most [`DEADLINE`]). When
    /// another process takes one of its ports first, it retries with new ports (up to 4
    /// attempts).
    pub fn launch() -> anyhow::Result<Self> {
        Self::launch_with(|_, _| Ok((Listener::Http, agent().build())))
    }

    /// Starts a registry reached over TLS only, requiring a client certificate, and waits until
    /// it answers; panics if it does not. See [`Registry::launch_tls`].
    #[cfg(feature = "tls")]
    pub fn start_tls(ca: &Ca, server: &Issued, client: &Issued) -> Self {
        Self::launch_tls(ca, server, client).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Starts a registry that clients reach over TLS only, with `server`'s certificate (issued
    /// by `ca` for `127.0.0.1`), completing a handshake only with a client that presents a
    /// certificate `ca` issued; the kit's own requests present `client`'s. [`Registry::url`]
    /// is then `https://127.0.0.1:P/apis/ccompat/v7`. The files must outlive the registry (a
    /// restart reads them again).
    ///
    /// Apicurio itself serves HTTPS only (the Quarkus TLS registry's default PEM key store,
    /// `quarkus.http.insecure-requests=disabled`), but cannot be made to require client
    /// certificates: `quarkus.http.ssl.client-auth` is fixed at build time in Quarkus, and
    /// Apicurio 3.3.3's build fixed it to `NONE` (setting it at run time, even as
    /// `%prod.quarkus.http.ssl.client-auth`, only logs "Build time property cannot be changed
    /// at runtime" and changes nothing). So the port clients reach is a gate in front of it
    /// (OpenSSL, in this process) that requires and verifies the client certificate and relays
    /// the connection to Apicurio's HTTPS port; each connection it refuses is a `gate:` line in
    /// [`Registry::log`], with OpenSSL's reason.
    #[cfg(feature = "tls")]
    pub fn launch_tls(ca: &Ca, server: &Issued, client: &Issued) -> anyhow::Result<Self> {
        let ca = ca.ca_pem();
        let kit = std::sync::Arc::new(https::kit_tls(&ca, client)?);
        Self::launch_with(|port, dir| {
            let gate = https::Gate::start(&ca, server, port, dir.join("registry.log"))?;
            let listener = Listener::Https(https::Https {
                gate,
                cert: server.cert.clone(),
                key: server.key.clone(),
            });
            Ok((listener, agent().tls_connector(kit.clone()).build()))
        })
    }

    /// [`Registry::launch`] with the listener and agent `serve` makes for Apicurio's port and
    /// the registry's folder.
    fn launch_with(
        mut serve: impl FnMut(u16, &Path) -> anyhow::Result<(Listener, ureq::Agent)>,
    ) -> anyhow::Result<Self> {
        let (java, home) = apicurio()?;
        let mut last = String::new();
        for _ in 0..4 {
            let dir = tempfile::tempdir().context("creating a temp folder")?;
            let tmp = dir.path().join("tmp");
            std::fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
            let port = free_port();
            let (listener, agent) = serve(port, dir.path())?;
            let registry = Self {
                child: Mutex::new(None),
                port,
                management_port: free_port(),
                listener,
                dir,
                java: java.to_path_buf(),
                home: home.to_path_buf(),
                agent,
            };
            match registry.run() {
                Ok(()) => return Ok(registry),
                Err(log) if log.contains("in use") => last = log,
                Err(log) => bail!("Apicurio Registry failed to start:\n{log}"),
            }
        }
        bail!("Apicurio Registry found no free ports:\n{last}")
    }

    /// The base of its Confluent-compatible API, `http://127.0.0.1:P/apis/ccompat/v7`
    /// (`https://…` when started with TLS): what a pipeline names as the registry's URL.
    pub fn url(&self) -> String {
        format!("{}{CCOMPAT}", self.root())
    }

    /// Scheme, host and port clients reach the registry on.
    fn root(&self) -> String {
        match &self.listener {
            Listener::Http => format!("http://127.0.0.1:{}", self.port),
            #[cfg(feature = "tls")]
            Listener::Https(https) => format!("https://127.0.0.1:{}", https.gate.port),
        }
    }

    /// Starts the JVM and waits until `GET /subjects` answers 200; on failure returns its log.
    fn run(&self) -> Result<(), String> {
        let path = self.dir.path().join("registry.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        let log_err = log.try_clone().map_err(|e| format!("registry log: {e}"))?;
        let mut cmd = Command::new(&self.java);
        cmd.args(JVM)
            // Vert.x's file cache and the native libraries it unpacks, which would otherwise
            // stay in /tmp.
            .arg(format!(
                "-Djava.io.tmpdir={}",
                self.dir.path().join("tmp").display()
            ))
            .arg("-Dquarkus.http.host=127.0.0.1")
            .args(self.listener.properties(self.port))
            .arg("-Dquarkus.management.host=127.0.0.1")
            .arg(format!(
                "-Dquarkus.management.port={}",
                self.management_port
            ))
            .args([
                "-Dapicurio.storage.kind=sql",
                "-Dapicurio.storage.sql.kind=h2",
            ])
            // An H2 file in its folder, written at each commit (`WRITE_DELAY=0`): what it
            // registered survives a kill -9 and a restart, as a production registry's storage
            // does (measured: a schema registered just before the kill is there after it, and
            // the next id continues from it).
            .arg(format!(
                "-Dapicurio.datasource.url=jdbc:h2:file:{};WRITE_DELAY=0",
                self.dir.path().join("db").display()
            ))
            .arg("-jar")
            .arg(self.home.join("quarkus-run.jar"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        let child = spawn_owned(cmd).map_err(|e| {
            format!(
                "cannot start {}: {e} (REFRACT_REGISTRY_JAVA names the Java 21+ to use)",
                self.java.display()
            )
        })?;
        *self.child.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.exited() {
                return Err(format!("exited with {status}\n{}", self.log()));
            }
            if matches!(
                self.request("GET", &format!("{CCOMPAT}/subjects"), None),
                Ok((200, _))
            ) {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!(
                    "{}/subjects did not answer within {DEADLINE:?}\n{}",
                    self.url(),
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

    /// Everything it printed (its log and an access-log line per request).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(Child::id)
    }

    /// Kills the registry (SIGKILL, like a crashed machine); its storage stays for [`Registry::restart`].
    pub fn kill(&self) {
        kill_child(&self.child);
    }

    /// Stops the registry: SIGTERM, then SIGKILL if it still runs after `grace`. Whether it
    /// exited by itself (`false`: killed, or not running).
    pub fn stop(&self, grace: Duration) -> bool {
        stop_child(&self.child, grace)
    }

    /// Starts the registry again on the same port (killing it first if it runs) and waits until
    /// it answers, with everything it held before.
    pub fn restart(&self) {
        self.kill();
        self.run()
            .unwrap_or_else(|log| panic!("Apicurio Registry failed to restart:\n{log}"));
    }

    /// Starts the registry again on the same port with empty storage, as a registry rebuilt
    /// after losing its data would be: it assigns ids from the start again.
    pub fn wipe(&self) {
        self.kill();
        let entries = std::fs::read_dir(self.dir.path()).expect("the registry's folder");
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("db.") {
                std::fs::remove_file(entry.path()).expect("removing the registry's storage");
            }
        }
        self.run()
            .unwrap_or_else(|log| panic!("Apicurio Registry failed to start again:\n{log}"));
    }

    /// One request to `path` (from the root, `/apis/…`) with a JSON `body`: (status, body);
    /// `Err` when the registry does not answer.
    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, String), RegistryError> {
        let req = self
            .agent
            .request(method, &format!("{}{path}", self.root()))
            .set(
                "Accept",
                "application/vnd.schemaregistry.v1+json, application/json",
            );
        let sent = match body {
            Some(b) => req
                .set("Content-Type", "application/vnd.schemaregistry.v1+json")
                .send_string(&b.to_string()),
            None => req.call(),
        };
        let (status, resp) = match sent {
            Ok(resp) => (resp.status(), resp),
            Err(ureq::Error::Status(status, resp)) => (status, resp),
            Err(ureq::Error::Transport(t)) => {
                return Err(RegistryError {
                    status: 0,
                    body: format!("{method} {path}: {t}"),
                })
            }
        };
        let text = resp.into_string().map_err(|e| RegistryError {
            status,
            body: format!("{method} {path}: reading the answer: {e}"),
        })?;
        Ok((status, text))
    }

    /// A request whose answer is JSON: (status, value); panics when there is no answer or it is
    /// not JSON.
    fn json(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let (status, text) = self
            .request(method, path, body)
            .unwrap_or_else(|e| panic!("{e}\nregistry log:\n{}", self.log()));
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: HTTP {status}, not JSON ({e}): {text}"));
        (status, value)
    }

    /// Registers `schema` of `schema_type` (`"AVRO"`, `"PROTOBUF"`, `"JSON"`) under `subject`
    /// with `references` (import name, subject, version) and returns its id; panics when the
    /// registry refuses it.
    pub fn register(
        &self,
        subject: &str,
        schema: &str,
        schema_type: &str,
        references: &[(&str, &str, u32)],
    ) -> u32 {
        self.try_register(subject, schema, schema_type, references)
            .unwrap_or_else(|e| panic!("registering a {schema_type} schema under {subject}: {e}"))
    }

    /// [`Registry::register`] that returns the refusal (409 incompatible, 422 invalid, …).
    pub fn try_register(
        &self,
        subject: &str,
        schema: &str,
        schema_type: &str,
        references: &[(&str, &str, u32)],
    ) -> Result<u32, RegistryError> {
        let references: Vec<Value> = references
            .iter()
            .map(|(name, subject, version)| {
                json!({"name": name, "subject": subject, "version": version})
            })
            .collect();
        let mut body = json!({"schema": schema, "schemaType": schema_type});
        if !references.is_empty() {
            body["references"] = Value::Array(references);
        }
        let path = format!("{CCOMPAT}/subjects/{}/versions", segment(subject));
        let (status, text) = self.request("POST", &path, Some(&body))?;
        let id = (status == 200)
            .then(|| serde_json::from_str::<Value>(&text).ok())
            .flatten()
            .and_then(|v| v["id"].as_u64())
            .and_then(|id| u32::try_from(id).ok());
        id.ok_or(RegistryError { status, body: text })
    }

    /// The schema with id `id`: (text, type), the type `"AVRO"` when the registry leaves it out
    /// (it does for AVRO); `None` when there is no such id.
    pub fn schema_by_id(&self, id: u32) -> Option<(String, String)> {
        let v = self.schema_json(id)?;
        let text = v["schema"].as_str().expect("a schema's text").to_string();
        let kind = v["schemaType"].as_str().unwrap_or("AVRO").to_string();
        Some((text, kind))
    }

    /// The references of the schema with id `id`: (import name, subject, version) as stored;
    /// empty when it has none or there is no such id.
    pub fn references(&self, id: u32) -> Vec<(String, String, u32)> {
        let Some(v) = self.schema_json(id) else {
            return Vec::new();
        };
        v["references"]
            .as_array()
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| {
                        Some((
                            r["name"].as_str()?.to_string(),
                            r["subject"].as_str()?.to_string(),
                            u32::try_from(r["version"].as_u64()?).ok()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `GET /schemas/ids/{id}`, `None` on 404.
    fn schema_json(&self, id: u32) -> Option<Value> {
        match self.json("GET", &format!("{CCOMPAT}/schemas/ids/{id}"), None) {
            (200, v) => Some(v),
            (404, _) => None,
            (status, v) => panic!("GET /schemas/ids/{id}: HTTP {status}: {v}"),
        }
    }

    /// The subjects, in the registry's order (sorted), soft-deleted ones left out.
    pub fn subjects(&self) -> Vec<String> {
        match self.json("GET", &format!("{CCOMPAT}/subjects"), None) {
            (200, Value::Array(subjects)) => subjects
                .iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect(),
            (status, v) => panic!("GET /subjects: HTTP {status}: {v}"),
        }
    }

    /// The versions of `subject`; empty when there is no such subject.
    pub fn versions(&self, subject: &str) -> Vec<u32> {
        let path = format!("{CCOMPAT}/subjects/{}/versions", segment(subject));
        match self.json("GET", &path, None) {
            (200, Value::Array(versions)) => versions
                .iter()
                .filter_map(|v| u32::try_from(v.as_u64()?).ok())
                .collect(),
            (404, _) => Vec::new(),
            (status, v) => panic!("GET /subjects/{subject}/versions: HTTP {status}: {v}"),
        }
    }

    /// Sets the compatibility level of `subject` (`"BACKWARD"`, `"FULL_TRANSITIVE"`, `"NONE"`,
    /// …) through `PUT /config/{subject}`; panics when refused.
    pub fn set_compatibility(&self, subject: &str, level: &str) {
        let path = format!("{CCOMPAT}/config/{}", segment(subject));
        let (status, v) = self.json("PUT", &path, Some(&json!({"compatibility": level})));
        assert_eq!(status, 200, "PUT /config/{subject} {level}: {v}");
    }

    /// The compatibility level `subject` has of its own; `None` when it has none. Read from the
    /// native API's rule: the ccompat `GET /config/{subject}` answers `NONE` for a subject
    /// without a level, so it cannot tell unset from `NONE`.
    pub fn compatibility(&self, subject: &str) -> Option<String> {
        let path = format!(
            "/apis/registry/v3/groups/default/artifacts/{}/rules/COMPATIBILITY",
            segment(subject)
        );
        match self.json("GET", &path, None) {
            (200, v) => Some(v["config"].as_str().expect("the rule's level").to_string()),
            (404, _) => None,
            (status, v) => panic!("GET {path}: HTTP {status}: {v}"),
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The TLS side of [`Registry::launch_tls`]: the gate in front of Apicurio that requires client
/// certificates, and the kit's own TLS client.
#[cfg(feature = "tls")]
mod https {
    use std::fmt::Debug;
    use std::io::{self, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::thread::JoinHandle;
    use std::time::Duration;

    use anyhow::Context as _;
    use openssl::ssl::{
        HandshakeError, SslAcceptor, SslConnector, SslFiletype, SslMethod, SslStream, SslVerifyMode,
    };
    use openssl::x509::X509Name;

    use crate::tls::Issued;

    /// How long a relay waits for one side before it looks at the other and at the stop flag:
    /// the most a request or an answer waits in the gate.
    const TICK: Duration = Duration::from_millis(10);
    /// How long a relay waits for a peer to take what it writes before it gives up on the
    /// connection: a peer that stops reading cannot hold the gate's drop forever.
    const STUCK: Duration = Duration::from_secs(30);

    /// The kit's TLS client, as refract's registry client builds its own: trusts the CA,
    /// presents `client`'s certificate (its key in PKCS#8).
    pub(super) fn kit_tls(ca: &Path, client: &Issued) -> anyhow::Result<native_tls::TlsConnector> {
        let what = || format!("the registry kit's TLS client ({})", client.cert.display());
        let read = |path: &Path| {
            std::fs::read(path).with_context(|| format!("{}: reading {}", what(), path.display()))
        };
        let identity = native_tls::Identity::from_pkcs8(&read(&client.cert)?, &read(&client.key)?)
            .with_context(what)?;
        native_tls::TlsConnector::builder()
            .add_root_certificate(native_tls::Certificate::from_pem(&read(ca)?).with_context(what)?)
            .identity(identity)
            .build()
            .with_context(what)
    }

    /// A registry served over TLS: the gate clients reach, and Apicurio's own certificate.
    pub(super) struct Https {
        pub(super) gate: Gate,
        /// Apicurio's certificate (PEM).
        pub(super) cert: PathBuf,
        /// Its key (PKCS#8 PEM).
        pub(super) key: PathBuf,
    }

    /// A loopback port that completes a TLS handshake only with a client certificate the CA
    /// issued, then relays the connection to Apicurio's HTTPS port (checking Apicurio's
    /// certificate against the same CA). Stops and joins its threads when dropped.
    pub(super) struct Gate {
        /// The port clients connect to.
        pub(super) port: u16,
        shared: Arc<Shared>,
        accept: Option<JoinHandle<()>>,
    }

    /// What the gate's threads share.
    struct Shared {
        acceptor: SslAcceptor,
        connector: SslConnector,
        /// Apicurio's HTTPS port.
        upstream: u16,
        /// The registry's log, where refused connections are noted.
        log: PathBuf,
        stop: AtomicBool,
    }

    impl Shared {
        fn note(&self, line: &str) {
            if let Ok(mut log) = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&self.log)
            {
                let _ = writeln!(log, "gate: {line}");
            }
        }

        fn stopping(&self) -> bool {
            self.stop.load(Ordering::Relaxed)
        }
    }

    impl Gate {
        /// Listens on a free loopback port with `server`'s certificate, requiring client
        /// certificates issued by the CA in `ca`, relaying to Apicurio's HTTPS port `upstream`.
        pub(super) fn start(
            ca: &Path,
            server: &Issued,
            upstream: u16,
            log: PathBuf,
        ) -> anyhow::Result<Self> {
            let what = || format!("the registry's TLS gate (CA {})", ca.display());
            let mut acceptor =
                SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).with_context(what)?;
            acceptor
                .set_certificate_chain_file(&server.cert)
                .with_context(|| format!("{}: {}", what(), server.cert.display()))?;
            acceptor
                .set_private_key_file(&server.key, SslFiletype::PEM)
                .with_context(|| format!("{}: {}", what(), server.key.display()))?;
            acceptor.check_private_key().with_context(what)?;
            acceptor.set_ca_file(ca).with_context(what)?;
            acceptor.set_client_ca_list(X509Name::load_client_ca_file(ca).with_context(what)?);
            acceptor.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
            let mut connector =
                SslConnector::builder(SslMethod::tls_client()).with_context(what)?;
            connector.set_ca_file(ca).with_context(what)?;
            let listener = TcpListener::bind(("127.0.0.1", 0)).with_context(what)?;
            let port = listener.local_addr().with_context(what)?.port();
            let shared = Arc::new(Shared {
                acceptor: acceptor.build(),
                connector: connector.build(),
                upstream,
                log,
                stop: AtomicBool::new(false),
            });
            let accept = std::thread::Builder::new()
                .name("registry-tls-gate".into())
                .spawn({
                    let shared = Arc::clone(&shared);
                    move || accept(&listener, &shared)
                })
                .with_context(what)?;
            Ok(Self {
                port,
                shared,
                accept: Some(accept),
            })
        }
    }

    impl Drop for Gate {
        fn drop(&mut self) {
            self.shared.stop.store(true, Ordering::Relaxed);
            // The accept loop blocks in accept(): a connection wakes it to see the flag.
            let _ = TcpStream::connect(("127.0.0.1", self.port));
            if let Some(accept) = self.accept.take() {
                let _ = accept.join();
            }
        }
    }

    /// Accepts connections until stopped, one relay thread each; joins them all before it
    /// returns.
    fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
        let mut relays: Vec<JoinHandle<()>> = Vec::new();
        for tcp in listener.incoming() {
            if shared.stopping() {
                break;
            }
            let (done, running): (Vec<_>, Vec<_>) =
                relays.into_iter().partition(|r| r.is_finished());
            relays = running;
            for r in done {
                let _ = r.join();
            }
            let Ok(tcp) = tcp else { continue };
            let relay = std::thread::Builder::new()
                .name("registry-tls-relay".into())
                .spawn({
                    let shared = Arc::clone(shared);
                    move || {
                        if let Err(why) = relay(tcp, &shared) {
                            shared.note(&why);
                        }
                    }
                });
            match relay {
                Ok(r) => relays.push(r),
                Err(e) => shared.note(&format!("cannot start a relay thread: {e}")),
            }
        }
        for r in relays {
            let _ = r.join();
        }
    }

    /// One client connection: the handshake that requires its certificate, then the bytes
    /// both ways to and from Apicurio until either side closes or the gate stops.
    fn relay(tcp: TcpStream, shared: &Shared) -> Result<(), String> {
        let peer = tcp
            .peer_addr()
            .map_or_else(|_| "a client".to_string(), |a| a.to_string());
        tcp.set_read_timeout(Some(TICK))
            .and_then(|()| tcp.set_write_timeout(Some(STUCK)))
            .map_err(|e| format!("{peer}: {e}"))?;
        let mut client = handshake(shared.acceptor.accept(tcp), shared)
            .map_err(|e| format!("refused {peer}: {e}"))?;
        let Ok(tcp) = TcpStream::connect(("127.0.0.1", shared.upstream)) else {
            // Apicurio is not up (yet, or any more): the client sees the connection closed.
            return Ok(());
        };
        tcp.set_read_timeout(Some(TICK))
            .and_then(|()| tcp.set_write_timeout(Some(STUCK)))
            .map_err(|e| format!("{peer}: {e}"))?;
        let mut apicurio = handshake(shared.connector.connect("127.0.0.1", tcp), shared)
            .map_err(|e| format!("{peer}: Apicurio's TLS port {}: {e}", shared.upstream))?;
        let mut buf = vec![0; 16 * 1024];
        while !shared.stopping() {
            let up = pump(&mut client, &mut apicurio, &mut buf);
            let down = pump(&mut apicurio, &mut client, &mut buf);
            match (up, down) {
                (Ok(true), Ok(true)) => {}
                // One side closed, or the connection broke: the other one is closed by the drop.
                _ => break,
            }
        }
        let _ = client.shutdown();
        let _ = apicurio.shutdown();
        Ok(())
    }

    /// Finishes a handshake over a socket with a read timeout (so the gate can stop meanwhile).
    fn handshake<S: Read + Write + Debug>(
        mut result: Result<SslStream<S>, HandshakeError<S>>,
        shared: &Shared,
    ) -> Result<SslStream<S>, String> {
        loop {
            match result {
                Ok(stream) => return Ok(stream),
                Err(HandshakeError::WouldBlock(mid)) if !shared.stopping() => {
                    result = mid.handshake()
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Moves what `from` has, waiting for it at most a [`TICK`], to `to`: `false` once `from`
    /// closed.
    fn pump<S: Read + Write, T: Read + Write>(
        from: &mut SslStream<S>,
        to: &mut SslStream<T>,
        buf: &mut [u8],
    ) -> io::Result<bool> {
        match from.read(buf) {
            Ok(0) => Ok(false),
            Ok(n) => {
                to.write_all(&buf[..n])?;
                to.flush()?;
                Ok(true)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }
}

/// `s` as one path segment: everything but unreserved characters percent-encoded (a subject
/// may hold `/`, `?`, `%` or spaces).
fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::segment;

    #[test]
    fn subjects_are_one_path_segment() {
        assert_eq!(segment("orders-value"), "orders-value");
        assert_eq!(segment("acme.Order"), "acme.Order");
        assert_eq!(segment("a/b c%?"), "a%2Fb%20c%25%3F");
        assert_eq!(segment("é"), "%C3%A9");
    }
}
