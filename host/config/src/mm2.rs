//! MirrorMaker 2's `mm2.properties` turned into a pipeline, so an MM2 deployment can switch to
//! refract without rewriting its config.
//!
//! The file is read exactly as Java's `Properties.load` reads it: `key = value`, `key: value` or
//! `key value`; `#` and `!` comment lines; a line ending in an odd number of backslashes continues
//! on the next (whose leading blanks are dropped); `\t \n \r \f \uXXXX` escapes; and a backslash
//! before any other character is dropped. So `min\.insync\.replicas` reaches MirrorMaker 2 as
//! `min.insync.replicas`, a regex whose dots match any character, and the conversion keeps that
//! meaning (and notes it); `\\.` is how an MM2 file spells a regex-escaped dot. Two deviations:
//! the text is UTF-8 where Java reads ISO-8859-1, and a leading byte-order mark is skipped.
//!
//! Settings resolve as MirrorMaker 2 resolves them: a flow `A->B` runs when `A->B.enabled = true`,
//! and each of its settings is `A->B.<key>` if set, else the top-level `<key>`; the 3.x names
//! `topics.blacklist`, `groups.blacklist` and `config.properties.blacklist` are read when the new
//! name is set at neither level. Settings the file leaves out take refract's defaults, which differ
//! from MM2's for some intervals and replication factors (see the README).
//!
//! Client settings (`A.security.protocol`, `A.ssl.*`, `A.sasl.*`, `A.client.id`, top-level
//! `security.protocol`/`ssl.*`/`sasl.*` as a fallback for every cluster, and `A.consumer.*`,
//! `A.producer.*`, `A.admin.*`) are passed to librdkafka only when librdkafka has a property of
//! the same meaning (`LIBRDKAFKA_SAME`, `LIBRDKAFKA_RENAMED`). `sasl.jaas.config`, key and trust
//! stores and `config.providers` references are converted by [`security`]; other Java-only
//! settings are reported instead of producing a client that fails to start.

mod convert;
mod emit;
#[cfg(test)]
mod reference;
mod registry;
mod security;
#[cfg(test)]
mod security_tests;
mod settings;
#[cfg(test)]
mod tests;

use convert::Converter;
use emit::{Origins, TomlWriter};

use std::path::Path;

use crate::error::ConfigError;
use crate::model::Pipeline;
use crate::properties::parse_properties;

use crate::secrets::{redact_toml, EnvLookup};

/// A MirrorMaker 2 properties file converted to pipeline TOML.
///
/// The TOML keeps config provider references as refract references (`${file:…}`, `${env:…}`);
/// a secret the properties file holds in clear is carried over as it is (and noted), but `Debug`
/// shows it as `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Mm2Conversion {
    /// The pipeline, with a header comment naming the file, the unsupported settings and notes.
    pub toml: String,
    /// Settings in the file that refract ignores, as written there; sorted, without duplicates.
    pub unsupported: Vec<String>,
    /// What the conversion assumed, renamed or left out on purpose.
    pub notes: Vec<String>,
}

impl std::fmt::Debug for Mm2Conversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mm2Conversion")
            .field("toml", &redact_toml(&self.toml))
            .field("unsupported", &self.unsupported)
            .field("notes", &self.notes)
            .finish()
    }
}

impl Mm2Conversion {
    /// The lines [`Pipeline::load`] puts into [`Pipeline::warnings`] for a `.properties` file.
    pub fn warnings(&self, path: &Path) -> Vec<String> {
        let file = path.display();
        let mut out = Vec::new();
        if !self.unsupported.is_empty() {
            out.push(format!(
                "{file}: ignored MirrorMaker 2 settings refract does not support: {}",
                self.unsupported.join(", ")
            ));
        }
        out.extend(self.notes.iter().map(|n| format!("{file}: {n}")));
        out
    }
}

/// Converts the text of a MirrorMaker 2 properties file to pipeline TOML; `path` names it in
/// errors and in the TOML's header. Every enabled flow `A->B` becomes a `[[flow]]`.
pub fn convert_mm2_properties(path: &Path, text: &str) -> Result<Mm2Conversion, ConfigError> {
    convert(path, text).map(|(conversion, _)| conversion)
}

/// [`Pipeline::load`] for a `.properties` file: converts it, then validates the TOML; errors of the
/// second step name the property the offending TOML came from.
pub(crate) fn load(path: &Path, text: &str) -> Result<Pipeline, ConfigError> {
    load_with_env(path, text, &|name: &str| std::env::var(name))
}

/// [`load`] with `env` looking up environment variables.
pub(crate) fn load_with_env(
    path: &Path,
    text: &str,
    env: EnvLookup<'_>,
) -> Result<Pipeline, ConfigError> {
    let (conversion, origins) = convert(path, text)?;
    let mut pipeline =
        Pipeline::parse_with_env(path, &conversion.toml, env).map_err(|e| origins.map_error(e))?;
    pipeline.warnings = conversion.warnings(path);
    Ok(pipeline)
}

fn convert(path: &Path, text: &str) -> Result<(Mm2Conversion, Origins), ConfigError> {
    let props = parse_properties(path, text)?;
    let mut converter = Converter::new(path, props);
    converter.providers()?;
    let (clusters, flows) = converter.pipeline()?;
    let unsupported: Vec<String> = converter.unsupported.iter().cloned().collect();
    let notes = converter.sorted_notes();
    let mut out = TomlWriter::default();
    out.header(path, &unsupported, &notes);
    for cluster in &clusters {
        out.cluster(cluster);
    }
    for (i, flow) in flows.iter().enumerate() {
        out.flow(i, flow);
    }
    let conversion = Mm2Conversion {
        toml: out.text,
        unsupported,
        notes,
    };
    Ok((conversion, out.origins))
}
