//! A replication policy that misbehaves on purpose, so tests can check the host stops it.
//! Config (TOML): `panic_in`, `loop_in` or `grow_in` = "init" | "format"; otherwise it names
//! topics like the default policy.

use std::cell::RefCell;

wit_bindgen::generate!({ world: "policy-plugin", path: "../../../wit" });

use exports::refract::plugin::lifecycle::Guest as Lifecycle;
use exports::refract::plugin::replication_policy::Guest as Policy;
use refract::plugin::types::{PluginError, PluginInfo};

thread_local! {
    static MODE: RefCell<(String, String)> = const { RefCell::new((String::new(), String::new())) };
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
            let value = value.trim().trim_matches('"').to_string();
            MODE.with(|m| *m.borrow_mut() = (key.trim().to_string(), value));
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
        Ok(topics
            .into_iter()
            .map(|t| format!("{source}.{t}"))
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
        format!("mm2-offset-syncs.{cluster}.internal")
    }
    fn checkpoints_topic(cluster: String) -> String {
        format!("{cluster}.checkpoints.internal")
    }
}

export!(Misbehaving);
