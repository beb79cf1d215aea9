//! Topic configs of remote topics: which source configs are copied (MirrorMaker 2's
//! DefaultConfigPropertyFilter and `use.defaults.from`), reading them, and re-syncing them.

use anyhow::{Context, Result};
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigEntry, ConfigSource, ResourceSpecifier,
};
use rdkafka::client::DefaultClientContext;

use refract_config::{DefaultsFrom, Flow};

use crate::clients::REQUEST_TIMEOUT;

/// Whether a source topic config is copied to the remote topic.
pub fn should_copy(flow: &Flow, entry: &ConfigEntry) -> bool {
    if entry.is_read_only || entry.is_sensitive || entry.value.is_none() {
        return false;
    }
    if flow.config_properties_exclude.matches(&entry.name) {
        return false;
    }
    let set_on_topic = !entry.is_default
        && !matches!(
            entry.source,
            ConfigSource::Default
                | ConfigSource::StaticBroker
                | ConfigSource::DynamicBroker
                | ConfigSource::DynamicDefaultBroker
        );
    set_on_topic || flow.use_defaults_from == DefaultsFrom::Source
}

/// The topic's configs as the broker describes them.
pub fn describe(
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
) -> Result<Vec<ConfigEntry>> {
    let options = AdminOptions::new().request_timeout(Some(REQUEST_TIMEOUT));
    let results = futures_executor::block_on(
        admin.describe_configs([&ResourceSpecifier::Topic(topic)], &options),
    )
    .with_context(|| format!("describing the configs of {topic}"))?;
    let mut out = Vec::new();
    for r in results {
        let resource = r.map_err(|e| anyhow::anyhow!("describing the configs of {topic}: {e}"))?;
        out.extend(resource.entries);
    }
    Ok(out)
}

/// The source topic's configs that the remote topic should have, sorted by name.
pub fn wanted(
    flow: &Flow,
    source_admin: &AdminClient<DefaultClientContext>,
    topic: &str,
) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = describe(source_admin, topic)?
        .into_iter()
        .filter(|e| should_copy(flow, e))
        .filter_map(|e| e.value.map(|v| (e.name, v)))
        .collect();
    out.sort();
    Ok(out)
}

/// Sets the remote topic's configs to `wanted`, keeping the target's own values of excluded
/// configs (they are never touched). Returns whether anything changed.
pub fn resync(
    flow: &Flow,
    target_admin: &AdminClient<DefaultClientContext>,
    remote: &str,
    wanted: &[(String, String)],
) -> Result<bool> {
    let current = describe(target_admin, remote)?;
    let mut desired: Vec<(String, String)> = wanted.to_vec();
    for e in &current {
        let explicit = !e.is_default && e.source == ConfigSource::DynamicTopic;
        if explicit && flow.config_properties_exclude.matches(&e.name) {
            if let Some(v) = &e.value {
                desired.push((e.name.clone(), v.clone()));
            }
        }
    }
    desired.sort();
    let unchanged = desired.iter().all(|(k, v)| {
        current
            .iter()
            .any(|e| &e.name == k && e.value.as_deref() == Some(v.as_str()))
    }) && current
        .iter()
        .filter(|e| !e.is_default && e.source == ConfigSource::DynamicTopic)
        .all(|e| desired.iter().any(|(k, _)| *k == e.name));
    if unchanged {
        return Ok(false);
    }
    let mut alter = AlterConfig::new(ResourceSpecifier::Topic(remote));
    for (k, v) in &desired {
        alter = alter.set(k, v);
    }
    let options = AdminOptions::new().request_timeout(Some(REQUEST_TIMEOUT));
    let results = futures_executor::block_on(target_admin.alter_configs([&alter], &options))
        .with_context(|| format!("altering the configs of {remote}"))?;
    for r in results {
        r.map_err(|(_, e)| anyhow::anyhow!("altering the configs of {remote}: {e}"))?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn flow(extra: &str) -> Flow {
        let text = format!("[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n{extra}\n");
        refract_config::Pipeline::parse(Path::new("p.toml"), &text)
            .unwrap()
            .flows
            .remove(0)
    }

    fn entry(name: &str, default: bool, source: ConfigSource) -> ConfigEntry {
        ConfigEntry {
            name: name.into(),
            value: Some("1".into()),
            source,
            is_read_only: false,
            is_default: default,
            is_sensitive: false,
        }
    }

    #[test]
    fn mm2_config_property_filter() {
        let f = flow("");
        assert!(should_copy(
            &f,
            &entry("retention.ms", false, ConfigSource::DynamicTopic)
        ));
        assert!(!should_copy(
            &f,
            &entry("retention.ms", true, ConfigSource::Default)
        ));
        assert!(!should_copy(
            &f,
            &entry("retention.ms", false, ConfigSource::StaticBroker)
        ));
        assert!(!should_copy(
            &f,
            &entry("min.insync.replicas", false, ConfigSource::DynamicTopic)
        ));
        let mut ro = entry("segment.bytes", false, ConfigSource::DynamicTopic);
        ro.is_read_only = true;
        assert!(!should_copy(&f, &ro));
        let mut secret = entry("x", false, ConfigSource::DynamicTopic);
        secret.is_sensitive = true;
        assert!(!should_copy(&f, &secret));
        let from_source = flow("use_defaults_from = \"source\"");
        assert!(should_copy(
            &from_source,
            &entry("retention.ms", true, ConfigSource::Default)
        ));
        assert!(!should_copy(
            &from_source,
            &entry("min.insync.replicas", true, ConfigSource::Default)
        ));
        let custom = flow("config_properties_exclude = [\"retention\\\\..*\"]");
        assert!(!should_copy(
            &custom,
            &entry("retention.ms", false, ConfigSource::DynamicTopic)
        ));
        assert!(should_copy(
            &custom,
            &entry("min.insync.replicas", false, ConfigSource::DynamicTopic)
        ));
    }
}
