//! Schema-id translation for one flow: a framed key or value's source id becomes the id the
//! target registry gives the same schema under the subject the flow names, registering it (and,
//! first, every schema it references) when the target does not hold it yet.
//!
//! The steady state is one read-locked map lookup per framed field; the registries are asked
//! only for an id seen for the first time (per remote topic and field). Nothing here guesses:
//! an id the source registry does not know, or a schema the target refuses, is a
//! [`TranslateError::Permanent`] the flow's `schema_on_error` decides on; a registry that does
//! not answer is a [`TranslateError::Unavailable`] the flow retries, holding the partition.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use refract_config::{SchemaSettings, SubjectNaming};
use refract_telemetry::Counter;
use tracing::{debug, info};

use crate::client::{Reference, RegistryClient, RegistryError, Schema};
use crate::wire::framed_id;

mod upkeep;

/// How long an id the source registry said it does not know is not asked about again (a topic
/// of records with a bad id must not become one registry request per record).
const UNKNOWN_ID_TTL: Duration = Duration::from_secs(10);
/// Most failed translations remembered at once.
const MAX_UNKNOWN: usize = 10_000;
/// Deepest chain of references followed.
const MAX_REFERENCE_DEPTH: usize = 32;
/// Most distinct schemas one schema may reference, directly or through others: a registry that
/// answers with ever more references (by mistake or on purpose) must not hold a partition in
/// an endless walk of requests and registrations.
const MAX_REFERENCES: usize = 1_000;

/// The references one schema's registration walks: those it fetched (meeting one of them again
/// before it is registered is a cycle) and every distinct one it met, cached or not (bounded
/// by [`MAX_REFERENCES`], so a retry stops at the same place without a request).
#[derive(Default)]
struct Walk {
    fetched: HashSet<(String, i64)>,
    met: HashSet<(String, i64)>,
}

/// Which part of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// The key: subject `<topic>-key`.
    Key,
    /// The value: subject `<topic>-value`.
    Value,
}

impl Field {
    fn index(self) -> usize {
        match self {
            Self::Key => 0,
            Self::Value => 1,
        }
    }

    /// `key` or `value`, as subjects end.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Key => "key",
            Self::Value => "value",
        }
    }
}

/// The last (source id, target id) translated in each field of one partition's records (see
/// [`Translator::target_id_after`]), and the generation of the translator's cache they were
/// taken from: when [`Translator::revalidate`] forgets translations, every partition's last
/// ids are dropped too.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LastIds {
    generation: u64,
    ids: [Option<(u32, u32)>; 2],
}

/// Why a framed field could not be translated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TranslateError {
    /// A registry did not answer: retry later; the record must not leave untranslated.
    Unavailable(String),
    /// It never will be: the source registry does not know the id, or the target refuses the
    /// schema.
    Permanent(String),
}

impl std::fmt::Display for TranslateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unavailable(m) | Self::Permanent(m) => f.write_str(m),
        }
    }
}

impl From<RegistryError> for TranslateError {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Unavailable(m) => Self::Unavailable(m),
            RegistryError::NotFound(m) | RegistryError::Refused(m) => Self::Permanent(m),
        }
    }
}

/// The flow's schema series (see refract-mirror's `series`).
#[derive(Clone)]
pub struct SchemaCounters {
    /// Framed fields translated.
    pub translations: Counter,
    /// Translations that had to ask the registries.
    pub cache_misses: Counter,
    /// Schemas registered on (or found in) the target registry.
    pub registered: Counter,
    /// Failed requests to the source registry.
    pub source_errors: Counter,
    /// Failed requests to the target registry.
    pub target_errors: Counter,
}

/// Until when a failed translation's answer stands, and the answer.
type Failed = (Instant, String);

/// One remote topic's translations: (source id, field) -> target id.
type TopicIds = HashMap<(u32, Field), u32>;

/// Renames a subject as the replication policy renames a topic (`schema_subjects = "all"`).
pub type Rename = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// One flow's translation between its source and target registries.
pub struct Translator {
    flow: String,
    source: Arc<RegistryClient>,
    target: Arc<RegistryClient>,
    settings: SchemaSettings,
    rename: Rename,
    counters: Option<SchemaCounters>,
    /// Remote topic -> (source id, field) -> target id.
    ids: RwLock<HashMap<String, TopicIds>>,
    /// (remote topic, source id, field) that could not be translated for good, and until when
    /// that answer stands.
    unknown: Mutex<HashMap<(String, u32, Field), Failed>>,
    /// Source (subject, version) of a referenced schema -> the reference on the target.
    references: Mutex<HashMap<(String, i64), Reference>>,
    stats: Mutex<Stats>,
    /// The (source topic, remote topic) pairs the flow mirrors here, and whether some are new
    /// since the subject sync last looked.
    topics: Mutex<(BTreeSet<(String, String)>, bool)>,
    new_topics: Condvar,
    /// Source (subject, version) the subject sync copied, and the target subject it went to.
    synced: Mutex<HashSet<(String, i64, String)>>,
    /// The schemas the cached ids named when first seen, on the source and the target (both
    /// read at translation), to tell when an id comes to name another.
    seen: Mutex<HashMap<(Side, u32), Schema>>,
    /// Bumped each time cached translations are forgotten.
    generation: AtomicU64,
}

/// Which registry an id belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Side {
    Source,
    Target,
}

/// What `/status` shows of a flow's translation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Framed fields translated.
    pub translated: u64,
    /// Schemas registered on the target (or found there) since start.
    pub registered: u64,
    /// Subjects copied by the last sync round.
    pub synced_subjects: u64,
    /// The last failure, if the last request failed.
    pub last_error: Option<String>,
}

impl Translator {
    /// A translator for flow `flow`.
    pub fn new(
        flow: &str,
        settings: &SchemaSettings,
        source: Arc<RegistryClient>,
        target: Arc<RegistryClient>,
        rename: Rename,
        counters: Option<SchemaCounters>,
    ) -> Self {
        Self {
            flow: flow.to_string(),
            source,
            target,
            settings: settings.clone(),
            rename,
            counters,
            ids: RwLock::new(HashMap::new()),
            unknown: Mutex::new(HashMap::new()),
            references: Mutex::new(HashMap::new()),
            stats: Mutex::new(Stats::default()),
            topics: Mutex::new((BTreeSet::new(), false)),
            new_topics: Condvar::new(),
            synced: Mutex::new(HashSet::new()),
            seen: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
        }
    }

    /// The flow's name.
    pub fn flow(&self) -> &str {
        &self.flow
    }

    /// Topics a task mirrors (source topic, remote topic), for the subject sync.
    pub fn note_topics(&self, topics: impl IntoIterator<Item = (String, String)>) {
        let mut known = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let mut added = false;
        for t in topics {
            if !known.0.contains(&t) {
                known.0.insert(t);
                added = true;
            }
        }
        if added {
            known.1 = true;
            self.new_topics.notify_all();
        }
    }

    /// Every topic noted so far.
    pub fn topics(&self) -> Vec<(String, String)> {
        let known = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        known.0.iter().cloned().collect()
    }

    /// Waits up to `timeout` for topics not seen by the last call; whether there are some.
    pub fn wait_for_topics(&self, timeout: Duration) -> bool {
        let known = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let (mut known, _) = self
            .new_topics
            .wait_timeout_while(known, timeout, |k| !k.1)
            .unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut known.1, false)
    }

    /// Whether `field` is translated (`schema_fields`).
    pub fn translates(&self, field: Field) -> bool {
        match field {
            Field::Key => self.settings.keys,
            Field::Value => self.settings.values,
        }
    }

    /// The target id for `bytes`, a key or value of a record of `source_topic` going to
    /// `remote_topic`: `Ok(None)` when it is not framed (or the field is not translated) and
    /// passes unchanged.
    pub fn target_id(
        &self,
        source_topic: &str,
        remote_topic: &str,
        field: Field,
        bytes: Option<&[u8]>,
    ) -> Result<Option<u32>, TranslateError> {
        self.target_id_after(
            &mut LastIds::default(),
            source_topic,
            remote_topic,
            field,
            bytes,
        )
    }

    /// [`Self::target_id`] for a record of the partition whose last translations are `last`:
    /// an id equal to the last one of its field is answered from there, without the lock and
    /// the map lookups (a partition usually carries one schema per field), and `last` keeps
    /// the answer.
    pub fn target_id_after(
        &self,
        last: &mut LastIds,
        source_topic: &str,
        remote_topic: &str,
        field: Field,
        bytes: Option<&[u8]>,
    ) -> Result<Option<u32>, TranslateError> {
        if !self.translates(field) {
            return Ok(None);
        }
        let Some(id) = bytes.and_then(framed_id) else {
            return Ok(None);
        };
        let generation = self.generation.load(Ordering::Acquire);
        if last.generation != generation {
            *last = LastIds {
                generation,
                ids: [None; 2],
            };
        }
        let seen = &mut last.ids[field.index()];
        if let Some((source, target)) = *seen {
            if source == id {
                return Ok(Some(target));
            }
        }
        let target = self.lookup(source_topic, remote_topic, field, id)?;
        *seen = Some((id, target));
        Ok(Some(target))
    }

    /// The target id of source `id`: from the cache, or asked of the registries and cached.
    fn lookup(
        &self,
        source_topic: &str,
        remote_topic: &str,
        field: Field,
        id: u32,
    ) -> Result<u32, TranslateError> {
        let hit = self
            .ids
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(remote_topic)
            .and_then(|m| m.get(&(id, field)).copied());
        if let Some(t) = hit {
            return Ok(t);
        }
        if let Some(c) = &self.counters {
            c.cache_misses.inc();
        }
        let t = self.miss(source_topic, remote_topic, field, id)?;
        self.remember(remote_topic, id, field, t);
        Ok(t)
    }

    /// Caches that `id` in `field` of records for `remote_topic` is `target` on the target.
    fn remember(&self, remote_topic: &str, id: u32, field: Field, target: u32) {
        self.ids
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(remote_topic.to_string())
            .or_default()
            .insert((id, field), target);
    }

    /// Counts `n` fields rewritten, for `/status` and the series (once per batch, and only
    /// fields that left translated: a key whose value then failed is not counted).
    pub fn count(&self, n: u64) {
        if n == 0 {
            return;
        }
        if let Some(c) = &self.counters {
            c.translations.inc_by(n);
        }
        self.lock_stats().translated += n;
    }

    /// What `/status` shows.
    pub fn stats(&self) -> Stats {
        self.lock_stats().clone()
    }

    /// The source and target registries, for `/status`.
    pub fn registries(&self) -> (&RegistryClient, &RegistryClient) {
        (&self.source, &self.target)
    }

    fn lock_stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the registries: the source schema of `id`, its subject on the target, and the id
    /// the target gives it there.
    fn miss(
        &self,
        source_topic: &str,
        remote_topic: &str,
        field: Field,
        id: u32,
    ) -> Result<u32, TranslateError> {
        let key = (remote_topic.to_string(), id, field);
        if let Some((until, why)) = self
            .unknown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            if Instant::now() < *until {
                return Err(TranslateError::Permanent(why.clone()));
            }
        }
        let result = self.resolve(source_topic, remote_topic, field, id);
        if let Err(TranslateError::Permanent(why)) = &result {
            let mut unknown = self.unknown.lock().unwrap_or_else(|e| e.into_inner());
            if unknown.len() >= MAX_UNKNOWN {
                // Records with ever new bad ids must not grow this without bound.
                let now = Instant::now();
                unknown.retain(|_, (until, _)| *until > now);
                if unknown.len() >= MAX_UNKNOWN {
                    unknown.clear();
                }
            }
            unknown.insert(key, (Instant::now() + UNKNOWN_ID_TTL, why.clone()));
        }
        self.lock_stats().last_error = result.as_ref().err().map(ToString::to_string);
        result
    }

    fn resolve(
        &self,
        source_topic: &str,
        remote_topic: &str,
        field: Field,
        id: u32,
    ) -> Result<u32, TranslateError> {
        let schema = match self.source.schema_by_id(id) {
            Ok(s) => {
                self.lock_seen().insert((Side::Source, id), s.clone());
                s
            }
            Err(RegistryError::NotFound(m)) => {
                self.source_error();
                return Err(TranslateError::Permanent(format!(
                    "schema id {id} ({} of a record of {source_topic}) is unknown to the source registry: {m}",
                    field.as_str()
                )));
            }
            Err(e) => {
                self.source_error();
                return Err(e.into());
            }
        };
        let subjects = self
            .source
            .subjects_of(id)
            .inspect_err(|_| self.source_error())?;
        let subject = self.target_subject(source_topic, remote_topic, field, &subjects);
        let (target, _) = self
            .register(&subject, &schema, 0, &mut Walk::default())
            .map_err(|e| match e {
                TranslateError::Permanent(m) => TranslateError::Permanent(format!(
                    "schema id {id} ({} of a record of {source_topic}) as subject {subject}: {m}",
                    field.as_str()
                )),
                other => other,
            })?;
        self.note_target(target);
        info!(flow = %self.flow, "schema id {id} of {source_topic} ({}) is id {target} under subject {subject} on {}", field.as_str(), self.target.cluster);
        Ok(target)
    }

    /// The subject on the target of a schema registered under `subjects` on the source, for
    /// `field` of a record of `source_topic` mirrored to `remote_topic`.
    fn target_subject(
        &self,
        source_topic: &str,
        remote_topic: &str,
        field: Field,
        subjects: &[(String, i64)],
    ) -> String {
        choose_subject(source_topic, remote_topic, field, subjects, |s| {
            self.other_subject(s)
        })
    }

    /// A subject not named after the topic: kept, or renamed by the policy.
    fn other_subject(&self, subject: &str) -> String {
        match self.settings.subjects {
            SubjectNaming::Topic => subject.to_string(),
            SubjectNaming::All => (self.rename)(subject).unwrap_or_else(|| subject.to_string()),
        }
    }

    /// Registers `schema` under `subject` on the target, its references first; its target id
    /// and the schema as registered there (references named as the target names them).
    fn register(
        &self,
        subject: &str,
        schema: &Schema,
        depth: usize,
        walk: &mut Walk,
    ) -> Result<(u32, Schema), TranslateError> {
        if depth > MAX_REFERENCE_DEPTH {
            return Err(TranslateError::Permanent(format!(
                "references nest deeper than {MAX_REFERENCE_DEPTH}"
            )));
        }
        let mut translated = Vec::with_capacity(schema.references.len());
        for r in &schema.references {
            translated.push(self.reference(r, depth, walk)?);
        }
        let on_target = Schema {
            text: schema.text.clone(),
            schema_type: schema.schema_type.clone(),
            references: translated,
        };
        let id = self
            .target
            .register(subject, &on_target)
            .inspect_err(|_| self.target_error())?;
        if let Some(c) = &self.counters {
            c.registered.inc();
        }
        self.lock_stats().registered += 1;
        Ok((id, on_target))
    }

    /// A source reference as the target names it: the referenced schema registered there.
    fn reference(
        &self,
        r: &Reference,
        depth: usize,
        walk: &mut Walk,
    ) -> Result<Reference, TranslateError> {
        let key = (r.subject.clone(), r.version);
        walk.met.insert(key.clone());
        if walk.met.len() > MAX_REFERENCES {
            return Err(TranslateError::Permanent(format!(
                "references more than {MAX_REFERENCES} schemas (counting those they reference); the last one met is {} version {}",
                r.subject, r.version
            )));
        }
        if let Some(done) = self.lock_refs().get(&key) {
            return Ok(Reference {
                name: r.name.clone(),
                ..done.clone()
            });
        }
        if !walk.fetched.insert(key.clone()) {
            return Err(TranslateError::Permanent(format!(
                "reference {} version {} refers back to itself",
                r.subject, r.version
            )));
        }
        let (_, schema) = self
            .source
            .version(&r.subject, r.version)
            .inspect_err(|_| self.source_error())?;
        let subject = self.other_subject(&r.subject);
        let (_, on_target) = self.register(&subject, &schema, depth + 1, walk)?;
        let version = self
            .target
            .lookup(&subject, &on_target)
            .inspect_err(|_| self.target_error())?
            .ok_or_else(|| {
                TranslateError::Unavailable(format!(
                    "cluster {}'s schema registry does not find the schema it registered under {subject}",
                    self.target.cluster
                ))
            })?;
        let done = Reference {
            name: r.name.clone(),
            subject,
            version,
        };
        debug!(flow = %self.flow, "reference {} v{} is {} v{} on the target", r.subject, r.version, done.subject, done.version);
        self.lock_refs().insert(key, done.clone());
        Ok(done)
    }

    fn lock_refs(&self) -> std::sync::MutexGuard<'_, HashMap<(String, i64), Reference>> {
        self.references.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn source_error(&self) {
        if let Some(c) = &self.counters {
            c.source_errors.inc();
        }
    }

    fn target_error(&self) {
        if let Some(c) = &self.counters {
            c.target_errors.inc();
        }
    }
}

/// The subject on the target of a schema that `subjects` hold on the source, for `field` of a
/// record of `source_topic` mirrored to `remote_topic`; `other` names a subject that is not
/// named after the topic.
fn choose_subject(
    source_topic: &str,
    remote_topic: &str,
    field: Field,
    subjects: &[(String, i64)],
    other: impl Fn(&str) -> String,
) -> String {
    let own = format!("{source_topic}-{}", field.as_str());
    let topic_prefix = format!("{source_topic}-");
    let fallback = format!("{remote_topic}-{}", field.as_str());
    if subjects.iter().any(|(s, _)| *s == own) {
        return fallback;
    }
    // A `-key`/`-value` subject that is not this field's (another topic's, or the other
    // field's, holding the same schema) says nothing of the strategy: TopicNameStrategy.
    let named_for_a_field = |s: &str| s.ends_with("-key") || s.ends_with("-value");
    // TopicRecordNameStrategy: `<topic>-<record name>`.
    if let Some((s, _)) = subjects
        .iter()
        .find(|(s, _)| s.starts_with(&topic_prefix) && !named_for_a_field(s))
    {
        return format!("{remote_topic}-{}", &s[topic_prefix.len()..]);
    }
    // RecordNameStrategy or a subject of the producer's own choosing.
    match subjects.iter().find(|(s, _)| !named_for_a_field(s)) {
        Some((s, _)) => other(s),
        None => fallback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire;

    fn subjects(names: &[&str]) -> Vec<(String, i64)> {
        names.iter().map(|n| (n.to_string(), 1)).collect()
    }

    fn choose(field: Field, names: &[&str]) -> String {
        choose_subject("orders", "a.orders", field, &subjects(names), |s| {
            format!("kept:{s}")
        })
    }

    #[test]
    fn subjects_follow_the_topic_strategies() {
        // TopicNameStrategy, the same schema under the other field's or another topic's.
        assert_eq!(choose(Field::Value, &["orders-value"]), "a.orders-value");
        assert_eq!(
            choose(Field::Key, &["orders-value", "orders-key"]),
            "a.orders-key"
        );
        assert_eq!(choose(Field::Key, &["orders-value"]), "a.orders-key");
        assert_eq!(choose(Field::Value, &["payments-value"]), "a.orders-value");
        assert_eq!(choose(Field::Value, &[]), "a.orders-value");
        // TopicRecordNameStrategy.
        assert_eq!(
            choose(Field::Value, &["orders-acme.Order"]),
            "a.orders-acme.Order"
        );
        // RecordNameStrategy: kept (or renamed, as `other` decides).
        assert_eq!(choose(Field::Value, &["acme.Order"]), "kept:acme.Order");
        assert_eq!(
            choose(Field::Value, &["payments-value", "acme.Order"]),
            "kept:acme.Order"
        );
    }

    /// A translator whose registries refuse connections (port 1): every answer it gives comes
    /// from its caches.
    fn offline() -> (Translator, SchemaCounters) {
        translator("http://127.0.0.1:1", "http://127.0.0.1:1")
    }

    /// A translator from the registry at `source` to the one at `target`.
    fn translator(source: &str, target: &str) -> (Translator, SchemaCounters) {
        let text = format!("[clusters.a]\nbootstrap = \"a:9092\"\n[clusters.a.schema_registry]\nurl = \"{source}\"\n[clusters.b]\nbootstrap = \"b:9092\"\n[clusters.b.schema_registry]\nurl = \"{target}\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\nschemas = \"translate\"\n");
        let p =
            refract_config::Pipeline::parse(std::path::Path::new("/tmp/p.toml"), &text).unwrap();
        let client = |c: &str| {
            RegistryClient::new(c, p.clusters[c].schema_registry.as_ref().unwrap()).unwrap()
        };
        let metrics = refract_telemetry::Metrics::new();
        let counter = |n: &str| metrics.counter(n, "help", &[]).unwrap();
        let counters = SchemaCounters {
            translations: counter("t"),
            cache_misses: counter("m"),
            registered: counter("r"),
            source_errors: counter("se"),
            target_errors: counter("te"),
        };
        let t = Translator::new(
            "f",
            &p.flows[0].schemas,
            client("a"),
            client("b"),
            Arc::new(|s: &str| Some(s.to_string())),
            Some(counters.clone()),
        );
        (t, counters)
    }

    /// A registry whose schema references 5,000 others: the walk stops at the bound, a
    /// permanent failure naming it, having fetched and registered no more than the bound; walked
    /// again, it stops at the same place from the cache, asking only for the schema itself.
    #[test]
    fn a_schema_with_too_many_references_is_refused_within_the_budget() {
        use serde_json::json;
        use std::sync::atomic::AtomicUsize;
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        let url = crate::standin::serve(move |r| {
            counted.fetch_add(1, Ordering::SeqCst);
            match (r.method.as_str(), r.path.as_str()) {
                ("GET", "/schemas/ids/1") => {
                    let refs: Vec<_> = (0..5_000)
                        .map(|i| json!({"name": format!("r{i}.proto"), "subject": format!("r{i}"), "version": 1}))
                        .collect();
                    let root =
                        json!({"schema": "root", "schemaType": "PROTOBUF", "references": refs});
                    (200, root.to_string())
                }
                ("GET", "/schemas/ids/1/versions") => (200, "[]".into()),
                ("GET", _) => (
                    200,
                    r#"{"id":2,"schema":"leaf","schemaType":"PROTOBUF"}"#.into(),
                ),
                ("POST", p) if p.ends_with("/versions") => (200, r#"{"id":3}"#.into()),
                _ => (200, r#"{"version":1}"#.into()),
            }
        });
        let (t, counters) = translator(&url, &url);
        let framed = wire::reframe(&[0, 0, 0, 0, 0, 8, 1], 1);
        let result = t.target_id_after(
            &mut LastIds::default(),
            "orders",
            "a.orders",
            Field::Value,
            Some(&framed),
        );
        let Err(TranslateError::Permanent(why)) = result else {
            panic!("{result:?}");
        };
        assert!(why.contains("more than 1000 schemas"), "{why}");
        // The schema and its subjects, then per reference: its version, its registration and
        // the lookup of its version on the target.
        assert_eq!(requests.load(Ordering::SeqCst), 2 + 3 * MAX_REFERENCES);
        assert_eq!(counters.registered.get(), MAX_REFERENCES as u64);
        let again = t.resolve("orders", "a.orders", Field::Value, 1);
        assert!(
            matches!(again, Err(TranslateError::Permanent(_))),
            "{again:?}"
        );
        assert_eq!(requests.load(Ordering::SeqCst), 4 + 3 * MAX_REFERENCES);
    }

    #[test]
    fn a_partitions_last_ids_answer_without_the_cache() {
        let (t, counters) = offline();
        t.remember("a.orders", 7, Field::Value, 70);
        let mut last = LastIds::default();
        let framed = |id: u32| wire::reframe(&[0, 0, 0, 0, 0, b'{', b'}'], id);
        let value = |last: &mut LastIds, id: u32| {
            t.target_id_after(last, "orders", "a.orders", Field::Value, Some(&framed(id)))
        };
        assert_eq!(value(&mut last, 7), Ok(Some(70)), "from the shared cache");
        assert_eq!(last.ids, [None, Some((7, 70))]);
        // The partition's last ids are asked first: the shared cache does not hold 8.
        let mut primed = LastIds {
            generation: 0,
            ids: [None, Some((8, 80))],
        };
        assert_eq!(value(&mut primed, 8), Ok(Some(80)));
        // Another id falls through to the shared cache, then to the registries (down here).
        t.remember("a.orders", 9, Field::Value, 90);
        assert_eq!(value(&mut last, 9), Ok(Some(90)));
        assert_eq!(last.ids, [None, Some((9, 90))]);
        assert!(matches!(
            value(&mut last, 10),
            Err(TranslateError::Unavailable(_))
        ));
        assert_eq!(last.ids, [None, Some((9, 90))], "a failure is not kept");
        assert_eq!(counters.cache_misses.get(), 1);
        // Keys are a field of their own; unframed bytes pass.
        let key = t.target_id_after(&mut last, "orders", "a.orders", Field::Key, Some(b"k1"));
        assert_eq!(key, Ok(None));
        // Only fields counted as rewritten reach the series, in one step per batch.
        assert_eq!(counters.translations.get(), 0);
        t.count(3);
        t.count(0);
        assert_eq!(counters.translations.get(), 3);
        assert_eq!(t.stats().translated, 3);
    }

    #[test]
    fn forgetting_drops_the_partitions_last_ids_too() {
        let (t, _) = offline();
        t.remember("a.orders", 7, Field::Value, 70);
        t.remember("a.orders", 9, Field::Value, 90);
        t.remember("a.other", 7, Field::Key, 71);
        let framed = |id: u32| wire::reframe(&[0, 0, 0, 0, 0, 1], id);
        let mut last = LastIds::default();
        let value = |last: &mut LastIds, id: u32| {
            t.target_id_after(last, "orders", "a.orders", Field::Value, Some(&framed(id)))
        };
        assert_eq!(value(&mut last, 7), Ok(Some(70)));
        // A registry that does not answer forgets nothing.
        assert!(matches!(
            t.revalidate(),
            Err(TranslateError::Unavailable(_))
        ));
        assert_eq!(value(&mut last, 7), Ok(Some(70)));
        assert_eq!(t.forget(|source, _| source == 7), 2);
        // The partition's last ids were of the old generation: 7 is asked of the registries.
        assert!(matches!(
            value(&mut last, 7),
            Err(TranslateError::Unavailable(_))
        ));
        assert_eq!(value(&mut last, 9), Ok(Some(90)));
        assert_eq!(last.ids, [None, Some((9, 90))]);
    }
}
