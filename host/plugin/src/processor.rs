//! Record processors: filter and transform plugins, called once per batch of records from one
//! source topic-partition.

use std::sync::Arc;

use refract_config::PluginSpec;

use wasmtime::component::ComponentExportIndex;
use wasmtime::Store;

use crate::bindings::filter::FilterPlugin as FilterWorld;
use crate::bindings::transform::TransformPlugin as TransformWorld;
use crate::bindings::{Outcome, WitPluginError};
use crate::component::{compile_checked, Live, Plugin};
use crate::error::PluginError;
use crate::runtime::{PluginRuntime, PluginState};
use crate::view::BatchView;

/// Which processor world a plugin implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessorKind {
    /// `filter-plugin`: keep or drop each record.
    Filter,
    /// `transform-plugin`: keep, drop, replace or reject each record.
    Transform,
}

enum Loaded {
    Filter(Arc<Plugin<FilterWorld>>, ComponentExportIndex),
    Transform(Arc<Plugin<TransformWorld>>, ComponentExportIndex),
}

/// A filter or transform plugin that compiled, linked and accepted its config.
pub struct ProcessorPlugin(Loaded);

impl std::fmt::Debug for ProcessorPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessorPlugin")
            .field("name", &self.name())
            .field("kind", &self.kind())
            .finish()
    }
}

impl ProcessorPlugin {
    /// Loads `spec` as a filter or a transform (whichever world it exports) and runs its `init`
    /// once, so a bad processor is rejected before any flow starts.
    pub fn load(runtime: &Arc<PluginRuntime>, spec: &PluginSpec) -> Result<Arc<Self>, PluginError> {
        let (component, iface) =
            compile_checked(runtime, spec, &["record-filter", "record-transform"])?;
        Self::from_component(runtime, spec, &component, iface)
    }

    pub(crate) fn from_component(
        runtime: &Arc<PluginRuntime>,
        spec: &PluginSpec,
        component: &wasmtime::component::Component,
        iface: &str,
    ) -> Result<Arc<Self>, PluginError> {
        let loaded = if iface == "record-filter" {
            let plugin = Plugin::from_component(runtime, spec, component)?;
            let call = plugin.export_index(iface, "filter")?;
            Loaded::Filter(Arc::new(plugin), call)
        } else {
            let plugin = Plugin::from_component(runtime, spec, component)?;
            let call = plugin.export_index(iface, "transform")?;
            Loaded::Transform(Arc::new(plugin), call)
        };
        Ok(Arc::new(Self(loaded)))
    }

    /// The name refract uses for it: the built-in name or the file path.
    pub fn name(&self) -> &str {
        match &self.0 {
            Loaded::Filter(p, _) => &p.name,
            Loaded::Transform(p, _) => &p.name,
        }
    }

    /// The name and version the plugin reports about itself.
    pub fn info(&self) -> (&str, &str) {
        let info = match &self.0 {
            Loaded::Filter(p, _) => &p.info,
            Loaded::Transform(p, _) => &p.info,
        };
        (&info.0, &info.1)
    }

    /// Filter or transform.
    pub fn kind(&self) -> ProcessorKind {
        match &self.0 {
            Loaded::Filter(..) => ProcessorKind::Filter,
            Loaded::Transform(..) => ProcessorKind::Transform,
        }
    }
}

enum LiveKind {
    Filter(Live<FilterWorld>, ComponentExportIndex),
    Transform(Live<TransformWorld>, ComponentExportIndex),
}

/// A processor's live instance on one flow; a trapped instance is replaced on the next call.
pub struct Processor {
    plugin: Arc<ProcessorPlugin>,
    live: LiveKind,
}

impl Processor {
    /// A processor backed by a fresh instance of `plugin`.
    pub fn new(plugin: Arc<ProcessorPlugin>) -> Self {
        let live = match &plugin.0 {
            Loaded::Filter(p, call) => LiveKind::Filter(Live::new(p.clone()), *call),
            Loaded::Transform(p, call) => LiveKind::Transform(Live::new(p.clone()), *call),
        };
        Self { plugin, live }
    }

    /// The plugin behind this processor.
    pub fn plugin(&self) -> &Arc<ProcessorPlugin> {
        &self.plugin
    }

    /// One outcome per record of `batch`, in order. A filter's verdicts become `keep`/`drop`.
    ///
    /// The batch is lowered into the guest straight from the borrowed bytes (one copy, into the
    /// guest's memory); a `keep` outcome carries nothing back.
    pub fn process(&mut self, batch: &BatchView<'_>) -> Result<Vec<Outcome>, PluginError> {
        let n = batch.records.len();
        match &mut self.live {
            LiveKind::Filter(live, call) => {
                let flags = live.call("filter", |_, instance, store| {
                    typed_call::<Vec<bool>>(instance, store, call, batch)
                })?;
                let flags = live.check_len("filter", flags, n, "records")?;
                Ok(flags
                    .into_iter()
                    .map(|keep| if keep { Outcome::Keep } else { Outcome::Drop })
                    .collect())
            }
            LiveKind::Transform(live, call) => {
                let outcomes = live.call("transform", |_, instance, store| {
                    typed_call::<Vec<Outcome>>(instance, store, call, batch)
                })?;
                live.check_len("transform", outcomes, n, "records")
            }
        }
    }
}

/// Calls a `func(batch: record-batch) -> result<R, plugin-error>` export with a borrowed batch.
/// The type check runs per call (a walk over a dozen fields, next to a batch of records).
fn typed_call<R>(
    instance: &wasmtime::component::Instance,
    store: &mut Store<PluginState>,
    call: &ComponentExportIndex,
    batch: &BatchView<'_>,
) -> wasmtime::Result<Result<R, WitPluginError>>
where
    R: wasmtime::component::Lift + 'static,
{
    let func = instance
        .get_func(&mut *store, call)
        .ok_or_else(|| wasmtime::format_err!("the record function export is missing"))?;
    let typed = func.typed::<(&BatchView<'_>,), (Result<R, WitPluginError>,)>(&*store)?;
    let (result,) = typed.call(&mut *store, (batch,))?;
    Ok(result)
}

/// A plugin of any kind, as `refract plugin test` loads it.
#[derive(Debug)]
pub enum AnyPlugin {
    /// A replication policy.
    Policy(Arc<crate::PolicyPlugin>),
    /// A filter or transform.
    Processor(Arc<ProcessorPlugin>),
}

impl AnyPlugin {
    /// Loads `spec` as whichever kind of plugin its exports say it is.
    pub fn load(runtime: &Arc<PluginRuntime>, spec: &PluginSpec) -> Result<Self, PluginError> {
        let (component, iface) = compile_checked(
            runtime,
            spec,
            &["replication-policy", "record-filter", "record-transform"],
        )?;
        if iface == "replication-policy" {
            Ok(Self::Policy(crate::PolicyPlugin::from_component(
                runtime, spec, &component,
            )?))
        } else {
            Ok(Self::Processor(ProcessorPlugin::from_component(
                runtime, spec, &component, iface,
            )?))
        }
    }
}
