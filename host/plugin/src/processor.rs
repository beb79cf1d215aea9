//! Record processors: filter and transform plugins, called once per batch of records from one
//! source topic-partition.

use std::sync::Arc;

use refract_config::{internal_topic_reason, PluginSpec};

use wasmtime::component::ComponentExportIndex;
use wasmtime::Store;

use crate::bindings::filter::FilterPlugin as FilterWorld;
use crate::bindings::transform::TransformPlugin as TransformWorld;
use crate::bindings::{Outcome, WitPluginError};
use crate::call_budget::CallBudget;
use crate::component::{compile_checked, Live, Plugin};
use crate::error::{PluginError, TrapKind};
use crate::guest_text::{plugin_text, MESSAGE_CAP};
use crate::policy::topic_name_problem;
use crate::runtime::{PluginLimits, PluginRuntime, PluginState};
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

    /// The sandbox limits its calls run under.
    pub fn limits(&self) -> PluginLimits {
        match &self.0 {
            Loaded::Filter(p, _) => p.limits,
            Loaded::Transform(p, _) => p.limits,
        }
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
        self.process_within(batch, &CallBudget::default())
    }

    /// [`Processor::process`] with the call's deadline and output bytes cut down to `budget`
    /// (what is left of a budget several calls share).
    pub fn process_within(
        &mut self,
        batch: &BatchView<'_>,
        budget: &CallBudget,
    ) -> Result<Vec<Outcome>, PluginError> {
        let n = batch.records.len();
        let input = batch.size_in_bytes();
        match &mut self.live {
            LiveKind::Filter(live, call) => {
                let flags = live.call_within("filter", input, budget, |_, instance, store| {
                    typed_call::<Vec<bool>>(instance, store, call, batch)
                })?;
                let flags = live.check_len("filter", flags, n, "records")?;
                Ok(flags
                    .into_iter()
                    .map(|keep| if keep { Outcome::Keep } else { Outcome::Drop })
                    .collect())
            }
            LiveKind::Transform(live, call) => {
                let outcomes =
                    live.call_within("transform", input, budget, |_, instance, store| {
                        typed_call::<Vec<Outcome>>(instance, store, call, batch)
                    })?;
                let mut outcomes = live.check_len("transform", outcomes, n, "records")?;
                check_output_records(&live.plugin.name, &live.plugin.limits, batch, &outcomes)?;
                screen_outcomes(&mut outcomes);
                Ok(outcomes)
            }
        }
    }
}

/// Turns an outcome that routes a record to a topic no plugin may write — an internal topic of
/// Kafka, MirrorMaker 2 or refract, or an illegal name — into a rejection of that record, so it
/// follows the processor's `on_error` and nothing is written (or created) there; and makes a
/// plugin's own reject reason plugin text (escaped and cut), as every consumer of it (logs,
/// `/status`, the dead-letter header, `plugin test`) shows it.
fn screen_outcomes(outcomes: &mut [Outcome]) {
    for outcome in outcomes.iter_mut() {
        match outcome {
            Outcome::Replace(records) => {
                if let Some(reason) = records
                    .iter()
                    .find_map(|r| refused_route(r.topic.as_deref()?))
                {
                    *outcome = Outcome::Reject(reason);
                }
            }
            Outcome::Reject(reason) => {
                if let std::borrow::Cow::Owned(shown) = plugin_text(reason, MESSAGE_CAP) {
                    *reason = shown;
                }
            }
            Outcome::Keep | Outcome::Drop => {}
        }
    }
}

/// Why a transform may not send a record to `topic`, or `None` when it may.
fn refused_route(topic: &str) -> Option<String> {
    let shown = plugin_text(topic, MESSAGE_CAP);
    if let Some(reason) = internal_topic_reason(topic) {
        return Some(format!(
            "refract refused its output: it routed a record to `{shown}`, an internal topic ({reason}); plugin output is never written there"
        ));
    }
    topic_name_problem(topic).map(|problem| {
        format!(
            "refract refused its output: it routed a record to `{shown}`, which is not a legal topic name: {problem}"
        )
    })
}

/// Holds a transform's answer to its output record budgets: at most `max_outputs_per_record`
/// records for any one input and `max_outputs_per_call` in all. (The bytes were bounded while
/// the answer was copied out, by `max_output_bytes`.)
fn check_output_records(
    plugin: &str,
    limits: &PluginLimits,
    batch: &BatchView<'_>,
    outcomes: &[Outcome],
) -> Result<(), PluginError> {
    let stopped = |kind, reason: String| PluginError::Trap {
        plugin: plugin.to_string(),
        call: "transform".into(),
        reason,
        kind,
    };
    let mut total = 0usize;
    for (record, outcome) in batch.records.iter().zip(outcomes) {
        let Outcome::Replace(records) = outcome else {
            continue;
        };
        if records.len() > limits.max_outputs_per_record as usize {
            return Err(stopped(TrapKind::OutputsPerRecord, format!(
                "it returned {} records for the record at offset {}; its budget is {} per input record (max_outputs_per_record)",
                records.len(),
                record.offset,
                limits.max_outputs_per_record
            )));
        }
        total += records.len();
    }
    if total > limits.max_outputs_per_call as usize {
        return Err(stopped(TrapKind::OutputsPerCall, format!(
            "it returned {total} records for a batch of {}; its budget is {} per call (max_outputs_per_call)",
            batch.records.len(),
            limits.max_outputs_per_call
        )));
    }
    Ok(())
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
