//! `refract plugin new` writes a project for every kind × language (Go: policies only) that builds
//! offline with the toolchains `.ci/` installs and passes `refract plugin test` on its own sample
//! input; each language's policy project names the remote topics of a real flow between real
//! brokers; and an exception raised in a Python filter or thrown in a JavaScript transform shows
//! its type and message in `plugin test`, the run log, the dead-letter headers and `/status`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use serde_json::Value;

const KINDS: [&str; 3] = ["policy", "filter", "transform"];

/// Runs `refract plugin new --kind KIND --lang LANG PROJECT`.
fn plugin_new(project: &Path, lang: &str, kind: &str) -> std::process::Output {
    Refract::output(&[
        "plugin",
        "new",
        "--kind",
        kind,
        "--lang",
        lang,
        &project.display().to_string(),
    ])
}

/// `refract plugin new --kind KIND --lang LANG <dir>/<lang>-<kind>`; the project folder.
fn new_project(dir: &Path, lang: &str, kind: &str) -> PathBuf {
    let project = dir.join(format!("{lang}-{kind}"));
    let out = plugin_new(&project, lang, kind);
    assert!(
        out.status.success(),
        "plugin new: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("./build.sh"), "{stdout}");
    project
}

/// Runs the project's `build.sh`; the `.wasm` it wrote.
fn build(project: &Path) -> PathBuf {
    let name = project
        .file_name()
        .and_then(|n| n.to_str())
        .expect("project name");
    // Rust projects build in the target folder of the guest plugins `refract-plugin` built (the
    // same SDK, profile and lock file): the SDK and its dependencies are not compiled again, and
    // CI's disk holds one copy of them.
    let guests = refract_plugin::guest_dir();
    let target = guests
        .ancestors()
        .nth(2)
        .expect("the guest folder is <target>/wasm32-wasip2/release");
    let out = Command::new(project.join("build.sh"))
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("run build.sh");
    assert!(
        out.status.success(),
        "{}/build.sh failed:\n{}{}",
        project.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let wasm = project.join(format!("{name}.wasm"));
    assert!(wasm.is_file(), "{} was not written", wasm.display());
    wasm
}

/// `refract plugin test` on the project's sample input; exit code and the JSON lines.
fn plugin_test(project: &Path, wasm: &Path, extra: &[&str]) -> (Option<i32>, Vec<Value>, String) {
    let sample = if project.join("topics.txt").exists() {
        "topics.txt"
    } else {
        "records.jsonl"
    };
    let out = Command::new(Refract::bin())
        .current_dir(project)
        .args([
            "plugin",
            "test",
            &wasm.display().to_string(),
            "--input",
            sample,
        ])
        .args(extra)
        .output()
        .expect("run plugin test");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (
        out.status.code(),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A generated policy's answers for its sample topics (`plugin test --source-cluster primary`):
/// MirrorMaker 2's DefaultReplicationPolicy.
fn assert_default_policy_answers(lang: &str, lines: &[Value]) {
    let by_topic = |t: &str| {
        lines
            .iter()
            .find(|l| l["topic"] == t)
            .unwrap_or_else(|| panic!("{lang}: no answer for {t}: {lines:?}"))
            .clone()
    };
    assert_eq!(lines.len(), 7, "{lang}: {lines:?}");
    assert_eq!(by_topic("orders")["remote"], "primary.orders");
    assert_eq!(by_topic("orders")["source"], Value::Null);
    assert_eq!(by_topic("primary.orders")["source"], "primary");
    assert_eq!(by_topic("primary.orders")["upstream"], "orders");
    assert_eq!(by_topic("primary.heartbeats")["heartbeats"], true);
    assert_eq!(by_topic("__consumer_offsets")["internal"], true);
    assert_eq!(
        by_topic("mm2-offset-syncs.backup.internal")["internal"],
        true
    );
    assert_eq!(by_topic("payments.v2")["internal"], false);
}

/// Each of `kinds` (which include the policy) of `lang` builds and answers its sample input with
/// the kind's default behaviour; the policy project then mirrors a topic through a real flow.
fn projects_build_test_and_mirror(lang: &str, kinds: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut policy = None;
    for &kind in kinds {
        let project = new_project(dir.path(), lang, kind);
        let wasm = build(&project);
        let (code, lines, stderr) = plugin_test(&project, &wasm, &["--source-cluster", "primary"]);
        assert_eq!(code, Some(0), "{lang} {kind}: {stderr}");
        if kind == "policy" {
            assert_default_policy_answers(lang, &lines);
            policy = Some(wasm.clone());
        } else {
            let outcomes: Vec<&Value> = lines.iter().map(|l| &l["outcome"]).collect();
            assert_eq!(
                outcomes,
                ["keep", "keep", "keep"],
                "{lang} {kind}: {lines:?}"
            );
        }
        // An unknown config key is rejected, naming it.
        let (code, _, stderr) = plugin_test(&project, &wasm, &["--config", "bogus=1"]);
        assert_eq!(code, Some(2), "{lang} {kind}");
        assert!(stderr.contains("bogus"), "{lang} {kind}: {stderr}");
    }

    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique(&format!("scaffold-{lang}"));
    a.create_topic(&topic, 2);
    let records = sample_records(lang, 2, 30);
    a.produce(&topic, &records);
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\npolicy = {{ plugin = \"{}\" }}\n",
        policy.expect("a policy project").display()
    );
    let mut refract = Refract::start(&pipeline(&[("a", a), ("b", b)], &flows), &[]);
    let remote = format!("a.{topic}");
    refract.wait("30 records under the generated policy's name", || {
        b.counts(&remote).iter().sum::<i64>() == 30
    });
    assert_eq!(b.read_all(&remote), by_partition(&records, 2));
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn rust_projects() {
    projects_build_test_and_mirror("rust", &KINDS);
}

#[test]
fn python_projects() {
    projects_build_test_and_mirror("python", &KINDS);
}

#[test]
fn javascript_projects() {
    projects_build_test_and_mirror("javascript", &KINDS);
}

#[test]
fn c_projects() {
    projects_build_test_and_mirror("c", &KINDS);
}

/// Go projects are policies only (abi.go covers the policy world): a Go filter or transform is
/// refused as a usage error, before anything is written.
#[test]
fn go_projects() {
    let dir = tempfile::tempdir().expect("temp dir");
    for kind in ["filter", "transform"] {
        let project = dir.path().join(kind);
        let out = plugin_new(&project, "go", kind);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("Go projects can be policies only: abi.go covers the policy world; write {kind}s in Rust, Python, JavaScript or C")),
            "{stderr}"
        );
        assert!(!project.exists());
    }
    projects_build_test_and_mirror("go", &["policy"]);
}

/// A processor project whose one place to change raises on the record whose value is `boom`:
/// its exception (type and message) is shown by `plugin test`, the run log, the dead-letter
/// record's headers and `/status`, while the other records are mirrored.
fn exception_in_own_words(lang: &str, kind: &str, change: (&str, &str), exception: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let project = new_project(dir.path(), lang, kind);
    let source = project.join(if lang == "python" {
        "app.py".to_string()
    } else {
        format!("{kind}.js")
    });
    let text = std::fs::read_to_string(&source).expect("read the source");
    assert!(text.contains(change.0), "{}: {text}", source.display());
    std::fs::write(&source, text.replace(change.0, change.1)).expect("write the source");
    let wasm = build(&project);

    let input = project.join("boom.jsonl");
    std::fs::write(&input, "{\"value\":\"fine\"}\n{\"value\":\"boom\"}\n").expect("input");
    let out = Command::new(Refract::bin())
        .args(["plugin", "test", &wasm.display().to_string(), "--input"])
        .arg(&input)
        .output()
        .expect("plugin test");
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(exception), "{stdout}");

    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique(&format!("boom-{lang}"));
    a.create_topic(&topic, 1);
    let records: Vec<TestRecord> = (0..10)
        .map(|i| TestRecord {
            partition: 0,
            key: Some(format!("k{i}").into_bytes()),
            value: Some(
                if i == 4 {
                    "boom".into()
                } else {
                    format!("v{i}")
                }
                .into_bytes(),
            ),
            headers: vec![],
            timestamp: 1_650_000_000_000 + i,
        })
        .collect();
    a.produce(&topic, &records);
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nprocessors = [{{ plugin = \"{}\", on_error = \"dead-letter\" }}]\n",
        wasm.display()
    );
    let text = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n\n{}",
        pipeline(&[("a", a), ("b", b)], &flows)
    );
    let mut refract = Refract::start(&text, &[]);
    let remote = format!("a.{topic}");
    let dlq = "refract.dlq.a.internal";
    let ours = |r: &TestRecord| {
        r.headers
            .iter()
            .any(|(k, v)| k == "refract.source.topic" && v.as_deref() == Some(topic.as_bytes()))
    };
    refract.wait("9 records mirrored and the bad one dead-lettered", || {
        b.counts(&remote).iter().sum::<i64>() == 9 && b.read_all(dlq).iter().flatten().any(&ours)
    });
    let dead: Vec<TestRecord> = b
        .read_all(dlq)
        .into_iter()
        .flatten()
        .filter(|r| ours(r))
        .collect();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].value.as_deref(), Some(b"boom".as_slice()));
    let message = dead[0].header_text("refract.error.message");
    assert!(message.contains(exception), "dead-letter header: {message}");
    assert!(refract.log().contains(exception), "{}", refract.log());
    let (_, status) = http(&refract.metrics_addr(), "GET", "/status");
    assert!(status.contains(exception), "{status}");
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn python_exception_is_shown_in_its_own_words() {
    exception_in_own_words(
        "python",
        "filter",
        (
            "        return True\n",
            "        if record.value_str() == \"boom\":\n            raise ValueError(f\"cannot mirror boom at offset {record.offset}\")\n        return True\n",
        ),
        "ValueError: cannot mirror boom at offset",
    );
}

#[test]
fn javascript_exception_is_shown_in_its_own_words() {
    exception_in_own_words(
        "javascript",
        "transform",
        (
            "    return keep();\n",
            "    if (record.valueStr() === 'boom') throw new RangeError(`cannot mirror boom at offset ${record.offset}`);\n    return keep();\n",
        ),
        "RangeError: cannot mirror boom at offset",
    );
}

/// Without the helper libraries an exception traps the plugin; the error still starts with the
/// exception's type and message (the last line of the Python traceback, the error a JavaScript
/// export threw), before the wasm trap and the plugin's stderr.
#[test]
fn a_trapping_exception_without_the_helpers_is_named_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let app = "from wit_world import exports\nfrom wit_world.imports import types\n\n\
class Lifecycle(exports.Lifecycle):\n    def info(self):\n        return types.PluginInfo(name=\"raw\", version=\"0.1.0\")\n    def init(self, config):\n        pass\n\n\
class RecordFilter(exports.RecordFilter):\n    def filter(self, batch):\n        return {}[\"missing-\" + batch.topic]\n";
    std::fs::write(dir.path().join("app.py"), app).expect("write app.py");
    let python = dir.path().join("raw-python.wasm");
    let out = Command::new("componentize-py")
        .current_dir(dir.path())
        .arg("-d")
        .arg(home.join("wit"))
        .args(["-w", "filter-plugin", "componentize", "app", "-o"])
        .arg(&python)
        .output()
        .expect("run componentize-py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let js = "export const lifecycle = { info() { return { name: 'raw', version: '0.1.0' }; }, init(config) {} };\n\
export const recordFilter = { filter(batch) { throw new TypeError(`bad record in ${batch.topic}`); } };\n";
    std::fs::write(dir.path().join("raw.js"), js).expect("write raw.js");
    let javascript = dir.path().join("raw-javascript.wasm");
    let out = Command::new("node")
        .arg(home.join("sdk/javascript/build.mjs"))
        .args(["--world", "filter-plugin", "--source"])
        .arg(dir.path().join("raw.js"))
        .arg("--out")
        .arg(&javascript)
        .output()
        .expect("run build.mjs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let input = dir.path().join("one.jsonl");
    std::fs::write(&input, "{\"topic\":\"orders\",\"value\":\"v\"}\n").expect("input");
    for (wasm, first) in [
        (
            &python,
            "filter was stopped: KeyError: 'missing-orders' [wasm trap",
        ),
        (
            &javascript,
            "filter was stopped: TypeError: bad record in orders [wasm trap",
        ),
    ] {
        let out = Command::new(Refract::bin())
            .args(["plugin", "test", &wasm.display().to_string(), "--input"])
            .arg(&input)
            .output()
            .expect("plugin test");
        assert_eq!(out.status.code(), Some(2));
        let line: Value =
            serde_json::from_slice(&out.stdout).expect("one JSON line for the one record");
        let error = line["error"].as_str().unwrap_or_default();
        assert!(error.contains(first), "{error}");
        assert!(error.contains("plugin stderr: "), "{error}");
    }
}
