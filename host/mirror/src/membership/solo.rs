//! Without `[cluster]`, a flow runs whole in one process — and a second `refract run` on the
//! same pipeline (a copy left running, a rollout that starts the new process before the old one
//! stops) would mirror every record a second time. This module keeps that from happening
//! without asking anything of the operator:
//!
//! - Before it starts the flow's tasks, the process describes the flow's *solo group* on the
//!   source (`refract-<source>-<target>-solo-<selection>`, see
//!   [`refract_config::FlowId::solo_group`]) and the cluster-mode group. A member there is
//!   another process running the flow: this one stays on **standby** (the flow's state,
//!   `/status` `held_elsewhere`, one `WARN` naming the other process) and looks again every
//!   [`LOOK_EVERY`], starting as soon as the other one is gone (it leaves the group when it
//!   stops; a crashed one drops out after [`SESSION_TIMEOUT`]).
//! - A process that finds the group empty **claims** the flow before it reads anything: it joins
//!   the solo group, waits until the group has taken it in (its assignment; at most
//!   [`CLAIM_TIMEOUT`]), and describes the group again. Alone, it starts the flow. Beside a
//!   smaller client id, it leaves and waits on standby. Beside only greater client ids (a
//!   process that claimed at the same moment, or that started just before this one joined),
//!   it waits until they have left: each steps back when it sees a smaller client id, a
//!   running one after draining and committing. So of two processes started at the same
//!   moment, one reads and the other never does, and no record is mirrored twice. A group's
//!   first join waits `group.initial.rebalance.delay.ms` (3 s by default) on the broker, which
//!   a solo flow's start pays once.
//! - Kafka's group protocol needs a topic to divide: the member subscribes to one of the flow's
//!   source topics and pauses every partition it is given, so it reads nothing (librdkafka does
//!   not join a group for a subscription that matches no topic). With no source topic to
//!   mirror yet, there is nothing to read twice: the flow starts and joins once it mirrors one.
//! - A running process keeps looking ([`LOOK_EVERY`] while it settles, then
//!   [`LOOK_SETTLED`]) and steps back (drains, commits, leaves, waits) when it sees a smaller
//!   client id: a process that claims beside it, or one that ran without joining (no topic
//!   yet, the group unreadable for a while). In the last case both may have mirrored the same
//!   records — at-least-once duplicates of a few seconds, never a loss; exactly-once flows are
//!   fenced as before.
//! - A member with this process's own client id (`refract-<host>-<pid>`: a container
//!   restarted as pid 1) or naming a process of this host that no longer exists is what a
//!   crash left behind, not another process: it is not waited for, and the restart does not
//!   claim (a join would wait for that member's session to time out): it starts at once and
//!   joins while running.
//! - Without the permission to describe or join the group (the broker refuses the join, or it
//!   does not take this process in within [`CLAIM_TIMEOUT`]), the flow runs anyway, with one
//!   `WARN` that a second process would not be noticed.
//!
//! Refusing to start (the other choice) would stop a rolling update, whose new process starts
//! while the old one still runs: on standby it is healthy and takes over when the old one stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use rdkafka::admin::AdminClient;
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use tracing::{debug, error, info, warn};

use refract_config::names::member_client;
use refract_config::{ClientRole, Flow};
use refract_kafka::admin_ffi::{describe_group_members, GroupMember};
use refract_kafka::clients::{client_config, Authenticated, REQUEST_TIMEOUT};

use crate::flow::lock;
use crate::series::FlowState;
use crate::tasks::FlowTasks;

use super::coordination_group;

/// How often the group is described: while on standby, to take over; while running, to find a
/// process that started at the same moment.
pub(crate) const LOOK_EVERY: Duration = Duration::from_secs(2);

/// How long a claiming process waits for the group to take it in before it runs the flow
/// anyway (a broker that hides the group from a principal without Read on it never does).
pub(crate) const CLAIM_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a claim waits for processes of greater client ids to leave the group: a running
/// one steps back at its next look ([`LOOK_SETTLED`] at the latest) after draining.
pub(crate) const YIELD_TIMEOUT: Duration = Duration::from_secs(60);

/// How long after it started the flow a process keeps looking every [`LOOK_EVERY`].
const SETTLE: Duration = Duration::from_secs(30);

/// How often a process that runs the flow looks once settled (a zombie that comes back).
const LOOK_SETTLED: Duration = Duration::from_secs(10);

/// How long the group keeps a member that stopped answering (a crashed process): Kafka's
/// smallest session timeout by default (`group.min.session.timeout.ms`).
pub(crate) const SESSION_TIMEOUT: Duration = Duration::from_secs(6);

/// The solo group of `flow`: see [`refract_config::FlowId::solo_group`].
pub fn solo_group(flow: &Flow) -> String {
    flow.id().solo_group(
        flow.topics.include.patterns(),
        flow.topics.exclude.patterns(),
    )
}

/// Another process that runs a flow, as its group shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherProcess {
    /// Its client id (`refract-<instance>`).
    pub client_id: String,
    /// The address it connects from, as the broker sees it.
    pub host: String,
    /// Whether it runs the flow in cluster mode (a member of the cluster-mode group).
    pub clustered: bool,
}

impl std::fmt::Display for OtherProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let instance =
            refract_config::names::member_instance(&self.client_id).unwrap_or(&self.client_id);
        write!(
            f,
            "refract process {instance} (client id {}, from {}{})",
            self.client_id,
            self.host.trim_start_matches('/'),
            if self.clustered {
                ", in cluster mode"
            } else {
                ""
            }
        )
    }
}

/// The processes other than the one with `own_client` that run `flow` now: members of its
/// solo group and of its cluster-mode group, leftovers of a crash left out (see the module
/// doc). No side effects.
pub fn others_running<C: ClientContext>(
    admin: &AdminClient<C>,
    flow: &Flow,
    own_client: &str,
) -> Result<Vec<OtherProcess>, String> {
    let mut found = Vec::new();
    for (group, clustered) in [(solo_group(flow), false), (coordination_group(flow), true)] {
        let members = describe_group_members(admin, &group, REQUEST_TIMEOUT)
            .map_err(|e| format!("describing group {group}: {e}"))?;
        found.extend(
            members
                .into_iter()
                .filter(|m| clustered || !left_by_a_crash(m, own_client))
                .map(|m| OtherProcess {
                    client_id: m.client_id,
                    host: m.host,
                    clustered,
                }),
        );
    }
    found.sort_by(|a, b| a.client_id.cmp(&b.client_id));
    found.dedup();
    Ok(found)
}

/// Whether `member` is what a crashed process of this host left in the group: it has this
/// process's own client id (the same host name and process id: a restarted container), or it
/// names a process id on this host that no longer runs.
fn left_by_a_crash(member: &GroupMember, own_client: &str) -> bool {
    if member.client_id == own_client {
        return true;
    }
    let own_host = super::default_instance();
    let Some((own_host, _)) = own_host.rsplit_once('-') else {
        return false;
    };
    let Some(pid) = member
        .client_id
        .strip_prefix(&member_client(own_host))
        .and_then(|rest| rest.strip_prefix('-'))
        .and_then(|pid| pid.parse::<u32>().ok())
    else {
        return false;
    };
    let proc = std::path::Path::new("/proc");
    proc.join("self").exists() && !proc.join(pid.to_string()).exists()
}

/// Runs `tasks` unless another process runs the flow (see the module doc) until `stop`; on
/// stop, drains and commits the tasks, then leaves the group.
pub(crate) fn run(tasks: Arc<FlowTasks>, instance: String, stop: Arc<AtomicBool>) {
    let flow = tasks.flow();
    let name = flow.name();
    let own_client = member_client(&instance);
    let admin: Option<Authenticated<AdminClient<DefaultClientContext>>> = match client_config(
        tasks.source(),
        ClientRole::Admin,
        &own_client,
        &[],
        &[],
    )
    .create()
    {
        Ok(a) => Some(a),
        Err(e) => {
            warn!(flow = %name, "cannot tell whether another refract process runs this flow (creating an admin client for source cluster {}: {e}); running it here anyway", tasks.source().alias);
            None
        }
    };
    let mut guard = Guard {
        tasks: &tasks,
        name: &name,
        own_client: &own_client,
        member: None,
        running: false,
        said: None,
        blind: false,
        join_failed: false,
        claimed: None,
        contested: None,
        since: Instant::now(),
    };
    let mut next_look = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() >= next_look {
            // Often while waiting or just started (two processes starting together), then
            // seldom: a process that appears later saw this one and waits.
            let settled = guard.running && guard.member.is_some() && guard.since.elapsed() > SETTLE;
            next_look = Instant::now() + if settled { LOOK_SETTLED } else { LOOK_EVERY };
            match admin.as_deref() {
                Some(admin) => guard.look(admin),
                None => guard.start(),
            }
        }
        if guard.serve() {
            // Taken in by the group: decide now, not at the next look.
            next_look = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if guard.running {
        tasks.stop_all(false);
    }
    guard.leave();
}

/// One process's side of the solo group (see [`run`]).
struct Guard<'a> {
    tasks: &'a Arc<FlowTasks>,
    name: &'a str,
    own_client: &'a str,
    /// The solo group's member, while this process runs the flow and could join.
    member: Option<Authenticated<BaseConsumer<PauseAll>>>,
    running: bool,
    /// The other process last named on standby (said once per process).
    said: Option<String>,
    /// The group could not be described: said once, looked at again quietly.
    blind: bool,
    /// Joining the group failed (said once; not tried again).
    join_failed: bool,
    /// When this process joined the group before starting the flow (it claims the flow and
    /// starts once the group has taken it in), until it starts or stands by.
    claimed: Option<Instant>,
    /// When a claim found only processes of greater client ids beside it (it waits for them
    /// to step back).
    contested: Option<Instant>,
    /// When this process last started the flow.
    since: Instant,
}

impl Guard<'_> {
    /// Describes the groups and starts, waits or steps back.
    fn look(&mut self, admin: &AdminClient<DefaultClientContext>) {
        let others = match others_running(admin, self.tasks.flow(), self.own_client) {
            Ok(o) => {
                self.blind = false;
                o
            }
            // Running already: the flow's cluster watch reports a source that does not answer.
            Err(e) if self.running => {
                debug!(flow = %self.name, "solo group: {e}");
                return;
            }
            Err(e) => {
                if !self.blind && e.contains("not supported by broker") {
                    // A broker without DescribeGroups (librdkafka's mock cluster): nothing to
                    // warn an operator about.
                    self.blind = true;
                    info!(flow = %self.name, "the source cluster cannot describe groups ({e}): a second process on this pipeline would not be noticed");
                } else if !self.blind {
                    self.blind = true;
                    warn!(flow = %self.name, "cannot tell whether another refract process runs this flow ({e}); running it here anyway: a second process on the same pipeline would mirror every record again (grant Describe and Read on the group, see check --connect)");
                }
                self.start();
                return;
            }
        };
        // A halted flow (fenced by a newer process, a processor that stopped it) does not hold
        // the flow: it leaves the group so that another process can take over.
        let halted = self.running && self.tasks.board().status().state == FlowState::Halted;
        if halted {
            if self.member.is_some() {
                info!(flow = %self.name, "the flow halted: leaving group {} so that another process can run it", solo_group(self.tasks.flow()));
                self.leave();
            }
            return;
        }
        if !self.running && self.claimed.is_some() {
            return self.claiming(&others);
        }
        match (self.running, others.first()) {
            (false, None) => self.claim(admin),
            (false, Some(other)) => self.stand_by(other),
            // Started at the same moment: the smaller client id keeps the flow. Not in the group
            // (it halted and left): the other took over.
            (true, Some(other))
                if other.clustered
                    || self.member.is_none()
                    || other.client_id.as_str() < self.own_client =>
            {
                error!(flow = %self.name, "{other} runs this flow too (both started at the same moment, or it took over while this process was halted or did not answer); this process steps back: it drains, commits and waits on standby (records of the last seconds may have been mirrored by both)");
                self.tasks.stop_all(true);
                self.running = false;
                self.leave();
                self.stand_by(other);
            }
            (true, _) => self.join_once(),
        }
    }

    /// Nobody else runs the flow: joins the solo group before reading anything (see the module
    /// doc; [`Guard::claiming`] decides once the group has taken this process in), or starts
    /// at once when it cannot join or the source has no topic to mirror yet.
    fn claim(&mut self, admin: &AdminClient<DefaultClientContext>) {
        if self.join_failed || self.member.is_some() {
            return self.start();
        }
        let Some(topic) = self.topic_to_join(admin) else {
            return self.start();
        };
        // A member a crash of this host left behind holds the group until its session times
        // out, and a join waits for that: this process is the crash's restart, so it starts at
        // once and joins while running, as it did before claims.
        if self.crash_left_a_member(admin) {
            debug!(flow = %self.name, "group {} holds a member a crash of this host left: starting without a claim", solo_group(self.tasks.flow()));
            return self.start();
        }
        match self.join(&topic) {
            Ok(member) => {
                self.member = Some(member);
                self.claimed = Some(Instant::now());
                self.contested = None;
                debug!(flow = %self.name, "claiming the flow: joining group {} before reading", solo_group(self.tasks.flow()));
            }
            Err(e) => {
                self.join_failed(&format!("{e:#}"));
                self.start();
            }
        }
    }

    /// A claim in progress, with the group's other members now (see the module doc):
    /// - one with a smaller client id (or in cluster mode) keeps the flow: this process leaves
    ///   and stands by;
    /// - not taken in by the group yet: waits, at most [`CLAIM_TIMEOUT`] (then runs the flow
    ///   without the guard, saying why);
    /// - alone: starts the flow;
    /// - only greater client ids beside it (claimed at the same moment, or started just before
    ///   this process joined): waits until they have left, which they do once they see this
    ///   one (a running one drains and commits first), at most [`YIELD_TIMEOUT`].
    fn claiming(&mut self, others: &[OtherProcess]) {
        let Some(at) = self.claimed else {
            return;
        };
        if let Some(other) = others
            .iter()
            .find(|o| o.clustered || o.client_id.as_str() < self.own_client)
        {
            debug!(flow = %self.name, "{other} claimed this flow at the same moment: leaving the group");
            self.claimed = None;
            self.leave();
            return self.stand_by(other);
        }
        if !self.member.as_ref().is_some_and(|m| m.context().taken_in()) {
            if at.elapsed() >= CLAIM_TIMEOUT {
                self.join_failed(&format!(
                    "the group did not take this process in within {CLAIM_TIMEOUT:?}; a principal without Read on the group never is"
                ));
                self.leave();
                self.start();
            }
            return;
        }
        let Some(other) = others.first() else {
            return self.start();
        };
        let since = *self.contested.get_or_insert_with(Instant::now);
        if since.elapsed() >= YIELD_TIMEOUT {
            warn!(flow = %self.name, "{other} is still in group {} {YIELD_TIMEOUT:?} after this process joined it (a process with a greater client id steps back when it sees a smaller one); running the flow here anyway", solo_group(self.tasks.flow()));
            return self.start();
        }
        debug!(flow = %self.name, "waiting for {other} to leave group {}: it steps back for this process's smaller client id", solo_group(self.tasks.flow()));
    }

    /// Whether the solo group holds a member a crash of this host left (see
    /// [`left_by_a_crash`]).
    fn crash_left_a_member(&self, admin: &AdminClient<DefaultClientContext>) -> bool {
        describe_group_members(admin, &solo_group(self.tasks.flow()), REQUEST_TIMEOUT)
            .is_ok_and(|members| members.iter().any(|m| left_by_a_crash(m, self.own_client)))
    }

    /// A source topic the flow would mirror, for the solo group's member to subscribe to.
    fn topic_to_join(&self, admin: &AdminClient<DefaultClientContext>) -> Option<String> {
        let flow = self.tasks.flow();
        let metadata = match admin.inner().fetch_metadata(None, REQUEST_TIMEOUT) {
            Ok(m) => m,
            Err(e) => {
                debug!(flow = %self.name, "solo group: listing the source's topics: {e}");
                return None;
            }
        };
        let mut names: Vec<&str> = metadata
            .topics()
            .iter()
            .filter(|t| t.error().is_none() && !t.partitions().is_empty())
            .map(|t| t.name())
            .filter(|t| {
                flow.topics.should_replicate(t)
                    && refract_config::internal_topic_reason(t).is_none()
            })
            .collect();
        names.sort_unstable();
        names.first().map(|t| t.to_string())
    }

    /// Says once that the group could not be joined: the flow runs without the guard.
    fn join_failed(&mut self, why: &str) {
        if !self.join_failed {
            self.join_failed = true;
            warn!(flow = %self.name, "cannot join group {} on source cluster {} to show that this process runs the flow ({why}); running it here anyway: a second process on the same pipeline would not notice it (grant Read on the group, see check --connect)", solo_group(self.tasks.flow()), self.tasks.source().alias);
        }
    }

    /// Runs the flow's tasks here and joins the solo group.
    fn start(&mut self) {
        self.claimed = None;
        self.contested = None;
        if !self.running {
            if let Some(other) = self.said.take() {
                info!(flow = %self.name, "{other} no longer runs this flow: starting it here");
            }
            lock(self.tasks.board().shared()).held_elsewhere = None;
            if let Err(e) = self.tasks.start_all() {
                error!(flow = %self.name, "cannot start the flow's tasks: {e:#}");
                return;
            }
            self.running = true;
            self.since = Instant::now();
            self.tasks.board().publish_state();
        }
        self.join_once();
    }

    /// Joins the solo group unless this process is in it or could not join before (once the
    /// flow mirrors a topic: the group needs one to divide).
    fn join_once(&mut self) {
        if self.member.is_some() || self.join_failed {
            return;
        }
        let status = self.tasks.board().status();
        let Some(topic) = status.routes.keys().next() else {
            return;
        };
        match self.join(topic) {
            Ok(member) => self.member = Some(member),
            Err(e) => self.join_failed(&format!("{e:#}")),
        }
    }

    /// Waits for `other`, saying so once per process.
    fn stand_by(&mut self, other: &OtherProcess) {
        let text = other.to_string();
        if self.said.as_deref() != Some(text.as_str()) {
            warn!(flow = %self.name, "{text} runs this flow: this process waits on standby and takes over when it stops (a second process without [cluster] would mirror every record again; to share a flow's work, run every process with [cluster])");
            self.said = Some(text.clone());
        }
        lock(self.tasks.board().shared()).held_elsewhere = Some(format!(
            "{text} runs this flow; this process takes over when it stops"
        ));
        self.tasks.board().publish_state();
    }

    /// A member of the solo group, subscribed to `topic` (one of the flow's source topics) with
    /// every partition it is given paused: it only shows that this process runs the flow.
    fn join(&self, topic: &str) -> Result<Authenticated<BaseConsumer<PauseAll>>> {
        let flow = self.tasks.flow();
        let group = solo_group(flow);
        let session_ms = SESSION_TIMEOUT.as_millis().to_string();
        let heartbeat_ms = (SESSION_TIMEOUT / 3).as_millis().to_string();
        let consumer: Authenticated<BaseConsumer<PauseAll>> = client_config(
            self.tasks.source(),
            ClientRole::Consumer,
            self.own_client,
            &[],
            &[
                ("group.id", group.as_str()),
                ("session.timeout.ms", session_ms.as_str()),
                ("heartbeat.interval.ms", heartbeat_ms.as_str()),
                // The thread polls every 200 ms; nothing is read.
                ("max.poll.interval.ms", "86400000"),
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
                // Paused at once: whatever a fetch starts with is small and at the end.
                ("auto.offset.reset", "latest"),
                ("max.partition.fetch.bytes", "1024"),
                ("queued.max.messages.kbytes", "1"),
            ],
        )
        .create_with_context(PauseAll::default())?;
        consumer.subscribe(&[topic])?;
        Ok(consumer)
    }

    /// Serves the group membership (heartbeats run in librdkafka; this keeps its queue
    /// drained and runs the rebalance callback). True when the group has just taken this
    /// process in.
    fn serve(&mut self) -> bool {
        let Some(member) = &self.member else {
            return false;
        };
        let before = member.context().taken_in();
        let refused = match member.poll(Duration::ZERO) {
            None | Some(Ok(_)) => None,
            Some(Err(KafkaError::MessageConsumption(
                code @ (RDKafkaErrorCode::GroupAuthorizationFailed
                | RDKafkaErrorCode::TopicAuthorizationFailed),
            ))) => Some(code),
            Some(Err(e)) => {
                debug!(flow = %self.name, "solo group: {e}");
                None
            }
        };
        if let Some(code) = refused {
            self.join_failed(&code.to_string());
            self.leave();
            if self.claimed.is_some() {
                self.start();
            }
            return false;
        }
        let joined = !before && member.context().taken_in();
        if joined {
            info!(flow = %self.name, "joined group {} on source cluster {} (a second process on this pipeline waits for this one)", solo_group(self.tasks.flow()), self.tasks.source().alias);
        }
        joined
    }

    /// Leaves the solo group (librdkafka sends LeaveGroup on close).
    fn leave(&mut self) {
        if let Some(member) = self.member.take() {
            member.unsubscribe();
            drop(member);
        }
    }
}

/// The solo group member's context: every partition the group gives it is paused at once.
#[derive(Default)]
struct PauseAll {
    /// Whether the group has taken the member in (it got an assignment, perhaps empty).
    taken_in: AtomicBool,
}

impl PauseAll {
    fn taken_in(&self) -> bool {
        self.taken_in.load(Ordering::Relaxed)
    }
}

impl ClientContext for PauseAll {}

impl ConsumerContext for PauseAll {
    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            self.taken_in.store(true, Ordering::Relaxed);
            if let Err(e) = consumer.pause(tpl) {
                debug!("solo group: pausing {} partitions: {e}", tpl.count());
            }
        }
    }
}
