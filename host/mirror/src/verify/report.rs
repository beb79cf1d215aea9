//! What `verify` found: per partition, per flow and in all.

use super::checksum::Sum;

/// What was read from one side of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    /// Low watermark when verification started.
    pub low: i64,
    /// High watermark when verification started: records from here on were not compared.
    pub high: i64,
    /// Records actually read between the two.
    pub read: u64,
    /// Checksum of those records.
    pub checksum: Sum,
}

/// Why a mirrored partition has no counterpart on the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// The remote topic does not exist.
    Topic,
    /// The remote topic has this many partitions, too few.
    Partition(i32),
}

/// What a remote partition holds from before its source partition's log start, when the
/// target's last records equal every record the source still holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    /// Records the target holds from before the source's log start.
    pub held: u64,
    /// The source offsets before its log start that the target does not hold: deleted at the
    /// source before they were mirrored (`first..=last`). `None` when the target holds them all,
    /// or when it cannot be told (see `known`).
    pub lost: Option<(i64, i64)>,
    /// Whether `lost` could be worked out: both partitions' offsets are contiguous and the
    /// target's log starts at offset 0, so its first `held` records are the source's offsets
    /// `0..held`.
    pub known: bool,
}

impl Deleted {
    /// How many source records were deleted before they were mirrored.
    pub fn lost_count(&self) -> u64 {
        self.lost.map_or(0, |(first, last)| {
            u64::try_from(last - first + 1).unwrap_or(0)
        })
    }
}

/// One source partition compared with its remote partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionReport {
    /// The flow, `source->target`.
    pub flow: String,
    /// Topic on the source cluster.
    pub source_topic: String,
    /// Topic on the target cluster.
    pub remote_topic: String,
    /// Partition number (the same on both sides).
    pub partition: i32,
    /// The source partition.
    pub source: Side,
    /// The remote partition, or why there is none.
    pub target: Result<Side, Missing>,
    /// When the source's log starts later than the target's and the target ends with exactly
    /// the source's records: what the target holds from before, and what was lost.
    pub deleted: Option<Deleted>,
}

impl PartitionReport {
    /// Whether the target holds the same records as the source (or ends with them, having kept
    /// records the source deleted since, with none known lost).
    pub fn matches(&self) -> bool {
        if let Some(d) = &self.deleted {
            return d.lost.is_none();
        }
        self.target
            .as_ref()
            .is_ok_and(|t| t.read == self.source.read && t.checksum == self.source.checksum)
    }
}

/// One flow's results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowReport {
    /// `source->target`.
    pub flow: String,
    /// Source cluster alias.
    pub source: String,
    /// Target cluster alias.
    pub target: String,
    /// How many processors the flow runs (their drops and changes show as differences).
    pub processors: usize,
    /// Whether the flow translates schema ids (`schemas = "translate"`): framed keys and
    /// values differ in their id bytes by design.
    pub translates: bool,
    /// Mirrored heartbeats topics left out (no topic filter named them).
    pub skipped_heartbeats: Vec<String>,
    /// Compared partitions, by source topic then partition.
    pub partitions: Vec<PartitionReport>,
}

/// The outcome of [`verify`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// One entry per verified flow, in pipeline order.
    pub flows: Vec<FlowReport>,
}

impl Report {
    /// Every compared partition.
    pub fn partitions(&self) -> impl Iterator<Item = &PartitionReport> {
        self.flows.iter().flat_map(|f| &f.partitions)
    }

    /// Whether nothing was compared.
    pub fn is_empty(&self) -> bool {
        self.partitions().next().is_none()
    }

    /// Partitions whose target differs from the source.
    pub fn mismatches(&self) -> usize {
        self.partitions().filter(|p| !p.matches()).count()
    }

    /// Whether every compared partition matches.
    pub fn all_match(&self) -> bool {
        self.mismatches() == 0
    }
}
