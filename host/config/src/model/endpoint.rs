//! `[metrics]` beyond `listen`: who may `POST /reload` (nobody, anyone, or the holder of a
//! token read through `${file:…}`/`${env:…}`), HTTPS files, and the host names requests may
//! use. The endpoint itself lives in refract-telemetry; this is what the pipeline asks of it.
//!
//! Reloading is closed by default where it matters: on a `listen` address other hosts can
//! reach, a pipeline that says nothing about reloading gets [`ReloadAccess::Closed`] (403), not
//! an endpoint anyone on the network may reload; on a loopback address it stays open as
//! before. [`reload_access`] is the whole rule.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
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
    /// `reload = true` without a token, or neither key on a loopback `listen`: anyone who can
    /// reach the endpoint.
    #[default]
    Open,
    /// `reload_token`: only requests with `Authorization: Bearer <token>`.
    Token(String),
    /// Neither `reload` nor `reload_token` on a `listen` address other hosts can reach: POST
    /// /reload is refused (403) until one of them says who may reload.
    Closed,
}

/// Never the token.
impl fmt::Debug for ReloadAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReloadAccess::Disabled => "Disabled",
            ReloadAccess::Open => "Open",
            ReloadAccess::Token(_) => "Token([redacted])",
            ReloadAccess::Closed => "Closed",
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

/// Whether other hosts can reach an endpoint listening on `ip`: anything but a loopback
/// address (`0.0.0.0` and `::` listen on every interface).
pub fn reachable_from_elsewhere(ip: IpAddr) -> bool {
    !ip.to_canonical().is_loopback()
}

/// Who may `POST /reload`, from `reload`, the resolved `reload_token` and the `listen`
/// address; `Err` (the problem with `reload_token`) when the two keys contradict each other.
///
/// | `reload` | `reload_token` | loopback `listen` | other `listen` |
/// |---|---|---|---|
/// | `false` | unset | disabled (404) | disabled (404) |
/// | `false` | set | error | error |
/// | `true` or unset | set | the token | the token |
/// | `true` | unset | open | open (warned about at start) |
/// | unset | unset | open | closed (403) |
pub fn reload_access(
    listen: IpAddr,
    reload: Option<bool>,
    token: Option<String>,
) -> Result<ReloadAccess, &'static str> {
    Ok(match (reload, token) {
        (Some(false), Some(_)) => {
            return Err("is set but `reload = false` disables POST /reload: remove one of them")
        }
        (Some(false), None) => ReloadAccess::Disabled,
        (_, Some(token)) => ReloadAccess::Token(token),
        (Some(true), None) => ReloadAccess::Open,
        (None, None) if reachable_from_elsewhere(listen) => ReloadAccess::Closed,
        (None, None) => ReloadAccess::Open,
    })
}

impl Endpoint {
    /// What to warn about when the endpoint starts on `listen`: reloading that anyone who
    /// reaches a non-loopback address may do, and a reload token sent in plain text over the
    /// network. Names the address, never the token.
    pub fn start_warnings(&self, listen: SocketAddr) -> Vec<String> {
        if !reachable_from_elsewhere(listen.ip()) {
            return Vec::new();
        }
        match (&self.reload, &self.tls) {
            (ReloadAccess::Open, _) => vec![format!(
                "anyone who can reach {listen} may POST /reload (`reload = true` without a token): set [metrics] reload_token to restrict it"
            )],
            (ReloadAccess::Token(_), None) => vec![format!(
                "the reload token travels in plain HTTP to {listen}: anyone who can see that traffic can take it and reload; serve HTTPS ([metrics] tls_cert and tls_key) or listen on a loopback address"
            )],
            _ => Vec::new(),
        }
    }
}

impl Builder<'_> {
    /// `[metrics]`'s access and TLS keys, for an endpoint on `listen`.
    pub(super) fn endpoint(
        &self,
        raw: &RawMetrics,
        listen: IpAddr,
    ) -> Result<Endpoint, ConfigError> {
        let token = match &raw.reload_token {
            Some(token) => {
                let value = self.resolve(token.span(), "metrics.reload_token", token.get_ref())?;
                let token_text = value.resolved.trim().to_string();
                if token_text.len() < 16 {
                    return self.err(
                        token.span(),
                        "metrics.reload_token".into(),
                        "must be at least 16 characters (e.g. `openssl rand -hex 32` in a file read with ${file:…})".into(),
                    );
                }
                Some((token.span(), token_text))
            }
            None => None,
        };
        let (span, token) = token.unzip();
        let reload = reload_access(listen, raw.reload.as_ref().map(|r| *r.get_ref()), token)
            .or_else(|why| {
                self.err(
                    span.unwrap_or_default(),
                    "metrics.reload_token".into(),
                    why.into(),
                )
            })?;
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
        parse_on("127.0.0.1:9464", metrics)
    }

    fn parse_on(listen: &str, metrics: &str) -> Result<Pipeline, ConfigError> {
        let env = |name: &str| match name {
            "RELOAD_TOKEN" => Ok("0123456789abcdef-from-env".to_string()),
            _ => Err(std::env::VarError::NotPresent),
        };
        Pipeline::parse_with_env(
            Path::new("/etc/refract/p.toml"),
            &format!("{FLOWS}[metrics]\nlisten = \"{listen}\"\n{metrics}"),
            &env,
        )
    }

    /// Every combination of where the endpoint listens, whether a token is set and what
    /// `reload` says, through the whole pipeline parser.
    #[test]
    fn reload_is_closed_by_default_off_loopback() {
        use ReloadAccess::{Closed, Disabled, Open};
        const TOKEN: &str = "reload_token = \"0123456789abcdef0\"\n";
        let token = || ReloadAccess::Token("0123456789abcdef0".into());
        let conflict = "is set but `reload = false` disables POST /reload";
        // What the pipeline gives: the access, or the error's message.
        type Want = Result<ReloadAccess, &'static str>;
        // (reload line, token?, on loopback, elsewhere)
        let cases: [(&str, bool, Want, Want); 6] = [
            ("", false, Ok(Open), Ok(Closed)),
            ("reload = true\n", false, Ok(Open), Ok(Open)),
            ("reload = false\n", false, Ok(Disabled), Ok(Disabled)),
            ("", true, Ok(token()), Ok(token())),
            ("reload = true\n", true, Ok(token()), Ok(token())),
            ("reload = false\n", true, Err(conflict), Err(conflict)),
        ];
        for (reload, with_token, loopback, elsewhere) in cases {
            let metrics = format!("{reload}{}", if with_token { TOKEN } else { "" });
            for (listens, want) in [
                (
                    &[
                        "127.0.0.1:9464",
                        "127.0.0.2:1",
                        "[::1]:9464",
                        "[::ffff:127.0.0.1]:9",
                    ][..],
                    &loopback,
                ),
                (
                    &[
                        "0.0.0.0:9464",
                        "10.0.0.7:9464",
                        "[::]:9464",
                        "[fd00::7]:9464",
                    ][..],
                    &elsewhere,
                ),
            ] {
                for listen in listens {
                    let got = parse_on(listen, &metrics).map(|p| p.endpoint.reload);
                    match (got, want) {
                        (Ok(got), Ok(want)) => assert_eq!(&got, want, "{listen} {metrics:?}"),
                        (Err(e), Err(want)) => {
                            let e = e.to_string();
                            assert!(
                                e.contains("metrics.reload_token") && e.contains(want),
                                "{e}"
                            );
                        }
                        (got, want) => panic!("{listen} {metrics:?}: {got:?}, want {want:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn start_warnings_name_the_address_never_the_token() {
        let secret = "0123456789abcdef-secret";
        let tls = Some(EndpointTls {
            cert: "c.pem".into(),
            key: "k.pem".into(),
        });
        let endpoint = |reload: ReloadAccess, tls: &Option<EndpointTls>| Endpoint {
            reload,
            tls: tls.clone(),
            ..Endpoint::default()
        };
        let token = || ReloadAccess::Token(secret.into());
        // (access, TLS, listen, what the warning says; None: no warning)
        let cases = [
            (
                ReloadAccess::Open,
                None,
                "0.0.0.0:9464",
                Some("anyone who can reach 0.0.0.0:9464 may POST /reload"),
            ),
            (ReloadAccess::Open, None, "127.0.0.1:9464", None),
            (
                token(),
                None,
                "10.0.0.7:9464",
                Some("the reload token travels in plain HTTP to 10.0.0.7:9464"),
            ),
            (token(), None, "[::]:9464", Some("plain HTTP to [::]:9464")),
            (token(), None, "[::1]:9464", None),
            (token(), tls.clone(), "0.0.0.0:9464", None),
            (ReloadAccess::Closed, None, "0.0.0.0:9464", None),
            (ReloadAccess::Disabled, None, "0.0.0.0:9464", None),
        ];
        for (reload, tls, listen, want) in cases {
            let shown = format!("{reload:?}");
            let warnings = endpoint(reload, &tls).start_warnings(listen.parse().unwrap());
            match want {
                None => assert!(warnings.is_empty(), "{shown} {listen}: {warnings:?}"),
                Some(want) => {
                    assert_eq!(warnings.len(), 1, "{warnings:?}");
                    assert!(warnings[0].contains(want), "{}", warnings[0]);
                    assert!(!warnings[0].contains(secret), "{}", warnings[0]);
                }
            }
        }
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
