//! The offset-independent checksum `verify` keeps per partition: key, value, timestamp and
//! headers of every record in order, each field self-delimiting.

use std::fmt;

use rdkafka::message::BorrowedMessage;
use rdkafka::Message;
use refract_kafka::headers::{RawHeader, RawHeaders};
use sha2::{Digest, Sha256};

use crate::PROVENANCE_HEADER;

/// A running, offset-independent checksum over records in order.
#[derive(Clone, Default)]
pub struct Checksum {
    hasher: Sha256,
}

/// The final value of a [`Checksum`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sum(pub [u8; 32]);

impl fmt::Display for Sum {
    /// The first 64 bits in hex: enough to tell two sums apart by eye.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Sum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Checksum {
    /// An empty checksum.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one record. `headers` in their order; the provenance header is skipped.
    pub fn add<'a>(
        &mut self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        timestamp: Option<i64>,
        headers: impl IntoIterator<Item = RawHeader<'a>>,
    ) {
        // Every field is self-delimiting (a presence tag, then a length), so no two different
        // records, or runs of records, feed the hasher the same bytes.
        self.bytes(key);
        self.bytes(value);
        match timestamp {
            None => self.hasher.update([0]),
            Some(t) => {
                self.hasher.update([1]);
                self.hasher.update(t.to_be_bytes());
            }
        }
        for h in headers {
            if h.key == PROVENANCE_HEADER.as_bytes() {
                continue;
            }
            self.hasher.update([1]);
            self.bytes(Some(h.key));
            self.bytes(h.value);
        }
        self.hasher.update([0]);
    }

    /// Adds a record as read from Kafka.
    pub fn add_message(&mut self, m: &BorrowedMessage<'_>) {
        let headers = RawHeaders::of_message(m);
        self.add(
            m.key(),
            m.payload(),
            m.timestamp().to_millis(),
            headers.iter().flat_map(|h| h.iter()),
        );
    }

    /// The checksum of everything added.
    pub fn finish(&self) -> Sum {
        Sum(self.hasher.clone().finalize().into())
    }

    fn bytes(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.hasher.update([0]),
            Some(b) => {
                self.hasher.update([1]);
                self.hasher.update((b.len() as u64).to_be_bytes());
                self.hasher.update(b);
            }
        }
    }
}
