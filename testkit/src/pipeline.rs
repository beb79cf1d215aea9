//! Pipeline files for tests: clusters from running brokers, `[[flow]]` sections with intervals
//! short enough to see discovery, commits and checkpoints within seconds, and writing them out.

use std::path::{Path, PathBuf};

use crate::Broker;

/// Intervals short enough that a test sees discovery, commits, checkpoints and heartbeats
/// within seconds.
pub const FAST: &str = "refresh_topics_interval = \"1s\"\ncommit_interval = \"500ms\"\ncheckpoint_interval = \"1s\"\nrefresh_groups_interval = \"1s\"\nheartbeat_interval = \"500ms\"\nreplication_factor = 1\n";

/// A pipeline with clusters `a` (and `b`, `c` as given) and the flows in `flows` (TOML text).
pub fn pipeline(clusters: &[(&str, &Broker)], flows: &str) -> String {
    let mut text = String::new();
    for (alias, broker) in clusters {
        text.push_str(&format!(
            "[clusters.{alias}]\nbootstrap = \"{}\"\n",
            broker.bootstrap
        ));
    }
    text.push('\n');
    text.push_str(flows);
    text
}

/// A `[[flow]]` from `source` to `target` with the [`FAST`] intervals and `extra` settings.
pub fn flow(source: &str, target: &str, extra: &str) -> String {
    format!("[[flow]]\nsource = \"{source}\"\ntarget = \"{target}\"\n{FAST}{extra}\n")
}

/// A path as text for a pipeline file.
pub fn path_str(path: &Path) -> String {
    path.display().to_string()
}

/// Writes `pipeline` as `pipeline.toml` into `dir` and returns its path.
pub fn write_pipeline(dir: &Path, pipeline: &str) -> PathBuf {
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, pipeline).expect("write pipeline");
    path
}
