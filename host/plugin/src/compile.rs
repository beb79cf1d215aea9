//! Compiling a plugin is bounded like running one. Cranelift's time and memory grow with the
//! component, and a component can be built to make them grow without end; wasmtime offers no way
//! to interrupt a compilation. So a component is compiled either
//!
//! - in a child process ([`CompileIn::Child`], what the `refract` binary uses): `refract`
//!   re-executed with [`COMPILE_CHILD_ARG`], the component on its stdin and the compiled artefact
//!   on its stdout, under an address-space limit (`compile_memory_limit`) and a CPU-time limit,
//!   and killed at `compile_timeout`. Time, CPU and memory are all bounded, and nothing of a
//!   stopped compilation is used;
//! - or on a thread of this process ([`CompileIn::Thread`], for library users and tests, which
//!   have no child entry point): refract waits at most `compile_timeout` and never uses a late
//!   result, but the thread runs on until Cranelift finishes, and its memory is not bounded.
//!
//! Either way the `.wasm` file itself is read only up to `max_wasm_bytes` (see
//! [`read_capped`]).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use wasmtime::component::Component;
use wasmtime::{Config, Engine};

use crate::error::PluginError;
use crate::guest_text::{bytes_text, plugin_text, wasm_error, WASM_ERROR_CAP};
use crate::runtime::PluginLimits;

/// The first argument that makes the `refract` binary a compiler child ([`child_main`]).
pub const COMPILE_CHILD_ARG: &str = "__compile-plugin";

/// Most bytes of a compiler child's stderr read back (its error message).
const CHILD_STDERR_CAP: u64 = 16 << 10;

/// Where plugins are compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileIn {
    /// On a thread of this process: waited for at most `compile_timeout`, but not stopped, and
    /// its memory not bounded.
    Thread,
    /// In a child process, this executable run with [`COMPILE_CHILD_ARG`] (its `main` must call
    /// [`child_main`] then): bounded in time, CPU and memory, killed at `compile_timeout`.
    Child(PathBuf),
}

/// The engine configuration every plugin is compiled and run with; a compiler child builds the
/// same, so what it compiles deserializes here.
pub(crate) fn engine_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config
}

/// The bytes of the plugin file `path`, refused when the file is larger than
/// `limits.max_wasm_bytes`: its size is checked before anything is read, and the read stops
/// past the limit (the file may grow meanwhile).
pub(crate) fn read_capped(
    plugin: &str,
    path: &Path,
    limits: &PluginLimits,
) -> Result<Vec<u8>, PluginError> {
    let limit = limits.max_wasm_bytes as u64;
    let cannot = |e: std::io::Error| PluginError::Read {
        plugin: plugin.to_string(),
        reason: e.to_string(),
    };
    let too_large = |size: u64| PluginError::TooLarge {
        plugin: plugin.to_string(),
        size,
        limit,
    };
    let file = std::fs::File::open(path).map_err(cannot)?;
    let size = file.metadata().map_err(cannot)?.len();
    if size > limit {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Compiles `bytes` (the component `plugin`) for `engine` within `limits`' compile bounds.
pub(crate) fn compile_bounded(
    engine: &Engine,
    how: &CompileIn,
    plugin: &str,
    bytes: &[u8],
    limits: &PluginLimits,
) -> Result<Component, PluginError> {
    match how {
        CompileIn::Thread => on_thread(engine, plugin, bytes, limits.compile_timeout),
        CompileIn::Child(exe) => in_child(engine, exe, plugin, bytes, limits),
    }
}

fn not_a_component(plugin: &str, reason: String) -> PluginError {
    PluginError::NotAComponent {
        plugin: plugin.to_string(),
        reason,
    }
}

fn timed_out(plugin: &str, limit: Duration) -> PluginError {
    PluginError::CompileTimeout {
        plugin: plugin.to_string(),
        limit,
    }
}

fn on_thread(
    engine: &Engine,
    plugin: &str,
    bytes: &[u8],
    timeout: Duration,
) -> Result<Component, PluginError> {
    let (tx, rx) = mpsc::sync_channel(1);
    let (engine, bytes) = (engine.clone(), bytes.to_vec());
    // Not joined when it overruns: nothing can stop Cranelift; the thread ends when it does,
    // and its result is dropped (the receiver is gone).
    std::thread::Builder::new()
        .name("plugin-compile".into())
        .spawn(move || {
            let _ = tx.send(Component::from_binary(&engine, &bytes));
        })
        .map_err(|e| not_a_component(plugin, format!("cannot start a compiler thread: {e}")))?;
    match rx.recv_timeout(timeout) {
        Ok(compiled) => compiled.map_err(|e| not_a_component(plugin, wasm_error(&e))),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(timed_out(plugin, timeout)),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(not_a_component(
            plugin,
            "the compiler thread panicked".into(),
        )),
    }
}

/// What a compiler child wrote: its stdout (the artefact) and the start of its stderr.
type ChildOutput = std::io::Result<(Vec<u8>, Vec<u8>)>;

fn in_child(
    engine: &Engine,
    exe: &Path,
    plugin: &str,
    bytes: &[u8],
    limits: &PluginLimits,
) -> Result<Component, PluginError> {
    let mut command = Command::new(exe);
    command
        .arg(COMPILE_CHILD_ARG)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::rlimit::limit_child(
        &mut command,
        limits.compile_memory_limit as u64,
        limits.compile_timeout,
    );
    let mut child = command.spawn().map_err(|e| {
        not_a_component(
            plugin,
            format!("cannot start the compiler process {}: {e}", exe.display()),
        )
    })?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(not_a_component(
            plugin,
            "the compiler process has no pipes".into(),
        ));
    };
    // The artefact is never larger than the child's address space.
    let artefact_cap = limits.compile_memory_limit as u64;
    let input = bytes.to_vec();
    let (tx, rx) = mpsc::sync_channel::<ChildOutput>(1);
    let collector = std::thread::Builder::new()
        .name("plugin-compile-io".into())
        .spawn(move || {
            let collected = (|| {
                // The child reads all of its input before it writes anything.
                stdin.write_all(&input)?;
                drop(stdin);
                let mut artefact = Vec::new();
                stdout.take(artefact_cap + 1).read_to_end(&mut artefact)?;
                let mut message = Vec::new();
                stderr.take(CHILD_STDERR_CAP).read_to_end(&mut message)?;
                Ok((artefact, message))
            })();
            let _ = tx.send(collected);
        });
    let collector = match collector {
        Ok(handle) => handle,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(not_a_component(
                plugin,
                format!("cannot start a compiler thread: {e}"),
            ));
        }
    };
    let received = rx.recv_timeout(limits.compile_timeout);
    if received.is_err() {
        // Past the deadline: the child is killed, which closes its pipes and ends the collector.
        let _ = child.kill();
    }
    let status = child.wait();
    let _ = collector.join();
    let status = status.map_err(|e| {
        not_a_component(
            plugin,
            format!("waiting for the compiler process failed: {e}"),
        )
    })?;
    let (artefact, message) = match received {
        Err(_) => return Err(timed_out(plugin, limits.compile_timeout)),
        // A child that died (its memory limit hit while reading its input) breaks the pipe:
        // how it ended says more than the broken pipe.
        Ok(Err(_)) if !status.success() => (Vec::new(), Vec::new()),
        Ok(Err(e)) => {
            return Err(not_a_component(
                plugin,
                format!("talking to the compiler process failed: {e}"),
            ))
        }
        Ok(Ok(output)) => output,
    };
    let message = String::from_utf8_lossy(&message);
    let message = plugin_text(message.trim(), WASM_ERROR_CAP);
    if !status.success() {
        return Err(child_failed(plugin, &status, &message, limits));
    }
    if artefact.len() as u64 > artefact_cap {
        return Err(not_a_component(
            plugin,
            "the compiler process wrote more than its memory limit".into(),
        ));
    }
    // SAFETY: the artefact was written by this very executable, run as a child with the same
    // engine configuration, and read straight from its stdout; wasmtime checks that it was built
    // by this version and configuration before using it.
    unsafe { Component::deserialize(engine, &artefact) }
        .map_err(|e| not_a_component(plugin, wasm_error(&e)))
}

/// Why a compiler child failed, from how it ended and what it said.
fn child_failed(
    plugin: &str,
    status: &std::process::ExitStatus,
    message: &str,
    limits: &PluginLimits,
) -> PluginError {
    // An allocation the address-space limit refused aborts the child ("memory allocation of N
    // bytes failed"); the CPU-time limit sends SIGXCPU.
    #[cfg(unix)]
    let signal = {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    };
    #[cfg(not(unix))]
    let signal: Option<i32> = None;
    match signal {
        #[cfg(unix)]
        Some(libc::SIGXCPU) => timed_out(plugin, limits.compile_timeout),
        #[cfg(unix)]
        Some(libc::SIGABRT) if message.contains("memory allocation") => {
            PluginError::CompileMemory {
                plugin: plugin.to_string(),
                limit: limits.compile_memory_limit,
            }
        }
        Some(signal) => not_a_component(
            plugin,
            format!(
                "the compiler process ended with signal {signal} (its memory limit is {}, compile_memory_limit): {message}",
                bytes_text(limits.compile_memory_limit)
            ),
        ),
        None => not_a_component(plugin, message.to_string()),
    }
}

/// The compiler child: reads a component from stdin, compiles it with the plugin engine's
/// configuration and writes the compiled artefact to stdout; on failure writes the reason to
/// stderr and exits with 1. The `refract` binary's `main` calls it when its first argument is
/// [`COMPILE_CHILD_ARG`].
pub fn child_main() -> ExitCode {
    let fail = |reason: String| {
        eprint!("{reason}");
        ExitCode::from(1)
    };
    let mut wasm = Vec::new();
    if let Err(e) = std::io::stdin().lock().read_to_end(&mut wasm) {
        return fail(format!("cannot read the component: {e}"));
    }
    let engine = match Engine::new(&engine_config()) {
        Ok(engine) => engine,
        Err(e) => return fail(wasm_error(&e)),
    };
    let artefact = match engine.precompile_component(&wasm) {
        Ok(artefact) => artefact,
        Err(e) => return fail(wasm_error(&e)),
    };
    drop(wasm);
    let mut out = std::io::stdout().lock();
    match out.write_all(&artefact).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(format!("cannot write the compiled component: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::builtin_bytes;

    fn limits(compile_timeout: Duration) -> PluginLimits {
        PluginLimits {
            compile_timeout,
            ..PluginLimits::default()
        }
    }

    #[test]
    fn a_compile_past_its_timeout_is_abandoned_and_named() {
        let engine = Engine::new(&engine_config()).unwrap();
        let wasm = builtin_bytes("builtin:json-mask").unwrap();
        // No component compiles in a microsecond.
        let err = compile_bounded(
            &engine,
            &CompileIn::Thread,
            "mask.wasm",
            wasm,
            &limits(Duration::from_micros(1)),
        )
        .unwrap_err();
        assert_eq!(
            err,
            PluginError::CompileTimeout {
                plugin: "mask.wasm".into(),
                limit: Duration::from_micros(1)
            }
        );
        let text = err.to_string();
        assert!(
            text.starts_with("compiling plugin mask.wasm took longer than 0.000001 s"),
            "{text}"
        );
        assert!(text.contains("compile_timeout"), "{text}");
        compile_bounded(
            &engine,
            &CompileIn::Thread,
            "mask.wasm",
            wasm,
            &limits(Duration::from_secs(300)),
        )
        .expect("compiles within its time");
    }

    #[test]
    fn a_file_past_max_wasm_bytes_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.wasm");
        std::fs::write(&path, vec![0u8; 4096]).unwrap();
        let small = PluginLimits {
            max_wasm_bytes: 4095,
            ..PluginLimits::default()
        };
        let err = read_capped("big.wasm", &path, &small).unwrap_err();
        assert_eq!(
            err,
            PluginError::TooLarge {
                plugin: "big.wasm".into(),
                size: 4096,
                limit: 4095
            }
        );
        let text = err.to_string();
        assert!(text.contains("big.wasm"), "{text}");
        assert!(text.contains("the file is 4 KiB"), "{text}");
        assert!(text.contains("limit of 4095 bytes"), "{text}");
        assert!(text.contains("max_wasm_bytes"), "{text}");
        let exact = PluginLimits {
            max_wasm_bytes: 4096,
            ..PluginLimits::default()
        };
        assert_eq!(read_capped("big.wasm", &path, &exact).unwrap().len(), 4096);
    }
}
