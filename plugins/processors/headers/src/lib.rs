//! refract's `builtin:headers` record transform: removes, renames and adds record headers.
//!
//! ```toml
//! remove = ["debug", "x-internal"]      # headers removed by name (every occurrence)
//! rename = { "trace-id" = "x-trace-id" } # old name = new name
//! replace_existing = false               # adding a name that exists: append (false) or replace
//! [add]
//! x-source = "${source_cluster}/${topic}/${partition}/${offset}"
//! x-target = "${target_topic}"
//! ```
//!
//! The steps run in the order remove, rename, add. A header is renamed at most once, so
//! `rename = { a = "b", b = "c" }` turns `a` into `b` and `b` into `c`. Values of `add` may use
//! `${source_cluster}`, `${topic}`, `${target_topic}`, `${partition}` and `${offset}` (`$$` is a
//! literal `$`); headers are added in name order, after the record's own headers. With
//! `replace_existing = true`, adding a name first removes the headers of that name. Records whose
//! headers come out unchanged are kept as they are.

use refract_plugin_sdk::config::ConfigTable;
use refract_plugin_sdk::template::{Placeholder, Template};
use refract_plugin_sdk::{BatchInfo, Header, Outcome, PluginError, Record, RecordTransform};

/// Config key of the headers to remove.
const REMOVE_KEY: &str = "remove";
/// Config key of the headers to rename.
const RENAME_KEY: &str = "rename";
/// Config key of the headers to add.
const ADD_KEY: &str = "add";
/// Config key of whether added headers replace existing ones.
const REPLACE_EXISTING_KEY: &str = "replace_existing";

/// The variables a value of `add` may use, in [`Placeholder::Variable`] index order.
const VARIABLES: &[&str] = &[
    "source_cluster",
    "topic",
    "target_topic",
    "partition",
    "offset",
];

/// Removes, renames and adds headers.
#[derive(Debug, Clone)]
pub struct Headers {
    /// Names of the headers to remove.
    remove: Vec<String>,
    /// `(old, new)` header names.
    rename: Vec<(String, String)>,
    /// Headers to add, with their value templates, in name order.
    add: Vec<(String, Template)>,
    /// Whether an added header replaces the headers of the same name.
    replace_existing: bool,
}

impl Headers {
    /// The headers `record` gets, or `None` when they stay as they are.
    fn headers_for(&self, batch: &BatchInfo, record: &Record) -> Option<Vec<Header>> {
        let mut headers: Vec<Header> = record
            .headers
            .iter()
            .filter(|header| !self.remove.contains(&header.key))
            .cloned()
            .collect();
        for header in &mut headers {
            if let Some((_, new)) = self.rename.iter().find(|(old, _)| *old == header.key) {
                header.key.clone_from(new);
            }
        }
        for (name, template) in &self.add {
            let value = template.render(|placeholder, out| fill(placeholder, batch, record, out));
            if self.replace_existing {
                headers.retain(|header| header.key != *name);
            }
            headers.push(Header::new(name.clone(), value));
        }
        (headers != record.headers).then_some(headers)
    }
}

/// Appends the value of a variable of [`VARIABLES`] for `record` of `batch`.
fn fill(placeholder: &Placeholder, batch: &BatchInfo, record: &Record, out: &mut String) {
    match placeholder {
        Placeholder::Variable(0) => out.push_str(&batch.source_cluster),
        Placeholder::Variable(1) => out.push_str(&batch.topic),
        Placeholder::Variable(2) => out.push_str(&batch.target_topic),
        Placeholder::Variable(3) => out.push_str(&record.partition.to_string()),
        Placeholder::Variable(4) => out.push_str(&record.offset.to_string()),
        Placeholder::Variable(_) | Placeholder::Header(_) => {}
    }
}

/// Reads a table of header names to strings, rejecting empty names and values that are empty
/// when `non_empty_values` is set.
fn read_names(
    table: &mut ConfigTable,
    key: &str,
    non_empty_values: bool,
) -> Result<Vec<(String, String)>, PluginError> {
    let entries = table.string_table(key)?.unwrap_or_default();
    for (name, value) in &entries {
        let path = format!("{}.{name}", table.key_path(key));
        if name.is_empty() {
            return Err(PluginError::invalid_config(format!(
                "{path}: a header name must not be empty"
            )));
        }
        if non_empty_values && value.is_empty() {
            return Err(PluginError::invalid_config(format!(
                "{path}: a header name must not be empty"
            )));
        }
    }
    Ok(entries)
}

impl RecordTransform for Headers {
    const NAME: &'static str = "builtin:headers";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let mut table = ConfigTable::parse(config)?;
        let remove = table.strings(REMOVE_KEY)?.unwrap_or_default();
        if let Some(index) = remove.iter().position(String::is_empty) {
            return Err(PluginError::invalid_config(format!(
                "{}[{}]: a header name must not be empty",
                table.key_path(REMOVE_KEY),
                index + 1
            )));
        }
        let rename = read_names(&mut table, RENAME_KEY, true)?;
        let add = read_names(&mut table, ADD_KEY, false)?
            .into_iter()
            .map(|(name, value)| {
                Template::parse(&value, VARIABLES, false)
                    .map(|template| (name.clone(), template))
                    .map_err(|reason| {
                        PluginError::invalid_config(format!(
                            "{}.{name}: {reason}",
                            table.key_path(ADD_KEY)
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let replace_existing = table.bool(REPLACE_EXISTING_KEY)?.unwrap_or(false);
        table.finish()?;
        Ok(Self {
            remove,
            rename,
            add,
            replace_existing,
        })
    }

    fn transform(&self, batch: &BatchInfo, record: &Record) -> Outcome {
        match self.headers_for(batch, record) {
            None => Outcome::Keep,
            Some(headers) => Outcome::replace_with(record.to_output().with_headers(headers)),
        }
    }

    fn transform_batch(
        &self,
        batch: &BatchInfo,
        records: Vec<Record>,
    ) -> Result<Vec<Outcome>, PluginError> {
        Ok(records
            .into_iter()
            .map(|record| match self.headers_for(batch, &record) {
                None => Outcome::Keep,
                Some(headers) => Outcome::replace_with(record.into_output().with_headers(headers)),
            })
            .collect())
    }
}

refract_plugin_sdk::export_transform!(Headers);

#[cfg(test)]
mod tests {
    use super::*;
    use refract_plugin_sdk::OutputRecord;

    fn headers(config: &str) -> Headers {
        Headers::from_config(config).unwrap_or_else(|err| panic!("{config}: {err:?}"))
    }

    fn config_error(config: &str) -> String {
        match Headers::from_config(config) {
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

    fn record(headers: Vec<Header>) -> Record {
        Record {
            partition: 2,
            offset: 99,
            timestamp_ms: 5,
            key: Some(vec![0xff, 0x00]),
            value: None,
            headers,
        }
    }

    fn replaced(headers: Vec<Header>) -> Outcome {
        Outcome::Replace(vec![OutputRecord {
            topic: None,
            partition: None,
            timestamp_ms: None,
            key: Some(vec![0xff, 0x00]),
            value: None,
            headers,
        }])
    }

    #[test]
    fn removes_renames_and_adds_in_order() {
        let h = Header::new;
        let cases: Vec<(&str, Vec<Header>, Outcome)> = vec![
            ("", vec![h("a", "1")], Outcome::Keep),
            ("remove = [\"x\"]", vec![h("a", "1")], Outcome::Keep),
            (
                "remove = [\"x\"]",
                vec![h("x", "1"), h("a", "2"), Header::null("x")],
                replaced(vec![h("a", "2")]),
            ),
            (
                "rename = { a = \"b\", b = \"c\" }",
                vec![h("a", "1"), h("b", "2"), Header::null("a")],
                replaced(vec![h("b", "1"), h("c", "2"), Header::null("b")]),
            ),
            ("rename = { a = \"b\" }", vec![h("c", "1")], Outcome::Keep),
            (
                "[add]\nsrc = \"${source_cluster}/${topic}/${partition}/${offset}\"\ndst = \"${target_topic}$$\"",
                vec![h("src", "old")],
                replaced(vec![
                    h("src", "old"),
                    h("dst", "A.orders$"),
                    h("src", "A/orders/2/99"),
                ]),
            ),
            (
                "replace_existing = true\n[add]\nsrc = \"${topic}\"",
                vec![h("src", "old"), h("a", "1"), Header::null("src")],
                replaced(vec![h("a", "1"), h("src", "orders")]),
            ),
            (
                "replace_existing = true\n[add]\nsrc = \"${topic}\"",
                vec![h("a", "1"), h("src", "orders")],
                Outcome::Keep,
            ),
            (
                "remove = [\"b\"]\nrename = { a = \"b\" }\n[add]\nb = \"new\"",
                vec![h("a", "1"), h("b", "2")],
                replaced(vec![h("b", "1"), h("b", "new")]),
            ),
        ];
        for (config, input, outcome) in cases {
            let transform = headers(config);
            let record = record(input);
            assert_eq!(transform.transform(&batch(), &record), outcome, "{config}");
            assert_eq!(
                transform.transform_batch(&batch(), vec![record]),
                Ok(vec![outcome]),
                "{config}"
            );
        }
    }

    #[test]
    fn config_errors_name_the_key() {
        let cases = [
            (
                "remove = \"x\"",
                "remove: expected an array of strings, found string",
            ),
            (
                "remove = [\"x\", \"\"]",
                "remove[2]: a header name must not be empty",
            ),
            (
                "rename = { a = 1 }",
                "rename.a: expected a string, found integer",
            ),
            (
                "rename = { a = \"\" }",
                "rename.a: a header name must not be empty",
            ),
            (
                "[add]\n\"\" = \"x\"",
                "add.: a header name must not be empty",
            ),
            (
                "[add]\nx = \"${key}\"",
                "add.x: unknown placeholder `${key}`; expected one of: ${source_cluster}, ${topic}, ${target_topic}, ${partition}, ${offset}",
            ),
            (
                "replace_existing = \"yes\"",
                "replace_existing: expected a boolean, found string",
            ),
            (
                "removes = []",
                "removes: unknown key; expected one of: add, remove, rename, replace_existing",
            ),
        ];
        for (config, message) in cases {
            assert_eq!(config_error(config), message, "{config}");
        }
    }
}
