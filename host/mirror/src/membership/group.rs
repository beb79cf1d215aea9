//! Cluster mode: this process's membership in a flow's group, and the tasks it gains and gives
//! away as processes join and leave.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use tracing::{debug, error, info, warn};

use rdkafka::admin::AdminClient;
use refract_config::{ClientRole, ClusterMode};

use crate::flow::{lock, progress_group};
use refract_kafka::admin_ffi::describe_group_members;
use refract_kafka::clients::{
    client_config, ensure_topic, grow_topic, list_topics, Authenticated, Detached, REQUEST_TIMEOUT,
};

use crate::flow::{ClusterView, Member};
use crate::series::ClusterMetrics;
use crate::tasks::{task_of, Backoff, FlowTasks};

use super::{coordination_group, coordination_topic, DESCRIBE_INTERVAL};

/// How long a stopping process waits to leave its group (then it closes anyway; the group
/// drops it after the session timeout).
const LEAVE_WITHIN: Duration = Duration::from_secs(3);

/// Most source partitions whose lag is computed per member at each describe.
const MAX_LAG_PARTITIONS: usize = 2000;

/// Serves the group's rebalances: starts the tasks assigned to this process, and stops (drains,
/// commits) the ones taken away before they are released.
struct Membership {
    tasks: Arc<FlowTasks>,
    topic: String,
    metrics: Option<ClusterMetrics>,
    /// The tasks the group gave this process.
    held: Mutex<BTreeSet<u32>>,
}

impl ClientContext for Membership {}

impl ConsumerContext for Membership {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            return;
        };
        let revoked = self.task_numbers(tpl);
        if revoked.is_empty() {
            return;
        }
        let name = self.tasks.flow().name();
        let started = Instant::now();
        info!(flow = %name, "cluster: handing over tasks {revoked:?}: flushing and committing first (up to {:?})", self.tasks.drain());
        self.tasks.stop(&revoked, true);
        lock(&self.held).retain(|t| !revoked.contains(t));
        let took = started.elapsed();
        info!(flow = %name, "cluster: handed over tasks {revoked:?} in {} ms", took.as_millis());
        self.note_rebalance(Some(took));
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                let assigned = self.task_numbers(tpl);
                let name = self.tasks.flow().name();
                let mut started = Vec::new();
                for task in assigned {
                    if lock(&self.held).contains(&task) {
                        continue;
                    }
                    match self.tasks.start(task) {
                        Ok(()) => {
                            lock(&self.held).insert(task);
                            started.push(task);
                        }
                        Err(e) => error!(flow = %name, "cluster: cannot start task {task}: {e:#}"),
                    }
                }
                if !started.is_empty() {
                    info!(flow = %name, "cluster: took over tasks {started:?}; this process now runs {:?}", self.tasks.held());
                }
                self.note_rebalance(None);
            }
            Rebalance::Error(e) => {
                warn!(flow = %self.tasks.flow().name(), "cluster: rebalance failed: {e}");
            }
            Rebalance::Revoke(_) => {}
        }
    }
}

impl Membership {
    /// The task numbers in an assignment (partitions of the coordination topic; partitions
    /// beyond the flow's `tasks`, left from a larger setting, stand for nothing).
    fn task_numbers(&self, tpl: &TopicPartitionList) -> Vec<u32> {
        let tasks = self.tasks.flow().tasks;
        let mut numbers: Vec<u32> = tpl
            .elements()
            .iter()
            .filter(|e| e.topic() == self.topic)
            .filter_map(|e| u32::try_from(e.partition()).ok())
            .filter(|&t| t < tasks)
            .collect();
        numbers.sort_unstable();
        numbers
    }

    fn note_rebalance(&self, handover: Option<Duration>) {
        let held = lock(&self.held).clone();
        {
            let mut shared = lock(self.tasks.board().shared());
            if let Some(view) = shared.cluster.as_mut() {
                view.rebalances += 1;
                view.duties = held.contains(&0);
                if let Some(d) = handover {
                    view.last_handover_ms = Some(d.as_millis() as u64);
                }
            }
        }
        self.tasks.board().publish_state();
        if let Some(m) = &self.metrics {
            m.rebalances.inc();
            m.tasks.set(held.len() as f64);
            m.duties.set(if held.contains(&0) { 1.0 } else { 0.0 });
            if let Some(d) = handover {
                m.handover.observe(d.as_secs_f64());
            }
        }
    }
}

/// Takes part in the flow's group until `stop`: joins, runs what it is given, hands over what
/// is taken, and joins again after a failure. On stop, drains and commits its tasks, then
/// leaves the group.
pub(crate) fn run(
    tasks: Arc<FlowTasks>,
    mode: ClusterMode,
    instance: String,
    metrics: Option<ClusterMetrics>,
    stop: Arc<AtomicBool>,
) {
    let name = tasks.flow().name();
    lock(tasks.board().shared()).cluster = Some(ClusterView {
        group: coordination_group(tasks.flow()),
        instance: instance.clone(),
        ..ClusterView::default()
    });
    tasks.board().publish_state();
    let mut backoff = Backoff::new();
    while !stop.load(Ordering::Relaxed) {
        backoff.attempt();
        let result = session(&tasks, &mode, &instance, metrics.clone(), &stop);
        // Whatever happened, nothing of this flow runs here outside the group.
        tasks.stop_all(!stop.load(Ordering::Relaxed));
        match result {
            Ok(()) => break,
            Err(e) => {
                error!(flow = %name, "cluster: not a member of group {}: {e:#}; joining again in {:?}", coordination_group(tasks.flow()), backoff.pause());
                if let Some(view) = lock(tasks.board().shared()).cluster.as_mut() {
                    view.error = Some(format!("{e:#}"));
                    view.duties = false;
                }
                if let Some(m) = &metrics {
                    m.tasks.set(0.0);
                    m.duties.set(0.0);
                }
                backoff.wait(&stop);
            }
        }
    }
}

/// One membership: from joining until stopped (Ok) or a failure (Err).
fn session(
    tasks: &Arc<FlowTasks>,
    mode: &ClusterMode,
    instance: &str,
    metrics: Option<ClusterMetrics>,
    stop: &AtomicBool,
) -> Result<()> {
    let flow = tasks.flow();
    let name = flow.name();
    let source = tasks.source();
    let topic = coordination_topic(flow);
    let group = coordination_group(flow);
    let client_id = refract_config::names::member_client(instance);
    let admin: Authenticated<AdminClient<DefaultClientContext>> =
        client_config(source, ClientRole::Admin, &client_id, &[], &[])
            .create()
            .with_context(|| {
                format!(
                    "creating the admin client for source cluster {}",
                    source.alias
                )
            })?;
    // Reads the flow's committed positions and the source's ends, for each member's lag.
    let positions: Authenticated<BaseConsumer> = client_config(
        source,
        ClientRole::Consumer,
        &client_id,
        &[],
        &[
            ("group.id", progress_group(flow).as_str()),
            ("enable.auto.commit", "false"),
        ],
    )
    .create()
    .with_context(|| {
        format!(
            "creating the metadata client for source cluster {}",
            source.alias
        )
    })?;
    let admin = Detached::new(admin);
    let positions = Detached::new(positions);
    // A process running the flow without [cluster] mirrors all of it: wait for it to stop.
    let solo = super::solo_group(flow);
    if let Some(m) = describe_group_members(&admin, &solo, REQUEST_TIMEOUT)
        .unwrap_or_default()
        .first()
    {
        anyhow::bail!(
            "refract process {} (from {}) runs this flow without [cluster] (group {solo}); this process joins once it stops",
            refract_config::names::member_instance(&m.client_id).unwrap_or(&m.client_id),
            m.host.trim_start_matches('/')
        );
    }
    prepare_topic(
        &positions,
        &admin,
        &topic,
        flow.tasks,
        flow.internal_replication_factor,
    )
    .with_context(|| {
        format!(
            "preparing the coordination topic {topic} on source cluster {}",
            source.alias
        )
    })?;

    let session_ms = mode.session_timeout.as_millis().to_string();
    let heartbeat_ms = (mode.session_timeout.as_millis() / 5).max(100).to_string();
    // The revoke callback drains the tasks that move: the group must wait for that.
    let poll_ms = (tasks.drain() + Duration::from_secs(60))
        .max(mode.session_timeout)
        .as_millis()
        .to_string();
    let mut forced = vec![
        ("group.id", group.as_str()),
        ("partition.assignment.strategy", "cooperative-sticky"),
        ("session.timeout.ms", session_ms.as_str()),
        ("heartbeat.interval.ms", heartbeat_ms.as_str()),
        ("max.poll.interval.ms", poll_ms.as_str()),
        ("enable.auto.commit", "false"),
        ("enable.auto.offset.store", "false"),
        ("auto.offset.reset", "latest"),
    ];
    if let Some(id) = &mode.instance {
        forced.push(("group.instance.id", id.as_str()));
    }
    let consumer: Authenticated<BaseConsumer<Membership>> =
        client_config(source, ClientRole::Consumer, &client_id, &[], &forced)
            .create_with_context(Membership {
                tasks: tasks.clone(),
                topic: topic.clone(),
                metrics: metrics.clone(),
                held: Mutex::new(BTreeSet::new()),
            })
            .with_context(|| {
                format!(
                    "creating the group member for source cluster {}",
                    source.alias
                )
            })?;
    consumer
        .subscribe(&[topic.as_str()])
        .with_context(|| format!("subscribing to {topic}"))?;
    info!(flow = %name, "cluster: joining group {group} on {} as {instance} ({} tasks, session timeout {:?}{})", source.alias, flow.tasks, mode.session_timeout, if mode.instance.is_some() { ", static membership" } else { "" });
    if let Some(view) = lock(tasks.board().shared()).cluster.as_mut() {
        view.error = None;
    }
    let mut next_describe = Instant::now() + Duration::from_secs(1);
    while !stop.load(Ordering::Relaxed) {
        match consumer.poll(Duration::from_millis(200)) {
            None | Some(Ok(_)) => {}
            Some(Err(KafkaError::MessageConsumption(code))) if fatal(code) => {
                anyhow::bail!("group {group}: {code}");
            }
            Some(Err(e)) => debug!(flow = %name, "cluster: {e}"),
        }
        if Instant::now() >= next_describe {
            next_describe = Instant::now() + DESCRIBE_INTERVAL;
            describe(tasks, &admin, &positions, &group, metrics.as_ref());
        }
    }
    // Leaving: drain and commit every task first, then leave the group so the others take the
    // tasks over at once. A static member leaves too: a stop is a hand-over (scaling down, or a
    // rollout whose replacement has another name). Only a crash keeps a static member's place
    // for the session timeout, so that a quick restart gets its tasks back without a rebalance.
    let held = tasks.held();
    if !held.is_empty() {
        info!(flow = %name, "cluster: stopping: draining tasks {held:?} before leaving group {group}");
    }
    tasks.stop_all(false);
    lock(&consumer.context().held).clear();
    consumer.unsubscribe();
    // librdkafka sends LeaveGroup once the revocation is served (not on close, for a static
    // member): poll until the assignment is empty, and a little longer for the request to go.
    let deadline = Instant::now() + LEAVE_WITHIN;
    let mut empty_since: Option<Instant> = None;
    while Instant::now() < deadline {
        let _ = consumer.poll(Duration::from_millis(50));
        let empty = consumer.assignment().map_or(true, |a| a.count() == 0);
        match (empty, empty_since) {
            (true, None) => empty_since = Some(Instant::now()),
            (true, Some(t)) if t.elapsed() >= Duration::from_millis(300) => break,
            (false, _) => empty_since = None,
            _ => {}
        }
    }
    drop(consumer);
    info!(flow = %name, "cluster: left group {group}");
    Ok(())
}

/// Errors after which the membership cannot go on (the process joins again).
fn fatal(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fatal
            | RDKafkaErrorCode::FencedInstanceId
            | RDKafkaErrorCode::GroupAuthorizationFailed
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::InvalidSessionTimeout
    )
}

/// Makes sure the coordination topic exists with a partition per task.
fn prepare_topic(
    meta: &BaseConsumer,
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
    tasks: u32,
    replication_factor: i32,
) -> Result<()> {
    let wanted = i32::try_from(tasks).unwrap_or(i32::MAX);
    let compact = [("cleanup.policy".to_string(), "compact".to_string())];
    ensure_topic(meta, admin, topic, wanted, replication_factor, &compact)?;
    let have = list_topics(meta)?
        .into_iter()
        .find(|(t, _)| t == topic)
        .map_or(0, |(_, n)| n);
    if have < wanted {
        grow_topic(admin, topic, wanted)?;
    } else if have > wanted {
        warn!("{topic} has {have} partitions for {tasks} tasks: partitions {tasks}.. stand for nothing, and a process assigned only those stands by (delete the topic while every process is stopped to even this out)");
    }
    Ok(())
}

/// Describes the group's members for `/status` (what each holds, its lag) and the metrics.
fn describe(
    tasks: &FlowTasks,
    admin: &AdminClient<DefaultClientContext>,
    positions: &BaseConsumer,
    group: &str,
    metrics: Option<&ClusterMetrics>,
) {
    let flow = tasks.flow();
    let members = match describe_group_members(admin, group, REQUEST_TIMEOUT) {
        Ok(m) => m,
        Err(e) => {
            if let Some(view) = lock(tasks.board().shared()).cluster.as_mut() {
                view.members_error = Some(e);
            }
            return;
        }
    };
    // The flow's partitions and their lag, by task.
    let routes = tasks.board().status().routes;
    let mine = |t: &str| {
        if routes.is_empty() {
            flow.topics.should_replicate(t)
        } else {
            routes.contains_key(t)
        }
    };
    let partitions: Vec<(String, i32)> = list_topics(positions)
        .unwrap_or_default()
        .into_iter()
        .filter(|(t, _)| mine(t))
        .flat_map(|(t, n)| (0..n).map(move |p| (t.clone(), p)))
        .collect();
    let mut per_task: BTreeMap<u32, (usize, Option<i64>)> = BTreeMap::new();
    let lags = (partitions.len() <= MAX_LAG_PARTITIONS)
        .then(|| lags(positions, &partitions))
        .flatten();
    for (i, (topic, p)) in partitions.iter().enumerate() {
        let entry = per_task
            .entry(task_of(topic, *p, flow.tasks))
            .or_insert((0, Some(0)));
        entry.0 += 1;
        entry.1 = match (entry.1, lags.as_ref().and_then(|l| l[i])) {
            (Some(sum), Some(lag)) => Some(sum + lag),
            _ => None,
        };
    }
    let mut view_members: Vec<Member> = members
        .iter()
        .map(|m| {
            let held: Vec<u32> = m
                .assignment
                .iter()
                .filter(|(t, _)| *t == coordination_topic(flow))
                .filter_map(|(_, p)| u32::try_from(*p).ok())
                .filter(|&t| t < flow.tasks)
                .collect();
            let partitions = held
                .iter()
                .map(|t| per_task.get(t).map_or(0, |e| e.0))
                .sum();
            let lag = held.iter().try_fold(0i64, |sum, t| {
                per_task.get(t).map_or(Some(sum), |e| e.1.map(|l| sum + l))
            });
            Member {
                instance: m.instance_id.clone().unwrap_or_else(|| {
                    refract_config::names::member_instance(&m.client_id)
                        .unwrap_or(&m.client_id)
                        .to_string()
                }),
                host: m.host.clone(),
                tasks: held,
                partitions,
                lag,
            }
        })
        .collect();
    view_members.sort_by(|a, b| a.instance.cmp(&b.instance));
    if let Some(m) = metrics {
        m.members.set(view_members.len() as f64);
    }
    if let Some(view) = lock(tasks.board().shared()).cluster.as_mut() {
        view.members = view_members;
        view.members_error = None;
    }
}

/// Per partition: the source's end minus the flow's committed position (`None` where either is
/// unknown); `None` when the committed positions cannot be read.
fn lags(consumer: &BaseConsumer, partitions: &[(String, i32)]) -> Option<Vec<Option<i64>>> {
    let mut tpl = TopicPartitionList::new();
    for (t, p) in partitions {
        tpl.add_partition(t, *p);
    }
    let committed = consumer.committed_offsets(tpl, REQUEST_TIMEOUT).ok()?;
    Some(
        partitions
            .iter()
            .map(|(t, p)| {
                let (low, high) = consumer
                    .fetch_watermarks(t, *p, Duration::from_secs(2))
                    .ok()?;
                let done = match committed.find_partition(t, *p).map(|e| e.offset()) {
                    Some(Offset::Offset(n)) => n,
                    _ => low,
                };
                Some((high - done).max(0))
            })
            .collect(),
    )
}
