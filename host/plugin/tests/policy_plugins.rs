//! The runtime against real components built from `plugins/`: MirrorMaker 2 naming through the
//! built-ins, and misbehaving plugins stopped by the host.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use refract_config::{PluginLocation, PluginSpec};
use refract_plugin::{
    guest_dir, PluginError, PluginLimits, PluginRuntime, PolicyPlugin, ReplicationPolicy,
};

fn spec(location: PluginLocation, config: &str) -> PluginSpec {
    PluginSpec {
        location,
        config: config.to_string(),
        key: "flow[0].policy".into(),
        limits: Default::default(),
    }
}

fn file(name: &str) -> PluginLocation {
    PluginLocation::File(guest_dir().join(name))
}

fn builtin(name: &str) -> PluginLocation {
    PluginLocation::Builtin(name.to_string())
}

fn policy(
    runtime: &Arc<PluginRuntime>,
    location: PluginLocation,
    config: &str,
) -> ReplicationPolicy {
    ReplicationPolicy::new(
        PolicyPlugin::load(runtime, &spec(location, config)).expect("plugin loads"),
    )
}

fn runtime() -> Arc<PluginRuntime> {
    PluginRuntime::new(PluginLimits {
        memory_bytes: 32 << 20,
        call_deadline: Duration::from_millis(300),
        ..PluginLimits::default()
    })
    .expect("runtime")
}

fn topics(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// MirrorMaker 2's ReplicationPolicyTest / MirrorClientTest examples, through the real component.
#[test]
fn default_policy_matches_mm2() {
    let rt = runtime();
    let mut p = policy(&rt, builtin("builtin:default"), "");
    assert_eq!(
        p.format_remote_topics("us-west", &topics(&["orders"]))
            .unwrap(),
        vec!["us-west.orders"]
    );
    let cases: &[(&str, Option<&str>, Option<&str>, &str)] = &[
        // topic, topicSource, upstreamTopic, originalTopic
        ("topic1", None, None, "topic1"),
        ("source1.topic1", Some("source1"), Some("topic1"), "topic1"),
        (
            "source2.source1.topic1",
            Some("source2"),
            Some("source1.topic1"),
            "topic1",
        ),
        ("a.", None, None, "a."),
        (".b", Some(""), Some("b"), "b"),
    ];
    for (topic, source, upstream, original) in cases {
        assert_eq!(
            p.topic_source(topic).unwrap().as_deref(),
            *source,
            "{topic}"
        );
        assert_eq!(
            p.upstream_topic(topic).unwrap().as_deref(),
            *upstream,
            "{topic}"
        );
        assert_eq!(p.original_topic(topic).unwrap(), *original, "{topic}");
    }
    for (topic, internal) in [
        ("__consumer_offsets", true),
        (".hidden", true),
        ("x.internal", true),
        ("x-internal", true),
        ("orders", false),
    ] {
        assert_eq!(p.is_internal_topic(topic).unwrap(), internal, "{topic}");
    }
    assert!(p.is_heartbeats_topic("heartbeats").unwrap());
    assert!(p.is_heartbeats_topic("source1.heartbeats").unwrap());
    assert!(p.is_heartbeats_topic("source2.source1.heartbeats").unwrap());
    assert!(!p.is_heartbeats_topic("source1-heartbeats").unwrap());
    assert_eq!(
        p.offset_syncs_topic("backup").unwrap(),
        "mm2-offset-syncs.backup.internal"
    );
    assert_eq!(
        p.checkpoints_topic("primary").unwrap(),
        "primary.checkpoints.internal"
    );

    let mut p = policy(&rt, builtin("builtin:default"), "separator = \"__\"");
    assert_eq!(
        p.offset_syncs_topic("CLUSTER").unwrap(),
        "mm2-offset-syncs__CLUSTER__internal"
    );
    assert_eq!(
        p.checkpoints_topic("CLUSTER").unwrap(),
        "CLUSTER__checkpoints__internal"
    );
    let mut p = policy(
        &rt,
        builtin("builtin:default"),
        "separator = \"__\"\ninternal_topic_separator_enabled = false",
    );
    assert_eq!(
        p.offset_syncs_topic("CLUSTER").unwrap(),
        "mm2-offset-syncs.CLUSTER.internal"
    );
}

#[test]
fn identity_policy_matches_mm2() {
    let rt = runtime();
    let mut p = policy(&rt, builtin("builtin:identity"), "");
    assert_eq!(
        p.format_remote_topics(
            "primary",
            &topics(&["orders", "heartbeats", "backup.heartbeats"])
        )
        .unwrap(),
        vec!["orders", "primary.heartbeats", "primary.backup.heartbeats"]
    );
    assert_eq!(p.topic_source("primary.orders").unwrap(), None);
    assert_eq!(
        p.topic_source("primary.heartbeats").unwrap().as_deref(),
        Some("primary")
    );
    assert!(!p.is_cycle("backup.orders", "backup").unwrap());
    assert!(p.is_cycle("backup.heartbeats", "backup").unwrap());
}

#[test]
fn rename_policy_applies_rules_in_order() {
    let rt = runtime();
    let config = "[[rules]]\nmatch = \"orders-v1\"\nreplace = \"orders\"\n[[rules]]\nmatch = \"(.*)-v[0-9]+\"\nreplace = \"${1}-latest\"\n";
    let mut p = policy(&rt, file("rename.wasm"), config);
    assert_eq!(
        p.format_remote_topics(
            "a",
            &topics(&["orders-v1", "payments-v2", "stock", "heartbeats"])
        )
        .unwrap(),
        vec!["orders", "payments-latest", "stock", "a.heartbeats"]
    );
}

fn load_error(location: PluginLocation, config: &str) -> PluginError {
    PolicyPlugin::load(&runtime(), &spec(location, config)).expect_err("must be rejected")
}

#[test]
fn bad_plugins_are_rejected_with_their_reason() {
    let misbehaving = guest_dir()
        .join("misbehaving_policy.wasm")
        .display()
        .to_string();
    match load_error(file("misbehaving_policy.wasm"), "panic_in = \"init\"") {
        PluginError::Trap {
            plugin,
            call,
            reason,
            kind,
        } => {
            assert_eq!(kind, refract_plugin::TrapKind::Guest);
            assert_eq!(plugin, misbehaving);
            assert_eq!(call, "init");
            assert!(reason.contains("panicked on purpose in init"), "{reason}");
        }
        other => panic!("unexpected {other}"),
    }
    match load_error(file("misbehaving_policy.wasm"), "loop_in = \"init\"") {
        PluginError::Trap { reason, kind, .. } => {
            assert_eq!(kind, refract_plugin::TrapKind::Deadline);
            assert!(reason.contains("300 ms call deadline"), "{reason}")
        }
        other => panic!("unexpected {other}"),
    }
    match load_error(file("misbehaving_policy.wasm"), "grow_in = \"init\"") {
        PluginError::Trap { reason, kind, .. } => {
            assert_eq!(kind, refract_plugin::TrapKind::Memory);
            assert!(reason.contains("memory budget of 32 MiB"), "{reason}")
        }
        other => panic!("unexpected {other}"),
    }
    assert!(matches!(
        load_error(file("filter_shaped.wasm"), ""),
        PluginError::WrongWorld { .. }
    ));
    match load_error(file("future_policy.wasm"), "") {
        PluginError::IncompatibleVersion {
            found, supported, ..
        } => {
            assert_eq!(found, "0.2.0");
            assert_eq!(supported, "0.1.x");
        }
        other => panic!("unexpected {other}"),
    }
    assert!(matches!(
        load_error(file("rename.wasm"), "rules = 3"),
        PluginError::Init { .. }
    ));
    assert!(matches!(
        load_error(builtin("builtin:nope"), ""),
        PluginError::Read { .. }
    ));
    assert!(matches!(
        load_error(PluginLocation::File(PathBuf::from("/nonexistent.wasm")), ""),
        PluginError::Read { .. }
    ));
}

/// A plugin that traps, loops or hoards memory in a call is stopped within its limit, and the
/// policy gets a fresh instance for the next call.
#[test]
fn misbehaving_calls_are_stopped_and_the_instance_replaced() {
    let rt = runtime();
    for (mode, expect) in [
        ("panic_in", "panicked on purpose"),
        ("loop_in", "call deadline"),
        ("grow_in", "memory budget"),
    ] {
        let mut p = policy(
            &rt,
            file("misbehaving_policy.wasm"),
            &format!("{mode} = \"format\""),
        );
        let started = Instant::now();
        match p.format_remote_topics("a", &topics(&["t"])) {
            Err(PluginError::Trap { call, reason, .. }) => {
                assert_eq!(call, "format-remote-topics");
                assert!(reason.contains(expect), "{mode}: {reason}");
            }
            other => panic!("{mode}: unexpected {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{mode} was stopped"
        );
        // The trapped instance was dropped: other calls work on a fresh one.
        assert_eq!(
            p.topic_source("a.t").unwrap().as_deref(),
            Some("a"),
            "{mode}"
        );
    }
}

/// A plugin's own `memory_limit` and `call_timeout` override the runtime's defaults.
#[test]
fn per_plugin_limits_override_the_defaults() {
    let rt = runtime();
    let mut spec = spec(file("misbehaving_policy.wasm"), "loop_in = \"init\"");
    spec.limits.call_timeout = Some(Duration::from_millis(50));
    let started = Instant::now();
    match PolicyPlugin::load(&rt, &spec) {
        Err(PluginError::Trap { reason, .. }) => {
            assert!(reason.contains("50 ms call deadline"), "{reason}")
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    spec.config = "grow_in = \"init\"".into();
    spec.limits.memory_limit = Some(8 << 20);
    match PolicyPlugin::load(&rt, &spec) {
        Err(PluginError::Trap { reason, .. }) => {
            assert!(
                reason.contains("memory budget of 8 MiB (memory_limit)"),
                "{reason}"
            )
        }
        other => panic!("unexpected {other:?}"),
    }
}
