//! `refract`: mirror Kafka topics between clusters, naming them with WebAssembly policies.

mod demo;
#[cfg(test)]
mod docs_tests;
mod endpoints;
mod mm2_cmds;
mod plugin_new;
mod plugin_test;
mod status_cmd;
mod verify;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use refract_config::Pipeline;
use refract_mirror::Mirror;
use refract_plugin::{CompileIn, PluginLimits, PluginRuntime};

/// jemalloc serves every allocation in the process: with its unprefixed symbols librdkafka's
/// `malloc`/`free` resolve to it too. Each produced record holds several small allocations
/// (message, header list, headers) until its delivery report; with thousands in flight glibc's
/// malloc falls off its thread cache and costs about 1 µs per record (README, Benchmark).
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "refract",
    version,
    about = "Kafka cross-cluster mirror with WebAssembly replication policies"
)]
struct Cli {
    /// Log format: `text` (human-readable) or `json` (one object per line, for log shippers).
    #[arg(long, global = true, default_value = "text")]
    log_format: refract_telemetry::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every flow of a pipeline until interrupted (SIGINT/SIGTERM stop it cleanly).
    Run {
        /// The pipeline file (TOML, or a MirrorMaker 2 `.properties` file).
        pipeline: PathBuf,
        /// Run only the flows whose target is one of these clusters (MirrorMaker 2's dedicated mode).
        #[arg(long, num_args = 1..)]
        clusters: Vec<String>,
        /// Migration mode: mirror until every partition is caught up (progress and ETA on
        /// stderr), stop cleanly, verify source against target like `refract verify`, and exit
        /// (0 when everything matches, 1 when something differs).
        #[arg(long)]
        until_caught_up: bool,
        /// On SIGTERM/SIGINT, how long each flow waits for the target to acknowledge what it sent
        /// and for its commits (e.g. `30s`); the process exits within this plus a few seconds,
        /// whatever state the clusters are in.
        #[arg(long, default_value = "30s", value_parser = parse_drain)]
        drain_timeout: Duration,
    },
    /// Validate a pipeline and load every plugin it names; exits non-zero on the first error.
    /// With `--connect`, also connects to every cluster the flows use and reports, per cluster,
    /// reachability, TLS, the principal and each permission the flows need; exits 1 when a flow
    /// cannot run (missing features are warnings).
    Check {
        /// The pipeline file (TOML, or a MirrorMaker 2 `.properties` file).
        pipeline: PathBuf,
        /// Connect to the clusters and check what each flow needs there (no side effects).
        #[arg(long)]
        connect: bool,
    },
    /// Mirror sample traffic between in-process clusters and print where it went (no Kafka needed).
    Demo,
    /// Work with plugins without Kafka.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Consumer-group offsets after failover (MirrorMaker 2's RemoteClusterUtils.translateOffsets).
    Offsets {
        #[command(subcommand)]
        command: OffsetsCommand,
    },
    /// Print each cluster's upstream clusters and hop counts, from the heartbeat topics.
    Topology(mm2_cmds::Topology),
    /// Print the pipeline TOML equivalent to a MirrorMaker 2 properties file.
    Convert(mm2_cmds::Convert),
    /// One screen per flow: state, topics, lag, rates, last error (from the running process's
    /// `[metrics] listen` endpoint, else the lag read from the clusters).
    Status(status_cmd::Status),
    /// Compare every mirrored partition with its source (counts and a checksum of the records
    /// present at the start); exits 1 when any differs.
    Verify(verify::Verify),
}

#[derive(Subcommand)]
enum OffsetsCommand {
    /// Print the target offsets a consumer group should resume from after failing over from
    /// one cluster to another, read from the checkpoints refract wrote.
    Translate(mm2_cmds::Translate),
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Run a policy, filter or transform on sample input and print one JSON line per input:
    /// records (JSON lines with topic, partition, offset, timestamp, key, value, headers) for a
    /// processor, topic names for a policy.
    Test(Box<plugin_test::PluginTest>),
    /// Write a ready plugin project (source with the kind's default behaviour and one place to
    /// change, build script, sample input, README) for a policy, filter or transform in Rust,
    /// Python, JavaScript or C, or for a policy in Go.
    New(plugin_new::PluginNew),
}

fn main() -> ExitCode {
    // A plugin compiler child (refract_plugin::CompileIn::Child): no command line, no logging.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == refract_plugin::COMPILE_CHILD_ARG)
    {
        return refract_plugin::compile_child_main();
    }
    let cli = Cli::parse();
    refract_telemetry::init_logging_as("info", cli.log_format);
    let result = match cli.command {
        Command::Run {
            pipeline,
            clusters,
            until_caught_up,
            drain_timeout,
        } => match run(&pipeline, &clusters, until_caught_up, drain_timeout) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        Command::Check { pipeline, connect } => match check(&pipeline, connect) {
            Ok(false) => return ExitCode::from(1),
            other => other.map(drop),
        },
        Command::Demo => demo::run(),
        Command::Plugin {
            command: PluginCommand::Test(test),
        } => test.run(),
        Command::Plugin {
            command: PluginCommand::New(new),
        } => new.run(),
        Command::Offsets {
            command: OffsetsCommand::Translate(t),
        } => t.run(),
        Command::Topology(t) => t.run(),
        Command::Convert(c) => c.run(),
        Command::Status(s) => s.run(),
        Command::Verify(v) => match v.run() {
            Ok(false) => return ExitCode::from(1),
            other => other.map(drop),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// How often watched files are checked for changes.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// Modification time and size of each file (None when unreadable).
fn file_stamps(files: &[PathBuf]) -> Vec<Option<(std::time::SystemTime, u64)>> {
    files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .ok()
                .and_then(|m| m.modified().ok().map(|t| (t, m.len())))
        })
        .collect()
}

/// The plugin runtime every command uses: default limits, compiled components cached on disk
/// (`REFRACT_CACHE_DIR`, default `~/.cache/refract/components`; `off` disables it), at most
/// `REFRACT_CACHE_MAX_MIB` of them (default 1024), and compiled in a child process of this
/// binary, bounded by each plugin's `compile_timeout` and `compile_memory_limit`.
pub(crate) fn plugin_runtime() -> Result<Arc<PluginRuntime>> {
    // The running binary itself, even after it was replaced or removed on disk (an upgrade).
    let exe = if cfg!(target_os = "linux") {
        PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe().context("finding the refract binary to compile plugins with")?
    };
    Ok(PluginRuntime::with_compiler(
        PluginLimits::default(),
        refract_plugin::default_cache_dir().as_deref(),
        CompileIn::Child(exe),
    )?)
}

fn load(path: &Path, targets: &[String]) -> Result<(Pipeline, Vec<refract_mirror::PreparedFlow>)> {
    let pipeline = Pipeline::load(path)?;
    for warning in &pipeline.warnings {
        tracing::warn!("{warning}");
    }
    let runtime = crate::plugin_runtime()?;
    let prepared = refract_mirror::prepare(&pipeline, targets, &runtime)?;
    Ok((pipeline, prepared))
}

/// Validates the pipeline (and with `connect` checks its clusters); whether every flow can run.
fn check(path: &Path, connect: bool) -> Result<bool> {
    let (pipeline, prepared) = load(path, &[])?;
    let probe = refract_mirror::probe::probe(&prepared);
    if !probe.problems.is_empty() {
        anyhow::bail!(
            "{}: a plugin failed when exercised:\n  {}",
            pipeline.file.display(),
            probe.problems.join("\n  ")
        );
    }
    println!("{}: ok", pipeline.file.display());
    for p in &prepared {
        let (name, version) = p.policy.info();
        println!(
            "  flow {}: policy {} ({name} {version}), topics {:?} excluding {:?}",
            p.flow.name(),
            p.policy.name(),
            p.flow.topics.include.patterns(),
            p.flow.topics.exclude.patterns()
        );
    }
    for line in &probe.lines {
        println!("{line}");
    }
    if !connect {
        return Ok(true);
    }
    let report = refract_mirror::doctor::check_connect(&pipeline, &prepared)?;
    for line in &report.lines {
        println!("{line}");
    }
    Ok(report.all_flows_can_run)
}

/// Runs the pipeline; with `until_caught_up`, returns whether the final verification matched.
fn run(path: &Path, targets: &[String], until_caught_up: bool, drain: Duration) -> Result<bool> {
    let pipeline = Pipeline::load(path)?;
    for warning in &pipeline.warnings {
        tracing::warn!("{warning}");
    }
    let runtime = crate::plugin_runtime()?;
    let prepared = refract_mirror::prepare(&pipeline, targets, &runtime)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).context("installing signal handlers")?;
    }
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .context("installing the SIGHUP handler")?;
    // The endpoint first: a port in use or an unusable certificate stops refract before any
    // flow starts; until the mirror runs, /health says `starting`.
    let endpoints = Arc::new(endpoints::MirrorEndpoints::default());
    let _server = match pipeline.metrics_listen {
        Some(addr) => Some(serve_endpoint(&pipeline, addr, endpoints.clone())?),
        None => None,
    };
    let mut mirror = Mirror::start_draining(&pipeline, prepared, stop.clone(), drain)?;
    mirror.enable_reload(path, targets, runtime);
    let mirror = Arc::new(mirror);
    endpoints.serve(mirror.clone());
    // Like a Connect worker with a failed task, the process keeps running when a flow halts
    // (a processor with on_error = "stop" failed): the halt is logged, the other flows go on,
    // and a restart with a fixed plugin resumes the halted flow from its last commit.
    // The pipeline file and every plugin file are watched: a change (or SIGHUP) reloads.
    let mut stamps = file_stamps(&mirror.watched_files());
    let mut next_check = std::time::Instant::now() + WATCH_INTERVAL;
    let mut catch_up = until_caught_up.then(CatchUp::new);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        if let Some(c) = catch_up.as_mut() {
            if c.check(&mirror) {
                break;
            }
        }
        let now = std::time::Instant::now();
        let changed = if hup.swap(false, Ordering::Relaxed) {
            tracing::info!("SIGHUP: reloading");
            true
        } else if now >= next_check {
            next_check = now + WATCH_INTERVAL;
            let current = file_stamps(&mirror.watched_files());
            if current != stamps {
                tracing::info!("a watched file changed: reloading");
                true
            } else {
                false
            }
        } else {
            false
        };
        if changed {
            // The outcome is logged and counted by the mirror; a rejected reload changes nothing.
            let _ = mirror.reload();
            stamps = file_stamps(&mirror.watched_files());
        }
    }
    tracing::info!("shutting down (drain timeout {drain:?})");
    stop_within(&mirror, drain + SHUTDOWN_GRACE);
    if let Some(c) = catch_up {
        c.finish();
        eprintln!("caught up; verifying source against target");
        return verify::Verify::whole_pipeline(path.to_path_buf()).run();
    }
    Ok(true)
}

/// Serves `[metrics]` on `addr`; says where, and warns when anyone who reaches a non-loopback
/// address may reload or the reload token would cross the network in plain HTTP.
fn serve_endpoint(
    pipeline: &Pipeline,
    addr: std::net::SocketAddr,
    endpoints: Arc<endpoints::MirrorEndpoints>,
) -> Result<refract_telemetry::http::Server> {
    let server = refract_telemetry::http::serve(
        &addr.to_string(),
        endpoints,
        endpoints::options(&pipeline.endpoint),
    )
    .with_context(|| format!("{}: [metrics]", pipeline.file.display()))?;
    let reload = match pipeline.endpoint.reload {
        refract_config::ReloadAccess::Disabled => "",
        refract_config::ReloadAccess::Open => " and POST /reload",
        refract_config::ReloadAccess::Token(_) => " and POST /reload (with the token)",
        refract_config::ReloadAccess::Closed => {
            " (POST /reload refused on this address: set [metrics] reload_token, or reload = true)"
        }
    };
    tracing::info!(
        "serving /metrics, /health, /status{reload} on {}",
        server.url()
    );
    for warning in pipeline.endpoint.start_warnings(addr) {
        tracing::warn!("{}: [metrics] {warning}", pipeline.file.display());
    }
    Ok(server)
}

/// What shutdown allows beyond the drain timeout: the commit after the drain and closing.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(4);

/// `--drain-timeout`: a duration like `30s`.
fn parse_drain(text: &str) -> Result<Duration, String> {
    refract_config::parse_duration(text)
}

/// Stops the mirror, waiting at most `limit`: a flow still busy then (a cluster that does not
/// answer a commit, say) is left behind with one line saying so; the process exits anyway.
fn stop_within(mirror: &Arc<Mirror>, limit: Duration) {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let stopping = mirror.clone();
    let spawned = std::thread::Builder::new()
        .name("shutdown".into())
        .spawn(move || {
            stopping.stop();
            let _ = done_tx.send(());
        });
    if spawned.is_err() {
        mirror.stop();
        return;
    }
    if done_rx.recv_timeout(limit).is_err() {
        tracing::warn!(
            "shutdown: not every flow finished within {limit:?} (a cluster does not answer); exiting without their final commit: the records they mirrored since their last commit will be mirrored again on the next start"
        );
    }
}

/// Progress of `run --until-caught-up`: total lag over time, an ETA, and when it is done.
struct CatchUp {
    started: std::time::Instant,
    first_lag: Option<i64>,
    zero_since: Option<std::time::Instant>,
    last_print: std::time::Instant,
    tty: bool,
}

impl CatchUp {
    fn new() -> Self {
        use std::io::IsTerminal;
        Self {
            started: std::time::Instant::now(),
            first_lag: None,
            zero_since: None,
            last_print: std::time::Instant::now(),
            tty: std::io::stderr().is_terminal(),
        }
    }

    /// Whether every flow runs, knows its partitions and has nothing left to mirror (for a
    /// couple of seconds, so a commit in flight is not mistaken for the end).
    fn check(&mut self, mirror: &Mirror) -> bool {
        let status = mirror.status();
        let ready = !status.is_empty()
            && status.iter().all(|(_, s)| {
                s.state == refract_mirror::FlowState::Running
                    && (s.routes.is_empty() || !s.lag.is_empty())
            });
        let lag: i64 = status.iter().flat_map(|(_, s)| s.lag.values()).sum();
        let sent: u64 = status.iter().map(|(_, s)| s.records_sent).sum();
        let throttled_ms: u64 = status.iter().map(|(_, s)| s.throttled_ms).sum();
        if ready && self.first_lag.is_none() {
            self.first_lag = Some(lag);
        }
        let now = std::time::Instant::now();
        let every = if self.tty {
            Duration::from_millis(250)
        } else {
            Duration::from_secs(10)
        };
        if now.duration_since(self.last_print) >= every {
            self.last_print = now;
            let elapsed = self.started.elapsed().as_secs_f64().max(0.001);
            let rate = sent as f64 / elapsed;
            let eta = if rate > 0.0 && lag > 0 {
                format!("{:.0} s", lag as f64 / rate)
            } else {
                "-".into()
            };
            let first = self.first_lag.unwrap_or(lag).max(1);
            let done = 100.0 * (1.0 - lag as f64 / first as f64).clamp(0.0, 1.0);
            // The rate is measured, so a flow's max_bytes_per_second / max_records_per_second
            // is in the ETA already; say how much of the time the throttle held reads back.
            let throttled = if throttled_ms > 0 {
                let share = throttled_ms as f64 / 10.0 / elapsed / status.len().max(1) as f64;
                format!(" (throttled {:.0}% of the time)", share.min(100.0))
            } else {
                String::new()
            };
            let line = format!(
                "catching up: {sent} records mirrored, {lag} to go ({done:.0}%), {rate:.0} rec/s{throttled}, ETA {eta}"
            );
            if self.tty {
                eprint!("\r{line}\x1b[K");
            } else {
                eprintln!("{line}");
            }
        }
        if ready && lag == 0 {
            let since = *self.zero_since.get_or_insert(now);
            return now.duration_since(since) >= Duration::from_secs(2);
        }
        self.zero_since = None;
        false
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

#[cfg(all(test, target_os = "linux", not(target_env = "musl")))]
mod allocator_tests {
    use std::ffi::CStr;

    /// librdkafka calls `malloc` by name; the binary itself must define it (jemalloc's, exported
    /// unprefixed) so those calls do not reach glibc.
    #[test]
    fn c_malloc_resolves_to_the_binary_not_glibc() {
        // SAFETY: Dl_info is a C struct of pointers and an int, for which all zeroes is valid.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only reads the address and fills `info`.
        let found = unsafe { libc::dladdr(libc::malloc as *const libc::c_void, &mut info) };
        assert_ne!(found, 0, "dladdr found no object for malloc");
        // SAFETY: dladdr succeeded, so dli_fname is a NUL-terminated path.
        let object = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
        let exe = std::env::current_exe().expect("current exe");
        assert!(
            !object.contains("libc.so"),
            "malloc comes from {object}, not from {}",
            exe.display()
        );
        let exe = std::fs::canonicalize(exe).expect("canonical exe");
        let object = std::fs::canonicalize(&*object).expect("canonical object");
        assert_eq!(object, exe);
    }
}
