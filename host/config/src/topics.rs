use regex::Regex;

/// MirrorMaker 2's default `topics.exclude`.
pub const DEFAULT_TOPICS_EXCLUDE: &[&str] = &[".*[-.]internal", ".*\\.replica", "__.*"];

/// MirrorMaker 2's default `groups.exclude`.
pub const DEFAULT_GROUPS_EXCLUDE: &[&str] = &["console-consumer-.*", "connect-.*", "__.*"];

/// MirrorMaker 2's default `config.properties.exclude`: topic configs never copied.
pub const DEFAULT_CONFIG_PROPERTIES_EXCLUDE: &[&str] = &[
    "follower\\.replication\\.throttled\\.replicas",
    "leader\\.replication\\.throttled\\.replicas",
    "message\\.timestamp\\.difference\\.max\\.ms",
    "message\\.timestamp\\.type",
    "unclean\\.leader\\.election\\.enable",
    "min\\.insync\\.replicas",
];

/// A list of full-match regexes with MirrorMaker 2's semantics: the entries are joined with `|`
/// and must match the whole name; an empty list matches nothing.
#[derive(Debug, Clone)]
pub struct PatternList {
    patterns: Vec<String>,
    compiled: Option<Regex>,
}

/// Two lists are equal when their patterns are (the compiled form follows from them).
impl PartialEq for PatternList {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for PatternList {}

/// The regex crate's reason without the pattern it quotes over several lines: its last line,
/// without the `error: ` prefix.
fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().last().unwrap_or(&text).trim();
    last.strip_prefix("error: ").unwrap_or(last).to_string()
}

impl PatternList {
    /// Compiles the list; the error names the first entry that is not a valid regex and the
    /// reason, on one line (`unclosed character class`).
    pub fn new(patterns: Vec<String>) -> Result<Self, (usize, String)> {
        for (i, p) in patterns.iter().enumerate() {
            Regex::new(&format!("^(?:{p})$")).map_err(|e| (i, regex_reason(&e)))?;
        }
        let compiled = if patterns.is_empty() {
            None
        } else {
            let joined = patterns
                .iter()
                .map(|p| format!("(?:{p})"))
                .collect::<Vec<_>>()
                .join("|");
            Some(Regex::new(&format!("^(?:{joined})$")).map_err(|e| (0, regex_reason(&e)))?)
        };
        Ok(Self { patterns, compiled })
    }

    /// Whether `name` fully matches one of the patterns.
    pub fn matches(&self, name: &str) -> bool {
        self.compiled.as_ref().is_some_and(|r| r.is_match(name))
    }

    /// The patterns as written.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// MirrorMaker 2's DefaultTopicFilter: `included && !excluded`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicFilter {
    /// Topics to mirror.
    pub include: PatternList,
    /// Topics never to mirror, even when included.
    pub exclude: PatternList,
}

impl TopicFilter {
    /// Whether the filter lets `topic` through.
    pub fn should_replicate(&self, topic: &str) -> bool {
        self.include.matches(topic) && !self.exclude.matches(topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(p: &[&str]) -> PatternList {
        PatternList::new(p.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    #[test]
    fn mm2_filter_semantics() {
        let default = TopicFilter {
            include: list(&[".*"]),
            exclude: list(DEFAULT_TOPICS_EXCLUDE),
        };
        let cases = [
            ("orders", true),
            ("__consumer_offsets", false),
            ("x.internal", false),
            ("x-internal", false),
            ("mm2-offset-syncs.b.internal", false),
            ("orders.replica", false),
            ("orders.replicas", true),
            ("internal", true),
        ];
        for (topic, want) in cases {
            assert_eq!(default.should_replicate(topic), want, "{topic}");
        }
    }

    #[test]
    fn full_match_and_dot_is_a_regex() {
        let l = list(&["orders", "pay.*"]);
        assert!(l.matches("orders"));
        assert!(!l.matches("orders-v1"));
        assert!(!l.matches("my-orders"));
        assert!(l.matches("payments"));
        // "." is a regex: MM2 treats plain names as regexes too.
        assert!(list(&["a.b"]).matches("axb"));
    }

    #[test]
    fn empty_list_matches_nothing() {
        let f = TopicFilter {
            include: list(&[]),
            exclude: list(&[]),
        };
        assert!(!f.should_replicate("orders"));
        let f = TopicFilter {
            include: list(&[".*"]),
            exclude: list(&[]),
        };
        assert!(f.should_replicate("__consumer_offsets"));
    }

    #[test]
    fn alternation_inside_an_entry_stays_anchored() {
        assert!(!list(&["a|b"]).matches("ab"));
        assert!(list(&["a|b"]).matches("b"));
    }

    #[test]
    fn bad_regex_names_its_index() {
        let err = PatternList::new(vec!["ok".into(), "(".into()]).unwrap_err();
        assert_eq!(err, (1, "unclosed group".to_string()));
    }
}
