//! `[clusters.<alias>.schema_registry]` and a flow's `schemas*` keys, built and checked.

use std::path::PathBuf;

use toml::Spanned;

use super::{Builder, Cluster};
use crate::error::ConfigError;
use crate::flow::OnError;
use crate::keys;
use crate::raw::{RawFlow, RawSchemaRegistry};
use crate::schemas::{
    schema_defaults, RegistryAuth, RegistryTls, SchemaMode, SchemaRegistry, SchemaSettings,
    SubjectNaming,
};

impl Builder<'_> {
    /// `[clusters.<alias>.schema_registry]`; `key` is `clusters.<alias>`.
    pub(super) fn schema_registry(
        &self,
        key: &str,
        raw: Spanned<RawSchemaRegistry>,
    ) -> Result<SchemaRegistry, ConfigError> {
        let key = format!("{key}.schema_registry");
        let table_span = raw.span();
        let raw = raw.into_inner();
        let url_key = format!("{key}.url");
        let url = self.resolve(raw.url.span(), &url_key, raw.url.get_ref())?;
        if !self.offline {
            if let Err(problem) = check_url(url.resolved.trim()) {
                return self.err(raw.url.span(), url_key, problem.into());
            }
        }
        let secret = |field: &str, v: &Spanned<String>| {
            let k = format!("{key}.{field}");
            let value = self.resolve(v.span(), &k, v.get_ref())?;
            if !self.offline && value.resolved.is_empty() {
                return self.err(v.span(), k, "is empty".into());
            }
            Ok(value)
        };
        let auth = match (&raw.user, &raw.password, &raw.token) {
            (None, None, None) => RegistryAuth::None,
            (Some(user), Some(password), None) => RegistryAuth::Basic {
                user: secret("user", user)?,
                password: secret("password", password)?,
            },
            (None, None, Some(token)) => RegistryAuth::Bearer(secret("token", token)?),
            (Some(_), None, None) => {
                return self.err(
                    table_span,
                    format!("{key}.password"),
                    "is missing: basic authentication needs user and password".into(),
                )
            }
            (None, Some(p), None) => {
                return self.err(
                    p.span(),
                    format!("{key}.user"),
                    "is missing: basic authentication needs user and password".into(),
                )
            }
            (_, _, Some(t)) => {
                return self.err(
                    t.span(),
                    format!("{key}.token"),
                    "give either user and password (basic) or token (bearer), not both".into(),
                )
            }
        };
        let file =
            |field: &str, v: &Option<Spanned<String>>| -> Result<Option<PathBuf>, ConfigError> {
                let Some(v) = v else {
                    return Ok(None);
                };
                let k = format!("{key}.{field}");
                let value = self.resolve(v.span(), &k, v.get_ref())?;
                let text = value.resolved.trim();
                if text.is_empty() {
                    return self.err(v.span(), k, "is empty: name a PEM file".into());
                }
                let path = self.base.join(text);
                if !self.offline && !path.is_file() {
                    return self.err(
                        v.span(),
                        k,
                        format!("{} is not a readable file", path.display()),
                    );
                }
                Ok(Some(path))
            };
        let tls = RegistryTls {
            ca: file("ca", &raw.ca)?,
            cert: file("cert", &raw.cert)?,
            key: file("key", &raw.key)?,
        };
        match (&raw.cert, &raw.key) {
            (Some(c), None) => {
                return self.err(
                    c.span(),
                    format!("{key}.key"),
                    "is missing: a client certificate needs its key".into(),
                )
            }
            (None, Some(k)) => {
                return self.err(
                    k.span(),
                    format!("{key}.cert"),
                    "is missing: a client key needs its certificate".into(),
                )
            }
            _ => {}
        }
        let timeout = self.duration(
            &format!("{key}.timeout"),
            raw.timeout,
            schema_defaults::TIMEOUT,
        )?;
        Ok(SchemaRegistry::new(url, auth, tls, timeout).with_base(self.base.clone()))
    }

    /// A flow's `schemas`, `schema_fields`, `schema_on_error`, `schema_subjects` and
    /// `schema_sync_interval`; `translate` needs a registry on both clusters.
    pub(super) fn schema_settings(
        &self,
        key: &str,
        raw: &mut RawFlow,
        source: &Cluster,
        target: &Cluster,
    ) -> Result<SchemaSettings, ConfigError> {
        let mut settings = SchemaSettings::default();
        let schemas_span = raw.schemas.as_ref().map(Spanned::span);
        if let Some(mode) = self.one_of(
            raw.schemas.take(),
            &format!("{key}.schemas"),
            SchemaMode::parse,
            keys::SCHEMAS,
        )? {
            settings.mode = mode;
        }
        if let Some(fields) = raw.schema_fields.take() {
            settings.keys = false;
            settings.values = false;
            for f in &fields {
                match f.get_ref().as_str() {
                    "key" => settings.keys = true,
                    "value" => settings.values = true,
                    other => {
                        return self.err(
                            f.span(),
                            format!("{key}.schema_fields"),
                            format!("unknown field `{other}` (use \"key\", \"value\")"),
                        )
                    }
                }
            }
        }
        if let Some(on_error) = self.one_of(
            raw.schema_on_error.take(),
            &format!("{key}.schema_on_error"),
            OnError::parse,
            keys::ON_ERROR,
        )? {
            settings.on_error = on_error;
        }
        if let Some(naming) = self.one_of(
            raw.schema_subjects.take(),
            &format!("{key}.schema_subjects"),
            SubjectNaming::parse,
            keys::SCHEMA_SUBJECTS,
        )? {
            settings.subjects = naming;
        }
        settings.sync_interval = self.duration(
            &format!("{key}.schema_sync_interval"),
            raw.schema_sync_interval.take(),
            schema_defaults::SYNC_INTERVAL,
        )?;
        if settings.translate() {
            for (side, cluster) in [("source", source), ("target", target)] {
                if cluster.schema_registry.is_none() {
                    return self.err(
                        schemas_span.clone().unwrap_or_default(),
                        format!("{key}.schemas"),
                        format!(
                            "`translate` needs a schema registry on both clusters, and the {side} cluster `{}` has none: add [clusters.{}.schema_registry] url = \"…\"",
                            cluster.alias, cluster.alias
                        ),
                    );
                }
            }
            if !settings.keys && !settings.values {
                return self.err(
                    schemas_span.unwrap_or_default(),
                    format!("{key}.schema_fields"),
                    "is empty: name \"key\", \"value\" or both".into(),
                );
            }
        }
        Ok(settings)
    }
}

/// Why `url` cannot be a registry's base URL.
fn check_url(url: &str) -> Result<(), &'static str> {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return Err("must start with http:// or https://");
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err("names no host");
    }
    if authority.contains('@') {
        return Err("must not hold credentials (they would show wherever the URL is shown): set user and password, or token");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{ConfigError, OnError, Pipeline, SchemaMode, SubjectNaming};
    use std::path::Path;

    const CLUSTERS: &str = "[clusters.a]\nbootstrap = \"a:9092\"\n[clusters.a.schema_registry]\nurl = \"http://reg-a:8081/\"\n[clusters.b]\nbootstrap = \"b:9092\"\n";

    fn parse(extra_clusters: &str, flow: &str) -> Result<Pipeline, ConfigError> {
        let text = format!(
            "{CLUSTERS}{extra_clusters}\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n{flow}\n"
        );
        Pipeline::parse_with_env(Path::new("/tmp/p.toml"), &text, &|name: &str| {
            if name == "REG_PASS" {
                Ok("s3cret-pass".into())
            } else {
                Err(std::env::VarError::NotPresent)
            }
        })
    }

    const B_REGISTRY: &str = "[clusters.b.schema_registry]\nurl = \"https://reg-b\"\nuser = \"mirror\"\npassword = \"${env:REG_PASS}\"\ntimeout = \"3s\"\n";

    #[test]
    fn translate_needs_a_registry_on_both_clusters() {
        let e = parse("", "schemas = \"translate\"").unwrap_err();
        assert_eq!(e.key, "flow[0].schemas");
        assert!(e.message.contains("target cluster `b` has none"), "{e}");
        let p = parse(B_REGISTRY, "schemas = \"translate\"").unwrap();
        let s = &p.flows[0].schemas;
        assert_eq!(s.mode, SchemaMode::Translate);
        assert!(s.keys && s.values);
        assert_eq!(s.on_error, OnError::Stop);
        assert_eq!(s.subjects, SubjectNaming::Topic);
        let b = p.clusters["b"].schema_registry.as_ref().unwrap();
        assert_eq!(b.basic_auth(), Some(("mirror", "s3cret-pass")));
        assert_eq!(b.timeout, std::time::Duration::from_secs(3));
        assert!(!format!("{p:?}").contains("s3cret-pass"));
        assert_eq!(
            p.clusters["a"].schema_registry.as_ref().unwrap().url,
            "http://reg-a:8081"
        );
    }

    #[test]
    fn off_is_the_default_and_needs_no_registry() {
        let p = parse("", "").unwrap();
        assert_eq!(p.flows[0].schemas.mode, SchemaMode::Off);
    }

    #[test]
    fn bad_schema_keys_are_named() {
        let cases = [
            ("", "schemas = \"yes\"", "flow[0].schemas"),
            (B_REGISTRY, "schemas = \"translate\"\nschema_fields = [\"headers\"]", "flow[0].schema_fields"),
            (B_REGISTRY, "schemas = \"translate\"\nschema_fields = []", "flow[0].schema_fields"),
            (B_REGISTRY, "schema_on_error = \"retry\"", "flow[0].schema_on_error"),
            (B_REGISTRY, "schema_subjects = \"none\"", "flow[0].schema_subjects"),
            ("[clusters.b.schema_registry]\nurl = \"reg-b:8081\"", "", "clusters.b.schema_registry.url"),
            ("[clusters.b.schema_registry]\nurl = \"https://u:p@reg-b\"", "", "clusters.b.schema_registry.url"),
            ("[clusters.b.schema_registry]\nurl = \"https://reg-b\"\nuser = \"u\"", "", "clusters.b.schema_registry.password"),
            ("[clusters.b.schema_registry]\nurl = \"https://reg-b\"\ntoken = \"t\"\nuser = \"u\"\npassword = \"p\"", "", "clusters.b.schema_registry.token"),
            ("[clusters.b.schema_registry]\nurl = \"https://reg-b\"\ncert = \"/nonexistent/c.pem\"", "", "clusters.b.schema_registry.cert"),
            ("[clusters.b.schema_registry]\nurl = \"https://reg-b\"\nca = \"/nonexistent/ca.pem\"", "", "clusters.b.schema_registry.ca"),
        ];
        for (clusters, flow, key) in cases {
            let e = parse(clusters, flow).unwrap_err();
            assert_eq!(e.key, key, "{clusters} {flow}: {e}");
        }
    }

    #[test]
    fn schema_fields_and_naming_are_read() {
        let p = parse(
            B_REGISTRY,
            "schemas = \"translate\"\nschema_fields = [\"value\"]\nschema_on_error = \"dead-letter\"\nschema_subjects = \"all\"\nschema_sync_interval = \"1m\"",
        )
        .unwrap();
        let s = &p.flows[0].schemas;
        assert!(!s.keys && s.values);
        assert_eq!(s.on_error, OnError::DeadLetter);
        assert_eq!(s.subjects, SubjectNaming::All);
        assert_eq!(s.sync_interval, std::time::Duration::from_secs(60));
    }
}
