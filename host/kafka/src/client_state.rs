//! What librdkafka knows about a client without asking a broker: the high watermark it saw last
//! in a fetch response, and the fatal error that made a client unusable.

use std::ffi::{CStr, CString};

use std::sync::atomic::{AtomicPtr, Ordering};

use rdkafka::client::{Client, ClientContext};
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

/// How many events wait in a client's main queue (where a `BaseProducer` gets its delivery
/// reports): rdkafka's zero-timeout `poll` serves one event per call, and a delivery-report
/// event covers one partition's batch, so a producer writing to many partitions is polled until
/// this is 0.
pub fn queued_events<C: ClientContext>(client: &Client<C>) -> usize {
    // SAFETY: the client is alive for the call; the queue handle taken here is released here.
    unsafe {
        let queue = ffi::rd_kafka_queue_get_main(client.native_ptr());
        if queue.is_null() {
            return 0;
        }
        let n = ffi::rd_kafka_queue_length(queue);
        ffi::rd_kafka_queue_destroy(queue);
        n
    }
}

/// A client context's handle on the client that owns it, for what only the client knows (its
/// fatal error) asked from a callback, which gets the context but not the client.
///
/// Empty until [`OwnClient::set`] is given the client, which must be the one whose context holds
/// this handle: the context lives inside the client, so the client is alive whenever the context
/// is used. That is the only way to fill it, so no raw handle leaves this crate.
#[derive(Debug, Default)]
pub struct OwnClient(AtomicPtr<ffi::rd_kafka_t>);

impl OwnClient {
    /// An empty handle (a context is built before its client).
    pub fn new() -> Self {
        Self(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// Remembers `client`, the client whose context holds this handle.
    pub fn set<C: ClientContext>(&self, client: &Client<C>) {
        self.0.store(client.native_ptr(), Ordering::Release);
    }

    /// The client's fatal error (for a producer: idempotence lost, a PID refused, a sequence
    /// gap), `None` while it has none or before [`OwnClient::set`].
    pub fn fatal_error(&self) -> Option<(RDKafkaErrorCode, String)> {
        let native = self.0.load(Ordering::Acquire);
        if native.is_null() {
            return None;
        }
        let mut buf = [0 as std::os::raw::c_char; 512];
        // SAFETY: `native` was set from the client that owns the context holding this handle,
        // so it is alive while the context is used; librdkafka NUL-terminates `buf`.
        let code = unsafe { ffi::rd_kafka_fatal_error(native, buf.as_mut_ptr(), buf.len()) };
        if code == ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return None;
        }
        // SAFETY: librdkafka wrote a NUL-terminated message into `buf` above.
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Some((code.into(), text))
    }
}
