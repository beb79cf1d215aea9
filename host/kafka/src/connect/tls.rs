//! Why a broker's certificate failed verification: librdkafka says only that it did, so a TLS
//! handshake of our own (same CA and host-name settings, through the same vendored OpenSSL)
//! finds OpenSSL's reason: expired, wrong host, untrusted issuer.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use super::setting;

/// Why the broker's certificate failed verification, found by a TLS handshake of our own (same
/// CA settings, same host check) with OpenSSL's reason: expired, wrong host, untrusted issuer.
pub(super) fn certificate_problem(
    settings: &BTreeMap<String, String>,
    messages: &[String],
) -> String {
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
