//! What happens to a flow's records and partitions, each in one call that updates the status,
//! the Prometheus series and, where an operator needs to see each occurrence, the log line, so
//! the three cannot drift apart.

use std::time::{Duration, Instant};

use tracing::{debug, error, warn};

use crate::chain::{DeadLetter, Skipped};
use crate::degraded::{Change, Degraded, Reason};
use crate::series::{RecordEvent, RefractSeries};

use super::lost::{Found, LostRecords};
use super::record_log::{Held, LINES_PER_WINDOW};
use super::slots::Slot;
use super::status::LOST_KEPT;
use super::{lock, FlowRunner};

impl FlowRunner {
    /// Adds time the record thread waited for the flow's throttle.
    pub(super) fn add_throttled(&self, waited: Duration) {
        if !waited.is_zero() {
            lock(&self.status).throttled_ms += waited.as_millis() as u64;
            if let Some(m) = &self.flow_metrics {
                m.throttled.add(waited);
            }
        }
    }

    /// Counts `n` records of `event` in the flow's status and its series.
    pub(super) fn count(&self, event: RecordEvent, n: u64) {
        if n == 0 {
            return;
        }
        lock(&self.status).count(event, n);
        if let Some(m) = &self.flow_metrics {
            m.count(event, n);
        }
    }

    /// Whether a per-record warning may be written now (see `record_log`); writes the summary
    /// of a window that held lines back first. `line` makes the warning's text.
    fn record_warning(&self, line: &dyn Fn() -> String) -> bool {
        let (write, held) = lock(&self.record_log).admit(Instant::now(), line);
        if let Some(held) = held {
            self.warn_held(held);
        }
        write
    }

    /// Writes the summary of a passed window of per-record warnings, if it held some back
    /// (called as the run loop tends the flow, so a burst's summary does not wait for the next
    /// bad record).
    pub(super) fn flush_record_warnings(&self) {
        let held = lock(&self.record_log).flush(Instant::now());
        if let Some(held) = held {
            self.warn_held(held);
        }
    }

    fn warn_held(&self, held: Held) {
        warn!(flow = %self.flow.name(), "{} more records skipped or dead-lettered in the last {} s were not logged one by one (at most {LINES_PER_WINDOW} lines a minute; all are counted in /status and the series); the last: {}", held.count, held.over.as_secs(), held.last);
    }

    /// Records of `topic[partition]` dropped because a processor with `on_error = "skip"`
    /// failed on them: one warning each (naming the record, the plugin and its error; at most
    /// [`LINES_PER_WINDOW`] a minute, the rest summed up), counted.
    pub(super) fn skipped(&self, topic: &str, partition: i32, skipped: &[Skipped]) {
        for s in skipped {
            let line = || {
                format!(
                    "skipping {topic}[{partition}] offset {}: {}",
                    s.offset, s.error
                )
            };
            if self.record_warning(&line) {
                warn!(flow = %self.flow.name(), plugin = %s.plugin, "{}", line());
            }
        }
        if let Some(s) = skipped.last() {
            lock(&self.status).last_error = Some(format!(
                "skipped {topic}[{partition}] offset {}: {}",
                s.offset, s.error
            ));
        }
        self.count(RecordEvent::Skipped, skipped.len() as u64);
    }

    /// Records of `topic[partition]` sent to the dead-letter topic: one warning each (naming
    /// the record, the plugin, its error and where it went; bounded as for skips), counted.
    pub(super) fn dead_lettered(&self, topic: &str, partition: i32, dead: &[DeadLetter<'_>]) {
        for d in dead {
            let line = || {
                format!(
                    "dead-lettering {topic}[{partition}] offset {} to {}: {}",
                    d.item.offset, self.flow.delivery.dead_letter_topic, d.error
                )
            };
            if self.record_warning(&line) {
                warn!(flow = %self.flow.name(), plugin = %d.plugin, "{}", line());
            }
        }
        // The latest one stays visible in /status (last_error), the plugin's own words included.
        if let Some(d) = dead.last() {
            lock(&self.status).last_error = Some(format!(
                "dead-lettered {topic}[{partition}] offset {}: {}",
                d.item.offset, d.error
            ));
        }
        self.count(RecordEvent::DeadLettered, dead.len() as u64);
    }

    /// A transaction of an exactly-once flow ended: committed after `took`, or aborted.
    pub(super) fn transaction_ended(&self, committed: bool, took: std::time::Duration) {
        {
            let mut status = lock(&self.status);
            if committed {
                status.transactions_committed += 1;
            } else {
                status.transactions_aborted += 1;
            }
        }
        if let Some(m) = &self.flow_metrics {
            m.transaction(committed);
            if committed {
                m.transaction_duration.observe_duration(took);
            }
        }
    }

    /// Records the source deleted before they were mirrored (`lost`, found as `found` says, the
    /// partition's log start now `low`): one ERROR line naming the flow, partition, offsets,
    /// count and likely cause, counted in `records_lost` and `refract_records_lost_total`, and
    /// kept in the status's `lost` list. A gap this runner reported already (a restart before the
    /// commit that moved past it) is only logged at debug. `halt`: the flow halts on it.
    pub(super) fn report_lost(&self, lost: &LostRecords, found: Found, low: i64, halt: bool) {
        let name = self.flow.name();
        let count = lost.count();
        {
            let mut status = lock(&self.status);
            let known = status.lost.iter().any(|l| {
                l.topic == lost.topic
                    && l.partition == lost.partition
                    && l.first <= lost.first
                    && lost.last <= l.last
            });
            if known {
                drop(status);
                debug!(flow = %name, "{lost}: reported already");
                return;
            }
            status.records_lost += count;
            status.lost.push(lost.clone());
            let over = status.lost.len().saturating_sub(LOST_KEPT);
            status.lost.drain(..over);
            status.last_error = Some(format!(
                "{lost}: deleted at the source before they were mirrored"
            ));
        }
        if let Ok(c) = self.metrics.records_lost(
            &self.source.alias,
            &self.target.alias,
            &lost.remote_topic,
            lost.partition,
        ) {
            c.inc_by(count);
        }
        let when = match found {
            Found::Resuming => "while the flow was stopped or behind",
            Found::Reading => "while the flow was behind",
        };
        let then = if halt {
            "halting the flow (on_lost_records = \"halt\")".to_string()
        } else {
            format!("going on from offset {low} (on_lost_records = \"continue\")")
        };
        error!(
            flow = %name,
            topic = %lost.topic,
            partition = lost.partition,
            first = lost.first,
            last = lost.last,
            count,
            "{}[{}]: {count} records lost: source offsets {}..={} were deleted on cluster {} (retention, or a DeleteRecords request) {when}, before they were mirrored to {} on cluster {}; the partition's log now starts at offset {low}; {then}",
            lost.topic,
            lost.partition,
            lost.first,
            lost.last,
            self.source.alias,
            lost.remote_topic,
            self.target.alias
        );
    }

    /// [`FlowRunner::log_failure`] for a partition.
    pub(super) fn report_failure(&self, slot: &Slot, change: Change) {
        if let Some(d) = slot.health.degraded() {
            self.log_failure(Some(slot), d, change);
        }
    }

    /// Logs a counted failure once per transition (a failed retry at debug) and counts it in
    /// `refract_partition_errors_total`. `slot` is `None` for the flow's own source reads.
    pub(super) fn log_failure(&self, slot: Option<&Slot>, d: &Degraded, change: Change) {
        let name = self.flow.name();
        let what = slot.map_or_else(
            || format!("source reads from {}", self.source.alias),
            |s| format!("{}[{}]", s.topic, s.partition),
        );
        let at = d
            .offset
            .map(|o| format!(" at source offset {o}"))
            .unwrap_or_default();
        let reason = d.reason.as_str();
        match change {
            Change::Degraded => {
                warn!(flow = %name, "{what} degraded ({reason}){at}: {}; its other partitions keep flowing, it is retried with backoff", d.error)
            }
            Change::ReasonChanged(old) => {
                warn!(flow = %name, "{what} still degraded, now {reason} (was {}){at}: {}", old.as_str(), d.error)
            }
            Change::StillFailing => {
                debug!(flow = %name, "{what}: retry {} failed ({reason}){at}: {}", d.retries, d.error)
            }
        }
        self.count_failure(slot, d.reason);
    }

    /// Counts a failure of `slot` (`None`: the flow's own source reads) in
    /// `refract_partition_errors_total` and marks it in `refract_partition_degraded`.
    pub(super) fn count_failure(&self, slot: Option<&Slot>, reason: Reason) {
        let (topic, partition) = slot.map_or(("", None), |s| (s.topic.as_str(), Some(s.partition)));
        if let Ok(c) =
            self.metrics
                .partition_errors(&self.flow.name(), topic, partition, reason.as_str())
        {
            c.inc();
        }
        self.set_partition_gauge(topic, partition, true);
    }

    /// Sets `refract_partition_degraded` of a partition (the flow's reads: empty topic, none).
    pub(super) fn set_partition_gauge(&self, topic: &str, partition: Option<i32>, degraded: bool) {
        if let Ok(g) = self
            .metrics
            .partition_degraded(&self.flow.name(), topic, partition)
        {
            g.set(if degraded { 1.0 } else { 0.0 });
        }
    }

    /// Clears the degraded partitions of an earlier run from the status and the gauges.
    pub(super) fn forget_degraded(&self) {
        let old = std::mem::take(&mut lock(&self.status).degraded);
        for d in old {
            self.set_partition_gauge(d.topic.as_deref().unwrap_or(""), d.partition, false);
        }
    }
}
