//! Records as a C client writes and reads them, through librdkafka's C API directly. Kafka header
//! names are bytes on the wire and C clients may write any; rdkafka's Rust types take and give
//! only UTF-8 names (and panic reading others), so tests that need such a record write it here
//! and read it back here, independently of refract's own header code.

use std::ffi::{c_char, c_void, CStr, CString};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::BorrowedMessage;
use rdkafka::{Message, Offset, TopicPartitionList};
use rdkafka_sys as ffi;

use crate::wait::DEADLINE;
use crate::Broker;

/// A header as bytes: name, value (`None`: null).
pub type RawHeader = (Vec<u8>, Option<Vec<u8>>);

/// Every header of a read message, names as bytes.
pub fn message_headers(m: &BorrowedMessage<'_>) -> Vec<RawHeader> {
    let mut hdrs = std::ptr::null_mut();
    // SAFETY: the message is alive; `hdrs` receives headers the message owns.
    let err = unsafe { ffi::rd_kafka_message_headers(m.ptr(), &mut hdrs) };
    if err != ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || hdrs.is_null() {
        return Vec::new();
    }
    // SAFETY: `hdrs` is valid while the message lives.
    let n = unsafe { ffi::rd_kafka_header_cnt(hdrs) };
    (0..n)
        .map(|i| {
            let (mut name, mut value, mut size) = (std::ptr::null(), std::ptr::null(), 0usize);
            // SAFETY: as above; the out-pointers receive pointers into the list.
            unsafe {
                let err = ffi::rd_kafka_header_get_all(hdrs, i, &mut name, &mut value, &mut size);
                assert_eq!(err, ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
                (
                    CStr::from_ptr(name).to_bytes().to_vec(),
                    (!value.is_null())
                        .then(|| std::slice::from_raw_parts(value as *const u8, size).to_vec()),
                )
            }
        })
        .collect()
}

impl Broker {
    /// Produces one record to `topic` partition `partition` as a C client does
    /// (`rd_kafka_producev` with `RD_KAFKA_VTYPE_HEADER` entries, names of any bytes), and waits
    /// for it to be acknowledged.
    pub fn produce_c_api(
        &self,
        topic: &str,
        partition: i32,
        value: &[u8],
        headers: &[(&[u8], Option<&[u8]>)],
    ) {
        let conf = [
            ("bootstrap.servers", self.bootstrap.as_str()),
            ("acks", "all"),
        ];
        let mut err = [0 as c_char; 512];
        // SAFETY: plain librdkafka set-up; every string is NUL-terminated and outlives the call;
        // the handle is destroyed below after a flush.
        unsafe {
            let c = ffi::rd_kafka_conf_new();
            for (k, v) in conf {
                let (k, v) = (CString::new(k).unwrap(), CString::new(v).unwrap());
                let r = ffi::rd_kafka_conf_set(c, k.as_ptr(), v.as_ptr(), err.as_mut_ptr(), 512);
                assert_eq!(r, ffi::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK);
            }
            let rk = ffi::rd_kafka_new(
                ffi::rd_kafka_type_t::RD_KAFKA_PRODUCER,
                c,
                err.as_mut_ptr(),
                512,
            );
            assert!(!rk.is_null(), "rd_kafka_new");
            let hdrs = ffi::rd_kafka_headers_new(headers.len());
            for (name, value) in headers {
                let (vp, vl) = match value {
                    None => (std::ptr::null(), 0),
                    Some(v) => (v.as_ptr() as *const c_void, v.len() as isize),
                };
                let r = ffi::rd_kafka_header_add(
                    hdrs,
                    name.as_ptr() as *const c_char,
                    name.len() as isize,
                    vp,
                    vl,
                );
                assert_eq!(r, ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
            }
            let topic_c = CString::new(topic).unwrap();
            // On success librdkafka owns the header list.
            let r = ffi::rd_kafka_producev(
                rk,
                ffi::rd_kafka_vtype_t::RD_KAFKA_VTYPE_TOPIC,
                topic_c.as_ptr(),
                ffi::rd_kafka_vtype_t::RD_KAFKA_VTYPE_PARTITION,
                partition,
                ffi::rd_kafka_vtype_t::RD_KAFKA_VTYPE_VALUE,
                value.as_ptr() as *mut c_void,
                value.len(),
                ffi::rd_kafka_vtype_t::RD_KAFKA_VTYPE_MSGFLAGS,
                ffi::RD_KAFKA_MSG_F_COPY,
                ffi::rd_kafka_vtype_t::RD_KAFKA_VTYPE_HEADERS,
                hdrs,
                ffi::rd_kafka_vtype_t::RD_KAFKA_VTYPE_END,
            );
            assert_eq!(r, ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
            let r = ffi::rd_kafka_flush(rk, 30_000);
            assert_eq!(r, ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
            ffi::rd_kafka_destroy(rk);
        }
    }

    /// The headers of every record of `topic`, per partition, in offset order, names as bytes.
    pub fn read_headers_c_api(&self, topic: &str) -> Vec<Vec<Vec<RawHeader>>> {
        let counts = self.counts(topic);
        let c: BaseConsumer = self.consumer();
        let mut tpl = TopicPartitionList::new();
        for p in 0..counts.len() as i32 {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .expect("tpl");
        }
        c.assign(&tpl).expect("assign");
        let mut out = vec![Vec::new(); counts.len()];
        let deadline = Instant::now() + DEADLINE;
        while out.iter().zip(&counts).any(|(o, n)| (o.len() as i64) < *n) {
            assert!(Instant::now() < deadline, "timed out reading {topic}");
            if let Some(m) = c.poll(Duration::from_millis(200)) {
                let m = m.expect("read");
                out[m.partition() as usize].push(message_headers(&m));
            }
        }
        out
    }
}
