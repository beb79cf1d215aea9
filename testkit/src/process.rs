//! The `refract` binary under test: [`RefractProcess`], a `refract run` process on a pipeline
//! file that logs to a file, and one-shot commands (`refract check`, `refract offsets
//! translate`, ...). Cargo gives the binary's path only to the cli package's integration tests
//! (`env!("CARGO_BIN_EXE_refract")`), so the caller names it, once, in a [`Build`].

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::broker::spawn_owned;
use crate::pipeline::write_pipeline;
use crate::wait::wait_or_explain;

/// What cargo built for the caller's tests: the `refract` binary and the guest plugins. A test
/// harness implements it on a type of its own and names [`RefractProcess`] of that type, so
/// every helper that runs refract finds the binary without being handed its path each time.
pub trait Build {
    /// The path of the `refract` binary (`env!("CARGO_BIN_EXE_refract")` in the cli package's
    /// integration tests).
    fn refract_bin() -> &'static str;
    /// The folder holding the guest plugins built from `plugins/` (`refract_plugin::guest_dir()`).
    fn guest_dir() -> PathBuf;
}

/// Offsets per (topic, partition).
pub type Offsets = BTreeMap<(String, i32), i64>;

/// The `TOPIC PARTITION OFFSET` lines `refract offsets translate` (and the MirrorMaker 2 Java
/// peer of the interop tests) print.
pub fn parse_offsets(text: &str) -> Offsets {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("TOPIC"))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((
                (f.next()?.to_string(), f.next()?.parse().ok()?),
                f.next()?.parse().ok()?,
            ))
        })
        .collect()
}

/// A `refract run` process of build `B` started from a pipeline text, logging to `refract.log`
/// beside it; killed (SIGKILL) when dropped. Its associated functions run `B`'s binary in other
/// ways ([`RefractProcess::output`], [`RefractProcess::translate`]).
pub struct RefractProcess<B: Build> {
    child: Option<Child>,
    /// The temp folder holding the pipeline and the log.
    pub dir: TempDir,
    /// The pipeline file.
    pub pipeline: PathBuf,
    env: Vec<(String, String)>,
    build: PhantomData<fn() -> B>,
}

impl<B: Build> RefractProcess<B> {
    /// Starts `refract run` on `pipeline` with extra `args`.
    pub fn start(pipeline: &str, args: &[&str]) -> Self {
        Self::start_env(pipeline, args, &[])
    }

    /// Starts `refract run` on `pipeline` with extra `args` and environment variables. `RUST_LOG`
    /// is `REFRACT_TEST_LOG`, else `info,refract_mirror=debug`.
    pub fn start_env(pipeline: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write_pipeline(dir.path(), pipeline);
        let mut r = Self {
            child: None,
            dir,
            pipeline: path,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            build: PhantomData,
        };
        r.restart(args);
        r
    }

    /// The path of the refract binary ([`Build::refract_bin`]).
    pub fn bin() -> &'static str {
        B::refract_bin()
    }

    /// The guest plugin `name` built from `plugins/` (in [`Build::guest_dir`]).
    pub fn guest(name: &str) -> PathBuf {
        B::guest_dir().join(name)
    }

    /// Runs the refract binary with `args` to completion (stdin empty) and returns what it did.
    pub fn output(args: &[&str]) -> Output {
        Self::output_with_env(args, &[])
    }

    /// [`Self::output`] with extra environment variables (`RUST_LOG`, say).
    pub fn output_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(B::refract_bin())
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("run refract")
    }

    /// `refract offsets translate` on `config`: where `group` resumes on `to` after failing over
    /// from `from`; empty when the command fails (nothing to translate yet).
    pub fn translate(config: &Path, group: &str, from: &str, to: &str) -> Offsets {
        Self::translate_lines(config, group, from, to)
            .into_iter()
            .map(|(tp, (offset, _))| (tp, offset))
            .collect()
    }

    /// `refract offsets translate` for `group` from `from` to `to`: per (remote topic, partition)
    /// the offset and its TRANSLATION column (`exact`, `mm2`, `mm2: <reason>`); empty when the
    /// command fails (no checkpoints yet).
    pub fn translate_lines(
        config: &Path,
        group: &str,
        from: &str,
        to: &str,
    ) -> BTreeMap<(String, i32), (i64, String)> {
        let config = config.to_str().expect("path");
        let out = Self::output(&[
            "offsets",
            "translate",
            "--config",
            config,
            "--group",
            group,
            "--from",
            from,
            "--to",
            to,
        ]);
        if !out.status.success() {
            return BTreeMap::new();
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("TOPIC"))
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let topic = f.next()?.to_string();
                let partition = f.next()?.parse().ok()?;
                let offset = f.next()?.parse().ok()?;
                let how = f.collect::<Vec<_>>().join(" ");
                Some(((topic, partition), (offset, how)))
            })
            .collect()
    }

    /// Starts the process again on the same pipeline, appending to the same log.
    pub fn restart(&mut self, args: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("refract.log"))
            .expect("log");
        let mut cmd = Command::new(B::refract_bin());
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

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) to the process.
    pub fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let sent = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(pid.to_string())
                .status()
                .expect("kill");
            assert!(sent.success(), "kill -{signal} {pid}");
        }
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
                .find_map(|l| {
                    l.split("on http://")
                        .nth(1)
                        .or_else(|| l.split("on https://").nth(1))
                })
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

impl<B: Build> Drop for RefractProcess<B> {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::parse_offsets;

    #[test]
    fn offsets_are_read_from_the_table_without_its_header_and_comments() {
        let text = "# group g from a to b\nTOPIC PARTITION OFFSET TRANSLATION\na.orders 0 42 exact\na.orders 1 7 mm2: behind\nnot a line\n";
        let got = parse_offsets(text);
        assert_eq!(got.len(), 2);
        assert_eq!(got[&("a.orders".to_string(), 0)], 42);
        assert_eq!(got[&("a.orders".to_string(), 1)], 7);
    }
}
