//! What every plugin world shares: loading and checking a component, instantiating it with its
//! config, and calling it under the runtime's limits.

use std::sync::Arc;

use wasmtime::component::{
    Component, ComponentExportIndex, Instance as ComponentInstance, InstancePre,
};
use wasmtime::Store;

use refract_config::PluginSpec;

use crate::bindings::{PluginInfo, WitPluginError};
use crate::call_budget::CallBudget;
use crate::error::{describe_trap, PluginError, TrapKind};
use crate::guest_text::{plugin_text, wasm_error, INFO_CAP, MESSAGE_CAP, WASM_ERROR_CAP};
use crate::runtime::{PluginLimits, PluginRuntime, PluginState, SUPPORTED_VERSION};

pub(crate) const PACKAGE: &str = "refract:plugin/";

/// The interface each plugin kind exports, and what to call that kind in messages.
pub(crate) const KINDS: &[(&str, &str)] = &[
    (
        "replication-policy",
        "a policy plugin (world policy-plugin)",
    ),
    ("record-filter", "a filter plugin (world filter-plugin)"),
    (
        "record-transform",
        "a transform plugin (world transform-plugin)",
    ),
];

/// One plugin world's generated bindings, seen generically.
pub(crate) trait World: Sized + Send + 'static {
    /// Pre-instantiated, type-checked component.
    type Pre: Send + Sync + 'static;
    /// The `refract:plugin` interface that identifies this world.
    const INTERFACE: &'static str;

    fn pre(instance_pre: InstancePre<PluginState>) -> wasmtime::Result<Self::Pre>;
    fn instance_pre(pre: &Self::Pre) -> &InstancePre<PluginState>;
    fn new(store: &mut Store<PluginState>, instance: &ComponentInstance) -> wasmtime::Result<Self>;
    fn info(&self, store: &mut Store<PluginState>) -> wasmtime::Result<PluginInfo>;
    fn init(
        &self,
        store: &mut Store<PluginState>,
        config: &str,
    ) -> wasmtime::Result<Result<(), WitPluginError>>;
}

/// A plugin of world `W` that compiled, linked and accepted its config.
pub(crate) struct Plugin<W: World> {
    runtime: Arc<PluginRuntime>,
    pub(crate) limits: PluginLimits,
    pre: W::Pre,
    pub(crate) name: Arc<str>,
    config: String,
    pub(crate) info: (String, String),
}

impl<W: World> Plugin<W> {
    /// Loads and checks a compiled component as a `W` plugin and runs `init` once.
    pub(crate) fn from_component(
        runtime: &Arc<PluginRuntime>,
        spec: &PluginSpec,
        component: &Component,
    ) -> Result<Self, PluginError> {
        let name: Arc<str> = spec.location.to_string().into();
        let instance_pre =
            runtime
                .linker
                .instantiate_pre(component)
                .map_err(|e| PluginError::Link {
                    plugin: name.to_string(),
                    reason: wasm_error(&e),
                })?;
        let pre = W::pre(instance_pre).map_err(|e| PluginError::WrongWorld {
            plugin: name.to_string(),
            reason: format!(
                "its exports do not match the {} interface: {}",
                W::INTERFACE,
                wasm_error(&e)
            ),
        })?;
        let limits = runtime.limits.with_settings(&spec.limits);
        let mut plugin = Self {
            runtime: runtime.clone(),
            limits,
            pre,
            name,
            config: spec.config.clone(),
            info: Default::default(),
        };
        let mut instance = plugin.instantiate()?;
        let info = instance.call("info", 0, |w, _, s| w.info(s).map(Ok))?;
        // What a plugin says about itself is shown by `check`, `plugin test` and logs.
        plugin.info = (
            plugin_text(&info.name, INFO_CAP).into_owned(),
            plugin_text(&info.version, INFO_CAP).into_owned(),
        );
        Ok(plugin)
    }

    /// The index of function `func` of the plugin's `refract:plugin/<iface>` export, for calls
    /// through [`Instance::call`].
    pub(crate) fn export_index(
        &self,
        iface: &str,
        func: &str,
    ) -> Result<ComponentExportIndex, PluginError> {
        let component = W::instance_pre(&self.pre).component();
        let name = format!(
            "{PACKAGE}{iface}@{}.{}.0",
            SUPPORTED_VERSION.0, SUPPORTED_VERSION.1
        );
        component
            .get_export_index(None, name.as_str())
            .and_then(|i| component.get_export_index(Some(&i), func))
            .ok_or_else(|| PluginError::WrongWorld {
                plugin: self.name.to_string(),
                reason: format!("it does not export {func} in {name}"),
            })
    }

    /// A new instance in a fresh store, initialised with the plugin's config.
    pub(crate) fn instantiate(&self) -> Result<Instance<W>, PluginError> {
        let mut store = self.runtime.new_store(self.name.clone(), &self.limits);
        let (world, raw) = W::instance_pre(&self.pre)
            .instantiate(&mut store)
            .and_then(|raw| Ok((W::new(&mut store, &raw)?, raw)))
            .map_err(|e| {
                let fuel = self.limits.output_fuel(0);
                let (kind, reason) = describe_trap(&e, &self.limits, fuel, &Default::default());
                let reason = match kind {
                    TrapKind::Guest => wasm_error(&e),
                    _ => reason,
                };
                PluginError::Trap {
                    plugin: self.name.to_string(),
                    call: "instantiation".into(),
                    reason,
                    kind,
                }
            })?;
        let mut instance = Instance {
            plugin_name: self.name.clone(),
            limits: self.limits,
            store,
            world,
            raw,
        };
        let config = self.config.clone();
        instance
            .call("init", config.len(), |w, _, s| w.init(s, &config))
            .map_err(|e| match e {
                PluginError::Failed { plugin, reason, .. } => PluginError::Init { plugin, reason },
                other => other,
            })?;
        Ok(instance)
    }
}

/// Reads, compiles and checks that the component exports `interface` at a supported version;
/// names what it is instead when it is another kind of plugin.
pub(crate) fn compile_checked(
    runtime: &PluginRuntime,
    spec: &PluginSpec,
    accepted: &[&str],
) -> Result<(Component, &'static str), PluginError> {
    let name = spec.location.to_string();
    let limits = runtime.limits.with_settings(&spec.limits);
    let bytes = runtime.read(&spec.location, &limits)?;
    // The kind is checked on the binary's export names, before the (slow) compilation, so a
    // component of the wrong kind is rejected at once and never compiled or cached.
    let exports = match top_level_exports(&bytes) {
        Some(exports) => exports,
        // Not parseable as a component: compiling says precisely what is wrong with it.
        None => {
            runtime.compile(&name, &bytes, &limits)?;
            return Err(PluginError::NotAComponent {
                plugin: name,
                reason: "its export section cannot be read".into(),
            });
        }
    };
    let ours: Vec<(&str, &str)> = exports
        .iter()
        .filter_map(|e| e.strip_prefix(PACKAGE))
        .map(|rest| rest.split_once('@').unwrap_or((rest, "")))
        .collect();
    let wanted: Vec<String> = accepted.iter().map(|i| format!("{PACKAGE}{i}")).collect();
    if ours.is_empty() {
        return Err(PluginError::WrongWorld {
            plugin: name,
            reason: format!(
                "it exports no refract:plugin interface (exports: {}); it must export {}",
                if exports.is_empty() {
                    "nothing".to_string()
                } else {
                    plugin_text(&exports.join(", "), WASM_ERROR_CAP).into_owned()
                },
                wanted.join(" or ")
            ),
        });
    }
    for (_, version) in &ours {
        if !version_supported(version) {
            return Err(PluginError::IncompatibleVersion {
                plugin: name,
                found: plugin_text(version, INFO_CAP).into_owned(),
                supported: format!("{}.{}.x", SUPPORTED_VERSION.0, SUPPORTED_VERSION.1),
            });
        }
    }
    if let Some(iface) = KINDS
        .iter()
        .map(|(i, _)| *i)
        .find(|i| accepted.contains(i) && ours.iter().any(|(o, _)| o == i))
    {
        let component = runtime.compile(&name, &bytes, &limits)?;
        return Ok((component, iface));
    }
    let kind = ours
        .iter()
        .find_map(|(iface, _)| KINDS.iter().find(|(i, _)| i == iface).map(|(_, k)| *k));
    let found: Vec<String> = ours.iter().map(|(i, _)| format!("{PACKAGE}{i}")).collect();
    Err(PluginError::WrongWorld {
        plugin: name,
        reason: format!(
            "it is {} (exports {}), but here it must export {}",
            kind.unwrap_or("not a refract plugin of a known kind"),
            plugin_text(&found.join(", "), WASM_ERROR_CAP),
            wanted.join(" or ")
        ),
    })
}

/// The names a component exports at its top level (not those of nested components or core
/// modules), read from the binary without compiling it; `None` when it is not a readable
/// component.
fn top_level_exports(bytes: &[u8]) -> Option<Vec<String>> {
    use wasmparser::{Parser, Payload};
    if !Parser::is_component(bytes) {
        return None;
    }
    let mut depth = 0usize;
    let mut names = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.ok()? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    names.push(export.ok()?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Some(names)
}

fn version_supported(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u64>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => {
            if SUPPORTED_VERSION.0 == 0 {
                major == 0 && minor == SUPPORTED_VERSION.1
            } else {
                major == SUPPORTED_VERSION.0
            }
        }
        _ => false,
    }
}

/// One live instance and its store.
pub(crate) struct Instance<W: World> {
    plugin_name: Arc<str>,
    limits: PluginLimits,
    store: Store<PluginState>,
    world: W,
    /// The instance behind `world`, for exports called with borrowed arguments.
    raw: ComponentInstance,
}

impl<W: World> Instance<W> {
    /// Calls into the guest under the deadline and the output budget (`input_bytes`: the size
    /// of what the call sends, which the answer may match on top of `max_output_bytes`); maps
    /// traps and plugin errors to [`PluginError`]. `f` gets the generated bindings and the raw
    /// instance (for exports called through typed functions of the host's own, borrowed,
    /// argument types).
    pub(crate) fn call<R>(
        &mut self,
        call: &str,
        input_bytes: usize,
        f: impl FnOnce(
            &W,
            &ComponentInstance,
            &mut Store<PluginState>,
        ) -> wasmtime::Result<Result<R, WitPluginError>>,
    ) -> Result<R, PluginError> {
        self.call_within(call, input_bytes, &CallBudget::default(), f)
    }

    /// [`Instance::call`] under the plugin's limits cut down to `budget`.
    pub(crate) fn call_within<R>(
        &mut self,
        call: &str,
        input_bytes: usize,
        budget: &CallBudget,
        f: impl FnOnce(
            &W,
            &ComponentInstance,
            &mut Store<PluginState>,
        ) -> wasmtime::Result<Result<R, WitPluginError>>,
    ) -> Result<R, PluginError> {
        let limits = budget.apply(&self.limits);
        let fuel = limits.output_fuel(input_bytes);
        self.store.set_epoch_deadline(limits.deadline_ticks());
        self.store.set_hostcall_fuel(fuel);
        self.store.data().stderr.clear();
        let result = f(&self.world, &self.raw, &mut self.store);
        self.store.data_mut().report_dropped_logs();
        match result {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(PluginError::Failed {
                plugin: self.plugin_name.to_string(),
                call: call.to_string(),
                reason: match e {
                    WitPluginError::InvalidConfig(m) => {
                        format!("invalid config: {}", plugin_text(&m, MESSAGE_CAP))
                    }
                    WitPluginError::Unsupported(m) => {
                        format!("unsupported: {}", plugin_text(&m, MESSAGE_CAP))
                    }
                    WitPluginError::Failed(m) => plugin_text(&m, MESSAGE_CAP).into_owned(),
                },
            }),
            Err(trap) => {
                let stderr = self.store.data().stderr.contents();
                let (kind, reason) = describe_trap(&trap, &limits, fuel, &stderr);
                Err(PluginError::Trap {
                    plugin: self.plugin_name.to_string(),
                    call: call.to_string(),
                    reason,
                    kind,
                })
            }
        }
    }
}

/// An instance that is replaced after a trap: the next call gets a fresh one.
pub(crate) struct Live<W: World> {
    pub(crate) plugin: Arc<Plugin<W>>,
    instance: Option<Instance<W>>,
}

impl<W: World> Live<W> {
    pub(crate) fn new(plugin: Arc<Plugin<W>>) -> Self {
        Self {
            plugin,
            instance: None,
        }
    }

    /// [`Instance::call`] on the live instance, replacing it after a trap.
    pub(crate) fn call<R>(
        &mut self,
        call: &str,
        input_bytes: usize,
        f: impl FnOnce(
            &W,
            &ComponentInstance,
            &mut Store<PluginState>,
        ) -> wasmtime::Result<Result<R, WitPluginError>>,
    ) -> Result<R, PluginError> {
        self.call_within(call, input_bytes, &CallBudget::default(), f)
    }

    /// [`Instance::call_within`] on the live instance, replacing it after a trap.
    pub(crate) fn call_within<R>(
        &mut self,
        call: &str,
        input_bytes: usize,
        budget: &CallBudget,
        f: impl FnOnce(
            &W,
            &ComponentInstance,
            &mut Store<PluginState>,
        ) -> wasmtime::Result<Result<R, WitPluginError>>,
    ) -> Result<R, PluginError> {
        let instance = match &mut self.instance {
            Some(i) => i,
            empty => empty.insert(self.plugin.instantiate()?),
        };
        let result = instance.call_within(call, input_bytes, budget, f);
        if matches!(result, Err(PluginError::Trap { .. })) {
            // A trapped store cannot be entered again.
            self.instance = None;
        }
        result
    }

    /// Checks that a batch call answered once per input.
    pub(crate) fn check_len<T>(
        &self,
        call: &str,
        got: Vec<T>,
        want: usize,
        unit: &str,
    ) -> Result<Vec<T>, PluginError> {
        if got.len() == want {
            Ok(got)
        } else {
            Err(PluginError::Contract {
                plugin: self.plugin.name.to_string(),
                call: call.to_string(),
                reason: format!("returned {} answers for {want} {unit}", got.len()),
            })
        }
    }
}

macro_rules! impl_world {
    ($world:ty, $pre:ident, $iface:literal) => {
        impl World for $world {
            type Pre = $pre<PluginState>;
            const INTERFACE: &'static str = $iface;
            fn pre(instance_pre: InstancePre<PluginState>) -> wasmtime::Result<Self::Pre> {
                $pre::new(instance_pre)
            }
            fn instance_pre(pre: &Self::Pre) -> &InstancePre<PluginState> {
                pre.instance_pre()
            }
            fn new(
                store: &mut Store<PluginState>,
                instance: &ComponentInstance,
            ) -> wasmtime::Result<Self> {
                <$world>::new(store, instance)
            }
            fn info(&self, store: &mut Store<PluginState>) -> wasmtime::Result<PluginInfo> {
                self.refract_plugin_lifecycle().call_info(store)
            }
            fn init(
                &self,
                store: &mut Store<PluginState>,
                config: &str,
            ) -> wasmtime::Result<Result<(), WitPluginError>> {
                self.refract_plugin_lifecycle().call_init(store, config)
            }
        }
    };
}

use crate::bindings::filter::{FilterPlugin, FilterPluginPre};
use crate::bindings::policy::{PolicyPlugin, PolicyPluginPre};
use crate::bindings::transform::{TransformPlugin, TransformPluginPre};

impl_world!(PolicyPlugin, PolicyPluginPre, "replication-policy");
impl_world!(FilterPlugin, FilterPluginPre, "record-filter");
impl_world!(TransformPlugin, TransformPluginPre, "record-transform");
