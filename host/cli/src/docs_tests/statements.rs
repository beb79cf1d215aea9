//! Statements of the book held to the code or the scripts they describe: the prerequisites
//! `.ci/run` checks.

use super::root;

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The text of `page` from the heading `heading` to the next heading of the same level.
fn section<'a>(page: &'a str, heading: &str) -> &'a str {
    let level = heading.split(' ').next().unwrap_or_default();
    let start = page
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no section {heading:?}"));
    let rest = &page[start + heading.len() + 2..];
    let end = rest
        .find(&format!("\n{level} "))
        .map_or(rest.len(), |at| at + 1);
    &rest[..end]
}

/// `.ci/run` checks its prerequisites before anything else, and the Install page's
/// "Prerequisites" names every tool `.ci/check-prerequisites` checks (a tool the script gains
/// without a word on the page fails here).
#[test]
fn prerequisites_page_names_what_ci_checks() {
    let script = read(".ci/check-prerequisites");
    let list = script
        .split_once("PREREQUISITES=(\n")
        .and_then(|(_, rest)| rest.split_once("\n)"))
        .expect(".ci/check-prerequisites: the PREREQUISITES=( … ) list")
        .0;
    let tools: Vec<&str> = list
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"'))
        .filter_map(|l| l.split('|').next())
        .collect();
    for tool in [
        "java", "mvn", "go", "python3", "node", "npm", "cc", "make", "perl",
    ] {
        assert!(tools.contains(&tool), "{tool} is not checked: {tools:?}");
    }
    let page = read("docs/src/getting-started/install.md");
    let prerequisites = section(&page, "## Prerequisites");
    let missing: Vec<&&str> = tools
        .iter()
        .filter(|t| !prerequisites.contains(&format!("`{t}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/src/getting-started/install.md, Prerequisites, does not name {missing:?} \
         (checked by .ci/check-prerequisites)"
    );
    let run = read(".ci/run");
    let first = run
        .lines()
        .find(|l| l.starts_with("bash .ci/"))
        .expect(".ci/run runs .ci/ scripts");
    assert_eq!(
        first, "bash .ci/check-prerequisites",
        ".ci/run must check its prerequisites before its first other step"
    );
}
