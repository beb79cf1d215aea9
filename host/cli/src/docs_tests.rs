//! The documentation against the code: `docs/src/reference/cli.md` is generated from the CLI's
//! own definition, and every example in `README.md` and `docs/**/*.md` is checked: each TOML
//! block (unless marked `toml,fragment`) parses as a pipeline, and each `refract …` line of a
//! shell block parses as a command line.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::Cli;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

// ---------------------------------------------------------------------------------------------
// The CLI reference.

fn styled(s: Option<&clap::builder::StyledStr>) -> String {
    s.map(|s| s.to_string()).unwrap_or_default()
}

/// A Markdown table cell: no pipes, no line breaks.
fn cell(s: &str) -> String {
    s.trim().replace('|', "\\|").replace('\n', " ")
}

/// How an argument is written: `--name <VALUE>`, `-s, --name`, `<NAME>`.
fn written(arg: &clap::Arg) -> String {
    let values: Vec<String> = arg
        .get_value_names()
        .map(|names| names.iter().map(|n| format!("<{n}>")).collect())
        .unwrap_or_else(|| vec![format!("<{}>", arg.get_id().as_str().to_uppercase())]);
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    let many = arg
        .get_num_args()
        .is_some_and(|n| n.max_values() > 1 || n.max_values() == usize::MAX);
    let mut value = values.join(" ");
    if many {
        value.push_str("...");
    }
    if arg.is_positional() {
        return value;
    }
    let mut names = Vec::new();
    if let Some(s) = arg.get_short() {
        names.push(format!("-{s}"));
    }
    if let Some(l) = arg.get_long() {
        names.push(format!("--{l}"));
    }
    let mut out = names.join(", ");
    if takes_value {
        out.push(' ');
        out.push_str(&value);
    }
    out
}

/// One command's section, then its subcommands', depth first.
fn render_command(cmd: &mut clap::Command, path: &str, out: &mut String) {
    let usage = cmd.render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    out.push_str(&format!("\n## `{path}`\n\n"));
    let about = styled(cmd.get_long_about().or(cmd.get_about()));
    if !about.is_empty() {
        out.push_str(&format!("{}\n\n", about.trim()));
    }
    out.push_str(&format!("```text\n{usage}\n```\n"));
    let top = !path.contains(' ');
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .filter(|a| top || !a.is_global_set())
        .collect();
    if !args.is_empty() {
        out.push_str("\n| Argument | Default | Description |\n|---|---|---|\n");
    }
    for arg in args {
        let mut description = styled(arg.get_long_help().or(arg.get_help()))
            .trim()
            .to_string();
        if !description.is_empty() && !description.ends_with('.') {
            description.push('.');
        }
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        if !values.is_empty() {
            description.push_str(&format!(" Values: {}.", values.join(", ")));
        }
        if arg.is_required_set() {
            description.push_str(" Required.");
        }
        if arg.is_global_set() {
            description.push_str(" Accepted by every subcommand.");
        }
        let flag = matches!(
            arg.get_action(),
            clap::ArgAction::SetTrue | clap::ArgAction::SetFalse | clap::ArgAction::Count
        );
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| format!("`{}`", v.to_string_lossy()))
            .collect();
        let default = if defaults.is_empty() || flag {
            String::new()
        } else {
            defaults.join(", ")
        };
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            cell(&written(arg)),
            cell(&default),
            cell(&description)
        ));
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        if let Some(sub) = cmd.find_subcommand_mut(&name) {
            render_command(sub, &format!("{path} {name}"), out);
        }
    }
}

/// The CLI reference in Markdown: every command, its usage and every argument.
fn render_cli_reference(header: &str) -> String {
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = String::from(header);
    out.push_str("# Command line\n\n");
    out.push_str(
        "Every `refract` command with its arguments, as `refract <command> --help` shows them. \
         Every command also takes `-h`/`--help`; `refract --version` prints the version.\n",
    );
    render_command(&mut cmd, "refract", &mut out);
    out
}

/// Compares a generated page with the committed `docs/src/reference/<name>`;
/// `REFRACT_BLESS=1` writes it instead.
fn assert_page(name: &str, test: &str, text: &str) {
    let path = root().join("docs/src/reference").join(name);
    if std::env::var_os("REFRACT_BLESS").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if text != committed {
        let at = text
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| text.lines().count().min(committed.lines().count()));
        panic!(
            "docs/src/reference/{name} is not what the code generates (first difference at line {}):\n  generated: {:?}\n  committed: {:?}\nregenerate it with `REFRACT_BLESS=1 cargo test -p refract --bin refract {test}` and commit it",
            at + 1,
            text.lines().nth(at),
            committed.lines().nth(at)
        );
    }
}

#[test]
fn cli_reference_is_current() {
    let test = "cli_reference_is_current";
    let header = format!("<!-- generated by the refract binary's {test} test; do not edit: REFRACT_BLESS=1 cargo test -p refract --bin refract {test} -->\n\n");
    assert_page("cli.md", test, &render_cli_reference(&header));
}

/// The plugin sandbox defaults the pipeline reference shows are the plugin runtime's: each
/// written explicitly gives the limits a plugin gets without it.
#[test]
fn documented_sandbox_defaults_are_the_runtimes() {
    use refract_config::keys::{KeyDefault, KEYS};
    let defaults = refract_plugin::PluginLimits::default();
    let mut checked = 0;
    for key in KEYS {
        let KeyDefault::Runtime(value) = key.default else {
            continue;
        };
        let (table, name) = key.path.rsplit_once('.').unwrap();
        let entry = match table {
            "flow.policy" => {
                format!("policy = {{ plugin = \"builtin:default\", {name} = {value} }}")
            }
            "flow.processors" => {
                format!("processors = [{{ plugin = \"builtin:filter\", {name} = {value} }}]")
            }
            other => panic!("{}: a runtime default in {other}", key.path),
        };
        let text = format!("[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n{entry}\n");
        let pipeline = refract_config::Pipeline::parse_offline(Path::new("p.toml"), &text)
            .unwrap_or_else(|e| panic!("{}: {e}", key.path));
        let flow = &pipeline.flows[0];
        let settings = match table {
            "flow.policy" => &flow.policy.limits,
            _ => &flow.processors[0].plugin.limits,
        };
        assert_ne!(
            *settings,
            refract_config::PluginLimitSettings::default(),
            "{} is not read",
            key.path
        );
        assert_eq!(
            defaults.with_settings(settings),
            defaults,
            "{}: the pipeline reference says the runtime's default is {value}",
            key.path
        );
        checked += 1;
    }
    assert_eq!(checked, 10);
}

// ---------------------------------------------------------------------------------------------
// The examples.

/// A fenced block: its info string, the line of its first content line, its lines.
struct Block {
    info: String,
    line: usize,
    text: String,
}

/// The fenced code blocks of a Markdown text (```` ``` ```` or `~~~`, indented or not).
fn blocks(markdown: &str) -> Vec<Block> {
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
fn markdown_files() -> Vec<PathBuf> {
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

/// Every Rust source file under `dir` (recursively), with its text.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            if let Ok(text) = std::fs::read_to_string(&path) {
                out.push((path, text));
            }
        }
    }
    out
}

/// The words that follow `prefix` in `text`, made of the characters `word` accepts (the prefix
/// included in each).
fn words_after(text: &str, prefix: &str, word: impl Fn(char) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        let len = after.find(|c: char| !word(c)).unwrap_or(after.len());
        out.push(format!("{prefix}{}", &after[..len]));
        rest = &after[len..];
    }
    out
}

/// The hand-written reference pages name what the code uses: every environment variable the
/// host reads, every `refract.*` header it writes, every HTTP endpoint it serves and every
/// field of `/status`. A new one without a line in its page fails here.
#[test]
fn hand_written_references_name_what_the_code_uses() {
    let root = root();
    let page = |name: &str| {
        std::fs::read_to_string(root.join("docs/src/reference").join(name))
            .unwrap_or_else(|e| panic!("docs/src/reference/{name}: {e}"))
    };
    // The code outside test modules (they sit at the end of each file).
    let host: Vec<(PathBuf, String)> = sources(&root.join("host"))
        .into_iter()
        .filter(|(path, _)| !path.ends_with("build.rs"))
        .map(|(path, text)| {
            let code = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .to_string();
            (path, code)
        })
        .collect();
    // `word` as a whole word of `text` (not part of a longer name).
    let mentions = |text: &str, word: &str| {
        let name = |c: char| c.is_ascii_alphanumeric() || c == '_';
        text.match_indices(word).any(|(at, _)| {
            !text[..at].ends_with(name) && !text[at + word.len()..].starts_with(name)
        })
    };
    let mut missing = Vec::new();

    // Environment variables: what `env::var("…")`/`var_os("…")` read, and every REFRACT_*
    // name (REFRACT_GUEST_DIR is set for the compiler by host/plugin/build.rs, and
    // REFRACT_PREFIX is a constant, not a variable).
    let environment = page("environment.md");
    let mut vars = std::collections::BTreeSet::new();
    for (_, text) in &host {
        let upper = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
        for call in ["env::var(\"", "env::var_os(\""] {
            for w in words_after(text, call, upper) {
                vars.insert(w[call.len()..].to_string());
            }
        }
        vars.extend(words_after(text, "REFRACT_", upper));
    }
    for var in vars {
        if ["REFRACT_GUEST_DIR", "REFRACT_PREFIX", "REFRACT_"].contains(&var.as_str()) {
            continue;
        }
        if !environment.contains(&format!("`{var}")) {
            missing.push(format!("environment.md: {var}"));
        }
    }

    // Headers: every `"refract.…"` name the host writes (not the dead-letter topic's default).
    let headers = page("headers.md");
    for (_, text) in &host {
        let name = |c: char| c.is_ascii_lowercase() || c == '.' || c == '_';
        for h in words_after(text, "\"refract.", name) {
            let h = h.trim_start_matches('"').trim_end_matches('.');
            if h != "refract" && !h.contains("dlq") && !headers.contains(&format!("`{h}`")) {
                missing.push(format!("headers.md: {h}"));
            }
        }
    }

    // HTTP: every path the endpoint routes, and every key of the `/status` document.
    let http = page("http.md");
    let routes = std::fs::read_to_string(root.join("host/telemetry/src/http/mod.rs"))
        .expect("read host/telemetry/src/http/mod.rs");
    let path_char = |c: char| c.is_ascii_lowercase() || c == '/';
    for p in words_after(&routes, "\"/", path_char) {
        let p = p.trim_start_matches('"');
        if p.len() > 1 && !http.contains(p) {
            missing.push(format!("http.md: {p}"));
        }
    }
    let status = std::fs::read_to_string(root.join("host/cli/src/endpoints.rs"))
        .expect("read host/cli/src/endpoints.rs");
    let key_char = |c: char| c.is_ascii_lowercase() || c == '_';
    let mut keys = std::collections::BTreeSet::new();
    for line in status.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix('"') {
            let key: String = rest.chars().take_while(|&c| key_char(c)).collect();
            if !key.is_empty() && rest[key.len()..].starts_with("\":") {
                keys.insert(key);
            }
        }
    }
    for w in words_after(&status, "{ \"", key_char) {
        keys.insert(w.trim_start_matches("{ \"").to_string());
    }
    assert!(
        keys.len() > 30,
        "only {} /status keys found: {keys:?}",
        keys.len()
    );
    for key in keys {
        if !mentions(&http, &key) {
            missing.push(format!("http.md: /status field {key}"));
        }
    }
    assert!(
        missing.is_empty(),
        "the reference does not name these (add a line to the page):\n{}",
        missing.join("\n")
    );
}

/// The built-in plugins' config sections of docs/src/reference/builtin-plugins.md are their
/// sources' `//!` documentation (the top of each plugin's `lib.rs`), a `toml` block there
/// shown as `toml,fragment`. `REFRACT_BLESS=1` rewrites the sections from the sources.
#[test]
fn builtin_plugin_docs_are_their_sources_docs() {
    let root = root();
    let path = root.join("docs/src/reference/builtin-plugins.md");
    let page = std::fs::read_to_string(&path).expect("read builtin-plugins.md");
    let sources = [
        (
            "### `builtin:filter`",
            "plugins/processors/filter/src/lib.rs",
        ),
        (
            "### `builtin:headers`",
            "plugins/processors/headers/src/lib.rs",
        ),
        (
            "### `builtin:json-mask`",
            "plugins/processors/json-mask/src/lib.rs",
        ),
        ("### `builtin:route`", "plugins/processors/route/src/lib.rs"),
        (
            "### `rename (plugins/rename, a file, not built in)`",
            "plugins/rename/src/lib.rs",
        ),
    ];
    let mut generated = page.clone();
    for (heading, source) in sources {
        let text =
            std::fs::read_to_string(root.join(source)).unwrap_or_else(|e| panic!("{source}: {e}"));
        let doc: Vec<String> = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| {
                let l = l.trim_start_matches("//!");
                let l = l.strip_prefix(' ').unwrap_or(l);
                if l == "```toml" {
                    "```toml,fragment".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect();
        assert!(!doc.is_empty(), "{source} has no //! documentation");
        let start = generated
            .find(heading)
            .unwrap_or_else(|| panic!("builtin-plugins.md has no `{heading}` section"));
        let body = start + heading.len();
        let end = generated[body..]
            .find("\n#")
            .map_or(generated.len(), |i| body + i + 1);
        let section = format!("{heading}\n\n{}\n\n", doc.join("\n").trim_end());
        let section = if end == generated.len() {
            section.trim_end().to_string() + "\n"
        } else {
            section
        };
        generated.replace_range(start..end, &section);
    }
    if std::env::var_os("REFRACT_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write builtin-plugins.md");
        return;
    }
    assert!(
        generated == page,
        "docs/src/reference/builtin-plugins.md differs from the plugins' //! documentation (first difference at line {}); regenerate it with REFRACT_BLESS=1 cargo test -p refract --bin refract builtin_plugin_docs",
        generated
            .lines()
            .zip(page.lines())
            .position(|(a, b)| a != b)
            .map_or(0, |i| i + 1)
    );
}
