//! A `refract run` process on a pipeline file, logging to a file, for tests that mirror between
//! real brokers. The caller names the binary: `env!("CARGO_BIN_EXE_refract")` exists only when
//! cargo compiles the cli package's integration tests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::broker::spawn_owned;
use crate::wait::wait_or_explain;

/// Writes `pipeline` as `pipeline.toml` into `dir` and returns its path.
pub fn write_pipeline(dir: &Path, pipeline: &str) -> PathBuf {
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, pipeline).expect("write pipeline");
    path
}

/// A `refract run` process started from a pipeline text, logging to `refract.log` beside it.
/// Killed (SIGKILL) when dropped.
pub struct RefractProcess {
    bin: PathBuf,
    child: Option<Child>,
    /// The temp folder holding the pipeline and the log.
    pub dir: TempDir,
    /// The pipeline file.
    pub pipeline: PathBuf,
    env: Vec<(String, String)>,
}

impl RefractProcess {
    /// Starts `bin run` on `pipeline` with extra `args` and environment variables. `RUST_LOG`
    /// is `REFRACT_TEST_LOG`, else `info,refract_mirror=debug`.
    pub fn start(
        bin: impl Into<PathBuf>,
        pipeline: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write_pipeline(dir.path(), pipeline);
        let mut r = Self {
            bin: bin.into(),
            child: None,
            dir,
            pipeline: path,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        r.restart(args);
        r
    }

    /// Starts the process again on the same pipeline, appending to the same log.
    pub fn restart(&mut self, args: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("refract.log"))
            .expect("log");
        let mut cmd = Command::new(&self.bin);
        cmd.arg("run")
            .arg(&self.pipeline)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(
                "RUST_LOG",
                std::env::var("REFRACT_TEST_LOG")
                    .unwrap_or_else(|_| "info,refract_mirror=debug".to_string()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        // Owned by the test binary: never left running when a test aborts.
        let child = spawn_owned(cmd).expect("start refract");
        self.child = Some(child);
    }

    /// Kills the process with SIGKILL (no chance to flush or commit).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the process with SIGTERM and returns its exit status.
    pub fn stop(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        let status = c.wait().ok()?;
        status.code()
    }

    /// Sends SIGTERM and waits up to `limit` for the process to exit: (how long it took, its
    /// exit code). A process still running after `limit` is killed and the test fails.
    pub fn terminate_within(&mut self, limit: Duration) -> (Duration, Option<i32>) {
        let mut c = self.child.take().expect("refract runs");
        let started = Instant::now();
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        loop {
            if let Ok(Some(status)) = c.try_wait() {
                return (started.elapsed(), status.code());
            }
            if started.elapsed() > limit {
                let _ = c.kill();
                let _ = c.wait();
                panic!(
                    "refract did not exit within {limit:?} of SIGTERM; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The duplicates refract said it re-sends after unclean stops (its "resuming after an
    /// unclean stop: N" lines, summed).
    pub fn counted_duplicates(&self) -> usize {
        self.log()
            .lines()
            .filter_map(|l| l.split("resuming after an unclean stop: ").nth(1))
            .filter_map(|rest| rest.split_whitespace().next()?.parse::<usize>().ok())
            .sum()
    }

    /// The most memory the process has held resident so far, in bytes (`VmHWM` of
    /// `/proc/<pid>/status`).
    pub fn peak_rss(&self) -> u64 {
        let pid = self.child.as_ref().expect("refract runs").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
            .expect("VmHWM in /proc/<pid>/status")
            * 1024
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits for `cond`, showing this process's log if it never holds.
    pub fn wait(&self, what: &str, cond: impl FnMut() -> bool) {
        wait_or_explain(what, cond, || format!("refract log:\n{}", self.log()));
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("refract.log")).unwrap_or_default()
    }

    /// The address its metrics endpoint bound (`[metrics] listen = "127.0.0.1:0"`), from its log.
    pub fn metrics_addr(&self) -> String {
        let mut addr = String::new();
        self.wait("the metrics endpoint's address in the log", || {
            let log = self.log();
            let found = log
                .lines()
                .find_map(|l| l.split("on http://").nth(1))
                .map(|rest| rest.split_whitespace().next().unwrap_or("").to_string());
            addr = found.unwrap_or_default();
            !addr.is_empty()
        });
        addr
    }

    /// How many lines of its log contain `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        self.log().lines().filter(|l| l.contains(needle)).count()
    }

    /// Waits until `needle` appears in `n` more log lines than it does now: a positive event
    /// (another discovery round, another sync) to wait for before checking that something did
    /// *not* happen.
    pub fn wait_more_logs(&self, needle: &str, n: usize) {
        let before = self.log_count(needle);
        self.wait(&format!("{n} more log lines with {needle:?}"), || {
            self.log_count(needle) >= before + n
        });
    }
}

impl Drop for RefractProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
