use std::fmt;
use std::path::PathBuf;

/// A pipeline file that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file the error is in.
    pub file: PathBuf,
    /// 1-based line, when the error can be tied to one.
    pub line: Option<usize>,
    /// Dotted key path, e.g. `flow[1].topics[0]`.
    pub key: String,
    /// What is wrong and, where possible, what to do.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.key, self.message)
        }
    }
}

/// Maps byte offsets in a source text to 1-based line numbers.
#[derive(Debug, Clone)]
pub(crate) struct Locator {
    pub file: PathBuf,
    line_starts: Vec<usize>,
}

impl Locator {
    pub fn new(file: PathBuf, text: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { file, line_starts }
    }

    pub fn line_of(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    pub fn error(
        &self,
        span: Option<std::ops::Range<usize>>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            line: span.map(|s| self.line_of(s.start)),
            key: key.into(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based() {
        let l = Locator::new("p.toml".into(), "a\nbb\n\nc");
        assert_eq!(l.line_of(0), 1);
        assert_eq!(l.line_of(1), 1);
        assert_eq!(l.line_of(2), 2);
        assert_eq!(l.line_of(5), 3);
        assert_eq!(l.line_of(6), 4);
    }

    #[test]
    fn display_names_file_line_and_key() {
        let e = ConfigError {
            file: "p.toml".into(),
            line: Some(7),
            key: "flow[0].source".into(),
            message: "unknown cluster `x`".into(),
        };
        assert_eq!(
            e.to_string(),
            "p.toml:7: flow[0].source: unknown cluster `x`"
        );
    }
}
