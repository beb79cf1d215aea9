//! The checkpoint side of a flow (MirrorMaker 2's MirrorCheckpointConnector): reads the
//! offset-syncs topic into an [`OffsetSyncStore`], translates the committed offsets of the
//! source's consumer groups into target offsets, writes MM2 checkpoints to
//! `<source>.checkpoints.internal` on the target and, with `sync_group_offsets`, commits them to
//! idle target groups.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use refract_kafka::headers::RawHeaders;
use tracing::{debug, info, warn};

use refract_config::{names, ClientRole, Cluster, Flow, OffsetSyncsLocation, OffsetTranslation};
use refract_plugin::{PolicyPlugin, ReplicationPolicy};

use crate::flow::{lock, set_checkpoints_failing, FlowBoard, FlowContext, SharedStatus};
use crate::series::RefractSeries;
use refract_kafka::admin_ffi::commit_within;
use refract_kafka::clients::{
    client_config, ensure_topic, list_topics, Authenticated, Detached, REQUEST_TIMEOUT,
};
use refract_kafka::groups::{list_consumer_groups, GroupState};
use refract_telemetry::Metrics;

use refract_mm2::exact::{parse_previous, PREVIOUS_HEADER};
use refract_mm2::{
    checkpoint_topic, is_more_recent, Checkpoint, CheckpointStore, ExactHistory, OffsetSync,
    OffsetSyncStore, TopicNaming, Translation,
};

/// The header on a checkpoint record that says how its offset was translated: `exact`, or
/// `mm2` (MM2's rule), with the reason when exact translation was asked for but not possible
/// (`mm2: past the newest offset sync`). MM2 and its clients ignore record headers.
pub const TRANSLATION_HEADER: &str = "refract.translation";

/// Runs the checkpoint side of one flow until asked to stop.
pub struct CheckpointRunner {
    flow: Flow,
    source: Cluster,
    target: Cluster,
    /// The policy in use (a restart picks up the latest swapped-in one).
    plugin: Mutex<Arc<PolicyPlugin>>,
    /// A policy handed in by [`CheckpointRunner::swap_policy`], taken at the next round.
    pending: Mutex<Option<Arc<PolicyPlugin>>>,
    stop: Arc<AtomicBool>,
    status: SharedStatus,
    board: Arc<FlowBoard>,
    metrics: Metrics,
    /// Checkpoint latency per partition (`true`) or per topic (`[metrics] partition_series`).
    partition_series: bool,
}

struct Clients {
    source_admin: Detached<Authenticated<AdminClient<DefaultClientContext>>>,
    source_meta: Detached<Authenticated<BaseConsumer>>,
    syncs: Detached<Authenticated<BaseConsumer>>,
    target_admin: Detached<Authenticated<AdminClient<DefaultClientContext>>>,
    target_meta: Detached<Authenticated<BaseConsumer>>,
    producer: Detached<Authenticated<BaseProducer>>,
}

struct State {
    policy: ReplicationPolicy,
    syncs: OffsetSyncStore,
    /// The chained syncs of refract's exact writer (`offset_translation = "exact"`).
    exact: ExactHistory,
    checkpoints: CheckpointStore,
    checkpoints_topic: String,
    groups: Vec<String>,
    /// Target groups whose state could not be read (warned once).
    unknown_state: HashSet<String>,
    /// One client per group and cluster, kept for the run: closing a client that has a group id
    /// waits on the group coordinator, which can take long: they are [`Detached`].
    group_clients: HashMap<(bool, String), Detached<Authenticated<BaseConsumer>>>,
}

impl CheckpointRunner {
    /// A runner for the checkpoints of the flow in `context`, naming topics with `plugin`.
    pub fn new(context: FlowContext, plugin: Arc<PolicyPlugin>) -> Self {
        let FlowContext {
            flow,
            source,
            target,
            stop,
            board,
            partition_series,
            ..
        } = context;
        Self {
            flow,
            source,
            target,
            plugin: Mutex::new(plugin),
            pending: Mutex::new(None),
            stop,
            status: board.shared().clone(),
            board,
            metrics: Metrics::new(),
            partition_series,
        }
    }

    /// Records checkpoint latency (MM2's `checkpoint-latency-ms`) in `metrics`.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Hands in a new replication policy (a hot swap): checkpoints translate group offsets with
    /// it from the next round on, as the flow names topics with it.
    pub fn swap_policy(&self, plugin: Arc<PolicyPlugin>) {
        *lock(&self.pending) = Some(plugin);
    }

    /// Shows a failure of the checkpoints (they are restarted with backoff) in `/health` and
    /// `/status` until they run again.
    pub fn record_failure(&self, error: &anyhow::Error) {
        set_checkpoints_failing(&self.board, Some(format!("{error:#}")));
    }

    /// Shows that a run of the checkpoints panicked. They are not restarted (see
    /// `tasks::supervisor::supervise`), so the flow stays degraded, with the panic's message,
    /// until refract restarts them; records keep flowing meanwhile.
    pub(crate) fn record_panic(&self, message: &str) {
        set_checkpoints_failing(
            &self.board,
            Some(format!(
                "panicked, stopped until refract restarts: {message}"
            )),
        );
    }

    /// The thread name: `checkpoints A->B`.
    pub fn name(&self) -> String {
        format!("checkpoints {}", self.flow.name())
    }

    /// Runs until stopped (Ok) or until something fails that needs a fresh start (Err).
    pub fn run(&self) -> Result<()> {
        let name = self.flow.name();
        if let Some(p) = lock(&self.pending).take() {
            *lock(&self.plugin) = p;
        }
        let mut policy = ReplicationPolicy::new(lock(&self.plugin).clone());
        // Named and checked as the flow's task does: never onto someone else's topic.
        let own = crate::planner::OwnTopics::name(&self.flow, &mut policy)?;
        let (syncs_topic, checkpoints_topic) = (own.offset_syncs, own.checkpoints);
        let syncs_cluster = match self.flow.offset_syncs.location {
            OffsetSyncsLocation::Source => &self.source,
            OffsetSyncsLocation::Target => &self.target,
        };
        let clients = self.connect(syncs_cluster)?;
        let compact = [("cleanup.policy".to_string(), "compact".to_string())];
        let syncs_on_source = syncs_cluster.alias == self.source.alias;
        for (meta, admin, cluster, topic) in [
            (
                &clients.target_meta,
                &clients.target_admin,
                &self.target.alias,
                &checkpoints_topic,
            ),
            (
                if syncs_on_source {
                    &clients.source_meta
                } else {
                    &clients.target_meta
                },
                if syncs_on_source {
                    &clients.source_admin
                } else {
                    &clients.target_admin
                },
                &syncs_cluster.alias,
                &syncs_topic,
            ),
        ] {
            if let Err(e) = ensure_topic(
                meta,
                admin,
                topic,
                1,
                self.flow.internal_replication_factor,
                &compact,
            ) {
                warn!(flow = %name, "cannot create {topic} on {cluster}: {e:#}");
            }
        }
        let mut state = State {
            policy,
            syncs: OffsetSyncStore::new(),
            exact: ExactHistory::new(),
            checkpoints: self.load_checkpoints(&clients, &checkpoints_topic),
            checkpoints_topic,
            groups: Vec::new(),
            unknown_state: HashSet::new(),
            group_clients: HashMap::new(),
        };
        // Read every sync written so far before translating anything (MM2 does the same: until
        // the initial read is done, translation would use a partial history).
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&syncs_topic, 0, Offset::Beginning)?;
        clients
            .syncs
            .assign(&tpl)
            .context("assigning the offset-syncs topic")?;
        let end = clients
            .syncs
            .fetch_watermarks(&syncs_topic, 0, REQUEST_TIMEOUT)
            .map(|(_, high)| high)
            .unwrap_or(0);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut read = 0u64;
        while read_syncs(&clients.syncs, &mut state, &mut read) < end
            && Instant::now() < deadline
            && !self.stop.load(Ordering::Relaxed)
        {}
        debug!(flow = %name, "read {read} offset syncs from {syncs_topic} on {}", syncs_cluster.alias);
        // Connected and caught up: an earlier failure is over.
        if set_checkpoints_failing(&self.board, None) {
            info!(flow = %name, "checkpoints running again");
        }

        let mut next_groups = Instant::now();
        let mut next_checkpoint = Instant::now() + self.flow.checkpoints.interval;
        let mut next_group_sync =
            Instant::now() + self.flow.checkpoints.sync_group_offsets_interval;
        while !self.stop.load(Ordering::Relaxed) {
            if let Some(p) = lock(&self.pending).take() {
                info!(flow = %name, "checkpoints: swapped in policy {}", p.name());
                state.policy = ReplicationPolicy::new(p.clone());
                *lock(&self.plugin) = p;
            }
            read_syncs(&clients.syncs, &mut state, &mut read);
            clients.producer.poll(Duration::ZERO);
            let now = Instant::now();
            if now >= next_groups {
                next_groups = now + self.flow.checkpoints.refresh_groups_interval;
                match self.source_groups(&clients) {
                    Ok(groups) => {
                        if groups != state.groups {
                            info!(flow = %name, "checkpointing {} consumer group(s): {}", groups.len(), groups.join(", "));
                            let gone: Vec<(bool, String)> = state
                                .group_clients
                                .keys()
                                .filter(|(_, g)| !groups.contains(g))
                                .cloned()
                                .collect();
                            for k in &gone {
                                state.group_clients.remove(k);
                            }
                        }
                        state.groups = groups;
                    }
                    Err(e) => {
                        warn!(flow = %name, "listing consumer groups on {}: {e:#}", self.source.alias)
                    }
                }
            }
            if now >= next_checkpoint {
                next_checkpoint = now + self.flow.checkpoints.interval;
                if let Err(e) = self.emit_checkpoints(&clients, &mut state) {
                    warn!(flow = %name, "emitting checkpoints: {e:#}");
                }
            }
            if self.flow.checkpoints.sync_group_offsets && now >= next_group_sync {
                next_group_sync = now + self.flow.checkpoints.sync_group_offsets_interval;
                if let Err(e) = self.sync_group_offsets(&clients, &mut state) {
                    warn!(flow = %name, "syncing group offsets to {}: {e:#}", self.target.alias);
                }
            }
        }
        let _ = clients.producer.flush(Duration::from_secs(10));
        Ok(())
    }

    /// The cached client for `group` on the source (`on_target` false) or the target.
    fn group_client<'s>(
        &self,
        state: &'s mut State,
        on_target: bool,
        group: &str,
    ) -> Result<&'s BaseConsumer> {
        let key = (on_target, group.to_string());
        if !state.group_clients.contains_key(&key) {
            let cluster = if on_target {
                &self.target
            } else {
                &self.source
            };
            let consumer: Authenticated<BaseConsumer> = client_config(
                cluster,
                ClientRole::Consumer,
                &self.flow.id().groups_client(),
                &[],
                &[("group.id", group), ("enable.auto.commit", "false")],
            )
            .create()
            .with_context(|| format!("creating a client for group {group} on {}", cluster.alias))?;
            state
                .group_clients
                .insert(key.clone(), Detached::new(consumer));
        }
        state
            .group_clients
            .get(&key)
            .map(|c| &***c)
            .context("group client vanished")
    }

    fn connect(&self, syncs_cluster: &Cluster) -> Result<Clients> {
        let id = self.flow.id().checkpoints_client();
        let what = |c: &str, role: &str| {
            format!(
                "flow {}: creating the {role} client for {c}",
                self.flow.name()
            )
        };
        Ok(Clients {
            source_admin: Detached::new(
                client_config(&self.source, ClientRole::Admin, &id, &[], &[])
                    .create()
                    .with_context(|| what(&self.source.alias, "admin"))?,
            ),
            source_meta: Detached::new(
                client_config(&self.source, ClientRole::Admin, &id, &[], &[])
                    .create()
                    .with_context(|| what(&self.source.alias, "metadata"))?,
            ),
            // librdkafka wants a group id even to assign; nothing is ever committed under it.
            syncs: Detached::new(
                client_config(
                    syncs_cluster,
                    ClientRole::Consumer,
                    &id,
                    &[("fetch.wait.max.ms", "100")],
                    &[
                        ("group.id", id.as_str()),
                        ("enable.auto.commit", "false"),
                        ("enable.partition.eof", "false"),
                    ],
                )
                .create()
                .with_context(|| what(&syncs_cluster.alias, "offset-syncs reader"))?,
            ),
            target_admin: Detached::new(
                client_config(&self.target, ClientRole::Admin, &id, &[], &[])
                    .create()
                    .with_context(|| what(&self.target.alias, "admin"))?,
            ),
            target_meta: Detached::new(
                client_config(&self.target, ClientRole::Admin, &id, &[], &[])
                    .create()
                    .with_context(|| what(&self.target.alias, "metadata"))?,
            ),
            producer: Detached::new(
                client_config(
                    &self.target,
                    ClientRole::Producer,
                    &id,
                    &[],
                    &[("acks", "all")],
                )
                .create()
                .with_context(|| what(&self.target.alias, "checkpoint producer"))?,
            ),
        })
    }

    /// The latest checkpoint per group partition already on the target, so checkpoints stay
    /// monotonic across restarts (MM2's CheckpointStore).
    fn load_checkpoints(&self, clients: &Clients, topic: &str) -> CheckpointStore {
        let mut store = CheckpointStore::default();
        let Ok((low, high)) = clients
            .target_meta
            .fetch_watermarks(topic, 0, REQUEST_TIMEOUT)
        else {
            return store;
        };
        if high <= low {
            return store;
        }
        let reader: Authenticated<BaseConsumer> = match client_config(
            &self.target,
            ClientRole::Consumer,
            names::CHECKPOINTS_READER_GROUP,
            &[],
            &[
                ("group.id", names::CHECKPOINTS_READER_GROUP),
                ("enable.auto.commit", "false"),
            ],
        )
        .create()
        {
            Ok(c) => c,
            Err(e) => {
                warn!(flow = %self.flow.name(), "cannot read {topic}: {e}");
                return store;
            }
        };
        let mut tpl = TopicPartitionList::new();
        if tpl
            .add_partition_offset(topic, 0, Offset::Beginning)
            .is_err()
            || reader.assign(&tpl).is_err()
        {
            return store;
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut next = low;
        while next < high && Instant::now() < deadline {
            if let Some(Ok(m)) = reader.poll(Duration::from_millis(100)) {
                next = m.offset() + 1;
                if let (Some(k), Some(v)) = (m.key(), m.payload()) {
                    if let Ok(c) = Checkpoint::decode(k, v) {
                        store.insert(c);
                    }
                }
            }
        }
        store
    }

    /// Source groups that pass the flow's group filter. refract's own progress groups
    /// (`refract-<source>-<target>`, on the source and on the target) are never checkpointed.
    fn source_groups(&self, clients: &Clients) -> Result<Vec<String>> {
        Ok(
            list_consumer_groups(&clients.source_admin, REQUEST_TIMEOUT)?
                .into_iter()
                .map(|g| g.id)
                .filter(|g| {
                    self.flow.checkpoints.groups.should_replicate(g) && !names::is_refract_group(g)
                })
                .collect(),
        )
    }

    fn emit_checkpoints(&self, clients: &Clients, state: &mut State) -> Result<()> {
        if state.groups.is_empty() {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for (topic, partitions) in list_topics(&clients.source_meta)? {
            if !self.flow.topics.should_replicate(&topic) {
                continue;
            }
            for p in 0..partitions {
                tpl.add_partition(&topic, p);
            }
        }
        if tpl.count() == 0 {
            return Ok(());
        }
        let mut emitted = 0u64;
        let mut written: Vec<(String, String, i32, Instant)> = Vec::new();
        for group in state.groups.clone() {
            let committed = match self
                .group_client(state, false, &group)
                .and_then(|c| group_offsets(c, &tpl))
            {
                Ok(c) => c,
                Err(e) => {
                    debug!(flow = %self.flow.name(), "offsets of group {group}: {e:#}");
                    continue;
                }
            };
            for (topic, partition, upstream, metadata) in committed {
                let translation = state
                    .syncs
                    .translate_downstream(&topic, partition, upstream);
                // Exact mode: inside a run of chained syncs, the exact offset; elsewhere
                // MM2's rule, and the checkpoint says why.
                let exact = (self.flow.offset_syncs.translation == OffsetTranslation::Exact)
                    .then(|| state.exact.translate(&topic, partition, upstream))
                    .flatten();
                let (downstream, how) = match (exact, translation) {
                    (Some(Ok(exact)), _) => (exact, "exact".to_string()),
                    (Some(Err(why)), Translation::Offset(d)) => {
                        (d, format!("mm2: {}", why.as_str()))
                    }
                    (None, Translation::Offset(d)) => (d, "mm2".to_string()),
                    (_, other) => {
                        debug!(flow = %self.flow.name(), "no checkpoint for {group} {topic}[{partition}] at {upstream}: {other:?}");
                        continue;
                    }
                };
                let renamed = checkpoint_topic(
                    &mut PolicyNaming(&mut state.policy),
                    &self.source.alias,
                    &self.target.alias,
                    &topic,
                )?;
                if !is_more_recent(
                    state.checkpoints.get(&group, &renamed, partition),
                    upstream,
                    downstream,
                ) {
                    continue;
                }
                let checkpoint = Checkpoint {
                    group: group.clone(),
                    topic: renamed,
                    partition,
                    upstream_offset: upstream,
                    downstream_offset: downstream,
                    metadata,
                };
                let key = checkpoint.key_bytes()?;
                let value = checkpoint.value_bytes()?;
                let now = crate::clock::now_ms();
                clients
                    .producer
                    .send(
                        BaseRecord::to(&state.checkpoints_topic)
                            .partition(0)
                            .key(&key)
                            .payload(&value)
                            .headers(OwnedHeaders::new().insert(Header {
                                key: TRANSLATION_HEADER,
                                value: Some(how.as_bytes()),
                            }))
                            .timestamp(now),
                    )
                    .map_err(|(e, _)| anyhow::anyhow!("writing a checkpoint: {e}"))?;
                debug!(flow = %self.flow.name(), "checkpoint {group} {}[{partition}] {upstream} -> {downstream} ({how})", checkpoint.topic);
                written.push((
                    checkpoint.group.clone(),
                    checkpoint.topic.clone(),
                    partition,
                    Instant::now(),
                ));
                state.checkpoints.insert(checkpoint);
                emitted += 1;
            }
        }
        clients
            .producer
            .flush(REQUEST_TIMEOUT)
            .context("waiting for checkpoints to be acknowledged")?;
        for (group, topic, partition, created) in written {
            if let Ok(stat) = self.metrics.checkpoint_latency_ms(
                &self.source.alias,
                &self.target.alias,
                &group,
                &topic,
                self.partition_series.then_some(partition),
            ) {
                stat.record(created.elapsed().as_secs_f64() * 1000.0);
            }
        }
        lock(&self.status).checkpoints += emitted;
        Ok(())
    }

    /// Commits the latest checkpoints to target groups no consumer is using, never moving a
    /// group backwards and never past the end of a target partition.
    fn sync_group_offsets(&self, clients: &Clients, state: &mut State) -> Result<()> {
        let listed: HashMap<String, GroupState> =
            list_consumer_groups(&clients.target_admin, REQUEST_TIMEOUT)?
                .into_iter()
                .map(|g| (g.id, g.state))
                .collect();
        let mut by_group: BTreeMap<String, Vec<Checkpoint>> = BTreeMap::new();
        for c in state.checkpoints.all() {
            if self.flow.checkpoints.groups.should_replicate(&c.group) {
                by_group.entry(c.group.clone()).or_default().push(c.clone());
            }
        }
        let mut synced = 0u64;
        for (group, checkpoints) in by_group {
            let state_now = match listed.get(&group) {
                None => GroupState::Dead,
                Some(GroupState::Unknown) => {
                    match describe_group_state(&clients.target_meta, &group) {
                        Some(s) => s,
                        None => {
                            if state.unknown_state.insert(group.clone()) {
                                warn!(flow = %self.flow.name(), "cannot tell whether consumer group {group} is in use on {} (the broker does not describe groups); not syncing its offsets", self.target.alias);
                            }
                            continue;
                        }
                    }
                }
                Some(s) => *s,
            };
            if state_now.is_active() {
                debug!(flow = %self.flow.name(), "group {group} is active on {}; leaving its offsets alone", self.target.alias);
                continue;
            }
            let consumer = self.group_client(state, true, &group)?;
            let mut asked = TopicPartitionList::new();
            for c in &checkpoints {
                asked.add_partition(&c.topic, c.partition);
            }
            let current = consumer
                .committed_offsets(asked, REQUEST_TIMEOUT)
                .with_context(|| {
                    format!(
                        "reading the offsets of group {group} on {}",
                        self.target.alias
                    )
                })?;
            let mut commit = TopicPartitionList::new();
            for c in &checkpoints {
                let Ok((_, end)) =
                    clients
                        .target_meta
                        .fetch_watermarks(&c.topic, c.partition, REQUEST_TIMEOUT)
                else {
                    continue;
                };
                let offset = c.downstream_offset.min(end);
                let have =
                    current
                        .find_partition(&c.topic, c.partition)
                        .and_then(|e| match e.offset() {
                            Offset::Offset(o) => Some(o),
                            _ => None,
                        });
                if have.is_some_and(|h| h >= offset) {
                    continue;
                }
                commit.add_partition_offset(&c.topic, c.partition, Offset::Offset(offset))?;
                if let Some(mut e) = commit.find_partition(&c.topic, c.partition) {
                    e.set_metadata(c.metadata.clone());
                }
            }
            if commit.count() == 0 {
                continue;
            }
            commit_within(consumer, &commit, REQUEST_TIMEOUT).map_err(|e| {
                anyhow::anyhow!(
                    "committing offsets of group {group} on {}: {e}",
                    self.target.alias
                )
            })?;
            info!(flow = %self.flow.name(), "synced {} offset(s) of group {group} to {}", commit.count(), self.target.alias);
            synced += commit.count() as u64;
        }
        lock(&self.status).group_offsets_synced += synced;
        Ok(())
    }
}

/// Reads what is available on the offset-syncs topic into the stores; returns the next offset.
fn read_syncs(reader: &BaseConsumer, state: &mut State, next: &mut u64) -> i64 {
    let mut timeout = Duration::from_millis(100);
    let mut position = -1;
    while let Some(result) = reader.poll(timeout) {
        timeout = Duration::ZERO;
        let Ok(m) = result else { break };
        position = m.offset() + 1;
        if let (Some(k), Some(v)) = (m.key(), m.payload()) {
            match OffsetSync::decode(k, v) {
                Ok(sync) => {
                    state.syncs.insert(&sync);
                    let previous = RawHeaders::of_message(&m).and_then(|h| {
                        h.iter()
                            .find(|h| h.key == PREVIOUS_HEADER.as_bytes())
                            .and_then(|h| parse_previous(h.value))
                    });
                    state.exact.insert(
                        &sync.topic,
                        sync.partition,
                        sync.upstream_offset,
                        sync.downstream_offset,
                        previous,
                    );
                    *next += 1;
                }
                Err(e) => debug!("skipping an offset sync that does not decode: {e}"),
            }
        }
    }
    if position < 0 {
        position = reader
            .position()
            .ok()
            .and_then(|p| p.elements().first().map(|e| e.offset()))
            .and_then(|o| match o {
                Offset::Offset(o) => Some(o),
                _ => None,
            })
            .unwrap_or(0);
    }
    position
}

/// A group's committed offsets on `tpl`, read with a client of that group:
/// (topic, partition, offset, metadata).
fn group_offsets(
    consumer: &BaseConsumer,
    tpl: &TopicPartitionList,
) -> Result<Vec<(String, i32, i64, String)>> {
    let committed = consumer.committed_offsets(tpl.clone(), REQUEST_TIMEOUT)?;
    Ok(committed
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((
                e.topic().to_string(),
                e.partition(),
                o,
                e.metadata().to_string(),
            )),
            _ => None,
        })
        .collect())
}

/// A group's state through DescribeGroups, for brokers whose ListGroups does not report it.
fn describe_group_state(client: &BaseConsumer, group: &str) -> Option<GroupState> {
    let list = client.fetch_group_list(Some(group), REQUEST_TIMEOUT).ok()?;
    let g = list.groups().iter().find(|g| g.name() == group)?;
    Some(match g.state() {
        "Stable" => GroupState::Stable,
        "PreparingRebalance" => GroupState::PreparingRebalance,
        "CompletingRebalance" | "AwaitingSync" => GroupState::CompletingRebalance,
        "Empty" => GroupState::Empty,
        "Dead" => GroupState::Dead,
        _ => return None,
    })
}

/// A replication policy plugin as the checkpoint rename rule's naming.
struct PolicyNaming<'a>(&'a mut ReplicationPolicy);

impl TopicNaming for PolicyNaming<'_> {
    type Error = anyhow::Error;
    fn topic_source(&mut self, topic: &str) -> Result<Option<String>> {
        Ok(self.0.topic_source(topic)?)
    }
    fn original_topic(&mut self, topic: &str) -> Result<String> {
        Ok(self.0.original_topic(topic)?)
    }
    fn remote_topic(&mut self, source: &str, topic: &str) -> Result<String> {
        self.0
            .format_remote_topics(source, &[topic.to_string()])?
            .into_iter()
            .next()
            .context("the policy named no remote topic")
    }
}
