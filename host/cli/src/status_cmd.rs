//! `refract status`: one screen per flow from the running process (`/status` on the pipeline's
//! `[metrics] listen` address), or, when no process answers, the lag read from the clusters.
//! Exits 1 when the running process is not healthy (a flow not running, a degraded partition).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

use refract_config::{ClientRole, Pipeline};
use refract_kafka::clients::{client_config, Authenticated};

const TIMEOUT: Duration = Duration::from_secs(10);

/// `refract status`.
#[derive(clap::Args)]
pub struct Status {
    /// The pipeline file.
    #[arg(long)]
    config: PathBuf,
    /// The running process's metrics address, when it is not the pipeline's `[metrics] listen`
    /// (a port 0 there, an address behind a proxy).
    #[arg(long)]
    addr: Option<String>,
}

/// `GET path` from the endpoint at `addr`; over HTTPS when the pipeline serves it so, trusting
/// exactly the certificate the pipeline names (it is this process's own, whoever issued it).
fn get(addr: &str, path: &str, tls: Option<&refract_config::EndpointTls>) -> Result<String> {
    let tcp = std::net::TcpStream::connect_timeout(
        &addr.parse().context("address")?,
        Duration::from_secs(2),
    )?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut out = String::new();
    match tls {
        None => {
            let mut s = tcp;
            s.write_all(request.as_bytes())?;
            s.read_to_string(&mut out)?;
        }
        Some(tls) => {
            use openssl::ssl::{SslConnector, SslMethod};
            use openssl::x509::verify::X509VerifyFlags;
            let mut builder = SslConnector::builder(SslMethod::tls_client())?;
            builder
                .set_ca_file(&tls.cert)
                .with_context(|| format!("reading {}", tls.cert.display()))?;
            builder
                .verify_param_mut()
                .set_flags(X509VerifyFlags::PARTIAL_CHAIN)?;
            let mut s = builder
                .build()
                .configure()?
                .verify_hostname(false)
                .connect("refract", tcp)
                .map_err(|e| anyhow::anyhow!("TLS handshake with {addr}: {e}"))?;
            s.write_all(request.as_bytes())?;
            // A peer that closes without close_notify still sent the whole answer.
            let _ = s.read_to_string(&mut out);
        }
    }
    Ok(out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

impl Status {
    pub fn run(&self) -> Result<()> {
        let pipeline = Pipeline::load(&self.config)?;
        let addr = self
            .addr
            .clone()
            .or_else(|| pipeline.metrics_listen.map(|a| a.to_string()));
        if let Some(addr) = addr {
            let tls = pipeline.endpoint.tls.as_ref();
            match get(&addr, "/status", tls) {
                Ok(first) => {
                    // Two samples a second apart give the rates.
                    std::thread::sleep(Duration::from_secs(1));
                    let second = get(&addr, "/status", tls).unwrap_or_else(|_| first.clone());
                    let a: Value = serde_json::from_str(&first).context("parsing /status")?;
                    let b: Value = serde_json::from_str(&second).context("parsing /status")?;
                    let (text, healthy) = render_live(&addr, &a, &b);
                    print!("{text}");
                    if !healthy {
                        // Like `refract verify`: 1 means "answered, and the answer is bad".
                        std::io::stdout().flush().context("writing the status")?;
                        std::process::exit(1);
                    }
                    return Ok(());
                }
                Err(e) => println!("no refract answers on {addr} ({e}); reading the clusters\n"),
            }
        } else {
            println!(
                "no [metrics] listen in {}: reading the clusters\n",
                self.config.display()
            );
        }
        self.offline(&pipeline)
    }

    /// Lag per mirrored partition from the flow's committed progress on the source.
    fn offline(&self, pipeline: &Pipeline) -> Result<()> {
        for flow in &pipeline.flows {
            let source = &pipeline.clusters[&flow.source];
            let group = refract_mirror::progress_group(flow);
            let consumer: Authenticated<BaseConsumer> = client_config(
                source,
                ClientRole::Consumer,
                refract_config::names::STATUS_CLIENT,
                &[],
                &[
                    ("group.id", group.as_str()),
                    ("enable.auto.commit", "false"),
                ],
            )
            .create()
            .with_context(|| format!("connecting to {}", flow.source))?;
            let metadata = consumer.fetch_metadata(None, TIMEOUT)?;
            let mut tpl = TopicPartitionList::new();
            for t in metadata.topics() {
                if flow.topics.should_replicate(t.name()) {
                    for p in t.partitions() {
                        tpl.add_partition(t.name(), p.id());
                    }
                }
            }
            println!(
                "flow {}  (state unknown: no running process answered)",
                flow.name()
            );
            if tpl.count() == 0 {
                println!("  no matching topics on {}", flow.source);
                continue;
            }
            let committed = consumer.committed_offsets(tpl, TIMEOUT)?;
            let mut total = 0i64;
            for e in committed.elements() {
                let (low, high) = consumer.fetch_watermarks(e.topic(), e.partition(), TIMEOUT)?;
                let done = match e.offset() {
                    Offset::Offset(o) => o,
                    _ => low,
                };
                let lag = (high - done).max(0);
                total += lag;
                println!("  {}[{}]  lag {lag}", e.topic(), e.partition());
            }
            println!("  total lag {total} records\n");
        }
        Ok(())
    }
}

/// The running process's status as `refract status` prints it, from two `/status` answers a
/// second apart (the rates), and whether it is healthy.
pub(crate) fn render_live(addr: &str, first: &Value, second: &Value) -> (String, bool) {
    use std::fmt::Write as _;
    let mut out = String::new();
    // Writing to a String cannot fail.
    macro_rules! say {
        ($($arg:tt)*) => {
            let _ = writeln!(out, $($arg)*);
        };
    }
    let healthy = second["healthy"] == true;
    say!(
        "refract at {addr}: {}  (reloads ok {}, rejected {})",
        if healthy { "healthy" } else { "NOT healthy" },
        second["reloads"]["ok"],
        second["reloads"]["rejected"]
    );
    let empty = Vec::new();
    for flow in second["flows"].as_array().unwrap_or(&empty) {
        let name = flow["flow"].as_str().unwrap_or("?");
        let before = first["flows"]
            .as_array()
            .and_then(|f| f.iter().find(|x| x["flow"] == flow["flow"]))
            .and_then(|f| f["records_sent"].as_u64())
            .unwrap_or(0);
        let rate = flow["records_sent"]
            .as_u64()
            .unwrap_or(0)
            .saturating_sub(before);
        out.push('\n');
        say!("flow {name}: {}", flow["state"].as_str().unwrap_or("?"));
        say!(
            "  records sent {}  ({rate} rec/s)  filtered {}  skipped {}  dead-lettered {}  looped {}  restarts {}  plugin swaps {}",
            flow["records_sent"], flow["records_filtered"], flow["records_skipped"], flow["records_dead_lettered"], flow["records_looped"], flow["restarts"], flow["plugin_swaps"]
        );
        say!(
            "  offset syncs {}  checkpoints {}  heartbeats {}  group offsets synced {}",
            flow["offset_syncs"],
            flow["checkpoints"],
            flow["heartbeats"],
            flow["group_offsets_synced"]
        );
        let committed = flow["transactions_committed"].as_u64().unwrap_or(0);
        let aborted = flow["transactions_aborted"].as_u64().unwrap_or(0);
        if committed + aborted > 0 {
            say!("  exactly-once: transactions committed {committed}  aborted {aborted}");
        }
        let throttled_ms = flow["throttled_ms"].as_u64().unwrap_or(0);
        if throttled_ms > 0 {
            say!(
                "  throttled {:.1} s in all (max_bytes_per_second / max_records_per_second)",
                throttled_ms as f64 / 1000.0
            );
        }
        if let Some(other) = flow["held_elsewhere"].as_str() {
            say!("  STANDBY: {other}");
        }
        if let Some(s) = flow["schemas"].as_object() {
            say!(
                "  schemas: translated {}  registered {}  subjects synced {}  ({} -> {})",
                s["translated"],
                s["registered"],
                s["synced_subjects"],
                s["source_registry"].as_str().unwrap_or("?"),
                s["target_registry"].as_str().unwrap_or("?")
            );
            for (side, key) in [("source", "source_down"), ("target", "target_down")] {
                if let Some(why) = s[key].as_str() {
                    say!("  SCHEMA REGISTRY ({side}) FAILING: {why}");
                }
            }
        }
        if let Some(c) = flow["cluster"].as_object() {
            say!(
                "  cluster: group {}  this process {} holds tasks {}{}  rebalances {}",
                c["group"].as_str().unwrap_or("?"),
                c["instance"].as_str().unwrap_or("?"),
                flow["tasks"],
                if c["duties"] == true {
                    " (runs the flow's duties)"
                } else {
                    ""
                },
                c["rebalances"]
            );
            if let Some(e) = c["error"].as_str() {
                say!("  NOT IN THE GROUP: {e}");
            }
            for m in c["members"].as_array().unwrap_or(&empty) {
                let lag = m["lag"]
                    .as_i64()
                    .map_or_else(|| "unknown".to_string(), |l| l.to_string());
                say!(
                    "    member {} ({}): tasks {}  partitions {}  lag {lag}",
                    m["instance"].as_str().unwrap_or("?"),
                    m["host"].as_str().unwrap_or("?"),
                    m["tasks"],
                    m["partitions"]
                );
            }
            if let Some(e) = c["members_error"].as_str() {
                say!("    members unknown: {e}");
            }
        }
        if let Some(topics) = flow["topics"].as_object() {
            for (source, remote) in topics {
                say!("  {source} -> {}", remote.as_str().unwrap_or("?"));
            }
        }
        for u in flow["unreachable"].as_array().unwrap_or(&empty) {
            say!(
                "  UNREACHABLE cluster {} ({}, {}): {}",
                u["cluster"].as_str().unwrap_or("?"),
                u["role"].as_str().unwrap_or("?"),
                u["bootstrap"].as_str().unwrap_or("?"),
                u["cause"].as_str().unwrap_or("?")
            );
        }
        if let Some(why) = flow["stalled"].as_str() {
            say!("  STALLED: {why}");
        }
        if let Some(why) = flow["checkpoints_failing"].as_str() {
            say!("  CHECKPOINTS FAILING: {why}");
        }
        if let Some(why) = flow["lag_unknown"].as_str() {
            say!("  lag unknown: {why}");
        } else if let Some(lag) = flow["lag"].as_object() {
            let total: i64 = lag.values().filter_map(Value::as_i64).sum();
            say!("  lag {total} records over {} partitions", lag.len());
            for (partition, n) in lag.iter().filter(|(_, n)| n.as_i64().unwrap_or(0) > 0) {
                say!("    {partition}  {n}");
            }
        }
        for d in flow["degraded"].as_array().unwrap_or(&empty) {
            say!("  DEGRADED {}", degraded_line(d));
        }
        let lost = flow["records_lost"].as_u64().unwrap_or(0);
        if lost > 0 {
            say!("  records lost at the source before they were mirrored: {lost}");
        }
        for l in flow["lost"].as_array().unwrap_or(&empty) {
            say!("  LOST {}", lost_line(l));
        }
        if let Some(e) = flow["halted"].as_str() {
            say!("  HALTED: {e}");
        }
        if let Some(e) = flow["last_error"].as_str() {
            say!("  last error: {e}");
        }
    }
    (out, healthy)
}

/// One `/status` degraded entry: `big[0] record_too_large at offset 42 for 2m5s (3 failed
/// retries): Broker: Message size too large`.
fn degraded_line(d: &Value) -> String {
    let what = match (d["topic"].as_str(), d["partition"].as_i64()) {
        (Some(t), Some(p)) => format!("{t}[{p}]"),
        _ => "source reads".to_string(),
    };
    let at = d["offset"]
        .as_i64()
        .map(|o| format!(" at offset {o}"))
        .unwrap_or_default();
    let since = d["since_ms"]
        .as_i64()
        .map(|ms| format!(" for {}", age(ms)))
        .unwrap_or_default();
    format!(
        "{what} {}{at}{since} ({} failed retries): {}",
        d["reason"].as_str().unwrap_or("?"),
        d["retries"].as_u64().unwrap_or(0),
        d["error"].as_str().unwrap_or("?")
    )
}

/// One `/status` lost entry: `orders[0] 50 records (offsets 100..=149) deleted at the source
/// before they were mirrored, 2m5s ago`.
fn lost_line(l: &Value) -> String {
    let since = l["since_ms"]
        .as_i64()
        .map(|ms| format!(", {} ago", age(ms)))
        .unwrap_or_default();
    format!(
        "{}[{}] {} records (offsets {}..={}) deleted at the source before they were mirrored{since}",
        l["topic"].as_str().unwrap_or("?"),
        l["partition"],
        l["count"],
        l["first"],
        l["last"]
    )
}

/// How long ago `since_ms` (wall-clock ms) was, as `1h2m`, `3m4s` or `5s`.
fn age(since_ms: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let s = ((now - since_ms) / 1000).max(0);
    match s {
        s if s >= 3600 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m{}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degraded_entries_name_partition_reason_offset_and_retries() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let d = serde_json::json!({"topic": "big", "partition": 0, "reason": "record_too_large",
            "error": "Broker: Message size too large", "since_ms": now - 125_000, "retries": 3,
            "offset": 42});
        assert_eq!(
            degraded_line(&d),
            "big[0] record_too_large at offset 42 for 2m5s (3 failed retries): Broker: Message size too large"
        );
        let reads = serde_json::json!({"topic": null, "partition": null, "reason": "fetch",
            "error": "all brokers down", "since_ms": now, "retries": 0, "offset": null});
        assert_eq!(
            degraded_line(&reads),
            "source reads fetch for 0s (0 failed retries): all brokers down"
        );
    }

    #[test]
    fn lost_entries_name_partition_offsets_and_count() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let l = serde_json::json!({"topic": "orders", "remote_topic": "a.orders", "partition": 0,
            "first": 100, "last": 149, "count": 50, "since_ms": now - 125_000});
        assert_eq!(
            lost_line(&l),
            "orders[0] 50 records (offsets 100..=149) deleted at the source before they were mirrored, 2m5s ago"
        );
    }
}
