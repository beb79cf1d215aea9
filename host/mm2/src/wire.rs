//! Byte layouts of the records MM2 keeps in its internal topics: offset syncs
//! (`mm2-offset-syncs.<cluster>.internal`), checkpoints (`<source>.checkpoints.internal`) and
//! heartbeats (`heartbeats`).
//!
//! MM2 builds these with Kafka's protocol `Schema` types, so a record is its fields concatenated
//! with no framing or tags: INT16/INT32/INT64 are big-endian, and a STRING is an INT16 byte length
//! followed by that many bytes of UTF-8 (never null, at most 32767 bytes). Checkpoint and heartbeat
//! values start with an INT16 version; offset-sync values have none.
//!
//! Decoding follows what MM2's readers (`OffsetSync.deserializeRecord`,
//! `Checkpoint.deserializeRecord`, `Heartbeat.deserializeRecord`) accept:
//! - Bytes after the last field are ignored, in keys and values alike: `Schema.read` consumes the
//!   declared fields and leaves the rest of the buffer untouched.
//! - A checkpoint or heartbeat value with a version above 0 is read with the version-0 layout.
//!   MM2 checks the version only with a Java `assert`, which is off in production, and Kafka
//!   schemas grow by appending fields, so a newer writer's record still yields its version-0 prefix.
//!
//! Where MM2 is lenient in ways that can only come from corrupt data, refract is stricter and
//! returns a [`WireError`]: a negative version (MM2 would read it as version 0) and invalid UTF-8
//! (MM2 substitutes U+FFFD, which would silently name a different group or topic).

use std::fmt;

/// Most bytes a Kafka STRING can hold: its length prefix is a signed INT16.
const MAX_STRING_BYTES: usize = i16::MAX as usize;

/// Version of the checkpoint and heartbeat value layouts that MM2 writes (and refract writes).
pub const VALUE_VERSION: i16 = 0;

/// The latest upstream→downstream offset pair MM2's source task knows for one source partition;
/// the checkpoint task translates consumer-group offsets with these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetSync {
    /// The topic on the source (upstream) cluster, before any renaming.
    pub topic: String,
    /// The partition, the same number on both clusters.
    pub partition: i32,
    /// Offset of a record on the source partition.
    pub upstream_offset: i64,
    /// Offset the same record got on the target partition.
    pub downstream_offset: i64,
}

/// A consumer group's source position translated into the target cluster: what a consumer that
/// fails over should seek to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The consumer group.
    pub group: String,
    /// The topic on the target (downstream) cluster, i.e. after renaming (`source.topic`).
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The group's committed offset on the source cluster.
    pub upstream_offset: i64,
    /// The translated offset on the target cluster.
    pub downstream_offset: i64,
    /// The metadata the group committed with its offset (`""` when none).
    pub metadata: String,
}

/// Proof of life of a replication flow: written to the `heartbeats` topic of the flow's target
/// cluster and replicated onward like any other topic, so its arrival on a cluster shows which clusters feed it and by how many hops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// Alias of the cluster the heartbeat was emitted for (the flow's source).
    pub source_alias: String,
    /// Alias of the flow's target cluster.
    pub target_alias: String,
    /// When it was emitted, in milliseconds since the Unix epoch.
    pub timestamp: i64,
}

/// Which internal record a [`WireError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// An [`OffsetSync`].
    OffsetSync,
    /// A [`Checkpoint`].
    Checkpoint,
    /// A [`Heartbeat`].
    Heartbeat,
}

impl fmt::Display for RecordKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OffsetSync => "offset sync",
            Self::Checkpoint => "checkpoint",
            Self::Heartbeat => "heartbeat",
        })
    }
}

/// Whether a [`WireError`] is in the record's key or its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPart {
    /// The record key.
    Key,
    /// The record value.
    Value,
}

impl fmt::Display for RecordPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Key => "key",
            Self::Value => "value",
        })
    }
}

/// A record that cannot be encoded or decoded, naming the record type, key or value, and field,
/// e.g. `checkpoint key: topic: truncated (needs 12 bytes, 3 left)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{record} {part}: {field}: {problem}")]
pub struct WireError {
    /// The record type.
    pub record: RecordKind,
    /// Key or value.
    pub part: RecordPart,
    /// The field, by its Rust name (`version` for the value's version prefix).
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: Problem,
}

/// What is wrong with a field (see [`WireError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The input ends before the field does.
    #[error("truncated (needs {needed} bytes, {left} left)")]
    Truncated {
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        left: usize,
    },
    /// A STRING length prefix is negative (a null string, which these records never contain).
    #[error("string length {0} is negative")]
    NegativeLength(i16),
    /// A string to encode is longer than a Kafka STRING can hold.
    #[error("{0} bytes of UTF-8, more than the {MAX_STRING_BYTES} a Kafka STRING can hold")]
    TooLong(usize),
    /// A STRING's bytes are not UTF-8.
    #[error("invalid UTF-8 ({0})")]
    InvalidUtf8(std::str::Utf8Error),
    /// A value's version prefix is negative; versions 0 and above are read as version 0.
    #[error("unsupported version {0}")]
    UnsupportedVersion(i16),
}

impl OffsetSync {
    /// The record key: `topic` STRING, `partition` INT32. Compaction keeps the latest sync per
    /// source partition.
    pub fn key_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut e = Encoder::new(RecordKind::OffsetSync, RecordPart::Key);
        e.string("topic", &self.topic)?;
        e.i32(self.partition);
        Ok(e.out)
    }

    /// The record value: `upstream_offset` INT64, `downstream_offset` INT64, no version prefix.
    pub fn value_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut e = Encoder::new(RecordKind::OffsetSync, RecordPart::Value);
        e.i64(self.upstream_offset);
        e.i64(self.downstream_offset);
        Ok(e.out)
    }

    /// Reads an offset-sync record; trailing bytes are ignored (see the module docs).
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, WireError> {
        let mut k = Decoder::new(RecordKind::OffsetSync, RecordPart::Key, key);
        let topic = k.string("topic")?;
        let partition = k.i32("partition")?;
        let mut v = Decoder::new(RecordKind::OffsetSync, RecordPart::Value, value);
        let upstream_offset = v.i64("upstream_offset")?;
        let downstream_offset = v.i64("downstream_offset")?;
        Ok(Self {
            topic,
            partition,
            upstream_offset,
            downstream_offset,
        })
    }
}

impl Checkpoint {
    /// The record key: `group` STRING, `topic` STRING, `partition` INT32. Compaction keeps the
    /// latest checkpoint per group partition.
    pub fn key_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut e = Encoder::new(RecordKind::Checkpoint, RecordPart::Key);
        e.string("group", &self.group)?;
        e.string("topic", &self.topic)?;
        e.i32(self.partition);
        Ok(e.out)
    }

    /// The record value: version INT16 (0), `upstream_offset` INT64, `downstream_offset` INT64,
    /// `metadata` STRING.
    pub fn value_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut e = Encoder::new(RecordKind::Checkpoint, RecordPart::Value);
        e.i16(VALUE_VERSION);
        e.i64(self.upstream_offset);
        e.i64(self.downstream_offset);
        e.string("metadata", &self.metadata)?;
        Ok(e.out)
    }

    /// Reads a checkpoint record; versions above 0 are read as version 0 and trailing bytes are
    /// ignored (see the module docs).
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, WireError> {
        let mut k = Decoder::new(RecordKind::Checkpoint, RecordPart::Key, key);
        let group = k.string("group")?;
        let topic = k.string("topic")?;
        let partition = k.i32("partition")?;
        let mut v = Decoder::new(RecordKind::Checkpoint, RecordPart::Value, value);
        v.version()?;
        let upstream_offset = v.i64("upstream_offset")?;
        let downstream_offset = v.i64("downstream_offset")?;
        let metadata = v.string("metadata")?;
        Ok(Self {
            group,
            topic,
            partition,
            upstream_offset,
            downstream_offset,
            metadata,
        })
    }
}

impl Heartbeat {
    /// The record key: `source_alias` STRING, `target_alias` STRING. Compaction keeps the latest
    /// heartbeat per flow.
    pub fn key_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut e = Encoder::new(RecordKind::Heartbeat, RecordPart::Key);
        e.string("source_alias", &self.source_alias)?;
        e.string("target_alias", &self.target_alias)?;
        Ok(e.out)
    }

    /// The record value: version INT16 (0), `timestamp` INT64; always 10 bytes.
    pub fn value_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut e = Encoder::new(RecordKind::Heartbeat, RecordPart::Value);
        e.i16(VALUE_VERSION);
        e.i64(self.timestamp);
        Ok(e.out)
    }

    /// Reads a heartbeat record; versions above 0 are read as version 0 and trailing bytes are
    /// ignored (see the module docs).
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, WireError> {
        let mut k = Decoder::new(RecordKind::Heartbeat, RecordPart::Key, key);
        let source_alias = k.string("source_alias")?;
        let target_alias = k.string("target_alias")?;
        let mut v = Decoder::new(RecordKind::Heartbeat, RecordPart::Value, value);
        v.version()?;
        let timestamp = v.i64("timestamp")?;
        Ok(Self {
            source_alias,
            target_alias,
            timestamp,
        })
    }
}

/// Appends protocol primitives to a buffer, attributing failures to one record part.
struct Encoder {
    record: RecordKind,
    part: RecordPart,
    out: Vec<u8>,
}

impl Encoder {
    fn new(record: RecordKind, part: RecordPart) -> Self {
        Self {
            record,
            part,
            out: Vec::with_capacity(32),
        }
    }

    fn i16(&mut self, v: i16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn i32(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn string(&mut self, field: &'static str, s: &str) -> Result<(), WireError> {
        let len = i16::try_from(s.len()).map_err(|_| WireError {
            record: self.record,
            part: self.part,
            field,
            problem: Problem::TooLong(s.len()),
        })?;
        self.i16(len);
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Reads protocol primitives from the front of a buffer, attributing failures to one record part.
struct Decoder<'a> {
    record: RecordKind,
    part: RecordPart,
    rest: &'a [u8],
}

impl<'a> Decoder<'a> {
    fn new(record: RecordKind, part: RecordPart, bytes: &'a [u8]) -> Self {
        Self {
            record,
            part,
            rest: bytes,
        }
    }

    fn error(&self, field: &'static str, problem: Problem) -> WireError {
        WireError {
            record: self.record,
            part: self.part,
            field,
            problem,
        }
    }

    fn truncated(&self, field: &'static str, needed: usize) -> WireError {
        self.error(
            field,
            Problem::Truncated {
                needed,
                left: self.rest.len(),
            },
        )
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], WireError> {
        let (head, tail) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or_else(|| self.truncated(field, N))?;
        self.rest = tail;
        Ok(*head)
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, WireError> {
        self.array(field).map(i16::from_be_bytes)
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, WireError> {
        self.array(field).map(i32::from_be_bytes)
    }

    fn i64(&mut self, field: &'static str) -> Result<i64, WireError> {
        self.array(field).map(i64::from_be_bytes)
    }

    fn string(&mut self, field: &'static str) -> Result<String, WireError> {
        let len = self.i16(field)?;
        let len =
            usize::try_from(len).map_err(|_| self.error(field, Problem::NegativeLength(len)))?;
        if len > self.rest.len() {
            return Err(self.truncated(field, len));
        }
        let (bytes, tail) = self.rest.split_at(len);
        let s = std::str::from_utf8(bytes)
            .map_err(|e| self.error(field, Problem::InvalidUtf8(e)))?
            .to_owned();
        self.rest = tail;
        Ok(s)
    }

    /// Reads a value's version prefix; every non-negative version is read with the version-0
    /// layout, as MM2 does.
    fn version(&mut self) -> Result<(), WireError> {
        let version = self.i16("version")?;
        if version < VALUE_VERSION {
            return Err(self.error("version", Problem::UnsupportedVersion(version)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes from space-separated hex pairs, so expected encodings read like a hex dump.
    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    fn sync(topic: &str, partition: i32, up: i64, down: i64) -> OffsetSync {
        OffsetSync {
            topic: topic.into(),
            partition,
            upstream_offset: up,
            downstream_offset: down,
        }
    }

    fn checkpoint(
        group: &str,
        topic: &str,
        partition: i32,
        up: i64,
        down: i64,
        meta: &str,
    ) -> Checkpoint {
        Checkpoint {
            group: group.into(),
            topic: topic.into(),
            partition,
            upstream_offset: up,
            downstream_offset: down,
            metadata: meta.into(),
        }
    }

    fn heartbeat(source: &str, target: &str, timestamp: i64) -> Heartbeat {
        Heartbeat {
            source_alias: source.into(),
            target_alias: target.into(),
            timestamp,
        }
    }

    fn err(
        record: RecordKind,
        part: RecordPart,
        field: &'static str,
        problem: Problem,
    ) -> WireError {
        WireError {
            record,
            part,
            field,
            problem,
        }
    }

    fn truncated(needed: usize, left: usize) -> Problem {
        Problem::Truncated { needed, left }
    }

    #[test]
    fn offset_sync_golden_bytes() {
        let cases = [
            (
                sync("t", 2, 0, 0),
                "00 01 74 00 00 00 02",
                "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
            ),
            (
                sync("topic-1", 2, 3, 4),
                "00 07 74 6f 70 69 63 2d 31 00 00 00 02",
                "00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 04",
            ),
            (
                sync("t", 0x0102_0304, 0x0102_0304_0506_0708, i64::MAX),
                "00 01 74 01 02 03 04",
                "01 02 03 04 05 06 07 08 7f ff ff ff ff ff ff ff",
            ),
            (
                // "é" is two bytes of UTF-8, "主题" six: the length counts bytes, not characters.
                sync("é主题", -1, -1, 1 << 40),
                "00 08 c3 a9 e4 b8 bb e9 a2 98 ff ff ff ff",
                "ff ff ff ff ff ff ff ff 00 00 01 00 00 00 00 00",
            ),
        ];
        for (s, key, value) in cases {
            assert_eq!(s.key_bytes().unwrap(), hex(key), "{s:?}");
            assert_eq!(s.value_bytes().unwrap(), hex(value), "{s:?}");
            assert_eq!(s.value_bytes().unwrap().len(), 16);
            assert_eq!(OffsetSync::decode(&hex(key), &hex(value)).unwrap(), s);
        }
    }

    #[test]
    fn checkpoint_golden_bytes() {
        let cases = [
            (
                checkpoint("g", "t", 0, 5, 6, ""),
                "00 01 67 00 01 74 00 00 00 00",
                "00 00 00 00 00 00 00 00 00 05 00 00 00 00 00 00 00 06 00 00",
            ),
            (
                // MM2's CheckpointTest example.
                checkpoint("group-1", "topic-2", 3, 4, 5, "metadata-6"),
                "00 07 67 72 6f 75 70 2d 31 00 07 74 6f 70 69 63 2d 32 00 00 00 03",
                "00 00 00 00 00 00 00 00 00 04 00 00 00 00 00 00 00 05 \
                 00 0a 6d 65 74 61 64 61 74 61 2d 36",
            ),
            (
                checkpoint("", "source.主题", 7, 1 << 32, 255, "ü"),
                "00 00 00 0d 73 6f 75 72 63 65 2e e4 b8 bb e9 a2 98 00 00 00 07",
                "00 00 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 ff 00 02 c3 bc",
            ),
        ];
        for (c, key, value) in cases {
            assert_eq!(c.key_bytes().unwrap(), hex(key), "{c:?}");
            assert_eq!(c.value_bytes().unwrap(), hex(value), "{c:?}");
            assert_eq!(Checkpoint::decode(&hex(key), &hex(value)).unwrap(), c);
        }
    }

    #[test]
    fn heartbeat_golden_bytes() {
        let cases = [
            (
                // MM2's HeartbeatTest example.
                heartbeat("source-1", "target-2", 1_234_567_890),
                "00 08 73 6f 75 72 63 65 2d 31 00 08 74 61 72 67 65 74 2d 32",
                "00 00 00 00 00 00 49 96 02 d2",
            ),
            (
                heartbeat("a", "b", 1_700_000_000_000),
                "00 01 61 00 01 62",
                "00 00 00 00 01 8b cf e5 68 00",
            ),
        ];
        for (h, key, value) in cases {
            assert_eq!(h.key_bytes().unwrap(), hex(key), "{h:?}");
            assert_eq!(h.value_bytes().unwrap(), hex(value), "{h:?}");
            assert_eq!(h.value_bytes().unwrap().len(), 10);
            assert_eq!(Heartbeat::decode(&hex(key), &hex(value)).unwrap(), h);
        }
    }

    #[test]
    fn round_trips() {
        let long = "x".repeat(MAX_STRING_BYTES);
        for s in [
            sync("", 0, 0, 0),
            sync(&long, i32::MAX, i64::MAX, i64::MIN),
            sync("mm2-offset-syncs.b.internal", i32::MIN, 42, 43),
        ] {
            let back = OffsetSync::decode(&s.key_bytes().unwrap(), &s.value_bytes().unwrap());
            assert_eq!(back.unwrap(), s);
        }
        for c in [
            checkpoint("", "", 0, 0, 0, ""),
            checkpoint(&long, &long, i32::MAX, i64::MIN, i64::MAX, &long),
            checkpoint("консьюмер", "a.b.c", 9, 10, 11, "{\"k\":1}"),
        ] {
            let back = Checkpoint::decode(&c.key_bytes().unwrap(), &c.value_bytes().unwrap());
            assert_eq!(back.unwrap(), c);
        }
        for h in [
            heartbeat("", "", 0),
            heartbeat(&long, "b", i64::MIN),
            heartbeat("us-west", "us-east", i64::MAX),
        ] {
            let back = Heartbeat::decode(&h.key_bytes().unwrap(), &h.value_bytes().unwrap());
            assert_eq!(back.unwrap(), h);
        }
    }

    #[test]
    fn error_message_names_record_part_and_field() {
        // Group "g", then a topic that claims 12 bytes but has 3.
        let key = hex("00 01 67 00 0c 61 62 63");
        let value = checkpoint("g", "t", 0, 0, 0, "").value_bytes().unwrap();
        let e = Checkpoint::decode(&key, &value).unwrap_err();
        assert_eq!(
            e.to_string(),
            "checkpoint key: topic: truncated (needs 12 bytes, 3 left)"
        );
        let e = OffsetSync::decode(&hex("00 01 74 00 00 00 02"), &hex("00 00")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "offset sync value: upstream_offset: truncated (needs 8 bytes, 2 left)"
        );
        let e = Heartbeat::decode(&hex("00 00 ff fe"), &hex("00 00")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "heartbeat key: target_alias: string length -2 is negative"
        );
    }

    #[test]
    fn encoding_rejects_strings_longer_than_a_kafka_string() {
        use RecordKind as R;
        use RecordPart::*;
        let long = "x".repeat(MAX_STRING_BYTES + 1);
        let too_long = Problem::TooLong(MAX_STRING_BYTES + 1);
        assert_eq!(
            sync(&long, 0, 0, 0).key_bytes().unwrap_err(),
            err(R::OffsetSync, Key, "topic", too_long)
        );
        assert_eq!(
            checkpoint(&long, "t", 0, 0, 0, "").key_bytes().unwrap_err(),
            err(R::Checkpoint, Key, "group", too_long)
        );
        assert_eq!(
            checkpoint("g", &long, 0, 0, 0, "").key_bytes().unwrap_err(),
            err(R::Checkpoint, Key, "topic", too_long)
        );
        assert_eq!(
            checkpoint("g", "t", 0, 0, 0, &long)
                .value_bytes()
                .unwrap_err(),
            err(R::Checkpoint, Value, "metadata", too_long)
        );
        assert_eq!(
            heartbeat(&long, "b", 0).key_bytes().unwrap_err(),
            err(R::Heartbeat, Key, "source_alias", too_long)
        );
        assert_eq!(
            heartbeat("a", &long, 0).key_bytes().unwrap_err(),
            err(R::Heartbeat, Key, "target_alias", too_long)
        );
        // Multi-byte characters count by their UTF-8 bytes: 10923 × 3 bytes = 32769.
        let wide = "主".repeat(10_923);
        assert_eq!(
            sync(&wide, 0, 0, 0).key_bytes().unwrap_err().problem,
            Problem::TooLong(32_769)
        );
        assert!(sync(&"主".repeat(10_922), 0, 0, 0).key_bytes().is_ok());
    }

    #[test]
    fn offset_sync_decode_errors() {
        use RecordKind::OffsetSync as K;
        use RecordPart::*;
        let key = hex("00 01 74 00 00 00 02");
        let value = sync("t", 2, 1, 2).value_bytes().unwrap();
        let cases: Vec<(Vec<u8>, Vec<u8>, WireError)> = vec![
            (
                hex(""),
                value.clone(),
                err(K, Key, "topic", truncated(2, 0)),
            ),
            (
                hex("00"),
                value.clone(),
                err(K, Key, "topic", truncated(2, 1)),
            ),
            (
                hex("00 02 74"),
                value.clone(),
                err(K, Key, "topic", truncated(2, 1)),
            ),
            (
                hex("ff ff"),
                value.clone(),
                err(K, Key, "topic", Problem::NegativeLength(-1)),
            ),
            (
                hex("80 00 74"),
                value.clone(),
                err(K, Key, "topic", Problem::NegativeLength(i16::MIN)),
            ),
            (
                hex("00 01 74 00 00 00"),
                value.clone(),
                err(K, Key, "partition", truncated(4, 3)),
            ),
            (
                key.clone(),
                hex(""),
                err(K, Value, "upstream_offset", truncated(8, 0)),
            ),
            (
                key.clone(),
                value[..15].to_vec(),
                err(K, Value, "downstream_offset", truncated(8, 7)),
            ),
        ];
        for (k, v, expected) in cases {
            assert_eq!(
                OffsetSync::decode(&k, &v).unwrap_err(),
                expected,
                "{k:02x?} {v:02x?}"
            );
        }
        let e = OffsetSync::decode(&hex("00 01 ff 00 00 00 02"), &value).unwrap_err();
        assert!(matches!(e.problem, Problem::InvalidUtf8(_)), "{e}");
        assert_eq!((e.part, e.field), (Key, "topic"));
    }

    #[test]
    fn checkpoint_decode_errors() {
        use RecordKind::Checkpoint as K;
        use RecordPart::*;
        let c = checkpoint("g", "t", 1, 2, 3, "m");
        let key = c.key_bytes().unwrap();
        let value = c.value_bytes().unwrap();
        let cases: Vec<(Vec<u8>, Vec<u8>, WireError)> = vec![
            (
                hex(""),
                value.clone(),
                err(K, Key, "group", truncated(2, 0)),
            ),
            (
                hex("00 03 67"),
                value.clone(),
                err(K, Key, "group", truncated(3, 1)),
            ),
            (
                hex("fe 00"),
                value.clone(),
                err(K, Key, "group", Problem::NegativeLength(-512)),
            ),
            (
                hex("00 01 67"),
                value.clone(),
                err(K, Key, "topic", truncated(2, 0)),
            ),
            (
                hex("00 01 67 ff ff"),
                value.clone(),
                err(K, Key, "topic", Problem::NegativeLength(-1)),
            ),
            (
                hex("00 01 67 00 01 74 00"),
                value.clone(),
                err(K, Key, "partition", truncated(4, 1)),
            ),
            (
                key.clone(),
                hex(""),
                err(K, Value, "version", truncated(2, 0)),
            ),
            (
                key.clone(),
                hex("00"),
                err(K, Value, "version", truncated(2, 1)),
            ),
            (
                key.clone(),
                hex("ff ff"),
                err(K, Value, "version", Problem::UnsupportedVersion(-1)),
            ),
            (
                key.clone(),
                hex("00 00 00"),
                err(K, Value, "upstream_offset", truncated(8, 1)),
            ),
            (
                key.clone(),
                value[..10].to_vec(),
                err(K, Value, "downstream_offset", truncated(8, 0)),
            ),
            (
                key.clone(),
                value[..18].to_vec(),
                err(K, Value, "metadata", truncated(2, 0)),
            ),
            (
                key.clone(),
                value[..20].to_vec(),
                err(K, Value, "metadata", truncated(1, 0)),
            ),
            (
                key.clone(),
                [&value[..18], &hex("ff fb")[..]].concat(),
                err(K, Value, "metadata", Problem::NegativeLength(-5)),
            ),
        ];
        for (k, v, expected) in cases {
            assert_eq!(
                Checkpoint::decode(&k, &v).unwrap_err(),
                expected,
                "{k:02x?} {v:02x?}"
            );
        }
        for (k, v, part, field) in [
            (
                hex("00 01 c3 00 01 74 00 00 00 01"),
                value.clone(),
                Key,
                "group",
            ),
            (
                hex("00 01 67 00 02 c0 af 00 00 00 01"),
                value.clone(),
                Key,
                "topic",
            ),
            (
                key.clone(),
                [&value[..18], &hex("00 01 80")[..]].concat(),
                Value,
                "metadata",
            ),
        ] {
            let e = Checkpoint::decode(&k, &v).unwrap_err();
            assert!(matches!(e.problem, Problem::InvalidUtf8(_)), "{e}");
            assert_eq!((e.part, e.field), (part, field));
        }
    }

    #[test]
    fn heartbeat_decode_errors() {
        use RecordKind::Heartbeat as K;
        use RecordPart::*;
        let h = heartbeat("a", "b", 7);
        let key = h.key_bytes().unwrap();
        let value = h.value_bytes().unwrap();
        let cases: Vec<(Vec<u8>, Vec<u8>, WireError)> = vec![
            (
                hex(""),
                value.clone(),
                err(K, Key, "source_alias", truncated(2, 0)),
            ),
            (
                hex("00 05 61 62"),
                value.clone(),
                err(K, Key, "source_alias", truncated(5, 2)),
            ),
            (
                hex("00 01 61"),
                value.clone(),
                err(K, Key, "target_alias", truncated(2, 0)),
            ),
            (
                hex("00 01 61 00 02 62"),
                value.clone(),
                err(K, Key, "target_alias", truncated(2, 1)),
            ),
            (
                key.clone(),
                hex(""),
                err(K, Value, "version", truncated(2, 0)),
            ),
            (
                key.clone(),
                hex("80 00 00 00 00 00 00 00 00 07"),
                err(K, Value, "version", Problem::UnsupportedVersion(i16::MIN)),
            ),
            (
                key.clone(),
                value[..9].to_vec(),
                err(K, Value, "timestamp", truncated(8, 7)),
            ),
        ];
        for (k, v, expected) in cases {
            assert_eq!(
                Heartbeat::decode(&k, &v).unwrap_err(),
                expected,
                "{k:02x?} {v:02x?}"
            );
        }
        let e = Heartbeat::decode(&hex("00 01 61 00 01 ff"), &value).unwrap_err();
        assert!(matches!(e.problem, Problem::InvalidUtf8(_)), "{e}");
        assert_eq!((e.part, e.field), (Key, "target_alias"));
    }

    #[test]
    fn later_versions_read_as_version_zero_and_trailing_bytes_are_ignored() {
        // As MM2's readers do: they read the version, then the version-0 fields, and stop.
        let c = checkpoint("g", "t", 1, 2, 3, "m");
        let mut key = c.key_bytes().unwrap();
        key.extend_from_slice(&hex("de ad"));
        let mut value = c.value_bytes().unwrap();
        value[..2].copy_from_slice(&hex("00 01"));
        value.extend_from_slice(&hex("00 00 00 00 00 00 00 09"));
        assert_eq!(Checkpoint::decode(&key, &value).unwrap(), c);

        let h = heartbeat("a", "b", 7);
        let mut key = h.key_bytes().unwrap();
        key.push(0);
        let mut value = h.value_bytes().unwrap();
        value[..2].copy_from_slice(&hex("7f ff"));
        value.extend_from_slice(&hex("00 03 61 62 63"));
        assert_eq!(Heartbeat::decode(&key, &value).unwrap(), h);

        let s = sync("t", 2, 3, 4);
        let mut key = s.key_bytes().unwrap();
        key.extend_from_slice(&hex("00 00 00 00"));
        let mut value = s.value_bytes().unwrap();
        value.push(1);
        assert_eq!(OffsetSync::decode(&key, &value).unwrap(), s);
    }
}
