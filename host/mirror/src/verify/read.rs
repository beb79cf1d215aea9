//! Reading one side of a flow's partitions, from the low to the high watermark each had when
//! verification started, into their checksums.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::checksum::Checksum;
use super::report::Side;
use super::STALL_TIMEOUT;

/// One partition on one cluster, being read from its low to its high watermark.
pub(super) struct PartitionRead {
    pub(super) topic: String,
    pub(super) partition: i32,
    pub(super) low: i64,
    pub(super) high: i64,
    /// Next offset expected; progress is counted in offsets so gaps still reach 100%.
    pub(super) position: i64,
    /// Records to pass over before hashing (reading a partition's end only).
    pub(super) skip: u64,
    pub(super) read: u64,
    pub(super) checksum: Checksum,
    pub(super) finished: bool,
}

impl PartitionRead {
    pub(super) fn new(topic: &str, partition: i32, (low, high): (i64, i64)) -> Self {
        Self {
            topic: topic.to_string(),
            partition,
            low,
            high,
            position: low,
            skip: 0,
            read: 0,
            checksum: Checksum::new(),
            finished: high <= low,
        }
    }

    pub(super) fn offsets(&self) -> u64 {
        (self.high - self.low).max(0) as u64
    }

    pub(super) fn side(&self) -> Side {
        Side {
            low: self.low,
            high: self.high,
            read: self.read,
            checksum: self.checksum.finish(),
        }
    }

    /// Moves the position to `to` (capped at the high watermark) and counts the offsets passed.
    pub(super) fn advance(&mut self, to: i64, counter: &AtomicU64) {
        let to = to.min(self.high);
        if to > self.position {
            counter.fetch_add((to - self.position) as u64, Ordering::Relaxed);
            self.position = to;
        }
        if self.position >= self.high {
            self.finished = true;
        }
    }
}

/// One side of a flow to read: a cluster's partitions and the counters shared with the other side.
pub(super) struct Reader<'a> {
    pub(super) client: &'a BaseConsumer,
    pub(super) parts: &'a mut [PartitionRead],
    pub(super) cluster: &'a str,
    /// Offsets read, both sides together.
    pub(super) counter: &'a AtomicU64,
    /// Set by a side that failed, so the other stops too.
    pub(super) abort: &'a AtomicBool,
}

/// Runs `reader` on a thread of `scope`; `done` is dropped when it returns.
pub(super) fn spawn_reader<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    reader: Reader<'env>,
    done: mpsc::Sender<()>,
) -> std::thread::ScopedJoinHandle<'scope, Result<()>> {
    scope.spawn(move || {
        let _done = done;
        let abort = reader.abort;
        let result = read_partitions(reader);
        if result.is_err() {
            abort.store(true, Ordering::Relaxed);
        }
        result
    })
}

/// Reads every partition from its low to its high watermark into its checksum.
pub(super) fn read_partitions(reader: Reader<'_>) -> Result<()> {
    let Reader {
        client,
        parts,
        cluster,
        counter,
        abort,
    } = reader;
    let mut index: HashMap<String, Vec<Option<usize>>> = HashMap::new();
    let mut tpl = TopicPartitionList::new();
    for (i, p) in parts.iter().enumerate() {
        if p.finished {
            continue;
        }
        let slots = index.entry(p.topic.clone()).or_default();
        let n = p.partition as usize;
        if slots.len() <= n {
            slots.resize(n + 1, None);
        }
        slots[n] = Some(i);
        tpl.add_partition_offset(&p.topic, p.partition, Offset::Offset(p.low))
            .with_context(|| format!("assigning {} partition {}", p.topic, p.partition))?;
    }
    if tpl.count() == 0 {
        return Ok(());
    }
    client
        .assign(&tpl)
        .with_context(|| format!("assigning partitions on {cluster}"))?;
    let mut last_progress = Instant::now();
    while parts.iter().any(|p| !p.finished) {
        if abort.load(Ordering::Relaxed) {
            // The other side failed; its error is the one reported.
            return Ok(());
        }
        let before = counter.load(Ordering::Relaxed);
        match client.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let found = index
                    .get(m.topic())
                    .and_then(|s| s.get(m.partition() as usize).copied().flatten());
                if let Some(i) = found {
                    let part = &mut parts[i];
                    if !part.finished && m.offset() < part.high {
                        if part.skip > 0 {
                            part.skip -= 1;
                        } else {
                            part.checksum.add_message(&m);
                            part.read += 1;
                        }
                    }
                    part.advance(m.offset() + 1, counter);
                    if part.finished {
                        pause(client, part);
                    }
                }
            }
            // End of a partition's log (which partition of which topic librdkafka does not
            // say): a partition whose fetch position passed its high watermark is done, even
            // when the last offsets were gaps (transaction markers, compaction).
            Some(Err(KafkaError::PartitionEOF(_))) | None => {
                finish_by_position(client, parts, &index, counter)?
            }
            Some(Err(e)) => bail!("reading from {cluster}: {e}"),
        }
        if counter.load(Ordering::Relaxed) != before {
            last_progress = Instant::now();
        } else if last_progress.elapsed() > STALL_TIMEOUT {
            let stuck: Vec<String> = parts
                .iter()
                .filter(|p| !p.finished)
                .map(|p| {
                    format!(
                        "{} partition {} at offset {} of {}",
                        p.topic, p.partition, p.position, p.high
                    )
                })
                .collect();
            bail!(
                "reading from {cluster}: nothing read for {}s; stuck: {}",
                STALL_TIMEOUT.as_secs(),
                stuck.join(", ")
            );
        }
    }
    Ok(())
}

pub(super) fn finish_by_position(
    client: &BaseConsumer,
    parts: &mut [PartitionRead],
    index: &HashMap<String, Vec<Option<usize>>>,
    counter: &AtomicU64,
) -> Result<()> {
    let positions = client.position().context("reading fetch positions")?;
    for e in positions.elements() {
        let Offset::Offset(at) = e.offset() else {
            continue;
        };
        let found = index
            .get(e.topic())
            .and_then(|s| s.get(e.partition() as usize).copied().flatten());
        if let Some(i) = found {
            let part = &mut parts[i];
            if !part.finished && at >= part.high {
                part.advance(at, counter);
                pause(client, part);
            }
        }
    }
    Ok(())
}

/// Stops fetching a finished partition, so a live topic is not read past its high watermark.
pub(super) fn pause(client: &BaseConsumer, part: &PartitionRead) {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(&part.topic, part.partition);
    // Only an optimisation: records past the high watermark are ignored anyway.
    let _ = client.pause(&tpl);
}
