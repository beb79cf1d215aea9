use std::time::Duration;
use rdkafka::admin::*;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, CommitMode};
use rdkafka::{Offset, TopicPartitionList};

fn main() {
    let bs = std::env::args().nth(1).unwrap();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", &bs).create().unwrap();
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(5)));
    let t = NewTopic::new("probe2", 2, TopicReplication::Fixed(3)).set("retention.ms", "12345").set("cleanup.policy", "compact");
    println!("create rf3: {:?}", futures_executor::block_on(admin.create_topics([&t], &opts)));
    let d = futures_executor::block_on(admin.describe_configs([&ResourceSpecifier::Topic("probe2")], &opts));
    match d { Ok(v) => for r in v { match r { Ok(r) => for e in r.entries { println!("  {} = {:?} default={} source={:?} ro={} sens={}", e.name, e.value, e.is_default, e.source, e.is_read_only, e.is_sensitive); }, Err(e) => println!("describe err {e:?}") } }, Err(e) => println!("describe failed {e}") }
    let a = AlterConfig::new(ResourceSpecifier::Topic("probe2")).set("retention.ms", "999");
    println!("alter: {:?}", futures_executor::block_on(admin.alter_configs([&a], &opts)));
    let d = futures_executor::block_on(admin.describe_configs([&ResourceSpecifier::Topic("probe2")], &opts));
    if let Ok(v) = d { for r in v { if let Ok(r) = r { for e in r.entries { println!("  after: {} = {:?}", e.name, e.value); } } } }
    // group
    let member: BaseConsumer = ClientConfig::new().set("bootstrap.servers", &bs).set("group.id", "g1").create().unwrap();
    member.subscribe(&["probe2"]).unwrap();
    for _ in 0..50 { member.poll(Duration::from_millis(100)); if !member.assignment().unwrap().elements().is_empty() { break; } }
    println!("member assignment {:?}", member.assignment().unwrap().elements().len());
    let other: BaseConsumer = ClientConfig::new().set("bootstrap.servers", &bs).set("group.id", "g1").create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("probe2", 0, Offset::Offset(5)).unwrap();
    println!("commit to active group from outsider: {:?}", other.commit(&tpl, CommitMode::Sync));
    let idle: BaseConsumer = ClientConfig::new().set("bootstrap.servers", &bs).set("group.id", "g2").create().unwrap();
    println!("commit to unknown group: {:?}", idle.commit(&tpl, CommitMode::Sync));
    println!("committed g2 {:?}", idle.committed_offsets(tpl.clone(), Duration::from_secs(5)).map(|t| t.elements().iter().map(|e| e.offset()).collect::<Vec<_>>()));
    println!("listing: {:?}", refract_mirror::groups::list_consumer_groups(&admin, Duration::from_secs(5)));
    for g in ["g1", "g2"] { match member.fetch_group_list(Some(g), Duration::from_secs(5)) { Ok(l) => for g in l.groups() { println!("one group {} state {} members {}", g.name(), g.state(), g.members().len()); }, Err(e) => println!("one group err {e}") } }
    match member.fetch_group_list(None, Duration::from_secs(5)) {
        Ok(l) => for g in l.groups() { println!("group {} state {} proto {} members {}", g.name(), g.state(), g.protocol_type(), g.members().len()); },
        Err(e) => println!("group list err {e}"),
    }
}
