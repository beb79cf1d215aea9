//! Text a plugin controls (log lines, error and reject messages, its stderr) is cut to a few
//! KiB before it reaches logs, errors, `/status` or a dead-letter header, and log lines are
//! rate-limited per instance: a plugin cannot flood the log, and a dead letter always fits the
//! target's `max.message.bytes`.

use std::borrow::Cow;
use std::time::Instant;

/// Most bytes of a plugin's own message (an error, a reject reason, the exception line of its
/// stderr) kept in an error.
pub const MESSAGE_CAP: usize = 512;
/// Most bytes of a plugin's stderr shown with a failed call (its tail: the end of a traceback
/// names the exception).
pub const STDERR_SHOWN: usize = 1 << 10;
/// Most bytes of one `log` line.
pub const LOG_LINE_CAP: usize = 1 << 10;
/// Log lines a plugin instance may write per second, sustained.
pub const LOG_LINES_PER_SECOND: u32 = 100;
/// Log lines a plugin instance may write in a burst.
pub const LOG_BURST: u32 = 200;

/// `text`, or its first `cap` bytes (at a character boundary) marked as cut.
pub fn cut_head(text: &str, cap: usize) -> Cow<'_, str> {
    if text.len() <= cap {
        return Cow::Borrowed(text);
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}… [{} bytes cut]",
        &text[..end],
        text.len() - end
    ))
}

/// The last `cap` bytes of `text` or fewer, starting at a character boundary.
pub(crate) fn tail_of(text: &str, cap: usize) -> &str {
    let mut start = text.len().saturating_sub(cap);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// A byte count for people: `64 MiB`, `1 KiB`, `300 bytes`.
pub(crate) fn bytes_text(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// A token bucket over one instance's log lines: [`LOG_BURST`] at once, then
/// [`LOG_LINES_PER_SECOND`]; counts what it refuses so the count can be reported.
#[derive(Debug)]
pub(crate) struct LogGate {
    tokens: f64,
    refilled: Instant,
    dropped: u64,
}

impl Default for LogGate {
    fn default() -> Self {
        Self {
            tokens: f64::from(LOG_BURST),
            refilled: Instant::now(),
            dropped: 0,
        }
    }
}

impl LogGate {
    /// Whether one more line may be written now.
    pub(crate) fn admit(&mut self) -> bool {
        self.admit_at(Instant::now())
    }

    fn admit_at(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        self.tokens =
            (self.tokens + elapsed * f64::from(LOG_LINES_PER_SECOND)).min(f64::from(LOG_BURST));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.dropped += 1;
            false
        }
    }

    /// Lines refused since the last call, and resets the count.
    pub(crate) fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn cuts_keep_char_boundaries_and_say_how_much_was_cut() {
        assert_eq!(cut_head("short", 10), "short");
        assert_eq!(cut_head("abcdef", 3), "abc… [3 bytes cut]");
        // "é" is two bytes: a cut inside it moves to the boundary before it.
        assert_eq!(cut_head("aé", 2), "a… [2 bytes cut]");
        assert_eq!(tail_of("abcdef", 3), "def");
        assert_eq!(tail_of("éa", 2), "a");
        let big = "x".repeat(1 << 20);
        assert!(cut_head(&big, MESSAGE_CAP).len() < MESSAGE_CAP + 32);
    }

    #[test]
    fn log_gate_admits_a_burst_then_the_rate_and_counts_the_rest() {
        let mut gate = LogGate::default();
        let start = gate.refilled;
        let admitted = (0..1000).filter(|_| gate.admit_at(start)).count();
        assert_eq!(admitted, LOG_BURST as usize);
        assert_eq!(gate.take_dropped(), 1000 - u64::from(LOG_BURST));
        assert_eq!(gate.take_dropped(), 0);
        let later = start + Duration::from_millis(100);
        let admitted = (0..1000).filter(|_| gate.admit_at(later)).count();
        assert_eq!(admitted, LOG_LINES_PER_SECOND as usize / 10);
    }
}
