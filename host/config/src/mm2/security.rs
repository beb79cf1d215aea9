//! MirrorMaker 2's security settings in librdkafka's terms: config provider references
//! (`config.providers`), `sasl.jaas.config` login modules, and Java key and trust stores.
//!
//! References stay references: `${file:/path:key}`, `${env:NAME}` in the converted TOML, which
//! [`crate::Pipeline::parse`] resolves, so `refract convert` never writes a secret the
//! properties file did not already hold. Error messages name keys, JAAS option names and
//! references, never values.

use std::collections::BTreeMap;
use std::path::Path;

use super::convert::{ClientTable, Converter, Origin};
use crate::error::ConfigError;
use crate::properties::Prop;
use crate::secrets::{self, is_sensitive_key, Piece};

/// Kafka's config providers refract has an equivalent of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Provider {
    /// `FileConfigProvider`: `${alias:/path:key}` → `${file:/path:key}`.
    File,
    /// `EnvVarConfigProvider`: `${alias:NAME}` (or `${alias::NAME}`) → `${env:NAME}`.
    Env,
    /// `DirectoryConfigProvider`: `${alias:/dir:file}` → `${file:/dir/file}`.
    Directory,
}

pub(super) const PROVIDER_PACKAGE: &str = "org.apache.kafka.common.config.provider.";

pub(super) const PROVIDERS: &[(&str, Provider)] = &[
    ("FileConfigProvider", Provider::File),
    ("EnvVarConfigProvider", Provider::Env),
    ("DirectoryConfigProvider", Provider::Directory),
];

const PROVIDERS_KEY: &str = "config.providers";

pub(super) const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
pub(super) const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
pub(super) const OAUTHBEARER: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
pub(super) const KERBEROS: &str = "com.sun.security.auth.module.Krb5LoginModule";
/// Kafka's OIDC login callback handler (3.4+ name, then the 3.1–3.3 one).
const OIDC_HANDLERS: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
];
const ENDPOINT: &str = "sasl.oauthbearer.token.endpoint.url";

/// Key and trust store settings that hold PEM text or the key's password: (Java, librdkafka).
pub(super) const PEM_SETTINGS: &[(&str, &str)] = &[
    ("ssl.truststore.certificates", "ssl.ca.pem"),
    ("ssl.keystore.certificate.chain", "ssl.certificate.pem"),
    ("ssl.keystore.key", "ssl.key.pem"),
    ("ssl.key.password", "ssl.key.password"),
];

/// `OAuthBearerLoginModule` options with an OIDC token endpoint: (JAAS option, librdkafka
/// setting, the Java setting that may give it instead, or empty).
pub(super) const OIDC_OPTIONS: &[(&str, &str, &str)] = &[
    (
        "clientId",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.credentials.client.id",
    ),
    (
        "clientSecret",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.client.credentials.client.secret",
    ),
    ("scope", "sasl.oauthbearer.scope", ""),
];

/// `Krb5LoginModule` options and their librdkafka settings.
pub(super) const KERBEROS_OPTIONS: &[(&str, &str)] = &[
    ("keyTab", "sasl.kerberos.keytab"),
    ("principal", "sasl.kerberos.principal"),
    ("serviceName", "sasl.kerberos.service.name"),
];

/// A Java key or trust store's format, as Kafka reads `ssl.*store.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreType {
    Pem,
    Pkcs12,
    Jks,
}

/// One `sasl.jaas.config` login module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct JaasModule {
    pub class: String,
    pub options: Vec<(String, String)>,
}

impl JaasModule {
    fn option(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses Kafka's `sasl.jaas.config`: `<class> <flag> [name=value]... ;`, values bare or quoted
/// with `"` or `'` (backslash escapes), exactly one module. Errors never quote a value.
pub(super) fn parse_jaas(text: &str) -> Result<JaasModule, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let skip_blanks = |i: &mut usize| {
        while chars.get(*i).is_some_and(|c| c.is_whitespace()) {
            *i += 1;
        }
    };
    let word = |i: &mut usize| -> String {
        let start = *i;
        while chars
            .get(*i)
            .is_some_and(|&c| !c.is_whitespace() && !matches!(c, '=' | ';' | '"' | '\''))
        {
            *i += 1;
        }
        chars[start..*i].iter().collect()
    };
    skip_blanks(&mut i);
    let class = word(&mut i);
    if class.is_empty() {
        return Err("names no login module; write e.g. `org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";`".into());
    }
    skip_blanks(&mut i);
    let flag = word(&mut i);
    if !matches!(
        flag.as_str(),
        "required" | "requisite" | "sufficient" | "optional"
    ) {
        return Err(format!(
            "login module `{class}` needs a control flag (required, requisite, sufficient or optional) after its name"
        ));
    }
    let mut options = Vec::new();
    loop {
        skip_blanks(&mut i);
        match chars.get(i) {
            None => return Err(format!("login module `{class}` does not end with `;`")),
            Some(';') => {
                i += 1;
                break;
            }
            Some(_) => {}
        }
        let name = word(&mut i);
        skip_blanks(&mut i);
        if name.is_empty() || chars.get(i) != Some(&'=') {
            return Err(format!(
                "login module `{class}`: expected `name=value` options{}",
                if name.is_empty() {
                    String::new()
                } else {
                    format!(" (after `{name}`)")
                }
            ));
        }
        i += 1;
        skip_blanks(&mut i);
        let value = match chars.get(i) {
            Some(&quote) if quote == '"' || quote == '\'' => {
                i += 1;
                let mut value = String::new();
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(format!(
                                "login module `{class}`: the value of option `{name}` has no closing quote"
                            ))
                        }
                        Some(&c) if c == quote => {
                            i += 1;
                            break;
                        }
                        Some('\\') => {
                            let escaped = match chars.get(i + 1) {
                                Some('n') => '\n',
                                Some('t') => '\t',
                                Some('r') => '\r',
                                Some(&c) => c,
                                None => '\\',
                            };
                            value.push(escaped);
                            i += 2;
                        }
                        Some(&c) => {
                            value.push(c);
                            i += 1;
                        }
                    }
                }
                value
            }
            _ => word(&mut i),
        };
        if value.is_empty() && chars.get(i - 1) != Some(&'"') && chars.get(i - 1) != Some(&'\'') {
            return Err(format!(
                "login module `{class}`: option `{name}` has no value"
            ));
        }
        options.push((name, value));
    }
    skip_blanks(&mut i);
    if i < chars.len() {
        return Err(
            "holds more than one login module; Kafka clients take exactly one, and so does refract"
                .into(),
        );
    }
    Ok(JaasModule { class, options })
}

/// A class name, full or simple, is `full`.
fn is_class(name: &str, full: &str) -> bool {
    name == full || full.rsplit('.').next() == Some(name)
}

/// The store type Kafka uses: `ssl.*store.type` if set, else the Java default (JKS) unless the
/// file name says PKCS#12 or PEM.
fn store_type(
    type_prop: Option<&Prop>,
    location: &str,
) -> Result<(StoreType, &'static str), String> {
    if let Some(p) = type_prop {
        let t = p.value.trim();
        return match t.to_ascii_uppercase().as_str() {
            "PEM" => Ok((StoreType::Pem, "")),
            "PKCS12" => Ok((StoreType::Pkcs12, "")),
            "JKS" => Ok((StoreType::Jks, "")),
            _ => Err(format!(
                "`{t}` is a key store type librdkafka cannot read (it reads PEM and PKCS12)"
            )),
        };
    }
    let ext = Path::new(location.trim())
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    Ok(match ext.as_str() {
        "pem" | "crt" | "cer" => (StoreType::Pem, ""),
        "p12" | "pfx" => (StoreType::Pkcs12, ""),
        _ => (
            StoreType::Jks,
            " (no type is set and the file name is not .p12, .pfx or .pem, so Kafka reads it as JKS, Java's default)",
        ),
    })
}

impl Converter<'_> {
    /// Takes the `config.providers*` keys out of the file: the providers references may name.
    pub(super) fn providers(&mut self) -> Result<(), ConfigError> {
        let keys: Vec<String> = self
            .props
            .keys()
            .filter(|k| *k == PROVIDERS_KEY || k.starts_with("config.providers."))
            .cloned()
            .collect();
        let mut taken: BTreeMap<String, Prop> = keys
            .into_iter()
            .filter_map(|k| self.props.remove_entry(&k))
            .collect();
        if let Some(list_prop) = taken.remove(PROVIDERS_KEY) {
            for alias in super::convert::list(&list_prop.value) {
                let class_key = format!("config.providers.{alias}.class");
                let Some(class) = taken.remove(&class_key) else {
                    return Err(self.error(
                        Some(list_prop.line),
                        &class_key,
                        format!("missing; config.providers lists `{alias}`: name its class, e.g. `{class_key} = {PROVIDER_PACKAGE}FileConfigProvider`"),
                    ));
                };
                let name = class.value.trim();
                let short = name.strip_prefix(PROVIDER_PACKAGE).unwrap_or(name);
                let Some((_, provider)) = PROVIDERS.iter().find(|(c, _)| *c == short) else {
                    return Err(self.error(
                        Some(class.line),
                        &class.key,
                        format!("`{name}` is a config provider refract cannot run; it reads references of {PROVIDER_PACKAGE}FileConfigProvider, EnvVarConfigProvider and DirectoryConfigProvider"),
                    ));
                };
                self.providers.insert(alias, *provider);
            }
        }
        for (key, prop) in taken {
            let param = self
                .providers
                .keys()
                .any(|a| key.starts_with(&format!("config.providers.{a}.param.")));
            let why = if param {
                "refract's ${file:…} and ${env:…} references read any file and variable the process can"
            } else {
                "config.providers does not list this provider"
            };
            let note = format!("{key} (line {}): ignored; {why}", prop.line);
            self.note(Some(prop.line), note);
        }
        Ok(())
    }

    /// Whether `value` holds a reference to one of the file's config providers.
    pub(super) fn has_provider_reference(&self, value: &str) -> bool {
        secrets::pieces(value).is_ok_and(|pieces| {
            pieces.iter().any(
                |p| matches!(p, Piece::Reference(r) if self.providers.contains_key(r.provider)),
            )
        })
    }

    /// `value` (of `prop`) with config provider references in refract's syntax. Any other `${`
    /// is an error: refract would read it as a reference where Kafka keeps it as text.
    pub(super) fn references(&self, prop: &Prop, value: &str) -> Result<String, ConfigError> {
        let error = |message: String| self.error(Some(prop.line), &prop.key, message);
        let not_a_reference = || {
            let aliases: Vec<&str> = self.providers.keys().map(String::as_str).collect();
            error(format!(
                "holds `${{` that is not a reference to a config provider of this file ({}); refract would read it as a reference",
                if aliases.is_empty() {
                    "config.providers lists none".to_string()
                } else {
                    format!("config.providers = {}", aliases.join(", "))
                }
            ))
        };
        let pieces = secrets::pieces(value).map_err(|_| not_a_reference())?;
        let mut out = String::new();
        for piece in pieces {
            let r = match piece {
                Piece::Text(t) => {
                    out.push_str(t);
                    continue;
                }
                Piece::Reference(r) => r,
            };
            let Some(provider) = self.providers.get(r.provider) else {
                return Err(not_a_reference());
            };
            // Kafka's `${provider:[path:]key}`: the path ends at the first `:`.
            let (path, key) = match r.argument.split_once(':') {
                Some((path, key)) => (Some(path), key),
                None => (None, r.argument),
            };
            let converted = match (provider, path) {
                (Provider::Env, None | Some("")) if !key.is_empty() => format!("${{env:{key}}}"),
                (Provider::File, Some(path)) if !path.is_empty() && !key.is_empty() => {
                    format!("${{file:{path}:{key}}}")
                }
                (Provider::Directory, Some(dir)) if !dir.is_empty() && !key.is_empty() => {
                    format!("${{file:{}/{key}}}", dir.trim_end_matches('/'))
                }
                _ => {
                    let form = match provider {
                        Provider::Env => "${<alias>:NAME}",
                        Provider::File => "${<alias>:/path/file.properties:key}",
                        Provider::Directory => "${<alias>:/dir:file}",
                    };
                    return Err(error(format!(
                        "reference `{}` does not fit its provider: write {form}",
                        r.whole
                    )));
                }
            };
            out.push_str(&converted);
        }
        Ok(out)
    }

    /// Puts a librdkafka setting into `table`; a sensitive value written in clear in the file
    /// gets a note recommending a reference.
    pub(super) fn put(&mut self, table: &mut ClientTable, name: &str, value: String, prop: &Prop) {
        if is_sensitive_key(name) && !value.is_empty() && !value.contains("${") {
            let note = format!(
                "{} (line {}): a secret written in clear; the converted pipeline carries it as it is: reference it instead, e.g. ${{env:NAME}} or ${{file:/path:key}} (in MirrorMaker 2: config.providers)",
                prop.key, prop.line
            );
            self.note(Some(prop.line), note);
        }
        table.insert(name.to_string(), (value, Origin::from(prop)));
    }

    /// Converts the Java security settings among `keys` (one client table's, by Java name) into
    /// `table`, taking them out of `keys`. `context` is the cluster's own table for a role's
    /// table: store types and the OIDC endpoint set for the whole cluster apply to it.
    pub(super) fn security(
        &mut self,
        keys: &mut BTreeMap<String, Prop>,
        context: Option<&BTreeMap<String, Prop>>,
        table: &mut ClientTable,
    ) -> Result<(), ConfigError> {
        let in_context = |keys: &BTreeMap<String, Prop>, name: &str| -> Option<Prop> {
            keys.get(name)
                .or_else(|| context.and_then(|c| c.get(name)))
                .cloned()
        };
        // PEM text and the key's password: the same setting under librdkafka's name.
        for (java, librdkafka) in PEM_SETTINGS {
            if let Some(p) = keys.remove(*java) {
                let value = self.references(&p, p.value.trim())?;
                self.put(table, librdkafka, value, &p);
            }
        }
        // Trust store → CA certificates.
        let trust_type = in_context(keys, "ssl.truststore.type");
        keys.remove("ssl.truststore.type");
        let trust_password = keys.remove("ssl.truststore.password");
        if let Some(location) = keys.remove("ssl.truststore.location") {
            let path = location.value.trim();
            let error = |m: String| self.error(Some(location.line), &location.key, m);
            match store_type(trust_type.as_ref(), path).map_err(error)? {
                (StoreType::Pem, _) => {
                    let value = self.references(&location, path)?;
                    self.put(table, "ssl.ca.location", value, &location);
                }
                (StoreType::Jks, why) => {
                    return Err(error(format!(
                        "`{path}` is a Java KeyStore (JKS) trust store{why}; {}",
                        secrets::truststore_hint(path)
                    )))
                }
                (StoreType::Pkcs12, _) => {
                    let pem = Path::new(path).with_file_name("ca.pem");
                    return Err(error(format!(
                        "`{path}` is a PKCS#12 trust store; librdkafka has no trust stores and reads CA certificates from PEM: `openssl pkcs12 -in {path} -nokeys -out {}`, then set ssl.ca.location to that file",
                        pem.display()
                    )));
                }
            }
        }
        if let Some(p) = trust_password {
            let note = format!(
                "{} (line {}): ignored; librdkafka reads CA certificates from PEM, which has no password",
                p.key, p.line
            );
            self.note(Some(p.line), note);
        }
        // Key store → client certificate and key.
        let key_type = in_context(keys, "ssl.keystore.type");
        keys.remove("ssl.keystore.type");
        let key_store_password = keys.remove("ssl.keystore.password");
        let mut password_used = false;
        if let Some(location) = keys.remove("ssl.keystore.location") {
            let path = location.value.trim();
            let error = |m: String| self.error(Some(location.line), &location.key, m);
            match store_type(key_type.as_ref(), path).map_err(error)? {
                (StoreType::Pkcs12, _) => {
                    let value = self.references(&location, path)?;
                    self.put(table, "ssl.keystore.location", value, &location);
                    if let Some(p) = &key_store_password {
                        let value = self.references(p, p.value.trim())?;
                        self.put(table, "ssl.keystore.password", value, p);
                        password_used = true;
                    }
                }
                (StoreType::Pem, _) => {
                    return Err(error(format!(
                        "`{path}` is a PEM key store; librdkafka reads the certificate and the private key from separate settings: set ssl.certificate.location to the certificate chain and ssl.key.location to the private key (with ssl.key.password if it is encrypted), or put the PEM text in ssl.keystore.certificate.chain and ssl.keystore.key"
                    )))
                }
                (StoreType::Jks, why) => {
                    return Err(error(format!(
                        "`{path}` is a Java KeyStore (JKS){why}; {}",
                        secrets::keystore_hint(path)
                    )))
                }
            }
        }
        if let (Some(p), false) = (&key_store_password, password_used) {
            let note = format!(
                "{} (line {}): ignored; there is no PKCS#12 ssl.keystore.location it opens",
                p.key, p.line
            );
            self.note(Some(p.line), note);
        }
        // SASL login.
        let endpoint = in_context(keys, ENDPOINT);
        if let Some(jaas) = keys.remove("sasl.jaas.config") {
            self.jaas(&jaas, keys, endpoint.as_ref(), context, table)?;
        }
        if let Some(handler) = keys.remove("sasl.login.callback.handler.class") {
            let class = handler.value.trim();
            if !(endpoint.is_some() && OIDC_HANDLERS.contains(&class)) {
                self.unsupported.insert(handler.key.clone());
                let note = format!(
                    "{} (line {}): `{class}` is a Java class; librdkafka logs in with its own OIDC client (sasl.oauthbearer.token.endpoint.url and OAuthBearerLoginModule's clientId/clientSecret) or a static token ([clusters.<alias>.oauthbearer] token)",
                    handler.key, handler.line
                );
                self.note(Some(handler.line), note);
            }
        }
        Ok(())
    }

    /// An error about `prop`.
    fn at(&self, prop: &Prop, message: String) -> ConfigError {
        self.error(Some(prop.line), &prop.key, message)
    }

    /// A JAAS option's value with references converted.
    fn jaas_option(
        &self,
        module: &JaasModule,
        prop: &Prop,
        name: &str,
    ) -> Result<Option<String>, ConfigError> {
        module
            .option(name)
            .map(|v| self.references(prop, v))
            .transpose()
    }

    /// `sasl.jaas.config` → librdkafka's SASL settings.
    fn jaas(
        &mut self,
        prop: &Prop,
        keys: &BTreeMap<String, Prop>,
        endpoint: Option<&Prop>,
        context: Option<&BTreeMap<String, Prop>>,
        table: &mut ClientTable,
    ) -> Result<(), ConfigError> {
        let text = prop.value.trim();
        if self.has_provider_reference(text) && !text.contains(';') {
            return Err(self.at(prop, "is a config provider reference as a whole; refract reads the login module when it converts the file: write the module here and reference only its secrets, e.g. password=\"${file:/path/credentials.properties:password}\"".into()));
        }
        let module = parse_jaas(text).map_err(|m| self.at(prop, m))?;
        let class = module.class.as_str();
        let is_set =
            |name: &str| keys.contains_key(name) || context.is_some_and(|c| c.contains_key(name));
        let known: &[&str] = if is_class(class, PLAIN) || is_class(class, SCRAM) {
            let username = self.jaas_option(&module, prop, "username")?;
            let password = self.jaas_option(&module, prop, "password")?;
            let (Some(username), Some(password)) = (username, password) else {
                return Err(self.at(
                    prop,
                    format!("login module `{class}` needs the options username and password"),
                ));
            };
            self.put(table, "sasl.username", username, prop);
            self.put(table, "sasl.password", password, prop);
            &["username", "password"]
        } else if is_class(class, OAUTHBEARER) {
            if let Some(endpoint) = endpoint {
                if endpoint.value.trim().starts_with("file:") {
                    return Err(self.at(
                        endpoint,
                        "a file:// token endpoint is a token file; librdkafka's OIDC client fetches tokens over HTTP(S): in the converted pipeline, set [clusters.<alias>.oauthbearer] token = \"${file:/path/to/token}\" instead".into(),
                    ));
                }
                table.insert(
                    "sasl.oauthbearer.method".into(),
                    ("oidc".into(), Origin::from(prop)),
                );
                for (java, librdkafka, alias) in OIDC_OPTIONS {
                    match self.jaas_option(&module, prop, java)? {
                        Some(value) => self.put(table, librdkafka, value, prop),
                        None if alias.is_empty() || is_set(alias) => {}
                        None => {
                            return Err(self.at(
                                prop,
                                format!("login module `{class}` with {ENDPOINT} (OIDC) needs the option {java} (or the setting {alias})"),
                            ))
                        }
                    }
                }
                &["clientId", "clientSecret", "scope"]
            } else if let Some(sub) =
                self.jaas_option(&module, prop, "unsecuredLoginStringClaim_sub")?
            {
                let mut config = vec![format!("principal={sub}")];
                if let Some(life) =
                    self.jaas_option(&module, prop, "unsecuredLoginLifetimeSeconds")?
                {
                    config.push(format!("lifeSeconds={life}"));
                }
                for (name, value) in &module.options {
                    if let Some(ext) = name.strip_prefix("unsecuredLoginExtension_") {
                        let value = self.references(prop, value)?;
                        config.push(format!("extension_{ext}={value}"));
                    }
                }
                table.insert(
                    "enable.sasl.oauthbearer.unsecure.jwt".into(),
                    ("true".into(), Origin::from(prop)),
                );
                // An unsecured JWT's claims, no secret: no note.
                table.insert(
                    "sasl.oauthbearer.config".into(),
                    (config.join(" "), Origin::from(prop)),
                );
                &[
                    "unsecuredLoginStringClaim_sub",
                    "unsecuredLoginLifetimeSeconds",
                ]
            } else {
                return Err(self.at(
                    prop,
                    format!("login module `{class}` without {ENDPOINT} gets its token from a Java callback handler, which librdkafka cannot run: give the OIDC token endpoint (with clientId and clientSecret), or set [clusters.<alias>.oauthbearer] token = \"${{file:/path/to/token}}\" in the converted pipeline"),
                ));
            }
        } else if is_class(class, KERBEROS) {
            for (java, librdkafka) in KERBEROS_OPTIONS {
                if let Some(value) = self.jaas_option(&module, prop, java)? {
                    if !is_set(librdkafka) {
                        self.put(table, librdkafka, value, prop);
                    }
                }
            }
            let note = format!(
                "{} (line {}): Kerberos (GSSAPI) needs refract built with the `gssapi` feature (`cargo build --release --features gssapi`, which links the system's Cyrus SASL); librdkafka renews the ticket with kinit and the keytab",
                prop.key, prop.line
            );
            self.note(Some(prop.line), note);
            // How the Java module finds its credentials; librdkafka runs kinit with the keytab.
            &[
                "keyTab",
                "principal",
                "serviceName",
                "useKeyTab",
                "storeKey",
                "useTicketCache",
                "doNotPrompt",
                "debug",
            ]
        } else {
            return Err(self.at(
                prop,
                format!("login module `{class}` has no librdkafka equivalent; refract converts PlainLoginModule and ScramLoginModule (sasl.username, sasl.password), OAuthBearerLoginModule (OIDC or unsecured JWT) and Krb5LoginModule (GSSAPI)"),
            ));
        };
        let ignored: Vec<&str> = module
            .options
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !known.contains(k) && !k.starts_with("unsecuredLoginExtension_"))
            .collect();
        if !ignored.is_empty() {
            let note = format!(
                "{} (line {}): options of `{class}` ignored: {}",
                prop.key,
                prop.line,
                ignored.join(", ")
            );
            self.note(Some(prop.line), note);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaas_syntax() {
        let m = parse_jaas(
            " org.apache.kafka.common.security.plain.PlainLoginModule required\n  username=\"alice\" password='p\\\"a;ss' debug=true ;  ",
        )
        .unwrap();
        assert_eq!(m.class, PLAIN);
        assert_eq!(
            m.options,
            [
                ("username".to_string(), "alice".to_string()),
                ("password".to_string(), "p\"a;ss".to_string()),
                ("debug".to_string(), "true".to_string()),
            ]
        );
        let m = parse_jaas("X optional pw=\"\";").unwrap();
        assert_eq!(m.options, [("pw".to_string(), String::new())]);
        for (text, want) in [
            ("", "names no login module"),
            ("X", "needs a control flag"),
            ("X required username=\"u\"", "does not end with `;`"),
            (
                "X required username;",
                "expected `name=value` options (after `username`)",
            ),
            (
                "X required password=\"hunter2;",
                "the value of option `password` has no closing quote",
            ),
            (
                "X required; Y required;",
                "holds more than one login module",
            ),
        ] {
            let err = parse_jaas(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
    }
}
