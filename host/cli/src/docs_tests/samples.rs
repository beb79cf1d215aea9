//! Sample outputs in the book come from the code: a fenced block right after a
//! `<!-- sample: NAME -->` line is what [`samples`] renders for NAME (the renderer the command
//! itself prints with, given the inputs the page describes). `REFRACT_BLESS=1` rewrites the
//! blocks; a marker without a sample, or a sample no page shows, fails.

use std::collections::BTreeMap;
use std::path::Path;

use refract_config::Pipeline;
use refract_mirror::{FlowState, FlowStatus};
use refract_mm2::Coarse;
use serde_json::json;

use super::root;
use super::snippets::markdown_files;
use crate::endpoints::flow_json;
use crate::mm2_cmds::render_translation;
use crate::status_cmd::render_live;

/// Every sample, by name.
fn samples() -> BTreeMap<&'static str, String> {
    let mm2 = |why: Coarse| format!("mm2: {}", why.as_str());
    let exact = || "exact".to_string();
    let mut out = BTreeMap::new();
    out.insert(
        "offsets-translate",
        render_translation(
            "billing",
            "b",
            "a",
            &[
                ("a.orders", 0, 40, exact()),
                ("a.orders", 1, 30, exact()),
                ("a.orders", 2, 512, mm2(Coarse::AheadOfSyncs)),
            ],
        ),
    );
    out.insert(
        "failover-translate",
        render_translation(
            "billing",
            "backup",
            "primary",
            &[
                ("primary.orders", 0, 470, exact()),
                ("primary.orders", 1, 312, exact()),
                ("primary.orders", 2, 512, mm2(Coarse::AheadOfSyncs)),
            ],
        ),
    );
    out.insert("first-mirror-bad-regex", first_mirror_bad_regex());
    out.insert("first-mirror-status", first_mirror_status());
    out
}

/// What `refract status` prints for the tutorial's flow while it mirrors: `/status` as the
/// endpoint builds it from the flow's status, asked twice a second apart.
fn first_mirror_status() -> String {
    let status = |sent: u64, offset_syncs: u64, heartbeats: u64| {
        let mut s = FlowStatus {
            state: FlowState::Running,
            records_sent: sent,
            offset_syncs,
            heartbeats,
            tasks: vec![0],
            ..FlowStatus::default()
        };
        s.routes.insert("orders".into(), "primary.orders".into());
        for p in 0..3 {
            s.partitions.push(format!("orders[{p}]"));
            s.lag
                .insert(format!("orders[{p}]"), if p == 1 { 12 } else { 0 });
        }
        json!({
            "healthy": true,
            "flows": [flow_json("primary->backup", &s)],
            "reloads": { "ok": 0, "rejected": 0, "last_error": null },
        })
    };
    let (text, healthy) = render_live(
        "127.0.0.1:9464",
        &status(4_870, 3, 41),
        &status(5_000, 3, 42),
    );
    assert!(healthy);
    text
}

/// What `refract check` says of the tutorial's pipeline with a second, broken topic pattern.
fn first_mirror_bad_regex() -> String {
    let page = std::fs::read_to_string(root().join("docs/src/getting-started/first-mirror.md"))
        .expect("first-mirror.md");
    let start = page.find("```toml\n").expect("the tutorial's pipeline") + "```toml\n".len();
    let end = start + page[start..].find("```").expect("its end");
    let text = page[start..end].replace(
        "topics = [\"orders\"]",
        "topics = [\"orders\", \"orders-[eu\"]",
    );
    let err = Pipeline::parse(Path::new("pipeline.toml"), &text)
        .expect_err("a broken pattern is refused");
    // As `main` prints an error.
    format!("error: {:#}\n", anyhow::Error::from(err))
}

/// A marked block: its file, the line of the marker, its indent, and the byte range of its
/// content in the file's text.
struct Marked {
    name: String,
    line: usize,
    indent: String,
    content: std::ops::Range<usize>,
}

/// The `<!-- sample: NAME -->` blocks of a Markdown text.
fn marked(text: &str) -> Vec<Marked> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let starts: Vec<usize> = lines
        .iter()
        .scan(0, |at, l| {
            let here = *at;
            *at += l.len();
            Some(here)
        })
        .collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        let Some(name) = l
            .strip_prefix("<!-- sample:")
            .and_then(|r| r.strip_suffix("-->"))
        else {
            i += 1;
            continue;
        };
        let name = name.trim().to_string();
        let mut j = i + 1;
        while j < lines.len() && lines[j].trim().is_empty() {
            j += 1;
        }
        let fence = lines.get(j).copied().unwrap_or_default();
        let indent: String = fence.chars().take_while(|c| *c == ' ').collect();
        assert!(
            fence.trim_start().starts_with("```"),
            "line {}: `<!-- sample: {name} -->` is not followed by a fenced block",
            i + 1
        );
        let close = (j + 1..lines.len())
            .find(|&k| lines[k].trim() == "```")
            .unwrap_or_else(|| panic!("line {}: the sample block is not closed", j + 1));
        out.push(Marked {
            name,
            line: i + 1,
            indent,
            content: starts[j + 1]..starts[close],
        });
        i = close + 1;
    }
    out
}

/// `text` with `indent` before each non-empty line.
fn indented(text: &str, indent: &str) -> String {
    text.split_inclusive('\n')
        .map(|l| {
            if l.trim().is_empty() {
                l.to_string()
            } else {
                format!("{indent}{l}")
            }
        })
        .collect()
}

#[test]
fn sample_outputs_are_what_the_code_prints() {
    let samples = samples();
    let bless = refract_testkit::golden::blessing();
    let mut shown: BTreeMap<&str, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for file in markdown_files() {
        let mut text = std::fs::read_to_string(&file).expect("read a page");
        let blocks = marked(&text);
        if blocks.is_empty() {
            continue;
        }
        let rel = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        // From the end, so that a rewrite keeps the earlier ranges valid.
        for block in blocks.iter().rev() {
            let Some((&name, sample)) = samples.get_key_value(block.name.as_str()) else {
                problems.push(format!(
                    "{rel}:{}: no sample named {}",
                    block.line, block.name
                ));
                continue;
            };
            *shown.entry(name).or_default() += 1;
            let want = indented(sample, &block.indent);
            if text[block.content.clone()] != want {
                if bless {
                    text.replace_range(block.content.clone(), &want);
                } else {
                    problems.push(format!(
                        "{rel}:{}: the sample {name} is not what the code prints; it prints:\n{want}",
                        block.line
                    ));
                }
            }
        }
        if bless {
            std::fs::write(&file, &text).expect("rewrite a page");
        }
    }
    for name in samples.keys() {
        if !shown.contains_key(name) {
            problems.push(format!("no page shows the sample {name}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n(REFRACT_BLESS=1 cargo test -p refract --bin refract sample_outputs rewrites the blocks)",
        problems.join("\n")
    );
}

#[test]
fn marked_blocks_are_found_with_their_indent() {
    let md = "a\n<!-- sample: one -->\n\n   ```text\n   x\n   y\n   ```\nb\n<!-- sample: two -->\n```\nz\n```\n";
    let found = marked(md);
    assert_eq!(found.len(), 2);
    assert_eq!((found[0].name.as_str(), found[0].line), ("one", 2));
    assert_eq!(found[0].indent, "   ");
    assert_eq!(&md[found[0].content.clone()], "   x\n   y\n");
    assert_eq!(&md[found[1].content.clone()], "z\n");
    assert_eq!(indented("x\n\ny\n", "  "), "  x\n\n  y\n");
}
