//! A pipeline's plugin entries (`policy` and `processors`) built into [`PluginSpec`]s: where
//! the plugin comes from, its config table, its `on_error` and its sandbox limits.

use toml::Spanned;

use super::Builder;
use crate::duration::{parse_duration, parse_size};
use crate::error::ConfigError;
use crate::flow::{
    defaults, OnError, PluginLimitSettings, PluginLocation, PluginSpec, ProcessorSpec,
};
use crate::keys::{self, choices_text};
use crate::raw::{RawPlugin, RawProcessor};
use crate::rules::BUILTIN_PROCESSORS;

impl Builder<'_> {
    pub(super) fn processor(
        &self,
        key: &str,
        raw: Spanned<RawProcessor>,
    ) -> Result<ProcessorSpec, ConfigError> {
        let span = raw.span();
        let raw = raw.into_inner();
        let on_error = match raw.on_error {
            None => OnError::Stop,
            Some(text) => OnError::parse(text.get_ref()).ok_or_else(|| {
                self.loc.error(
                    Some(text.span()),
                    format!("{key}.on_error"),
                    format!(
                        "unknown value `{}` (use {})",
                        text.get_ref(),
                        choices_text(keys::ON_ERROR)
                    ),
                )
            })?,
        };
        let plugin = RawPlugin {
            plugin: raw.plugin,
            config: raw.config,
            memory_limit: raw.memory_limit,
            call_timeout: raw.call_timeout,
            max_outputs_per_record: raw.max_outputs_per_record,
            max_outputs_per_call: raw.max_outputs_per_call,
            max_output_bytes: raw.max_output_bytes,
            max_wasm_bytes: raw.max_wasm_bytes,
            compile_timeout: raw.compile_timeout,
            compile_memory_limit: raw.compile_memory_limit,
        };
        let plugin = self.plugin(key, Spanned::new(span, plugin), BUILTIN_PROCESSORS)?;
        let output_topics = raw
            .output_topics
            .map(|list| self.patterns(&format!("{key}.output_topics"), list))
            .transpose()?;
        let max_new_output_topics = match raw.max_new_output_topics {
            None => defaults::MAX_NEW_OUTPUT_TOPICS,
            Some(n) => u32::try_from(*n.get_ref()).map_err(|_| {
                self.loc.error(
                    Some(n.span()),
                    format!("{key}.max_new_output_topics"),
                    format!("must be a whole number from 0 to {}", u32::MAX),
                )
            })?,
        };
        Ok(ProcessorSpec {
            plugin,
            on_error,
            output_topics,
            max_new_output_topics,
        })
    }

    pub(super) fn plugin(
        &self,
        key: &str,
        raw: Spanned<RawPlugin>,
        builtins: &[&str],
    ) -> Result<PluginSpec, ConfigError> {
        let raw = raw.into_inner();
        let name = raw.plugin.get_ref().trim().to_string();
        let location = if name.starts_with("builtin:") {
            if !builtins.contains(&name.as_str()) {
                return self.err(
                    raw.plugin.span(),
                    format!("{key}.plugin"),
                    format!(
                        "unknown built-in plugin `{name}` (built-ins: {})",
                        builtins.join(", ")
                    ),
                );
            }
            PluginLocation::Builtin(name)
        } else {
            let path = self.base.join(&name);
            if !self.offline && !path.is_file() {
                return self.err(
                    raw.plugin.span(),
                    format!("{key}.plugin"),
                    format!("plugin file `{}` does not exist", path.display()),
                );
            }
            PluginLocation::File(path)
        };
        let config = match raw.config {
            None => String::new(),
            Some(table) => toml::to_string(&table).map_err(|e| {
                self.loc.error(
                    Some(raw.plugin.span()),
                    format!("{key}.config"),
                    e.to_string(),
                )
            })?,
        };
        let size =
            |value: Option<Spanned<String>>, name: &str| -> Result<Option<usize>, ConfigError> {
                value
                    .map(|m| {
                        parse_size(m.get_ref())
                            .map_err(|e| self.loc.error(Some(m.span()), format!("{key}.{name}"), e))
                    })
                    .transpose()
            };
        let count = |value: Option<Spanned<i64>>, name: &str| -> Result<Option<u32>, ConfigError> {
            value
                .map(|n| match u32::try_from(*n.get_ref()) {
                    Ok(v) if v > 0 => Ok(v),
                    _ => Err(self.loc.error(
                        Some(n.span()),
                        format!("{key}.{name}"),
                        format!("must be a whole number from 1 to {}", u32::MAX),
                    )),
                })
                .transpose()
        };
        let duration = |value: Option<Spanned<String>>,
                        name: &str|
         -> Result<Option<std::time::Duration>, ConfigError> {
            let Some(t) = value else {
                return Ok(None);
            };
            match parse_duration(t.get_ref()) {
                Ok(d) if !d.is_zero() => Ok(Some(d)),
                Ok(_) => self.err(
                    t.span(),
                    format!("{key}.{name}"),
                    "must be greater than zero".into(),
                ),
                Err(e) => self.err(t.span(), format!("{key}.{name}"), e),
            }
        };
        let call_timeout = duration(raw.call_timeout, "call_timeout")?;
        let limits = PluginLimitSettings {
            memory_limit: size(raw.memory_limit, "memory_limit")?,
            call_timeout,
            max_outputs_per_record: count(raw.max_outputs_per_record, "max_outputs_per_record")?,
            max_outputs_per_call: count(raw.max_outputs_per_call, "max_outputs_per_call")?,
            max_output_bytes: size(raw.max_output_bytes, "max_output_bytes")?,
            max_wasm_bytes: size(raw.max_wasm_bytes, "max_wasm_bytes")?,
            compile_timeout: duration(raw.compile_timeout, "compile_timeout")?,
            compile_memory_limit: size(raw.compile_memory_limit, "compile_memory_limit")?,
        };
        Ok(PluginSpec {
            location,
            config,
            key: key.to_string(),
            limits,
        })
    }
}
