//! Test harness of the refract binary's integration tests: what only they need (pipelines and
//! flows, the `refract` binary under test, TLS certificates, hostile plugins) on top of
//! `refract-testkit`, which starts the real Apache Kafka brokers (single-node KRaft clusters
//! from the jars `.ci/install-kafka` resolves) and checks records, and is re-exported here.

// Every test binary compiles this module (`mod support;`) and uses a different part of it; an
// item one binary leaves unused is not dead. (Moving every item into refract-testkit would
// avoid the lint, but it would then need the refract binary's path, openssl and the guest
// plugins, which only these tests have.)
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

// Everything generic (brokers, ports, records, waits, the refract process) comes from the
// testkit; a glob, so a binary that uses only some of it gets no unused-import warning.
pub use refract_testkit::*;

pub mod hostile;
pub mod tls;

/// How a secure test broker authenticates clients.
pub struct Secure<'a> {
    /// The broker's certificate (its `bundle` is the PEM key store).
    pub server: &'a tls::Issued,
    /// The CA the broker trusts for client certificates (`MTLS`).
    pub client_ca: &'a Path,
    /// SASL users and passwords (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512).
    pub users: &'a [(&'a str, &'a str)],
}

/// The listeners a secure test broker adds beside `PLAINTEXT`, with their security protocol.
const SECURE_LISTENERS: [(&str, &str); 4] = [
    ("SSL", "SSL"),
    ("MTLS", "SSL"),
    ("SASL_SSL", "SASL_SSL"),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT"),
];

impl Secure<'_> {
    /// A test broker's options with the listeners `SSL` (server certificate only), `MTLS`
    /// (client certificate required), `SASL_SSL` and `SASL_PLAINTEXT` (PLAIN, SCRAM-SHA-256,
    /// SCRAM-SHA-512 and unsecured-JWT OAUTHBEARER) beside the PLAINTEXT listener the harness
    /// itself uses ([`Broker::listener`] gives each one's address), then `extra` settings.
    pub fn options(&self, extra: &[(&str, &str)]) -> BrokerOptions {
        let mut options = BrokerOptions {
            listeners: SECURE_LISTENERS
                .iter()
                .map(|(name, protocol)| (name.to_string(), protocol.to_string()))
                .collect(),
            scram_users: self
                .users
                .iter()
                .map(|(u, pw)| (u.to_string(), pw.to_string()))
                .collect(),
            ..BrokerOptions::default()
        };
        options.props.extend(self.props());
        options.props(extra)
    }

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

/// A secure test broker ([`Secure::options`]) with `server`'s certificate, trusting client
/// certificates `ca` issued, and the SASL users `mirror` and `admin`.
pub fn secure_broker(
    alias: &str,
    ca: &tls::Ca,
    server: &tls::Issued,
    extra: &[(&str, &str)],
) -> Broker {
    let secure = Secure {
        server,
        client_ca: &ca.ca_pem(),
        users: &[("mirror", MIRROR_PASSWORD), ("admin", ADMIN_PASSWORD)],
    };
    Broker::start_options(alias, &secure.options(extra))
}

/// A path as text for a pipeline file.
pub fn path_str(path: &Path) -> String {
    path.display().to_string()
}

/// A `refract run` process of the binary under test ([`RefractProcess`], which it derefs to).
pub struct Refract(RefractProcess);

impl Refract {
    /// Starts `refract run` on `pipeline` with extra `args`.
    pub fn start(pipeline: &str, args: &[&str]) -> Self {
        Self::start_env(pipeline, args, &[])
    }

    /// Starts `refract run` on `pipeline` with extra `args` and environment variables.
    pub fn start_env(pipeline: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self(RefractProcess::start(refract_bin(), pipeline, args, env))
    }
}

impl std::ops::Deref for Refract {
    type Target = RefractProcess;
    fn deref(&self) -> &RefractProcess {
        &self.0
    }
}

impl std::ops::DerefMut for Refract {
    fn deref_mut(&mut self) -> &mut RefractProcess {
        &mut self.0
    }
}

/// The path of the refract binary under test.
pub fn refract_bin() -> &'static str {
    env!("CARGO_BIN_EXE_refract")
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
