//! The hand-written reference pages against the code: every environment variable the host
//! reads (and the build, the tests, the benchmark and the scripts), every `refract.*` header it
//! writes, every HTTP path it routes and every `/status` field is named in its page.

use std::path::{Path, PathBuf};

use super::root;

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

/// The exit codes page has a row for every command: each leaf subcommand's path (`check`,
/// `plugin test`, `offsets translate`) is named in the first cell of one of its table rows.
#[test]
fn exit_codes_name_every_command() {
    use clap::CommandFactory;
    fn leaves(cmd: &clap::Command, prefix: &str, out: &mut Vec<String>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = format!("{prefix}{}", sub.get_name());
            if sub.has_subcommands() {
                leaves(sub, &format!("{path} "), out);
            } else {
                out.push(path);
            }
        }
    }
    let mut commands = Vec::new();
    leaves(&crate::Cli::command(), "", &mut commands);
    assert!(commands.len() >= 10, "{commands:?}");
    let page = std::fs::read_to_string(root().join("docs/src/reference/exit-codes.md"))
        .expect("exit-codes.md");
    let first_cells: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" | ").next())
        .collect();
    let missing: Vec<&String> = commands
        .iter()
        .filter(|c| {
            !first_cells.iter().any(|cell| {
                cell.split('`')
                    .skip(1)
                    .step_by(2)
                    .any(|code| code.trim_start_matches("refract ").starts_with(c.as_str()))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/src/reference/exit-codes.md has no row for: {missing:?}"
    );
}

/// Every variable the build, the tests, the benchmark and the scripts read is on the environment
/// page, and every `REFRACT_*` name the page lists is read somewhere: each `REFRACT_*` name in
/// the Rust of `host/` (build scripts and tests included), `testkit/`, `bench/` and `tests/`;
/// what `env::var`/`var_os` read there (not Cargo's own, `PATH` or `HOME`); and each
/// `$REFRACT_…`/`${REFRACT_…}` of the scripts in `.ci/`, `bench/` and every `*.sh` of the
/// repository (the plugin templates' `build.sh` included).
#[test]
fn environment_page_names_every_variable_build_and_tests_read() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                // The docs tests name variables too: they read none.
                if !["target", "node_modules", ".git", "docs_tests"].contains(&name) {
                    walk(&path, out);
                }
            } else {
                out.push(path);
            }
        }
    }
    let root = root();
    let upper = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
    // name → the first file that reads it
    let mut read: std::collections::BTreeMap<String, String> = Default::default();
    let mut note = |name: String, path: &Path| {
        let shown = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        read.entry(name).or_insert(shown);
    };
    for dir in ["host", "testkit", "bench", "tests"] {
        let mut files = Vec::new();
        walk(&root.join(dir), &mut files);
        for path in files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for w in words_after(&text, "REFRACT_", upper) {
                note(w, path);
            }
            for call in ["env::var(\"", "env::var_os(\""] {
                for w in words_after(&text, call, upper) {
                    note(w[call.len()..].to_string(), path);
                }
            }
        }
    }
    let mut scripts = Vec::new();
    walk(&root, &mut scripts);
    let in_dir = |p: &Path, dir: &str| p.starts_with(root.join(dir));
    for path in scripts.iter().filter(|p| {
        let ext = p.extension().and_then(|e| e.to_str());
        ((in_dir(p, ".ci") || in_dir(p, "bench")) && ext.is_none()) || ext == Some("sh")
    }) {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for prefix in ["$REFRACT_", "${REFRACT_"] {
            for w in words_after(&text, prefix, upper) {
                note(w.trim_start_matches(['$', '{']).to_string(), path);
            }
        }
    }
    // Not variables anyone sets: the folder host/plugin/build.rs hands the compiler
    // (`cargo:rustc-env`, read with `env!`), a constant's name, and the bare prefix.
    let not_variables = ["REFRACT_GUEST_DIR", "REFRACT_PREFIX", "REFRACT_"];
    // Cargo's, the shell's and the system's own.
    let standard = |v: &str| {
        v.starts_with("CARGO") || ["RUSTC", "PATH", "HOME", "OUT_DIR", "TMPDIR"].contains(&v)
    };
    let page = std::fs::read_to_string(root.join("docs/src/reference/environment.md"))
        .expect("docs/src/reference/environment.md");
    let missing: Vec<String> = read
        .iter()
        .filter(|(v, _)| !not_variables.contains(&v.as_str()) && !standard(v))
        .filter(|(v, _)| !page.contains(&format!("`{v}")))
        .map(|(v, file)| format!("{v} (read in {file})"))
        .collect();
    assert!(
        read.contains_key("REFRACT_KAFKA_LIBS") && read.contains_key("REFRACT_KAFKA_HOME"),
        "the scan found too little: {read:?}"
    );
    assert!(
        missing.is_empty(),
        "docs/src/reference/environment.md does not name these (add a row):\n{}",
        missing.join("\n")
    );
    let stale: Vec<String> = words_after(&page, "REFRACT_", upper)
        .into_iter()
        .filter(|w| w != "REFRACT_" && !read.contains_key(w))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/src/reference/environment.md names variables nothing reads: {stale:?}"
    );
}
