//! Requests rdkafka 0.39 does not wrap (ListConsumerGroups, DescribeAcls, CreateAcls) or wraps
//! only without a time limit (a synchronous offset commit), made through librdkafka directly:
//! one place owns the queue/options/event lifecycle.

use std::ffi::CStr;
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
pub(crate) fn commit_within<C: ConsumerContext>(
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
