//! The hostile test plugins of the sandbox tests that cargo does not build: the Python
//! filter `plugins/testing/python/build.sh` builds, and the multi-memory WAT component compiled
//! here. The Rust one, `hostile.wasm`, is built with the other guests (`Refract::guest`).
//!
//! `plugin_cli` and `processors` use them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::Refract;

/// The hostile Python filter (`plugins/testing/python/hostile.py`): `attack = "sleep"` or
/// `"huge-raise"` on the record whose value is `on`. The first call in a test process compiles it
/// into refract's compile cache (see [`compile_into_cache`]), so the tests time their calls and
/// not a compile.
pub fn python() -> PathBuf {
    static WARM: OnceLock<PathBuf> = OnceLock::new();
    WARM.get_or_init(|| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../plugins/target/testing/hostile-python.wasm");
        assert!(
            path.exists(),
            "{} is missing: run plugins/testing/python/build.sh (examples/plugins/build-all.sh does)",
            path.display()
        );
        let path = path.canonicalize().expect("canonical path");
        compile_into_cache(&path);
        path
    })
    .clone()
}

/// Compiles the Python component into refract's compile cache once (`plugin test` without
/// input), within the default `compile_timeout` (600 s). Compiling its 18 MiB takes 24 s on an
/// idle machine in a debug build and took over 180 s in a CI run where several tests compiled
/// it at once beside brokers and registries: a test that timed a call then failed on the
/// compile.
fn compile_into_cache(path: &Path) {
    let out = Command::new(Refract::bin())
        .args(["plugin", "test"])
        .arg(path)
        .args([
            "--config",
            "attack=sleep",
            "--config",
            "on=nothing",
            "--input",
            "-",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run refract plugin test");
    assert_eq!(
        out.status.code(),
        Some(0),
        "compiling {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `plugins/testing/hostile-memory/hostile-memory.wat` compiled into `dir`: a transform that
/// grows four memories and a table without bound on the record `memory` (the table alone on
/// `tables`) and keeps every other record.
pub fn memory(dir: &Path) -> PathBuf {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../plugins/testing/hostile-memory/hostile-memory.wat");
    let wasm = wat::parse_file(&source)
        .unwrap_or_else(|e| panic!("{} does not compile: {e}", source.display()));
    let path = dir.join("hostile-memory.wasm");
    std::fs::write(&path, wasm).expect("write hostile-memory.wasm");
    path
}

/// Checks a log that a `log-flood` attack (100 MiB in 64 KiB lines) went into: a bounded number
/// of the plugin's lines (the rate limit allows a burst of 200), none longer than 1 KiB plus the
/// log's own prefix.
pub fn assert_log_flood_cut(log: &str) {
    let flood: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("hostile log-flood line"))
        .collect();
    assert!(
        !flood.is_empty() && flood.len() <= 300,
        "{} plugin log lines",
        flood.len()
    );
    let longest = flood.iter().map(|l| l.len()).max().unwrap_or(0);
    assert!(longest <= (1 << 10) + 512, "a log line of {longest} bytes");
}
