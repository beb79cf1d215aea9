//! Every name refract owns on a Kafka cluster, in one place: the consumer groups, topics,
//! transactional ids and client ids it reads or writes, and the `source->target` flow name.
//!
//! A name formatted in one file and parsed or matched in another drifts; these functions are the
//! only place each format is written down, and the tests below pin every one of them (operators
//! grant ACLs on these names, and a running deployment's groups and transactional ids must not
//! change between releases).
//!
//! Topics named by the replication policy (remote topics, heartbeats, checkpoints, offset syncs)
//! are not here: the policy plugin names them.

use std::fmt;

/// Which end of a flow: the cluster it reads from or the one it writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// The cluster a flow reads records from.
    Source,
    /// The cluster a flow writes records to.
    Target,
}

impl Side {
    /// `source` or `target`, as status output, logs and metric labels spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Source => "source",
            Side::Target => "target",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A flow's identity: its source and target cluster aliases. Shown as `source->target`, the way
/// MirrorMaker 2 writes a flow (`a->b.enabled`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId {
    /// The source cluster's alias.
    pub source: String,
    /// The target cluster's alias.
    pub target: String,
}

impl FlowId {
    /// The flow from `source` to `target`.
    pub fn new(source: impl Into<String>, target: impl Into<String>) -> Self {
        Self {
            source: source.into(),
            target: target.into(),
        }
    }

    /// Reads `source->target` back (`None` when `text` has no `->` or an empty side).
    pub fn parse(text: &str) -> Option<Self> {
        let (source, target) = text.split_once("->")?;
        (!source.is_empty() && !target.is_empty()).then(|| Self::new(source, target))
    }

    /// The alias of `side`.
    pub fn alias(&self, side: Side) -> &str {
        match side {
            Side::Source => &self.source,
            Side::Target => &self.target,
        }
    }

    /// The consumer group on the source under which the flow commits its progress:
    /// `refract-<source>-<target>`.
    pub fn progress_group(&self) -> String {
        format!("refract-{}-{}", self.source, self.target)
    }

    /// The `transactional.id` of an exactly-once task's target producer, the same in every
    /// process that runs the task so the newest fences the others: `refract-<source>-<target>`
    /// for a flow of one task, `refract-<source>-<target>-<task>` when it has several.
    pub fn transactional_id(&self, task_index: u32, task_count: u32) -> String {
        if task_count <= 1 {
            format!("refract-{}-{}", self.source, self.target)
        } else {
            format!("refract-{}-{}-{}", self.source, self.target, task_index)
        }
    }

    /// The consumer group the processes of a cluster-mode flow divide its tasks in:
    /// `refract-<source>-<target>-cluster`.
    pub fn membership_group(&self) -> String {
        format!("refract-{}-{}-cluster", self.source, self.target)
    }

    /// The consumer group a process that runs the flow without `[cluster]` joins on the source,
    /// so that a second process on the same flow sees it and waits:
    /// `refract-<source>-<target>-solo-<selection>`, where `<selection>` is 8 hex digits of a
    /// stable hash (FNV-1a, 32 bits) of the flow's topic selection (`topics` and
    /// `topics_exclude`): two pipelines that mirror different topics between the same clusters
    /// do not wait for each other.
    pub fn solo_group(&self, include: &[String], exclude: &[String]) -> String {
        let mut hash: u32 = 0x811c_9dc5;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                hash ^= u32::from(*b);
                hash = hash.wrapping_mul(0x0100_0193);
            }
        };
        for p in include {
            eat(p.as_bytes());
            eat(&[0]);
        }
        eat(&[1]);
        for p in exclude {
            eat(p.as_bytes());
            eat(&[0]);
        }
        format!("refract-{}-{}-solo-{hash:08x}", self.source, self.target)
    }

    /// The topic on the source whose partitions stand for a cluster-mode flow's tasks:
    /// `refract-tasks.<source>-<target>.internal`.
    pub fn tasks_topic(&self) -> String {
        format!("refract-tasks.{}-{}.internal", self.source, self.target)
    }

    /// The client id of the checkpoint thread's readers of the source's consumer groups:
    /// `refract-<source>-<target>-groups`.
    pub fn groups_client(&self) -> String {
        format!("refract-{}-{}-groups", self.source, self.target)
    }

    /// The client id of the checkpoint thread's target producer:
    /// `refract-<source>-<target>-checkpoints`.
    pub fn checkpoints_client(&self) -> String {
        format!("refract-{}-{}-checkpoints", self.source, self.target)
    }

    /// The client id that reads MirrorMaker 2's Connect positions when the flow takes over from
    /// a stopped MM2: `refract-<source>-<target>-mm2-takeover`.
    pub fn takeover_group(&self) -> String {
        format!("refract-{}-{}-mm2-takeover", self.source, self.target)
    }
}

impl fmt::Display for FlowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{}", self.source, self.target)
    }
}

/// The prefix of every consumer group refract itself uses: never mirrored or checkpointed.
pub const GROUP_PREFIX: &str = "refract-";

/// Whether `group` is one of refract's own groups (a flow's progress, a command's reader).
pub fn is_refract_group(group: &str) -> bool {
    group.starts_with(GROUP_PREFIX)
}

/// The group (and client id) `refract verify` reads both clusters under.
pub const VERIFY_GROUP: &str = "refract-verify";
/// The group (and client id) of `refract offsets` and `refract heartbeats` readers.
pub const CLI_GROUP: &str = "refract-cli";
/// The client id of `refract status` reading a flow's committed positions.
pub const STATUS_CLIENT: &str = "refract-status";
/// The group (and client id) of the reader of a checkpoints topic.
pub const CHECKPOINTS_READER_GROUP: &str = "refract-checkpoints-reader";
/// The client id of `refract check --connect`.
pub const CHECK_CLIENT: &str = "refract-check";

/// The client id a flow's cluster watch connects with, from the flow's name
/// ([`FlowId`]'s `source->target`): `refract-<source>-><target>-watch`.
pub fn watch_client(flow: &str) -> String {
    format!("{GROUP_PREFIX}{flow}-watch")
}

/// The client id of a cluster-mode process: `refract-<instance>`.
pub fn member_client(instance: &str) -> String {
    format!("{GROUP_PREFIX}{instance}")
}

/// The instance a cluster-mode member's client id names (the inverse of [`member_client`]).
pub fn member_instance(client_id: &str) -> Option<&str> {
    client_id.strip_prefix(GROUP_PREFIX)
}

/// The name of the topic `refract check --connect` asks the broker to validate (never created)
/// to probe the permission to create topics: `refract-check-probe-<nonce>`.
pub fn check_probe_topic(nonce: u128) -> String {
    format!("{CHECK_CLIENT}-probe-{nonce:x}")
}

/// The default dead-letter topic of flows from `source`: `refract.dlq.<source>.internal`.
pub fn dead_letter_topic(source: &str) -> String {
    format!("refract.dlq.{source}.internal")
}

/// MirrorMaker 2's Connect offsets topic for flows from `source` when
/// `offset.storage.topic` is not set: `mm2-offsets.<source>.internal`.
pub fn mm2_offsets_topic(source: &str) -> String {
    refract_mm2::connect_offsets::default_offsets_topic(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_owned_name_keeps_its_format() {
        let id = FlowId::new("a", "b");
        assert_eq!(id.to_string(), "a->b");
        assert_eq!(id.progress_group(), "refract-a-b");
        assert_eq!(id.transactional_id(0, 1), "refract-a-b");
        assert_eq!(id.transactional_id(2, 3), "refract-a-b-2");
        assert_eq!(id.membership_group(), "refract-a-b-cluster");
        let all = [".*".to_string()];
        assert_eq!(id.solo_group(&all, &[]), "refract-a-b-solo-c953e796");
        assert_ne!(
            id.solo_group(&all, &[]),
            id.solo_group(&["orders".to_string()], &[])
        );
        assert_ne!(
            id.solo_group(&["x".to_string()], &[]),
            id.solo_group(&[], &["x".to_string()])
        );
        assert_eq!(id.tasks_topic(), "refract-tasks.a-b.internal");
        assert_eq!(id.groups_client(), "refract-a-b-groups");
        assert_eq!(id.checkpoints_client(), "refract-a-b-checkpoints");
        assert_eq!(watch_client(&id.to_string()), "refract-a->b-watch");
        assert_eq!(id.takeover_group(), "refract-a-b-mm2-takeover");
        assert_eq!(member_client("pod-1"), "refract-pod-1");
        assert_eq!(member_instance("refract-pod-1"), Some("pod-1"));
        assert_eq!(check_probe_topic(255), "refract-check-probe-ff");
        assert_eq!(dead_letter_topic("a"), "refract.dlq.a.internal");
        assert_eq!(mm2_offsets_topic("a"), "mm2-offsets.a.internal");
        assert!(is_refract_group("refract-a-b"));
        assert!(!is_refract_group("orders-app"));
    }

    #[test]
    fn flow_ids_read_back() {
        assert_eq!(
            FlowId::parse("us-east->eu"),
            Some(FlowId::new("us-east", "eu"))
        );
        assert_eq!(FlowId::parse("a"), None);
        assert_eq!(FlowId::parse("->b"), None);
        assert_eq!(FlowId::new("a", "b").alias(Side::Target), "b");
        assert_eq!(Side::Source.to_string(), "source");
    }
}
