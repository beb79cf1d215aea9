//! Reading a plugin's TOML config table with errors that name the offending key.
//!
//! ```
//! use refract_plugin_sdk::PluginError;
//! use refract_plugin_sdk::config::ConfigTable;
//!
//! let mut table = ConfigTable::parse("prefix = 7")?;
//! let err = table.string("prefix").unwrap_err();
//! assert_eq!(err, PluginError::invalid_config("prefix: expected a string, found integer"));
//! # Ok::<(), PluginError>(())
//! ```

use std::fmt::Display;

use crate::PluginError;

/// A TOML table being read key by key; [`finish`](Self::finish) rejects the keys nobody read.
///
/// Every error is `invalid-config` with text of the form `<key path>: <reason>`, where the key
/// path locates the key in the document, e.g. `separator` or `rules[2].match` (array entries
/// count from 1).
#[derive(Debug, Clone)]
pub struct ConfigTable {
    path: String,
    table: toml::Table,
    read: Vec<String>,
}

impl ConfigTable {
    /// Parses TOML text; empty or blank text is an empty table.
    pub fn parse(text: &str) -> Result<Self, PluginError> {
        let table = text
            .parse::<toml::Table>()
            .map_err(|err| PluginError::invalid_config(describe_toml_error(text, &err)))?;
        Ok(Self::new(String::new(), table))
    }

    /// Wraps an already parsed table found at `path` (empty for the document root).
    pub fn new(path: impl Into<String>, table: toml::Table) -> Self {
        Self {
            path: path.into(),
            table,
            read: Vec::new(),
        }
    }

    /// Where this table sits in the document, empty for the root.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The full path of `key` in this table, as used in error texts.
    pub fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// An `invalid-config` error about `key` of this table.
    pub fn error(&self, key: &str, reason: impl Display) -> PluginError {
        PluginError::invalid_config(format!("{}: {reason}", self.key_path(key)))
    }

    /// Removes and returns the raw value of `key`, marking the key as known.
    pub fn take(&mut self, key: &str) -> Option<toml::Value> {
        self.read.push(key.to_owned());
        self.table.remove(key)
    }

    /// Reads an optional string.
    pub fn string(&mut self, key: &str) -> Result<Option<String>, PluginError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::String(value)) => Ok(Some(value)),
            Some(other) => Err(self.wrong_type(key, "a string", &other)),
        }
    }

    /// Reads a string that must be present.
    pub fn required_string(&mut self, key: &str) -> Result<String, PluginError> {
        self.string(key)?.ok_or_else(|| self.error(key, "missing"))
    }

    /// Reads an optional boolean.
    pub fn bool(&mut self, key: &str) -> Result<Option<bool>, PluginError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(value)) => Ok(Some(value)),
            Some(other) => Err(self.wrong_type(key, "a boolean", &other)),
        }
    }

    /// Reads an optional integer.
    pub fn integer(&mut self, key: &str) -> Result<Option<i64>, PluginError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Integer(value)) => Ok(Some(value)),
            Some(other) => Err(self.wrong_type(key, "an integer", &other)),
        }
    }

    /// Reads an optional array of strings.
    pub fn strings(&mut self, key: &str) -> Result<Option<Vec<String>>, PluginError> {
        let entries = match self.take(key) {
            None => return Ok(None),
            Some(toml::Value::Array(entries)) => entries,
            Some(other) => return Err(self.wrong_type(key, "an array of strings", &other)),
        };
        let base = self.key_path(key);
        entries
            .into_iter()
            .enumerate()
            .map(|(index, entry)| match entry {
                toml::Value::String(value) => Ok(value),
                other => Err(PluginError::invalid_config(format!(
                    "{base}[{}]: expected a string, found {}",
                    index + 1,
                    other.type_str()
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// Reads an optional table whose values are all strings, as `(key, value)` pairs in key order.
    pub fn string_table(
        &mut self,
        key: &str,
    ) -> Result<Option<Vec<(String, String)>>, PluginError> {
        let Some(table) = self.table(key)? else {
            return Ok(None);
        };
        let ConfigTable { path, table, .. } = table;
        table
            .into_iter()
            .map(|(name, value)| match value {
                toml::Value::String(value) => Ok((name, value)),
                other => Err(PluginError::invalid_config(format!(
                    "{path}.{name}: expected a string, found {}",
                    other.type_str()
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// Reads an optional regex that must match the whole of a text, like Java's
    /// `Matcher.matches()`; see [`full_match_regex`].
    #[cfg(feature = "regex")]
    pub fn full_match_regex(&mut self, key: &str) -> Result<Option<regex::Regex>, PluginError> {
        match self.string(key)? {
            None => Ok(None),
            Some(pattern) => full_match_regex(&pattern)
                .map(Some)
                .map_err(|reason| self.error(key, reason)),
        }
    }

    /// Reads an optional nested table.
    pub fn table(&mut self, key: &str) -> Result<Option<ConfigTable>, PluginError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Table(table)) => Ok(Some(Self::new(self.key_path(key), table))),
            Some(other) => Err(self.wrong_type(key, "a table", &other)),
        }
    }

    /// Reads an optional array of tables (`[[key]]` sections or an array of inline tables).
    pub fn tables(&mut self, key: &str) -> Result<Option<Vec<ConfigTable>>, PluginError> {
        let entries = match self.take(key) {
            None => return Ok(None),
            Some(toml::Value::Array(entries)) => entries,
            Some(other) => return Err(self.wrong_type(key, "an array of tables", &other)),
        };
        let base = self.key_path(key);
        entries
            .into_iter()
            .enumerate()
            .map(|(index, entry)| {
                let path = format!("{base}[{}]", index + 1);
                match entry {
                    toml::Value::Table(table) => Ok(Self::new(path, table)),
                    other => Err(PluginError::invalid_config(format!(
                        "{path}: expected a table, found {}",
                        other.type_str()
                    ))),
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// Fails with an error naming the first key that was present but never read.
    pub fn finish(self) -> Result<(), PluginError> {
        let Some(unknown) = self.table.keys().next() else {
            return Ok(());
        };
        let mut known: Vec<&str> = self.read.iter().map(String::as_str).collect();
        known.sort_unstable();
        known.dedup();
        Err(if known.is_empty() {
            self.error(unknown, "unknown key; no keys are accepted here")
        } else {
            self.error(
                unknown,
                format!("unknown key; expected one of: {}", known.join(", ")),
            )
        })
    }

    fn wrong_type(&self, key: &str, expected: &str, found: &toml::Value) -> PluginError {
        self.error(
            key,
            format!("expected {expected}, found {}", found.type_str()),
        )
    }
}

/// Compiles `pattern` anchored at both ends, after checking that it is valid on its own (so that
/// it cannot close the anchoring group early). The error is a one-line reason.
#[cfg(feature = "regex")]
pub fn full_match_regex(pattern: &str) -> Result<regex::Regex, String> {
    let alone = regex::Regex::new(pattern).map_err(|err| describe_regex_error(&err))?;
    let anchored = regex::Regex::new(&format!(r"\A(?:{pattern})\z")).map_err(|err| {
        format!(
            "cannot be anchored to match whole texts ({}); a trailing `#` comment needs a newline after it",
            describe_regex_error(&err)
        )
    })?;
    if anchored.captures_len() != alone.captures_len() {
        return Err("cannot be anchored to match whole texts".to_owned());
    }
    Ok(anchored)
}

/// A one-line description of a regex error.
#[cfg(feature = "regex")]
fn describe_regex_error(err: &regex::Error) -> String {
    match err {
        regex::Error::Syntax(text) => {
            let reason = text
                .lines()
                .find_map(|line| line.strip_prefix("error: "))
                .unwrap_or(text)
                .trim();
            format!("regex parse error: {reason}")
        }
        other => format!("regex error: {other}"),
    }
}

fn describe_toml_error(text: &str, err: &toml::de::Error) -> String {
    let position = err
        .span()
        .and_then(|span| text.get(..span.start))
        .map(|before| {
            let line = before.matches('\n').count() + 1;
            let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
            let column = before[line_start..].chars().count() + 1;
            format!(" at line {line}, column {column}")
        })
        .unwrap_or_default();
    format!("TOML parse error{position}: {}", err.message().trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(text: &str) -> PluginError {
        PluginError::invalid_config(text)
    }

    #[test]
    fn empty_text_is_an_empty_table() {
        for text in ["", "  \n", "# only a comment\n"] {
            let table = ConfigTable::parse(text).unwrap_or_else(|err| panic!("{err:?}"));
            assert_eq!(table.finish(), Ok(()));
        }
    }

    #[test]
    fn syntax_errors_give_the_position() {
        let err = ConfigTable::parse("a = 1\nb = \n").unwrap_err();
        let PluginError::InvalidConfig(message) = err else {
            panic!("not invalid-config: {err:?}");
        };
        assert!(
            message.starts_with("TOML parse error at line 2, column"),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
    }

    #[test]
    fn reads_typed_values() -> Result<(), PluginError> {
        let mut table = ConfigTable::parse("s = \"x\"\nb = false\ni = 3\n[t]\nk = \"v\"\n")?;
        assert_eq!(table.string("s")?, Some("x".to_owned()));
        assert_eq!(table.bool("b")?, Some(false));
        assert_eq!(table.integer("i")?, Some(3));
        assert_eq!(table.string("absent")?, None);
        let mut nested = table.table("t")?.unwrap_or_else(|| panic!("no table"));
        assert_eq!(nested.required_string("k")?, "v");
        assert_eq!(nested.required_string("m"), Err(invalid("t.m: missing")));
        nested.finish()?;
        table.finish()
    }

    #[test]
    fn wrong_types_name_the_key() -> Result<(), PluginError> {
        let mut table = ConfigTable::parse("s = 1\nb = \"yes\"\n")?;
        assert_eq!(
            table.string("s"),
            Err(invalid("s: expected a string, found integer"))
        );
        assert_eq!(
            table.bool("b"),
            Err(invalid("b: expected a boolean, found string"))
        );
        Ok(())
    }

    #[test]
    fn arrays_of_tables_count_from_one() -> Result<(), PluginError> {
        let mut table = ConfigTable::parse("[[r]]\na = \"1\"\n[[r]]\nb = \"2\"\n")?;
        let mut entries = table.tables("r")?.unwrap_or_default();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].path(), "r[1]");
        assert_eq!(
            entries[1].required_string("a"),
            Err(invalid("r[2].a: missing"))
        );
        let second = entries.remove(1);
        assert_eq!(
            second.finish(),
            Err(invalid("r[2].b: unknown key; expected one of: a"))
        );

        let mut table = ConfigTable::parse("r = [{ a = \"1\" }, 5]")?;
        assert_eq!(
            table.tables("r").map(|_| ()),
            Err(invalid("r[2]: expected a table, found integer"))
        );
        let mut table = ConfigTable::parse("r = 5")?;
        assert_eq!(
            table.tables("r").map(|_| ()),
            Err(invalid("r: expected an array of tables, found integer"))
        );
        Ok(())
    }

    #[test]
    fn unknown_keys_are_rejected() -> Result<(), PluginError> {
        let mut table = ConfigTable::parse("separator = \"_\"\nseperator = \"-\"\n")?;
        table.string("separator")?;
        table.bool("internal_topic_separator_enabled")?;
        assert_eq!(
            table.finish(),
            Err(invalid(
                "seperator: unknown key; expected one of: internal_topic_separator_enabled, separator"
            ))
        );
        let table = ConfigTable::parse("x = 1")?;
        assert_eq!(
            table.finish(),
            Err(invalid("x: unknown key; no keys are accepted here"))
        );
        Ok(())
    }

    #[test]
    fn reads_string_arrays_and_tables() -> Result<(), PluginError> {
        let mut table = ConfigTable::parse(
            "a = [\"x\", \"y\"]\nb = [\"x\", 2]\nc = 1\n[t]\nz = \"1\"\ny = \"2\"\n[u]\nv = true\n",
        )?;
        assert_eq!(
            table.strings("a")?,
            Some(vec!["x".to_owned(), "y".to_owned()])
        );
        assert_eq!(
            table.strings("b"),
            Err(invalid("b[2]: expected a string, found integer"))
        );
        assert_eq!(
            table.strings("c"),
            Err(invalid("c: expected an array of strings, found integer"))
        );
        assert_eq!(
            table.string_table("t")?,
            Some(vec![
                ("y".to_owned(), "2".to_owned()),
                ("z".to_owned(), "1".to_owned())
            ])
        );
        assert_eq!(
            table.string_table("u"),
            Err(invalid("u.v: expected a string, found boolean"))
        );
        assert_eq!(table.strings("absent")?, None);
        assert_eq!(table.string_table("absent")?, None);
        Ok(())
    }

    #[cfg(feature = "regex")]
    #[test]
    fn full_match_regexes() -> Result<(), PluginError> {
        let mut table = ConfigTable::parse("a = \"ab|c\"\nb = \"(\"\nc = \"x)|(y\"\n")?;
        let regex = table
            .full_match_regex("a")?
            .unwrap_or_else(|| panic!("no regex"));
        for (text, matches) in [("ab", true), ("c", true), ("abc", false), ("xab", false)] {
            assert_eq!(regex.is_match(text), matches, "{text}");
        }
        assert_eq!(
            table.full_match_regex("b").map(|_| ()),
            Err(invalid("b: regex parse error: unclosed group"))
        );
        assert!(table.full_match_regex("c").is_err());
        assert!(table.full_match_regex("absent")?.is_none());
        Ok(())
    }
}
