//! Helpers on the shared record, header, output and outcome types.

use crate::bindings::refract::plugin::types::{Header, KafkaRecord, Outcome, OutputRecord};

impl Header {
    /// A header named `key` with a value.
    pub fn new(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Self {
            key: key.into(),
            value: Some(value.into()),
        }
    }

    /// A header named `key` with a null value.
    pub fn null(key: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            value: None,
        }
    }

    /// The value as UTF-8 text; `None` when it is null or not UTF-8.
    pub fn value_str(&self) -> Option<&str> {
        self.value
            .as_deref()
            .and_then(|value| std::str::from_utf8(value).ok())
    }
}

impl KafkaRecord {
    /// The last header named `name` (Kafka's `lastHeader`), whatever its value.
    pub fn header_entry(&self, name: &str) -> Option<&Header> {
        self.headers.iter().rev().find(|header| header.key == name)
    }

    /// The value of the last header named `name`; `None` when there is none or its value is null.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.header_entry(name)
            .and_then(|header| header.value.as_deref())
    }

    /// The value of the last header named `name` as UTF-8; `None` when absent, null or not UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header_entry(name).and_then(Header::value_str)
    }

    /// Whether the record has at least one header named `name` (null values count).
    pub fn has_header(&self, name: &str) -> bool {
        self.headers.iter().any(|header| header.key == name)
    }

    /// Every header named `name`, in record order.
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Header> + 'a {
        self.headers.iter().filter(move |header| header.key == name)
    }

    /// The key as UTF-8; `None` when it is null or not UTF-8.
    pub fn key_str(&self) -> Option<&str> {
        self.key
            .as_deref()
            .and_then(|key| std::str::from_utf8(key).ok())
    }

    /// The value as UTF-8; `None` when it is null or not UTF-8.
    pub fn value_str(&self) -> Option<&str> {
        self.value
            .as_deref()
            .and_then(|value| std::str::from_utf8(value).ok())
    }

    /// Whether the value is null (a tombstone on a compacted topic).
    pub fn is_tombstone(&self) -> bool {
        self.value.is_none()
    }

    /// A copy of this record as an output record for the batch's target topic, with the input's
    /// partition and timestamp; change it with the `with_*` methods.
    pub fn to_output(&self) -> OutputRecord {
        OutputRecord {
            topic: None,
            partition: None,
            timestamp_ms: None,
            key: self.key.clone(),
            value: self.value.clone(),
            headers: self.headers.clone(),
        }
    }

    /// This record as an output record, like `to_output` without copying.
    pub fn into_output(self) -> OutputRecord {
        OutputRecord {
            topic: None,
            partition: None,
            timestamp_ms: None,
            key: self.key,
            value: self.value,
            headers: self.headers,
        }
    }
}

impl OutputRecord {
    /// An output record with this key, value and headers, for the batch's target topic with the
    /// input's partition and timestamp.
    pub fn new(key: Option<Vec<u8>>, value: Option<Vec<u8>>, headers: Vec<Header>) -> Self {
        Self {
            topic: None,
            partition: None,
            timestamp_ms: None,
            key,
            value,
            headers,
        }
    }

    /// Sends the record to `topic` instead of the batch's target topic.
    pub fn with_topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = Some(topic.into());
        self
    }

    /// Sends the record to `partition` instead of the input's partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Gives the record this timestamp instead of the input's.
    pub fn with_timestamp_ms(mut self, timestamp_ms: i64) -> Self {
        self.timestamp_ms = Some(timestamp_ms);
        self
    }

    /// Replaces the key (`None` = null).
    pub fn with_key(mut self, key: Option<Vec<u8>>) -> Self {
        self.key = key;
        self
    }

    /// Replaces the value (`None` = null).
    pub fn with_value(mut self, value: Option<Vec<u8>>) -> Self {
        self.value = value;
        self
    }

    /// Replaces all headers.
    pub fn with_headers(mut self, headers: Vec<Header>) -> Self {
        self.headers = headers;
        self
    }

    /// Appends a header with a value.
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push(Header::new(key, value));
        self
    }

    /// Removes every header named `name`.
    pub fn without_header(mut self, name: &str) -> Self {
        self.headers.retain(|header| header.key != name);
        self
    }
}

impl Outcome {
    /// Forwards exactly `record` in place of the input record.
    pub fn replace_with(record: OutputRecord) -> Self {
        Self::Replace(vec![record])
    }

    /// Rejects the input record with `reason`; the host applies the processor's `on_error`.
    pub fn reject(reason: impl Into<String>) -> Self {
        Self::Reject(reason.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: Option<&[u8]>, value: Option<&[u8]>, headers: Vec<Header>) -> KafkaRecord {
        KafkaRecord {
            partition: 3,
            offset: 42,
            timestamp_ms: 1_000,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers,
        }
    }

    #[test]
    fn header_lookup_takes_the_last_header() {
        let r = record(
            None,
            None,
            vec![
                Header::new("env", "prod"),
                Header::null("trace"),
                Header::new("env", "test"),
                Header::new("bin", vec![0xff, 0xfe]),
            ],
        );
        type Case<'a> = (&'a str, Option<&'a [u8]>, Option<&'a str>, bool);
        let cases: [Case; 4] = [
            ("env", Some(b"test"), Some("test"), true),
            ("trace", None, None, true),
            ("bin", Some(&[0xff, 0xfe]), None, true),
            ("absent", None, None, false),
        ];
        for (name, value, text, present) in cases {
            assert_eq!(r.header(name), value, "{name}");
            assert_eq!(r.header_str(name), text, "{name}");
            assert_eq!(r.has_header(name), present, "{name}");
            assert_eq!(r.header_entry(name).is_some(), present, "{name}");
        }
        assert_eq!(r.headers_named("env").count(), 2);
    }

    #[test]
    fn keys_and_values_as_text() {
        let cases: [(Option<&[u8]>, Option<&str>); 4] = [
            (Some(b"k1"), Some("k1")),
            (Some(b""), Some("")),
            (Some(&[0xc3, 0x28]), None),
            (None, None),
        ];
        for (bytes, text) in cases {
            let r = record(bytes, bytes, Vec::new());
            assert_eq!(r.key_str(), text);
            assert_eq!(r.value_str(), text);
            assert_eq!(r.is_tombstone(), bytes.is_none());
        }
    }

    #[test]
    fn outputs_copy_the_record_and_default_the_rest() {
        let r = record(Some(b"k"), None, vec![Header::null("h")]);
        let out = r.to_output();
        assert_eq!(
            out,
            OutputRecord::new(Some(b"k".to_vec()), None, r.headers.clone())
        );
        assert_eq!(out.topic, None);
        assert_eq!(out.partition, None);
        assert_eq!(out.timestamp_ms, None);
        assert_eq!(r.clone().into_output(), out);

        let changed = out
            .with_topic("t2")
            .with_partition(0)
            .with_timestamp_ms(7)
            .with_key(None)
            .with_value(Some(b"v".to_vec()))
            .with_header("a", "1")
            .without_header("h");
        assert_eq!(changed.topic.as_deref(), Some("t2"));
        assert_eq!(changed.partition, Some(0));
        assert_eq!(changed.timestamp_ms, Some(7));
        assert_eq!(changed.key, None);
        assert_eq!(changed.value.as_deref(), Some(b"v".as_slice()));
        assert_eq!(changed.headers, vec![Header::new("a", "1")]);
        assert_eq!(
            Outcome::replace_with(changed.clone()),
            Outcome::Replace(vec![changed])
        );
        assert_eq!(Outcome::reject("bad"), Outcome::Reject("bad".to_owned()));
    }
}
