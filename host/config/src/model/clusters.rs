//! `[clusters.<alias>]`: one Kafka cluster, its client settings (with their `${…}` references
//! resolved and shown redacted) and its static OAUTHBEARER token, and the builder steps that
//! check them. Split from the pipeline model so the client-settings rules live in one place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::Builder;
use crate::error::ConfigError;
use crate::raw::{RawCluster, RawOAuthBearer};
use crate::rules::{check_alias, RESERVED_CLIENT_KEYS};
use crate::secrets::{self, Resolver, Value};

/// One Kafka cluster and how to reach it.
///
/// Client settings may hold secrets: `Debug` shows values that came from `${env:…}` /
/// `${file:…}` references as written and literal values of sensitive keys
/// ([`crate::is_sensitive_key`]) as `[redacted]`; only [`Cluster::client_config`] and
/// [`Cluster::static_oauth_token`] give the resolved values.
#[derive(Clone, PartialEq, Eq)]
pub struct Cluster {
    /// The alias used in flows and remote topic names.
    pub alias: String,
    /// `bootstrap.servers`, references resolved.
    pub bootstrap: String,
    /// `bootstrap` as written, when it held references.
    bootstrap_written: Option<String>,
    client: BTreeMap<String, Value>,
    consumer: BTreeMap<String, Value>,
    producer: BTreeMap<String, Value>,
    admin: BTreeMap<String, Value>,
    oauthbearer_token: Option<StaticToken>,
    /// `[clusters.<alias>.schema_registry]`: its schema registry, if it has one.
    pub schema_registry: Option<crate::SchemaRegistry>,
}

/// `[clusters.<alias>.oauthbearer] token`: resolved, and how to read it again.
#[derive(Clone, PartialEq, Eq)]
struct StaticToken {
    value: Value,
    /// The pipeline file and key, for errors when it is read again.
    file: PathBuf,
    key: String,
    /// The pipeline file's folder: relative `${file:…}` paths start there.
    base: PathBuf,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |table: &BTreeMap<String, Value>| -> BTreeMap<String, String> {
            table.iter().map(|(k, v)| (k.clone(), v.shown(k))).collect()
        };
        f.debug_struct("Cluster")
            .field("alias", &self.alias)
            .field("bootstrap", &self.bootstrap_shown())
            .field("client", &shown(&self.client))
            .field("consumer", &shown(&self.consumer))
            .field("producer", &shown(&self.producer))
            .field("admin", &shown(&self.admin))
            // `Value`'s Debug shows the reference as written or `[redacted]`, never the token.
            .field(
                "oauthbearer_token",
                &self.oauthbearer_token.as_ref().map(|t| &t.value),
            )
            .field("schema_registry", &self.schema_registry)
            .finish()
    }
}

/// Which kind of client a librdkafka configuration is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRole {
    /// Reads records.
    Consumer,
    /// Writes records.
    Producer,
    /// Creates topics, reads metadata.
    Admin,
}

impl Cluster {
    /// librdkafka properties for a client of `role`: bootstrap, then `client`, then the
    /// role's own table (later wins). References are resolved: these values may be secrets, so
    /// never log them; [`Cluster::display_settings`] is for showing.
    /// With OIDC (`sasl.oauthbearer.method = "oidc"`), the OIDC settings are left out: refract
    /// fetches the token itself ([`Cluster::oidc`]).
    pub fn client_config(&self, role: ClientRole) -> BTreeMap<String, String> {
        let mut out = self.merged(role);
        if crate::oidc::is_oidc(&out) {
            out.retain(|k, _| !crate::oidc::is_oidc_key(k));
        }
        out
    }

    /// How clients of `role` fetch an OIDC token, when their settings ask for OIDC
    /// (validated when the pipeline was loaded).
    pub fn oidc(&self, role: ClientRole) -> Option<crate::Oidc> {
        crate::oidc::from_settings(&self.merged(role))
            .ok()
            .flatten()
    }

    fn merged(&self, role: ClientRole) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        out.insert("bootstrap.servers".to_string(), self.bootstrap.clone());
        for (k, v) in self.client.iter().chain(self.role_table(role)) {
            out.insert(k.clone(), v.resolved.clone());
        }
        out
    }

    /// The same settings as [`Cluster::client_config`], safe to show in logs and status output:
    /// values that came from references as written (e.g. `${env:KAFKA_PASS}`), literal values of
    /// sensitive keys ([`crate::is_sensitive_key`]) as `[redacted]`, the rest as they are.
    pub fn display_settings(&self, role: ClientRole) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        out.insert("bootstrap.servers".to_string(), self.bootstrap_shown());
        for (k, v) in self.client.iter().chain(self.role_table(role)) {
            out.insert(k.clone(), v.shown(k));
        }
        out
    }

    /// The static OAUTHBEARER token of `[clusters.<alias>.oauthbearer] token`, resolved when
    /// the pipeline was loaded: what refract hands every client of the cluster as its token
    /// (`rd_kafka_oauthbearer_set_token`, see refract-kafka's `oauth`).
    pub fn static_oauth_token(&self) -> Option<&str> {
        self.oauthbearer_token
            .as_ref()
            .map(|t| t.value.resolved.as_str())
    }

    /// Reads the static OAUTHBEARER token again, resolving its references now (a token file
    /// that an agent rotates): for each token refresh. `Ok(None)` when the cluster has none.
    /// The error names the pipeline file, the key and the reference, never the token.
    pub fn read_static_oauth_token(&self) -> Result<Option<String>, ConfigError> {
        let Some(token) = &self.oauthbearer_token else {
            return Ok(None);
        };
        let Some(written) = &token.value.written else {
            return Ok(Some(token.value.resolved.clone()));
        };
        let env = |name: &str| std::env::var(name);
        let resolver = Resolver {
            base: &token.base,
            env: &env,
        };
        let error = |message: String| ConfigError {
            file: token.file.clone(),
            line: None,
            key: token.key.clone(),
            message,
        };
        let value = resolver.resolve(written).map_err(error)?;
        if value.resolved.trim().is_empty() {
            return Err(error("the token is empty".into()));
        }
        Ok(Some(value.resolved))
    }

    fn role_table(&self, role: ClientRole) -> &BTreeMap<String, Value> {
        match role {
            ClientRole::Consumer => &self.consumer,
            ClientRole::Producer => &self.producer,
            ClientRole::Admin => &self.admin,
        }
    }

    fn bootstrap_shown(&self) -> String {
        self.bootstrap_written
            .clone()
            .unwrap_or_else(|| self.bootstrap.clone())
    }
}

impl Builder<'_> {
    pub(super) fn cluster(
        &self,
        alias: &Spanned<String>,
        raw: Spanned<RawCluster>,
    ) -> Result<Cluster, ConfigError> {
        let name = alias.get_ref().clone();
        let alias_span = alias.span();
        let key = format!("clusters.{name}");
        if let Err(problem) = check_alias(&name) {
            return self.err(alias.span(), key, problem.into());
        }
        let raw = raw.into_inner();
        let bootstrap = self.resolve(
            raw.bootstrap.span(),
            &format!("{key}.bootstrap"),
            raw.bootstrap.get_ref(),
        )?;
        if bootstrap.resolved.trim().is_empty() {
            return self.err(
                raw.bootstrap.span(),
                format!("{key}.bootstrap"),
                "bootstrap is empty; give host:port[,host:port]".into(),
            );
        }
        let raw_token_span = raw.oauthbearer.as_ref().map(|t| t.get_ref().token.span());
        let oauthbearer_token = match raw.oauthbearer {
            None => None,
            Some(table) => Some(self.static_token(&key, table.into_inner())?),
        };
        let schema_registry = match raw.schema_registry {
            None => None,
            Some(table) => Some(self.schema_registry(&key, table)?),
        };
        let cluster = Cluster {
            alias: name,
            bootstrap: bootstrap.resolved,
            bootstrap_written: bootstrap.written,
            client: self.client_table(&format!("{key}.client"), raw.client)?,
            consumer: self.client_table(&format!("{key}.consumer"), raw.consumer)?,
            producer: self.client_table(&format!("{key}.producer"), raw.producer)?,
            admin: self.client_table(&format!("{key}.admin"), raw.admin)?,
            oauthbearer_token,
            schema_registry,
        };
        self.check_static_token(&key, &cluster, raw_token_span)?;
        for (role, table) in [
            (ClientRole::Consumer, "consumer"),
            (ClientRole::Producer, "producer"),
            (ClientRole::Admin, "admin"),
        ] {
            if let Err(problem) = crate::oidc::from_settings(&cluster.merged(role)) {
                return Err(self.loc.error(
                    Some(alias_span.clone()),
                    format!("{key}.client"),
                    format!("OIDC settings of the cluster's {table} clients: {problem}"),
                ));
            }
        }
        Ok(cluster)
    }

    /// `[clusters.<alias>.oauthbearer]`.
    fn static_token(&self, key: &str, raw: RawOAuthBearer) -> Result<StaticToken, ConfigError> {
        let key = format!("{key}.oauthbearer.token");
        let value = self.resolve(raw.token.span(), &key, raw.token.get_ref())?;
        if value.resolved.trim().is_empty() {
            return self.err(raw.token.span(), key, "the token is empty".into());
        }
        Ok(StaticToken {
            value,
            file: self.loc.file.clone(),
            key,
            base: self.base.clone(),
        })
    }

    /// A static token is what refract hands every client as its OAUTHBEARER token: every
    /// client of the cluster must use OAUTHBEARER, and not librdkafka's own token sources.
    fn check_static_token(
        &self,
        key: &str,
        cluster: &Cluster,
        span: Option<std::ops::Range<usize>>,
    ) -> Result<(), ConfigError> {
        if cluster.oauthbearer_token.is_none() {
            return Ok(());
        }
        let key = format!("{key}.oauthbearer.token");
        for role in [
            ClientRole::Consumer,
            ClientRole::Producer,
            ClientRole::Admin,
        ] {
            let cfg = cluster.client_config(role);
            let mechanisms: Vec<&String> = ["sasl.mechanism", "sasl.mechanisms"]
                .iter()
                .filter_map(|k| cfg.get(*k))
                .collect();
            if mechanisms.is_empty()
                || !mechanisms
                    .iter()
                    .all(|m| m.trim().eq_ignore_ascii_case("OAUTHBEARER"))
            {
                return Err(self.loc.error(
                    span,
                    key,
                    format!(
                        "a static OAUTHBEARER token needs \"sasl.mechanism\" = \"OAUTHBEARER\" for every client: set it in [clusters.{}.client]",
                        cluster.alias
                    ),
                ));
            }
            let oidc = cfg
                .get("sasl.oauthbearer.method")
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("oidc"));
            let unsecure = cfg
                .get("enable.sasl.oauthbearer.unsecure.jwt")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
            if oidc || unsecure {
                let other = if oidc {
                    "sasl.oauthbearer.method = \"oidc\""
                } else {
                    "enable.sasl.oauthbearer.unsecure.jwt = true"
                };
                return Err(self.loc.error(
                    span,
                    key,
                    format!(
                        "a static token and {other} both supply the OAUTHBEARER token; keep one"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn client_table(
        &self,
        key: &str,
        table: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    ) -> Result<BTreeMap<String, Value>, ConfigError> {
        let mut out = BTreeMap::new();
        for (k, v) in table {
            let name = k.get_ref().clone();
            let full = format!("{key}.\"{name}\"");
            if RESERVED_CLIENT_KEYS.contains(&name.as_str()) {
                let hint = if name == "bootstrap.servers" {
                    "set the cluster's `bootstrap` instead"
                } else {
                    "refract sets it itself (idempotent producer, acks=all, manual commits)"
                };
                return self.err(
                    k.span(),
                    full,
                    format!("`{name}` cannot be set here: {hint}"),
                );
            }
            let java_only = match name.as_str() {
                "sasl.jaas.config" => Some("librdkafka takes SASL credentials as \"sasl.username\" and \"sasl.password\" (PLAIN, SCRAM), \"sasl.oauthbearer.*\" settings or [clusters.<alias>.oauthbearer] token (OAUTHBEARER), \"sasl.kerberos.*\" settings (GSSAPI); `refract convert` translates an MM2 file's login module"),
                "ssl.keystore.type" => Some("librdkafka reads a PKCS#12 file from \"ssl.keystore.location\", or PEM from \"ssl.certificate.location\" and \"ssl.key.location\"; remove it"),
                _ => None,
            };
            if let Some(hint) = java_only {
                return self.err(
                    k.span(),
                    full,
                    format!("`{name}` is a Java client setting; {hint}"),
                );
            }
            if name.starts_with("ssl.truststore.") {
                let mut hint = "librdkafka has no trust stores: set \"ssl.ca.location\" to a PEM file of the CA certificates (or \"ssl.ca.pem\" to the PEM text)".to_string();
                if name == "ssl.truststore.location" {
                    if let toml::Value::String(path) = v.get_ref() {
                        let path = self.resolve(v.span(), &full, path)?.resolved;
                        if secrets::is_jks(Path::new(&path)) {
                            hint = secrets::truststore_hint(&path);
                        }
                    }
                }
                return self.err(
                    k.span(),
                    full,
                    format!("`{name}` is a Java client setting; {hint}"),
                );
            }
            let span = v.span();
            let value = match v.into_inner() {
                toml::Value::String(s) => self.resolve(span.clone(), &full, &s)?,
                toml::Value::Integer(n) => Value::literal(n.to_string()),
                toml::Value::Float(n) => Value::literal(n.to_string()),
                toml::Value::Boolean(b) => Value::literal(b.to_string()),
                other => {
                    return self.err(
                        span,
                        full,
                        format!(
                            "librdkafka properties are strings, numbers or booleans, not {}",
                            other.type_str()
                        ),
                    );
                }
            };
            let store = match name.as_str() {
                "ssl.keystore.location" => Some(secrets::keystore_hint as fn(&str) -> String),
                "ssl.ca.location" => Some(secrets::truststore_hint as fn(&str) -> String),
                _ => None,
            };
            if let Some(hint) = store {
                // as librdkafka opens it: relative to the working directory
                if secrets::is_jks(Path::new(&value.resolved)) {
                    return self.err(
                        span,
                        full,
                        format!(
                            "`{}` is a Java KeyStore (JKS); {}",
                            value.resolved,
                            hint(&value.resolved)
                        ),
                    );
                }
            }
            out.insert(name, value);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Pipeline;
    use std::env::VarError;

    fn env(name: &str) -> Result<String, VarError> {
        match name {
            "KAFKA_PASS" => Ok("s3cr3t-env".into()),
            "BOOT" => Ok("k1:9093,k2:9093".into()),
            "USER" => Ok("alice".into()),
            _ => Err(VarError::NotPresent),
        }
    }

    const TAIL: &str =
        "[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";

    fn parse_in(dir: &Path, text: &str) -> Result<Pipeline, ConfigError> {
        Pipeline::parse_with_env(&dir.join("p.toml"), text, &env)
    }

    #[test]
    fn references_resolve_and_are_shown_as_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("key.pem"),
            "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("creds.properties"),
            "# kafka\nsasl.password=from-props\n",
        )
        .unwrap();
        let text = format!(
            "[clusters.a]\nbootstrap = \"${{env:BOOT}}\"\n[clusters.a.client]\n\"sasl.username\" = \"${{env:USER}}-svc\"\n\"sasl.password\" = \"${{env:KAFKA_PASS}}\"\n\"ssl.key.password\" = \"literal-pass\"\n\"socket.timeout.ms\" = 3000\n[clusters.a.consumer]\n\"ssl.key.pem\" = \"${{file:key.pem}}\"\n[clusters.a.producer]\n\"sasl.password\" = \"${{file:{}:sasl.password}}\"\n{TAIL}",
            dir.path().join("creds.properties").display()
        );
        let p = parse_in(dir.path(), &text).unwrap();
        let a = &p.clusters["a"];
        assert_eq!(a.bootstrap, "k1:9093,k2:9093");
        let consumer = a.client_config(ClientRole::Consumer);
        assert_eq!(consumer["bootstrap.servers"], "k1:9093,k2:9093");
        assert_eq!(consumer["sasl.username"], "alice-svc");
        assert_eq!(consumer["sasl.password"], "s3cr3t-env");
        assert_eq!(consumer["ssl.key.password"], "literal-pass");
        assert_eq!(
            consumer["ssl.key.pem"],
            "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----"
        );
        assert_eq!(
            a.client_config(ClientRole::Producer)["sasl.password"],
            "from-props"
        );
        let shown = a.display_settings(ClientRole::Consumer);
        let want: BTreeMap<String, String> = [
            ("bootstrap.servers", "${env:BOOT}"),
            ("sasl.password", "${env:KAFKA_PASS}"),
            ("sasl.username", "${env:USER}-svc"),
            ("socket.timeout.ms", "3000"),
            ("ssl.key.password", "[redacted]"),
            ("ssl.key.pem", "${file:key.pem}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(shown, want);
        let debug = format!("{:?}", p.clusters["b"]);
        assert_eq!(
            debug,
            "Cluster { alias: \"b\", bootstrap: \"h:2\", client: {}, consumer: {}, producer: {}, admin: {}, oauthbearer_token: None, schema_registry: None }"
        );
        let debug = format!("{p:?}");
        for secret in ["s3cr3t-env", "literal-pass", "from-props", "abc", "alice"] {
            assert!(!debug.contains(secret), "{secret} in {debug}");
        }
        assert!(
            debug.contains("\"sasl.password\": \"${env:KAFKA_PASS}\""),
            "{debug}"
        );
        assert!(
            debug.contains("\"ssl.key.password\": \"[redacted]\""),
            "{debug}"
        );
    }

    #[test]
    fn reference_errors_name_file_line_key_and_reference_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        let head = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.client]\n";
        let cases = [
            (
                "\"sasl.password\" = \"${env:NOPE}\"",
                "clusters.a.client.\"sasl.password\"",
                "reference `${env:NOPE}`: environment variable `NOPE` is not set",
            ),
            (
                "\"sasl.password\" = \"pa${ss-word\"",
                "clusters.a.client.\"sasl.password\"",
                "unterminated `${`: a reference is `${env:NAME}`, `${file:/path}` or `${file:/path:key}`",
            ),
            (
                "\"sasl.password\" = \"${vault:kv/kafka}\"",
                "clusters.a.client.\"sasl.password\"",
                "reference `${vault:kv/kafka}`: unknown provider `vault`: refract resolves `${env:NAME}`, `${file:/path}` and `${file:/path:key}`",
            ),
            (
                "\"sasl.password\" = \"${env:KAFKA_PASS}${file:missing.txt}\"",
                "clusters.a.client.\"sasl.password\"",
                "reference `${file:missing.txt}`: cannot read `",
            ),
        ];
        for (line, key, message) in cases {
            let err = parse_in(dir.path(), &format!("{head}{line}\n{TAIL}")).unwrap_err();
            assert_eq!(err.file, file);
            assert_eq!(err.line, Some(4), "{err}");
            assert_eq!(err.key, key, "{err}");
            assert!(err.message.starts_with(message), "{err}");
            let shown = err.to_string();
            assert!(
                !shown.contains("s3cr3t-env") && !shown.contains("ss-word"),
                "{shown}"
            );
        }
        let err = parse_in(
            dir.path(),
            &format!("[clusters.a]\nbootstrap = \"${{env:NOPE}}\"\n{TAIL}"),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}:2: clusters.a.bootstrap: reference `${{env:NOPE}}`: environment variable `NOPE` is not set", file.display())
        );
    }

    #[test]
    fn java_key_stores_are_refused_with_a_conversion_hint() {
        let dir = tempfile::tempdir().unwrap();
        let disguised = dir.path().join("client.p12");
        std::fs::write(&disguised, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let pem = dir.path().join("ca.pem");
        std::fs::write(&pem, "-----BEGIN CERTIFICATE-----\n").unwrap();
        let head = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.client]\n";
        let d = disguised.display();
        let err = parse_in(
            dir.path(),
            &format!("{head}\"ssl.keystore.location\" = \"{d}\"\n{TAIL}"),
        )
        .unwrap_err();
        assert_eq!(err.key, "clusters.a.client.\"ssl.keystore.location\"");
        assert_eq!(err.line, Some(4));
        let p12 = dir.path().join("client.p12").with_extension("p12");
        assert_eq!(
            err.message,
            format!("`{d}` is a Java KeyStore (JKS); librdkafka cannot read Java KeyStores (JKS); convert it to PKCS#12 with `keytool -importkeystore -srckeystore {d} -destkeystore {} -deststoretype PKCS12`, then set ssl.keystore.location = \"{}\" and ssl.keystore.password", p12.display(), p12.display())
        );
        let err = parse_in(
            dir.path(),
            &format!("{head}[clusters.a.consumer]\n\"ssl.ca.location\" = \"/etc/kafka/trust.jks\"\n{TAIL}"),
        )
        .unwrap_err();
        assert_eq!(err.key, "clusters.a.consumer.\"ssl.ca.location\"");
        assert!(err.message.starts_with("`/etc/kafka/trust.jks` is a Java KeyStore (JKS); librdkafka has no trust stores and reads CA certificates from PEM; export them with `keytool -exportcert -rfc -alias <alias> -keystore /etc/kafka/trust.jks -file /etc/kafka/ca.pem`"), "{err}");
        let err = parse_in(
            dir.path(),
            &format!(
                "{head}\"ssl.truststore.location\" = \"{}\"\n{TAIL}",
                pem.display()
            ),
        )
        .unwrap_err();
        assert_eq!(err.key, "clusters.a.client.\"ssl.truststore.location\"");
        assert_eq!(err.message, "`ssl.truststore.location` is a Java client setting; librdkafka has no trust stores: set \"ssl.ca.location\" to a PEM file of the CA certificates (or \"ssl.ca.pem\" to the PEM text)");
        let err = parse_in(
            dir.path(),
            &format!("{head}\"ssl.truststore.location\" = \"{d}\"\n{TAIL}"),
        )
        .unwrap_err();
        assert!(err.message.starts_with("`ssl.truststore.location` is a Java client setting; librdkafka has no trust stores and reads CA certificates from PEM; export them with `keytool -exportcert"), "{err}");
        let err = parse_in(
            dir.path(),
            &format!("{head}\"ssl.truststore.password\" = \"x\"\n{TAIL}"),
        )
        .unwrap_err();
        assert_eq!(err.key, "clusters.a.client.\"ssl.truststore.password\"");
        for (key, hint) in [
            ("sasl.jaas.config", "`sasl.jaas.config` is a Java client setting; librdkafka takes SASL credentials as \"sasl.username\" and \"sasl.password\""),
            ("ssl.keystore.type", "`ssl.keystore.type` is a Java client setting; librdkafka reads a PKCS#12 file from \"ssl.keystore.location\""),
        ] {
            let err = parse_in(dir.path(), &format!("{head}\"{key}\" = \"x\"\n{TAIL}")).unwrap_err();
            assert_eq!(err.key, format!("clusters.a.client.\"{key}\""));
            assert_eq!(err.line, Some(4));
            assert!(err.message.starts_with(hint), "{err}");
        }
        // PEM and PKCS#12 files are fine.
        let p = parse_in(
            dir.path(),
            &format!("{head}\"ssl.ca.location\" = \"{}\"\n\"ssl.keystore.location\" = \"/etc/kafka/client.p12\"\n{TAIL}", pem.display()),
        )
        .unwrap();
        assert_eq!(
            p.clusters["a"].client_config(ClientRole::Admin)["ssl.keystore.location"],
            "/etc/kafka/client.p12"
        );
    }

    #[test]
    fn static_oauthbearer_token() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "eyJhbGciOi.first.sig\n").unwrap();
        let oauth = "[clusters.a.client]\n\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"OAUTHBEARER\"\n";
        let text = format!(
            "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.oauthbearer]\ntoken = \"${{file:token}}\"\n{oauth}{TAIL}"
        );
        let p = parse_in(dir.path(), &text).unwrap();
        let a = &p.clusters["a"];
        assert_eq!(a.static_oauth_token(), Some("eyJhbGciOi.first.sig"));
        assert_eq!(p.clusters["b"].static_oauth_token(), None);
        let debug = format!("{a:?}");
        assert!(
            debug.ends_with("oauthbearer_token: Some(\"${file:token}\"), schema_registry: None }"),
            "{debug}"
        );
        assert!(!debug.contains("first.sig"));
        assert!(!a
            .display_settings(ClientRole::Consumer)
            .values()
            .any(|v| v.contains("sig")));
        // A rotated token file is read again on demand.
        std::fs::write(&token, "eyJhbGciOi.second.sig\n").unwrap();
        assert_eq!(
            a.read_static_oauth_token().unwrap().as_deref(),
            Some("eyJhbGciOi.second.sig")
        );
        assert_eq!(a.static_oauth_token(), Some("eyJhbGciOi.first.sig"));
        std::fs::remove_file(&token).unwrap();
        let err = a.read_static_oauth_token().unwrap_err();
        assert_eq!(err.key, "clusters.a.oauthbearer.token");
        assert!(
            err.message
                .starts_with("reference `${file:token}`: cannot read"),
            "{err}"
        );
        std::fs::write(&token, "t\n").unwrap();
        // A literal token is redacted.
        let literal = format!("[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.oauthbearer]\ntoken = \"eyJ.literal\"\n{oauth}{TAIL}");
        let p = parse_in(dir.path(), &literal).unwrap();
        let debug = format!("{:?}", p.clusters["a"]);
        assert!(
            debug.ends_with("oauthbearer_token: Some(\"[redacted]\"), schema_registry: None }"),
            "{debug}"
        );
        assert_eq!(
            p.clusters["a"]
                .read_static_oauth_token()
                .unwrap()
                .as_deref(),
            Some("eyJ.literal")
        );

        let cases = [
            ("token = \"\"\n", oauth.to_string(), "clusters.a.oauthbearer.token", "the token is empty"),
            ("token = \"t\"\n", String::new(), "clusters.a.oauthbearer.token", "a static OAUTHBEARER token needs \"sasl.mechanism\" = \"OAUTHBEARER\" for every client: set it in [clusters.a.client]"),
            ("token = \"t\"\n", format!("{oauth}[clusters.a.admin]\n\"sasl.mechanism\" = \"PLAIN\"\n"), "clusters.a.oauthbearer.token", "a static OAUTHBEARER token needs \"sasl.mechanism\" = \"OAUTHBEARER\" for every client: set it in [clusters.a.client]"),
            ("token = \"t\"\n", format!("{oauth}\"enable.sasl.oauthbearer.unsecure.jwt\" = true\n"), "clusters.a.oauthbearer.token", "a static token and enable.sasl.oauthbearer.unsecure.jwt = true both supply the OAUTHBEARER token; keep one"),
        ];
        // OIDC without its token endpoint: refused up front, naming the setting.
        let text = format!("[clusters.a]\nbootstrap = \"h:1\"\n{oauth}\"sasl.oauthbearer.method\" = \"oidc\"\n\"sasl.oauthbearer.client.secret\" = \"s3cret\"\n{TAIL}");
        let err = parse_in(dir.path(), &text).unwrap_err();
        assert_eq!(err.key, "clusters.a.client", "{err}");
        assert_eq!(
            err.message,
            "OIDC settings of the cluster's consumer clients: sasl.oauthbearer.method = \"oidc\" needs \"sasl.oauthbearer.token.endpoint.url\"",
        );
        // Complete: librdkafka gets none of the OIDC settings; refract's token client gets all.
        let text = format!("[clusters.a]\nbootstrap = \"h:1\"\n{oauth}\"sasl.oauthbearer.method\" = \"oidc\"\n\"sasl.oauthbearer.client.secret\" = \"s3cret\"\n\"sasl.oauthbearer.client.id\" = \"refract\"\n\"sasl.oauthbearer.token.endpoint.url\" = \"https://idp/token\"\n\"https.ca.location\" = \"ca.pem\"\n{TAIL}");
        let p = parse_in(dir.path(), &text).unwrap();
        let a = &p.clusters["a"];
        for role in [
            ClientRole::Consumer,
            ClientRole::Producer,
            ClientRole::Admin,
        ] {
            let librdkafka = a.client_config(role);
            assert!(
                librdkafka
                    .keys()
                    .all(|k| !k.starts_with("sasl.oauthbearer.") && !k.starts_with("https.")),
                "{librdkafka:?}"
            );
            assert_eq!(librdkafka["sasl.mechanism"], "OAUTHBEARER");
            let oidc = a.oidc(role).expect("oidc");
            assert_eq!(oidc.client_secret, "s3cret");
            assert_eq!(oidc.ca_location.as_deref(), Some("ca.pem"));
        }
        assert!(!format!("{a:?}").contains("s3cret"));
        for (table, client, key, message) in cases {
            let text = format!("[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.oauthbearer]\n{table}{client}{TAIL}");
            let err = parse_in(dir.path(), &text).unwrap_err();
            assert_eq!(
                (err.key.as_str(), err.message.as_str()),
                (key, message),
                "{text}"
            );
            assert_eq!(err.line, Some(4), "{err}");
        }
        let err = parse_in(
            dir.path(),
            &format!(
                "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.oauthbearer]\ntokn = \"t\"\n{TAIL}"
            ),
        )
        .unwrap_err();
        assert_eq!(err.line, Some(4));
        assert!(err.message.contains("unknown field `tokn`"), "{err}");
    }
}
