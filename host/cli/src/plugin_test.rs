//! `refract plugin test`: runs any plugin on sample records (or topic names, for a policy) and
//! prints one JSON line per input, so plugin authors can iterate without Kafka.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

use refract_config::{PluginLimitSettings, PluginLocation, PluginSpec};
use refract_plugin::{
    AnyPlugin, BatchView, Header, KafkaRecord, Outcome, Processor, RecordBatch, ReplicationPolicy,
};

/// What `refract plugin test` was asked to do.
#[derive(clap::Args)]
pub struct PluginTest {
    /// `builtin:<name>` or a `.wasm` component file.
    pub plugin: String,
    /// Input file, `-` for standard input: one JSON value per line (a record object for a
    /// processor; a topic name or `{"topic": ...}` for a policy), or, for a policy, plain topic
    /// names one per line.
    #[arg(long)]
    pub input: PathBuf,
    /// A config entry for the plugin, `key=value`; repeatable. The value is TOML (`n=3`,
    /// `fields=["a"]`, `renames={a="b"}`, `s="text"`); plain text that does not start like a TOML
    /// value (`header=env`) is taken as a string.
    #[arg(long = "config")]
    pub config: Vec<String>,
    /// The memory budget of the plugin's instance, all memories and tables together (`64MiB`),
    /// as `memory_limit` in a pipeline.
    #[arg(long)]
    pub memory_limit: Option<String>,
    /// The longest one call may run (`1s`, `250ms`), as `call_timeout` in a pipeline.
    #[arg(long)]
    pub call_timeout: Option<String>,
    /// Most records a transform may return for one input record, as `max_outputs_per_record`.
    #[arg(long)]
    pub max_outputs_per_record: Option<u32>,
    /// Most records a transform may return in one call, as `max_outputs_per_call`.
    #[arg(long)]
    pub max_outputs_per_call: Option<u32>,
    /// Most bytes a call may return beyond the size of its input (`64MiB`), as
    /// `max_output_bytes`.
    #[arg(long)]
    pub max_output_bytes: Option<String>,
    /// The largest plugin file read (`64MiB`), as `max_wasm_bytes`.
    #[arg(long)]
    pub max_wasm_bytes: Option<String>,
    /// The longest compiling the plugin may take (`600s`), as `compile_timeout`; a compiled
    /// plugin is cached (`REFRACT_CACHE_DIR=off` compiles every time).
    #[arg(long)]
    pub compile_timeout: Option<String>,
    /// The most memory the process compiling the plugin may use (`2GiB`), as
    /// `compile_memory_limit`.
    #[arg(long)]
    pub compile_memory_limit: Option<String>,
    /// Alias of the cluster the input comes from.
    #[arg(long, default_value = "source")]
    pub source_cluster: String,
    /// Alias of the target cluster (a policy's cycle check).
    #[arg(long, default_value = "target")]
    pub target_cluster: String,
    /// Topic for input records that name none.
    #[arg(long, default_value = "topic")]
    pub topic: String,
}

impl PluginTest {
    /// Loads the plugin, runs it on every input line and prints the outcomes to stdout.
    /// Fails when the plugin cannot be loaded, the input cannot be read, or a call failed.
    pub fn run(&self) -> Result<()> {
        let location = if self.plugin.starts_with("builtin:") {
            PluginLocation::Builtin(self.plugin.clone())
        } else {
            PluginLocation::File(PathBuf::from(&self.plugin))
        };
        let size = |value: Option<&str>, flag: &str| {
            value
                .map(refract_config::parse_size)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
        };
        let duration = |value: Option<&str>, flag: &str| match value {
            None => Ok(None),
            Some(text) => match refract_config::parse_duration(text) {
                Ok(d) if !d.is_zero() => Ok(Some(d)),
                Ok(_) => bail!("--{flag}: must be greater than zero"),
                Err(e) => bail!("--{flag}: {e}"),
            },
        };
        let call_timeout = duration(self.call_timeout.as_deref(), "call-timeout")?;
        for (flag, value) in [
            ("max-outputs-per-record", self.max_outputs_per_record),
            ("max-outputs-per-call", self.max_outputs_per_call),
        ] {
            if value == Some(0) {
                bail!("--{flag}: must be at least 1");
            }
        }
        let spec = PluginSpec {
            location,
            config: config_table(&self.config)?,
            key: "plugin".into(),
            limits: PluginLimitSettings {
                memory_limit: size(self.memory_limit.as_deref(), "memory-limit")?,
                call_timeout,
                max_outputs_per_record: self.max_outputs_per_record,
                max_outputs_per_call: self.max_outputs_per_call,
                max_output_bytes: size(self.max_output_bytes.as_deref(), "max-output-bytes")?,
                max_wasm_bytes: size(self.max_wasm_bytes.as_deref(), "max-wasm-bytes")?,
                compile_timeout: duration(self.compile_timeout.as_deref(), "compile-timeout")?,
                compile_memory_limit: size(
                    self.compile_memory_limit.as_deref(),
                    "compile-memory-limit",
                )?,
            },
        };
        let runtime = crate::plugin_runtime()?;
        let plugin = AnyPlugin::load(&runtime, &spec)?;
        let policy = matches!(plugin, AnyPlugin::Policy(_));
        let lines = read_lines(&self.input, policy)?;
        let mut out = std::io::stdout().lock();
        let failures = match plugin {
            AnyPlugin::Policy(p) => self.policy(&mut ReplicationPolicy::new(p), &lines, &mut out),
            AnyPlugin::Processor(p) => {
                self.processor(&mut Processor::new(Arc::clone(&p)), &lines, &mut out)
            }
        };
        let failures = match failures {
            // The reader went away (`| head`): stop quietly, as other command-line tools do.
            Err(e)
                if e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
            {
                return Ok(())
            }
            other => other?,
        };
        if failures > 0 {
            bail!("the plugin failed on {failures} input(s); see the \"error\" lines");
        }
        Ok(())
    }

    fn policy(
        &self,
        policy: &mut ReplicationPolicy,
        lines: &[(usize, Value)],
        out: &mut impl Write,
    ) -> Result<usize> {
        let mut failures = 0;
        for (n, line) in lines {
            let topic = match line {
                Value::String(t) => t.clone(),
                Value::Object(o) => o
                    .get("topic")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .with_context(|| format!("input line {n}: no \"topic\""))?,
                _ => bail!("input line {n}: expected a topic name or an object with \"topic\""),
            };
            let answer = (|| -> Result<Value, refract_plugin::PluginError> {
                let remote = policy
                    .format_remote_topics(&self.source_cluster, std::slice::from_ref(&topic))?
                    .pop();
                Ok(json!({
                    "topic": topic,
                    "remote": remote,
                    "source": policy.topic_source(&topic)?,
                    "upstream": policy.upstream_topic(&topic)?,
                    "original": policy.original_topic(&topic)?,
                    "internal": policy.is_internal_topic(&topic)?,
                    "heartbeats": policy.is_heartbeats_topic(&topic)?,
                    "cycle": policy.is_cycle(&topic, &self.target_cluster)?,
                }))
            })();
            let value = match answer {
                Ok(value) => match value["remote"]
                    .as_str()
                    .filter(|_| value["internal"] == false)
                    .and_then(|r| {
                        refract_plugin::topic_name_problem(r).map(|why| (r.to_string(), why))
                    }) {
                    // The policy answered, but with a name no Kafka cluster accepts for a topic
                    // it would mirror (internal topics are never mirrored).
                    Some((remote, why)) => {
                        failures += 1;
                        json!({
                            "topic": topic,
                            "outcome": "error",
                            "error": format!(
                                "plugin {}: format-remote-topics named {topic} `{}` on the target, which is not a legal Kafka topic name: {why}",
                                policy.plugin().name(),
                                refract_plugin::plugin_text(&remote, refract_plugin::MESSAGE_CAP)
                            ),
                        })
                    }
                    None => value,
                },
                Err(e) => {
                    failures += 1;
                    error_json(json!({ "topic": topic }), &e)
                }
            };
            writeln!(out, "{value}")?;
        }
        Ok(failures)
    }

    fn processor(
        &self,
        processor: &mut Processor,
        lines: &[(usize, Value)],
        out: &mut impl Write,
    ) -> Result<usize> {
        let mut records = Vec::new();
        for (n, line) in lines {
            records.push(parse_record(*n, line, &self.topic)?);
        }
        let mut failures = 0;
        let mut start = 0;
        // One call per run of records from the same topic-partition, as in a flow.
        while start < records.len() {
            let (topic, partition) = (records[start].0.clone(), records[start].1.partition);
            let end = records[start..]
                .iter()
                .position(|(t, r)| *t != topic || r.partition != partition)
                .map_or(records.len(), |k| start + k);
            let batch = RecordBatch {
                source_cluster: self.source_cluster.clone(),
                topic: topic.clone(),
                target_topic: topic.clone(),
                records: records[start..end].iter().map(|(_, r)| r.clone()).collect(),
            };
            match processor.process(&BatchView::of(&batch)) {
                Ok(outcomes) => {
                    for (record, outcome) in batch.records.iter().zip(outcomes) {
                        writeln!(out, "{}", outcome_json(record, outcome))?;
                    }
                }
                Err(e) => {
                    for record in &batch.records {
                        failures += 1;
                        writeln!(
                            out,
                            "{}",
                            error_json(json!({ "offset": record.offset }), &e)
                        )?;
                    }
                }
            }
            start = end;
        }
        Ok(failures)
    }
}

/// An `error` outcome line: `at` (the offset or topic) with the error and, when a sandbox limit
/// stopped the plugin, that limit's setting (`"limit": "call_timeout"`).
fn error_json(mut at: Value, error: &refract_plugin::PluginError) -> Value {
    at["outcome"] = json!("error");
    at["error"] = json!(error.to_string());
    if let Some(limit) = error.limit() {
        at["limit"] = json!(limit);
    }
    at
}

/// Builds the plugin's config table from `key=value` pairs. A value is TOML; one that does not
/// parse is taken as plain text only when it does not start like a TOML string, array, table,
/// number or boolean, so a typo in `fields=["a"` is an error rather than the string `["a"`.
fn config_table(pairs: &[String]) -> Result<String> {
    let mut table = toml::Table::new();
    for pair in pairs {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("--config {pair}: expected key=value"))?;
        let key = key.trim();
        if key.is_empty() {
            bail!("--config {pair}: the key is empty");
        }
        let parsed = match toml::from_str::<toml::Table>(&format!("v = {value}")) {
            Ok(mut t) => t
                .remove("v")
                .with_context(|| format!("--config {key}: no value"))?,
            Err(e) if looks_like_toml(value) => {
                let why = e.message().to_string();
                bail!("--config {key}: `{value}` is not a valid TOML value ({why}); quote it to pass it as text, e.g. {key}='\"...\"'")
            }
            Err(_) => toml::Value::String(value.to_string()),
        };
        if table.insert(key.to_string(), parsed).is_some() {
            bail!("--config {key}: given twice");
        }
    }
    Ok(if table.is_empty() {
        String::new()
    } else {
        toml::to_string(&table)?
    })
}

/// Whether `value` starts the way only a TOML value would: a quote, `[`, `{`, a digit or sign,
/// or the words true/false/inf/nan.
fn looks_like_toml(value: &str) -> bool {
    let v = value.trim_start();
    v.starts_with(['"', '\'', '[', '{', '+', '-'])
        || v.starts_with(|c: char| c.is_ascii_digit())
        || ["true", "false", "inf", "nan"].contains(&v.trim_end())
}

/// Reads the input lines. For a policy, a line that is not JSON is a plain topic name.
fn read_lines(path: &Path, policy: bool) -> Result<Vec<(usize, Value)>> {
    let reader: Box<dyn BufRead> = if path == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        ))
    };
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        let text = line.trim();
        if text.is_empty() || (policy && text.starts_with('#')) {
            continue;
        }
        let value = match serde_json::from_str::<Value>(text) {
            Ok(value) => value,
            Err(_) if policy && !text.starts_with(['"', '{', '[']) => Value::String(text.into()),
            Err(e) => bail!(
                "{}:{}: not JSON ({e}){}",
                path.display(),
                i + 1,
                if policy {
                    ""
                } else {
                    "; a processor reads one JSON record object per line"
                }
            ),
        };
        out.push((i + 1, value));
    }
    Ok(out)
}

/// A key or value: a JSON string is taken as UTF-8 text, any other JSON value as its JSON text.
fn bytes_field(o: &Map<String, Value>, name: &str) -> Option<Vec<u8>> {
    match o.get(name) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_bytes().to_vec()),
        Some(other) => Some(other.to_string().into_bytes()),
    }
}

fn parse_record(n: usize, line: &Value, default_topic: &str) -> Result<(String, KafkaRecord)> {
    let Value::Object(o) = line else {
        bail!("input line {n}: expected a JSON object with key, value, headers, ...");
    };
    let int = |name: &str, default: i64| o.get(name).and_then(Value::as_i64).unwrap_or(default);
    let headers = match o.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(h)) => h
            .iter()
            .map(|(k, v)| Header {
                key: k.clone(),
                value: v.as_str().map(|s| s.as_bytes().to_vec()),
            })
            .collect(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([Value::String(k), v]) => Ok(Header {
                    key: k.clone(),
                    value: v.as_str().map(|s| s.as_bytes().to_vec()),
                }),
                _ => bail!("input line {n}: headers entries are [name, value]"),
            })
            .collect::<Result<_>>()?,
        Some(_) => bail!("input line {n}: headers must be an object or a list of [name, value]"),
    };
    let topic = o
        .get("topic")
        .and_then(Value::as_str)
        .unwrap_or(default_topic)
        .to_string();
    let record = KafkaRecord {
        partition: i32::try_from(int("partition", 0))
            .with_context(|| format!("input line {n}: partition"))?,
        offset: int("offset", n as i64 - 1),
        timestamp_ms: int("timestamp", -1),
        key: bytes_field(o, "key"),
        value: bytes_field(o, "value"),
        headers,
    };
    Ok((topic, record))
}

fn bytes_json(b: &Option<Vec<u8>>) -> Value {
    match b {
        None => Value::Null,
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => json!({ "hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>() }),
        },
    }
}

fn outcome_json(record: &KafkaRecord, outcome: Outcome) -> Value {
    match outcome {
        Outcome::Keep => json!({ "offset": record.offset, "outcome": "keep" }),
        Outcome::Drop => json!({ "offset": record.offset, "outcome": "drop" }),
        Outcome::Reject(reason) => {
            json!({ "offset": record.offset, "outcome": "reject", "reason": reason })
        }
        Outcome::Replace(records) => json!({
            "offset": record.offset,
            "outcome": "replace",
            "records": records.iter().map(|r| json!({
                "topic": r.topic,
                "partition": r.partition,
                "timestamp": r.timestamp_ms,
                "key": bytes_json(&r.key),
                "value": bytes_json(&r.value),
                "headers": r.headers.iter().map(|h| json!([h.key, bytes_json(&h.value)])).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_values_are_toml_or_plain_text_by_intent() {
        assert_eq!(
            config_table(&["header=env".into(), "n=3".into()]).unwrap(),
            "header = \"env\"\nn = 3\n"
        );
        assert_eq!(
            config_table(&["renames={\"orders-v1\"=\"orders\"}".into()]).unwrap(),
            "[renames]\norders-v1 = \"orders\"\n"
        );
        let err = config_table(&["fields=[\"email\"".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--config fields") && err.contains("not a valid TOML value"),
            "{err}"
        );
        assert!(config_table(&["s=\"unterminated".into()]).is_err());
        assert!(config_table(&["a=1".into(), "a=2".into()])
            .unwrap_err()
            .to_string()
            .contains("given twice"));
        assert!(config_table(&["novalue".into()]).is_err());
        // Text that cannot start a TOML value stays text, even with spaces and symbols.
        assert_eq!(
            config_table(&["t=${topic}.x y".into()]).unwrap(),
            "t = \"${topic}.x y\"\n"
        );
    }

    #[test]
    fn policy_input_takes_plain_names_and_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("topics.txt");
        std::fs::write(&path, "orders\n\n# a comment\n\"a.b\"\n{\"topic\":\"x\"}\n").unwrap();
        let lines = read_lines(&path, true).unwrap();
        let values: Vec<&Value> = lines.iter().map(|(_, v)| v).collect();
        assert_eq!(
            values,
            [&json!("orders"), &json!("a.b"), &json!({"topic": "x"})]
        );
        assert_eq!(lines[2].0, 5, "line numbers count blank and comment lines");
        let err = read_lines(&path, false).unwrap_err().to_string();
        assert!(err.contains("topics.txt:1: not JSON"), "{err}");
    }
}
