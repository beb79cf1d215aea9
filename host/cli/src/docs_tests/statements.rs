//! Statements of the book held to the code or the scripts they describe: the prerequisites
//! `.ci/run` checks, the log lines the book quotes, the `transactional.id` rule, the tutorial's
//! terminals, the takeover grant of the ACL guide, the upgrade page's versions and state, and
//! the capacity page's figures.

use super::root;
use super::snippets::markdown_files;

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

/// The string literals of Rust source `text` (escapes resolved, `\` line continuations joined;
/// raw strings as written), skipping comments.
fn string_literals(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if text[i..].starts_with("//") {
            i = text[i..].find('\n').map_or(b.len(), |n| i + n);
            continue;
        }
        if text[i..].starts_with("'\"'") {
            i += 3;
            continue;
        }
        if text[i..].starts_with("'\\\"'") {
            i += 4;
            continue;
        }
        let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if b[i] == b'r' && !ident_before {
            let hashes = text[i + 1..].bytes().take_while(|&c| c == b'#').count();
            if b.get(i + 1 + hashes) == Some(&b'"') {
                let start = i + 2 + hashes;
                let end = format!("\"{}", "#".repeat(hashes));
                let Some(len) = text[start..].find(&end) else {
                    break;
                };
                out.push(text[start..start + len].to_string());
                i = start + len + end.len();
                continue;
            }
        }
        if b[i] != b'"' {
            i += 1;
            continue;
        }
        let mut s = String::new();
        let mut chars = text[i + 1..].char_indices();
        let mut end = b.len();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => {
                    end = i + 1 + at + 1;
                    break;
                }
                '\\' => match chars.next() {
                    Some((_, '\n')) => {
                        // A continuation: the next line's leading whitespace is dropped.
                        let rest = chars.as_str();
                        let skip = rest.len() - rest.trim_start().len();
                        for _ in 0..rest[..skip].chars().count() {
                            chars.next();
                        }
                    }
                    Some((_, 'n')) => s.push('\n'),
                    Some((_, 't')) => s.push('\t'),
                    Some((_, c)) => s.push(c),
                    None => {}
                },
                c => s.push(c),
            }
        }
        out.push(s);
        i = end;
    }
    out
}

/// A token of a format string or of a quote in the book: a character, a `{…}` placeholder of
/// the format (any text of the quote), or an ellipsis of the quote (any text of the format).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    Char(char),
    Placeholder,
    Ellipsis,
}

/// `text` as tokens, runs of whitespace as one space; `{…}` as placeholders (`{{`, `}}` as
/// braces) when `format`, `…` and `...` as ellipses otherwise.
fn tokens(text: &str, format: bool) -> Vec<Token> {
    let mut out = Vec::new();
    let text = if format {
        text.to_string()
    } else {
        text.replace("...", "…")
    };
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let token = match c {
            '{' if format && chars.peek() == Some(&'{') => {
                chars.next();
                Token::Char('{')
            }
            '}' if format && chars.peek() == Some(&'}') => {
                chars.next();
                Token::Char('}')
            }
            '{' if format => {
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                Token::Placeholder
            }
            '…' if !format => Token::Ellipsis,
            c if c.is_whitespace() => Token::Char(' '),
            c => Token::Char(c),
        };
        if token == Token::Char(' ') && out.last() == Some(&Token::Char(' ')) {
            continue;
        }
        out.push(token);
    }
    out
}

/// Whether `quote` is an instance of `format`: each placeholder stands for some text of the
/// quote, each ellipsis of the quote for some text of the format; spaces are not significant.
fn quotes(format: &[Token], quote: &[Token]) -> bool {
    let (f, q) = (format.len(), quote.len());
    // can[i][j]: format[i..] matches quote[j..]
    let mut can = vec![vec![false; q + 1]; f + 1];
    for i in (0..=f).rev() {
        for j in (0..=q).rev() {
            can[i][j] = if i == f && j == q {
                true
            } else if j < q && quote[j] == Token::Ellipsis {
                can[i][j + 1] || (i < f && can[i + 1][j])
            } else if i < f && format[i] == Token::Placeholder {
                j < q && (can[i + 1][j + 1] || can[i][j + 1])
            } else {
                // A space on either side may be missing on the other.
                (i < f && format[i] == Token::Char(' ') && can[i + 1][j])
                    || (j < q && quote[j] == Token::Char(' ') && can[i][j + 1])
                    || (i < f && j < q && format[i] == quote[j] && can[i + 1][j + 1])
            };
        }
    }
    can[0][0]
}

/// The inline code spans of a Markdown text outside its fenced blocks.
fn code_spans(markdown: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            prose.push('\n');
            continue;
        }
        if !fenced {
            prose.push_str(line);
        }
        prose.push('\n');
    }
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Log lines and messages the book quotes are what the code writes. A quote is taken for one
/// when it starts like a message of the host's code (the message's first 30 characters, or all
/// of at least 20, with three spaces: words, not a setting; after a leading placeholder such as
/// `{e:#}; ` if any):
/// then it must be that message, with its placeholders filled in (`N`, `orders[0]=100`, …) and
/// `…` for any text left out, a cut end included. A message reworded in the code without its
/// quote, or a quote reworded from memory, fails here.
#[test]
fn quoted_log_lines_are_what_the_code_logs() {
    fn walk(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if name != "docs_tests" {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                let shown = path
                    .strip_prefix(root())
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                for s in string_literals(code) {
                    out.push((shown.clone(), s));
                }
            }
        }
    }
    let mut literals = Vec::new();
    walk(&root().join("host"), &mut literals);
    // Each message with the words a quote of it starts with.
    let messages: Vec<(String, Vec<Token>, String)> = literals
        .into_iter()
        .filter_map(|(file, s)| {
            let tokens = tokens(&s, true);
            let lead: String = tokens
                .iter()
                .skip_while(|t| **t == Token::Placeholder)
                .map_while(|t| match t {
                    Token::Char(c) => Some(*c),
                    _ => None,
                })
                .collect();
            let lead = lead
                .trim_start_matches([';', ':', ',', '.', ' '])
                .to_string();
            let lead: String = lead.chars().take(30).collect();
            (lead.chars().count() >= 20 && lead.matches(' ').count() >= 3)
                .then_some((file, tokens, lead))
        })
        .collect();
    assert!(
        messages.len() > 200,
        "only {} messages found",
        messages.len()
    );
    let mut checked = 0;
    let mut wrong = Vec::new();
    for md in markdown_files() {
        let text = std::fs::read_to_string(&md).expect("read a page");
        let page = md.strip_prefix(root()).unwrap_or(&md).display().to_string();
        for span in code_spans(&text) {
            let body = span.trim_start_matches(['…', '.', ';', ':', ',', ' ']);
            let like: Vec<&(String, Vec<Token>, String)> = messages
                .iter()
                .filter(|(_, _, lead)| body.starts_with(lead.as_str()))
                .collect();
            if like.is_empty() {
                continue;
            }
            checked += 1;
            let quote = tokens(&span, false);
            if !like.iter().any(|(_, format, _)| quotes(format, &quote)) {
                wrong.push(format!(
                    "{page}: `{span}`\n    is not what {} writes (… for text left out)",
                    like.iter()
                        .map(|(file, _, _)| file.as_str())
                        .collect::<Vec<_>>()
                        .join(" or ")
                ));
            }
        }
    }
    assert!(checked >= 10, "only {checked} quoted messages found");
    assert!(
        wrong.is_empty(),
        "quoted messages the code does not write:\n{}",
        wrong.join("\n")
    );
}

/// The units of a Markdown text a statement lives in: paragraphs, and each item of a list.
fn statements(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let item = trimmed.starts_with("- ")
            || trimmed
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if trimmed.is_empty() || item {
            if !current.trim().is_empty() {
                out.push(std::mem::take(&mut current));
            }
            current.clear();
        }
        current.push_str(line);
        current.push('\n');
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

/// Every statement of the book that names an exactly-once `transactional.id` form names both
/// forms `FlowId::transactional_id` gives and when each applies: one id for a flow of one task,
/// one per task whenever `tasks` > 1 (in one process or several; the book once said "in cluster
/// mode"). A `--transactional-id` grant comes with the prefixed form several tasks need.
#[test]
fn transactional_id_rule_is_the_code_rule() {
    let id = refract_config::FlowId::new("<source>", "<target>");
    let one = id.transactional_id(0, 1);
    let per_task = id.transactional_id(7, 8).replace("-7", "-<task>");
    assert_eq!(
        (one.as_str(), per_task.as_str()),
        (
            "refract-<source>-<target>",
            "refract-<source>-<target>-<task>"
        ),
        "the rule changed: say how in the book, then here"
    );
    let (one, per_task) = (format!("`{one}`"), format!("`{per_task}`"));
    let mut named = 0;
    let mut wrong = Vec::new();
    for md in markdown_files() {
        let text = std::fs::read_to_string(&md).expect("read a page");
        let page = md.strip_prefix(root()).unwrap_or(&md).display().to_string();
        for statement in statements(&text) {
            let flat = statement.split_whitespace().collect::<Vec<_>>().join(" ");
            let about_ids = flat.contains("transactional") && flat.contains("refract-<source>");
            if about_ids {
                named += 1;
                let when = flat.contains("`tasks` > 1") || flat.contains("of one task");
                if !(flat.contains(&one) && flat.contains(&per_task) && when) {
                    wrong.push(format!(
                        "{page}: names a transactional.id without both forms ({one} for a flow \
                         of one task, {per_task} whenever `tasks` > 1):\n    {flat}"
                    ));
                }
            }
            if flat.contains("--transactional-id") && !flat.contains("prefixed") {
                wrong.push(format!(
                    "{page}: a --transactional-id grant without the prefixed form a flow of \
                     several tasks needs:\n    {flat}"
                ));
            }
        }
    }
    assert!(
        named >= 2,
        "only {named} statements name a transactional.id"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The tutorial works in every terminal it uses: its first shell block writes an environment
/// file that puts the release build's `refract` on `PATH` (where the Install page's build puts
/// it) and sets `LIBS`, and every later block that runs `refract` or uses `$LIBS` starts by
/// reading that file. It once set `LIBS` in one terminal only and never put `refract` on `PATH`.
#[test]
fn tutorial_blocks_work_in_a_new_terminal() {
    const ENV_FILE: &str = "/tmp/refract-tutorial/env";
    let page = read("docs/src/getting-started/first-mirror.md");
    let shell: Vec<super::snippets::Block> = super::snippets::blocks(&page)
        .into_iter()
        .filter(|b| b.info == "sh")
        .collect();
    let (first, rest) = shell.split_first().expect("the tutorial's shell blocks");
    let env = first
        .text
        .split_once(&format!("cat > {ENV_FILE} <<ENV\n"))
        .and_then(|(_, rest)| rest.split_once("\nENV\n"))
        .unwrap_or_else(|| panic!("the first shell block writes {ENV_FILE} (cat > … <<ENV)"))
        .0;
    let path = env
        .lines()
        .find(|l| l.starts_with("export PATH="))
        .expect("the environment file sets PATH");
    let install = read("docs/src/getting-started/install.md");
    assert!(
        path.contains("$PWD/target/release:") && install.contains("target/release/refract"),
        "the environment file puts the release build on PATH, where Install builds it: {path}"
    );
    assert!(
        env.lines().any(|l| l.starts_with("export LIBS=")),
        "the environment file sets LIBS"
    );
    let source = format!(". {ENV_FILE}");
    let mut later = 0;
    for block in rest {
        let uses = block.text.contains("$LIBS")
            || block
                .text
                .lines()
                .any(|l| l.trim_start().starts_with("refract "));
        if uses {
            later += 1;
            assert_eq!(
                block.text.lines().next(),
                Some(source.as_str()),
                "first-mirror.md line {}: a block that runs refract or uses $LIBS starts with \
                 `{source}`, so that it works in a new terminal",
                block.line
            );
        }
    }
    assert!(
        later >= 5,
        "only {later} tutorial blocks run refract or use $LIBS"
    );
}

/// The ACL guide's minimal set grants what a fresh flow needs (`tests/doctor.rs` grants its
/// first block on real brokers); a takeover from MirrorMaker 2 also reads MM2's Connect offsets
/// topic on the target, which `check --connect` does not list for an at-least-once flow. The
/// section gives that grant too, on the target, for the topic the flow's `mm2_offsets_topic`
/// defaults to, in a block of its own after the tested one.
#[test]
fn acl_guide_grants_the_takeover_read() {
    let pipeline = refract_config::Pipeline::parse(
        std::path::Path::new("pipeline.toml"),
        "[clusters.a]\nbootstrap = \"kafka-a:9092\"\n[clusters.b]\nbootstrap = \"kafka-b:9092\"\n\n\
         [[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"orders.*\"]\n",
    )
    .expect("the guide's flow");
    let topic = &pipeline.flows[0].mm2_offsets_topic;
    let page = read("docs/src/guides/check-connect.md");
    let section = section(&page, "## Permissions: the minimal ACL set");
    let blocks: Vec<&str> = section
        .split("```text\n")
        .skip(1)
        .filter_map(|b| b.split_once("```").map(|(b, _)| b))
        .collect();
    assert!(!blocks.is_empty(), "the section's command blocks");
    let grants = |block: &str| {
        block.replace("\\\n", " ").lines().any(|l| {
            let words: Vec<&str> = l
                .split(" # ")
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            words
                .windows(2)
                .any(|w| w == ["--bootstrap-server", "kafka-b:9092"])
                && words.windows(2).any(|w| w == ["--operation", "Read"])
                && words.windows(2).any(|w| w == ["--topic", topic.as_str()])
        })
    };
    assert!(
        blocks[1..].iter().any(|b| grants(b)),
        "docs/src/guides/check-connect.md, minimal ACL set: no block after the tested one grants \
         Read on {topic} on the target b (a takeover from MirrorMaker 2 reads it)"
    );
}

/// Units a figure is checked with: a number followed by one of these on the capacity page must
/// be followed by it in a page it cites too.
const UNITS: &[&str] = &[
    "MiB",
    "KiB",
    "GiB",
    "MB",
    "KB",
    "ms",
    "s",
    "%",
    "cores",
    "µs",
    "records/s",
    "B",
];

/// Markdown text as words: emphasis and code marks dropped, whitespace runs as one space.
fn plain(text: &str) -> String {
    text.replace(['*', '`'], "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The numbers of a text: runs of digits with the `,` and `.` inside them (`126949`, `10,000`,
/// `0.84`), not a trailing separator; each with the unit of [`UNITS`] that follows it, if any.
fn numbers(text: &str) -> Vec<(String, Option<&'static str>)> {
    let text = plain(text);
    let mut out = Vec::new();
    let mut current = String::new();
    for (at, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        if c.is_ascii_digit() || (!current.is_empty() && (c == ',' || c == '.')) {
            current.push(c);
        } else if !current.is_empty() {
            let n = current.trim_end_matches([',', '.']).to_string();
            let rest = text[at - (current.len() - n.len())..].trim_start_matches(' ');
            let word: &str = rest
                .split([' ', ',', ';', ')', '('])
                .next()
                .unwrap_or_default()
                .trim_end_matches('.');
            let unit = UNITS.iter().copied().find(|u| *u == word);
            out.push((n, unit));
            current.clear();
        }
    }
    out
}

/// The numbers a page states, each with its unit: in prose the unit that follows the number;
/// in a table, a unit in the cell, else the units its column's header names (in order when the
/// header names as many as the cell has numbers, else the header's one unit for each).
fn stated(text: &str) -> Vec<(String, Option<&'static str>)> {
    let mut out = Vec::new();
    let mut header: Option<Vec<Vec<&'static str>>> = None;
    // Prose lines are read together: a unit may follow its number on the next line.
    let mut prose = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if !trimmed.starts_with('|') {
            header = None;
            prose.push_str(line);
            prose.push('\n');
            continue;
        }
        out.extend(numbers(&std::mem::take(&mut prose)));
        let cells: Vec<&str> = trimmed.trim_matches('|').split('|').collect();
        let Some(units) = &header else {
            header = Some(
                cells
                    .iter()
                    .map(|c| {
                        plain(c)
                            .split([' ', ','])
                            .filter_map(|w| UNITS.iter().copied().find(|u| *u == w))
                            .collect()
                    })
                    .collect(),
            );
            continue;
        };
        for (cell, units) in cells.iter().zip(units) {
            let found = numbers(cell);
            let count = found.len();
            for (i, (n, unit)) in found.into_iter().enumerate() {
                let from_header = if units.len() == count {
                    units.get(i).copied()
                } else if units.len() == 1 {
                    units.first().copied()
                } else {
                    None
                };
                out.push((n, unit.or(from_header)));
            }
        }
    }
    out.extend(numbers(&prose));
    out
}

/// Every `number unit` [`stated`] finds in a page.
fn figures_with_units(text: &str) -> std::collections::HashSet<String> {
    stated(text)
        .into_iter()
        .filter_map(|(n, u)| u.map(|u| format!("{n} {u}")))
        .collect()
}

/// The capacity-planning page invents no number: each paragraph, list item and table (a table
/// with no link of its own takes the paragraph's before it) that has a number cites where it was
/// measured, a book page linked or a repository file named in backquotes, and every number in
/// it is written in one of those. A figure re-measured on its page and not here, or a number
/// made up here, fails.
#[test]
fn capacity_figures_are_the_measured_ones() {
    let page = read("docs/src/capacity.md");
    let docs = root().join("docs/src");
    // Blocks separated by blank lines, list items apart; a table is one block.
    let mut units: Vec<String> = Vec::new();
    let mut fenced = false;
    for block in page.split("\n\n") {
        if block.trim_start().starts_with("```") {
            fenced = !block.trim_end().ends_with("```") || block.trim().len() <= 3;
            continue;
        }
        if fenced || block.trim_start().starts_with('#') {
            continue;
        }
        if block.trim_start().starts_with('|') {
            units.push(block.to_string());
        } else {
            units.extend(statements(block));
        }
    }
    let mut previous: Vec<String> = Vec::new();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for unit in units {
        // The pages it links to and the files it names.
        let mut cited: Vec<String> = Vec::new();
        let mut prose = unit.clone();
        for part in unit.split("](").skip(1) {
            let target = part.split(')').next().unwrap_or_default();
            let file = target.split('#').next().unwrap_or_default();
            if !file.is_empty() {
                cited.push(
                    std::fs::read_to_string(docs.join(file))
                        .unwrap_or_else(|e| panic!("capacity.md links to {file}: {e}")),
                );
            }
            prose = prose.replace(&format!("]({target})"), "]");
        }
        for code in unit.split('`').skip(1).step_by(2) {
            if code.ends_with(".md") || code.ends_with(".rs") {
                if let Ok(text) = std::fs::read_to_string(root().join(code)) {
                    cited.push(text);
                }
            }
        }
        let table = unit.trim_start().starts_with('|');
        if table && cited.is_empty() {
            cited.clone_from(&previous);
        }
        let figures = stated(&prose);
        if figures.is_empty() {
            continue;
        }
        let flat = unit.split_whitespace().collect::<Vec<_>>().join(" ");
        if cited.is_empty() {
            wrong.push(format!("cites nothing: {flat}"));
            continue;
        }
        checked += 1;
        let with_units: Vec<std::collections::HashSet<String>> =
            cited.iter().map(|t| figures_with_units(t)).collect();
        for (n, unit) in figures {
            let found = match unit {
                Some(unit) => with_units
                    .iter()
                    .any(|f| f.contains(&format!("{n} {unit}"))),
                None => cited
                    .iter()
                    .any(|text| numbers(text).iter().any(|(m, _)| *m == n)),
            };
            if !found {
                let what = unit.map_or(n.clone(), |u| format!("{n} {u}"));
                wrong.push(format!("{what} is in no page it cites: {flat}"));
            }
        }
        if !table {
            previous = cited;
        }
    }
    assert!(checked >= 15, "only {checked} statements with figures");
    assert!(
        wrong.is_empty(),
        "docs/src/capacity.md:\n{}",
        wrong.join("\n")
    );
}

/// The upgrade page against the code: the `refract:plugin` versions it says this release runs
/// are the host's `SUPPORTED_VERSION` (and the package `wit/plugin.wit` declares), its sample of
/// the refusal is the error the host writes, it names every piece of state `names.rs` formats
/// that a new version resumes from, and every series the metrics reference marks deprecated.
#[test]
fn upgrade_page_states_what_the_code_keeps() {
    let page = read("docs/src/guides/upgrade.md");
    let flat = plain(&page);
    let runtime = read("host/plugin/src/runtime.rs");
    let supported = runtime
        .split_once("SUPPORTED_VERSION: (u64, u64) = (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .expect("host/plugin/src/runtime.rs: SUPPORTED_VERSION")
        .0
        .replace(' ', "");
    let (major, minor) = supported.split_once(',').expect("(major, minor)");
    let wit = read("wit/plugin.wit");
    assert!(
        wit.contains(&format!("package refract:plugin@{major}.{minor}.")),
        "wit/plugin.wit's package is not refract:plugin@{major}.{minor}.x"
    );
    let mut wrong = Vec::new();
    let rule = format!("refract:plugin@{major}.{minor}.x");
    if !flat.contains(&rule) {
        wrong.push(format!("does not say this release runs {rule}"));
    }
    let errors = read("host/plugin/src/error.rs");
    let refusal = string_literals(&errors)
        .into_iter()
        .find(|s| s.contains(": built for refract:plugin@"))
        .expect("host/plugin/src/error.rs: the IncompatibleVersion message");
    let sample = page
        .lines()
        .find(|l| l.contains(": built for refract:plugin@"))
        .unwrap_or_default();
    if !quotes(&tokens(&refusal, true), &tokens(sample, false)) {
        wrong.push(format!(
            "its sample refusal `{sample}` is not what host/plugin/src/error.rs writes: {refusal}"
        ));
    }
    let id = refract_config::FlowId::new("<source>", "<target>");
    let names = [
        id.progress_group(),
        id.membership_group(),
        id.tasks_topic(),
        id.transactional_id(0, 1),
        id.transactional_id(7, 8).replace("-7", "-<task>"),
        id.solo_group(&[], &[])
            .rsplit_once('-')
            .map(|(prefix, _)| format!("{prefix}-<hash>"))
            .unwrap_or_default(),
        refract_config::names::dead_letter_topic("<source>"),
        refract_config::names::mm2_offsets_topic("<source>"),
    ];
    for name in names {
        if !flat.contains(name.as_str()) {
            wrong.push(format!("does not name {name}"));
        }
    }
    let metrics = read("docs/src/reference/metrics.md");
    for row in metrics.lines().filter(|l| l.contains("| Deprecated")) {
        let series = row.split('`').nth(1).unwrap_or_default();
        if !flat.contains(series) {
            wrong.push(format!("does not name the deprecated series {series}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/src/guides/upgrade.md:\n{}",
        wrong.join("\n")
    );
}
