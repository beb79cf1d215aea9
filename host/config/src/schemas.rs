//! Schema registries and schema translation: `[clusters.<alias>.schema_registry]` and a flow's
//! `schemas*` keys, as the pipeline model keeps them (built and checked in `model::schemas`).

use std::path::PathBuf;
use std::time::Duration;

use crate::flow::OnError;
use crate::secrets::{Resolver, Value};

/// Defaults of the schema keys.
pub mod schema_defaults {
    use std::time::Duration;

    /// `[clusters.<alias>.schema_registry] timeout`: one HTTP request's bound.
    pub const TIMEOUT: Duration = Duration::from_secs(10);
    /// A flow's `schema_sync_interval`: how often the subjects of its topics are copied.
    pub const SYNC_INTERVAL: Duration = Duration::from_secs(300);
}

/// `[clusters.<alias>.schema_registry]`: a Confluent-compatible schema registry (Confluent
/// Schema Registry, Apicurio's `/apis/ccompat/v7`, Karapace, Redpanda).
///
/// `Debug` never shows the password or the token: references as written, literals as
/// `[redacted]`; [`SchemaRegistry::basic_auth`] and [`SchemaRegistry::bearer_token`] give them.
#[derive(Clone, PartialEq, Eq)]
pub struct SchemaRegistry {
    /// The base URL, references resolved, without a trailing `/`.
    pub url: String,
    url_written: Option<String>,
    user: Option<Value>,
    password: Option<Value>,
    token: Option<Value>,
    /// `ca`: PEM file of the CAs the registry's certificate is checked against (besides the
    /// system's).
    pub ca: Option<PathBuf>,
    /// `cert`: PEM client certificate (chain) for mutual TLS; with `key`.
    pub cert: Option<PathBuf>,
    /// `key`: PEM (PKCS#8) private key of `cert`.
    pub key: Option<PathBuf>,
    /// One request's bound (connect, send and read).
    pub timeout: Duration,
    /// Where `${file:…}` references of relative paths start (the pipeline file's folder), to
    /// read the credentials again.
    base: PathBuf,
}

impl std::fmt::Debug for SchemaRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaRegistry")
            .field("url", &self.url_shown())
            .field("user", &self.user.as_ref().map(|u| u.shown("user")))
            .field(
                "password",
                &self.password.as_ref().map(|p| p.shown("password")),
            )
            .field("token", &self.token.as_ref().map(|t| t.shown("token")))
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl SchemaRegistry {
    pub(crate) fn new(url: Value, auth: RegistryAuth, tls: RegistryTls, timeout: Duration) -> Self {
        let (user, password, token) = match auth {
            RegistryAuth::None => (None, None, None),
            RegistryAuth::Basic { user, password } => (Some(user), Some(password), None),
            RegistryAuth::Bearer(token) => (None, None, Some(token)),
        };
        Self {
            url: url.resolved.trim_end_matches('/').to_string(),
            url_written: url.written,
            user,
            password,
            token,
            ca: tls.ca,
            cert: tls.cert,
            key: tls.key,
            timeout,
            base: PathBuf::new(),
        }
    }

    /// The same registry, its relative `${file:…}` references starting at `base`.
    pub(crate) fn with_base(mut self, base: PathBuf) -> Self {
        self.base = base;
        self
    }

    /// The registry with its credentials read again from their references (`${file:…}`,
    /// `${env:…}`): a token or password rotated in its file since the pipeline was loaded.
    /// `Ok(None)` when no credential holds a reference, so none can have changed. The error
    /// names the reference, never a value.
    pub fn credentials_again(&self) -> Result<Option<SchemaRegistry>, String> {
        let referenced = [&self.user, &self.password, &self.token]
            .iter()
            .any(|v| v.as_ref().is_some_and(|v| v.written.is_some()));
        if !referenced {
            return Ok(None);
        }
        let env = |name: &str| std::env::var(name);
        let resolver = Resolver {
            base: &self.base,
            env: &env,
        };
        let again = |v: &Option<Value>| -> Result<Option<Value>, String> {
            match v.as_ref().and_then(|v| v.written.as_deref()) {
                Some(written) => resolver.resolve(written).map(Some),
                None => Ok(v.clone()),
            }
        };
        let mut fresh = self.clone();
        fresh.user = again(&self.user)?;
        fresh.password = again(&self.password)?;
        fresh.token = again(&self.token)?;
        Ok(Some(fresh))
    }

    /// The URL as it may be shown: as written when it held references.
    pub fn url_shown(&self) -> String {
        self.url_written.clone().unwrap_or_else(|| self.url.clone())
    }

    /// `user` and `password`, resolved: never log them.
    pub fn basic_auth(&self) -> Option<(&str, &str)> {
        match (&self.user, &self.password) {
            (Some(u), Some(p)) => Some((u.resolved.as_str(), p.resolved.as_str())),
            _ => None,
        }
    }

    /// `token` (sent as `Authorization: Bearer`), resolved: never log it.
    pub fn bearer_token(&self) -> Option<&str> {
        self.token.as_ref().map(|t| t.resolved.as_str())
    }
}

/// How refract authenticates to a registry.
pub(crate) enum RegistryAuth {
    None,
    Basic { user: Value, password: Value },
    Bearer(Value),
}

/// A registry's TLS files.
#[derive(Default)]
pub(crate) struct RegistryTls {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// A flow's `schemas`: whether records framed for a schema registry are translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaMode {
    /// Keys and values are copied as bytes (schema ids included).
    Off,
    /// Schema ids are translated to the target registry's, the schemas registered there.
    Translate,
}

impl SchemaMode {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "off" => Some(Self::Off),
            "translate" => Some(Self::Translate),
            _ => None,
        }
    }
}

/// A flow's `schema_subjects`: which source subjects are renamed on the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectNaming {
    /// Subjects of the topic strategies (`<topic>-key`, `<topic>-value`, `<topic>-<record>`)
    /// follow the topic's remote name; other subjects keep their names.
    Topic,
    /// As `Topic`, and every other subject is renamed by the replication policy as if it were a
    /// topic name.
    All,
}

impl SubjectNaming {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "topic" => Some(Self::Topic),
            "all" => Some(Self::All),
            _ => None,
        }
    }
}

/// A flow's schema settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaSettings {
    /// `schemas`.
    pub mode: SchemaMode,
    /// `schema_fields` holds `key`: keys are translated.
    pub keys: bool,
    /// `schema_fields` holds `value`: values are translated.
    pub values: bool,
    /// `schema_on_error`: what happens to a record that can never be translated (its id is
    /// unknown to the source registry, or the target registry refuses its schema).
    pub on_error: OnError,
    /// `schema_subjects`.
    pub subjects: SubjectNaming,
    /// `schema_sync_interval`: how often the subjects of the flow's topics are copied.
    pub sync_interval: Duration,
}

impl Default for SchemaSettings {
    fn default() -> Self {
        Self {
            mode: SchemaMode::Off,
            keys: true,
            values: true,
            on_error: OnError::Stop,
            subjects: SubjectNaming::Topic,
            sync_interval: schema_defaults::SYNC_INTERVAL,
        }
    }
}

impl SchemaSettings {
    /// Whether the flow translates schema ids.
    pub fn translate(&self) -> bool {
        self.mode == SchemaMode::Translate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_password_or_the_token() {
        let r = SchemaRegistry::new(
            Value::literal("https://r:8081/".into()),
            RegistryAuth::Basic {
                user: Value::literal("mirror".into()),
                password: Value::literal("hunter2-secret".into()),
            },
            RegistryTls::default(),
            schema_defaults::TIMEOUT,
        );
        let shown = format!("{r:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("mirror"), "{shown}");
        assert_eq!(r.url, "https://r:8081");
        assert_eq!(r.basic_auth(), Some(("mirror", "hunter2-secret")));
        let t = SchemaRegistry::new(
            Value::literal("http://r".into()),
            RegistryAuth::Bearer(Value::literal("tok-123456".into())),
            RegistryTls::default(),
            schema_defaults::TIMEOUT,
        );
        assert!(!format!("{t:?}").contains("tok-123456"));
        assert_eq!(t.bearer_token(), Some("tok-123456"));
    }
}
