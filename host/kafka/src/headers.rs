//! Record headers as bytes. A Kafka header name is a byte string on the wire; Java clients write
//! UTF-8, but a C client may write any bytes. rdkafka 0.39 types header names as `&str`: its
//! `Headers::iter` panics on a name that is not UTF-8 (`BorrowedHeaders::try_get` unwraps the
//! conversion, and its `get` panics when `try_get` says no), and `OwnedHeaders::insert` takes
//! only `&str` names. One such record would halt a flow, and halt it again after every restart.
//! Everything in refract that reads or writes headers goes through here instead, name bytes and
//! all, so such a record is mirrored byte for byte.

use std::ffi::{c_char, c_void, CStr};
use std::marker::PhantomData;

use rdkafka::message::{BorrowedHeaders, BorrowedMessage, OwnedHeaders};
use rdkafka_sys as ffi;

/// One header: its name's bytes and its value (`None` is a null value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawHeader<'a> {
    /// The name, as written (usually, not always, UTF-8).
    pub key: &'a [u8],
    /// The value; `None` is a null value.
    pub value: Option<&'a [u8]>,
}

/// A record's headers, borrowed from the message that holds them.
#[derive(Debug, Clone, Copy)]
pub struct RawHeaders<'a> {
    ptr: *const ffi::rd_kafka_headers_t,
    _owner: PhantomData<&'a ()>,
}

impl<'a> RawHeaders<'a> {
    /// # Safety
    /// `ptr` must be a valid, non-null header list that lives (unchanged) as long as `'a`.
    pub(crate) unsafe fn from_ptr(ptr: *const ffi::rd_kafka_headers_t) -> Self {
        Self {
            ptr,
            _owner: PhantomData,
        }
    }

    /// The headers of a message a consumer returned; `None` when it has none.
    pub fn of_message(m: &'a BorrowedMessage<'_>) -> Option<Self> {
        let mut hdrs = std::ptr::null_mut();
        // SAFETY: the message is alive for `'a`; `hdrs` is a valid out-pointer and receives
        // headers the message owns (parsed on demand, freed with the message).
        let err = unsafe { ffi::rd_kafka_message_headers(m.ptr(), &mut hdrs) };
        (err == ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && !hdrs.is_null())
            // SAFETY: non-null, owned by the message borrowed for `'a`.
            .then(|| unsafe { Self::from_ptr(hdrs) })
    }

    /// The headers held by an owned list.
    pub fn of_owned(h: &'a OwnedHeaders) -> Self {
        // SAFETY: see `native`; the list lives as long as the borrow.
        unsafe { Self::from_ptr(native(h.as_borrowed())) }
    }

    /// How many headers there are.
    pub fn count(&self) -> usize {
        // SAFETY: the list is valid for `'a`.
        unsafe { ffi::rd_kafka_header_cnt(self.ptr) }
    }

    /// The headers in order.
    pub fn iter(&self) -> impl Iterator<Item = RawHeader<'a>> + 'a {
        let this = *self;
        (0..this.count()).filter_map(move |i| this.get(i))
    }

    /// The value of the last header named `key` (`Some(None)`: present with a null value).
    pub fn last(&self, key: &str) -> Option<Option<&'a [u8]>> {
        self.iter()
            .filter(|h| h.key == key.as_bytes())
            .last()
            .map(|h| h.value)
    }

    fn get(&self, idx: usize) -> Option<RawHeader<'a>> {
        let (mut name, mut value, mut size) = (std::ptr::null(), std::ptr::null(), 0usize);
        // SAFETY: the list is valid for `'a`; the out-pointers are valid and receive pointers
        // into the list: a NUL-terminated name and `size` value bytes (null for a null value).
        unsafe {
            let err = ffi::rd_kafka_header_get_all(self.ptr, idx, &mut name, &mut value, &mut size);
            if err != ffi::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
                return None;
            }
            Some(RawHeader {
                key: CStr::from_ptr(name).to_bytes(),
                value: (!value.is_null())
                    .then(|| std::slice::from_raw_parts(value as *const u8, size)),
            })
        }
    }
}

/// The librdkafka header list behind rdkafka's `BorrowedHeaders`. rdkafka 0.39 makes a
/// `&BorrowedHeaders` by casting the `rd_kafka_headers_t` pointer (`BorrowedHeaders` is a
/// zero-sized marker), so the reference's address is the list itself; `Cargo.lock` pins that
/// version and the round-trip test below checks it.
fn native(h: &BorrowedHeaders) -> *mut ffi::rd_kafka_headers_t {
    h as *const BorrowedHeaders as *mut ffi::rd_kafka_headers_t
}

/// Appends a header whose name is any bytes (rdkafka's `insert` takes only UTF-8 names).
pub fn push(headers: OwnedHeaders, key: &[u8], value: Option<&[u8]>) -> OwnedHeaders {
    let (value_ptr, value_len) = match value {
        None => (std::ptr::null(), 0),
        Some(v) => (v.as_ptr() as *const c_void, v.len() as isize),
    };
    // SAFETY: the list is the owned, writable one `headers` holds; librdkafka copies the name
    // and value bytes before returning. Adding fails only on a read-only list (one a message
    // owns), which an `OwnedHeaders` never is.
    unsafe {
        ffi::rd_kafka_header_add(
            native(headers.as_borrowed()),
            key.as_ptr() as *const c_char,
            key.len() as isize,
            value_ptr,
            value_len,
        );
    }
    headers
}

/// An owned copy of `headers`, names as bytes, optionally without those named `skip`.
pub fn copy<'h>(
    headers: impl IntoIterator<Item = RawHeader<'h>>,
    capacity: usize,
    skip: Option<&str>,
) -> OwnedHeaders {
    headers
        .into_iter()
        .filter(|h| skip.is_none_or(|s| h.key != s.as_bytes()))
        .fold(OwnedHeaders::new_with_capacity(capacity), |out, h| {
            push(out, h.key, h.value)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_utf8_round_trip_byte_for_byte() {
        let names: [&[u8]; 4] = [b"plain", b"\xff\xfe", b"caf\xc3\xa9", b"half \xe2\x82"];
        let mut h = OwnedHeaders::new();
        for (i, n) in names.iter().enumerate() {
            h = push(h, n, (i % 2 == 0).then_some(&b"v"[..]));
        }
        let raw = RawHeaders::of_owned(&h);
        assert_eq!(raw.count(), 4);
        let read: Vec<_> = raw.iter().collect();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(read[i].key, *n);
            assert_eq!(read[i].value, (i % 2 == 0).then_some(&b"v"[..]));
        }
        // A copy keeps every name and can leave one out.
        let c = copy(raw.iter(), 4, Some("plain"));
        let copied: Vec<_> = RawHeaders::of_owned(&c).iter().map(|h| h.key).collect();
        assert_eq!(copied, &names[1..]);
        assert_eq!(
            RawHeaders::of_owned(&h).last("plain"),
            Some(Some(&b"v"[..]))
        );
        assert_eq!(RawHeaders::of_owned(&h).last("absent"), None);
    }

    #[test]
    fn a_name_and_an_empty_value_differ_from_a_null_one() {
        let h = push(push(OwnedHeaders::new(), b"a", Some(b"")), b"b", None);
        let read: Vec<_> = RawHeaders::of_owned(&h).iter().collect();
        assert_eq!(read[0].value, Some(&b""[..]));
        assert_eq!(read[1].value, None);
    }
}
