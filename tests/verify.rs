//! `refract verify` against real Apache Kafka brokers: a finished mirror verifies OK, one extra record
//! on the target is reported for exactly its partition, and filters and flow names select what
//! is compared.

use std::process::Output;

use crate::support::*;

/// Fast discovery so the mirror starts within a second; heartbeats stay on (verify leaves their
/// topics out unless named).
const FLOW: &str = "[[flow]]\nsource = \"a\"\ntarget = \"b\"\nrefresh_topics_interval = \"1s\"\ncommit_interval = \"500ms\"\nheartbeat_interval = \"500ms\"\nreplication_factor = 1\n";

/// `refract verify --config <pipeline>` with `extra` arguments.
fn verify(pipeline: &std::path::Path, extra: &[&str]) -> Output {
    let path = pipeline.to_str().expect("utf-8 path");
    let mut args = vec!["verify", "--config", path];
    args.extend_from_slice(extra);
    Refract::output(&args)
}

/// The partition lines of a verify run: (status, remote topic, partition, whole line).
fn partition_lines(out: &Output) -> Vec<(String, String, i32, String)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("OK ") || l.starts_with("MISMATCH "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f[2], "partition", "line format: {l}");
            (
                f[0].to_string(),
                f[1].to_string(),
                f[3].parse().expect("partition number"),
                l.to_string(),
            )
        })
        .collect()
}

fn explain(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn verify_finds_exactly_the_partition_that_differs() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("orders");
    a.create_topic(&topic, 2);
    // Null keys, tombstones, an empty value, headers with a null value, explicit timestamps.
    let records = sample_records(&topic, 2, 300);
    a.produce(&topic, &records);
    let remote = format!("a.{topic}");

    let mut refract = Refract::start(&pipeline(&[("a", &a), ("b", &b)], FLOW), &[]);
    refract.wait("the mirror to copy every record", || {
        b.counts(&remote) == vec![150, 150]
    });
    assert_eq!(refract.stop(), Some(0), "refract stops cleanly");
    let config = refract.pipeline.clone();

    // A finished mirror verifies: every partition OK with equal counts and checksums.
    let out = verify(&config, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    let lines = partition_lines(&out);
    let got: Vec<(&str, &str, i32)> = lines
        .iter()
        .map(|(s, t, p, _)| (s.as_str(), t.as_str(), *p))
        .collect();
    assert_eq!(
        got,
        vec![("OK", remote.as_str(), 0), ("OK", remote.as_str(), 1)],
        "{}",
        explain(&out)
    );
    for (_, _, p, line) in &lines {
        assert!(
            line.contains(&format!("(from {topic})")),
            "partition {p} names its source topic: {line}"
        );
        assert_eq!(
            line.matches("150 records, offsets 0..150, checksum")
                .count(),
            2,
            "partition {p}: source and target both 150 records: {line}"
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("OK: all 2 partitions match (300 source records"),
        "{}",
        explain(&out)
    );
    assert!(
        stdout.contains("heartbeats topics not compared"),
        "the heartbeats topic is left out and said so: {}",
        explain(&out)
    );

    // One extra record straight onto the remote topic's partition 1.
    b.produce(
        &remote,
        &[TestRecord {
            partition: 1,
            key: Some(b"intruder".to_vec()),
            value: Some(b"not from a".to_vec()),
            headers: vec![],
            timestamp: 1_700_000_000_000,
        }],
    );
    let out = verify(&config, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    let lines = partition_lines(&out);
    let got: Vec<(&str, &str, i32)> = lines
        .iter()
        .map(|(s, t, p, _)| (s.as_str(), t.as_str(), *p))
        .collect();
    assert_eq!(
        got,
        vec![("OK", remote.as_str(), 0), ("MISMATCH", remote.as_str(), 1)],
        "{}",
        explain(&out)
    );
    let mismatch = &lines[1].3;
    assert!(
        mismatch.contains("source 150 records, offsets 0..150")
            && mismatch.contains("target 151 records, offsets 0..151"),
        "counts of both sides: {mismatch}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("MISMATCH: 1 of 2 partitions differ"),
        "{}",
        explain(&out)
    );

    // The same through the topic filter (remote name) and the flow name.
    let out = verify(
        &config,
        &["--topics", &regex_escape(&remote), "--flow", "a->b"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert_eq!(partition_lines(&out).len(), 2, "{}", explain(&out));

    // A filter that matches nothing: nothing to verify, which is not a failure.
    let out = verify(&config, &["--topics", "no-such-topic-.*"]);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    assert!(partition_lines(&out).is_empty(), "{}", explain(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("nothing to verify: no mirrored topic matches --topics no-such-topic-.*"),
        "{}",
        explain(&out)
    );

    // Errors exit 2 and say what is wrong.
    let out = verify(&config, &["--flow", "b->a"]);
    assert_eq!(out.status.code(), Some(2), "{}", explain(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no enabled flow `b->a` (enabled flows: a->b)"),
        "{}",
        explain(&out)
    );
    let out = verify(&config, &["--topics", "("]);
    assert_eq!(out.status.code(), Some(2), "{}", explain(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--topics (: invalid regex"),
        "{}",
        explain(&out)
    );
}

/// Escapes regex metacharacters (topic names here contain only `.` and `-`).
fn regex_escape(s: &str) -> String {
    s.replace('.', "\\.")
}
