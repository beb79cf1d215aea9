//! `refract check --connect`: connects to every cluster a pipeline's flows use, with the
//! pipeline's client settings, and tells what works and what is missing: reachability, TLS,
//! authentication (with the cause in words when one fails), the principal Kafka sees, and each
//! permission the flows need, probed without side effects.
//!
//! Probes (all read-only): Metadata (reachability, visible topics), DescribeTopics and
//! DescribeCluster and DescribeConsumerGroups with the principal's authorized operations
//! (KIP-430), CreateTopics with `validate_only` for topics that do not exist yet, and ListGroups.
//! A TLS verification failure is explained by a handshake of its own (OpenSSL's reason: expired,
//! wrong host, untrusted CA), which librdkafka's message does not say.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka_sys as ffi;
use tracing::debug;

use refract_config::{
    ClientRole, Cluster, DeliveryMode, Flow, OffsetSyncsLocation, OnError, Pipeline, TopicFilter,
};
use refract_plugin::ReplicationPolicy;

use crate::admin_ffi::{self, TopicAccess};
use crate::clients::{client_config, Authenticated};
use crate::planner::TopicPlanner;
use crate::PreparedFlow;

use ffi::rd_kafka_AclOperation_t as Op;
use ffi::rd_kafka_resp_err_t as E;

/// How long connecting (bootstrap, TLS, authentication, metadata) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one permission probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The client id of every client `check --connect` creates.
const CLIENT_ID: &str = "refract-check";

/// Connects to `cluster` with its configured client settings (admin role) and fetches its
/// metadata within about 10 s: the quick check a flow can make before it starts. The error names
/// the cluster, its bootstrap, security.protocol and sasl.mechanism, and the cause in words with
/// librdkafka's own text; never a secret.
pub fn preflight(cluster: &Cluster) -> Result<()> {
    Session::connect(cluster, CONNECT_TIMEOUT)
        .map(drop)
        .map_err(anyhow::Error::new)
}

/// Why a cluster could not be reached or authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// Nothing answers at the bootstrap address (refused, unresolvable, unroutable).
    Unreachable(String),
    /// The TLS handshake failed; the reason in words.
    Tls(String),
    /// SASL authentication failed; the reason in words.
    Authentication(String),
    /// The client speaks another security.protocol than the listener.
    WrongProtocol(String),
    /// The client could not be created from the settings (a missing file, a bad value).
    Config(String),
    /// No broker answered in time and librdkafka said nothing that explains why.
    Timeout,
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Unreachable(why) => write!(f, "unreachable: {why}"),
            Cause::Tls(why) => write!(f, "TLS handshake failed: {why}"),
            Cause::Authentication(why) => write!(f, "authentication failed: {why}"),
            Cause::WrongProtocol(why) => write!(f, "wrong security.protocol: {why}"),
            Cause::Config(why) => write!(f, "invalid client settings: {why}"),
            Cause::Timeout => write!(
                f,
                "no broker answered within {}s",
                CONNECT_TIMEOUT.as_secs()
            ),
        }
    }
}

/// A cluster that could not be used, with the cause classified from librdkafka's messages.
#[derive(Debug, Clone)]
pub struct ConnectError {
    /// `cluster b (127.0.0.1:9093, SSL)`.
    pub cluster: String,
    /// The cause in words.
    pub cause: Cause,
    /// What librdkafka said (its error and log messages, deduplicated).
    pub librdkafka: String,
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.cluster, self.cause)?;
        if !self.librdkafka.is_empty() {
            write!(f, " — librdkafka: {}", self.librdkafka)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConnectError {}

/// A client context that keeps librdkafka's error and warning messages.
#[derive(Default)]
struct Capture {
    messages: Mutex<Vec<String>>,
}

impl Capture {
    fn push(&self, message: &str) {
        let message = message.trim();
        if message.is_empty() {
            return;
        }
        let mut m = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() < 64 && !m.iter().any(|x| x == message) {
            m.push(message.to_string());
        }
    }

    fn snapshot(&self) -> Vec<String> {
        self.messages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl ClientContext for Capture {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        debug!(target: "librdkafka", "{fac}: {log_message}");
        // Connection failures: librdkafka logs a disconnect with one request in flight (a
        // plaintext ApiVersion request to a TLS listener) at INFO, facility FAIL.
        let serious = matches!(
            level,
            RDKafkaLogLevel::Emerg
                | RDKafkaLogLevel::Alert
                | RDKafkaLogLevel::Critical
                | RDKafkaLogLevel::Error
                | RDKafkaLogLevel::Warning
        );
        if serious || fac == "FAIL" {
            self.push(log_message);
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        debug!(target: "librdkafka", "error: {error}: {reason}");
        self.push(reason);
    }
}

impl ProducerContext for Capture {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &DeliveryResult<'_>, _: Self::DeliveryOpaque) {}
}

/// Whom the broker authenticates the client as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `User:mirror`.
    pub name: String,
    /// Where it comes from, and what may change it.
    pub note: String,
}

/// The client setting `key` of `cluster` (admin role), if set.
fn setting<'a>(settings: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    settings
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// `security.protocol` (upper case; librdkafka's default is PLAINTEXT).
fn protocol(settings: &BTreeMap<String, String>) -> String {
    setting(settings, "security.protocol")
        .unwrap_or("plaintext")
        .to_ascii_uppercase()
}

/// `sasl.mechanism` (librdkafka also reads `sasl.mechanisms`; its default is GSSAPI).
fn mechanism(settings: &BTreeMap<String, String>) -> String {
    setting(settings, "sasl.mechanism")
        .or_else(|| setting(settings, "sasl.mechanisms"))
        .unwrap_or("GSSAPI")
        .to_ascii_uppercase()
}

/// `cluster b (127.0.0.1:9093, SASL_SSL/SCRAM-SHA-512)`.
fn describe_cluster(cluster: &Cluster, settings: &BTreeMap<String, String>) -> String {
    let protocol = protocol(settings);
    let what = if protocol.starts_with("SASL") {
        format!("{protocol}/{}", mechanism(settings))
    } else {
        protocol
    };
    format!("cluster {} ({}, {what})", cluster.alias, cluster.bootstrap)
}

/// The principal the broker will see for these client settings.
pub fn principal(settings: &BTreeMap<String, String>) -> Principal {
    let protocol = protocol(settings);
    if protocol.starts_with("SASL") {
        let mechanism = mechanism(settings);
        return match mechanism.as_str() {
            "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" => Principal {
                name: format!("User:{}", setting(settings, "sasl.username").unwrap_or("")),
                note: format!("{mechanism} user name"),
            },
            "OAUTHBEARER" => {
                let oidc = setting(settings, "sasl.oauthbearer.method")
                    .is_some_and(|m| m.eq_ignore_ascii_case("oidc"));
                let from_config = setting(settings, "sasl.oauthbearer.config").and_then(|c| {
                    c.split_whitespace()
                        .find_map(|kv| kv.strip_prefix("principal="))
                        .map(str::to_string)
                });
                match (oidc, from_config) {
                    (true, _) => Principal {
                        name: format!(
                            "User:{}",
                            setting(settings, "sasl.oauthbearer.client.id").unwrap_or("?")
                        ),
                        note:
                            "the token's subject, for most identity providers the OIDC client id; \
                               the broker's sasl.oauthbearer.sub.claim.name may pick another claim"
                                .into(),
                    },
                    (false, Some(p)) => Principal {
                        name: format!("User:{p}"),
                        note: "principal= in sasl.oauthbearer.config (unsecured JWT)".into(),
                    },
                    (false, None) => Principal {
                        name: "User:?".into(),
                        note: "the subject of the token the client presents".into(),
                    },
                }
            }
            "GSSAPI" => {
                let kerberos =
                    setting(settings, "sasl.kerberos.principal").unwrap_or("kafkaclient");
                let primary = kerberos.split(['/', '@']).next().unwrap_or(kerberos);
                Principal {
                    name: format!("User:{primary}"),
                    note: format!(
                        "Kerberos principal {kerberos}; the broker's sasl.kerberos.principal.to.local.rules may map it"
                    ),
                }
            }
            other => Principal {
                name: "User:?".into(),
                note: format!("SASL mechanism {other}"),
            },
        };
    }
    if protocol == "SSL" {
        match client_certificate_subject(settings) {
            Some(Ok(dn)) => {
                return Principal {
                    name: format!("User:{dn}"),
                    note: "the client certificate's subject; the broker's ssl.principal.mapping.rules may change it".into(),
                }
            }
            Some(Err(e)) => {
                return Principal {
                    name: "User:?".into(),
                    note: format!("cannot read the client certificate: {e}"),
                }
            }
            None => {}
        }
    }
    Principal {
        name: "User:ANONYMOUS".into(),
        note: if protocol == "SSL" {
            "TLS without a client certificate".into()
        } else {
            "no authentication".into()
        },
    }
}

/// The subject (RFC 2253, as Kafka prints it) of the configured client certificate: PEM
/// `ssl.certificate.location` / `ssl.certificate.pem`, or PKCS#12 `ssl.keystore.location`.
/// `None` when no client certificate is configured.
fn client_certificate_subject(
    settings: &BTreeMap<String, String>,
) -> Option<Result<String, String>> {
    let cert = if let Some(path) = setting(settings, "ssl.certificate.location") {
        std::fs::read(path)
            .map_err(|e| format!("{path}: {e}"))
            .and_then(|pem| openssl::x509::X509::from_pem(&pem).map_err(|e| format!("{path}: {e}")))
    } else if let Some(pem) = setting(settings, "ssl.certificate.pem") {
        openssl::x509::X509::from_pem(pem.as_bytes())
            .map_err(|e| format!("ssl.certificate.pem: {e}"))
    } else if let Some(path) = setting(settings, "ssl.keystore.location") {
        let password = setting(settings, "ssl.keystore.password").unwrap_or("");
        std::fs::read(path)
            .map_err(|e| format!("{path}: {e}"))
            .and_then(|der| {
                openssl::pkcs12::Pkcs12::from_der(&der).map_err(|e| format!("{path}: {e}"))
            })
            .and_then(|p12| {
                p12.parse2(password)
                    .map_err(|_| format!("{path}: cannot open it with ssl.keystore.password"))
            })
            .and_then(|parsed| {
                parsed
                    .cert
                    .ok_or_else(|| format!("{path}: no certificate in the key store"))
            })
    } else {
        return None;
    };
    Some(cert.map(|c| rfc2253(c.subject_name())))
}

/// A distinguished name as Java's `X500Principal.getName()` prints it: last RDN first.
fn rfc2253(name: &openssl::x509::X509NameRef) -> String {
    let parts: Vec<String> = name
        .entries()
        .map(|e| {
            let key = e.object().nid().short_name().unwrap_or("?").to_string();
            let value = String::from_utf8_lossy(e.data().as_slice()).into_owned();
            let escaped: String = value
                .chars()
                .flat_map(|c| {
                    let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';');
                    special
                        .then_some('\\')
                        .into_iter()
                        .chain(std::iter::once(c))
                })
                .collect();
            format!("{key}={escaped}")
        })
        .collect();
    parts.into_iter().rev().collect::<Vec<_>>().join(",")
}

/// Classifies librdkafka's messages into a cause; `None` when they explain nothing yet.
fn classify(messages: &[String], settings: &BTreeMap<String, String>) -> Option<Cause> {
    let any = |needles: &[&str]| {
        messages.iter().any(|m| {
            let m = m.to_ascii_lowercase();
            needles.iter().any(|n| m.contains(&n.to_ascii_lowercase()))
        })
    };
    let protocol = protocol(settings);
    let mechanism = mechanism(settings);
    if any(&[
        "unsupported sasl mechanism",
        "mechanism not enabled",
        "no common mechanism",
    ]) {
        return Some(Cause::Authentication(format!(
            "the listener does not enable SASL mechanism {mechanism}"
        )));
    }
    if any(&[
        "authentication failed",
        "sasl authentication error",
        "invalid credentials",
    ]) {
        let user = setting(settings, "sasl.username").unwrap_or("?");
        return Some(Cause::Authentication(match mechanism.as_str() {
            "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" => format!(
                "the broker rejected user {user} with {mechanism}: wrong password, or no {mechanism} credentials for that user"
            ),
            _ => format!("the broker rejected the {mechanism} credentials"),
        }));
    }
    if any(&[
        "certificate verify failed",
        "failed to verify broker certificate",
        "could not be verified",
    ]) {
        return Some(Cause::Tls(certificate_problem(settings, messages)));
    }
    if any(&[
        "alert certificate required",
        "alert bad certificate",
        "alert unknown ca",
        "alert certificate unknown",
        "alert certificate expired",
        "alert certificate revoked",
        "client ssl authentication might be required",
    ]) {
        return Some(Cause::Tls(
            "the broker rejected the client certificate (none configured, not signed by a CA the broker trusts, or expired)".into(),
        ));
    }
    if any(&[
        "connecting to a plaintext broker listener",
        "wrong version number",
        "packet length too long",
        "record layer failure",
    ]) {
        return Some(Cause::WrongProtocol(format!(
            "security.protocol is {protocol} but the listener does not speak TLS"
        )));
    }
    // A plaintext request to a TLS listener: the broker hangs up at the first request.
    let plaintext = !protocol.ends_with("SSL");
    if any(&[
        "incorrect security.protocol",
        "connecting to a ssl listener",
    ]) || (plaintext && any(&["in state apiversion_query"]) && any(&["disconnected"]))
    {
        return Some(Cause::WrongProtocol(format!(
            "security.protocol is {protocol} but the listener expects another (TLS?): the broker closed the connection at the first request"
        )));
    }
    if any(&["ssl handshake failed"]) {
        return Some(Cause::Tls("see librdkafka's message".into()));
    }
    if any(&["failed to resolve"]) {
        return Some(Cause::Unreachable("the host name does not resolve".into()));
    }
    if any(&["connection refused"]) {
        return Some(Cause::Unreachable(
            "connection refused (nothing listens there)".into(),
        ));
    }
    if any(&[
        "connect to",
        "timed out",
        "no route to host",
        "network is unreachable",
    ]) && any(&["connect to"])
    {
        return Some(Cause::Unreachable("cannot open a connection".into()));
    }
    None
}

/// Why the broker's certificate failed verification, found by a TLS handshake of our own (same
/// CA settings, same host check) with OpenSSL's reason: expired, wrong host, untrusted issuer.
fn certificate_problem(settings: &BTreeMap<String, String>, messages: &[String]) -> String {
    let joined = messages.join(" ").to_ascii_lowercase();
    let from_text = if joined.contains("certificate has expired") {
        Some("the broker's certificate has expired".to_string())
    } else if joined.contains("hostname mismatch") || joined.contains("ip address mismatch") {
        Some("the broker's certificate does not match the host name".to_string())
    } else {
        None
    };
    match diagnose_handshake(settings) {
        Some(reason) => reason,
        None => from_text.unwrap_or_else(|| {
            "the broker's certificate could not be verified (is ssl.ca.location the CA that signed it?)"
                .into()
        }),
    }
}

/// A TLS handshake to the first bootstrap server with the client's CA and host-name settings;
/// the verification failure in words, or `None` if it could not tell.
fn diagnose_handshake(settings: &BTreeMap<String, String>) -> Option<String> {
    use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
    use openssl::x509::X509VerifyResult;
    let server = setting(settings, "bootstrap.servers")?
        .split(',')
        .next()?
        .trim()
        .to_string();
    let server = server
        .split_once("://")
        .map_or(server.as_str(), |(_, s)| s)
        .to_string();
    let (host, _) = server.rsplit_once(':')?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let mut builder = SslConnector::builder(SslMethod::tls_client()).ok()?;
    // The names the broker's own certificate is for, seen while OpenSSL verifies it.
    let leaf_names = std::sync::Arc::new(Mutex::new(String::new()));
    let seen = leaf_names.clone();
    builder.set_verify_callback(SslVerifyMode::PEER, move |ok, ctx| {
        if ctx.error_depth() == 0 {
            if let Some(cert) = ctx.current_cert() {
                *seen.lock().unwrap_or_else(|e| e.into_inner()) = certificate_names(cert);
            }
        }
        ok
    });
    if let Some(ca) = setting(settings, "ssl.ca.location") {
        if ca != "probe" {
            if std::path::Path::new(ca).is_dir() {
                builder
                    .load_verify_locations(None, Some(std::path::Path::new(ca)))
                    .ok()?;
            } else {
                builder.set_ca_file(ca).ok()?;
            }
        }
    } else if let Some(pem) = setting(settings, "ssl.ca.pem") {
        for cert in openssl::x509::X509::stack_from_pem(pem.as_bytes()).ok()? {
            builder.cert_store_mut().add_cert(cert).ok()?;
        }
    } else {
        builder.set_default_verify_paths().ok()?;
    }
    let connector = builder.build();
    let mut config = connector.configure().ok()?;
    let check_host = setting(settings, "ssl.endpoint.identification.algorithm")
        .is_none_or(|a| !a.eq_ignore_ascii_case("none"));
    config.set_verify_hostname(check_host);
    config.set_use_server_name_indication(host.parse::<std::net::IpAddr>().is_err());
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&server)
        .ok()?
        .next()?;
    let stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .ok()?;
    let failure = match config.connect(&host, stream) {
        Ok(_) => return None,
        Err(openssl::ssl::HandshakeError::Failure(mid)) => mid,
        Err(_) => return None,
    };
    let result = failure.ssl().verify_result();
    if result == X509VerifyResult::OK {
        return None;
    }
    let names = leaf_names.lock().unwrap_or_else(|e| e.into_inner()).clone();
    // X509_V_ERR_* codes (openssl/x509_vfy.h)
    Some(match result.as_raw() {
        10 => "the broker's certificate has expired".to_string(),
        9 => "the broker's certificate is not valid yet".to_string(),
        62 | 64 => format!(
            "the broker's certificate does not match the host name {host} (it is for {}); ssl.endpoint.identification.algorithm=https checks it",
            if names.is_empty() { "other names".to_string() } else { names }
        ),
        2 | 18 | 19 | 20 | 21 => format!(
            "the broker's certificate is not signed by a CA this client trusts ({}): set ssl.ca.location to the CA that signed it",
            result.error_string()
        ),
        _ => format!("the broker's certificate could not be verified: {}", result.error_string()),
    })
}

/// The DNS names and IP addresses a certificate is for.
fn certificate_names(cert: &openssl::x509::X509Ref) -> String {
    let mut names = Vec::new();
    if let Some(alt) = cert.subject_alt_names() {
        for n in alt.iter() {
            if let Some(d) = n.dnsname() {
                names.push(d.to_string());
            } else if let Some(ip) = n.ipaddress() {
                let ip = match ip.len() {
                    4 => <[u8; 4]>::try_from(ip).map(|b| std::net::IpAddr::from(b).to_string()),
                    16 => <[u8; 16]>::try_from(ip).map(|b| std::net::IpAddr::from(b).to_string()),
                    _ => continue,
                };
                if let Ok(ip) = ip {
                    names.push(ip);
                }
            }
        }
    }
    names.join(", ")
}

/// A connected cluster: its clients, who it authenticated us as, and the topics it shows.
struct Session {
    label: String,
    bootstrap: String,
    protocol: String,
    principal: Principal,
    admin: Authenticated<AdminClient<Capture>>,
    /// Topics the principal can see (name, partitions).
    topics: Vec<(String, i32)>,
    described: HashMap<String, TopicAccess>,
    /// Whether the broker has an authorizer (None: could not tell).
    authorizer: Option<bool>,
    cluster_ops: Option<Option<Vec<Op>>>,
}

impl Session {
    fn connect(cluster: &Cluster, timeout: Duration) -> Result<Self, ConnectError> {
        let settings = cluster.client_config(ClientRole::Admin);
        let label = describe_cluster(cluster, &settings);
        let error = |cause: Cause, messages: &[String]| ConnectError {
            cluster: label.clone(),
            cause,
            librdkafka: messages.join(" | "),
        };
        let config = client_config(cluster, ClientRole::Admin, CLIENT_ID, &[], &[]);
        // A producer client: polling it serves librdkafka's log and error events.
        // A token refract supplies (OIDC, static) is fetched or read as the client is created:
        // a refusal there is the login failing.
        let refused = |e: rdkafka::error::KafkaError| match e {
            rdkafka::error::KafkaError::ClientCreation(why)
                if crate::oauth::supplies_token(cluster, ClientRole::Admin) =>
            {
                error(Cause::Authentication(why), &[])
            }
            e => error(Cause::Config(e.to_string()), &[]),
        };
        let probe: Authenticated<BaseProducer<Capture>> = config
            .create_with_context(Capture::default())
            .map_err(refused)?;
        let deadline = Instant::now() + timeout;
        let metadata = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let attempt = probe
                .client()
                .fetch_metadata(None, left.min(Duration::from_secs(1)));
            probe.poll(Duration::ZERO);
            match attempt {
                Ok(md) if !md.brokers().is_empty() => break md,
                _ => {}
            }
            let messages = probe.client().context().snapshot();
            if let Some(cause) = classify(&messages, &settings) {
                return Err(error(cause, &messages));
            }
            if Instant::now() >= deadline {
                return Err(error(Cause::Timeout, &messages));
            }
        };
        let topics = metadata
            .topics()
            .iter()
            .filter(|t| t.error().is_none())
            .map(|t| (t.name().to_string(), t.partitions().len() as i32))
            .collect();
        let admin: Authenticated<AdminClient<Capture>> = config
            .create_with_context(Capture::default())
            .map_err(|e| error(Cause::Config(e.to_string()), &[]))?;
        Ok(Self {
            label,
            bootstrap: cluster.bootstrap.clone(),
            protocol: protocol(&settings),
            principal: match crate::oauth::principal(cluster, ClientRole::Admin) {
                Some(sub) => Principal {
                    name: format!("User:{sub}"),
                    note: "the subject of the token refract obtained; the broker's \
                           sasl.oauthbearer.sub.claim.name may pick another claim"
                        .into(),
                },
                None => principal(&settings),
            },
            admin,
            topics,
            described: HashMap::new(),
            authorizer: None,
            cluster_ops: None,
        })
    }

    /// The first line of the cluster's block.
    fn header(&self) -> String {
        let tls = if self.protocol.ends_with("SSL") {
            "TLS ok, "
        } else {
            ""
        };
        let auth = if self.protocol.starts_with("SASL") {
            format!("authenticated as {}", self.principal.name)
        } else if self.principal.name == "User:ANONYMOUS" {
            format!("not authenticated: {}", self.principal.name)
        } else {
            format!("authenticated as {}", self.principal.name)
        };
        format!(
            "{}: reachable, {tls}{auth} ({})",
            self.label, self.principal.note
        )
    }

    /// Whether everything is allowed to this principal: every cluster operation (CLUSTER_ACTION
    /// and ALTER included: what only a broker or a super user has) and DESCRIBE on a topic name
    /// nobody grants anything on. That is a broker without an authorizer or a super user.
    /// (librdkafka 2.12 drops DescribeAcls' top-level error code, so its SECURITY_DISABLED
    /// cannot tell this.)
    fn detect_authorizer(&mut self) {
        let cluster = self.cluster_operations();
        let all_cluster = cluster.as_ref().map(|ops| {
            ops.contains(&Op::RD_KAFKA_ACL_OPERATION_CLUSTER_ACTION)
                && ops.contains(&Op::RD_KAFKA_ACL_OPERATION_ALTER)
        });
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let probe = format!("refract-check-probe-{nonce:x}");
        let any_topic =
            admin_ffi::describe_topics(&self.admin, std::slice::from_ref(&probe), PROBE_TIMEOUT)
                .ok()
                .and_then(|t| t.into_iter().next())
                .map(|t| {
                    !matches!(
                        t.error,
                        Some((E::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, _))
                    )
                });
        self.authorizer = match (all_cluster, any_topic) {
            (Some(true), Some(true)) => Some(false),
            (Some(_), Some(_)) => Some(true),
            _ => None,
        };
    }

    fn unrestricted(&self) -> bool {
        self.authorizer == Some(false)
    }

    /// DescribeTopics with authorized operations for `names`, cached.
    fn describe(&mut self, names: &[String]) -> Result<(), String> {
        let missing: Vec<String> = names
            .iter()
            .filter(|n| !self.described.contains_key(*n))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        for topic in admin_ffi::describe_topics(&self.admin, &missing, PROBE_TIMEOUT)? {
            self.described.insert(topic.name.clone(), topic);
        }
        Ok(())
    }

    fn cluster_operations(&mut self) -> Option<Vec<Op>> {
        if self.cluster_ops.is_none() {
            self.cluster_ops = Some(
                admin_ffi::describe_cluster_operations(&self.admin, PROBE_TIMEOUT).unwrap_or_else(
                    |e| {
                        debug!("DescribeCluster: {e}");
                        None
                    },
                ),
            );
        }
        self.cluster_ops.clone().flatten()
    }

    /// CreateTopics with validate_only: `Ok` when the broker would create it.
    fn validate_create(&self, name: &str, replication_factor: i32) -> Result<(), (E, String)> {
        let topic = NewTopic::new(name, 1, TopicReplication::Fixed(replication_factor));
        let options = AdminOptions::new()
            .validate_only(true)
            .request_timeout(Some(PROBE_TIMEOUT))
            .operation_timeout(Some(PROBE_TIMEOUT));
        let results = futures_executor::block_on(self.admin.create_topics([&topic], &options))
            .map_err(|e| (E::RD_KAFKA_RESP_ERR__FAIL, e.to_string()))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, RDKafkaErrorCode::TopicAuthorizationFailed)) => {
                    return Err((
                        E::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                        "not authorized".into(),
                    ))
                }
                Err((_, RDKafkaErrorCode::ClusterAuthorizationFailed)) => {
                    return Err((
                        E::RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED,
                        "not authorized".into(),
                    ))
                }
                Err((_, code)) => return Err((E::RD_KAFKA_RESP_ERR__FAIL, code.to_string())),
            }
        }
        Ok(())
    }
}

/// What a flow needs of one resource.
#[derive(Debug, Clone)]
struct Need {
    /// The flow (`a->b`).
    flow: String,
    resource: Resource,
    /// Operations needed.
    ops: Vec<Op>,
    /// Create the topic when it does not exist (topics only).
    create: bool,
    /// Missing it stops the flow (otherwise a feature is off).
    fatal: bool,
    /// What it is for, in words.
    why: String,
    /// For [`Resource::Groups`]: the flow's group filter.
    groups: Option<TopicFilter>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Resource {
    /// A topic by name.
    Topic(String),
    /// Topics by prefix (a filter like `orders.*` with none of them visible).
    TopicPrefix(String),
    /// A consumer group by name.
    Group(String),
    /// Consumer groups the flow's `groups` filter selects (its include patterns).
    Groups(String),
    /// Topics a `topics` pattern selects when none is visible and the pattern names no prefix.
    TopicsMatching(String),
    /// The cluster.
    Cluster,
}

/// One answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Yes,
    No,
    Warn,
    Unknown,
}

impl Mark {
    fn text(self) -> &'static str {
        match self {
            Mark::Yes => "yes ",
            Mark::No => "no  ",
            Mark::Warn => "warn",
            Mark::Unknown => "?   ",
        }
    }
}

/// The operation as `kafka-acls --operation` names it, and in words.
fn op_names(op: Op) -> (&'static str, &'static str) {
    match op {
        Op::RD_KAFKA_ACL_OPERATION_READ => ("Read", "read"),
        Op::RD_KAFKA_ACL_OPERATION_WRITE => ("Write", "write"),
        Op::RD_KAFKA_ACL_OPERATION_CREATE => ("Create", "create"),
        Op::RD_KAFKA_ACL_OPERATION_DELETE => ("Delete", "delete"),
        Op::RD_KAFKA_ACL_OPERATION_ALTER => ("Alter", "alter"),
        Op::RD_KAFKA_ACL_OPERATION_DESCRIBE => ("Describe", "describe"),
        Op::RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS => ("DescribeConfigs", "describe-configs"),
        Op::RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS => ("AlterConfigs", "alter-configs"),
        Op::RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE => ("IdempotentWrite", "idempotent write"),
        _ => ("All", "all"),
    }
}

/// Whether `granted` allows `op`, with Kafka's implications (READ, WRITE, DELETE and ALTER imply
/// DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS).
fn allows(granted: &[Op], op: Op) -> bool {
    granted.contains(&op)
        || granted.contains(&Op::RD_KAFKA_ACL_OPERATION_ALL)
        || (op == Op::RD_KAFKA_ACL_OPERATION_DESCRIBE
            && granted.iter().any(|g| {
                matches!(
                    g,
                    Op::RD_KAFKA_ACL_OPERATION_READ
                        | Op::RD_KAFKA_ACL_OPERATION_WRITE
                        | Op::RD_KAFKA_ACL_OPERATION_DELETE
                        | Op::RD_KAFKA_ACL_OPERATION_ALTER
                )
            }))
        || (op == Op::RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS
            && granted.contains(&Op::RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS))
}

/// Quotes a shell word when it needs it.
fn shell(word: &str) -> String {
    if word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-:/=@,".contains(c))
        && !word.is_empty()
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The `kafka-acls` command that grants `ops` on `resource` to `principal`.
fn acl_command(bootstrap: &str, principal: &str, ops: &[Op], resource: &Resource) -> String {
    let mut cmd = format!(
        "kafka-acls --bootstrap-server {} --add --allow-principal {}",
        shell(bootstrap),
        shell(principal)
    );
    for op in ops {
        let _ = write!(cmd, " --operation {}", op_names(*op).0);
    }
    match resource {
        Resource::Topic(t) => {
            let _ = write!(cmd, " --topic {}", shell(t));
        }
        Resource::TopicPrefix(p) => {
            let _ = write!(
                cmd,
                " --topic {} --resource-pattern-type prefixed",
                shell(p)
            );
        }
        Resource::Group(g) => {
            let _ = write!(cmd, " --group {}", shell(g));
        }
        Resource::Groups(filter) => match literal_prefix(filter) {
            Some(p) if !p.is_empty() => {
                let _ = write!(
                    cmd,
                    " --group {} --resource-pattern-type prefixed",
                    shell(&p)
                );
            }
            _ => cmd.push_str(" --group '*'"),
        },
        Resource::TopicsMatching(_) => cmd.push_str(" --topic '*'"),
        Resource::Cluster => cmd.push_str(" --cluster"),
    }
    cmd
}

/// Whether a topic pattern names one topic (`orders`, `a.orders`: name characters only).
fn is_literal(pattern: &str) -> bool {
    !pattern.is_empty()
        && pattern
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// The literal prefix of a pattern of the form `prefix.*`, if it is one.
fn literal_prefix(pattern: &str) -> Option<String> {
    let prefix = pattern.strip_suffix(".*")?;
    (prefix.is_empty() || is_literal(prefix)).then(|| prefix.to_string())
}

/// One printed answer.
struct Answer {
    mark: Mark,
    text: String,
}

/// Evaluates `need` on `session`: (mark, the words after the mark).
fn evaluate(session: &mut Session, need: &Need, replication_factor: i32) -> Answer {
    let words: Vec<&str> = need.ops.iter().map(|o| op_names(*o).1).collect();
    let what = match &need.resource {
        Resource::Topic(t) => format!("{} topic {t}", words.join(", ")),
        Resource::TopicPrefix(p) => format!("{} topics starting with {p}", words.join(", ")),
        Resource::Group(g) => format!("{} group {g}", words.join(", ")),
        Resource::Groups(f) => format!("{} consumer groups matching {f}", words.join(", ")),
        Resource::TopicsMatching(f) => format!("{} topics matching {f}", words.join(", ")),
        Resource::Cluster => format!("{} the cluster", words.join(", ")),
    };
    let context = format!("flow {}: {}", need.flow, need.why);
    let missing_mark = if need.fatal { Mark::No } else { Mark::Warn };
    let (bootstrap, principal_name) = (session.bootstrap.clone(), session.principal.name.clone());
    let fix = |missing: &[Op]| acl_command(&bootstrap, &principal_name, missing, &need.resource);
    if session.unrestricted() {
        return Answer {
            mark: Mark::Yes,
            text: format!("{what} ({context}; no authorizer)"),
        };
    }
    let (granted, note): (Result<Vec<Op>, String>, String) = match &need.resource {
        Resource::Topic(name) | Resource::TopicPrefix(name) => {
            if let Err(e) = session.describe(std::slice::from_ref(name)) {
                return Answer {
                    mark: Mark::Unknown,
                    text: format!("{what} ({context}; DescribeTopics failed: {e})"),
                };
            }
            let access = session.described.get(name).cloned();
            match access {
                Some(TopicAccess {
                    error: None,
                    operations,
                    ..
                }) => (
                    operations.ok_or_else(|| "the broker sent no authorized operations".into()),
                    String::new(),
                ),
                Some(TopicAccess {
                    error: Some((E::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, _)),
                    ..
                }) => {
                    // It does not exist and we may describe it: creating it is what remains.
                    let mut granted = vec![Op::RD_KAFKA_ACL_OPERATION_DESCRIBE];
                    let mut note = "does not exist yet".to_string();
                    if need.create {
                        match session.validate_create(name, replication_factor) {
                            Ok(()) => granted.push(Op::RD_KAFKA_ACL_OPERATION_CREATE),
                            Err((E::RD_KAFKA_RESP_ERR__FAIL, e)) => {
                                note = format!(
                                    "does not exist yet; the broker would not create it: {e}"
                                );
                            }
                            Err(_) => {}
                        }
                    }
                    // Other operations on a topic that does not exist cannot be probed.
                    let unknown: Vec<Op> = need
                        .ops
                        .iter()
                        .copied()
                        .filter(|o| {
                            !matches!(
                                o,
                                Op::RD_KAFKA_ACL_OPERATION_DESCRIBE
                                    | Op::RD_KAFKA_ACL_OPERATION_CREATE
                            )
                        })
                        .collect();
                    let denied: Vec<Op> = need
                        .ops
                        .iter()
                        .copied()
                        .filter(|o| !unknown.contains(o) && !allows(&granted, *o))
                        .collect();
                    if denied.is_empty() && !unknown.is_empty() {
                        let names: Vec<&str> = unknown.iter().map(|o| op_names(*o).1).collect();
                        return Answer {
                            mark: Mark::Unknown,
                            text: format!(
                                "{what} ({context}; {note}: may create and describe it; {} checked once it exists)",
                                names.join(", ")
                            ),
                        };
                    }
                    granted.extend(unknown);
                    (Ok(granted), note)
                }
                Some(TopicAccess {
                    error: Some((E::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, _)),
                    ..
                }) => {
                    // Not even DESCRIBE: whether it exists is hidden. Ask whether it could be created.
                    let mut note = "not visible to this principal".to_string();
                    let mut granted = Vec::new();
                    if need.create {
                        match session.validate_create(name, replication_factor) {
                            Ok(()) => granted.push(Op::RD_KAFKA_ACL_OPERATION_CREATE),
                            Err((E::RD_KAFKA_RESP_ERR__FAIL, e)) => {
                                note = format!("not visible; creating it fails: {e}")
                            }
                            Err(_) => {}
                        }
                    }
                    (Ok(granted), note)
                }
                Some(TopicAccess {
                    error: Some((_, e)),
                    ..
                }) => (Err(e), String::new()),
                None => (Err("not in the answer".into()), String::new()),
            }
        }
        Resource::Group(group) => {
            match admin_ffi::describe_groups(
                &session.admin,
                std::slice::from_ref(group),
                PROBE_TIMEOUT,
            ) {
                Ok(groups) => match groups.into_iter().next() {
                    Some((_, g)) => match g.error {
                        None => (
                            g.operations
                                .ok_or_else(|| "the broker sent no authorized operations".into()),
                            String::new(),
                        ),
                        Some((E::RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED, _)) => {
                            (Ok(Vec::new()), String::new())
                        }
                        Some((E::RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND, _)) => {
                            // Found out only after DESCRIBE was allowed; READ cannot be probed.
                            (
                                Err("the group does not exist yet: describe allowed, read checked once it exists".into()),
                                String::new(),
                            )
                        }
                        Some((_, e)) => (Err(e), String::new()),
                    },
                    None => (Err("not in the answer".into()), String::new()),
                },
                Err(e) => (
                    Err(format!("DescribeConsumerGroups failed: {e}")),
                    String::new(),
                ),
            }
        }
        Resource::Groups(_) => {
            return match crate::groups::list_consumer_groups(&session.admin, PROBE_TIMEOUT) {
                Ok(groups) => {
                    let visible = groups
                        .iter()
                        .filter(|g| {
                            need.groups
                                .as_ref()
                                .is_none_or(|f| f.should_replicate(&g.id))
                        })
                        .filter(|g| !g.id.starts_with("refract-"))
                        .count();
                    if visible > 0 {
                        Answer {
                            mark: Mark::Yes,
                            text: format!("{what} ({context}; {visible} visible)"),
                        }
                    } else {
                        Answer {
                            mark: missing_mark,
                            text: format!(
                                "{what} ({context}; none visible: none exist yet, or no Describe on them) — {}",
                                fix(&need.ops)
                            ),
                        }
                    }
                }
                Err(e) => Answer {
                    mark: missing_mark,
                    text: format!(
                        "{what} ({context}; listing groups failed: {e:#}) — {}",
                        fix(&need.ops)
                    ),
                },
            };
        }
        Resource::TopicsMatching(_) => {
            return Answer {
                mark: missing_mark,
                text: format!(
                    "{what} ({context}; none visible: none exist yet, or no Describe on them) — {}",
                    fix(&need.ops)
                ),
            }
        }
        Resource::Cluster => (
            session
                .cluster_operations()
                .ok_or_else(|| "the broker sent no authorized operations".to_string()),
            String::new(),
        ),
    };
    let granted = match granted {
        Ok(g) => g,
        Err(e) => {
            return Answer {
                mark: Mark::Unknown,
                text: format!("{what} ({context}; {e})"),
            }
        }
    };
    let missing: Vec<Op> = need
        .ops
        .iter()
        .copied()
        .filter(|o| !allows(&granted, *o))
        .collect();
    let note = if note.is_empty() {
        String::new()
    } else {
        format!("; {note}")
    };
    if missing.is_empty() {
        Answer {
            mark: Mark::Yes,
            text: format!("{what} ({context}{note})"),
        }
    } else {
        let names: Vec<&str> = missing.iter().map(|o| op_names(*o).1).collect();
        Answer {
            mark: missing_mark,
            text: format!(
                "{what} ({context}{note}; missing: {}) — {}",
                names.join(", "),
                fix(&missing)
            ),
        }
    }
}

/// The needs of one flow on its source and its target.
fn flow_needs(
    prepared: &PreparedFlow,
    source: Option<&Session>,
    has_reverse: bool,
    clustered: bool,
) -> Result<(Vec<Need>, Vec<Need>)> {
    let flow: &Flow = &prepared.flow;
    let name = flow.name();
    let mut policy = ReplicationPolicy::new(prepared.policy.clone());
    let need = |resource: Resource, ops: &[Op], create: bool, fatal: bool, why: &str| Need {
        flow: name.clone(),
        groups: matches!(resource, Resource::Groups(_)).then(|| flow.checkpoints.groups.clone()),
        resource,
        ops: ops.to_vec(),
        create,
        fatal,
        why: why.to_string(),
    };
    use Op::*;
    let mut on_source = Vec::new();
    let mut on_target = Vec::new();
    // Mirrored topics: those of the source's visible topics the flow would mirror; when none is
    // visible, the names and prefixes its `topics` patterns spell.
    let planner = TopicPlanner::new(flow);
    let visible = source.map(|s| s.topics.clone()).unwrap_or_default();
    let plan = planner.plan(&mut policy, &visible)?;
    let mut pairs: Vec<(Resource, Resource)> = plan
        .routes
        .iter()
        .map(|r| {
            (
                Resource::Topic(r.source_topic.clone()),
                Resource::Topic(r.remote_topic.clone()),
            )
        })
        .collect();
    if pairs.is_empty() {
        for pattern in flow.topics.include.patterns() {
            let (source_name, prefixed) = if is_literal(pattern) {
                (pattern.clone(), false)
            } else if let Some(prefix) = literal_prefix(pattern).filter(|p| !p.is_empty()) {
                (prefix, true)
            } else {
                continue;
            };
            let remote = policy
                .format_remote_topics(&flow.source, std::slice::from_ref(&source_name))?
                .into_iter()
                .next()
                .unwrap_or_default();
            let wrap = |n: String| {
                if prefixed {
                    Resource::TopicPrefix(n)
                } else {
                    Resource::Topic(n)
                }
            };
            pairs.push((wrap(source_name), wrap(remote)));
        }
    }
    if pairs.is_empty() {
        on_source.push(need(
            Resource::TopicsMatching(flow.topics.include.patterns().join("|")),
            &[RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            false,
            "mirrored topics",
        ));
    }
    for (src, remote) in pairs {
        on_source.push(need(
            src.clone(),
            &[RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            true,
            "mirrored topic",
        ));
        if flow.config_sync.enabled {
            on_source.push(need(
                src,
                &[RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS],
                false,
                false,
                "config sync",
            ));
        }
        on_target.push(need(
            remote.clone(),
            &[
                RD_KAFKA_ACL_OPERATION_CREATE,
                RD_KAFKA_ACL_OPERATION_WRITE,
                RD_KAFKA_ACL_OPERATION_DESCRIBE,
            ],
            true,
            true,
            "remote topic",
        ));
        if flow.config_sync.enabled {
            on_target.push(need(
                remote,
                &[
                    RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS,
                    RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS,
                ],
                false,
                false,
                "config sync",
            ));
        }
    }
    let group = crate::progress_group(flow);
    on_source.push(need(
        Resource::Group(group.clone()),
        &[RD_KAFKA_ACL_OPERATION_READ],
        false,
        true,
        "progress commits",
    ));
    on_target.push(need(
        Resource::Group(group),
        &[RD_KAFKA_ACL_OPERATION_READ],
        false,
        true,
        "target positions read on restart",
    ));
    if flow.offset_syncs.enabled {
        let (topic, list, fatal_why) = match flow.offset_syncs.location {
            OffsetSyncsLocation::Source => (
                policy.offset_syncs_topic(&flow.target)?,
                &mut on_source,
                "offset syncs",
            ),
            OffsetSyncsLocation::Target => (
                policy.offset_syncs_topic(&flow.source)?,
                &mut on_target,
                "offset syncs",
            ),
        };
        let mut ops = vec![RD_KAFKA_ACL_OPERATION_CREATE, RD_KAFKA_ACL_OPERATION_WRITE];
        if flow.checkpoints.enabled {
            ops.push(RD_KAFKA_ACL_OPERATION_READ);
        }
        list.push(need(Resource::Topic(topic), &ops, true, false, fatal_why));
    }
    if flow.checkpoints.enabled {
        on_source.push(need(
            Resource::Groups(flow.checkpoints.groups.include.patterns().join("|")),
            &[RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            false,
            "checkpoints of source consumer groups",
        ));
        on_target.push(need(
            Resource::Topic(policy.checkpoints_topic(&flow.source)?),
            &[
                RD_KAFKA_ACL_OPERATION_CREATE,
                RD_KAFKA_ACL_OPERATION_WRITE,
                RD_KAFKA_ACL_OPERATION_READ,
            ],
            true,
            false,
            "checkpoints",
        ));
    }
    if flow.heartbeats.enabled {
        let heartbeats = policy.heartbeats_topic()?;
        on_target.push(need(
            Resource::Topic(heartbeats.clone()),
            &[RD_KAFKA_ACL_OPERATION_CREATE, RD_KAFKA_ACL_OPERATION_WRITE],
            true,
            false,
            "heartbeats",
        ));
        if !has_reverse {
            on_source.push(need(
                Resource::Topic(heartbeats),
                &[RD_KAFKA_ACL_OPERATION_CREATE, RD_KAFKA_ACL_OPERATION_WRITE],
                true,
                false,
                "heartbeats of the reverse pair (no flow runs the other way)",
            ));
        }
    }
    if flow
        .processors
        .iter()
        .any(|p| p.on_error == OnError::DeadLetter)
    {
        on_target.push(need(
            Resource::Topic(flow.delivery.dead_letter_topic.clone()),
            &[RD_KAFKA_ACL_OPERATION_CREATE, RD_KAFKA_ACL_OPERATION_WRITE],
            true,
            true,
            "dead-letter topic",
        ));
    }
    if flow.checkpoints.sync_group_offsets {
        on_target.push(need(
            Resource::Groups(flow.checkpoints.groups.include.patterns().join("|")),
            &[RD_KAFKA_ACL_OPERATION_READ],
            false,
            false,
            "group offset sync",
        ));
    }
    if flow.acl_sync.enabled {
        on_source.push(need(
            Resource::Cluster,
            &[RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            false,
            "ACL sync (DescribeAcls)",
        ));
        on_target.push(need(
            Resource::Cluster,
            &[RD_KAFKA_ACL_OPERATION_ALTER],
            false,
            false,
            "ACL sync (CreateAcls)",
        ));
    }
    if clustered {
        // Cluster mode: the processes divide the flow's tasks in a group on the source, over a
        // topic with a partition per task.
        on_source.push(need(
            Resource::Topic(crate::cluster::coordination_topic(flow)),
            &[
                RD_KAFKA_ACL_OPERATION_CREATE,
                RD_KAFKA_ACL_OPERATION_READ,
                RD_KAFKA_ACL_OPERATION_DESCRIBE,
            ],
            true,
            true,
            "cluster mode: tasks topic",
        ));
        on_source.push(need(
            Resource::Group(crate::cluster::coordination_group(flow)),
            &[RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            true,
            "cluster mode: the processes' group",
        ));
    }
    if flow.delivery.mode == DeliveryMode::ExactlyOnce {
        on_target.push(need(
            Resource::Topic(flow.mm2_offsets_topic.clone()),
            &[
                RD_KAFKA_ACL_OPERATION_CREATE,
                RD_KAFKA_ACL_OPERATION_READ,
                RD_KAFKA_ACL_OPERATION_WRITE,
            ],
            true,
            true,
            "source positions (exactly-once)",
        ));
    }
    Ok((on_source, on_target))
}

/// Whether `session`'s cluster can run transactions, for the exactly-once flows into it: it
/// can when `__transaction_state` exists (transactions ran before), or when its brokers are at
/// least `transaction.state.log.replication.factor` (else the coordinator never starts).
fn transactions(session: &Session, timeout: Duration) -> Result<String, String> {
    let metadata = session
        .admin
        .inner()
        .fetch_metadata(None, timeout)
        .map_err(|e| format!("reading its metadata: {e}"))?;
    if metadata
        .topics()
        .iter()
        .any(|t| t.name() == "__transaction_state")
    {
        return Ok("transactions available (__transaction_state exists)".into());
    }
    let brokers = metadata.brokers().len();
    let Some(broker) = metadata.brokers().first() else {
        return Err("it lists no brokers".into());
    };
    let options = AdminOptions::new().request_timeout(Some(timeout));
    let id = broker.id();
    let results = futures_executor::block_on(
        session
            .admin
            .describe_configs([&ResourceSpecifier::Broker(id)], &options),
    )
    .map_err(|e| format!("describing broker {id}'s configs: {e}"))?;
    let factor = results
        .into_iter()
        .filter_map(Result::ok)
        .flat_map(|r| r.entries)
        .find(|e| e.name == "transaction.state.log.replication.factor")
        .and_then(|e| e.value)
        .and_then(|v| v.parse::<usize>().ok());
    match factor {
        Some(rf) if rf > brokers => Err(format!(
            "transaction.state.log.replication.factor = {rf} but the cluster has {brokers} broker(s), so its transaction coordinator cannot start"
        )),
        Some(rf) => Ok(format!(
            "transactions available (transaction.state.log.replication.factor = {rf}, {brokers} broker(s))"
        )),
        None => Ok(format!(
            "transactions presumably available ({brokers} broker(s); transaction.state.log.replication.factor not readable)"
        )),
    }
}

/// The outcome of [`check_connect`]: the report and whether every flow can run.
pub struct Report {
    /// Human-readable lines.
    pub lines: Vec<String>,
    /// Whether every flow can run (missing features are warnings, not failures).
    pub all_flows_can_run: bool,
}

/// Connects to every cluster the flows use and checks what each flow needs there.
pub fn check_connect(pipeline: &Pipeline, flows: &[PreparedFlow]) -> Result<Report> {
    let mut aliases: Vec<&str> = Vec::new();
    for p in flows {
        for alias in [&p.flow.source, &p.flow.target] {
            if !aliases.contains(&alias.as_str()) {
                aliases.push(alias);
            }
        }
    }
    let mut sessions: BTreeMap<String, Result<Session, ConnectError>> = BTreeMap::new();
    for alias in &aliases {
        let cluster = pipeline
            .clusters
            .get(*alias)
            .ok_or_else(|| anyhow::anyhow!("flow names unknown cluster {alias}"))?;
        let mut session = Session::connect(cluster, CONNECT_TIMEOUT);
        if let Ok(s) = session.as_mut() {
            s.detect_authorizer();
        }
        sessions.insert(alias.to_string(), session);
    }
    // Needs per cluster, in flow order.
    let mut needs: BTreeMap<String, Vec<(Need, i32)>> = BTreeMap::new();
    for p in flows {
        let source = sessions.get(&p.flow.source).and_then(|s| s.as_ref().ok());
        let has_reverse = pipeline
            .flows
            .iter()
            .any(|f| f.source == p.flow.target && f.target == p.flow.source);
        let (on_source, on_target) =
            flow_needs(p, source, has_reverse, pipeline.cluster.is_some())?;
        let rf_remote = p.flow.replication_factor;
        let rf_internal = p.flow.internal_replication_factor;
        for (alias, list) in [(&p.flow.source, on_source), (&p.flow.target, on_target)] {
            let entry = needs.entry(alias.clone()).or_default();
            for n in list {
                let rf = if n.why == "remote topic" || n.why == "dead-letter topic" {
                    rf_remote
                } else {
                    rf_internal
                };
                entry.push((n, rf));
            }
        }
    }
    let mut lines = Vec::new();
    let mut failed_flows: BTreeMap<String, usize> = BTreeMap::new();
    let mut warned_flows: BTreeMap<String, usize> = BTreeMap::new();
    for alias in &aliases {
        let Some(session) = sessions.get_mut(*alias) else {
            continue;
        };
        let session = match session {
            Ok(s) => s,
            Err(e) => {
                lines.push(e.to_string());
                for p in flows {
                    if p.flow.source == *alias || p.flow.target == *alias {
                        *failed_flows.entry(p.flow.name()).or_default() += 1;
                    }
                }
                continue;
            }
        };
        lines.push(session.header());
        match session.authorizer {
            Some(false) => lines.push("  no authorizer (or a super user): all allowed".to_string()),
            Some(true) => {}
            None => lines.push("  could not tell whether the broker has an authorizer".to_string()),
        }
        for p in flows.iter().filter(|p| {
            p.flow.target == *alias && p.flow.delivery.mode == DeliveryMode::ExactlyOnce
        }) {
            let name = p.flow.name();
            match transactions(session, CONNECT_TIMEOUT) {
                Ok(text) => lines.push(format!(
                    "  {} {text} (flow {name}: exactly-once)",
                    Mark::Yes.text()
                )),
                Err(why) => {
                    *failed_flows.entry(name.clone()).or_default() += 1;
                    lines.push(format!(
                        "  {} cluster {alias} cannot run transactions: {why} (flow {name}: exactly-once; use delivery = \"at-least-once\" towards it)",
                        Mark::No.text()
                    ));
                }
            }
            if !session.unrestricted() {
                // One id per task: `refract-a-b` for one task, `refract-a-b-<task>` for several
                // (a prefixed grant covers them all).
                let whole = crate::transactional_id(&p.flow, crate::TaskId::WHOLE);
                let (what, pattern) = if p.flow.tasks > 1 {
                    (
                        format!(
                            "transactional ids {whole}-0 .. {whole}-{}",
                            p.flow.tasks - 1
                        ),
                        " --resource-pattern-type prefixed",
                    )
                } else {
                    (format!("transactional id {whole}"), "")
                };
                lines.push(format!(
                    "  {} Write, Describe {what} (flow {name}: exactly-once; Kafka cannot be asked whether it is granted; if not: kafka-acls --bootstrap-server {} --add --allow-principal {} --operation Write --operation Describe --transactional-id {}{pattern})",
                    Mark::Unknown.text(),
                    shell(&session.bootstrap),
                    shell(&session.principal.name),
                    shell(&whole)
                ));
            }
        }
        let list = needs.remove(*alias).unwrap_or_default();
        if session.unrestricted() {
            continue;
        }
        for (need, rf) in list {
            let answer = evaluate(session, &need, rf);
            match answer.mark {
                Mark::No => *failed_flows.entry(need.flow.clone()).or_default() += 1,
                Mark::Warn => *warned_flows.entry(need.flow.clone()).or_default() += 1,
                _ => {}
            }
            lines.push(format!("  {} {}", answer.mark.text(), answer.text));
        }
    }
    for p in flows {
        let name = p.flow.name();
        let line = match (failed_flows.get(&name), warned_flows.get(&name)) {
            (Some(n), _) => format!("flow {name}: cannot run ({n} problem(s) above)"),
            (None, Some(n)) => format!("flow {name}: can run; {n} feature(s) off (warnings above)"),
            (None, None) => format!("flow {name}: can run"),
        };
        lines.push(line);
    }
    Ok(Report {
        lines,
        all_flows_can_run: failed_flows.is_empty(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn principals_per_mechanism() {
        let scram = settings(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "mirror"),
            ("sasl.password", "secret"),
        ]);
        assert_eq!(principal(&scram).name, "User:mirror");
        let oauth = settings(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanisms", "OAUTHBEARER"),
            ("sasl.oauthbearer.config", "principal=svc scope=x"),
        ]);
        assert_eq!(principal(&oauth).name, "User:svc");
        let oidc = settings(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.client.id", "refract-app"),
        ]);
        assert_eq!(principal(&oidc).name, "User:refract-app");
        assert_eq!(principal(&settings(&[])).name, "User:ANONYMOUS");
        assert_eq!(
            principal(&settings(&[("security.protocol", "ssl")])).name,
            "User:ANONYMOUS"
        );
    }

    #[test]
    fn acl_commands_quote_and_use_prefixes() {
        use Op::*;
        assert_eq!(
            acl_command(
                "h:9092",
                "User:CN=mirror,O=refract tests",
                &[RD_KAFKA_ACL_OPERATION_CREATE, RD_KAFKA_ACL_OPERATION_WRITE],
                &Resource::TopicPrefix("a.orders".into())
            ),
            "kafka-acls --bootstrap-server h:9092 --add --allow-principal 'User:CN=mirror,O=refract tests' \
             --operation Create --operation Write --topic a.orders --resource-pattern-type prefixed"
        );
        assert_eq!(
            acl_command(
                "h:9092",
                "User:mirror",
                &[RD_KAFKA_ACL_OPERATION_DESCRIBE],
                &Resource::Groups(".*".into())
            ),
            "kafka-acls --bootstrap-server h:9092 --add --allow-principal User:mirror --operation Describe --group '*'"
        );
    }

    #[test]
    fn implied_operations() {
        use Op::*;
        assert!(allows(
            &[RD_KAFKA_ACL_OPERATION_READ],
            RD_KAFKA_ACL_OPERATION_DESCRIBE
        ));
        assert!(allows(
            &[RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS],
            RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS
        ));
        assert!(!allows(
            &[RD_KAFKA_ACL_OPERATION_DESCRIBE],
            RD_KAFKA_ACL_OPERATION_READ
        ));
        assert!(!allows(
            &[RD_KAFKA_ACL_OPERATION_CREATE],
            RD_KAFKA_ACL_OPERATION_WRITE
        ));
    }

    #[test]
    fn causes_from_librdkafka_messages() {
        let sasl = settings(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.username", "mirror"),
        ]);
        let got = classify(
            &["sasl_ssl://127.0.0.1:1/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256 (after 5ms in state AUTH_REQ)".into()],
            &sasl,
        );
        assert!(
            matches!(&got, Some(Cause::Authentication(w)) if w.contains("user mirror") && w.contains("SCRAM-SHA-256")),
            "{got:?}"
        );
        let plain = settings(&[]);
        let got = classify(
            &["127.0.0.1:1/bootstrap: Disconnected while requesting ApiVersion: might be caused by incorrect security.protocol configuration (connecting to a SSL listener?) or broker version is < 0.10 (see api.version.request)".into()],
            &plain,
        );
        assert!(matches!(got, Some(Cause::WrongProtocol(_))), "{got:?}");
        let got = classify(
            &["127.0.0.1:1/bootstrap: Disconnected: connection closed by peer: receive 0 after POLLIN (after 2ms in state APIVERSION_QUERY)".into()],
            &plain,
        );
        assert!(matches!(got, Some(Cause::WrongProtocol(_))), "{got:?}");
        let got = classify(
            &["127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)".into()],
            &plain,
        );
        assert!(matches!(got, Some(Cause::Unreachable(_))), "{got:?}");
        assert_eq!(classify(&[], &plain), None);
    }
}
