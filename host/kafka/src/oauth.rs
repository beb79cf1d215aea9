//! OAUTHBEARER tokens refract hands librdkafka itself: a static token
//! (`[clusters.<alias>.oauthbearer] token`, read again from its file when it nears expiry) or one
//! fetched from an OIDC token endpoint with the client-credentials grant
//! (`sasl.oauthbearer.method = "oidc"`), which librdkafka would fetch with libcurl — not linked
//! in refract's vendored build.
//!
//! One token source per cluster and set of settings, shared by every client of the process: a
//! client gets the current token before it connects ([`attach`]), and a refresher thread fetches
//! a new one at 80% of the token's lifetime and hands it to every live client, so brokers that
//! re-authenticate connections (`connections.max.reauth.ms`) and reconnects keep working. A
//! failed refresh is retried every few seconds while the old token is still valid, logged once.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use anyhow::{Context, Result};
use refract_config::{ClientRole, Cluster, Oidc};
use tracing::{debug, info, warn};

/// How long one token request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Between attempts after a failed refresh.
const RETRY: Duration = Duration::from_secs(5);
/// The most of a token endpoint's error body shown in an error.
const BODY_CAP: usize = 300;

/// A bearer token and what librdkafka needs with it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    value: String,
    /// Expiry, epoch milliseconds.
    pub expiry_ms: i64,
    /// The principal the token names (its `sub` claim, or the configured claim).
    pub principal: String,
    extensions: Vec<(String, String)>,
    /// When it was obtained, epoch milliseconds.
    fetched_ms: i64,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("principal", &self.principal)
            .field("expiry_ms", &self.expiry_ms)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// When a refresh is due: at 80% of the lifetime it had when obtained.
    fn refresh_at_ms(&self) -> i64 {
        self.fetched_ms + (self.expiry_ms - self.fetched_ms) * 4 / 5
    }
}

/// Where a cluster's tokens come from.
enum Kind {
    Static(Box<Cluster>),
    Oidc(Oidc),
}

/// One token, shared by the clients registered with it.
struct Source {
    /// `cluster a`, for logs and errors.
    label: String,
    kind: Kind,
    state: Mutex<State>,
    clients: Mutex<HashMap<u64, Native>>,
    next_id: AtomicU64,
}

#[derive(Default)]
struct State {
    token: Option<Token>,
    /// After a failed refresh: when to try again, and how many attempts failed in a row.
    retry_at_ms: i64,
    failures: u32,
}

/// A live librdkafka handle. Only used under the `clients` lock, and a [`Registration`] removes
/// it (under the same lock) before the client it belongs to is destroyed.
struct Native(*mut rdkafka_sys::rd_kafka_t);
// SAFETY: librdkafka's API is thread-safe; the pointer is only used while the client is alive
// (see `Native`).
unsafe impl Send for Native {}

/// Keeps a client's token fresh while it lives. Drop it before the client (see
/// [`crate::clients::Authenticated`]).
pub struct Registration {
    source: Arc<Source>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.source.clients).remove(&self.id);
    }
}

/// Wall-clock milliseconds since the epoch, as token expiries are written (0 if the clock is
/// before 1970).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Every token source of the process, by its settings.
fn sources() -> &'static Mutex<HashMap<String, Weak<Source>>> {
    static SOURCES: OnceLock<Mutex<HashMap<String, Weak<Source>>>> = OnceLock::new();
    SOURCES.get_or_init(Default::default)
}

/// Whether clients of `cluster` in `role` get their OAUTHBEARER token from refract.
pub fn supplies_token(cluster: &Cluster, role: ClientRole) -> bool {
    cluster.oidc(role).is_some() || cluster.static_oauth_token().is_some()
}

/// Hands the client behind `native` the cluster's current token (fetching one first if there
/// is none), and keeps it fresh until the returned registration is dropped. `Ok(None)` when the
/// cluster's clients do not take their token from refract.
pub(crate) fn attach(
    native: *mut rdkafka_sys::rd_kafka_t,
    cluster: &Cluster,
    role: ClientRole,
) -> Result<Option<Registration>> {
    let (key, kind) = if let Some(oidc) = cluster.oidc(role) {
        let key = format!(
            "oidc\0{}\0{}\0{}\0{}\0{:?}\0{:?}\0{:?}\0{:?}\0{}",
            cluster.alias,
            oidc.token_endpoint,
            oidc.client_id,
            oidc.client_secret,
            oidc.scope,
            oidc.extensions,
            oidc.ca_location,
            oidc.ca_pem,
            oidc.sub_claim
        );
        (key, Kind::Oidc(oidc))
    } else if let Some(token) = cluster.static_oauth_token() {
        let key = format!("static\0{}\0{token}", cluster.alias);
        (key, Kind::Static(Box::new(cluster.clone())))
    } else {
        return Ok(None);
    };
    let source = source(key, cluster, kind);
    source.ensure_token()?;
    let mut clients = lock(&source.clients);
    let token = lock(&source.state)
        .token
        .clone()
        .context("no OAUTHBEARER token")?;
    set_token(native, &token)
        .with_context(|| format!("{}: librdkafka refused the OAUTHBEARER token", source.label))?;
    let id = source.next_id.fetch_add(1, Ordering::Relaxed);
    clients.insert(id, Native(native));
    drop(clients);
    Ok(Some(Registration {
        source: source.clone(),
        id,
    }))
}

/// The principal of the token clients of `cluster` in `role` present, when refract supplies it
/// and has one.
pub fn principal(cluster: &Cluster, role: ClientRole) -> Option<String> {
    let prefix = if cluster.oidc(role).is_some() {
        format!("oidc\0{}\0", cluster.alias)
    } else {
        format!("static\0{}\0", cluster.alias)
    };
    let sources = lock(sources());
    sources
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .filter_map(|(_, s)| s.upgrade())
        .find_map(|s| lock(&s.state).token.as_ref().map(|t| t.principal.clone()))
}

/// The live source for `key`, or a new one with its refresher thread.
fn source(key: String, cluster: &Cluster, kind: Kind) -> Arc<Source> {
    let mut sources = lock(sources());
    sources.retain(|_, s| s.strong_count() > 0);
    if let Some(live) = sources.get(&key).and_then(Weak::upgrade) {
        return live;
    }
    let source = Arc::new(Source {
        label: format!("cluster {}", cluster.alias),
        kind,
        state: Mutex::new(State::default()),
        clients: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(0),
    });
    sources.insert(key, Arc::downgrade(&source));
    let weak = Arc::downgrade(&source);
    let spawned = std::thread::Builder::new()
        .name(format!("oauth-{}", cluster.alias))
        .spawn(move || refresher(weak));
    if let Err(e) = spawned {
        warn!(cluster = %cluster.alias, "cannot start the OAUTHBEARER token refresher: {e}; tokens will not be refreshed");
    }
    source
}

/// Refreshes the source's token when due, until the source is gone.
fn refresher(source: Weak<Source>) {
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let Some(source) = source.upgrade() else {
            return;
        };
        let due = {
            let state = lock(&source.state);
            match &state.token {
                Some(t) => now_ms() >= t.refresh_at_ms().max(state.retry_at_ms),
                None => false,
            }
        };
        if due {
            source.refresh();
        }
    }
}

impl Source {
    /// Fetches a token unless there is one that has not expired.
    fn ensure_token(&self) -> Result<()> {
        let fresh = lock(&self.state)
            .token
            .as_ref()
            .is_some_and(|t| t.expiry_ms > now_ms() + 1_000);
        if fresh {
            return Ok(());
        }
        let token = self.fetch()?;
        info!(
            cluster = %self.label,
            principal = %token.principal,
            "OAUTHBEARER token obtained for {}, valid for {} s",
            self.label,
            (token.expiry_ms - now_ms()) / 1000
        );
        let mut state = lock(&self.state);
        state.token = Some(token);
        state.failures = 0;
        Ok(())
    }

    /// Fetches a new token and hands it to every registered client; on failure keeps the old
    /// one and tries again in a few seconds (logged once per run of failures).
    fn refresh(&self) {
        match self.fetch() {
            Ok(token) => {
                let failures = {
                    let mut state = lock(&self.state);
                    let failures = state.failures;
                    state.token = Some(token.clone());
                    state.failures = 0;
                    state.retry_at_ms = 0;
                    failures
                };
                let clients = lock(&self.clients);
                for native in clients.values() {
                    if let Err(e) = set_token(native.0, &token) {
                        warn!(
                            "{}: librdkafka refused the refreshed OAUTHBEARER token: {e:#}",
                            self.label
                        );
                    }
                }
                let valid_s = (token.expiry_ms - now_ms()) / 1000;
                if failures > 0 {
                    info!(
                        "{}: OAUTHBEARER token refreshed after {failures} failed attempts, valid for {valid_s} s, handed to {} clients",
                        self.label,
                        clients.len()
                    );
                } else {
                    debug!(
                        "{}: OAUTHBEARER token refreshed, valid for {valid_s} s, handed to {} clients",
                        self.label,
                        clients.len()
                    );
                }
            }
            Err(e) => {
                let mut state = lock(&self.state);
                state.failures += 1;
                state.retry_at_ms = now_ms() + RETRY.as_millis() as i64;
                let left_s = state
                    .token
                    .as_ref()
                    .map_or(0, |t| (t.expiry_ms - now_ms()) / 1000);
                if state.failures == 1 {
                    warn!(
                        "{}: cannot refresh the OAUTHBEARER token (the current one expires in {left_s} s; retrying every {} s): {e:#}",
                        self.label,
                        RETRY.as_secs()
                    );
                } else {
                    debug!(
                        "{}: OAUTHBEARER token refresh attempt {} failed: {e:#}",
                        self.label, state.failures
                    );
                }
            }
        }
    }

    fn fetch(&self) -> Result<Token> {
        match &self.kind {
            Kind::Oidc(oidc) => fetch_oidc(&self.label, oidc),
            Kind::Static(cluster) => {
                let value = cluster
                    .read_static_oauth_token()
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .with_context(|| format!("{}: no static token", self.label))?;
                let claims = claims(&value, "sub");
                let now = now_ms();
                Ok(Token {
                    value: value.trim().to_string(),
                    expiry_ms: claims.exp_ms.unwrap_or(now + 86_400_000),
                    principal: claims.sub.unwrap_or_else(|| "refract".into()),
                    extensions: Vec::new(),
                    fetched_ms: now,
                })
            }
        }
    }
}

/// A token from `oidc`'s endpoint with the client-credentials grant (RFC 6749 §4.4): client id
/// and secret in HTTP Basic authentication, as librdkafka's own OIDC client sends them.
fn fetch_oidc(label: &str, oidc: &Oidc) -> Result<Token> {
    let endpoint = &oidc.token_endpoint;
    let agent = agent(oidc).with_context(|| format!("{label}: OIDC token endpoint {endpoint}"))?;
    let basic = openssl::base64::encode_block(
        format!("{}:{}", oidc.client_id, oidc.client_secret).as_bytes(),
    );
    let mut form = vec![("grant_type", refract_config::OIDC_GRANT)];
    if let Some(scope) = &oidc.scope {
        form.push(("scope", scope.as_str()));
    }
    let fetched_ms = now_ms();
    let response = agent
        .post(endpoint)
        .set("Authorization", &format!("Basic {basic}"))
        .set("Accept", "application/json")
        .send_form(&form);
    let body = match response {
        Ok(r) => r.into_string().with_context(|| {
            format!("{label}: reading the reply of OIDC token endpoint {endpoint}")
        })?,
        Err(ureq::Error::Status(code, r)) => {
            let body = r.into_string().unwrap_or_default();
            anyhow::bail!(
                "{label}: OIDC token endpoint {endpoint} refused client `{}`: HTTP {code}{}",
                oidc.client_id,
                oauth_error(&body)
            );
        }
        Err(ureq::Error::Transport(t)) => {
            anyhow::bail!("{label}: cannot reach OIDC token endpoint {endpoint}: {t}");
        }
    };
    token_from_reply(&body, oidc, fetched_ms)
        .with_context(|| format!("{label}: the reply of OIDC token endpoint {endpoint}"))
}

/// `: invalid_client (bad secret)` from an RFC 6749 §5.2 error body, or the body's start.
fn oauth_error(body: &str) -> String {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(body) {
        let error = json.get("error").and_then(|v| v.as_str());
        let description = json.get("error_description").and_then(|v| v.as_str());
        match (error, description) {
            (Some(e), Some(d)) => return format!(": {e} ({d})"),
            (Some(e), None) => return format!(": {e}"),
            _ => {}
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return String::new();
    }
    let cut: String = body.chars().take(BODY_CAP).collect();
    format!(": {cut}")
}

/// The token in a successful reply: `access_token`, its expiry from the JWT's `exp` or the
/// reply's `expires_in`, its principal from the JWT's subject claim or the client id.
fn token_from_reply(body: &str, oidc: &Oidc, fetched_ms: i64) -> Result<Token> {
    let json: serde_json::Value = serde_json::from_str(body).context("not JSON")?;
    let value = json
        .get("access_token")
        .and_then(|v| v.as_str())
        .filter(|t| !t.trim().is_empty())
        .context("no access_token")?
        .trim()
        .to_string();
    let claims = claims(&value, &oidc.sub_claim);
    let expires_in = json.get("expires_in").and_then(|v| {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    });
    let expiry_ms = match (claims.exp_ms, expires_in) {
        (Some(exp), _) => exp,
        (None, Some(s)) => fetched_ms + s * 1000,
        (None, None) => anyhow::bail!("the token has no `exp` claim and the reply no expires_in"),
    };
    if expiry_ms <= now_ms() {
        anyhow::bail!("the token has already expired");
    }
    Ok(Token {
        value,
        expiry_ms,
        principal: claims.sub.unwrap_or_else(|| oidc.client_id.clone()),
        extensions: oidc.extensions.clone(),
        fetched_ms,
    })
}

/// An HTTP client for the token endpoint: TLS through the OpenSSL librdkafka links, checking
/// the endpoint's certificate against the system's CAs plus `https.ca.location`/`https.ca.pem`.
fn agent(oidc: &Oidc) -> Result<ureq::Agent> {
    let mut tls = native_tls::TlsConnector::builder();
    let mut pems = Vec::new();
    if let Some(path) = &oidc.ca_location {
        pems.push(
            std::fs::read(path).with_context(|| format!("reading https.ca.location {path}"))?,
        );
    }
    if let Some(pem) = &oidc.ca_pem {
        pems.push(pem.as_bytes().to_vec());
    }
    for pem in pems {
        let certs = openssl::x509::X509::stack_from_pem(&pem).context("the CA PEM")?;
        for cert in certs {
            let der = cert.to_der().context("the CA certificate")?;
            tls.add_root_certificate(
                native_tls::Certificate::from_der(&der).context("the CA certificate")?,
            );
        }
    }
    let tls = tls.build().context("TLS setup")?;
    Ok(ureq::AgentBuilder::new()
        .tls_connector(Arc::new(tls))
        .timeout(FETCH_TIMEOUT)
        .build())
}

/// The claims refract reads from a JWT.
#[derive(Debug, Default, PartialEq, Eq)]
struct Claims {
    exp_ms: Option<i64>,
    sub: Option<String>,
}

/// `exp` and the subject claim of a JWT; nothing for an opaque token.
fn claims(token: &str, sub_claim: &str) -> Claims {
    let Some(payload) = token.trim().split('.').nth(1) else {
        return Claims::default();
    };
    let mut b64 = payload.replace('-', "+").replace('_', "/");
    while b64.len() % 4 != 0 {
        b64.push('=');
    }
    let Ok(bytes) = openssl::base64::decode_block(&b64) else {
        return Claims::default();
    };
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Claims::default();
    };
    Claims {
        exp_ms: json
            .get("exp")
            .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
            .map(|s| s * 1000),
        sub: json
            .get(sub_claim)
            .and_then(|v| v.as_str())
            .map(str::to_string),
    }
}

/// `rd_kafka_oauthbearer_set_token`.
fn set_token(native: *mut rdkafka_sys::rd_kafka_t, token: &Token) -> Result<()> {
    let c = |s: &str, what: &str| {
        CString::new(s).with_context(|| format!("the token's {what} holds a NUL byte"))
    };
    let value = c(&token.value, "value")?;
    let principal = c(&token.principal, "principal")?;
    let mut extensions = Vec::new();
    for (k, v) in &token.extensions {
        extensions.push(c(k, "extension")?);
        extensions.push(c(v, "extension")?);
    }
    let mut pointers: Vec<*const std::os::raw::c_char> =
        extensions.iter().map(|s| s.as_ptr()).collect();
    let mut errstr = [0 as std::os::raw::c_char; 512];
    // SAFETY: the handle is live for the call (see `Native`); librdkafka copies the strings.
    let code = unsafe {
        rdkafka_sys::rd_kafka_oauthbearer_set_token(
            native,
            value.as_ptr(),
            token.expiry_ms,
            principal.as_ptr(),
            if pointers.is_empty() {
                std::ptr::null_mut()
            } else {
                pointers.as_mut_ptr()
            },
            pointers.len(),
            errstr.as_mut_ptr(),
            errstr.len(),
        )
    };
    if code != rdkafka_sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        // SAFETY: librdkafka NUL-terminates errstr.
        let why = unsafe { std::ffi::CStr::from_ptr(errstr.as_ptr()) }.to_string_lossy();
        anyhow::bail!("{why} (is `sasl.mechanism` OAUTHBEARER?)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oidc() -> Oidc {
        Oidc {
            token_endpoint: "https://idp/token".into(),
            client_id: "refract".into(),
            client_secret: "s3cret".into(),
            scope: None,
            extensions: vec![("tenant".into(), "t1".into())],
            ca_location: None,
            ca_pem: None,
            sub_claim: "sub".into(),
        }
    }

    #[test]
    fn claims_come_from_the_jwt() {
        // {"alg":"none"} . {"sub":"mirror","exp":2000000000}
        let jwt = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJtaXJyb3IiLCJleHAiOjIwMDAwMDAwMDB9.";
        assert_eq!(
            claims(jwt, "sub"),
            Claims {
                exp_ms: Some(2_000_000_000_000),
                sub: Some("mirror".into())
            }
        );
        assert_eq!(claims(jwt, "azp").sub, None);
        assert_eq!(claims("opaque-token", "sub"), Claims::default());
    }

    #[test]
    fn a_reply_gives_token_expiry_and_principal() {
        let jwt = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJtaXJyb3IiLCJleHAiOjIwMDAwMDAwMDB9.";
        let now = now_ms();
        let t = token_from_reply(
            &format!(r#"{{"access_token":"{jwt}","token_type":"bearer","expires_in":60}}"#),
            &oidc(),
            now,
        )
        .expect("token");
        assert_eq!(
            (t.expiry_ms, t.principal.as_str()),
            (2_000_000_000_000, "mirror")
        );
        assert_eq!(t.extensions, vec![("tenant".to_string(), "t1".to_string())]);
        // Opaque: expires_in and the client id.
        let t = token_from_reply(r#"{"access_token":"abc","expires_in":"60"}"#, &oidc(), now)
            .expect("token");
        assert_eq!(
            (t.expiry_ms, t.principal.as_str()),
            (now + 60_000, "refract")
        );
        assert_eq!(t.refresh_at_ms(), now + 48_000);
        for (body, err) in [
            ("<html>", "not JSON"),
            (r#"{"token_type":"bearer"}"#, "no access_token"),
            (r#"{"access_token":"abc"}"#, "no `exp` claim"),
            (
                r#"{"access_token":"abc","expires_in":-5}"#,
                "already expired",
            ),
        ] {
            let e = token_from_reply(body, &oidc(), now).expect_err(body);
            assert!(format!("{e:#}").contains(err), "{e:#}");
        }
    }

    #[test]
    fn error_replies_are_summarised() {
        assert_eq!(
            oauth_error(r#"{"error":"invalid_client","error_description":"bad secret"}"#),
            ": invalid_client (bad secret)"
        );
        assert_eq!(
            oauth_error(r#"{"error":"invalid_scope"}"#),
            ": invalid_scope"
        );
        assert_eq!(oauth_error(""), "");
        assert_eq!(oauth_error(&"x".repeat(1000)).len(), 2 + BODY_CAP);
    }

    #[test]
    fn the_token_is_not_in_its_debug() {
        let t = Token {
            value: "secret-token".into(),
            expiry_ms: 1,
            principal: "p".into(),
            extensions: vec![],
            fetched_ms: 0,
        };
        assert!(!format!("{t:?}").contains("secret-token"));
    }
}
