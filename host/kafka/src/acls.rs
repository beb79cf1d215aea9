//! Topic ACLs through librdkafka: DescribeAcls and CreateAcls, which rdkafka 0.39 does not wrap.
//! What to copy (MirrorMaker 2's rules) is refract-mirror's; this module only reads and writes.

use std::ffi::CString;
use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::admin::AdminClient;
use rdkafka::client::ClientContext;
use rdkafka_sys as ffi;

use crate::admin_ffi::{admin_call, text};

use ffi::rd_kafka_AclOperation_t as Op;
use ffi::rd_kafka_AclPermissionType_t as Perm;
use ffi::rd_kafka_ResourcePatternType_t as Pattern;
use ffi::rd_kafka_ResourceType_t as Resource;

/// One ACL on a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicAcl {
    /// Topic name (or prefix, for prefixed patterns).
    pub topic: String,
    /// Whether the pattern is literal (MM2 copies only those).
    pub literal: bool,
    /// `User:alice`.
    pub principal: String,
    /// `*` or a host.
    pub host: String,
    /// The operation.
    pub operation: Op,
    /// ALLOW or DENY.
    pub permission: Perm,
}

/// Why ACLs could not be read.
#[derive(Debug)]
pub enum AclError {
    /// The cluster has no authorizer (or does not support ACL requests).
    NoAuthorizer(String),
    /// Anything else.
    Other(anyhow::Error),
}

impl std::fmt::Display for AclError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AclError::NoAuthorizer(m) => write!(f, "no authorizer: {m}"),
            AclError::Other(e) => write!(f, "{e:#}"),
        }
    }
}

fn c(text: &str) -> Result<CString> {
    CString::new(text).with_context(|| format!("{text:?} contains a NUL byte"))
}

/// [`admin_call`] for ACL requests: the event's error is checked before `read` sees it.
fn acl_call<C: ClientContext, T>(
    admin: &AdminClient<C>,
    op: ffi::rd_kafka_admin_op_t,
    timeout: Duration,
    call: impl FnOnce(
        *mut ffi::rd_kafka_t,
        *mut ffi::rd_kafka_AdminOptions_t,
        *mut ffi::rd_kafka_queue_t,
    ),
    read: impl FnOnce(*mut ffi::rd_kafka_event_t) -> Result<T, AclError>,
) -> Result<T, AclError> {
    admin_call(admin, op, timeout, call, |event| {
        // SAFETY: a live result event; strings are copied out.
        let err = unsafe { ffi::rd_kafka_event_error(event) };
        if err == ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            read(event)
        } else {
            // SAFETY: as above.
            let message = unsafe { text(ffi::rd_kafka_event_error_string(event)) };
            Err(classify(err, message))
        }
    })
    .unwrap_or_else(|| Err(AclError::Other(anyhow::anyhow!("timed out"))))
}

fn classify(err: ffi::rd_kafka_resp_err_t, message: String) -> AclError {
    use ffi::rd_kafka_resp_err_t as E;
    match err {
        E::RD_KAFKA_RESP_ERR_SECURITY_DISABLED
        | E::RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION
        | E::RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE => AclError::NoAuthorizer(message),
        _ => AclError::Other(anyhow::anyhow!("{message}")),
    }
}

/// Every topic ACL of the cluster.
pub fn describe_topic_acls<C: ClientContext>(
    admin: &AdminClient<C>,
    timeout: Duration,
) -> Result<Vec<TopicAcl>, AclError> {
    let mut errstr = [0 as std::ffi::c_char; 256];
    // SAFETY: a filter built from constants; destroyed after the call.
    let filter = unsafe {
        ffi::rd_kafka_AclBindingFilter_new(
            Resource::RD_KAFKA_RESOURCE_TOPIC,
            std::ptr::null(),
            Pattern::RD_KAFKA_RESOURCE_PATTERN_ANY,
            std::ptr::null(),
            std::ptr::null(),
            Op::RD_KAFKA_ACL_OPERATION_ANY,
            Perm::RD_KAFKA_ACL_PERMISSION_TYPE_ANY,
            errstr.as_mut_ptr(),
            errstr.len(),
        )
    };
    if filter.is_null() {
        return Err(AclError::Other(anyhow::anyhow!(
            "cannot build an ACL filter"
        )));
    }
    let result = acl_call(
        admin,
        ffi::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBEACLS,
        timeout,
        // SAFETY: all handles are live for the call.
        |rk, options, queue| unsafe { ffi::rd_kafka_DescribeAcls(rk, filter, options, queue) },
        |event| {
            // SAFETY: `event` is a live DescribeAcls result; strings are copied out.
            unsafe {
                let result = ffi::rd_kafka_event_DescribeAcls_result(event);
                if result.is_null() {
                    return Err(AclError::Other(anyhow::anyhow!("unexpected reply")));
                }
                let mut count = 0usize;
                let list = ffi::rd_kafka_DescribeAcls_result_acls(result, &mut count);
                let mut out = Vec::with_capacity(count);
                for i in 0..count {
                    if list.is_null() {
                        break;
                    }
                    let acl = *list.add(i);
                    if ffi::rd_kafka_AclBinding_restype(acl) != Resource::RD_KAFKA_RESOURCE_TOPIC {
                        continue;
                    }
                    out.push(TopicAcl {
                        topic: text(ffi::rd_kafka_AclBinding_name(acl)),
                        literal: ffi::rd_kafka_AclBinding_resource_pattern_type(acl)
                            == Pattern::RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                        principal: text(ffi::rd_kafka_AclBinding_principal(acl)),
                        host: text(ffi::rd_kafka_AclBinding_host(acl)),
                        operation: ffi::rd_kafka_AclBinding_operation(acl),
                        permission: ffi::rd_kafka_AclBinding_permission_type(acl),
                    });
                }
                Ok(out)
            }
        },
    );
    // SAFETY: created above, not used after this.
    unsafe { ffi::rd_kafka_AclBinding_destroy(filter) };
    result
}

/// Creates `acls` (creating an ACL that exists is a no-op for Kafka).
pub fn create_topic_acls<C: ClientContext>(
    admin: &AdminClient<C>,
    acls: &[TopicAcl],
    timeout: Duration,
) -> Result<(), AclError> {
    if acls.is_empty() {
        return Ok(());
    }
    let mut bindings = Vec::with_capacity(acls.len());
    for acl in acls {
        let (name, principal, host) = match (c(&acl.topic), c(&acl.principal), c(&acl.host)) {
            (Ok(n), Ok(p), Ok(h)) => (n, p, h),
            _ => continue,
        };
        let mut errstr = [0 as std::ffi::c_char; 256];
        // SAFETY: the strings live until the call returns (librdkafka copies them).
        let binding = unsafe {
            ffi::rd_kafka_AclBinding_new(
                Resource::RD_KAFKA_RESOURCE_TOPIC,
                name.as_ptr(),
                Pattern::RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                principal.as_ptr(),
                host.as_ptr(),
                acl.operation,
                acl.permission,
                errstr.as_mut_ptr(),
                errstr.len(),
            )
        };
        if !binding.is_null() {
            bindings.push(binding);
        }
    }
    let count = bindings.len();
    let ptr = bindings.as_mut_ptr();
    let result = acl_call(
        admin,
        ffi::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_CREATEACLS,
        timeout,
        // SAFETY: `bindings` outlives the call.
        |rk, options, queue| unsafe { ffi::rd_kafka_CreateAcls(rk, ptr, count, options, queue) },
        |event| {
            // SAFETY: `event` is a live CreateAcls result.
            unsafe {
                let result = ffi::rd_kafka_event_CreateAcls_result(event);
                if result.is_null() {
                    return Err(AclError::Other(anyhow::anyhow!("unexpected reply")));
                }
                let mut n = 0usize;
                let results = ffi::rd_kafka_CreateAcls_result_acls(result, &mut n);
                for i in 0..n {
                    if results.is_null() {
                        break;
                    }
                    let error = ffi::rd_kafka_acl_result_error(*results.add(i));
                    if !error.is_null() {
                        let code = ffi::rd_kafka_error_code(error);
                        let message = text(ffi::rd_kafka_error_string(error));
                        return Err(classify(code, message));
                    }
                }
                Ok(())
            }
        },
    );
    for b in bindings {
        // SAFETY: created above, not used after this.
        unsafe { ffi::rd_kafka_AclBinding_destroy(b) };
    }
    result
}
