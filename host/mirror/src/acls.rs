//! Topic ACL sync with MirrorMaker 2's rules: literal topic ACLs of mirrored topics are copied to
//! their remote topics, `ALLOW WRITE` is dropped (only the mirror writes remote topics) and
//! `ALLOW ALL` becomes `ALLOW READ`; additive only. The ACL requests themselves are
//! refract-kafka's ([`refract_kafka::acls`]).

use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::client::ClientContext;

pub(crate) use refract_kafka::acls::AclError;
use refract_kafka::acls::{create_topic_acls, describe_topic_acls, TopicAcl};
use refract_kafka::{AclOperation as Op, AclPermission as Perm};

/// MM2's rewrite of source topic ACLs into target ones: literal topic ACLs of topics the flow
/// mirrors, renamed, without `ALLOW WRITE`, with `ALLOW ALL` narrowed to `ALLOW READ`.
pub fn rewrite(
    source: &[TopicAcl],
    mut remote_name: impl FnMut(&str) -> Option<String>,
) -> Vec<TopicAcl> {
    let mut out: Vec<TopicAcl> = Vec::new();
    for acl in source {
        if !acl.literal {
            continue;
        }
        let allow = acl.permission == Perm::RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW;
        if allow && acl.operation == Op::RD_KAFKA_ACL_OPERATION_WRITE {
            continue;
        }
        let Some(remote) = remote_name(&acl.topic) else {
            continue;
        };
        let operation = if allow && acl.operation == Op::RD_KAFKA_ACL_OPERATION_ALL {
            Op::RD_KAFKA_ACL_OPERATION_READ
        } else {
            acl.operation
        };
        let rewritten = TopicAcl {
            topic: remote,
            literal: true,
            operation,
            ..acl.clone()
        };
        if !out.contains(&rewritten) {
            out.push(rewritten);
        }
    }
    out
}

/// Describes then creates, for callers that only need an error message.
pub fn sync_once<C: ClientContext>(
    source: &AdminClient<C>,
    target: &AdminClient<C>,
    remote_name: impl FnMut(&str) -> Option<String>,
    timeout: Duration,
) -> Result<usize, AclError> {
    let acls = describe_topic_acls(source, timeout)?;
    let wanted = rewrite(&acls, remote_name);
    create_topic_acls(target, &wanted, timeout)?;
    Ok(wanted.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(topic: &str, literal: bool, op: Op, perm: Perm) -> TopicAcl {
        TopicAcl {
            topic: topic.into(),
            literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    #[test]
    fn mm2_acl_rules() {
        use Op::*;
        use Perm::*;
        let source = vec![
            acl(
                "orders",
                true,
                RD_KAFKA_ACL_OPERATION_READ,
                RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
            ),
            acl(
                "orders",
                true,
                RD_KAFKA_ACL_OPERATION_WRITE,
                RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
            ),
            acl(
                "orders",
                true,
                RD_KAFKA_ACL_OPERATION_ALL,
                RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
            ),
            acl(
                "orders",
                true,
                RD_KAFKA_ACL_OPERATION_WRITE,
                RD_KAFKA_ACL_PERMISSION_TYPE_DENY,
            ),
            acl(
                "orders",
                true,
                RD_KAFKA_ACL_OPERATION_DESCRIBE,
                RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
            ),
            acl(
                "ord",
                false,
                RD_KAFKA_ACL_OPERATION_READ,
                RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
            ),
            acl(
                "secret",
                true,
                RD_KAFKA_ACL_OPERATION_READ,
                RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
            ),
        ];
        let got = rewrite(&source, |t| (t != "secret").then(|| format!("a.{t}")));
        let want = vec![
            // ALLOW READ kept; ALLOW WRITE dropped; ALLOW ALL -> ALLOW READ (a duplicate, once)
            acl(
                "a.orders",
                true,
                RD_KAFKA_ACL_OPERATION_READ,
                RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
            ),
            // DENY kept as it is, whatever the operation
            acl(
                "a.orders",
                true,
                RD_KAFKA_ACL_OPERATION_WRITE,
                RD_KAFKA_ACL_PERMISSION_TYPE_DENY,
            ),
            acl(
                "a.orders",
                true,
                RD_KAFKA_ACL_OPERATION_DESCRIBE,
                RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
            ),
            // prefixed patterns and topics the flow does not mirror are not copied
        ];
        assert_eq!(got, want);
    }
}
