//! Which partitions the flow mirrors: discovering source topics, naming and creating their
//! remote topics, and resuming and assigning each partition at its position.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::consumer::Consumer;

use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};
use tracing::{debug, error, info, warn};

use refract_config::DeliveryMode;
use refract_kafka::clients::{
    create_topics, ensure_topic, grow_topics, list_topics, list_topics_of, watermarks_many,
    TopicToCreate, REQUEST_TIMEOUT,
};
use refract_kafka::coordinator;

use crate::degraded::PartitionHealth;
use crate::planner::{NameProblem, Named, RefusedName, Route, Skip, TopicPlan};
use crate::progress::PartitionProgress;
use crate::series::RefractSeries;
use crate::takeover::Mm2Takeover;
use refract_schema::LastIds;
use refract_telemetry::StatBatch;

use super::delivery::Tracked;
use super::lock;
use super::run::{Delivery, Run};
use super::slots::Slot;

/// A discovery that starts mirroring more topics than this says so in one line (each topic at
/// debug level), not one line per topic.
const LISTED_TOPICS: usize = 20;

/// Longest an exactly-once discovery waits for the remote topics it created to show in the
/// target's metadata (see `Run::await_created`).
const AWAIT_CREATED: Duration = Duration::from_secs(10);

impl Run<'_> {
    /// Lists source topics, plans them, makes sure remote topics exist, and, when partitions
    /// were added, assigns every partition that is read at its position.
    pub(super) fn discover(&mut self) -> Result<TopicPlan> {
        let runner = self.runner;
        let name = runner.flow.name();
        // Through the admin client: the consumer's broker thread is busy with fetch answers.
        let topics = list_topics_of(self.clients.source_admin.inner())
            .with_context(|| format!("listing topics on source cluster {}", runner.source.alias))?;
        let plan = self.planner.plan(&mut self.policy, &topics)?;
        let last_plan = &self.plan;
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
                        "not mirroring {topic}: the replication policy {} names it `{}` on {}, which is not a legal Kafka topic name: {reason}",
                        self.policy.plugin().name(),
                        refract_plugin::plugin_text(remote, refract_plugin::MESSAGE_CAP),
                        runner.flow.target
                    );
                    error!(flow = %name, "{message}");
                    lock(&runner.status).last_error = Some(message);
                }
                Skip::Reserved { remote, owner } => {
                    let named = Named::Remote {
                        source_topic: topic.clone(),
                    };
                    let problem = NameProblem::Reserved(*owner);
                    let refused =
                        RefusedName::new(&runner.flow, &self.policy, named, remote, problem);
                    let message = format!("not mirroring {topic}: {refused}");
                    error!(flow = %name, "{message}");
                    lock(&runner.status).last_error = Some(message);
                }
                Skip::Cycle => {
                    debug!(flow = %name, "not mirroring {topic}: it came from {} (cycle)", runner.flow.target)
                }
                other => debug!(flow = %name, "not mirroring {topic}: {other:?}"),
            }
        }
        let target_topics: HashMap<String, i32> = list_topics(&self.clients.target_meta)
            .with_context(|| format!("listing topics on target cluster {}", runner.target.alias))?
            .into_iter()
            .collect();
        self.check_incarnations(&plan, &target_topics);
        let created = self.create_remote_topics(&plan, &target_topics);
        let grown = self.grow_remote_topics(&plan, &target_topics);
        let exactly_once = runner.flow.delivery.mode == DeliveryMode::ExactlyOnce;
        let shown = if exactly_once {
            self.await_created(&created)
        } else {
            HashMap::new()
        };
        let last_plan = &self.plan;
        let mut added = std::mem::take(&mut self.slots.unresumed);
        self.slots.awaiting_remote = false;
        // An estate's first discovery adds thousands of topics: one line each only for a few.
        let new_routes = plan
            .routes
            .iter()
            .filter(|r| {
                !last_plan
                    .routes
                    .iter()
                    .any(|l| l.source_topic == r.source_topic)
            })
            .count();
        let each = new_routes <= LISTED_TOPICS;
        let mut started: Vec<String> = Vec::new();
        for route in &plan.routes {
            if self.slots.incarnations.stopped(&route.source_topic) {
                continue;
            }
            // Only task 0 creates and grows remote topics; the others wait for them.
            let duties = runner.task.duties();
            let usable = match target_topics.get(&route.remote_topic) {
                None if !duties => {
                    if (0..route.partitions).any(|p| runner.task.owns(&route.source_topic, p)) {
                        debug!(flow = %name, "{}: waiting for task 0 to create {} on {}", runner.task, route.remote_topic, runner.target.alias);
                        self.slots.awaiting_remote = true;
                    }
                    continue;
                }
                Some(&have) if have < route.partitions && !duties => {
                    self.slots.awaiting_remote = true;
                    have
                }
                None => match created.get(&route.remote_topic) {
                    Some(Ok(())) => {
                        if each {
                            info!(flow = %name, "created {} on {} with {} partitions", route.remote_topic, runner.target.alias, route.partitions);
                        } else {
                            debug!(flow = %name, "created {} on {} with {} partitions", route.remote_topic, runner.target.alias, route.partitions);
                        }
                        // Exactly-once: see `await_created`; one the target does not show yet is
                        // read from the next discovery on.
                        if exactly_once && !shown.contains_key(&route.remote_topic) {
                            self.slots.awaiting_remote = true;
                            continue;
                        }
                        route.partitions
                    }
                    // Not created (said by `create_remote_topics`), or not asked for.
                    Some(Err(_)) | None => continue,
                },
                Some(&have) if have < route.partitions => {
                    match grown.get(&route.remote_topic) {
                        Some(Ok(())) => {
                            info!(flow = %name, "added partitions to {} on {}: {have} -> {}", route.remote_topic, runner.target.alias, route.partitions);
                            route.partitions
                        }
                        // Not grown (why is said below), or not asked for.
                        None => have,
                        Some(Err(e)) => {
                            if self
                                .slots
                                .by_topic
                                .get(&route.source_topic)
                                .map_or(0, Vec::len)
                                < route.partitions as usize
                            {
                                warn!(
                                    flow = %name,
                                    "{} has {} partitions on {} but {} has {}; partitions {have}.. wait until the target has them: {e}",
                                    route.remote_topic, have, runner.target.alias, route.source_topic, route.partitions
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
                if each {
                    info!(flow = %name, "mirroring {} -> {}", route.source_topic, route.remote_topic);
                } else {
                    debug!(flow = %name, "mirroring {} -> {}", route.source_topic, route.remote_topic);
                    started.push(format!("{} -> {}", route.source_topic, route.remote_topic));
                }
            }
            let entry = self
                .slots
                .by_topic
                .entry(route.source_topic.clone())
                .or_default();
            for partition in (0..usable).filter(|&p| runner.task.owns(&route.source_topic, p)) {
                let p = partition as usize;
                if entry.len() <= p {
                    entry.resize(p + 1, None);
                }
                if entry[p].is_none() {
                    entry[p] = Some(self.slots.slots.len());
                    added.push(self.slots.slots.len());
                    let metrics = runner
                        .metrics
                        .source_partition(
                            &runner.source.alias,
                            &runner.target.alias,
                            &route.remote_topic,
                            runner.partition_series.then_some(partition),
                        )
                        .ok();
                    let tracked = if runner.flow.offset_syncs.enabled {
                        PartitionProgress::tracking_pairs()
                    } else {
                        PartitionProgress::default()
                    };
                    lock(&self.progress).push(Tracked::new(tracked, metrics.clone()));
                    self.slots.slots.push(Slot {
                        topic: route.source_topic.clone(),
                        remote: route.remote_topic.clone(),
                        partition,
                        position: None,
                        committed: None,
                        committed_ids: String::new(),
                        metrics,
                        read_bytes: 0,
                        age: StatBatch::new(),
                        health: PartitionHealth::default(),
                        read: false,
                        read_since_lag: false,
                        caught_up_at: None,
                        translates: runner.schemas.is_some()
                            && !plan.is_heartbeats(&route.source_topic),
                        last_ids: LastIds::default(),
                    });
                }
            }
        }
        if !started.is_empty() {
            let n = started.len();
            started.truncate(3);
            info!(flow = %name, "mirroring {n} more topics: {} and {} more (each is listed at debug level)", started.join(", "), n - started.len());
        }
        {
            let mut status = lock(&runner.status);
            status.routes = plan
                .routes
                .iter()
                .map(|r| (r.source_topic.clone(), r.remote_topic.clone()))
                .collect();
            status.partitions = self
                .slots
                .slots
                .iter()
                .map(|s| format!("{}[{}]", s.topic, s.partition))
                .collect();
            status.partitions.sort();
        }
        if !added.is_empty() {
            let at = Instant::now();
            let resumed = self.resume(&added).and_then(|()| {
                let resumed_in = at.elapsed();
                self.assign()?;
                debug!(flow = %name, "{} new partition(s): resumed in {:.2} s, assigned in {:.2} s", added.len(), resumed_in.as_secs_f64(), (at.elapsed() - resumed_in).as_secs_f64());
                Ok(())
            });
            if let Err(e) = resumed {
                self.slots.unresumed = added;
                return Err(e);
            }
        }
        Ok(plan)
    }

    /// Exactly-once: waits (at most [`AWAIT_CREATED`]) until the target's metadata shows every
    /// remote topic just created, and returns the topics it shows. A broker that does not host a
    /// just-created partition yet refuses a record for it (UNKNOWN_TOPIC_OR_PARTITION), and
    /// under exactly-once that fails the whole transaction (seen at 10,000 partitions);
    /// at-least-once retries that one partition instead.
    fn await_created(&self, created: &HashMap<String, Result<(), String>>) -> HashMap<String, i32> {
        let wanted: Vec<&String> = created
            .iter()
            .filter_map(|(t, r)| r.is_ok().then_some(t))
            .collect();
        if wanted.is_empty() {
            return HashMap::new();
        }
        let deadline = Instant::now() + AWAIT_CREATED;
        loop {
            let shown: HashMap<String, i32> = list_topics(&self.clients.target_meta)
                .map(|t| t.into_iter().collect())
                .unwrap_or_default();
            if wanted.iter().all(|t| shown.contains_key(*t)) || Instant::now() >= deadline {
                return shown;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Creates the missing remote topics of `plan` (not on `target_topics`) at once: their
    /// source configs read with one DescribeConfigs request and the topics created with one
    /// CreateTopics request per
    /// [`ADMIN_BATCH`](refract_kafka::clients::ADMIN_BATCH) topics, so a discovery of many new topics costs a
    /// few round trips, not one per topic. Only task 0 creates topics. Per remote topic: created
    /// (or there already), or why not.
    fn create_remote_topics(
        &self,
        plan: &TopicPlan,
        target_topics: &HashMap<String, i32>,
    ) -> HashMap<String, Result<(), String>> {
        let runner = self.runner;
        if !runner.task.duties() {
            return HashMap::new();
        }
        let missing: Vec<&Route> = plan
            .routes
            .iter()
            .filter(|r| !target_topics.contains_key(&r.remote_topic))
            .filter(|r| !self.slots.incarnations.stopped(&r.source_topic))
            .collect();
        if missing.is_empty() {
            return HashMap::new();
        }
        let started = Instant::now();
        let sources: Vec<String> = missing.iter().map(|r| r.source_topic.clone()).collect();
        let topics: Vec<TopicToCreate> = missing
            .iter()
            .zip(self.remote_topic_configs(&sources))
            .map(|(r, configs)| TopicToCreate {
                name: r.remote_topic.clone(),
                partitions: r.partitions,
                replication_factor: runner.flow.replication_factor,
                configs,
            })
            .collect();
        let (results, requests, existed) = create_topics(&self.clients.admin, &topics);
        let created = results.iter().filter(|(_, r)| r.is_ok()).count() - existed;
        let target = &runner.target.alias;
        if created > 0 {
            info!(
                flow = %self.name,
                "created {created} of {} missing remote topics on {target} with {requests} CreateTopics request(s) in {:.2} s",
                topics.len(),
                started.elapsed().as_secs_f64()
            );
        }
        if existed > 0 {
            // Created by the last discovery (or by another process) but not yet in the target's
            // metadata with leaders: a broker slow to bring thousands of partitions online.
            debug!(flow = %self.name, "{existed} of {} remote topics missing from {target}'s metadata exist already", topics.len());
        }
        // Failures by cause: a target that stops answering fails them all alike, and is said
        // once, not once per topic.
        let mut failed: Vec<(&str, Vec<&str>)> = Vec::new();
        for (topic, result) in &results {
            if let Err(cause) = result {
                match failed.iter_mut().find(|(c, _)| c == cause) {
                    Some((_, topics)) => topics.push(topic),
                    None => failed.push((cause, vec![topic])),
                }
            }
        }
        for (cause, topics) in failed {
            let named = match topics.len() {
                0..=3 => topics.join(", "),
                n => format!("{} and {} more", topics[..3].join(", "), n - 3),
            };
            warn!(flow = %self.name, "cannot create {} remote topic(s) on {target} ({named}); their source topics are not mirrored yet and are tried again at the next discovery: {cause}", topics.len());
        }
        results.into_iter().collect()
    }

    /// Grows the remote topics of `plan` that have fewer partitions on `target_topics` than their
    /// source topics, with one CreatePartitions request per
    /// [`ADMIN_BATCH`](refract_kafka::clients::ADMIN_BATCH) topics and one wait for the producer
    /// to see them all. Only task 0 grows topics. Per remote topic asked for: grown, or why not.
    fn grow_remote_topics(
        &self,
        plan: &TopicPlan,
        target_topics: &HashMap<String, i32>,
    ) -> HashMap<String, Result<(), String>> {
        if !self.runner.task.duties() {
            return HashMap::new();
        }
        let short: Vec<(String, i32)> = plan
            .routes
            .iter()
            .filter(|r| !self.slots.incarnations.stopped(&r.source_topic))
            .filter(|r| {
                target_topics
                    .get(&r.remote_topic)
                    .is_some_and(|&have| have < r.partitions)
            })
            .map(|r| (r.remote_topic.clone(), r.partitions))
            .collect();
        if short.is_empty() {
            return HashMap::new();
        }
        let (results, requests) =
            grow_topics(&self.clients.admin, self.clients.producer.client(), &short);
        debug!(flow = %self.name, "grew {} remote topic(s) with {requests} CreatePartitions request(s)", short.len());
        results.into_iter().collect()
    }

    /// Reads the committed position of newly added partitions and reports how many records past
    /// it are already on the target (they will be mirrored again). A partition with none resumes
    /// where a stopped MirrorMaker 2 left it, if one ran this flow (see `takeover`).
    pub(super) fn resume(&mut self, added: &[usize]) -> Result<()> {
        if let Delivery::ExactlyOnce(_) = self.delivery {
            return self.resume_exactly_once(added);
        }
        let committed = self.committed_positions(added)?;
        let runner = self.runner;
        let mut downstream_tpl = TopicPartitionList::new();
        let mut duplicates = 0u64;
        // Per slot, records already on the target past its committed position.
        let mut on_target: HashMap<usize, i64> = HashMap::new();
        let mut mm2 = Mm2Takeover::new(&runner.flow, &runner.source, &runner.target);
        // Slots without a position whose remote partitions' records are counted (below, in
        // one batch).
        let mut fresh: Vec<usize> = Vec::new();
        for elem in committed.elements() {
            let Some(i) = self.slots.find(elem.topic(), elem.partition()) else {
                continue;
            };
            let Offset::Offset(next) = elem.offset() else {
                let slot = &mut self.slots.slots[i];
                if let Some(next) = mm2.resume_offset(&slot.topic, &slot.remote, slot.partition)? {
                    slot.position = Some(next);
                    continue;
                }
                // No position yet: whatever the remote partition already holds was mirrored by
                // a run that never committed, and will be mirrored again from the start.
                if runner.starts_from_earliest() {
                    fresh.push(i);
                }
                continue;
            };
            let slot = &mut self.slots.slots[i];
            slot.position = Some(next);
            slot.committed = Some(next);
            downstream_tpl.add_partition(&slot.remote, slot.partition);
            debug!(flow = %self.name, "{}[{}] resumes at offset {next}", slot.topic, slot.partition);
        }
        if !fresh.is_empty() {
            let partitions = self.slots.remote_partitions(&fresh);
            let marks = watermarks_many(&self.clients.target_meta, &partitions, REQUEST_TIMEOUT);
            duplicates += marks
                .values()
                .map(|(low, high)| u64::try_from(high - low).unwrap_or(0))
                .sum::<u64>();
        }
        if downstream_tpl.count() > 0 {
            let downstream = coordinator::committed_offsets(
                &self.clients.target_meta,
                &downstream_tpl,
                REQUEST_TIMEOUT,
                &runner.stop,
                |e| self.coordinator_not_ready(&runner.target.alias, e),
            )
            .context("reading the flow's committed target positions")?;
            let acked: Vec<(String, i32, i64)> = downstream
                .elements()
                .iter()
                .filter_map(|elem| match elem.offset() {
                    Offset::Offset(end) => Some((elem.topic().to_string(), elem.partition(), end)),
                    _ => None,
                })
                .collect();
            let partitions: Vec<(&str, i32)> =
                acked.iter().map(|(t, p, _)| (t.as_str(), *p)).collect();
            let marks = watermarks_many(&self.clients.target_meta, &partitions, REQUEST_TIMEOUT);
            // The added slots by remote partition (a lookup per committed partition).
            let by_remote: HashMap<(&str, i32), usize> = added
                .iter()
                .map(|&i| {
                    let slot = &self.slots.slots[i];
                    ((slot.remote.as_str(), slot.partition), i)
                })
                .collect();
            for (topic, partition, acked_end) in &acked {
                let Some((_, high)) = marks.get(&(topic.clone(), *partition)) else {
                    continue;
                };
                let beyond = (high - acked_end).max(0);
                duplicates += beyond as u64;
                if let Some(&i) = by_remote.get(&(topic.as_str(), *partition)) {
                    on_target.insert(i, beyond);
                }
            }
        }
        duplicates += mm2.finish(&self.clients.target_meta, &mut self.policy);
        // A topic deleted and created again while the flow was not running.
        self.check_recorded_incarnations(added, &committed);
        // Positions below the source's log start: records deleted before they were mirrored
        // (those of them already on the target are not re-sent, so not duplicates either).
        let positions: HashMap<usize, Option<i64>> = added
            .iter()
            .map(|&i| (i, self.slots.slots[i].position))
            .collect();
        self.check_log_start(added, &on_target)?;
        for (i, beyond) in &on_target {
            if let (Some(Some(from)), Some(to)) = (positions.get(i), self.slots.slots[*i].position)
            {
                let deleted = (to - from).clamp(0, *beyond);
                duplicates = duplicates.saturating_sub(deleted as u64);
            }
        }
        if duplicates > 0 {
            warn!(
                flow = %self.name,
                duplicates,
                "resuming after an unclean stop: {duplicates} records already on the target past the last committed position will be mirrored again (duplicates)"
            );
        }
        lock(&runner.status).duplicates += duplicates;
        Ok(())
    }

    /// The flow's committed source positions (its group's offsets) of the slots `added`. A
    /// group coordinator that is not ready yet (a cluster that just started) is asked again
    /// within moments, for up to [`coordinator::RETRY_FOR`], rather than at the next discovery.
    pub(super) fn committed_positions(&self, added: &[usize]) -> Result<TopicPartitionList> {
        let mut tpl = TopicPartitionList::new();
        for &i in added {
            let slot = &self.slots.slots[i];
            tpl.add_partition(&slot.topic, slot.partition);
        }
        let runner = self.runner;
        coordinator::committed_offsets(
            &self.clients.consumer,
            &tpl,
            REQUEST_TIMEOUT,
            &runner.stop,
            |e| self.coordinator_not_ready(&runner.source.alias, e),
        )
        .context("reading the flow's committed source positions")
    }

    /// Says once per request that `cluster`'s group coordinator is not ready (`e`) and that the
    /// request is retried.
    fn coordinator_not_ready(&self, cluster: &str, e: &rdkafka::error::KafkaError) {
        info!(flow = %self.name, "the group coordinator of cluster {cluster} is not ready yet ({e}); asking again for up to {} s", coordinator::RETRY_FOR.as_secs());
    }

    /// Assigns every partition that is read (not a degraded one waiting for its retry) at its
    /// position.
    pub(super) fn assign(&self) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for s in self.slots.slots.iter().filter(|s| s.health.flowing()) {
            self.runner.add_at_position(&mut tpl, s)?;
        }
        self.clients
            .consumer
            .assign(&tpl)
            .context("assigning source partitions")?;
        Ok(())
    }

    /// Makes sure a topic a processor routes to (or the dead-letter topic) exists on the target.
    pub(super) fn ensure_output_topic(&self, topic: &str, partitions: i32) -> Result<()> {
        let runner = self.runner;
        if lock(&runner.known_outputs).contains(topic) {
            return Ok(());
        }
        let created = ensure_topic(
            &self.clients.target_meta,
            &self.clients.admin,
            topic,
            partitions,
            runner.flow.replication_factor,
            &[],
        )
        .with_context(|| {
            format!(
                "creating {topic} on {} for flow {}",
                runner.target.alias, self.name
            )
        })?;
        if created {
            info!(flow = %self.name, "created {topic} on {} with {partitions} partitions", runner.target.alias);
        }
        lock(&runner.known_outputs).insert(topic.to_string());
        Ok(())
    }
}
