//! Record processors: filter and transform plugins, called once per batch of records from one
//! source topic-partition.

use std::sync::Arc;

use refract_config::PluginSpec;

use crate::bindings::filter::FilterPlugin as FilterWorld;
use crate::bindings::transform::TransformPlugin as TransformWorld;
use crate::bindings::{Outcome, RecordBatch};
use crate::component::{compile_checked, Live, Plugin};
use crate::error::PluginError;
use crate::runtime::PluginRuntime;

/// Which processor world a plugin implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessorKind {
    /// `filter-plugin`: keep or drop each record.
    Filter,
    /// `transform-plugin`: keep, drop, replace or reject each record.
    Transform,
}

enum Loaded {
    Filter(Arc<Plugin<FilterWorld>>),
    Transform(Arc<Plugin<TransformWorld>>),
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
            Loaded::Filter(Arc::new(Plugin::from_component(runtime, spec, component)?))
        } else {
            Loaded::Transform(Arc::new(Plugin::from_component(runtime, spec, component)?))
        };
        Ok(Arc::new(Self(loaded)))
    }

    /// The name refract uses for it: the built-in name or the file path.
    pub fn name(&self) -> &str {
        match &self.0 {
            Loaded::Filter(p) => &p.name,
            Loaded::Transform(p) => &p.name,
        }
    }

    /// The name and version the plugin reports about itself.
    pub fn info(&self) -> (&str, &str) {
        let info = match &self.0 {
            Loaded::Filter(p) => &p.info,
            Loaded::Transform(p) => &p.info,
        };
        (&info.0, &info.1)
    }

    /// Filter or transform.
    pub fn kind(&self) -> ProcessorKind {
        match &self.0 {
            Loaded::Filter(_) => ProcessorKind::Filter,
            Loaded::Transform(_) => ProcessorKind::Transform,
        }
    }
}

enum LiveKind {
    Filter(Live<FilterWorld>),
    Transform(Live<TransformWorld>),
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
            Loaded::Filter(p) => LiveKind::Filter(Live::new(p.clone())),
            Loaded::Transform(p) => LiveKind::Transform(Live::new(p.clone())),
        };
        Self { plugin, live }
    }

    /// The plugin behind this processor.
    pub fn plugin(&self) -> &Arc<ProcessorPlugin> {
        &self.plugin
    }

    /// One outcome per record of `batch`, in order. A filter's verdicts become `keep`/`drop`.
    pub fn process(&mut self, batch: &RecordBatch) -> Result<Vec<Outcome>, PluginError> {
        let n = batch.records.len();
        match &mut self.live {
            LiveKind::Filter(live) => {
                let flags = live.call("filter", |w, s| {
                    w.refract_plugin_record_filter().call_filter(s, batch)
                })?;
                let flags = live.check_len("filter", flags, n, "records")?;
                Ok(flags
                    .into_iter()
                    .map(|keep| if keep { Outcome::Keep } else { Outcome::Drop })
                    .collect())
            }
            LiveKind::Transform(live) => {
                let outcomes = live.call("transform", |w, s| {
                    w.refract_plugin_record_transform().call_transform(s, batch)
                })?;
                live.check_len("transform", outcomes, n, "records")
            }
        }
    }
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
