//! Secrets in client settings: `${env:NAME}`, `${file:/path}` and `${file:/path:key}` references
//! resolved when a pipeline is loaded, which settings are sensitive, how settings are shown
//! without leaking them, and the Java key stores librdkafka cannot read.
//!
//! Nothing here ever puts a resolved value, or the literal value of a sensitive setting, into an
//! error message or a `Debug` string.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::files::{read_config_file, read_head, MAX_SECRET_FILE_BYTES};

/// What a sensitive value is shown as.
pub const REDACTED: &str = "[redacted]";

/// Whether a client setting holds a secret, so that its literal value is never shown: any key
/// containing `password`, `passphrase`, `secret` or `token` (but not
/// `sasl.oauthbearer.token.endpoint.url`, a URL), `sasl.jaas.config`, `sasl.oauthbearer.config`,
/// and private keys given inline (`ssl.key.pem`, `…private.key.pem`, Java's `ssl.keystore.key`).
/// Case does not matter.
pub fn is_sensitive_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    if key == "sasl.oauthbearer.token.endpoint.url" {
        return false;
    }
    if ["password", "passphrase", "secret", "token"]
        .iter()
        .any(|word| key.contains(word))
    {
        return true;
    }
    if key == "sasl.jaas.config" || key == "sasl.oauthbearer.config" {
        return true;
    }
    key.ends_with(".key") || (key.ends_with(".pem") && key.split('.').any(|part| part == "key"))
}

/// A setting's value: what librdkafka gets, and the text as written when it held references.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Value {
    pub resolved: String,
    /// `Some` when the written text held at least one reference.
    pub written: Option<String>,
}

impl Value {
    pub fn literal(text: String) -> Self {
        Self {
            resolved: text,
            written: None,
        }
    }

    /// How the value of `key` may be shown: the references as written (in a sensitive value,
    /// with the literal text around them as [`REDACTED`]: `password=hunter2${env:X}` would show
    /// half the secret), a sensitive literal as [`REDACTED`], anything else as it is.
    pub fn shown(&self, key: &str) -> String {
        match &self.written {
            Some(written) if is_sensitive_key(key) => masked(written),
            Some(written) => written.clone(),
            None if is_sensitive_key(key) => REDACTED.to_string(),
            None => self.resolved.clone(),
        }
    }
}

/// Never the resolved value nor literal text (`Debug` does not know the key, so it assumes a
/// secret): the references as written with [`REDACTED`] for the text around them, or
/// [`REDACTED`].
impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.written {
            Some(written) => write!(f, "{:?}", masked(written)),
            None => write!(f, "{REDACTED:?}"),
        }
    }
}

/// `text` with each run of literal text between its references as [`REDACTED`], the
/// references as written: `user=${env:U} password=s3cret` -> `[redacted]${env:U}[redacted]`.
pub(crate) fn masked(text: &str) -> String {
    match pieces(text) {
        Ok(pieces) => pieces
            .iter()
            .map(|p| match p {
                Piece::Text(_) => REDACTED,
                Piece::Reference(r) => r.whole,
            })
            .collect(),
        Err(_) => REDACTED.to_string(),
    }
}

/// Looks up an environment variable (`std::env::var`, or a stand-in in tests).
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Result<String, std::env::VarError>;

/// Where references are resolved: environment variables, and files relative to `base`.
pub(crate) struct Resolver<'a> {
    pub base: &'a Path,
    pub env: EnvLookup<'a>,
}

/// One `${provider:argument}` in a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reference<'t> {
    /// `${…}` as written.
    pub whole: &'t str,
    pub provider: &'t str,
    pub argument: &'t str,
}

/// Text and references, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'t> {
    Text(&'t str),
    Reference(Reference<'t>),
}

/// Splits `text` at `${…}`. The error never quotes the text (it may be a literal secret).
pub(crate) fn pieces(text: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            out.push(Piece::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(
                "unterminated `${`: a reference is `${env:NAME}`, `${file:/path}` or `${file:/path:key}`"
                    .to_string(),
            );
        };
        let inner = &after[..end];
        let Some((provider, argument)) = inner.split_once(':') else {
            return Err(
                "`${` starts a reference but names no provider: write `${env:NAME}`, `${file:/path}` or `${file:/path:key}`"
                    .to_string(),
            );
        };
        out.push(Piece::Reference(Reference {
            whole: &rest[start..start + 2 + end + 1],
            provider,
            argument,
        }));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// What [`crate::Pipeline::parse_offline`] makes of a value: its references checked for their
/// form and provider, each standing for a placeholder that passes the checks a resolved value
/// gets (not empty, at least 16 characters, a valid `[cluster] instance`).
pub(crate) fn check_form(text: &str) -> Result<Value, String> {
    let pieces = pieces(text)?;
    if !pieces.iter().any(|p| matches!(p, Piece::Reference(_))) {
        return Ok(Value::literal(text.to_string()));
    }
    let mut resolved = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => resolved.push_str(t),
            Piece::Reference(r) if matches!(r.provider, "env" | "file") => {
                resolved.push_str("offline-placeholder-0123456789")
            }
            Piece::Reference(r) => {
                return Err(format!(
                    "reference `{}`: unknown provider `{}`: refract resolves `${{env:NAME}}`, `${{file:/path}}` and `${{file:/path:key}}`",
                    r.whole, r.provider
                ))
            }
        }
    }
    Ok(Value {
        resolved,
        written: Some(text.to_string()),
    })
}

impl Resolver<'_> {
    /// Resolves every reference in `text`. The error names the reference, never what it resolved
    /// to nor the literal text around it.
    pub fn resolve(&self, text: &str) -> Result<Value, String> {
        let pieces = pieces(text)?;
        if !pieces.iter().any(|p| matches!(p, Piece::Reference(_))) {
            return Ok(Value::literal(text.to_string()));
        }
        let mut resolved = String::new();
        for piece in pieces {
            match piece {
                Piece::Text(t) => resolved.push_str(t),
                Piece::Reference(r) => {
                    let value = self
                        .reference(&r)
                        .map_err(|e| format!("reference `{}`: {e}", r.whole))?;
                    resolved.push_str(&value);
                }
            }
        }
        Ok(Value {
            resolved,
            written: Some(text.to_string()),
        })
    }

    fn reference(&self, r: &Reference<'_>) -> Result<String, String> {
        match r.provider {
            "env" => {
                let name = r.argument;
                if name.is_empty() {
                    return Err("names no environment variable; write `${env:NAME}`".into());
                }
                (self.env)(name).map_err(|e| match e {
                    std::env::VarError::NotPresent => {
                        format!("environment variable `{name}` is not set")
                    }
                    std::env::VarError::NotUnicode(_) => {
                        format!("environment variable `{name}` is not valid UTF-8")
                    }
                })
            }
            "file" => {
                let (path, key) = match r.argument.split_once(':') {
                    Some((path, key)) => (path, Some(key)),
                    None => (r.argument, None),
                };
                if path.is_empty() {
                    return Err("names no file; write `${file:/path}` or `${file:/path:key}`".into());
                }
                if key == Some("") {
                    return Err("names no key after the path; write `${file:/path:key}`".into());
                }
                let path = self.base.join(path);
                let text = read_text(&path)?;
                match key {
                    None => Ok(text.trim_end_matches(['\n', '\r']).to_string()),
                    Some(key) => properties_value(&path, &text, key),
                }
            }
            other => Err(format!(
                "unknown provider `{other}`: refract resolves `${{env:NAME}}`, `${{file:/path}}` and `${{file:/path:key}}`"
            )),
        }
    }
}

/// A secret file's text: a regular file of at most [`MAX_SECRET_FILE_BYTES`]. The error says
/// why it cannot be read, never what is in it.
fn read_text(path: &Path) -> Result<String, String> {
    read_config_file(path, MAX_SECRET_FILE_BYTES, "secret file")
}

/// The value of `key` in a Java properties file (the last one, as in `java.util.Properties`),
/// trimmed, as Kafka's `FileConfigProvider` reads it.
fn properties_value(path: &Path, text: &str, key: &str) -> Result<String, String> {
    let props = crate::properties::parse_properties(path, text).map_err(|e| e.to_string())?;
    props
        .into_iter()
        .rev()
        .find(|p| p.key == key)
        .map(|p| p.value.trim().to_string())
        .ok_or_else(|| format!("`{}` has no key `{key}`", path.display()))
}

/// Whether `path` is a Java KeyStore: it ends with `.jks` or starts with JKS's magic number
/// `0xFEEDFEED`. A file that cannot be read is left to librdkafka.
pub(crate) fn is_jks(path: &Path) -> bool {
    let named = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jks"));
    named || starts_with_jks_magic(path)
}

/// Only a regular file is looked into: a FIFO named as a key store must not block the loader.
fn starts_with_jks_magic(path: &Path) -> bool {
    read_head(path, 4).is_some_and(|head| head == [0xFE, 0xED, 0xFE, 0xED])
}

/// How to turn a JKS key store into the PKCS#12 file librdkafka reads.
pub(crate) fn keystore_hint(path: &str) -> String {
    let p12 = PathBuf::from(path).with_extension("p12");
    let p12 = p12.display();
    format!(
        "librdkafka cannot read Java KeyStores (JKS); convert it to PKCS#12 with `keytool -importkeystore -srckeystore {path} -destkeystore {p12} -deststoretype PKCS12`, then set ssl.keystore.location = \"{p12}\" and ssl.keystore.password"
    )
}

/// How to turn a JKS trust store into the PEM CA file librdkafka reads.
pub(crate) fn truststore_hint(path: &str) -> String {
    let pem = PathBuf::from(path).with_file_name("ca.pem");
    let pem = pem.display();
    format!(
        "librdkafka has no trust stores and reads CA certificates from PEM; export them with `keytool -exportcert -rfc -alias <alias> -keystore {path} -file {pem}` (`keytool -list -keystore {path}` lists the aliases), then set ssl.ca.location = \"{pem}\""
    )
}

/// TOML text with the values of sensitive keys that hold no reference shown as [`REDACTED`]:
/// for `Debug` output of converted pipelines.
pub(crate) fn redact_toml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let redacted = line.split_once(" = ").and_then(|(key, value)| {
            let name = key.trim().trim_matches('"');
            (!key.trim_start().starts_with('#') && is_sensitive_key(name)).then(|| {
                // A value with references keeps them; the literal text around them is a secret
                // as much as a whole literal is.
                let shown = if value.contains("${") {
                    masked(value.trim().trim_matches('"'))
                } else {
                    REDACTED.to_string()
                };
                format!("{key} = \"{shown}\"")
            })
        });
        out.push_str(redacted.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::env::VarError;

    fn env(name: &str) -> Result<String, VarError> {
        match name {
            "KAFKA_PASS" => Ok("s3cr3t-env".into()),
            "USER_X" => Ok("alice".into()),
            _ => Err(VarError::NotPresent),
        }
    }

    fn resolver(base: &Path) -> Resolver<'_> {
        Resolver { base, env: &env }
    }

    #[test]
    fn literal_text_beside_a_reference_in_a_secret_is_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let written = "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"${env:USER_X}\" password=\"hunter2${env:KAFKA_PASS}\";";
        let v = resolver(dir.path()).resolve(written).unwrap();
        let shown = v.shown("sasl.jaas.config");
        let debug = format!("{v:?}");
        for text in [&shown, &debug] {
            assert!(
                !text.contains("hunter2") && !text.contains("PlainLoginModule"),
                "{text}"
            );
            assert!(
                !text.contains("s3cr3t-env") && !text.contains("alice"),
                "{text}"
            );
            assert!(
                text.contains("${env:KAFKA_PASS}") && text.contains("${env:USER_X}"),
                "{text}"
            );
        }
        assert_eq!(
            shown,
            "[redacted]${env:USER_X}[redacted]${env:KAFKA_PASS}[redacted]"
        );
        // A setting that is not a secret still shows its text: it helps, and holds none.
        let bootstrap = resolver(dir.path()).resolve("${env:USER_X}:9092").unwrap();
        assert_eq!(bootstrap.shown("bootstrap.servers"), "${env:USER_X}:9092");
        // A converted MM2 file shown for debugging: the same for a line with references.
        let toml = format!("\"sasl.jaas.config\" = \"{}\"\n", "pw=hunter2${env:P}");
        assert_eq!(
            redact_toml(&toml),
            "\"sasl.jaas.config\" = \"[redacted]${env:P}\"\n"
        );
    }

    #[test]
    fn sensitive_keys() {
        for key in [
            "sasl.password",
            "ssl.keystore.password",
            "ssl.key.password",
            "ssl.truststore.password",
            "ssl.key.pem",
            "ssl.keystore.key",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.client.credentials.client.secret",
            "sasl.oauthbearer.config",
            "sasl.oauthbearer.assertion.private.key.pem",
            "sasl.oauthbearer.assertion.private.key.passphrase",
            "sasl.jaas.config",
            "SASL.PASSWORD",
            "oauthbearer.token",
            "my.api.token",
        ] {
            assert!(is_sensitive_key(key), "{key}");
        }
        for key in [
            "sasl.username",
            "ssl.key.location",
            "ssl.keystore.location",
            "ssl.ca.location",
            "ssl.ca.pem",
            "ssl.certificate.pem",
            "ssl.certificate.location",
            "sasl.oauthbearer.token.endpoint.url",
            "sasl.oauthbearer.client.id",
            "sasl.mechanism",
            "security.protocol",
            "bootstrap.servers",
            "compression.type",
        ] {
            assert!(!is_sensitive_key(key), "{key}");
        }
    }

    #[test]
    fn env_and_mixed_text() {
        let r = resolver(Path::new("/"));
        let v = r.resolve("${env:USER_X}-suffix").unwrap();
        assert_eq!(v.resolved, "alice-suffix");
        assert_eq!(v.written.as_deref(), Some("${env:USER_X}-suffix"));
        let v = r.resolve("a${env:USER_X}b${env:KAFKA_PASS}").unwrap();
        assert_eq!(v.resolved, "aalicebs3cr3t-env");
        let v = r.resolve("plain $ and {braces} and $x").unwrap();
        assert_eq!(v, Value::literal("plain $ and {braces} and $x".into()));
    }

    #[test]
    fn errors_name_the_reference_never_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let r = resolver(dir.path());
        let cases = [
            ("${env:NOPE}", "reference `${env:NOPE}`: environment variable `NOPE` is not set"),
            ("${env:}", "reference `${env:}`: names no environment variable; write `${env:NAME}`"),
            ("pa${ss", "unterminated `${`: a reference is `${env:NAME}`, `${file:/path}` or `${file:/path:key}`"),
            ("pa${ss}", "`${` starts a reference but names no provider: write `${env:NAME}`, `${file:/path}` or `${file:/path:key}`"),
            ("${vault:secret/x}", "reference `${vault:secret/x}`: unknown provider `vault`: refract resolves `${env:NAME}`, `${file:/path}` and `${file:/path:key}`"),
            ("${file:}", "reference `${file:}`: names no file; write `${file:/path}` or `${file:/path:key}`"),
            ("${file:/p:}", "reference `${file:/p:}`: names no key after the path; write `${file:/path:key}`"),
        ];
        for (text, want) in cases {
            assert_eq!(r.resolve(text).unwrap_err(), want, "{text}");
        }
        std::fs::write(
            dir.path().join("p.properties"),
            "user = bob\npassword = hunter2\n",
        )
        .unwrap();
        let err = r.resolve("${file:p.properties:missing}").unwrap_err();
        assert_eq!(
            err,
            format!(
                "reference `${{file:p.properties:missing}}`: `{}` has no key `missing`",
                dir.path().join("p.properties").display()
            )
        );
        assert!(!err.contains("hunter2"));
        let err = r.resolve("x${file:/nonexistent/dir/f}").unwrap_err();
        assert!(
            err.starts_with(
                "reference `${file:/nonexistent/dir/f}`: cannot read `/nonexistent/dir/f`: "
            ),
            "{err}"
        );
        // A bad reference after a good one never shows what the good one resolved to.
        let err = r.resolve("${env:KAFKA_PASS}${env:NOPE}").unwrap_err();
        assert!(!err.contains("s3cr3t-env"), "{err}");
    }

    #[test]
    fn files_and_properties_files() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "eyJ.token.sig\r\n\n").unwrap();
        std::fs::write(
            dir.path().join("creds.properties"),
            "# comment\n! other\nuser = bob\npassword:  hunter2  \nspaced value with blanks\nuser=carol\n",
        )
        .unwrap();
        let r = resolver(dir.path());
        let whole = format!("${{file:{}}}", token.display());
        let v = r.resolve(&whole).unwrap();
        assert_eq!(v.resolved, "eyJ.token.sig");
        assert_eq!(v.written.as_deref(), Some(whole.as_str()));
        // relative to the pipeline's folder; the last duplicate wins, values are trimmed
        assert_eq!(
            r.resolve("${file:creds.properties:user}").unwrap().resolved,
            "carol"
        );
        assert_eq!(
            r.resolve("${file:creds.properties:password}")
                .unwrap()
                .resolved,
            "hunter2"
        );
        assert_eq!(
            r.resolve("${file:creds.properties:spaced}")
                .unwrap()
                .resolved,
            "value with blanks"
        );
    }

    #[test]
    fn debug_and_shown_never_reveal() {
        let secret = Value::literal("hunter2".into());
        assert_eq!(format!("{secret:?}"), "\"[redacted]\"");
        assert_eq!(secret.shown("sasl.password"), "[redacted]");
        assert_eq!(secret.shown("client.id"), "hunter2");
        let r = Value {
            resolved: "hunter2".into(),
            written: Some("${env:P}".into()),
        };
        assert_eq!(format!("{r:?}"), "\"${env:P}\"");
        assert_eq!(r.shown("client.id"), "${env:P}");
    }

    #[test]
    fn jks_detection() {
        let dir = tempfile::tempdir().unwrap();
        let magic = dir.path().join("store.p12");
        std::fs::write(&magic, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let p12 = dir.path().join("real.p12");
        std::fs::write(&p12, [0x30, 0x82, 0x0A, 0x00]).unwrap();
        let short = dir.path().join("short");
        std::fs::write(&short, [0xFE, 0xED]).unwrap();
        assert!(is_jks(&magic));
        assert!(!is_jks(&p12));
        assert!(!is_jks(&short));
        assert!(is_jks(Path::new("/missing/x.JKS")));
        assert!(!is_jks(Path::new("/missing/x.pem")));
        assert!(!is_jks(dir.path()));
        assert_eq!(
            keystore_hint("/etc/kafka/client.jks"),
            "librdkafka cannot read Java KeyStores (JKS); convert it to PKCS#12 with `keytool -importkeystore -srckeystore /etc/kafka/client.jks -destkeystore /etc/kafka/client.p12 -deststoretype PKCS12`, then set ssl.keystore.location = \"/etc/kafka/client.p12\" and ssl.keystore.password"
        );
        assert_eq!(
            truststore_hint("/etc/kafka/trust.jks"),
            "librdkafka has no trust stores and reads CA certificates from PEM; export them with `keytool -exportcert -rfc -alias <alias> -keystore /etc/kafka/trust.jks -file /etc/kafka/ca.pem` (`keytool -list -keystore /etc/kafka/trust.jks` lists the aliases), then set ssl.ca.location = \"/etc/kafka/ca.pem\""
        );
    }

    #[test]
    fn file_references_read_only_bounded_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let r = resolver(dir.path());
        let pipe = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo failed");
        let big = dir.path().join("big.properties");
        let mut text = "password = hunter2\n".to_string();
        text.push_str(&"#".repeat(MAX_SECRET_FILE_BYTES as usize));
        std::fs::write(&big, text).unwrap();
        let d = dir.path().display();
        let not_regular = "not a regular file: a secret file must be a regular file";
        // Each would block or never end if it were opened and read: the FIFO, /dev/zero.
        let cases = [
            (
                "${file:pipe}".to_string(),
                format!("reference `${{file:pipe}}`: `{d}/pipe` is a FIFO (named pipe), {not_regular}"),
            ),
            (
                "${file:pipe:password}".to_string(),
                format!("reference `${{file:pipe:password}}`: `{d}/pipe` is a FIFO (named pipe), {not_regular}"),
            ),
            (
                "${file:/dev/zero}".to_string(),
                format!("reference `${{file:/dev/zero}}`: `/dev/zero` is a character device, {not_regular}"),
            ),
            (
                format!("${{file:{d}}}"),
                format!("reference `${{file:{d}}}`: `{d}` is a directory, {not_regular}"),
            ),
            (
                "${file:big.properties:password}".to_string(),
                format!("reference `${{file:big.properties:password}}`: `{d}/big.properties` is larger than 1 MiB, the most refract reads for a secret file"),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(r.resolve(&text).unwrap_err(), want, "{text}");
        }
        // The key that holds the reference is named; the secret never is.
        let pipeline = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.a.client]\n\"sasl.password\" = \"${file:big.properties:password}\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";
        let err = crate::Pipeline::parse_with_env(&dir.path().join("p.toml"), pipeline, &env)
            .unwrap_err();
        assert_eq!(err.file, dir.path().join("p.toml"));
        assert_eq!(err.key, "clusters.a.client.\"sasl.password\"");
        assert!(
            err.message
                .ends_with("is larger than 1 MiB, the most refract reads for a secret file"),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn toml_redaction() {
        let text = "# sasl.password = x\n[clusters.a.client]\n\"sasl.password\" = \"hunter2\"\n\"sasl.username\" = \"bob\"\n\"ssl.key.password\" = \"${env:K}\"\n";
        assert_eq!(
            redact_toml(text),
            "# sasl.password = x\n[clusters.a.client]\n\"sasl.password\" = \"[redacted]\"\n\"sasl.username\" = \"bob\"\n\"ssl.key.password\" = \"${env:K}\"\n"
        );
    }
}
