//! Connecting to a cluster the way refract's clients will, and saying in words why it fails:
//! unreachable, TLS (with OpenSSL's reason from a handshake of our own), authentication, the
//! wrong security.protocol, bad settings. Used by a flow before it starts (a cluster refract
//! cannot authenticate to fails the flow with the cause named) and by `refract check --connect`,
//! which probes further through the [`Connection`]'s admin client.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use rdkafka::admin::AdminClient;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, DeliveryResult, Producer, ProducerContext};
use tracing::debug;

use refract_config::{ClientRole, Cluster};

use crate::clients::{client_config, Authenticated};

mod principal;
mod tls;

pub use principal::{principal, Principal};

/// How long connecting (bootstrap, TLS, authentication, metadata) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The client id of every client `check --connect` creates.
const CLIENT_ID: &str = refract_config::names::CHECK_CLIENT;

/// Connects to `cluster` with its configured client settings (admin role) and fetches its
/// metadata within about 10 s: the quick check a flow can make before it starts. The error names
/// the cluster, its bootstrap, security.protocol and sasl.mechanism, and the cause in words with
/// librdkafka's own text; never a secret.
pub fn preflight(cluster: &Cluster) -> Result<()> {
    connect(cluster, CONNECT_TIMEOUT)
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
pub struct Capture {
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

/// A cluster connected with its configured client settings (admin role): who it authenticated
/// the client as, the topics it shows, and an admin client to probe it further.
pub struct Connection {
    /// `cluster b (127.0.0.1:9093, SASL_SSL/SCRAM-SHA-512)`.
    pub label: String,
    /// Its bootstrap servers.
    pub bootstrap: String,
    /// `security.protocol`, upper case.
    pub protocol: String,
    /// Whom the broker authenticated the client as.
    pub principal: Principal,
    /// An admin client with the cluster's settings.
    pub admin: Authenticated<AdminClient<Capture>>,
    /// Topics the principal can see (name, partitions).
    pub topics: Vec<(String, i32)>,
}

/// Connects to `cluster` with its configured client settings (admin role) and fetches its
/// metadata within `timeout`; the error classifies why it could not.
pub fn connect(cluster: &Cluster, timeout: Duration) -> Result<Connection, ConnectError> {
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
    Ok(Connection {
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
    })
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
        return Some(Cause::Tls(tls::certificate_problem(settings, messages)));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Client settings from pairs (also used by the tests of [`super::principal`]).
    pub(super) fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
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
