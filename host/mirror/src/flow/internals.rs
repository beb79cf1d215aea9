//! MirrorMaker 2's side channels of a flow: offset syncs, heartbeats, and topic config and ACL
//! sync.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::BaseConsumer;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::BaseRecord;

use tracing::{debug, info, warn};

use refract_config::{OffsetSyncsLocation, OffsetTranslation};

use crate::acls;

use refract_kafka::clients::{ensure_topic, REQUEST_TIMEOUT};
use refract_mm2::exact::PREVIOUS_HEADER;
use refract_mm2::{Heartbeat, OffsetSync, OffsetSyncWriter};

/// An offset sync and, from an exact writer, the upstream offset of the sync before it in its
/// chain (`Some(None)`: the chain's first): the value of its `refract.sync.previous` header.
pub(super) type ChainedSync = (OffsetSync, Option<Option<i64>>);
use crate::planner::{OwnTopics, TopicPlan};
use crate::topic_configs;

use super::delivery::{Clients, Sent};
use super::run::Run;
use super::{lock, FlowRunner};
use crate::clock::now_ms;

/// Which offset syncs [`Run::emit_internals`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Syncs {
    /// Those due now.
    Due,
    /// All of them, delayed ones included (at a commit, before a transaction commits, and when
    /// the run stops).
    All,
}

/// MirrorMaker 2's side channels of a flow: offset syncs, heartbeats, and the schedule of topic
/// config and ACL sync.
pub(super) struct Internals {
    pub(super) writer: Option<OffsetSyncWriter>,
    pub(super) sync_topic: String,
    pub(super) heartbeats_topic: String,
    pub(super) next_heartbeat: Instant,
    /// When the source topics' configs are next applied to their remote topics again.
    pub(super) next_config_sync: Instant,
    pub(super) config_sync_unsupported: bool,
    pub(super) next_acl_sync: Instant,
    pub(super) acl_sync_off: bool,
    /// Exactly-once with offset syncs on the source: syncs wait in `held_syncs` until the
    /// transaction they describe commits.
    pub(super) hold_syncs: bool,
    pub(super) held_syncs: Vec<ChainedSync>,
}

impl Internals {
    /// Creates the MM2 internal topics this flow writes, as its policy named them (`own`): the
    /// offset-syncs topic (on the source or the target) and `heartbeats` on the target (and on
    /// the source for the reverse pair). A broker that refuses to create them only costs a
    /// warning.
    pub(super) fn create(runner: &FlowRunner, clients: &Clients, own: &OwnTopics) -> Result<Self> {
        let (flow, source, target) = (&runner.flow, &runner.source, &runner.target);
        let name = flow.name();
        let sync_topic = own.offset_syncs.clone();
        let heartbeats_topic = own.heartbeats.clone();
        let compact = [("cleanup.policy".to_string(), "compact".to_string())];
        let rf = flow.internal_replication_factor;
        type Wanted<'a> = (
            &'a BaseConsumer,
            &'a AdminClient<DefaultClientContext>,
            &'a str,
            &'a str,
        );
        let on_source = (&*clients.consumer, &clients.source_admin, &*source.alias);
        let on_target = (&clients.target_meta, &clients.admin, &*target.alias);
        let mut wanted: Vec<Wanted<'_>> = Vec::new();
        if flow.offset_syncs.enabled {
            let (meta, admin, cluster) = match flow.offset_syncs.location {
                OffsetSyncsLocation::Source => on_source,
                OffsetSyncsLocation::Target => on_target,
            };
            wanted.push((meta, admin, cluster, &sync_topic));
        }
        if flow.heartbeats.enabled && runner.task.duties() {
            wanted.push((on_target.0, on_target.1, on_target.2, &heartbeats_topic));
            if runner.reverse_heartbeats() {
                wanted.push((on_source.0, on_source.1, on_source.2, &heartbeats_topic));
            }
        }
        for (meta, admin, cluster, topic) in wanted {
            if let Err(e) = ensure_topic(meta, admin, topic, 1, rf, &compact) {
                warn!(flow = %name, "cannot create {topic} on {cluster}: {e:#}");
            }
        }
        Ok(Self {
            writer: flow
                .offset_syncs
                .enabled
                .then(|| match flow.offset_syncs.translation {
                    OffsetTranslation::Exact => OffsetSyncWriter::exact(flow.offset_syncs.lag_max),
                    OffsetTranslation::Mm2 => OffsetSyncWriter::new(flow.offset_syncs.lag_max),
                }),
            sync_topic,
            heartbeats_topic,
            next_heartbeat: Instant::now(),
            next_config_sync: Instant::now() + flow.config_sync.interval,
            config_sync_unsupported: false,
            next_acl_sync: Instant::now(),
            acl_sync_off: !flow.acl_sync.enabled,
            hold_syncs: runner.exactly_once()
                && flow.offset_syncs.location == OffsetSyncsLocation::Source,
            held_syncs: Vec::new(),
        })
    }
}

impl Run<'_> {
    /// Writes the offset syncs `which` says (the due ones, or all) and due heartbeats.
    pub(super) fn emit_internals(&mut self, which: Syncs) {
        let runner = self.runner;
        let internals = &mut self.internals;
        if let Some(writer) = internals.writer.as_mut() {
            // A sync flagged for a partition replaces one still pending there, so pending syncs
            // are collected after every update: a burst of acknowledgements must not collapse
            // the syncs it needs into its last one.
            let mut syncs: Vec<ChainedSync> = Vec::new();
            let exact = writer.is_exact();
            let mut take = |writer: &mut OffsetSyncWriter| {
                syncs.extend(
                    writer
                        .take_pending_chained()
                        .into_iter()
                        .map(|(sync, previous)| (sync, exact.then_some(previous))),
                );
            };
            {
                let mut progress = lock(&self.progress);
                for (i, slot) in self.slots.slots.iter().enumerate() {
                    for (up, down) in progress[i].take_completed() {
                        writer.update(&slot.topic, slot.partition, up, down);
                        take(writer);
                    }
                }
            }
            if which == Syncs::All {
                writer.promote_delayed();
                take(writer);
            }
            if internals.hold_syncs {
                internals.held_syncs.extend(syncs);
            } else if !syncs.is_empty() {
                let sent = syncs.iter().filter(|sync| self.send_sync(sync)).count();
                lock(&runner.status).offset_syncs += sent as u64;
            }
        }
        self.emit_heartbeats();
    }

    /// Writes the flow's heartbeats (and the reverse pair's) when due.
    fn emit_heartbeats(&mut self) {
        let (runner, internals, clients) = (self.runner, &mut self.internals, &self.clients);
        // Heartbeats are a once-per-flow duty: task 0's.
        if runner.flow.heartbeats.enabled
            && runner.task.duties()
            && Instant::now() >= internals.next_heartbeat
        {
            internals.next_heartbeat = Instant::now() + runner.flow.heartbeats.interval;
            let now = now_ms();
            let forward = Heartbeat {
                source_alias: runner.source.alias.clone(),
                target_alias: runner.target.alias.clone(),
                timestamp: now,
            };
            if let (Ok(key), Ok(value)) = (forward.key_bytes(), forward.value_bytes()) {
                let record =
                    BaseRecord::with_opaque_to(&internals.heartbeats_topic, Sent::internal())
                        .partition(0)
                        .key(&key)
                        .payload(&value)
                        .timestamp(now);
                match clients.producer.send::<Vec<u8>, Vec<u8>>(record) {
                    Ok(()) => lock(&runner.status).heartbeats += 1,
                    Err((e, _)) => debug!(flow = %self.name, "heartbeat not sent: {e}"),
                }
            }
            if runner.reverse_heartbeats() {
                let reverse = Heartbeat {
                    source_alias: runner.target.alias.clone(),
                    target_alias: runner.source.alias.clone(),
                    timestamp: now,
                };
                if let (Some(p), Ok(key), Ok(value)) = (
                    &clients.source_producer,
                    reverse.key_bytes(),
                    reverse.value_bytes(),
                ) {
                    let record = BaseRecord::to(&internals.heartbeats_topic)
                        .partition(0)
                        .key(&key)
                        .payload(&value)
                        .timestamp(now);
                    if let Err((e, _)) = p.send::<Vec<u8>, Vec<u8>>(record) {
                        debug!(flow = %self.name, "reverse heartbeat not sent: {e}");
                    }
                    p.poll(Duration::ZERO);
                }
            }
        }
    }

    /// Writes one offset sync to partition 0 of the offset-syncs topic; an exact writer's sync
    /// carries its chain link in the `refract.sync.previous` header (MM2 ignores headers).
    pub(super) fn send_sync(&self, chained: &ChainedSync) -> bool {
        let (sync, previous) = chained;
        let (clients, topic) = (&self.clients, self.internals.sync_topic.as_str());
        let (Ok(key), Ok(value)) = (sync.key_bytes(), sync.value_bytes()) else {
            warn!(flow = %self.name, "offset sync for {}[{}] cannot be encoded", sync.topic, sync.partition);
            return false;
        };
        let link = previous.map(|p| p.map(|u| u.to_string()).unwrap_or_default());
        let headers = link.as_ref().map(|link| {
            OwnedHeaders::new().insert(Header {
                key: PREVIOUS_HEADER,
                value: Some(link.as_bytes()),
            })
        });
        let result = match (
            self.runner.flow.offset_syncs.location,
            &clients.source_producer,
        ) {
            (OffsetSyncsLocation::Source, Some(p)) => {
                let mut record = BaseRecord::to(topic).partition(0).key(&key).payload(&value);
                if let Some(h) = headers {
                    record = record.headers(h);
                }
                let r = p.send(record).map_err(|(e, _)| e);
                p.poll(Duration::ZERO);
                r
            }
            _ => {
                let mut record = BaseRecord::with_opaque_to(topic, Sent::internal())
                    .partition(0)
                    .key(&key)
                    .payload(&value);
                if let Some(h) = headers {
                    record = record.headers(h);
                }
                clients.producer.send(record).map_err(|(e, _)| e)
            }
        };
        match result {
            Ok(()) => true,
            Err(e) => {
                debug!(flow = %self.name, "offset sync for {}[{}] not sent: {e}", sync.topic, sync.partition);
                false
            }
        }
    }

    /// The configs new remote topics of `source_topics` are created with, in that order (read
    /// with one DescribeConfigs request per batch).
    pub(super) fn remote_topic_configs(
        &self,
        source_topics: &[String],
    ) -> Vec<Vec<(String, String)>> {
        let flow = &self.runner.flow;
        if !flow.config_sync.enabled {
            return vec![Vec::new(); source_topics.len()];
        }
        topic_configs::wanted_many(flow, &self.clients.source_admin, source_topics)
            .into_iter()
            .zip(source_topics)
            .map(|(wanted, source_topic)| match wanted {
                Ok(configs) => configs,
                Err(e) => {
                    warn!(flow = %self.name, "cannot read the configs of {source_topic} on {}; creating its remote topic with the target's defaults: {e}", self.runner.source.alias);
                    Vec::new()
                }
            })
            .collect()
    }

    /// Re-applies the source topics' configs to their existing remote topics.
    pub(super) fn sync_configs(&mut self, plan: &TopicPlan) {
        let (flow, name, clients) = (&self.runner.flow, &self.name, &self.clients);
        let internals = &mut self.internals;
        internals.next_config_sync = Instant::now() + flow.config_sync.interval;
        if !flow.config_sync.enabled || internals.config_sync_unsupported {
            return;
        }
        // The source side in one DescribeConfigs request per batch.
        let sources: Vec<String> = plan.routes.iter().map(|r| r.source_topic.clone()).collect();
        let all_wanted = topic_configs::wanted_many(flow, &clients.source_admin, &sources);
        let mut items = Vec::with_capacity(plan.routes.len());
        for (route, wanted) in plan.routes.iter().zip(all_wanted) {
            match wanted {
                Ok(w) => items.push((route.remote_topic.clone(), w)),
                Err(e) => debug!(flow = %name, "config sync: {e}"),
            }
        }
        // The target side in one DescribeConfigs request per batch too, then an alter per topic
        // that differs. Failures by cause: a target that stops answering fails every topic alike,
        // and is said once.
        let mut failed: Vec<(String, Vec<&str>)> = Vec::new();
        for ((remote, _), result) in
            items
                .iter()
                .zip(topic_configs::resync_many(flow, &clients.admin, &items))
        {
            match result {
                Ok(true) => {
                    info!(flow = %name, "synced the configs of {remote} from {}", self.runner.source.alias)
                }
                Ok(false) => {}
                Err(e) if format!("{e:#}").contains("not supported") => {
                    warn!(flow = %name, "{} cannot alter topic configs; remote topics keep the configs they were created with: {e:#}", self.runner.target.alias);
                    internals.config_sync_unsupported = true;
                    return;
                }
                Err(e) => {
                    let cause = format!("{e:#}").replace(remote.as_str(), "<topic>");
                    match failed.iter_mut().find(|(c, _)| *c == cause) {
                        Some((_, topics)) => topics.push(remote),
                        None => failed.push((cause, vec![remote])),
                    }
                }
            }
        }
        for (cause, topics) in failed {
            let named = match topics.len() {
                0..=3 => topics.join(", "),
                n => format!("{} and {} more", topics[..3].join(", "), n - 3),
            };
            warn!(flow = %name, "config sync of {} remote topic(s) ({named}): {cause}", topics.len());
        }
    }

    /// Copies the literal topic ACLs of mirrored topics to their remote topics (MM2's rules).
    pub(super) fn sync_acls(&mut self, plan: &TopicPlan) {
        let (runner, name, clients) = (self.runner, &self.name, &self.clients);
        self.internals.next_acl_sync = Instant::now() + runner.flow.acl_sync.interval;
        let routes: HashMap<&str, &str> = plan
            .routes
            .iter()
            .map(|r| (r.source_topic.as_str(), r.remote_topic.as_str()))
            .collect();
        let result = acls::sync_once(
            &clients.source_admin,
            &clients.admin,
            |topic| routes.get(topic).map(|r| r.to_string()),
            REQUEST_TIMEOUT,
        );
        match result {
            Ok(0) => debug!(flow = %name, "ACL sync: no topic ACLs to copy"),
            Ok(n) => {
                info!(flow = %name, "ACL sync: {n} topic ACL(s) on {}", runner.target.alias)
            }
            Err(acls::AclError::NoAuthorizer(e)) => {
                info!(flow = %name, "ACL sync off: {} or {} has no authorizer ({e})", runner.source.alias, runner.target.alias);
                self.internals.acl_sync_off = true;
            }
            Err(e) => warn!(flow = %name, "ACL sync: {e}"),
        }
    }
}
