//! Records the source deleted before the flow mirrored them: a partition whose next position is
//! below the source's log start offset (retention, a DeleteRecords request). They are gone;
//! what matters is that nobody learns it from a missing record months later. Each gap is found
//! where it shows, counted, logged and shown once, and the flow either goes on from the log start
//! or halts (`on_lost_records`).
//!
//! Two places find a gap, sharing [`Run::found_gap`]:
//! - **On (re)start and assignment** ([`Run::check_log_start`]): a resume position (the flow's
//!   commit, an exactly-once position, where MirrorMaker 2 stopped) is compared with the
//!   partition's low watermark before the partition is read.
//! - **While reading** ([`Run::out_of_range`]): the source consumer runs with
//!   `auto.offset.reset=error`, so a fetch below the log start (records deleted while the flow
//!   was behind, or while a degraded partition waited for its retry) is reported as a consumer
//!   error naming the partition and the offset, instead of librdkafka quietly jumping to the log
//!   start. The flow reads the low watermark and seeks there itself. Partitions with no position
//!   at all are assigned at an explicit `BEGINNING`/`END` (the user's `auto.offset.reset`), which
//!   never needs a reset.

use std::collections::HashMap;

use anyhow::Result;
use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};
use tracing::{debug, info};

use refract_config::OnLostRecords;
use refract_kafka::clients::{watermarks_many, REQUEST_TIMEOUT};
use refract_kafka::source_queue::SourceError;

use crate::clock::now_ms;
use crate::degraded::{Origin, Reason};

use super::lock;
use super::run::Run;

/// A run of source offsets deleted before the flow mirrored them (what `/status` shows in
/// `lost`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostRecords {
    /// The source topic.
    pub topic: String,
    /// Its name on the target.
    pub remote_topic: String,
    /// The partition (the same number on both sides).
    pub partition: i32,
    /// The first offset lost.
    pub first: i64,
    /// The last offset lost (the partition's log start offset minus one).
    pub last: i64,
    /// Wall-clock ms since the epoch when the gap was found.
    pub since_ms: i64,
}

impl LostRecords {
    /// How many offsets were lost (transaction markers among them count too).
    pub fn count(&self) -> u64 {
        u64::try_from(self.last - self.first + 1).unwrap_or(0)
    }
}

impl std::fmt::Display for LostRecords {
    /// `orders[0]: 50 records lost (offsets 100..=149)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}[{}]: {} records lost (offsets {}..={})",
            self.topic,
            self.partition,
            self.count(),
            self.first,
            self.last
        )
    }
}

/// The flow halted because the source deleted records it had not mirrored and its
/// `on_lost_records` is `"halt"`. Nothing past the gap is committed, so a restart finds the gap
/// again until the setting is `"continue"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("flow {flow} halted: {lost}: the source deleted them before they were mirrored (on_lost_records = \"halt\"); set on_lost_records = \"continue\" and reload to go on from offset {next}")]
pub struct LostHalt {
    /// The flow, `source->target`.
    pub flow: String,
    /// The gap.
    pub lost: LostRecords,
    /// Where the partition would go on from: its log start offset.
    pub next: i64,
}

/// When a gap was found: it names the likely cause in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// Before reading the partition, at its resume position.
    Resuming,
    /// While reading it.
    Reading,
}

impl Run<'_> {
    /// Compares the resume position of each slot in `added` with its partition's low watermark,
    /// before it is read. `on_target` holds, per slot, how many records past its position the
    /// target already has (mirrored after the last commit): those are not lost even if the source
    /// deleted them since. A watermark that cannot be read only costs the early check: the read
    /// finds the gap then ([`Run::out_of_range`]).
    pub(super) fn check_log_start(
        &mut self,
        added: &[usize],
        on_target: &HashMap<usize, i64>,
    ) -> Result<()> {
        // Every log start in one batched lookup, not a request per partition.
        let positioned: Vec<usize> = added
            .iter()
            .copied()
            .filter(|&i| self.slots.slots[i].position.is_some())
            .collect();
        let partitions = self.slots.source_partitions(&positioned);
        let marks = watermarks_many(&self.clients.consumer, &partitions, REQUEST_TIMEOUT);
        for i in positioned {
            let slot = &self.slots.slots[i];
            let Some(next) = slot.position else {
                continue;
            };
            let Some(&(low, _)) = marks.get(&(slot.topic.clone(), slot.partition)) else {
                debug!(flow = %self.name, "{}[{}]: log start offset not read; a gap is found when it is read", slot.topic, slot.partition);
                continue;
            };
            if next < low {
                let already = on_target.get(&i).copied().unwrap_or(0).max(0);
                self.found_gap(i, next, low, already, Found::Resuming)?;
            }
        }
        Ok(())
    }

    /// A consumer error `_AUTO_OFFSET_RESET` on slot `i`: its fetch position is out of the
    /// partition's range. Below the log start: records were deleted before they were mirrored
    /// ([`Run::found_gap`]), and the partition is read again from the log start. Past the end
    /// (the log was truncated, the topic recreated): what `auto.offset.reset` did before, with a
    /// warning. A watermark that cannot be read degrades the partition (it is retried).
    pub(super) fn out_of_range(&mut self, i: usize, e: SourceError) -> Result<()> {
        let slot = &self.slots.slots[i];
        let at = e.offset.or(slot.position);
        let (low, high) = match self.clients.consumer.fetch_watermarks(
            &slot.topic,
            slot.partition,
            REQUEST_TIMEOUT,
        ) {
            Ok(w) => w,
            Err(w) => {
                self.unreadable(i, format!("{}; reading its watermarks: {w}", e.message), at);
                return Ok(());
            }
        };
        match at {
            Some(at) if at < low => {
                self.found_gap(i, at, low, 0, Found::Reading)?;
                self.seek(i, Offset::Offset(low));
            }
            _ => {
                debug!(flow = %self.name, "{}[{}]: {}", slot.topic, slot.partition, e.message);
                self.past_end(i, at, low, high);
            }
        }
        Ok(())
    }

    /// The source deleted slot `i`'s offsets from `position` up to `low` (its log start), except
    /// the first `already` of them, which the target holds already. Reports the lost ones once
    /// (see [`super::FlowRunner::report_lost`]); then either halts ([`LostHalt`], nothing moved)
    /// or moves the slot to `low`, marks everything before it done (so the next commit moves
    /// past the gap and a restart does not report it again) and tells the offset-sync writer.
    pub(super) fn found_gap(
        &mut self,
        i: usize,
        position: i64,
        low: i64,
        already: i64,
        found: Found,
    ) -> Result<()> {
        let runner = self.runner;
        let slot = &self.slots.slots[i];
        let first = position.saturating_add(already);
        if first < low {
            let lost = LostRecords {
                topic: slot.topic.clone(),
                remote_topic: slot.remote.clone(),
                partition: slot.partition,
                first,
                last: low - 1,
                since_ms: now_ms(),
            };
            let halt = runner.flow.delivery.on_lost_records == OnLostRecords::Halt;
            runner.report_lost(&lost, found, low, halt);
            if halt {
                return Err(LostHalt {
                    flow: self.name.clone(),
                    lost,
                    next: low,
                }
                .into());
            }
        } else {
            info!(flow = %self.name, "{}[{}]: offsets {position}..={} were deleted at the source, but the target already holds them (mirrored after the last commit); going on from offset {low}", slot.topic, slot.partition, low - 1);
        }
        if let Some(writer) = self.internals.writer.as_mut() {
            writer.lost(&slot.topic, slot.partition, position, low - 1);
        }
        self.slots.slots[i].position = Some(low);
        // Everything before the log start is done with: the next commit moves past the gap.
        let mut progress = lock(&self.progress);
        if let Some(p) = progress.get_mut(i) {
            p.sent(low - 1, 0);
        }
        Ok(())
    }

    /// Reads slot `i` from `offset` on (librdkafka stopped fetching it after the error); if it
    /// cannot be assigned again, the partition is degraded and retried.
    pub(super) fn seek(&mut self, i: usize, offset: Offset) {
        let slot = &self.slots.slots[i];
        self.pause(i);
        let mut tpl = TopicPartitionList::new();
        let assigned = tpl
            .add_partition_offset(&slot.topic, slot.partition, offset)
            .and_then(|()| self.clients.consumer.incremental_assign(&tpl));
        if let Err(e) = assigned {
            let at = slot.position;
            self.unreadable(i, format!("reading it again from {offset:?}: {e}"), at);
        }
    }

    /// Marks slot `i` degraded by a read failure (`error`, at offset `at`): it stops being read
    /// and is retried from its position with backoff.
    fn unreadable(&mut self, i: usize, error: String, at: Option<i64>) {
        let slot = &mut self.slots.slots[i];
        if let Some(change) = slot
            .health
            .failed(Origin::Read, Reason::Fetch, error, at, now_ms())
        {
            self.pause(i);
            self.runner.report_failure(&self.slots.slots[i], change);
            self.publish_degraded();
        }
    }
}
