//! `refract plugin new`: writes a ready plugin project — source with the kind's default
//! behaviour and one place to change, a build script, sample input for `refract plugin test`
//! and a README — for a policy, filter or transform in Rust, Python, JavaScript or C, or a policy
//! in Go.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The plugin kinds a project can be made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// A replication policy: names remote topics (world policy-plugin).
    Policy,
    /// A record filter: keeps or drops records (world filter-plugin).
    Filter,
    /// A record transform: rewrites, drops, fans out or re-routes records (world transform-plugin).
    Transform,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Policy => "policy",
            Kind::Filter => "filter",
            Kind::Transform => "transform",
        }
    }

    fn world(self) -> &'static str {
        match self {
            Kind::Policy => "policy-plugin",
            Kind::Filter => "filter-plugin",
            Kind::Transform => "transform-plugin",
        }
    }

    /// The sample input file and how `plugin test` is run on it.
    fn sample(self) -> (&'static str, &'static str) {
        match self {
            Kind::Policy => ("topics.txt", include_str!("../templates/common/topics.txt")),
            _ => (
                "records.jsonl",
                include_str!("../templates/common/records.jsonl"),
            ),
        }
    }
}

/// The languages a project can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust with refract's guest SDK (plugins/sdk).
    Rust,
    /// Python with componentize-py and sdk/python/refract_plugin.py.
    Python,
    /// JavaScript with componentize-js and sdk/javascript/refract-plugin.js.
    Javascript,
    /// C with clang, wasi-libc, sdk/c/refract_plugin.h and the committed bindings.
    C,
    /// Go: standard Go >= 1.24, a wasip1 reactor, the policy world's canonical ABI written in Go
    /// (abi.go); policy only.
    Go,
}

impl Lang {
    fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Javascript => "javascript",
            Lang::C => "c",
            Lang::Go => "go",
        }
    }

    /// Whether this language can make a `kind` project; if not, why.
    fn supports(self, kind: Kind) -> Result<()> {
        if self == Lang::Go && kind != Kind::Policy {
            bail!(
                "Go projects can be policies only: abi.go covers the policy world; write {}s in Rust, Python, JavaScript or C",
                kind.name()
            );
        }
        Ok(())
    }
}

/// What `refract plugin new` was asked to do.
#[derive(clap::Args)]
pub struct PluginNew {
    /// What the plugin does.
    #[arg(long, value_enum)]
    pub kind: Kind,
    /// The language it is written in (Go: policies only).
    #[arg(long, value_enum)]
    pub lang: Lang,
    /// The plugin's name (`info().name`, the crate or file name); default: DIR's last component.
    #[arg(long)]
    pub name: Option<String>,
    /// The refract checkout whose WIT and guest SDKs the project builds against; default:
    /// `$REFRACT_HOME`, else the checkout this refract was built from.
    #[arg(long)]
    pub sdk: Option<PathBuf>,
    /// The folder to create (it must not exist, or be empty).
    pub dir: PathBuf,
}

/// One file of a project.
struct Template {
    path: String,
    text: Cow<'static, str>,
    executable: bool,
}

fn file(path: impl Into<String>, text: impl Into<Cow<'static, str>>, executable: bool) -> Template {
    Template {
        path: path.into(),
        text: text.into(),
        executable,
    }
}

/// A language's build script, ignore list and sources (policy, filter, transform; `None`: the
/// language makes no such project, see [`Lang::supports`]).
struct LangTemplates {
    build: &'static str,
    ignore: &'static str,
    sources: [Option<&'static str>; 3],
}

macro_rules! lang_templates {
    ($dir:literal, $ext:literal, $ignore:expr) => {
        LangTemplates {
            build: include_str!(concat!("../templates/", $dir, "/build.sh")),
            ignore: $ignore,
            sources: [
                include_str!(concat!("../templates/", $dir, "/policy.", $ext)),
                include_str!(concat!("../templates/", $dir, "/filter.", $ext)),
                include_str!(concat!("../templates/", $dir, "/transform.", $ext)),
            ]
            .map(Some),
        }
    };
}

fn lang_templates(lang: Lang) -> LangTemplates {
    match lang {
        Lang::Rust => lang_templates!("rust", "rs", "/target\n*.wasm\n"),
        Lang::Python => lang_templates!(
            "python",
            "py",
            "*.wasm\n__pycache__/\nwit_world/\ncomponentize_py_*\n"
        ),
        Lang::Javascript => lang_templates!("javascript", "js", "*.wasm\n"),
        Lang::C => lang_templates!("c", "c", "*.wasm\n"),
        Lang::Go => LangTemplates {
            build: include_str!("../templates/go/build.sh"),
            ignore: "*.wasm\n",
            sources: [Some(include_str!("../templates/go/policy.go")), None, None],
        },
    }
}

/// The files of a `lang` × `kind` project (before placeholders are filled in); an error if the
/// language makes no such project.
fn templates(lang: Lang, kind: Kind) -> Result<Vec<Template>> {
    lang.supports(kind)?;
    let (sample, sample_text) = kind.sample();
    let t = lang_templates(lang);
    let source = match kind {
        Kind::Policy => t.sources[0],
        Kind::Filter => t.sources[1],
        Kind::Transform => t.sources[2],
    }
    .with_context(|| format!("no {} {} template", lang.name(), kind.name()))?;
    let readme = include_str!("../templates/common/README.md");
    let readme: Cow<'static, str> = match lang {
        // Go's toolchain has its own installer.
        Lang::Go => readme
            .replace(GUEST_TOOLCHAINS_SCRIPT, GO_TOOLCHAIN_SCRIPT)
            .into(),
        _ => readme.into(),
    };
    let mut files = vec![
        file("README.md", readme, false),
        file(sample, sample_text, false),
        file("build.sh", t.build, true),
        file(".gitignore", t.ignore, false),
        file(source_file(lang, kind), source, false),
    ];
    if lang == Lang::Rust {
        files.push(file(
            "Cargo.toml",
            include_str!("../templates/rust/Cargo.toml"),
            false,
        ));
        // The guest workspace's lock file: the same crate versions, so the build needs no
        // registry once the checkout's plugins were built (cargo prunes what is unused).
        files.push(file(
            "Cargo.lock",
            include_str!("../../../plugins/Cargo.lock"),
            false,
        ));
    }
    if lang == Lang::Go {
        files.push(file(
            "go.mod",
            include_str!("../templates/go/go.mod"),
            false,
        ));
        // The example's go.sum and canonical ABI glue: the same module versions, so the build
        // is served by the module cache `.ci/install-go-toolchain` fills.
        files.push(file(
            "go.sum",
            include_str!("../../../examples/plugins/go/go.sum"),
            false,
        ));
        files.push(file(
            "abi.go",
            include_str!("../../../examples/plugins/go/abi.go"),
            false,
        ));
    }
    Ok(files)
}

/// The script that installs the Python, JavaScript, C and Rust guest toolchains, as the common
/// README names it, and the one that installs Go's.
const GUEST_TOOLCHAINS_SCRIPT: &str = ".ci/install-guest-toolchains";
const GO_TOOLCHAIN_SCRIPT: &str = ".ci/install-go-toolchain";

/// A plugin name from `dir`'s last component: lower case ASCII letters, digits and `-`.
fn default_name(dir: &Path) -> Result<String> {
    let last = dir.file_name().and_then(|n| n.to_str()).with_context(|| {
        format!(
            "{}: cannot take a plugin name from it; pass --name",
            dir.display()
        )
    })?;
    let name: String = last
        .chars()
        .map(|c| match c {
            'A'..='Z' => c.to_ascii_lowercase(),
            'a'..='z' | '0'..='9' => c,
            _ => '-',
        })
        .collect::<String>()
        .trim_matches('-')
        .to_string();
    check_name(&name).with_context(|| {
        format!(
            "{}: cannot take a plugin name from it; pass --name",
            dir.display()
        )
    })?;
    Ok(name)
}

/// A name usable as a crate, file and module name: starts with a letter; letters, digits, `-`.
fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 64 {
        bail!("the plugin name must be 1 to 64 characters long");
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase())
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        bail!("plugin name `{name}`: use lower case ASCII letters, digits and `-`, starting with a letter");
    }
    Ok(())
}

/// The refract checkout to build against: `--sdk`, `$REFRACT_HOME`, or the one this binary was
/// built from. It must hold `wit/plugin.wit`.
fn refract_home(sdk: Option<&Path>) -> Result<PathBuf> {
    let (home, from) = match (sdk, std::env::var_os("REFRACT_HOME")) {
        (Some(p), _) => (p.to_path_buf(), "--sdk"),
        (None, Some(p)) => (PathBuf::from(p), "REFRACT_HOME"),
        (None, None) => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
            "the checkout refract was built from",
        ),
    };
    if !home.join("wit/plugin.wit").is_file() {
        bail!(
            "{} ({from}) is not a refract checkout (no wit/plugin.wit); pass --sdk <path to a refract checkout>",
            home.display()
        );
    }
    home.canonicalize()
        .with_context(|| format!("resolving {}", home.display()))
}

impl PluginNew {
    /// Writes the project and prints what to do next.
    pub fn run(&self) -> Result<()> {
        let files = templates(self.lang, self.kind)?;
        let name = match &self.name {
            Some(n) => {
                check_name(n)?;
                n.clone()
            }
            None => default_name(&self.dir)?,
        };
        let home = refract_home(self.sdk.as_deref())?;
        let home_text = home
            .to_str()
            .with_context(|| format!("{}: not UTF-8", home.display()))?;
        if self.dir.exists() {
            let empty = std::fs::read_dir(&self.dir)
                .with_context(|| format!("reading {}", self.dir.display()))?
                .next()
                .is_none();
            if !empty {
                bail!(
                    "{}: already exists and is not empty; choose a new folder",
                    self.dir.display()
                );
            }
        }
        let (sample, _) = self.kind.sample();
        let wasm = format!("{name}.wasm");
        let test_command = format!("refract plugin test {wasm} --input {sample}");
        let fill = |text: &str| {
            text.replace("@NAME@", &name)
                .replace("@CRATE_FILE@", &name.replace('-', "_"))
                .replace("@KIND@", self.kind.name())
                .replace("@WORLD@", self.kind.world())
                .replace("@LANG@", self.lang.name())
                .replace("@SOURCE@", &source_file(self.lang, self.kind))
                .replace("@SAMPLE@", sample)
                .replace("@WASM@", &wasm)
                .replace("@TEST@", &test_command)
                .replace("@REFRACT_HOME@", home_text)
        };
        for t in files {
            let path = self.dir.join(&t.path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&path, fill(&t.text))
                .with_context(|| format!("writing {}", path.display()))?;
            if t.executable {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                    .with_context(|| format!("making {} executable", path.display()))?;
            }
        }
        println!(
            "created {} ({} {} plugin `{name}`, built against {home_text})",
            self.dir.display(),
            self.lang.name(),
            self.kind.name()
        );
        println!("next:");
        println!("  cd {}", self.dir.display());
        println!("  ./build.sh              # writes {wasm}");
        println!("  {test_command}");
        println!(
            "then edit {} (the place to change is marked CHANGE ME)",
            source_file(self.lang, self.kind)
        );
        Ok(())
    }
}

/// The file the user edits.
fn source_file(lang: Lang, kind: Kind) -> String {
    match lang {
        Lang::Rust => "src/lib.rs".into(),
        Lang::Python => "app.py".into(),
        Lang::Javascript => format!("{}.js", kind.name()),
        Lang::C => format!("{}.c", kind.name()),
        Lang::Go => format!("{}.go", kind.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_folder_or_are_checked() {
        assert_eq!(
            default_name(Path::new("/tmp/My_Policy")).unwrap(),
            "my-policy"
        );
        assert!(default_name(Path::new("/tmp/9lives")).is_err());
        assert!(check_name("ok-name-2").is_ok());
        assert!(check_name("Bad").is_err());
        assert!(check_name("").is_err());
    }

    const LANGS: [Lang; 5] = [
        Lang::Rust,
        Lang::Python,
        Lang::Javascript,
        Lang::C,
        Lang::Go,
    ];
    const KINDS: [Kind; 3] = [Kind::Policy, Kind::Filter, Kind::Transform];

    #[test]
    fn every_kind_and_language_has_its_files_and_placeholders_are_known() {
        for lang in LANGS {
            for kind in KINDS {
                if lang == Lang::Go && kind != Kind::Policy {
                    continue; // go_projects_are_policies_only
                }
                let files = templates(lang, kind).unwrap();
                let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
                assert!(names.contains(&"build.sh"), "{lang:?} {kind:?}");
                assert!(names.contains(&"README.md"));
                assert!(
                    names.contains(&source_file(lang, kind).as_str()),
                    "{names:?}"
                );
                for f in &files {
                    for placeholder in f.text.match_indices('@').map(|(i, _)| &f.text[i..]) {
                        let Some(end) = placeholder[1..].find('@') else {
                            continue;
                        };
                        let word = &placeholder[1..=end];
                        if word.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                            && !word.is_empty()
                        {
                            assert!(
                                [
                                    "NAME",
                                    "CRATE_FILE",
                                    "KIND",
                                    "WORLD",
                                    "LANG",
                                    "SOURCE",
                                    "SAMPLE",
                                    "WASM",
                                    "TEST",
                                    "REFRACT_HOME"
                                ]
                                .contains(&word),
                                "{}: unknown placeholder @{word}@",
                                f.path
                            );
                        }
                    }
                }
            }
        }
    }

    /// A Go project is a policy whose go.sum and abi.go are the example's, built with the Go
    /// installer; a Go filter or transform is refused before anything is written.
    #[test]
    fn go_projects_are_policies_only() {
        let files = templates(Lang::Go, Kind::Policy).unwrap();
        let text = |path: &str| {
            files
                .iter()
                .find(|f| f.path == path)
                .unwrap_or_else(|| panic!("no {path}"))
                .text
                .clone()
        };
        assert_eq!(
            text("go.sum"),
            include_str!("../../../examples/plugins/go/go.sum")
        );
        assert_eq!(
            text("abi.go"),
            include_str!("../../../examples/plugins/go/abi.go")
        );
        assert!(text("go.mod").starts_with("module @NAME@\n"));
        assert!(text("policy.go").contains("pluginName    = \"@NAME@\""));
        assert_eq!(text("policy.go").matches("CHANGE ME").count(), 1);
        let readme = text("README.md");
        assert!(readme.contains(GO_TOOLCHAIN_SCRIPT), "{readme}");
        assert!(!readme.contains(GUEST_TOOLCHAINS_SCRIPT), "{readme}");

        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("probe");
        PluginNew {
            kind: Kind::Policy,
            lang: Lang::Go,
            name: None,
            sdk: None,
            dir: project.clone(),
        }
        .run()
        .unwrap();
        let go_mod = std::fs::read_to_string(project.join("go.mod")).unwrap();
        assert!(go_mod.starts_with("module probe\n"), "{go_mod}");

        for kind in [Kind::Filter, Kind::Transform] {
            let project = dir.path().join(kind.name());
            let err = PluginNew {
                kind,
                lang: Lang::Go,
                name: None,
                sdk: None,
                dir: project.clone(),
            }
            .run()
            .unwrap_err()
            .to_string();
            assert_eq!(
                err,
                format!(
                    "Go projects can be policies only: abi.go covers the policy world; write {}s in Rust, Python, JavaScript or C",
                    kind.name()
                )
            );
            assert!(!project.exists());
        }
    }

    /// Every build script checks its toolchain first: with a PATH that holds only `bash`, it
    /// exits 1 and prints the one command that installs what is missing.
    #[test]
    fn build_scripts_name_the_command_that_installs_a_missing_toolchain() {
        let bash = ["/usr/bin/bash", "/bin/bash"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.is_file())
            .expect("bash");
        let only_bash = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(bash, only_bash.path().join("bash")).unwrap();
        let go_hint = format!(
            "bash {}/.ci/install-go-toolchain",
            refract_home(None).unwrap().display()
        );
        let cases = [
            (
                Lang::Python,
                "python3 -m pip install componentize-py==0.25.1",
            ),
            (Lang::Javascript, "sudo apt-get install -y nodejs npm"),
            (
                Lang::C,
                "sudo apt-get install -y clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32",
            ),
            (
                Lang::Rust,
                "curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh",
            ),
            (Lang::Go, go_hint.as_str()),
        ];
        for (lang, hint) in cases {
            let dir = tempfile::tempdir().unwrap();
            let project = dir.path().join("probe");
            PluginNew {
                // Go makes policies only.
                kind: if lang == Lang::Go {
                    Kind::Policy
                } else {
                    Kind::Filter
                },
                lang,
                name: None,
                sdk: None,
                dir: project.clone(),
            }
            .run()
            .unwrap();
            let out = std::process::Command::new(bash)
                .arg(project.join("build.sh"))
                .env_clear()
                .env("PATH", only_bash.path())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{lang:?}: {stderr}");
            assert!(
                stderr.lines().any(|l| l.trim() == hint),
                "{lang:?}: no `{hint}` in {stderr}"
            );
            assert!(!project.join("probe.wasm").exists());
        }
    }
}
