//! What librdkafka knows about a client without asking a broker: the high watermark it saw last
//! in a fetch response, and the fatal error that made a client unusable.

use std::ffi::{CStr, CString};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka_sys as ffi;

/// The high watermark librdkafka last saw for a partition in a fetch response (no request).
pub fn cached_high_watermark<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Option<i64> {
    let topic = CString::new(topic).ok()?;
    let (mut low, mut high) = (-1i64, -1i64);
    // SAFETY: the consumer is alive for the call; the out-pointers are valid locals.
    let err = unsafe {
        ffi::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            partition,
            &mut low,
            &mut high,
        )
    };
    (err == ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some(high)
}

/// The fatal error of the client behind `native` (for a producer: idempotence lost, a PID
/// refused, a sequence gap), `None` while it has none or when `native` is null.
///
/// For a client's own context, which cannot reach the client (its delivery callback, say):
/// `native` must be null or the handle (`native_ptr()`) of a client that is alive for the
/// call — the client that owns the context asking, whose callbacks only run while it lives.
/// Elsewhere use rdkafka's `Client::fatal_error`.
// A safe function on a raw handle: the context that stores its client's handle has no other way
// to reach it, and keeping that handle live is the contract above.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn fatal_error(native: *mut ffi::rd_kafka_t) -> Option<(RDKafkaErrorCode, String)> {
    if native.is_null() {
        return None;
    }
    let mut buf = [0 as std::os::raw::c_char; 512];
    // SAFETY: `native` is the handle of a live client (the contract above); librdkafka
    // NUL-terminates `buf`.
    let code = unsafe { ffi::rd_kafka_fatal_error(native, buf.as_mut_ptr(), buf.len()) };
    if code == ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return None;
    }
    // SAFETY: see above.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    Some((code.into(), text))
}
