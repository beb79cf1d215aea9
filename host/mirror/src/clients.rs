//! librdkafka clients for a flow, configured from the pipeline plus what refract requires.

use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;

use refract_config::{ClientRole, Cluster};

/// How long a metadata or admin request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A librdkafka config for `cluster` in `role`: `defaults`, then the pipeline's settings, then
/// `forced` (what refract's guarantees depend on).
pub fn client_config(
    cluster: &Cluster,
    role: ClientRole,
    client_id: &str,
    defaults: &[(&str, &str)],
    forced: &[(&str, &str)],
) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("client.id", client_id);
    for (k, v) in defaults {
        config.set(*k, *v);
    }
    for (k, v) in cluster.client_config(role) {
        config.set(k, v);
    }
    for (k, v) in forced {
        config.set(*k, *v);
    }
    config
}

/// Topic names and partition counts of a cluster, skipping topics the broker reports errors for.
pub fn list_topics(client: &BaseConsumer) -> Result<Vec<(String, i32)>> {
    let metadata = client
        .fetch_metadata(None, REQUEST_TIMEOUT)
        .context("fetching topic metadata")?;
    Ok(metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| (t.name().to_string(), t.partitions().len() as i32))
        .collect())
}

/// Creates `name` unless the cluster `meta` reads already has it: no admin request is made for
/// an existing topic, so a principal without CREATE rights (or a broker without CreateTopics)
/// can still use topics created for it. True when it asked the cluster to create the topic.
pub fn ensure_topic(
    meta: &BaseConsumer,
    admin: &AdminClient<DefaultClientContext>,
    name: &str,
    partitions: i32,
    replication_factor: i32,
    configs: &[(String, String)],
) -> Result<bool> {
    let exists = list_topics(meta).is_ok_and(|topics| topics.iter().any(|(t, _)| t == name));
    if exists {
        return Ok(false);
    }
    create_topic(admin, name, partitions, replication_factor, configs).map(|()| true)
}

/// Creates a topic with `partitions` partitions and topic `configs`; an existing topic is fine.
pub fn create_topic(
    admin: &AdminClient<DefaultClientContext>,
    name: &str,
    partitions: i32,
    replication_factor: i32,
    configs: &[(String, String)],
) -> Result<()> {
    let mut topic = NewTopic::new(
        name,
        partitions,
        TopicReplication::Fixed(replication_factor),
    );
    for (k, v) in configs {
        topic = topic.set(k, v);
    }
    let options = AdminOptions::new()
        .operation_timeout(Some(REQUEST_TIMEOUT))
        .request_timeout(Some(REQUEST_TIMEOUT));
    let results = futures_executor::block_on(admin.create_topics([&topic], &options))
        .with_context(|| format!("creating topic {name}"))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, code)) => {
                anyhow::bail!("creating topic {t} with {partitions} partitions: {code}")
            }
        }
    }
    Ok(())
}

/// Grows a topic to `partitions` partitions.
pub fn grow_topic(
    admin: &AdminClient<DefaultClientContext>,
    name: &str,
    partitions: i32,
) -> Result<()> {
    let request = NewPartitions::new(name, partitions as usize);
    let options = AdminOptions::new()
        .operation_timeout(Some(REQUEST_TIMEOUT))
        .request_timeout(Some(REQUEST_TIMEOUT));
    let results = futures_executor::block_on(admin.create_partitions([&request], &options))
        .with_context(|| format!("adding partitions to {name}"))?;
    for result in results {
        if let Err((t, code)) = result {
            anyhow::bail!("growing topic {t} to {partitions} partitions: {code}");
        }
    }
    Ok(())
}

/// Waits (at most `timeout`) until `client` sees `topic` with at least `partitions` partitions.
/// A producer that still knows the topic's old partition count refuses records for the new
/// partitions (UnknownPartition); asking for the topic's metadata refreshes what it knows.
pub fn await_partitions<C: rdkafka::client::ClientContext>(
    client: &rdkafka::client::Client<C>,
    topic: &str,
    partitions: i32,
    timeout: std::time::Duration,
) -> Result<()> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let seen = client
            .fetch_metadata(Some(topic), timeout)
            .ok()
            .and_then(|md| {
                md.topics()
                    .first()
                    .map(|t| t.partitions().iter().filter(|p| p.leader() >= 0).count())
            })
            .unwrap_or(0);
        if seen as i32 >= partitions {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            anyhow::bail!("{topic} shows {seen} of {partitions} partitions after {timeout:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
