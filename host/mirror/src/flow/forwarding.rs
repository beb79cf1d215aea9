//! The data path: fetched records through the processors to the target producer.

use std::borrow::Cow;
use std::time::Duration;

use anyhow::Result;

use rdkafka::consumer::DefaultConsumerContext;
use rdkafka::message::OwnedHeaders;

use tracing::info;

use crate::chain::{HeaderPair, Item};
use crate::degraded::Reason;
use crate::series::RecordEvent;
use refract_kafka::headers::{self as raw_headers, RawHeader};
use refract_kafka::source_queue::{Polled, SourceMessage, SourceQueue};
use refract_schema::{wire, Field, TranslateError};

use super::delivery::Sent;
use super::provenance::{provenance, PROVENANCE_HEADER};
use super::run::Run;
use super::targets::Targets;
use super::{lock, MAX_POLL_BATCH};
use crate::clock::now_ms;
use refract_plugin::cut_head;

/// Longest `refract.error.message` header of a dead letter: the error names the plugin, the
/// call and the limit, and carries at most a few KiB of the plugin's own text.
const DEAD_LETTER_MESSAGE_CAP: usize = 4 << 10;

/// One record to produce.
pub(super) struct Output<'a> {
    pub(super) topic: &'a str,
    pub(super) partition: Option<i32>,
    pub(super) key: Option<&'a [u8]>,
    pub(super) value: Option<&'a [u8]>,
    pub(super) timestamp: Option<i64>,
    pub(super) headers: Option<OwnedHeaders>,
}

impl<'a> Output<'a> {
    pub(super) fn of(item: &'a Item<'_>, partition: Option<i32>, headers: OwnedHeaders) -> Self {
        Self {
            topic: &item.topic,
            partition,
            key: item.key.as_deref(),
            value: item.value.as_deref(),
            timestamp: item.timestamp,
            headers: Some(headers),
        }
    }
}

/// A record polled from the source, waiting for the processor chain.
pub(super) struct Fetched<'m> {
    /// Index of its partition's slot.
    pub(super) slot: usize,
    pub(super) msg: SourceMessage<'m>,
    /// Its provenance stamp, when the flow stamps records.
    pub(super) stamp: Option<Cow<'m, str>>,
}

impl Fetched<'_> {
    /// The record as the chain receives it, borrowing the fetched bytes; the provenance header is
    /// left out when the flow stamps a new one.
    pub(super) fn item<'s>(&'s self, remote: &'s str) -> Item<'s> {
        let msg = &self.msg;
        let restamp = self.stamp.is_some();
        let headers = msg.headers();
        Item {
            offset: msg.offset(),
            topic: Cow::Borrowed(remote),
            partition: msg.partition(),
            timestamp: msg.timestamp().to_millis(),
            key: msg.key().map(Cow::Borrowed),
            value: msg.payload().map(Cow::Borrowed),
            headers: headers
                .map(|h| {
                    h.iter()
                        .filter(|h| !restamp || h.key != PROVENANCE_HEADER.as_bytes())
                        .map(|h| (Cow::Borrowed(h.key), h.value.map(Cow::Borrowed)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

pub(super) fn owned_headers<'h: 'i, 'i>(
    headers: impl Iterator<Item = &'i HeaderPair<'h>>,
    extra: &[(&str, &str)],
) -> OwnedHeaders {
    let capacity = headers.size_hint().0 + extra.len();
    let headers = headers.map(|(k, v)| RawHeader {
        key: k.as_ref(),
        value: v.as_deref(),
    });
    let extra = extra.iter().map(|(k, v)| RawHeader {
        key: k.as_bytes(),
        value: Some(v.as_bytes()),
    });
    raw_headers::copy(headers.chain(extra), capacity, None)
}

impl Run<'_> {
    /// Hands every partition's gathered acknowledgement observations to its series.
    pub(super) fn publish_stats(&self) {
        for tracked in lock(&self.progress).iter_mut() {
            tracked.publish();
        }
    }

    /// Polls up to one batch from the source and hands it to the producer, through the
    /// processor chain when there is one.
    pub(super) fn forward_batch(
        &mut self,
        queue: &SourceQueue<'_, DefaultConsumerContext>,
    ) -> Result<()> {
        let runner = self.runner;
        let mut timeout = Duration::from_millis(100);
        let mut polled = 0u64;
        // Key and value bytes read, for the flow's throttle.
        let mut read_bytes = 0u64;
        let mut pending: Vec<Fetched<'_>> = Vec::new();
        let mut looped = 0u64;
        // Records handed to the producer without a chain (the chain's are counted after it).
        let mut sent = 0u64;
        let mut now = now_ms();
        // Slots whose read metrics gathered something in this batch.
        let mut touched: Vec<usize> = Vec::new();
        // Translated keys and values of the direct path (one buffer each, reused), how many
        // fields were translated, and the slots whose records go through the chain path in this
        // batch (a record that cannot be translated, and every later one of its partition).
        let (mut key_buf, mut value_buf) = (Vec::new(), Vec::new());
        let mut translated = 0u64;
        let mut diverted: Vec<usize> = Vec::new();
        // Under a read rate limit a batch holds what the limit allows now (at least one
        // record), so records arrive smoothly rather than in bursts a second apart.
        let (byte_allowance, record_allowance) = self.throttle.allowance();
        for _ in 0..MAX_POLL_BATCH {
            if polled > 0 && (read_bytes >= byte_allowance || polled >= record_allowance) {
                break;
            }
            let msg = match queue.poll(timeout) {
                None => break,
                // A log or stats event: the wait for records is over (a consumer with nothing
                // assigned may get a stream of them, and waiting the full timeout after each
                // would hold the run loop, its discovery included, for minutes).
                Some(Polled::Other) => {
                    timeout = Duration::ZERO;
                    continue;
                }
                Some(Polled::Error(e)) => {
                    timeout = Duration::ZERO;
                    self.read_failed(e)?;
                    continue;
                }
                Some(Polled::Message(msg)) => msg,
            };
            timeout = Duration::ZERO;
            let Some(i) = self.slots.find(msg.topic(), msg.partition()) else {
                continue;
            };
            let offset = msg.offset();
            let slot = &mut self.slots.slots[i];
            if !slot.health.flowing() {
                continue; // fetched before it was paused: read again on its retry
            }
            if slot.position.is_some_and(|p| offset < p) {
                continue; // already forwarded in this run
            }
            slot.position = Some(offset + 1);
            slot.read = true;
            slot.read_since_lag = true;
            polled += 1;
            read_bytes +=
                (msg.key().map_or(0, <[u8]>::len) + msg.payload().map_or(0, <[u8]>::len)) as u64;
            if slot.metrics.is_some() {
                if slot.read_bytes == 0 && slot.age.is_empty() {
                    touched.push(i);
                }
                slot.read_bytes += msg.payload().map_or(0, <[u8]>::len) as u64;
                if let Some(ts) = msg.timestamp().to_millis() {
                    slot.age.record((now - ts) as f64);
                }
            }
            if polled % 64 == 0 {
                // Serve delivery reports as we go, so acknowledged records leave the producer
                // queue promptly (as a plain consume→produce loop does).
                self.clients.poll_producer(Duration::ZERO);
                now = now_ms();
            }
            // Parsed once per record (the message keeps them for the chain too).
            let headers = msg.headers();
            let stamp = if runner.flow.provenance_header {
                match provenance(headers, &runner.source.alias, &runner.target.alias) {
                    Some(stamp) => Some(stamp),
                    None => {
                        // It came from the target: sending it back would loop.
                        lock(&self.progress)[i].sent(offset, 0);
                        looped += 1;
                        continue;
                    }
                }
            } else {
                None
            };
            if self.chain.is_empty() && !diverted.contains(&i) {
                if lock(&self.progress)[i].failure().is_some() {
                    // Its partition is about to be paused and read again from the failed
                    // record: sending more now would only make duplicates.
                    continue;
                }
                // Schema ids translated here, on the cache-hit path, without the chain's
                // copies; what cannot be translated now is held or handed to the chain.
                let mut ids = (None, None);
                if let Some(t) = runner.schemas.as_deref().filter(|_| slot.translates) {
                    let (topic, remote, last) = (&slot.topic, &slot.remote, &mut slot.last_ids);
                    let found = t
                        .target_id_after(last, topic, remote, Field::Key, msg.key())
                        .and_then(|k| {
                            let v = t.target_id_after(
                                last,
                                topic,
                                remote,
                                Field::Value,
                                msg.payload(),
                            )?;
                            Ok((k, v))
                        });
                    match found {
                        Ok(pair) => ids = pair,
                        Err(TranslateError::Unavailable(why)) => {
                            // Held: paused, rewound to it and retried (see `schemas`).
                            let mut p = lock(&self.progress);
                            p[i].sent(offset, 1);
                            p[i].failed(offset, Reason::SchemaRegistry, why);
                            continue;
                        }
                        Err(TranslateError::Permanent(_)) => {
                            // schema_on_error decides on the chain path; the partition's
                            // later records of this batch follow it there, in order.
                            diverted.push(i);
                            pending.push(Fetched {
                                slot: i,
                                msg,
                                stamp,
                            });
                            continue;
                        }
                    }
                }
                lock(&self.progress)[i].sent(offset, 1);
                let key = match (ids.0, msg.key()) {
                    (Some(id), Some(k)) => {
                        wire::reframe_into(k, id, &mut key_buf);
                        translated += 1;
                        Some(key_buf.as_slice())
                    }
                    (_, k) => k,
                };
                let value = match (ids.1, msg.payload()) {
                    (Some(id), Some(v)) => {
                        wire::reframe_into(v, id, &mut value_buf);
                        translated += 1;
                        Some(value_buf.as_slice())
                    }
                    (_, v) => v,
                };
                // Names are copied as bytes: one that is not UTF-8 is legal and leaves as it came.
                let headers = match &stamp {
                    None => headers.map(|h| raw_headers::copy(h.iter(), h.count(), None)),
                    Some(stamp) => {
                        let copied = raw_headers::copy(
                            headers.iter().flat_map(|h| h.iter()),
                            headers.map_or(0, |h| h.count()) + 1,
                            Some(PROVENANCE_HEADER),
                        );
                        Some(raw_headers::push(
                            copied,
                            PROVENANCE_HEADER.as_bytes(),
                            Some(stamp.as_bytes()),
                        ))
                    }
                };
                let output = Output {
                    topic: &slot.remote,
                    partition: Some(slot.partition),
                    key,
                    value,
                    timestamp: msg.timestamp().to_millis(),
                    headers,
                };
                self.clients.send(Sent::new(i, offset, true), output)?;
                sent += 1;
            } else {
                // Kept as fetched: the chain reads (and usually forwards) these very bytes.
                pending.push(Fetched {
                    slot: i,
                    msg,
                    stamp,
                });
            }
        }
        for i in touched {
            self.slots.slots[i].publish();
        }
        if polled > 0 {
            if let Some(d) = self.slots.source.answered() {
                info!(flow = %self.name, "source reads recovered ({} cleared after {} more failures); mirroring again", d.reason.as_str(), d.retries);
                runner.set_partition_gauge("", None, false);
                self.publish_degraded();
            }
        }
        if let Some(t) = runner.schemas.as_deref() {
            t.count(translated);
        }
        self.throttle.took(read_bytes, polled);
        runner.count(RecordEvent::Sent, sent);
        runner.count(RecordEvent::Looped, looped);
        if !pending.is_empty() {
            self.process(&pending)?;
        }
        Ok(())
    }

    /// Runs polled records through the chain, one source partition at a time, and sends what
    /// comes out: records to their target topics, failures to the dead-letter topic. Records are
    /// handed to the chain borrowed from the fetched messages, not copied.
    pub(super) fn process(&mut self, pending: &[Fetched<'_>]) -> Result<()> {
        let runner = self.runner;
        // Indices into `pending`, per slot, in poll (= offset) order.
        let mut runs: Vec<(usize, Vec<usize>)> = Vec::new();
        for (k, f) in pending.iter().enumerate() {
            match runs.iter_mut().find(|(s, _)| *s == f.slot) {
                Some((_, run)) => run.push(k),
                None => runs.push((f.slot, vec![k])),
            }
        }
        for (i, run) in runs {
            let slot = &self.slots.slots[i];
            let (topic, partition, remote) = (&slot.topic, slot.partition, &slot.remote);
            let offsets: Vec<i64> = run.iter().map(|&k| pending[k].msg.offset()).collect();
            let stamps: Vec<Option<&str>> =
                run.iter().map(|&k| pending[k].stamp.as_deref()).collect();
            if lock(&self.progress)[i].failure().is_some() {
                continue; // read again from the failed record once its partition is retried
            }
            let items: Vec<Item<'_>> = run.iter().map(|&k| pending[k].item(remote)).collect();
            let partitions = self.slots.by_topic.get(topic).map_or(1, Vec::len) as i32;
            let own = self.planner.own();
            let mut target = Targets::new(runner, &self.clients, &self.plan, own, partitions);
            let mut out = self
                .chain
                .run(topic, partition, items, &mut target)
                .map_err(anyhow::Error::new)?;
            let held = match &runner.schemas {
                // Heartbeats are MirrorMaker 2's records: their keys start with byte 0 too.
                Some(_) if self.plan.is_heartbeats(topic) => None,
                Some(t) => self
                    .translate_outputs(t, topic, partition, &mut out)
                    .map_err(anyhow::Error::new)?,
                None => None,
            };
            // Register every output before sending any, so no acknowledgement can arrive for a
            // record the progress does not know yet. Outputs come in source offset order.
            let mut outputs = vec![0u32; offsets.len()];
            for offset in out
                .forward
                .iter()
                .map(|f| f.offset)
                .chain(out.dead.iter().map(|d| d.item.offset))
            {
                if let Ok(j) = offsets.binary_search(&offset) {
                    outputs[j] += 1;
                }
            }
            {
                let mut p = lock(&self.progress);
                for (offset, n) in offsets.iter().zip(&outputs) {
                    match &held {
                        Some(h) if *offset > h.offset => break,
                        // Held for the registry: the partition is paused, rewound to its first
                        // unacknowledged record and read again after its backoff.
                        Some(h) if *offset == h.offset => {
                            p[i].sent(h.offset, 1);
                            p[i].failed(h.offset, Reason::SchemaRegistry, h.why.clone());
                            break;
                        }
                        _ => p[i].sent(*offset, *n),
                    }
                }
            }
            for f in &out.forward {
                if *f.topic != **remote {
                    self.ensure_output_topic(&f.topic, partitions)?;
                }
                let primary = *f.topic == **remote && f.partition == partition;
                let stamp = offsets
                    .binary_search(&f.offset)
                    .ok()
                    .and_then(|j| stamps[j]);
                let headers = match stamp {
                    Some(stamp) => owned_headers(
                        f.headers
                            .iter()
                            .filter(|(k, _)| **k != *PROVENANCE_HEADER.as_bytes()),
                        &[(PROVENANCE_HEADER, stamp)],
                    ),
                    None => owned_headers(f.headers.iter(), &[]),
                };
                self.clients.send(
                    Sent::new(i, f.offset, primary),
                    Output::of(f, Some(f.partition), headers),
                )?;
            }
            if !out.dead.is_empty() {
                self.ensure_output_topic(&runner.flow.delivery.dead_letter_topic, 1)?;
            }
            for d in &out.dead {
                let partition_text = partition.to_string();
                let offset_text = d.item.offset.to_string();
                // The plugin's own text in it is already cut; this bounds the whole header so
                // the dead letter fits the target whatever the plugin wrote.
                let message = cut_head(&d.error, DEAD_LETTER_MESSAGE_CAP);
                let extra = [
                    ("refract.error.plugin", d.plugin.as_str()),
                    ("refract.error.message", &message),
                    ("refract.source.cluster", runner.source.alias.as_str()),
                    ("refract.source.topic", topic.as_str()),
                    ("refract.source.partition", partition_text.as_str()),
                    ("refract.source.offset", offset_text.as_str()),
                ];
                let mut output =
                    Output::of(&d.item, None, owned_headers(d.item.headers.iter(), &extra));
                output.topic = &runner.flow.delivery.dead_letter_topic;
                self.clients
                    .send(Sent::new(i, d.item.offset, false), output)?;
            }
            // Serve delivery reports between runs, as the unprocessed path does while polling.
            self.clients.poll_producer(Duration::ZERO);
            runner.count(RecordEvent::Sent, out.forward.len() as u64);
            runner.count(RecordEvent::Filtered, out.filtered);
            runner.skipped(topic, partition, &out.skipped);
            runner.dead_lettered(topic, partition, &out.dead);
        }
        Ok(())
    }
}
