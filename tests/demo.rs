//! `refract demo` runs on its own (in-process mock clusters) and reports matching counts.

use crate::support;

#[test]
fn demo_mirrors_everything_and_exits_zero() {
    // The topic-id lookups log at debug: shown, to check they do not wait for a controller.
    let out = support::Refract::output_with_env(
        &["demo"],
        &[("RUST_LOG", "info,refract_mirror::flow::recreated=debug")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("mirrored 1400 records over 4 routes; every partition matches its source"),
        "{stdout}"
    );
    // A newcomer is not greeted by warnings: everything the mock clusters cannot create through
    // an admin API (they have none) is made ahead.
    assert!(
        !stderr.contains("WARN") && !stderr.contains("ERROR") && !stderr.contains("TimedOut"),
        "{stderr}"
    );
    // The mock clusters name no live controller, so topic ids cannot be described: asked, they
    // would hold the flow 10 s at start, and again for new partitions, each time
    // (librdkafka's "Failed while waiting for controller"). One metadata answer tells instead.
    assert!(
        stderr.contains("names no controller among its brokers")
            && !stderr.contains("waiting for controller"),
        "{stderr}"
    );
    assert!(
        stdout.contains("not mirrored (internal): __audit"),
        "{stdout}"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() == 6 && (w[0] == "backup" || w[0] == "dr"))
        .collect();
    assert_eq!(
        rows.len(),
        14,
        "7 partitions on each of two targets:\n{stdout}"
    );
    assert!(rows
        .iter()
        .any(|w| w[0] == "backup" && w[2] == "primary.orders-v1"));
    assert!(rows
        .iter()
        .any(|w| w[0] == "dr" && w[1] == "orders-v1" && w[2] == "orders"));
    assert!(
        rows.iter().all(|w| w[4] == w[5] && w[4] == "100"),
        "{stdout}"
    );
    // The book's sample of this output (docs/src/getting-started/demo.md, "..." for rows left
    // out): every line it shows is a line the demo printed, in the same order.
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/src/getting-started/demo.md"),
    )
    .expect("read docs/src/getting-started/demo.md");
    let sample: Vec<&str> = page
        .split("```text\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the demo page shows a ```text sample")
        .lines()
        .filter(|l| *l != "...")
        .collect();
    let printed: Vec<&str> = stdout.lines().map(str::trim_end).collect();
    let mut at = 0;
    for line in &sample {
        match printed[at..].iter().position(|p| p == line) {
            Some(i) => at += i + 1,
            None => panic!(
                "docs/src/getting-started/demo.md shows `{line}`, which the demo did not print (in this order):\n{stdout}"
            ),
        }
    }
}
