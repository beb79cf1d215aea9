//! Reads a flow's source consumer through librdkafka's event API directly. rdkafka 0.39's
//! `BaseConsumer::poll` turns a consumer error into a bare error code, dropping the topic,
//! partition and offset librdkafka attaches to it (`rd_kafka_event_topic_partition`); refract
//! needs them to stop reading just the failing partition while the others keep flowing.
//!
//! The flow assigns its partitions itself (no subscription), so the consumer queue carries
//! fetched records, consumer errors, and, forwarded from the main queue, log lines and
//! statistics; those two go to the consumer's context exactly as rdkafka would hand them over.

use std::cell::OnceCell;
use std::ffi::{c_char, CStr};
use std::marker::PhantomData;
use std::time::Duration;

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::Timestamp;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka_sys as ffi;

use crate::headers::RawHeaders;

/// The consumer queue of one source consumer; must not outlive it (it borrows it).
pub struct SourceQueue<'c, C: ConsumerContext + 'static> {
    consumer: &'c BaseConsumer<C>,
    queue: *mut ffi::rd_kafka_queue_t,
}

/// One thing read from the source.
pub enum Polled<'c> {
    /// A record.
    Message(SourceMessage<'c>),
    /// A consumer error: for one partition when librdkafka names it, else for the consumer.
    Error(SourceError),
    /// An event with nothing for the caller (a log line, statistics): poll again.
    Other,
}

/// A consumer error as librdkafka reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceError {
    /// The error code.
    pub code: RDKafkaErrorCode,
    /// librdkafka's description (which broker, which offset, why).
    pub message: String,
    /// The topic and partition it concerns, when it concerns one.
    pub partition: Option<(String, i32)>,
    /// The offset it concerns, when known.
    pub offset: Option<i64>,
    /// Whether librdkafka considers the client unusable.
    pub fatal: bool,
}

impl<'c, C: ConsumerContext + 'static> SourceQueue<'c, C> {
    /// The queue `consumer` delivers records and errors on. `None` when librdkafka has none
    /// (a consumer without a group id).
    pub fn new(consumer: &'c BaseConsumer<C>) -> Option<Self> {
        // SAFETY: `consumer` is alive; the returned handle holds its own reference to the queue
        // and is released in `drop`, before the borrow of the consumer ends.
        let queue = unsafe { ffi::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        (!queue.is_null()).then_some(Self { consumer, queue })
    }

    /// Waits up to `timeout` for the next event.
    pub fn poll(&self, timeout: Duration) -> Option<Polled<'c>> {
        let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: the queue handle is valid while `self` lives; the event is destroyed exactly
        // once: by `SourceMessage::drop` for a record, here for everything else (after what is
        // needed was copied out of it).
        unsafe {
            let event = ffi::rd_kafka_queue_poll(self.queue, timeout_ms);
            if event.is_null() {
                return None;
            }
            let polled = match ffi::rd_kafka_event_type(event) {
                ffi::RD_KAFKA_EVENT_FETCH => {
                    let msg = ffi::rd_kafka_event_message_next(event);
                    if msg.is_null() {
                        Polled::Other
                    } else if (*msg).err != ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                        Polled::Error(message_error(msg))
                    } else {
                        return Some(Polled::Message(SourceMessage {
                            event,
                            msg,
                            headers: OnceCell::new(),
                            _consumer: PhantomData,
                        }));
                    }
                }
                ffi::RD_KAFKA_EVENT_ERROR => Polled::Error(event_error(event)),
                ffi::RD_KAFKA_EVENT_LOG => {
                    self.forward_log(event);
                    Polled::Other
                }
                ffi::RD_KAFKA_EVENT_STATS => {
                    let json = ffi::rd_kafka_event_stats(event);
                    if !json.is_null() {
                        self.consumer
                            .context()
                            .stats_raw(CStr::from_ptr(json).to_bytes());
                    }
                    Polled::Other
                }
                // Rebalances do not happen (partitions are assigned, not subscribed), commit
                // results are awaited on queues of their own, and the default context does not
                // refresh OAuth tokens either.
                _ => Polled::Other,
            };
            ffi::rd_kafka_event_destroy(event);
            Some(polled)
        }
    }

    /// Hands a librdkafka log line to the consumer's context, as rdkafka's own poll does.
    ///
    /// # Safety
    /// `event` must be a live log event.
    unsafe fn forward_log(&self, event: *mut ffi::rd_kafka_event_t) {
        let (mut fac, mut text, mut level): (*const c_char, *const c_char, i32) =
            (std::ptr::null(), std::ptr::null(), 0);
        if ffi::rd_kafka_event_log(event, &mut fac, &mut text, &mut level) == 0
            && !fac.is_null()
            && !text.is_null()
        {
            let level = match level {
                0 => RDKafkaLogLevel::Emerg,
                1 => RDKafkaLogLevel::Alert,
                2 => RDKafkaLogLevel::Critical,
                3 => RDKafkaLogLevel::Error,
                4 => RDKafkaLogLevel::Warning,
                5 => RDKafkaLogLevel::Notice,
                6 => RDKafkaLogLevel::Info,
                _ => RDKafkaLogLevel::Debug,
            };
            self.consumer.context().log(
                level,
                CStr::from_ptr(fac).to_string_lossy().trim(),
                CStr::from_ptr(text).to_string_lossy().trim(),
            );
        }
    }
}

impl<C: ConsumerContext + 'static> Drop for SourceQueue<'_, C> {
    fn drop(&mut self) {
        // SAFETY: the handle was obtained in `new` and is released once.
        unsafe { ffi::rd_kafka_queue_destroy(self.queue) };
    }
}

/// The error an error event carries, with its partition when it has one.
///
/// # Safety
/// `event` must be a live error event.
unsafe fn event_error(event: *mut ffi::rd_kafka_event_t) -> SourceError {
    let code = RDKafkaErrorCode::from(ffi::rd_kafka_event_error(event));
    let text = ffi::rd_kafka_event_error_string(event);
    let message = if text.is_null() {
        code.to_string()
    } else {
        CStr::from_ptr(text).to_string_lossy().into_owned()
    };
    let fatal = ffi::rd_kafka_event_error_is_fatal(event) != 0;
    let tp = ffi::rd_kafka_event_topic_partition(event);
    let (partition, offset) = if tp.is_null() {
        (None, None)
    } else {
        let topic = if (*tp).topic.is_null() {
            String::new()
        } else {
            CStr::from_ptr((*tp).topic).to_string_lossy().into_owned()
        };
        let found = ((topic, (*tp).partition), (*tp).offset);
        ffi::rd_kafka_topic_partition_destroy(tp);
        (Some(found.0), Some(found.1).filter(|o| *o >= 0))
    };
    SourceError {
        code,
        message,
        partition,
        offset,
        fatal,
    }
}

/// The error a fetched message carries instead of a record (its payload is the description).
///
/// # Safety
/// `msg` must be a live message of a live event.
unsafe fn message_error(msg: *const ffi::rd_kafka_message_t) -> SourceError {
    let m = &*msg;
    let code = RDKafkaErrorCode::from(m.err);
    let message = if m.payload.is_null() {
        code.to_string()
    } else {
        String::from_utf8_lossy(std::slice::from_raw_parts(m.payload as *const u8, m.len))
            .into_owned()
    };
    let partition = (!m.rkt.is_null()).then(|| {
        (
            CStr::from_ptr(ffi::rd_kafka_topic_name(m.rkt))
                .to_string_lossy()
                .into_owned(),
            m.partition,
        )
    });
    SourceError {
        code,
        message,
        partition,
        offset: Some(m.offset).filter(|o| *o >= 0),
        fatal: false,
    }
}

/// A record read from the source; its bytes live in librdkafka's event until it is dropped.
pub struct SourceMessage<'c> {
    event: *mut ffi::rd_kafka_event_t,
    msg: *const ffi::rd_kafka_message_t,
    /// Its headers, parsed on first use (librdkafka parses them anew on every request).
    headers: OnceCell<Option<RawHeaders<'c>>>,
    _consumer: PhantomData<&'c ()>,
}

impl Drop for SourceMessage<'_> {
    fn drop(&mut self) {
        // SAFETY: the event was handed over by `SourceQueue::poll` and is destroyed once; the
        // message belongs to it (librdkafka frees it with the event).
        unsafe { ffi::rd_kafka_event_destroy(self.event) };
    }
}

/// Bytes owned by librdkafka as a slice (`None` for a null pointer).
///
/// # Safety
/// `ptr` must point to `len` readable bytes that live as long as `'a`.
unsafe fn bytes<'a>(ptr: *const std::ffi::c_void, len: usize) -> Option<&'a [u8]> {
    (!ptr.is_null()).then(|| std::slice::from_raw_parts(ptr as *const u8, len))
}

impl SourceMessage<'_> {
    fn raw(&self) -> &ffi::rd_kafka_message_t {
        // SAFETY: the message lives as long as its event, which `self` owns.
        unsafe { &*self.msg }
    }

    /// The source topic.
    pub fn topic(&self) -> &str {
        // SAFETY: a fetched message always has its topic; its name lives as long as the
        // message. Kafka topic names are ASCII.
        unsafe { CStr::from_ptr(ffi::rd_kafka_topic_name(self.raw().rkt)) }
            .to_str()
            .unwrap_or_default()
    }

    /// The source partition.
    pub fn partition(&self) -> i32 {
        self.raw().partition
    }

    /// The source offset.
    pub fn offset(&self) -> i64 {
        self.raw().offset
    }

    /// The key (`None` for a null key).
    pub fn key(&self) -> Option<&[u8]> {
        // SAFETY: key and key_len describe bytes owned by the message.
        unsafe { bytes(self.raw().key, self.raw().key_len) }
    }

    /// The value (`None` for a tombstone).
    pub fn payload(&self) -> Option<&[u8]> {
        // SAFETY: payload and len describe bytes owned by the message.
        unsafe { bytes(self.raw().payload, self.raw().len) }
    }

    /// The timestamp and its type.
    pub fn timestamp(&self) -> Timestamp {
        let mut kind = ffi::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        // SAFETY: the message is alive; `kind` is a valid out-pointer.
        let ts = unsafe { ffi::rd_kafka_message_timestamp(self.msg, &mut kind) };
        match kind {
            _ if ts == -1 => Timestamp::NotAvailable,
            ffi::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_CREATE_TIME => {
                Timestamp::CreateTime(ts)
            }
            ffi::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME => {
                Timestamp::LogAppendTime(ts)
            }
            ffi::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE => {
                Timestamp::NotAvailable
            }
        }
    }

    /// The headers, `None` when the record has none. Names are bytes: see [`crate::headers`].
    pub fn headers(&self) -> Option<RawHeaders<'_>> {
        *self.headers.get_or_init(|| {
            let mut hdrs = std::ptr::null_mut();
            // SAFETY: the message is alive; `hdrs` is a valid out-pointer and the headers
            // it receives belong to the message (freed with its event).
            let err = unsafe { ffi::rd_kafka_message_headers(self.msg, &mut hdrs) };
            (err == ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && !hdrs.is_null())
                // SAFETY: non-null and owned by the message, which outlives the borrow.
                .then(|| unsafe { RawHeaders::from_ptr(hdrs) })
        })
    }
}
