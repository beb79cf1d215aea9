//! A plugin's standard error: kept per call, up to a byte cap, so that when a call traps the
//! plugin's own words (a Python traceback, a JavaScript exception, a Rust panic message) can be
//! shown — the exception's type and message first.
//!
//! Writes never fail: past the cap the oldest bytes are dropped (the end of a traceback is what
//! names the exception), and the buffer is emptied at the start of every call, so a plugin that
//! logs to stderr for hours neither fills it nor traps because of it.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// How much of a call's stderr is kept: the last this many bytes.
pub const STDERR_CAP: usize = 8 << 10;
/// How much of the start of a call's stderr is kept too: a Rust panic names itself first.
const HEAD_CAP: usize = 1 << 10;

#[derive(Default)]
struct Tail {
    /// The first [`HEAD_CAP`] bytes this call wrote.
    head: Vec<u8>,
    bytes: Vec<u8>,
    /// Bytes written during this call and dropped from the front because of the cap.
    dropped: usize,
}

/// The stderr of one plugin instance (cheap to clone; clones share the buffer).
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<Tail>>);

impl StderrTail {
    fn with<R>(&self, f: impl FnOnce(&mut Tail) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn append(&self, data: &[u8]) {
        self.with(|t| {
            let room = HEAD_CAP - t.head.len();
            t.head.extend_from_slice(&data[..room.min(data.len())]);
            t.bytes.extend_from_slice(data);
            if t.bytes.len() > STDERR_CAP {
                let excess = t.bytes.len() - STDERR_CAP;
                t.bytes.drain(..excess);
                t.dropped += excess;
            }
        });
    }

    /// Forgets what earlier calls wrote.
    pub(crate) fn clear(&self) {
        self.with(|t| {
            t.head.clear();
            t.bytes.clear();
            t.dropped = 0;
        });
    }

    /// What this call wrote: its last [`STDERR_CAP`] bytes as text, how many bytes before those
    /// were dropped, and — when some were — its first bytes too.
    pub(crate) fn contents(&self) -> StderrText {
        self.with(|t| StderrText {
            head: (t.dropped > 0).then(|| String::from_utf8_lossy(&t.head).into_owned()),
            tail: String::from_utf8_lossy(&t.bytes).into_owned(),
            dropped: t.dropped,
        })
    }
}

/// What one call wrote to stderr, as kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StderrText {
    /// The start of it, when it did not all fit in `tail`.
    pub(crate) head: Option<String>,
    /// The end of it (all of it when `dropped` is 0).
    pub(crate) tail: String,
    /// Bytes between the kept tail and the start.
    pub(crate) dropped: usize,
}

impl StderrText {
    /// The line that names the failure: looked for in the end first (a Python traceback ends
    /// with its exception), then in the start (a Rust panic message comes first).
    pub(crate) fn failure_summary(&self) -> Option<String> {
        failure_summary(&self.tail).or_else(|| self.head.as_deref().and_then(failure_summary))
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for StderrTail {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 << 10)
    }
}

#[async_trait::async_trait]
impl Pollable for StderrTail {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for StderrTail {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The line that names the failure in a plugin's stderr, if one can be found: the exception
/// line of the last Python traceback (`KeyError: 'x'`), a JavaScript error line
/// (`TypeError: bad record`), or a Rust panic's message. `None` when the text has no such line.
pub fn failure_summary(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    // Python: after the last "Traceback (most recent call last):", the first line that is not
    // indented is the exception (its message may continue on the following unindented lines).
    if let Some(start) = lines
        .iter()
        .rposition(|l| l.trim_end() == "Traceback (most recent call last):")
    {
        let rest = &lines[start + 1..];
        if let Some(at) = rest
            .iter()
            .position(|l| !l.is_empty() && !l.starts_with([' ', '\t']))
        {
            let message: Vec<&str> = rest[at..]
                .iter()
                .take_while(|l| !l.starts_with([' ', '\t']) && !l.is_empty())
                .copied()
                .collect();
            return Some(message.join(" ").trim().to_owned());
        }
    }
    // Rust: "panicked at src/lib.rs:3:5:" followed by the message.
    if let Some(at) = lines.iter().rposition(|l| l.contains(" panicked at ")) {
        let message: Vec<&str> = lines[at + 1..]
            .iter()
            .take_while(|l| !l.is_empty() && !l.starts_with("note: "))
            .copied()
            .collect();
        if !message.is_empty() {
            return Some(format!("panic: {}", message.join(" ").trim()));
        }
    }
    // componentize-js, when an export that returns a result throws: "invalid variant tag value
    // `undefined` (received `TypeError: bad record`) specified for `PluginError`".
    if let Some(thrown) = lines.iter().rev().find_map(|l| {
        let start = l.find("(received `")? + "(received `".len();
        let len = l[start..].rfind("`)")?;
        Some(l[start..start + len].trim().to_owned())
    }) {
        return Some(thrown);
    }
    // JavaScript (and most other runtimes): the last line of the form `SomeError: message`,
    // `Uncaught SomeError: message` or `Error: message`.
    lines.iter().rev().find_map(|l| js_error_line(l))
}

/// `TypeError: x`, `Uncaught Error: x`, `error: Error: x` → the `Name: message` part.
fn js_error_line(line: &str) -> Option<String> {
    let line = line.trim();
    let mut found = line.match_indices(": ").filter_map(|(at, _)| {
        let before = &line[..at];
        let name = before.rsplit([' ', ':', '`', '(']).next().unwrap_or(before);
        let is_error_name = name.len() >= 5
            && name.starts_with(|c: char| c.is_ascii_uppercase())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && (name.ends_with("Error") || name.ends_with("Exception"));
        is_error_name.then(|| (name, &line[at - name.len()..]))
    });
    let (name, text) = found.next()?;
    // "Error: TypeError: x" (a runtime's wrapper around the thrown error): the inner one.
    let (_, text) = match found.next() {
        Some(inner) if name == "Error" => inner,
        _ => (name, text),
    };
    Some(text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_traceback_names_the_exception() {
        let text = "Traceback (most recent call last):\n  File \"app.py\", line 12, in filter\n    return d[\"x\"]\n           ~^^^^^\nKeyError: 'missing-key: t'\n";
        assert_eq!(
            failure_summary(text).as_deref(),
            Some("KeyError: 'missing-key: t'")
        );
        // Chained: the last traceback's exception.
        let chained = format!(
            "{text}\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"app.py\", line 14, in filter\nValueError: bad value\nsecond line\n"
        );
        assert_eq!(
            failure_summary(&chained).as_deref(),
            Some("ValueError: bad value second line")
        );
    }

    #[test]
    fn javascript_and_rust_messages() {
        assert_eq!(
            failure_summary("Error: TypeError: bad record in t\nStack:\n  filter@f.js:2:60\n")
                .as_deref(),
            Some("TypeError: bad record in t")
        );
        assert_eq!(
            failure_summary("invalid variant tag value `undefined` (received `TypeError: bad record in t`) specified for `PluginError`\nStack:\n  export_recordFilter_0_1_0$filter@/tmp/x/initializer.js:387:17\n\nRedirecting call to abort() to mozalloc_abort\n").as_deref(),
            Some("TypeError: bad record in t")
        );
        assert_eq!(
            failure_summary("Uncaught RangeError: too far\n").as_deref(),
            Some("RangeError: too far")
        );
        assert_eq!(
            failure_summary("\nthread '<unnamed>' panicked at src/lib.rs:3:5:\nboom\nnote: run with `RUST_BACKTRACE=1`\n").as_deref(),
            Some("panic: boom")
        );
        assert_eq!(failure_summary("just some log line\n"), None);
    }

    #[test]
    fn keeps_the_tail_up_to_the_cap_and_clears_per_call() {
        let tail = StderrTail::default();
        tail.append(&vec![b'a'; STDERR_CAP]);
        tail.append(b"the end");
        let text = tail.contents();
        assert_eq!(text.tail.len(), STDERR_CAP);
        assert_eq!(text.dropped, 7);
        assert!(text.tail.ends_with("the end"));
        assert_eq!(text.head.as_deref().map(str::len), Some(HEAD_CAP));
        tail.clear();
        assert_eq!(tail.contents(), StderrText::default());
    }

    #[test]
    fn a_panic_named_at_the_start_of_a_long_stderr_is_still_found() {
        let tail = StderrTail::default();
        tail.append(b"thread '<unnamed>' panicked at src/lib.rs:3:5:\nboom ");
        tail.append(&vec![b'x'; 1 << 20]);
        tail.append(b"\nnote: run with `RUST_BACKTRACE=1`\n");
        let text = tail.contents();
        let summary = text.failure_summary().unwrap();
        assert!(summary.starts_with("panic: boom xxx"), "{summary}");
    }
}
