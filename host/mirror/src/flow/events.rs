//! What happens to a flow's records, each in one call that updates the status counter, the
//! Prometheus series and, where an operator needs to see each occurrence, the log line, so the
//! three cannot drift apart.

use refract_telemetry::RecordEvent;
use tracing::warn;

use crate::chain::{DeadLetter, Skipped};

use super::{lock, FlowRunner};

impl FlowRunner {
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

    /// Records of `topic[partition]` dropped because a processor with `on_error = "skip"`
    /// failed on them: one warning each (naming the record, the plugin and its error), counted.
    pub(super) fn skipped(&self, topic: &str, partition: i32, skipped: &[Skipped]) {
        for s in skipped {
            warn!(flow = %self.flow.name(), plugin = %s.plugin, "skipping {topic}[{partition}] offset {}: {}", s.offset, s.error);
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
    /// the record, the plugin, its error and where it went), counted.
    pub(super) fn dead_lettered(&self, topic: &str, partition: i32, dead: &[DeadLetter<'_>]) {
        for d in dead {
            warn!(flow = %self.flow.name(), plugin = %d.plugin, "dead-lettering {topic}[{partition}] offset {} to {}: {}", d.item.offset, self.flow.delivery.dead_letter_topic, d.error);
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
}
