//! Schema-id translation to a target registry reached over TLS that requires a client
//! certificate (issue 40, "TLS CA/client certificate"): the registry's `ca`, `cert` and `key`
//! against a real Apicurio Registry serving HTTPS behind the kit's mutual-TLS gate
//! ([`Registry::start_tls`]), and `check --connect` with and without the client certificate.
//! One test: one TLS registry start and one refract run.

use std::time::Instant;

use crate::schemas::{avro_string, framed, id_of, register_unrelated, ORDER_V1, ORDER_V2};
use crate::support::tls::Ca;
use crate::support::*;

/// The target alias: the flow's internal topics and ids are named by it, apart from other
/// modules' flows towards broker `b`.
const TARGET: &str = "tlsreg";

/// Everything a one-shot `refract` command printed.
fn printed(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn translation_to_a_registry_that_requires_a_client_certificate() {
    let ca = Ca::new("refract registry CA");
    let server = ca.issue("registry", "registry", &["127.0.0.1", "localhost"], false);
    let client = ca.issue("mirror-registry", "mirror", &[], false);
    let (ra, rb, tls_start) = std::thread::scope(|s| {
        let plain = s.spawn(Registry::start);
        let started = Instant::now();
        let rb = Registry::start_tls(&ca, &server, &client);
        let tls_start = started.elapsed();
        (plain.join().expect("the source registry"), rb, tls_start)
    });
    eprintln!("the TLS registry answered through its gate {tls_start:?} after its start");
    assert!(rb.url().starts_with("https://127.0.0.1:"), "{}", rb.url());
    assert!(rb.url().ends_with("/apis/ccompat/v7"), "{}", rb.url());
    // Other schemas first on the target, so the same schema gets another id there.
    register_unrelated(&rb, "F", 5);

    let (a, b) = (Broker::shared("a"), Broker::shared("b"));
    let topic = unique("tls-orders");
    a.create_topic(&topic, 1);
    let v1 = ra.register(&format!("{topic}-value"), ORDER_V1, "AVRO", &[]);
    let v2 = ra.register(&format!("{topic}-value"), ORDER_V2, "AVRO", &[]);
    let records: Vec<TestRecord> = (0..20)
        .map(|i| TestRecord {
            partition: 0,
            key: Some(format!("k{i}").into_bytes()),
            value: Some(framed(
                if i % 2 == 0 { v1 } else { v2 },
                &avro_string(&format!("o{i}")),
            )),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect();
    a.produce(&topic, &records);

    let flows = flow(
        "a",
        TARGET,
        &format!("topics = [\"{topic}\"]\nschemas = \"translate\"\nschema_fields = [\"value\"]\n"),
    );
    let source_registry = format!(
        "[clusters.a.schema_registry]\nurl = \"{}\"\ntimeout = \"2s\"\n",
        ra.url()
    );
    let target_registry = format!(
        "[clusters.{TARGET}.schema_registry]\nurl = \"{}\"\nca = \"{}\"\ntimeout = \"2s\"\n",
        rb.url(),
        path_str(&ca.ca_pem())
    );
    let client_cert = format!(
        "cert = \"{}\"\nkey = \"{}\"\n",
        path_str(&client.cert),
        path_str(&client.key)
    );
    let pipeline_text = |with_client_cert: bool| {
        format!(
            "[metrics]\nlisten = \"127.0.0.1:0\"\n\n{}\n{source_registry}{target_registry}{}",
            pipeline(&[("a", a), (TARGET, b)], &flows),
            if with_client_cert { &client_cert } else { "" }
        )
    };
    let key_pem = std::fs::read_to_string(&client.key).expect("the client key");
    // A line of the key's base64 body, which no output may hold.
    let key_line = key_pem
        .lines()
        .find(|l| !l.starts_with("-----") && l.len() > 20)
        .expect("a PEM body line")
        .to_string();
    let assert_no_key = |shown: &str| {
        assert!(
            !shown.contains(&key_line) && !shown.contains("PRIVATE KEY"),
            "the client key is shown:\n{shown}"
        );
    };

    let mut refract = Refract::start(&pipeline_text(true), &[]);
    let remote = format!("a.{topic}");
    refract.wait("the 20 records on b", || {
        b.counts(&remote).iter().sum::<i64>() == 20
    });
    let mirrored = b.read_all(&remote).remove(0);
    assert_eq!(mirrored.len(), records.len());
    for (from, to) in records.iter().zip(&mirrored) {
        assert_eq!(from.key, to.key, "out of order");
        let (f, t) = (
            from.value.as_deref().expect("a value"),
            to.value.as_deref().expect("a mirrored value"),
        );
        assert_eq!(f[5..], t[5..], "payload bytes changed");
        let (source_id, target_id) = (id_of(f), id_of(t));
        let want = ra.schema_by_id(source_id).expect("the source schema");
        let got = rb.schema_by_id(target_id).unwrap_or_else(|| {
            panic!("target id {target_id} (source {source_id}) is unknown to the TLS registry")
        });
        assert_eq!(got, want, "target id {target_id} names another schema");
    }
    assert_ne!(
        id_of(mirrored[0].value.as_deref().expect("a value")),
        v1,
        "the ids are the same on both registries: the test proves nothing"
    );
    let subject = format!("{remote}-value");
    assert!(rb.subjects().contains(&subject), "{:?}", rb.subjects());
    assert_eq!(rb.versions(&subject).len(), 2);
    assert_eq!(refract.stop(), Some(0), "{}", refract.log());
    assert_no_key(&refract.log());

    // `check --connect`: the registry answers with the client certificate…
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_pipeline(dir.path(), &pipeline_text(true));
    let out = Refract::output(&["check", "--connect", &path_str(&path)]);
    let shown = printed(&out);
    assert_no_key(&shown);
    let yes = shown.lines().find(|l| {
        l.trim_start().starts_with("yes")
            && l.contains(&format!("cluster {TARGET}'s schema registry {}", rb.url()))
            && l.contains("answers")
    });
    assert!(yes.is_some(), "{shown}");
    assert_eq!(out.status.code(), Some(0), "{shown}");

    // …and refuses the handshake without it: the check fails naming the registry.
    let path = write_pipeline(dir.path(), &pipeline_text(false));
    let out = Refract::output(&["check", "--connect", &path_str(&path)]);
    let shown = printed(&out);
    assert_no_key(&shown);
    assert_ne!(out.status.code(), Some(0), "{shown}");
    // TLS 1.3: the client's side of the handshake ends before the server checks the
    // certificate, so the refusal is the server's alert at the first read — or, when the
    // server has closed the connection by then, a failed write or an early end of the stream
    // (measured: 1 run in 5). Either way the line points at the client certificate.
    let no = shown.lines().find(|l| {
        l.trim_start().starts_with("no")
            && l.contains(&format!("cluster {TARGET}'s schema registry {}", rb.url()))
            && l.contains("client certificate")
    });
    assert!(no.is_some(), "{shown}");
    assert!(!shown.contains("Network Error: Network Error"), "{shown}");
    // The gate refused it for the missing certificate, not for something else.
    assert!(
        rb.log().contains("peer did not return a certificate"),
        "{}",
        rb.log()
    );
}
