//! How to grant what is missing: the `kafka-acls` command for each missing permission, with its
//! words shell-quoted.

use std::fmt::Write as _;

use refract_kafka::AclOperation as Op;

use super::needs::{literal_prefix, Resource};

/// The operation as `kafka-acls --operation` names it, and in words.
pub(super) fn op_names(op: Op) -> (&'static str, &'static str) {
    match op {
        Op::RD_KAFKA_ACL_OPERATION_READ => ("Read", "read"),
        Op::RD_KAFKA_ACL_OPERATION_WRITE => ("Write", "write"),
        Op::RD_KAFKA_ACL_OPERATION_CREATE => ("Create", "create"),
        Op::RD_KAFKA_ACL_OPERATION_DELETE => ("Delete", "delete"),
        Op::RD_KAFKA_ACL_OPERATION_ALTER => ("Alter", "alter"),
        Op::RD_KAFKA_ACL_OPERATION_DESCRIBE => ("Describe", "describe"),
        Op::RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS => ("DescribeConfigs", "describe-configs"),
        Op::RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS => ("AlterConfigs", "alter-configs"),
        Op::RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE => ("IdempotentWrite", "idempotent write"),
        _ => ("All", "all"),
    }
}

/// Quotes a shell word when it needs it.
pub(super) fn shell(word: &str) -> String {
    if word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-:/=@,".contains(c))
        && !word.is_empty()
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The `kafka-acls` command that grants `ops` on `resource` to `principal`.
pub(super) fn acl_command(
    bootstrap: &str,
    principal: &str,
    ops: &[Op],
    resource: &Resource,
) -> String {
    let mut cmd = format!(
        "kafka-acls --bootstrap-server {} --add --allow-principal {}",
        shell(bootstrap),
        shell(principal)
    );
    for op in ops {
        let _ = write!(cmd, " --operation {}", op_names(*op).0);
    }
    match resource {
        Resource::Topic(t) => {
            let _ = write!(cmd, " --topic {}", shell(t));
        }
        Resource::TopicPrefix(p) => {
            let _ = write!(
                cmd,
                " --topic {} --resource-pattern-type prefixed",
                shell(p)
            );
        }
        Resource::Group(g) => {
            let _ = write!(cmd, " --group {}", shell(g));
        }
        Resource::Groups(filter) => match literal_prefix(filter) {
            Some(p) if !p.is_empty() => {
                let _ = write!(
                    cmd,
                    " --group {} --resource-pattern-type prefixed",
                    shell(&p)
                );
            }
            _ => cmd.push_str(" --group '*'"),
        },
        Resource::TopicsMatching(_) => cmd.push_str(" --topic '*'"),
        Resource::Cluster => cmd.push_str(" --cluster"),
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_commands_quote_and_use_prefixes() {
        use Op::*;
        assert_eq!(
            acl_command(
                "h:9092",
                "User:CN=mirror,O=refract tests",
                &[RD_KAFKA_ACL_OPERATION_CREATE, RD_KAFKA_ACL_OPERATION_WRITE],
                &Resource::TopicPrefix("a.orders".into())
            ),
            "kafka-acls --bootstrap-server h:9092 --add --allow-principal 'User:CN=mirror,O=refract tests' \
             --operation Create --operation Write --topic a.orders --resource-pattern-type prefixed"
        );
        assert_eq!(
            acl_command(
                "h:9092",
                "User:mirror",
                &[RD_KAFKA_ACL_OPERATION_DESCRIBE],
                &Resource::Groups(".*".into())
            ),
            "kafka-acls --bootstrap-server h:9092 --add --allow-principal User:mirror --operation Describe --group '*'"
        );
    }
}
