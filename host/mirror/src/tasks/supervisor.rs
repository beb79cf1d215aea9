//! The tasks of one flow this process runs: each task a [`FlowRunner`] on a thread of its own
//! (with its cluster watch), and the flow's checkpoints beside task 0. No thread dies silently:
//! a panic is caught, logged with the flow's name and shown in its status.

use std::any::Any;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use tracing::{error, info};

use refract_config::{Cluster, Flow};
use refract_telemetry::Metrics;

use crate::chain::Halt;
use crate::checkpoint::CheckpointRunner;
use crate::flow::{lock, FlowBoard, FlowContext, FlowRunner, PluginSet, ThrottleLimits};
use crate::{Fenced, LostHalt};

use super::{Backoff, TaskId};

/// A task running on its threads.
struct RunningTask {
    runner: Arc<FlowRunner>,
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

/// The flow's checkpoints running on their thread.
struct RunningCheckpoints {
    runner: Arc<CheckpointRunner>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

/// The tasks of one flow this process runs, started and stopped one by one.
pub(crate) struct FlowTasks {
    flow: Flow,
    source: Cluster,
    target: Cluster,
    board: Arc<FlowBoard>,
    /// The latest plugins: tasks started later get these.
    plugins: Mutex<PluginSet>,
    reverse_heartbeats: AtomicBool,
    metrics: Metrics,
    /// MirrorMaker 2's series per partition (`true`) or per topic (`[metrics] partition_series`).
    partition_series: bool,
    drain: Duration,
    running: Mutex<BTreeMap<u32, RunningTask>>,
    checkpoints: Mutex<Option<RunningCheckpoints>>,
    /// The flow's read rate limits, shared by its tasks; a reload changes them live.
    throttle: Arc<ThrottleLimits>,
    /// The flow's schema-id translator, shared by its tasks.
    schemas: Option<Arc<refract_schema::Translator>>,
}

impl FlowTasks {
    /// Nothing running yet; with a private metrics registry, no reverse heartbeats and the
    /// default drain timeout until told otherwise.
    pub(crate) fn new(
        flow: Flow,
        source: Cluster,
        target: Cluster,
        board: Arc<FlowBoard>,
        plugins: PluginSet,
    ) -> Self {
        Self {
            throttle: ThrottleLimits::new(flow.throttle),
            flow,
            source,
            target,
            board,
            plugins: Mutex::new(plugins),
            reverse_heartbeats: AtomicBool::new(false),
            metrics: Metrics::new(),
            partition_series: true,
            drain: crate::flow::DRAIN_TIMEOUT,
            running: Mutex::new(BTreeMap::new()),
            checkpoints: Mutex::new(None),
            schemas: None,
        }
    }

    /// Tasks translate schema ids with `translator` (`schemas = "translate"`).
    pub(crate) fn with_schemas(
        mut self,
        translator: Option<Arc<refract_schema::Translator>>,
    ) -> Self {
        self.schemas = translator;
        self
    }

    /// Task 0 also writes the reverse pair's heartbeats (see
    /// [`FlowRunner::with_reverse_heartbeats`]).
    pub(crate) fn with_reverse_heartbeats(self, yes: bool) -> Self {
        self.reverse_heartbeats.store(yes, Ordering::Relaxed);
        self
    }

    /// Tasks and checkpoints record their series in `metrics`.
    pub(crate) fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// MirrorMaker 2's series per partition (`true`) or per topic (see
    /// [`FlowContext::partition_series`]).
    pub(crate) fn with_partition_series(mut self, yes: bool) -> Self {
        self.partition_series = yes;
        self
    }

    /// Each task's shutdown budget for flushing and committing.
    pub(crate) fn with_drain_timeout(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// The flow's settings.
    pub(crate) fn flow(&self) -> &Flow {
        &self.flow
    }

    /// The flow's source cluster.
    pub(crate) fn source(&self) -> &Cluster {
        &self.source
    }

    /// Where the flow's status is put together.
    pub(crate) fn board(&self) -> &Arc<FlowBoard> {
        &self.board
    }

    /// The flow's shutdown budget for flushing and committing.
    pub(crate) fn drain(&self) -> Duration {
        self.drain
    }

    /// The tasks running now.
    pub(crate) fn held(&self) -> Vec<u32> {
        lock(&self.running).keys().copied().collect()
    }

    /// Starts every task of the flow (outside cluster mode).
    pub(crate) fn start_all(&self) -> Result<()> {
        for index in 0..self.flow.tasks {
            self.start(index)?;
        }
        Ok(())
    }

    /// Starts task `index` (and, for task 0, the checkpoints), unless it runs already.
    pub(crate) fn start(&self, index: u32) -> Result<()> {
        let mut running = lock(&self.running);
        if running.contains_key(&index) {
            return Ok(());
        }
        let task = TaskId::new(index, self.flow.tasks);
        let name = self.thread_label(task);
        let stop = Arc::new(AtomicBool::new(false));
        let runner = Arc::new(
            FlowRunner::new(
                self.context(stop.clone()),
                task,
                lock(&self.plugins).clone(),
            )
            .with_reverse_heartbeats(
                task.duties() && self.reverse_heartbeats.load(Ordering::Relaxed),
            )
            .with_metrics(self.metrics.clone())
            .with_drain_timeout(self.drain),
        );
        let mut handles = Vec::new();
        let watch_runner = runner.clone();
        let watch_name = name.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("watch {name}"))
                .spawn(move || {
                    // The task goes on without its watch: say so rather than die silently.
                    let watched = catch_unwind(AssertUnwindSafe(|| watch_runner.watch_clusters()));
                    if let Err(payload) = watched {
                        let message = panic_message(payload.as_ref());
                        error!(flow = %watch_name, "the cluster watch panicked (a bug in refract; please report it); outages of the flow's clusters are not reported until refract restarts: {message}");
                    }
                })
                .with_context(|| format!("starting the cluster watch of {name}"))?,
        );
        let thread_runner = runner.clone();
        let thread_stop = stop.clone();
        let thread_name = name.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("flow {name}"))
                .spawn(move || supervise(&thread_name, thread_runner.as_ref(), &thread_stop))
                .with_context(|| format!("starting {name}"))?,
        );
        running.insert(
            index,
            RunningTask {
                runner,
                stop,
                handles,
            },
        );
        drop(running);
        if task.duties() && self.flow.checkpoints.enabled {
            self.start_checkpoints()?;
        }
        info!(flow = %self.flow.name(), "started {name}");
        Ok(())
    }

    /// Stops `indexes` (their stop flags are set together, so they drain side by side) and
    /// waits for each to flush and commit. With `release` they leave the flow's status (they
    /// moved to another process); otherwise they stay in it as stopped.
    pub(crate) fn stop(&self, indexes: &[u32], release: bool) {
        let stopping: Vec<(u32, RunningTask)> = {
            let mut running = lock(&self.running);
            indexes
                .iter()
                .filter_map(|i| running.remove(i).map(|t| (*i, t)))
                .collect()
        };
        let checkpoints = if indexes.contains(&0) {
            lock(&self.checkpoints).take()
        } else {
            None
        };
        for (_, t) in &stopping {
            t.stop.store(true, Ordering::Relaxed);
        }
        if let Some(c) = &checkpoints {
            c.stop.store(true, Ordering::Relaxed);
        }
        for (index, t) in stopping {
            for handle in t.handles {
                if handle.join().is_err() {
                    error!(flow = %self.flow.name(), "a thread of task {index} panicked");
                }
            }
            if release {
                self.board.remove_task(index);
            }
        }
        if let Some(c) = checkpoints {
            if c.handle.join().is_err() {
                error!(flow = %self.flow.name(), "the checkpoints thread panicked");
            }
        }
    }

    /// Stops every task this process runs (see [`FlowTasks::stop`]).
    pub(crate) fn stop_all(&self, release: bool) {
        let held = self.held();
        self.stop(&held, release);
    }

    /// Hands new plugins to every running task and the checkpoints, and to tasks started later.
    pub(crate) fn swap_plugins(&self, set: PluginSet) {
        if let Some(c) = lock(&self.checkpoints).as_ref() {
            c.runner.swap_policy(set.policy.clone());
        }
        for t in lock(&self.running).values() {
            t.runner.swap_plugins(set.clone());
        }
        *lock(&self.plugins) = set;
    }

    /// A flow in the other direction now writes the reverse pair's heartbeats.
    pub(crate) fn stop_reverse_heartbeats(&self) {
        self.reverse_heartbeats.store(false, Ordering::Relaxed);
        for t in lock(&self.running).values() {
            t.runner.stop_reverse_heartbeats();
        }
    }

    fn start_checkpoints(&self) -> Result<()> {
        let mut slot = lock(&self.checkpoints);
        if slot.is_some() {
            return Ok(());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let runner = Arc::new(
            CheckpointRunner::new(
                self.context(stop.clone()),
                lock(&self.plugins).policy.clone(),
            )
            .with_metrics(self.metrics.clone()),
        );
        let thread_runner = runner.clone();
        let thread_stop = stop.clone();
        let thread_name = runner.name();
        let handle = std::thread::Builder::new()
            .name(thread_name.clone())
            .spawn(move || supervise(&thread_name, thread_runner.as_ref(), &thread_stop))
            .with_context(|| format!("starting the checkpoints of flow {}", self.flow.name()))?;
        *slot = Some(RunningCheckpoints {
            runner,
            stop,
            handle,
        });
        Ok(())
    }

    fn context(&self, stop: Arc<AtomicBool>) -> FlowContext {
        FlowContext {
            flow: self.flow.clone(),
            source: self.source.clone(),
            target: self.target.clone(),
            stop,
            board: self.board.clone(),
            throttle: self.throttle.clone(),
            partition_series: self.partition_series,
            schemas: self.schemas.clone(),
        }
    }

    /// New read rate limits, from the next batch of every task on.
    pub(crate) fn set_throttle(&self, throttle: refract_config::Throttle) {
        self.throttle.set(throttle);
    }

    /// `A->B`, or `A->B task 2/4` when the flow has several tasks.
    fn thread_label(&self, task: TaskId) -> String {
        if task.count > 1 {
            format!("{} {task}", self.flow.name())
        } else {
            self.flow.name()
        }
    }
}

/// Something [`supervise`] restarts until it returns Ok.
pub(crate) trait Task {
    /// One run, until stopped (Ok) or until something fails that needs a fresh start (Err).
    fn run(&self) -> Result<()>;
    /// Shows a failed run in the status.
    fn record_failure(&self, error: &anyhow::Error);
    /// Shows in the status that a run panicked with `message`; it is not run again.
    fn record_panic(&self, message: &str);
}

impl Task for FlowRunner {
    fn run(&self) -> Result<()> {
        FlowRunner::run(self)
    }
    fn record_failure(&self, error: &anyhow::Error) {
        FlowRunner::record_failure(self, error)
    }
    fn record_panic(&self, message: &str) {
        FlowRunner::record_panic(self, message)
    }
}

impl Task for CheckpointRunner {
    fn run(&self) -> Result<()> {
        CheckpointRunner::run(self)
    }
    fn record_failure(&self, error: &anyhow::Error) {
        CheckpointRunner::record_failure(self, error)
    }
    fn record_panic(&self, message: &str) {
        CheckpointRunner::record_panic(self, message)
    }
}

/// Runs `runner` until it returns Ok, restarting it with backoff after a failure (not after a
/// halt or a fence: those need attention).
///
/// A panic in a run is caught and halts it too, with one ERROR line and the panic's message in
/// the status (`/status`, `/health`): a panic is a bug, not a passing failure, and restarting
/// would most likely panic again on the same records. Restarting refract resumes a halted task
/// from its last commit.
pub(crate) fn supervise(name: &str, runner: &dyn Task, stop: &AtomicBool) {
    let mut backoff = Backoff::new();
    loop {
        backoff.attempt();
        // Unwind safety: after a panic the runner is never run again; only its status is
        // written, behind locks that recover from poisoning.
        let outcome = match catch_unwind(AssertUnwindSafe(|| runner.run())) {
            Ok(outcome) => outcome,
            Err(payload) => {
                let message = panic_message(payload.as_ref());
                runner.record_panic(&message);
                error!(flow = %name, "flow halted after a panic (a bug in refract; please report it); restart refract to resume from its last commit: {message}");
                return;
            }
        };
        match outcome {
            Ok(()) => return,
            Err(e) => {
                runner.record_failure(&e);
                if let Some(halt) = e.downcast_ref::<Halt>() {
                    if halt.plugin == crate::flow::schemas::SCHEMA_STAGE {
                        error!(flow = %name, "flow halted: a record of {}[{}] at offset {} cannot be translated and the flow's schema_on_error is \"stop\"; fix the schema (or set schema_on_error) and restart or reload refract: {}", halt.topic, halt.partition, halt.offset, halt.reason);
                    } else {
                        error!(flow = %name, "flow halted; fix the processor and restart refract: {halt}");
                    }
                    return;
                }
                if let Some(fenced) = e.downcast_ref::<Fenced>() {
                    error!(flow = %name, "{fenced}");
                    return;
                }
                if let Some(lost) = e.downcast_ref::<LostHalt>() {
                    error!(flow = %name, "{lost}");
                    return;
                }
                if stop.load(Ordering::Relaxed) {
                    error!(flow = %name, "flow failed while stopping: {e:#}");
                    return;
                }
                error!(flow = %name, "flow failed, restarting from its last commit in {:?}: {e:#}", backoff.pause());
                if backoff.wait(stop) {
                    return;
                }
            }
        }
    }
}

/// The message a panic was raised with (`panic!("...")` carries a `&str` or a `String`).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::atomic::AtomicU32;

    use crate::FlowState;
    use refract_config::Pipeline;
    use refract_plugin::{PluginLimits, PluginRuntime, PolicyPlugin};

    use super::*;

    /// A flow `a->b` of `tasks` tasks, with nothing running, and its plugins.
    fn flow_tasks(tasks: u32) -> (FlowTasks, PluginSet) {
        let text = format!(
            "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntasks = {tasks}\n"
        );
        let pipeline = Pipeline::parse(Path::new("p.toml"), &text).unwrap();
        let flow = pipeline.flows[0].clone();
        let runtime = PluginRuntime::new(PluginLimits::default()).unwrap();
        let plugins = PluginSet {
            policy: PolicyPlugin::load(&runtime, &flow.policy).unwrap(),
            processors: Vec::new(),
        };
        let (source, target) = (
            pipeline.clusters["a"].clone(),
            pipeline.clusters["b"].clone(),
        );
        let board = FlowBoard::new(None, false);
        let tasks = FlowTasks::new(flow, source, target, board, plugins.clone());
        (tasks, plugins)
    }

    /// The seam: a run that panics with `panic`, reporting into a real runner's status the way
    /// the runner itself would, and counting its runs.
    struct Panicking<'a, T: Task> {
        status_of: &'a T,
        panic: fn(),
        runs: AtomicU32,
    }

    impl<T: Task> Task for Panicking<'_, T> {
        fn run(&self) -> Result<()> {
            self.runs.fetch_add(1, Ordering::Relaxed);
            (self.panic)();
            Ok(())
        }
        fn record_failure(&self, error: &anyhow::Error) {
            self.status_of.record_failure(error)
        }
        fn record_panic(&self, message: &str) {
            self.status_of.record_panic(message)
        }
    }

    /// Supervises `task` on a thread of its own, as [`FlowTasks::start`] does; whether the
    /// thread ended without a panic escaping it.
    fn supervise_on_a_thread<T: Task + Sync>(task: &Panicking<'_, T>) -> bool {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| s.spawn(|| supervise("a->b", task, &stop)).join().is_ok())
    }

    #[test]
    fn a_panicking_task_halts_with_the_panic_message() {
        let cases: [(u32, fn(), &str); 3] = [
            (
                1,
                || panic!("slot {} out of range", 7),
                "panicked: slot 7 out of range",
            ),
            (
                3,
                || panic!("a plain message"),
                "task 1/3 panicked: a plain message",
            ),
            (
                1,
                || std::panic::panic_any(42_u8),
                "panicked: a panic without a message",
            ),
        ];
        for (count, panic, want) in cases {
            let (tasks, plugins) = flow_tasks(count);
            let stop = Arc::new(AtomicBool::new(false));
            let index = count / 2;
            let runner = FlowRunner::new(tasks.context(stop), TaskId::new(index, count), plugins);
            let task = Panicking {
                status_of: &runner,
                panic,
                runs: AtomicU32::new(0),
            };
            assert!(supervise_on_a_thread(&task), "the panic escaped the thread");
            assert_eq!(
                task.runs.load(Ordering::Relaxed),
                1,
                "halted, not restarted"
            );
            let status = tasks.board().status();
            assert_eq!(status.state, FlowState::Halted, "{want}");
            assert_eq!(status.halted.as_deref(), Some(want));
            assert_eq!(status.last_error.as_deref(), Some(want));
            assert_eq!(status.restarts, 0);
            assert!(!status.healthy());
        }
    }

    #[test]
    fn panicking_checkpoints_leave_the_flow_degraded_with_the_panic_message() {
        let (tasks, plugins) = flow_tasks(1);
        let running = tasks.board().add_task(0);
        lock(&running).state = FlowState::Running;
        let stop = Arc::new(AtomicBool::new(false));
        let checkpoints = CheckpointRunner::new(tasks.context(stop), plugins.policy);
        let task = Panicking {
            status_of: &checkpoints,
            panic: || panic!("checkpoint for {} lost", "g1"),
            runs: AtomicU32::new(0),
        };
        assert!(supervise_on_a_thread(&task), "the panic escaped the thread");
        assert_eq!(task.runs.load(Ordering::Relaxed), 1, "not restarted");
        let status = tasks.board().status();
        assert_eq!(status.state, FlowState::Degraded);
        assert_eq!(
            status.checkpoints_failing.as_deref(),
            Some("panicked, stopped until refract restarts: checkpoint for g1 lost")
        );
        assert!(!status.healthy());
    }
}
