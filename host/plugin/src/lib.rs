//! refract's WebAssembly plugin runtime.
//!
//! Plugins are WebAssembly components that implement a world of the `refract:plugin` package
//! (see `wit/`). [`PluginRuntime`] owns the one wasmtime engine; it loads a component from a file
//! or a built-in name, checks that it exports the expected world at a compatible version, runs
//! its `init` once as a smoke test, and hands back a plugin that can be instantiated per flow.
//! Every call runs in a sandbox (module `sandbox`): one memory budget per instance, a deadline no
//! guest can block past, output budgets and capped text; a stopped instance is dropped and the
//! next call gets a fresh one.

mod bindings;
mod builtin;
mod cache;
mod call_budget;
mod compile;
mod component;
mod error;
mod guest_text;
mod policy;
mod processor;
mod rlimit;
mod runtime;
mod sandbox;
mod stderr;
mod view;

pub use bindings::{Header, KafkaRecord, Outcome, OutputRecord, RecordBatch};
pub use builtin::{guest_dir, BUILTIN_RENAME_WASM};
pub use cache::{default_cache_dir, CACHE_DIR_ENV, CACHE_MAX_MIB_ENV};
pub use call_budget::CallBudget;
pub use compile::{child_main as compile_child_main, CompileIn, COMPILE_CHILD_ARG};
pub use error::{PluginError, TrapKind, SANDBOX_BUDGETS};
pub use guest_text::{
    cut_head, plugin_text, plugin_text_tail, INFO_CAP, LOG_BURST, LOG_LINES_PER_SECOND,
    LOG_LINE_CAP, MESSAGE_CAP, STDERR_SHOWN, WASM_ERROR_CAP,
};
pub use policy::{topic_name_problem, PolicyPlugin, ReplicationPolicy, MAX_TOPIC_NAME_LEN};
pub use processor::{AnyPlugin, Processor, ProcessorKind, ProcessorPlugin};
pub use runtime::{PluginLimits, PluginRuntime};
pub use sandbox::{MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLES, TABLE_ELEMENT_BYTES};
pub use stderr::{failure_summary, STDERR_CAP};
pub use view::{BatchView, HeaderView, RecordView};
