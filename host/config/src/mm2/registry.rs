//! MirrorMaker 2's schema registry settings: `<alias>.schema.registry.url` and
//! `<alias>.schema.registry.basic.auth.user.info` become `[clusters.<alias>.schema_registry]`,
//! and a flow whose two clusters both have a registry gets `schemas = "translate"`.

use super::convert::{toml_string, ClusterOut, Converter, FlowOut, Origin};
use crate::error::ConfigError;
use crate::properties::Prop;

/// A `[clusters.<alias>.schema_registry]` to write.
pub(super) struct RegistryOut {
    pub(super) url: (String, Origin),
    /// `user` and `password` from `<alias>.schema.registry.basic.auth.user.info`.
    pub(super) basic: Option<(String, String, Origin)>,
}

/// Takes a cluster's `schema.registry.url` and `schema.registry.basic.auth.user.info` out of its
/// `<alias>.<rest>` keys (`own`, by `<rest>`, each at most once).
pub(super) fn take_registry_keys(own: &mut Vec<(String, Prop)>) -> (Option<Prop>, Option<Prop>) {
    let mut take = |name: &str| {
        let at = own.iter().position(|(rest, _)| rest == name)?;
        Some(own.remove(at).1)
    };
    let url = take("schema.registry.url");
    (url, take("schema.registry.basic.auth.user.info"))
}

impl Converter<'_> {
    /// `<alias>.schema.registry.url` and `<alias>.schema.registry.basic.auth.user.info`
    /// (`user:password`, as Confluent's serializers read it).
    pub(super) fn registry(
        &mut self,
        alias: &str,
        url: Option<Prop>,
        user_info: Option<Prop>,
    ) -> Result<Option<RegistryOut>, ConfigError> {
        let Some(url) = url else {
            if let Some(p) = user_info {
                self.other_key(&p, "schema.registry.basic.auth.user.info");
            }
            return Ok(None);
        };
        let basic = match user_info {
            None => None,
            Some(p) => {
                let value = self.references(&p, p.value.trim())?;
                match value.split_once(':') {
                    Some((user, password)) if !value.contains("${") => {
                        self.note(Some(p.line), format!(
                            "{} (line {}): a secret written in clear; the converted pipeline carries it as it is: set [clusters.{alias}.schema_registry] user and password = \"${{env:NAME}}\" instead",
                            p.key, p.line
                        ));
                        Some((user.to_string(), password.to_string(), Origin::from(&p)))
                    }
                    _ => {
                        self.note(Some(p.line), format!(
                            "{} (line {}): left out: refract cannot split a reference into user and password; set [clusters.{alias}.schema_registry] user and password",
                            p.key, p.line
                        ));
                        None
                    }
                }
            }
        };
        let value = self.references(&url, url.value.trim())?;
        Ok(Some(RegistryOut {
            url: (value, Origin::from(&url)),
            basic,
        }))
    }

    /// Gives every flow whose two clusters both have a schema registry `schemas = "translate"`
    /// (with a note): MirrorMaker 2 copied schema ids as bytes.
    pub(super) fn translate_schemas(&mut self, clusters: &[ClusterOut], flows: &mut [FlowOut]) {
        for flow in flows {
            let registry = |alias: &str| {
                clusters
                    .iter()
                    .find(|c| c.alias == alias)
                    .and_then(|c| c.registry.as_ref())
            };
            if let (Some(_), Some(target)) = (registry(&flow.source), registry(&flow.target)) {
                flow.entries
                    .push(("schemas", toml_string("translate"), target.url.1.clone()));
                let note = format!(
                    "flow {}->{}: both clusters name a schema.registry.url, so its records' schema ids are translated to the target registry's (schemas = \"translate\"); MirrorMaker 2 copied them as bytes",
                    flow.source, flow.target
                );
                self.note(None, note);
            }
        }
    }
}
