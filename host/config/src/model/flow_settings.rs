//! `[[flow]]` entries built into [`Flow`]s: the topic and group filters, the MirrorMaker 2
//! settings (offset syncs, checkpoints, heartbeats, config and ACL sync), delivery and tasks,
//! each checked and defaulted. Split from the pipeline model, which only strings flows together.

use std::collections::BTreeMap;
use std::time::Duration;

use toml::Spanned;

use super::{Builder, Cluster};
use crate::error::ConfigError;
use crate::flow::{
    defaults, AclSyncSettings, CheckpointSettings, ConfigSyncSettings, DefaultsFrom, DeliveryMode,
    DeliverySettings, Flow, HeartbeatSettings, OffsetSyncSettings, OffsetSyncsLocation,
    OffsetTranslation, OnLostRecords, OnRecreatedTopic, PluginSpec, Throttle,
};
use crate::keys::{self, choices_text};
use crate::raw::RawFlow;
use crate::rules::{BUILTIN_POLICIES, COMPRESSION_TYPES};
use crate::topics::{
    PatternList, TopicFilter, DEFAULT_CONFIG_PROPERTIES_EXCLUDE, DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS_EXCLUDE,
};

impl Builder<'_> {
    /// A setting whose text names one of a few values: `None` when unset, the value `parse`
    /// finds, or an error at `key` listing `choices` (the key's values in [`keys::KEYS`]).
    pub(super) fn one_of<T>(
        &self,
        raw: Option<Spanned<String>>,
        key: &str,
        parse: impl Fn(&str) -> Option<T>,
        choices: &[&str],
    ) -> Result<Option<T>, ConfigError> {
        let Some(v) = raw else {
            return Ok(None);
        };
        match parse(v.get_ref()) {
            Some(value) => Ok(Some(value)),
            None => self.err(
                v.span(),
                key.to_string(),
                format!(
                    "unknown value `{}` (use {})",
                    v.get_ref(),
                    choices_text(choices)
                ),
            ),
        }
    }

    /// `max_bytes_per_second` (bytes, or a size like "2MiB") and `max_records_per_second`.
    fn throttle(
        &self,
        key: &str,
        bytes: &Option<Spanned<toml::Value>>,
        records: &Option<Spanned<i64>>,
    ) -> Result<Throttle, ConfigError> {
        let bytes_per_second = match bytes {
            None => None,
            Some(v) => {
                let parsed = match v.get_ref() {
                    toml::Value::Integer(n) if *n > 0 => Ok(*n as u64),
                    toml::Value::String(s) => crate::parse_size(s).map(|n| n as u64),
                    _ => Err("must be a positive number of bytes or a size like \"2MiB\"".into()),
                };
                Some(
                    parsed.or_else(|e| {
                        self.err(v.span(), format!("{key}.max_bytes_per_second"), e)
                    })?,
                )
            }
        };
        let records_per_second = match records {
            None => None,
            Some(v) if *v.get_ref() > 0 => Some(*v.get_ref() as u64),
            Some(v) => {
                return self.err(
                    v.span(),
                    format!("{key}.max_records_per_second"),
                    "must be a positive number of records".into(),
                )
            }
        };
        Ok(Throttle {
            bytes_per_second,
            records_per_second,
        })
    }

    pub(super) fn flow(
        &self,
        i: usize,
        mut raw: RawFlow,
        clusters: &BTreeMap<String, Cluster>,
    ) -> Result<Option<Flow>, ConfigError> {
        let key = format!("flow[{i}]");
        for (field, alias) in [("source", &raw.source), ("target", &raw.target)] {
            if !clusters.contains_key(alias.get_ref()) {
                let known: Vec<&str> = clusters.keys().map(String::as_str).collect();
                return self.err(
                    alias.span(),
                    format!("{key}.{field}"),
                    format!(
                        "unknown cluster `{}` (defined: {})",
                        alias.get_ref(),
                        known.join(", ")
                    ),
                );
            }
        }
        if raw.source.get_ref() == raw.target.get_ref() {
            return self.err(
                raw.target.span(),
                format!("{key}.target"),
                format!(
                    "a flow cannot mirror cluster `{}` into itself",
                    raw.source.get_ref()
                ),
            );
        }
        let (source, target) = (
            &clusters[raw.source.get_ref()],
            &clusters[raw.target.get_ref()],
        );
        let schemas = self.schema_settings(&key, &mut raw, source, target)?;
        let include = match raw.topics {
            Some(list) => self.patterns(&format!("{key}.topics"), list)?,
            None => self.patterns(
                &format!("{key}.topics"),
                vec![Spanned::new(0..0, ".*".to_string())],
            )?,
        };
        let exclude = match raw.topics_exclude {
            Some(list) => self.patterns(&format!("{key}.topics_exclude"), list)?,
            None => PatternList::new(
                DEFAULT_TOPICS_EXCLUDE
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            )
            .map_err(|(_, e)| self.loc.error(None, format!("{key}.topics_exclude"), e))?,
        };
        let policy = match raw.policy {
            Some(p) => self.plugin(&format!("{key}.policy"), p, BUILTIN_POLICIES)?,
            None => PluginSpec::builtin("builtin:default", &format!("{key}.policy")),
        };
        let refresh_topics_interval = self.duration(
            &format!("{key}.refresh_topics_interval"),
            raw.refresh_topics_interval,
            defaults::REFRESH_TOPICS_INTERVAL,
        )?;
        let commit_interval = self.duration(
            &format!("{key}.commit_interval"),
            raw.commit_interval,
            defaults::COMMIT_INTERVAL,
        )?;
        let replication_factor =
            self.replication_factor(&format!("{key}.replication_factor"), raw.replication_factor)?;
        let internal_replication_factor = self.replication_factor(
            &format!("{key}.internal_replication_factor"),
            raw.internal_replication_factor,
        )?;
        let groups = TopicFilter {
            include: match raw.groups {
                Some(list) => self.patterns(&format!("{key}.groups"), list)?,
                None => self.defaults(&format!("{key}.groups"), defaults::GROUPS)?,
            },
            exclude: match raw.groups_exclude {
                Some(list) => self.patterns(&format!("{key}.groups_exclude"), list)?,
                None => self.defaults(&format!("{key}.groups_exclude"), DEFAULT_GROUPS_EXCLUDE)?,
            },
        };
        let config_properties_exclude = match raw.config_properties_exclude {
            Some(list) => self.patterns(&format!("{key}.config_properties_exclude"), list)?,
            None => self.defaults(
                &format!("{key}.config_properties_exclude"),
                DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
            )?,
        };
        let offset_syncs_location = match raw.offset_syncs_location {
            None => OffsetSyncsLocation::Source,
            Some(v) => match v.get_ref().as_str() {
                "source" => OffsetSyncsLocation::Source,
                "target" => OffsetSyncsLocation::Target,
                other => {
                    return self.err(
                        v.span(),
                        format!("{key}.offset_syncs_location"),
                        format!(
                            "unknown value `{other}` (use {})",
                            choices_text(keys::OFFSET_SYNCS_LOCATION)
                        ),
                    )
                }
            },
        };
        let offset_translation = match raw.offset_translation {
            None => OffsetTranslation::default(),
            Some(v) => match v.get_ref().as_str() {
                "mm2" => OffsetTranslation::Mm2,
                "exact" => OffsetTranslation::Exact,
                other => {
                    return self.err(
                        v.span(),
                        format!("{key}.offset_translation"),
                        format!(
                            "unknown value `{other}` (use {})",
                            choices_text(keys::OFFSET_TRANSLATION)
                        ),
                    )
                }
            },
        };
        let use_defaults_from = match raw.use_defaults_from {
            None => DefaultsFrom::Target,
            Some(v) => match v.get_ref().as_str() {
                "target" => DefaultsFrom::Target,
                "source" => DefaultsFrom::Source,
                other => {
                    return self.err(
                        v.span(),
                        format!("{key}.use_defaults_from"),
                        format!(
                            "unknown value `{other}` (use {})",
                            choices_text(keys::USE_DEFAULTS_FROM)
                        ),
                    )
                }
            },
        };
        let offset_lag_max = match raw.offset_lag_max {
            None => defaults::OFFSET_LAG_MAX,
            Some(v) if *v.get_ref() >= 0 => *v.get_ref(),
            Some(v) => {
                return self.err(
                    v.span(),
                    format!("{key}.offset_lag_max"),
                    "must be 0 or more".into(),
                )
            }
        };
        let emit_offset_syncs = raw.emit_offset_syncs.unwrap_or(defaults::EMIT_OFFSET_SYNCS);
        let emit_checkpoints = raw.emit_checkpoints.unwrap_or(emit_offset_syncs);
        if emit_checkpoints && !emit_offset_syncs {
            return self.err(
                raw.source.span(),
                format!("{key}.emit_checkpoints"),
                "checkpoints need offset syncs: set emit_offset_syncs = true or emit_checkpoints = false".into(),
            );
        }
        let sync_group_offsets = raw
            .sync_group_offsets
            .unwrap_or(defaults::SYNC_GROUP_OFFSETS);
        if sync_group_offsets && !emit_checkpoints {
            return self.err(
                raw.source.span(),
                format!("{key}.sync_group_offsets"),
                "group offset sync needs checkpoints: set emit_checkpoints = true".into(),
            );
        }
        let interval = |name: &str, raw: Option<Spanned<String>>, default: Duration| {
            self.duration(&format!("{key}.{name}"), raw, default)
        };
        let checkpoint_interval = interval(
            "checkpoint_interval",
            raw.checkpoint_interval,
            defaults::CHECKPOINT_INTERVAL,
        )?;
        let refresh_groups_interval = interval(
            "refresh_groups_interval",
            raw.refresh_groups_interval,
            defaults::REFRESH_GROUPS_INTERVAL,
        )?;
        let sync_group_offsets_interval = interval(
            "sync_group_offsets_interval",
            raw.sync_group_offsets_interval,
            defaults::SYNC_GROUP_OFFSETS_INTERVAL,
        )?;
        let heartbeat_interval = interval(
            "heartbeat_interval",
            raw.heartbeat_interval,
            defaults::HEARTBEAT_INTERVAL,
        )?;
        let sync_topic_configs_interval = interval(
            "sync_topic_configs_interval",
            raw.sync_topic_configs_interval,
            defaults::SYNC_TOPIC_CONFIGS_INTERVAL,
        )?;
        let sync_topic_acls_interval = interval(
            "sync_topic_acls_interval",
            raw.sync_topic_acls_interval,
            defaults::SYNC_TOPIC_ACLS_INTERVAL,
        )?;
        let mut processors = Vec::new();
        for (j, p) in raw.processors.unwrap_or_default().into_iter().enumerate() {
            processors.push(self.processor(&format!("{key}.processors[{j}]"), p)?);
        }
        let dead_letter_topic = match raw.dead_letter_topic {
            Some(t) if t.get_ref().trim().is_empty() => {
                return self.err(
                    t.span(),
                    format!("{key}.dead_letter_topic"),
                    "must not be empty".into(),
                );
            }
            Some(t) => t.into_inner(),
            None => defaults::dead_letter_topic(raw.source.get_ref()),
        };
        let mm2_offsets_topic = match raw.mm2_offsets_topic {
            Some(t) if t.get_ref().trim().is_empty() => {
                return self.err(
                    t.span(),
                    format!("{key}.mm2_offsets_topic"),
                    "must not be empty".into(),
                );
            }
            Some(t) => t.into_inner(),
            None => defaults::mm2_offsets_topic(raw.source.get_ref()),
        };
        let mode = match raw.delivery {
            None => defaults::DELIVERY,
            Some(v) => match v.get_ref().as_str() {
                "at-least-once" => DeliveryMode::AtLeastOnce,
                "exactly-once" => DeliveryMode::ExactlyOnce,
                other => {
                    return self.err(
                        v.span(),
                        format!("{key}.delivery"),
                        format!(
                            "unknown value `{other}` (use {})",
                            choices_text(keys::DELIVERY)
                        ),
                    )
                }
            },
        };
        let transaction_interval = self.duration(
            &format!("{key}.transaction_interval"),
            raw.transaction_interval,
            commit_interval,
        )?;
        let compression = match raw.compression {
            None => None,
            Some(c) if COMPRESSION_TYPES.contains(&c.get_ref().as_str()) => Some(c.into_inner()),
            Some(c) => {
                return self.err(
                    c.span(),
                    format!("{key}.compression"),
                    format!(
                        "unknown value `{}` (use {})",
                        c.get_ref(),
                        choices_text(COMPRESSION_TYPES)
                    ),
                )
            }
        };
        let on_recreated_topic = self
            .one_of(
                raw.on_recreated_topic,
                &format!("{key}.on_recreated_topic"),
                OnRecreatedTopic::parse,
                keys::ON_RECREATED_TOPIC,
            )?
            .unwrap_or(defaults::ON_RECREATED_TOPIC);
        let on_lost_records = self
            .one_of(
                raw.on_lost_records,
                &format!("{key}.on_lost_records"),
                OnLostRecords::parse,
                keys::ON_LOST_RECORDS,
            )?
            .unwrap_or(defaults::ON_LOST_RECORDS);
        let tasks = match raw.tasks {
            None => defaults::TASKS,
            Some(t) => match u32::try_from(*t.get_ref()) {
                Ok(n) if (1..=defaults::MAX_TASKS).contains(&n) => n,
                _ => {
                    return self.err(
                        t.span(),
                        format!("{key}.tasks"),
                        format!("must be between 1 and {}", defaults::MAX_TASKS),
                    )
                }
            },
        };
        let throttle =
            self.throttle(&key, &raw.max_bytes_per_second, &raw.max_records_per_second)?;
        if raw.enabled == Some(false) {
            return Ok(None);
        }
        Ok(Some(Flow {
            tasks,
            throttle,
            source: raw.source.into_inner(),
            target: raw.target.into_inner(),
            topics: TopicFilter { include, exclude },
            policy,
            processors,
            refresh_topics_interval,
            replication_factor,
            internal_replication_factor,
            provenance_header: raw.provenance_header.unwrap_or(defaults::PROVENANCE_HEADER),
            mm2_offsets_topic,
            delivery: DeliverySettings {
                mode,
                transaction_interval,
                commit_interval,
                compression,
                dead_letter_topic,
                on_lost_records,
                on_recreated_topic,
            },
            checkpoints: CheckpointSettings {
                enabled: emit_checkpoints,
                groups,
                interval: checkpoint_interval,
                refresh_groups_interval,
                sync_group_offsets,
                sync_group_offsets_interval,
            },
            offset_syncs: OffsetSyncSettings {
                enabled: emit_offset_syncs,
                location: offset_syncs_location,
                lag_max: offset_lag_max,
                translation: offset_translation,
            },
            heartbeats: HeartbeatSettings {
                enabled: raw.emit_heartbeats.unwrap_or(defaults::EMIT_HEARTBEATS),
                interval: heartbeat_interval,
                replication: raw
                    .heartbeats_replication
                    .unwrap_or(defaults::HEARTBEATS_REPLICATION),
            },
            config_sync: ConfigSyncSettings {
                enabled: raw
                    .sync_topic_configs
                    .unwrap_or(defaults::SYNC_TOPIC_CONFIGS),
                interval: sync_topic_configs_interval,
                exclude: config_properties_exclude,
                use_defaults_from,
            },
            acl_sync: AclSyncSettings {
                enabled: raw.sync_topic_acls.unwrap_or(defaults::SYNC_TOPIC_ACLS),
                interval: sync_topic_acls_interval,
            },
            schemas,
        }))
    }

    fn replication_factor(&self, key: &str, raw: Option<Spanned<i64>>) -> Result<i32, ConfigError> {
        match raw {
            None => Ok(defaults::REPLICATION_FACTOR),
            Some(rf) => match i32::try_from(*rf.get_ref()) {
                Ok(n) if n == -1 || n >= 1 => Ok(n),
                _ => self.err(
                    rf.span(),
                    key.to_string(),
                    "must be -1 (broker default) or at least 1".into(),
                ),
            },
        }
    }

    fn defaults(&self, key: &str, patterns: &[&str]) -> Result<PatternList, ConfigError> {
        PatternList::new(patterns.iter().map(|s| s.to_string()).collect())
            .map_err(|(_, e)| self.loc.error(None, key, e))
    }

    pub(super) fn patterns(
        &self,
        key: &str,
        list: Vec<Spanned<String>>,
    ) -> Result<PatternList, ConfigError> {
        let spans: Vec<_> = list.iter().map(|s| s.span()).collect();
        PatternList::new(list.into_iter().map(Spanned::into_inner).collect()).map_err(|(i, e)| {
            let span = spans.get(i).cloned().filter(|s| !s.is_empty());
            self.loc
                .error(span, format!("{key}[{i}]"), format!("invalid regex: {e}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::model::{ClientRole, Pipeline};

    const HEAD: &str = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";

    fn parse(body: &str) -> Result<Pipeline, ConfigError> {
        Pipeline::parse(Path::new("p.toml"), &format!("{HEAD}{body}\n"))
    }

    #[test]
    fn tasks_and_cluster_mode_parse_and_are_checked() {
        let p = parse("").unwrap();
        assert_eq!(p.flows[0].tasks, 1);
        assert_eq!(p.cluster, None, "cluster mode is off without [cluster]");
        assert_eq!(parse("tasks = 6").unwrap().flows[0].tasks, 6);
        for bad in ["tasks = 0", "tasks = -1", "tasks = 1025"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.key, "flow[0].tasks", "{bad}");
            assert!(e.message.contains("between 1 and 1024"), "{e}");
        }
        let with = |cluster: &str| {
            let text = format!("[cluster]\n{cluster}\n{HEAD}");
            Pipeline::parse_with_env(Path::new("p.toml"), &text, &|name: &str| match name {
                "POD" => Ok("refract-7d9f-x2".to_string()),
                _ => Err(std::env::VarError::NotPresent),
            })
        };
        let c = with("").unwrap().cluster.unwrap();
        assert_eq!(c.instance, None);
        assert_eq!(c.session_timeout, defaults::SESSION_TIMEOUT);
        let c = with("instance = \"${env:POD}\"\nsession_timeout = \"6s\"")
            .unwrap()
            .cluster
            .unwrap();
        assert_eq!(c.instance.as_deref(), Some("refract-7d9f-x2"));
        assert_eq!(c.session_timeout, Duration::from_secs(6));
        assert_eq!(with("enabled = false").unwrap().cluster, None);
        let cases = [
            ("instance = \"a b\"", "cluster.instance", "`a b` may only hold"),
            ("instance = \"\"", "cluster.instance", "is empty"),
            ("instance = \"${env:NOPE}\"", "cluster.instance", "NOPE"),
            ("session_timeout = \"500ms\"", "cluster.session_timeout", "between 1s and 30m"),
            ("sessions = 3", "sessions", "unknown field `sessions`, expected one of `enabled`, `instance`, `session_timeout`"),
        ];
        for (text, key, says) in cases {
            let e = with(text).unwrap_err();
            assert_eq!(e.key, key, "{text}: {e}");
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn mm2_defaults() {
        let p = parse("").unwrap();
        let f = &p.flows[0];
        assert!(f.checkpoints.groups.should_replicate("payments-app"));
        assert!(!f
            .checkpoints
            .groups
            .should_replicate("console-consumer-123"));
        assert!(!f.checkpoints.groups.should_replicate("connect-sink"));
        assert!(!f.checkpoints.groups.should_replicate("__internal"));
        assert!(f.checkpoints.enabled && f.offset_syncs.enabled && f.heartbeats.enabled);
        assert!(!f.checkpoints.sync_group_offsets);
        assert_eq!(f.offset_syncs.lag_max, 100);
        assert_eq!(f.offset_syncs.location, OffsetSyncsLocation::Source);
        assert_eq!(f.checkpoints.interval, Duration::from_secs(60));
        assert_eq!(f.heartbeats.interval, Duration::from_secs(1));
        assert!(f.config_sync.exclude.matches("min.insync.replicas"));
        assert!(!f.config_sync.exclude.matches("retention.ms"));
        assert_eq!(f.config_sync.use_defaults_from, DefaultsFrom::Target);
        assert!(f.config_sync.enabled && f.acl_sync.enabled && f.provenance_header);
        assert_eq!(f.internal_replication_factor, -1);
    }

    #[test]
    fn read_rate_limits() {
        let f = &parse("").unwrap().flows[0];
        assert_eq!(f.throttle, Throttle::default());
        let f = &parse("max_bytes_per_second = \"2MiB\"\nmax_records_per_second = 500\n")
            .unwrap()
            .flows[0];
        assert_eq!(f.throttle.bytes_per_second, Some(2 << 20));
        assert_eq!(f.throttle.records_per_second, Some(500));
        assert_eq!(
            parse("max_bytes_per_second = 2000000\n").unwrap().flows[0]
                .throttle
                .bytes_per_second,
            Some(2_000_000)
        );
        for bad in [
            "max_bytes_per_second = 0",
            "max_bytes_per_second = -5",
            "max_bytes_per_second = \"fast\"",
            "max_records_per_second = 0",
        ] {
            let e = parse(&format!("{bad}\n")).unwrap_err().to_string();
            let key = bad.split(' ').next().unwrap();
            assert!(e.contains(&format!("flow[0].{key}")), "{bad}: {e}");
        }
    }

    /// The documented pipeline (docs/src/reference/defaults.md) writes every flow setting with
    /// its default value: loading it must give what an empty `[[flow]]` gives.
    #[test]
    fn the_documented_pipeline_shows_the_defaults() {
        let page = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/src/reference/defaults.md"
        ));
        let block = page
            .split("## The pipeline\n\n```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("defaults.md has a `## The pipeline` TOML block");
        let flow = block
            .split("[[flow]]")
            .nth(1)
            .expect("the documented pipeline has a [[flow]]");
        let clusters =
            "[clusters.primary]\nbootstrap = \"h:1\"\n[clusters.backup]\nbootstrap = \"h:2\"\n";
        let shown = Pipeline::parse(Path::new("p.toml"), &format!("{clusters}[[flow]]{flow}"))
            .unwrap()
            .flows
            .remove(0);
        let plain = Pipeline::parse(
            Path::new("p.toml"),
            &format!("{clusters}[[flow]]\nsource = \"primary\"\ntarget = \"backup\"\n"),
        )
        .unwrap()
        .flows
        .remove(0);
        assert_eq!(shown.topics, plain.topics);
        assert_eq!(shown.processors.len(), plain.processors.len());
        assert_eq!(
            shown.delivery.dead_letter_topic,
            plain.delivery.dead_letter_topic
        );
        assert_eq!(
            shown.delivery.transaction_interval,
            plain.delivery.transaction_interval
        );
        // Every flow key is on the page, set to its default or commented out (the page once
        // left out seven, and said a flow without `topics` mirrors nothing).
        let written: Vec<&str> = flow
            .lines()
            .filter_map(|l| {
                let l = l.trim_start().trim_start_matches("# ");
                l.split_once(" = ").map(|(k, _)| k.trim())
            })
            .collect();
        for key in crate::keys::KEYS {
            let Some(name) = key.path.strip_prefix("flow.") else {
                continue;
            };
            if !name.contains('.') {
                assert!(
                    written.contains(&name),
                    "docs/src/reference/defaults.md does not write flow key {name}"
                );
            }
        }
        assert_eq!(shown.refresh_topics_interval, plain.refresh_topics_interval);
        assert_eq!(shown.replication_factor, plain.replication_factor);
        assert_eq!(
            shown.internal_replication_factor,
            plain.internal_replication_factor
        );
        assert_eq!(shown.provenance_header, plain.provenance_header);
        assert_eq!(shown.delivery, plain.delivery);
        assert_eq!(shown.checkpoints, plain.checkpoints);
        assert_eq!(shown.offset_syncs, plain.offset_syncs);
        assert_eq!(shown.heartbeats, plain.heartbeats);
        assert_eq!(shown.acl_sync, plain.acl_sync);
        assert_eq!(shown.config_sync, plain.config_sync);
        assert_eq!(shown.config_sync.interval, plain.config_sync.interval);
        assert_eq!(
            shown.config_sync.use_defaults_from,
            plain.config_sync.use_defaults_from
        );
        assert_eq!(plain.delivery.commit_interval, defaults::COMMIT_INTERVAL);
        assert_eq!(plain.checkpoints.interval, defaults::CHECKPOINT_INTERVAL);
    }

    #[test]
    fn on_lost_records_continues_unless_set_to_halt() {
        let f = parse("").unwrap().flows.remove(0);
        assert_eq!(f.delivery.on_lost_records, OnLostRecords::Continue);
        let f = parse("on_lost_records = \"halt\"").unwrap().flows.remove(0);
        assert_eq!(f.delivery.on_lost_records, OnLostRecords::Halt);
        let e = parse("on_lost_records = \"skip\"").unwrap_err();
        assert_eq!(e.key, "flow[0].on_lost_records");
        let f = parse("").unwrap().flows.remove(0);
        assert_eq!(f.delivery.on_recreated_topic, OnRecreatedTopic::Stop);
        let f = parse("on_recreated_topic = \"rewind\"")
            .unwrap()
            .flows
            .remove(0);
        assert_eq!(f.delivery.on_recreated_topic, OnRecreatedTopic::Rewind);
        assert!(
            e.message
                .contains("unknown value `skip` (use \"continue\" or \"halt\")"),
            "{e}"
        );
        let e = parse("on_recreated_topic = \"mix\"").unwrap_err();
        assert_eq!(e.key, "flow[0].on_recreated_topic");
        assert!(
            e.message
                .contains("unknown value `mix` (use \"stop\" or \"rewind\")"),
            "{e}"
        );
    }

    #[test]
    fn delivery_mode_and_transaction_interval() {
        let f = parse("").unwrap().flows.remove(0);
        assert_eq!(f.delivery.mode, DeliveryMode::AtLeastOnce);
        assert_eq!(f.delivery.transaction_interval, defaults::COMMIT_INTERVAL);
        let f = parse("delivery = \"exactly-once\"\ncommit_interval = \"700ms\"")
            .unwrap()
            .flows
            .remove(0);
        assert_eq!(f.delivery.mode, DeliveryMode::ExactlyOnce);
        // Unless set, a transaction lasts the flow's commit interval.
        assert_eq!(f.delivery.transaction_interval, Duration::from_millis(700));
        let f = parse("delivery = \"exactly-once\"\ntransaction_interval = \"100ms\"")
            .unwrap()
            .flows
            .remove(0);
        assert_eq!(f.delivery.transaction_interval, Duration::from_millis(100));
        let e = parse("delivery = \"exactly-twice\"").unwrap_err();
        assert_eq!(e.key, "flow[0].delivery");
        assert!(e.message.contains("`exactly-twice`"), "{e}");
        let e = parse("transaction_interval = \"0s\"").unwrap_err();
        assert_eq!(e.key, "flow[0].transaction_interval");
    }

    #[test]
    fn mm2_settings_parse_and_are_checked() {
        let p = parse(
            "groups = [\"app-.*\"]\ngroups_exclude = []\nsync_group_offsets = true\noffset_syncs_location = \"target\"\noffset_lag_max = 0\ncheckpoint_interval = \"1s\"\nuse_defaults_from = \"source\"\ninternal_replication_factor = 3",
        )
        .unwrap();
        let f = &p.flows[0];
        assert!(f.checkpoints.groups.should_replicate("app-1"));
        assert!(!f.checkpoints.groups.should_replicate("other"));
        assert!(f.checkpoints.sync_group_offsets);
        assert_eq!(f.offset_syncs.location, OffsetSyncsLocation::Target);
        assert_eq!(f.offset_syncs.lag_max, 0);
        assert_eq!(f.offset_syncs.translation, OffsetTranslation::Exact);
        assert_eq!(f.checkpoints.interval, Duration::from_secs(1));
        assert_eq!(f.config_sync.use_defaults_from, DefaultsFrom::Source);
        assert_eq!(f.internal_replication_factor, 3);
        let cases = [
            (
                "offset_syncs_location = \"middle\"",
                "flow[0].offset_syncs_location",
            ),
            ("offset_lag_max = -1", "flow[0].offset_lag_max"),
            (
                "offset_translation = \"precise\"",
                "flow[0].offset_translation",
            ),
            ("use_defaults_from = \"x\"", "flow[0].use_defaults_from"),
            ("groups = [\"(\"]", "flow[0].groups[0]"),
            (
                "emit_offset_syncs = false\nemit_checkpoints = true",
                "flow[0].emit_checkpoints",
            ),
            (
                "emit_checkpoints = false\nsync_group_offsets = true",
                "flow[0].sync_group_offsets",
            ),
            (
                "internal_replication_factor = 0",
                "flow[0].internal_replication_factor",
            ),
        ];
        for (body, key) in cases {
            let err = parse(body).unwrap_err();
            assert_eq!(err.key, key, "{body}: {err}");
        }
        let with_metrics = Pipeline::parse(
            Path::new("p.toml"),
            &format!("[metrics]\nlisten = \"127.0.0.1:9464\"\n{HEAD}"),
        )
        .unwrap();
        assert_eq!(with_metrics.metrics_listen.map(|a| a.port()), Some(9464));
        let err = Pipeline::parse(
            Path::new("p.toml"),
            &format!("[metrics]\nlisten = \"localhost\"\n{HEAD}"),
        )
        .unwrap_err();
        assert_eq!((err.key.as_str(), err.line), ("metrics.listen", Some(2)));
        // Turning off offset syncs turns off checkpoints by default.
        let p = parse("emit_offset_syncs = false").unwrap();
        assert!(!p.flows[0].checkpoints.enabled);
    }

    #[test]
    fn flow_compression() {
        let p = parse("").unwrap();
        assert_eq!(p.flows[0].delivery.compression, None);
        for c in COMPRESSION_TYPES {
            let p = parse(&format!("compression = \"{c}\"")).unwrap();
            assert_eq!(p.flows[0].delivery.compression.as_deref(), Some(*c));
        }
        for bad in ["brotli", "ZSTD", ""] {
            let err = parse(&format!("compression = \"{bad}\"")).unwrap_err();
            assert_eq!(err.key, "flow[0].compression");
            assert_eq!(err.line, Some(8));
            assert_eq!(
                err.message,
                format!("unknown value `{bad}` (use \"none\", \"gzip\", \"snappy\", \"lz4\" or \"zstd\")")
            );
        }
        // compression.level stays a plain producer setting.
        let p = parse("compression = \"zstd\"\n[clusters.a.producer]\n\"compression.level\" = 6")
            .unwrap();
        assert_eq!(
            p.clusters["a"].client_config(ClientRole::Producer)["compression.level"],
            "6"
        );
    }
}
