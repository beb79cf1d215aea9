//! Text real plugins control reaches refract's errors and outcomes as plugin text: control
//! characters escaped (nothing a plugin writes can start a line of refract's log or drive a
//! terminal), capped.

use std::sync::Arc;
use std::time::Duration;

use refract_config::{PluginLocation, PluginSpec};
use refract_plugin::{
    guest_dir, plugin_text, topic_name_problem, BatchView, Outcome, PluginError, PluginLimits,
    PluginRuntime, PolicyPlugin, Processor, ProcessorPlugin, RecordView, ReplicationPolicy,
};

fn spec(file: &str, config: &str) -> PluginSpec {
    PluginSpec {
        location: PluginLocation::File(guest_dir().join(file)),
        config: config.to_string(),
        key: "flow[0].processors[0]".into(),
        limits: Default::default(),
    }
}

fn runtime() -> Arc<PluginRuntime> {
    PluginRuntime::new(PluginLimits {
        call_deadline: Duration::from_secs(5),
        ..PluginLimits::default()
    })
    .expect("runtime")
}

/// Whether `text` holds a character plugin text never shows as itself.
fn has_control(text: &str) -> bool {
    text.chars()
        .any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c))
}

/// A forged log line and an ANSI colour sequence, as a plugin would hide them in its text.
const FORGED: &str = "evil\n2026-12-04T08:00:00Z  INFO refract: all good\u{1b}[31m\u{202e}";

#[test]
fn a_transform_routing_to_a_hostile_topic_name_is_rejected_in_one_escaped_line() {
    let rt = runtime();
    // TOML basic-string escapes: the plugin's config carries the real control characters.
    let config = "attack = \"route\"\non = \"route\"\ntopic = \"evil\\n2026-12-04T08:00:00Z  INFO refract: all good\\u001b[31m\\u202e\"";
    let plugin = ProcessorPlugin::load(&rt, &spec("hostile.wasm", config)).expect("loads");
    let mut processor = Processor::new(plugin);
    let record = RecordView {
        partition: 0,
        offset: 7,
        timestamp_ms: 1,
        key: None,
        value: Some(b"route"),
        headers: vec![],
    };
    let batch = BatchView {
        source_cluster: "a",
        topic: "t",
        target_topic: "a.t",
        records: vec![record],
    };
    let outcomes = processor.process(&batch).expect("answers");
    let [Outcome::Reject(reason)] = outcomes.as_slice() else {
        panic!("{outcomes:?}");
    };
    assert!(!has_control(reason), "{reason:?}");
    assert!(
        reason
            .contains("`evil\\n2026-12-04T08:00:00Z  INFO refract: all good\\u{1b}[31m\\u{202e}`"),
        "{reason}"
    );
    assert!(reason.contains("not a legal topic name"), "{reason}");
}

#[test]
fn a_panic_is_one_escaped_line_with_the_plugins_words() {
    let rt = runtime();
    let mut policy = ReplicationPolicy::new(
        PolicyPlugin::load(
            &rt,
            &spec("misbehaving_policy.wasm", "panic_in = \"format\""),
        )
        .expect("loads"),
    );
    let err = policy
        .format_remote_topics("a", &["t".to_string()])
        .expect_err("panics");
    let PluginError::Trap { reason, .. } = &err else {
        panic!("{err:?}");
    };
    // The Rust panic's stderr is several lines ("thread ... panicked at", the message, a note):
    // shown escaped, on the error's one line.
    assert!(!has_control(&err.to_string()), "{err}");
    assert!(reason.contains("panicked on purpose in format"), "{reason}");
    assert!(reason.contains("plugin stderr: "), "{reason}");
    assert!(reason.contains("\\n"), "{reason}");
}

#[test]
fn a_hostile_remote_name_from_a_policy_is_named_escaped() {
    let rt = runtime();
    let config = format!("remote_topic = \"{}\"", FORGED.replace('\n', " "));
    let mut policy = ReplicationPolicy::new(
        PolicyPlugin::load(&rt, &spec("misbehaving_policy.wasm", &config)).expect("loads"),
    );
    let remote = policy
        .format_remote_topics("a", &["t".to_string()])
        .expect("answers")
        .remove(0);
    // The answer itself is the plugin's, unchanged; what refract says about it is escaped.
    assert!(remote.contains('\u{1b}'));
    let problem = topic_name_problem(&remote).expect("illegal");
    assert!(!has_control(&problem), "{problem:?}");
    assert!(problem.contains("\\u{1b}"), "{problem}");
    assert!(!has_control(&plugin_text(&remote, 512)));
}
