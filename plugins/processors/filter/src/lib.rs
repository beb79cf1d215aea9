//! refract's `builtin:filter` record filter: keeps or drops records by topic, key or header.
//!
//! ```toml
//! action = "drop"              # what happens to matching records: "drop" (default) or "keep"
//! topic = "orders|payments"    # full-match regex on the source topic
//! key = "test-.*"              # full-match regex on the key as UTF-8
//! header = "env"               # a header of this name must be present
//! header_value = "test|dev"    # with `header`: full-match regex on that header's value as UTF-8
//! ```
//!
//! A record matches when every condition given holds; at least one of `topic`, `key` and `header`
//! is required. Records that match get `action`, the others the opposite. A null or non-UTF-8
//! key never matches `key`. `header_value` is matched against the value of the last header named
//! `header` (Kafka's `lastHeader`) as UTF-8; a null or non-UTF-8 value never matches.

use refract_plugin_sdk::config::ConfigTable;
use refract_plugin_sdk::{BatchInfo, PluginError, Record, RecordFilter};
use regex::Regex;

/// Config key of what happens to matching records.
const ACTION_KEY: &str = "action";
/// Config key of the source topic regex.
const TOPIC_KEY: &str = "topic";
/// Config key of the key regex.
const KEY_KEY: &str = "key";
/// Config key of the header name.
const HEADER_KEY: &str = "header";
/// Config key of the header value regex.
const HEADER_VALUE_KEY: &str = "header_value";

/// Keeps or drops the records that match all of its conditions.
#[derive(Debug, Clone)]
pub struct Filter {
    /// Whether matching records are kept (else dropped).
    keep_matching: bool,
    /// Full-match regex on the source topic.
    topic: Option<Regex>,
    /// Full-match regex on the key as UTF-8.
    key: Option<Regex>,
    /// A header that must be present, with an optional full-match regex on its value.
    header: Option<(String, Option<Regex>)>,
}

impl Filter {
    /// Whether `record` matches the key and header conditions (the topic is checked per batch).
    fn record_matches(&self, record: &Record) -> bool {
        if let Some(regex) = &self.key {
            if !record.key_str().is_some_and(|key| regex.is_match(key)) {
                return false;
            }
        }
        match &self.header {
            None => true,
            Some((name, None)) => record.has_header(name),
            Some((name, Some(regex))) => record
                .header_str(name)
                .is_some_and(|value| regex.is_match(value)),
        }
    }

    /// Whether the batch's topic matches the topic condition (true when there is none).
    fn topic_matches(&self, batch: &BatchInfo) -> bool {
        self.topic
            .as_ref()
            .is_none_or(|regex| regex.is_match(&batch.topic))
    }
}

impl RecordFilter for Filter {
    const NAME: &'static str = "builtin:filter";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let mut table = ConfigTable::parse(config)?;
        let keep_matching = match table.string(ACTION_KEY)?.as_deref() {
            None | Some("drop") => false,
            Some("keep") => true,
            Some(other) => {
                return Err(table.error(
                    ACTION_KEY,
                    format!("expected \"drop\" or \"keep\", found \"{other}\""),
                ));
            }
        };
        let topic = table.full_match_regex(TOPIC_KEY)?;
        let key = table.full_match_regex(KEY_KEY)?;
        let header_name = table.string(HEADER_KEY)?;
        let header_value = table.full_match_regex(HEADER_VALUE_KEY)?;
        let header = match (header_name, header_value) {
            (Some(name), _) if name.is_empty() => {
                return Err(table.error(HEADER_KEY, "must not be empty"));
            }
            (Some(name), value) => Some((name, value)),
            (None, Some(_)) => {
                return Err(table.error(HEADER_VALUE_KEY, "needs `header`"));
            }
            (None, None) => None,
        };
        if topic.is_none() && key.is_none() && header.is_none() {
            return Err(PluginError::invalid_config(
                "topic, key, header: at least one condition is required",
            ));
        }
        table.finish()?;
        Ok(Self {
            keep_matching,
            topic,
            key,
            header,
        })
    }

    fn keep(&self, batch: &BatchInfo, record: &Record) -> bool {
        let matches = self.topic_matches(batch) && self.record_matches(record);
        matches == self.keep_matching
    }

    fn filter_batch(
        &self,
        batch: &BatchInfo,
        records: &[Record],
    ) -> Result<Vec<bool>, PluginError> {
        if !self.topic_matches(batch) {
            return Ok(vec![!self.keep_matching; records.len()]);
        }
        Ok(records
            .iter()
            .map(|record| self.record_matches(record) == self.keep_matching)
            .collect())
    }
}

refract_plugin_sdk::export_filter!(Filter);

#[cfg(test)]
mod tests {
    use super::*;
    use refract_plugin_sdk::Header;

    fn filter(config: &str) -> Filter {
        Filter::from_config(config).unwrap_or_else(|err| panic!("{config}: {err:?}"))
    }

    fn config_error(config: &str) -> String {
        match Filter::from_config(config) {
            Err(PluginError::InvalidConfig(message)) => message,
            other => panic!("{config}: not invalid-config: {other:?}"),
        }
    }

    fn batch(topic: &str) -> BatchInfo {
        BatchInfo {
            source_cluster: "A".to_owned(),
            topic: topic.to_owned(),
            target_topic: format!("A.{topic}"),
        }
    }

    fn record(key: Option<&[u8]>, headers: Vec<Header>) -> Record {
        Record {
            partition: 0,
            offset: 7,
            timestamp_ms: 1,
            key: key.map(<[u8]>::to_vec),
            value: None,
            headers,
        }
    }

    #[test]
    fn drops_or_keeps_matching_records() {
        let env_test = vec![Header::new("env", "test")];
        let env_prod = vec![Header::new("env", "prod")];
        let env_null = vec![Header::null("env")];
        let env_binary = vec![Header::new("env", vec![0xff])];
        let both = vec![Header::new("env", "prod"), Header::new("env", "test")];
        let both_reversed = vec![Header::new("env", "test"), Header::new("env", "prod")];
        let cases: Vec<(&str, &str, Record, bool)> = vec![
            ("topic = \"orders\"", "orders", record(None, vec![]), false),
            (
                "topic = \"orders\"",
                "orders-v2",
                record(None, vec![]),
                true,
            ),
            (
                "topic = \"orders\"\naction = \"keep\"",
                "orders",
                record(None, vec![]),
                true,
            ),
            (
                "topic = \"orders\"\naction = \"keep\"",
                "other",
                record(None, vec![]),
                false,
            ),
            (
                "key = \"test-.*\"",
                "t",
                record(Some(b"test-1"), vec![]),
                false,
            ),
            (
                "key = \"test-.*\"",
                "t",
                record(Some(b"prod-1"), vec![]),
                true,
            ),
            (
                "key = \"test-.*\"",
                "t",
                record(Some(b"xtest-1"), vec![]),
                true,
            ),
            ("key = \".*\"", "t", record(None, vec![]), true),
            (
                "key = \".*\"",
                "t",
                record(Some(&[0xc3, 0x28]), vec![]),
                true,
            ),
            ("key = \".*\"", "t", record(Some(b""), vec![]), false),
            (
                "header = \"env\"",
                "t",
                record(None, env_null.clone()),
                false,
            ),
            ("header = \"env\"", "t", record(None, vec![]), true),
            (
                "header = \"env\"\nheader_value = \"test\"",
                "t",
                record(None, env_test.clone()),
                false,
            ),
            (
                "header = \"env\"\nheader_value = \"test\"",
                "t",
                record(None, env_prod.clone()),
                true,
            ),
            (
                "header = \"env\"\nheader_value = \"test\"",
                "t",
                record(None, both),
                false,
            ),
            (
                "header = \"env\"\nheader_value = \"test\"",
                "t",
                record(None, both_reversed),
                true,
            ),
            (
                "header = \"env\"\nheader_value = \".*\"",
                "t",
                record(None, env_null),
                true,
            ),
            (
                "header = \"env\"\nheader_value = \".*\"",
                "t",
                record(None, env_binary),
                true,
            ),
            (
                "topic = \"o.*\"\nkey = \"k\"\nheader = \"env\"",
                "orders",
                record(Some(b"k"), env_test.clone()),
                false,
            ),
            (
                "topic = \"o.*\"\nkey = \"k\"\nheader = \"env\"",
                "orders",
                record(Some(b"j"), env_test.clone()),
                true,
            ),
            (
                "topic = \"o.*\"\nkey = \"k\"\nheader = \"env\"\naction = \"keep\"",
                "payments",
                record(Some(b"k"), env_test),
                false,
            ),
        ];
        for (config, topic, record, keep) in cases {
            let filter = filter(config);
            let batch = batch(topic);
            assert_eq!(
                filter.keep(&batch, &record),
                keep,
                "{config} / {topic} / {record:?}"
            );
            assert_eq!(
                filter.filter_batch(&batch, std::slice::from_ref(&record)),
                Ok(vec![keep]),
                "{config} / {topic} / {record:?}"
            );
        }
    }

    #[test]
    fn batches_answer_one_flag_per_record() {
        let filter = filter("key = \"drop-.*\"");
        let records = vec![
            record(Some(b"drop-1"), vec![]),
            record(Some(b"keep-1"), vec![]),
            record(None, vec![]),
            record(Some(b"drop-2"), vec![]),
        ];
        assert_eq!(
            filter.filter_batch(&batch("t"), &records),
            Ok(vec![false, true, true, false])
        );
        let filter = self::filter("topic = \"t\"\naction = \"keep\"");
        assert_eq!(
            filter.filter_batch(&batch("u"), &records),
            Ok(vec![false; 4])
        );
        assert_eq!(filter.filter_batch(&batch("t"), &[]), Ok(vec![]));
    }

    #[test]
    fn config_errors_name_the_key() {
        let cases = [
            ("", "topic, key, header: at least one condition is required"),
            (
                "action = \"keep\"",
                "topic, key, header: at least one condition is required",
            ),
            (
                "topic = \"t\"\naction = \"pass\"",
                "action: expected \"drop\" or \"keep\", found \"pass\"",
            ),
            ("topic = 1", "topic: expected a string, found integer"),
            ("key = \"(\"", "key: regex parse error: unclosed group"),
            ("header_value = \"x\"", "header_value: needs `header`"),
            ("header = \"\"", "header: must not be empty"),
            (
                "topic = \"t\"\ntopics = \"u\"",
                "topics: unknown key; expected one of: action, header, header_value, key, topic",
            ),
        ];
        for (config, message) in cases {
            assert_eq!(config_error(config), message, "{config}");
        }
    }
}
