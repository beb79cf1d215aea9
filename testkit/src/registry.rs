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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::broker::{kill_child, spawn_owned, stop_child};
use crate::ports::free_port;
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
    port: u16,
    management_port: u16,
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
        let (java, home) = apicurio()?;
        let mut last = String::new();
        for _ in 0..4 {
            let dir = tempfile::tempdir().context("creating a temp folder")?;
            let tmp = dir.path().join("tmp");
            std::fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
            let registry = Self {
                child: Mutex::new(None),
                port: free_port(),
                management_port: free_port(),
                dir,
                java: java.to_path_buf(),
                home: home.to_path_buf(),
                agent: ureq::AgentBuilder::new()
                    .timeout_connect(Duration::from_secs(5))
                    .timeout(Duration::from_secs(60))
                    .build(),
            };
            match registry.run() {
                Ok(()) => return Ok(registry),
                Err(log) if log.contains("in use") => last = log,
                Err(log) => bail!("Apicurio Registry failed to start:\n{log}"),
            }
        }
        bail!("Apicurio Registry found no free ports:\n{last}")
    }

    /// The base of its Confluent-compatible API, `http://127.0.0.1:P/apis/ccompat/v7`: what a
    /// pipeline names as the registry's URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{CCOMPAT}", self.port)
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
            .arg(format!("-Dquarkus.http.port={}", self.port))
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
            .request(method, &format!("http://127.0.0.1:{}{path}", self.port))
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
