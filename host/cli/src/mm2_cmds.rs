//! `refract offsets translate`, `refract topology` and `refract convert`: MirrorMaker 2's client
//! tools (RemoteClusterUtils) against a running deployment, and its config format.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use refract_kafka::headers::RawHeaders;

use refract_config::{names, ClientRole, Cluster, Pipeline, PluginSpec};
use refract_kafka::clients::Authenticated;
use refract_mirror::TRANSLATION_HEADER;
use refract_mm2::{latest_for_group, Checkpoint, Heartbeat};
use refract_plugin::{PolicyPlugin, ReplicationPolicy};

const TIMEOUT: Duration = Duration::from_secs(10);

/// `refract offsets translate`.
#[derive(clap::Args)]
pub struct Translate {
    /// The pipeline file.
    #[arg(long)]
    config: PathBuf,
    /// The consumer group.
    #[arg(long)]
    group: String,
    /// The cluster the group consumed on (the flow's source).
    #[arg(long)]
    from: String,
    /// The cluster it fails over to (the flow's target).
    #[arg(long)]
    to: String,
}

/// `refract topology`.
#[derive(clap::Args)]
pub struct Topology {
    /// The pipeline file.
    #[arg(long)]
    config: PathBuf,
}

/// `refract convert`.
#[derive(clap::Args)]
pub struct Convert {
    /// A MirrorMaker 2 properties file.
    file: PathBuf,
}

fn client(cluster: &Cluster) -> Result<Authenticated<BaseConsumer>> {
    // The group id is needed to assign partitions; nothing is committed under it.
    refract_kafka::clients::client_config(
        cluster,
        ClientRole::Consumer,
        names::CLI_GROUP,
        &[],
        &[
            ("enable.auto.commit", "false"),
            ("group.id", names::CLI_GROUP),
        ],
    )
    .create()
    .with_context(|| format!("connecting to cluster {}", cluster.alias))
}

fn cluster<'a>(pipeline: &'a Pipeline, alias: &str) -> Result<&'a Cluster> {
    pipeline.clusters.get(alias).with_context(|| {
        format!(
            "{}: no cluster `{alias}` (defined: {})",
            pipeline.file.display(),
            pipeline
                .clusters
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// The replication policy that names topics arriving on `target` (a flow into it, or the
/// built-in default when none).
fn policy_for(
    pipeline: &Pipeline,
    source: Option<&str>,
    target: &str,
) -> Result<ReplicationPolicy> {
    let spec = pipeline
        .flows
        .iter()
        .find(|f| f.target == target && source.is_none_or(|s| f.source == s))
        .map(|f| f.policy.clone())
        .unwrap_or_else(|| PluginSpec::builtin("builtin:default", "policy"));
    let runtime = crate::plugin_runtime()?;
    let plugin = PolicyPlugin::load(&runtime, &spec)?;
    Ok(ReplicationPolicy::new(plugin))
}

/// A record's key and value bytes.
/// A record's key and value, and the value of its `refract.translation` header if it has one.
type KeyValue = (Vec<u8>, Vec<u8>, Option<String>);

/// Every record with a key and a value in partition 0 of `topic`.
fn read_all(consumer: &BaseConsumer, topic: &str) -> Result<Vec<KeyValue>> {
    let (low, high) = match consumer.fetch_watermarks(topic, 0, TIMEOUT) {
        Ok(w) => w,
        Err(_) => return Ok(Vec::new()),
    };
    let mut out = Vec::new();
    if high <= low {
        return Ok(out);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(low))?;
    consumer.assign(&tpl)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut next = low;
    while next < high {
        if std::time::Instant::now() > deadline {
            bail!("reading {topic}: timed out at offset {next} of {high}");
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                next = m.offset() + 1;
                if let (Some(k), Some(v)) = (m.key(), m.payload()) {
                    let how = RawHeaders::of_message(&m).and_then(|h| {
                        h.iter()
                            .find(|h| h.key == TRANSLATION_HEADER.as_bytes())
                            .and_then(|h| h.value)
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                    });
                    out.push((k.to_vec(), v.to_vec(), how));
                }
            }
            Some(Err(e)) => bail!("reading {topic}: {e}"),
            None => {}
        }
    }
    Ok(out)
}

impl Translate {
    pub fn run(&self) -> Result<()> {
        let pipeline = Pipeline::load(&self.config)?;
        cluster(&pipeline, &self.from)?;
        let target = cluster(&pipeline, &self.to)?;
        let mut policy = policy_for(&pipeline, Some(&self.from), &self.to)?;
        let topic = policy.checkpoints_topic(&self.from)?;
        let consumer = client(target)?;
        let records = read_all(&consumer, &topic)?;
        let mut how: BTreeMap<(String, i32), Option<String>> = BTreeMap::new();
        let checkpoints: Vec<Checkpoint> = records
            .iter()
            .filter_map(|(k, v, h)| {
                let c = Checkpoint::decode(k, v).ok()?;
                if c.group == self.group {
                    how.insert((c.topic.clone(), c.partition), h.clone());
                }
                Some(c)
            })
            .collect();
        let latest = latest_for_group(checkpoints, &self.group);
        if latest.is_empty() {
            bail!(
                "no checkpoints for group {} in {topic} on {} (is the flow {}->{} running with checkpoints, and has the group committed offsets on mirrored topics?)",
                self.group, self.to, self.from, self.to
            );
        }
        // Per partition: `exact`, or `mm2` (MM2's rule: the last offset sync at or before the
        // group's offset, plus one) with the reason exact translation was not possible; `mm2`
        // alone for checkpoints written by MirrorMaker 2 or with offset_translation = "mm2".
        let rows: Vec<(&str, i32, i64, String)> = latest
            .iter()
            .map(|((topic, partition), c)| {
                let translation = how
                    .get(&(topic.clone(), *partition))
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| "mm2".to_string());
                (topic.as_str(), *partition, c.downstream_offset, translation)
            })
            .collect();
        print!(
            "{}",
            render_translation(&self.group, &self.to, &self.from, &rows)
        );
        Ok(())
    }
}

/// What `refract offsets translate` prints: a comment line naming the group and clusters, then
/// one line per partition (remote topic, partition, offset, how it was translated).
pub(crate) fn render_translation(
    group: &str,
    to: &str,
    from: &str,
    rows: &[(&str, i32, i64, String)],
) -> String {
    let mut out =
        format!("# group {group} on {to}: offsets to resume from (translated from {from})\n");
    out.push_str(&format!(
        "{:<40} {:>9} {:>12}  TRANSLATION\n",
        "TOPIC", "PARTITION", "OFFSET"
    ));
    for (topic, partition, offset, translation) in rows {
        out.push_str(&format!(
            "{topic:<40} {partition:>9} {offset:>12}  {translation}\n"
        ));
    }
    out
}

/// What a cluster's heartbeat topics say about one upstream cluster.
#[derive(Debug, Default)]
struct Upstream {
    hops: usize,
    via: String,
    last_heartbeat_ms: Option<i64>,
}

impl Topology {
    pub fn run(&self) -> Result<()> {
        let pipeline = Pipeline::load(&self.config)?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        for (alias, c) in &pipeline.clusters {
            let mut policy = policy_for(&pipeline, None, alias)?;
            let consumer = client(c)?;
            let metadata = match consumer.fetch_metadata(None, TIMEOUT) {
                Ok(m) => m,
                Err(e) => {
                    println!("{alias}: unreachable ({e})");
                    continue;
                }
            };
            let mut upstream: BTreeMap<String, Upstream> = BTreeMap::new();
            let mut topics: Vec<String> = metadata
                .topics()
                .iter()
                .map(|t| t.name().to_string())
                .collect();
            topics.sort();
            for topic in topics {
                if !policy.is_heartbeats_topic(&topic)? {
                    continue;
                }
                // `b.a.heartbeats`: b is one hop upstream, a two.
                let mut chain = Vec::new();
                let mut current = topic.clone();
                while let Some(source) = policy.topic_source(&current)? {
                    if chain.contains(&source) {
                        break;
                    }
                    chain.push(source);
                    match policy.upstream_topic(&current)? {
                        Some(up) if up != current => current = up,
                        _ => break,
                    }
                }
                let last = read_last_heartbeat(&consumer, &topic);
                for (i, source) in chain.into_iter().enumerate() {
                    let hops = i + 1;
                    let entry = upstream.entry(source).or_insert_with(|| Upstream {
                        hops: usize::MAX,
                        ..Upstream::default()
                    });
                    if hops < entry.hops {
                        entry.hops = hops;
                        entry.via = topic.clone();
                        entry.last_heartbeat_ms = last;
                    }
                }
            }
            if upstream.is_empty() {
                println!("{alias}: no upstream clusters");
                continue;
            }
            println!("{alias}:");
            for (source, u) in upstream {
                let age = u
                    .last_heartbeat_ms
                    .map_or("no heartbeat yet".to_string(), |t| {
                        format!(
                            "last heartbeat {:.1} s ago",
                            (now - t).max(0) as f64 / 1000.0
                        )
                    });
                println!(
                    "  upstream {source:<16} hops {}  via {}  {age}",
                    u.hops, u.via
                );
            }
        }
        Ok(())
    }
}

/// The timestamp of the last heartbeat in `topic`, if it has one.
fn read_last_heartbeat(consumer: &BaseConsumer, topic: &str) -> Option<i64> {
    let (low, high) = consumer.fetch_watermarks(topic, 0, TIMEOUT).ok()?;
    if high <= low {
        return None;
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(high - 1))
        .ok()?;
    consumer.assign(&tpl).ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let hb = Heartbeat::decode(m.key()?, m.payload()?).ok()?;
            return Some(hb.timestamp);
        }
    }
    None
}

impl Convert {
    pub fn run(&self) -> Result<()> {
        let text = refract_config::read_config_file(
            &self.file,
            refract_config::MAX_PIPELINE_FILE_BYTES,
            "MM2 properties file",
        )
        .map_err(anyhow::Error::msg)?;
        let converted = refract_config::convert_mm2_properties(&self.file, &text)?;
        // Validate what we print, so a converted file always loads.
        Pipeline::parse(&self.file.with_extension("toml"), &converted.toml)
            .context("the converted pipeline does not validate")?;
        print!("{}", converted.toml);
        for line in converted.warnings(&self.file) {
            eprintln!("warning: {line}");
        }
        Ok(())
    }
}
