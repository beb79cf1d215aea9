//! The translator's upkeep, beside the data path: checking cached translations against both
//! registries ([`Translator::revalidate`]) and copying the subjects of the flow's topics ahead of
//! traffic ([`Translator::sync_subjects`]).

use super::*;

impl Translator {
    /// Checks the cached translations against both registries (the subject sync runs it every
    /// `schema_sync_interval`): a source id the source registry no longer knows or that now
    /// names another schema (a rebuilt registry reusing ids), and a target id the target
    /// registry no longer knows or that now names another schema (a registry that lost its
    /// data), are forgotten, with every translation through them, so their next record asks
    /// the registries again. What the subject sync copied and the references registered are
    /// forgotten too when a target id was, so they are copied again. The number of cached
    /// translations forgotten; nothing is forgotten when a registry does not answer.
    pub fn revalidate(&self) -> Result<usize, TranslateError> {
        let cached: Vec<(String, u32, Field, u32)> = self
            .ids
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .flat_map(|(topic, ids)| {
                ids.iter()
                    .map(move |(&(source, field), &target)| (topic.clone(), source, field, target))
            })
            .collect();
        let sources: BTreeSet<u32> = cached.iter().map(|c| c.1).collect();
        let targets: BTreeSet<u32> = cached.iter().map(|c| c.3).collect();
        let mut stale: HashSet<(Side, u32)> = HashSet::new();
        for (side, ids) in [(Side::Source, &sources), (Side::Target, &targets)] {
            let client = match side {
                Side::Source => &self.source,
                Side::Target => &self.target,
            };
            for &id in ids {
                match client.schema_by_id(id) {
                    Ok(now) => {
                        let mut seen = self.lock_seen();
                        match seen.get(&(side, id)) {
                            Some(was) if *was != now => {
                                stale.insert((side, id));
                                seen.insert((side, id), now);
                            }
                            Some(_) => {}
                            None => {
                                seen.insert((side, id), now);
                            }
                        }
                    }
                    Err(RegistryError::NotFound(_)) => {
                        stale.insert((side, id));
                        self.lock_seen().remove(&(side, id));
                    }
                    Err(e) => {
                        match side {
                            Side::Source => self.source_error(),
                            Side::Target => self.target_error(),
                        }
                        return Err(e.into());
                    }
                }
            }
        }
        if stale.is_empty() {
            return Ok(0);
        }
        let forgotten = self.forget(|source, target| {
            stale.contains(&(Side::Source, source)) || stale.contains(&(Side::Target, target))
        });
        if stale.iter().any(|(side, _)| *side == Side::Target) {
            self.lock_refs().clear();
            self.synced
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
        }
        let mut named: Vec<String> = stale
            .iter()
            .map(|(side, id)| {
                let side = match side {
                    Side::Source => "source",
                    Side::Target => "target",
                };
                format!("{side} id {id}")
            })
            .collect();
        named.sort();
        info!(flow = %self.flow, "schema ids no longer named the schemas they were translated to or from ({}): {forgotten} cached translations forgotten; their next records ask the registries again", named.join(", "));
        Ok(forgotten)
    }

    /// Forgets the cached translations `(source id, target id)` that `stale` picks, and every
    /// partition's last ids; how many were forgotten.
    pub(super) fn forget(&self, stale: impl Fn(u32, u32) -> bool) -> usize {
        let mut forgotten = 0;
        {
            let mut ids = self.ids.write().unwrap_or_else(|e| e.into_inner());
            for topic in ids.values_mut() {
                let before = topic.len();
                topic.retain(|&(source, _), &mut target| !stale(source, target));
                forgotten += before - topic.len();
            }
            ids.retain(|_, topic| !topic.is_empty());
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        forgotten
    }

    /// Notes what target id `target` names now, so that a later revalidation can tell when it
    /// names another schema (as the target returns it: its text may differ from what was
    /// sent). Without an answer, the first revalidation notes it instead.
    pub(super) fn note_target(&self, target: u32) {
        if let Ok(named) = self.target.schema_by_id(target) {
            self.lock_seen().insert((Side::Target, target), named);
        }
    }

    pub(super) fn lock_seen(&self) -> std::sync::MutexGuard<'_, HashMap<(Side, u32), Schema>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Copies the subjects of `topics` (source topic, remote topic): every version of
    /// `<topic>-key` and `<topic>-value` (the fields the flow translates), then of each
    /// `<topic>-<record name>` the source lists (TopicRecordNameStrategy), in order, then the
    /// subject's compatibility level. Returns the subjects copied; stops at the first registry
    /// that does not answer. A version the target refuses is logged and skipped.
    pub fn sync_subjects(&self, topics: &[(String, String)]) -> Result<u64, TranslateError> {
        let fields: Vec<Field> = [Field::Key, Field::Value]
            .into_iter()
            .filter(|f| self.translates(*f))
            .collect();
        let mut copied = 0;
        for (topic, remote) in topics {
            for field in &fields {
                let job = Job {
                    subject: format!("{topic}-{}", field.as_str()),
                    target: format!("{remote}-{}", field.as_str()),
                    remote,
                    fields: std::slice::from_ref(field),
                };
                if self.copy_subject(&job)? {
                    copied += 1;
                }
            }
        }
        for job in self.record_subjects(topics, &fields) {
            if self.copy_subject(&job)? {
                copied += 1;
            }
        }
        self.lock_stats().synced_subjects = copied;
        Ok(copied)
    }

    /// The TopicRecordNameStrategy subjects of `topics` the source lists: `<topic>-<record
    /// name>`, the name an Avro or Protobuf full name (dot-separated identifiers, so the topic is
    /// what comes before the subject's last `-`), copied to `<remote topic>-<record name>`, as
    /// translation names them. Subjects of other strategies cannot be told apart by their name
    /// and reach the target with their first record. A source that cannot list its subjects
    /// (one over the client's 10 MiB answer limit, say) leaves them to translation, with a WARN.
    fn record_subjects<'a>(
        &self,
        topics: &'a [(String, String)],
        fields: &'a [Field],
    ) -> Vec<Job<'a>> {
        if fields.is_empty() || topics.is_empty() {
            return Vec::new();
        }
        let listed = match self.source.subjects() {
            Ok(listed) => listed,
            Err(e) => {
                self.source_error();
                tracing::warn!(flow = %self.flow, "<topic>-<record> subjects not copied ahead of their records this round: {e}");
                return Vec::new();
            }
        };
        let remotes: HashMap<&str, &str> = topics
            .iter()
            .map(|(t, r)| (t.as_str(), r.as_str()))
            .collect();
        listed
            .into_iter()
            .filter_map(|subject| {
                let (topic, record) = subject.rsplit_once('-')?;
                if !is_record_name(record) {
                    return None;
                }
                let remote = *remotes.get(topic)?;
                Some(Job {
                    target: format!("{remote}-{record}"),
                    subject,
                    remote,
                    fields,
                })
            })
            .collect()
    }

    /// Copies one subject's versions not copied yet in this run and its compatibility level;
    /// whether the source has the subject.
    fn copy_subject(&self, job: &Job<'_>) -> Result<bool, TranslateError> {
        let versions = self
            .source
            .versions(&job.subject)
            .inspect_err(|_| self.source_error())?;
        if versions.is_empty() {
            return Ok(false);
        }
        let (subject, target_subject) = (&job.subject, &job.target);
        for v in versions {
            let done = (subject.clone(), v, target_subject.clone());
            if self
                .synced
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&done)
            {
                continue;
            }
            let (id, schema) = match self.source.version(subject, v) {
                Ok(found) => found,
                Err(RegistryError::NotFound(_)) => continue, // deleted meanwhile
                Err(e) => {
                    self.source_error();
                    return Err(e.into());
                }
            };
            match self.register(target_subject, &schema, 0, &mut Walk::default()) {
                Ok((target, _)) => {
                    self.synced
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(done);
                    self.note_target(target);
                    for field in job.fields {
                        self.remember(job.remote, id, *field, target);
                    }
                }
                Err(TranslateError::Permanent(m)) => {
                    tracing::warn!(flow = %self.flow, "subject {subject} version {v} not copied to {target_subject}: {m}");
                }
                Err(e) => return Err(e),
            }
        }
        // A subject without a level of its own reads as NONE on some registries (Apicurio), so
        // NONE is not copied: the target's own default stands.
        let level = self
            .source
            .compatibility(subject)
            .inspect_err(|_| self.source_error())?
            .filter(|level| level != "NONE");
        if let Some(level) = level {
            let current = self
                .target
                .compatibility(target_subject)
                .inspect_err(|_| self.target_error())?;
            if current.as_deref() != Some(level.as_str()) {
                self.target
                    .set_compatibility(target_subject, &level)
                    .inspect_err(|_| self.target_error())?;
            }
        }
        Ok(true)
    }
}

/// One subject the subject sync copies: from `subject` on the source to `target`, its ids
/// remembered for `fields` of the records of `remote`.
struct Job<'a> {
    subject: String,
    target: String,
    remote: &'a str,
    fields: &'a [Field],
}

/// Whether `name` is an Avro or Protobuf full name: dot-separated identifiers (letters, digits
/// and `_`, not starting with a digit), and not `key` or `value`.
fn is_record_name(name: &str) -> bool {
    name != "key"
        && name != "value"
        && name.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::is_record_name;

    #[test]
    fn record_names_are_full_names() {
        for name in ["Order", "acme.Order", "com.acme.v1.Order_2", "_x"] {
            assert!(is_record_name(name), "{name}");
        }
        for name in [
            "key",
            "value",
            "",
            "acme.",
            ".Order",
            "2fast",
            "my-record",
            "a b",
        ] {
            assert!(!is_record_name(name), "{name}");
        }
    }
}
