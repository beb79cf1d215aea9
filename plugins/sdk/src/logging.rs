//! Logging through the host's `log` import.

use crate::LogLevel;

/// Writes `message` to the host's log at `level`; the host tags it with the plugin's name.
///
/// Outside WebAssembly (native unit tests) the line goes to standard error instead.
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_family = "wasm")]
    crate::bindings::refract::plugin::host::log(level, message);
    #[cfg(not(target_family = "wasm"))]
    eprintln!("[{level:?}] {message}");
}

/// Logs `message` at trace level.
pub fn trace(message: &str) {
    log(LogLevel::Trace, message);
}

/// Logs `message` at debug level.
pub fn debug(message: &str) {
    log(LogLevel::Debug, message);
}

/// Logs `message` at info level.
pub fn info(message: &str) {
    log(LogLevel::Info, message);
}

/// Logs `message` at warn level.
pub fn warn(message: &str) {
    log(LogLevel::Warn, message);
}

/// Logs `message` at error level.
pub fn error(message: &str) {
    log(LogLevel::Error, message);
}
