//! Schema-id translation on the data path (`schemas = "translate"`, see refract-schema): every
//! record the chain forwards has its framed key and value rewritten to the target registry's
//! ids before it is handed to the producer (so under exactly-once, before the transaction
//! holds it), or does not leave at all.
//!
//! - A registry that does not answer holds the record's partition: it is marked failed at that
//!   record (reason `schema_registry`), paused, rewound and retried with the partition backoff
//!   every delivery failure gets, and reported in `/status`, `/health` and the partition
//!   series. Nothing after it in the partition is sent meanwhile.
//! - A record that can never translate (an id the source registry does not know, a schema the
//!   target refuses) follows `schema_on_error`, as a processor's failure follows `on_error`:
//!   dead-lettered with its bytes as read, skipped and counted, or the flow halts.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tracing::{info, warn};

use refract_config::{Cluster, Flow, OnError};
use refract_plugin::{PolicyPlugin, ReplicationPolicy};
use refract_schema::{wire, Field, RegistryClient, Rename, TranslateError, Translator};
use refract_telemetry::Metrics;

use crate::chain::{ChainOutput, DeadLetter, Halt, Item, Skipped};
use crate::series::RefractSeries;

use super::lock;
use super::run::Run;

/// The name failures of translation carry where a processor's name would be (dead-letter
/// headers, `/status`, halts).
pub(crate) const SCHEMA_STAGE: &str = "schema-translation";

/// How long the subject sync waits after a registry did not answer.
const SYNC_RETRY: Duration = Duration::from_secs(10);

/// The translator of `flow`, when it translates: clients of both clusters' registries, the
/// flow's series in `metrics`, and `policy` to rename other subjects (`schema_subjects = "all"`).
pub(crate) fn translator(
    flow: &Flow,
    source: &Cluster,
    target: &Cluster,
    metrics: &Metrics,
    policy: Arc<PolicyPlugin>,
) -> Result<Option<Arc<Translator>>> {
    if !flow.schemas.translate() {
        return Ok(None);
    }
    let name = flow.name();
    let client = |cluster: &Cluster| -> Result<Arc<RegistryClient>> {
        let config = cluster.schema_registry.as_ref().with_context(|| {
            format!(
                "flow {name}: schemas = \"translate\" and cluster {} has no schema_registry",
                cluster.alias
            )
        })?;
        RegistryClient::new(&cluster.alias, config).with_context(|| format!("flow {name}"))
    };
    let (source_client, target_client) = (client(source)?, client(target)?);
    let counters = metrics.schemas(&name, &source.alias, &target.alias).ok();
    let policy = Mutex::new(ReplicationPolicy::new(policy));
    let alias = source.alias.clone();
    let rename: Rename = Arc::new(move |subject: &str| {
        lock(&policy)
            .format_remote_topics(&alias, &[subject.to_string()])
            .ok()
            .and_then(|names| names.into_iter().next())
    });
    Ok(Some(Arc::new(Translator::new(
        &name,
        &flow.schemas,
        source_client,
        target_client,
        rename,
        counters,
    ))))
}

/// Checks the cached translations ([`Translator::revalidate`]) and copies the subjects of the
/// topics the flow's tasks in this process mirror, at start (as soon as a task has discovered
/// its topics) and every `schema_sync_interval`, until `stop`.
pub(crate) fn sync_subjects(translator: &Translator, interval: Duration, stop: &AtomicBool) {
    let mut next = Instant::now();
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) {
        let fresh = translator.wait_for_topics(Duration::from_millis(500));
        if !fresh && Instant::now() < next {
            continue;
        }
        let topics = translator.topics();
        if topics.is_empty() {
            continue;
        }
        // The cached translations are checked first, so what a lost target registry forgot is
        // copied again in the same round.
        let round = translator
            .revalidate()
            .and_then(|_| translator.sync_subjects(&topics));
        match round {
            Ok(copied) => {
                if failing {
                    info!(flow = %translator.flow(), "subject sync works again");
                }
                failing = false;
                next = Instant::now() + interval;
                tracing::debug!(flow = %translator.flow(), "subject sync: {copied} subjects of {} topics copied", topics.len());
            }
            Err(e) => {
                if !failing {
                    warn!(flow = %translator.flow(), "subject sync failed, retrying every {SYNC_RETRY:?}: {e}");
                }
                failing = true;
                next = Instant::now() + SYNC_RETRY;
            }
        }
    }
}

/// What translation made of a run of forwarded records.
pub(super) struct Held {
    /// The first source offset that could not be translated because a registry did not answer:
    /// nothing from it on was kept.
    pub(super) offset: i64,
    /// Why.
    pub(super) why: String,
}

impl Run<'_> {
    /// Translates the keys and values of `out.forward` (records of `topic[partition]`) in
    /// place. A record that can never translate follows `schema_on_error` (into `out.dead`,
    /// `out.skipped`, or a [`Halt`]); at the first record a registry did not answer for, the
    /// run is cut: that record and everything after it is dropped from `out` and read again
    /// after the partition's retry.
    pub(super) fn translate_outputs(
        &self,
        translator: &Translator,
        topic: &str,
        partition: i32,
        out: &mut ChainOutput<'_>,
    ) -> Result<Option<Held>, Halt> {
        let on_error = self.runner.flow.schemas.on_error;
        let items = std::mem::take(&mut out.forward);
        let mut kept = Vec::with_capacity(items.len());
        let mut held = None;
        let mut translated = 0;
        let mut failed = false;
        for mut item in items {
            match translate_item(translator, topic, &mut item) {
                Ok(n) => {
                    translated += n;
                    kept.push(item);
                }
                Err(TranslateError::Unavailable(why)) => {
                    held = Some(Held {
                        offset: item.offset,
                        why,
                    });
                    break;
                }
                Err(TranslateError::Permanent(why)) => {
                    failed = true;
                    match on_error {
                        OnError::Stop => {
                            return Err(Halt {
                                plugin: SCHEMA_STAGE.into(),
                                topic: topic.into(),
                                partition,
                                offset: item.offset,
                                reason: why,
                            })
                        }
                        OnError::Skip => out.skipped.push(Skipped {
                            offset: item.offset,
                            plugin: SCHEMA_STAGE.into(),
                            error: why,
                        }),
                        OnError::DeadLetter => out.dead.push(DeadLetter {
                            item,
                            plugin: SCHEMA_STAGE.into(),
                            error: why,
                        }),
                    }
                }
            }
        }
        if let Some(h) = &held {
            kept.retain(|i| i.offset < h.offset);
            out.dead.retain(|d| d.item.offset < h.offset);
            out.skipped.retain(|s| s.offset < h.offset);
        }
        if failed {
            out.dead.sort_by_key(|d| d.item.offset);
            out.skipped.sort_by_key(|s| s.offset);
        }
        out.forward = kept;
        translator.count(translated);
        Ok(held)
    }
}

/// Translates `item`'s key and value (a record of `source_topic`): both are resolved before
/// either is rewritten, so a record leaves translated whole or not at all. The number of fields
/// rewritten.
fn translate_item(
    translator: &Translator,
    source_topic: &str,
    item: &mut Item<'_>,
) -> Result<u64, TranslateError> {
    let key = translator.target_id(source_topic, &item.topic, Field::Key, item.key.as_deref())?;
    let value = translator.target_id(
        source_topic,
        &item.topic,
        Field::Value,
        item.value.as_deref(),
    )?;
    let mut n = 0;
    for (id, bytes) in [(key, &mut item.key), (value, &mut item.value)] {
        if let (Some(id), Some(b)) = (id, bytes) {
            *b = Cow::Owned(wire::reframe(b, id));
            n += 1;
        }
    }
    Ok(n)
}
