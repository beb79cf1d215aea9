//! The documentation against the code, in four parts:
//! - [`references`]: pages generated from the code (the CLI reference, the built-in plugins'
//!   config sections), which `REFRACT_BLESS=1` rewrites;
//! - [`snippets`]: every TOML block and `refract …` command line of the README and the book
//!   parses;
//! - [`samples`]: sample outputs shown in the book are what the code prints;
//! - [`completeness`]: the hand-written reference pages name everything the code uses;
//! - [`statements`]: single statements of the book held to the code or scripts they describe.
//!
//! The pipeline, MM2-key and metrics references are generated and checked in the crates that
//! own their tables (`refract-config`, `refract-mirror`).

use std::path::{Path, PathBuf};

mod completeness;
mod references;
mod samples;
mod snippets;
mod statements;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compares a generated page with the committed `docs/src/reference/<name>`;
/// `REFRACT_BLESS=1` writes it instead.
fn assert_page(name: &str, test: &str, text: &str) {
    refract_testkit::golden::assert_golden(
        &root().join("docs/src/reference").join(name),
        &format!("docs/src/reference/{name}"),
        text,
        &format!("REFRACT_BLESS=1 cargo test -p refract --bin refract {test}"),
    );
}
