//! The flow's clients: creating them, the producer's delivery reports routed to partition
//! progress, sending, polling and flushing, replacing a producer that failed fatally, and commits.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::admin::AdminClient;
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::consumer::BaseConsumer;

use rdkafka::error::KafkaError;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};
use tracing::{debug, info, warn};

use refract_config::{ClientRole, OffsetSyncsLocation};
use refract_kafka::admin_ffi::commit_within;
use refract_kafka::clients::{client_config, Authenticated, Detached};
use refract_kafka::connect::{preflight, Cause, ConnectError};

use crate::degraded::Reason;

use crate::progress::PartitionProgress;
use crate::series::SourcePartitionMetrics;
use refract_telemetry::{Gauge, StatBatch};

use super::forwarding::Output;
use super::run::Run;
use super::{lock, progress_group, FlowRunner, NO_SLOT};
use crate::clock::now_ms;

/// What a record handed to the producer belongs to, given back with its delivery report.
pub(super) struct Sent {
    /// The slot of its source partition ([`NO_SLOT`] for heartbeats and offset syncs).
    pub(super) slot: usize,
    /// Its source offset.
    pub(super) offset: i64,
    /// Whether it goes to the slot's own remote partition (not a fan-out or routed output).
    pub(super) primary: bool,
}

impl Sent {
    /// A record of source partition `slot` at `offset`.
    pub(super) fn new(slot: usize, offset: i64, primary: bool) -> Token {
        Box::new(Self {
            slot,
            offset,
            primary,
        })
    }

    /// A record that belongs to no source partition: its delivery report is ignored.
    pub(super) fn internal() -> Token {
        Self::new(NO_SLOT, 0, false)
    }
}

/// The producer's per-record opaque.
pub(super) type Token = Box<Sent>;

/// One source partition's delivery state, shared with the delivery callback under one lock:
/// the acknowledgement watermark and the MM2 series that acknowledgements feed.
pub(super) struct Tracked {
    pub(super) progress: PartitionProgress,
    /// Its MirrorMaker 2 series (none when the registry refused them).
    pub(super) metrics: Option<SourcePartitionMetrics>,
    /// Records acknowledged and their replication latency since the last hand-over to `metrics`
    /// (handed over every [`STATS_INTERVAL`], so the hot path reads no clock and takes no lock
    /// of its own per record).
    pub(super) acked: u64,
    pub(super) latency: StatBatch,
}

impl Tracked {
    pub(super) fn new(
        progress: PartitionProgress,
        metrics: Option<SourcePartitionMetrics>,
    ) -> Self {
        Self {
            progress,
            metrics,
            acked: 0,
            latency: StatBatch::new(),
        }
    }

    /// Hands gathered observations to the series: latency first, so a reader that sees the new
    /// record count also sees their latency.
    pub(super) fn publish(&mut self) {
        // Ten times a second for every partition: an idle one costs a branch, not two atomics.
        if self.acked == 0 {
            return;
        }
        if let Some(m) = &self.metrics {
            m.replication_latency_ms.record_all(&mut self.latency);
            m.record_count.inc_by(std::mem::take(&mut self.acked));
        }
    }
}

impl std::ops::Deref for Tracked {
    type Target = PartitionProgress;
    fn deref(&self) -> &PartitionProgress {
        &self.progress
    }
}

impl std::ops::DerefMut for Tracked {
    fn deref_mut(&mut self) -> &mut PartitionProgress {
        &mut self.progress
    }
}

/// Every slot's delivery state, indexed like [`Slots::slots`].
pub(super) type Progress = Arc<Mutex<Vec<Tracked>>>;

/// Routes delivery reports to the partition progress they belong to.
pub(super) struct DeliveryContext {
    pub(super) progress: Progress,
    /// Value bytes handed to the producer and not yet acknowledged or failed.
    pub(super) inflight: Option<Gauge>,
    /// Wall-clock ms when the flow last served delivery reports ([`Clients::poll_producer`]); delivery
    /// callbacks run inside that call, so it stands for "now" in them without a clock read each.
    pub(super) now_ms: AtomicI64,
    /// The target cluster's alias, for the failure a partition is marked with.
    pub(super) target: String,
    /// The producer's own handle, set once it exists: delivery reports are only served while it
    /// lives, and a fatal error's cause is read from it.
    pub(super) native: refract_kafka::OwnClient,
    /// Whether the target acknowledged any record of this producer.
    pub(super) acked_any: std::sync::atomic::AtomicBool,
    /// The fatal error once seen: the reports of records the producer still held may be served
    /// while it is destroyed (after it was replaced), when librdkafka no longer says why.
    pub(super) fatal_seen: Mutex<Option<(RDKafkaErrorCode, String)>>,
}

impl DeliveryContext {
    /// The producer's fatal error (idempotence lost: a PID refused, a sequence gap), which
    /// librdkafka reports on each failed record only as "Fatal error" or "Purged".
    pub(super) fn fatal(&self) -> Option<(RDKafkaErrorCode, String)> {
        if let Some(seen) = lock(&self.fatal_seen).clone() {
            return Some(seen);
        }
        let seen = self.native.fatal_error()?;
        *lock(&self.fatal_seen) = Some(seen.clone());
        Some(seen)
    }

    /// Why a record failed, and the reason its partition is degraded with: a producer that
    /// failed fatally is named by its fatal error (a refused producer id is `authorization`),
    /// never by the "Fatal error" librdkafka gives each record it refuses afterwards.
    fn failure(
        &self,
        code: Option<RDKafkaErrorCode>,
        other: impl std::fmt::Display,
    ) -> (Reason, String) {
        match (code, self.fatal()) {
            (_, Some((code, why))) => (
                Reason::of_delivery(code),
                format!(
                    "writing to cluster {}: the producer failed fatally: {}: {why}",
                    self.target,
                    describe(code)
                ),
            ),
            (Some(code), None) => (
                Reason::of_delivery(code),
                format!("writing to cluster {}: {}", self.target, describe(code)),
            ),
            (None, None) => (
                Reason::Produce,
                format!("writing to cluster {}: {other}", self.target),
            ),
        }
    }
}

impl ClientContext for DeliveryContext {}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = Token;

    fn delivery(&self, result: &DeliveryResult<'_>, token: Token) {
        let Sent {
            slot,
            offset,
            primary,
        } = *token;
        // Heartbeats and offset syncs (NO_SLOT) are not counted in flight.
        if let Some(g) = self.inflight.as_ref().filter(|_| slot != NO_SLOT) {
            let len = match result {
                Ok(m) => m.payload().map_or(0, <[u8]>::len),
                Err((_, m)) => m.payload().map_or(0, <[u8]>::len),
            };
            g.add(-(len as f64));
        }
        let mut progress = lock(&self.progress);
        let Some(p) = progress.get_mut(slot) else {
            return;
        };
        match result {
            Ok(m) => {
                self.acked_any.store(true, Ordering::Relaxed);
                p.acked(offset, primary.then(|| m.offset()));
                if primary && p.metrics.is_some() {
                    p.acked += 1;
                    if let Some(ts) = m.timestamp().to_millis() {
                        let now = self.now_ms.load(Ordering::Relaxed);
                        p.latency.record((now - ts) as f64);
                    }
                }
            }
            Err((e, _)) => {
                let (reason, error) = self.failure(e.rdkafka_error_code(), e);
                p.failed(offset, reason, error);
            }
        }
    }
}

/// The flow's clients. Each is closed on a thread of its own when dropped ([`Detached`]):
/// closing a consumer waits for its group coordinator, which may never answer, and a restart or
/// a shutdown must not wait for that.
pub(super) struct Clients {
    /// Shared with the run loop's queue of it (see [`super::run::Run::mirror`]).
    pub(super) consumer: Arc<Detached<Authenticated<BaseConsumer>>>,
    pub(super) target_meta: Detached<Authenticated<BaseConsumer>>,
    pub(super) admin: Detached<Authenticated<AdminClient<DefaultClientContext>>>,
    pub(super) producer: Detached<Authenticated<BaseProducer<DeliveryContext>>>,
    pub(super) source_admin: Detached<Authenticated<AdminClient<DefaultClientContext>>>,
    /// Writes offset syncs (location = source) and the reverse pair's heartbeats to the source.
    pub(super) source_producer: Option<Detached<Authenticated<BaseProducer>>>,
}

/// Most queued delivery-report events [`Clients::poll_producer`] serves in one call.
const MAX_REPORT_EVENTS: usize = 10_000;

impl Clients {
    /// Serves the producer's delivery reports (waiting up to `timeout` for one), and then every
    /// report already queued: a zero-timeout poll serves one event, one event covers one
    /// partition's batch, so with many partitions acknowledgements (and commits, and the
    /// record counts) would otherwise trail the target by one loop turn per partition
    /// (measured: 300 new partitions' counts took 28 s to show). At most
    /// [`MAX_REPORT_EVENTS`] per call, so a flood cannot hold up the run loop.
    pub(super) fn poll_producer(&self, timeout: Duration) {
        self.producer
            .context()
            .now_ms
            .store(now_ms(), Ordering::Relaxed);
        self.producer.poll(timeout);
        for _ in 0..MAX_REPORT_EVENTS {
            if refract_kafka::queued_events(self.producer.client()) == 0 {
                break;
            }
            self.producer.poll(Duration::ZERO);
        }
    }

    /// Waits up to `timeout` for the target to acknowledge everything sent, serving delivery
    /// reports meanwhile.
    pub(super) fn flush_producer(&self, timeout: Duration) -> rdkafka::error::KafkaResult<()> {
        let deadline = Instant::now() + timeout;
        while self.producer.in_flight_count() > 0 && Instant::now() < deadline {
            self.poll_producer(Duration::from_millis(20));
        }
        self.producer.flush(Duration::ZERO)
    }

    /// Hands one record to the producer, waiting while its queue is full.
    pub(super) fn send(&self, token: Token, output: Output<'_>) -> Result<()> {
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
            match self.producer.send(record) {
                Ok(()) => {
                    if let Some(g) = &self.producer.context().inflight {
                        g.add(len as f64);
                    }
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    self.poll_producer(Duration::from_millis(1));
                }
                // Refused before it left (larger than the producer's message.max.bytes, an
                // unknown partition): a failed delivery of its partition, which is paused and
                // retried.
                Err((KafkaError::MessageProduction(code), _)) if slot != NO_SLOT => {
                    let context = self.producer.context();
                    let (reason, error) = if code == RDKafkaErrorCode::Fatal {
                        context.failure(Some(code), describe(code))
                    } else {
                        (Reason::of_delivery(code), describe(code))
                    };
                    let mut progress = lock(&context.progress);
                    if let Some(p) = progress.get_mut(slot) {
                        p.failed(offset, reason, error);
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

    /// Whether librdkafka reports the producer fenced (its fatal error).
    pub(super) fn producer_fenced(&self) -> bool {
        self.producer.context().fatal().is_some_and(|(code, _)| {
            matches!(
                code,
                RDKafkaErrorCode::ProducerFenced
                    | RDKafkaErrorCode::InvalidProducerEpoch
                    | RDKafkaErrorCode::Fenced
            )
        })
    }
}

/// The longest a producer that keeps failing fatally waits to be replaced.
pub(super) const REPLACE_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// How long after its `streak`-th fatal failure in a row a producer's replacement may fail
/// before the next is made: none after the first (a target restart breaks sequence numbers
/// once), then 1 s, 2 s, 4 s … up to [`REPLACE_BACKOFF_MAX`].
fn replace_backoff(streak: u32) -> Duration {
    match streak {
        0 | 1 => Duration::ZERO,
        n => Duration::from_secs(1u64 << (n - 2).min(5)).min(REPLACE_BACKOFF_MAX),
    }
}

/// librdkafka's description of an error code (`Broker: Message size too large`).
pub(super) fn describe(code: RDKafkaErrorCode) -> String {
    // The code's Display is `Name (description)`.
    let text = code.to_string();
    text.strip_prefix(&format!("{code:?} ("))
        .and_then(|t| t.strip_suffix(')'))
        .map_or_else(|| text.clone(), str::to_string)
}

impl FlowRunner {
    pub(super) fn connect(&self, name: &str, progress: Progress) -> Result<Clients> {
        // A cluster refract cannot authenticate to (TLS, SASL, wrong protocol) fails the flow
        // with the cause named, instead of clients that retry silently; one that does not answer
        // yet is only reported, and librdkafka keeps trying it.
        for cluster in [&self.source, &self.target] {
            if let Err(e) = preflight(cluster) {
                match e.downcast_ref::<ConnectError>() {
                    Some(c)
                        if matches!(
                            c.cause,
                            Cause::Tls(_)
                                | Cause::Authentication(_)
                                | Cause::WrongProtocol(_)
                                | Cause::Config(_)
                        ) =>
                    {
                        return Err(e.context(format!("flow {name}")));
                    }
                    _ => warn!(flow = %name, "{e:#}; connecting anyway, librdkafka keeps trying"),
                }
            }
        }
        let id = progress_group(&self.flow);
        let group = progress_group(&self.flow);
        let consumer: Authenticated<BaseConsumer> = client_config(
            &self.source,
            ClientRole::Consumer,
            &id,
            // librdkafka postpones a partition's next fetch by fetch.queue.backoff.ms (1 s)
            // whenever its local queue is over the prefetch thresholds; a mirror that is briefly
            // busier than a plain reader then stalls on a second-long tail. 10 ms keeps it fed.
            &[("fetch.queue.backoff.ms", "10")],
            &[
                ("group.id", group.as_str()),
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
                ("enable.partition.eof", "false"),
                // A position out of range is reported (see `lost`), never silently reset: a
                // partition with no position at all is assigned at an explicit BEGINNING or END
                // (the user's auto.offset.reset, see `FlowRunner::add_at_position`).
                ("auto.offset.reset", "error"),
            ],
        )
        .create()
        .with_context(|| {
            format!(
                "flow {name}: creating the consumer for source cluster {}",
                self.source.alias
            )
        })?;
        // Also commits, under the same group name on the target, the target position just past the
        // last acknowledged record of each remote partition: on restart the records between it
        // and the target's end are the ones that will be mirrored twice.
        let target_meta: Authenticated<BaseConsumer> = client_config(
            &self.target,
            ClientRole::Admin,
            &id,
            &[],
            &[
                ("group.id", group.as_str()),
                ("enable.auto.commit", "false"),
            ],
        )
        .create()
        .with_context(|| {
            format!(
                "flow {name}: creating the metadata client for target cluster {}",
                self.target.alias
            )
        })?;
        let admin: Authenticated<AdminClient<DefaultClientContext>> =
            client_config(&self.target, ClientRole::Admin, &id, &[], &[])
                .create()
                .with_context(|| {
                    format!(
                        "flow {name}: creating the admin client for target cluster {}",
                        self.target.alias
                    )
                })?;
        let producer = self.producer(name, &id, progress)?;
        let source_admin: Authenticated<AdminClient<DefaultClientContext>> =
            client_config(&self.source, ClientRole::Admin, &id, &[], &[])
                .create()
                .with_context(|| {
                    format!(
                        "flow {name}: creating the admin client for source cluster {}",
                        self.source.alias
                    )
                })?;
        let needs_source_producer = (self.flow.offset_syncs.enabled
            && self.flow.offset_syncs.location == OffsetSyncsLocation::Source)
            || (self.flow.heartbeats.enabled && self.reverse_heartbeats());
        let source_producer = if needs_source_producer {
            Some(
                client_config(
                    &self.source,
                    ClientRole::Producer,
                    &id,
                    &[("linger.ms", "5")],
                    &[],
                )
                .create::<BaseProducer>()
                .with_context(|| {
                    format!(
                        "flow {name}: creating the offset-sync producer for source cluster {}",
                        self.source.alias
                    )
                })?,
            )
        } else {
            None
        };
        Ok(Clients {
            consumer: Arc::new(Detached::new(consumer)),
            target_meta: Detached::new(target_meta),
            admin: Detached::new(admin),
            producer: Detached::new(producer),
            source_admin: Detached::new(source_admin),
            source_producer: source_producer.map(Detached::new),
        })
    }

    /// The flow's producer on the target: idempotent, `acks=all`, delivery reports routed to
    /// the partitions' progress.
    pub(super) fn producer(
        &self,
        name: &str,
        id: &str,
        progress: Progress,
    ) -> Result<Authenticated<BaseProducer<DeliveryContext>>> {
        // The flow's `compression` wins over the target cluster's producer table.
        let mut forced = vec![("enable.idempotence", "true"), ("acks", "all")];
        if let Some(codec) = &self.flow.delivery.compression {
            forced.push(("compression.type", codec.as_str()));
        }
        let transactional_id = super::transactional_id(&self.flow, self.task);
        if self.exactly_once() {
            forced.push(("transactional.id", transactional_id.as_str()));
        }
        let producer: Authenticated<BaseProducer<DeliveryContext>> = client_config(
            &self.target,
            ClientRole::Producer,
            id,
            &[("linger.ms", "5")],
            &forced,
        )
        .create_with_context(DeliveryContext {
            progress,
            inflight: self.flow_metrics.as_ref().map(|m| m.inflight_bytes.clone()),
            now_ms: AtomicI64::new(now_ms()),
            target: self.target.alias.clone(),
            native: refract_kafka::OwnClient::new(),
            acked_any: std::sync::atomic::AtomicBool::new(false),
            fatal_seen: Mutex::new(None),
        })
        .with_context(|| {
            format!(
                "flow {name}: creating the producer for target cluster {}",
                self.target.alias
            )
        })?;
        producer.context().native.set(producer.client());
        Ok(producer)
    }
}

/// Partitions per OffsetCommit request. The group coordinator appends a commit to
/// `__consumer_offsets` as one record batch, which must fit the topic's `max.message.bytes`
/// (1 MiB by default): 10,000 partitions with their topic-id metadata are about 2 MB, and the
/// broker refused such a commit (UNKNOWN_SERVER_ERROR on Kafka 4.3.1), every time. 1,000 with a
/// 249-character topic name stay under 400 KB.
pub(super) const COMMIT_BATCH: usize = 1_000;

impl Run<'_> {
    /// A producer that failed fatally (librdkafka's idempotence state is lost: the target
    /// refused a producer id, or sequence numbers broke after a target restart) can send
    /// nothing again. Its unacknowledged records have failed their partitions, which are retried
    /// from their last acknowledged position; this replaces the producer they will be retried
    /// with. Logged once per run of fatal errors. The first replacement is immediate; one that
    /// fails again (a producer id the target refuses: no Write ACL) waits, doubling from 1 s to
    /// at most [`REPLACE_BACKOFF_MAX`], so a refusal is not a new producer and connection every
    /// half second. Meanwhile the failed producer refuses each record at once, and its
    /// partition is retried with its own backoff.
    pub(super) fn replace_failed_producer(&mut self) -> Result<()> {
        let runner = self.runner;
        let (name, target) = (&self.name, &runner.target.alias);
        let producer = &mut self.clients.producer;
        let Some((code, why)) = producer.context().fatal() else {
            if self.fatal_streak > 0 && producer.context().acked_any.load(Ordering::Relaxed) {
                info!(flow = %name, "the producer for cluster {target} works again after {} fatal failures", self.fatal_streak);
                self.fatal_streak = 0;
                self.replace_after = None;
            }
            return Ok(());
        };
        if self.replace_after.is_some_and(|at| Instant::now() < at) {
            return Ok(());
        }
        // Serve the reports of what it still held, so every failed record reaches its partition.
        producer.context().now_ms.store(now_ms(), Ordering::Relaxed);
        producer.poll(Duration::ZERO);
        let id = progress_group(&runner.flow);
        let fresh = Detached::new(runner.producer(name, &id, self.progress.clone())?);
        // The old one is closed off this thread when dropped; its records are already failed.
        drop(std::mem::replace(producer, fresh));
        self.fatal_streak += 1;
        self.replace_after = Some(Instant::now() + replace_backoff(self.fatal_streak));
        if self.fatal_streak == 1 {
            warn!(flow = %name, "the producer for cluster {target} failed fatally ({}: {why}); replaced with a new one, the partitions it failed are retried from their last acknowledged records", describe(code));
        } else {
            debug!(flow = %name, "the producer for cluster {target} failed fatally again ({}: {why}); replaced", describe(code));
        }
        Ok(())
    }

    /// Commits, per partition, the source offset after the last contiguously acknowledged record:
    /// only partitions whose position (or recorded topic ids) changed since their last commit, in
    /// OffsetCommit requests of at most [`COMMIT_BATCH`] partitions.
    pub(super) fn commit(&mut self, timeout: Duration) -> Result<()> {
        // Per changed slot: its source position, target position and the topic ids recorded.
        let mut changed: Vec<(usize, i64, Option<i64>, String)> = Vec::new();
        {
            let progress = lock(&self.progress);
            for (i, slot) in self.slots.slots.iter().enumerate() {
                let Some(next) = progress[i].committable() else {
                    continue;
                };
                // A topic stopped because it was recreated keeps what its last commit
                // recorded, so that a restart finds it recreated too.
                if slot.health.stopped() {
                    continue;
                }
                // The topics' ids go with both commits: a restart finds a topic that was
                // recreated meanwhile by them (see `recreated`).
                let id = self.slots.incarnations.metadata(&slot.topic, &slot.remote);
                if slot.committed == Some(next) && slot.committed_ids == id {
                    continue;
                }
                changed.push((i, next, progress[i].downstream_next(), id));
            }
        }
        for (n, chunk) in changed.chunks(COMMIT_BATCH).enumerate() {
            let mut tpl = TopicPartitionList::new();
            let mut downstream = TopicPartitionList::new();
            for (i, next, target_next, id) in chunk {
                let slot = &self.slots.slots[*i];
                let mut elem = tpl.add_partition(&slot.topic, slot.partition);
                elem.set_offset(Offset::Offset(*next))?;
                elem.set_metadata(id.as_str());
                if let Some(d) = target_next {
                    let mut elem = downstream.add_partition(&slot.remote, slot.partition);
                    elem.set_offset(Offset::Offset(*d))?;
                    elem.set_metadata(id.as_str());
                }
            }
            // Target positions first: a source commit then always has a target commit at or
            // past it, so duplicates are never over-counted. Best effort: they only serve to
            // count duplicates.
            if downstream.count() > 0 {
                if let Err(e) = commit_within(&self.clients.target_meta, &downstream, timeout) {
                    debug!(flow = %self.name, "committing target positions: {e}");
                }
            }
            commit_within(&self.clients.consumer, &tpl, timeout).map_err(|e| {
                let done = n * COMMIT_BATCH;
                anyhow::anyhow!(
                    "committing source positions for flow {} to {}{}: {e}",
                    self.name,
                    self.runner.source.alias,
                    if done > 0 {
                        format!(" ({done} of {} partitions committed)", changed.len())
                    } else {
                        String::new()
                    }
                )
            })?;
            for (i, next, _, ids) in chunk {
                let slot = &mut self.slots.slots[*i];
                slot.committed = Some(*next);
                slot.committed_ids.clone_from(ids);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_producer_that_keeps_failing_is_replaced_ever_more_slowly() {
        let waits: Vec<u64> = (1..=9).map(|n| replace_backoff(n).as_secs()).collect();
        assert_eq!(waits, [0, 1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(replace_backoff(u32::MAX), REPLACE_BACKOFF_MAX);
    }
}
