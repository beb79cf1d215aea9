//! `refract`: mirror Kafka topics between clusters, naming them with WebAssembly policies.

mod demo;
mod mm2_cmds;
mod plugin_test;

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
    refract_telemetry::init_logging("info");
    let cli = Cli::parse();
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
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
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
    let (pipeline, prepared) = load(path, targets)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).context("installing signal handlers")?;
    }
    let mirror = Mirror::start(&pipeline, prepared, stop.clone())?;
    // Like a Connect worker with a failed task, the process keeps running when a flow halts
    // (a processor with on_error = "stop" failed): the halt is logged, the other flows go on,
    // and a restart with a fixed plugin resumes the halted flow from its last commit.
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
    }
    tracing::info!("shutting down");
    mirror.stop();
    Ok(())
}
