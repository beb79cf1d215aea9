//! Taking over a flow from a stopped MirrorMaker 2: a source partition refract has no committed
//! position for starts where MM2 stopped, read from the Connect offsets topic MM2's worker keeps
//! on the target (see [`refract_mm2::connect_offsets`]), instead of copying the partition again.
//!
//! What MM2 wrote past its last flushed position (it flushes every `offset.flush.interval.ms`
//! and when stopped cleanly, so only a killed MM2 leaves such records) is mirrored again; those
//! records are counted as duplicates, locating MM2's position on the target with its offset
//! syncs when there are any.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};
use tracing::{debug, info, warn};

use refract_config::{ClientRole, Cluster, Flow, OffsetSyncsLocation};
use refract_plugin::ReplicationPolicy;

use refract_kafka::clients::{client_config, list_topics, Authenticated, REQUEST_TIMEOUT};
use refract_mm2::connect_offsets::{duplicates_after, sync_for, Mm2Positions};
use refract_mm2::OffsetSync;

/// Longest a read of MM2's offsets or offset-syncs topic to its end may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One source partition that resumes at MM2's position.
struct Taken {
    topic: String,
    remote: String,
    partition: i32,
    /// Upstream offset of the last record MM2 replicated.
    last: i64,
}

/// The MM2 positions of one flow, read once per `FlowRunner::resume` call and
/// only when a partition without a committed position asks for one.
pub(crate) struct Mm2Takeover<'a> {
    flow: &'a Flow,
    source: &'a Cluster,
    target: &'a Cluster,
    positions: Option<Mm2Positions>,
    taken: Vec<Taken>,
}

impl<'a> Mm2Takeover<'a> {
    /// Nothing read yet.
    pub(crate) fn new(flow: &'a Flow, source: &'a Cluster, target: &'a Cluster) -> Self {
        Self {
            flow,
            source,
            target,
            positions: None,
            taken: Vec::new(),
        }
    }

    /// Where `topic[partition]` (mirrored to `remote`) resumes if MM2 replicated it: one past the
    /// last record MM2 replicated. The partition is then counted as taken over. Reads MM2's
    /// offsets topic on the first call; a missing topic means MM2 never ran this flow.
    pub(crate) fn resume_offset(
        &mut self,
        topic: &str,
        remote: &str,
        partition: i32,
    ) -> Result<Option<i64>> {
        if self.positions.is_none() {
            self.positions = Some(self.load_positions()?);
        }
        let Some(last) = self
            .positions
            .as_ref()
            .and_then(|p| p.last_replicated(topic, partition))
        else {
            return Ok(None);
        };
        self.taken.push(Taken {
            topic: topic.to_string(),
            remote: remote.to_string(),
            partition,
            last,
        });
        Ok(Some(last + 1))
    }

    /// Logs the partitions taken over (once per call, none: nothing) and returns how many records
    /// the target already holds past MM2's positions: MM2 wrote them after its last flush, and
    /// they will be mirrored again. `policy` names the offset-syncs topic MM2 and refract write.
    pub(crate) fn finish(self, target_meta: &BaseConsumer, policy: &mut ReplicationPolicy) -> u64 {
        if self.taken.is_empty() {
            return 0;
        }
        let name = self.flow.name();
        let syncs = match self.read_syncs(policy) {
            Ok(syncs) => syncs,
            Err(e) => {
                warn!(flow = %name, "cannot read MirrorMaker 2's offset syncs; counting duplicates as if source and target offsets line up: {e:#}");
                HashMap::new()
            }
        };
        let mut duplicates = 0u64;
        for t in &self.taken {
            let sync = syncs
                .get(&(t.topic.clone(), t.partition))
                .and_then(|s| sync_for(s, t.last));
            match target_meta.fetch_watermarks(&t.remote, t.partition, REQUEST_TIMEOUT) {
                Ok((low, high)) => {
                    let past = duplicates_after(t.last, sync, low, high);
                    debug!(flow = %name, "{}[{}]: MM2 replicated up to offset {}, sync {sync:?}, {}[{}] holds {low}..{high}: {past} past it", t.topic, t.partition, t.last, t.remote, t.partition);
                    duplicates += past;
                }
                Err(e) => {
                    warn!(flow = %name, "cannot count what MirrorMaker 2 wrote to {}[{}] past its position: {e}", t.remote, t.partition)
                }
            }
        }
        let positions: Vec<String> = self
            .taken
            .iter()
            .map(|t| format!("{}[{}]={}", t.topic, t.partition, t.last + 1))
            .collect();
        info!(
            flow = %name,
            "took over from MirrorMaker 2: {} partitions resume at MM2's positions ({})",
            self.taken.len(),
            positions.join(" ")
        );
        duplicates
    }

    /// MM2's positions for this flow from its Connect offsets topic on the target.
    fn load_positions(&self) -> Result<Mm2Positions> {
        read_positions(self.flow, self.target, &self.client_id())
    }

    /// The offset syncs of the partitions taken over, per (topic, partition), in topic order.
    fn read_syncs(
        &self,
        policy: &mut ReplicationPolicy,
    ) -> Result<HashMap<(String, i32), Vec<OffsetSync>>> {
        let mut out: HashMap<(String, i32), Vec<OffsetSync>> = HashMap::new();
        let (cluster, named_after) = match self.flow.offset_syncs.location {
            OffsetSyncsLocation::Source => (self.source, self.target),
            OffsetSyncsLocation::Target => (self.target, self.source),
        };
        let topic = policy
            .offset_syncs_topic(&named_after.alias)
            .context("naming the offset-syncs topic")?;
        let wanted: HashMap<(&str, i32), ()> = self
            .taken
            .iter()
            .map(|t| ((t.topic.as_str(), t.partition), ()))
            .collect();
        read_to_end(cluster, &topic, &self.client_id(), |k, v| {
            let (Some(k), Some(v)) = (k, v) else { return };
            if let Ok(s) = OffsetSync::decode(k, v) {
                if wanted.contains_key(&(s.topic.as_str(), s.partition)) {
                    out.entry((s.topic.clone(), s.partition))
                        .or_default()
                        .push(s);
                }
            }
        })
        .with_context(|| format!("reading {topic} on {}", cluster.alias))?;
        Ok(out)
    }

    fn client_id(&self) -> String {
        self.flow.id().takeover_group()
    }
}

/// The positions in the flow's Connect offsets topic on the target (`mm2_offsets_topic`), as
/// MirrorMaker 2 and exactly-once refract write them; only committed records are read
/// (`read_committed`, librdkafka's default). Empty when the topic does not exist.
pub(crate) fn read_positions(
    flow: &Flow,
    target: &Cluster,
    client_id: &str,
) -> Result<Mm2Positions> {
    let topic = &flow.mm2_offsets_topic;
    let mut positions = Mm2Positions::new(&flow.source);
    let found =
        read_to_end(target, topic, client_id, |k, v| positions.apply(k, v)).with_context(|| {
            format!(
                "flow {}: reading the source positions in {topic} on {}",
                flow.name(),
                target.alias
            )
        })?;
    if found {
        debug!(flow = %flow.name(), "{topic} on {}: positions for {} partitions", target.alias, positions.len());
        if positions.malformed() > 0 {
            warn!(flow = %flow.name(), "{topic} on {}: skipped {} MirrorSourceConnector records that do not parse", target.alias, positions.malformed());
        }
    }
    Ok(positions)
}

/// Reads every partition of `topic` on `cluster` from its start to its current end, handing
/// each record's key and value to `each` in offset order per partition. False when the topic
/// does not exist.
fn read_to_end(
    cluster: &Cluster,
    topic: &str,
    client_id: &str,
    mut each: impl FnMut(Option<&[u8]>, Option<&[u8]>),
) -> Result<bool> {
    // librdkafka wants a group id even to assign; nothing is ever committed under it.
    let consumer: Authenticated<BaseConsumer> = client_config(
        cluster,
        ClientRole::Consumer,
        client_id,
        &[],
        &[
            ("group.id", client_id),
            ("enable.auto.commit", "false"),
            ("enable.partition.eof", "true"),
        ],
    )
    .create()
    .context("creating a consumer")?;
    let result = read_with(&consumer, topic, &mut each);
    // closing a client with a group id can wait on the group coordinator: not on this thread
    let _ = std::thread::Builder::new()
        .name("close takeover reader".into())
        .spawn(move || drop(consumer));
    result
}

fn read_with(
    consumer: &BaseConsumer,
    topic: &str,
    each: &mut impl FnMut(Option<&[u8]>, Option<&[u8]>),
) -> Result<bool> {
    let Some(partitions) = list_topics(consumer)?
        .into_iter()
        .find_map(|(t, n)| (t == topic).then_some(n))
    else {
        return Ok(false);
    };
    // partition → its end when the read started
    let mut unread: HashMap<i32, i64> = HashMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
            .with_context(|| format!("reading the offsets of partition {p}"))?;
        if high > low {
            unread.insert(p, high);
            tpl.add_partition_offset(topic, p, Offset::Offset(low))?;
        }
    }
    if unread.is_empty() {
        return Ok(true);
    }
    consumer.assign(&tpl).context("assigning its partitions")?;
    let deadline = Instant::now() + READ_TIMEOUT;
    while !unread.is_empty() {
        if Instant::now() > deadline {
            let mut left: Vec<i32> = unread.into_keys().collect();
            left.sort_unstable();
            bail!(
                "timed out after {READ_TIMEOUT:?} with partitions {left:?} not read to their end"
            );
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                if !unread.contains_key(&m.partition()) {
                    continue;
                }
                each(m.key(), m.payload());
                if unread
                    .get(&m.partition())
                    .is_some_and(|high| m.offset() + 1 >= *high)
                {
                    unread.remove(&m.partition());
                }
            }
            // the end, also when control records of transactions follow the last record
            Some(Err(KafkaError::PartitionEOF(p))) => {
                unread.remove(&p);
            }
            Some(Err(e)) => return Err(e).context("reading records"),
            None => {}
        }
    }
    Ok(true)
}
