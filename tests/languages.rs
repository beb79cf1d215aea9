//! The example plugins in every language (examples/plugins/): the same small filter in Python,
//! JavaScript and C mirrors a topic between real brokers and drops exactly the records it should,
//! and the same "SameName with renames" policy in Python, JavaScript, C and Go names the remote
//! topics of a real flow and answers every case of examples/plugins/policy-cases.json. Build the
//! components first with `examples/plugins/build-all.sh` (`.ci/run` does).

mod support;

use std::path::PathBuf;

use support::*;

fn example(lang: &str) -> PathBuf {
    example_file(lang, "filter.wasm")
}

fn example_file(lang: &str, file: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/plugins")
        .join(lang)
        .join(file);
    assert!(
        path.exists(),
        "{} is missing: run examples/plugins/build-all.sh",
        path.display()
    );
    path.canonicalize().expect("canonical path")
}

fn drops_test_traffic(lang: &str) {
    // Shared by this binary's tests: each flow selects only its own topic.
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique(lang);
    a.create_topic(&topic, 2);
    let records: Vec<TestRecord> = (0..30)
        .map(|i| TestRecord {
            partition: i % 2,
            key: Some(format!("k{i}").into_bytes()),
            value: Some(format!("v{i}").into_bytes()),
            headers: match i % 3 {
                0 => vec![("env".to_string(), Some(b"test".to_vec()))],
                1 => vec![("env".to_string(), Some(b"prod".to_vec()))],
                _ => vec![],
            },
            timestamp: 1_650_000_000_000 + i as i64,
        })
        .collect();
    a.produce(&topic, &records);
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nprocessors = [{{ plugin = \"{}\", config = {{ header = \"env\", equals = \"test\" }} }}]\n",
        example(lang).display()
    );
    let mut refract = Refract::start(&pipeline(&[("a", a), ("b", b)], &flows), &[]);
    let remote = format!("a.{topic}");
    refract.wait("20 records on the target", || {
        b.counts(&remote).iter().sum::<i64>() == 20
    });
    let kept: Vec<TestRecord> = records
        .iter()
        .filter(|r| r.headers.first().and_then(|h| h.1.as_deref()) != Some(b"test"))
        .cloned()
        .collect();
    assert_eq!(b.read_all(&remote), by_partition(&kept, 2));
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn python_filter() {
    drops_test_traffic("python");
}

#[test]
fn javascript_filter() {
    drops_test_traffic("javascript");
}

#[test]
fn c_filter() {
    drops_test_traffic("c");
}

/// The policy keeps topic names, renames the one its config names, and the records arrive intact.
fn names_topics_as_configured(lang: &str) {
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let base = unique(&format!("policy-{lang}"));
    let renamed = format!("{base}-v1");
    let kept = format!("{base}-payments");
    a.create_topic(&renamed, 2);
    a.create_topic(&kept, 1);
    let first = sample_records("r", 2, 40);
    let second = sample_records("k", 1, 25);
    a.produce(&renamed, &first);
    a.produce(&kept, &second);
    let flows = format!(
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{renamed}\", \"{kept}\"]\npolicy = {{ plugin = \"{}\", config = {{ renames = {{ \"{renamed}\" = \"{base}\" }} }} }}\n",
        example_file(lang, "policy.wasm").display()
    );
    let mut refract = Refract::start(&pipeline(&[("a", a), ("b", b)], &flows), &[]);
    refract.wait("both topics mirrored under the policy's names", || {
        b.counts(&base).iter().sum::<i64>() == 40 && b.counts(&kept).iter().sum::<i64>() == 25
    });
    assert_eq!(b.read_all(&base), by_partition(&first, 2));
    assert_eq!(b.read_all(&kept), by_partition(&second, 1));
    let topics = b.topics();
    assert!(
        !topics.contains_key(&renamed),
        "{renamed} must not exist on b"
    );
    assert!(
        !topics.contains_key(&format!("a.{kept}")),
        "no a.{kept} on b"
    );
    assert_eq!(refract.stop(), Some(0));
}

#[test]
fn python_policy() {
    names_topics_as_configured("python");
}

#[test]
fn javascript_policy() {
    names_topics_as_configured("javascript");
}

#[test]
fn c_policy() {
    names_topics_as_configured("c");
}

#[test]
fn go_policy() {
    names_topics_as_configured("go");
}

/// Every language's policy gives every answer of policy-cases.json through `refract plugin test`
/// (the checker also runs each invalid config and compares the error).
#[test]
fn every_policy_example_answers_the_shared_cases() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/plugins");
    let policies: Vec<String> = ["python", "javascript", "c", "go"]
        .iter()
        .map(|lang| example_file(lang, "policy.wasm").display().to_string())
        .collect();
    let out = std::process::Command::new("python3")
        .arg(dir.join("check-policies.py"))
        .args(["--refract", Refract::bin()])
        .args(&policies)
        .output()
        .expect("run check-policies.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    for policy in &policies {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("ok") && l.ends_with(policy.as_str())),
            "{policy} in {stdout}"
        );
    }
}
