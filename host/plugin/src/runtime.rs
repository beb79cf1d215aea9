use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use refract_config::{PluginLimitSettings, PluginLocation};

use crate::bindings::policy::{refract, PolicyPlugin as PolicyWorld};
use crate::bindings::LogLevel;
use crate::builtin::builtin_bytes;
use crate::cache::CompileCache;
use crate::compile::{compile_bounded, engine_config, read_capped, CompileIn};
use crate::error::PluginError;
use crate::guest_text::{plugin_text, LogGate, LOG_LINE_CAP};
use crate::sandbox::{
    link_virtual_clocks, InstanceBudget, VirtualClock, VirtualClocks, MAX_HANDLES, MAX_RANDOM_BYTES,
};
use crate::stderr::StderrTail;

/// How often the engine's epoch advances; call deadlines are whole multiples of it.
const EPOCH_TICK: Duration = Duration::from_millis(10);
/// The `refract:plugin` versions this host accepts (0.x: same minor).
pub(crate) const SUPPORTED_VERSION: (u64, u64) = (0, 1);

/// Per-instance sandbox limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginLimits {
    /// One budget for every linear memory and table of an instance (`memory_limit`).
    pub memory_bytes: usize,
    /// Longest a single call may run before the instance is stopped (`call_timeout`).
    pub call_deadline: Duration,
    /// Records a transform may return for one input record (`max_outputs_per_record`).
    pub max_outputs_per_record: u32,
    /// Records a transform may return in one call (`max_outputs_per_call`).
    pub max_outputs_per_call: u32,
    /// Bytes a call may pass to the host beyond the size of its input (`max_output_bytes`):
    /// checked while the answer is copied out of the guest, so the host never holds more.
    pub max_output_bytes: usize,
    /// Largest plugin file read (`max_wasm_bytes`), checked before it is read.
    pub max_wasm_bytes: usize,
    /// Longest a compilation may take (`compile_timeout`); see [`CompileIn`].
    pub compile_timeout: Duration,
    /// Most memory (address space) a compiler child may use (`compile_memory_limit`); see
    /// [`CompileIn`].
    pub compile_memory_limit: usize,
}

impl PluginLimits {
    /// The per-call deadline in epoch ticks.
    pub(crate) fn deadline_ticks(&self) -> u64 {
        (self.call_deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
    }

    /// These limits with a pipeline's settings for one plugin applied over them.
    pub fn with_settings(self, settings: &PluginLimitSettings) -> Self {
        Self {
            memory_bytes: settings.memory_limit.unwrap_or(self.memory_bytes),
            call_deadline: settings.call_timeout.unwrap_or(self.call_deadline),
            max_outputs_per_record: settings
                .max_outputs_per_record
                .unwrap_or(self.max_outputs_per_record),
            max_outputs_per_call: settings
                .max_outputs_per_call
                .unwrap_or(self.max_outputs_per_call),
            max_output_bytes: settings.max_output_bytes.unwrap_or(self.max_output_bytes),
            max_wasm_bytes: settings.max_wasm_bytes.unwrap_or(self.max_wasm_bytes),
            compile_timeout: settings.compile_timeout.unwrap_or(self.compile_timeout),
            compile_memory_limit: settings
                .compile_memory_limit
                .unwrap_or(self.compile_memory_limit),
        }
    }

    /// The hostcall fuel (wasmtime's bound on bytes lifted out of the guest per call) for a
    /// call whose input is `input_bytes` long.
    pub(crate) fn output_fuel(&self, input_bytes: usize) -> usize {
        self.max_output_bytes.saturating_add(input_bytes)
    }
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            call_deadline: Duration::from_secs(1),
            max_outputs_per_record: 1000,
            max_outputs_per_call: 100_000,
            max_output_bytes: 64 << 20,
            max_wasm_bytes: 64 << 20,
            compile_timeout: Duration::from_secs(600),
            compile_memory_limit: 2 << 30,
        }
    }
}

/// The host state each plugin instance's store carries.
pub(crate) struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    budget: InstanceBudget,
    clock: VirtualClock,
    plugin: Arc<str>,
    pub(crate) stderr: StderrTail,
    log_gate: LogGate,
}

impl PluginState {
    /// The instance's clock and resource table, for the WASI clock interfaces.
    pub(crate) fn clocks(&mut self) -> VirtualClocks<'_> {
        VirtualClocks {
            clock: &mut self.clock,
            table: &mut self.table,
        }
    }

    /// Says how many log lines the rate limit dropped since the last report, if any.
    pub(crate) fn report_dropped_logs(&mut self) {
        let dropped = self.log_gate.take_dropped();
        if dropped > 0 {
            tracing::warn!(
                plugin = &*self.plugin,
                "{dropped} log lines dropped: a plugin may log {} lines per second (bursts of {})",
                crate::guest_text::LOG_LINES_PER_SECOND,
                crate::guest_text::LOG_BURST
            );
        }
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl refract::plugin::types::Host for PluginState {}

impl refract::plugin::host::Host for PluginState {
    fn log(&mut self, level: LogLevel, message: String) {
        if !self.log_gate.admit() {
            return;
        }
        let plugin = &*self.plugin;
        let message = plugin_text(&message, LOG_LINE_CAP);
        match level {
            LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The wasmtime engine, linker and limits shared by every plugin in the process.
pub struct PluginRuntime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<PluginState>,
    pub(crate) limits: PluginLimits,
    cache: Option<CompileCache>,
    compile_in: CompileIn,
    _ticker: EpochTicker,
}

impl PluginRuntime {
    /// Builds the engine (Cranelift, epoch interruption) and the linker that grants plugins the
    /// `host` interface and a WASI with no files, network, environment, arguments or real clock
    /// (see [`crate::sandbox`]).
    pub fn new(limits: PluginLimits) -> Result<Arc<Self>, PluginError> {
        Self::with_cache(limits, None)
    }

    /// [`PluginRuntime::new`], keeping compiled components in `cache_dir` (see
    /// [`default_cache_dir`](crate::default_cache_dir)) so each plugin is compiled once per
    /// machine rather than at every start.
    pub fn with_cache(
        limits: PluginLimits,
        cache_dir: Option<&Path>,
    ) -> Result<Arc<Self>, PluginError> {
        Self::with_compiler(limits, cache_dir, CompileIn::Thread)
    }

    /// [`PluginRuntime::with_cache`], compiling plugins as `compile_in` says (the `refract`
    /// binary: in a child process, bounded in time and memory).
    pub fn with_compiler(
        limits: PluginLimits,
        cache_dir: Option<&Path>,
        compile_in: CompileIn,
    ) -> Result<Arc<Self>, PluginError> {
        let setup = |reason: wasmtime::Error| PluginError::Link {
            plugin: "(runtime)".into(),
            reason: format!("{reason:#}"),
        };
        let engine = Engine::new(&engine_config()).map_err(setup)?;
        let mut linker = Linker::<PluginState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(setup)?;
        link_virtual_clocks(&mut linker).map_err(setup)?;
        PolicyWorld::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(setup)?;

        let stop = Arc::new(AtomicBool::new(false));
        let ticker_engine = engine.clone();
        let ticker_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("plugin-epoch".into())
            .spawn(move || {
                while !ticker_stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    ticker_engine.increment_epoch();
                }
            })
            .map_err(|e| PluginError::Link {
                plugin: "(runtime)".into(),
                reason: format!("cannot start the epoch thread: {e}"),
            })?;
        let cache = cache_dir.and_then(|dir| CompileCache::open(dir, &engine));
        Ok(Arc::new(Self {
            engine,
            linker,
            limits,
            cache,
            compile_in,
            _ticker: EpochTicker {
                stop,
                thread: Some(thread),
            },
        }))
    }

    /// The bytes of a built-in plugin or a plugin file (at most `limits.max_wasm_bytes`).
    pub(crate) fn read(
        &self,
        location: &PluginLocation,
        limits: &PluginLimits,
    ) -> Result<std::borrow::Cow<'static, [u8]>, PluginError> {
        let plugin = location.to_string();
        Ok(match location {
            PluginLocation::Builtin(name) => builtin_bytes(name)
                .ok_or_else(|| PluginError::Read {
                    plugin: plugin.clone(),
                    reason: "no built-in plugin has this name".into(),
                })?
                .into(),
            PluginLocation::File(path) => read_capped(&plugin, path, limits)?.into(),
        })
    }

    /// Compiles a component read by [`PluginRuntime::read`] (through the cache when there is
    /// one), within `limits`' `compile_timeout` and `compile_memory_limit`.
    pub(crate) fn compile(
        &self,
        plugin: &str,
        bytes: &[u8],
        limits: &PluginLimits,
    ) -> Result<Component, PluginError> {
        if wasmparser_is_core_module(bytes) {
            return Err(PluginError::NotAComponent {
                plugin: plugin.to_string(),
                reason: "it is a core WebAssembly module, not a component; build for wasm32-wasip2 or wrap it with `wasm-tools component new`".into(),
            });
        }
        let compile = || compile_bounded(&self.engine, &self.compile_in, plugin, bytes, limits);
        match &self.cache {
            Some(cache) => cache
                .load_or_compile(&self.engine, bytes, plugin, compile)
                .map(|(component, _)| component),
            None => compile(),
        }
    }

    /// The compile cache in use, if any.
    #[cfg(test)]
    pub(crate) fn cache(&self) -> Option<&CompileCache> {
        self.cache.as_ref()
    }

    /// A fresh store for one instance of `plugin`, with the limits applied.
    pub(crate) fn new_store(
        &self,
        plugin: Arc<str>,
        plugin_limits: &PluginLimits,
    ) -> Store<PluginState> {
        let stderr = StderrTail::default();
        // No preopens, environment or arguments (the builder's defaults), no sockets at all.
        let wasi = WasiCtx::builder()
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .max_random_size(MAX_RANDOM_BYTES)
            .build();
        let state = PluginState {
            wasi,
            table: ResourceTable::new(),
            budget: InstanceBudget::new(plugin_limits.memory_bytes),
            clock: VirtualClock::default(),
            plugin,
            stderr,
            log_gate: LogGate::default(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.budget);
        store.set_max_component_handles(MAX_HANDLES);
        store.set_hostcall_fuel(plugin_limits.output_fuel(0));
        store.set_epoch_deadline(plugin_limits.deadline_ticks());
        store
    }
}

/// A core module starts with the magic and version 1; a component has layer 1 in the version word.
fn wasmparser_is_core_module(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[0..4] == *b"\0asm" && bytes[4..8] == [1, 0, 0, 0]
}
