//! Runtime behind [`export_policy!`](crate::export_policy); not a stable API.

use std::cell::RefCell;
use std::thread::LocalKey;

use crate::{PluginError, PluginInfo, ReplicationPolicy};

/// The message of every call made before a successful `init`.
pub const NOT_INITIALIZED: &str = "init was not called";

/// Where an exported plugin keeps the policy that `init` built.
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

/// Answers `lifecycle.info`.
pub fn info<T: ReplicationPolicy>() -> PluginInfo {
    PluginInfo {
        name: T::NAME.to_owned(),
        version: T::VERSION.to_owned(),
    }
}

/// Answers `lifecycle.init`: builds the policy and stores it, replacing any earlier one.
pub fn init<T: ReplicationPolicy>(
    slot: &'static LocalKey<Slot<T>>,
    config: &str,
) -> Result<(), PluginError> {
    let policy = T::from_config(config)?;
    slot.with(|cell| *cell.borrow_mut() = Some(policy));
    Ok(())
}

fn with_policy<T: ReplicationPolicy, R>(
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

fn with_policy_or_trap<T: ReplicationPolicy, R>(
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
}
