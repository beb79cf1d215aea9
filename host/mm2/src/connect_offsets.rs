//! MirrorMaker 2's own replication progress, as Kafka Connect stores it: the source offsets of
//! `MirrorSourceConnector` in the Connect worker's offsets topic on the target cluster
//! (`mm2-offsets.<source>.internal` unless `offset.storage.topic` names another), so refract can
//! continue a flow exactly where a stopped MM2 left it.
//!
//! Connect writes one record per source partition each time it flushes its offsets (every
//! `offset.flush.interval.ms`, and when a task stops cleanly), serialised with its internal
//! `JsonConverter` (schemas off):
//!
//! - key: `["MirrorSourceConnector",{"cluster":"<source alias>","partition":P,"topic":"<topic>"}]`
//!   — the connector's name, then MM2's source-partition map (`MirrorUtils.wrapPartition`; JSON
//!   object, so any field order);
//! - value: `{"offset":N}` where `N` is the upstream offset of the last record MM2 replicated
//!   (`MirrorUtils.wrapOffset`); MM2 resumes at `N + 1`. A null value (tombstone, e.g. after a
//!   KIP-875 offset reset) removes the position; a negative `N` means none, as in MM2's
//!   `MirrorSourceTask`.
//!
//! The latest record of a key wins. Records of other connectors (checkpoint and heartbeat
//! connectors share the topic), of other source clusters, and anything that does not parse are
//! ignored (and counted), so a damaged record can only cost a position, never invent one.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::wire::OffsetSync;

/// The connector name MM2's dedicated mode gives its data connector (the class's simple name);
/// the first element of every key [`Mm2Positions`] reads.
pub const SOURCE_CONNECTOR: &str = "MirrorSourceConnector";

/// The Connect offsets topic MM2's dedicated mode uses for flows from `source_alias` when
/// `offset.storage.topic` is not set (`MirrorMakerConfig.workerConfig`).
pub fn default_offsets_topic(source_alias: &str) -> String {
    format!("mm2-offsets.{source_alias}.internal")
}

/// What one record of the offsets topic says about a source partition of the flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetRecord {
    /// MM2 replicated `topic[partition]` up to and including upstream offset `last`.
    Position {
        /// The source topic.
        topic: String,
        /// The source partition.
        partition: i32,
        /// Upstream offset of the last record replicated.
        last: i64,
    },
    /// MM2 has no position for `topic[partition]` (tombstone or negative offset).
    Cleared {
        /// The source topic.
        topic: String,
        /// The source partition.
        partition: i32,
    },
    /// Another connector's record, another source cluster's, or one without a key.
    Other,
    /// A record of the connector that does not parse (named by the reason).
    Malformed(&'static str),
}

/// Parses one record of the Connect offsets topic for the flow from `source_alias`, as written by
/// the connector named `connector` (normally [`SOURCE_CONNECTOR`]).
pub fn parse_record(
    connector: &str,
    source_alias: &str,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> OffsetRecord {
    let Some(key) = key else {
        return OffsetRecord::Other;
    };
    let Ok(key) = serde_json::from_slice::<Value>(key) else {
        return OffsetRecord::Other;
    };
    let Some([name, partition_map]) = key.as_array().map(Vec::as_slice) else {
        return OffsetRecord::Other;
    };
    if name.as_str() != Some(connector) {
        return OffsetRecord::Other;
    }
    let Some(map) = partition_map.as_object() else {
        return OffsetRecord::Malformed("the source partition is not a JSON object");
    };
    if map.get("cluster").and_then(Value::as_str) != Some(source_alias) {
        return OffsetRecord::Other;
    }
    let Some(topic) = map.get("topic").and_then(Value::as_str) else {
        return OffsetRecord::Malformed("the source partition has no string `topic`");
    };
    let Some(partition) = map
        .get("partition")
        .and_then(Value::as_i64)
        .and_then(|p| i32::try_from(p).ok())
        .filter(|p| *p >= 0)
    else {
        return OffsetRecord::Malformed("the source partition has no valid `partition`");
    };
    let topic = topic.to_string();
    let value = match value.map(serde_json::from_slice::<Value>) {
        None | Some(Ok(Value::Null)) => return OffsetRecord::Cleared { topic, partition },
        Some(Ok(v)) => v,
        Some(Err(_)) => return OffsetRecord::Malformed("the value is not JSON"),
    };
    match value.get("offset") {
        Some(Value::Null) | None if value.is_object() => OffsetRecord::Cleared { topic, partition },
        Some(n) => match n.as_i64() {
            Some(last) if last >= 0 => OffsetRecord::Position {
                topic,
                partition,
                last,
            },
            Some(_) => OffsetRecord::Cleared { topic, partition },
            None => OffsetRecord::Malformed("`offset` is not an integer"),
        },
        None => OffsetRecord::Malformed("the value is not a JSON object"),
    }
}

/// The key of `topic[partition]`'s position for the flow from `source_alias`, byte for byte as
/// Connect's `JsonConverter` writes it for `MirrorSourceConnector` (so compaction and MM2 see
/// one key): `["MirrorSourceConnector",{"cluster":"a","partition":0,"topic":"t"}]`.
pub fn position_key(source_alias: &str, topic: &str, partition: i32) -> Vec<u8> {
    // serde_json's map is sorted, which is also the order Connect writes these three fields.
    let key = serde_json::json!([
        SOURCE_CONNECTOR,
        {"cluster": source_alias, "partition": partition, "topic": topic}
    ]);
    serde_json::to_vec(&key).unwrap_or_default()
}

/// The value of a position: `{"offset":N}`, `N` the upstream offset of the last record
/// replicated (a reader resumes at `N + 1`).
pub fn position_value(last: i64) -> Vec<u8> {
    format!("{{\"offset\":{last}}}").into_bytes()
}

/// The partition of the offsets topic a key goes to, as Kafka's Java producer (Connect's)
/// chooses it: `toPositive(murmur2(key)) % partitions`. MM2 and refract then write a source
/// partition's positions to the same partition, where the latest one wins.
pub fn key_partition(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// Kafka's `Utils.murmur2` (the Java client's default key hash).
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The positions MM2 last flushed for one flow's source partitions: the latest record of each
/// key in the Connect offsets topic, read in order.
#[derive(Debug, Clone)]
pub struct Mm2Positions {
    connector: String,
    source_alias: String,
    /// (source topic, partition) → upstream offset of the last record MM2 replicated.
    last: BTreeMap<(String, i32), i64>,
    malformed: u64,
}

impl Mm2Positions {
    /// No positions yet, for the flow from `source_alias` written by MM2's dedicated mode.
    pub fn new(source_alias: &str) -> Self {
        Self::for_connector(SOURCE_CONNECTOR, source_alias)
    }

    /// No positions yet, for a MirrorSourceConnector deployed under another name (a Connect
    /// cluster rather than MM2's dedicated mode).
    pub fn for_connector(connector: &str, source_alias: &str) -> Self {
        Self {
            connector: connector.to_string(),
            source_alias: source_alias.to_string(),
            last: BTreeMap::new(),
            malformed: 0,
        }
    }

    /// Applies the next record of the offsets topic (in offset order within its partition; a key
    /// always lands in the same partition, so the order across partitions does not matter).
    pub fn apply(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) {
        match parse_record(&self.connector, &self.source_alias, key, value) {
            OffsetRecord::Position {
                topic,
                partition,
                last,
            } => {
                self.last.insert((topic, partition), last);
            }
            OffsetRecord::Cleared { topic, partition } => {
                self.last.remove(&(topic, partition));
            }
            OffsetRecord::Other => {}
            OffsetRecord::Malformed(_) => self.malformed += 1,
        }
    }

    /// The upstream offset of the last record MM2 replicated from `topic[partition]`.
    pub fn last_replicated(&self, topic: &str, partition: i32) -> Option<i64> {
        self.last.get(&(topic.to_string(), partition)).copied()
    }

    /// Where MM2 would resume `topic[partition]`: one past the last record it replicated.
    pub fn resume_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        self.last_replicated(topic, partition).map(|n| n + 1)
    }

    /// Every position: ((topic, partition), last replicated upstream offset), ordered.
    pub fn iter(&self) -> impl Iterator<Item = (&(String, i32), &i64)> {
        self.last.iter()
    }

    /// How many source partitions have a position.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether no source partition has a position.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Records of the connector for this source cluster that did not parse.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }
}

/// Picks, from a partition's offset syncs in topic order, the one that best maps upstream offset
/// `last` to the target: the latest at or before it, else the latest of all.
pub fn sync_for<'s>(
    syncs: impl IntoIterator<Item = &'s OffsetSync>,
    last: i64,
) -> Option<&'s OffsetSync> {
    let mut at_or_before = None;
    let mut latest = None;
    for s in syncs {
        if s.upstream_offset <= last {
            at_or_before = Some(s);
        }
        latest = Some(s);
    }
    at_or_before.or(latest)
}

/// How many records of a remote partition that ends at `high` (starting at `low`) MM2 wrote
/// after the record of upstream offset `last`, i.e. what resuming at `last + 1` mirrors again.
/// The target offset of `last` is taken from `sync` as if the offsets between them were
/// contiguous (MM2 mirrors every record, so they are unless the source was compacted or
/// transactional); without a sync, target offsets are assumed equal to source offsets. Never
/// negative, never more than the partition holds.
pub fn duplicates_after(last: i64, sync: Option<&OffsetSync>, low: i64, high: i64) -> u64 {
    let downstream_of_last = match sync {
        Some(s) => s.downstream_offset.saturating_add(last - s.upstream_offset),
        None => last,
    };
    let past = high.saturating_sub(downstream_of_last.saturating_add(1));
    let held = high.saturating_sub(low).max(0);
    u64::try_from(past.clamp(0, held)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    /// Values from Kafka's `Utils.murmur2` and `toPositive(h) % 25` (kafka-clients 4.3.1).
    #[test]
    fn murmur2_and_the_key_partition_match_the_java_client() {
        for (text, hash, partition) in [
            ("21", -973_932_308, 15),
            ("foobar", -790_332_482, 16),
            ("a-little-bit-long-string", -985_981_536, 12),
            ("abc", 479_470_107, 7),
        ] {
            assert_eq!(super::murmur2(text.as_bytes()), hash, "{text}");
            assert_eq!(
                super::key_partition(text.as_bytes(), 25),
                partition,
                "{text}"
            );
        }
        let key = super::position_key("a", "orders", 0);
        assert_eq!(
            key,
            br#"["MirrorSourceConnector",{"cluster":"a","partition":0,"topic":"orders"}]"#
        );
        assert_eq!(super::murmur2(&key), 369_396_270);
        assert_eq!(super::key_partition(&key, 25), 20);
    }

    #[test]
    fn positions_written_read_back() {
        let key = super::position_key("a", "t", 3);
        let value = super::position_value(41);
        let mut positions = super::Mm2Positions::new("a");
        positions.apply(Some(&key), Some(&value));
        assert_eq!(positions.last_replicated("t", 3), Some(41));
        assert_eq!(positions.resume_offset("t", 3), Some(42));
    }

    use super::*;

    fn key(connector: &str, cluster: &str, topic: &str, partition: i64) -> Vec<u8> {
        format!(
            r#"["{connector}",{{"cluster":"{cluster}","partition":{partition},"topic":"{topic}"}}]"#
        )
        .into_bytes()
    }

    fn apply(p: &mut Mm2Positions, k: &[u8], v: Option<&str>) {
        p.apply(Some(k), v.map(str::as_bytes));
    }

    /// A key and value exactly as Kafka 4.3's Connect worker wrote them for MM2's dedicated mode.
    #[test]
    fn parses_what_connect_writes() {
        let k = br#"["MirrorSourceConnector",{"cluster":"a","partition":2,"topic":"orders"}]"#;
        assert_eq!(
            parse_record(SOURCE_CONNECTOR, "a", Some(k), Some(br#"{"offset":41}"#)),
            OffsetRecord::Position {
                topic: "orders".into(),
                partition: 2,
                last: 41
            }
        );
        // any field order, whitespace
        let k = br#" [ "MirrorSourceConnector" , { "topic" : "t.x" , "partition" : 0 , "cluster" : "a" } ] "#;
        assert_eq!(
            parse_record(SOURCE_CONNECTOR, "a", Some(k), Some(br#"{ "offset" : 0 }"#)),
            OffsetRecord::Position {
                topic: "t.x".into(),
                partition: 0,
                last: 0
            }
        );
    }

    #[test]
    fn classifies_other_and_malformed_records() {
        let mine = key(SOURCE_CONNECTOR, "a", "t", 0);
        let v = Some(br#"{"offset":5}"#.as_slice());
        type Case<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, OffsetRecord);
        let other_cluster = key(SOURCE_CONNECTOR, "b", "t", 0);
        let checkpoint_connector =
            br#"["MirrorCheckpointConnector",{"group":"g","partition":0,"topic":"a.t"}]"#;
        let heartbeat_connector =
            br#"["MirrorHeartbeatConnector",{"sourceClusterAlias":"a","targetClusterAlias":"b"}]"#;
        let cleared = || OffsetRecord::Cleared {
            topic: "t".into(),
            partition: 0,
        };
        let cases: Vec<Case<'_>> = vec![
            (None, v, OffsetRecord::Other),
            (Some(b"not json"), v, OffsetRecord::Other),
            (Some(br#"{"a":1}"#), v, OffsetRecord::Other),
            (
                Some(br#"["MirrorSourceConnector"]"#),
                v,
                OffsetRecord::Other,
            ),
            (Some(&other_cluster), v, OffsetRecord::Other),
            (Some(checkpoint_connector), v, OffsetRecord::Other),
            (Some(heartbeat_connector), v, OffsetRecord::Other),
            (
                Some(br#"["MirrorSourceConnector",{"cluster":"a","partition":0}]"#),
                v,
                OffsetRecord::Malformed("the source partition has no string `topic`"),
            ),
            (
                Some(br#"["MirrorSourceConnector",{"cluster":"a","partition":-1,"topic":"t"}]"#),
                v,
                OffsetRecord::Malformed("the source partition has no valid `partition`"),
            ),
            (
                Some(br#"["MirrorSourceConnector",{"cluster":"a","partition":"0","topic":"t"}]"#),
                v,
                OffsetRecord::Malformed("the source partition has no valid `partition`"),
            ),
            (
                Some(br#"["MirrorSourceConnector","a"]"#),
                v,
                OffsetRecord::Malformed("the source partition is not a JSON object"),
            ),
            (Some(&mine), None, cleared()),
            (Some(&mine), Some(b"null"), cleared()),
            (Some(&mine), Some(br#"{"offset":null}"#), cleared()),
            (Some(&mine), Some(br#"{}"#), cleared()),
            (Some(&mine), Some(br#"{"offset":-1}"#), cleared()),
            (
                Some(&mine),
                Some(br#"{"offset":"5"}"#),
                OffsetRecord::Malformed("`offset` is not an integer"),
            ),
            (
                Some(&mine),
                Some(br#"{"offset":5.5}"#),
                OffsetRecord::Malformed("`offset` is not an integer"),
            ),
            (
                Some(&mine),
                Some(b"[5]"),
                OffsetRecord::Malformed("the value is not a JSON object"),
            ),
            (
                Some(&mine),
                Some(b"{"),
                OffsetRecord::Malformed("the value is not JSON"),
            ),
        ];
        for (i, (k, v, want)) in cases.into_iter().enumerate() {
            assert_eq!(parse_record(SOURCE_CONNECTOR, "a", k, v), want, "case {i}");
        }
    }

    #[test]
    fn latest_record_per_partition_wins_and_tombstones_remove() {
        let mut p = Mm2Positions::new("a");
        let (t0, t1, u0) = (
            key(SOURCE_CONNECTOR, "a", "t", 0),
            key(SOURCE_CONNECTOR, "a", "t", 1),
            key(SOURCE_CONNECTOR, "a", "u", 0),
        );
        apply(&mut p, &t0, Some(r#"{"offset":9}"#));
        apply(&mut p, &t1, Some(r#"{"offset":3}"#));
        apply(&mut p, &u0, Some(r#"{"offset":100}"#));
        apply(&mut p, &t0, Some(r#"{"offset":19}"#));
        // a tombstone, then a position again: only what comes last counts
        apply(&mut p, &t1, None);
        apply(&mut p, &u0, None);
        apply(&mut p, &u0, Some(r#"{"offset":7}"#));
        // ignored: another cluster's flow, another connector, garbage
        apply(
            &mut p,
            &key(SOURCE_CONNECTOR, "c", "t", 0),
            Some(r#"{"offset":1}"#),
        );
        apply(&mut p, &key("other", "a", "t", 0), Some(r#"{"offset":1}"#));
        apply(&mut p, &t0, Some("garbage"));
        assert_eq!(p.last_replicated("t", 0), Some(19));
        assert_eq!(p.resume_offset("t", 0), Some(20));
        assert_eq!(p.last_replicated("t", 1), None);
        assert_eq!(p.resume_offset("u", 0), Some(8));
        assert_eq!(p.last_replicated("v", 0), None);
        assert_eq!(p.len(), 2);
        assert!(!p.is_empty());
        assert_eq!(p.malformed(), 1);
        let all: Vec<_> = p.iter().map(|((t, q), n)| (t.as_str(), *q, *n)).collect();
        assert_eq!(all, vec![("t", 0, 19), ("u", 0, 7)]);
        assert!(Mm2Positions::new("a").is_empty());
        let mut named = Mm2Positions::for_connector("mm2-source", "a");
        apply(
            &mut named,
            &key("mm2-source", "a", "t", 0),
            Some(r#"{"offset":4}"#),
        );
        apply(&mut named, &t0, Some(r#"{"offset":5}"#));
        assert_eq!(named.last_replicated("t", 0), Some(4));
    }

    #[test]
    fn default_topic_name() {
        assert_eq!(
            default_offsets_topic("us-east"),
            "mm2-offsets.us-east.internal"
        );
    }

    fn sync(up: i64, down: i64) -> OffsetSync {
        OffsetSync {
            topic: "t".into(),
            partition: 0,
            upstream_offset: up,
            downstream_offset: down,
        }
    }

    #[test]
    fn picks_the_latest_sync_at_or_before_the_position() {
        let syncs = [sync(0, 0), sync(100, 100), sync(150, 150), sync(120, 7)];
        // latest in topic order with upstream <= last, not the largest upstream
        assert_eq!(sync_for(&syncs, 130), Some(&sync(120, 7)));
        assert_eq!(sync_for(&syncs, 110), Some(&sync(100, 100)));
        // all after the position: the latest
        assert_eq!(sync_for(&syncs[2..], 10), Some(&sync(120, 7)));
        assert_eq!(sync_for(&[], 10), None);
    }

    /// (last replicated, sync, low, high, expected duplicates)
    #[test]
    fn counts_records_past_mm2s_position() {
        type Case = (i64, Option<OffsetSync>, i64, i64, u64);
        let cases: &[Case] = &[
            // graceful stop: the target ends just after the last replicated record
            (99, None, 0, 100, 0),
            (99, Some(sync(99, 99)), 0, 100, 0),
            // killed: 30 records written after the last flush
            (99, None, 0, 130, 30),
            (99, Some(sync(0, 0)), 0, 130, 30),
            // a sync written after the flushed position (syncs are sent as records are acked)
            (99, Some(sync(120, 120)), 0, 130, 30),
            // offsets shifted by 1000 on the target (the remote topic held older records)
            (99, Some(sync(50, 1050)), 0, 1110, 10),
            // the target holds less than the position says: nothing, never negative
            (99, None, 0, 50, 0),
            // never more than the partition holds (retention removed the start)
            (10, Some(sync(10, -500)), 0, 20, 20),
            (99, None, 120, 130, 10),
        ];
        for (i, (last, s, low, high, want)) in cases.iter().enumerate() {
            assert_eq!(
                duplicates_after(*last, s.as_ref(), *low, *high),
                *want,
                "case {i}"
            );
        }
    }
}
