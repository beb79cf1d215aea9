//! Certificates the tests create themselves: a CA, broker certificates (good, expired, for the
//! wrong host, from an untrusted CA) and client certificates as PEM files and PKCS#12 bundles.
//! EC P-256 keys: generating them takes microseconds, and Java and librdkafka both accept them.
//! And brokers that listen with TLS and SASL on top of PLAINTEXT ([`secure_broker`]).
//!
//! Only with the `tls` feature (it links the `openssl` crate, which the benchmark does not need).

use std::path::{Path, PathBuf};

use openssl::asn1::{Asn1Integer, Asn1Time};
use openssl::bn::BigNum;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkcs12::Pkcs12;
use openssl::pkey::{PKey, Private};
use openssl::x509::extension::{
    BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName,
};
use openssl::x509::{X509Name, X509};
use tempfile::TempDir;

use crate::{Broker, BrokerOptions};

/// A certificate authority and the files it issued, in a temp folder.
pub struct Ca {
    /// The temp folder holding `ca.pem` and every file [`Ca::issue`] wrote.
    pub dir: TempDir,
    key: PKey<Private>,
    cert: X509,
    serial: std::cell::Cell<u32>,
}

/// One issued certificate's files.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (unencrypted PKCS#8 PEM).
    pub key: PathBuf,
    /// Key then certificate then the CA certificate, in one PEM file (a Kafka `PEM` key store).
    pub bundle: PathBuf,
}

fn key() -> PKey<Private> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).expect("P-256");
    PKey::from_ec_key(EcKey::generate(&group).expect("EC key")).expect("pkey")
}

fn name(cn: &str) -> X509Name {
    let mut n = X509Name::builder().expect("name");
    n.append_entry_by_nid(Nid::ORGANIZATIONNAME, "refract tests")
        .expect("O");
    n.append_entry_by_nid(Nid::COMMONNAME, cn).expect("CN");
    n.build()
}

impl Ca {
    /// A new self-signed CA named `cn`.
    pub fn new(cn: &str) -> Self {
        let key = key();
        let mut b = X509::builder().expect("x509");
        b.set_version(2).expect("v3");
        let serial = Asn1Integer::from_bn(&BigNum::from_u32(1).expect("bn")).expect("serial");
        b.set_serial_number(&serial).expect("serial");
        b.set_subject_name(&name(cn)).expect("subject");
        b.set_issuer_name(&name(cn)).expect("issuer");
        b.set_pubkey(&key).expect("pubkey");
        b.set_not_before(&Asn1Time::days_from_now(0).expect("t"))
            .expect("nb");
        b.set_not_after(&Asn1Time::days_from_now(30).expect("t"))
            .expect("na");
        b.append_extension(BasicConstraints::new().critical().ca().build().expect("bc"))
            .expect("bc");
        b.append_extension(
            KeyUsage::new()
                .critical()
                .key_cert_sign()
                .crl_sign()
                .build()
                .expect("ku"),
        )
        .expect("ku");
        b.sign(&key, MessageDigest::sha256()).expect("sign");
        let ca = Self {
            dir: tempfile::tempdir().expect("temp dir"),
            key,
            cert: b.build(),
            serial: std::cell::Cell::new(2),
        };
        std::fs::write(ca.ca_pem(), ca.cert.to_pem().expect("pem")).expect("ca.pem");
        ca
    }

    /// The CA certificate (PEM): what clients trust (`ssl.ca.location`).
    pub fn ca_pem(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Issues a certificate for `cn`, valid for `hosts` (DNS names or IP addresses) and for
    /// server and client use; `expired` makes one that ran out yesterday.
    pub fn issue(&self, file: &str, cn: &str, hosts: &[&str], expired: bool) -> Issued {
        let key = key();
        let mut b = X509::builder().expect("x509");
        b.set_version(2).expect("v3");
        let n = self.serial.get();
        self.serial.set(n + 1);
        let serial = Asn1Integer::from_bn(&BigNum::from_u32(n).expect("bn")).expect("serial");
        b.set_serial_number(&serial).expect("serial");
        b.set_subject_name(&name(cn)).expect("subject");
        b.set_issuer_name(self.cert.subject_name()).expect("issuer");
        b.set_pubkey(&key).expect("pubkey");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let (from, to) = if expired {
            (now - 10 * 86_400, now - 86_400)
        } else {
            (now - 3_600, now + 30 * 86_400)
        };
        b.set_not_before(&Asn1Time::from_unix(from).expect("t"))
            .expect("nb");
        b.set_not_after(&Asn1Time::from_unix(to).expect("t"))
            .expect("na");
        b.append_extension(BasicConstraints::new().build().expect("bc"))
            .expect("bc");
        b.append_extension(
            KeyUsage::new()
                .critical()
                .digital_signature()
                .key_agreement()
                .build()
                .expect("ku"),
        )
        .expect("ku");
        b.append_extension(
            ExtendedKeyUsage::new()
                .server_auth()
                .client_auth()
                .build()
                .expect("eku"),
        )
        .expect("eku");
        if !hosts.is_empty() {
            let mut san = SubjectAlternativeName::new();
            for h in hosts {
                if h.parse::<std::net::IpAddr>().is_ok() {
                    san.ip(h);
                } else {
                    san.dns(h);
                }
            }
            let ext = san
                .build(&b.x509v3_context(Some(&self.cert), None))
                .expect("san");
            b.append_extension(ext).expect("san");
        }
        b.sign(&self.key, MessageDigest::sha256()).expect("sign");
        let cert = b.build();
        let dir = self.dir.path();
        let issued = Issued {
            cert: dir.join(format!("{file}.crt.pem")),
            key: dir.join(format!("{file}.key.pem")),
            bundle: dir.join(format!("{file}.bundle.pem")),
        };
        let key_pem = key.private_key_to_pem_pkcs8().expect("key pem");
        let cert_pem = cert.to_pem().expect("cert pem");
        let ca_pem = self.cert.to_pem().expect("ca pem");
        std::fs::write(&issued.cert, &cert_pem).expect("cert file");
        std::fs::write(&issued.key, &key_pem).expect("key file");
        std::fs::write(&issued.bundle, [key_pem, cert_pem, ca_pem].concat()).expect("bundle");
        self.write_p12(&issued, &key, &cert);
        issued
    }

    fn write_p12(&self, issued: &Issued, key: &PKey<Private>, cert: &X509) {
        let mut stack = openssl::stack::Stack::new().expect("stack");
        stack.push(self.cert.clone()).expect("push");
        let p12 = Pkcs12::builder()
            .name("refract-test")
            .pkey(key)
            .cert(cert)
            .ca(stack)
            .build2(P12_PASSWORD)
            .expect("pkcs12");
        std::fs::write(p12_path(&issued.cert), p12.to_der().expect("der")).expect("p12 file");
    }
}

/// The password of every PKCS#12 bundle the tests write.
pub const P12_PASSWORD: &str = "p12-pass-not-secret";

/// The PKCS#12 bundle written beside a certificate.
pub fn p12_path(cert: &Path) -> PathBuf {
    cert.with_extension("p12")
}

/// How a secure test broker authenticates clients.
pub struct Secure<'a> {
    /// The broker's certificate (its `bundle` is the PEM key store).
    pub server: &'a Issued,
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
pub fn secure_broker(alias: &str, ca: &Ca, server: &Issued, extra: &[(&str, &str)]) -> Broker {
    let secure = Secure {
        server,
        client_ca: &ca.ca_pem(),
        users: &[("mirror", MIRROR_PASSWORD), ("admin", ADMIN_PASSWORD)],
    };
    Broker::start_options(alias, &secure.options(extra))
}

/// An HTTPS request to refract's endpoint at `addr`, trusting the CA file `ca` and checking the
/// certificate names `host`: (status code, body).
pub fn https(
    addr: &str,
    ca: &Path,
    host: &str,
    request: (&str, &str),
    headers: &[&str],
) -> (u16, String) {
    use openssl::ssl::{SslConnector, SslMethod};
    let mut connector = SslConnector::builder(SslMethod::tls_client()).expect("connector");
    connector.set_ca_file(ca).expect("CA file");
    let tcp = std::net::TcpStream::connect(addr).expect("connect");
    let mut s = connector.build().connect(host, tcp).expect("TLS handshake");
    crate::metrics::exchange(&mut s, addr, request, headers)
}
