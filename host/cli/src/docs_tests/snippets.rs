//! Every example in `README.md` and `docs/**/*.md` against the code: each TOML block (unless
//! marked `toml,fragment`) parses as a pipeline, and each `refract …` line of a shell block
//! parses as a command line of the CLI's own definition.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use super::root;
use crate::Cli;

/// A fenced block: its info string, the line of its first content line, its lines.
pub(super) struct Block {
    pub(super) info: String,
    pub(super) line: usize,
    pub(super) text: String,
}

/// The fenced code blocks of a Markdown text (```` ``` ```` or `~~~`, indented or not).
pub(super) fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, String, Block)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None => {
                for fence in ["```", "~~~"] {
                    if let Some(info) = trimmed.strip_prefix(fence) {
                        let extra = info
                            .chars()
                            .take_while(|c| *c == fence.as_bytes()[0] as char);
                        let fence = format!("{fence}{}", extra.collect::<String>());
                        open = Some((
                            fence.clone(),
                            indent,
                            String::new(),
                            Block {
                                info: trimmed[fence.len()..].trim().to_string(),
                                line: i + 2,
                                text: String::new(),
                            },
                        ));
                        break;
                    }
                }
            }
            Some((fence, fence_indent, _, block)) => {
                if trimmed.starts_with(fence.as_str()) && trimmed.trim_end() == fence.as_str() {
                    let (_, _, _, block) = open.take().unwrap();
                    out.push(block);
                    continue;
                }
                let strip = (*fence_indent).min(indent);
                block.text.push_str(&line[strip..]);
                block.text.push('\n');
            }
        }
    }
    out
}

/// `README.md` and every Markdown file under `docs/` (not the built book).
pub(super) fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "book") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let root = root();
    let mut files = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut files);
    files
}

/// mdBook's `{{#include path}}` (also `path:from:to` lines and `path:anchor`), relative to
/// the Markdown file's folder.
fn expand_includes(md: &Path, text: &str) -> Result<String, String> {
    let mut out = String::new();
    for line in text.lines() {
        let Some(spec) = line
            .trim()
            .strip_prefix("{{#include ")
            .and_then(|s| s.strip_suffix("}}"))
        else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let mut parts = spec.trim().splitn(2, ':');
        let file = parts.next().unwrap_or_default();
        let path = md.parent().unwrap_or(Path::new(".")).join(file);
        let content = std::fs::read_to_string(&path)
            .map_err(|e| format!("{{{{#include {spec}}}}}: {}: {e}", path.display()))?;
        let lines: Vec<&str> = content.lines().collect();
        let picked: Vec<&str> = match parts.next() {
            None => lines,
            Some(range)
                if range
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit() || c == ':') =>
            {
                let (from, to) = range.split_once(':').unwrap_or((range, range));
                let from = from.parse::<usize>().unwrap_or(1).max(1) - 1;
                let to = to.parse::<usize>().unwrap_or(lines.len()).min(lines.len());
                lines.get(from..to).unwrap_or_default().to_vec()
            }
            Some(anchor) => lines
                .iter()
                .skip_while(|l| !l.contains(&format!("ANCHOR: {anchor}")))
                .skip(1)
                .take_while(|l| !l.contains(&format!("ANCHOR_END: {anchor}")))
                .copied()
                .collect(),
        };
        for l in picked {
            if !l.contains("ANCHOR") {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    Ok(out)
}

/// Shell words of one command line: quotes and backslashes as a POSIX shell reads them, a
/// `#` comment dropped, and nothing after the first `|`, `;`, `&`, `>` or `<` outside quotes.
fn shell_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '#' if word.is_none() => break,
            // A placeholder such as `<pipeline.toml>` or `<SOURCE->TARGET>` is a word, not a
            // redirection: the documentation writes them for values the reader fills in.
            '<' if chars.peek().is_some_and(|n| n.is_ascii_alphabetic()) => {
                let w = word.get_or_insert_with(String::new);
                w.push('<');
                while let Some(n) = chars.next() {
                    w.push(n);
                    if n == '>' && chars.peek().is_none_or(|after| after.is_whitespace()) {
                        break;
                    }
                }
            }
            '|' | ';' | '&' | '>' | '<' => {
                // A redirection's file descriptor (`2>`) belongs to it, not to the command.
                if matches!(c, '>' | '<')
                    && word
                        .as_deref()
                        .is_some_and(|w| w.chars().all(|d| d.is_ascii_digit()))
                {
                    word = None;
                }
                break;
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("unterminated '".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err("unterminated \"".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("unterminated \"".into()),
                    }
                }
            }
            '\\' => {
                if let Some(c) = chars.next() {
                    word.get_or_insert_with(String::new).push(c);
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(w) = word {
        words.push(w);
    }
    Ok(words)
}

/// The `refract …` command lines of a shell block: (line, words). A line ending in `\`
/// continues on the next; a `$ ` prompt and leading `NAME=value` assignments are skipped.
fn command_lines(block: &Block) -> Vec<(usize, Result<Vec<String>, String>)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in block.text.lines().enumerate() {
        let (start, mut text) = match pending.take() {
            Some((start, text)) => (start, text),
            None => (block.line + i, String::new()),
        };
        let trimmed = line.trim_end();
        if let Some(head) = trimmed.strip_suffix('\\') {
            text.push_str(head);
            text.push(' ');
            pending = Some((start, text));
            continue;
        }
        text.push_str(trimmed);
        let command = text.trim_start();
        // In a console block only the prompted lines are commands; the rest is their output.
        let command = match command.strip_prefix("$ ") {
            Some(prompted) => prompted,
            None if block.info.starts_with("console") => continue,
            None => command,
        };
        let words = match shell_words(command) {
            Ok(words) => words,
            Err(e) => {
                if command.contains("refract ") {
                    out.push((start, Err(e)));
                }
                continue;
            }
        };
        let at = words
            .iter()
            .position(|w| !w.contains('=') || w.starts_with('-'))
            .unwrap_or(words.len());
        let words = &words[at..];
        match words.first().map(String::as_str) {
            // `refract …`, or the binary by its path (`./target/release/refract …`).
            Some(first) if first == "refract" || first.ends_with("/refract") => {
                let mut line = vec!["refract".to_string()];
                line.extend(words[1..].iter().cloned());
                out.push((start, Ok(line)));
            }
            // `cargo run … -p refract -- …`.
            Some("cargo") if words.get(1).map(String::as_str) == Some("run") => {
                let builds_refract = words.windows(2).any(|w| {
                    matches!(w[0].as_str(), "-p" | "--package" | "--bin") && w[1] == "refract"
                });
                if let (true, Some(dashes)) = (builds_refract, words.iter().position(|w| w == "--"))
                {
                    let mut line = vec!["refract".to_string()];
                    line.extend(words[dashes + 1..].iter().cloned());
                    out.push((start, Ok(line)));
                }
            }
            _ => {}
        }
    }
    out
}

/// Every example of every Markdown file, checked; the problems as `file:line: what`.
fn check_examples() -> (usize, usize, Vec<String>) {
    let root = root();
    let mut problems = Vec::new();
    let (mut pipelines, mut commands) = (0, 0);
    for file in markdown_files() {
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let Ok(text) = std::fs::read_to_string(&file) else {
            problems.push(format!("{shown}: cannot be read"));
            continue;
        };
        let (p, c, mut found) = check_markdown(&file, &shown, &text);
        pipelines += p;
        commands += c;
        problems.append(&mut found);
    }
    (pipelines, commands, problems)
}

/// The examples of one Markdown file (`file`, shown as `shown`), checked: how many pipelines
/// and command lines it has, and the problems as `file:line: what`.
fn check_markdown(file: &Path, shown: &str, text: &str) -> (usize, usize, Vec<String>) {
    let mut problems = Vec::new();
    let (mut pipelines, mut commands) = (0, 0);
    for block in blocks(text) {
        let info: Vec<&str> = block
            .info
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .collect();
        match info.first().copied() {
            Some("toml") if !info.contains(&"fragment") => {
                pipelines += 1;
                let toml = match expand_includes(file, &block.text) {
                    Ok(toml) => toml,
                    Err(e) => {
                        problems.push(format!("{shown}:{}: {e}", block.line));
                        continue;
                    }
                };
                if let Err(e) = refract_config::Pipeline::parse_offline(file, &toml) {
                    let line = block.line + e.line.map_or(0, |l| l - 1);
                    problems.push(format!(
                        "{shown}:{line}: this TOML block is not a valid pipeline (mark a part of one ```toml,fragment): {}{}",
                        if e.key.is_empty() { String::new() } else { format!("{}: ", e.key) },
                        e.message
                    ));
                }
            }
            Some("sh" | "bash" | "console" | "shell") => {
                for (line, words) in command_lines(&block) {
                    commands += 1;
                    let result =
                        words.and_then(|words| match Cli::command().try_get_matches_from(&words) {
                            Ok(_) => Ok(()),
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    clap::error::ErrorKind::DisplayHelp
                                        | clap::error::ErrorKind::DisplayVersion
                                ) =>
                            {
                                Ok(())
                            }
                            Err(e) => Err(e.to_string()),
                        });
                    if let Err(e) = result {
                        let first = e.lines().next().unwrap_or_default();
                        problems.push(format!(
                            "{shown}:{line}: this command line does not parse: {first}"
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    (pipelines, commands, problems)
}

#[test]
fn docs_examples_parse() {
    let (pipelines, commands, problems) = check_examples();
    assert!(
        pipelines > 0 && commands > 0,
        "no examples found ({pipelines} pipelines, {commands} command lines)"
    );
    assert!(
        problems.is_empty(),
        "{} of {pipelines} pipelines and {commands} command lines in README.md and docs/ do not parse:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A pipeline or a command line that does not parse is found and named by file and line.
#[test]
fn bad_examples_are_named_by_file_and_line() {
    let md = "# x\n\n```toml\n[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopicz = [\"x\"]\n```\n\n```toml,fragment\n[[flow]]\ndelivery = \"exactly-once\"\n```\n\n```sh\nrefract run p.toml \\\n  --drain-timeout 5s\nrefract check --nope p.toml   # a flag that does not exist\n```\n\n```console\n$ refract demo\nrefract demo: nothing to see\n```\n";
    let (pipelines, commands, problems) = check_markdown(Path::new("/x/y.md"), "y.md", md);
    assert_eq!((pipelines, commands), (1, 3), "{problems:?}");
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("y.md:11: this TOML block is not a valid pipeline")
            && problems[0].contains("unknown field `topicz`"),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("y.md:22: this command line does not parse")
            && problems[1].contains("--nope"),
        "{problems:?}"
    );
}

#[test]
fn shell_lines_split_as_a_shell_splits_them() {
    let words = |s: &str| shell_words(s).unwrap();
    assert_eq!(
        words(r#"refract run "my pipeline.toml" --clusters a b # comment"#),
        ["refract", "run", "my pipeline.toml", "--clusters", "a", "b"]
    );
    assert_eq!(
        words(r#"refract status --config 'p.toml' 2>&1 | jq ."#),
        ["refract", "status", "--config", "p.toml"]
    );
    assert_eq!(words(r#"refract a\ b "x\"y""#), ["refract", "a b", "x\"y"]);
    assert_eq!(
        words("refract verify --config <pipeline.toml> --flow <SOURCE->TARGET> < in"),
        [
            "refract",
            "verify",
            "--config",
            "<pipeline.toml>",
            "--flow",
            "<SOURCE->TARGET>"
        ]
    );
    let block = Block {
        info: "sh".into(),
        line: 10,
        text: "$ RUST_LOG=debug refract run \\\n    pipeline.toml \\\n    --drain-timeout 5s\necho refract\ncargo build\ncargo run --release -p refract -- demo\n./target/release/refract check p.toml\n".into(),
    };
    let lines: Vec<(usize, Vec<String>)> = command_lines(&block)
        .into_iter()
        .map(|(l, w)| (l, w.unwrap()))
        .collect();
    let line = |at: usize, words: &[&str]| (at, words.iter().map(|w| w.to_string()).collect());
    assert_eq!(
        lines,
        [
            line(
                10,
                &["refract", "run", "pipeline.toml", "--drain-timeout", "5s"]
            ),
            line(15, &["refract", "demo"]),
            line(16, &["refract", "check", "p.toml"]),
        ]
    );
    let md = "a\n```toml,fragment\nx = 1\n```\n  ```sh\n  refract demo\n  ```\n";
    let b = blocks(md);
    assert_eq!(b.len(), 2);
    assert_eq!((b[0].info.as_str(), b[0].line), ("toml,fragment", 3));
    assert_eq!((b[1].text.as_str(), b[1].line), ("refract demo\n", 6));
}
