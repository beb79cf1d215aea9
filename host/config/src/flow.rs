//! What a flow is: its clusters, topics, plugins and settings, grouped by the part of the mirror
//! that reads them, with every default named once in [`defaults`] (used by the TOML builder,
//! the MirrorMaker 2 converter, the tests and checked against the README's example pipeline).

use std::path::PathBuf;
use std::time::Duration;

use crate::topics::{PatternList, TopicFilter};

/// Every flow setting's default, named once.
pub mod defaults {
    use std::time::Duration;

    /// `refresh_topics_interval`.
    pub const REFRESH_TOPICS_INTERVAL: Duration = Duration::from_secs(30);
    /// `commit_interval`; also `transaction_interval` unless set (the flow's `commit_interval`).
    pub const COMMIT_INTERVAL: Duration = Duration::from_secs(5);
    /// `replication_factor` and `internal_replication_factor`: the broker's default.
    pub const REPLICATION_FACTOR: i32 = -1;
    /// `heartbeats_replication`.
    pub const HEARTBEATS_REPLICATION: bool = true;
    /// `groups`.
    pub const GROUPS: &[&str] = &[".*"];
    /// `checkpoint_interval` (MM2's `emit.checkpoints.interval.seconds`).
    pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(60);
    /// `refresh_groups_interval` (MM2: 10 minutes).
    pub const REFRESH_GROUPS_INTERVAL: Duration = Duration::from_secs(60);
    /// `sync_group_offsets`.
    pub const SYNC_GROUP_OFFSETS: bool = false;
    /// `sync_group_offsets_interval`.
    pub const SYNC_GROUP_OFFSETS_INTERVAL: Duration = Duration::from_secs(60);
    /// `emit_offset_syncs`.
    pub const EMIT_OFFSET_SYNCS: bool = true;
    /// `offset_lag_max`.
    pub const OFFSET_LAG_MAX: i64 = 100;
    /// `emit_heartbeats`.
    pub const EMIT_HEARTBEATS: bool = true;
    /// `heartbeat_interval` (MM2's `emit.heartbeats.interval.seconds`).
    pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
    /// `sync_topic_configs`.
    pub const SYNC_TOPIC_CONFIGS: bool = true;
    /// `sync_topic_configs_interval` (MM2: 10 minutes).
    pub const SYNC_TOPIC_CONFIGS_INTERVAL: Duration = Duration::from_secs(60);
    /// `sync_topic_acls`.
    pub const SYNC_TOPIC_ACLS: bool = true;
    /// `sync_topic_acls_interval` (MM2: 10 minutes).
    pub const SYNC_TOPIC_ACLS_INTERVAL: Duration = Duration::from_secs(60);
    /// `provenance_header`.
    pub const PROVENANCE_HEADER: bool = true;
    /// `delivery`.
    pub const DELIVERY: super::DeliveryMode = super::DeliveryMode::AtLeastOnce;
    /// `on_lost_records`.
    pub const ON_LOST_RECORDS: super::OnLostRecords = super::OnLostRecords::Continue;
    /// `on_recreated_topic`.
    pub const ON_RECREATED_TOPIC: super::OnRecreatedTopic = super::OnRecreatedTopic::Stop;
    /// `tasks` (MM2's `tasks.max` is 1 by default too).
    pub const TASKS: u32 = 1;
    /// Most `tasks` a flow may have.
    pub const MAX_TASKS: u32 = 1024;
    /// A processor's `max_new_output_topics`: topics its outputs may have refract create.
    pub const MAX_NEW_OUTPUT_TOPICS: u32 = 10;
    /// `[cluster] session_timeout`: Kafka Connect's (and so MM2's) default.
    pub const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

    /// `dead_letter_topic`: `refract.dlq.<source>.internal`.
    pub fn dead_letter_topic(source: &str) -> String {
        crate::names::dead_letter_topic(source)
    }

    /// `mm2_offsets_topic`: `mm2-offsets.<source>.internal`, MM2's Connect offsets topic.
    pub fn mm2_offsets_topic(source: &str) -> String {
        crate::names::mm2_offsets_topic(source)
    }
}

/// One directed replication flow `source -> target`.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    /// Source cluster alias.
    pub source: String,
    /// Target cluster alias.
    pub target: String,
    /// Which source topics are mirrored.
    pub topics: TopicFilter,
    /// Names remote topics.
    pub policy: PluginSpec,
    /// Filters and transforms applied in order after the policy names the target topic.
    pub processors: Vec<ProcessorSpec>,
    /// Units of work the flow's partitions are divided into (MM2's `tasks.max`): each task
    /// owns a stable subset of partitions, and with exactly-once its own `transactional.id`.
    /// One process runs them all; in cluster mode the processes divide them.
    pub tasks: u32,
    /// `max_bytes_per_second` / `max_records_per_second`: how fast the flow may read its
    /// source, across all its tasks; a reload changes it without a restart.
    pub throttle: Throttle,
    /// How often source topics and partitions are rediscovered.
    pub refresh_topics_interval: Duration,
    /// Replication factor for remote topics refract creates (-1: the broker's default).
    pub replication_factor: i32,
    /// Replication factor for the MM2 internal topics (offset syncs, checkpoints, heartbeats) and
    /// the Connect offsets topic of exactly-once flows; the dead-letter and routed topics use
    /// `replication_factor`.
    pub internal_replication_factor: i32,
    /// Stamp every mirrored record with the `refract.provenance` header (the clusters it passed
    /// through) and never send a record back to a cluster it came from.
    pub provenance_header: bool,
    /// Kafka Connect offsets topic on the target where a MirrorMaker 2 that ran this flow kept
    /// its positions (`mm2-offsets.<source>.internal`, or MM2's `offset.storage.topic`): a
    /// partition refract has no position for yet resumes where MM2 stopped.
    pub mm2_offsets_topic: String,
    /// How records reach the target and their progress is kept.
    pub delivery: DeliverySettings,
    /// MM2 checkpoints and group offset sync.
    pub checkpoints: CheckpointSettings,
    /// MM2 offset syncs.
    pub offset_syncs: OffsetSyncSettings,
    /// MM2 heartbeats.
    pub heartbeats: HeartbeatSettings,
    /// Topic config sync.
    pub config_sync: ConfigSyncSettings,
    /// Topic ACL sync.
    pub acl_sync: AclSyncSettings,
    /// Schema-id translation between the clusters' schema registries.
    pub schemas: crate::SchemaSettings,
}

/// A flow's read rate limits (`None`: unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Throttle {
    /// `max_bytes_per_second`: key and value bytes read from the source per second.
    pub bytes_per_second: Option<u64>,
    /// `max_records_per_second`: records read from the source per second.
    pub records_per_second: Option<u64>,
}

/// What a consumer of the target sees of each source record after a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryMode {
    /// `at-least-once` (the default): records acknowledged by the target but not yet committed
    /// when refract stops uncleanly are mirrored again (and counted as duplicates).
    AtLeastOnce,
    /// `exactly-once`: the target producer is transactional; each transaction holds a run of
    /// mirrored records and the source positions they reach (in MM2's Connect offsets topic on
    /// the target), so a `read_committed` consumer of the target sees every record once.
    ExactlyOnce,
}

impl DeliveryMode {
    /// The name used in the pipeline file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AtLeastOnce => "at-least-once",
            Self::ExactlyOnce => "exactly-once",
        }
    }
}

/// How records reach the target and their progress is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliverySettings {
    /// `delivery`: at-least-once or exactly-once.
    pub mode: DeliveryMode,
    /// `transaction_interval` (exactly-once only): how long one transaction collects records
    /// before it commits; a `read_committed` reader sees records up to this much later.
    pub transaction_interval: Duration,
    /// `commit_interval`: how often the acknowledged source position is committed.
    pub commit_interval: Duration,
    /// `compression`: the `compression.type` of the flow's target producer (one of
    /// [`crate::COMPRESSION_TYPES`]); `None` leaves the target cluster's producer settings (or
    /// librdkafka's default, `none`) alone.
    pub compression: Option<String>,
    /// `dead_letter_topic`: topic on the target that receives records a processor failed on
    /// (`on_error = "dead-letter"`).
    pub dead_letter_topic: String,
    /// `on_lost_records`: what the flow does once it finds that the source deleted records it
    /// had not mirrored yet (they are reported either way).
    pub on_lost_records: OnLostRecords,
    /// `on_recreated_topic`: what the flow does once it finds that a source topic, or the
    /// remote topic it mirrors into, was deleted and created again (reported either way).
    pub on_recreated_topic: OnRecreatedTopic,
}

/// `on_recreated_topic`: what a flow does when a topic it mirrors was deleted and created again
/// under the same name (a new Kafka topic id), on the source or as the remote topic on the
/// target, or when a partition's position is past its end (the log was truncated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnRecreatedTopic {
    /// `"stop"` (default): stop mirroring that topic and report it; nothing of the new topic
    /// is mixed into the remote topic. The rest of the flow goes on.
    #[default]
    Stop,
    /// `"rewind"`: mirror the topic again from its beginning into the same remote topic (created
    /// again if it was deleted); offset syncs mark the rewind, so checkpoints translate the new
    /// topic's offsets.
    Rewind,
}

impl OnRecreatedTopic {
    /// The name used in the pipeline file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Rewind => "rewind",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "stop" => Some(Self::Stop),
            "rewind" => Some(Self::Rewind),
            _ => None,
        }
    }
}

/// `on_lost_records`: what a flow does when a partition's next position is below the source's
/// log start offset (retention or a DeleteRecords request removed records it had not mirrored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnLostRecords {
    /// `"continue"` (default): report the gap and go on from the partition's log start.
    #[default]
    Continue,
    /// `"halt"`: report the gap and halt the flow without committing past it.
    Halt,
}

impl OnLostRecords {
    /// The name used in the pipeline file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Continue => "continue",
            Self::Halt => "halt",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "continue" => Some(Self::Continue),
            "halt" => Some(Self::Halt),
            _ => None,
        }
    }
}

/// MM2 checkpoints (MirrorCheckpointConnector) and group offset sync.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointSettings {
    /// `emit_checkpoints`: write MM2 checkpoints to `<source>.checkpoints.internal` on the
    /// target.
    pub enabled: bool,
    /// `groups` / `groups_exclude`: which source consumer groups get checkpoints.
    pub groups: TopicFilter,
    /// `checkpoint_interval`: how often group offsets are translated and checkpointed.
    pub interval: Duration,
    /// `refresh_groups_interval`: how often the source's consumer groups are listed again.
    pub refresh_groups_interval: Duration,
    /// `sync_group_offsets`: commit translated offsets to idle target groups (MM2's
    /// `sync.group.offsets.enabled`).
    pub sync_group_offsets: bool,
    /// `sync_group_offsets_interval`: how often translated offsets are committed to target
    /// groups.
    pub sync_group_offsets_interval: Duration,
}

/// MM2 offset syncs (what checkpoints translate with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetSyncSettings {
    /// `emit_offset_syncs`: write MM2 offset syncs (needed by checkpoints).
    pub enabled: bool,
    /// `offset_syncs_location`: which cluster holds the offset-syncs topic.
    pub location: OffsetSyncsLocation,
    /// `offset_lag_max`: a new offset sync is written once the downstream offset is this far
    /// past the last one.
    pub lag_max: i64,
    /// `offset_translation`: how checkpoints translate group offsets.
    pub translation: OffsetTranslation,
}

/// `offset_translation`: how group offsets are translated into the target cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetTranslation {
    /// `"mm2"`: MirrorMaker 2's rule — the last sync at or before the group's offset, plus one.
    Mm2,
    /// `"exact"` (default): the writer syncs at every discontinuity and chains its syncs, and
    /// the checkpoint side translates inside a proven run to the exact offset (MM2's rule
    /// elsewhere, and always for syncs MirrorMaker 2 wrote).
    #[default]
    Exact,
}

/// MM2 heartbeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatSettings {
    /// `emit_heartbeats`: write MM2 heartbeats to `heartbeats` on the target.
    pub enabled: bool,
    /// `heartbeat_interval`: how often a heartbeat is written.
    pub interval: Duration,
    /// `heartbeats_replication`: mirror heartbeats topics even when the topic filter does not
    /// include them (MM2's default).
    pub replication: bool,
}

/// Topic config sync (MM2's `sync.topic.configs.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigSyncSettings {
    /// `sync_topic_configs`: create remote topics with the source's topic configs and keep them
    /// in sync.
    pub enabled: bool,
    /// `sync_topic_configs_interval`: how often topic configs are synced again.
    pub interval: Duration,
    /// `config_properties_exclude`: topic configs never copied.
    pub exclude: PatternList,
    /// `use_defaults_from`: where a config the source leaves at its default takes its value from.
    pub use_defaults_from: DefaultsFrom,
}

/// Topic ACL sync (MM2's `sync.topic.acls.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclSyncSettings {
    /// `sync_topic_acls`: copy literal topic ACLs (MM2's rules, additive only).
    pub enabled: bool,
    /// `sync_topic_acls_interval`: how often ACLs are synced again.
    pub interval: Duration,
}

impl Flow {
    /// `source->target`, as MirrorMaker 2 writes it.
    pub fn name(&self) -> String {
        self.id().to_string()
    }

    /// The flow's identity (its two aliases), which formats every name the flow owns.
    pub fn id(&self) -> crate::FlowId {
        crate::FlowId::new(&self.source, &self.target)
    }
}

/// Which cluster holds a flow's offset-syncs topic (MM2's `offset-syncs.topic.location`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSyncsLocation {
    /// `mm2-offset-syncs.<target>.internal` on the source (MM2's default).
    Source,
    /// `mm2-offset-syncs.<source>.internal` on the target.
    Target,
}

/// Where the value of a topic config the source leaves at its default comes from
/// (MM2's `use.defaults.from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultsFrom {
    /// Remove any override on the target, so the target broker's default applies (MM2's default).
    Target,
    /// Set the source broker's default value on the target.
    Source,
}

/// A record processor in a flow's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessorSpec {
    /// The filter or transform plugin.
    pub plugin: PluginSpec,
    /// What happens to records the processor fails on.
    pub on_error: OnError,
    /// Where a transform may send records: `output_topics` (full-match regexes), or `None` for
    /// the flow's own remote topics only.
    pub output_topics: Option<PatternList>,
    /// `max_new_output_topics`: how many topics that do not exist on the target its outputs may
    /// have refract create (per process).
    pub max_new_output_topics: u32,
}

/// What happens to the records of a batch a processor traps, times out or fails on, and to a
/// record it rejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Send them to the flow's dead-letter topic with headers naming the plugin and the error.
    DeadLetter,
    /// Drop them and count them.
    Skip,
    /// Stop the flow without committing past them; other flows keep running.
    Stop,
}

impl OnError {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "dead-letter" => Some(Self::DeadLetter),
            "skip" => Some(Self::Skip),
            "stop" => Some(Self::Stop),
            _ => None,
        }
    }
}

/// Where a plugin comes from and the config its `init` receives.
#[derive(Debug, Clone)]
pub struct PluginSpec {
    /// Built-in name or file.
    pub location: PluginLocation,
    /// The plugin's config table as TOML text (empty when none).
    pub config: String,
    /// Where in the pipeline it was declared, e.g. `flow[0].policy`.
    pub key: String,
    /// The sandbox limits set for this plugin; the runtime's defaults where none is set.
    pub limits: PluginLimitSettings,
}

/// A plugin's own sandbox limits, as the pipeline sets them (`None`: the runtime's default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginLimitSettings {
    /// `memory_limit`: one budget for every linear memory and table of an instance.
    pub memory_limit: Option<usize>,
    /// `call_timeout`: the longest one call may run.
    pub call_timeout: Option<Duration>,
    /// `max_outputs_per_record`: records a transform may return for one input record.
    pub max_outputs_per_record: Option<u32>,
    /// `max_outputs_per_call`: records a transform may return in one call.
    pub max_outputs_per_call: Option<u32>,
    /// `max_output_bytes`: bytes a call may pass to the host beyond the size of its input.
    pub max_output_bytes: Option<usize>,
    /// `max_wasm_bytes`: the largest plugin file read and compiled.
    pub max_wasm_bytes: Option<usize>,
    /// `compile_timeout`: the longest compiling the plugin may take.
    pub compile_timeout: Option<Duration>,
    /// `compile_memory_limit`: the most memory compiling the plugin may use.
    pub compile_memory_limit: Option<usize>,
}

/// Equal when they load the same plugin the same way: where it was declared (`key`) does not
/// count, so a flow that moves in the file is the same flow.
impl PartialEq for PluginSpec {
    fn eq(&self, other: &Self) -> bool {
        self.location == other.location
            && self.config == other.config
            && self.limits == other.limits
    }
}

impl Eq for PluginSpec {}

/// A plugin embedded in the binary or a `.wasm` component file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginLocation {
    /// `builtin:<name>`.
    Builtin(String),
    /// A component file, resolved against the pipeline file's folder.
    File(PathBuf),
}

impl std::fmt::Display for PluginLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginLocation::Builtin(name) => write!(f, "{name}"),
            PluginLocation::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl PluginSpec {
    /// A built-in policy with no config.
    pub fn builtin(name: &str, key: &str) -> Self {
        Self {
            location: PluginLocation::Builtin(name.to_string()),
            config: String::new(),
            key: key.to_string(),
            limits: PluginLimitSettings::default(),
        }
    }
}
