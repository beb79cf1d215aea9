//! refract's `builtin:json-mask` record transform: masks or drops fields of JSON record values.
//!
//! ```toml
//! fields = ["email", "user.ssn", "items.card"]  # dotted paths into JSON objects
//! action = "mask"                              # "mask" (default) or "drop"
//! mask = "***"                                 # with "mask": the string that replaces a value
//! on_invalid = "keep"                          # value not JSON: "keep" (default) or "reject"
//! ```
//!
//! Each path is followed from the top of the value; arrays met on the way (also at the top) are
//! traversed element by element. With `mask` the field's value becomes the `mask` string,
//! whatever its JSON type; with `drop` the field is removed. Key, headers, partition and timestamp
//! are kept. A value that has none of the fields, and a null value (tombstone), are kept as they
//! are. A changed value is written back as compact JSON with the object's field order kept.

use refract_plugin_sdk::config::ConfigTable;
use refract_plugin_sdk::{BatchInfo, Outcome, PluginError, Record, RecordTransform};
use serde_json::Value;

/// Config key of the field paths.
const FIELDS_KEY: &str = "fields";
/// Config key of what happens to a field.
const ACTION_KEY: &str = "action";
/// Config key of the mask string.
const MASK_KEY: &str = "mask";
/// Config key of what happens to a value that is not JSON.
const ON_INVALID_KEY: &str = "on_invalid";

/// Masks or drops fields of JSON values.
#[derive(Debug, Clone)]
pub struct JsonMask {
    /// The field paths, split at `.`.
    fields: Vec<Vec<String>>,
    /// The string that replaces a field's value; `None` drops the field.
    mask: Option<String>,
    /// Whether a value that is not JSON is rejected (else kept).
    reject_invalid: bool,
}

impl JsonMask {
    /// The new value for `value`, `Ok(None)` when it stays as it is, `Err` when it is not JSON.
    fn mask_value(&self, value: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let mut json: Value =
            serde_json::from_slice(value).map_err(|err| format!("value is not JSON: {err}"))?;
        let mut changed = false;
        for path in &self.fields {
            changed |= self.apply(&mut json, path);
        }
        if !changed {
            return Ok(None);
        }
        serde_json::to_vec(&json)
            .map(Some)
            .map_err(|err| format!("cannot write the masked value: {err}"))
    }

    /// Masks or drops the field at `path` under `json`; whether anything changed.
    fn apply(&self, json: &mut Value, path: &[String]) -> bool {
        let Some((first, rest)) = path.split_first() else {
            return false;
        };
        match json {
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, item| self.apply(item, path) | changed),
            Value::Object(object) if rest.is_empty() => match &self.mask {
                Some(mask) => match object.get_mut(first.as_str()) {
                    Some(field) => {
                        *field = Value::String(mask.clone());
                        true
                    }
                    None => false,
                },
                None => object.shift_remove(first.as_str()).is_some(),
            },
            Value::Object(object) => object
                .get_mut(first.as_str())
                .is_some_and(|child| self.apply(child, rest)),
            _ => false,
        }
    }

    /// The outcome for a record with this value.
    fn outcome(&self, value: Option<&[u8]>) -> Result<Option<Vec<u8>>, Outcome> {
        let Some(value) = value else {
            return Err(Outcome::Keep);
        };
        match self.mask_value(value) {
            Ok(Some(masked)) => Ok(Some(masked)),
            Ok(None) => Err(Outcome::Keep),
            Err(reason) if self.reject_invalid => Err(Outcome::Reject(reason)),
            Err(_) => Err(Outcome::Keep),
        }
    }
}

impl RecordTransform for JsonMask {
    const NAME: &'static str = "builtin:json-mask";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let mut table = ConfigTable::parse(config)?;
        let paths = table
            .strings(FIELDS_KEY)?
            .ok_or_else(|| table.error(FIELDS_KEY, "missing"))?;
        if paths.is_empty() {
            return Err(table.error(FIELDS_KEY, "names no field"));
        }
        let mut fields = Vec::with_capacity(paths.len());
        for (index, path) in paths.iter().enumerate() {
            let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
            if segments.iter().any(String::is_empty) {
                return Err(PluginError::invalid_config(format!(
                    "{}[{}]: `{path}` has an empty segment",
                    table.key_path(FIELDS_KEY),
                    index + 1
                )));
            }
            fields.push(segments);
        }
        let drop = match table.string(ACTION_KEY)?.as_deref() {
            None | Some("mask") => false,
            Some("drop") => true,
            Some(other) => {
                return Err(table.error(
                    ACTION_KEY,
                    format!("expected \"mask\" or \"drop\", found \"{other}\""),
                ));
            }
        };
        let mask = table.string(MASK_KEY)?;
        if drop && mask.is_some() {
            return Err(table.error(MASK_KEY, "has no use with action = \"drop\""));
        }
        let reject_invalid = match table.string(ON_INVALID_KEY)?.as_deref() {
            None | Some("keep") => false,
            Some("reject") => true,
            Some(other) => {
                return Err(table.error(
                    ON_INVALID_KEY,
                    format!("expected \"keep\" or \"reject\", found \"{other}\""),
                ));
            }
        };
        table.finish()?;
        Ok(Self {
            fields,
            mask: (!drop).then(|| mask.unwrap_or_else(|| "***".to_owned())),
            reject_invalid,
        })
    }

    fn transform(&self, _batch: &BatchInfo, record: &Record) -> Outcome {
        match self.outcome(record.value.as_deref()) {
            Ok(value) => Outcome::replace_with(record.to_output().with_value(value)),
            Err(outcome) => outcome,
        }
    }

    fn transform_batch(
        &self,
        _batch: &BatchInfo,
        records: Vec<Record>,
    ) -> Result<Vec<Outcome>, PluginError> {
        Ok(records
            .into_iter()
            .map(|record| match self.outcome(record.value.as_deref()) {
                Ok(value) => Outcome::replace_with(record.into_output().with_value(value)),
                Err(outcome) => outcome,
            })
            .collect())
    }
}

refract_plugin_sdk::export_transform!(JsonMask);

#[cfg(test)]
mod tests {
    use super::*;
    use refract_plugin_sdk::{Header, OutputRecord};

    fn mask(config: &str) -> JsonMask {
        JsonMask::from_config(config).unwrap_or_else(|err| panic!("{config}: {err:?}"))
    }

    fn config_error(config: &str) -> String {
        match JsonMask::from_config(config) {
            Err(PluginError::InvalidConfig(message)) => message,
            other => panic!("{config}: not invalid-config: {other:?}"),
        }
    }

    fn record(value: Option<&[u8]>) -> Record {
        Record {
            partition: 1,
            offset: 10,
            timestamp_ms: 1_234,
            key: Some(vec![0xfe]),
            value: value.map(<[u8]>::to_vec),
            headers: vec![Header::null("h")],
        }
    }

    fn replaced(value: &str) -> Outcome {
        Outcome::Replace(vec![OutputRecord {
            topic: None,
            partition: None,
            timestamp_ms: None,
            key: Some(vec![0xfe]),
            value: Some(value.as_bytes().to_vec()),
            headers: vec![Header::null("h")],
        }])
    }

    #[test]
    fn masks_and_drops_fields() {
        let fields = "fields = [\"email\", \"user.ssn\", \"items.card\"]\n";
        let masked = fields.to_owned();
        let dropped = format!("{fields}action = \"drop\"");
        let custom = format!("{fields}mask = \"#\"");
        let cases: Vec<(&str, &[u8], Outcome)> = vec![
            (
                &masked,
                br#"{"z":1,"email":"a@b","y":2}"#,
                replaced(r#"{"z":1,"email":"***","y":2}"#),
            ),
            (
                &custom,
                br#"{"email":{"x":[1]}}"#,
                replaced(r##"{"email":"#"}"##),
            ),
            (
                &masked,
                br#"{"email":null,"n":12345678901234567890}"#,
                replaced(r#"{"email":"***","n":12345678901234567890}"#),
            ),
            (
                &dropped,
                br#"{"z":1,"email":"a@b","y":2}"#,
                replaced(r#"{"z":1,"y":2}"#),
            ),
            (
                &masked,
                br#"{"user":{"name":"n","ssn":123}}"#,
                replaced(r#"{"user":{"name":"n","ssn":"***"}}"#),
            ),
            (
                &dropped,
                br#"{"user":{"ssn":123,"name":"n"}}"#,
                replaced(r#"{"user":{"name":"n"}}"#),
            ),
            (&masked, br#"{"user":"ssn"}"#, Outcome::Keep),
            (
                &masked,
                br#"{"name":"n","user":{"name":"n"}}"#,
                Outcome::Keep,
            ),
            (
                &masked,
                br#"{"items":[{"card":"1"},{"id":2},{"card":"3"},7,[{"card":4}]]}"#,
                replaced(
                    r#"{"items":[{"card":"***"},{"id":2},{"card":"***"},7,[{"card":"***"}]]}"#,
                ),
            ),
            (
                &dropped,
                br#"[{"email":"a"},{"email":"b","k":1}]"#,
                replaced(r#"[{},{"k":1}]"#),
            ),
            (&masked, b"42", Outcome::Keep),
            (&masked, b"\"email\"", Outcome::Keep),
            (
                &masked,
                b" { \"email\" : \"\\u00e9\" } ",
                replaced(r#"{"email":"***"}"#),
            ),
            (&masked, b"not json", Outcome::Keep),
            (&masked, &[0xff, 0xfe], Outcome::Keep),
        ];
        for (config, value, outcome) in cases {
            let transform = mask(config);
            let record = record(Some(value));
            let shown = String::from_utf8_lossy(value).into_owned();
            assert_eq!(
                transform.transform(&BatchInfo::default(), &record),
                outcome,
                "{config} / {shown}"
            );
            assert_eq!(
                transform.transform_batch(&BatchInfo::default(), vec![record]),
                Ok(vec![outcome]),
                "{config} / {shown}"
            );
        }
    }

    #[test]
    fn tombstones_and_invalid_values() {
        let keep = mask("fields = [\"a\"]");
        let reject = mask("fields = [\"a\"]\non_invalid = \"reject\"");
        for transform in [&keep, &reject] {
            assert_eq!(
                transform.transform(&BatchInfo::default(), &record(None)),
                Outcome::Keep
            );
        }
        assert_eq!(
            keep.transform(&BatchInfo::default(), &record(Some(b"{"))),
            Outcome::Keep
        );
        for value in [b"{".as_slice(), b"{\"a\":1} x", &[0xff]] {
            let outcome = reject.transform(&BatchInfo::default(), &record(Some(value)));
            assert!(
                matches!(&outcome, Outcome::Reject(reason) if reason.starts_with("value is not JSON: ")),
                "{outcome:?}"
            );
        }
        assert_eq!(
            reject.transform(&BatchInfo::default(), &record(Some(b"{\"b\":1}"))),
            Outcome::Keep
        );
    }

    #[test]
    fn config_errors_name_the_key() {
        let cases = [
            ("", "fields: missing"),
            ("fields = []", "fields: names no field"),
            (
                "fields = [\"a\", \"b..c\"]",
                "fields[2]: `b..c` has an empty segment",
            ),
            ("fields = [\"\"]", "fields[1]: `` has an empty segment"),
            (
                "fields = [1]",
                "fields[1]: expected a string, found integer",
            ),
            (
                "fields = [\"a\"]\naction = \"hash\"",
                "action: expected \"mask\" or \"drop\", found \"hash\"",
            ),
            (
                "fields = [\"a\"]\naction = \"drop\"\nmask = \"x\"",
                "mask: has no use with action = \"drop\"",
            ),
            (
                "fields = [\"a\"]\non_invalid = \"drop\"",
                "on_invalid: expected \"keep\" or \"reject\", found \"drop\"",
            ),
            (
                "fields = [\"a\"]\nfield = \"b\"",
                "field: unknown key; expected one of: action, fields, mask, on_invalid",
            ),
        ];
        for (config, message) in cases {
            assert_eq!(config_error(config), message, "{config}");
        }
    }
}
