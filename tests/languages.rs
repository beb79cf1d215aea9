//! The same small filter written in Python, JavaScript and C (examples/plugins/) mirrors a topic
//! between real brokers and drops exactly the records it should. Build the components first with
//! `examples/plugins/build-all.sh` (`.ci/run` does).

mod support;

use std::path::PathBuf;

use support::*;

fn example(lang: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/plugins")
        .join(lang)
        .join("filter.wasm");
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
