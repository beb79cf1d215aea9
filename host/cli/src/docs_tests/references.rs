//! Generated references: `docs/src/reference/cli.md` from the CLI's own definition (clap), and
//! the built-in plugins' config sections of `builtin-plugins.md` from each plugin's `//!`
//! documentation; and the sandbox defaults the pipeline reference states, against the plugin
//! runtime's.

use std::path::Path;

use clap::CommandFactory;

use super::{assert_page, root};
use crate::Cli;

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
    assert_eq!(checked, 16);
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
    refract_testkit::golden::assert_golden(
        &path,
        "docs/src/reference/builtin-plugins.md",
        &generated,
        "REFRACT_BLESS=1 cargo test -p refract --bin refract builtin_plugin_docs",
    );
}
