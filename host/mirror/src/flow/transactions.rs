//! Exactly-once delivery (`delivery = "exactly-once"`): the flow's target producer is
//! transactional, with one stable `transactional.id` per flow. Each transaction holds a run of
//! mirrored records (fan-out, routed outputs and dead letters included), the heartbeats and, with
//! `offset_syncs_location = "target"`, the offset syncs written meanwhile, **and** the source
//! positions those records reach, written to the flow's Connect offsets topic on the target in
//! MirrorMaker 2's own format (`mm2_offsets_topic`), so a switch between MM2 and refract works
//! both ways. A flow (re)starts from the positions in that topic, read `read_committed`.
//!
//! A transaction that fails (a record the target refused, a coordinator change, a timeout) is
//! aborted and the flow restarts from the last committed positions: its records are sent again,
//! and a `read_committed` consumer sees each once. A producer fenced by a newer one with the
//! same id (a second process, or this one after a stall) stops the flow with [`Fenced`].
//! Offset syncs on the source cluster are written only once the transaction they describe has
//! committed; the source consumer group is committed after it too, for lag tools only.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::Offset;
use tracing::{debug, info, warn};

use refract_config::ClientRole;
use refract_kafka::clients::{ensure_topic, list_topics, REQUEST_TIMEOUT};
use refract_mm2::connect_offsets::{key_partition, position_key, position_value};

use crate::takeover::read_positions;

use super::delivery::{Clients, Progress, Sent};
use super::internals::Syncs;
use super::run::{Delivery, Run};
use super::slots::Slots;
use super::{lock, transactional_id, FlowRunner};

/// Partitions of the offsets topic refract creates when it is missing (Kafka Connect's
/// `offset.storage.partitions` default).
const POSITIONS_PARTITIONS: i32 = 25;

/// The flow's target producer was fenced: another producer with its transactional id started
/// since (a second refract process on the same flow, or this flow restarted elsewhere while
/// this process stalled). The flow stops instead of fighting over the id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("flow {flow} stopped: its producer (transactional.id {id}) was fenced by a newer one on cluster {cluster}; another refract process runs this flow now. Stop one of them; restart this one to take the flow back")]
pub struct Fenced {
    /// The flow, `source->target`.
    pub flow: String,
    /// The transactional id.
    pub id: String,
    /// The target cluster.
    pub cluster: String,
}

/// The open transaction and where the committed ones left the positions.
pub(super) struct Transactions {
    /// When the open transaction began: when it first had a record in flight (the coordinator
    /// times a transaction from its first partition), until then when it was begun.
    began: Instant,
    /// Nothing was in flight in the open transaction yet.
    fresh: bool,
    /// When it is due to commit.
    pub(super) due: Instant,
    /// Partitions of the offsets topic.
    partitions: i32,
    /// Per slot, the source position (next offset) last written in a transaction.
    written: HashMap<usize, i64>,
    /// How long a running flow's commit waits without an acknowledgement: as long as the
    /// producer itself retries a record ([`delivery_timeout`]).
    ack_stall: Duration,
}

/// Whether a transactional error means the producer was fenced or is otherwise unusable.
fn fatal(e: &KafkaError) -> Option<RDKafkaErrorCode> {
    match e {
        KafkaError::Transaction(t) if t.is_fatal() => Some(t.code()),
        _ => match e.rdkafka_error_code() {
            Some(
                code @ (RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
                | RDKafkaErrorCode::Fenced),
            ) => Some(code),
            _ => None,
        },
    }
}

/// How long a transaction may take from its beginning to its commit: librdkafka's
/// `transaction.timeout.ms` (60 s, which the coordinator enforces by aborting the transaction)
/// less a margin for the commit itself.
const TRANSACTION_LIFETIME: Duration = Duration::from_secs(50);

/// How often a commit's wait for acknowledgements looks at its progress.
const ACK_SLICE: Duration = Duration::from_millis(250);

/// librdkafka's default `transaction.timeout.ms`.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the producer configured by `settings` (the target's producer settings) retries a
/// record before it fails it: its `message.timeout.ms` (alias `delivery.timeout.ms`), which a
/// transactional producer caps at its `transaction.timeout.ms` (librdkafka's rule; 60 s by
/// default). A commit waits that long without an acknowledgement: records the producer still
/// retries can still land, and giving up sooner only aborts the transaction and sends them
/// again. The former bound of 10 s failed the transactions a leader election carries: when a
/// broker dies, Kafka moves its partitions' leaders only once the controller misses its
/// heartbeats (`broker.session.timeout.ms`, 9 s), and no acknowledgement comes for those
/// partitions meanwhile (a commit failed so on a three-node cluster after a kill -9).
fn delivery_timeout(settings: &BTreeMap<String, String>) -> Duration {
    let ms = |key: &str| {
        settings
            .get(key)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
    };
    let transaction = ms("transaction.timeout.ms").unwrap_or(TRANSACTION_TIMEOUT);
    ms("message.timeout.ms")
        .or_else(|| ms("delivery.timeout.ms"))
        .filter(|d| !d.is_zero())
        .map_or(transaction, |d| d.min(transaction))
}

/// Longest a flow's start waits for its offsets topic to show in the target's metadata. On a
/// cluster of several brokers the one answering a metadata request learns of a topic the
/// controller just created a moment later: right after refract created the topic on a
/// three-node cluster, the target said it had no such topic.
const POSITIONS_VISIBLE: Duration = Duration::from_secs(30);

/// The partitions of offsets topic `topic` as the target's metadata (`meta`) shows them,
/// asking again (quietly, at most [`POSITIONS_VISIBLE`]) while it shows no such topic.
fn positions_partitions(meta: &BaseConsumer, topic: &str) -> Result<i32> {
    let deadline = Instant::now() + POSITIONS_VISIBLE;
    loop {
        let listed = list_topics(meta).map(|topics| {
            topics
                .into_iter()
                .find_map(|(t, n)| (t == topic && n > 0).then_some(n))
        });
        match listed {
            Ok(Some(partitions)) => return Ok(partitions),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Ok(None) if Instant::now() >= deadline => {
                anyhow::bail!("{topic} has no partitions (not shown for {POSITIONS_VISIBLE:?})")
            }
            Ok(None) => debug!("{topic} is not in the metadata yet; asking again"),
            Err(e) => debug!("listing topics for {topic}: {e:#}; asking again"),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A commit's wait for the acknowledgement of its records: it goes on while they come.
#[derive(Debug)]
struct AckWait {
    /// Records not acknowledged at the last change.
    in_flight: i32,
    /// When the count last went down (or the wait began).
    progressed: Instant,
    stall: Duration,
    deadline: Instant,
}

/// What [`AckWait::observe`] makes of the count of unacknowledged records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AckVerdict {
    /// Every record was acknowledged.
    Done,
    /// Records are still being acknowledged.
    Wait,
    /// None was acknowledged for the stall time.
    Stalled,
    /// The deadline passed.
    Expired,
}

impl AckWait {
    fn new(now: Instant, in_flight: i32, stall: Duration, deadline: Instant) -> Self {
        Self {
            in_flight,
            progressed: now,
            stall,
            deadline,
        }
    }

    fn observe(&mut self, now: Instant, in_flight: i32) -> AckVerdict {
        if in_flight <= 0 {
            return AckVerdict::Done;
        }
        if in_flight < self.in_flight {
            self.in_flight = in_flight;
            self.progressed = now;
        }
        if now >= self.deadline {
            AckVerdict::Expired
        } else if now.duration_since(self.progressed) >= self.stall {
            AckVerdict::Stalled
        } else {
            AckVerdict::Wait
        }
    }
}

/// What follows a committed transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterCommit {
    /// The next transaction begins: the run goes on.
    BeginNext,
    /// None: the run is stopping, this was its last transaction.
    Stop,
}

impl Transactions {
    /// Readies `runner`'s transactional producer: `init_transactions` fences any earlier
    /// producer with the flow's id and aborts its open transaction (so what it wrote is never
    /// seen by `read_committed` readers and the positions read next are final); creates the
    /// offsets topic when missing; begins the first transaction.
    pub(super) fn start(runner: &FlowRunner, clients: &Clients) -> Result<Self> {
        let (flow, target) = (&runner.flow, &runner.target.alias);
        let name = flow.name();
        if let Err(e) = clients.producer.init_transactions(REQUEST_TIMEOUT * 2) {
            if fatal(&e).is_some() {
                return Err(runner.fenced().into());
            }
            return Err(e).with_context(|| {
                format!(
                    "flow {name}: starting transactions on cluster {target} (transactional.id {}); exactly-once needs a cluster with transactions and Write on that transactional id",
                    transactional_id(flow, runner.task)
                )
            });
        }
        let topic = &flow.mm2_offsets_topic;
        let compact = [("cleanup.policy".to_string(), "compact".to_string())];
        if ensure_topic(
            &clients.target_meta,
            &clients.admin,
            topic,
            POSITIONS_PARTITIONS,
            flow.internal_replication_factor,
            &compact,
        )
        .with_context(|| format!("flow {name}: creating {topic} on {target}"))?
        {
            info!(flow = %name, "created {topic} on {target} for the flow's source positions");
        }
        let partitions = positions_partitions(&clients.target_meta, topic)
            .with_context(|| format!("flow {name}: the offsets topic on {target}"))?;
        clients
            .producer
            .begin_transaction()
            .with_context(|| format!("flow {name}: beginning a transaction"))?;
        info!(flow = %name, "exactly-once: transactional.id {}, positions in {topic} on {target}, a transaction every {:?}", transactional_id(flow, runner.task), flow.delivery.transaction_interval);
        Ok(Self {
            began: Instant::now(),
            fresh: true,
            due: Instant::now() + flow.delivery.transaction_interval,
            partitions,
            written: HashMap::new(),
            ack_stall: delivery_timeout(&runner.target.client_config(ClientRole::Producer)),
        })
    }

    /// Restarts the open transaction's clock when it first has records in flight: the first
    /// discovery of an estate (creating thousands of remote topics) must not use up the time
    /// the transaction has to be acknowledged and committed.
    pub(super) fn first_in_flight(&mut self, in_flight: i32) {
        if self.fresh && in_flight > 0 {
            self.fresh = false;
            self.began = Instant::now();
        }
    }

    /// The slots whose source position (next offset) moved past what the last transaction
    /// wrote and what was committed, with that position.
    fn unwritten(&self, slots: &Slots, progress: &Progress) -> Vec<(usize, i64)> {
        let progress = lock(progress);
        let mut writes = Vec::new();
        for (i, slot) in slots.slots.iter().enumerate() {
            let Some(next) = progress[i].committable() else {
                continue;
            };
            if self.written.get(&i) == Some(&next) || slot.committed == Some(next) {
                continue;
            }
            writes.push((i, next));
        }
        writes
    }
}

impl Run<'_> {
    /// Where newly added partitions resume under exactly-once: the later of the position in the
    /// offsets topic (committed transactions, or MirrorMaker 2) and the flow's source group
    /// (committed only after a transaction, or by an at-least-once run before). Nothing past
    /// it is visible to `read_committed` readers, so nothing is counted as a duplicate.
    pub(super) fn resume_exactly_once(&mut self, added: &[usize]) -> Result<()> {
        let committed = self.committed_positions(added)?;
        let runner = self.runner;
        let id = format!("{}-positions", transactional_id(&runner.flow, runner.task));
        let positions = read_positions(&runner.flow, &runner.target, &id)?;
        for elem in committed.elements() {
            let Some(i) = self.slots.find(elem.topic(), elem.partition()) else {
                continue;
            };
            let slot = &mut self.slots.slots[i];
            let group = match elem.offset() {
                Offset::Offset(n) => Some(n),
                _ => None,
            };
            let txn = positions.resume_offset(&slot.topic, slot.partition);
            let Some(next) = group.max(txn) else {
                continue;
            };
            slot.position = Some(next);
            slot.committed = Some(next);
            debug!(flow = %self.name, "{}[{}] resumes at offset {next} (transactions: {txn:?}, group: {group:?})", slot.topic, slot.partition);
        }
        // Nothing past the positions is visible to read_committed readers: all of a gap below
        // the log start is lost.
        self.check_log_start(added, &HashMap::new())
    }

    /// Ends the open transaction: waits for every record to be acknowledged, writes the source
    /// positions they reach into it, commits, then writes held offset syncs, commits the source
    /// group (for lag tools) and begins the next transaction unless `then` says the run stops.
    /// An error leaves the transaction to be aborted by the caller ([`abort_transaction`]); a
    /// [`Fenced`] error stops the flow. At-least-once, there is nothing to commit.
    ///
    /// The wait for acknowledgements fails when none came for `stall` (while the run goes on,
    /// at least as long as the producer retries a record: [`delivery_timeout`]), or at the
    /// transaction's end of life ([`TRANSACTION_LIFETIME`] after it began), or, when the run
    /// stops, after `stall` in all: a transaction of more records than the target acknowledges
    /// in one request timeout (a backlog spread over thousands of partitions) still commits
    /// while acknowledgements keep coming, instead of failing and being read again forever, and
    /// one whose partitions change leaders commits once the new leaders acknowledge.
    pub(super) fn commit_transaction(&mut self, stall: Duration, then: AfterCommit) -> Result<()> {
        let Delivery::ExactlyOnce(txn) = &self.delivery else {
            return Ok(());
        };
        let (began, partitions) = (txn.began, txn.partitions);
        let mut deadline = began + TRANSACTION_LIFETIME;
        let stall = match then {
            AfterCommit::BeginNext => stall.max(txn.ack_stall),
            AfterCommit::Stop => {
                deadline = deadline.min(Instant::now() + stall);
                stall
            }
        };
        let left = || deadline.saturating_duration_since(Instant::now());
        self.emit_internals(Syncs::All);
        self.acknowledged(stall, deadline)?;
        let Delivery::ExactlyOnce(txn) = &self.delivery else {
            return Ok(());
        };
        let writes = txn.unwritten(&self.slots, &self.progress);
        let runner = self.runner;
        let topic = runner.flow.mm2_offsets_topic.as_str();
        for &(i, next) in &writes {
            let slot = &self.slots.slots[i];
            let key = position_key(&runner.source.alias, &slot.topic, slot.partition);
            let value = position_value(next - 1);
            let record = BaseRecord::with_opaque_to(topic, Sent::internal())
                .partition(key_partition(&key, partitions))
                .key(&key)
                .payload(&value);
            if let Err((e, _)) = self.clients.producer.send::<Vec<u8>, Vec<u8>>(record) {
                if fatal(&e).is_some() {
                    return Err(runner.fenced().into());
                }
                anyhow::bail!(
                    "writing the position of {}[{}] to {topic}: {e}",
                    slot.topic,
                    slot.partition
                );
            }
        }
        self.acknowledged(stall, deadline)?;
        if let Err(e) = self
            .clients
            .producer
            .commit_transaction(left().max(Duration::from_secs(1)))
        {
            if fatal(&e).is_some() || self.clients.producer_fenced() {
                return Err(runner.fenced().into());
            }
            return Err(e).with_context(|| {
                format!(
                    "committing a transaction of flow {} on cluster {}",
                    self.name, runner.target.alias
                )
            });
        }
        runner.transaction_ended(true, began.elapsed());
        if let Delivery::ExactlyOnce(txn) = &mut self.delivery {
            txn.written.extend(writes);
        }
        for sync in std::mem::take(&mut self.internals.held_syncs) {
            if self.send_sync(&sync) {
                lock(&runner.status).offset_syncs += 1;
            }
        }
        // For `kafka-consumer-groups` and lag: never ahead of what is committed on the target.
        if let Err(e) = self.commit(left().max(Duration::from_secs(1))) {
            debug!(flow = %self.name, "committing the source group after a transaction: {e:#}");
        }
        let began = match then {
            AfterCommit::BeginNext => {
                self.clients
                    .producer
                    .begin_transaction()
                    .with_context(|| format!("flow {}: beginning a transaction", self.name))?;
                Instant::now()
            }
            AfterCommit::Stop => began,
        };
        if let Delivery::ExactlyOnce(txn) = &mut self.delivery {
            txn.began = began;
            txn.fresh = true;
            txn.due = Instant::now() + runner.flow.delivery.transaction_interval;
        }
        Ok(())
    }

    /// Waits until the target acknowledged everything sent in the transaction; a record it
    /// refused fails the transaction, and so does a wait that [`AckWait`] gives up.
    fn acknowledged(&self, stall: Duration, deadline: Instant) -> Result<()> {
        let producer = &self.clients.producer;
        let mut wait = AckWait::new(Instant::now(), producer.in_flight_count(), stall, deadline);
        loop {
            let _ = self.clients.flush_producer(ACK_SLICE);
            self.clients.poll_producer(Duration::ZERO);
            self.transaction_failure()?;
            let in_flight = producer.in_flight_count();
            match wait.observe(Instant::now(), in_flight) {
                AckVerdict::Done => return Ok(()),
                AckVerdict::Wait => {}
                AckVerdict::Stalled => anyhow::bail!(
                    "{in_flight} records of the transaction were not acknowledged by cluster {}: none was for {stall:?}",
                    self.runner.target.alias
                ),
                AckVerdict::Expired => anyhow::bail!(
                    "{in_flight} records of the transaction were not acknowledged by cluster {} before the transaction's time ran out ({:?} after it began)",
                    self.runner.target.alias,
                    TRANSACTION_LIFETIME
                ),
            }
        }
    }

    /// A record of the open transaction the target refused, or a fenced producer: the
    /// transaction cannot commit.
    pub(super) fn transaction_failure(&self) -> Result<()> {
        if self.clients.producer_fenced() {
            return Err(self.runner.fenced().into());
        }
        let progress = lock(&self.progress);
        // A record held for a schema registry was never sent: its partition is paused and
        // rewound to it (see `schemas`), and what the transaction holds before it may commit.
        if let Some((i, f)) = progress.iter().enumerate().find_map(|(i, p)| {
            p.failure()
                .filter(|f| f.reason != crate::degraded::Reason::SchemaRegistry)
                .map(|f| (i, f))
        }) {
            match self.slots.slots.get(i) {
                Some(slot) => anyhow::bail!(
                    "a record of the transaction failed: {}[{}] offset {} to {}: {}",
                    slot.topic,
                    slot.partition,
                    f.offset,
                    slot.remote,
                    f.error
                ),
                None => anyhow::bail!("a record of the transaction failed: {}", f.error),
            }
        }
        Ok(())
    }
}

/// Aborts the open transaction of `runner`'s run after `why` (best effort: a producer that
/// cannot abort is replaced on restart, whose `init_transactions` aborts it), counting it.
/// Returns whether the producer turned out to be fenced (then the flow must stop, not restart:
/// a restart would fence the process that now runs the flow).
pub(super) fn abort_transaction(
    runner: &FlowRunner,
    clients: &Clients,
    why: &anyhow::Error,
) -> bool {
    if why.downcast_ref::<Fenced>().is_some() {
        return true;
    }
    runner.transaction_ended(false, Duration::ZERO);
    match clients.producer.abort_transaction(REQUEST_TIMEOUT) {
        Ok(()) => {
            warn!(flow = %runner.flow.name(), "transaction aborted ({why:#}); its records are sent again from the last committed positions");
            false
        }
        Err(e) if fatal(&e).is_some() || clients.producer_fenced() => true,
        Err(e) => {
            warn!(flow = %runner.flow.name(), "transaction not aborted ({e}) after: {why:#}; the restart aborts it");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_waits_while_acknowledgements_come() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let stall = Duration::from_secs(10);
        let mut wait = AckWait::new(t0, 20_000, stall, at(50_000));
        // 20,000 records acknowledged at 1,000 a second: past the stall time, never stalled.
        for s in 1..20u64 {
            let left = 20_000 - 1_000 * s as i32;
            assert_eq!(wait.observe(at(s * 1_000), left), AckVerdict::Wait, "{s} s");
        }
        assert_eq!(wait.observe(at(20_000), 0), AckVerdict::Done);
    }

    #[test]
    fn a_commit_gives_up_when_acknowledgements_stop_or_time_runs_out() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let stall = Duration::from_secs(10);
        let mut wait = AckWait::new(t0, 500, stall, at(50_000));
        assert_eq!(wait.observe(at(3_000), 400), AckVerdict::Wait);
        assert_eq!(wait.observe(at(12_999), 400), AckVerdict::Wait);
        assert_eq!(wait.observe(at(13_000), 400), AckVerdict::Stalled);
        // A count that goes up (records added) is no progress either.
        let mut wait = AckWait::new(t0, 500, stall, at(50_000));
        assert_eq!(wait.observe(at(10_000), 600), AckVerdict::Stalled);
        // Progress all along, but past the transaction's lifetime.
        let mut wait = AckWait::new(t0, 100_000, stall, at(50_000));
        for s in 1..50u64 {
            assert_eq!(
                wait.observe(at(s * 1_000), 100_000 - 1_000 * s as i32),
                AckVerdict::Wait
            );
        }
        assert_eq!(wait.observe(at(50_000), 40_000), AckVerdict::Expired);
    }

    #[test]
    fn a_commit_waits_for_acknowledgements_as_long_as_the_producer_retries() {
        let settings = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let s = Duration::from_secs;
        let cases: &[(&[(&str, &str)], Duration)] = &[
            // librdkafka's defaults: message.timeout.ms follows transaction.timeout.ms.
            (&[], s(60)),
            (&[("transaction.timeout.ms", "90000")], s(90)),
            (&[("message.timeout.ms", "30000")], s(30)),
            (&[("delivery.timeout.ms", "45000")], s(45)),
            // Capped by the transaction timeout; 0 (no limit) is the transaction's.
            (&[("message.timeout.ms", "300000")], s(60)),
            (
                &[
                    ("message.timeout.ms", "0"),
                    ("transaction.timeout.ms", "20000"),
                ],
                s(20),
            ),
            (&[("message.timeout.ms", "soon")], s(60)),
        ];
        for (pairs, want) in cases {
            assert_eq!(delivery_timeout(&settings(pairs)), *want, "{pairs:?}");
        }
        // Longer than Kafka takes to move a dead broker's leaders (its 9 s session timeout and
        // the election), which the former 10 s bound was not, by much.
        assert!(delivery_timeout(&settings(&[])) >= s(30));
    }
}
