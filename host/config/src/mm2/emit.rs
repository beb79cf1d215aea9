//! The converted pipeline written as TOML, with notes on what changed.

use std::collections::BTreeMap;
use std::path::Path;

use super::convert::{comment, toml_key, toml_string, ClusterOut, FlowOut, Origin};
use crate::error::ConfigError;

/// Which properties the generated TOML came from, by TOML key path and by TOML line.
#[derive(Debug, Default)]
pub(super) struct Origins {
    pub(super) paths: Vec<(String, Origin)>,
    pub(super) lines: BTreeMap<usize, Origin>,
}

impl Origins {
    /// Re-aims an error in the generated TOML at the property it came from.
    pub(super) fn map_error(&self, e: ConfigError) -> ConfigError {
        let by_path = self
            .paths
            .iter()
            .filter(|(path, _)| {
                e.key
                    .strip_prefix(path.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            })
            .max_by_key(|(path, _)| path.len())
            .map(|(_, origin)| origin);
        match by_path.or_else(|| e.line.and_then(|l| self.lines.get(&l))) {
            Some(origin) => ConfigError {
                file: e.file,
                line: Some(origin.line),
                key: origin.key.clone(),
                message: format!("{} (converted to `{}`)", e.message, e.key),
            },
            None => ConfigError {
                message: format!(
                    "{} (in the pipeline converted from this file{}; `refract convert` prints it)",
                    e.message,
                    e.line.map(|l| format!(", line {l}")).unwrap_or_default()
                ),
                line: None,
                ..e
            },
        }
    }
}

#[derive(Default)]
pub(super) struct TomlWriter {
    pub(super) text: String,
    /// Lines written so far.
    pub(super) lines: usize,
    pub(super) origins: Origins,
}

impl TomlWriter {
    pub(super) fn line(&mut self, text: &str) {
        self.text.push_str(text);
        self.text.push('\n');
        self.lines += text.matches('\n').count() + 1;
    }

    /// `key = value`, remembered as coming from `origin`.
    pub(super) fn entry(&mut self, path: String, key: &str, value: &str, origin: &Origin) {
        self.origins.lines.insert(self.lines + 1, origin.clone());
        self.origins.paths.push((path, origin.clone()));
        self.line(&format!("{key} = {value}"));
    }

    pub(super) fn header(&mut self, path: &Path, unsupported: &[String], notes: &[String]) {
        self.line(&format!(
            "# Pipeline converted from {} (MirrorMaker 2 properties).",
            comment(&path.display().to_string())
        ));
        if !unsupported.is_empty() {
            self.line("# Settings refract does not support (left out):");
            for key in unsupported {
                self.line(&format!("#   {}", comment(key)));
            }
        }
        if !notes.is_empty() {
            self.line("# Notes:");
            for note in notes {
                self.line(&format!("#   {}", comment(note)));
            }
        }
    }

    pub(super) fn cluster(&mut self, c: &ClusterOut) {
        let alias = toml_key(&c.alias);
        let path = format!("clusters.{}", c.alias);
        self.line("");
        self.origins.lines.insert(self.lines + 1, c.origin.clone());
        self.origins.paths.push((path.clone(), c.origin.clone()));
        self.line(&format!("[clusters.{alias}]"));
        let (servers, origin) = &c.bootstrap;
        self.entry(
            format!("{path}.bootstrap"),
            "bootstrap",
            &toml_string(servers),
            origin,
        );
        for (table, entries) in &c.tables {
            if entries.is_empty() {
                continue;
            }
            self.line(&format!("[clusters.{alias}.{table}]"));
            for (name, (value, origin)) in entries {
                self.entry(
                    format!("{path}.{table}.\"{name}\""),
                    &toml_string(name),
                    &toml_string(value),
                    origin,
                );
            }
        }
        if let Some(r) = &c.registry {
            let path = format!("{path}.schema_registry");
            self.line(&format!("[clusters.{alias}.schema_registry]"));
            let (url, origin) = &r.url;
            self.entry(format!("{path}.url"), "url", &toml_string(url), origin);
            if let Some((user, password, origin)) = &r.basic {
                self.entry(format!("{path}.user"), "user", &toml_string(user), origin);
                self.entry(
                    format!("{path}.password"),
                    "password",
                    &toml_string(password),
                    origin,
                );
            }
        }
    }

    pub(super) fn flow(&mut self, i: usize, f: &FlowOut) {
        let path = format!("flow[{i}]");
        self.line("");
        self.origins.lines.insert(self.lines + 1, f.origin.clone());
        self.origins.paths.push((path.clone(), f.origin.clone()));
        self.line("[[flow]]");
        self.entry(
            format!("{path}.source"),
            "source",
            &toml_string(&f.source),
            &f.origin,
        );
        self.entry(
            format!("{path}.target"),
            "target",
            &toml_string(&f.target),
            &f.origin,
        );
        for (key, value, origin) in &f.entries {
            self.entry(format!("{path}.{key}"), key, value, origin);
        }
    }
}
