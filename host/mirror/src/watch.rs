//! Whether a flow's two clusters answer, checked from a thread of its own so that a cluster that
//! went away is reported within seconds — once, with librdkafka's reason — whatever the flow's
//! own clients are waiting for. A cluster that does not answer a metadata request for
//! [`UNREACHABLE_AFTER`] is `unreachable`: the flow is `degraded` in `/health`, `/status`,
//! `refract status` and `refract_flow_state`, with one WARN; when it answers again, one INFO
//! names the outage's length (the flow adds the backlog once its lag is fresh).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use tracing::warn;

use refract_config::{ClientRole, Cluster, Side};

use crate::clock::now_ms;
use refract_kafka::clients::{client_config, Authenticated, Detached};

/// Between two checks of a cluster.
const CHECK_EVERY: Duration = Duration::from_secs(2);
/// How long one metadata request may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Failed checks in a row after which the watch replaces its client.
const FRESH_CLIENT_EVERY: u32 = 3;
/// How long a cluster may go without answering before it is reported unreachable.
pub const UNREACHABLE_AFTER: Duration = Duration::from_secs(5);

/// A cluster of a flow that does not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    /// Its alias.
    pub cluster: String,
    /// Which end of the flow it is.
    pub side: Side,
    /// Its bootstrap servers.
    pub bootstrap: String,
    /// Why, in librdkafka's words when it gave any.
    pub cause: String,
    /// Wall-clock ms since the epoch of the last answer (or of the first failed attempt).
    pub since_ms: i64,
}

impl Unreachable {
    /// `cluster a (source, 127.0.0.1:9092) unreachable: Connection refused`.
    pub fn summary(&self) -> String {
        format!(
            "cluster {} ({}, {}) unreachable: {}",
            self.cluster,
            self.side.as_str(),
            self.bootstrap,
            self.cause
        )
    }
}

/// What the watch tells the flow.
pub trait WatchSink: Send + Sync {
    /// The cluster stopped answering.
    fn unreachable(&self, u: Unreachable);
    /// The cluster answers again after `outage`.
    fn reachable(&self, cluster: &str, side: Side, outage: Duration);
}

/// Keeps librdkafka's last error of the watch's own client: the cause of an outage.
#[derive(Default)]
struct LastError(Mutex<Option<String>>);

impl ClientContext for LastError {
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        tracing::debug!(target: "librdkafka", "watch: {fac} {message}");
    }
    fn error(&self, error: KafkaError, reason: &str) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(cause_text(&error, reason));
    }
}

impl ConsumerContext for LastError {}

/// `Connect to ipv4#127.0.0.1:9092 failed: Connection refused` from `127.0.0.1:9092/bootstrap:
/// Connect to ipv4#127.0.0.1:9092 failed: Connection refused (after 0ms in state CONNECT)`; librdkafka's own text when it has no such
/// shape.
fn cause_text(error: &KafkaError, reason: &str) -> String {
    let reason = reason.trim();
    if reason.is_empty() {
        return error.to_string();
    }
    // Drop the "host:port/id: " prefix and the "(after Nms in state X…)" suffix.
    let body = reason
        .split_once(": ")
        .filter(|(head, _)| head.contains('/') && !head.contains(' '))
        .map_or(reason, |(_, rest)| rest);
    let body = body.split(" (after ").next().unwrap_or(body);
    body.trim().to_string()
}

/// One watched cluster.
struct Watched {
    side: Side,
    cluster: Cluster,
    client: Option<Detached<Authenticated<BaseConsumer<LastError>>>>,
    /// Checks that failed in a row.
    failures: u32,
    last_ok: Instant,
    down_since_ms: i64,
    reported: bool,
}

/// Watches `source` and `target` until `stop`, telling `sink` about outages.
pub fn run(
    flow: &str,
    source: &Cluster,
    target: &Cluster,
    sink: &dyn WatchSink,
    stop: &AtomicBool,
) {
    let now = Instant::now();
    let mut watched: Vec<Watched> = [(Side::Source, source), (Side::Target, target)]
        .into_iter()
        .map(|(side, cluster)| Watched {
            side,
            cluster: cluster.clone(),
            client: None,
            failures: 0,
            last_ok: now,
            down_since_ms: now_ms(),
            reported: false,
        })
        .collect();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        next = Instant::now() + CHECK_EVERY;
        for w in &mut watched {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            check(flow, w, sink);
        }
    }
}

fn check(flow: &str, w: &mut Watched, sink: &dyn WatchSink) {
    let attempt: Result<(), String> = (|| {
        if w.client.is_none() {
            let client = client_config(
                &w.cluster,
                ClientRole::Admin,
                &refract_config::names::watch_client(flow),
                &[],
                &[],
            )
            .create_with_context(LastError::default())
            .map_err(|e| e.to_string())?;
            w.client = Some(Detached::new(client));
        }
        let Some(client) = &w.client else {
            return Err("no client".into());
        };
        let answer = client.fetch_metadata(None, PROBE_TIMEOUT);
        // Serves the client's error events: librdkafka's reason for the failure.
        for _ in 0..16 {
            if client.poll(Duration::ZERO).is_none() {
                break;
            }
        }
        match answer {
            Ok(md) if !md.brokers().is_empty() => Ok(()),
            Ok(_) => Err("no broker in the metadata".into()),
            Err(e) => {
                let said = client
                    .context()
                    .0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                Err(match said {
                    Some(s) => s,
                    None if e.to_string().contains("Timed out") => format!(
                        "no answer to a metadata request within {} s",
                        PROBE_TIMEOUT.as_secs()
                    ),
                    None => e.to_string(),
                })
            }
        }
    })();
    match attempt {
        Ok(()) => {
            if w.reported {
                // The flow logs it, with the backlog, once its lag is fresh.
                sink.reachable(&w.cluster.alias, w.side, w.last_ok.elapsed());
                w.reported = false;
            }
            w.last_ok = Instant::now();
            w.failures = 0;
            w.down_since_ms = now_ms();
            if let Some(c) = &w.client {
                *c.context().0.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
        }
        Err(cause) => {
            // A connection wedged by a frozen broker can keep failing after the broker is back:
            // every few failed checks the watch starts over with a new client (closed off this
            // thread).
            w.failures += 1;
            if w.failures % FRESH_CLIENT_EVERY == 0 {
                w.client = None;
            }
            if !w.reported && w.last_ok.elapsed() >= UNREACHABLE_AFTER {
                w.reported = true;
                let u = Unreachable {
                    cluster: w.cluster.alias.clone(),
                    side: w.side,
                    bootstrap: w.cluster.bootstrap.clone(),
                    cause,
                    since_ms: w.down_since_ms,
                };
                warn!(flow = %flow, "{} for {:.0} s; the flow is degraded and resumes by itself when it answers", u.summary(), w.last_ok.elapsed().as_secs_f64());
                sink.unreachable(u);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_librdkafkas_reason_without_address_and_timing() {
        let e = KafkaError::Global(rdkafka::types::RDKafkaErrorCode::BrokerTransportFailure);
        assert_eq!(
            cause_text(
                &e,
                "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused (after 0ms in state CONNECT)"
            ),
            "Connect to ipv4#127.0.0.1:9092 failed: Connection refused"
        );
        assert_eq!(
            cause_text(&e, "1/1 brokers are down"),
            "1/1 brokers are down"
        );
        assert_eq!(cause_text(&e, ""), e.to_string());
    }
}
