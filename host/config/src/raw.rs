//! The pipeline file exactly as written, with spans for error messages.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPipeline {
    #[serde(default)]
    pub clusters: BTreeMap<Spanned<String>, Spanned<RawCluster>>,
    #[serde(default)]
    pub flow: Vec<Spanned<RawFlow>>,
    pub metrics: Option<RawMetrics>,
    pub cluster: Option<Spanned<RawClusterMode>>,
}

/// `[cluster]`: several processes share the pipeline's flows.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClusterMode {
    pub enabled: Option<bool>,
    pub instance: Option<Spanned<String>>,
    pub session_timeout: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    pub listen: Spanned<String>,
    pub reload: Option<Spanned<bool>>,
    pub reload_token: Option<Spanned<String>>,
    pub tls_cert: Option<Spanned<String>>,
    pub tls_key: Option<Spanned<String>>,
    pub allowed_hosts: Option<Vec<Spanned<String>>>,
    pub partition_series: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub bootstrap: Spanned<String>,
    #[serde(default)]
    pub client: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    #[serde(default)]
    pub consumer: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    #[serde(default)]
    pub producer: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    #[serde(default)]
    pub admin: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    pub oauthbearer: Option<Spanned<RawOAuthBearer>>,
    pub schema_registry: Option<Spanned<RawSchemaRegistry>>,
}

/// `[clusters.<alias>.schema_registry]`: the cluster's Confluent-compatible schema registry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSchemaRegistry {
    pub url: Spanned<String>,
    pub user: Option<Spanned<String>>,
    pub password: Option<Spanned<String>>,
    pub token: Option<Spanned<String>>,
    pub ca: Option<Spanned<String>>,
    pub cert: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
    pub timeout: Option<Spanned<String>>,
}

/// `[clusters.<alias>.oauthbearer]`: a static OAUTHBEARER token.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOAuthBearer {
    pub token: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFlow {
    pub source: Spanned<String>,
    pub target: Spanned<String>,
    pub enabled: Option<bool>,
    pub topics: Option<Vec<Spanned<String>>>,
    pub topics_exclude: Option<Vec<Spanned<String>>>,
    pub policy: Option<Spanned<RawPlugin>>,
    pub refresh_topics_interval: Option<Spanned<String>>,
    pub commit_interval: Option<Spanned<String>>,
    pub max_bytes_per_second: Option<Spanned<toml::Value>>,
    pub max_records_per_second: Option<Spanned<i64>>,
    pub replication_factor: Option<Spanned<i64>>,
    pub heartbeats_replication: Option<bool>,
    pub processors: Option<Vec<Spanned<RawProcessor>>>,
    pub dead_letter_topic: Option<Spanned<String>>,
    pub groups: Option<Vec<Spanned<String>>>,
    pub groups_exclude: Option<Vec<Spanned<String>>>,
    pub emit_checkpoints: Option<bool>,
    pub checkpoint_interval: Option<Spanned<String>>,
    pub refresh_groups_interval: Option<Spanned<String>>,
    pub sync_group_offsets: Option<bool>,
    pub sync_group_offsets_interval: Option<Spanned<String>>,
    pub emit_offset_syncs: Option<bool>,
    pub offset_syncs_location: Option<Spanned<String>>,
    pub offset_lag_max: Option<Spanned<i64>>,
    pub offset_translation: Option<Spanned<String>>,
    pub emit_heartbeats: Option<bool>,
    pub heartbeat_interval: Option<Spanned<String>>,
    pub sync_topic_configs: Option<bool>,
    pub sync_topic_configs_interval: Option<Spanned<String>>,
    pub config_properties_exclude: Option<Vec<Spanned<String>>>,
    pub use_defaults_from: Option<Spanned<String>>,
    pub sync_topic_acls: Option<bool>,
    pub sync_topic_acls_interval: Option<Spanned<String>>,
    pub internal_replication_factor: Option<Spanned<i64>>,
    pub provenance_header: Option<bool>,
    pub mm2_offsets_topic: Option<Spanned<String>>,
    pub compression: Option<Spanned<String>>,
    pub delivery: Option<Spanned<String>>,
    pub transaction_interval: Option<Spanned<String>>,
    pub on_lost_records: Option<Spanned<String>>,
    pub on_recreated_topic: Option<Spanned<String>>,
    pub tasks: Option<Spanned<i64>>,
    pub schemas: Option<Spanned<String>>,
    pub schema_fields: Option<Vec<Spanned<String>>>,
    pub schema_on_error: Option<Spanned<String>>,
    pub schema_subjects: Option<Spanned<String>>,
    pub schema_sync_interval: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProcessor {
    pub plugin: Spanned<String>,
    pub config: Option<toml::Table>,
    pub on_error: Option<Spanned<String>>,
    pub memory_limit: Option<Spanned<String>>,
    pub call_timeout: Option<Spanned<String>>,
    pub max_outputs_per_record: Option<Spanned<i64>>,
    pub max_outputs_per_call: Option<Spanned<i64>>,
    pub max_output_bytes: Option<Spanned<String>>,
    pub max_wasm_bytes: Option<Spanned<String>>,
    pub compile_timeout: Option<Spanned<String>>,
    pub compile_memory_limit: Option<Spanned<String>>,
    pub output_topics: Option<Vec<Spanned<String>>>,
    pub max_new_output_topics: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlugin {
    pub plugin: Spanned<String>,
    pub config: Option<toml::Table>,
    pub memory_limit: Option<Spanned<String>>,
    pub call_timeout: Option<Spanned<String>>,
    pub max_outputs_per_record: Option<Spanned<i64>>,
    pub max_outputs_per_call: Option<Spanned<i64>>,
    pub max_output_bytes: Option<Spanned<String>>,
    pub max_wasm_bytes: Option<Spanned<String>>,
    pub compile_timeout: Option<Spanned<String>>,
    pub compile_memory_limit: Option<Spanned<String>>,
}
