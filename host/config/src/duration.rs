use std::time::Duration;

/// Parses `"250ms"`, `"30s"`, `"10m"` or `"1h"`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit; write e.g. \"30s\" or \"500ms\""))?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` does not start with a whole number"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => {
            return Err(format!(
                "`{text}` has unknown unit `{unit}` (use ms, s, m or h)"
            ))
        }
    };
    Ok(d)
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
}
