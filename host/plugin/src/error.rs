use std::time::Duration;

use crate::guest_text::{
    bytes_text, plugin_text, plugin_text_tail, size_text, MESSAGE_CAP, STDERR_SHOWN,
};
use crate::runtime::PluginLimits;
use crate::sandbox::{BudgetExceeded, MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLES};
use crate::stderr::StderrText;

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
    /// The plugin file is larger than its `max_wasm_bytes`; nothing past the limit was read.
    #[error("plugin {plugin}: the file is {}, more than its limit of {} (max_wasm_bytes); raise max_wasm_bytes for this plugin if it is meant to be this big", size_text(*size), size_text(*limit))]
    TooLarge {
        /// The plugin file.
        plugin: String,
        /// Its size in bytes (or what was read of it, when it grew while being read).
        size: u64,
        /// `max_wasm_bytes`.
        limit: u64,
    },
    /// Compiling took longer than `compile_timeout`; the compilation was abandoned and nothing
    /// of it is used.
    #[error("compiling plugin {plugin} took longer than {} s (compile_timeout) and was abandoned; raise compile_timeout for this plugin if it is meant to take this long", limit.as_secs_f64())]
    CompileTimeout {
        /// The plugin (file or built-in name).
        plugin: String,
        /// `compile_timeout`.
        limit: Duration,
    },
    /// Compiling needed more memory than `compile_memory_limit`; the compiler process was
    /// stopped and nothing of it is used.
    #[error("compiling plugin {plugin} needed more than {} of memory (compile_memory_limit) and was stopped; raise compile_memory_limit for this plugin if it is meant to need this much", bytes_text(*limit))]
    CompileMemory {
        /// The plugin (file or built-in name).
        plugin: String,
        /// `compile_memory_limit`, in bytes.
        limit: usize,
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
    /// It ran past its call deadline (`call_timeout`).
    Deadline,
    /// It tried to grow its memories and tables past its budget (`memory_limit`), or to create
    /// more memories, tables or core instances than a plugin may.
    Memory,
    /// It returned more records for one input than its budget (`max_outputs_per_record`).
    OutputsPerRecord,
    /// It returned more records in one call than its budget (`max_outputs_per_call`).
    OutputsPerCall,
    /// It passed more bytes to the host in one call than its budget (`max_output_bytes`).
    OutputBytes,
    /// The guest itself failed (a panic, an exception, an unreachable instruction).
    Guest,
}

impl TrapKind {
    /// The pipeline setting of the limit that stopped the call; `None` for the guest's own
    /// failure.
    pub fn setting(self) -> Option<&'static str> {
        match self {
            Self::Deadline => Some("call_timeout"),
            Self::Memory => Some("memory_limit"),
            Self::OutputsPerRecord => Some("max_outputs_per_record"),
            Self::OutputsPerCall => Some("max_outputs_per_call"),
            Self::OutputBytes => Some("max_output_bytes"),
            Self::Guest => None,
        }
    }
}

/// The sandbox budgets a call can run out of, as [`TrapKind::budget`] names them (the `limit`
/// label of `refract_plugin_limit_hits_total`).
pub const SANDBOX_BUDGETS: [&str; 4] = ["deadline", "memory", "outputs", "bytes"];

impl TrapKind {
    /// Which sandbox budget stopped the call, one of [`SANDBOX_BUDGETS`]: `deadline`
    /// (`call_timeout`), `memory` (`memory_limit` and the counts of memories, tables and
    /// instances), `outputs` (`max_outputs_per_record`, `max_outputs_per_call`) or `bytes`
    /// (`max_output_bytes`); `None` for the guest's own failure.
    pub fn budget(self) -> Option<&'static str> {
        match self {
            Self::Deadline => Some(SANDBOX_BUDGETS[0]),
            Self::Memory => Some(SANDBOX_BUDGETS[1]),
            Self::OutputsPerRecord | Self::OutputsPerCall => Some(SANDBOX_BUDGETS[2]),
            Self::OutputBytes => Some(SANDBOX_BUDGETS[3]),
            Self::Guest => None,
        }
    }
}

impl PluginError {
    /// The pipeline setting of the sandbox limit that stopped the plugin, if one did.
    pub fn limit(&self) -> Option<&'static str> {
        match self {
            Self::Trap { kind, .. } => kind.setting(),
            _ => None,
        }
    }

    /// The sandbox budget that stopped the plugin ([`TrapKind::budget`]), if one did.
    pub fn budget(&self) -> Option<&'static str> {
        match self {
            Self::Trap { kind, .. } => kind.budget(),
            _ => None,
        }
    }
}

/// The text wasmtime's hostcall fuel fails with (its error type is private).
const HOSTCALL_FUEL_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";

/// Describes a trap for a user: which limit stopped the call (deadline, memory budget, output
/// budget) or the guest's own failure. For the latter the plugin's own words come first — the
/// exception or panic line found in what the call wrote to stderr, cut to
/// [`MESSAGE_CAP`](crate::MESSAGE_CAP) — then the wasm trap, then the tail of that stderr (its
/// last [`STDERR_SHOWN`](crate::STDERR_SHOWN) bytes). Everything from the plugin goes through
/// [`plugin_text`]: the result is one line, with no control character the plugin wrote.
pub(crate) fn describe_trap(
    err: &wasmtime::Error,
    limits: &PluginLimits,
    fuel: usize,
    stderr: &StderrText,
) -> (TrapKind, String) {
    if let Some(trap) = err.downcast_ref::<wasmtime::Trap>() {
        if *trap == wasmtime::Trap::Interrupt {
            return (
                TrapKind::Deadline,
                format!(
                    "it ran past its {} ms call deadline (call_timeout)",
                    limits.call_deadline.as_millis()
                ),
            );
        }
    }
    if let Some(exceeded) = err.chain().find_map(|e| e.downcast_ref::<BudgetExceeded>()) {
        return (TrapKind::Memory, exceeded.to_string());
    }
    let chain: Vec<String> = err.chain().map(|e| e.to_string()).collect();
    if let Some(count) = chain.iter().find(|m| m.contains("count too high")) {
        return (
            TrapKind::Memory,
            format!(
                "it created more core instances, memories or tables than a plugin instance may ({MAX_CORE_INSTANCES}, {MAX_MEMORIES} and {MAX_TABLES}): {count}"
            ),
        );
    }
    if chain.iter().any(|m| m.contains(HOSTCALL_FUEL_EXHAUSTED)) {
        return (
            TrapKind::OutputBytes,
            format!(
                "it tried to pass more than {fuel} bytes to the host in one call: its input's size plus its output budget of {} (max_output_bytes)",
                crate::guest_text::bytes_text(limits.max_output_bytes)
            ),
        );
    }
    // The trap's text is wasmtime's, but an error that is not a trap may carry the plugin's
    // words (a host call's error); all of it is shown as plugin text.
    let trap = match err.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => chain.first().cloned().unwrap_or_default(),
    };
    let trap = plugin_text(&trap, MESSAGE_CAP);
    let summary = stderr.failure_summary();
    let stderr_tail = stderr.tail.trim();
    if stderr_tail.is_empty() {
        return (TrapKind::Guest, trap.into_owned());
    }
    let (shown, cut) = plugin_text_tail(stderr_tail, STDERR_SHOWN);
    let cut = stderr.dropped + cut;
    let cut = if cut > 0 {
        format!(", its last {} bytes; {cut} before them cut", shown.len())
    } else {
        String::new()
    };
    // One line: the plugin's stderr is escaped (its line breaks shown as `\n`), so nothing it
    // wrote can pass for a line of refract's log.
    let text = match summary {
        Some(summary) => format!(
            "{} [{trap}]; plugin stderr{cut}: {shown}",
            plugin_text(&summary, MESSAGE_CAP)
        ),
        None => format!("{trap}; plugin stderr{cut}: {shown}"),
    };
    (TrapKind::Guest, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_names_its_budget_and_its_setting() {
        let cases = [
            (TrapKind::Deadline, Some("deadline"), Some("call_timeout")),
            (TrapKind::Memory, Some("memory"), Some("memory_limit")),
            (
                TrapKind::OutputsPerRecord,
                Some("outputs"),
                Some("max_outputs_per_record"),
            ),
            (
                TrapKind::OutputsPerCall,
                Some("outputs"),
                Some("max_outputs_per_call"),
            ),
            (
                TrapKind::OutputBytes,
                Some("bytes"),
                Some("max_output_bytes"),
            ),
            (TrapKind::Guest, None, None),
        ];
        for (kind, budget, setting) in cases {
            assert_eq!(
                (kind.budget(), kind.setting()),
                (budget, setting),
                "{kind:?}"
            );
            assert!(budget.is_none_or(|b| SANDBOX_BUDGETS.contains(&b)));
        }
    }
}
