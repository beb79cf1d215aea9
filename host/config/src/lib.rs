//! The pipeline model: what clusters exist, which flows run between them, and which plugins name
//! their topics. A [`Pipeline`] is parsed and fully validated before anything starts; every error
//! names the file, line and key.

mod duration;
mod error;
mod files;
mod flow;
pub mod keys;
mod loader;
mod mm2;
mod model;
pub mod names;
mod oidc;
mod properties;
mod raw;
mod reserved;
mod rules;
mod schemas;
mod secrets;
mod task;
mod topics;

pub use duration::{parse_duration, parse_size, MAX_DURATION};
pub use error::ConfigError;
pub use files::{read_config_file, MAX_PIPELINE_FILE_BYTES, MAX_SECRET_FILE_BYTES};
pub use flow::{
    defaults, AclSyncSettings, CheckpointSettings, ConfigSyncSettings, DefaultsFrom, DeliveryMode,
    DeliverySettings, Flow, HeartbeatSettings, OffsetSyncSettings, OffsetSyncsLocation,
    OffsetTranslation, OnError, OnLostRecords, OnRecreatedTopic, PluginLimitSettings,
    PluginLocation, PluginSpec, ProcessorSpec, Throttle,
};
pub use mm2::{convert_mm2_properties, Mm2Conversion};
pub use model::{ClientRole, Cluster, ClusterMode, Endpoint, EndpointTls, Pipeline, ReloadAccess};
pub use names::{FlowId, Side};
pub use oidc::{Oidc, CLIENT_CREDENTIALS as OIDC_GRANT};
pub use reserved::{internal_topic_reason, FlowTopics, ReservedTopic};
pub use rules::{BUILTIN_POLICIES, BUILTIN_PROCESSORS, COMPRESSION_TYPES};
pub use schemas::{schema_defaults, SchemaMode, SchemaRegistry, SchemaSettings, SubjectNaming};
pub use secrets::{is_sensitive_key, REDACTED};
pub use task::{task_of, TaskId};
pub use topics::{
    PatternList, TopicFilter, DEFAULT_CONFIG_PROPERTIES_EXCLUDE, DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS_EXCLUDE,
};
