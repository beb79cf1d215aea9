//! `refract demo`: three throw-away in-process clusters (librdkafka's mock cluster), sample
//! traffic, two flows — one through `builtin:default`, one through the rename plugin loaded from
//! its file — and a per-partition count of both sides.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use refract_config::{FlowId, Pipeline};
use refract_mirror::Mirror;
use refract_plugin::BUILTIN_RENAME_WASM;

/// Source topics: name, partitions, records.
const TOPICS: &[(&str, i32, usize)] = &[
    ("orders-v1", 4, 400),
    ("payments", 3, 300),
    ("__audit", 1, 50),
];

pub fn run() -> Result<()> {
    let primary = MockCluster::new(1).context("starting the primary mock cluster")?;
    let backup = MockCluster::new(1).context("starting the backup mock cluster")?;
    let dr = MockCluster::new(1).context("starting the dr mock cluster")?;
    // The mock cluster has no CreateTopics; create what the flows would create themselves.
    for (topic, partitions, _) in TOPICS {
        primary.create_topic(topic, *partitions, 1)?;
    }
    for (topic, partitions, _) in &TOPICS[..2] {
        backup.create_topic(&format!("primary.{topic}"), *partitions, 1)?;
    }
    dr.create_topic("orders", 4, 1)?;
    dr.create_topic("payments", 3, 1)?;
    // The mock clusters have no admin API, so the internal topics refract would create (offset
    // syncs on the source, checkpoints and heartbeats on each target, heartbeats on the source
    // for the reverse direction) are made here first; otherwise each creation waits for a timeout.
    for target in ["backup", "dr"] {
        primary.create_topic(&format!("mm2-offset-syncs.{target}.internal"), 1, 1)?;
    }
    for cluster in [&primary, &backup, &dr] {
        cluster.create_topic("heartbeats", 1, 1)?;
    }
    for cluster in [&backup, &dr] {
        cluster.create_topic("primary.checkpoints.internal", 1, 1)?;
        // The reverse heartbeats land in primary's `heartbeats`, which both flows mirror.
        cluster.create_topic("primary.heartbeats", 1, 1)?;
    }

    produce_samples(&primary.bootstrap_servers())?;

    let dir = tempfile::tempdir().context("creating a scratch folder")?;
    let rename = dir.path().join("rename.wasm");
    std::fs::write(&rename, BUILTIN_RENAME_WASM)
        .with_context(|| format!("writing {}", rename.display()))?;
    let pipeline_text = format!(
        r#"# refract demo pipeline (clusters are in-process mock clusters)
[clusters.primary]
bootstrap = "{primary}"
[clusters.backup]
bootstrap = "{backup}"
[clusters.dr]
bootstrap = "{dr}"

[[flow]]                      # primary.orders-v1, primary.payments
source = "primary"
target = "backup"
policy = {{ plugin = "builtin:default" }}
commit_interval = "500ms"
sync_topic_acls = false       # the mock clusters have no ACL API

[[flow]]                      # same names, except orders-v1 -> orders
source = "primary"
target = "dr"
policy = {{ plugin = "rename.wasm", config = {{ rules = [{{ match = "(.*)-v[0-9]+", replace = "$1" }}] }} }}
commit_interval = "500ms"
sync_topic_acls = false
"#,
        primary = primary.bootstrap_servers(),
        backup = backup.bootstrap_servers(),
        dr = dr.bootstrap_servers(),
    );
    let path = dir.path().join("demo.toml");
    std::fs::write(&path, &pipeline_text).with_context(|| format!("writing {}", path.display()))?;
    println!("pipeline ({}):\n{pipeline_text}", path.display());

    let pipeline = Pipeline::load(&path)?;
    let runtime = crate::plugin_runtime()?;
    let prepared = refract_mirror::prepare(&pipeline, &[], &runtime)?;
    let mirror = Mirror::start(&pipeline, prepared, Arc::new(AtomicBool::new(false)))?;

    let targets = [
        ("backup", backup.bootstrap_servers()),
        ("dr", dr.bootstrap_servers()),
    ];
    let source_counts = partition_counts(&primary.bootstrap_servers())?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let (routes, target_counts) = loop {
        let status = mirror.status();
        let mut target_counts = BTreeMap::new();
        for (alias, bootstrap) in &targets {
            target_counts.insert(alias.to_string(), partition_counts(bootstrap)?);
        }
        let routes: Vec<(String, String, String)> = status
            .iter()
            .flat_map(|(flow, s)| {
                let target = FlowId::parse(flow).map(|id| id.target).unwrap_or_default();
                s.routes
                    .iter()
                    // The sample topics; heartbeats are mirrored too, but keep arriving.
                    .filter(|(src, _)| TOPICS.iter().any(|t| t.0 == src.as_str()))
                    .map(move |(src, remote)| (target.clone(), src.clone(), remote.clone()))
            })
            .collect();
        let done = routes.len() == 4
            && routes.iter().all(|(target, src, remote)| {
                source_counts.get(src) == target_counts[target].get(remote)
            });
        if done {
            break (routes, target_counts);
        }
        if Instant::now() > deadline {
            mirror.stop();
            bail!("the demo flows did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    mirror.stop();

    println!(
        "{:<8} {:<10} {:<18} {:>9} {:>8} {:>8}",
        "target", "source", "remote topic", "partition", "source", "target"
    );
    for (target, src, remote) in &routes {
        for (p, (s, t)) in source_counts[src]
            .iter()
            .zip(&target_counts[target][remote])
            .enumerate()
        {
            println!("{target:<8} {src:<10} {remote:<18} {p:>9} {s:>8} {t:>8}");
        }
    }
    let skipped: Vec<&str> = TOPICS
        .iter()
        .map(|t| t.0)
        .filter(|t| !routes.iter().any(|r| r.1 == *t))
        .collect();
    println!("not mirrored (internal): {}", skipped.join(", "));
    let total: i64 = routes
        .iter()
        .map(|(_, src, _)| source_counts[src].iter().sum::<i64>())
        .sum();
    println!(
        "mirrored {total} records over {} routes; every partition matches its source",
        routes.len()
    );
    Ok(())
}

fn produce_samples(bootstrap: &str) -> Result<()> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .create()
        .context("creating the sample producer")?;
    for (topic, partitions, records) in TOPICS {
        for i in 0..*records {
            let key = format!("{topic}-key-{i}");
            let value = format!("{{\"id\":{i},\"topic\":\"{topic}\"}}");
            let mut record: BaseRecord<'_, str, str> = BaseRecord::to(topic)
                .partition((i as i32) % partitions)
                .key(key.as_str())
                .timestamp(1_700_000_000_000 + i as i64)
                .headers(OwnedHeaders::new().insert(Header {
                    key: "app",
                    value: Some("demo"),
                }));
            // every tenth record is a tombstone
            record.payload = (i % 10 != 9).then_some(value.as_str());
            producer
                .send(record)
                .map_err(|(e, _)| e)
                .context("producing sample records")?;
            producer.poll(Duration::ZERO);
        }
    }
    producer
        .flush(Duration::from_secs(30))
        .context("flushing sample records")?;
    Ok(())
}

/// Per topic, the number of records in each partition (high watermark).
fn partition_counts(bootstrap: &str) -> Result<BTreeMap<String, Vec<i64>>> {
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let metadata = client.fetch_metadata(None, Duration::from_secs(5))?;
    let mut out = BTreeMap::new();
    for topic in metadata.topics() {
        let mut counts = Vec::new();
        for p in topic.partitions() {
            let (low, high) =
                client.fetch_watermarks(topic.name(), p.id(), Duration::from_secs(5))?;
            counts.push(high - low);
        }
        out.insert(topic.name().to_string(), counts);
    }
    Ok(out)
}
