//! The mirror: each flow of a pipeline runs on its own thread, reading a source cluster,
//! naming topics through its replication-policy plugin and writing to the target cluster.

mod acls;
mod chain;
mod checkpoint;
mod clients;
mod flow;
pub mod groups;
pub mod mm2;
mod planner;
mod progress;
mod topic_configs;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tracing::{error, info};

use refract_config::{Flow, OnError, Pipeline};
use refract_plugin::{PluginRuntime, PolicyPlugin, ProcessorPlugin};

pub use chain::{Chain, ChainOutput, DeadLetter, Halt, Item};
pub use checkpoint::CheckpointRunner;
pub use flow::{
    progress_group, provenance, FlowRunner, FlowStatus, SharedStatus, PROVENANCE_HEADER,
};
pub use planner::{Route, Skip, TopicPlan, TopicPlanner};
pub use progress::PartitionProgress;

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

/// Flows running on their own threads.
pub struct Mirror {
    stop: Arc<AtomicBool>,
    flows: Vec<(String, SharedStatus, JoinHandle<()>)>,
    /// Checkpoint threads.
    tasks: Vec<JoinHandle<()>>,
}

impl Mirror {
    /// Starts every prepared flow. A flow that fails is restarted with backoff from its last
    /// committed position until [`Mirror::stop`] is called.
    pub fn start(
        pipeline: &Pipeline,
        prepared: Vec<PreparedFlow>,
        stop: Arc<AtomicBool>,
    ) -> Result<Self> {
        let mut flows = Vec::new();
        let mut tasks = Vec::new();
        for p in prepared {
            let name = p.flow.name();
            let source = pipeline.clusters[&p.flow.source].clone();
            let target = pipeline.clusters[&p.flow.target].clone();
            let status: SharedStatus = Arc::new(Mutex::new(FlowStatus::default()));
            // MM2 runs a heartbeat connector for every cluster pair; refract emits the reverse
            // pair's heartbeats from this flow unless another flow runs in that direction.
            let reverse = !pipeline
                .flows
                .iter()
                .any(|f| f.source == p.flow.target && f.target == p.flow.source);
            if p.flow.emit_checkpoints {
                let checkpoints = CheckpointRunner::new(
                    p.flow.clone(),
                    source.clone(),
                    target.clone(),
                    p.policy.clone(),
                    stop.clone(),
                    status.clone(),
                );
                let thread_stop = stop.clone();
                let thread_name = checkpoints.name();
                let handle = std::thread::Builder::new()
                    .name(thread_name.clone())
                    .spawn(move || supervise(&thread_name, &checkpoints, &thread_stop))
                    .with_context(|| format!("starting the checkpoints of flow {name}"))?;
                tasks.push(handle);
            }
            let runner = FlowRunner::new(
                p.flow,
                source,
                target,
                p.policy,
                p.processors,
                stop.clone(),
                status.clone(),
            )
            .with_reverse_heartbeats(reverse);
            let thread_stop = stop.clone();
            let thread_name = name.clone();
            let handle = std::thread::Builder::new()
                .name(format!("flow {name}"))
                .spawn(move || supervise(&thread_name, &runner, &thread_stop))
                .with_context(|| format!("starting flow {name}"))?;
            info!(flow = %name, "started");
            flows.push((name, status, handle));
        }
        Ok(Self { stop, flows, tasks })
    }

    /// Each flow's name and status.
    pub fn status(&self) -> Vec<(String, FlowStatus)> {
        self.flows
            .iter()
            .map(|(n, s, _)| (n.clone(), flow::lock(s).clone()))
            .collect()
    }

    /// Asks every flow to stop, waits for them to flush and commit.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for (name, _, handle) in self.flows {
            if handle.join().is_err() {
                error!(flow = %name, "flow thread panicked");
            }
        }
        for handle in self.tasks {
            if handle.join().is_err() {
                error!("checkpoint thread panicked");
            }
        }
    }
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
    fn record_failure(&self, _error: &anyhow::Error) {}
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
