//! Runtime behind [`export_policy!`](crate::export_policy),
//! [`export_filter!`](crate::export_filter) and [`export_transform!`](crate::export_transform);
//! not a stable API.

use std::cell::RefCell;
use std::thread::LocalKey;

pub use crate::bindings::refract::plugin::types::RecordBatch;
use crate::{
    BatchInfo, Outcome, PluginError, PluginInfo, RecordFilter, RecordTransform, ReplicationPolicy,
};

/// The message of every call made before a successful `init`.
pub const NOT_INITIALIZED: &str = "init was not called";

/// Where an exported plugin keeps the policy, filter or transform that `init` built.
pub type Slot<T> = RefCell<Option<T>>;

/// A topic or cluster name as the WIT passes it.
pub type Name = String;

/// A batch of topic names.
pub type Names = Vec<String>;

/// One answer per topic of a batch, in input order.
pub type Answers<T> = Result<Vec<T>, PluginError>;

/// A slot holding no policy yet.
pub const fn empty_slot<T>() -> Slot<T> {
    RefCell::new(None)
}

/// Answers `lifecycle.info` of a policy.
pub fn info<T: ReplicationPolicy>() -> PluginInfo {
    plugin_info(T::NAME, T::VERSION)
}

/// Answers `lifecycle.info` of a filter.
pub fn filter_info<T: RecordFilter>() -> PluginInfo {
    plugin_info(T::NAME, T::VERSION)
}

/// Answers `lifecycle.info` of a transform.
pub fn transform_info<T: RecordTransform>() -> PluginInfo {
    plugin_info(T::NAME, T::VERSION)
}

fn plugin_info(name: &str, version: &str) -> PluginInfo {
    PluginInfo {
        name: name.to_owned(),
        version: version.to_owned(),
    }
}

/// Answers `lifecycle.init` of a policy: builds it and stores it, replacing any earlier one.
pub fn init<T: ReplicationPolicy>(
    slot: &'static LocalKey<Slot<T>>,
    config: &str,
) -> Result<(), PluginError> {
    store(slot, T::from_config(config)?);
    Ok(())
}

/// Answers `lifecycle.init` of a filter: builds it and stores it, replacing any earlier one.
pub fn filter_init<T: RecordFilter>(
    slot: &'static LocalKey<Slot<T>>,
    config: &str,
) -> Result<(), PluginError> {
    store(slot, T::from_config(config)?);
    Ok(())
}

/// Answers `lifecycle.init` of a transform: builds it and stores it, replacing any earlier one.
pub fn transform_init<T: RecordTransform>(
    slot: &'static LocalKey<Slot<T>>,
    config: &str,
) -> Result<(), PluginError> {
    store(slot, T::from_config(config)?);
    Ok(())
}

fn store<T: 'static>(slot: &'static LocalKey<Slot<T>>, plugin: T) {
    slot.with(|cell| *cell.borrow_mut() = Some(plugin));
}

/// Answers `record-filter.filter`: one flag per record, checked against the batch size.
pub fn filter<T: RecordFilter>(
    slot: &'static LocalKey<Slot<T>>,
    batch: RecordBatch,
) -> Result<Vec<bool>, PluginError> {
    let (info, records) = BatchInfo::split(batch);
    let flags = with_policy(slot, |filter| filter.filter_batch(&info, &records))??;
    check_count("filter", "flags", flags.len(), records.len())?;
    Ok(flags)
}

/// Answers `record-transform.transform`: one outcome per record, checked against the batch size.
pub fn transform<T: RecordTransform>(
    slot: &'static LocalKey<Slot<T>>,
    batch: RecordBatch,
) -> Result<Vec<Outcome>, PluginError> {
    let (info, records) = BatchInfo::split(batch);
    let expected = records.len();
    let outcomes = with_policy(slot, |transform| transform.transform_batch(&info, records))??;
    check_count("transform", "outcomes", outcomes.len(), expected)?;
    Ok(outcomes)
}

fn check_count(function: &str, what: &str, got: usize, expected: usize) -> Result<(), PluginError> {
    if got == expected {
        Ok(())
    } else {
        Err(PluginError::Failed(format!(
            "{function} answered {got} {what} for {expected} records"
        )))
    }
}

fn with_policy<T: 'static, R>(
    slot: &'static LocalKey<Slot<T>>,
    f: impl FnOnce(&T) -> R,
) -> Result<R, PluginError> {
    slot.with(|cell| {
        cell.borrow()
            .as_ref()
            .map(f)
            .ok_or_else(|| PluginError::Failed(NOT_INITIALIZED.to_owned()))
    })
}

fn with_policy_or_trap<T: 'static, R>(
    slot: &'static LocalKey<Slot<T>>,
    function: &str,
    f: impl FnOnce(&T) -> R,
) -> R {
    match with_policy(slot, f) {
        Ok(answer) => answer,
        Err(_) => {
            crate::error(&format!("{function}: {NOT_INITIALIZED}"));
            panic!("{function}: {NOT_INITIALIZED}")
        }
    }
}

/// Answers `replication-policy.format-remote-topics`.
pub fn format_remote_topics<T: ReplicationPolicy>(
    slot: &'static LocalKey<Slot<T>>,
    source_cluster: &str,
    topics: &[String],
) -> Result<Vec<String>, PluginError> {
    with_policy(slot, |policy| {
        topics
            .iter()
            .map(|topic| policy.format_remote_topic(source_cluster, topic))
            .collect()
    })
}

/// Answers `replication-policy.topic-sources`.
pub fn topic_sources<T: ReplicationPolicy>(
    slot: &'static LocalKey<Slot<T>>,
    topics: &[String],
) -> Result<Vec<Option<String>>, PluginError> {
    with_policy(slot, |policy| {
        topics
            .iter()
            .map(|topic| policy.topic_source(topic))
            .collect()
    })
}

/// Answers `replication-policy.upstream-topics`.
pub fn upstream_topics<T: ReplicationPolicy>(
    slot: &'static LocalKey<Slot<T>>,
    topics: &[String],
) -> Result<Vec<Option<String>>, PluginError> {
    with_policy(slot, |policy| {
        topics
            .iter()
            .map(|topic| policy.upstream_topic(topic))
            .collect()
    })
}

/// Answers `replication-policy.is-internal-topics`.
pub fn is_internal_topics<T: ReplicationPolicy>(
    slot: &'static LocalKey<Slot<T>>,
    topics: &[String],
) -> Result<Vec<bool>, PluginError> {
    with_policy(slot, |policy| {
        topics
            .iter()
            .map(|topic| policy.is_internal_topic(topic))
            .collect()
    })
}

/// Answers `replication-policy.heartbeats-topic`; logs an error and traps before `init`.
pub fn heartbeats_topic<T: ReplicationPolicy>(slot: &'static LocalKey<Slot<T>>) -> String {
    with_policy_or_trap(slot, "heartbeats-topic", |policy| policy.heartbeats_topic())
}

/// Answers `replication-policy.offset-syncs-topic`; logs an error and traps before `init`.
pub fn offset_syncs_topic<T: ReplicationPolicy>(
    slot: &'static LocalKey<Slot<T>>,
    cluster_alias: &str,
) -> String {
    with_policy_or_trap(slot, "offset-syncs-topic", |policy| {
        policy.offset_syncs_topic(cluster_alias)
    })
}

/// Answers `replication-policy.checkpoints-topic`; logs an error and traps before `init`.
pub fn checkpoints_topic<T: ReplicationPolicy>(
    slot: &'static LocalKey<Slot<T>>,
    cluster_alias: &str,
) -> String {
    with_policy_or_trap(slot, "checkpoints-topic", |policy| {
        policy.checkpoints_topic(cluster_alias)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm2::DefaultReplicationPolicy;

    thread_local! {
        static SLOT: Slot<DefaultReplicationPolicy> = const { empty_slot() };
    }

    fn topics(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn calls_before_init_fail() {
        let not_initialized = PluginError::Failed(NOT_INITIALIZED.to_owned());
        assert_eq!(
            format_remote_topics(&SLOT, "a", &topics(&["t"])),
            Err(not_initialized.clone())
        );
        assert_eq!(
            topic_sources(&SLOT, &topics(&["a.t"])),
            Err(not_initialized.clone())
        );
        assert_eq!(
            upstream_topics(&SLOT, &topics(&["a.t"])),
            Err(not_initialized.clone())
        );
        assert_eq!(
            is_internal_topics(&SLOT, &topics(&["t"])),
            Err(not_initialized)
        );
        assert!(std::panic::catch_unwind(|| heartbeats_topic(&SLOT)).is_err());
        assert!(std::panic::catch_unwind(|| offset_syncs_topic(&SLOT, "A")).is_err());
        assert!(std::panic::catch_unwind(|| checkpoints_topic(&SLOT, "A")).is_err());
    }

    #[test]
    fn info_names_the_policy() {
        let info = info::<DefaultReplicationPolicy>();
        assert_eq!(info.name, "builtin:default");
        assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn failed_init_keeps_the_slot_empty() {
        assert!(matches!(
            init(&SLOT, "separator = \"\""),
            Err(PluginError::InvalidConfig(_))
        ));
        assert!(topic_sources(&SLOT, &topics(&["a.t"])).is_err());
    }

    #[test]
    fn batches_answer_in_input_order() {
        assert_eq!(init(&SLOT, "separator = \"_\""), Ok(()));
        let input = topics(&["b_x", "plain", "_y", "c_d_e"]);
        assert_eq!(
            format_remote_topics(&SLOT, "src", &input),
            Ok(topics(&["src_b_x", "src_plain", "src__y", "src_c_d_e"]))
        );
        assert_eq!(
            topic_sources(&SLOT, &input),
            Ok(vec![
                Some("b".to_owned()),
                None,
                Some(String::new()),
                Some("c".to_owned())
            ])
        );
        assert_eq!(
            upstream_topics(&SLOT, &input),
            Ok(vec![
                Some("x".to_owned()),
                None,
                Some("y".to_owned()),
                Some("d_e".to_owned())
            ])
        );
        assert_eq!(
            is_internal_topics(&SLOT, &topics(&["__consumer_offsets", "orders"])),
            Ok(vec![true, false])
        );
        assert_eq!(heartbeats_topic(&SLOT), "heartbeats");
        assert_eq!(
            offset_syncs_topic(&SLOT, "A"),
            "mm2-offset-syncs_A_internal"
        );
        assert_eq!(checkpoints_topic(&SLOT, "A"), "A_checkpoints_internal");
        assert_eq!(init(&SLOT, ""), Ok(()));
        assert_eq!(
            format_remote_topics(&SLOT, "src", &topics(&["t"])),
            Ok(topics(&["src.t"]))
        );
    }

    /// Keeps records whose key is `keep`; answers one flag too many for a batch topic `bad`.
    struct KeyFilter;

    impl RecordFilter for KeyFilter {
        const NAME: &'static str = "key-filter";
        const VERSION: &'static str = "1.2.3";

        fn from_config(config: &str) -> Result<Self, PluginError> {
            crate::config::ConfigTable::parse(config)?.finish()?;
            Ok(Self)
        }

        fn keep(&self, _batch: &BatchInfo, record: &crate::Record) -> bool {
            record.key_str() == Some("keep")
        }

        fn filter_batch(
            &self,
            batch: &BatchInfo,
            records: &[crate::Record],
        ) -> Result<Vec<bool>, PluginError> {
            let mut flags: Vec<bool> = records.iter().map(|r| self.keep(batch, r)).collect();
            if batch.topic == "bad" {
                flags.push(true);
            }
            Ok(flags)
        }
    }

    /// Drops tombstones, rejects non-UTF-8 values, re-routes the rest to `<target>.out`.
    struct Router;

    impl RecordTransform for Router {
        const NAME: &'static str = "router";
        const VERSION: &'static str = "0.0.1";

        fn from_config(_config: &str) -> Result<Self, PluginError> {
            Ok(Self)
        }

        fn transform(&self, batch: &BatchInfo, record: &crate::Record) -> Outcome {
            match (&record.value, record.value_str()) {
                (None, _) => Outcome::Drop,
                (Some(_), None) => Outcome::reject("not UTF-8"),
                (Some(_), Some("same")) => Outcome::Keep,
                (Some(_), Some(_)) => Outcome::replace_with(
                    record
                        .to_output()
                        .with_topic(format!("{}.out", batch.target_topic)),
                ),
            }
        }
    }

    thread_local! {
        static FILTER_SLOT: Slot<KeyFilter> = const { empty_slot() };
        static TRANSFORM_SLOT: Slot<Router> = const { empty_slot() };
    }

    fn batch(topic: &str, records: Vec<crate::Record>) -> RecordBatch {
        RecordBatch {
            source_cluster: "A".to_owned(),
            topic: topic.to_owned(),
            target_topic: format!("A.{topic}"),
            records,
        }
    }

    fn record(key: Option<&[u8]>, value: Option<&[u8]>) -> crate::Record {
        crate::Record {
            partition: 1,
            offset: 2,
            timestamp_ms: 3,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: vec![crate::Header::null("h")],
        }
    }

    #[test]
    fn filters_answer_one_flag_per_record() {
        let not_initialized = PluginError::Failed(NOT_INITIALIZED.to_owned());
        assert_eq!(
            filter(&FILTER_SLOT, batch("t", vec![])),
            Err(not_initialized)
        );
        assert_eq!(
            filter_info::<KeyFilter>(),
            PluginInfo {
                name: "key-filter".to_owned(),
                version: "1.2.3".to_owned()
            }
        );
        assert!(matches!(
            filter_init(&FILTER_SLOT, "x = 1"),
            Err(PluginError::InvalidConfig(_))
        ));
        assert_eq!(filter_init(&FILTER_SLOT, ""), Ok(()));
        let records = vec![
            record(Some(b"keep"), None),
            record(Some(b"drop"), Some(b"v")),
            record(None, None),
            record(Some(&[0xff]), None),
            record(Some(b"keep"), Some(b"v")),
        ];
        assert_eq!(
            filter(&FILTER_SLOT, batch("t", records.clone())),
            Ok(vec![true, false, false, false, true])
        );
        assert_eq!(filter(&FILTER_SLOT, batch("t", vec![])), Ok(vec![]));
        assert_eq!(
            filter(&FILTER_SLOT, batch("bad", records)),
            Err(PluginError::Failed(
                "filter answered 6 flags for 5 records".to_owned()
            ))
        );
    }

    #[test]
    fn transforms_answer_one_outcome_per_record() {
        let not_initialized = PluginError::Failed(NOT_INITIALIZED.to_owned());
        assert_eq!(
            transform(&TRANSFORM_SLOT, batch("t", vec![])),
            Err(not_initialized)
        );
        assert_eq!(transform_info::<Router>().name, "router");
        assert_eq!(transform_init(&TRANSFORM_SLOT, ""), Ok(()));
        let routed = record(Some(&[0xfe]), Some(b"v"));
        let outcomes = transform(
            &TRANSFORM_SLOT,
            batch(
                "t",
                vec![
                    record(None, None),
                    record(None, Some(&[0xc3, 0x28])),
                    record(None, Some(b"same")),
                    routed.clone(),
                ],
            ),
        );
        assert_eq!(
            outcomes,
            Ok(vec![
                Outcome::Drop,
                Outcome::Reject("not UTF-8".to_owned()),
                Outcome::Keep,
                Outcome::Replace(vec![crate::OutputRecord {
                    topic: Some("A.t.out".to_owned()),
                    partition: None,
                    timestamp_ms: None,
                    key: routed.key,
                    value: routed.value,
                    headers: routed.headers,
                }]),
            ])
        );
    }
}
