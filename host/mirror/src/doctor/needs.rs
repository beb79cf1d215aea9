//! What a flow needs of each cluster: the topics, groups and cluster operations its features
//! use (mirrored and remote topics, progress commits, offset syncs, checkpoints, heartbeats,
//! dead letters, ACL sync, cluster mode, exactly-once), each with why and whether missing it
//! stops the flow or only turns a feature off.

use anyhow::Result;

use refract_config::{DeliveryMode, Flow, OffsetSyncsLocation, OnError, TopicFilter};
use refract_kafka::AclOperation as Op;
use refract_plugin::ReplicationPolicy;

use super::evaluation::Session;
use crate::planner::TopicPlanner;
use crate::PreparedFlow;

/// What a flow needs of one resource.
#[derive(Debug, Clone)]
pub(super) struct Need {
    /// The flow (`a->b`).
    pub(super) flow: String,
    pub(super) resource: Resource,
    /// Operations needed.
    pub(super) ops: Vec<Op>,
    /// Create the topic when it does not exist (topics only).
    pub(super) create: bool,
    /// Missing it stops the flow (otherwise a feature is off).
    pub(super) fatal: bool,
    /// What it is for, in words.
    pub(super) why: String,
    /// For [`Resource::Groups`]: the flow's group filter.
    pub(super) groups: Option<TopicFilter>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Resource {
    /// A topic by name.
    Topic(String),
    /// Topics by prefix (a filter like `orders.*` with none of them visible).
    TopicPrefix(String),
    /// A consumer group by name.
    Group(String),
    /// Consumer groups the flow's `groups` filter selects (its include patterns).
    Groups(String),
    /// Topics a `topics` pattern selects when none is visible and the pattern names no prefix.
    TopicsMatching(String),
    /// The cluster.
    Cluster,
}

/// Whether a topic pattern names one topic (`orders`, `a.orders`: name characters only).
fn is_literal(pattern: &str) -> bool {
    !pattern.is_empty()
        && pattern
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// The literal prefix of a pattern of the form `prefix.*`, if it is one.
pub(super) fn literal_prefix(pattern: &str) -> Option<String> {
    let prefix = pattern.strip_suffix(".*")?;
    (prefix.is_empty() || is_literal(prefix)).then(|| prefix.to_string())
}

/// The needs of one flow on its source and its target.
pub(super) fn flow_needs(
    prepared: &PreparedFlow,
    source: Option<&Session>,
    has_reverse: bool,
    clustered: bool,
) -> Result<(Vec<Need>, Vec<Need>)> {
    let flow: &Flow = &prepared.flow;
    let name = flow.name();
    let mut policy = ReplicationPolicy::new(prepared.policy.clone());
    let need = |resource: Resource, ops: &[Op], create: bool, fatal: bool, why: &str| Need {
        flow: name.clone(),
        groups: matches!(resource, Resource::Groups(_)).then(|| flow.checkpoints.groups.clone()),
        resource,
        ops: ops.to_vec(),
        create,
        fatal,
        why: why.to_string(),
    };
    use Op::*;
    let mut on_source = Vec::new();
    let mut on_target = Vec::new();
    // Mirrored topics: those of the source's visible topics the flow would mirror; when none is
    // visible, the names and prefixes its `topics` patterns spell.
    let planner = TopicPlanner::new(flow);
    let visible = source.map(|s| s.conn.topics.clone()).unwrap_or_default();
    let plan = planner.plan(&mut policy, &visible)?;
    let mut pairs: Vec<(Resource, Resource)> = plan
        .routes
        .iter()
        .map(|r| {
            (
                Resource::Topic(r.source_topic.clone()),
                Resource::Topic(r.remote_topic.clone()),
            )
        })
        .collect();
    if pairs.is_empty() {
        for pattern in flow.topics.include.patterns() {
            let (source_name, prefixed) = if is_literal(pattern) {
                (pattern.clone(), false)
            } else if let Some(prefix) = literal_prefix(pattern).filter(|p| !p.is_empty()) {
                (prefix, true)
            } else {
                continue;
            };
            let remote = policy
                .format_remote_topics(&flow.source, std::slice::from_ref(&source_name))?
                .into_iter()
                .next()
                .unwrap_or_default();
            let wrap = |n: String| {
                if prefixed {
                    Resource::TopicPrefix(n)
                } else {
                    Resource::Topic(n)
                }
            };
            pairs.push((wrap(source_name), wrap(remote)));
        }
    }
    if pairs.is_empty() {
        on_source.push(need(
            Resource::TopicsMatching(flow.topics.include.patterns().join("|")),
            &[RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            false,
            "mirrored topics",
        ));
    }
    for (src, remote) in pairs {
        on_source.push(need(
            src.clone(),
            &[RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            true,
            "mirrored topic",
        ));
        if flow.config_sync.enabled {
            on_source.push(need(
                src,
                &[RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS],
                false,
                false,
                "config sync",
            ));
        }
        on_target.push(need(
            remote.clone(),
            &[
                RD_KAFKA_ACL_OPERATION_CREATE,
                RD_KAFKA_ACL_OPERATION_WRITE,
                RD_KAFKA_ACL_OPERATION_DESCRIBE,
            ],
            true,
            true,
            "remote topic",
        ));
        if flow.config_sync.enabled {
            on_target.push(need(
                remote,
                &[
                    RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS,
                    RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS,
                ],
                false,
                false,
                "config sync",
            ));
        }
    }
    let group = crate::progress_group(flow);
    on_source.push(need(
        Resource::Group(group.clone()),
        &[RD_KAFKA_ACL_OPERATION_READ],
        false,
        true,
        "progress commits",
    ));
    on_target.push(need(
        Resource::Group(group),
        &[RD_KAFKA_ACL_OPERATION_READ],
        false,
        true,
        "target positions read on restart",
    ));
    if flow.offset_syncs.enabled {
        let (topic, list, fatal_why) = match flow.offset_syncs.location {
            OffsetSyncsLocation::Source => (
                policy.offset_syncs_topic(&flow.target)?,
                &mut on_source,
                "offset syncs",
            ),
            OffsetSyncsLocation::Target => (
                policy.offset_syncs_topic(&flow.source)?,
                &mut on_target,
                "offset syncs",
            ),
        };
        let mut ops = vec![RD_KAFKA_ACL_OPERATION_CREATE, RD_KAFKA_ACL_OPERATION_WRITE];
        if flow.checkpoints.enabled {
            ops.push(RD_KAFKA_ACL_OPERATION_READ);
        }
        list.push(need(Resource::Topic(topic), &ops, true, false, fatal_why));
    }
    if flow.checkpoints.enabled {
        on_source.push(need(
            Resource::Groups(flow.checkpoints.groups.include.patterns().join("|")),
            &[RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            false,
            "checkpoints of source consumer groups",
        ));
        on_target.push(need(
            Resource::Topic(policy.checkpoints_topic(&flow.source)?),
            &[
                RD_KAFKA_ACL_OPERATION_CREATE,
                RD_KAFKA_ACL_OPERATION_WRITE,
                RD_KAFKA_ACL_OPERATION_READ,
            ],
            true,
            false,
            "checkpoints",
        ));
    }
    if flow.heartbeats.enabled {
        let heartbeats = policy.heartbeats_topic()?;
        on_target.push(need(
            Resource::Topic(heartbeats.clone()),
            &[RD_KAFKA_ACL_OPERATION_CREATE, RD_KAFKA_ACL_OPERATION_WRITE],
            true,
            false,
            "heartbeats",
        ));
        if !has_reverse {
            on_source.push(need(
                Resource::Topic(heartbeats),
                &[RD_KAFKA_ACL_OPERATION_CREATE, RD_KAFKA_ACL_OPERATION_WRITE],
                true,
                false,
                "heartbeats of the reverse pair (no flow runs the other way)",
            ));
        }
    }
    if flow
        .processors
        .iter()
        .any(|p| p.on_error == OnError::DeadLetter)
    {
        on_target.push(need(
            Resource::Topic(flow.delivery.dead_letter_topic.clone()),
            &[RD_KAFKA_ACL_OPERATION_CREATE, RD_KAFKA_ACL_OPERATION_WRITE],
            true,
            true,
            "dead-letter topic",
        ));
    }
    if flow.checkpoints.sync_group_offsets {
        on_target.push(need(
            Resource::Groups(flow.checkpoints.groups.include.patterns().join("|")),
            &[RD_KAFKA_ACL_OPERATION_READ],
            false,
            false,
            "group offset sync",
        ));
    }
    if flow.acl_sync.enabled {
        on_source.push(need(
            Resource::Cluster,
            &[RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            false,
            "ACL sync (DescribeAcls)",
        ));
        on_target.push(need(
            Resource::Cluster,
            &[RD_KAFKA_ACL_OPERATION_ALTER],
            false,
            false,
            "ACL sync (CreateAcls)",
        ));
    }
    if !clustered {
        // One process per flow: it joins a group so that a second process waits for it.
        on_source.push(need(
            Resource::Group(crate::membership::solo_group(flow)),
            &[RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            false,
            "one process per flow: a second process waits for the first",
        ));
    }
    if clustered {
        // Cluster mode: the processes divide the flow's tasks in a group on the source, over a
        // topic with a partition per task.
        on_source.push(need(
            Resource::Topic(crate::membership::coordination_topic(flow)),
            &[
                RD_KAFKA_ACL_OPERATION_CREATE,
                RD_KAFKA_ACL_OPERATION_READ,
                RD_KAFKA_ACL_OPERATION_DESCRIBE,
            ],
            true,
            true,
            "cluster mode: tasks topic",
        ));
        on_source.push(need(
            Resource::Group(crate::membership::coordination_group(flow)),
            &[RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_OPERATION_DESCRIBE],
            false,
            true,
            "cluster mode: the processes' group",
        ));
    }
    if flow.delivery.mode == DeliveryMode::ExactlyOnce {
        on_target.push(need(
            Resource::Topic(flow.mm2_offsets_topic.clone()),
            &[
                RD_KAFKA_ACL_OPERATION_CREATE,
                RD_KAFKA_ACL_OPERATION_READ,
                RD_KAFKA_ACL_OPERATION_WRITE,
            ],
            true,
            true,
            "source positions (exactly-once)",
        ));
    }
    Ok((on_source, on_target))
}
