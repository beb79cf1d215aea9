//! A replication policy that misbehaves on purpose, so tests can check the host stops it.
//! Config (TOML): `panic_in`, `loop_in` or `grow_in` = "init" | "format"; otherwise it names
//! topics like the default policy, except that `remote_topic` names every remote topic (a
//! policy that maps data onto a topic of its choice), `remote_topic_of` restricts that to one
//! source topic, and `checkpoints_topic` / `offset_syncs_topic` replace the names of those
//! internal topics (for any cluster).

use std::cell::RefCell;

wit_bindgen::generate!({ world: "policy-plugin", path: "../../../wit" });

use exports::refract::plugin::lifecycle::Guest as Lifecycle;
use exports::refract::plugin::replication_policy::Guest as Policy;
use refract::plugin::types::{PluginError, PluginInfo};

thread_local! {
    static MODE: RefCell<(String, String)> = const { RefCell::new((String::new(), String::new())) };
    /// The naming keys of the config (`remote_topic`, `checkpoints_topic`, ...) and their values.
    static NAMES: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

/// The value of the naming key `key`, when the config sets it.
fn named(key: &str) -> Option<String> {
    NAMES.with(|n| {
        n.borrow()
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    })
}

fn misbehave(at: &str) {
    let (how, when) = MODE.with(|m| m.borrow().clone());
    if when != at {
        return;
    }
    match how.as_str() {
        "panic_in" => panic!("misbehaving-policy panicked on purpose in {at}"),
        "loop_in" => {
            let mut x: u64 = 1;
            loop {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        "grow_in" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        _ => {}
    }
}

struct Misbehaving;

impl Lifecycle for Misbehaving {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "misbehaving-policy".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn init(config: String) -> Result<(), PluginError> {
        for line in config.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let (key, value) = (
                key.trim().to_string(),
                value.trim().trim_matches('"').to_string(),
            );
            if matches!(key.as_str(), "panic_in" | "loop_in" | "grow_in") {
                MODE.with(|m| *m.borrow_mut() = (key, value));
            } else {
                NAMES.with(|n| n.borrow_mut().push((key, value)));
            }
        }
        misbehave("init");
        Ok(())
    }
}

impl Policy for Misbehaving {
    fn format_remote_topics(
        source: String,
        topics: Vec<String>,
    ) -> Result<Vec<String>, PluginError> {
        misbehave("format");
        let only = named("remote_topic_of");
        Ok(topics
            .into_iter()
            .map(|t| match named("remote_topic") {
                Some(remote) if only.as_ref().is_none_or(|o| *o == t) => remote,
                _ => format!("{source}.{t}"),
            })
            .collect())
    }
    fn topic_sources(topics: Vec<String>) -> Result<Vec<Option<String>>, PluginError> {
        Ok(topics
            .iter()
            .map(|t| t.split_once('.').map(|(s, _)| s.to_string()))
            .collect())
    }
    fn upstream_topics(topics: Vec<String>) -> Result<Vec<Option<String>>, PluginError> {
        Ok(topics
            .iter()
            .map(|t| t.split_once('.').map(|(_, u)| u.to_string()))
            .collect())
    }
    fn is_internal_topics(topics: Vec<String>) -> Result<Vec<bool>, PluginError> {
        Ok(topics
            .iter()
            .map(|t| t.starts_with("__") || t.ends_with(".internal"))
            .collect())
    }
    fn heartbeats_topic() -> String {
        "heartbeats".into()
    }
    fn offset_syncs_topic(cluster: String) -> String {
        named("offset_syncs_topic")
            .unwrap_or_else(|| format!("mm2-offset-syncs.{cluster}.internal"))
    }
    fn checkpoints_topic(cluster: String) -> String {
        named("checkpoints_topic").unwrap_or_else(|| format!("{cluster}.checkpoints.internal"))
    }
}

export!(Misbehaving);
