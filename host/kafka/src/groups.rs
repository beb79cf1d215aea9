//! Listing consumer groups with their state.
//!
//! rdkafka's `fetch_group_list` sends DescribeGroups for every group, which some brokers do not
//! serve; librdkafka's ListConsumerGroups admin call uses only the ListGroups request and still
//! reports each group's state, which is all refract needs (which groups exist on the source, and
//! whether a target group has active members). rdkafka 0.39 does not wrap it, so this module
//! calls librdkafka directly.

use std::time::Duration;

use anyhow::{bail, Result};
use rdkafka::admin::AdminClient;
use rdkafka::client::ClientContext;
use rdkafka_sys as ffi;

use crate::admin_ffi::{admin_call, text};

/// What the group coordinator reports about a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// The broker did not say.
    Unknown,
    /// Members are joining.
    PreparingRebalance,
    /// Members are being assigned partitions.
    CompletingRebalance,
    /// Members are consuming.
    Stable,
    /// The group is being removed.
    Dead,
    /// No members: committed offsets only.
    Empty,
}

impl GroupState {
    /// Whether consumers are using the group right now (its offsets must not be changed).
    pub fn is_active(self) -> bool {
        matches!(
            self,
            GroupState::PreparingRebalance | GroupState::CompletingRebalance | GroupState::Stable
        )
    }
}

/// One consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// The group id.
    pub id: String,
    /// Its state.
    pub state: GroupState,
}

/// Lists the cluster's consumer groups (ListGroups only).
pub fn list_consumer_groups<C: ClientContext>(
    admin: &AdminClient<C>,
    timeout: Duration,
) -> Result<Vec<GroupListing>> {
    admin_call(
        admin,
        ffi::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS,
        timeout,
        // SAFETY: the handles are live for the call.
        |rk, options, queue| unsafe { ffi::rd_kafka_ListConsumerGroups(rk, options, queue) },
        // SAFETY: a live ListConsumerGroups result event.
        |event| unsafe { read_listing(event) },
    )
    .unwrap_or_else(|| bail!("listing consumer groups timed out"))
}

/// # Safety
/// `event` is a live ListConsumerGroups result event.
unsafe fn read_listing(event: *mut ffi::rd_kafka_event_t) -> Result<Vec<GroupListing>> {
    let err = ffi::rd_kafka_event_error(event);
    if err != ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        let text = text(ffi::rd_kafka_event_error_string(event));
        bail!("listing consumer groups failed: {text}");
    }
    let result = ffi::rd_kafka_event_ListConsumerGroups_result(event);
    if result.is_null() {
        bail!("listing consumer groups: unexpected reply");
    }
    let mut errors = 0usize;
    let errs = ffi::rd_kafka_ListConsumerGroups_result_errors(result, &mut errors);
    if errors > 0 && !errs.is_null() {
        let first = *errs;
        let text = text(ffi::rd_kafka_error_string(first));
        tracing::debug!("listing consumer groups: {errors} broker(s) failed, first: {text}");
    }
    let mut count = 0usize;
    let list = ffi::rd_kafka_ListConsumerGroups_result_valid(result, &mut count);
    let mut out = Vec::with_capacity(count);
    if list.is_null() {
        return Ok(out);
    }
    for i in 0..count {
        let g = *list.add(i);
        use ffi::rd_kafka_consumer_group_state_t as S;
        let state = match ffi::rd_kafka_ConsumerGroupListing_state(g) {
            S::RD_KAFKA_CONSUMER_GROUP_STATE_PREPARING_REBALANCE => GroupState::PreparingRebalance,
            S::RD_KAFKA_CONSUMER_GROUP_STATE_COMPLETING_REBALANCE => {
                GroupState::CompletingRebalance
            }
            S::RD_KAFKA_CONSUMER_GROUP_STATE_STABLE => GroupState::Stable,
            S::RD_KAFKA_CONSUMER_GROUP_STATE_DEAD => GroupState::Dead,
            S::RD_KAFKA_CONSUMER_GROUP_STATE_EMPTY => GroupState::Empty,
            _ => GroupState::Unknown,
        };
        out.push(GroupListing {
            id: text(ffi::rd_kafka_ConsumerGroupListing_group_id(g)),
            state,
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}
