//! Partitions that cannot make progress: pausing, retrying with backoff, recovering, and
//! reporting each transition once.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use rdkafka::consumer::Consumer;

use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;
use tracing::{debug, info, warn};

use crate::degraded::{Change, Degraded, Origin, Phase, Reason};
use crate::source_queue::SourceError;

use super::delivery::{Clients, Progress};
use super::slots::{Slot, Slots};
use super::status::DegradedPartition;
use super::{lock, FlowRunner};
use crate::clock::now_ms;

/// What one round of [`FlowRunner::tend`] found for one partition.
pub(super) enum Tended {
    /// A failure counted (log once per transition, count it).
    Failed(Change),
    /// Its records are settled; it waits this long for its retry.
    Waiting(Duration),
    /// Its retry is due.
    Retry,
    /// It made progress again; the cleared mark.
    Recovered(Degraded),
}

impl FlowRunner {
    /// Looks after the partitions' health: a delivery failure pauses its partition, a paused
    /// partition whose records are all settled is rewound to its first unacknowledged record
    /// and waits for its retry, a due retry reads it again, and a retried partition that made
    /// progress is healthy again.
    pub(super) fn tend(&self, clients: &Clients, slots: &mut Slots, progress: &Progress) {
        let now = Instant::now();
        let wall = now_ms();
        let mut found: Vec<(usize, Tended)> = Vec::new();
        {
            let mut progress = lock(progress);
            for (i, slot) in slots.slots.iter_mut().enumerate() {
                let p = &mut progress[i];
                if let Some(f) = p.take_failure() {
                    let counted = slot.health.failed(
                        Origin::Delivery,
                        f.reason,
                        f.error,
                        Some(f.offset),
                        wall,
                    );
                    if let Some(change) = counted {
                        found.push((i, Tended::Failed(change)));
                    }
                }
                match slot.health.phase() {
                    Phase::Draining if p.settled() => {
                        if let Some(first) = p.rewind() {
                            slot.position = Some(first);
                        }
                        found.push((i, Tended::Waiting(slot.health.drained(now))));
                    }
                    Phase::Waiting(_) if slot.health.retry_due(now) => {
                        found.push((i, Tended::Retry));
                    }
                    Phase::Flowing if slot.health.degraded().is_some() => {
                        if let Some(d) = slot.health.progressed(p.committable(), slot.read, now) {
                            found.push((i, Tended::Recovered(d)));
                        }
                    }
                    _ => {}
                }
                slot.read = false;
            }
        }
        if found.is_empty() {
            return;
        }
        let name = self.flow.name();
        let mut changed = false;
        for (i, what) in found {
            let slot = &mut slots.slots[i];
            match what {
                Tended::Failed(change) => {
                    self.pause(clients, slot);
                    self.report_failure(slot, change);
                    changed = true;
                }
                Tended::Waiting(wait) => {
                    debug!(flow = %name, "{}[{}] paused; retrying from offset {} in {wait:?}", slot.topic, slot.partition, slot.position.map_or("(start)".into(), |o| o.to_string()));
                }
                Tended::Retry => {
                    slot.health.retrying(now);
                    let mut tpl = TopicPartitionList::new();
                    let assigned = self.add_at_position(&mut tpl, slot).and_then(|()| {
                        clients
                            .consumer
                            .incremental_assign(&tpl)
                            .map_err(anyhow::Error::from)
                    });
                    match assigned {
                        Ok(()) => {
                            debug!(flow = %name, "retrying {}[{}] from offset {}", slot.topic, slot.partition, slot.position.map_or("(start)".into(), |o| o.to_string()))
                        }
                        Err(e) => {
                            // Counts as a failed retry: it waits for the next one.
                            let counted = slot.health.failed(
                                Origin::Read,
                                Reason::Fetch,
                                format!("resuming reads: {e:#}"),
                                slot.position,
                                now_ms(),
                            );
                            slot.health.drained(now);
                            if let Some(change) = counted {
                                self.report_failure(slot, change);
                            }
                        }
                    }
                    changed = true;
                }
                Tended::Recovered(d) => {
                    info!(flow = %name, "{}[{}] recovered: {} cleared after {} failed retries; mirroring it again", slot.topic, slot.partition, d.reason.as_str(), d.retries);
                    self.set_partition_gauge(&slot.topic, Some(slot.partition), false);
                    changed = true;
                }
            }
        }
        if changed {
            self.publish_degraded(slots);
        }
    }

    /// A consumer error: the partition it names stops being read and is retried; one that
    /// names no partition marks the flow's source reads degraded until the source answers.
    pub(super) fn read_failed(
        &self,
        clients: &Clients,
        slots: &mut Slots,
        e: SourceError,
    ) -> Result<()> {
        let name = self.flow.name();
        if e.fatal {
            bail!(
                "flow {name}: the consumer of source cluster {} failed for good: {}",
                self.source.alias,
                e.message
            );
        }
        let reason = Reason::of_read(e.code);
        match &e.partition {
            Some((topic, partition)) => {
                let Some(i) = slots.find(topic, *partition) else {
                    debug!(flow = %name, "reading {topic}[{partition}] (not mirrored): {}", e.message);
                    return Ok(());
                };
                let slot = &mut slots.slots[i];
                let offset = e.offset.or(slot.position);
                if let Some(change) =
                    slot.health
                        .failed(Origin::Read, reason, e.message, offset, now_ms())
                {
                    self.pause(clients, slot);
                    self.report_failure(slot, change);
                    self.publish_degraded(slots);
                }
            }
            None => match e.code {
                // One broker connection dropped: librdkafka reconnects on its own, and logs it.
                RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::PartitionEOF => {
                    debug!(flow = %name, "reading from {}: {}", self.source.alias, e.message);
                }
                _ => {
                    let change = slots.source.failed(reason, e.message, now_ms());
                    if let Some(d) = slots.source.degraded() {
                        self.log_failure(None, d, change);
                    }
                    self.publish_degraded(slots);
                }
            },
        }
        Ok(())
    }

    /// Stops reading a partition (it is assigned again on its retry).
    pub(super) fn pause(&self, clients: &Clients, slot: &Slot) {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&slot.topic, slot.partition);
        if let Err(e) = clients.consumer.incremental_unassign(&tpl) {
            debug!(flow = %self.flow.name(), "pausing {}[{}]: {e}", slot.topic, slot.partition);
        }
    }

    /// [`FlowRunner::log_failure`] for a partition.
    pub(super) fn report_failure(&self, slot: &Slot, change: Change) {
        if let Some(d) = slot.health.degraded() {
            self.log_failure(Some(slot), d, change);
        }
    }

    /// Logs a counted failure once per transition (a failed retry at debug) and counts it in
    /// `refract_partition_errors_total`. `slot` is `None` for the flow's own source reads.
    pub(super) fn log_failure(&self, slot: Option<&Slot>, d: &Degraded, change: Change) {
        let name = self.flow.name();
        let what = slot.map_or_else(
            || format!("source reads from {}", self.source.alias),
            |s| format!("{}[{}]", s.topic, s.partition),
        );
        let at = d
            .offset
            .map(|o| format!(" at source offset {o}"))
            .unwrap_or_default();
        let reason = d.reason.as_str();
        match change {
            Change::Degraded => {
                warn!(flow = %name, "{what} degraded ({reason}){at}: {}; its other partitions keep flowing, it is retried with backoff", d.error)
            }
            Change::ReasonChanged(old) => {
                warn!(flow = %name, "{what} still degraded, now {reason} (was {}){at}: {}", old.as_str(), d.error)
            }
            Change::StillFailing => {
                debug!(flow = %name, "{what}: retry {} failed ({reason}){at}: {}", d.retries, d.error)
            }
        }
        let (topic, partition) = slot.map_or(("", None), |s| (s.topic.as_str(), Some(s.partition)));
        if let Ok(c) = self
            .metrics
            .partition_errors(&name, topic, partition, reason)
        {
            c.inc();
        }
        self.set_partition_gauge(topic, partition, true);
    }

    /// Sets `refract_partition_degraded` of a partition (the flow's reads: empty topic, none).
    pub(super) fn set_partition_gauge(&self, topic: &str, partition: Option<i32>, degraded: bool) {
        if let Ok(g) = self
            .metrics
            .partition_degraded(&self.flow.name(), topic, partition)
        {
            g.set(if degraded { 1.0 } else { 0.0 });
        }
    }

    /// Publishes the degraded partitions in the status and the flow's state.
    pub(super) fn publish_degraded(&self, slots: &Slots) {
        let mut list: Vec<DegradedPartition> = slots
            .source
            .degraded()
            .map(|d| DegradedPartition::new(None, d))
            .into_iter()
            .collect();
        let mut partitions: Vec<DegradedPartition> = slots
            .slots
            .iter()
            .filter_map(|s| {
                s.health
                    .degraded()
                    .map(|d| DegradedPartition::new(Some(s), d))
            })
            .collect();
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        list.extend(partitions);
        lock(&self.status).degraded = list;
        self.refresh_state();
    }

    /// Clears the degraded partitions of an earlier run from the status and the gauges.
    pub(super) fn forget_degraded(&self) {
        let old = std::mem::take(&mut lock(&self.status).degraded);
        for d in old {
            self.set_partition_gauge(d.topic.as_deref().unwrap_or(""), d.partition, false);
        }
    }
}
