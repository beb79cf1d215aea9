//! Integration tests: refract on secured Apache Kafka brokers (TLS, mutual TLS, SASL PLAIN,
//! SCRAM and OAUTHBEARER) with certificates and users each test creates, and secrets kept out of
//! everything refract prints.

use crate::support::tls::{https, p12_path, Ca, Issued, P12_PASSWORD};
use crate::support::*;

/// A CA, one broker certificate (for 127.0.0.1 and localhost) and one client certificate (CN
/// `mirror`).
struct Pki {
    ca: Ca,
    server: Issued,
    client: Issued,
}

/// The endpoint's reload token in the first test (read from a file the pipeline references).
const RELOAD_TOKEN: &str = "reload-token-5e1f0c2b9a";

fn pki() -> Pki {
    let ca = Ca::new("refract test CA");
    let server = ca.issue("broker", "broker", &["127.0.0.1", "localhost"], false);
    let client = ca.issue("mirror", "mirror", &[], false);
    Pki { ca, server, client }
}

/// Reads the secrets the pipeline references from files and the environment; nothing refract
/// prints may contain them.
#[test]
fn scram_sasl_ssl_source_to_mtls_target_is_byte_exact_and_secrets_stay_secret() {
    let pki = pki();
    let a = secure_broker("a", &pki.ca, &pki.server, &[]);
    let b = secure_broker("b", &pki.ca, &pki.server, &[]);
    let topic = unique("payments");
    a.create_topic(&topic, 3);
    let records = sample_records(&topic, 3, 300);
    a.produce(&topic, &records);

    let secrets = tempfile::tempdir().expect("temp dir");
    let password_file = secrets.path().join("mirror.password");
    std::fs::write(&password_file, format!("{MIRROR_PASSWORD}\n")).expect("password file");
    let reload_token_file = secrets.path().join("reload.token");
    std::fs::write(&reload_token_file, format!("{RELOAD_TOKEN}\n")).expect("token file");
    // The endpoint over HTTPS with a certificate of the test CA, reload behind a token.
    let pipeline = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n\
         reload_token = \"${{file:{}}}\"\n\n\
         [clusters.a]\nbootstrap = \"{}\"\n\
         [clusters.a.client]\n\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"SCRAM-SHA-512\"\n\
         \"sasl.username\" = \"mirror\"\n\"sasl.password\" = \"${{file:{}}}\"\n\"ssl.ca.location\" = \"{}\"\n\n\
         [clusters.b]\nbootstrap = \"{}\"\n\
         [clusters.b.client]\n\"security.protocol\" = \"SSL\"\n\"ssl.ca.location\" = \"{}\"\n\
         \"ssl.keystore.location\" = \"{}\"\n\"ssl.keystore.password\" = \"${{env:REFRACT_TEST_P12}}\"\n\n\
         [[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nrefresh_topics_interval = \"2s\"\n\
         commit_interval = \"500ms\"\nreplication_factor = 1\n",
        path_str(&pki.server.cert),
        path_str(&pki.server.key),
        path_str(&reload_token_file),
        a.listener("SASL_SSL"),
        path_str(&password_file),
        path_str(&pki.ca.ca_pem()),
        b.listener("MTLS"),
        path_str(&pki.ca.ca_pem()),
        path_str(&p12_path(&pki.client.cert)),
    );
    let mirror = Refract::start_env(&pipeline, &[], &[("REFRACT_TEST_P12", P12_PASSWORD)]);
    let remote = format!("a.{topic}");
    mirror.wait("300 records on b", || {
        b.topics().contains_key(&remote) && b.counts(&remote).iter().sum::<i64>() >= 300
    });
    let got = b.read_all(&remote);
    let want = by_partition(&records, 3);
    assert_eq!(got, want, "{remote}: every record byte for byte, in order");

    let addr = mirror.metrics_addr();
    assert!(mirror.log().contains(&format!("on https://{addr}")));
    let ca = pki.ca.ca_pem();
    let get = |path: &str| https(&addr, &ca, "localhost", ("GET", path), &[]);
    let (code, status) = get("/status");
    assert_eq!(code, 200, "{status}");
    let (code, metrics) = get("/metrics");
    assert_eq!(code, 200);
    let reload = |headers: &[&str]| https(&addr, &ca, "localhost", ("POST", "/reload"), headers);
    assert_eq!(reload(&[]).0, 401);
    let bearer = format!("Authorization: Bearer {RELOAD_TOKEN}");
    assert_eq!(
        reload(&[&bearer]),
        (200, "reloaded: nothing changed\n".to_string())
    );
    assert_eq!(reload(&[&bearer, "Origin: https://evil.example"]).0, 403);
    // `refract status` reads the pipeline's endpoint over HTTPS, trusting its certificate.
    let status_cmd = std::process::Command::new(Refract::bin())
        .args([
            "status",
            "--config",
            &path_str(&mirror.pipeline),
            "--addr",
            &addr,
        ])
        .env("REFRACT_TEST_P12", P12_PASSWORD)
        .output()
        .expect("refract status");
    let shown = String::from_utf8_lossy(&status_cmd.stdout);
    assert!(
        shown.contains("flow a->b: running"),
        "{shown}{}",
        String::from_utf8_lossy(&status_cmd.stderr)
    );
    let printed = format!(
        "{}{status}{metrics}{}{}",
        mirror.log(),
        shown,
        String::from_utf8_lossy(&status_cmd.stderr)
    );
    for secret in [MIRROR_PASSWORD, P12_PASSWORD, RELOAD_TOKEN] {
        assert!(
            !printed.contains(secret),
            "a secret leaked into refract's output:\n{printed}"
        );
    }
}

/// Topics written with each codec mirror byte for byte, and what refract writes is compressed
/// with the flow's `compression` — read back from the target's log segments, not the values.
#[test]
fn every_codec_mirrors_byte_exact_and_the_target_codec_is_as_configured() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    let mut sent = Vec::new();
    for codec in codecs {
        let topic = unique(codec);
        a.create_topic(&topic, 2);
        let records = sample_records(&topic, 2, 200);
        a.produce_with(&topic, &records, &[("compression.type", codec)]);
        for p in 0..2 {
            let stored = a.batch_codecs(&topic, p);
            assert!(
                !stored.is_empty() && stored.iter().all(|c| *c == codec),
                "{topic}[{p}] on a is stored as {codec}: {stored:?}"
            );
        }
        sent.push((topic, records));
    }
    let names: Vec<String> = sent.iter().map(|(t, _)| format!("\"{t}\"")).collect();
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [{}]\ncompression = \"zstd\"\n\
         refresh_topics_interval = \"2s\"\ncommit_interval = \"500ms\"\nreplication_factor = 1\n",
        names.join(", ")
    );
    let mirror = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    for (topic, records) in &sent {
        let remote = format!("a.{topic}");
        mirror.wait(&format!("{remote} to hold 200 records"), || {
            b.topics().contains_key(&remote) && b.counts(&remote).iter().sum::<i64>() >= 200
        });
        assert_eq!(
            b.read_all(&remote),
            by_partition(records, 2),
            "{remote}: byte for byte"
        );
        for p in 0..2 {
            let stored = b.batch_codecs(&remote, p);
            assert!(
                !stored.is_empty() && stored.iter().all(|c| *c == "zstd"),
                "{remote}[{p}] on b is written as the flow's zstd: {stored:?}"
            );
        }
    }
}

/// An unsigned JWT (`alg: none`) for `sub`, valid for an hour: what the test brokers' default
/// OAUTHBEARER validator accepts.
fn unsecured_jwt(sub: &str) -> String {
    unsecured_jwt_for(sub, 3600)
}

/// An unsigned JWT for `sub`, valid for `lifetime_s` seconds.
fn unsecured_jwt_for(sub: &str, lifetime_s: u64) -> String {
    let b64 = |s: &str| {
        openssl::base64::encode_block(s.as_bytes())
            .trim_end_matches('=')
            .replace('+', "-")
            .replace('/', "_")
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!(
        "{}.{}.",
        b64(r#"{"alg":"none"}"#),
        b64(&format!(
            r#"{{"sub":"{sub}","iat":{now},"exp":{},"scope":"kafka"}}"#,
            now + lifetime_s
        ))
    )
}

/// OAUTHBEARER both ways: the source with librdkafka's unsecured JWT (`sasl.oauthbearer.config`),
/// the target with a static token from a file handed to every client before it connects.
#[test]
fn oauthbearer_unsecured_source_and_static_token_target_mirror() {
    let pki = pki();
    let a = secure_broker("a", &pki.ca, &pki.server, &[]);
    let b = secure_broker("b", &pki.ca, &pki.server, &[]);
    let topic = unique("tokens");
    a.create_topic(&topic, 2);
    let records = sample_records(&topic, 2, 100);
    a.produce(&topic, &records);
    let secrets = tempfile::tempdir().expect("temp dir");
    let token_file = secrets.path().join("b.token");
    let token = unsecured_jwt("mirror");
    std::fs::write(&token_file, &token).expect("token file");
    let pipeline = format!(
        "[clusters.a]\nbootstrap = \"{}\"\n\
         [clusters.a.client]\n\"security.protocol\" = \"SASL_PLAINTEXT\"\n\"sasl.mechanism\" = \"OAUTHBEARER\"\n\
         \"enable.sasl.oauthbearer.unsecure.jwt\" = true\n\"sasl.oauthbearer.config\" = \"principal=mirror\"\n\n\
         [clusters.b]\nbootstrap = \"{}\"\n\
         [clusters.b.client]\n\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"OAUTHBEARER\"\n\
         \"ssl.ca.location\" = \"{}\"\n\
         [clusters.b.oauthbearer]\ntoken = \"${{file:{}}}\"\n\n\
         [[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nrefresh_topics_interval = \"2s\"\n\
         commit_interval = \"500ms\"\nreplication_factor = 1\n",
        a.listener("SASL_PLAINTEXT"),
        b.listener("SASL_SSL"),
        path_str(&pki.ca.ca_pem()),
        path_str(&token_file),
    );
    let mirror = Refract::start(&pipeline, &[]);
    let remote = format!("a.{topic}");
    mirror.wait("100 records on b", || {
        b.topics().contains_key(&remote) && b.counts(&remote).iter().sum::<i64>() >= 100
    });
    assert_eq!(b.read_all(&remote), by_partition(&records, 2));
    let log = mirror.log();
    assert!(
        !log.contains(&token),
        "the token leaked into the log:\n{log}"
    );
}

/// `refract run` against a cluster it cannot log in to, or whose certificate it does not trust:
/// the flow fails with the cluster and the cause named (the same check as `check --connect`),
/// never a password.
#[test]
fn run_names_the_cluster_and_the_cause_of_a_failed_login_or_handshake() {
    let pki = pki();
    let a = secure_broker("a", &pki.ca, &pki.server, &[]);
    let expired = pki
        .ca
        .issue("expired", "broker", &["127.0.0.1", "localhost"], true);
    let wrong_host = pki
        .ca
        .issue("wrong-host", "broker", &["wrong.example"], false);
    let old = secure_broker("old", &pki.ca, &expired, &[]);
    let elsewhere = secure_broker("elsewhere", &pki.ca, &wrong_host, &[]);
    let stranger = Ca::new("some other CA");
    let wrong_password = "not-the-password-4411";
    let trusted = format!(
        "\"security.protocol\" = \"SSL\"\n\"ssl.ca.location\" = \"{}\"\n",
        path_str(&pki.ca.ca_pem())
    );
    // (bootstrap, client settings, protocol shown, cause shown)
    let cases = [
        (
            a.listener("SASL_SSL"),
            format!(
                "\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"SCRAM-SHA-512\"\n\
                 \"sasl.username\" = \"mirror\"\n\"sasl.password\" = \"{wrong_password}\"\n\
                 \"ssl.ca.location\" = \"{}\"\n",
                path_str(&pki.ca.ca_pem())
            ),
            "SASL_SSL",
            "authentication failed",
        ),
        (
            a.listener("SSL"),
            format!(
                "\"security.protocol\" = \"SSL\"\n\"ssl.ca.location\" = \"{}\"\n",
                path_str(&stranger.ca_pem())
            ),
            "SSL",
            "TLS handshake failed: the broker's certificate is not signed by a CA this client trusts",
        ),
        (
            old.listener("SSL"),
            trusted.clone(),
            "SSL",
            "TLS handshake failed: the broker's certificate has expired",
        ),
        (
            elsewhere.listener("SSL"),
            trusted.clone(),
            "SSL",
            "TLS handshake failed: the broker's certificate does not match the host name",
        ),
    ];
    for (bootstrap, client, listener, cause) in cases {
        let pipeline = format!(
            "[clusters.a]\nbootstrap = \"{bootstrap}\"\n[clusters.a.client]\n{client}\n\
             [clusters.b]\nbootstrap = \"{}\"\n\n\
             [[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{}\"]\n",
            a.bootstrap,
            unique("never")
        );
        let mirror = Refract::start(&pipeline, &[]);
        let named = format!("cluster a ({bootstrap}, {listener}");
        mirror.wait(
            &format!("the flow to fail naming {named} and {cause:?}"),
            || {
                mirror
                    .log()
                    .lines()
                    .any(|l| l.contains("flow failed") && l.contains(&named) && l.contains(cause))
            },
        );
        assert!(
            !mirror.log().contains(wrong_password),
            "the password leaked:\n{}",
            mirror.log()
        );
    }
}

/// A token endpoint (RFC 6749 client credentials) over HTTPS with the test CA's certificate:
/// checks the client's Basic credentials, grant type and scope, and answers with an unsecured
/// JWT for `mirror` valid for `lifetime_s`, or HTTP 401 `invalid_client`.
struct TokenEndpoint {
    url: String,
    /// Tokens issued, and requests refused.
    issued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    refused: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl TokenEndpoint {
    fn start(server: &Issued, client_id: &str, secret: &str, lifetime_s: u64) -> Self {
        use std::io::{BufRead, BufReader, Read, Write};
        use std::sync::atomic::Ordering;
        let mut acceptor =
            openssl::ssl::SslAcceptor::mozilla_intermediate_v5(openssl::ssl::SslMethod::tls())
                .expect("TLS acceptor");
        acceptor
            .set_certificate_chain_file(&server.cert)
            .expect("endpoint certificate");
        acceptor
            .set_private_key_file(&server.key, openssl::ssl::SslFiletype::PEM)
            .expect("endpoint key");
        let acceptor = acceptor.build();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!(
            "https://localhost:{}/oauth2/token",
            listener.local_addr().expect("addr").port()
        );
        let issued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let refused = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let expected = format!(
            "Basic {}",
            openssl::base64::encode_block(format!("{client_id}:{secret}").as_bytes())
        );
        let (i, r) = (issued.clone(), refused.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let Ok(stream) = acceptor.accept(stream) else {
                    continue;
                };
                let mut reader = BufReader::new(stream);
                let (mut auth, mut length, mut line) = (String::new(), 0usize, String::new());
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    if lower.starts_with("authorization:") {
                        auth = line["authorization:".len()..].trim().to_string();
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let body = String::from_utf8_lossy(&body).to_string();
                let ok = auth == expected
                    && body
                        .split('&')
                        .any(|kv| kv == "grant_type=client_credentials")
                    && body.split('&').any(|kv| kv == "scope=kafka");
                let (status, reply) = if ok {
                    i.fetch_add(1, Ordering::SeqCst);
                    (
                        "200 OK",
                        format!(
                            r#"{{"access_token":"{}","token_type":"Bearer","expires_in":{lifetime_s}}}"#,
                            unsecured_jwt_for("mirror", lifetime_s)
                        ),
                    )
                } else {
                    r.fetch_add(1, Ordering::SeqCst);
                    (
                        "401 Unauthorized",
                        r#"{"error":"invalid_client","error_description":"client authentication failed"}"#
                            .to_string(),
                    )
                };
                let mut stream = reader.into_inner();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
                let _ = stream.shutdown();
            }
        });
        Self {
            url,
            issued,
            refused,
        }
    }

    fn issued(&self) -> usize {
        self.issued.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn refused(&self) -> usize {
        self.refused.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// `[clusters.a.client]` for OIDC client credentials against `endpoint`, the secret from the
/// environment variable `OIDC_SECRET`.
fn oidc_client(endpoint: &TokenEndpoint, ca: &Ca) -> String {
    format!(
        "\"security.protocol\" = \"SASL_PLAINTEXT\"\n\"sasl.mechanism\" = \"OAUTHBEARER\"\n\
         \"sasl.oauthbearer.method\" = \"oidc\"\n\"sasl.oauthbearer.client.id\" = \"refract-app\"\n\
         \"sasl.oauthbearer.client.secret\" = \"${{env:OIDC_SECRET}}\"\n\
         \"sasl.oauthbearer.token.endpoint.url\" = \"{}\"\n\"sasl.oauthbearer.scope\" = \"kafka\"\n\
         \"https.ca.location\" = \"{}\"\n",
        endpoint.url,
        path_str(&ca.ca_pem())
    )
}

/// OIDC client credentials: refract fetches the token from the endpoint (HTTPS, the test CA),
/// hands it to every client, and refreshes it before it expires — the broker re-authenticates
/// every connection each 3 s and refuses an expired token, so mirroring across several token
/// lifetimes proves the refresh. A wrong secret is named as the endpoint's refusal.
#[test]
fn oidc_client_credentials_tokens_are_fetched_and_refreshed() {
    let pki = pki();
    let a = secure_broker(
        "a",
        &pki.ca,
        &pki.server,
        &[(
            "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms",
            "3000",
        )],
    );
    let b = Broker::start("b");
    let secret = "oidc-secret-5c81e0";
    let endpoint = TokenEndpoint::start(&pki.server, "refract-app", secret, 6);
    let topic = unique("oidc");
    a.create_topic(&topic, 2);
    let first = sample_records(&topic, 2, 100);
    a.produce(&topic, &first);
    let pipeline = format!(
        "[clusters.a]\nbootstrap = \"{}\"\n[clusters.a.client]\n{}\n\
         [clusters.b]\nbootstrap = \"{}\"\n\n\
         [[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nrefresh_topics_interval = \"2s\"\n\
         commit_interval = \"500ms\"\nreplication_factor = 1\n",
        a.listener("SASL_PLAINTEXT"),
        oidc_client(&endpoint, &pki.ca),
        b.bootstrap,
    );
    let mirror = Refract::start_env(&pipeline, &[], &[("OIDC_SECRET", secret)]);
    let remote = format!("a.{topic}");
    mirror.wait("the first 100 records on b", || {
        b.topics().contains_key(&remote) && b.counts(&remote).iter().sum::<i64>() >= 100
    });
    // Four token lifetimes: without a refresh the connections' re-authentication fails.
    let seen = endpoint.issued();
    mirror.wait("four more tokens issued", || endpoint.issued() >= seen + 4);
    let second = sample_records(&format!("{topic}-later"), 2, 100);
    a.produce(&topic, &second);
    mirror.wait("all 200 records on b", || {
        b.counts(&remote).iter().sum::<i64>() >= 200
    });
    let mut all = first.clone();
    all.extend(second);
    assert_eq!(b.read_all(&remote), by_partition(&all, 2));
    assert_eq!(endpoint.refused(), 0, "every token request was well-formed");
    let log = mirror.log();
    assert!(!log.contains(secret), "the client secret leaked:\n{log}");
    assert!(
        !log.to_ascii_lowercase().contains("authentication failed")
            && !log.contains("SASL authentication error"),
        "no connection failed to (re-)authenticate:\n{log}"
    );

    // A wrong secret: `check --connect` names the cluster, the endpoint and its answer.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_pipeline(dir.path(), &pipeline);
    let out = std::process::Command::new(Refract::bin())
        .args(["check", "--connect", path_str(&path).as_str()])
        .env("OIDC_SECRET", "wrong-secret-90ab")
        .output()
        .expect("refract check --connect");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    for needle in [
        "cluster a",
        "authentication failed",
        endpoint.url.as_str(),
        "HTTP 401",
        "invalid_client",
    ] {
        assert!(text.contains(needle), "{needle:?} in:\n{text}");
    }
    assert!(!text.contains("wrong-secret-90ab"), "{text}");
}
