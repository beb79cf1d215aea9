//! Keeps librdkafka's per-retry noise out of the log. librdkafka reports every failed connection
//! attempt of every client (several per second per client while a cluster is down) as an error;
//! refract reports a cluster that cannot be reached itself, once when it goes and once when it
//! is back. So, unless `RUST_LOG` asks for librdkafka by name:
//! - connection-level messages from librdkafka (refused, reset, timed out, all brokers down, …)
//!   are dropped, and so are signals it reports as errors that are none (a reader that asked to
//!   be told of a partition's end, closed while one more such event was on its way);
//! - any other librdkafka warning or error is written once per 10 minutes per text (numbers
//!   ignored, so a port or a count does not make a line new).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// How long a librdkafka message is not repeated.
const REPEAT_AFTER: Duration = Duration::from_secs(600);
/// Most distinct messages remembered.
const MAX_REMEMBERED: usize = 1024;

/// Words of librdkafka messages about connections coming and going.
const CONNECTION_NOISE: &[&str] = &[
    "connection refused",
    "connect to ",
    "connection reset",
    "connection closed",
    "disconnected",
    "brokers are down",
    "all broker connections are down",
    "broker transport failure",
    "receive failed",
    "send failed",
    "timed out",
    "failed to resolve",
    "no route to host",
    "broken pipe",
    "_transport",
    "_all_brokers_down",
    "coordinator load in progress",
    "coordinator not available",
    "not coordinator",
    "findcoordinator",
    "failed to query logical offset",
    "failed to get committed offsets",
    "leader not available",
];

/// Words of librdkafka "errors" that are signals refract asked for, not failures.
const NOT_FAILURES: &[&str] = &["reached end of partition"];

/// The layer: vetoes librdkafka's noise before any other layer sees it.
pub struct Quiet {
    /// `RUST_LOG` names librdkafka: everything passes.
    verbose: bool,
    seen: Mutex<HashMap<String, Instant>>,
}

impl Quiet {
    /// Quiet unless `filter` (the `RUST_LOG` text) mentions librdkafka or rdkafka.
    pub fn new(filter: &str) -> Self {
        Self {
            verbose: filter.contains("rdkafka"),
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Whether an event with this target, level and message is written.
    fn keep(&self, target: &str, level: Level, message: &str) -> bool {
        if self.verbose || !(target == "librdkafka" || target.starts_with("rdkafka")) {
            return true;
        }
        if level > Level::INFO {
            // debug and trace: as the filter says.
            return true;
        }
        let lower = message.to_ascii_lowercase();
        if CONNECTION_NOISE
            .iter()
            .chain(NOT_FAILURES)
            .any(|w| lower.contains(w))
        {
            return false;
        }
        let key: String = lower
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = seen.get(&key) {
            if now.duration_since(*at) < REPEAT_AFTER {
                return false;
            }
        }
        if seen.len() >= MAX_REMEMBERED {
            seen.retain(|_, at| now.duration_since(*at) < REPEAT_AFTER);
        }
        seen.insert(key, now);
        true
    }
}

/// The `message` field of an event.
#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        }
    }
}

impl<S: Subscriber> Layer<S> for Quiet {
    fn event_enabled(&self, event: &Event<'_>, _ctx: Context<'_, S>) -> bool {
        let meta = event.metadata();
        let target = meta.target();
        if self.verbose || !(target == "librdkafka" || target.starts_with("rdkafka")) {
            return true;
        }
        let mut message = Message::default();
        event.record(&mut message);
        self.keep(target, *meta.level(), &message.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_noise_is_dropped_and_the_rest_written_once() {
        let q = Quiet::new("info");
        let refused = "librdkafka: Global error: BrokerTransportFailure (Local: Broker transport failure): 127.0.0.1:9092/1: Connect to ipv4#127.0.0.1:9092 failed: Connection refused (after 0ms in state CONNECT)";
        assert!(!q.keep("rdkafka::client", Level::ERROR, refused));
        assert!(!q.keep(
            "rdkafka::client",
            Level::ERROR,
            "librdkafka: Global error: AllBrokersDown (Local: All broker connections are down): 1/1 brokers are down"
        ));
        let fatal = "librdkafka: FATAL Fatal error: Broker: Cluster authorization failed: Failed to acquire idempotence PID from broker 127.0.0.1:9093/1";
        assert!(q.keep("librdkafka", Level::ERROR, fatal));
        assert!(!q.keep("librdkafka", Level::ERROR, fatal), "once");
        assert!(
            !q.keep(
                "librdkafka",
                Level::ERROR,
                &fatal.replace("9093/1", "9094/2")
            ),
            "numbers do not make a message new"
        );
        let eof = "librdkafka: Global error: PartitionEOF (Broker: No more messages): Fetch from broker 1 reached end of partition at offset 202 (HighwaterMark 202)";
        assert!(!q.keep("rdkafka::client", Level::ERROR, eof));
        // Debug lines and refract's own lines are the filter's business.
        assert!(q.keep("rdkafka::client", Level::DEBUG, refused));
        assert!(q.keep("refract_mirror::flow", Level::WARN, refused));
        assert!(q.keep("refract_mirror::flow", Level::WARN, refused));
    }

    #[test]
    fn rust_log_naming_librdkafka_keeps_everything() {
        let q = Quiet::new("info,librdkafka=debug");
        let refused = "Connect to ipv4#127.0.0.1:9092 failed: Connection refused";
        assert!(q.keep("rdkafka::client", Level::ERROR, refused));
        assert!(q.keep("rdkafka::client", Level::ERROR, refused));
    }
}
