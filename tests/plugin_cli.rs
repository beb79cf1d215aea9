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
