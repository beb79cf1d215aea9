//! Whom the broker will authenticate a client as, from its settings: the SASL user name, the
//! OAUTHBEARER or Kerberos principal, or the subject of the client certificate (read with
//! OpenSSL from PEM or PKCS#12), as Kafka prints it.

use std::collections::BTreeMap;

use super::{mechanism, protocol, setting};

/// Whom the broker authenticates the client as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `User:mirror`.
    pub name: String,
    /// Where it comes from, and what may change it.
    pub note: String,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::tests::settings;

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
}
