//! Compares every mirrored partition with its source: record counts and an offset-independent
//! checksum of the records' contents, so a mirror can be checked end to end (`refract verify`,
//! and `refract run --until-caught-up` once it has caught up).
//!
//! What is compared, per source partition and its remote partition:
//! - the records between the low watermark and the high watermark **read when verification
//!   starts** (so a live mirror does not make it chase its tail: records written after the start
//!   are not compared, and a partition still receiving traffic may show a difference that is only
//!   the mirror's lag);
//! - how many records were actually read (the watermarks are printed too; they can differ from
//!   the count when compaction or transaction markers leave gaps in the offsets);
//! - a SHA-256 over every record in offset order: key, value, timestamp (refract preserves it)
//!   and headers in order. Offsets are not hashed (they may legitimately differ between the
//!   clusters), nor the timestamp type; a null key, value or header value hashes differently
//!   from an empty one; the [`PROVENANCE_HEADER`] refract adds is ignored on both sides.
//!
//! Both sides are read `read_committed`: an exactly-once target's aborted records (and a
//! transactional source's) are not compared, as its consumers never see them.
//!
//! A source partition whose log starts later than its remote partition's (retention or a
//! DeleteRecords request removed records on the source only) is compared with the *end* of the
//! remote partition: when the target's last records equal every record the source still holds,
//! the records before them are what the target kept of the deleted ones ([`Deleted`]). With
//! contiguous offsets and a target log that starts at 0, the source offsets between those and
//! the source's log start were deleted before they were mirrored: they are named and counted
//! (`LOST`), and the partition does not match.
//!
//! Two partitions match when both the count read and the checksum are equal (or, as above, the
//! target's end equals the source and nothing is known lost). Heartbeats topics
//! are written continuously by every mirror, so they are left out unless a topic filter is given
//! and names them. Flows with processors are compared as they are: records a processor drops or
//! changes show as differences; so do topics written on both clusters (identity active/active).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};

mod checksum;
mod read;
mod report;

pub use checksum::{Checksum, Sum};
use read::{read_partitions, spawn_reader, PartitionRead, Reader};
pub use report::{Deleted, FlowReport, Missing, PartitionReport, Report, Side};

use refract_config::{names, ClientRole, Cluster, Flow, PatternList, Pipeline};
use refract_plugin::{PluginRuntime, PolicyPlugin, ReplicationPolicy};

use crate::planner::TopicPlanner;
use refract_kafka::clients::{client_config, list_topics, Authenticated, REQUEST_TIMEOUT};

/// How often the progress callback is called while records are read.
const PROGRESS_TICK: Duration = Duration::from_millis(200);
/// How long a side may read nothing new before verification gives up on it.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How far verification is, reported while partitions are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Offsets read so far, source and target together.
    pub read: u64,
    /// Offsets to read in all (high − low watermark of every compared partition, both sides).
    pub total: u64,
    /// Time since verification started.
    pub elapsed: Duration,
}

/// Compares source and target of every mirrored partition of the pipeline's enabled flows (or of
/// the flow named `source->target`), optionally only topics whose source or remote name fully
/// matches `filter`. `progress` is called on the calling thread about every 200 ms while
/// records are read, and once at the end.
pub fn verify(
    pipeline: &Pipeline,
    runtime: &Arc<PluginRuntime>,
    filter: Option<&PatternList>,
    flow: Option<&str>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report> {
    let started = Instant::now();
    let flows = select_flows(pipeline, flow)?;
    // Every watermark is read before any record, so "records present at the start" means the
    // same instant for every flow.
    let mut plans = Vec::new();
    for f in flows {
        plans.push(FlowPlan::capture(pipeline, f, runtime, filter)?);
    }
    let total = plans.iter().map(FlowPlan::offsets).sum();
    let read = AtomicU64::new(0);
    let mut report = Report::default();
    for plan in plans {
        report
            .flows
            .push(plan.run(&read, total, started, progress)?);
    }
    progress(Progress {
        read: read.load(Ordering::Relaxed),
        total,
        elapsed: started.elapsed(),
    });
    Ok(report)
}

fn select_flows<'a>(pipeline: &'a Pipeline, name: Option<&str>) -> Result<Vec<&'a Flow>> {
    let Some(name) = name else {
        return Ok(pipeline.flows.iter().collect());
    };
    let wanted: String = name.chars().filter(|c| !c.is_whitespace()).collect();
    match pipeline.flows.iter().find(|f| f.name() == wanted) {
        Some(f) => Ok(vec![f]),
        None => bail!(
            "{}: no enabled flow `{name}` (enabled flows: {})",
            pipeline.file.display(),
            pipeline
                .flows
                .iter()
                .map(Flow::name)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Mirrored partitions of one flow with their watermarks, and the clients to read them.
struct FlowPlan {
    report: FlowReport,
    source_client: Authenticated<BaseConsumer>,
    target_client: Authenticated<BaseConsumer>,
    /// The target cluster (a second reader of partition ends is made from it).
    target_cluster: Cluster,
    /// (source topic, remote topic, partition, index into `target`).
    entries: Vec<(String, String, i32, Result<usize, Missing>)>,
    source: Vec<PartitionRead>,
    target: Vec<PartitionRead>,
}

fn consumer(cluster: &Cluster, flow: &str) -> Result<Authenticated<BaseConsumer>> {
    client_config(
        cluster,
        ClientRole::Consumer,
        names::VERIFY_GROUP,
        &[],
        &[
            // Partitions are assigned, never subscribed, and nothing is committed.
            ("group.id", names::VERIFY_GROUP),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("enable.partition.eof", "true"),
            // What consumers of an exactly-once target see: committed records only (records
            // of aborted transactions are never compared), whatever the cluster's settings say.
            ("isolation.level", "read_committed"),
            // Records deleted under the reader (retention) must fail verification, not be
            // silently skipped.
            ("auto.offset.reset", "error"),
        ],
    )
    .create()
    .with_context(|| {
        format!(
            "flow {flow}: creating a consumer for cluster {}",
            cluster.alias
        )
    })
}

fn watermarks(client: &BaseConsumer, cluster: &str, topic: &str, p: i32) -> Result<(i64, i64)> {
    client
        .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
        .with_context(|| format!("reading the watermarks of {topic} partition {p} on {cluster}"))
}

impl FlowPlan {
    /// Plans the flow's topics as the mirror does and reads every watermark.
    fn capture(
        pipeline: &Pipeline,
        flow: &Flow,
        runtime: &Arc<PluginRuntime>,
        filter: Option<&PatternList>,
    ) -> Result<Self> {
        let name = flow.name();
        let source_cluster = &pipeline.clusters[&flow.source];
        let target_cluster = &pipeline.clusters[&flow.target];
        let plugin = PolicyPlugin::load(runtime, &flow.policy).with_context(|| {
            format!(
                "{}: {} (flow {name})",
                pipeline.file.display(),
                flow.policy.key
            )
        })?;
        let mut policy = ReplicationPolicy::new(plugin);
        let source_client = consumer(source_cluster, &name)?;
        let target_client = consumer(target_cluster, &name)?;
        let topics = list_topics(&source_client)
            .with_context(|| format!("flow {name}: listing topics on {}", flow.source))?;
        let plan = TopicPlanner::new(flow)
            .plan(&mut policy, &topics)
            .with_context(|| format!("flow {name}: planning topics"))?;
        let remote_partitions: HashMap<String, i32> = list_topics(&target_client)
            .with_context(|| format!("flow {name}: listing topics on {}", flow.target))?
            .into_iter()
            .collect();
        let mut out = Self {
            report: FlowReport {
                flow: name.clone(),
                source: flow.source.clone(),
                target: flow.target.clone(),
                processors: flow.processors.len(),
                translates: flow.schemas.translate(),
                skipped_heartbeats: Vec::new(),
                partitions: Vec::new(),
            },
            source_client,
            target_client,
            target_cluster: target_cluster.clone(),
            entries: Vec::new(),
            source: Vec::new(),
            target: Vec::new(),
        };
        for route in plan.routes {
            let named =
                filter.map(|f| f.matches(&route.source_topic) || f.matches(&route.remote_topic));
            if named == Some(false) {
                continue;
            }
            if named.is_none() && policy.is_heartbeats_topic(&route.source_topic)? {
                out.report.skipped_heartbeats.push(route.source_topic);
                continue;
            }
            let remote_count = remote_partitions.get(&route.remote_topic).copied();
            for p in 0..route.partitions {
                let w = watermarks(&out.source_client, &flow.source, &route.source_topic, p)?;
                out.source
                    .push(PartitionRead::new(&route.source_topic, p, w));
                let target = match remote_count {
                    None => Err(Missing::Topic),
                    Some(n) if n <= p => Err(Missing::Partition(n)),
                    Some(_) => {
                        let w =
                            watermarks(&out.target_client, &flow.target, &route.remote_topic, p)?;
                        out.target
                            .push(PartitionRead::new(&route.remote_topic, p, w));
                        Ok(out.target.len() - 1)
                    }
                };
                out.entries.push((
                    route.source_topic.clone(),
                    route.remote_topic.clone(),
                    p,
                    target,
                ));
            }
        }
        Ok(out)
    }

    /// Offsets to read on both sides.
    fn offsets(&self) -> u64 {
        self.source
            .iter()
            .chain(&self.target)
            .map(PartitionRead::offsets)
            .sum()
    }

    /// Reads both sides at once, reporting progress on this thread.
    fn run(
        mut self,
        counter: &AtomicU64,
        total: u64,
        started: Instant,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<FlowReport> {
        let abort = AtomicBool::new(false);
        let (source_result, target_result) = std::thread::scope(|scope| {
            // The readers hold the only senders: the channel closes when both have returned.
            let (done_tx, done_rx) = mpsc::channel::<()>();
            let source = spawn_reader(
                scope,
                Reader {
                    client: &self.source_client,
                    parts: &mut self.source,
                    cluster: &self.report.source,
                    counter,
                    abort: &abort,
                },
                done_tx.clone(),
            );
            let target = spawn_reader(
                scope,
                Reader {
                    client: &self.target_client,
                    parts: &mut self.target,
                    cluster: &self.report.target,
                    counter,
                    abort: &abort,
                },
                done_tx,
            );
            while let Err(mpsc::RecvTimeoutError::Timeout) = done_rx.recv_timeout(PROGRESS_TICK) {
                progress(Progress {
                    read: counter.load(Ordering::Relaxed),
                    total,
                    elapsed: started.elapsed(),
                });
            }
            (source.join(), target.join())
        });
        for result in [source_result, target_result] {
            match result {
                Ok(r) => r.with_context(|| format!("flow {}", self.report.flow))?,
                Err(_) => bail!("flow {}: a reader thread panicked", self.report.flow),
            }
        }
        let deleted = self.deleted()?;
        for (i, (source_topic, remote_topic, partition, target)) in
            self.entries.into_iter().enumerate()
        {
            self.report.partitions.push(PartitionReport {
                flow: self.report.flow.clone(),
                source_topic,
                remote_topic,
                partition,
                source: self.source[i].side(),
                target: target.map(|t| self.target[t].side()),
                deleted: deleted.get(&i).cloned(),
            });
        }
        Ok(self.report)
    }

    /// For each entry (by index) whose source log starts later than its target's, whose target
    /// holds more records and differs: reads the target's last records (as many as the source
    /// holds) and, when they equal the source's, what the target holds from before ([`Deleted`]).
    fn deleted(&self) -> Result<HashMap<usize, Deleted>> {
        let mut ends = Vec::new();
        let mut which = Vec::new();
        for (i, (_, _, _, target)) in self.entries.iter().enumerate() {
            let (source, Ok(t)) = (&self.source[i], target) else {
                continue;
            };
            let target = &self.target[*t];
            let same =
                target.read == source.read && target.checksum.finish() == source.checksum.finish();
            if same || source.low <= target.low || target.read <= source.read {
                continue;
            }
            let extra = target.read - source.read;
            // With contiguous offsets the source's records are the target's last offsets;
            // otherwise count the records from the start.
            let contiguous =
                i64::try_from(target.read).is_ok_and(|n| n == target.high - target.low);
            let mut end = if contiguous {
                PartitionRead::new(
                    &target.topic,
                    target.partition,
                    (target.high - source.read as i64, target.high),
                )
            } else {
                PartitionRead::new(&target.topic, target.partition, (target.low, target.high))
            };
            if !contiguous {
                end.skip = extra;
            }
            ends.push(end);
            which.push((i, *t, extra));
        }
        if ends.is_empty() {
            return Ok(HashMap::new());
        }
        let client = consumer(&self.target_cluster, &self.report.flow)?;
        read_partitions(Reader {
            client: &client,
            parts: &mut ends,
            cluster: &self.report.target,
            counter: &AtomicU64::new(0),
            abort: &AtomicBool::new(false),
        })
        .with_context(|| {
            format!(
                "flow {}: reading the end of remote partitions",
                self.report.flow
            )
        })?;
        let mut found = HashMap::new();
        for (end, (i, t, held)) in ends.iter().zip(which) {
            let source = &self.source[i];
            if end.read != source.read || end.checksum.finish() != source.checksum.finish() {
                continue;
            }
            let target = &self.target[t];
            let contiguous =
                |p: &PartitionRead| i64::try_from(p.read).is_ok_and(|n| n == p.high - p.low);
            let known = target.low == 0 && contiguous(target) && contiguous(source);
            let held_to = i64::try_from(held).unwrap_or(i64::MAX);
            let lost = (known && held_to < source.low).then(|| (held_to, source.low - 1));
            found.insert(i, Deleted { held, lost, known });
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PROVENANCE_HEADER;
    use refract_kafka::headers::RawHeader;

    type Header<'a> = (&'a str, Option<&'a [u8]>);
    type Rec<'a> = (
        Option<&'a [u8]>,
        Option<&'a [u8]>,
        Option<i64>,
        Vec<Header<'a>>,
    );

    fn sum(records: &[Rec<'_>]) -> Sum {
        let mut c = Checksum::new();
        for (k, v, t, h) in records {
            c.add(
                *k,
                *v,
                *t,
                h.iter().map(|(key, value)| RawHeader {
                    key: key.as_bytes(),
                    value: *value,
                }),
            );
        }
        c.finish()
    }

    fn rec<'a>(k: Option<&'a [u8]>, v: Option<&'a [u8]>, h: Vec<Header<'a>>) -> Rec<'a> {
        (k, v, Some(1_600_000_000_000), h)
    }

    /// Pairs of record runs and whether their checksums must be equal.
    #[test]
    fn checksum_table() {
        let a: &[u8] = b"a";
        let b: &[u8] = b"b";
        let empty: &[u8] = b"";
        let hv: &[u8] = b"x";
        let cases: Vec<(&str, Vec<Rec<'_>>, Vec<Rec<'_>>, bool)> = vec![
            (
                "same records, same sum",
                vec![
                    rec(Some(a), Some(b), vec![("h", Some(hv))]),
                    rec(None, None, vec![]),
                ],
                vec![
                    rec(Some(a), Some(b), vec![("h", Some(hv))]),
                    rec(None, None, vec![]),
                ],
                true,
            ),
            (
                "null key vs empty key",
                vec![rec(None, Some(b), vec![])],
                vec![rec(Some(empty), Some(b), vec![])],
                false,
            ),
            (
                "tombstone vs empty value",
                vec![rec(Some(a), None, vec![])],
                vec![rec(Some(a), Some(empty), vec![])],
                false,
            ),
            (
                "null header value vs empty header value",
                vec![rec(Some(a), Some(b), vec![("h", None)])],
                vec![rec(Some(a), Some(b), vec![("h", Some(empty))])],
                false,
            ),
            (
                "header order matters",
                vec![rec(None, None, vec![("h1", Some(a)), ("h2", Some(b))])],
                vec![rec(None, None, vec![("h2", Some(b)), ("h1", Some(a))])],
                false,
            ),
            (
                "provenance header ignored",
                vec![rec(Some(a), Some(b), vec![("h", Some(hv))])],
                vec![rec(
                    Some(a),
                    Some(b),
                    vec![
                        ("h", Some(hv)),
                        (PROVENANCE_HEADER, Some(b"src".as_slice())),
                    ],
                )],
                true,
            ),
            (
                "provenance header ignored wherever it is, with any value",
                vec![rec(
                    None,
                    Some(b),
                    vec![(PROVENANCE_HEADER, Some(a)), ("h", None)],
                )],
                vec![rec(
                    None,
                    Some(b),
                    vec![("h", None), (PROVENANCE_HEADER, None)],
                )],
                true,
            ),
            (
                "record order matters",
                vec![rec(Some(a), None, vec![]), rec(Some(b), None, vec![])],
                vec![rec(Some(b), None, vec![]), rec(Some(a), None, vec![])],
                false,
            ),
            (
                "key and value bytes do not run together",
                vec![rec(Some(b"ab".as_slice()), Some(b"c".as_slice()), vec![])],
                vec![rec(Some(a), Some(b"bc".as_slice()), vec![])],
                false,
            ),
            (
                "a header is not the next record",
                vec![rec(Some(a), Some(b), vec![("h", Some(hv))])],
                vec![
                    rec(Some(a), Some(b), vec![]),
                    rec(Some(b"h".as_slice()), Some(hv), vec![]),
                ],
                false,
            ),
            (
                "timestamps count",
                vec![(Some(a), Some(b), Some(1), vec![])],
                vec![(Some(a), Some(b), Some(2), vec![])],
                false,
            ),
            (
                "no timestamp vs a timestamp",
                vec![(Some(a), Some(b), None, vec![])],
                vec![(Some(a), Some(b), Some(0), vec![])],
                false,
            ),
            (
                "one record vs none",
                vec![rec(None, None, vec![])],
                vec![],
                false,
            ),
        ];
        for (what, left, right, equal) in cases {
            assert_eq!(sum(&left) == sum(&right), equal, "{what}");
        }
    }

    #[test]
    fn sum_prints_its_first_64_bits() {
        let empty = Checksum::new().finish();
        // SHA-256 of no bytes at all.
        assert_eq!(empty.to_string(), "e3b0c44298fc1c14");
    }

    fn report(matches: &[bool]) -> Report {
        let side = |read| Side {
            low: 0,
            high: read as i64,
            read,
            checksum: Checksum::new().finish(),
        };
        let partitions = matches
            .iter()
            .enumerate()
            .map(|(i, m)| PartitionReport {
                flow: "a->b".into(),
                source_topic: "t".into(),
                remote_topic: "a.t".into(),
                partition: i as i32,
                source: side(1),
                target: Ok(side(if *m { 1 } else { 2 })),
                deleted: None,
            })
            .collect();
        Report {
            flows: vec![FlowReport {
                flow: "a->b".into(),
                source: "a".into(),
                target: "b".into(),
                processors: 0,
                translates: false,
                skipped_heartbeats: vec![],
                partitions,
            }],
        }
    }

    #[test]
    fn report_counts_mismatches_and_missing_partitions() {
        assert!(report(&[]).is_empty());
        assert!(report(&[]).all_match());
        assert!(report(&[true, true]).all_match());
        let r = report(&[true, false]);
        assert_eq!(r.mismatches(), 1);
        assert!(!r.all_match());
        let mut missing = report(&[true]);
        missing.flows[0].partitions[0].target = Err(Missing::Partition(0));
        assert_eq!(missing.mismatches(), 1);
        // A target that ends with the source's records: it matches unless records are known
        // lost.
        let mut kept = report(&[false]);
        kept.flows[0].partitions[0].deleted = Some(Deleted {
            held: 1,
            lost: None,
            known: true,
        });
        assert!(kept.all_match());
        let mut lost = kept.clone();
        lost.flows[0].partitions[0].deleted = Some(Deleted {
            held: 100,
            lost: Some((100, 149)),
            known: true,
        });
        assert_eq!(lost.mismatches(), 1);
        assert_eq!(
            lost.flows[0].partitions[0]
                .deleted
                .as_ref()
                .map(Deleted::lost_count),
            Some(50)
        );
    }
}
