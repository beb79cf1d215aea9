//! Per-record warnings, bounded. A record skipped or dead-lettered gets a WARN line naming it,
//! but a topic of bad records must not become a line per record: in each [`WINDOW`] a task
//! writes the first [`LINES_PER_WINDOW`] in full and holds back the rest, which it sums up in
//! one line (how many, and the last one) when the window has passed. Every record is still
//! counted in `/status` and the series, and a dead letter carries its error in its headers.

use std::time::{Duration, Instant};

/// Lines written in full per window.
pub(super) const LINES_PER_WINDOW: u32 = 20;
/// How long a window lasts.
pub(super) const WINDOW: Duration = Duration::from_secs(60);

/// One task's record warnings in the current window.
#[derive(Debug, Default)]
pub(super) struct RecordLog {
    /// When the window began (at its first line).
    since: Option<Instant>,
    written: u32,
    /// Lines held back in it, and the last of them.
    held: u64,
    last: Option<String>,
}

/// The lines held back in a window that has passed.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Held {
    pub(super) count: u64,
    pub(super) last: String,
    pub(super) over: Duration,
}

impl RecordLog {
    /// Whether the line `line` makes may be written at `now` (else it is held back), and the
    /// summary of the window that passed, to write first.
    pub(super) fn admit(
        &mut self,
        now: Instant,
        line: impl FnOnce() -> String,
    ) -> (bool, Option<Held>) {
        let summary = self.flush(now);
        self.since.get_or_insert(now);
        if self.written < LINES_PER_WINDOW {
            self.written += 1;
            (true, summary)
        } else {
            self.held += 1;
            self.last = Some(line());
            (false, summary)
        }
    }

    /// Ends the window if it has passed at `now`: what it held back, if anything.
    pub(super) fn flush(&mut self, now: Instant) -> Option<Held> {
        let since = self.since?;
        let over = now.saturating_duration_since(since);
        if over < WINDOW {
            return None;
        }
        let held = std::mem::take(&mut self.held);
        let last = self.last.take();
        self.since = None;
        self.written = 0;
        match last {
            Some(last) if held > 0 => Some(Held {
                count: held,
                last,
                over,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_written_in_part_and_summed_up() {
        let mut log = RecordLog::default();
        let t0 = Instant::now();
        let mut written = 0;
        for i in 0..1000 {
            let (write, summary) = log.admit(t0, || format!("record {i}"));
            assert_eq!(summary, None);
            written += u32::from(write);
        }
        assert_eq!(written, LINES_PER_WINDOW);
        // Not yet over: nothing to sum up.
        assert_eq!(log.flush(t0 + WINDOW / 2), None);
        let held = log.flush(t0 + WINDOW).expect("a summary");
        assert_eq!(held.count, 1000 - u64::from(LINES_PER_WINDOW));
        assert_eq!(held.last, "record 999");
        assert_eq!(held.over, WINDOW);
        // A new window writes again.
        assert_eq!(log.admit(t0 + WINDOW, || "next".into()), (true, None));
    }

    #[test]
    fn the_next_line_after_a_window_brings_its_summary() {
        let mut log = RecordLog::default();
        let t0 = Instant::now();
        for i in 0..=LINES_PER_WINDOW {
            log.admit(t0, || format!("r{i}"));
        }
        let later = t0 + WINDOW + Duration::from_secs(1);
        let (write, summary) = log.admit(later, || "fresh".into());
        assert!(write);
        let held = summary.expect("the passed window's summary");
        assert_eq!((held.count, held.last.as_str()), (1, "r20"));
        // A window that held nothing back has nothing to say.
        assert_eq!(log.flush(later + WINDOW), None);
    }
}
