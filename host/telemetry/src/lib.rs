//! refract's telemetry: logging (`tracing` to stderr, filtered by `RUST_LOG`, as text or JSON
//! lines), a Prometheus metrics registry with refract's series, and the HTTP server for
//! `/metrics`, `/health`, `/reload` and `/status`.

pub mod http;
pub mod metrics;
pub mod series;

pub use metrics::{
    Clock, Counter, Gauge, Histogram, ManualClock, Metrics, MetricsError, MonotonicClock, Stat,
    StatBatch, StatSnapshot,
};
pub use series::{
    names, FlowMetrics, FlowState, PluginMetrics, ReloadResult, SourcePartitionMetrics,
};

use std::fmt;
use std::str::FromStr;

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
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // An error only means a subscriber is already installed, which is fine.
    let _ = match format {
        LogFormat::Text => builder.with_target(false).try_init(),
        // Event fields at the top level, so shippers find `message` without nesting.
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
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

    #[test]
    fn json_logging_installs_and_repeated_init_is_harmless() {
        init_logging_as("info", LogFormat::Json);
        tracing::info!(flow = "a->b", records = 3, "json log line from a test");
        init_logging_as("debug", LogFormat::Text);
        init_logging("warn");
        tracing::warn!("still logging after repeated init");
    }
}
