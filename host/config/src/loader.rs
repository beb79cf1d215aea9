//! Which format a pipeline file is in, and the one way to read either: TOML directly, a
//! MirrorMaker 2 `.properties` file converted first (one way: MM2 → TOML model).

use std::path::Path;

use crate::error::ConfigError;
use crate::files::{read_config_file, MAX_PIPELINE_FILE_BYTES};
use crate::model::Pipeline;

impl Pipeline {
    /// Reads and validates a pipeline file: TOML, or a MirrorMaker 2 `.properties` file, which
    /// is converted first (see [`crate::convert_mm2_properties`]). Only a regular file of at
    /// most [`MAX_PIPELINE_FILE_BYTES`] is read.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = read_config_file(path, MAX_PIPELINE_FILE_BYTES, "pipeline file").map_err(
            |message| ConfigError {
                file: path.to_path_buf(),
                line: None,
                key: String::new(),
                message,
            },
        )?;
        let is_properties = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("properties"));
        if is_properties {
            return crate::mm2::load(path, &text);
        }
        Self::parse(path, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIPELINE: &str = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";

    #[test]
    fn a_duration_past_the_maximum_names_the_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pipeline.toml");
        std::fs::write(
            &path,
            format!("{PIPELINE}commit_interval = \"18446744073709551615s\"\n"),
        )
        .unwrap();
        let err = Pipeline::load(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}:8: flow[0].commit_interval: `18446744073709551615s` is longer than the maximum of 365 days",
                path.display()
            )
        );
    }

    #[test]
    fn only_a_regular_pipeline_file_of_bounded_size_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pipeline.toml");
        std::fs::write(&path, PIPELINE).unwrap();
        assert_eq!(Pipeline::load(&path).unwrap().flows.len(), 1);

        let big = dir.path().join("big.properties");
        let line = "# padding\n".repeat(1024);
        let mut text = String::new();
        while (text.len() as u64) <= MAX_PIPELINE_FILE_BYTES {
            text.push_str(&line);
        }
        std::fs::write(&big, text).unwrap();
        let err = Pipeline::load(&big).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{0}: `{0}` is larger than 4 MiB, the most refract reads for a pipeline file",
                big.display()
            )
        );

        let err = Pipeline::load(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/dev/zero: `/dev/zero` is a character device, not a regular file: a pipeline file must be a regular file"
        );
    }
}
