//! MirrorMaker 2 files in, what refract makes of them out, snapshot style: every
//! `tests/ui/mm2/NAME.properties` (and each real-world file in `tests/fixtures/mm2/`) is converted and loaded, and the result (the pipeline TOML,
//! the notes and ignored settings, the flows and warnings; or the error, naming file, line and
//! key) must equal `NAME.out` byte for byte. After an intended change, write the new outputs
//! with `REFRACT_BLESS=1 cargo test -p refract-config --test mm2_ui` and review the diff.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use refract_config::{convert_mm2_properties, Pipeline};

/// The cases in `tests/ui/mm2/` and the real-world files in `tests/fixtures/mm2/`.
fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut cases = Vec::new();
    for dir in ["ui/mm2", "fixtures/mm2"] {
        cases.extend(
            std::fs::read_dir(root.join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "properties")),
        );
    }
    cases.sort();
    cases
}

/// What refract makes of one file.
fn render(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    match convert_mm2_properties(Path::new(&name), &text) {
        Err(e) => {
            writeln!(out, "== conversion error\n{e}").unwrap();
            return out;
        }
        Ok(c) => {
            writeln!(out, "== pipeline\n{}", c.toml.trim_end()).unwrap();
            writeln!(out, "== ignored\n{}", c.unsupported.join("\n")).unwrap();
            writeln!(out, "== notes\n{}", c.notes.join("\n")).unwrap();
        }
    }
    let dir = format!("{}/", path.parent().unwrap().display());
    match Pipeline::load(path) {
        Err(e) => writeln!(out, "== load error\n{}", e.to_string().replace(&dir, "")).unwrap(),
        Ok(p) => {
            let flows: Vec<String> = p.flows.iter().map(|f| f.name()).collect();
            writeln!(out, "== flows\n{}", flows.join("\n")).unwrap();
            let warnings: Vec<String> = p.warnings.iter().map(|w| w.replace(&dir, "")).collect();
            writeln!(out, "== warnings\n{}", warnings.join("\n")).unwrap();
        }
    }
    out
}

#[test]
fn every_mm2_file_converts_to_its_snapshot() {
    let bless = std::env::var_os("REFRACT_BLESS").is_some();
    let cases = cases();
    assert!(cases.len() >= 20, "only {} cases", cases.len());
    let mut failed = Vec::new();
    for case in &cases {
        let got = render(case);
        let expected_path = case.with_extension("out");
        if bless {
            std::fs::write(&expected_path, &got).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if got != expected {
            failed.push(format!(
                "--- {} (expected)\n{expected}\n+++ got\n{got}",
                expected_path.display()
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} snapshots differ (REFRACT_BLESS=1 writes them):\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}
