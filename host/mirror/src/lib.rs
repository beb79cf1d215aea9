//! The mirror: each flow of a pipeline runs on threads of its own (records, cluster watch,
//! checkpoints when enabled), reading a source cluster,
//! naming topics through its replication-policy plugin and writing to the target cluster.

mod acls;
mod admin_ffi;
mod chain;
mod checkpoint;
pub mod clients;
mod clock;
pub mod degraded;
pub mod doctor;
mod flow;
pub mod groups;
pub mod mm2;
pub mod oauth;
mod planner;
mod progress;
pub mod reload;
mod source_queue;
mod takeover;
mod topic_configs;
pub mod verify;
pub mod watch;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tracing::{error, info};

use refract_config::{Flow, OnError, Pipeline};
use refract_plugin::{PluginRuntime, PolicyPlugin, ProcessorPlugin};
use refract_telemetry::{Metrics, ReloadResult};

pub use chain::{Chain, ChainOutput, DeadLetter, Halt, Item, Skipped};
pub use checkpoint::CheckpointRunner;
pub use flow::{
    progress_group, provenance, transactional_id, DegradedPartition, Fenced, FlowContext,
    FlowRunner, FlowStatus, PluginSet, SharedStatus, PROVENANCE_HEADER,
};
pub use planner::{Route, Skip, TopicPlan, TopicPlanner};
pub use progress::{DeliveryFailure, PartitionProgress};
pub use reload::{FlowDiff, FlowShape, NotLive, PipelineShape};

/// Longest pause between restarts of a failing flow.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A flow whose plugins are loaded and checked, ready to start.
pub struct PreparedFlow {
    /// The flow's settings.
    pub flow: Flow,
    /// Its replication policy.
    pub policy: Arc<PolicyPlugin>,
    /// Its processors in order, each with its `on_error`.
    pub processors: Vec<(Arc<ProcessorPlugin>, OnError)>,
}

/// Loads every plugin of the flows whose target is in `targets` (all when empty). Any bad plugin
/// fails the whole call, so nothing starts with a broken pipeline.
pub fn prepare(
    pipeline: &Pipeline,
    targets: &[String],
    runtime: &Arc<PluginRuntime>,
) -> Result<Vec<PreparedFlow>> {
    let flows = pipeline.flows_for_targets(targets);
    if flows.is_empty() {
        anyhow::bail!(
            "{}: no flow targets {} (flows: {})",
            pipeline.file.display(),
            targets.join(", "),
            pipeline
                .flows
                .iter()
                .map(Flow::name)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    flows
        .into_iter()
        .map(|flow| {
            let policy = PolicyPlugin::load(runtime, &flow.policy).with_context(|| {
                format!(
                    "{}: {} (flow {})",
                    pipeline.file.display(),
                    flow.policy.key,
                    flow.name()
                )
            })?;
            let processors = flow
                .processors
                .iter()
                .map(|p| {
                    let plugin = ProcessorPlugin::load(runtime, &p.plugin).with_context(|| {
                        format!(
                            "{}: {} (flow {})",
                            pipeline.file.display(),
                            p.plugin.key,
                            flow.name()
                        )
                    })?;
                    Ok((plugin, p.on_error))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(PreparedFlow {
                flow: flow.clone(),
                policy,
                processors,
            })
        })
        .collect()
}

/// One flow's threads and what it was started from.
struct RunningFlow {
    name: String,
    /// What it was built from (settings, clusters, derived inputs, plugin file contents): what
    /// the reload planner compares.
    shape: FlowShape,
    runner: Arc<FlowRunner>,
    /// Its checkpoints, when it emits them: a policy hot swap reaches them too.
    checkpoints: Option<Arc<CheckpointRunner>>,
    stop: Arc<AtomicBool>,
    status: SharedStatus,
    handles: Vec<JoinHandle<()>>,
}

impl RunningFlow {
    /// Hands new plugins to the flow, and its policy to the flow's checkpoints.
    fn swap_plugins(&self, set: PluginSet) {
        if let Some(c) = &self.checkpoints {
            c.swap_policy(set.policy.clone());
        }
        self.runner.swap_plugins(set);
    }
}

/// What [`Mirror::reload`] needs to load plugins and re-read the pipeline.
struct ReloadContext {
    path: PathBuf,
    targets: Vec<String>,
    runtime: Arc<PluginRuntime>,
    /// `[metrics] listen` as the process runs it: a reload cannot move it.
    metrics_listen: Option<std::net::SocketAddr>,
}

/// Counts of reloads, for status and metrics.
#[derive(Debug, Default, Clone)]
pub struct ReloadStats {
    /// Reloads applied (including ones that changed nothing).
    pub ok: u64,
    /// Reloads rejected (invalid pipeline or a plugin that failed to load); nothing changed.
    pub rejected: u64,
    /// The last rejection.
    pub last_error: Option<String>,
}

/// Flows running on their own threads.
pub struct Mirror {
    stop: Arc<AtomicBool>,
    flows: Mutex<Vec<RunningFlow>>,
    reload: Option<ReloadContext>,
    stats: Mutex<ReloadStats>,
    metrics: Metrics,
    /// Shutdown's budget per flow for flushing and committing.
    drain: Duration,
    /// `[metrics] listen` of the pipeline it started with.
    metrics_listen: Option<std::net::SocketAddr>,
}

fn content_hash(path: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::fs::read(path).unwrap_or_default().hash(&mut h);
    h.finish()
}

impl Mirror {
    /// Starts every prepared flow. A flow that fails is restarted with backoff from its last
    /// committed position until [`Mirror::stop`] is called.
    pub fn start(
        pipeline: &Pipeline,
        prepared: Vec<PreparedFlow>,
        stop: Arc<AtomicBool>,
    ) -> Result<Self> {
        Self::start_draining(pipeline, prepared, stop, flow::DRAIN_TIMEOUT)
    }

    /// [`Mirror::start`] with `drain` as each flow's shutdown budget for flushing and
    /// committing.
    pub fn start_draining(
        pipeline: &Pipeline,
        prepared: Vec<PreparedFlow>,
        stop: Arc<AtomicBool>,
        drain: Duration,
    ) -> Result<Self> {
        let metrics = Metrics::new();
        let mut flows = Vec::new();
        for p in prepared {
            flows.push(start_flow(pipeline, p, &metrics, drain)?);
        }
        Ok(Self {
            stop,
            flows: Mutex::new(flows),
            reload: None,
            stats: Mutex::new(ReloadStats::default()),
            metrics,
            drain,
            metrics_listen: pipeline.metrics_listen,
        })
    }

    /// Lets [`Mirror::reload`] re-read `path` (keeping only flows into `targets`, all when
    /// empty) and load plugins with `runtime`.
    pub fn enable_reload(&mut self, path: &Path, targets: &[String], runtime: Arc<PluginRuntime>) {
        self.reload = Some(ReloadContext {
            path: path.to_path_buf(),
            targets: targets.to_vec(),
            runtime,
            metrics_listen: self.metrics_listen,
        });
    }

    /// Each flow's name and status.
    pub fn status(&self) -> Vec<(String, FlowStatus)> {
        flow::lock(&self.flows)
            .iter()
            .map(|f| (f.name.clone(), flow::lock(&f.status).clone()))
            .collect()
    }

    /// The registry every flow records its series in (for `/metrics`).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Whether every flow is running (not degraded, restarting, halted or stopped) with no
    /// degraded partition.
    pub fn healthy(&self) -> bool {
        let flows = flow::lock(&self.flows);
        !flows.is_empty() && flows.iter().all(|f| flow::lock(&f.status).healthy())
    }

    /// Reload counts.
    pub fn reload_stats(&self) -> ReloadStats {
        flow::lock(&self.stats).clone()
    }

    /// Files whose change should trigger a reload: the pipeline and every plugin file in use.
    pub fn watched_files(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.reload.iter().map(|r| r.path.clone()).collect();
        for f in flow::lock(&self.flows).iter() {
            out.extend(f.shape.plugins.iter().map(|(p, _)| p.clone()));
        }
        out.sort();
        out.dedup();
        out
    }

    /// Re-reads the pipeline and applies it without a restart: a flow whose plugin files changed
    /// gets the new plugins at its next batch boundary; a flow whose settings changed is stopped
    /// (its progress committed) and started again; removed flows stop, added flows start; other
    /// flows are not touched. Everything is loaded and checked first: an invalid pipeline or a
    /// plugin that fails to compile, instantiate or initialise rejects the whole reload and
    /// changes nothing. Returns a summary of what changed.
    pub fn reload(&self) -> Result<String> {
        let result = self.try_reload();
        let outcome = if result.is_ok() {
            ReloadResult::Ok
        } else {
            ReloadResult::Rejected
        };
        if let Ok(counter) = self.metrics.reloads(outcome) {
            counter.inc();
        }
        let mut stats = flow::lock(&self.stats);
        match &result {
            Ok(summary) => {
                stats.ok += 1;
                info!("reload: {summary}");
            }
            Err(e) => {
                stats.rejected += 1;
                stats.last_error = Some(format!("{e:#}"));
                error!("reload rejected, nothing changed: {e:#}");
            }
        }
        result
    }

    fn try_reload(&self) -> Result<String> {
        let ctx = self
            .reload
            .as_ref()
            .context("this mirror was started without reload support")?;
        let pipeline = Pipeline::load(&ctx.path)?;
        let wanted = pipeline.flows_for_targets(&ctx.targets);
        let mut flows = flow::lock(&self.flows);
        // Plan as data, then load every plugin the plan needs, before changing anything.
        let running = PipelineShape {
            metrics_listen: ctx.metrics_listen,
            flows: flows.iter().map(|f| f.shape.clone()).collect(),
        };
        let target = PipelineShape::of(&pipeline, &wanted, content_hash);
        let diff = reload::plan(&running, &target)?;
        let find = |name: &str| wanted.iter().find(|f| f.name() == name).copied();
        let prepare_named = |name: &str| -> Result<PreparedFlow> {
            let f = find(name).with_context(|| format!("flow {name} vanished while planning"))?;
            prepare_one(&pipeline, f, &ctx.runtime)
        };
        let index = |flows: &[RunningFlow], name: &str| flows.iter().position(|f| f.name == name);
        let mut swaps = Vec::new();
        for name in &diff.swap_plugins {
            let p = prepare_named(name)?;
            let shape = reload::flow_shape(&pipeline, &p.flow, content_hash);
            swaps.push((name.clone(), p, shape));
        }
        let mut rebuild = Vec::new();
        for name in &diff.rebuild {
            rebuild.push((name.clone(), prepare_named(name)?));
        }
        let mut add = Vec::new();
        for name in &diff.add {
            add.push(prepare_named(name)?);
        }
        // Apply: plugins swapped in place, reverse heartbeats handed over, then stops, rebuilds,
        // removals and starts.
        let mut summary = Vec::new();
        for (name, p, shape) in swaps {
            if let Some(i) = index(&flows, &name) {
                flows[i].swap_plugins(PluginSet {
                    policy: p.policy,
                    processors: p.processors,
                });
                flows[i].shape = shape;
                summary.push(format!("new plugins for {name}"));
            }
        }
        for name in &diff.stop_reverse_heartbeats {
            if let Some(i) = index(&flows, name) {
                flows[i].runner.stop_reverse_heartbeats();
                flows[i].shape.reverse_heartbeats = false;
                summary.push(format!(
                    "{name} leaves the reverse heartbeats to the new reverse flow"
                ));
            }
        }
        for name in diff.remove.iter().chain(&diff.rebuild) {
            if let Some(i) = index(&flows, name) {
                flows[i].stop.store(true, Ordering::Relaxed);
            }
        }
        let mut replaced = Vec::new();
        for (name, p) in rebuild {
            if let Some(i) = index(&flows, &name) {
                // A rebuilt flow may mirror other topics: it registers its partitions anew.
                self.metrics
                    .remove_flow_partitions(&p.flow.source, &p.flow.target);
                let fresh = start_flow(&pipeline, p, &self.metrics, self.drain)?;
                replaced.push(std::mem::replace(&mut flows[i], fresh));
            }
        }
        for old in replaced {
            summary.push(format!("rebuilt {}", old.name));
            join(old);
        }
        for name in &diff.remove {
            if let Some(i) = index(&flows, name) {
                let old = flows.remove(i);
                summary.push(format!("removed {name}"));
                join(old);
                self.metrics.remove_flow(name);
                if let Some((source, target)) = name.split_once("->") {
                    self.metrics.remove_flow_partitions(source, target);
                }
            }
        }
        for p in add {
            let f = start_flow(&pipeline, p, &self.metrics, self.drain)?;
            summary.push(format!("added {}", f.name));
            flows.push(f);
        }
        if summary.is_empty() {
            summary.push("nothing changed".into());
        }
        Ok(summary.join(", "))
    }

    /// Asks every flow to stop, waits for them to flush and commit.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let flows = std::mem::take(&mut *flow::lock(&self.flows));
        for f in &flows {
            f.stop.store(true, Ordering::Relaxed);
        }
        for f in flows {
            join(f);
        }
    }
}

/// Waits for a flow whose stop flag is set.
fn join(f: RunningFlow) {
    f.stop.store(true, Ordering::Relaxed);
    for handle in f.handles {
        if handle.join().is_err() {
            error!(flow = %f.name, "a thread of the flow panicked");
        }
    }
}

fn prepare_one(
    pipeline: &Pipeline,
    flow: &Flow,
    runtime: &Arc<PluginRuntime>,
) -> Result<PreparedFlow> {
    let targets = [flow.target.clone()];
    prepare(pipeline, &targets, runtime)?
        .into_iter()
        .find(|p| p.flow.name() == flow.name())
        .with_context(|| format!("flow {} vanished while loading", flow.name()))
}

/// Starts a flow's threads (records and cluster watch; checkpoints when enabled) with a stop
/// flag of its own.
fn start_flow(
    pipeline: &Pipeline,
    p: PreparedFlow,
    metrics: &Metrics,
    drain: Duration,
) -> Result<RunningFlow> {
    let name = p.flow.name();
    let stop = Arc::new(AtomicBool::new(false));
    let shape = reload::flow_shape(pipeline, &p.flow, content_hash);
    let source = pipeline.clusters[&p.flow.source].clone();
    let target = pipeline.clusters[&p.flow.target].clone();
    let status: SharedStatus = Arc::new(Mutex::new(FlowStatus::default()));
    let context = FlowContext {
        flow: p.flow.clone(),
        source,
        target,
        stop: stop.clone(),
        status: status.clone(),
    };
    let reverse = shape.reverse_heartbeats;
    let mut handles = Vec::new();
    let mut checkpoints_runner = None;
    if p.flow.checkpoints.enabled {
        let checkpoints = Arc::new(
            CheckpointRunner::new(context.clone(), p.policy.clone()).with_metrics(metrics.clone()),
        );
        checkpoints_runner = Some(checkpoints.clone());
        let thread_stop = stop.clone();
        let thread_name = checkpoints.name();
        handles.push(
            std::thread::Builder::new()
                .name(thread_name.clone())
                .spawn(move || supervise(&thread_name, checkpoints.as_ref(), &thread_stop))
                .with_context(|| format!("starting the checkpoints of flow {name}"))?,
        );
    }
    let runner = Arc::new(
        FlowRunner::new(
            context,
            PluginSet {
                policy: p.policy,
                processors: p.processors,
            },
        )
        .with_reverse_heartbeats(reverse)
        .with_metrics(metrics.clone())
        .with_drain_timeout(drain),
    );
    let watch_runner = runner.clone();
    handles.push(
        std::thread::Builder::new()
            .name(format!("watch {name}"))
            .spawn(move || watch_runner.watch_clusters())
            .with_context(|| format!("starting the cluster watch of flow {name}"))?,
    );
    let thread_runner = runner.clone();
    let thread_stop = stop.clone();
    let thread_name = name.clone();
    handles.push(
        std::thread::Builder::new()
            .name(format!("flow {name}"))
            .spawn(move || supervise(&thread_name, thread_runner.as_ref(), &thread_stop))
            .with_context(|| format!("starting flow {name}"))?,
    );
    info!(flow = %name, "started");
    Ok(RunningFlow {
        name,
        shape,
        checkpoints: checkpoints_runner,
        runner,
        stop,
        status,
        handles,
    })
}

/// Something [`supervise`] restarts until it returns Ok.
trait Task {
    fn run(&self) -> Result<()>;
    fn record_failure(&self, error: &anyhow::Error);
}

impl Task for FlowRunner {
    fn run(&self) -> Result<()> {
        FlowRunner::run(self)
    }
    fn record_failure(&self, error: &anyhow::Error) {
        FlowRunner::record_failure(self, error)
    }
}

impl Task for CheckpointRunner {
    fn run(&self) -> Result<()> {
        CheckpointRunner::run(self)
    }
    fn record_failure(&self, error: &anyhow::Error) {
        CheckpointRunner::record_failure(self, error)
    }
}

fn supervise(name: &str, runner: &dyn Task, stop: &AtomicBool) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let started = Instant::now();
        match runner.run() {
            Ok(()) => return,
            Err(e) => {
                runner.record_failure(&e);
                if let Some(halt) = e.downcast_ref::<Halt>() {
                    error!(flow = %name, "flow halted; fix the processor and restart refract: {halt}");
                    return;
                }
                if let Some(fenced) = e.downcast_ref::<Fenced>() {
                    error!(flow = %name, "{fenced}");
                    return;
                }
                if stop.load(Ordering::Relaxed) {
                    error!(flow = %name, "flow failed while stopping: {e:#}");
                    return;
                }
                if started.elapsed() > MAX_BACKOFF * 2 {
                    backoff = Duration::from_secs(1);
                }
                error!(flow = %name, "flow failed, restarting from its last commit in {backoff:?}: {e:#}");
                let until = Instant::now() + backoff;
                while Instant::now() < until {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}
