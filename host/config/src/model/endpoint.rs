//! `[metrics]` beyond `listen`: who may `POST /reload` (nobody, anyone, or the holder of a
//! token read through `${file:…}`/`${env:…}`), HTTPS files, and the host names requests may
//! use. The endpoint itself lives in refract-telemetry; this is what the pipeline asks of it.

use std::fmt;
use std::path::PathBuf;

use toml::Spanned;

use super::Builder;
use crate::error::ConfigError;
use crate::raw::RawMetrics;

/// Who may `POST /reload`.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum ReloadAccess {
    /// `reload = false`: nobody (404).
    Disabled,
    /// `reload = true` (the default) without a token: anyone who can reach the endpoint.
    #[default]
    Open,
    /// `reload_token`: only requests with `Authorization: Bearer <token>`.
    Token(String),
}

/// Never the token.
impl fmt::Debug for ReloadAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReloadAccess::Disabled => "Disabled",
            ReloadAccess::Open => "Open",
            ReloadAccess::Token(_) => "Token([redacted])",
        })
    }
}

/// `[metrics] tls_cert` and `tls_key`, relative to the pipeline's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointTls {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key, unencrypted.
    pub key: PathBuf,
}

/// How the HTTP endpoint serves, beyond its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Who may reload.
    pub reload: ReloadAccess,
    /// HTTPS, when set.
    pub tls: Option<EndpointTls>,
    /// Host names requests may use besides IP addresses and `localhost`.
    pub allowed_hosts: Vec<String>,
    /// `partition_series`: MirrorMaker 2's per-partition series (`true`, the default, as MM2
    /// exports them) or one series per topic with the partitions summed up (`false`), for
    /// estates whose per-partition output is too large to scrape.
    pub partition_series: bool,
}

impl Default for Endpoint {
    fn default() -> Self {
        Self {
            reload: ReloadAccess::default(),
            tls: None,
            allowed_hosts: Vec::new(),
            partition_series: true,
        }
    }
}

impl Builder<'_> {
    /// `[metrics]`'s access and TLS keys.
    pub(super) fn endpoint(&self, raw: &RawMetrics) -> Result<Endpoint, ConfigError> {
        let reload = match (&raw.reload, &raw.reload_token) {
            (Some(enabled), Some(token)) if !*enabled.get_ref() => {
                return self.err(
                    token.span(),
                    "metrics.reload_token".into(),
                    "is set but `reload = false` disables POST /reload: remove one of them".into(),
                )
            }
            (Some(enabled), None) if !*enabled.get_ref() => ReloadAccess::Disabled,
            (_, Some(token)) => {
                let value = self.resolve(token.span(), "metrics.reload_token", token.get_ref())?;
                let token_text = value.resolved.trim().to_string();
                if token_text.len() < 16 {
                    return self.err(
                        token.span(),
                        "metrics.reload_token".into(),
                        "must be at least 16 characters (e.g. `openssl rand -hex 32` in a file read with ${file:…})".into(),
                    );
                }
                ReloadAccess::Token(token_text)
            }
            (_, None) => ReloadAccess::Open,
        };
        let path = |key: &str, v: &Spanned<String>| -> Result<PathBuf, ConfigError> {
            let value = self.resolve(v.span(), key, v.get_ref())?;
            let text = value.resolved.trim();
            if text.is_empty() {
                return self.err(v.span(), key.into(), "is empty: name a PEM file".into());
            }
            Ok(self.base.join(text))
        };
        let tls = match (&raw.tls_cert, &raw.tls_key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(EndpointTls {
                cert: path("metrics.tls_cert", cert)?,
                key: path("metrics.tls_key", key)?,
            }),
            (Some(cert), None) => {
                return self.err(
                    cert.span(),
                    "metrics.tls_key".into(),
                    "is missing: HTTPS needs tls_cert and tls_key".into(),
                )
            }
            (None, Some(key)) => {
                return self.err(
                    key.span(),
                    "metrics.tls_cert".into(),
                    "is missing: HTTPS needs tls_cert and tls_key".into(),
                )
            }
        };
        let mut allowed_hosts = Vec::new();
        for (i, host) in raw.allowed_hosts.iter().flatten().enumerate() {
            let name = host.get_ref().trim().to_ascii_lowercase();
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
            if !valid {
                return self.err(
                    host.span(),
                    format!("metrics.allowed_hosts[{i}]"),
                    format!("`{name}` is not a host name (letters, digits, `.` and `-`; no port)"),
                );
            }
            allowed_hosts.push(name);
        }
        Ok(Endpoint {
            reload,
            tls,
            allowed_hosts,
            partition_series: raw.partition_series.as_ref().is_none_or(|v| *v.get_ref()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Pipeline;
    use std::path::Path;

    const FLOWS: &str = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";

    fn parse(metrics: &str) -> Result<Pipeline, ConfigError> {
        let env = |name: &str| match name {
            "RELOAD_TOKEN" => Ok("0123456789abcdef-from-env".to_string()),
            _ => Err(std::env::VarError::NotPresent),
        };
        Pipeline::parse_with_env(
            Path::new("/etc/refract/p.toml"),
            &format!("{FLOWS}[metrics]\nlisten = \"127.0.0.1:9464\"\n{metrics}"),
            &env,
        )
    }

    fn error(metrics: &str) -> String {
        parse(metrics).unwrap_err().to_string()
    }

    #[test]
    fn defaults_and_each_key() {
        assert_eq!(parse("").unwrap().endpoint, Endpoint::default());
        assert_eq!(parse("").unwrap().endpoint.reload, ReloadAccess::Open);
        assert!(parse("").unwrap().endpoint.partition_series);
        assert!(
            !parse("partition_series = false")
                .unwrap()
                .endpoint
                .partition_series
        );
        assert_eq!(
            parse("reload = false").unwrap().endpoint.reload,
            ReloadAccess::Disabled
        );
        let p = parse(
            "reload_token = \"${env:RELOAD_TOKEN}\"\ntls_cert = \"tls/crt.pem\"\ntls_key = \"/keys/k.pem\"\nallowed_hosts = [\"Mirror.Monitoring.svc\"]",
        )
        .unwrap();
        assert_eq!(
            p.endpoint.reload,
            ReloadAccess::Token("0123456789abcdef-from-env".into())
        );
        assert_eq!(
            p.endpoint.tls,
            Some(EndpointTls {
                cert: "/etc/refract/tls/crt.pem".into(),
                key: "/keys/k.pem".into()
            })
        );
        assert_eq!(p.endpoint.allowed_hosts, ["mirror.monitoring.svc"]);
        let shown = format!("{:?}", p.endpoint);
        assert!(!shown.contains("from-env"), "{shown}");
        assert!(shown.contains("[redacted]"), "{shown}");
    }

    #[test]
    fn mistakes_name_the_file_and_key() {
        let e = error("reload = false\nreload_token = \"0123456789abcdef0\"");
        assert!(
            e.contains("/etc/refract/p.toml") && e.contains("metrics.reload_token"),
            "{e}"
        );
        assert!(e.contains("reload = false"), "{e}");
        let e = error("reload_token = \"short-secret\"");
        assert!(
            e.contains("metrics.reload_token") && e.contains("at least 16"),
            "{e}"
        );
        assert!(!e.contains("short-secret"), "the token is never shown: {e}");
        let e = error("reload_token = \"${env:MISSING}\"");
        assert!(
            e.contains("metrics.reload_token") && e.contains("MISSING"),
            "{e}"
        );
        let e = error("tls_cert = \"c.pem\"");
        assert!(
            e.contains("metrics.tls_key") && e.contains("is missing"),
            "{e}"
        );
        let e = error("tls_key = \"k.pem\"");
        assert!(e.contains("metrics.tls_cert"), "{e}");
        let e = error("allowed_hosts = [\"ok.svc\", \"bad.svc:9464\"]");
        assert!(e.contains("metrics.allowed_hosts[1]"), "{e}");
        // A wrong type is named by its line.
        let e = error("reload = \"yes\"");
        assert!(e.contains("p.toml:10") && e.contains("boolean"), "{e}");
    }
}
