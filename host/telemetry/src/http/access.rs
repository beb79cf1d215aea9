//! Who may ask what: the host a request names (DNS rebinding), the page it comes from (a
//! browser's `Origin`), and the reload token.

use std::net::IpAddr;

use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::StatusCode;

use super::{Options, Refusal, ReloadAccess};

/// The endpoint's access rules.
pub(super) struct Access {
    reload: ReloadAccess,
    scheme: &'static str,
    /// Lower-case host names allowed besides IP addresses and `localhost`.
    allowed_hosts: Vec<String>,
}

/// A host header's name without its port: `[::1]:9090` is `::1`, `a.b:80` is `a.b`.
fn host_name(host: &str) -> &str {
    if host.parse::<IpAddr>().is_ok() {
        return host;
    }
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Compares without stopping at the first difference, so timing does not reveal a prefix of
/// the token.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn forbidden(why: String) -> Refusal {
    Refusal::new(StatusCode::FORBIDDEN, format!("forbidden: {why}\n"))
}

impl Access {
    pub(super) fn new(options: &Options, https: bool) -> Self {
        Self {
            reload: options.reload.clone(),
            scheme: if https { "https" } else { "http" },
            allowed_hosts: options
                .allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
        }
    }

    /// Refuses (403) a request for a host name not allowed, or from a page of another origin.
    pub(super) fn check_request(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = match headers.get(header::HOST).map(HeaderValue::to_str) {
            None => None,
            Some(Ok(host)) => Some(host),
            Some(Err(_)) => return Err(forbidden("the Host header is not text".into())),
        };
        if let Some(host) = host {
            let name = host_name(host).to_ascii_lowercase();
            let allowed = name.parse::<IpAddr>().is_ok()
                || name == "localhost"
                || self.allowed_hosts.contains(&name);
            if !allowed {
                return Err(forbidden(format!(
                    "host `{name}` is not allowed: use an IP address or localhost, or add the name to [metrics] allowed_hosts"
                )));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let own = host.map(|h| format!("{}://{h}", self.scheme));
            let same = match (origin.to_str(), own) {
                (Ok(origin), Some(own)) => origin.eq_ignore_ascii_case(&own),
                _ => false,
            };
            if !same {
                return Err(forbidden(
                    "requests from web pages of another origin are refused".into(),
                ));
            }
        }
        Ok(())
    }

    /// Whether `POST /reload` may go ahead, and whether the caller presented the token (only
    /// then does it get the reload's error details). 404 when reloading is disabled, 403 when
    /// it is closed, 401 without the right token.
    pub(super) fn check_reload(&self, headers: &HeaderMap) -> Result<bool, Refusal> {
        match &self.reload {
            ReloadAccess::Disabled => Err(Refusal::new(
                StatusCode::NOT_FOUND,
                "not found: POST /reload is disabled ([metrics] reload = false)\n",
            )),
            ReloadAccess::Closed => Err(forbidden(
                "POST /reload is closed: this endpoint listens on an address other hosts can reach \
                 and nobody was allowed to reload; set [metrics] reload_token (then send \
                 `Authorization: Bearer <token>`), or reload = true to let anyone who reaches it reload"
                    .into(),
            )),
            ReloadAccess::Open => Ok(false),
            ReloadAccess::Token(token) => {
                let presented = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::trim);
                match presented {
                    Some(p) if same_secret(p.as_bytes(), token.as_bytes()) => Ok(true),
                    _ => Err(Refusal {
                        challenge: true,
                        ..Refusal::new(
                            StatusCode::UNAUTHORIZED,
                            "unauthorized: POST /reload needs `Authorization: Bearer <token>` with [metrics] reload_token\n",
                        )
                    }),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn access(reload: ReloadAccess, hosts: &[&str]) -> Access {
        Access::new(
            &Options {
                reload,
                tls: None,
                allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            },
            false,
        )
    }

    #[test]
    fn host_names_without_ports() {
        assert_eq!(host_name("[::1]:9090"), "::1");
        assert_eq!(host_name("127.0.0.1:80"), "127.0.0.1");
        assert_eq!(host_name("mirror.svc"), "mirror.svc");
        assert_eq!(host_name("::1"), "::1");
    }

    #[test]
    fn hosts_and_origins() {
        let a = access(ReloadAccess::Open, &["Mirror.Monitoring.svc"]);
        let status = |pairs: &[(&'static str, &str)]| match a.check_request(&headers(pairs)) {
            Ok(()) => 200,
            Err(r) => r.status.as_u16(),
        };
        assert_eq!(status(&[]), 200);
        assert_eq!(status(&[("host", "10.0.0.7:9464")]), 200);
        assert_eq!(status(&[("host", "[fd00::7]:9464")]), 200);
        assert_eq!(status(&[("host", "localhost:9464")]), 200);
        assert_eq!(status(&[("host", "mirror.monitoring.svc:9464")]), 200);
        // DNS rebinding: a page's own name that resolves to the endpoint.
        assert_eq!(status(&[("host", "attacker.example:9464")]), 403);
        // A page of another origin, even on an allowed host.
        assert_eq!(
            status(&[
                ("host", "127.0.0.1:9464"),
                ("origin", "http://evil.example")
            ]),
            403
        );
        assert_eq!(
            status(&[("host", "127.0.0.1:9464"), ("origin", "null")]),
            403
        );
        assert_eq!(
            status(&[
                ("host", "127.0.0.1:9464"),
                ("origin", "http://127.0.0.1:9464")
            ]),
            200
        );
        assert_eq!(status(&[("origin", "http://127.0.0.1:9464")]), 403);
    }

    #[test]
    fn reload_access() {
        let code =
            |a: &Access, pairs: &[(&'static str, &str)]| match a.check_reload(&headers(pairs)) {
                Ok(detailed) => (200, detailed),
                Err(r) => (r.status.as_u16(), false),
            };
        let disabled = access(ReloadAccess::Disabled, &[]);
        assert_eq!(code(&disabled, &[]), (404, false));
        let closed = access(ReloadAccess::Closed, &[]);
        assert_eq!(code(&closed, &[]), (403, false));
        assert_eq!(
            code(&closed, &[("authorization", "Bearer anything")]),
            (403, false)
        );
        let open = access(ReloadAccess::Open, &[]);
        assert_eq!(code(&open, &[]), (200, false));
        let token = access(ReloadAccess::Token("s3cret".into()), &[]);
        assert_eq!(code(&token, &[]), (401, false));
        assert_eq!(
            code(&token, &[("authorization", "Bearer wrong")]),
            (401, false)
        );
        assert_eq!(
            code(&token, &[("authorization", "Bearer s3cret1")]),
            (401, false)
        );
        assert_eq!(
            code(&token, &[("authorization", "Basic s3cret")]),
            (401, false)
        );
        assert_eq!(
            code(&token, &[("authorization", "Bearer s3cret")]),
            (200, true)
        );
        assert!(!same_secret(b"ab", b"abc"));
        assert!(same_secret(b"abc", b"abc"));
    }
}
