use std::time::Duration;

/// Why a plugin could not be loaded or called. Every variant names the plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The file could not be read or the built-in name is unknown.
    #[error("plugin {plugin}: cannot read it: {reason}")]
    Read {
        /// The plugin (file or built-in name).
        plugin: String,
        /// What went wrong, in words.
        reason: String,
    },
    /// The bytes are not a WebAssembly component wasmtime can compile.
    #[error("plugin {plugin}: not a usable WebAssembly component: {reason}")]
    NotAComponent {
        /// The plugin (file or built-in name).
        plugin: String,
        /// What went wrong, in words.
        reason: String,
    },
    /// The component exports a different world than the one asked for.
    #[error("plugin {plugin}: wrong plugin kind: {reason}")]
    WrongWorld {
        /// The plugin (file or built-in name).
        plugin: String,
        /// What went wrong, in words.
        reason: String,
    },
    /// Built against an incompatible version of the `refract:plugin` package.
    #[error("plugin {plugin}: built for refract:plugin@{found}, but this refract supports refract:plugin@{supported}; rebuild it against this release's wit/")]
    IncompatibleVersion {
        /// The plugin (file or built-in name).
        plugin: String,
        /// The package version it was built for.
        found: String,
        /// The version this refract supports.
        supported: String,
    },
    /// Imports something the host does not grant.
    #[error("plugin {plugin}: cannot be linked: {reason}")]
    Link {
        /// The plugin (file or built-in name).
        plugin: String,
        /// What went wrong, in words.
        reason: String,
    },
    /// `init` rejected the config table.
    #[error("plugin {plugin}: init rejected its config: {reason}")]
    Init {
        /// The plugin (file or built-in name).
        plugin: String,
        /// What went wrong, in words.
        reason: String,
    },
    /// The plugin trapped, ran past its deadline or past its memory cap; its instance was dropped.
    #[error("plugin {plugin}: {call} was stopped: {reason}")]
    Trap {
        /// The plugin (file or built-in name).
        plugin: String,
        /// The call that failed (`format-remote-topics`, `filter`, `transform`, …).
        call: String,
        /// What went wrong, in words.
        reason: String,
        /// Which limit stopped it, if one did.
        kind: TrapKind,
    },
    /// The plugin returned an error of its own.
    #[error("plugin {plugin}: {call} failed: {reason}")]
    Failed {
        /// The plugin (file or built-in name).
        plugin: String,
        /// The call that failed (`format-remote-topics`, `filter`, `transform`, …).
        call: String,
        /// What went wrong, in words.
        reason: String,
    },
    /// The plugin broke the contract (e.g. wrong number of answers).
    #[error("plugin {plugin}: {call} broke the contract: {reason}")]
    Contract {
        /// The plugin (file or built-in name).
        plugin: String,
        /// The call that failed (`format-remote-topics`, `filter`, `transform`, …).
        call: String,
        /// What went wrong, in words.
        reason: String,
    },
}

/// Why a plugin's call was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrapKind {
    /// It ran past its call deadline.
    Deadline,
    /// It tried to grow its memory past its limit.
    Memory,
    /// The guest itself failed (a panic, an exception, an unreachable instruction).
    Guest,
}

/// Describes a trap for a user: deadline, memory cap or the guest's own failure. For the
/// latter the plugin's own words come first — the exception or panic line found in what the call
/// wrote to stderr — then the wasm trap, then that stderr itself (its last
/// [`STDERR_CAP`](crate::stderr::STDERR_CAP) bytes; `dropped` bytes before them were cut).
pub(crate) fn describe_trap(
    err: &wasmtime::Error,
    deadline: Duration,
    memory: usize,
    stderr: &str,
    dropped: usize,
) -> (TrapKind, String) {
    if let Some(trap) = err.downcast_ref::<wasmtime::Trap>() {
        if *trap == wasmtime::Trap::Interrupt {
            return (
                TrapKind::Deadline,
                format!("it ran past its {} ms call deadline", deadline.as_millis()),
            );
        }
    }
    let chain: Vec<String> = err.chain().map(|e| e.to_string()).collect();
    if chain
        .iter()
        .any(|m| m.contains("forcing trap when growing memory"))
    {
        return (
            TrapKind::Memory,
            format!(
                "it tried to grow its memory past its {} MiB limit",
                memory >> 20
            ),
        );
    }
    let trap = match err.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => chain.first().cloned().unwrap_or_default(),
    };
    let stderr = stderr.trim();
    if stderr.is_empty() {
        return (TrapKind::Guest, trap);
    }
    let cut = if dropped > 0 {
        format!(
            ", the last {} bytes; {dropped} before them cut",
            stderr.len()
        )
    } else {
        String::new()
    };
    let text = match crate::stderr::failure_summary(stderr) {
        Some(summary) => format!("{summary} [{trap}]; plugin stderr{cut}:\n{stderr}"),
        None => format!("{trap}; plugin stderr{cut}:\n{stderr}"),
    };
    (TrapKind::Guest, text)
}
