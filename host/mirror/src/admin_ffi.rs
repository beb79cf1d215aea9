//! Admin requests rdkafka 0.39 does not wrap (ListConsumerGroups, DescribeAcls, CreateAcls),
//! made through librdkafka directly: one place owns the queue/options/event lifecycle.

use std::ffi::CStr;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::client::ClientContext;
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
