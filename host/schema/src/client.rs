//! A blocking client of the Confluent Schema Registry REST API (the subset translation needs),
//! which Confluent Schema Registry, Apicurio Registry (`/apis/ccompat/v7`), Karapace and
//! Redpanda serve alike.
//!
//! Errors say whether trying again can help ([`RegistryError::Unavailable`]: the registry did
//! not answer, answered 5xx, 408, 429, or refused refract's credentials) or not
//! ([`RegistryError::NotFound`], [`RegistryError::Refused`]: it answered, and the answer is
//! no). They name the registry by cluster and URL, never the credentials; the registry's own
//! text in them is cut short and stripped of control characters.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use refract_config::SchemaRegistry;
use serde_json::{json, Value};
use tracing::info;

/// After a failure that trying again may cure, further requests fail at once for this long:
/// one registry outage costs each flow thread one timeout, not one per partition.
const FAIL_FAST: Duration = Duration::from_secs(1);
/// Longest registry text kept in an error.
const TEXT_CAP: usize = 300;

/// A schema as a registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// The schema text (Avro JSON, a `.proto` file, a JSON Schema).
    pub text: String,
    /// `AVRO`, `PROTOBUF` or `JSON`.
    pub schema_type: String,
    /// The schemas it imports, by name, subject and version.
    pub references: Vec<Reference>,
}

/// A reference from one schema to another.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// The name the referring schema uses (a `.proto` import path, an Avro full name, a URL).
    pub name: String,
    /// The subject of the referenced schema.
    pub subject: String,
    /// Its version under that subject.
    pub version: i64,
}

/// A registry's failure to do what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryError {
    /// Not reachable, or it failed on its side: trying again later may succeed.
    Unavailable(String),
    /// It does not know the id, subject or version asked for.
    NotFound(String),
    /// It answered and refused (an incompatible or invalid schema).
    Refused(String),
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unavailable(m) | Self::NotFound(m) | Self::Refused(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for RegistryError {}

/// One cluster's schema registry.
pub struct RegistryClient {
    /// The cluster alias, for errors and metrics.
    pub cluster: String,
    base: String,
    shown: String,
    agent: ureq::Agent,
    /// The registry as configured, to read its credentials again when they are refused.
    config: SchemaRegistry,
    /// The `Authorization` header sent (never logged).
    authorization: RwLock<Option<String>>,
    /// The last failure while no request succeeded since: until when requests fail fast, and
    /// why.
    down: Mutex<Option<(Instant, String)>>,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient")
            .field("cluster", &self.cluster)
            .field("url", &self.shown)
            .finish_non_exhaustive()
    }
}

impl RegistryClient {
    /// A client of `cluster`'s registry: TLS with the system's CAs plus `ca`, the client
    /// certificate when given, basic or bearer authentication.
    pub fn new(cluster: &str, config: &SchemaRegistry) -> anyhow::Result<Arc<Self>> {
        let shown = config.url_shown();
        let what = || format!("cluster {cluster}'s schema registry {shown}");
        let mut tls = native_tls::TlsConnector::builder();
        if let Some(ca) = &config.ca {
            let pem = std::fs::read(ca)
                .with_context(|| format!("{}: reading ca {}", what(), ca.display()))?;
            let certs = openssl::x509::X509::stack_from_pem(&pem)
                .with_context(|| format!("{}: ca {} is not PEM", what(), ca.display()))?;
            for cert in certs {
                let der = cert.to_der().context("a CA certificate")?;
                tls.add_root_certificate(
                    native_tls::Certificate::from_der(&der).context("a CA certificate")?,
                );
            }
        }
        if let (Some(cert), Some(key)) = (&config.cert, &config.key) {
            let cert_pem = std::fs::read(cert)
                .with_context(|| format!("{}: reading cert {}", what(), cert.display()))?;
            let key_pem = std::fs::read(key)
                .with_context(|| format!("{}: reading key {}", what(), key.display()))?;
            tls.identity(
                native_tls::Identity::from_pkcs8(&cert_pem, &key_pem).with_context(|| {
                    format!(
                        "{}: cert {} and key {} (a PEM certificate and its PKCS#8 key)",
                        what(),
                        cert.display(),
                        key.display()
                    )
                })?,
            );
        }
        let tls = tls
            .build()
            .with_context(|| format!("{}: TLS setup", what()))?;
        let agent = ureq::AgentBuilder::new()
            .tls_connector(Arc::new(tls))
            .timeout(config.timeout)
            .user_agent(concat!("refract/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Arc::new(Self {
            cluster: cluster.to_string(),
            base: config.url.clone(),
            shown,
            agent,
            config: config.clone(),
            authorization: RwLock::new(authorization(config)),
            down: Mutex::new(None),
        }))
    }

    /// After the registry refused the credentials (401, 403): reads them again from their
    /// references and takes them when they changed (a token or password rotated in its file).
    /// Whether they did; why not, for the error, when they did not.
    fn renew_credentials(&self) -> Result<(), String> {
        let fresh = match self.config.credentials_again() {
            Ok(Some(fresh)) => authorization(&fresh),
            Ok(None) => {
                return Err("they hold no ${file:…} or ${env:…} reference to read again".into())
            }
            Err(e) => return Err(format!("reading them again failed: {e}")),
        };
        let mut current = self
            .authorization
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if *current == fresh {
            return Err("read again from their references: unchanged".into());
        }
        *current = fresh;
        info!(
            "cluster {}'s schema registry {} refused the credentials; they changed in their references since they were read, retrying with the new ones",
            self.cluster, self.shown
        );
        Ok(())
    }

    /// The registry's URL as it may be shown.
    pub fn url_shown(&self) -> &str {
        &self.shown
    }

    /// Why the last request failed, while no later one succeeded.
    pub fn down(&self) -> Option<String> {
        let down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        down.as_ref().map(|(_, why)| why.clone())
    }

    /// Why requests fail at once now (for [`FAIL_FAST`] after a failure), if they do.
    fn failing_fast(&self) -> Option<String> {
        let down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        down.as_ref()
            .filter(|(until, _)| Instant::now() < *until)
            .map(|(_, why)| why.clone())
    }

    /// How many subjects the registry lists (`GET /subjects`): whether it answers, and lets
    /// refract read.
    pub fn probe(&self) -> Result<usize, RegistryError> {
        self.subjects().map(|s| s.len())
    }

    /// The subjects the registry lists (`GET /subjects`).
    pub fn subjects(&self) -> Result<Vec<String>, RegistryError> {
        let body = self.call("GET", "/subjects", None)?;
        Ok(body
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The schema with global id `id` (`GET /schemas/ids/{id}`).
    pub fn schema_by_id(&self, id: u32) -> Result<Schema, RegistryError> {
        let body = self.call("GET", &format!("/schemas/ids/{id}"), None)?;
        parse_schema(&body).map_err(|e| self.garbled(&format!("schema id {id}"), e))
    }

    /// The subjects and versions id `id` is registered under (`GET /schemas/ids/{id}/versions`);
    /// empty when the registry cannot say.
    pub fn subjects_of(&self, id: u32) -> Result<Vec<(String, i64)>, RegistryError> {
        let body = match self.call("GET", &format!("/schemas/ids/{id}/versions"), None) {
            Ok(body) => body,
            Err(RegistryError::NotFound(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let list = body.as_array().cloned().unwrap_or_default();
        Ok(list
            .iter()
            .filter_map(|v| {
                Some((
                    v.get("subject")?.as_str()?.to_string(),
                    v.get("version")?.as_i64()?,
                ))
            })
            .collect())
    }

    /// Version `version` of `subject`: its id and schema (`GET /subjects/{s}/versions/{v}`).
    pub fn version(&self, subject: &str, version: i64) -> Result<(u32, Schema), RegistryError> {
        let path = format!("/subjects/{}/versions/{version}", segment(subject));
        let body = self.call("GET", &path, None)?;
        let id = body
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| {
                self.garbled(
                    &format!("subject {subject} version {version}"),
                    "no id".into(),
                )
            })?;
        let schema = parse_schema(&body)
            .map_err(|e| self.garbled(&format!("subject {subject} version {version}"), e))?;
        Ok((id, schema))
    }

    /// The versions of `subject`, oldest first; empty when it has none.
    pub fn versions(&self, subject: &str) -> Result<Vec<i64>, RegistryError> {
        let path = format!("/subjects/{}/versions", segment(subject));
        match self.call("GET", &path, None) {
            Ok(body) => {
                let mut v: Vec<i64> = body
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_i64).collect())
                    .unwrap_or_default();
                v.sort_unstable();
                Ok(v)
            }
            Err(RegistryError::NotFound(_)) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Registers `schema` under `subject` (`POST /subjects/{s}/versions`) and returns its id;
    /// a schema the subject already holds gives its existing id.
    pub fn register(&self, subject: &str, schema: &Schema) -> Result<u32, RegistryError> {
        let path = format!("/subjects/{}/versions", segment(subject));
        let body = self.call("POST", &path, Some(schema_body(schema)))?;
        body.get("id")
            .and_then(Value::as_u64)
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| self.garbled(&format!("registering under {subject}"), "no id".into()))
    }

    /// The version of `subject` that holds `schema` (`POST /subjects/{s}`), if any.
    pub fn lookup(&self, subject: &str, schema: &Schema) -> Result<Option<i64>, RegistryError> {
        let path = format!("/subjects/{}", segment(subject));
        match self.call("POST", &path, Some(schema_body(schema))) {
            Ok(body) => Ok(body.get("version").and_then(Value::as_i64)),
            Err(RegistryError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `subject`'s own compatibility level (`GET /config/{s}`), `None` when it has none.
    pub fn compatibility(&self, subject: &str) -> Result<Option<String>, RegistryError> {
        let path = format!("/config/{}", segment(subject));
        match self.call("GET", &path, None) {
            Ok(body) => Ok(body
                .get("compatibilityLevel")
                .or_else(|| body.get("compatibility"))
                .and_then(Value::as_str)
                .map(str::to_string)),
            Err(RegistryError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sets `subject`'s compatibility level (`PUT /config/{s}`).
    pub fn set_compatibility(&self, subject: &str, level: &str) -> Result<(), RegistryError> {
        let path = format!("/config/{}", segment(subject));
        self.call("PUT", &path, Some(json!({ "compatibility": level })))
            .map(|_| ())
    }

    fn garbled(&self, what: &str, why: String) -> RegistryError {
        RegistryError::Unavailable(format!(
            "cluster {}'s schema registry {}: unexpected answer for {what}: {why}",
            self.cluster, self.shown
        ))
    }

    /// One request; the answer's JSON.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, RegistryError> {
        if let Some(why) = self.failing_fast() {
            return Err(RegistryError::Unavailable(why));
        }
        self.attempt(method, path, body, true)
    }

    /// One request; when the registry refuses the credentials and `renew`, once more with
    /// credentials read again, if they changed.
    fn attempt(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        renew: bool,
    ) -> Result<Value, RegistryError> {
        let mut request = self
            .agent
            .request(method, &format!("{}{path}", self.base))
            .set(
                "Accept",
                "application/vnd.schemaregistry.v1+json, application/json",
            );
        if let Some(auth) = self
            .authorization
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_deref()
        {
            request = request.set("Authorization", auth);
        }
        let result = match body.clone() {
            Some(body) => request
                .set("Content-Type", "application/vnd.schemaregistry.v1+json")
                .send_string(&body.to_string()),
            None => request.call(),
        };
        let prefix = || {
            format!(
                "cluster {}'s schema registry {}: {method} {path}",
                self.cluster, self.shown
            )
        };
        let error = match result {
            Ok(response) => {
                *self.down.lock().unwrap_or_else(|e| e.into_inner()) = None;
                let text = response.into_string().map_err(|e| {
                    RegistryError::Unavailable(format!("{}: reading the answer: {e}", prefix()))
                })?;
                return serde_json::from_str(&text).map_err(|e| {
                    RegistryError::Unavailable(format!("{}: the answer is not JSON: {e}", prefix()))
                });
            }
            Err(ureq::Error::Status(status, response)) => {
                let text = response.into_string().unwrap_or_default();
                let message = registry_message(&text);
                let m = format!("{}: HTTP {status}{message}", prefix());
                // A registry's own 404 carries its error code (40401 subject, 40402 version,
                // 40403 schema); one without is a URL that is not the registry's API, which
                // must not make every record's id "unknown".
                let coded = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v.get("error_code").and_then(Value::as_i64))
                    .is_some_and(|code| (40400..40500).contains(&code));
                match status {
                    401 | 403 if renew => match self.renew_credentials() {
                        Ok(()) => return self.attempt(method, path, body, false),
                        Err(why) => RegistryError::Unavailable(format!("{m} (credentials {why})")),
                    },
                    404 if coded => return Err(RegistryError::NotFound(m)),
                    404 => RegistryError::Unavailable(format!(
                        "{m} (an answer without a schema-registry error code: is the URL the registry API's base, e.g. .../apis/ccompat/v7 for Apicurio?)"
                    )),
                    409 | 422 | 400 => return Err(RegistryError::Refused(m)),
                    _ => RegistryError::Unavailable(m),
                }
            }
            Err(ureq::Error::Transport(t)) => {
                let unidentified = self.base.starts_with("https://") && self.config.cert.is_none();
                RegistryError::Unavailable(format!(
                    "{}: {}",
                    prefix(),
                    transport_text(&t, unidentified)
                ))
            }
        };
        if let RegistryError::Unavailable(why) = &error {
            *self.down.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((Instant::now() + FAIL_FAST, why.clone()));
        }
        Err(error)
    }
}

/// A request that got no answer, in words: the failure's kind, message and causes, each said
/// once (the URL is in the error's prefix already). A TLS alert the registry sent is named as
/// a refused TLS connection: under TLS 1.3 a server that wants a client certificate sends its
/// alert after the handshake, so the client meets it only when it reads the status line — or,
/// when the server closed the connection first, as a write that fails or an early end of the
/// stream, which gets a hint when `unidentified` (HTTPS without a client certificate).
fn transport_text(t: &ureq::Transport, unidentified: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut say = |text: &str| {
        for part in text.split(": ").map(str::trim) {
            if !part.is_empty() && !parts.iter().any(|p| p == part) {
                parts.push(part.to_string());
            }
        }
    };
    say(&t.kind().to_string());
    if let Some(message) = t.message() {
        say(message);
    }
    let mut source = std::error::Error::source(t);
    while let Some(cause) = source {
        say(&cause.to_string());
        source = cause.source();
    }
    let text = parts.join(": ");
    let alert = [
        "alert certificate required",
        "alert bad certificate",
        "alert handshake failure",
        "alert unknown ca",
        "alert certificate unknown",
    ]
    .iter()
    .find(|a| text.contains(*a));
    let lower = text.to_lowercase();
    let cut_off = ["eof", "reset", "broken pipe"]
        .iter()
        .any(|w| lower.contains(w));
    match alert {
        Some(alert) => clean(&format!(
            "the registry refused the TLS connection ({alert}; `cert` and `key` present a client certificate, `ca` the CA to trust): {text}"
        )),
        None if unidentified && cut_off => clean(&format!(
            "{text} (the registry ended the TLS connection: if it requires a client certificate, `cert` and `key` present one)"
        )),
        None => clean(&text),
    }
}

/// The `Authorization` header for `config`'s credentials: basic or bearer, or none.
fn authorization(config: &SchemaRegistry) -> Option<String> {
    if let Some((user, password)) = config.basic_auth() {
        Some(format!(
            "Basic {}",
            openssl::base64::encode_block(format!("{user}:{password}").as_bytes())
        ))
    } else {
        config.bearer_token().map(|t| format!("Bearer {t}"))
    }
}

fn schema_body(schema: &Schema) -> Value {
    let mut body = json!({ "schema": schema.text });
    if schema.schema_type != "AVRO" {
        body["schemaType"] = json!(schema.schema_type);
    }
    if !schema.references.is_empty() {
        body["references"] = Value::Array(
            schema
                .references
                .iter()
                .map(|r| json!({ "name": r.name, "subject": r.subject, "version": r.version }))
                .collect(),
        );
    }
    body
}

fn parse_schema(body: &Value) -> Result<Schema, String> {
    let text = body
        .get("schema")
        .and_then(Value::as_str)
        .ok_or("no schema text")?
        .to_string();
    let schema_type = body
        .get("schemaType")
        .and_then(Value::as_str)
        .unwrap_or("AVRO")
        .to_string();
    let mut references = Vec::new();
    for r in body
        .get("references")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |k: &str| r.get(k).ok_or_else(|| format!("a reference without {k}"));
        references.push(Reference {
            name: field("name")?.as_str().unwrap_or_default().to_string(),
            subject: field("subject")?.as_str().unwrap_or_default().to_string(),
            version: field("version")?.as_i64().ok_or("a reference's version")?,
        });
    }
    Ok(Schema {
        text,
        schema_type,
        references,
    })
}

/// `: <message> (error <code>)` from a registry's error body, or its cleaned start.
fn registry_message(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => {
            let message = v.get("message").and_then(Value::as_str).unwrap_or_default();
            let code = v.get("error_code").and_then(Value::as_i64);
            match (message.is_empty(), code) {
                (true, None) => String::new(),
                (_, Some(code)) => format!(": {} (error {code})", clean(message)),
                (false, None) => format!(": {}", clean(message)),
            }
        }
        Err(_) if body.trim().is_empty() => String::new(),
        Err(_) => format!(": {}", clean(body)),
    }
}

/// A registry's text, safe for a log line: control characters as `?`, at most [`TEXT_CAP`]
/// characters.
pub fn clean(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(TEXT_CAP)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().count() > TEXT_CAP {
        out.push_str("...");
    }
    out
}

/// A subject as one URL path segment.
fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_escaped_as_one_path_segment() {
        assert_eq!(segment("orders-value"), "orders-value");
        assert_eq!(segment("a/b c:%"), "a%2Fb%20c%3A%25");
    }

    #[test]
    fn schemas_and_references_are_read_and_written() {
        let body = json!({
            "schema": "syntax = \"proto3\";",
            "schemaType": "PROTOBUF",
            "references": [{ "name": "common.proto", "subject": "common", "version": 2 }]
        });
        let schema = parse_schema(&body).unwrap();
        assert_eq!(schema.schema_type, "PROTOBUF");
        assert_eq!(schema.references[0].version, 2);
        assert_eq!(schema_body(&schema), body);
        let avro = parse_schema(&json!({ "schema": "\"string\"" })).unwrap();
        assert_eq!(avro.schema_type, "AVRO");
        assert_eq!(schema_body(&avro), json!({ "schema": "\"string\"" }));
    }

    #[test]
    fn registry_text_is_cut_and_cleaned() {
        assert_eq!(
            registry_message("{\"error_code\":409,\"message\":\"incompatible\\nschema\"}"),
            ": incompatible?schema (error 409)"
        );
        let long = "x".repeat(1000);
        assert_eq!(clean(&long).chars().count(), TEXT_CAP + 3);
    }

    /// A registry stand-in that answers `GET /subjects` with `[]` when the `Authorization`
    /// header is the one it holds now (`Bearer …`, `Basic …`), else 401.
    fn guarded(token: Arc<Mutex<String>>) -> String {
        crate::standin::serve(move |request| {
            if request.header("authorization") == Some(token.lock().unwrap().as_str()) {
                (200, "[]".into())
            } else {
                (
                    401,
                    r#"{"error_code":40101,"message":"Unauthorized"}"#.into(),
                )
            }
        })
    }

    #[test]
    fn a_token_rotated_in_its_file_is_read_again_when_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "first-token-111").unwrap();
        let served = Arc::new(Mutex::new("Bearer first-token-111".to_string()));
        let url = guarded(served.clone());
        let text = format!(
            "[clusters.a]\nbootstrap = \"a:9092\"\n[clusters.a.schema_registry]\nurl = \"{url}\"\ntoken = \"${{file:{}}}\"\n[clusters.b]\nbootstrap = \"b:9092\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n",
            file.display()
        );
        let p = refract_config::Pipeline::parse(&dir.path().join("p.toml"), &text).unwrap();
        let client =
            RegistryClient::new("a", p.clusters["a"].schema_registry.as_ref().unwrap()).unwrap();
        assert_eq!(client.probe(), Ok(0));
        // Rotated: the registry takes only the new token, which the file now holds.
        *served.lock().unwrap() = "Bearer second-token-222".into();
        std::fs::write(&file, "second-token-222").unwrap();
        assert_eq!(client.probe(), Ok(0));
        assert_eq!(client.down(), None);
        // Refused with what the file holds: an outage naming why, never a token.
        *served.lock().unwrap() = "Bearer third-token-333".into();
        let Err(RegistryError::Unavailable(why)) = client.probe() else {
            panic!("a refusal is not an outage");
        };
        assert!(
            why.contains("HTTP 401") && why.contains("unchanged"),
            "{why}"
        );
        for secret in ["first-token", "second-token", "third-token"] {
            assert!(!why.contains(secret), "{why}");
        }
    }

    /// HTTP basic authentication: the user and the password (a `${file:}` reference) are sent
    /// as `Authorization: Basic base64(user:password)`; a wrong password is refused, and neither
    /// the password nor its encoding is in the error.
    #[test]
    fn basic_authentication_is_sent_and_a_refusal_shows_no_password() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "pa:ss-w0rd-444").unwrap();
        // base64("mirror:pa:ss-w0rd-444"), as `printf %s mirror:pa:ss-w0rd-444 | base64` prints it.
        let encoded = "bWlycm9yOnBhOnNzLXcwcmQtNDQ0";
        let served = Arc::new(Mutex::new(format!("Basic {encoded}")));
        let url = guarded(served.clone());
        let text = format!(
            "[clusters.a]\nbootstrap = \"a:9092\"\n[clusters.a.schema_registry]\nurl = \"{url}\"\nuser = \"mirror\"\npassword = \"${{file:{}}}\"\n[clusters.b]\nbootstrap = \"b:9092\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n",
            file.display()
        );
        let p = refract_config::Pipeline::parse(&dir.path().join("p.toml"), &text).unwrap();
        let client =
            RegistryClient::new("a", p.clusters["a"].schema_registry.as_ref().unwrap()).unwrap();
        assert_eq!(client.probe(), Ok(0));
        *served.lock().unwrap() = "Basic c29tZW9uZTplbHNl".into();
        let Err(RegistryError::Unavailable(why)) = client.probe() else {
            panic!("a refusal is not an outage");
        };
        assert!(why.contains("HTTP 401"), "{why}");
        for secret in ["pa:ss-w0rd-444", "ss-w0rd", encoded] {
            assert!(!why.contains(secret), "{why}");
        }
    }
}
