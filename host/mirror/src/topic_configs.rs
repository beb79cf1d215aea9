//! Topic configs of remote topics: which source configs are copied (MirrorMaker 2's
//! DefaultConfigPropertyFilter and `use.defaults.from`), reading them, and re-syncing them.

use anyhow::{Context, Result};
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigEntry, ConfigSource, ResourceSpecifier,
};
use rdkafka::client::DefaultClientContext;

use refract_config::{DefaultsFrom, Flow};

use tracing::debug;

use refract_kafka::admin_ffi::{incremental_alter_topic_configs, AlterError};
use refract_kafka::clients::{ADMIN_BATCH, REQUEST_TIMEOUT};

/// Whether a source topic config is copied to the remote topic.
pub fn should_copy(flow: &Flow, entry: &ConfigEntry) -> bool {
    if entry.is_read_only || entry.is_sensitive || entry.value.is_none() {
        return false;
    }
    if flow.config_sync.exclude.matches(&entry.name) {
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
    set_on_topic || flow.config_sync.use_defaults_from == DefaultsFrom::Source
}

/// The configs of each of `topics` as the broker describes them, with one DescribeConfigs
/// request per [`ADMIN_BATCH`] topics (results come in the order asked). Per topic, in that
/// order: its entries or why they could not be read.
pub fn describe_many(
    admin: &AdminClient<DefaultClientContext>,
    topics: &[String],
) -> Vec<Result<Vec<ConfigEntry>, String>> {
    let options = AdminOptions::new().request_timeout(Some(REQUEST_TIMEOUT));
    let mut out = Vec::with_capacity(topics.len());
    for chunk in topics.chunks(ADMIN_BATCH) {
        let specs: Vec<ResourceSpecifier<'_>> =
            chunk.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
        match futures_executor::block_on(admin.describe_configs(specs.iter(), &options)) {
            Ok(results) if results.len() == chunk.len() => {
                out.extend(chunk.iter().zip(results).map(|(topic, r)| {
                    r.map(|resource| resource.entries)
                        .map_err(|e| format!("describing the configs of {topic}: {e}"))
                }));
            }
            Ok(results) => out.extend(chunk.iter().map(|topic| {
                Err(format!(
                    "describing the configs of {topic}: {} results for {} topics",
                    results.len(),
                    chunk.len()
                ))
            })),
            Err(e) => out.extend(
                chunk
                    .iter()
                    .map(|topic| Err(format!("describing the configs of {topic}: {e}"))),
            ),
        }
    }
    out
}

/// The configs each of `topics` (source topics) should have on its remote topic, sorted by
/// name, read at once ([`describe_many`]), in the order given.
pub fn wanted_many(
    flow: &Flow,
    source_admin: &AdminClient<DefaultClientContext>,
    topics: &[String],
) -> Vec<Result<Vec<(String, String)>, String>> {
    describe_many(source_admin, topics)
        .into_iter()
        .map(|entries| entries.map(|entries| copied(flow, entries)))
        .collect()
}

/// Of a source topic's config `entries`, those its remote topic should have, sorted by name.
fn copied(flow: &Flow, entries: Vec<ConfigEntry>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = entries
        .into_iter()
        .filter(|e| should_copy(flow, e))
        .filter_map(|e| e.value.map(|v| (e.name, v)))
        .collect();
    out.sort();
    out
}

/// The full config set a remote topic should have, given the source-derived `wanted` configs and
/// the remote topic's `current` ones: `wanted` plus the target's own values of excluded configs
/// (they are never touched). `None` when the topic already has exactly that.
pub fn desired(
    flow: &Flow,
    wanted: &[(String, String)],
    current: &[ConfigEntry],
) -> Option<Vec<(String, String)>> {
    let explicit = |e: &ConfigEntry| !e.is_default && e.source == ConfigSource::DynamicTopic;
    let mut desired: Vec<(String, String)> = wanted.to_vec();
    for e in current.iter().filter(|e| explicit(e)) {
        if flow.config_sync.exclude.matches(&e.name) && !desired.iter().any(|(k, _)| *k == e.name) {
            if let Some(v) = &e.value {
                desired.push((e.name.clone(), v.clone()));
            }
        }
    }
    desired.sort();
    let all_set = desired.iter().all(|(k, v)| {
        current
            .iter()
            .any(|e| &e.name == k && e.value.as_deref() == Some(v.as_str()))
    });
    let nothing_extra = current
        .iter()
        .filter(|e| explicit(e))
        .all(|e| desired.iter().any(|(k, _)| *k == e.name));
    (!(all_set && nothing_extra)).then_some(desired)
}

/// The IncrementalAlterConfigs operations that bring the remote topic's `current` configs to the
/// source-derived `wanted` ones, as MirrorMaker 2's incremental mode does: set each wanted config
/// whose value differs, delete (back to the target's default) each config set on the remote topic
/// that the source no longer sets, and leave excluded configs (the target's own) alone. Empty when
/// the topic is in sync.
pub fn incremental_ops(
    flow: &Flow,
    wanted: &[(String, String)],
    current: &[ConfigEntry],
) -> Vec<(String, Option<String>)> {
    let explicit = |e: &ConfigEntry| !e.is_default && e.source == ConfigSource::DynamicTopic;
    let mut ops: Vec<(String, Option<String>)> = wanted
        .iter()
        .filter(|(k, v)| {
            !current
                .iter()
                .any(|e| &e.name == k && e.value.as_deref() == Some(v.as_str()))
        })
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    ops.extend(
        current
            .iter()
            .filter(|e| explicit(e))
            .filter(|e| !flow.config_sync.exclude.matches(&e.name))
            .filter(|e| !wanted.iter().any(|(k, _)| *k == e.name))
            .map(|e| (e.name.clone(), None)),
    );
    ops.sort();
    ops
}

/// Brings each remote topic's configs to its source topic's (`items`: the remote topic and the
/// configs it should have, from [`wanted_many`]): the remote topics' current configs read with
/// one DescribeConfigs request per [`ADMIN_BATCH`] topics, then one alter request for each topic
/// that differs. Per item, in order: whether anything changed, or why not.
pub fn resync_many(
    flow: &Flow,
    target_admin: &AdminClient<DefaultClientContext>,
    items: &[(String, Vec<(String, String)>)],
) -> Vec<Result<bool>> {
    let remotes: Vec<String> = items.iter().map(|(remote, _)| remote.clone()).collect();
    describe_many(target_admin, &remotes)
        .into_iter()
        .zip(items)
        .map(|(current, (remote, wanted))| {
            let current = current.map_err(anyhow::Error::msg)?;
            resync(flow, target_admin, remote, wanted, &current)
        })
        .collect()
}

/// Brings the remote topic's configs (`current`) to the source's: IncrementalAlterConfigs (as
/// MM2 does since Kafka 3.x; other configs untouched), falling back to AlterConfigs with the full
/// [`desired`] set on a broker without it. Returns whether anything changed.
fn resync(
    flow: &Flow,
    target_admin: &AdminClient<DefaultClientContext>,
    remote: &str,
    wanted: &[(String, String)],
    current: &[ConfigEntry],
) -> Result<bool> {
    let ops = incremental_ops(flow, wanted, current);
    if ops.is_empty() {
        return Ok(false);
    }
    match incremental_alter_topic_configs(target_admin, remote, &ops, REQUEST_TIMEOUT) {
        Ok(()) => return Ok(true),
        Err(AlterError::Failed(e)) => anyhow::bail!("altering the configs of {remote}: {e}"),
        Err(AlterError::Unsupported(e)) => {
            debug!("IncrementalAlterConfigs unsupported for {remote} ({e}); using AlterConfigs")
        }
    }
    let Some(desired) = desired(flow, wanted, current) else {
        return Ok(false);
    };
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

    fn set(name: &str, value: &str) -> ConfigEntry {
        ConfigEntry {
            value: Some(value.into()),
            ..entry(name, false, ConfigSource::DynamicTopic)
        }
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn resync_sets_source_configs_and_keeps_excluded_target_overrides() {
        let f = flow("");
        let wanted = pairs(&[("retention.ms", "100")]);
        // already in sync: nothing to do
        assert_eq!(desired(&f, &wanted, &[set("retention.ms", "100")]), None);
        // a changed value on the source
        assert_eq!(
            desired(&f, &wanted, &[set("retention.ms", "5")]),
            Some(pairs(&[("retention.ms", "100")]))
        );
        // the target's own min.insync.replicas (excluded) survives; a config the source no
        // longer sets is dropped (back to the target default)
        assert_eq!(
            desired(
                &f,
                &wanted,
                &[
                    set("retention.ms", "100"),
                    set("min.insync.replicas", "2"),
                    set("segment.ms", "9")
                ]
            ),
            Some(pairs(&[
                ("min.insync.replicas", "2"),
                ("retention.ms", "100")
            ]))
        );
        // broker defaults on the target are not overrides
        assert_eq!(
            desired(
                &f,
                &wanted,
                &[
                    set("retention.ms", "100"),
                    entry("segment.ms", true, ConfigSource::Default)
                ]
            ),
            None
        );
    }

    #[test]
    fn incremental_ops_set_changes_delete_dropped_configs_and_keep_excluded_ones() {
        let f = flow("");
        let wanted = pairs(&[("retention.ms", "100"), ("segment.ms", "7")]);
        let none: Vec<(String, Option<String>)> = Vec::new();
        assert_eq!(
            incremental_ops(
                &f,
                &wanted,
                &[set("retention.ms", "100"), set("segment.ms", "7")]
            ),
            none,
            "in sync"
        );
        assert_eq!(
            incremental_ops(
                &f,
                &wanted,
                &[
                    set("retention.ms", "5"),
                    set("min.insync.replicas", "2"),
                    set("cleanup.policy", "compact"),
                    entry("segment.ms", true, ConfigSource::Default),
                ]
            ),
            vec![
                ("cleanup.policy".to_string(), None),
                ("retention.ms".to_string(), Some("100".to_string())),
                ("segment.ms".to_string(), Some("7".to_string())),
            ],
            "changed and new values set, a config the source dropped deleted, the target's \
             excluded min.insync.replicas untouched"
        );
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
