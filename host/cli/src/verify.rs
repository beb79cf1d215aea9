//! `refract verify`: compares every mirrored partition with its source and prints one line per
//! partition. Exit code 0 when every compared partition matches (also when there was nothing to
//! compare: the message says so), 1 when any differs, 2 on errors (config, plugins, brokers).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use refract_config::{PatternList, Pipeline};
use refract_mirror::verify::{Deleted, Missing, PartitionReport, Progress, Report, Side};

/// `refract verify`.
#[derive(clap::Args)]
pub struct Verify {
    /// The pipeline file.
    #[arg(long)]
    config: PathBuf,
    /// Only topics whose source or remote name fully matches this regex (may be repeated).
    /// Heartbeats topics are compared only when named this way.
    #[arg(long = "topics", value_name = "REGEX")]
    topics: Vec<String>,
    /// Only this flow, written `source->target`.
    #[arg(long, value_name = "SOURCE->TARGET")]
    flow: Option<String>,
}

impl Verify {
    /// Every flow and topic of the pipeline at `config` (what `run --until-caught-up` checks).
    pub fn whole_pipeline(config: PathBuf) -> Self {
        Self {
            config,
            topics: Vec::new(),
            flow: None,
        }
    }

    /// Verifies and prints the result; Ok(false) when some partition differs.
    pub fn run(&self) -> Result<bool> {
        let pipeline = Pipeline::load(&self.config)?;
        let filter = topic_filter(&self.topics)?;
        let runtime = crate::plugin_runtime()?;
        let mut bar = ProgressBar::new();
        let report = refract_mirror::verify::verify(
            &pipeline,
            &runtime,
            filter.as_ref(),
            self.flow.as_deref(),
            &mut |p| bar.update(p),
        );
        bar.clear();
        let report = report?;
        print_report(&report, &self.topics);
        Ok(report.all_match())
    }
}

/// `--topics` as a pattern list (none: every topic); an error names the pattern and the reason.
fn topic_filter(topics: &[String]) -> Result<Option<PatternList>> {
    if topics.is_empty() {
        return Ok(None);
    }
    PatternList::new(topics.to_vec())
        .map(Some)
        .map_err(|(i, e)| anyhow!("--topics {}: invalid regex: {e}", topics[i]))
}

fn print_report(report: &Report, topics: &[String]) {
    for flow in &report.flows {
        println!(
            "flow {}: {} partitions compared",
            flow.flow,
            flow.partitions.len()
        );
        if flow.processors > 0 {
            println!(
                "note: flow {} runs {} processors; records they drop or change show as MISMATCH",
                flow.flow, flow.processors
            );
        }
        if flow.translates {
            println!(
                "note: flow {} translates schema ids (schemas = \"translate\"); framed keys and values differ in bytes 1-4 by design and show as MISMATCH",
                flow.flow
            );
        }
        if !flow.skipped_heartbeats.is_empty() {
            println!(
                "note: heartbeats topics not compared (written continuously; name them with --topics to compare): {}",
                flow.skipped_heartbeats.join(", ")
            );
        }
        for p in &flow.partitions {
            println!("{}", line(p, &flow.target));
            if let Some(note) = deleted_note(p) {
                println!("          {note}");
            }
        }
    }
    let flows = report.flows.len();
    if report.is_empty() {
        let why = if topics.is_empty() {
            "no mirrored topics".to_string()
        } else {
            format!("no mirrored topic matches --topics {}", topics.join(" "))
        };
        println!("nothing to verify: {why} in {flows} flow(s)");
        return;
    }
    let total = report.partitions().count();
    let mismatches = report.mismatches();
    let records: u64 = report.partitions().map(|p| p.source.read).sum();
    let lost: u64 = report
        .partitions()
        .filter_map(|p| p.deleted.as_ref())
        .map(Deleted::lost_count)
        .sum();
    let lost_in = report
        .partitions()
        .filter(|p| p.deleted.as_ref().is_some_and(|d| d.lost.is_some()))
        .count();
    if mismatches == 0 {
        println!("OK: all {total} partitions match ({records} source records, {flows} flow(s))");
    } else if lost > 0 {
        println!(
            "MISMATCH: {mismatches} of {total} partitions differ ({} OK, {flows} flow(s)); {lost} records in {lost_in} partitions were deleted at the source before they were mirrored",
            total - mismatches
        );
    } else {
        println!(
            "MISMATCH: {mismatches} of {total} partitions differ ({} OK, {flows} flow(s))",
            total - mismatches
        );
    }
}

/// What a partition's target holds from before its source's log start, in words, or `None`
/// when there is nothing of the kind.
fn deleted_note(p: &PartitionReport) -> Option<String> {
    let d = p.deleted.as_ref()?;
    let low = p.source.low;
    Some(match d.lost {
        Some((first, last)) => format!(
            "{} records lost: source offsets {first}..={last} were deleted at the source (retention, or a DeleteRecords request) before they were mirrored; the target holds the {} records before them and every record from offset {low} on",
            d.lost_count(),
            d.held
        ),
        None if d.known => format!(
            "the target also holds the {} records before the source's log start ({low}), which the source deleted after they were mirrored",
            d.held
        ),
        None => format!(
            "the target also holds {} records from before the source's log start ({low}); whether the source deleted any before they were mirrored cannot be told (offsets with gaps, or the target deleted records too)",
            d.held
        ),
    })
}

/// `OK        a.orders partition 0 (from orders): source 500 records, offsets 0..500, checksum …; target …`
fn line(p: &PartitionReport, target_cluster: &str) -> String {
    let status = match (p.matches(), &p.deleted) {
        (true, _) => "OK",
        (false, Some(d)) if d.lost.is_some() => "LOST",
        (false, _) => "MISMATCH",
    };
    let target = match &p.target {
        Ok(t) => side(t),
        Err(Missing::Topic) => format!("missing (no topic {} on {target_cluster})", p.remote_topic),
        Err(Missing::Partition(n)) => format!(
            "missing ({} has {n} partitions on {target_cluster})",
            p.remote_topic
        ),
    };
    format!(
        "{status:<8}  {} partition {} (from {}): source {}; target {target}",
        p.remote_topic,
        p.partition,
        p.source_topic,
        side(&p.source)
    )
}

fn side(s: &Side) -> String {
    format!(
        "{} records, offsets {}..{}, checksum {}",
        s.read, s.low, s.high, s.checksum
    )
}

/// Progress on stderr: a bar redrawn in place (at most 5 times a second) on a terminal,
/// otherwise a line at most every 10 s.
struct ProgressBar {
    terminal: bool,
    last: Instant,
    drawn: usize,
}

impl ProgressBar {
    const TERMINAL_EVERY: Duration = Duration::from_millis(200);
    const LOG_EVERY: Duration = Duration::from_secs(10);

    fn new() -> Self {
        Self {
            terminal: std::io::stderr().is_terminal(),
            last: Instant::now(),
            drawn: 0,
        }
    }

    fn update(&mut self, p: Progress) {
        let every = if self.terminal {
            Self::TERMINAL_EVERY
        } else {
            Self::LOG_EVERY
        };
        // The first draw also waits one interval, so short runs print nothing.
        if self.last.elapsed() < every {
            return;
        }
        self.last = Instant::now();
        let line = render(&p, self.terminal);
        let mut err = std::io::stderr().lock();
        if self.terminal {
            // Pad over a longer previous line.
            let pad = self.drawn.saturating_sub(line.len());
            let _ = write!(err, "\r{line}{}", " ".repeat(pad));
            self.drawn = line.len();
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    /// Erases the bar so the report starts on a clean line.
    fn clear(&mut self) {
        if self.terminal && self.drawn > 0 {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{}\r", " ".repeat(self.drawn));
            let _ = err.flush();
            self.drawn = 0;
        }
    }
}

/// Width of the bar drawn on a terminal.
const BAR_WIDTH: usize = 30;

/// One progress report: records read of the total, percent and rate, with a bar on a terminal.
fn render(p: &Progress, terminal: bool) -> String {
    let fraction = if p.total == 0 {
        1.0
    } else {
        (p.read as f64 / p.total as f64).min(1.0)
    };
    let secs = p.elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        p.read as f64 / secs
    } else {
        0.0
    };
    let text = format!(
        "verifying: {}/{} records ({:.1}%), {:.0} records/s",
        p.read,
        p.total,
        fraction * 100.0,
        rate
    );
    if !terminal {
        return text;
    }
    let filled = (fraction * BAR_WIDTH as f64) as usize;
    format!(
        "[{}{}] {text}",
        "#".repeat(filled),
        ".".repeat(BAR_WIDTH - filled)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_topics_pattern_is_named_with_its_reason_on_one_line() {
        let topics = vec!["orders".to_string(), "payments[".to_string()];
        let err = topic_filter(&topics).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("--topics payments[: invalid regex: unclosed character class")
        );
        assert!(topic_filter(&[]).is_ok_and(|f| f.is_none()));
    }

    #[test]
    fn progress_lines() {
        let p = |read, total, ms| Progress {
            read,
            total,
            elapsed: Duration::from_millis(ms),
        };
        assert_eq!(
            render(&p(50, 200, 2000), false),
            "verifying: 50/200 records (25.0%), 25 records/s"
        );
        assert_eq!(
            render(&p(50, 200, 2000), true),
            "[#######.......................] verifying: 50/200 records (25.0%), 25 records/s"
        );
        assert_eq!(
            render(&p(0, 0, 0), true),
            "[##############################] verifying: 0/0 records (100.0%), 0 records/s"
        );
    }
}
