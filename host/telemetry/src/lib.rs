//! Logging for the refract binary: `tracing` to stderr, filtered by `RUST_LOG`
//! (default `info`), as JSON lines when asked.

use tracing_subscriber::EnvFilter;

/// Installs the process-wide log subscriber. Safe to call more than once (later calls do nothing).
pub fn init_logging(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
