//! Probing a connected cluster, read-only, for what a flow needs: DescribeTopics,
//! DescribeCluster and DescribeConsumerGroups with the principal's authorized operations
//! (KIP-430), CreateTopics with `validate_only`, ListGroups, and whether the cluster can run
//! transactions; each need answered yes, no, warn or unknown, with the fix when one is missing.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use rdkafka::admin::{AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::types::RDKafkaErrorCode;
use tracing::debug;

use refract_config::Cluster;
use refract_kafka::admin_ffi::{self, TopicAccess};
use refract_kafka::connect::{connect, ConnectError, Connection};
use refract_kafka::{AclOperation as Op, RawErrorCode as E};

use super::hints::{acl_command, op_names};
use super::needs::{Need, Resource};
use super::report::Mark;

/// How long one permission probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// A connected cluster: its clients, who it authenticated us as, and the topics it shows.
pub(super) struct Session {
    /// The connection: label, bootstrap, protocol, principal, admin client, visible topics.
    pub(super) conn: Connection,
    described: HashMap<String, TopicAccess>,
    /// Whether the broker has an authorizer (None: could not tell).
    pub(super) authorizer: Option<bool>,
    cluster_ops: Option<Option<Vec<Op>>>,
}

impl Session {
    pub(super) fn connect(cluster: &Cluster, timeout: Duration) -> Result<Self, ConnectError> {
        Ok(Self {
            conn: connect(cluster, timeout)?,
            described: HashMap::new(),
            authorizer: None,
            cluster_ops: None,
        })
    }

    /// The first line of the cluster's block.
    pub(super) fn header(&self) -> String {
        let tls = if self.conn.protocol.ends_with("SSL") {
            "TLS ok, "
        } else {
            ""
        };
        let auth = if self.conn.protocol.starts_with("SASL") {
            format!("authenticated as {}", self.conn.principal.name)
        } else if self.conn.principal.name == "User:ANONYMOUS" {
            format!("not authenticated: {}", self.conn.principal.name)
        } else {
            format!("authenticated as {}", self.conn.principal.name)
        };
        format!(
            "{}: reachable, {tls}{auth} ({})",
            self.conn.label, self.conn.principal.note
        )
    }

    /// Whether everything is allowed to this principal: every cluster operation (CLUSTER_ACTION
    /// and ALTER included: what only a broker or a super user has) and DESCRIBE on a topic name
    /// nobody grants anything on. That is a broker without an authorizer or a super user.
    /// (librdkafka 2.12 drops DescribeAcls' top-level error code, so its SECURITY_DISABLED
    /// cannot tell this.)
    pub(super) fn detect_authorizer(&mut self) {
        let cluster = self.cluster_operations();
        let all_cluster = cluster.as_ref().map(|ops| {
            ops.contains(&Op::RD_KAFKA_ACL_OPERATION_CLUSTER_ACTION)
                && ops.contains(&Op::RD_KAFKA_ACL_OPERATION_ALTER)
        });
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let probe = refract_config::names::check_probe_topic(nonce);
        let any_topic = admin_ffi::describe_topics(
            &self.conn.admin,
            std::slice::from_ref(&probe),
            PROBE_TIMEOUT,
        )
        .ok()
        .and_then(|t| t.into_iter().next())
        .map(|t| {
            !matches!(
                t.error,
                Some((E::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, _))
            )
        });
        self.authorizer = match (all_cluster, any_topic) {
            (Some(true), Some(true)) => Some(false),
            (Some(_), Some(_)) => Some(true),
            _ => None,
        };
    }

    pub(super) fn unrestricted(&self) -> bool {
        self.authorizer == Some(false)
    }

    /// DescribeTopics with authorized operations for `names`, cached.
    fn describe(&mut self, names: &[String]) -> Result<(), String> {
        let missing: Vec<String> = names
            .iter()
            .filter(|n| !self.described.contains_key(*n))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        for topic in admin_ffi::describe_topics(&self.conn.admin, &missing, PROBE_TIMEOUT)? {
            self.described.insert(topic.name.clone(), topic);
        }
        Ok(())
    }

    fn cluster_operations(&mut self) -> Option<Vec<Op>> {
        if self.cluster_ops.is_none() {
            self.cluster_ops = Some(
                admin_ffi::describe_cluster_operations(&self.conn.admin, PROBE_TIMEOUT)
                    .unwrap_or_else(|e| {
                        debug!("DescribeCluster: {e}");
                        None
                    }),
            );
        }
        self.cluster_ops.clone().flatten()
    }

    /// CreateTopics with validate_only: `Ok` when the broker would create it.
    fn validate_create(&self, name: &str, replication_factor: i32) -> Result<(), (E, String)> {
        let topic = NewTopic::new(name, 1, TopicReplication::Fixed(replication_factor));
        let options = AdminOptions::new()
            .validate_only(true)
            .request_timeout(Some(PROBE_TIMEOUT))
            .operation_timeout(Some(PROBE_TIMEOUT));
        let results = futures_executor::block_on(self.conn.admin.create_topics([&topic], &options))
            .map_err(|e| (E::RD_KAFKA_RESP_ERR__FAIL, e.to_string()))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, RDKafkaErrorCode::TopicAuthorizationFailed)) => {
                    return Err((
                        E::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                        "not authorized".into(),
                    ))
                }
                Err((_, RDKafkaErrorCode::ClusterAuthorizationFailed)) => {
                    return Err((
                        E::RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED,
                        "not authorized".into(),
                    ))
                }
                Err((_, code)) => return Err((E::RD_KAFKA_RESP_ERR__FAIL, code.to_string())),
            }
        }
        Ok(())
    }
}

/// DescribeConsumerGroups of one group, asked again while its coordinator is still loading or
/// moving (a cluster's first group operation creates `__consumer_offsets`; the broker then
/// answers COORDINATOR_LOAD_IN_PROGRESS for a moment), within [`PROBE_TIMEOUT`].
fn describe_group(
    session: &Session,
    group: &str,
) -> Result<Vec<(String, admin_ffi::GroupAccess)>, String> {
    let deadline = std::time::Instant::now() + PROBE_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let answer = admin_ffi::describe_groups(
            &session.conn.admin,
            &[group.to_string()],
            left.max(Duration::from_millis(500)),
        );
        let moving = matches!(&answer, Ok(groups) if groups.iter().any(|(_, g)| matches!(
            g.error,
            Some((
                E::RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS
                    | E::RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE
                    | E::RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
                _
            ))
        )));
        if !moving || left < Duration::from_millis(500) {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether `granted` allows `op`, with Kafka's implications (READ, WRITE, DELETE and ALTER imply
/// DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS).
fn allows(granted: &[Op], op: Op) -> bool {
    granted.contains(&op)
        || granted.contains(&Op::RD_KAFKA_ACL_OPERATION_ALL)
        || (op == Op::RD_KAFKA_ACL_OPERATION_DESCRIBE
            && granted.iter().any(|g| {
                matches!(
                    g,
                    Op::RD_KAFKA_ACL_OPERATION_READ
                        | Op::RD_KAFKA_ACL_OPERATION_WRITE
                        | Op::RD_KAFKA_ACL_OPERATION_DELETE
                        | Op::RD_KAFKA_ACL_OPERATION_ALTER
                )
            }))
        || (op == Op::RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS
            && granted.contains(&Op::RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS))
}

/// One printed answer.
pub(super) struct Answer {
    pub(super) mark: Mark,
    pub(super) text: String,
}

/// Evaluates `need` on `session`: (mark, the words after the mark).
pub(super) fn evaluate(session: &mut Session, need: &Need, replication_factor: i32) -> Answer {
    let words: Vec<&str> = need.ops.iter().map(|o| op_names(*o).1).collect();
    let what = match &need.resource {
        Resource::Topic(t) => format!("{} topic {t}", words.join(", ")),
        Resource::TopicPrefix(p) => format!("{} topics starting with {p}", words.join(", ")),
        Resource::Group(g) => format!("{} group {g}", words.join(", ")),
        Resource::Groups(f) => format!("{} consumer groups matching {f}", words.join(", ")),
        Resource::TopicsMatching(f) => format!("{} topics matching {f}", words.join(", ")),
        Resource::Cluster => format!("{} the cluster", words.join(", ")),
    };
    let context = format!("flow {}: {}", need.flow, need.why);
    let missing_mark = if need.fatal { Mark::No } else { Mark::Warn };
    let (bootstrap, principal_name) = (
        session.conn.bootstrap.clone(),
        session.conn.principal.name.clone(),
    );
    let fix = |missing: &[Op]| acl_command(&bootstrap, &principal_name, missing, &need.resource);
    if session.unrestricted() {
        return Answer {
            mark: Mark::Yes,
            text: format!("{what} ({context}; no authorizer)"),
        };
    }
    let (granted, note): (Result<Vec<Op>, String>, String) = match &need.resource {
        Resource::Topic(name) | Resource::TopicPrefix(name) => {
            if let Err(e) = session.describe(std::slice::from_ref(name)) {
                return Answer {
                    mark: Mark::Unknown,
                    text: format!("{what} ({context}; DescribeTopics failed: {e})"),
                };
            }
            let access = session.described.get(name).cloned();
            match access {
                Some(TopicAccess {
                    error: None,
                    operations,
                    ..
                }) => (
                    operations.ok_or_else(|| "the broker sent no authorized operations".into()),
                    String::new(),
                ),
                Some(TopicAccess {
                    error: Some((E::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, _)),
                    ..
                }) => {
                    // It does not exist and we may describe it: creating it is what remains.
                    let mut granted = vec![Op::RD_KAFKA_ACL_OPERATION_DESCRIBE];
                    let mut note = "does not exist yet".to_string();
                    if need.create {
                        match session.validate_create(name, replication_factor) {
                            Ok(()) => granted.push(Op::RD_KAFKA_ACL_OPERATION_CREATE),
                            Err((E::RD_KAFKA_RESP_ERR__FAIL, e)) => {
                                note = format!(
                                    "does not exist yet; the broker would not create it: {e}"
                                );
                            }
                            Err(_) => {}
                        }
                    }
                    // Other operations on a topic that does not exist cannot be probed.
                    let unknown: Vec<Op> = need
                        .ops
                        .iter()
                        .copied()
                        .filter(|o| {
                            !matches!(
                                o,
                                Op::RD_KAFKA_ACL_OPERATION_DESCRIBE
                                    | Op::RD_KAFKA_ACL_OPERATION_CREATE
                            )
                        })
                        .collect();
                    let denied: Vec<Op> = need
                        .ops
                        .iter()
                        .copied()
                        .filter(|o| !unknown.contains(o) && !allows(&granted, *o))
                        .collect();
                    if denied.is_empty() && !unknown.is_empty() {
                        let names: Vec<&str> = unknown.iter().map(|o| op_names(*o).1).collect();
                        return Answer {
                            mark: Mark::Unknown,
                            text: format!(
                                "{what} ({context}; {note}: may create and describe it; {} checked once it exists)",
                                names.join(", ")
                            ),
                        };
                    }
                    granted.extend(unknown);
                    (Ok(granted), note)
                }
                Some(TopicAccess {
                    error: Some((E::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, _)),
                    ..
                }) => {
                    // Not even DESCRIBE: whether it exists is hidden. Ask whether it could be created.
                    let mut note = "not visible to this principal".to_string();
                    let mut granted = Vec::new();
                    if need.create {
                        match session.validate_create(name, replication_factor) {
                            Ok(()) => granted.push(Op::RD_KAFKA_ACL_OPERATION_CREATE),
                            Err((E::RD_KAFKA_RESP_ERR__FAIL, e)) => {
                                note = format!("not visible; creating it fails: {e}")
                            }
                            Err(_) => {}
                        }
                    }
                    (Ok(granted), note)
                }
                Some(TopicAccess {
                    error: Some((_, e)),
                    ..
                }) => (Err(e), String::new()),
                None => (Err("not in the answer".into()), String::new()),
            }
        }
        Resource::Group(group) => {
            match describe_group(session, group) {
                Ok(groups) => match groups.into_iter().next() {
                    Some((_, g)) => match g.error {
                        None => (
                            g.operations
                                .ok_or_else(|| "the broker sent no authorized operations".into()),
                            String::new(),
                        ),
                        Some((E::RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED, _)) => {
                            (Ok(Vec::new()), String::new())
                        }
                        Some((E::RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND, _)) => {
                            // Found out only after DESCRIBE was allowed; READ cannot be probed.
                            (
                                Err("the group does not exist yet: describe allowed, read checked once it exists".into()),
                                String::new(),
                            )
                        }
                        Some((_, e)) => (Err(e), String::new()),
                    },
                    None => (Err("not in the answer".into()), String::new()),
                },
                Err(e) => (
                    Err(format!("DescribeConsumerGroups failed: {e}")),
                    String::new(),
                ),
            }
        }
        Resource::Groups(_) => {
            return match refract_kafka::groups::list_consumer_groups(
                &session.conn.admin,
                PROBE_TIMEOUT,
            ) {
                Ok(groups) => {
                    let visible = groups
                        .iter()
                        .filter(|g| {
                            need.groups
                                .as_ref()
                                .is_none_or(|f| f.should_replicate(&g.id))
                        })
                        .filter(|g| !refract_config::names::is_refract_group(&g.id))
                        .count();
                    if visible > 0 {
                        Answer {
                            mark: Mark::Yes,
                            text: format!("{what} ({context}; {visible} visible)"),
                        }
                    } else {
                        Answer {
                            mark: missing_mark,
                            text: format!(
                                "{what} ({context}; none visible: none exist yet, or no Describe on them) — {}",
                                fix(&need.ops)
                            ),
                        }
                    }
                }
                Err(e) => Answer {
                    mark: missing_mark,
                    text: format!(
                        "{what} ({context}; listing groups failed: {e:#}) — {}",
                        fix(&need.ops)
                    ),
                },
            };
        }
        Resource::TopicsMatching(_) => {
            return Answer {
                mark: missing_mark,
                text: format!(
                    "{what} ({context}; none visible: none exist yet, or no Describe on them) — {}",
                    fix(&need.ops)
                ),
            }
        }
        Resource::Cluster => (
            session
                .cluster_operations()
                .ok_or_else(|| "the broker sent no authorized operations".to_string()),
            String::new(),
        ),
    };
    let granted = match granted {
        Ok(g) => g,
        Err(e) => {
            return Answer {
                mark: Mark::Unknown,
                text: format!("{what} ({context}; {e})"),
            }
        }
    };
    let missing: Vec<Op> = need
        .ops
        .iter()
        .copied()
        .filter(|o| !allows(&granted, *o))
        .collect();
    let note = if note.is_empty() {
        String::new()
    } else {
        format!("; {note}")
    };
    if missing.is_empty() {
        Answer {
            mark: Mark::Yes,
            text: format!("{what} ({context}{note})"),
        }
    } else {
        let names: Vec<&str> = missing.iter().map(|o| op_names(*o).1).collect();
        Answer {
            mark: missing_mark,
            text: format!(
                "{what} ({context}{note}; missing: {}) — {}",
                names.join(", "),
                fix(&missing)
            ),
        }
    }
}

/// Whether `session`'s cluster can run transactions, for the exactly-once flows into it: it
/// can when `__transaction_state` exists (transactions ran before), or when its brokers are at
/// least `transaction.state.log.replication.factor` (else the coordinator never starts).
pub(super) fn transactions(session: &Session, timeout: Duration) -> Result<String, String> {
    let metadata = session
        .conn
        .admin
        .inner()
        .fetch_metadata(None, timeout)
        .map_err(|e| format!("reading its metadata: {e}"))?;
    if metadata
        .topics()
        .iter()
        .any(|t| t.name() == "__transaction_state")
    {
        return Ok("transactions available (__transaction_state exists)".into());
    }
    let brokers = metadata.brokers().len();
    let Some(broker) = metadata.brokers().first() else {
        return Err("it lists no brokers".into());
    };
    let options = AdminOptions::new().request_timeout(Some(timeout));
    let id = broker.id();
    let results = futures_executor::block_on(
        session
            .conn
            .admin
            .describe_configs([&ResourceSpecifier::Broker(id)], &options),
    )
    .map_err(|e| format!("describing broker {id}'s configs: {e}"))?;
    let factor = results
        .into_iter()
        .filter_map(Result::ok)
        .flat_map(|r| r.entries)
        .find(|e| e.name == "transaction.state.log.replication.factor")
        .and_then(|e| e.value)
        .and_then(|v| v.parse::<usize>().ok());
    match factor {
        Some(rf) if rf > brokers => Err(format!(
            "transaction.state.log.replication.factor = {rf} but the cluster has {brokers} broker(s), so its transaction coordinator cannot start"
        )),
        Some(rf) => Ok(format!(
            "transactions available (transaction.state.log.replication.factor = {rf}, {brokers} broker(s))"
        )),
        None => Ok(format!(
            "transactions presumably available ({brokers} broker(s); transaction.state.log.replication.factor not readable)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implied_operations() {
        use Op::*;
        assert!(allows(
            &[RD_KAFKA_ACL_OPERATION_READ],
            RD_KAFKA_ACL_OPERATION_DESCRIBE
        ));
        assert!(allows(
            &[RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS],
            RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS
        ));
        assert!(!allows(
            &[RD_KAFKA_ACL_OPERATION_DESCRIBE],
            RD_KAFKA_ACL_OPERATION_READ
        ));
        assert!(!allows(
            &[RD_KAFKA_ACL_OPERATION_CREATE],
            RD_KAFKA_ACL_OPERATION_WRITE
        ));
    }
}
