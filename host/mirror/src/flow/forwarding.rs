//! The data path: fetched records through the processors to the target producer.

use std::borrow::Cow;
use std::time::Duration;

use anyhow::Result;

use rdkafka::consumer::DefaultConsumerContext;
use rdkafka::message::{Header, Headers, OwnedHeaders};

use tracing::info;

use crate::chain::{Chain, HeaderPair, Item};
use crate::source_queue::{Polled, SourceMessage, SourceQueue};
use refract_telemetry::RecordEvent;

use anyhow::bail;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;

use crate::degraded::Reason;

use super::delivery::{describe, poll_producer, Clients, Progress, Sent, Token};
use super::provenance::{provenance, PROVENANCE_HEADER};
use super::slots::Slots;
use super::{lock, FlowRunner, MAX_POLL_BATCH, NO_SLOT};
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
                        .filter(|h| !restamp || h.key != PROVENANCE_HEADER)
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
    let mut out = OwnedHeaders::new_with_capacity(headers.size_hint().0 + extra.len());
    for (k, v) in headers {
        out = out.insert(Header {
            key: k,
            value: v.as_deref(),
        });
    }
    for (k, v) in extra {
        out = out.insert(Header {
            key: k,
            value: Some(v.as_bytes()),
        });
    }
    out
}

/// Hands every partition's gathered acknowledgement observations to its series.
pub(super) fn publish_stats(progress: &Progress) {
    for tracked in lock(progress).iter_mut() {
        tracked.publish();
    }
}

/// Hands one record to the producer, waiting while its queue is full.
pub(super) fn send(clients: &Clients, token: Token, output: Output<'_>) -> Result<()> {
    let (slot, offset) = (token.slot, token.offset);
    let mut record: BaseRecord<'_, [u8], [u8], Token> =
        BaseRecord::with_opaque_to(output.topic, token);
    record.partition = output.partition;
    record.key = output.key;
    record.payload = output.value;
    record.timestamp = output.timestamp;
    record.headers = output.headers;
    let len = record.payload.map_or(0, <[u8]>::len);
    loop {
        match clients.producer.send(record) {
            Ok(()) => {
                if let Some(g) = &clients.producer.context().inflight {
                    g.add(len as f64);
                }
                return Ok(());
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                poll_producer(clients, Duration::from_millis(1));
            }
            // Refused before it left (larger than the producer's message.max.bytes, an unknown
            // partition): a failed delivery of its partition, which is paused and retried.
            Err((KafkaError::MessageProduction(code), _)) if slot != NO_SLOT => {
                let mut progress = lock(&clients.producer.context().progress);
                if let Some(p) = progress.get_mut(slot) {
                    p.failed(offset, Reason::of_delivery(code), describe(code));
                }
                return Ok(());
            }
            Err((e, _)) => bail!(
                "producing source offset {offset} (slot {slot}) to {}: {e}",
                output.topic
            ),
        }
    }
}

impl FlowRunner {
    /// Polls up to one batch from the source and hands it to the producer, through the
    /// processor chain when there is one.
    pub(super) fn forward_batch<'c>(
        &self,
        clients: &'c Clients,
        queue: &SourceQueue<'c, DefaultConsumerContext>,
        slots: &mut Slots,
        progress: &Progress,
        chain: &mut Chain,
    ) -> Result<()> {
        let mut timeout = Duration::from_millis(100);
        let mut polled = 0u64;
        let mut pending: Vec<Fetched<'_>> = Vec::new();
        let mut looped = 0u64;
        // Records handed to the producer without a chain (the chain's are counted after it).
        let mut sent = 0u64;
        let mut now = now_ms();
        // Slots whose read metrics gathered something in this batch.
        let mut touched: Vec<usize> = Vec::new();
        for _ in 0..MAX_POLL_BATCH {
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
                    self.read_failed(clients, slots, e)?;
                    continue;
                }
                Some(Polled::Message(msg)) => msg,
            };
            timeout = Duration::ZERO;
            let Some(i) = slots.find(msg.topic(), msg.partition()) else {
                continue;
            };
            let offset = msg.offset();
            let slot = &mut slots.slots[i];
            if !slot.health.flowing() {
                continue; // fetched before it was paused: read again on its retry
            }
            if slot.position.is_some_and(|p| offset < p) {
                continue; // already forwarded in this run
            }
            slot.position = Some(offset + 1);
            slot.read = true;
            polled += 1;
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
                poll_producer(clients, Duration::ZERO);
                now = now_ms();
            }
            // Parsed once per record (the message keeps them for the chain too).
            let headers = msg.headers();
            let stamp = if self.flow.provenance_header {
                match provenance(headers, &self.source.alias, &self.target.alias) {
                    Some(stamp) => Some(stamp),
                    None => {
                        // It came from the target: sending it back would loop.
                        lock(progress)[i].sent(offset, 0);
                        looped += 1;
                        continue;
                    }
                }
            } else {
                None
            };
            if chain.is_empty() {
                {
                    let mut p = lock(progress);
                    if p[i].failure().is_some() {
                        // Its partition is about to be paused and read again from the failed
                        // record: sending more now would only make duplicates.
                        continue;
                    }
                    p[i].sent(offset, 1);
                }
                let headers = match &stamp {
                    None => headers.map(|h| {
                        h.iter()
                            .fold(OwnedHeaders::new_with_capacity(h.count()), |acc, hd| {
                                acc.insert(Header {
                                    key: hd.key,
                                    value: hd.value,
                                })
                            })
                    }),
                    Some(stamp) => {
                        let mut out =
                            OwnedHeaders::new_with_capacity(headers.map_or(0, |h| h.count()) + 1);
                        if let Some(h) = headers {
                            for hd in h.iter().filter(|hd| hd.key != PROVENANCE_HEADER) {
                                out = out.insert(Header {
                                    key: hd.key,
                                    value: hd.value,
                                });
                            }
                        }
                        Some(out.insert(Header {
                            key: PROVENANCE_HEADER,
                            value: Some(stamp.as_bytes()),
                        }))
                    }
                };
                let output = Output {
                    topic: &slot.remote,
                    partition: Some(slot.partition),
                    key: msg.key(),
                    value: msg.payload(),
                    timestamp: msg.timestamp().to_millis(),
                    headers,
                };
                send(clients, Sent::new(i, offset, true), output)?;
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
            slots.slots[i].publish();
        }
        if polled > 0 {
            if let Some(d) = slots.source.answered() {
                info!(flow = %self.flow.name(), "source reads recovered ({} cleared after {} more failures); mirroring again", d.reason.as_str(), d.retries);
                self.set_partition_gauge("", None, false);
                self.publish_degraded(slots);
            }
        }
        self.count(RecordEvent::Sent, sent);
        self.count(RecordEvent::Looped, looped);
        if !pending.is_empty() {
            self.process(clients, slots, progress, chain, &pending)?;
        }
        Ok(())
    }

    /// Runs polled records through the chain, one source partition at a time, and sends what
    /// comes out: records to their target topics, failures to the dead-letter topic. Records are
    /// handed to the chain borrowed from the fetched messages, not copied.
    pub(super) fn process(
        &self,
        clients: &Clients,
        slots: &Slots,
        progress: &Progress,
        chain: &mut Chain,
        pending: &[Fetched<'_>],
    ) -> Result<()> {
        // Indices into `pending`, per slot, in poll (= offset) order.
        let mut runs: Vec<(usize, Vec<usize>)> = Vec::new();
        for (k, f) in pending.iter().enumerate() {
            match runs.iter_mut().find(|(s, _)| *s == f.slot) {
                Some((_, run)) => run.push(k),
                None => runs.push((f.slot, vec![k])),
            }
        }
        for (i, run) in runs {
            let slot = &slots.slots[i];
            let (topic, partition, remote) = (&slot.topic, slot.partition, &slot.remote);
            let offsets: Vec<i64> = run.iter().map(|&k| pending[k].msg.offset()).collect();
            let stamps: Vec<Option<&str>> =
                run.iter().map(|&k| pending[k].stamp.as_deref()).collect();
            if lock(progress)[i].failure().is_some() {
                continue; // read again from the failed record once its partition is retried
            }
            let items: Vec<Item<'_>> = run.iter().map(|&k| pending[k].item(remote)).collect();
            let out = chain
                .run(topic, partition, items)
                .map_err(anyhow::Error::new)?;
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
                let mut p = lock(progress);
                for (offset, n) in offsets.iter().zip(&outputs) {
                    p[i].sent(*offset, *n);
                }
            }
            let source_partitions = slots.by_topic.get(topic).map_or(1, Vec::len) as i32;
            for f in &out.forward {
                if *f.topic != **remote {
                    self.ensure_output_topic(clients, &f.topic, source_partitions)?;
                }
                let primary = *f.topic == **remote && f.partition == partition;
                let stamp = offsets
                    .binary_search(&f.offset)
                    .ok()
                    .and_then(|j| stamps[j]);
                let headers = match stamp {
                    Some(stamp) => owned_headers(
                        f.headers.iter().filter(|(k, _)| k != PROVENANCE_HEADER),
                        &[(PROVENANCE_HEADER, stamp)],
                    ),
                    None => owned_headers(f.headers.iter(), &[]),
                };
                send(
                    clients,
                    Sent::new(i, f.offset, primary),
                    Output::of(f, Some(f.partition), headers),
                )?;
            }
            if !out.dead.is_empty() {
                self.ensure_output_topic(clients, &self.flow.delivery.dead_letter_topic, 1)?;
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
                    ("refract.source.cluster", self.source.alias.as_str()),
                    ("refract.source.topic", topic.as_str()),
                    ("refract.source.partition", partition_text.as_str()),
                    ("refract.source.offset", offset_text.as_str()),
                ];
                let mut output =
                    Output::of(&d.item, None, owned_headers(d.item.headers.iter(), &extra));
                output.topic = &self.flow.delivery.dead_letter_topic;
                send(clients, Sent::new(i, d.item.offset, false), output)?;
            }
            // Serve delivery reports between runs, as the unprocessed path does while polling.
            poll_producer(clients, Duration::ZERO);
            self.count(RecordEvent::Sent, out.forward.len() as u64);
            self.count(RecordEvent::Filtered, out.filtered);
            self.skipped(topic, partition, &out.skipped);
            self.dead_lettered(topic, partition, &out.dead);
        }
        Ok(())
    }
}
