//! Golden files: text the code generates (a reference page, a metrics exposition) compared
//! with the committed copy, byte for byte. `REFRACT_BLESS=1` writes the copy instead; its diff
//! is then what a reviewer reads.

use std::path::Path;

/// Whether this run rewrites golden files (`REFRACT_BLESS` is set).
pub fn blessing() -> bool {
    std::env::var_os("REFRACT_BLESS").is_some()
}

/// Compares `generated` with the file at `path` (`shown` is how the failure names it), or writes
/// it when [`blessing`]. A difference panics with its first differing line, both versions of it
/// and `regenerate`, the command that rewrites the file.
pub fn assert_golden(path: &Path, shown: &str, generated: &str, regenerate: &str) {
    if blessing() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
        std::fs::write(path, generated).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if let Some(at) = first_difference(generated, &committed) {
        panic!(
            "{shown} is not what the code generates (first difference at line {}):\n  generated: {:?}\n  committed: {:?}\nregenerate it with `{regenerate}`, review the diff and commit it",
            at + 1,
            generated.lines().nth(at),
            committed.lines().nth(at)
        );
    }
}

/// The index of the first line where two texts differ, `None` when they are equal.
fn first_difference(a: &str, b: &str) -> Option<usize> {
    if a == b {
        return None;
    }
    Some(
        a.lines()
            .zip(b.lines())
            .position(|(x, y)| x != y)
            .unwrap_or_else(|| a.lines().count().min(b.lines().count())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_differing_line_is_named() {
        assert_eq!(first_difference("a\nb\n", "a\nb\n"), None);
        assert_eq!(first_difference("a\nb\n", "a\nc\n"), Some(1));
        // One text continues the other: the first line only one of them has.
        assert_eq!(first_difference("a\nb\n", "a\n"), Some(1));
        // Only the final newline differs: past the last line both have.
        assert_eq!(first_difference("a", "a\n"), Some(1));
    }

    #[test]
    fn a_difference_fails_with_the_command_that_regenerates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("page.md");
        std::fs::write(&path, "one\ntwo\n").unwrap();
        assert_golden(&path, "page.md", "one\ntwo\n", "regen");
        let err = std::panic::catch_unwind(|| {
            assert_golden(&path, "page.md", "one\nthree\n", "REFRACT_BLESS=1 regen")
        })
        .unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("page.md is not what the code generates (first difference at line 2)")
                && msg.contains("\"three\"")
                && msg.contains("\"two\"")
                && msg.contains("REFRACT_BLESS=1 regen"),
            "{msg}"
        );
    }
}
