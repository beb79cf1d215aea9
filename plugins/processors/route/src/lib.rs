//! refract's `builtin:route` record transform: sends records to other topics by header or key.
//!
//! ```toml
//! default = "keep"                      # records no route matches: "keep" (default) or "drop"
//!
//! [[routes]]
//! header = "tenant"                     # a header of this name must be present ...
//! header_value = "acme|globex"          # ... optionally with a value matching this regex
//! topic = "${target_topic}.${header:tenant}"
//!
//! [[routes]]
//! key = "audit-.*"                      # or: full-match regex on the key as UTF-8
//! topic = "audit"
//! ```
//!
//! Routes are tried in order and the first that matches wins. A route needs `header` or `key`
//! (or both, when all given must hold). `topic` may use `${target_topic}`, `${topic}` (the
//! source topic), `${source_cluster}` and `${header:NAME}` (the UTF-8 value of the record's last
//! header `NAME`); `$$` is a literal `$`. A routed record is forwarded as it is (key, value,
//! headers, partition, timestamp) to the rendered topic. A record whose topic cannot be rendered
//! (the header is missing, null or not UTF-8) or is not a legal Kafka topic name is rejected.
//! Matching follows the filter's rules: a null or non-UTF-8 key never matches `key`, and
//! `header_value` is matched against the UTF-8 value of the last header named `header` (a null or
//! non-UTF-8 value never matches).

use refract_plugin_sdk::config::ConfigTable;
use refract_plugin_sdk::template::{Placeholder, Template};
use refract_plugin_sdk::{BatchInfo, Outcome, PluginError, Record, RecordTransform};
use regex::Regex;

/// Config key of the array of routes.
const ROUTES_KEY: &str = "routes";
/// Config key of what happens to records no route matches.
const DEFAULT_KEY: &str = "default";
/// Config key of a route's topic template.
const TOPIC_KEY: &str = "topic";
/// Config key of a route's header name.
const HEADER_KEY: &str = "header";
/// Config key of a route's header value regex.
const HEADER_VALUE_KEY: &str = "header_value";
/// Config key of a route's key regex.
const KEY_KEY: &str = "key";

/// The variables of a topic template, in [`Placeholder::Variable`] index order.
const VARIABLES: &[&str] = &["target_topic", "topic", "source_cluster"];

/// The longest topic name Kafka accepts.
const MAX_TOPIC_LEN: usize = 249;

/// Sends records to the topic of the first route they match.
#[derive(Debug, Clone)]
pub struct Route {
    /// The routes, in order.
    routes: Vec<RouteRule>,
    /// Whether records no route matches are dropped (else kept).
    drop_unmatched: bool,
}

/// One `[[routes]]` entry.
#[derive(Debug, Clone)]
struct RouteRule {
    /// The target topic template.
    topic: Template,
    /// A header that must be present, with an optional full-match regex on its value.
    header: Option<(String, Option<Regex>)>,
    /// Full-match regex on the key as UTF-8.
    key: Option<Regex>,
}

impl RouteRule {
    /// Reads and checks a route, rejecting unknown keys.
    fn from_table(mut table: ConfigTable) -> Result<Self, PluginError> {
        let topic_text = table.required_string(TOPIC_KEY)?;
        let topic = Template::parse(&topic_text, VARIABLES, true)
            .map_err(|reason| table.error(TOPIC_KEY, reason))?;
        if topic.is_literal() {
            check_topic(&topic_text).map_err(|reason| table.error(TOPIC_KEY, reason))?;
        }
        let header_name = table.string(HEADER_KEY)?;
        let header_value = table.full_match_regex(HEADER_VALUE_KEY)?;
        let key = table.full_match_regex(KEY_KEY)?;
        let header = match (header_name, header_value) {
            (Some(name), _) if name.is_empty() => {
                return Err(table.error(HEADER_KEY, "must not be empty"));
            }
            (Some(name), value) => Some((name, value)),
            (None, Some(_)) => return Err(table.error(HEADER_VALUE_KEY, "needs `header`")),
            (None, None) => None,
        };
        if header.is_none() && key.is_none() {
            return Err(PluginError::invalid_config(format!(
                "{}: a route needs `header` or `key`",
                table.path()
            )));
        }
        table.finish()?;
        Ok(Self { topic, header, key })
    }

    /// Whether `record` matches this route.
    fn matches(&self, record: &Record) -> bool {
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

    /// The topic `record` of `batch` goes to, or why there is none.
    fn render(&self, batch: &BatchInfo, record: &Record) -> Result<String, String> {
        let topic = self.topic.try_render(|placeholder, out| {
            match placeholder {
                Placeholder::Variable(0) => out.push_str(&batch.target_topic),
                Placeholder::Variable(1) => out.push_str(&batch.topic),
                Placeholder::Variable(2) => out.push_str(&batch.source_cluster),
                Placeholder::Variable(_) => {}
                Placeholder::Header(name) => match record.header_entry(name) {
                    None => return Err(format!("no header `{name}` for the topic")),
                    Some(header) => match header.value_str() {
                        Some(value) => out.push_str(value),
                        None if header.value.is_none() => {
                            return Err(format!("header `{name}` is null"));
                        }
                        None => return Err(format!("header `{name}` is not UTF-8")),
                    },
                },
            }
            Ok(())
        })?;
        check_topic(&topic).map_err(|reason| format!("topic `{topic}` {reason}"))?;
        Ok(topic)
    }
}

/// Checks that Kafka accepts `topic` as a topic name.
fn check_topic(topic: &str) -> Result<(), String> {
    if topic.is_empty() {
        return Err("is empty".to_owned());
    }
    if topic == "." || topic == ".." {
        return Err("is not a legal topic name".to_owned());
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Err(format!("is longer than {MAX_TOPIC_LEN} characters"));
    }
    match topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        Some(c) => Err(format!(
            "has `{c}`; topic names use ASCII letters, digits, `.`, `_` and `-`"
        )),
        None => Ok(()),
    }
}

impl Route {
    /// The topic `record` goes to: `Some(Ok)` for a route, `Some(Err)` when it cannot be
    /// rendered, `None` when no route matches.
    fn route(&self, batch: &BatchInfo, record: &Record) -> Option<Result<String, String>> {
        self.routes
            .iter()
            .enumerate()
            .find(|(_, rule)| rule.matches(record))
            .map(|(index, rule)| {
                rule.render(batch, record)
                    .map_err(|reason| format!("routes[{}]: {reason}", index + 1))
            })
    }

    /// What happens to records no route matches.
    fn unmatched(&self) -> Outcome {
        if self.drop_unmatched {
            Outcome::Drop
        } else {
            Outcome::Keep
        }
    }
}

impl RecordTransform for Route {
    const NAME: &'static str = "builtin:route";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let mut table = ConfigTable::parse(config)?;
        let routes = table
            .tables(ROUTES_KEY)?
            .ok_or_else(|| table.error(ROUTES_KEY, "missing"))?
            .into_iter()
            .map(RouteRule::from_table)
            .collect::<Result<Vec<_>, _>>()?;
        if routes.is_empty() {
            return Err(table.error(ROUTES_KEY, "has no route"));
        }
        let drop_unmatched = match table.string(DEFAULT_KEY)?.as_deref() {
            None | Some("keep") => false,
            Some("drop") => true,
            Some(other) => {
                return Err(table.error(
                    DEFAULT_KEY,
                    format!("expected \"keep\" or \"drop\", found \"{other}\""),
                ));
            }
        };
        table.finish()?;
        Ok(Self {
            routes,
            drop_unmatched,
        })
    }

    fn transform(&self, batch: &BatchInfo, record: &Record) -> Outcome {
        match self.route(batch, record) {
            None => self.unmatched(),
            Some(Ok(topic)) => Outcome::replace_with(record.to_output().with_topic(topic)),
            Some(Err(reason)) => Outcome::Reject(reason),
        }
    }

    fn transform_batch(
        &self,
        batch: &BatchInfo,
        records: Vec<Record>,
    ) -> Result<Vec<Outcome>, PluginError> {
        Ok(records
            .into_iter()
            .map(|record| match self.route(batch, &record) {
                None => self.unmatched(),
                Some(Ok(topic)) => Outcome::replace_with(record.into_output().with_topic(topic)),
                Some(Err(reason)) => Outcome::Reject(reason),
            })
            .collect())
    }
}

refract_plugin_sdk::export_transform!(Route);

#[cfg(test)]
mod tests {
    use super::*;
    use refract_plugin_sdk::{Header, OutputRecord};

    fn route(config: &str) -> Route {
        Route::from_config(config).unwrap_or_else(|err| panic!("{config}: {err:?}"))
    }

    fn config_error(config: &str) -> String {
        match Route::from_config(config) {
            Err(PluginError::InvalidConfig(message)) => message,
            other => panic!("{config}: not invalid-config: {other:?}"),
        }
    }

    fn batch() -> BatchInfo {
        BatchInfo {
            source_cluster: "A".to_owned(),
            topic: "orders".to_owned(),
            target_topic: "A.orders".to_owned(),
        }
    }

    fn record(key: Option<&[u8]>, headers: Vec<Header>) -> Record {
        Record {
            partition: 4,
            offset: 8,
            timestamp_ms: 15,
            key: key.map(<[u8]>::to_vec),
            value: Some(b"v".to_vec()),
            headers,
        }
    }

    fn routed(record: &Record, topic: &str) -> Outcome {
        Outcome::Replace(vec![OutputRecord {
            topic: Some(topic.to_owned()),
            partition: None,
            timestamp_ms: None,
            key: record.key.clone(),
            value: record.value.clone(),
            headers: record.headers.clone(),
        }])
    }

    const CONFIG: &str = r#"
[[routes]]
header = "tenant"
header_value = "acme|globex"
topic = "${target_topic}.${header:tenant}"

[[routes]]
key = "audit-.*"
topic = "audit"

[[routes]]
header = "region"
topic = "${source_cluster}-${topic}-${header:region}"
"#;

    #[test]
    fn first_matching_route_wins() {
        let h = Header::new;
        let cases: Vec<(Record, Result<&str, ()>)> = vec![
            (record(None, vec![h("tenant", "acme")]), Ok("A.orders.acme")),
            (
                record(Some(b"audit-1"), vec![h("tenant", "globex")]),
                Ok("A.orders.globex"),
            ),
            (
                record(Some(b"audit-1"), vec![h("tenant", "other")]),
                Ok("audit"),
            ),
            (
                record(Some(b"audit-1"), vec![Header::null("tenant")]),
                Ok("audit"),
            ),
            (record(Some(&[0xff]), vec![]), Err(())),
            (record(None, vec![]), Err(())),
            (
                record(Some(b"x"), vec![h("region", "eu")]),
                Ok("A-orders-eu"),
            ),
            (
                record(None, vec![h("tenant", "acme"), h("tenant", "nobody")]),
                Err(()),
            ),
            (
                record(None, vec![h("tenant", "nobody"), h("tenant", "acme")]),
                Ok("A.orders.acme"),
            ),
        ];
        for (config, unmatched) in [
            (CONFIG.to_owned(), Outcome::Keep),
            (format!("default = \"drop\"\n{CONFIG}"), Outcome::Drop),
        ] {
            let transform = route(&config);
            for (record, expected) in &cases {
                let outcome = match expected {
                    Ok(topic) => routed(record, topic),
                    Err(()) => unmatched.clone(),
                };
                assert_eq!(transform.transform(&batch(), record), outcome, "{record:?}");
                assert_eq!(
                    transform.transform_batch(&batch(), vec![record.clone()]),
                    Ok(vec![outcome]),
                    "{record:?}"
                );
            }
        }
    }

    #[test]
    fn unrenderable_topics_are_rejected() {
        let transform = route("[[routes]]\nkey = \".*\"\ntopic = \"t-${header:x}\"\n");
        let h = |name: &str, value: &[u8]| Header::new(name, value);
        let cases = [
            (vec![], "routes[1]: no header `x` for the topic"),
            (vec![Header::null("x")], "routes[1]: header `x` is null"),
            (vec![h("x", &[0xff])], "routes[1]: header `x` is not UTF-8"),
            (
                vec![h("x", b"a b")],
                "routes[1]: topic `t-a b` has ` `; topic names use ASCII letters, digits, `.`, `_` and `-`",
            ),
            (
                vec![h("x", "a".repeat(248).as_bytes())],
                "routes[1]: topic `t-aaaa",
            ),
        ];
        for (headers, reason) in cases {
            let outcome = transform.transform(&batch(), &record(Some(b"k"), headers));
            assert!(
                matches!(&outcome, Outcome::Reject(text) if text.starts_with(reason)),
                "{outcome:?} / {reason}"
            );
        }
        assert_eq!(
            transform.transform(&batch(), &record(Some(b"k"), vec![h("x", b"ok")])),
            routed(&record(Some(b"k"), vec![h("x", b"ok")]), "t-ok")
        );
    }

    #[test]
    fn config_errors_name_the_key() {
        let cases = [
            ("", "routes: missing"),
            ("routes = []", "routes: has no route"),
            ("[[routes]]\nkey = \"k\"", "routes[1].topic: missing"),
            (
                "[[routes]]\ntopic = \"t\"",
                "routes[1]: a route needs `header` or `key`",
            ),
            (
                "[[routes]]\ntopic = \"t\"\nheader_value = \"v\"",
                "routes[1].header_value: needs `header`",
            ),
            (
                "[[routes]]\ntopic = \"t\"\nkey = \"(\"",
                "routes[1].key: regex parse error: unclosed group",
            ),
            (
                "[[routes]]\ntopic = \"a b\"\nkey = \"k\"",
                "routes[1].topic: has ` `; topic names use ASCII letters, digits, `.`, `_` and `-`",
            ),
            (
                "[[routes]]\ntopic = \"\"\nkey = \"k\"",
                "routes[1].topic: is empty",
            ),
            (
                "[[routes]]\ntopic = \"${key}\"\nkey = \"k\"",
                "routes[1].topic: unknown placeholder `${key}`; expected one of: ${target_topic}, ${topic}, ${source_cluster}, ${header:NAME}",
            ),
            (
                "[[routes]]\ntopic = \"t\"\nkey = \"k\"\nvalue = \"v\"",
                "routes[1].value: unknown key; expected one of: header, header_value, key, topic",
            ),
            (
                "default = \"reject\"\n[[routes]]\ntopic = \"t\"\nkey = \"k\"",
                "default: expected \"keep\" or \"drop\", found \"reject\"",
            ),
            (
                "defaults = \"keep\"\n[[routes]]\ntopic = \"t\"\nkey = \"k\"",
                "defaults: unknown key; expected one of: default, routes",
            ),
        ];
        for (config, message) in cases {
            assert_eq!(config_error(config), message, "{config}");
        }
    }
}
