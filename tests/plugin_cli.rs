//! `refract plugin test` runs any plugin on sample input without Kafka and prints JSON lines.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

fn plugin_test(args: &[&str], input: &str) -> (Option<i32>, Vec<serde_json::Value>, String) {
    let mut child = Command::new(support::refract_bin())
        .args(["plugin", "test"])
        .args(args)
        .args(["--input", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start refract");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write input");
    let out = child.wait_with_output().expect("wait");
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
    let plugin = support::guest("test_transform.wasm").display().to_string();
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
    let out = support::refract(&["check", &path.display().to_string()]);
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
    let misbehaving = support::guest("misbehaving_policy.wasm")
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
    let transform = support::guest("test_transform.wasm").display().to_string();
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
    let filter = support::guest("keep_even.wasm").display().to_string();
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
    let misbehaving = support::guest("misbehaving_policy.wasm")
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
            .is_some_and(|e| e.contains("past its 24 MiB limit")),
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
