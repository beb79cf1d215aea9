//! librdkafka clients for a flow, configured from the pipeline plus what refract requires.

use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::Producer;
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
) -> KafkaConfig {
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
    KafkaConfig {
        config,
        cluster: cluster.clone(),
        role,
    }
}

/// A librdkafka client whose native handle refract can reach (to hand it an OAUTHBEARER token).
pub trait NativeHandle {
    /// librdkafka's `rd_kafka_t`.
    fn native(&self) -> *mut rdkafka_sys::rd_kafka_t;
}

impl<C: rdkafka::consumer::ConsumerContext> NativeHandle for BaseConsumer<C> {
    fn native(&self) -> *mut rdkafka_sys::rd_kafka_t {
        self.client().native_ptr()
    }
}

impl<C: rdkafka::producer::ProducerContext<rdkafka::producer::NoCustomPartitioner>> NativeHandle
    for rdkafka::producer::BaseProducer<C>
{
    fn native(&self) -> *mut rdkafka_sys::rd_kafka_t {
        self.client().native_ptr()
    }
}

impl<C: rdkafka::client::ClientContext> NativeHandle for AdminClient<C> {
    fn native(&self) -> *mut rdkafka_sys::rd_kafka_t {
        self.inner().native_ptr()
    }
}

/// A librdkafka client whose OAUTHBEARER token refract keeps fresh while it lives (when the
/// cluster's clients take their token from refract: a static token or OIDC, see
/// [`crate::oauth`]). Derefs to the client.
pub struct Authenticated<T> {
    // Dropped first: the token refresher lets go of the client before it is destroyed.
    registration: Option<crate::oauth::Registration>,
    client: T,
}

impl<T> std::ops::Deref for Authenticated<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.client
    }
}

impl<T> std::ops::DerefMut for Authenticated<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.client
    }
}

impl<T> Authenticated<T> {
    /// Whether refract supplies this client's OAUTHBEARER token.
    pub fn has_token(&self) -> bool {
        self.registration.is_some()
    }
}

/// A client closed on a thread of its own when dropped. Closing a consumer waits for its group
/// coordinator (and a producer's brokers may not answer): a flow that restarts or a process that
/// shuts down must not wait for a cluster that is gone. Derefs to the client.
pub struct Detached<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> Detached<T> {
    /// Wraps `client`.
    pub fn new(client: T) -> Self {
        Self(Some(client))
    }
}

impl<T: Send + 'static> std::ops::Deref for Detached<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &self.0 {
            Some(c) => c,
            // Only `drop` takes the client out.
            None => unreachable!("a detached client is used after it was dropped"),
        }
    }
}

impl<T: Send + 'static> Drop for Detached<T> {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            let spawned = std::thread::Builder::new()
                .name("close client".into())
                .spawn(move || drop(client));
            if let Err(e) = spawned {
                tracing::debug!("closing a client inline (no thread: {e})");
            }
        }
    }
}

/// A librdkafka config for one cluster's client, with what librdkafka cannot take as a property:
/// an OAUTHBEARER token refract supplies (static or OIDC), handed to every client created from
/// it before it connects and refreshed while it lives.
pub struct KafkaConfig {
    config: ClientConfig,
    cluster: Cluster,
    role: ClientRole,
}

impl KafkaConfig {
    /// Sets a librdkafka property.
    pub fn set(&mut self, key: &str, value: &str) -> &mut Self {
        self.config.set(key, value);
        self
    }

    /// The librdkafka properties.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Creates a client.
    pub fn create<T>(&self) -> rdkafka::error::KafkaResult<Authenticated<T>>
    where
        T: rdkafka::config::FromClientConfig + NativeHandle,
    {
        let client: T = self.config.create().map_err(redact)?;
        self.authenticate(client)
    }

    /// Creates a client with a context.
    pub fn create_with_context<C, T>(
        &self,
        context: C,
    ) -> rdkafka::error::KafkaResult<Authenticated<T>>
    where
        C: rdkafka::client::ClientContext,
        T: rdkafka::config::FromClientConfigAndContext<C> + NativeHandle,
    {
        let client: T = self.config.create_with_context(context).map_err(redact)?;
        self.authenticate(client)
    }

    fn authenticate<T: NativeHandle>(
        &self,
        client: T,
    ) -> rdkafka::error::KafkaResult<Authenticated<T>> {
        let registration = crate::oauth::attach(client.native(), &self.cluster, self.role)
            .map_err(|e| rdkafka::error::KafkaError::ClientCreation(format!("{e:#}")))?;
        Ok(Authenticated {
            registration,
            client,
        })
    }
}

/// librdkafka's "bad property" error carries the value it refused: keep a secret's out of it.
fn redact(e: rdkafka::error::KafkaError) -> rdkafka::error::KafkaError {
    match e {
        rdkafka::error::KafkaError::ClientConfig(code, desc, key, value) => {
            let value = if refract_config::is_sensitive_key(&key) {
                refract_config::REDACTED.to_string()
            } else {
                value
            };
            rdkafka::error::KafkaError::ClientConfig(code, desc, key, value)
        }
        other => other,
    }
}

/// Topic names and partition counts of a cluster, skipping topics the broker reports errors for.
pub fn list_topics(client: &BaseConsumer) -> Result<Vec<(String, i32)>> {
    list_topics_of(client.client())
}

/// [`list_topics`] through any client, e.g. an admin client: a consumer's answer waits behind
/// the fetch answers its broker thread is handling, which at 10,000 partitions being caught up
/// took longer than [`REQUEST_TIMEOUT`].
pub fn list_topics_of<C: rdkafka::ClientContext>(
    client: &rdkafka::client::Client<C>,
) -> Result<Vec<(String, i32)>> {
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

/// Most topics one CreateTopics or DescribeConfigs request of refract names: a discovery of
/// more new topics sends one request per this many.
pub const ADMIN_BATCH: usize = 500;

/// Most metadata records one CreateTopics or CreatePartitions request of refract asks a KRaft
/// controller for (a topic is one record, each of its partitions and configs one more). The
/// controller refuses a request over 10,000 as a whole ("Unable to perform excessively large
/// batch operation", PolicyViolationException): 1,000 new topics of 10 partitions are 11,000
/// records. MirrorMaker 2 sends them all in one request and creates none of them.
pub const CONTROLLER_RECORDS_BATCH: usize = 8_000;

/// `items` cut into requests of at most [`ADMIN_BATCH`] items and [`CONTROLLER_RECORDS_BATCH`]
/// records (`records` of each item); an item over the budget alone goes in a request of its own.
pub fn admin_batches<T>(items: &[T], records: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let mut out = Vec::new();
    let (mut start, mut weight) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        let w = records(item);
        if i > start && (i - start == ADMIN_BATCH || weight + w > CONTROLLER_RECORDS_BATCH) {
            out.push(&items[start..i]);
            (start, weight) = (i, 0);
        }
        weight += w;
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

/// A topic to create: its name, partition count, replication factor and topic configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicToCreate {
    /// Its name.
    pub name: String,
    /// How many partitions it gets.
    pub partitions: i32,
    /// Its replication factor (-1: the broker's default).
    pub replication_factor: i32,
    /// Topic configs set at creation.
    pub configs: Vec<(String, String)>,
}

/// A topic [`create_topics`] was asked for: its name, and `Ok` or why it was not created (the
/// broker's error for it, or the request's).
pub type TopicCreated = (String, Result<(), String>);

/// Creates `topics` with one CreateTopics request per [`admin_batches`] batch. Per topic, in
/// the order given: `Ok` (created, or it existed already) or why not; a request that failed as
/// a whole fails each of its topics with that error. Returns how many requests it sent too, and
/// how many of the topics existed already (a cluster that is slow to list new topics).
pub fn create_topics(
    admin: &AdminClient<DefaultClientContext>,
    topics: &[TopicToCreate],
) -> (Vec<TopicCreated>, usize, usize) {
    let options = AdminOptions::new()
        .operation_timeout(Some(REQUEST_TIMEOUT))
        .request_timeout(Some(REQUEST_TIMEOUT));
    let mut out = Vec::with_capacity(topics.len());
    let (mut requests, mut existed) = (0, 0);
    let batches = admin_batches(topics, |t| {
        1 + usize::try_from(t.partitions).unwrap_or(0) + t.configs.len()
    });
    for chunk in batches {
        let new: Vec<NewTopic<'_>> = chunk
            .iter()
            .map(|t| {
                t.configs.iter().fold(
                    NewTopic::new(
                        &t.name,
                        t.partitions,
                        TopicReplication::Fixed(t.replication_factor),
                    ),
                    |topic, (k, v)| topic.set(k, v),
                )
            })
            .collect();
        requests += 1;
        let answer = futures_executor::block_on(admin.create_topics(new.iter(), &options));
        existed += per_topic(
            chunk.iter().map(|t| t.name.as_str()),
            answer,
            Some(RDKafkaErrorCode::TopicAlreadyExists),
            &mut out,
        );
    }
    (out, requests, existed)
}

/// Appends to `out`, per topic of one admin request in `names`' order, `Ok` or the broker's
/// error for it; a request that failed as a whole fails each of its topics with that error. An
/// error equal to `tolerated` counts as `Ok`; returns how many did.
fn per_topic<'a>(
    names: impl Iterator<Item = &'a str>,
    answer: rdkafka::error::KafkaResult<Vec<rdkafka::admin::TopicResult>>,
    tolerated: Option<RDKafkaErrorCode>,
    out: &mut Vec<TopicCreated>,
) -> usize {
    match answer {
        Ok(results) => {
            let mut errors: std::collections::HashMap<String, RDKafkaErrorCode> =
                results.into_iter().filter_map(Result::err).collect();
            let before = errors.len();
            errors.retain(|_, code| Some(*code) != tolerated);
            let ignored = before - errors.len();
            out.extend(names.map(|name| {
                let result = errors
                    .remove(name)
                    .map_or(Ok(()), |code| Err(code.to_string()));
                (name.to_string(), result)
            }));
            ignored
        }
        Err(e) => {
            out.extend(names.map(|name| (name.to_string(), Err(e.to_string()))));
            0
        }
    }
}

/// Grows each of `topics` (name, wanted partition count) with one CreatePartitions request per
/// [`admin_batches`] batch, then waits (at most [`REQUEST_TIMEOUT`] in all) until `client` sees
/// the grown ones with their new partitions (see [`await_partitions`]). Per topic, in the order
/// given: `Ok` or why not; a request that failed as a whole fails each of its topics with that
/// error. Returns how many CreatePartitions requests it sent too.
pub fn grow_topics<C: rdkafka::client::ClientContext>(
    admin: &AdminClient<DefaultClientContext>,
    client: &rdkafka::client::Client<C>,
    topics: &[(String, i32)],
) -> (Vec<TopicCreated>, usize) {
    let options = AdminOptions::new()
        .operation_timeout(Some(REQUEST_TIMEOUT))
        .request_timeout(Some(REQUEST_TIMEOUT));
    let mut out: Vec<TopicCreated> = Vec::with_capacity(topics.len());
    let mut requests = 0;
    for chunk in admin_batches(topics, |(_, p)| usize::try_from(*p).unwrap_or(0)) {
        let new: Vec<NewPartitions<'_>> = chunk
            .iter()
            .map(|(name, partitions)| NewPartitions::new(name, (*partitions).max(0) as usize))
            .collect();
        requests += 1;
        let answer = futures_executor::block_on(admin.create_partitions(new.iter(), &options));
        per_topic(
            chunk.iter().map(|(name, _)| name.as_str()),
            answer,
            None,
            &mut out,
        );
    }
    // The producer must know the new partition counts before records go to them: one metadata
    // request per try for all grown topics (all topics when more than one grew).
    let grown: Vec<(&str, i32)> = topics
        .iter()
        .zip(&out)
        .filter(|(_, (_, r))| r.is_ok())
        .map(|((name, partitions), _)| (name.as_str(), *partitions))
        .collect();
    let unseen = await_partitions_many(client, &grown, REQUEST_TIMEOUT);
    for (name, result) in &mut out {
        if result.is_ok() && unseen.contains(&name.as_str()) {
            *result = Err(format!(
                "grown, but the new partitions were not visible within {REQUEST_TIMEOUT:?}"
            ));
        }
    }
    (out, requests)
}

/// Waits (at most `timeout`) until `client` sees each of `topics` with at least its partition
/// count, with one metadata request per try; returns the topics it still does not see so.
fn await_partitions_many<'a, C: rdkafka::client::ClientContext>(
    client: &rdkafka::client::Client<C>,
    topics: &[(&'a str, i32)],
    timeout: std::time::Duration,
) -> Vec<&'a str> {
    if let [(topic, partitions)] = topics {
        return match await_partitions(client, topic, *partitions, timeout) {
            Ok(()) => Vec::new(),
            Err(_) => vec![*topic],
        };
    }
    let deadline = std::time::Instant::now() + timeout;
    let mut waiting: Vec<(&str, i32)> = topics.to_vec();
    while !waiting.is_empty() {
        if let Ok(md) = client.fetch_metadata(None, timeout) {
            let seen: std::collections::HashMap<&str, i32> = md
                .topics()
                .iter()
                .map(|t| {
                    let led = t.partitions().iter().filter(|p| p.leader() >= 0).count();
                    (t.name(), led as i32)
                })
                .collect();
            waiting.retain(|(name, partitions)| seen.get(name).is_none_or(|n| n < partitions));
        }
        if waiting.is_empty() || std::time::Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    waiting.into_iter().map(|(name, _)| name).collect()
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

/// The low and high watermarks of many partitions, asked with two batched ListOffsets lookups
/// (earliest, latest: one request per partition leader each) instead of two requests per
/// partition: at 10,000 partitions that is about 2 round trips instead of 20,000 (which took
/// about 40 s against a local broker). Partitions whose lookup failed are left out.
pub fn watermarks_many<C: rdkafka::consumer::ConsumerContext>(
    consumer: &BaseConsumer<C>,
    partitions: &[(&str, i32)],
    timeout: Duration,
) -> std::collections::HashMap<(String, i32), (i64, i64)> {
    use rdkafka::{Offset, TopicPartitionList};
    let ask = |at: Offset| -> std::collections::HashMap<(String, i32), i64> {
        let mut tpl = TopicPartitionList::with_capacity(partitions.len());
        for (topic, partition) in partitions {
            // Cannot fail: a partition number, no offset conversion.
            let _ = tpl.add_partition_offset(topic, *partition, at);
        }
        match consumer.offsets_for_times(tpl, timeout) {
            Ok(answer) => answer
                .elements()
                .iter()
                .filter(|e| e.error().is_ok())
                .filter_map(|e| match e.offset() {
                    Offset::Offset(n) => Some(((e.topic().to_string(), e.partition()), n)),
                    _ => None,
                })
                .collect(),
            Err(_) => std::collections::HashMap::new(),
        }
    };
    if partitions.is_empty() {
        return std::collections::HashMap::new();
    }
    let low = ask(Offset::Beginning);
    let mut high = ask(Offset::End);
    low.into_iter()
        .filter_map(|(key, low)| high.remove(&key).map(|high| (key, (low, high))))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_topic_of_an_admin_request_gets_its_own_result() {
        let mut out = Vec::new();
        let answer = Ok(vec![
            Ok("a".to_string()),
            Err(("b".to_string(), RDKafkaErrorCode::TopicAlreadyExists)),
            Err(("c".to_string(), RDKafkaErrorCode::PolicyViolation)),
        ]);
        let tolerated = Some(RDKafkaErrorCode::TopicAlreadyExists);
        let names = ["a", "b", "c"];
        assert_eq!(per_topic(names.into_iter(), answer, tolerated, &mut out), 1);
        assert_eq!(out[..2], [("a".into(), Ok(())), ("b".into(), Ok(()))]);
        assert_eq!(out[2].0, "c");
        assert!(
            out[2]
                .1
                .as_ref()
                .is_err_and(|e| e.contains("Policy violation")),
            "{out:?}"
        );
        // A request that failed as a whole fails each of its topics, after the earlier ones.
        let failed = Err(rdkafka::error::KafkaError::AdminOp(
            RDKafkaErrorCode::OperationTimedOut,
        ));
        assert_eq!(
            per_topic(["d", "e"].into_iter(), failed, tolerated, &mut out),
            0
        );
        assert_eq!(out.len(), 5);
        assert!(out[3..]
            .iter()
            .all(|(_, r)| r.as_ref().is_err_and(|e| e.contains("OperationTimedOut"))));
    }

    #[test]
    fn admin_batches_respect_the_topic_and_record_budgets() {
        // 1,000 topics of 10 partitions (11 records each): 11,000 records, over the controller's
        // 10,000 in one request; 500 topics (5,500 records) per request.
        let estate = vec![10usize; 1_000];
        let sizes: Vec<usize> = admin_batches(&estate, |p| 1 + p)
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(sizes, [500, 500]);
        // 20 partitions: 21 records a topic, at most 8,000 records per request.
        let big = vec![20usize; 1_000];
        let sizes: Vec<usize> = admin_batches(&big, |p| 1 + p)
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(sizes, [380, 380, 240]);
        assert!(sizes.iter().all(|&n| n * 21 <= CONTROLLER_RECORDS_BATCH));
        // One topic over the budget goes alone (the broker's refusal is then its own).
        let odd = [1usize, 9_000, 1];
        let sizes: Vec<usize> = admin_batches(&odd, |p| *p)
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(sizes, [1, 1, 1]);
        assert!(admin_batches(&[] as &[usize], |p| *p).is_empty());
    }

    #[test]
    fn a_refused_secret_is_not_in_the_error() {
        let mut cluster_config = ClientConfig::new();
        cluster_config.set("no.such.secret", "s3cr3t-value");
        let err = cluster_config
            .create::<BaseConsumer>()
            .err()
            .map(redact)
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!err.is_empty(), "librdkafka refuses the config");
        assert!(!err.contains("s3cr3t-value"), "{err}");
    }
}
