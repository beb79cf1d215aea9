//! refract's `rename` policy plugin: remote topics keep their names, except where a rule renames
//! them.
//!
//! ```toml
//! separator = "."                # optional; used for heartbeats and internal topic names
//! internal_topic_separator_enabled = true   # optional, as for the default policy
//!
//! [[rules]]
//! match = "orders-v1"            # must match the whole topic name
//! replace = "orders"
//!
//! [[rules]]
//! match = "(.*)-legacy"
//! replace = "$1"                 # capture groups: $1, ${1}, ${name}
//! ```
//!
//! Rules are tried in order; the first whose `match` matches the whole topic name gives the remote
//! name, and a topic that no rule matches keeps its name. `match` uses the Rust `regex` syntax
//! (no look-around, no back-references) and is anchored at both ends, like Java's
//! `Matcher.matches()`. In `replace`, `$name` takes the longest run of letters, digits and `_`, so
//! write `${1}x` rather than `$1x`; a reference to a group that `match` does not define, a `$` that
//! starts no reference, and literal text that Kafka does not allow in a topic name are rejected.
//!
//! Heartbeat-like topics (names ending in `heartbeats`) are named as by the default policy, so
//! `heartbeats` from cluster `A` becomes `A.heartbeats`; `topic_source` and `upstream_topic` are
//! those of the identity policy (`None` for anything but heartbeats), and internal topic names are
//! those of the default policy.

use refract_plugin_sdk::config::{ConfigTable, full_match_regex};
use refract_plugin_sdk::mm2::IdentityReplicationPolicy;
use refract_plugin_sdk::{PluginError, ReplicationPolicy};
use regex::Regex;

/// Config key of the array of rules.
const RULES_KEY: &str = "rules";
/// Config key of a rule's regex.
const MATCH_KEY: &str = "match";
/// Config key of a rule's replacement.
const REPLACE_KEY: &str = "replace";

/// The identity policy with data topics renamed by an ordered list of regex rules.
#[derive(Debug, Clone)]
pub struct Rename {
    identity: IdentityReplicationPolicy,
    rules: Vec<Rule>,
}

impl Rename {
    /// The remote name of a data topic: the first matching rule's replacement, else the topic.
    fn rename(&self, topic: &str) -> String {
        for (index, rule) in self.rules.iter().enumerate() {
            let Some(renamed) = rule.apply(topic) else {
                continue;
            };
            if renamed.is_empty() {
                refract_plugin_sdk::warn(&format!(
                    "rules[{}] renames `{topic}` to an empty name; keeping `{topic}`",
                    index + 1
                ));
                return topic.to_owned();
            }
            return renamed;
        }
        topic.to_owned()
    }
}

impl ReplicationPolicy for Rename {
    const NAME: &'static str = "rename";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let mut table = ConfigTable::parse(config)?;
        let identity = IdentityReplicationPolicy::from_table(&mut table)?;
        let rules = table
            .tables(RULES_KEY)?
            .unwrap_or_default()
            .into_iter()
            .map(Rule::from_table)
            .collect::<Result<Vec<_>, _>>()?;
        table.finish()?;
        Ok(Self { identity, rules })
    }

    fn format_remote_topic(&self, source_cluster: &str, topic: &str) -> String {
        if self.identity.looks_like_heartbeat(topic) {
            self.identity.format_remote_topic(source_cluster, topic)
        } else {
            self.rename(topic)
        }
    }

    fn topic_source(&self, topic: &str) -> Option<String> {
        self.identity.topic_source(topic)
    }

    fn upstream_topic(&self, topic: &str) -> Option<String> {
        self.identity.upstream_topic(topic)
    }

    fn is_internal_topic(&self, topic: &str) -> bool {
        self.identity.is_internal_topic(topic)
    }

    fn heartbeats_topic(&self) -> String {
        self.identity.heartbeats_topic()
    }

    fn offset_syncs_topic(&self, cluster_alias: &str) -> String {
        self.identity.offset_syncs_topic(cluster_alias)
    }

    fn checkpoints_topic(&self, cluster_alias: &str) -> String {
        self.identity.checkpoints_topic(cluster_alias)
    }
}

/// One `[[rules]]` entry: a full-match regex and the replacement it produces.
#[derive(Debug, Clone)]
struct Rule {
    regex: Regex,
    replacement: Vec<Piece>,
}

/// A part of a parsed replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Text copied as is.
    Literal(String),
    /// The text of a capture group, empty when the group did not take part in the match.
    Group(usize),
}

impl Rule {
    /// Reads and checks a rule's `match` and `replace`, rejecting any other key.
    fn from_table(mut table: ConfigTable) -> Result<Self, PluginError> {
        let pattern = table.required_string(MATCH_KEY)?;
        let replace = table.required_string(REPLACE_KEY)?;
        let regex = full_match_regex(&pattern).map_err(|reason| table.error(MATCH_KEY, reason))?;
        let replacement = parse_replacement(&replace, &regex)
            .map_err(|reason| table.error(REPLACE_KEY, reason))?;
        table.finish()?;
        Ok(Self { regex, replacement })
    }

    /// The replacement for `topic`, if the regex matches all of it.
    fn apply(&self, topic: &str) -> Option<String> {
        let captures = self.regex.captures(topic)?;
        let mut renamed = String::new();
        for piece in &self.replacement {
            match piece {
                Piece::Literal(text) => renamed.push_str(text),
                Piece::Group(index) => {
                    if let Some(group) = captures.get(*index) {
                        renamed.push_str(group.as_str());
                    }
                }
            }
        }
        Some(renamed)
    }
}

/// Whether Kafka allows `c` in a topic name.
fn is_topic_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Parses a replacement into literal text and capture group references checked against `regex`.
fn parse_replacement(replace: &str, regex: &Regex) -> Result<Vec<Piece>, String> {
    if replace.is_empty() {
        return Err("must not be empty".to_owned());
    }
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut rest = replace;
    while let Some(dollar) = rest.find('$') {
        literal.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        let (name, tail) = if let Some(braced) = after.strip_prefix('{') {
            let close = braced
                .find('}')
                .ok_or_else(|| format!("`${{` at byte {dollar} has no closing `}}`"))?;
            (&braced[..close], &braced[close + 1..])
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if name.is_empty() {
            return Err(
                "`$` must start a capture group reference such as $1, ${1} or ${name}".to_owned(),
            );
        }
        let index = group_index(name, regex)?;
        if !literal.is_empty() {
            pieces.push(Piece::Literal(std::mem::take(&mut literal)));
        }
        pieces.push(Piece::Group(index));
        rest = tail;
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        pieces.push(Piece::Literal(literal));
    }
    for piece in &pieces {
        if let Piece::Literal(text) = piece {
            if let Some(bad) = text.chars().find(|c| !is_topic_char(*c)) {
                return Err(format!(
                    "`{bad}` is not allowed in a topic name (only ASCII letters, digits, `.`, `_` and `-`)"
                ));
            }
        }
    }
    Ok(pieces)
}

/// The index of the capture group `name` (a number or a group name) refers to in `regex`.
fn group_index(name: &str, regex: &Regex) -> Result<usize, String> {
    let found = match name.parse::<usize>() {
        Ok(index) => (index < regex.captures_len()).then_some(index),
        Err(_) => regex.capture_names().position(|group| group == Some(name)),
    };
    found.ok_or_else(|| {
        let digits = name.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && digits < name.len() {
            format!(
                "`{name}` is not a capture group of `match`; write ${{{}}}{} for group {} followed by text",
                &name[..digits],
                &name[digits..],
                &name[..digits]
            )
        } else {
            format!("`{name}` is not a capture group of `match`")
        }
    })
}

refract_plugin_sdk::export_policy!(Rename);

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(config: &str) -> Rename {
        Rename::from_config(config).unwrap_or_else(|err| panic!("{config}: {err:?}"))
    }

    fn config_error(config: &str) -> String {
        match Rename::from_config(config) {
            Ok(_) => panic!("accepted: {config}"),
            Err(PluginError::InvalidConfig(message)) => message,
            Err(other) => panic!("not invalid-config: {other:?}"),
        }
    }

    const EXAMPLE: &str = r#"
        separator = "."
        [[rules]]
        match = "orders-v1"
        replace = "orders"
        [[rules]]
        match = "(.*)-legacy"
        replace = "$1"
        [[rules]]
        match = "(?P<team>[a-z]+)\\.(?P<name>.+)"
        replace = "${name}.${team}"
        [[rules]]
        match = "a|ab"
        replace = "x"
    "#;

    #[test]
    fn first_full_match_wins() {
        let rename = policy(EXAMPLE);
        let cases = [
            ("orders-v1", "orders"),
            ("orders-v1x", "orders-v1x"),
            ("xorders-v1", "xorders-v1"),
            ("payments-legacy", "payments"),
            ("orders-v1-legacy", "orders-v1"),
            ("sales.invoices", "invoices.sales"),
            ("Sales.invoices", "Sales.invoices"),
            ("ab", "x"),
            ("a", "x"),
            ("abc", "abc"),
            ("unmatched", "unmatched"),
        ];
        for (topic, remote) in cases {
            assert_eq!(rename.format_remote_topic("A", topic), remote, "{topic}");
        }
    }

    #[test]
    fn heartbeats_follow_the_default_policy() {
        let rename = policy(EXAMPLE);
        assert_eq!(
            rename.format_remote_topic("A", "heartbeats"),
            "A.heartbeats"
        );
        assert_eq!(
            rename.format_remote_topic("B", "A.heartbeats"),
            "B.A.heartbeats"
        );
        assert_eq!(rename.topic_source("B.A.heartbeats").as_deref(), Some("B"));
        assert_eq!(
            rename.upstream_topic("B.A.heartbeats").as_deref(),
            Some("A.heartbeats")
        );
        let underscored = policy("separator = \"_\"\n[[rules]]\nmatch = \".*\"\nreplace = \"x\"");
        assert_eq!(
            underscored.format_remote_topic("A", "heartbeats"),
            "A_heartbeats"
        );
        assert_eq!(underscored.format_remote_topic("A", "t"), "x");
        assert_eq!(
            underscored.offset_syncs_topic("A"),
            "mm2-offset-syncs_A_internal"
        );
        assert_eq!(underscored.checkpoints_topic("A"), "A_checkpoints_internal");
        assert_eq!(underscored.heartbeats_topic(), "heartbeats");
    }

    #[test]
    fn data_topics_have_no_source() {
        let rename = policy(EXAMPLE);
        for topic in ["orders", "A.orders", "sales.invoices"] {
            assert_eq!(rename.topic_source(topic), None);
            assert_eq!(rename.upstream_topic(topic), None);
        }
        assert!(rename.is_internal_topic("__consumer_offsets"));
        assert!(rename.is_internal_topic("mm2-offset-syncs.A.internal"));
        assert!(!rename.is_internal_topic("orders"));
    }

    #[test]
    fn no_rules_keeps_names() {
        for config in ["", "rules = []"] {
            let rename = policy(config);
            assert_eq!(rename.format_remote_topic("A", "orders"), "orders");
            assert_eq!(
                rename.format_remote_topic("A", "heartbeats"),
                "A.heartbeats"
            );
        }
    }

    #[test]
    fn inline_rules_and_optional_groups() {
        let rename = policy(
            r#"rules = [{ match = "(x)?(y+)", replace = "${1}z$2" }, { match = "(e?)", replace = "$1" }]"#,
        );
        assert_eq!(rename.format_remote_topic("A", "xyy"), "xzyy");
        assert_eq!(rename.format_remote_topic("A", "yy"), "zyy");
        assert_eq!(rename.format_remote_topic("A", "e"), "e");
        assert_eq!(rename.format_remote_topic("A", ""), "");
    }

    #[test]
    fn config_errors_name_the_rule_and_key() {
        let cases = [
            (
                "[[rules]]\nmatch = \"a\"\nreplace = \"b\"\n[[rules]]\nmatch = \"(\"\nreplace = \"x\"",
                "rules[2].match: regex parse error: unclosed group",
            ),
            ("[[rules]]\nreplace = \"b\"", "rules[1].match: missing"),
            ("[[rules]]\nmatch = \"a\"", "rules[1].replace: missing"),
            (
                "[[rules]]\nmatch = \"a\"\nreplace = \"\"",
                "rules[1].replace: must not be empty",
            ),
            (
                "[[rules]]\nmatch = \"a\"\nreplace = \"b\"\nreplacement = \"c\"",
                "rules[1].replacement: unknown key; expected one of: match, replace",
            ),
            (
                "[[rules]]\nmatch = 1\nreplace = \"b\"",
                "rules[1].match: expected a string, found integer",
            ),
            (
                "[[rules]]\nmatch = \"(a)\"\nreplace = \"$2\"",
                "rules[1].replace: `2` is not a capture group of `match`",
            ),
            (
                "[[rules]]\nmatch = \"(a)\"\nreplace = \"$1x\"",
                "rules[1].replace: `1x` is not a capture group of `match`; write ${1}x for group 1 followed by text",
            ),
            (
                "[[rules]]\nmatch = \"(?P<n>a)\"\nreplace = \"${m}\"",
                "rules[1].replace: `m` is not a capture group of `match`",
            ),
            (
                "[[rules]]\nmatch = \"a\"\nreplace = \"$\"",
                "rules[1].replace: `$` must start a capture group reference such as $1, ${1} or ${name}",
            ),
            (
                "[[rules]]\nmatch = \"a\"\nreplace = \"$$\"",
                "rules[1].replace: `$` must start a capture group reference such as $1, ${1} or ${name}",
            ),
            (
                "[[rules]]\nmatch = \"(a)\"\nreplace = \"x${1\"",
                "rules[1].replace: `${` at byte 1 has no closing `}`",
            ),
            (
                "[[rules]]\nmatch = \"a\"\nreplace = \"b/c\"",
                "rules[1].replace: `/` is not allowed in a topic name (only ASCII letters, digits, `.`, `_` and `-`)",
            ),
            (
                "[[rules]]\nmatch = \"(?x)a # comment\"\nreplace = \"b\"",
                "rules[1].match: cannot be anchored to match whole texts (regex parse error: unclosed group); a trailing `#` comment needs a newline after it",
            ),
            (
                "rules = \"a\"",
                "rules: expected an array of tables, found string",
            ),
            (
                "rules = [\"a\"]",
                "rules[1]: expected a table, found string",
            ),
            ("separator = \"\"", "separator: must not be empty"),
            (
                "rule = []",
                "rule: unknown key; expected one of: internal_topic_separator_enabled, rules, separator",
            ),
        ];
        for (config, message) in cases {
            assert_eq!(config_error(config), message, "{config}");
        }
    }

    #[test]
    fn replacement_parsing() {
        let regex = full_match_regex("(?P<a>x)(y)").unwrap();
        let cases = [
            ("lit", vec![Piece::Literal("lit".to_owned())]),
            (
                "p-$1-${2}_${a}$a",
                vec![
                    Piece::Literal("p-".to_owned()),
                    Piece::Group(1),
                    Piece::Literal("-".to_owned()),
                    Piece::Group(2),
                    Piece::Literal("_".to_owned()),
                    Piece::Group(1),
                    Piece::Group(1),
                ],
            ),
            ("$0", vec![Piece::Group(0)]),
        ];
        for (replace, pieces) in cases {
            assert_eq!(parse_replacement(replace, &regex), Ok(pieces), "{replace}");
        }
    }

    #[test]
    fn empty_result_keeps_the_name() {
        let rename = policy("[[rules]]\nmatch = \"(.*)-old\"\nreplace = \"$1\"");
        assert_eq!(rename.format_remote_topic("A", "-old"), "-old");
        assert_eq!(rename.format_remote_topic("A", "t-old"), "t");
    }
}
