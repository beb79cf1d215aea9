//! `refract plugin test` runs any plugin on sample input without Kafka and prints JSON lines.

use crate::support;
use crate::support::hostile;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

fn plugin_test(args: &[&str], input: &str) -> (Option<i32>, Vec<serde_json::Value>, String) {
    plugin_test_within(args, input, support::DEADLINE)
}

/// `plugin test` with `args` on `input`, killed (failing the test) if it still runs after
/// `limit`: a plugin the sandbox fails to stop must not hold the test for the hour it sleeps.
fn plugin_test_within(
    args: &[&str],
    input: &str,
    limit: Duration,
) -> (Option<i32>, Vec<serde_json::Value>, String) {
    let mut child = Command::new(support::Refract::bin())
        .args(["plugin", "test"])
        .args(args)
        .args(["--input", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start refract");
    let pid = child.id().to_string();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let late = finished.recv_timeout(limit).is_err();
        if late {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
        late
    });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write input");
    let out = child.wait_with_output().expect("wait");
    let _ = done.send(());
    assert!(
        !watchdog.join().expect("watchdog"),
        "refract plugin test {args:?} still ran after {limit:?}"
    );
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    (
        out.status.code(),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn processors_print_one_outcome_per_record() {
    let input = concat!(
        "{\"key\":\"k1\",\"value\":\"{\\\"email\\\":\\\"a@b.c\\\",\\\"n\\\":1}\",\"headers\":{\"env\":\"test\"}}\n",
        "{\"key\":\"k2\",\"value\":\"plain\"}\n",
    );
    let (code, lines, stderr) = plugin_test(
        &["builtin:json-mask", "--config", "fields=[\"email\"]"],
        input,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["outcome"], "replace");
    assert_eq!(
        lines[0]["records"][0]["value"],
        "{\"email\":\"***\",\"n\":1}"
    );
    assert_eq!(
        lines[0]["records"][0]["headers"][0],
        serde_json::json!(["env", "test"])
    );
    assert_eq!(
        lines[1],
        serde_json::json!({ "offset": 1, "outcome": "keep" })
    );

    let (code, lines, _) = plugin_test(
        &[
            "builtin:filter",
            "--config",
            "header=env",
            "--config",
            "header_value=test",
        ],
        input,
    );
    assert_eq!(code, Some(0));
    assert_eq!(lines[0]["outcome"], "drop");
    assert_eq!(lines[1]["outcome"], "keep");
}

#[test]
fn policies_print_naming_and_cycle_answers() {
    let (code, lines, stderr) = plugin_test(
        &[
            "builtin:default",
            "--source-cluster",
            "a",
            "--target-cluster",
            "b",
        ],
        "\"orders\"\n\"b.orders\"\n\"__x\"\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(lines[0]["remote"], "a.orders");
    assert_eq!(lines[0]["cycle"], false);
    assert_eq!(lines[1]["source"], "b");
    assert_eq!(lines[1]["cycle"], true);
    assert_eq!(lines[2]["internal"], true);
}

#[test]
fn a_failing_plugin_prints_error_lines_and_exits_non_zero() {
    let plugin = support::Refract::guest("test_transform.wasm")
        .display()
        .to_string();
    let (code, lines, stderr) = plugin_test(
        &[&plugin, "--config", "panic_on=boom"],
        "{\"value\":\"boom\"}\n",
    );
    assert_eq!(code, Some(2));
    assert_eq!(lines[0]["outcome"], "error");
    assert!(
        lines[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("panicked on purpose")),
        "{:?}",
        lines[0]
    );
    assert!(stderr.contains("failed on 1 input"), "{stderr}");
}

/// `refract check` on a pipeline of one flow whose policy (and processors) are `flow_extra`.
fn check(flow_extra: &str) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = support::write_pipeline(
        dir.path(),
        &format!(
            "[clusters.a]\nbootstrap = \"localhost:1\"\n[clusters.b]\nbootstrap = \"localhost:2\"\n\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"orders-v1\", \"payments.*\"]\n{flow_extra}\n"
        ),
    );
    let out = support::Refract::output(&["check", &path.display().to_string()]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_exercises_policies_and_processors_before_anything_runs() {
    // A healthy flow: the policy is asked about the flow's literal topics and samples.
    let (code, stdout, stderr) = check(
        "processors = [{ plugin = \"builtin:filter\", config = { header = \"env\", header_value = \"test\" } }]",
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("policy answered 7 sample topics (orders-v1 -> a.orders-v1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("processors[0] builtin:filter answered a sample record: keep"),
        "{stdout}"
    );

    // A policy that fails on every call: caught by check, naming the flow, plugin and call.
    let misbehaving = support::Refract::guest("misbehaving_policy.wasm")
        .display()
        .to_string();
    let (code, stdout, stderr) = check(&format!(
        "policy = {{ plugin = \"{misbehaving}\", config = {{ panic_in = \"format\" }} }}"
    ));
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(!stdout.contains(": ok"), "{stdout}");
    for needle in [
        "a plugin failed when exercised",
        "flow a->b: policy",
        &misbehaving,
        "format-remote-topics was stopped",
        "panic: misbehaving-policy panicked on purpose in format",
    ] {
        assert!(stderr.contains(needle), "{needle:?} in {stderr}");
    }

    // Remote names Kafka would refuse are errors naming the topic and the plugin.
    let (code, _, stderr) =
        check("policy = { plugin = \"builtin:default\", config = { separator = \"/\" } }");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("policy builtin:default: names the sample topic orders-v1 `a/orders-v1` on b, which is not a legal Kafka topic name"),
        "{stderr}"
    );

    // A processor that fails on the sample record.
    let transform = support::Refract::guest("test_transform.wasm")
        .display()
        .to_string();
    let (code, _, stderr) = check(&format!(
        "processors = [{{ plugin = \"{transform}\", config = {{ panic_on = '{{\"id\":1,\"name\":\"sample\"}}' }} }}]"
    ));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("processors[0]: failed on a sample record")
            && stderr.contains("transform was stopped"),
        "{stderr}"
    );

    // A component of the wrong kind is refused by its exports, before it is compiled.
    let filter = support::Refract::guest("keep_even.wasm")
        .display()
        .to_string();
    let (code, _, stderr) = check(&format!("policy = {{ plugin = \"{filter}\" }}"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("wrong plugin kind: it is a filter plugin (world filter-plugin)"),
        "{stderr}"
    );
}

#[test]
fn policy_input_takes_plain_topic_names_and_reports_illegal_remote_names() {
    let (code, lines, stderr) = plugin_test(
        &[
            "builtin:default",
            "--source-cluster",
            "a",
            "--config",
            "separator=/",
        ],
        "# comment\norders\n\"__consumer_offsets\"\n",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["topic"], "orders");
    assert_eq!(lines[0]["outcome"], "error");
    let error = lines[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("builtin:default")
            && error.contains("`a/orders`")
            && error.contains("not a legal Kafka topic name"),
        "{error}"
    );
    // An internal topic is answered (it is never mirrored, so its remote name is not checked).
    assert_eq!(lines[1]["internal"], true);
}

#[test]
fn plugin_test_takes_limits_and_rejects_broken_config_values() {
    let misbehaving = support::Refract::guest("misbehaving_policy.wasm")
        .display()
        .to_string();
    let (code, lines, stderr) = plugin_test(
        &[
            &misbehaving,
            "--config",
            "loop_in=format",
            "--call-timeout",
            "200ms",
        ],
        "orders\n",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        lines[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("ran past its 200 ms call deadline")),
        "{lines:?}"
    );
    let (code, lines, stderr) = plugin_test(
        &[
            &misbehaving,
            "--config",
            "grow_in=format",
            "--memory-limit",
            "24MiB",
        ],
        "orders\n",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        lines[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("past its memory budget of 24 MiB (memory_limit)")),
        "{lines:?}"
    );
    let (code, lines, stderr) = plugin_test(
        &["builtin:json-mask", "--config", "fields=[\"email\""],
        "{}\n",
    );
    assert_eq!(code, Some(2));
    assert!(lines.is_empty());
    assert!(
        stderr.contains("--config fields: `[\"email\"` is not a valid TOML value"),
        "{stderr}"
    );
    let (code, _, stderr) = plugin_test(&["builtin:default", "--call-timeout", "0s"], "x\n");
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("--call-timeout: must be greater than zero"),
        "{stderr}"
    );
}

// Hostile plugins under `plugin test`: each attack is stopped by the limit it aims at,
// named in the error line, and the command ends in seconds.

/// Three records in partitions 0, 1 and 2 (so each is a call of its own), the middle one with
/// value `marker`.
fn around(marker: &str) -> String {
    format!(
        "{{\"partition\":0,\"value\":\"before\"}}\n{{\"partition\":1,\"value\":\"{marker}\"}}\n{{\"partition\":2,\"value\":\"after\"}}\n"
    )
}

/// `plugin test` with `args` on `input`, which must end within [`CALLS_LIMIT`]. A run with no
/// input first compiles the plugin into the compile cache, so the limit bounds the calls.
fn within_seconds(args: &[&str], input: &str) -> (Option<i32>, Vec<serde_json::Value>, String) {
    let (code, _, stderr) = plugin_test(args, "");
    assert_eq!(code, Some(0), "{stderr}");
    plugin_test_within(args, input, CALLS_LIMIT)
}

/// Seconds against the hour an attack would take: generous for a loaded machine.
const CALLS_LIMIT: Duration = Duration::from_secs(30);

/// Checks that the lines are keep, error, keep and that the error contains every `needle`;
/// returns the error.
fn keep_error_keep(lines: &[serde_json::Value], needles: &[&str]) -> String {
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["outcome"], "keep", "{lines:?}");
    assert_eq!(lines[2]["outcome"], "keep", "{lines:?}");
    assert_eq!(lines[1]["outcome"], "error", "{lines:?}");
    let error = lines[1]["error"].as_str().unwrap_or_default().to_string();
    for needle in needles {
        assert!(error.contains(needle), "{needle:?} in {error}");
    }
    error
}

fn hostile() -> String {
    support::Refract::guest("hostile.wasm")
        .display()
        .to_string()
}

/// An hour's sleep in Rust or Python returns at once (plugin clocks are virtual): the marker is
/// kept and the command ends in seconds.
#[test]
fn plugin_test_sleeps_return_at_once() {
    let python = hostile::python().display().to_string();
    for plugin in [hostile(), python] {
        let (code, lines, stderr) = within_seconds(
            &[
                &plugin,
                "--config",
                "attack=sleep",
                "--config",
                "on=sleep",
                "--call-timeout",
                "500ms",
            ],
            &around("sleep"),
        );
        assert_eq!(code, Some(0), "{plugin}: {stderr}");
        assert!(
            lines.iter().all(|l| l["outcome"] == "keep") && lines.len() == 3,
            "{plugin}: {lines:?}"
        );
    }
}

/// Busy-waiting for an hour of virtual time to pass is stopped by `--call-timeout`; the next call runs
/// on a fresh instance.
#[test]
fn plugin_test_stops_spinning_on_the_clock_at_the_deadline() {
    let (code, lines, stderr) = within_seconds(
        &[
            &hostile(),
            "--config",
            "attack=spin-clock",
            "--config",
            "on=spin",
            "--call-timeout",
            "500ms",
        ],
        &around("spin"),
    );
    assert_eq!(code, Some(2), "{stderr}");
    keep_error_keep(&lines, &["call deadline", "500 ms"]);
    assert_eq!(lines[1]["limit"], "call_timeout");
}

/// Four memories and a table grown without bound (plugins/testing/hostile-memory) are stopped
/// by one `--memory-limit` for all of them.
#[test]
fn plugin_test_holds_memories_and_tables_to_one_budget() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plugin = hostile::memory(dir.path()).display().to_string();
    let input = "{\"partition\":0,\"value\":\"memory\"}\n{\"partition\":1,\"value\":\"tables\"}\n{\"partition\":2,\"value\":\"after\"}\n";
    let (code, lines, stderr) = plugin_test(&[&plugin, "--memory-limit", "128MiB"], input);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(lines.len(), 3, "{lines:?}");
    for (line, grown) in lines.iter().zip(["grow a linear memory", "grow a table"]) {
        assert_eq!(line["outcome"], "error", "{line}");
        assert_eq!(line["limit"], "memory_limit", "{line}");
        let error = line["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(grown) && error.contains("memory budget of 128 MiB (memory_limit)"),
            "{error}"
        );
    }
    assert_eq!(lines[2]["outcome"], "keep");
}

/// The output budgets, at their defaults and set by flag: records per input
/// (`max_outputs_per_record`, 1000), records per call (`max_outputs_per_call`) and bytes per
/// call (`max_output_bytes`, 64 MiB). A budget is a most: exactly that many passes.
#[test]
fn plugin_test_holds_transforms_to_their_output_budgets() {
    let plugin = hostile();
    let run = |config: &[&str], flags: &[&str], input: &str| {
        let mut args = vec![plugin.as_str()];
        for c in config {
            args.extend(["--config", c]);
        }
        args.extend(flags);
        plugin_test(&args, input)
    };
    // 100,000 records from one input, under the default budget of 1000.
    let (code, lines, stderr) = run(&["attack=fan-out", "on=fan"], &[], &around("fan"));
    assert_eq!(code, Some(2), "{stderr}");
    keep_error_keep(&lines, &["max_outputs_per_record"]);
    assert_eq!(lines[1]["limit"], "max_outputs_per_record");

    // Exactly the budget passes; one more does not.
    let flags = ["--max-outputs-per-record", "10"];
    let (code, lines, stderr) = run(
        &["attack=fan-out", "on=fan", "count=10"],
        &flags,
        &around("fan"),
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(lines[1]["records"].as_array().map(Vec::len), Some(10));
    let (code, lines, _) = run(
        &["attack=fan-out", "on=fan", "count=11"],
        &flags,
        &around("fan"),
    );
    assert_eq!(code, Some(2));
    keep_error_keep(&lines, &["max_outputs_per_record"]);

    // Two inputs of one call, 600 records each: within the budget per record, past the one
    // per call.
    let two = "{\"value\":\"fan\"}\n{\"value\":\"fan\"}\n";
    let (code, lines, stderr) = run(
        &["attack=fan-out", "on=fan", "count=600"],
        &["--max-outputs-per-call", "1000"],
        two,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        lines.iter().any(|l| l["error"]
            .as_str()
            .is_some_and(|e| e.contains("max_outputs_per_call"))),
        "{lines:?}"
    );

    // 200 records of 1 MiB that share one buffer in the plugin: 200 MiB for the host to copy,
    // past the default 64 MiB.
    let (code, lines, stderr) = run(&["attack=big-copies", "on=big"], &[], &around("big"));
    assert_eq!(code, Some(2), "{stderr}");
    keep_error_keep(&lines, &["max_output_bytes"]);
    assert_eq!(lines[1]["limit"], "max_output_bytes");
    let (code, lines, stderr) = run(
        &["attack=big-copies", "on=big", "count=4", "size=524288"],
        &["--max-output-bytes", "1MiB"],
        &around("big"),
    );
    assert_eq!(code, Some(2), "{stderr}");
    keep_error_keep(&lines, &["max_output_bytes"]);
}

/// 100 MiB of log lines in one call: each line cut to 1 KiB, a bounded number of them written,
/// a warning for the rest; the record is kept.
#[test]
fn plugin_test_cuts_and_rate_limits_a_log_flood() {
    let (code, lines, stderr) = plugin_test(
        &[
            &hostile(),
            "--config",
            "attack=log-flood",
            "--config",
            "on=flood",
        ],
        &around("flood"),
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(lines.iter().all(|l| l["outcome"] == "keep"), "{lines:?}");
    hostile::assert_log_flood_cut(&stderr);
    assert!(
        stderr.contains("log lines dropped"),
        "{}",
        &stderr[stderr.len().saturating_sub(2000)..]
    );
}

/// A 1 MiB panic message (Rust) or exception message (Python) is cut: the error names the
/// plugin's failure in its own words, and nothing the command prints comes near a megabyte.
#[test]
fn plugin_test_cuts_huge_panic_and_exception_messages() {
    let python = hostile::python().display().to_string();
    for (plugin, attack, own_words) in [
        (python, "attack=huge-raise", "ValueError: xxx"),
        (hostile(), "attack=huge-panic", "hostile huge-panic xxx"),
    ] {
        let (code, lines, stderr) = plugin_test(
            &[&plugin, "--config", attack, "--config", "on=huge"],
            &around("huge"),
        );
        assert_eq!(code, Some(2), "{stderr}");
        let error = keep_error_keep(&lines, &[own_words, "cut"]);
        assert!(
            error.len() <= 2 << 10,
            "{plugin}: an error of {} bytes",
            error.len()
        );
        assert!(
            stderr.len() <= 64 << 10,
            "{plugin}: {} bytes on stderr",
            stderr.len()
        );
    }
}

/// A record routed to an internal topic (offset syncs, checkpoints, heartbeats, dead letters,
/// Kafka's own) is shown as refused, as a flow would refuse it.
#[test]
fn plugin_test_refuses_routes_to_internal_topics() {
    for topic in [
        "mm2-offset-syncs.zz.internal",
        "zz.checkpoints.internal",
        "mm2-offsets.zz.internal",
        "refract.dlq.zz.internal",
        "__consumer_offsets",
        "heartbeats",
        "zz.heartbeats",
    ] {
        let (code, lines, stderr) = plugin_test(
            &[
                &hostile(),
                "--config",
                "attack=route",
                "--config",
                "on=route",
                "--config",
                &format!("topic={topic}"),
            ],
            &around("route"),
        );
        // Refused by refract, not failed: the record is rejected (and follows on_error in a flow).
        assert_eq!(code, Some(0), "{topic}: {stderr}");
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0]["outcome"], "keep", "{lines:?}");
        assert_eq!(lines[2]["outcome"], "keep", "{lines:?}");
        assert_eq!(lines[1]["outcome"], "reject", "{lines:?}");
        let reason = lines[1]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("internal topic"), "{reason}");
        assert!(reason.contains(topic), "{reason}");
    }
}

/// `plugin test` on `plugin` with `flags` and no input, compiling the plugin afresh (no compile
/// cache): its exit code, its stderr and how long it took.
fn compile_fresh(plugin: &str, flags: &[&str]) -> (Option<i32>, String, Duration) {
    let started = std::time::Instant::now();
    let out = Command::new(support::Refract::bin())
        .args(["plugin", "test", plugin, "--input", "-"])
        .args(flags)
        .env("REFRACT_CACHE_DIR", "off")
        .stdin(Stdio::null())
        .output()
        .expect("run refract");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr, started.elapsed())
}

/// A plugin file larger than `max_wasm_bytes` is refused before it is read; the error names the
/// file, its size, the limit and the key that raises it.
#[test]
fn plugin_test_refuses_a_file_past_max_wasm_bytes() {
    let plugin = hostile();
    let size = std::fs::metadata(&plugin).expect("hostile.wasm").len();
    let shown = if size % 1024 == 0 {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} bytes")
    };
    let (code, stderr, _) = compile_fresh(&plugin, &["--max-wasm-bytes", "64KiB"]);
    assert_eq!(code, Some(2), "{stderr}");
    let want = format!(
        "plugin {plugin}: the file is {shown}, more than its limit of 64 KiB (max_wasm_bytes); raise max_wasm_bytes"
    );
    assert!(stderr.contains(&want), "{want:?} in {stderr}");
}

/// Compiling is bounded in time: past `compile_timeout` the compiler process is killed and the
/// plugin refused by name, without waiting for the compilation (the Python component takes
/// seconds to compile); within it the same plugin compiles.
#[test]
fn plugin_test_stops_a_compile_past_compile_timeout() {
    let rust = hostile();
    let (code, stderr, _) = compile_fresh(&rust, &["--compile-timeout", "1ms"]);
    assert_eq!(code, Some(2), "{stderr}");
    let want = format!("compiling plugin {rust} took longer than 0.001 s (compile_timeout)");
    assert!(stderr.contains(&want), "{want:?} in {stderr}");
    let config = ["--config", "attack=sleep", "--config", "on=x"];
    let (code, stderr, _) = compile_fresh(&rust, &config);
    assert_eq!(code, Some(0), "{stderr}");

    let python = hostile::python().display().to_string();
    let (code, stderr, took) = compile_fresh(&python, &["--compile-timeout", "2s"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("took longer than 2 s (compile_timeout)"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(10), "refused after {took:?}");
}

/// Compiling is bounded in memory: a compiler process past `compile_memory_limit` (its address
/// space) is stopped and the plugin refused by name.
#[test]
fn plugin_test_stops_a_compile_past_compile_memory_limit() {
    let python = hostile::python().display().to_string();
    let (code, stderr, _) = compile_fresh(&python, &["--compile-memory-limit", "256MiB"]);
    assert_eq!(code, Some(2), "{stderr}");
    let want = format!(
        "compiling plugin {python} needed more than 256 MiB of memory (compile_memory_limit)"
    );
    assert!(stderr.contains(&want), "{want:?} in {stderr}");
}

/// A ```console block in the book or the README is a transcript: each `$ ` command (with its
/// `\`-continued lines) runs in bash from the repository root with this build's `refract` first
/// on PATH, and must print exactly the lines shown under it. Commands there must work without
/// Kafka (`plugin test`, `convert`, …); output that needs clusters is shown in ```text blocks.
#[test]
fn the_books_console_transcripts_are_what_refract_prints() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read docs/src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    let bin_dir = std::path::Path::new(support::Refract::bin())
        .parent()
        .expect("the binary's folder")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    let mut wrong = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read a markdown file");
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let mut lines = text.lines().enumerate().peekable();
        while let Some((_, line)) = lines.next() {
            if line.trim_end() != "```console" {
                continue;
            }
            // (line number, command, expected output) per prompt of the block.
            let mut steps: Vec<(usize, String, Vec<String>)> = Vec::new();
            for (n, line) in lines.by_ref() {
                if line.starts_with("```") {
                    break;
                }
                let continued = steps
                    .last()
                    .is_some_and(|(_, cmd, out)| out.is_empty() && cmd.ends_with('\\'));
                if let Some(cmd) = line.strip_prefix("$ ") {
                    steps.push((n + 1, cmd.to_string(), Vec::new()));
                } else if continued {
                    let last = steps.last_mut().expect("a step");
                    last.1.push('\n');
                    last.1.push_str(line);
                } else if let Some(last) = steps.last_mut() {
                    last.2.push(line.to_string());
                } else {
                    wrong.push(format!("{shown}:{}: output before any `$ ` command", n + 1));
                }
            }
            for (n, cmd, expected) in steps {
                let out = Command::new("bash")
                    .args(["-c", &cmd])
                    .current_dir(&root)
                    .env("PATH", &path)
                    .output()
                    .expect("run bash");
                ran += 1;
                let printed = String::from_utf8_lossy(&out.stdout);
                let printed: Vec<&str> = printed.lines().collect();
                if !out.status.success() || printed != expected {
                    wrong.push(format!(
                        "{shown}:{n}: `{cmd}` ({}) printed\n{}\nbut the book shows\n{}\n{}",
                        out.status,
                        printed.join("\n"),
                        expected.join("\n"),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    assert!(
        ran >= 3,
        "only {ran} transcript commands found in README.md and docs/src"
    );
}
