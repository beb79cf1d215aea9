//! Wall-clock time as Kafka writes it: milliseconds since the Unix epoch.

/// Wall-clock milliseconds since the epoch (0 if the clock is before 1970).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
