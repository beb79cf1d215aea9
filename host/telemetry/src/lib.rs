//! refract's telemetry: logging (`tracing` to stderr, filtered by `RUST_LOG`, as text or JSON
//! lines), a generic Prometheus metrics registry on the `prometheus` crate (labeled series and
//! MirrorMaker 2 style stats), and the HTTP server for `/metrics`, `/health`, `/reload` and
//! `/status`. refract's own series (names, help texts, labels) are the mirror's:
//! `refract_mirror::series`.

pub mod http;
pub mod metrics;
mod quiet;

pub use metrics::{
    Clock, Counter, Gauge, Histogram, ManualClock, Metrics, MetricsError, MonotonicClock,
    SecondsCounter, Stat, StatBatch, StatSnapshot,
};

use std::fmt;
use std::str::FromStr;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `message`, fields, `target`, spans),
    /// for log shippers.
    Json,
}

/// A log format name other than `text` or `json`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown log format `{0}`: use `text` or `json`")]
pub struct UnknownLogFormat(pub String);

impl FromStr for LogFormat {
    type Err = UnknownLogFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(UnknownLogFormat(other.to_owned())),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

/// Installs the process-wide text log subscriber. Safe to call more than once (later calls do
/// nothing).
pub fn init_logging(default_level: &str) {
    init_logging_as(default_level, LogFormat::Text);
}

/// Installs the process-wide log subscriber in `format`, at `default_level` unless `RUST_LOG`
/// says otherwise. Safe to call more than once (later calls do nothing).
pub fn init_logging_as(default_level: &str, format: LogFormat) {
    // An error only means a subscriber is already installed, which is fine.
    let _ =
        tracing::subscriber::set_global_default(subscriber(default_level, format, std::io::stderr));
}

/// The log subscriber [`init_logging_as`] installs, writing to `writer`.
fn subscriber<W>(
    default_level: &str,
    format: LogFormat,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    // librdkafka's per-retry noise stays out unless RUST_LOG names it.
    let quiet =
        quiet::Quiet::new(&std::env::var("RUST_LOG").unwrap_or_else(|_| default_level.to_string()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        LogFormat::Text => Box::new(builder.with_target(false).finish().with(quiet)),
        // Event fields at the top level, so shippers find `message` without nesting.
        LogFormat::Json => Box::new(builder.json().flatten_event(true).finish().with(quiet)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_format_names_round_trip() {
        for format in [LogFormat::Text, LogFormat::Json] {
            assert_eq!(format.to_string().parse::<LogFormat>(), Ok(format));
        }
        let err = "yaml".parse::<LogFormat>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown log format `yaml`: use `text` or `json`"
        );
    }

    /// Collects what a subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn capture(format: LogFormat, log: impl FnOnce()) -> String {
        let out = Captured::default();
        let writer = out.clone();
        tracing::subscriber::with_default(subscriber("info", format, move || writer.clone()), log);
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn json_lines_carry_level_message_and_fields_at_the_top() {
        let text = capture(LogFormat::Json, || {
            tracing::info!(flow = "a->b", records = 3, "json log line from a test");
            tracing::debug!("below the level: not written");
            tracing::warn!("second line");
        });
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(lines[0]["message"], "json log line from a test");
        assert_eq!(lines[0]["flow"], "a->b");
        assert_eq!(lines[0]["records"], 3);
        assert!(lines[0]["timestamp"].is_string());
        assert_eq!(lines[1]["level"], "WARN");
        assert_eq!(lines[1]["message"], "second line");
    }

    #[test]
    fn text_lines_are_not_json() {
        let text = capture(LogFormat::Text, || tracing::info!(flow = "a->b", "plain"));
        // Colour codes sit between a field's name and its value.
        assert!(
            text.contains("INFO") && text.contains("plain") && text.contains("\"a->b\""),
            "{text}"
        );
        assert!(serde_json::from_str::<serde_json::Value>(text.trim()).is_err());
    }

    #[test]
    fn repeated_init_is_harmless() {
        init_logging_as("info", LogFormat::Json);
        init_logging_as("debug", LogFormat::Text);
        init_logging("warn");
        assert!(tracing::dispatcher::has_been_set());
    }
}
