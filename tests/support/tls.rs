//! Certificates the tests create themselves: a CA, broker certificates (good, expired, for the
//! wrong host, from an untrusted CA) and client certificates as PEM files and PKCS#12 bundles.
//! EC P-256 keys: generating them takes microseconds, and Java and librdkafka both accept them.

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

/// A certificate authority and the files it issued, in a temp folder.
pub struct Ca {
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
