//! What only a real Apache Kafka broker can show: partitions added to a source topic mid-flow,
//! topic-config changes re-synced with IncrementalAlterConfigs, ACLs copied under Kafka's
//! StandardAuthorizer, offset syncs kept on the target, `auto.offset.reset = "latest"`, and a
//! flow reset with Kafka's own consumer-group tool.

use std::collections::BTreeSet;

use crate::support::*;
use refract_mm2::{Checkpoint, OffsetSync};

fn flow(topics: &[&str], extra: &str) -> String {
    let list: Vec<String> = topics.iter().map(|t| format!("\"{t}\"")).collect();
    format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [{}]\n{FAST}{extra}\n",
        list.join(", ")
    )
}

const GROUP_TOOL: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
const CONFIG_TOOL: &str = "kafka.admin.ConfigCommand";
const ACL_TOOL: &str = "org.apache.kafka.tools.AclCommand";

/// Partitions added to a source topic while the flow runs are added to the remote topic and
/// mirrored from offset 0; no record of the old or new partitions is lost.
#[test]
fn partitions_added_mid_flow_are_mirrored_from_offset_zero() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("grow");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 2);
    a.produce(&topic, &sample_records("before", 2, 40));
    let refract = Refract::start(
        &pipeline(&[("a", &a), ("b", &b)], &flow(&[&topic], "")),
        &[],
    );
    refract.wait("the first 40 records", || {
        b.counts(&remote).iter().sum::<i64>() == 40
    });
    a.add_partitions(&topic, 5);
    let after = sample_records("after", 5, 100);
    a.produce(&topic, &after);
    refract.wait(
        "the remote topic grown to 5 partitions and all 140 records",
        || b.topics().get(&remote) == Some(&5) && b.counts(&remote).iter().sum::<i64>() == 140,
    );
    let got = b.read_all(&remote);
    let want = a.read_all(&topic);
    assert_eq!(
        got.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![40, 40, 20, 20, 20],
        "20 + 20 on the old partitions, 20 on each new one"
    );
    assert_eq!(got, want, "every partition byte for byte, in order");
    // The new partitions start at offset 0 on both sides: the offset syncs say so.
    refract.wait("offset syncs for a new partition", || {
        a.read_raw("mm2-offset-syncs.b.internal")
            .iter()
            .filter_map(|(k, v)| OffsetSync::decode(k, v).ok())
            .any(|s| {
                s.topic == topic
                    && s.partition == 4
                    && s.upstream_offset == 0
                    && s.downstream_offset == 0
            })
    });
}

/// A config changed on the source reaches the remote topic within the sync interval, a config
/// the source no longer sets goes back to the target's default, and the target's own value of an
/// excluded config stays.
#[test]
fn topic_config_changes_reach_the_remote_topic() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("configs");
    let remote = format!("a.{topic}");
    a.create_topic_with(
        &topic,
        1,
        // Retention far longer than the age of the test records (2020 timestamps).
        &[("retention.ms", "9000000000000"), ("segment.ms", "7200000")],
    );
    a.produce(&topic, &sample_records(&topic, 1, 3));
    let refract = Refract::start(
        &pipeline(
            &[("a", &a), ("b", &b)],
            &flow(&[&topic], "sync_topic_configs_interval = \"1s\""),
        ),
        &[],
    );
    refract.wait("the remote topic with the source's configs", || {
        b.counts(&remote).iter().sum::<i64>() == 3
            && b.topic_overrides(&remote)
                .get("retention.ms")
                .map(String::as_str)
                == Some("9000000000000")
    });
    // The target's operator sets an excluded config of their own.
    b.tool(
        CONFIG_TOOL,
        &[
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &remote,
            "--add-config",
            "unclean.leader.election.enable=true",
        ],
    );
    // The source's operator changes one config, adds one and removes one.
    a.tool(
        CONFIG_TOOL,
        &[
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &topic,
            "--add-config",
            "retention.ms=9100000000000,max.message.bytes=2000000",
            "--delete-config",
            "segment.ms",
        ],
    );
    let want: std::collections::BTreeMap<String, String> = [
        ("max.message.bytes", "2000000"),
        ("retention.ms", "9100000000000"),
        ("unclean.leader.election.enable", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut got = Default::default();
    refract.wait("the remote topic's configs re-synced", || {
        got = b.topic_overrides(&remote);
        got == want
    });
    assert!(refract
        .log()
        .contains(&format!("synced the configs of {remote}")));
}

/// The ACLs a flow creates on the target, read back from Kafka's StandardAuthorizer, are MM2's
/// rules applied to the source's: ALLOW WRITE dropped, ALLOW ALL narrowed to READ, DENY kept,
/// prefixed and group ACLs not copied.
#[test]
fn topic_acls_are_copied_with_mm2_rules() {
    // Every client here connects as ANONYMOUS, made a super user so that it may do anything;
    // the ACLs under test name other principals.
    let secured = [
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("super.users", "User:ANONYMOUS"),
    ];
    let a = Broker::start_with("a", &secured);
    let b = Broker::start_with("b", &secured);
    let topic = unique("guarded");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 1);
    a.produce(&topic, &sample_records(&topic, 1, 3));
    for (kind, principal, op) in [
        ("--allow-principal", "User:writer", "Write"),
        ("--allow-principal", "User:admin", "All"),
        ("--allow-principal", "User:reader", "Read"),
        ("--allow-principal", "User:auditor", "Describe"),
        ("--deny-principal", "User:mallory", "Read"),
        ("--deny-principal", "User:mallory", "Write"),
    ] {
        a.tool(
            ACL_TOOL,
            &[
                "--add",
                kind,
                principal,
                "--operation",
                op,
                "--topic",
                &topic,
            ],
        );
    }
    // Not copied: a prefixed pattern and a group ACL.
    a.tool(
        ACL_TOOL,
        &[
            "--add",
            "--allow-principal",
            "User:prefixed",
            "--operation",
            "Read",
            "--topic",
            &topic,
            "--resource-pattern-type",
            "prefixed",
        ],
    );
    a.tool(
        ACL_TOOL,
        &[
            "--add",
            "--allow-principal",
            "User:reader",
            "--operation",
            "Read",
            "--group",
            &unique("g"),
        ],
    );
    let refract = Refract::start(
        &pipeline(
            &[("a", &a), ("b", &b)],
            &flow(&[&topic], "sync_topic_acls_interval = \"1s\""),
        ),
        &[],
    );
    let want: BTreeSet<(String, String, String)> = [
        ("User:admin", "READ", "ALLOW"),
        ("User:reader", "READ", "ALLOW"),
        ("User:auditor", "DESCRIBE", "ALLOW"),
        ("User:mallory", "READ", "DENY"),
        ("User:mallory", "WRITE", "DENY"),
    ]
    .into_iter()
    .map(|(p, o, t)| (p.to_string(), o.to_string(), t.to_string()))
    .collect();
    let mut got = BTreeSet::new();
    refract.wait("the remote topic's ACLs", || {
        got = topic_acls(&b, &remote);
        got == want
    });
    // Nothing reached other principals or resources on the target.
    let all = b.tool(ACL_TOOL, &["--list"]);
    assert!(!all.contains("User:writer"), "{all}");
    assert!(!all.contains("User:prefixed"), "{all}");
    assert!(!all.contains("resourceType=GROUP"), "{all}");
}

/// (principal, operation, permission) of each ACL on `topic`, as `kafka-acls --list` prints them.
fn topic_acls(broker: &Broker, topic: &str) -> BTreeSet<(String, String, String)> {
    let text = broker.tool(ACL_TOOL, &["--list", "--topic", topic]);
    text.lines()
        .filter(|l| l.contains("principal="))
        .filter_map(|l| {
            let field = |name: &str| {
                let start = l.find(&format!("{name}="))? + name.len() + 1;
                let rest = &l[start..];
                let end = rest.find([',', ')']).unwrap_or(rest.len());
                Some(rest[..end].trim().to_string())
            };
            Some((
                field("principal")?,
                field("operation")?,
                field("permissionType")?,
            ))
        })
        .collect()
}

/// `offset_syncs_location = "target"`: the syncs live in `mm2-offset-syncs.a.internal` on the
/// target, none on the source, and checkpoints translate from them.
#[test]
fn offset_syncs_on_the_target() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("located");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 1);
    a.produce(&topic, &sample_records(&topic, 1, 50));
    let group = unique("reader");
    a.commit_group(&group, &topic, &[(0, 50)]);
    let refract = Refract::start(
        &pipeline(
            &[("a", &a), ("b", &b)],
            &flow(&[&topic], "offset_syncs_location = \"target\""),
        ),
        &[],
    );
    refract.wait("a checkpoint at the end of the partition", || {
        b.topics().contains_key("a.checkpoints.internal")
            && b.read_raw("a.checkpoints.internal")
                .iter()
                .filter_map(|(k, v)| Checkpoint::decode(k, v).ok())
                .any(|c| c.group == group && c.topic == remote && c.downstream_offset == 50)
    });
    let syncs: Vec<OffsetSync> = b
        .read_raw("mm2-offset-syncs.a.internal")
        .iter()
        .map(|(k, v)| OffsetSync::decode(k, v).expect("offset sync"))
        .collect();
    assert!(
        syncs
            .iter()
            .any(|s| s.topic == topic && s.upstream_offset == 0),
        "{syncs:?}"
    );
    assert!(
        !a.topics().keys().any(|t| t.starts_with("mm2-offset-syncs")),
        "no offset-syncs topic on the source: {:?}",
        a.topics()
    );
}

/// `auto.offset.reset = "latest"` on the source consumer: records already there when the flow
/// starts are not mirrored; what the target gets is exactly the source's records from the first
/// one it got on, in order.
#[test]
fn auto_offset_reset_latest_skips_what_is_already_there() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("latest");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 1);
    a.produce(&topic, &sample_records("old", 1, 20));
    let flows = format!(
        "{}[clusters.a.consumer]\n\"auto.offset.reset\" = \"latest\"\n",
        flow(&[&topic], "")
    );
    let refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], &flows), &[]);
    refract.wait("the remote topic", || b.topics().contains_key(&remote));
    // Keep producing until records arrive: the flow's start position is set by then.
    let mut round = 0;
    refract.wait("new records on the target", || {
        round += 1;
        a.produce(&topic, &sample_records(&format!("new{round}"), 1, 5));
        b.counts(&remote).iter().sum::<i64>() > 0
    });
    a.produce(&topic, &sample_records("last", 1, 5));
    let source = a.read_all(&topic).remove(0);
    let mut got = Vec::new();
    refract.wait("the last record on the target", || {
        got = b.read_all(&remote).remove(0);
        got.last() == source.last()
    });
    assert!(
        got.iter()
            .all(|r| !r.key.as_deref().unwrap_or_default().starts_with(b"old")),
        "no record from before the start"
    );
    assert_eq!(
        got[..],
        source[source.len() - got.len()..],
        "a contiguous run of the source's newest records"
    );
}

/// The flow's progress group reset with Kafka's `kafka-consumer-groups` tool: moved back, the
/// flow mirrors again from there; deleted, it starts from the beginning and counts what is
/// already on the target as duplicates.
#[test]
fn flow_reset_with_the_kafka_group_tool() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("reset");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 1);
    let records = sample_records(&topic, 1, 50);
    a.produce(&topic, &records);
    let mut refract = Refract::start(
        &pipeline(&[("a", &a), ("b", &b)], &flow(&[&topic], "")),
        &[],
    );
    refract.wait("50 records", || b.counts(&remote).iter().sum::<i64>() == 50);
    assert_eq!(refract.stop(), Some(0));
    assert_eq!(a.group_offsets("refract-a-b", &topic, 1), vec![Some(50)]);

    a.tool(
        GROUP_TOOL,
        &[
            "--reset-offsets",
            "--group",
            "refract-a-b",
            "--topic",
            &format!("{topic}:0"),
            "--to-offset",
            "30",
            "--execute",
        ],
    );
    refract.restart(&[]);
    refract.wait("records 30..50 mirrored again", || {
        b.counts(&remote).iter().sum::<i64>() == 70
    });
    refract.wait("the commit at the end", || {
        a.group_offsets("refract-a-b", &topic, 1) == vec![Some(50)]
    });
    assert_eq!(refract.stop(), Some(0));
    let got = b.read_all(&remote).remove(0);
    assert_eq!(got[..50], records[..]);
    assert_eq!(got[50..], records[30..]);

    a.tool(GROUP_TOOL, &["--delete", "--group", "refract-a-b"]);
    refract.restart(&[]);
    refract.wait("everything mirrored again from the beginning", || {
        b.counts(&remote).iter().sum::<i64>() == 120
    });
    // What the target held counts as duplicates: the 70 records and the heartbeats mirrored
    // into a.heartbeats (the flow's progress on that topic went with the group too).
    let mut counted = 0;
    refract.wait("the duplicates counted", || {
        counted = refract
            .log()
            .lines()
            .filter_map(|l| l.split("resuming after an unclean stop: ").nth(1))
            .filter_map(|rest| rest.split_whitespace().next()?.parse::<i64>().ok())
            .next_back()
            .unwrap_or(0);
        counted > 0
    });
    let heartbeats = b.counts("a.heartbeats").iter().sum::<i64>();
    assert!(
        (70..=70 + heartbeats).contains(&counted),
        "{counted} duplicates counted: 70 records and at most {heartbeats} heartbeats"
    );
    assert_eq!(b.read_all(&remote).remove(0)[70..], records[..]);
}
