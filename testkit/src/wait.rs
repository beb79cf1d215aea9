//! Waiting for a condition with one generous deadline, and names no other test uses.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Generous deadline for anything a test waits on (a loaded 2-core machine compiling a Python
/// or JavaScript plugin while brokers start needs more than a minute).
pub const DEADLINE: Duration = Duration::from_secs(180);

/// A name no other test uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{nanos:x}{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Polls `cond` until it holds or `DEADLINE` passes; panics with `what` on timeout.
pub fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    wait_or_explain(what, cond, String::new);
}

/// Like [`wait_until`], adding `explain()` (e.g. a process log) to the panic message.
pub fn wait_or_explain(what: &str, cond: impl FnMut() -> bool, explain: impl Fn() -> String) {
    wait_before(what, Instant::now() + DEADLINE, cond, explain);
}

/// Polls `cond` until it holds; panics with `what` and `explain()` once `deadline` passes.
pub fn wait_before(
    what: &str,
    deadline: Instant,
    mut cond: impl FnMut() -> bool,
    explain: impl Fn() -> String,
) {
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            explain()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_differ() {
        assert_ne!(unique("t"), unique("t"));
        assert!(unique("orders").starts_with("orders-"));
    }

    #[test]
    #[should_panic(expected = "timed out waiting for never\nwhy")]
    fn wait_before_panics_with_the_explanation() {
        wait_before("never", Instant::now(), || false, || "why".into());
    }
}
