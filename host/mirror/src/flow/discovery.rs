//! Which partitions the flow mirrors: discovering source topics, naming and creating their
//! remote topics, and resuming and assigning each partition at its position.

use std::collections::HashMap;

use anyhow::{Context, Result};
use rdkafka::consumer::Consumer;

use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};
use tracing::{debug, error, info, warn};

use refract_plugin::ReplicationPolicy;

use crate::degraded::PartitionHealth;

use crate::clients::{
    await_partitions, create_topic, ensure_topic, grow_topic, list_topics, REQUEST_TIMEOUT,
};
use crate::planner::{Skip, TopicPlan, TopicPlanner};
use crate::progress::PartitionProgress;
use crate::takeover::Mm2Takeover;
use refract_telemetry::StatBatch;

use super::delivery::{Clients, Progress, Tracked};
use super::slots::{Slot, Slots};
use super::{lock, FlowRunner};

impl FlowRunner {
    /// Lists source topics, plans them, makes sure remote topics exist, and, when partitions
    /// were added, assigns every partition that is read at its position.
    pub(super) fn discover(
        &self,
        clients: &Clients,
        policy: &mut ReplicationPolicy,
        planner: &TopicPlanner,
        slots: &mut Slots,
        progress: &Progress,
        last_plan: &TopicPlan,
    ) -> Result<TopicPlan> {
        let name = self.flow.name();
        let topics = list_topics(&clients.consumer)
            .with_context(|| format!("listing topics on source cluster {}", self.source.alias))?;
        let plan = planner.plan(policy, &topics)?;
        for (topic, skip) in &plan.skipped {
            if last_plan
                .skipped
                .iter()
                .any(|(t, s)| t == topic && s == skip)
            {
                continue;
            }
            match skip {
                Skip::Conflict { with, remote } => {
                    warn!(flow = %name, "not mirroring {topic}: {with} is already mirrored to {remote}")
                }
                Skip::IllegalName { remote, reason } => {
                    let message = format!(
                        "not mirroring {topic}: the replication policy {} names it `{remote}` on {}, which is not a legal Kafka topic name: {reason}",
                        policy.plugin().name(),
                        self.flow.target
                    );
                    error!(flow = %name, "{message}");
                    lock(&self.status).last_error = Some(message);
                }
                Skip::Cycle => {
                    debug!(flow = %name, "not mirroring {topic}: it came from {} (cycle)", self.flow.target)
                }
                other => debug!(flow = %name, "not mirroring {topic}: {other:?}"),
            }
        }
        let target_topics: HashMap<String, i32> = list_topics(&clients.target_meta)
            .with_context(|| format!("listing topics on target cluster {}", self.target.alias))?
            .into_iter()
            .collect();
        let mut added = std::mem::take(&mut slots.unresumed);
        slots.awaiting_remote = false;
        for route in &plan.routes {
            // Only task 0 creates and grows remote topics; the others wait for them.
            let duties = self.task.duties();
            let usable = match target_topics.get(&route.remote_topic) {
                None if !duties => {
                    if (0..route.partitions).any(|p| self.task.owns(&route.source_topic, p)) {
                        debug!(flow = %name, "{}: waiting for task 0 to create {} on {}", self.task, route.remote_topic, self.target.alias);
                        slots.awaiting_remote = true;
                    }
                    continue;
                }
                Some(&have) if have < route.partitions && !duties => {
                    slots.awaiting_remote = true;
                    have
                }
                None => match create_topic(
                    &clients.admin,
                    &route.remote_topic,
                    route.partitions,
                    self.flow.replication_factor,
                    &self.remote_topic_configs(clients, &route.source_topic),
                ) {
                    Ok(()) => {
                        info!(flow = %name, "created {} on {} with {} partitions", route.remote_topic, self.target.alias, route.partitions);
                        route.partitions
                    }
                    Err(e) => {
                        warn!(flow = %name, "cannot create {} on {}; {} is not mirrored yet: {e:#}", route.remote_topic, self.target.alias, route.source_topic);
                        continue;
                    }
                },
                Some(&have) if have < route.partitions => {
                    match grow_topic(&clients.admin, &route.remote_topic, route.partitions)
                        .and_then(|()| {
                            await_partitions(
                                clients.producer.client(),
                                &route.remote_topic,
                                route.partitions,
                                REQUEST_TIMEOUT,
                            )
                        }) {
                        Ok(()) => {
                            info!(flow = %name, "added partitions to {} on {}: {have} -> {}", route.remote_topic, self.target.alias, route.partitions);
                            route.partitions
                        }
                        Err(e) => {
                            if slots.by_topic.get(&route.source_topic).map_or(0, Vec::len)
                                < route.partitions as usize
                            {
                                warn!(
                                    flow = %name,
                                    "{} has {} partitions on {} but {} has {}; partitions {have}.. wait until the target has them: {e:#}",
                                    route.remote_topic, have, self.target.alias, route.source_topic, route.partitions
                                );
                            }
                            have
                        }
                    }
                }
                Some(_) => route.partitions,
            };
            if !last_plan
                .routes
                .iter()
                .any(|r| r.source_topic == route.source_topic)
            {
                info!(flow = %name, "mirroring {} -> {}", route.source_topic, route.remote_topic);
            }
            let entry = slots
                .by_topic
                .entry(route.source_topic.clone())
                .or_default();
            for partition in (0..usable).filter(|&p| self.task.owns(&route.source_topic, p)) {
                let p = partition as usize;
                if entry.len() <= p {
                    entry.resize(p + 1, None);
                }
                if entry[p].is_none() {
                    entry[p] = Some(slots.slots.len());
                    added.push(slots.slots.len());
                    let metrics = self
                        .metrics
                        .source_partition(
                            &self.source.alias,
                            &self.target.alias,
                            &route.remote_topic,
                            partition,
                        )
                        .ok();
                    let tracked = if self.flow.offset_syncs.enabled {
                        PartitionProgress::tracking_pairs()
                    } else {
                        PartitionProgress::default()
                    };
                    lock(progress).push(Tracked::new(tracked, metrics.clone()));
                    slots.slots.push(Slot {
                        topic: route.source_topic.clone(),
                        remote: route.remote_topic.clone(),
                        partition,
                        position: None,
                        committed: None,
                        metrics,
                        read_bytes: 0,
                        age: StatBatch::new(),
                        health: PartitionHealth::default(),
                        read: false,
                    });
                }
            }
        }
        {
            let mut status = lock(&self.status);
            status.routes = plan
                .routes
                .iter()
                .map(|r| (r.source_topic.clone(), r.remote_topic.clone()))
                .collect();
            status.partitions = slots
                .slots
                .iter()
                .map(|s| format!("{}[{}]", s.topic, s.partition))
                .collect();
            status.partitions.sort();
        }
        if !added.is_empty() {
            let resumed = self
                .resume(clients, slots, &added, policy)
                .and_then(|()| self.assign(clients, slots));
            if let Err(e) = resumed {
                slots.unresumed = added;
                return Err(e);
            }
        }
        Ok(plan)
    }

    /// Reads the committed position of newly added partitions and reports how many records past
    /// it are already on the target (they will be mirrored again). A partition with none resumes
    /// where a stopped MirrorMaker 2 left it, if one ran this flow (see `takeover`).
    pub(super) fn resume(
        &self,
        clients: &Clients,
        slots: &mut Slots,
        added: &[usize],
        policy: &mut ReplicationPolicy,
    ) -> Result<()> {
        if self.exactly_once() {
            return self.resume_exactly_once(clients, slots, added);
        }
        let committed = self.committed_positions(clients, slots, added)?;
        let mut downstream_tpl = TopicPartitionList::new();
        let mut duplicates = 0u64;
        let mut mm2 = Mm2Takeover::new(&self.flow, &self.source, &self.target);
        for elem in committed.elements() {
            let Some(i) = slots.find(elem.topic(), elem.partition()) else {
                continue;
            };
            let Offset::Offset(next) = elem.offset() else {
                let slot = &mut slots.slots[i];
                if let Some(next) = mm2.resume_offset(&slot.topic, &slot.remote, slot.partition)? {
                    slot.position = Some(next);
                    continue;
                }
                // No position yet: whatever the remote partition already holds was mirrored by
                // a run that never committed, and will be mirrored again from the start.
                if !self.starts_from_earliest() {
                    continue;
                }
                if let Ok((low, high)) = clients.target_meta.fetch_watermarks(
                    &slot.remote,
                    slot.partition,
                    REQUEST_TIMEOUT,
                ) {
                    duplicates += u64::try_from(high - low).unwrap_or(0);
                }
                continue;
            };
            let slot = &mut slots.slots[i];
            slot.position = Some(next);
            slot.committed = Some(next);
            downstream_tpl.add_partition(&slot.remote, slot.partition);
            debug!(flow = %self.flow.name(), "{}[{}] resumes at offset {next}", slot.topic, slot.partition);
        }
        if downstream_tpl.count() > 0 {
            let downstream = clients
                .target_meta
                .committed_offsets(downstream_tpl, REQUEST_TIMEOUT)
                .context("reading the flow's committed target positions")?;
            for elem in downstream.elements() {
                let Offset::Offset(acked_end) = elem.offset() else {
                    continue;
                };
                if let Ok((_, high)) = clients.target_meta.fetch_watermarks(
                    elem.topic(),
                    elem.partition(),
                    REQUEST_TIMEOUT,
                ) {
                    duplicates += u64::try_from(high - acked_end).unwrap_or(0);
                }
            }
        }
        duplicates += mm2.finish(&clients.target_meta, policy);
        if duplicates > 0 {
            warn!(
                flow = %self.flow.name(),
                duplicates,
                "resuming after an unclean stop: {duplicates} records already on the target past the last committed position will be mirrored again (duplicates)"
            );
        }
        lock(&self.status).duplicates += duplicates;
        Ok(())
    }

    /// The flow's committed source positions (its group's offsets) of the slots `added`.
    pub(super) fn committed_positions(
        &self,
        clients: &Clients,
        slots: &Slots,
        added: &[usize],
    ) -> Result<TopicPartitionList> {
        let mut tpl = TopicPartitionList::new();
        for &i in added {
            tpl.add_partition(&slots.slots[i].topic, slots.slots[i].partition);
        }
        clients
            .consumer
            .committed_offsets(tpl, REQUEST_TIMEOUT)
            .context("reading the flow's committed source positions")
    }

    /// Assigns every partition that is read (not a degraded one waiting for its retry) at its
    /// position.
    pub(super) fn assign(&self, clients: &Clients, slots: &Slots) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for s in slots.slots.iter().filter(|s| s.health.flowing()) {
            self.add_at_position(&mut tpl, s)?;
        }
        clients
            .consumer
            .assign(&tpl)
            .context("assigning source partitions")?;
        Ok(())
    }

    /// Adds a partition to `tpl` at the position it is read from next.
    pub(super) fn add_at_position(&self, tpl: &mut TopicPartitionList, s: &Slot) -> Result<()> {
        // With no committed position, start where auto.offset.reset says, explicitly:
        // leaving it to librdkafka costs another committed-offset lookup per partition.
        let fresh = if self.starts_from_earliest() {
            Offset::Beginning
        } else {
            Offset::End
        };
        let offset = s.position.map_or(fresh, Offset::Offset);
        tpl.add_partition_offset(&s.topic, s.partition, offset)
            .with_context(|| format!("assigning {}[{}]", s.topic, s.partition))
    }

    /// Makes sure a topic a processor routes to (or the dead-letter topic) exists on the target.
    pub(super) fn ensure_output_topic(
        &self,
        clients: &Clients,
        topic: &str,
        partitions: i32,
    ) -> Result<()> {
        if lock(&self.known_outputs).contains(topic) {
            return Ok(());
        }
        let created = ensure_topic(
            &clients.target_meta,
            &clients.admin,
            topic,
            partitions,
            self.flow.replication_factor,
            &[],
        )
        .with_context(|| {
            format!(
                "creating {topic} on {} for flow {}",
                self.target.alias,
                self.flow.name()
            )
        })?;
        if created {
            info!(flow = %self.flow.name(), "created {topic} on {} with {partitions} partitions", self.target.alias);
        }
        lock(&self.known_outputs).insert(topic.to_string());
        Ok(())
    }
}
