//! Topics deleted and created again under the same name, on the source or as the remote topic
//! on the target. The new topic's offsets start again at 0: read on from the old position, the
//! flow would wait for offsets that never come or jump, and the remote topic, its offset syncs
//! and checkpoints would mix two topics. A flow finds it two ways:
//! - **Kafka topic ids** (KIP-516; reliable): each discovery describes the flow's source topics
//!   and the remote topics (one DescribeTopics request per cluster) and compares their ids with
//!   the ones this run saw first. A remote topic that disappeared is found the same way.
//! - **A position past the partition's end** (the fallback where no id was seen yet: a
//!   restart, a broker without topic ids): the source consumer runs with
//!   `auto.offset.reset=error`, so a fetch past the end is reported instead of reset (see
//!   `lost`). This cannot tell a recreated topic from a truncated log (an unclean leader
//!   election); both are handled alike.
//!
//! Then, per flow (`on_recreated_topic`), the topic is either **stopped** (the default: its
//! partitions show as degraded with reason `recreated` and the message says what to do; they
//! are not read again by this run, and nothing of the new topic reaches the remote topic) or
//! **rewound**: read again from its log start into the same remote topic (created again if it
//! was deleted). The first record after a rewind is always offset-synced (an upstream gap), and
//! MirrorMaker 2's sync store clears its history on an upstream rewind, so checkpoints
//! translate the new topic's offsets.

use std::collections::{HashMap, HashSet};

use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};
use tracing::{debug, error, warn};

use refract_config::OnRecreatedTopic;
use refract_kafka::admin_ffi::{topic_ids, TopicId};
use refract_kafka::clients::REQUEST_TIMEOUT;

use crate::clock::now_ms;
use crate::degraded::Reason;
use crate::planner::TopicPlan;
use crate::progress::PartitionProgress;

use super::delivery::Tracked;
use super::lock;
use super::run::Run;

/// How a committed position's metadata names the ids of the source and the remote topic it
/// belongs to: `refract topic ids: source=<id> remote=<id>` (`-`: not known).
const METADATA_PREFIX: &str = "refract topic ids: ";

/// The (source, remote) topic ids a committed position's metadata recorded.
fn recorded(metadata: &str) -> (Option<&str>, Option<&str>) {
    let Some(ids) = metadata.strip_prefix(METADATA_PREFIX) else {
        return (None, None);
    };
    let mut source = None;
    let mut remote = None;
    for part in ids.split(' ') {
        match part.split_once('=') {
            Some(("source", id)) if id != "-" => source = Some(id),
            Some(("remote", id)) if id != "-" => remote = Some(id),
            _ => {}
        }
    }
    (source, remote)
}

/// The ids of the topics a run mirrors, as it first saw them, and the topics it stopped.
#[derive(Debug, Default)]
pub(super) struct Incarnations {
    /// Source topic → its id.
    source: HashMap<String, TopicId>,
    /// Remote topic → its id.
    target: HashMap<String, TopicId>,
    /// Source topics stopped: not read, and their remote topics not created, in this run.
    stopped: HashSet<String>,
}

impl Incarnations {
    /// The metadata the flow commits with the positions of `source_topic` (on the source)
    /// and of its `remote_topic` (on the target): both topics' ids, where known.
    pub(super) fn metadata(&self, source_topic: &str, remote_topic: &str) -> String {
        let id = |id: Option<&TopicId>| id.map_or("-", String::as_str).to_string();
        format!(
            "{METADATA_PREFIX}source={} remote={}",
            id(self.source.get(source_topic)),
            id(self.target.get(remote_topic))
        )
    }

    /// Whether `source_topic` was stopped in this run.
    pub(super) fn stopped(&self, source_topic: &str) -> bool {
        self.stopped.contains(source_topic)
    }
}

/// What changed about a mirrored topic.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// The source topic has a new id.
    Source { old: TopicId, new: TopicId },
    /// The remote topic has a new id, or (`new` is `None`) is gone.
    Target { old: TopicId, new: Option<TopicId> },
    /// A partition's position is past its end (no id told more).
    PastEnd { partition: i32, at: i64, high: i64 },
}

impl Run<'_> {
    /// Compares the ids of the planned source topics and of their existing remote topics
    /// (`target_topics`) with the ones this run saw first, and handles each topic that was
    /// recreated. Ids that cannot be read (a broker without DescribeTopics, no Describe
    /// permission) only cost this check; the position check still applies.
    pub(super) fn check_incarnations(
        &mut self,
        plan: &TopicPlan,
        target_topics: &HashMap<String, i32>,
    ) {
        let routes: Vec<(String, String)> = plan
            .routes
            .iter()
            .filter(|r| !self.slots.incarnations.stopped(&r.source_topic))
            .map(|r| (r.source_topic.clone(), r.remote_topic.clone()))
            .collect();
        if routes.is_empty() {
            return;
        }
        let sources: Vec<String> = routes.iter().map(|(s, _)| s.clone()).collect();
        let remotes: Vec<String> = routes
            .iter()
            .filter(|(_, r)| target_topics.contains_key(r))
            .map(|(_, r)| r.clone())
            .collect();
        let source_ids = self.ids(&self.clients.source_admin, &sources, "source");
        let target_ids = self.ids(&self.clients.admin, &remotes, "target");
        let mut changes = Vec::new();
        for (source, remote) in routes {
            if let Some(new) = source_ids.as_ref().and_then(|ids| ids.get(&source)) {
                match self
                    .slots
                    .incarnations
                    .source
                    .insert(source.clone(), new.clone())
                {
                    Some(old) if old != *new => {
                        changes.push((
                            source.clone(),
                            Change::Source {
                                old,
                                new: new.clone(),
                            },
                        ));
                        continue;
                    }
                    _ => {}
                }
            }
            let Some(target_ids) = target_ids.as_ref() else {
                continue;
            };
            let new = target_ids.get(&remote).cloned();
            let gone = !target_topics.contains_key(&remote);
            let known = &mut self.slots.incarnations.target;
            match (new, known.get(&remote).cloned()) {
                (Some(new), Some(old)) if old != new => {
                    known.insert(remote.clone(), new.clone());
                    changes.push((
                        source,
                        Change::Target {
                            old,
                            new: Some(new),
                        },
                    ));
                }
                (Some(new), None) => {
                    known.insert(remote, new);
                }
                (None, Some(old)) if gone => {
                    known.remove(&remote);
                    changes.push((source, Change::Target { old, new: None }));
                }
                _ => {}
            }
        }
        for (topic, change) in changes {
            self.recreated(&topic, change);
        }
    }

    /// Compares the topic ids the flow's last commits recorded for the slots `added` with the
    /// ids the topics have now: a topic recreated while the flow was not running is handled like
    /// one recreated while it runs. The source topic's id is taken from the flow's target
    /// positions (they outlive a deleted source topic, and its committed positions with it), the
    /// remote topic's from its source positions (`committed`), which outlive a deleted remote
    /// topic. Nothing recorded (commits of an older refract): nothing to compare.
    pub(super) fn check_recorded_incarnations(
        &mut self,
        added: &[usize],
        committed: &TopicPartitionList,
    ) {
        let mut tpl = TopicPartitionList::new();
        for &i in added {
            let slot = &self.slots.slots[i];
            tpl.add_partition(&slot.remote, slot.partition);
        }
        let on_target = match self
            .clients
            .target_meta
            .committed_offsets(tpl, REQUEST_TIMEOUT)
        {
            Ok(tpl) => tpl,
            Err(e) => {
                debug!(flow = %self.name, "recorded topic ids not read ({e}); a recreated topic is found by its position");
                TopicPartitionList::new()
            }
        };
        let remotes: Vec<String> = added
            .iter()
            .map(|&i| self.slots.slots[i].remote.clone())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let remote_ids = self
            .ids(&self.clients.admin, &remotes, "target")
            .unwrap_or_default();
        let mut changes: Vec<(String, Change)> = Vec::new();
        for &i in added {
            let slot = &self.slots.slots[i];
            if changes.iter().any(|(t, _)| *t == slot.topic) {
                continue;
            }
            let recorded_source = on_target
                .find_partition(&slot.remote, slot.partition)
                .and_then(|e| recorded(e.metadata()).0.map(str::to_string));
            let recorded_remote = committed
                .find_partition(&slot.topic, slot.partition)
                .and_then(|e| recorded(e.metadata()).1.map(str::to_string));
            let source_now = self.slots.incarnations.source.get(&slot.topic);
            let change = match (recorded_source, source_now) {
                (Some(old), Some(new)) if old != *new => Some(Change::Source {
                    old,
                    new: new.clone(),
                }),
                _ => match (recorded_remote, remote_ids.get(&slot.remote)) {
                    (Some(old), Some(new)) if old != *new => Some(Change::Target {
                        old,
                        new: Some(new.clone()),
                    }),
                    _ => None,
                },
            };
            if let Some(change) = change {
                changes.push((slot.topic.clone(), change));
            }
        }
        for (topic, change) in changes {
            self.recreated(&topic, change);
        }
    }

    /// The ids of `topics` on one side, or `None` when they cannot be read (said at debug).
    fn ids<C: rdkafka::client::ClientContext>(
        &self,
        admin: &rdkafka::admin::AdminClient<C>,
        topics: &[String],
        side: &str,
    ) -> Option<HashMap<String, TopicId>> {
        if topics.is_empty() {
            return Some(HashMap::new());
        }
        match topic_ids(admin, topics, REQUEST_TIMEOUT) {
            Ok(ids) => Some(ids),
            Err(e) => {
                debug!(flow = %self.name, "topic ids of the {side} topics not read ({e}); a recreated topic is found by its position");
                None
            }
        }
    }

    /// Slot `i`'s position `at` is past its partition's end `high` (log start `low`): its log
    /// was truncated or its topic recreated. The topic's id, read now, tells which when this run
    /// saw it before.
    pub(super) fn past_end(&mut self, i: usize, at: Option<i64>, low: i64, high: i64) {
        let topic = self.slots.slots[i].topic.clone();
        let partition = self.slots.slots[i].partition;
        let known = self.slots.incarnations.source.get(&topic).cloned();
        let now = self
            .ids(
                &self.clients.source_admin,
                std::slice::from_ref(&topic),
                "source",
            )
            .and_then(|mut ids| ids.remove(&topic));
        let change = match (known, now) {
            (Some(old), Some(new)) if old != new => {
                self.slots
                    .incarnations
                    .source
                    .insert(topic.clone(), new.clone());
                Change::Source { old, new }
            }
            _ => Change::PastEnd {
                partition,
                at: at.unwrap_or(low),
                high,
            },
        };
        self.recreated(&topic, change);
    }

    /// Handles a recreated `topic` (a source topic of this run) as `on_recreated_topic` says.
    fn recreated(&mut self, topic: &str, change: Change) {
        let runner = self.runner;
        let Some(slots) = self.slots.by_topic.get(topic) else {
            return;
        };
        // A position past the end concerns its partition only; a new id, the whole topic.
        let slots: Vec<usize> = match &change {
            Change::PastEnd { partition, .. } => slots
                .get(usize::try_from(*partition).unwrap_or(usize::MAX))
                .copied()
                .flatten()
                .into_iter()
                .collect(),
            _ => slots.iter().flatten().copied().collect(),
        };
        let Some(&first) = slots.first() else {
            return;
        };
        let remote = self.slots.slots[first].remote.clone();
        let (source, target) = (&runner.source.alias, &runner.target.alias);
        let what = match &change {
            Change::Source { old, new } => format!(
                "source topic {topic} on cluster {source} was deleted and created again (topic id {old} -> {new})"
            ),
            Change::Target { old, new: Some(new) } => format!(
                "remote topic {remote} on cluster {target} was deleted and created again (topic id {old} -> {new}); the records mirrored into it are gone"
            ),
            Change::Target { old, new: None } => format!(
                "remote topic {remote} on cluster {target} (topic id {old}) was deleted; the records mirrored into it are gone"
            ),
            Change::PastEnd { partition, at, high } => format!(
                "{topic}[{partition}]: position {at} is past the partition's end ({high}) on cluster {source}: the topic was deleted and created again, or its log truncated"
            ),
        };
        match runner.flow.delivery.on_recreated_topic {
            OnRecreatedTopic::Stop => {
                let message = format!(
                    "{what}; {topic} is not mirrored any more, so that nothing is mixed into {remote} on cluster {target} (on_recreated_topic = \"stop\"). To mirror {topic} again from its beginning into {remote}, set on_recreated_topic = \"rewind\" and reload"
                );
                error!(flow = %self.name, topic = %topic, "{message}");
                let mut changed = false;
                for &i in &slots {
                    let slot = &mut self.slots.slots[i];
                    let at = slot.position;
                    if slot
                        .health
                        .stop(Reason::Recreated, message.clone(), at, now_ms())
                        .is_some()
                    {
                        changed = true;
                        self.pause(i);
                        let slot = &self.slots.slots[i];
                        runner.count_failure(Some(slot), Reason::Recreated);
                    }
                }
                if !matches!(change, Change::PastEnd { .. }) {
                    self.slots.incarnations.stopped.insert(topic.to_string());
                }
                lock(&runner.status).last_error = Some(message);
                if changed {
                    self.publish_degraded();
                }
            }
            OnRecreatedTopic::Rewind => {
                warn!(flow = %self.name, topic = %topic, "{what}; mirroring {topic} again from its beginning into {remote} on cluster {target} (on_recreated_topic = \"rewind\"); offset syncs restart with it");
                for &i in &slots {
                    self.rewind(i);
                }
            }
        }
    }

    /// Reads slot `i` again from its partition's log start, as a partition never mirrored:
    /// its progress starts afresh there, so the next commit moves back to it.
    fn rewind(&mut self, i: usize) {
        let slot = &self.slots.slots[i];
        let low = self
            .clients
            .consumer
            .fetch_watermarks(&slot.topic, slot.partition, REQUEST_TIMEOUT)
            .map(|(low, _)| low)
            .unwrap_or(0);
        {
            let mut progress = lock(&self.progress);
            if let Some(p) = progress.get_mut(i) {
                let fresh = if self.runner.flow.offset_syncs.enabled {
                    PartitionProgress::tracking_pairs()
                } else {
                    PartitionProgress::default()
                };
                let mut tracked = Tracked::new(fresh, p.metrics.clone());
                tracked.progress.sent(low - 1, 0);
                *p = tracked;
            }
        }
        self.slots.slots[i].position = Some(low);
        self.seek(i, Offset::Offset(low));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_metadata_records_both_ids_and_reads_back() {
        let mut known = Incarnations::default();
        known.source.insert("orders".into(), "AbC".into());
        assert_eq!(
            known.metadata("orders", "a.orders"),
            "refract topic ids: source=AbC remote=-"
        );
        assert_eq!(
            recorded(&known.metadata("orders", "a.orders")),
            (Some("AbC"), None)
        );
        known.target.insert("a.orders".into(), "XyZ".into());
        assert_eq!(
            recorded(&known.metadata("orders", "a.orders")),
            (Some("AbC"), Some("XyZ"))
        );
        assert_eq!(recorded(""), (None, None));
        assert_eq!(recorded("written by another tool"), (None, None));
    }
}
