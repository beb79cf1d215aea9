//! Building blocks compatible with MirrorMaker 2 (MM2): pure logic, no I/O.
//!
//! The counterpart of Kafka's `connect/mirror-client`: a crate of its own so tools (`refract
//! offsets translate`, `refract verify`, tests) can read MM2's topics without the engine.
//!
//! These pieces let refract read and write MM2's internal topics byte for byte and make the same
//! offset-translation decisions MM2 makes, so MM2 tooling (`RemoteClusterUtils.translateOffsets`,
//! the console formatters, dashboards) works against a refract deployment and a running MM2 can be
//! replaced by refract without losing consumer-group positions.
//!
//! - [`wire`]: the key/value encodings of the offset-syncs, checkpoints and heartbeats topics
//!   (MM2's `OffsetSync`, `Checkpoint`, `Heartbeat`).
//! - [`sync_writer`]: when the source side emits an offset sync (MM2's `OffsetSyncWriter`).
//! - [`sync_store`]: the checkpoint side's bounded, exponentially spaced history of offset syncs
//!   and the translation of upstream group offsets into downstream ones (MM2's `OffsetSyncStore`).
//! - [`exact`]: refract's exact translation from the chained syncs of its own writer
//!   (`offset_translation = "exact"`), with MM2's rule wherever a link cannot be proven.
//! - [`checkpoints`]: which translated offsets become checkpoints, the latest checkpoint per group
//!   partition (MM2's `MirrorCheckpointTask` filter and `CheckpointStore`), and the client-side
//!   reading of the checkpoints topic (`RemoteClusterUtils.translateOffsets`).
//! - [`connect_offsets`]: MM2's own replication positions as Kafka Connect stores them
//!   (`mm2-offsets.<source>.internal`), so refract can take over from a stopped MM2.

pub mod checkpoints;
pub mod connect_offsets;
pub mod exact;
pub mod sync_store;
pub mod sync_writer;
pub mod wire;

pub use checkpoints::{
    checkpoint_topic, is_more_recent, latest_for_group, CheckpointStore, TopicNaming,
};
pub use connect_offsets::Mm2Positions;
pub use exact::{Coarse, ExactHistory};
pub use sync_store::{OffsetSyncStore, Translation};
pub use sync_writer::OffsetSyncWriter;
pub use wire::{Checkpoint, Heartbeat, OffsetSync, WireError};
