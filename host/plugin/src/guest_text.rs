//! Text a plugin controls — its log lines, error and reject messages, its stderr, trap text and
//! backtraces, the name and version `info()` reports, a topic name a policy or transform made up —
//! reaches logs, errors, `/status`, `check` and `plugin test` output and dead-letter headers only
//! through [`plugin_text`] (or, for the end of a text, [`plugin_text_tail`]): every control
//! character is escaped, so a plugin can neither forge a log line (CR/LF) nor drive a terminal
//! (ESC sequences, bidirectional overrides), and the text is cut to a few KiB with a visible
//! marker, so a plugin cannot flood the log and a dead letter always fits the target's
//! `max.message.bytes`. Log lines are rate-limited per instance too.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Instant;

/// Most bytes of a plugin's own message (an error, a reject reason, the exception line of its
/// stderr) kept in an error.
pub const MESSAGE_CAP: usize = 512;
/// Most bytes of a plugin's stderr shown with a failed call (its tail: the end of a traceback
/// names the exception).
pub const STDERR_SHOWN: usize = 1 << 10;
/// Most bytes of one `log` line.
pub const LOG_LINE_CAP: usize = 1 << 10;
/// Most bytes of the name or the version a plugin reports about itself (`info()`).
pub const INFO_CAP: usize = 128;
/// Most bytes of an error wasmtime reports about a plugin (a link error naming its imports, a
/// trap with its wasm backtrace, whose function names come from the plugin).
pub const WASM_ERROR_CAP: usize = 2 << 10;
/// Log lines a plugin instance may write per second, sustained.
pub const LOG_LINES_PER_SECOND: u32 = 100;
/// Log lines a plugin instance may write in a burst.
pub const LOG_BURST: u32 = 200;

/// How `c` is shown in plugin text: `None` when as itself, else its escape. Escaped are the
/// control characters (C0 including CR, LF and tab, DEL, C1), the Unicode line and paragraph
/// separators (some viewers break lines there), and the bidirectional formatting characters
/// (they reorder what a terminal or an editor shows: "Trojan Source").
fn escape(c: char) -> Option<Escaped> {
    let needs = c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
        )
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c);
    needs.then_some(Escaped(c))
}

/// An escaped character: `\n`, `\r`, `\t`, or `\u{1b}` and the like.
struct Escaped(char);

impl Escaped {
    fn len(&self) -> usize {
        match self.0 {
            '\n' | '\r' | '\t' => 2,
            // `\u{` + hex digits + `}`
            c => 4 + (32 - (c as u32).leading_zeros()).div_ceil(4).max(1) as usize,
        }
    }

    fn push_to(&self, out: &mut String) {
        match self.0 {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
}

/// Bytes `c` takes once shown.
fn shown_len(c: char) -> usize {
    escape(c).map_or(c.len_utf8(), |e| e.len())
}

/// Appends `text` to `out` as shown: control characters escaped.
fn push_shown(out: &mut String, text: &str) {
    for c in text.chars() {
        match escape(c) {
            Some(e) => e.push_to(out),
            None => out.push(c),
        }
    }
}

/// The marker that ends (or starts) a cut text.
fn cut_marker(cut: usize) -> String {
    format!("… [{cut} bytes cut]")
}

/// The one way plugin-controlled text is shown: `text` with its control characters escaped
/// (`\n`, `\r`, `\t`, `\u{1b}`, …; see the module doc), cut to at most `cap` bytes of shown
/// text (at a character, never inside an escape) and then marked with how many bytes of `text`
/// were cut. Borrowed when there is nothing to escape or cut.
pub fn plugin_text(text: &str, cap: usize) -> Cow<'_, str> {
    if text.len() <= cap && !text.chars().any(|c| escape(c).is_some()) {
        return Cow::Borrowed(text);
    }
    let mut shown = 0usize;
    let mut end = text.len();
    for (at, c) in text.char_indices() {
        let len = shown_len(c);
        if shown + len > cap {
            end = at;
            break;
        }
        shown += len;
    }
    let mut out = String::with_capacity(shown + 24);
    push_shown(&mut out, &text[..end]);
    if end < text.len() {
        out.push_str(&cut_marker(text.len() - end));
    }
    Cow::Owned(out)
}

/// [`plugin_text`] keeping the end of `text` instead of its start (the end of a traceback names
/// the exception): at most `cap` bytes of shown text, and how many bytes of `text` before them
/// were cut (the caller says so, with what else it knows was cut).
pub fn plugin_text_tail(text: &str, cap: usize) -> (String, usize) {
    let mut shown = 0usize;
    let mut start = 0usize;
    for (at, c) in text.char_indices().rev() {
        let len = shown_len(c);
        if shown + len > cap {
            start = at + c.len_utf8();
            break;
        }
        shown += len;
    }
    let mut out = String::with_capacity(shown);
    push_shown(&mut out, &text[start..]);
    (out, start)
}

/// An error wasmtime reported about a plugin, with its causes (`{:#}`), as plugin text: the
/// names it quotes (imports, exports, functions of a backtrace) are the plugin's.
pub(crate) fn wasm_error(e: &wasmtime::Error) -> String {
    plugin_text(&format!("{e:#}"), WASM_ERROR_CAP).into_owned()
}

/// Older name of [`plugin_text`] (the same function), kept for its callers.
pub fn cut_head(text: &str, cap: usize) -> Cow<'_, str> {
    plugin_text(text, cap)
}

/// A byte count for people: `64 MiB`, `1 KiB`, `300 bytes`.
pub(crate) fn bytes_text(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// A size for people that stays exact: `64 MiB`, `4095 bytes`, `80.5 MiB (84410368 bytes)`.
pub(crate) fn size_text(n: u64) -> String {
    let exact = bytes_text(usize::try_from(n).unwrap_or(usize::MAX));
    if n < 1 << 20 || !exact.ends_with(" bytes") {
        exact
    } else {
        format!("{:.1} MiB ({n} bytes)", n as f64 / f64::from(1 << 20))
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

    /// What a plugin writes, and what refract shows of it with a cap of 48 bytes, or 16
    /// where the cut is tested.
    #[test]
    fn plugin_text_escapes_control_characters_and_cuts_with_a_marker() {
        let cases: &[(&str, usize, &str)] = &[
            ("short", 48, "short"),
            ("", 48, ""),
            // CR/LF: a forged log line stays on the line of the real one.
            ("a\nb\r\nc", 48, "a\\nb\\r\\nc"),
            ("tab\there", 48, "tab\\there"),
            // C0 and DEL: NUL, ESC (an ANSI colour), BEL.
            (
                "\0\u{1b}[31m\u{7}\u{7f}",
                48,
                "\\u{0}\\u{1b}[31m\\u{7}\\u{7f}",
            ),
            // C1: NEL (a line break to some terminals), CSI.
            ("a\u{85}b\u{9b}", 48, "a\\u{85}b\\u{9b}"),
            // Line and paragraph separators, bidirectional overrides.
            ("x\u{2028}y", 48, "x\\u{2028}y"),
            ("\u{202e}evil", 48, "\\u{202e}evil"),
            ("\u{2066}i\u{2069}", 48, "\\u{2066}i\\u{2069}"),
            // Printable text beyond ASCII is left alone, backslashes too.
            ("café ✓ \\n", 48, "café ✓ \\n"),
            // Cut at 16 bytes of shown text, marked with the bytes of the original cut.
            (
                "abcdefghijklmnopqrstuvwxyz",
                16,
                "abcdefghijklmnop… [10 bytes cut]",
            ),
            // Never inside a character…
            ("aaaaaaaaaaaaaaaé", 16, "aaaaaaaaaaaaaaa… [2 bytes cut]"),
            // …nor inside an escape: 14 bytes, then `\u{1b}` (6) would pass 16.
            ("aaaaaaaaaaaaaa\u{1b}b", 16, "aaaaaaaaaaaaaa… [2 bytes cut]"),
            ("aaaaaaaaaaaaaa\nb", 16, "aaaaaaaaaaaaaa\\n… [1 bytes cut]"),
            // Escapes count against the cap: 8 ESCs are 48 bytes shown.
            (
                "\u{1b}\u{1b}\u{1b}\u{1b}\u{1b}\u{1b}\u{1b}\u{1b}",
                16,
                "\\u{1b}\\u{1b}… [6 bytes cut]",
            ),
        ];
        for (text, cap, shown) in cases {
            assert_eq!(plugin_text(text, *cap), *shown, "{text:?}");
            // Showing shown text again changes nothing: it has no control characters left.
            let again = plugin_text(shown, usize::MAX);
            assert_eq!(again, *shown, "{text:?} twice");
            assert!(matches!(again, Cow::Borrowed(_)));
        }
        assert_eq!(
            cut_head("a\nb", 16),
            "a\\nb",
            "the older name is the same function"
        );
        let big = "x".repeat(1 << 20);
        assert!(plugin_text(&big, MESSAGE_CAP).len() < MESSAGE_CAP + 32);
        let escapes = "\u{1b}".repeat(1 << 20);
        assert!(plugin_text(&escapes, MESSAGE_CAP).len() < MESSAGE_CAP + 32);
    }

    #[test]
    fn plugin_text_tail_keeps_the_end() {
        let cases: &[(&str, usize, &str, usize)] = &[
            ("abcdef", 3, "def", 3),
            ("éa", 2, "a", 2),
            ("short", 10, "short", 0),
            ("x\ny\nKeyError: 'id'\n", 17, "KeyError: 'id'\\n", 4),
            // Not inside an escape: `\u{1b}` (6) does not fit in 5.
            ("\u{1b}abcd", 5, "abcd", 1),
        ];
        for (text, cap, shown, cut) in cases {
            assert_eq!(
                plugin_text_tail(text, *cap),
                (shown.to_string(), *cut),
                "{text:?}"
            );
        }
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
