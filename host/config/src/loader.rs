//! Which format a pipeline file is in, and the one way to read either: TOML directly, a
//! MirrorMaker 2 `.properties` file converted first (one way: MM2 → TOML model).

use std::path::Path;

use crate::error::ConfigError;
use crate::model::Pipeline;

impl Pipeline {
    /// Reads and validates a pipeline file: TOML, or a MirrorMaker 2 `.properties` file, which
    /// is converted first (see [`crate::convert_mm2_properties`]).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            line: None,
            key: String::new(),
            message: format!("cannot read the pipeline file: {e}"),
        })?;
        let is_properties = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("properties"));
        if is_properties {
            return crate::mm2::load(path, &text);
        }
        Self::parse(path, &text)
    }
}
