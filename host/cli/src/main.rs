//! `refract`: mirror Kafka topics between clusters, naming them with WebAssembly policies.

mod demo;
mod endpoints;
mod mm2_cmds;
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
use refract_plugin::{PluginLimits, PluginRuntime};

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
        /// The pipeline file (TOML).
        pipeline: PathBuf,
        /// Run only the flows whose target is one of these clusters (MirrorMaker 2's dedicated mode).
        #[arg(long, num_args = 1..)]
        clusters: Vec<String>,
    },
    /// Validate a pipeline and load every plugin it names; exits non-zero on the first error.
    Check {
        /// The pipeline file (TOML).
        pipeline: PathBuf,
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
    Test(plugin_test::PluginTest),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    refract_telemetry::init_logging_as("info", cli.log_format);
    let result = match cli.command {
        Command::Run { pipeline, clusters } => run(&pipeline, &clusters),
        Command::Check { pipeline } => check(&pipeline),
        Command::Demo => demo::run(),
        Command::Plugin {
            command: PluginCommand::Test(test),
        } => test.run(),
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

fn load(path: &Path, targets: &[String]) -> Result<(Pipeline, Vec<refract_mirror::PreparedFlow>)> {
    let pipeline = Pipeline::load(path)?;
    for warning in &pipeline.warnings {
        tracing::warn!("{warning}");
    }
    let runtime = PluginRuntime::new(PluginLimits::default())?;
    let prepared = refract_mirror::prepare(&pipeline, targets, &runtime)?;
    Ok((pipeline, prepared))
}

fn check(path: &Path) -> Result<()> {
    let (pipeline, prepared) = load(path, &[])?;
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
    Ok(())
}

fn run(path: &Path, targets: &[String]) -> Result<()> {
    let pipeline = Pipeline::load(path)?;
    for warning in &pipeline.warnings {
        tracing::warn!("{warning}");
    }
    let runtime = PluginRuntime::new(PluginLimits::default())?;
    let prepared = refract_mirror::prepare(&pipeline, targets, &runtime)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).context("installing signal handlers")?;
    }
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .context("installing the SIGHUP handler")?;
    let mut mirror = Mirror::start(&pipeline, prepared, stop.clone())?;
    mirror.enable_reload(path, targets, runtime);
    let mirror = Arc::new(mirror);
    let _server = match pipeline.metrics_listen {
        Some(addr) => {
            let server = refract_telemetry::http::serve(
                &addr.to_string(),
                Arc::new(endpoints::MirrorEndpoints(mirror.clone())),
            )
            .with_context(|| format!("{}: metrics.listen", pipeline.file.display()))?;
            tracing::info!(
                "serving /metrics, /health, /status and POST /reload on http://{}",
                server.local_addr()
            );
            Some(server)
        }
        None => None,
    };
    // Like a Connect worker with a failed task, the process keeps running when a flow halts
    // (a processor with on_error = "stop" failed): the halt is logged, the other flows go on,
    // and a restart with a fixed plugin resumes the halted flow from its last commit.
    // The pipeline file and every plugin file are watched: a change (or SIGHUP) reloads.
    let mut stamps = file_stamps(&mirror.watched_files());
    let mut next_check = std::time::Instant::now() + WATCH_INTERVAL;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
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
    tracing::info!("shutting down");
    mirror.stop();
    Ok(())
}
