//! Durations and byte sizes as written in a pipeline file (`"30s"`, `"64MiB"`), parsed with
//! checked arithmetic and bounded: a configured duration is added to an `Instant` while a flow
//! runs, so an absurd one must be refused here rather than overflow (and panic) there.

use std::time::Duration;

/// The longest duration refract accepts anywhere (365 days): far beyond any sensible interval
/// or timeout, and small enough that `Instant::now() + d` can never overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * SECONDS_PER_DAY);

const SECONDS_PER_DAY: u64 = 24 * 3600;

/// Parses `"250ms"`, `"30s"`, `"10m"` or `"1h"`, up to [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit; write e.g. \"30s\" or \"500ms\""))?;
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(format!("`{text}` does not start with a whole number"));
    }
    let too_long = || {
        format!(
            "`{text}` is longer than the maximum of {} days",
            MAX_DURATION.as_secs() / SECONDS_PER_DAY
        )
    };
    // Only digits, so the one way to fail is a number too large for a u64.
    let n: u64 = digits.parse().map_err(|_| too_long())?;
    let d = match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        "h" => n.checked_mul(3600).map(Duration::from_secs),
        _ => {
            return Err(format!(
                "`{text}` has unknown unit `{unit}` (use ms, s, m or h)"
            ))
        }
    };
    match d {
        Some(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(too_long()),
    }
}

/// Parses a byte size: `"64MiB"`, `"512KiB"`, `"1GiB"` or a plain number of bytes.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: usize = digits
        .parse()
        .map_err(|_| format!("`{text}` does not start with a whole number"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "`{text}` has unknown unit `{other}` (use KiB, MiB or GiB)"
            ))
        }
    };
    match n.checked_mul(scale) {
        Some(0) => Err("must be greater than zero".to_string()),
        Some(bytes) => Ok(bytes),
        None => Err(format!("`{text}` is too large")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        for bad in ["64MB", "MiB", "0", "-1MiB", "1.5GiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_units() {
        for (text, want) in [
            ("250ms", Duration::from_millis(250)),
            ("30s", Duration::from_secs(30)),
            ("10m", Duration::from_secs(600)),
            ("1h", Duration::from_secs(3600)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        for bad in ["30", "s", "1d", "-1s", "1.5s", ""] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_are_bounded_without_overflow() {
        for at_most in ["31536000s", "525600m", "8760h", "31536000000ms"] {
            assert_eq!(parse_duration(at_most), Ok(MAX_DURATION), "{at_most}");
        }
        // Past the maximum, past u64 seconds once multiplied, and past u64 itself.
        for text in [
            "31536001s",
            "8761h",
            "31536000001ms",
            "18446744073709551615s",
            "18446744073709551615m",
            "18446744073709551615h",
            "18446744073709551615ms",
            "99999999999999999999999s",
        ] {
            assert_eq!(
                parse_duration(text),
                Err(format!("`{text}` is longer than the maximum of 365 days")),
                "{text}"
            );
        }
        // What the bound is for: a flow adds a configured duration to `Instant::now()`.
        assert!(std::time::Instant::now()
            .checked_add(MAX_DURATION)
            .is_some());
    }
}
