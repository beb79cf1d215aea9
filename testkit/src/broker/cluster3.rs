//! Three-node Apache Kafka clusters: three KRaft nodes in combined mode (broker and controller,
//! node ids 1–3, one quorum, one formatted cluster id), replication factor 3 and
//! `min.insync.replicas` 2 for every topic, the offsets and transaction state topics included,
//! so a test can kill a partition leader or a coordinator and restart it, or roll the cluster,
//! while clients go on. Each node is a [`Broker`] of the launcher in `broker.rs` (its folder,
//! ports, JVM, kill and restart); this file lays out the quorum and answers where leaders and
//! coordinators are.

use std::time::Duration;

use anyhow::bail;
use rdkafka::consumer::Consumer;

use super::{Broker, BrokerOptions, Node};
use crate::ports::{cluster_id, free_port};
use crate::wait::wait_or_explain;

/// What a node of a three-node cluster adds to the single-node settings: every topic, the
/// internal ones included, on all three nodes and written to at least two.
const CLUSTER3_SETTINGS: &[(&str, &str)] = &[
    ("default.replication.factor", "3"),
    ("min.insync.replicas", "2"),
    ("offsets.topic.replication.factor", "3"),
    ("offsets.topic.num.partitions", "3"),
    ("transaction.state.log.replication.factor", "3"),
    ("transaction.state.log.min.isr", "2"),
    ("transaction.state.log.num.partitions", "3"),
    ("share.coordinator.state.topic.replication.factor", "3"),
    ("share.coordinator.state.topic.min.isr", "2"),
];

/// A three-node KRaft cluster. Its nodes are [`Broker`]s (ids 1–3) whose
/// [`bootstrap`](Broker::bootstrap) names all three, so [`Cluster3::client`]'s helpers (topics,
/// records, reads) and [`crate::Producing`] reach the cluster while any one node is down.
pub struct Cluster3 {
    /// The cluster's name in test output.
    pub name: String,
    /// `host:port` of every node's PLAINTEXT listener, for clients and pipelines.
    pub bootstrap: String,
    nodes: Vec<Broker>,
}

impl Cluster3 {
    /// Starts a three-node cluster for this test with the test settings
    /// ([`BrokerOptions::default`]) and waits until every partition has its three replicas in
    /// sync; panics if it cannot.
    pub fn start(name: &str) -> Self {
        Self::launch(name, &BrokerOptions::default()).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Formats three nodes with one cluster id and quorum, starts them, and waits until each
    /// serves metadata and every partition is fully in sync. When another process takes a port
    /// first, it starts over with new ports (up to 4 attempts).
    pub fn launch(name: &str, options: &BrokerOptions) -> anyhow::Result<Self> {
        let mut last = String::new();
        for attempt in 0..4 {
            let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
            let voters = ports
                .iter()
                .enumerate()
                .map(|(i, (_, controller))| format!("{}@127.0.0.1:{controller}", i + 1))
                .collect::<Vec<_>>()
                .join(",");
            let id = cluster_id();
            let mut nodes = Vec::with_capacity(3);
            for (i, &(port, controller_port)) in ports.iter().enumerate() {
                // This node first: a client starts with the node the test named.
                let others = ports.iter().map(|(p, _)| *p).filter(|p| *p != port);
                let bootstrap = std::iter::once(port)
                    .chain(others)
                    .map(|p| format!("127.0.0.1:{p}"))
                    .collect::<Vec<_>>()
                    .join(",");
                let node = Node {
                    id: i as i32 + 1,
                    port,
                    controller_port,
                    voters: voters.clone(),
                    cluster_id: id.clone(),
                    bootstrap: Some(bootstrap),
                    props: CLUSTER3_SETTINGS
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                };
                nodes.push(Broker::prepare(
                    &format!("{name}-node{}", i + 1),
                    options,
                    &node,
                    attempt,
                )?);
            }
            // A node serves only once the quorum has a leader: start all three, then wait.
            let started = nodes
                .iter()
                .try_for_each(Broker::spawn)
                .and_then(|()| nodes.iter().try_for_each(Broker::wait_serving));
            match started {
                Ok(()) => {
                    let cluster = Self {
                        name: name.to_string(),
                        bootstrap: nodes[0].bootstrap.clone(),
                        nodes,
                    };
                    cluster.wait_in_sync();
                    return Ok(cluster);
                }
                // Another process took a port first: the nodes are dropped (killed), new ports.
                Err(log) if log.contains("Address already in use") => last = log,
                Err(log) => bail!("Kafka cluster {name} failed to start:\n{log}"),
            }
        }
        bail!("Kafka cluster {name} found no free ports:\n{last}")
    }

    /// Node 1, whose client helpers (topics, produce, reads, counts, Kafka's tools) reach the
    /// whole cluster through every node's listener. Its own process is node 1's only.
    pub fn client(&self) -> &Broker {
        &self.nodes[0]
    }

    /// The node with `node.id` `id` (1–3).
    pub fn node(&self, id: i32) -> &Broker {
        self.nodes
            .iter()
            .find(|n| n.node_id == id)
            .unwrap_or_else(|| panic!("{} has no node {id}", self.name))
    }

    /// The three nodes.
    pub fn nodes(&self) -> &[Broker] {
        &self.nodes
    }

    /// The node leading `topic`'s partition `partition` now, as the cluster's metadata says
    /// (waits while it has none).
    pub fn leader(&self, topic: &str, partition: i32) -> i32 {
        let consumer = self.client().consumer();
        let mut leader = -1;
        wait_or_explain(
            &format!("{topic}[{partition}] on {} to have a leader", self.name),
            || {
                leader = consumer
                    .fetch_metadata(Some(topic), Duration::from_secs(5))
                    .ok()
                    .and_then(|md| {
                        let t = md.topics().first()?;
                        let p = t.partitions().iter().find(|p| p.id() == partition)?;
                        (p.error().is_none() && p.leader() >= 0).then_some(p.leader())
                    })
                    .unwrap_or(-1);
                leader >= 0
            },
            || self.log_tails(20),
        );
        leader
    }

    /// The node that coordinates transactional id `id` (the leader of its
    /// `__transaction_state` partition), as `kafka-transactions describe` reports it.
    pub fn transaction_coordinator(&self, id: &str) -> i32 {
        let out = self.client().tool(
            "org.apache.kafka.tools.TransactionsCommand",
            &["describe", "--transactional-id", id],
        );
        // A header line (CoordinatorId TransactionalId …), then one line per id.
        out.lines()
            .skip_while(|l| !l.starts_with("CoordinatorId"))
            .nth(1)
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no coordinator of {id} on {} in:\n{out}", self.name))
    }

    /// The node that coordinates consumer group `group`, as `kafka-consumer-groups --describe
    /// --state` reports it (its `COORDINATOR (ID)` column, `host:port (id)`).
    pub fn group_coordinator(&self, group: &str) -> i32 {
        let out = self.client().tool(
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            &["--describe", "--group", group, "--state"],
        );
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(group))
            .and_then(|l| {
                let id = l.split_once(" (")?.1.split_once(')')?.0;
                id.trim().parse().ok()
            })
            .unwrap_or_else(|| panic!("no coordinator of {group} on {} in:\n{out}", self.name))
    }

    /// Waits until all three nodes are registered and every partition of every topic (the
    /// internal ones included) has a leader and all its replicas in sync: the cluster can lose
    /// any one node again.
    pub fn wait_in_sync(&self) {
        let consumer = self.client().consumer();
        let lagging = std::cell::RefCell::new(Vec::<String>::new());
        wait_or_explain(
            &format!(
                "every partition of {} to have its replicas in sync",
                self.name
            ),
            || {
                let Ok(md) = consumer.fetch_metadata(None, Duration::from_secs(5)) else {
                    *lagging.borrow_mut() = vec!["no metadata".into()];
                    return false;
                };
                let mut behind = Vec::new();
                if md.brokers().len() < 3 {
                    behind.push(format!("{} nodes registered", md.brokers().len()));
                }
                for t in md.topics() {
                    for p in t.partitions() {
                        if p.leader() < 0 || p.isr().len() < p.replicas().len() {
                            behind.push(format!(
                                "{}[{}] leader {} isr {:?} replicas {:?}",
                                t.name(),
                                p.id(),
                                p.leader(),
                                p.isr(),
                                p.replicas()
                            ));
                        }
                    }
                }
                let done = behind.is_empty();
                *lagging.borrow_mut() = behind;
                done
            },
            || format!("{:?}\n{}", lagging.borrow(), self.log_tails(20)),
        );
    }

    /// Kills node `id` (SIGKILL, like a crashed machine); its data and ports stay for
    /// [`Cluster3::restart`].
    pub fn kill(&self, id: i32) {
        self.node(id).kill();
    }

    /// Stops node `id` cleanly (SIGTERM: a controlled shutdown moves its leaders first), killing
    /// it if it still runs after `grace`. Whether it exited by itself.
    pub fn stop(&self, id: i32, grace: Duration) -> bool {
        self.node(id).stop(grace)
    }

    /// Starts node `id` again on its data and ports and waits until it serves metadata (not
    /// until its replicas caught up: [`Cluster3::wait_in_sync`]).
    pub fn restart(&self, id: i32) {
        self.node(id).resume();
    }

    /// The last `lines` lines of each node's log.
    pub fn log_tails(&self, lines: usize) -> String {
        self.nodes
            .iter()
            .map(|n| format!("--- {}:\n{}", n.name, n.log_tail(lines)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}
