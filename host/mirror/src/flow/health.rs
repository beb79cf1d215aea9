//! Partitions that cannot make progress: pausing, retrying with backoff, recovering, and
//! reporting each transition once (the reports themselves are in `events`).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use rdkafka::consumer::Consumer;

use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;
use tracing::{debug, info};

use crate::degraded::{Change, Degraded, Origin, Phase, Reason};
use refract_kafka::source_queue::SourceError;

use super::lock;
use super::run::Run;
use super::status::DegradedPartition;
use crate::clock::now_ms;

/// What one round of [`Run::tend`] found for one partition.
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

impl Run<'_> {
    /// Looks after the partitions' health: a delivery failure pauses its partition, a paused
    /// partition whose records are all settled is rewound to its first unacknowledged record
    /// and waits for its retry, a due retry reads it again, and a retried partition that made
    /// progress is healthy again.
    pub(super) fn tend(&mut self) {
        self.runner.flush_record_warnings();
        let now = Instant::now();
        let wall = now_ms();
        let mut found: Vec<(usize, Tended)> = Vec::new();
        {
            let mut progress = lock(&self.progress);
            for (i, slot) in self.slots.slots.iter_mut().enumerate() {
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
        let (runner, name) = (self.runner, &self.name);
        let mut changed = false;
        for (i, what) in found {
            let slot = &mut self.slots.slots[i];
            match what {
                Tended::Failed(change) => {
                    self.pause(i);
                    runner.report_failure(&self.slots.slots[i], change);
                    changed = true;
                }
                Tended::Waiting(wait) => {
                    debug!(flow = %name, "{}[{}] paused; retrying from offset {} in {wait:?}", slot.topic, slot.partition, slot.position.map_or("(start)".into(), |o| o.to_string()));
                }
                Tended::Retry => {
                    slot.health.retrying(now);
                    let mut tpl = TopicPartitionList::new();
                    let assigned = runner.add_at_position(&mut tpl, slot).and_then(|()| {
                        self.clients
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
                                runner.report_failure(slot, change);
                            }
                        }
                    }
                    changed = true;
                }
                Tended::Recovered(d) => {
                    info!(flow = %name, "{}[{}] recovered: {} cleared after {} failed retries; mirroring it again", slot.topic, slot.partition, d.reason.as_str(), d.retries);
                    runner.set_partition_gauge(&slot.topic, Some(slot.partition), false);
                    changed = true;
                }
            }
        }
        if changed {
            self.publish_degraded();
        }
    }

    /// A consumer error: the partition it names stops being read and is retried; one that
    /// names no partition marks the flow's source reads degraded until the source answers.
    pub(super) fn read_failed(&mut self, e: SourceError) -> Result<()> {
        let (runner, name) = (self.runner, &self.name);
        if e.fatal {
            bail!(
                "flow {name}: the consumer of source cluster {} failed for good: {}",
                runner.source.alias,
                e.message
            );
        }
        let reason = Reason::of_read(e.code);
        match &e.partition {
            Some((topic, partition)) => {
                let Some(i) = self.slots.find(topic, *partition) else {
                    debug!(flow = %name, "reading {topic}[{partition}] (not mirrored): {}", e.message);
                    return Ok(());
                };
                // `auto.offset.reset=error`: the position is out of the partition's range.
                if e.code == RDKafkaErrorCode::AutoOffsetReset {
                    return self.out_of_range(i, e);
                }
                let slot = &mut self.slots.slots[i];
                let offset = e.offset.or(slot.position);
                if let Some(change) =
                    slot.health
                        .failed(Origin::Read, reason, e.message, offset, now_ms())
                {
                    self.pause(i);
                    runner.report_failure(&self.slots.slots[i], change);
                    self.publish_degraded();
                }
            }
            None => match e.code {
                // One broker connection dropped: librdkafka reconnects on its own, and logs it.
                RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::PartitionEOF => {
                    debug!(flow = %name, "reading from {}: {}", runner.source.alias, e.message);
                }
                _ => {
                    let change = self.slots.source.failed(reason, e.message, now_ms());
                    if let Some(d) = self.slots.source.degraded() {
                        runner.log_failure(None, d, change);
                    }
                    self.publish_degraded();
                }
            },
        }
        Ok(())
    }

    /// Publishes the degraded partitions in the status and the flow's state.
    pub(super) fn publish_degraded(&self) {
        let slots = &self.slots;
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
        lock(&self.runner.status).degraded = list;
        self.runner.refresh_state();
    }

    /// Stops reading the partition of slot `i` (it is assigned again on its retry).
    pub(super) fn pause(&self, i: usize) {
        let slot = &self.slots.slots[i];
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&slot.topic, slot.partition);
        if let Err(e) = self.clients.consumer.incremental_unassign(&tpl) {
            debug!(flow = %self.name, "pausing {}[{}]: {e}", slot.topic, slot.partition);
        }
    }
}
