//! Requests rdkafka 0.39 does not wrap (ListConsumerGroups, DescribeAcls, CreateAcls,
//! IncrementalAlterConfigs, DescribeTopics, DescribeCluster, DescribeConsumerGroups) or wraps
//! only without a time limit (a synchronous offset commit), made through librdkafka directly:
//! one place owns the queue/options/event lifecycle.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::TopicPartitionList;
use rdkafka_sys as ffi;

/// Runs one admin request: `call(rk, options, queue)` starts it; `read` gets the result event
/// (never null). `None` when no result arrived within `timeout`.
pub(crate) fn admin_call<C: ClientContext, T>(
    admin: &AdminClient<C>,
    op: ffi::rd_kafka_admin_op_t,
    timeout: Duration,
    call: impl FnOnce(
        *mut ffi::rd_kafka_t,
        *mut ffi::rd_kafka_AdminOptions_t,
        *mut ffi::rd_kafka_queue_t,
    ),
    read: impl FnOnce(*mut ffi::rd_kafka_event_t) -> T,
) -> Option<T> {
    let rk = admin.inner().native_ptr();
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: the queue, options and event are created and destroyed here; `rk` outlives the
    // call because `admin` is borrowed for its duration; `read` copies out what it needs before
    // the event is destroyed.
    unsafe {
        let queue = ffi::rd_kafka_queue_new(rk);
        let options = ffi::rd_kafka_AdminOptions_new(rk, op);
        let mut errstr = [0 as std::ffi::c_char; 256];
        ffi::rd_kafka_AdminOptions_set_request_timeout(
            options,
            timeout_ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        call(rk, options, queue);
        let event = ffi::rd_kafka_queue_poll(queue, timeout_ms.saturating_add(1000));
        let result = (!event.is_null()).then(|| read(event));
        if !event.is_null() {
            ffi::rd_kafka_event_destroy(event);
        }
        ffi::rd_kafka_AdminOptions_destroy(options);
        ffi::rd_kafka_queue_destroy(queue);
        result
    }
}

/// Commits `offsets` to `consumer`'s group and waits at most `timeout` for the coordinator's
/// answer. rdkafka's synchronous commit waits without a limit, so a coordinator that never
/// answers would hang the flow, and its shutdown with it; on a timeout the commit may still land
/// later, which is safe (the next commit supersedes it).
pub fn commit_within<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    offsets: &TopicPartitionList,
    timeout: Duration,
) -> Result<(), String> {
    let rk = consumer.client().native_ptr();
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: the queue and event are created and destroyed here; librdkafka copies `offsets`
    // before the call returns; `rk` outlives the call because `consumer` is borrowed for it. With
    // a queue and no callback, the commit's result arrives on the queue as an event.
    unsafe {
        let queue = ffi::rd_kafka_queue_new(rk);
        let err = ffi::rd_kafka_commit_queue(rk, offsets.ptr(), queue, None, std::ptr::null_mut());
        let result = if err != ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            Err(text(ffi::rd_kafka_err2str(err)))
        } else {
            let event = ffi::rd_kafka_queue_poll(queue, timeout_ms);
            if event.is_null() {
                Err(format!(
                    "no answer from the group coordinator within {timeout:?}"
                ))
            } else {
                let answer = commit_answer(event);
                ffi::rd_kafka_event_destroy(event);
                answer
            }
        };
        ffi::rd_kafka_queue_destroy(queue);
        result
    }
}

/// The outcome an offset-commit event reports: its own error, else the first partition's.
///
/// # Safety
/// `event` is a live offset-commit result event.
unsafe fn commit_answer(event: *mut ffi::rd_kafka_event_t) -> Result<(), String> {
    if ffi::rd_kafka_event_error(event) != ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Err(text(ffi::rd_kafka_event_error_string(event)));
    }
    let list = ffi::rd_kafka_event_topic_partition_list(event);
    if list.is_null() {
        return Ok(());
    }
    let count = usize::try_from((*list).cnt).unwrap_or(0);
    for i in 0..count {
        let elem = &*(*list).elems.add(i);
        if elem.err != ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(format!(
                "{}[{}]: {}",
                text(elem.topic),
                elem.partition,
                text(ffi::rd_kafka_err2str(elem.err))
            ));
        }
    }
    Ok(())
}

/// Why an IncrementalAlterConfigs request failed.
#[derive(Debug)]
pub enum AlterError {
    /// The broker (or librdkafka against it) does not support IncrementalAlterConfigs.
    Unsupported(String),
    /// Any other failure.
    Failed(String),
}

/// Sets (`Some(value)`) or deletes back to the default (`None`) configs of topic `topic` with
/// IncrementalAlterConfigs (KIP-339), as MirrorMaker 2 does since Kafka 3.x: configs not named are
/// left as they are.
pub fn incremental_alter_topic_configs<C: ClientContext>(
    admin: &AdminClient<C>,
    topic: &str,
    ops: &[(String, Option<String>)],
    timeout: Duration,
) -> Result<(), AlterError> {
    let name = CString::new(topic).map_err(|e| AlterError::Failed(format!("{topic}: {e}")))?;
    let ops_c: Vec<(CString, Option<CString>)> = ops
        .iter()
        .map(|(k, v)| {
            Ok((
                CString::new(k.as_str())?,
                v.as_deref().map(CString::new).transpose()?,
            ))
        })
        .collect::<Result<_, std::ffi::NulError>>()
        .map_err(|e| AlterError::Failed(format!("{topic}: {e}")))?;
    let mut setup_error = None;
    let answer = admin_call(
        admin,
        ffi::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_INCREMENTALALTERCONFIGS,
        timeout,
        |rk, options, queue| {
            // SAFETY: the resource is created here, handed to librdkafka (which copies it) and
            // destroyed before returning; the strings outlive the calls that read them.
            unsafe {
                let mut resource = ffi::rd_kafka_ConfigResource_new(
                    ffi::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC,
                    name.as_ptr(),
                );
                for (k, v) in &ops_c {
                    let (op, value) = match v {
                        Some(v) => (
                            ffi::rd_kafka_AlterConfigOpType_t::RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET,
                            v.as_ptr(),
                        ),
                        None => (
                            ffi::rd_kafka_AlterConfigOpType_t::RD_KAFKA_ALTER_CONFIG_OP_TYPE_DELETE,
                            std::ptr::null(),
                        ),
                    };
                    let err = ffi::rd_kafka_ConfigResource_add_incremental_config(
                        resource,
                        k.as_ptr(),
                        op,
                        value,
                    );
                    if !err.is_null() {
                        setup_error = Some(text(ffi::rd_kafka_error_string(err)));
                        ffi::rd_kafka_error_destroy(err);
                    }
                }
                ffi::rd_kafka_IncrementalAlterConfigs(rk, &mut resource, 1, options, queue);
                ffi::rd_kafka_ConfigResource_destroy(resource);
            }
        },
        // SAFETY: `event` is the live result event of this request.
        |event| unsafe { incremental_answer(event) },
    );
    if let Some(e) = setup_error {
        return Err(AlterError::Failed(format!("{topic}: {e}")));
    }
    answer.unwrap_or_else(|| {
        Err(AlterError::Failed(format!(
            "{topic}: no answer within {timeout:?}"
        )))
    })
}

/// The outcome an IncrementalAlterConfigs result event reports.
///
/// # Safety
/// `event` is a live IncrementalAlterConfigs result event.
unsafe fn incremental_answer(event: *mut ffi::rd_kafka_event_t) -> Result<(), AlterError> {
    use ffi::rd_kafka_resp_err_t as E;
    let classify = |err: E, message: String| match err {
        E::RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE
        | E::RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION
        | E::RD_KAFKA_RESP_ERR_INVALID_REQUEST => AlterError::Unsupported(message),
        _ => AlterError::Failed(message),
    };
    let err = ffi::rd_kafka_event_error(event);
    if err != E::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Err(classify(err, text(ffi::rd_kafka_event_error_string(event))));
    }
    let result = ffi::rd_kafka_event_IncrementalAlterConfigs_result(event);
    if result.is_null() {
        return Err(AlterError::Failed(
            "not an IncrementalAlterConfigs result".into(),
        ));
    }
    let mut count = 0usize;
    let resources = ffi::rd_kafka_IncrementalAlterConfigs_result_resources(result, &mut count);
    for i in 0..count {
        let resource = *resources.add(i);
        let err = ffi::rd_kafka_ConfigResource_error(resource);
        if err != E::RD_KAFKA_RESP_ERR_NO_ERROR {
            let message = text(ffi::rd_kafka_ConfigResource_error_string(resource));
            let message = if message.is_empty() {
                text(ffi::rd_kafka_err2str(err))
            } else {
                message
            };
            return Err(classify(err, message));
        }
    }
    Ok(())
}

/// An error a broker or librdkafka reported for one resource: its code and text.
pub type ResourceError = (ffi::rd_kafka_resp_err_t, String);

/// What DescribeTopics (with authorized operations, KIP-430) says about one topic.
#[derive(Debug, Clone)]
pub struct TopicAccess {
    /// The topic's name.
    pub name: String,
    /// `TOPIC_AUTHORIZATION_FAILED`, `UNKNOWN_TOPIC_OR_PART`, ...; `None` when described.
    pub error: Option<ResourceError>,
    /// The operations the principal may perform on it; `None` when the broker sent none.
    pub operations: Option<Vec<ffi::rd_kafka_AclOperation_t>>,
}

/// What DescribeConsumerGroups (with authorized operations) says about one group.
#[derive(Debug, Clone)]
pub struct GroupAccess {
    /// `GROUP_AUTHORIZATION_FAILED`, ...; `None` when described.
    pub error: Option<ResourceError>,
    /// The operations the principal may perform on it; `None` when the broker sent none.
    pub operations: Option<Vec<ffi::rd_kafka_AclOperation_t>>,
}

/// Copies an operations array librdkafka returned (null: not sent).
///
/// # Safety
/// `ops` is null or points to `count` operations.
unsafe fn operations(
    ops: *const ffi::rd_kafka_AclOperation_t,
    count: usize,
) -> Option<Vec<ffi::rd_kafka_AclOperation_t>> {
    if ops.is_null() {
        return None;
    }
    Some((0..count).map(|i| *ops.add(i)).collect())
}

/// The code and text of a librdkafka error object (`None` when null). A text that says nothing
/// of its own (a broker's empty error message: `ConsumerGroupDescribe: `) gets the code's
/// description.
///
/// # Safety
/// `error` is null or a live error object.
unsafe fn error_of(error: *const ffi::rd_kafka_error_t) -> Option<ResourceError> {
    if error.is_null() {
        return None;
    }
    let code = ffi::rd_kafka_error_code(error);
    if code == ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return None;
    }
    let message = text(ffi::rd_kafka_error_string(error));
    Some((
        code,
        with_reason(message, &text(ffi::rd_kafka_err2str(code))),
    ))
}

/// `message`, or when it ends without saying anything (empty, or `Request: `), with `reason`
/// after it.
fn with_reason(message: String, reason: &str) -> String {
    let trimmed = message.trim_end();
    if trimmed.is_empty() {
        reason.to_string()
    } else if trimmed.ends_with(':') {
        format!("{trimmed} {reason}")
    } else {
        message
    }
}

/// The event's own error as text, when it has one.
///
/// # Safety
/// `event` is a live event.
unsafe fn event_error(event: *mut ffi::rd_kafka_event_t) -> Result<(), String> {
    let err = ffi::rd_kafka_event_error(event);
    if err == ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Ok(());
    }
    let message = text(ffi::rd_kafka_event_error_string(event));
    Err(if message.is_empty() {
        text(ffi::rd_kafka_err2str(err))
    } else {
        message
    })
}

/// Asks librdkafka to request the principal's authorized operations (KIP-430).
///
/// # Safety
/// `options` is live.
unsafe fn include_authorized_operations(options: *mut ffi::rd_kafka_AdminOptions_t) {
    let err = ffi::rd_kafka_AdminOptions_set_include_authorized_operations(options, 1);
    if !err.is_null() {
        ffi::rd_kafka_error_destroy(err);
    }
}

/// Describes `topics` with the principal's authorized operations on each. No side effects.
pub fn describe_topics<C: ClientContext>(
    admin: &AdminClient<C>,
    topics: &[String],
    timeout: Duration,
) -> Result<Vec<TopicAccess>, String> {
    // SAFETY (of the reader): `desc` is a live description of the result being read.
    describe(admin, topics, timeout, true, |desc| unsafe {
        let mut ops = 0usize;
        let list = ffi::rd_kafka_TopicDescription_authorized_operations(desc, &mut ops);
        TopicAccess {
            name: text(ffi::rd_kafka_TopicDescription_name(desc)),
            operations: operations(list, ops),
            error: error_of(ffi::rd_kafka_TopicDescription_error(desc)),
        }
    })
}

/// A Kafka topic id (KIP-516) in its base64 form, as `kafka-topics --describe` prints it.
pub type TopicId = String;

/// The topic ids of those of `topics` that exist (a topic that does not, or that this
/// principal may not describe, is left out; so is one whose broker has no topic ids). A topic
/// deleted and created again under the same name gets a new id. No side effects.
pub fn topic_ids<C: ClientContext>(
    admin: &AdminClient<C>,
    topics: &[String],
    timeout: Duration,
) -> Result<HashMap<String, TopicId>, String> {
    // SAFETY (of the reader): `desc` is a live description of the result being read; the id
    // belongs to it and is copied out as text.
    let described = describe(admin, topics, timeout, false, |desc| unsafe {
        if error_of(ffi::rd_kafka_TopicDescription_error(desc)).is_some() {
            return None;
        }
        let id = ffi::rd_kafka_TopicDescription_topic_id(desc);
        if id.is_null()
            || (ffi::rd_kafka_Uuid_most_significant_bits(id) == 0
                && ffi::rd_kafka_Uuid_least_significant_bits(id) == 0)
        {
            return None;
        }
        Some((
            text(ffi::rd_kafka_TopicDescription_name(desc)),
            text(ffi::rd_kafka_Uuid_base64str(id)),
        ))
    })?;
    Ok(described.into_iter().flatten().collect())
}

/// Why a DescribeTopics request was not sent.
pub const NO_CONTROLLER: &str = "the cluster's metadata names no controller among its brokers, and DescribeTopics needs one (librdkafka's mock cluster names broker 0, which it does not have)";

/// Whether the cluster's metadata names a controller that is one of its brokers. librdkafka sends
/// DescribeTopics to the controller and, until it is up, holds the request for its whole
/// timeout ("Failed while waiting for controller"): on a cluster that never names a live one,
/// each lookup would cost the full timeout, on the record path. One metadata request for `topic`
/// (answered in milliseconds) tells. Nothing is remembered: a cluster between controllers is
/// asked again next time, at the same small cost.
fn controller_known<C: ClientContext>(
    admin: &AdminClient<C>,
    topic: &str,
    timeout: Duration,
) -> bool {
    let Ok(metadata) = admin.inner().fetch_metadata(Some(topic), timeout) else {
        return false;
    };
    // SAFETY: the client is alive while `admin` is borrowed; a zero timeout only reads what the
    // metadata answer just cached.
    let controller = unsafe { ffi::rd_kafka_controllerid(admin.inner().native_ptr(), 0) };
    controller >= 0 && metadata.brokers().iter().any(|b| b.id() == controller)
}

/// One DescribeTopics request for `topics` (with the principal's authorized operations when
/// `with_operations`), each description read by `read_one` while the result is alive.
fn describe<C: ClientContext, T>(
    admin: &AdminClient<C>,
    topics: &[String],
    timeout: Duration,
    with_operations: bool,
    mut read_one: impl FnMut(*const ffi::rd_kafka_TopicDescription_t) -> T,
) -> Result<Vec<T>, String> {
    if topics.is_empty() {
        return Ok(Vec::new());
    }
    if !controller_known(admin, &topics[0], timeout) {
        return Err(NO_CONTROLLER.into());
    }
    let names: Vec<CString> = topics
        .iter()
        .map(|t| CString::new(t.as_str()).map_err(|e| format!("{t}: {e}")))
        .collect::<Result<_, _>>()?;
    let mut ptrs: Vec<*const std::ffi::c_char> = names.iter().map(|n| n.as_ptr()).collect();
    admin_call(
        admin,
        ffi::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS,
        timeout,
        // SAFETY: the names outlive the call; librdkafka copies the collection, destroyed here.
        |rk, options, queue| unsafe {
            if with_operations {
                include_authorized_operations(options);
            }
            let collection =
                ffi::rd_kafka_TopicCollection_of_topic_names(ptrs.as_mut_ptr(), ptrs.len());
            ffi::rd_kafka_DescribeTopics(rk, collection, options, queue);
            ffi::rd_kafka_TopicCollection_destroy(collection);
        },
        // SAFETY: `event` is the live result event of this request; `read_one` copies out what
        // it needs from each description before the event is destroyed.
        |event| unsafe {
            event_error(event)?;
            let result = ffi::rd_kafka_event_DescribeTopics_result(event);
            if result.is_null() {
                return Err("not a DescribeTopics result".to_string());
            }
            let mut count = 0usize;
            let list = ffi::rd_kafka_DescribeTopics_result_topics(result, &mut count);
            Ok((0..count).map(|i| read_one(*list.add(i))).collect())
        },
    )
    .unwrap_or_else(|| Err(format!("DescribeTopics: no answer within {timeout:?}")))
}

/// The principal's authorized operations on the cluster resource (DescribeCluster, KIP-430):
/// empty without DESCRIBE on the cluster, `None` when the broker sent none. No side effects.
pub fn describe_cluster_operations<C: ClientContext>(
    admin: &AdminClient<C>,
    timeout: Duration,
) -> Result<Option<Vec<ffi::rd_kafka_AclOperation_t>>, String> {
    admin_call(
        admin,
        ffi::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECLUSTER,
        timeout,
        // SAFETY: all handles are live for the call.
        |rk, options, queue| unsafe {
            include_authorized_operations(options);
            ffi::rd_kafka_DescribeCluster(rk, options, queue);
        },
        // SAFETY: `event` is the live result event of this request; everything is copied out.
        |event| unsafe {
            event_error(event)?;
            let result = ffi::rd_kafka_event_DescribeCluster_result(event);
            if result.is_null() {
                return Err("not a DescribeCluster result".to_string());
            }
            let mut count = 0usize;
            let ops =
                ffi::rd_kafka_DescribeCluster_result_authorized_operations(result, &mut count);
            Ok(operations(ops, count))
        },
    )
    .unwrap_or_else(|| Err(format!("DescribeCluster: no answer within {timeout:?}")))
}

/// DescribeConsumerGroups of `groups` (with the principal's authorized operations when
/// `operations`): `read` copies what is needed out of each group's description.
fn describe_consumer_groups<C: ClientContext, T>(
    admin: &AdminClient<C>,
    groups: &[String],
    operations: bool,
    timeout: Duration,
    read: impl Fn(*const ffi::rd_kafka_ConsumerGroupDescription_t) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<CString> = groups
        .iter()
        .map(|g| CString::new(g.as_str()).map_err(|e| format!("{g}: {e}")))
        .collect::<Result<_, _>>()?;
    let mut ptrs: Vec<*const std::ffi::c_char> = names.iter().map(|n| n.as_ptr()).collect();
    admin_call(
        admin,
        ffi::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS,
        timeout,
        // SAFETY: the names outlive the call (librdkafka copies them).
        |rk, options, queue| unsafe {
            if operations {
                include_authorized_operations(options);
            }
            ffi::rd_kafka_DescribeConsumerGroups(rk, ptrs.as_mut_ptr(), ptrs.len(), options, queue);
        },
        // SAFETY: `event` is the live result event of this request; `read` copies out what it
        // needs from each description before the event is destroyed.
        |event| unsafe {
            event_error(event)?;
            let result = ffi::rd_kafka_event_DescribeConsumerGroups_result(event);
            if result.is_null() {
                return Err("not a DescribeConsumerGroups result".to_string());
            }
            let mut count = 0usize;
            let list = ffi::rd_kafka_DescribeConsumerGroups_result_groups(result, &mut count);
            (0..count).map(|i| read(*list.add(i))).collect()
        },
    )
    .unwrap_or_else(|| {
        Err(format!(
            "DescribeConsumerGroups: no answer within {timeout:?}"
        ))
    })
}

/// Describes consumer `groups` with the principal's authorized operations on each. No side
/// effects (a group that does not exist is described as dead, not created).
pub fn describe_groups<C: ClientContext>(
    admin: &AdminClient<C>,
    groups: &[String],
    timeout: Duration,
) -> Result<Vec<(String, GroupAccess)>, String> {
    describe_consumer_groups(admin, groups, true, timeout, |desc| {
        // SAFETY: `desc` is a live description of the result being read.
        unsafe {
            let mut ops = 0usize;
            let ops_list =
                ffi::rd_kafka_ConsumerGroupDescription_authorized_operations(desc, &mut ops);
            Ok((
                text(ffi::rd_kafka_ConsumerGroupDescription_group_id(desc)),
                GroupAccess {
                    error: error_of(ffi::rd_kafka_ConsumerGroupDescription_error(desc)),
                    operations: operations(ops_list, ops),
                },
            ))
        }
    })
}

/// One member of a consumer group as DescribeConsumerGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its `group.instance.id` (static membership), when it has one.
    pub instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// The host it connects from.
    pub host: String,
    /// The partitions assigned to it: (topic, partition).
    pub assignment: Vec<(String, i32)>,
}

/// The members of consumer `group` and what each is assigned (an empty list for a group with
/// no members or none at all). No side effects.
///
/// This asks through librdkafka's `rd_kafka_list_groups` (ListGroups to every broker, then
/// DescribeGroups to the group's coordinator), not the DescribeConsumerGroups admin call: that
/// call's coordinator lookup aborts the process when a connection drops while it runs
/// (librdkafka issue 4605, "rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0'
/// failed"; measured in refract's source-outage test), and refract asks every few seconds, also
/// while a cluster is down. `rd_kafka_list_groups` keeps its state to itself and discards late
/// answers after its timeout. It does not report static membership ids (`instance_id` is
/// `None`).
pub fn describe_group_members<C: ClientContext>(
    admin: &AdminClient<C>,
    group: &str,
    timeout: Duration,
) -> Result<Vec<GroupMember>, String> {
    let rk = admin.inner().native_ptr();
    let name = CString::new(group).map_err(|e| format!("{group}: {e}"))?;
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let mut list: *const ffi::rd_kafka_group_list = std::ptr::null();
    // SAFETY: `rk` is live for the call (`admin` is borrowed); the group list librdkafka returns
    // is read within its counts and destroyed here; member byte arrays are copied out.
    unsafe {
        let err = ffi::rd_kafka_list_groups(rk, name.as_ptr(), &mut list, timeout_ms);
        let partial = err == ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__PARTIAL;
        if err != ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && !partial {
            return Err(text(ffi::rd_kafka_err2str(err)));
        }
        if list.is_null() {
            return Ok(Vec::new());
        }
        let mut out = Ok(Vec::new());
        let groups = &*list;
        for g in 0..usize::try_from(groups.group_cnt).unwrap_or(0) {
            let info = &*groups.groups.add(g);
            if text(info.group) != group {
                continue;
            }
            if info.err != ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                out = Err(text(ffi::rd_kafka_err2str(info.err)));
                break;
            }
            let mut members = Vec::new();
            for m in 0..usize::try_from(info.member_cnt).unwrap_or(0) {
                let member = &*info.members.add(m);
                let assignment = bytes(member.member_assignment, member.member_assignment_size);
                members.push(GroupMember {
                    member_id: text(member.member_id),
                    instance_id: None,
                    client_id: text(member.client_id),
                    host: text(member.client_host),
                    assignment: consumer_assignment(&assignment).unwrap_or_default(),
                });
            }
            out = Ok(members);
            break;
        }
        ffi::rd_kafka_group_list_destroy(list);
        out
    }
}

/// Copies `size` bytes at `p` (empty when null or not positive).
///
/// # Safety
/// `p` is null or points to `size` readable bytes.
unsafe fn bytes(p: *const std::ffi::c_void, size: std::ffi::c_int) -> Vec<u8> {
    match usize::try_from(size) {
        Ok(n) if n > 0 && !p.is_null() => std::slice::from_raw_parts(p.cast::<u8>(), n).to_vec(),
        _ => Vec::new(),
    }
}

/// The (topic, partition) pairs of a consumer-protocol assignment (the bytes a member of a
/// `consumer` group is assigned: version i16, then an array of topics, each a name and an array
/// of partitions; user data after that is ignored). `None` when the bytes do not parse, which a
/// member of another protocol may send.
fn consumer_assignment(data: &[u8]) -> Option<Vec<(String, i32)>> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = data.get(at..at.checked_add(n)?)?;
        at += n;
        Some(s)
    };
    if data.is_empty() {
        return Some(Vec::new());
    }
    let _version = take(2)?;
    let topics = i32::from_be_bytes(take(4)?.try_into().ok()?);
    let mut out = Vec::new();
    for _ in 0..topics.max(0) {
        let len = i16::from_be_bytes(take(2)?.try_into().ok()?);
        let topic = String::from_utf8_lossy(take(usize::try_from(len).ok()?)?).into_owned();
        let partitions = i32::from_be_bytes(take(4)?.try_into().ok()?);
        for _ in 0..partitions.max(0) {
            out.push((topic.clone(), i32::from_be_bytes(take(4)?.try_into().ok()?)));
        }
    }
    Some(out)
}

/// Copies a C string (empty when null).
///
/// # Safety
/// `p` is null or a NUL-terminated string.
pub(crate) unsafe fn text(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    CStr::from_ptr(p).to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use rdkafka::config::ClientConfig;
    use rdkafka::Offset;

    use super::*;

    #[test]
    fn an_error_that_says_nothing_gets_its_codes_reason() {
        let reason = "Broker: Coordinator load in progress";
        assert_eq!(
            with_reason("ConsumerGroupDescribe: ".into(), reason),
            "ConsumerGroupDescribe: Broker: Coordinator load in progress"
        );
        assert_eq!(with_reason(String::new(), reason), reason);
        assert_eq!(with_reason("Group gone".into(), reason), "Group gone");
    }

    #[test]
    fn consumer_assignments_parse_and_bad_bytes_do_not() {
        let mut data = vec![0, 1, 0, 0, 0, 2];
        for (topic, partitions) in [("coord", vec![0i32, 3]), ("t", vec![7])] {
            data.extend((topic.len() as i16).to_be_bytes());
            data.extend(topic.as_bytes());
            data.extend((partitions.len() as i32).to_be_bytes());
            for p in partitions {
                data.extend(p.to_be_bytes());
            }
        }
        data.extend([0, 0, 0, 0]);
        assert_eq!(
            consumer_assignment(&data),
            Some(vec![
                ("coord".to_string(), 0),
                ("coord".to_string(), 3),
                ("t".to_string(), 7)
            ])
        );
        assert_eq!(consumer_assignment(&[]), Some(vec![]));
        assert_eq!(consumer_assignment(&data[..9]), None, "cut short");
        // A topic count far beyond the bytes: stops at the end, no huge allocation.
        assert_eq!(consumer_assignment(&[0, 1, 0x7f, 0xff, 0xff, 0xff]), None);
    }

    /// With no coordinator to answer (nothing listens on the bootstrap port), a commit gives up
    /// after its timeout instead of blocking forever as rdkafka's synchronous commit does.
    #[test]
    fn commit_gives_up_after_its_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        // On a thread of its own: librdkafka's teardown of a client whose coordinator never
        // answered takes about 45 s, which the test need not wait for.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", format!("127.0.0.1:{port}"))
                .set("group.id", "commit-timeout")
                .set("enable.auto.commit", "false")
                .create()
                .unwrap();
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset("t", 0, Offset::Offset(5)).unwrap();
            let started = Instant::now();
            let result = commit_within(&consumer, &tpl, Duration::from_millis(500));
            let _ = tx.send((result, started.elapsed()));
        });
        let (result, elapsed) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("commit_within returned");
        assert!(result.is_err(), "no broker, so no commit: {result:?}");
        assert!(
            elapsed < Duration::from_secs(5),
            "it returned after {elapsed:?}"
        );
    }
}
