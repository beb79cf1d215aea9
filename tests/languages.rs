//! The example plugins in every language (examples/plugins/): the same small filter in Python,
//! JavaScript and C mirrors a topic between real brokers and drops exactly the records it should,
//! and the same "SameName with renames" policy in Python, JavaScript, C and Go names the remote
//! topics of a real flow and answers every case of examples/plugins/policy-cases.json. Build the
//! components first with `examples/plugins/build-all.sh` (`.ci/run` does).

use std::path::PathBuf;

use crate::support::*;

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

/// A hot swap to the Python filter (a component that takes seconds to compile) asked for with
/// `POST /reload` and the pipeline's reload token, while a client probes `/health` every 100 ms:
/// every probe answers within 500 ms, the reload needs the token, and a page of another origin
/// is refused.
#[test]
fn python_hot_swap_keeps_probes_answering() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    let a = Broker::shared("a");
    let b = Broker::shared("b");
    let topic = unique("swap-python");
    a.create_topic(&topic, 1);
    let dir = tempfile::tempdir().expect("tmp");
    let plugin = dir.path().join("filter.wasm");
    std::fs::copy(example("javascript"), &plugin).expect("plugin");
    let token = dir.path().join("reload-token");
    std::fs::write(&token, "0f1e2d3c4b5a69788796a5b4c3d2e1f0\n").expect("token");
    let flows = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\nreload_token = \"${{file:{}}}\"\n{}",
        token.display(),
        pipeline(
            &[("a", a), ("b", b)],
            &format!(
                "[[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topic}\"]\nrefresh_topics_interval = \"1s\"\nprocessors = [{{ plugin = \"{}\", config = {{ header = \"env\", equals = \"test\" }} }}]\n",
                plugin.display()
            )
        )
    );
    let mut refract = Refract::start(&flows, &[]);
    let addr = refract.metrics_addr();
    let remote = format!("a.{topic}");
    a.produce(&topic, &sample_records(&topic, 1, 10));
    refract.wait("records through the JavaScript filter", || {
        b.counts(&remote).iter().sum::<i64>() == 10
    });
    // Refused before anything is reloaded.
    assert_eq!(http(&addr, "POST", "/reload").0, 401);
    let auth = "Authorization: Bearer 0f1e2d3c4b5a69788796a5b4c3d2e1f0";
    assert_eq!(
        http_with(
            &addr,
            "POST",
            "/reload",
            &[auth, "Origin: http://evil.example"]
        )
        .0,
        403
    );
    // Probes every 100 ms from here on.
    let stop = Arc::new(AtomicBool::new(false));
    let probes: Arc<Mutex<Vec<(u16, Duration)>>> = Arc::default();
    let prober = {
        let (stop, probes, addr) = (stop.clone(), probes.clone(), addr.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let code = http(&addr, "GET", "/health").0;
                probes
                    .lock()
                    .expect("probes")
                    .push((code, started.elapsed()));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let python = example("python");
    let tmp = plugin.with_extension("tmp");
    std::fs::copy(&python, &tmp).expect("copy");
    std::fs::rename(&tmp, &plugin).expect("rename");
    let started = Instant::now();
    let (code, reply) = http_with(&addr, "POST", "/reload", &[auth]);
    let reload_took = started.elapsed();
    // The file watcher may have started the same reload first: then this one finds nothing
    // left to change.
    assert_eq!(code, 200, "{reply}");
    assert!(
        reply.contains("new plugins for a->b") || reply.contains("nothing changed"),
        "{reply}"
    );
    refract.wait("the Python plugin swapped in", || {
        refract.log().contains("swapped in plugins")
    });
    // Let a few more probes run after the swap, then stop.
    let seen = probes.lock().expect("probes").len();
    refract.wait("probes after the swap", || {
        probes.lock().expect("probes").len() >= seen + 3
    });
    stop.store(true, Ordering::SeqCst);
    prober.join().expect("prober");
    let probes = probes.lock().expect("probes").clone();
    let slowest = probes.iter().map(|(_, d)| *d).max().unwrap_or_default();
    eprintln!(
        "POST /reload took {reload_took:?}; {} probes, slowest {slowest:?}",
        probes.len()
    );
    assert!(
        probes
            .iter()
            .all(|(code, took)| *code == 200 && *took < Duration::from_millis(500)),
        "{probes:?}"
    );
    assert!(probes.len() >= 3, "{probes:?}");
    // The Python filter works like the JavaScript one.
    a.produce(&topic, &sample_records(&topic, 1, 10));
    refract.wait("records through the Python filter", || {
        b.counts(&remote).iter().sum::<i64>() == 20
    });
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
