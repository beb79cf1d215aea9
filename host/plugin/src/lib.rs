//! refract's WebAssembly plugin runtime.
//!
//! Plugins are WebAssembly components that implement a world of the `refract:plugin` package
//! (see `wit/`). [`PluginRuntime`] owns the one wasmtime engine; it loads a component from a file
//! or a built-in name, checks that it exports the expected world at a compatible version, runs
//! its `init` once as a smoke test, and hands back a plugin that can be instantiated per flow.
//! Every call runs under a memory cap and a deadline; a trapped instance is dropped and the next
//! call gets a fresh one.

mod bindings;
mod builtin;
mod cache;
mod component;
mod error;
mod policy;
mod processor;
mod runtime;
mod stderr;
mod view;

pub use bindings::{Header, KafkaRecord, Outcome, OutputRecord, RecordBatch};
pub use builtin::{guest_dir, BUILTIN_RENAME_WASM};
pub use cache::{default_cache_dir, CACHE_DIR_ENV};
pub use error::{PluginError, TrapKind};
pub use policy::{topic_name_problem, PolicyPlugin, ReplicationPolicy, MAX_TOPIC_NAME_LEN};
pub use processor::{AnyPlugin, Processor, ProcessorKind, ProcessorPlugin};
pub use runtime::{PluginLimits, PluginRuntime};
pub use stderr::{failure_summary, STDERR_CAP};
pub use view::{BatchView, HeaderView, RecordView};
