//! The mirror: each flow of a pipeline runs on threads of its own (records, cluster watch,
//! checkpoints when enabled), reading a source cluster,
//! naming topics through its replication-policy plugin and writing to the target cluster.

mod acls;
mod budget;
mod chain;
mod checkpoint;
mod clock;
pub mod degraded;
pub mod doctor;
mod flow;
pub mod membership;
pub mod outputs;
mod planner;
pub mod probe;
mod progress;
pub mod reload;
pub mod series;
mod takeover;
mod tasks;
mod topic_configs;
pub mod verify;
pub mod watch;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use tracing::{error, info};

use refract_config::{Flow, OnError, Pipeline};
use refract_plugin::{PluginRuntime, PolicyPlugin, ProcessorPlugin};
use refract_telemetry::Metrics;

pub use chain::{Chain, ChainOutput, DeadLetter, Halt, Item, Skipped};
pub use checkpoint::{CheckpointRunner, TRANSLATION_HEADER};
pub use flow::{
    progress_group, provenance, transactional_id, DegradedPartition, Fenced, FlowBoard,
    FlowContext, FlowRunner, FlowStatus, PluginSet, SchemaView, SharedStatus, PROVENANCE_HEADER,
};
pub use flow::{ClusterView, LostHalt, LostRecords, Member};
pub use planner::{Route, Skip, TopicPlan, TopicPlanner};
pub use progress::{DeliveryFailure, PartitionProgress};
pub use reload::{FlowDiff, FlowShape, NotLive, PipelineShape};
pub use series::{
    ClusterMetrics, DegradedCause, FlowMetrics, FlowState, PluginMetrics, RecordEvent,
    RefractSeries, ReloadResult, SourcePartitionMetrics,
};
pub use tasks::TaskId;

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

/// One flow's tasks in this process and what it was started from.
struct RunningFlow {
    name: String,
    /// What it was built from (settings, clusters, derived inputs, plugin file contents): what
    /// the reload planner compares.
    shape: FlowShape,
    /// Its tasks (and checkpoints) running here.
    tasks: Arc<tasks::FlowTasks>,
    /// Stops its group membership (cluster mode).
    stop: Arc<AtomicBool>,
    /// Its group membership's thread (cluster mode).
    handles: Vec<JoinHandle<()>>,
}

/// `[cluster]` as this process runs it: the settings and this process's name.
#[derive(Clone)]
struct Clustering {
    mode: refract_config::ClusterMode,
    instance: String,
}

/// What [`Mirror::reload`] needs to load plugins and re-read the pipeline.
struct ReloadContext {
    path: PathBuf,
    targets: Vec<String>,
    runtime: Arc<PluginRuntime>,
    /// `[metrics] listen` as the process runs it: a reload cannot move it.
    metrics_listen: Option<std::net::SocketAddr>,
    /// `[metrics]`'s access and HTTPS settings as the process runs them.
    endpoint: refract_config::Endpoint,
}

/// A planned reload with every plugin it needs loaded: what [`Mirror::apply`] changes.
struct Loaded {
    diff: reload::FlowDiff,
    /// Flows that get new plugins, with them and their new shape.
    swaps: Vec<(String, PreparedFlow, FlowShape)>,
    /// Flows stopped and started again.
    rebuild: Vec<(String, PreparedFlow)>,
    /// Flows started.
    add: Vec<PreparedFlow>,
}

/// Each flow's name and board: what the endpoint reads.
type Boards = Vec<(String, Arc<FlowBoard>)>;

/// The published view of `flows`: each one's name and board.
fn boards(flows: &[RunningFlow]) -> Boards {
    flows
        .iter()
        .map(|f| (f.name.clone(), Arc::clone(f.tasks.board())))
        .collect()
}

/// Counts of reloads, for status and metrics.
#[derive(Debug, Default, Clone)]
pub struct ReloadStats {
    /// Reloads applied (including ones that changed nothing).
    pub ok: u64,
    /// Reloads rejected (invalid pipeline or a plugin that failed to load); nothing changed.
    pub rejected: u64,
    /// The last rejection's outermost message (the log has its whole chain).
    pub last_error: Option<String>,
}

/// Flows running on their own threads.
pub struct Mirror {
    stop: Arc<AtomicBool>,
    /// Cluster mode, when the pipeline has `[cluster]`.
    clustering: Option<Clustering>,
    flows: Mutex<Vec<RunningFlow>>,
    /// What `/health`, `/status` and `/metrics` read: each flow's name and board, published
    /// whenever the flows change. A reload holds `flows` while it stops and starts flows (and
    /// `reloading` throughout); readers of this never wait for either.
    published: RwLock<Arc<Boards>>,
    /// Held by one reload at a time, while it loads the pipeline and plugins (outside `flows`)
    /// and applies them.
    reloading: Mutex<()>,
    reload: Option<ReloadContext>,
    stats: Mutex<ReloadStats>,
    metrics: Metrics,
    /// Shutdown's budget per flow for flushing and committing.
    drain: Duration,
    /// `[metrics] listen` of the pipeline it started with.
    metrics_listen: Option<std::net::SocketAddr>,
    /// `[metrics]`'s access and HTTPS settings of the pipeline it started with.
    endpoint: refract_config::Endpoint,
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
        let clustering = pipeline.cluster.clone().map(|mode| Clustering {
            instance: mode
                .instance
                .clone()
                .unwrap_or_else(membership::default_instance),
            mode,
        });
        // In cluster mode every series says which process it comes from.
        let metrics = match &clustering {
            Some(c) => Metrics::with_const_labels(&[("instance", c.instance.as_str())])
                .with_context(|| format!("instance name {}", c.instance))?,
            None => Metrics::new(),
        };
        let mut flows = Vec::new();
        for p in prepared {
            flows.push(start_flow(
                pipeline,
                p,
                &metrics,
                drain,
                clustering.as_ref(),
            )?);
        }
        let published = RwLock::new(Arc::new(boards(&flows)));
        Ok(Self {
            stop,
            clustering,
            flows: Mutex::new(flows),
            published,
            reloading: Mutex::new(()),
            reload: None,
            stats: Mutex::new(ReloadStats::default()),
            metrics,
            drain,
            metrics_listen: pipeline.metrics_listen,
            endpoint: pipeline.endpoint.clone(),
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
            endpoint: self.endpoint.clone(),
        });
    }

    /// Each flow's name and status.
    pub fn status(&self) -> Vec<(String, FlowStatus)> {
        self.boards()
            .iter()
            .map(|(name, board)| (name.clone(), board.status()))
            .collect()
    }

    /// The published flows: never waits for a reload.
    fn boards(&self) -> Arc<Boards> {
        Arc::clone(&self.published.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Publishes `flows` for the readers of [`Mirror::status`].
    fn publish(&self, flows: &[RunningFlow]) {
        *self.published.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(boards(flows));
    }

    /// The registry every flow records its series in (for `/metrics`).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Whether every flow is running (not degraded, restarting, halted or stopped) with no
    /// degraded partition.
    pub fn healthy(&self) -> bool {
        let flows = self.boards();
        !flows.is_empty() && flows.iter().all(|(_, board)| board.status().healthy())
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
                // What `/status` shows anyone: the outcome, not the chain (file names,
                // settings), which the log line below has.
                stats.last_error = Some(format!("{e}"));
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
        // One reload at a time; only this (and stop) changes the flows, so what is planned
        // below from a copy of their shapes still holds when it is applied.
        let _reloading = flow::lock(&self.reloading);
        let pipeline = Pipeline::load(&ctx.path)?;
        let wanted = pipeline.flows_for_targets(&ctx.targets);
        // Plan as data, then load every plugin the plan needs (seconds for a Python component),
        // before changing anything and without holding the flows.
        let running = PipelineShape {
            metrics_listen: ctx.metrics_listen,
            endpoint: ctx.endpoint.clone(),
            cluster: self.clustering.as_ref().map(|c| c.mode.clone()),
            flows: flow::lock(&self.flows)
                .iter()
                .map(|f| f.shape.clone())
                .collect(),
        };
        let target = PipelineShape::of(&pipeline, &wanted, content_hash);
        let diff = reload::plan(&running, &target)?;
        let find = |name: &str| wanted.iter().find(|f| f.name() == name).copied();
        let prepare_named = |name: &str| -> Result<PreparedFlow> {
            let f = find(name).with_context(|| format!("flow {name} vanished while planning"))?;
            prepare_one(&pipeline, f, &ctx.runtime)
        };
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
        // removals and starts. The flows are published again however this ends.
        let loaded = Loaded {
            diff,
            swaps,
            rebuild,
            add,
        };
        let mut flows = flow::lock(&self.flows);
        if self.stop.load(Ordering::Relaxed) {
            anyhow::bail!("the mirror is stopping");
        }
        let applied = self.apply(&pipeline, loaded, &mut flows);
        self.publish(&flows);
        applied
    }

    /// Applies a planned reload whose plugins are loaded.
    fn apply(
        &self,
        pipeline: &Pipeline,
        loaded: Loaded,
        flows: &mut Vec<RunningFlow>,
    ) -> Result<String> {
        let Loaded {
            diff,
            swaps,
            rebuild,
            add,
        } = loaded;
        let index = |flows: &[RunningFlow], name: &str| flows.iter().position(|f| f.name == name);
        let mut summary = Vec::new();
        for (name, p, shape) in swaps {
            if let Some(i) = index(flows, &name) {
                flows[i].tasks.swap_plugins(PluginSet {
                    policy: p.policy,
                    processors: p.processors,
                });
                flows[i].shape = shape;
                summary.push(format!("new plugins for {name}"));
            }
        }
        for name in &diff.retune {
            let wanted = pipeline.flows.iter().find(|f| f.name() == *name);
            if let (Some(i), Some(wanted)) = (index(flows, name), wanted) {
                flows[i].tasks.set_throttle(wanted.throttle);
                flows[i].shape.flow.throttle = wanted.throttle;
                summary.push(format!("new read rate limits for {name}"));
            }
        }
        for name in &diff.stop_reverse_heartbeats {
            if let Some(i) = index(flows, name) {
                flows[i].tasks.stop_reverse_heartbeats();
                flows[i].shape.reverse_heartbeats = false;
                summary.push(format!(
                    "{name} leaves the reverse heartbeats to the new reverse flow"
                ));
            }
        }
        for name in diff.remove.iter().chain(&diff.rebuild) {
            if let Some(i) = index(flows, name) {
                flows[i].stop.store(true, Ordering::Relaxed);
            }
        }
        let mut replaced = Vec::new();
        for (name, p) in rebuild {
            if let Some(i) = index(flows, &name) {
                // A rebuilt flow may mirror other topics: it registers its partitions anew.
                self.metrics
                    .remove_flow_partitions(&p.flow.source, &p.flow.target);
                let fresh = start_flow(
                    pipeline,
                    p,
                    &self.metrics,
                    self.drain,
                    self.clustering.as_ref(),
                )?;
                replaced.push(std::mem::replace(&mut flows[i], fresh));
            }
        }
        for old in replaced {
            summary.push(format!("rebuilt {}", old.name));
            join(old);
        }
        for name in &diff.remove {
            if let Some(i) = index(flows, name) {
                let old = flows.remove(i);
                summary.push(format!("removed {name}"));
                join(old);
                self.metrics.remove_flow(name);
                if let Some(id) = refract_config::FlowId::parse(name) {
                    self.metrics.remove_flow_partitions(&id.source, &id.target);
                }
            }
        }
        for p in add {
            let f = start_flow(
                pipeline,
                p,
                &self.metrics,
                self.drain,
                self.clustering.as_ref(),
            )?;
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
        // Every flow drains at the same time.
        std::thread::scope(|scope| {
            for f in flows {
                scope.spawn(move || join(f));
            }
        });
    }
}

/// Stops a flow: its group membership (which drains its tasks before leaving), then whatever
/// still runs; waits for them to flush and commit.
fn join(f: RunningFlow) {
    f.stop.store(true, Ordering::Relaxed);
    for handle in f.handles {
        if handle.join().is_err() {
            error!(flow = %f.name, "a thread of the flow panicked");
        }
    }
    f.tasks.stop_all(false);
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

/// Starts a flow: every task on threads of its own, or in cluster mode its group membership,
/// which starts the tasks the group gives this process.
fn start_flow(
    pipeline: &Pipeline,
    p: PreparedFlow,
    metrics: &Metrics,
    drain: Duration,
    clustering: Option<&Clustering>,
) -> Result<RunningFlow> {
    let name = p.flow.name();
    let stop = Arc::new(AtomicBool::new(false));
    let shape = reload::flow_shape(pipeline, &p.flow, content_hash);
    let source = pipeline.clusters[&p.flow.source].clone();
    let target = pipeline.clusters[&p.flow.target].clone();
    let board = FlowBoard::new(metrics.flow(&name).ok(), clustering.is_some());
    let schemas = flow::schemas::translator(&p.flow, &source, &target, metrics, p.policy.clone())?;
    board.set_schemas(schemas.clone());
    let tasks = Arc::new(
        tasks::FlowTasks::new(
            p.flow.clone(),
            source,
            target,
            board,
            PluginSet {
                policy: p.policy,
                processors: p.processors,
            },
        )
        .with_reverse_heartbeats(shape.reverse_heartbeats)
        .with_metrics(metrics.clone())
        .with_partition_series(pipeline.endpoint.partition_series)
        .with_drain_timeout(drain)
        .with_schemas(schemas.clone()),
    );
    let mut handles = Vec::new();
    if let Some(translator) = schemas {
        let thread_stop = stop.clone();
        let interval = p.flow.schemas.sync_interval;
        handles.push(
            std::thread::Builder::new()
                .name(format!("schemas {name}"))
                .spawn(move || flow::schemas::sync_subjects(&translator, interval, &thread_stop))
                .with_context(|| format!("starting the subject sync of flow {name}"))?,
        );
    }
    match clustering {
        None => {
            // One process per flow: it waits on standby while another runs the flow.
            let member = tasks.clone();
            let instance = membership::default_instance();
            let thread_stop = stop.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("solo {name}"))
                    .spawn(move || membership::run_solo(member, instance, thread_stop))
                    .with_context(|| format!("starting flow {name}"))?,
            );
        }
        Some(c) => {
            let member = tasks.clone();
            let mode = c.mode.clone();
            let instance = c.instance.clone();
            let cluster_metrics = metrics.cluster(&name).ok();
            let thread_stop = stop.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("cluster {name}"))
                    .spawn(move || {
                        membership::run_group(member, mode, instance, cluster_metrics, thread_stop)
                    })
                    .with_context(|| format!("starting the group membership of flow {name}"))?,
            );
        }
    }
    info!(flow = %name, "started");
    Ok(RunningFlow {
        name,
        shape,
        tasks,
        stop,
        handles,
    })
}
