//! Integration tests: `refract check --connect` against real brokers: every way of connecting
//! that works names its principal, every way that fails names the cluster and the cause, and on
//! brokers with an authorizer the documented minimal ACL set is exactly what a flow needs.

use std::process::Output;
use std::time::Instant;

use crate::support::tls::{p12_path, Ca, P12_PASSWORD};
use crate::support::*;

const ACL_TOOL: &str = "org.apache.kafka.tools.AclCommand";

/// Broker settings of a cluster that denies whatever no ACL allows (the admin and the harness's
/// own anonymous listener are super users).
const GUARDED: [(&str, &str); 3] = [
    (
        "authorizer.class.name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    ),
    ("super.users", "User:ANONYMOUS;User:admin"),
    ("allow.everyone.if.no.acl.found", "false"),
];

/// The minimal ACL set of the book's guide (`docs/src/guides/check-connect.md`, "Permissions:
/// the minimal ACL set"): per `kafka-acls` command, the cluster (`a` for `kafka-a:…`) and the
/// arguments after `--allow-principal User:mirror`.
fn documented_acls() -> Vec<(String, Vec<String>)> {
    let page = std::fs::read_to_string(guide_path()).expect("read the check --connect guide");
    let section = page
        .split_once("## Permissions: the minimal ACL set")
        .expect("the guide's minimal ACL section")
        .1;
    let block = section
        .split_once("```text\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("the section's command block")
        .0;
    // One command per line: continuation lines joined, comments dropped.
    let joined = block.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let command = line.split(" # ").next().unwrap_or_default().trim();
        if command.is_empty() || command.starts_with('#') {
            continue;
        }
        let words: Vec<String> = command
            .split_whitespace()
            .map(|w| w.trim_matches('\'').to_string())
            .collect();
        let head = ["kafka-acls", "--bootstrap-server"];
        assert_eq!(words[..2], head, "{command}");
        assert_eq!(
            words[3..6],
            ["--add", "--allow-principal", "User:mirror"],
            "{command}"
        );
        let cluster = words[2]
            .strip_prefix("kafka-")
            .and_then(|r| r.split(':').next())
            .expect("kafka-<alias>:<port>")
            .to_string();
        out.push((cluster, words[6..].to_vec()));
    }
    out
}

/// The guide's page (`docs/src/guides/check-connect.md`).
fn guide_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/guides/check-connect.md")
}

/// The fenced block after `<!-- check-connect: NAME -->` in the guide is what `out` prints once
/// this test's names are the guide's (`REFRACT_BLESS=1` rewrites the block): the pipeline file's
/// folder dropped, then each `(from, to)` replaced in order.
fn guide_transcript(name: &str, out: &str, names: &[(String, String)]) {
    let mut want = String::new();
    for line in out.lines() {
        let line = match line.strip_suffix("/pipeline.toml: ok") {
            Some(_) => "pipeline.toml: ok".to_string(),
            None => line.to_string(),
        };
        want.push_str(&names.iter().fold(line, |l, (from, to)| l.replace(from, to)));
        want.push('\n');
    }
    let path = guide_path();
    let page = std::fs::read_to_string(&path).expect("read the check --connect guide");
    let marker = format!("<!-- check-connect: {name} -->\n");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("{}: no `{}`", path.display(), marker.trim()));
    let open = at + marker.len();
    assert!(
        page[open..].starts_with("```text\n"),
        "{}: `{}` is not followed by a ```text block",
        path.display(),
        marker.trim()
    );
    let start = open + "```text\n".len();
    let end = start + page[start..].find("```\n").expect("the block's end");
    if page[start..end] == want {
        return;
    }
    if refract_testkit::golden::blessing() {
        let mut page = page.clone();
        page.replace_range(start..end, &want);
        std::fs::write(&path, page).expect("rewrite the guide");
        return;
    }
    panic!(
        "{}: the check-connect transcript {name} is not what check --connect prints; it prints:\n{want}\n\
         (REFRACT_BLESS=1 cargo test -p refract --test integration -- doctor::documented_minimal rewrites it)",
        path.display()
    );
}

/// The solo group of a flow `a->b` that mirrors `topics`.
fn solo_group(topics: &str) -> String {
    let text = format!(
        "[clusters.a]\nbootstrap = \"a:9092\"\n[clusters.b]\nbootstrap = \"b:9092\"\n\
         [[flow]]\nsource = \"a\"\ntarget = \"b\"\ntopics = [\"{topics}\"]\n"
    );
    let pipeline = refract_config::Pipeline::parse(std::path::Path::new("pipeline.toml"), &text)
        .expect("a pipeline");
    refract_mirror::membership::solo_group(&pipeline.flows[0])
}

/// Allows `User:mirror` what `args` (kafka-acls arguments after `--allow-principal`) name, on
/// `broker`.
fn allow(broker: &Broker, args: &[&str]) {
    let mut all = vec!["--add", "--allow-principal", "User:mirror"];
    all.extend_from_slice(args);
    broker.tool(ACL_TOOL, &all);
}

/// librdkafka client settings of one cluster.
type Settings<'a> = Vec<(&'a str, &'a str)>;

/// `[clusters.<alias>]` with its bootstrap and client settings.
fn cluster(alias: &str, bootstrap: &str, client: &[(&str, &str)]) -> String {
    let mut text = format!("[clusters.{alias}]\nbootstrap = \"{bootstrap}\"\n");
    if !client.is_empty() {
        text.push_str(&format!("[clusters.{alias}.client]\n"));
        for (k, v) in client {
            text.push_str(&format!("\"{k}\" = \"{v}\"\n"));
        }
    }
    text.push('\n');
    text
}

/// A flow `source -> target` mirroring `topics` (full-match patterns).
fn flow(source: &str, target: &str, topics: &str, extra: &str) -> String {
    format!(
        "[[flow]]\nsource = \"{source}\"\ntarget = \"{target}\"\ntopics = [\"{topics}\"]\n\
         replication_factor = 1\n{extra}\n"
    )
}

/// Runs `refract check --connect` on `pipeline`: (exit code, stdout + stderr).
fn check_connect(pipeline: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_pipeline(dir.path(), pipeline);
    let started = Instant::now();
    let out: Output = Refract::output(&["check", "--connect", path.to_str().expect("utf-8 path")]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "check --connect took {:.1}s, exit {:?}:\n{text}",
        started.elapsed().as_secs_f64(),
        out.status.code()
    );
    for secret in [MIRROR_PASSWORD, ADMIN_PASSWORD, P12_PASSWORD] {
        assert!(!text.contains(secret), "a secret leaked:\n{text}");
    }
    (out.status.code().unwrap_or(-1), text)
}

/// The one line of `text` that starts with `prefix`.
fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    let found: Vec<&str> = text.lines().filter(|l| l.starts_with(prefix)).collect();
    assert_eq!(
        found.len(),
        1,
        "one line starting with {prefix:?} in:\n{text}"
    );
    found[0]
}

/// Every way of connecting the harness's brokers offer works, and each cluster's line names the
/// principal Kafka sees.
#[test]
fn every_security_setup_connects_and_names_its_principal() {
    let ca = Ca::new("doctor CA");
    let server = ca.issue("broker", "broker", &["127.0.0.1", "localhost"], false);
    let client = ca.issue("mirror", "mirror", &[], false);
    let broker = secure_broker("k", &ca, &server, &[]);
    let ca_pem = path_str(&ca.ca_pem());
    let tls = [("ssl.ca.location", ca_pem.as_str())];
    let (cert, key, p12) = (
        path_str(&client.cert),
        path_str(&client.key),
        path_str(&p12_path(&client.cert)),
    );
    // (alias, listener, client settings)
    let clusters: Vec<(&str, &str, Settings)> = vec![
        (
            "ssl",
            "SSL",
            [&tls[..], &[("security.protocol", "SSL")]].concat(),
        ),
        (
            "mtlspem",
            "MTLS",
            [
                &tls[..],
                &[
                    ("security.protocol", "SSL"),
                    ("ssl.certificate.location", cert.as_str()),
                    ("ssl.key.location", key.as_str()),
                ],
            ]
            .concat(),
        ),
        (
            "mtlsp12",
            "MTLS",
            [
                &tls[..],
                &[
                    ("security.protocol", "SSL"),
                    ("ssl.keystore.location", p12.as_str()),
                    ("ssl.keystore.password", P12_PASSWORD),
                ],
            ]
            .concat(),
        ),
        (
            "plain",
            "SASL_PLAINTEXT",
            vec![
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "PLAIN"),
                ("sasl.username", "mirror"),
                ("sasl.password", MIRROR_PASSWORD),
            ],
        ),
        (
            "scram256",
            "SASL_SSL",
            [
                &tls[..],
                &[
                    ("security.protocol", "SASL_SSL"),
                    ("sasl.mechanism", "SCRAM-SHA-256"),
                    ("sasl.username", "mirror"),
                    ("sasl.password", MIRROR_PASSWORD),
                ],
            ]
            .concat(),
        ),
        (
            "scram512",
            "SASL_SSL",
            [
                &tls[..],
                &[
                    ("security.protocol", "SASL_SSL"),
                    ("sasl.mechanism", "SCRAM-SHA-512"),
                    ("sasl.username", "admin"),
                    ("sasl.password", ADMIN_PASSWORD),
                ],
            ]
            .concat(),
        ),
        (
            "oauth",
            "SASL_PLAINTEXT",
            vec![
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "OAUTHBEARER"),
                ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
                ("sasl.oauthbearer.config", "principal=mirror"),
            ],
        ),
    ];
    let mut pipeline = String::new();
    for (alias, listener, client) in &clusters {
        pipeline.push_str(&cluster(alias, broker.listener(listener), client));
    }
    let topic = unique("doc");
    broker.create_topic(&topic, 1);
    for (source, target) in [
        ("ssl", "mtlspem"),
        ("mtlsp12", "plain"),
        ("scram256", "scram512"),
        ("oauth", "ssl"),
    ] {
        pipeline.push_str(&flow(source, target, &topic, ""));
    }
    let (code, out) = check_connect(&pipeline);
    assert_eq!(code, 0, "every flow can run:\n{out}");
    let want = [
        ("ssl", "SSL", "TLS ok, not authenticated: User:ANONYMOUS"),
        (
            "mtlspem",
            "SSL",
            "TLS ok, authenticated as User:CN=mirror,O=refract tests",
        ),
        (
            "mtlsp12",
            "SSL",
            "TLS ok, authenticated as User:CN=mirror,O=refract tests",
        ),
        (
            "plain",
            "SASL_PLAINTEXT/PLAIN",
            "authenticated as User:mirror",
        ),
        (
            "scram256",
            "SASL_SSL/SCRAM-SHA-256",
            "TLS ok, authenticated as User:mirror",
        ),
        (
            "scram512",
            "SASL_SSL/SCRAM-SHA-512",
            "TLS ok, authenticated as User:admin",
        ),
        (
            "oauth",
            "SASL_PLAINTEXT/OAUTHBEARER",
            "authenticated as User:mirror",
        ),
    ];
    for (alias, what, principal) in want {
        let listener = clusters
            .iter()
            .find(|c| c.0 == alias)
            .map(|c| c.1)
            .expect("cluster");
        let prefix = format!(
            "cluster {alias} ({}, {what}): reachable, {principal} (",
            broker.listener(listener)
        );
        line(&out, &prefix);
    }
    assert_eq!(
        out.lines()
            .filter(|l| *l == "  no authorizer (or a super user): all allowed")
            .count(),
        clusters.len(),
        "{out}"
    );
    for f in [
        "ssl->mtlspem",
        "mtlsp12->plain",
        "scram256->scram512",
        "oauth->ssl",
    ] {
        line(&out, &format!("flow {f}: can run"));
    }
}

/// Each way of failing to connect exits non-zero with the cluster, its settings and the cause.
#[test]
fn connection_failures_name_the_cluster_and_the_cause() {
    let ca = Ca::new("doctor CA");
    let server = ca.issue("broker", "broker", &["127.0.0.1", "localhost"], false);
    let expired = ca.issue("expired", "broker", &["127.0.0.1", "localhost"], true);
    let wrong_host = ca.issue("wrong-host", "broker", &["wrong.example"], false);
    let good = secure_broker("good", &ca, &server, &[]);
    let old = secure_broker("old", &ca, &expired, &[]);
    let elsewhere = secure_broker("elsewhere", &ca, &wrong_host, &[]);
    let other_ca = Ca::new("someone else's CA");
    let ca_pem = path_str(&ca.ca_pem());
    let other_pem = path_str(&other_ca.ca_pem());
    let wrong_password = "not-the-password";
    // (case, bootstrap, client settings, protocol shown, cause shown)
    let cases: Vec<(&str, String, Settings, &str, &str)> = vec![
        (
            "wrong SCRAM password",
            good.listener("SASL_SSL").to_string(),
            vec![
                ("security.protocol", "SASL_SSL"),
                ("ssl.ca.location", ca_pem.as_str()),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "mirror"),
                ("sasl.password", wrong_password),
            ],
            "SASL_SSL/SCRAM-SHA-512",
            "authentication failed: the broker rejected user mirror with SCRAM-SHA-512",
        ),
        (
            "untrusted CA",
            good.listener("SSL").to_string(),
            vec![
                ("security.protocol", "SSL"),
                ("ssl.ca.location", other_pem.as_str()),
            ],
            "SSL",
            "TLS handshake failed: the broker's certificate is not signed by a CA this client trusts",
        ),
        (
            "expired broker certificate",
            old.listener("SSL").to_string(),
            vec![
                ("security.protocol", "SSL"),
                ("ssl.ca.location", ca_pem.as_str()),
            ],
            "SSL",
            "TLS handshake failed: the broker's certificate has expired",
        ),
        (
            "certificate for another host",
            elsewhere.listener("SSL").to_string(),
            vec![
                ("security.protocol", "SSL"),
                ("ssl.ca.location", ca_pem.as_str()),
            ],
            "SSL",
            "TLS handshake failed: the broker's certificate does not match the host name 127.0.0.1 (it is for wrong.example)",
        ),
        (
            "plaintext client, TLS listener",
            good.listener("SSL").to_string(),
            vec![],
            "PLAINTEXT",
            "wrong security.protocol: security.protocol is PLAINTEXT but the listener expects another",
        ),
    ];
    for (case, bootstrap, client, what, cause) in &cases {
        let pipeline = format!(
            "{}{}{}",
            cluster("ok", &good.bootstrap, &[]),
            cluster("bad", bootstrap, client),
            flow("ok", "bad", "anything", "")
        );
        let started = Instant::now();
        let (code, out) = check_connect(&pipeline);
        assert_eq!(code, 1, "{case}: exits 1:\n{out}");
        let prefix = format!("cluster bad ({bootstrap}, {what}): {cause}");
        let failure = line(&out, &prefix);
        assert!(
            failure.contains(" — librdkafka: "),
            "{case}: librdkafka's own words follow:\n{out}"
        );
        line(&out, "cluster ok (");
        line(&out, "flow ok->bad: cannot run");
        assert!(
            started.elapsed().as_secs() < 30,
            "{case}: took {:?}",
            started.elapsed()
        );
    }
}

/// The minimal ACL set the README documents, added to brokers that deny everything else, is
/// what `check --connect` asks for and what a flow with checkpoints and heartbeats needs.
#[test]
fn documented_minimal_acls_are_enough_to_mirror() {
    let ca = Ca::new("doctor CA");
    let server = ca.issue("broker", "broker", &["127.0.0.1", "localhost"], false);
    let a = secure_broker("a", &ca, &server, &GUARDED);
    let b = secure_broker("b", &ca, &server, &GUARDED);
    let prefix = unique("orders");
    let topic = format!("{prefix}-eu");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 2);
    let records = sample_records(&topic, 2, 200);
    a.produce(&topic, &records);
    let scram = |broker: &Broker, alias: &str| {
        cluster(
            alias,
            broker.listener("SASL_PLAINTEXT"),
            &[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "mirror"),
                ("sasl.password", MIRROR_PASSWORD),
            ],
        )
    };
    let pipeline = format!(
        "{}{}{}",
        scram(&a, "a"),
        scram(&b, "b"),
        flow(
            "a",
            "b",
            &format!("{prefix}.*"),
            "sync_topic_acls = false\nrefresh_topics_interval = \"1s\"\ncommit_interval = \"500ms\"\n\
             checkpoint_interval = \"1s\"\nrefresh_groups_interval = \"1s\"\nheartbeat_interval = \"500ms\"\n"
        )
    );

    // Nothing granted: the flow cannot run, and the output says what to add.
    let (code, out) = check_connect(&pipeline);
    assert_eq!(code, 1, "{out}");
    let (ab, bb) = (a.listener("SASL_PLAINTEXT"), b.listener("SASL_PLAINTEXT"));
    // The guide shows both outputs with its own names: brokers kafka-a and kafka-b, topics
    // starting with `orders`.
    let guide_names = [
        (ab.to_string(), "kafka-a:9092".to_string()),
        (bb.to_string(), "kafka-b:9092".to_string()),
        (solo_group(&format!("{prefix}.*")), solo_group("orders.*")),
        (prefix.clone(), "orders".to_string()),
    ];
    guide_transcript("nothing-granted", &out, &guide_names);
    line(
        &out,
        &format!("cluster a ({ab}, SASL_PLAINTEXT/SCRAM-SHA-512): reachable, authenticated as User:mirror ("),
    );
    let want = [
        format!(
            "  no   read, describe topics starting with {prefix} (flow a->b: mirrored topic; not visible to this principal; missing: read, describe) — \
             kafka-acls --bootstrap-server {ab} --add --allow-principal User:mirror --operation Read --operation Describe \
             --topic {prefix} --resource-pattern-type prefixed"
        ),
        format!(
            "  no   read group refract-a-b (flow a->b: progress commits; missing: read) — \
             kafka-acls --bootstrap-server {ab} --add --allow-principal User:mirror --operation Read --group refract-a-b"
        ),
        format!(
            "  no   create, write, describe topics starting with a.{prefix} (flow a->b: remote topic; not visible to this principal; \
             missing: create, write, describe) — kafka-acls --bootstrap-server {bb} --add --allow-principal User:mirror \
             --operation Create --operation Write --operation Describe --topic a.{prefix} --resource-pattern-type prefixed"
        ),
        format!(
            "  no   read group refract-a-b (flow a->b: target positions read on restart; missing: read) — \
             kafka-acls --bootstrap-server {bb} --add --allow-principal User:mirror --operation Read --group refract-a-b"
        ),
    ];
    for w in &want {
        assert!(
            out.lines().any(|l| l == w),
            "expected line\n{w}\nin:\n{out}"
        );
    }
    // Cluster mode also needs the tasks topic and the processes' group on the source.
    let (code, clustered) = check_connect(&format!("[cluster]\n{pipeline}"));
    assert_eq!(code, 1, "{clustered}");
    for (what, acl) in [
        (
            "create, read, describe topic refract-tasks.a-b.internal (flow a->b: cluster mode: tasks topic",
            "--topic refract-tasks.a-b.internal",
        ),
        (
            "read, describe group refract-a-b-cluster (flow a->b: cluster mode: the processes' group",
            "--group refract-a-b-cluster",
        ),
    ] {
        assert!(
            clustered
                .lines()
                .any(|l| l.starts_with("  no   ") && l.contains(what) && l.contains(acl)),
            "expected a line with {what:?} and {acl:?} in:\n{clustered}"
        );
    }
    line(&out, "flow a->b: cannot run (");
    assert!(
        out.lines()
            .any(|l| l.starts_with("  warn create, write, read topic mm2-offset-syncs.b.internal")),
        "{out}"
    );

    // The documented minimal set, as the book's guide prints it: source a, then target b.
    let acls_started = Instant::now();
    let documented = documented_acls();
    let on = |cluster: &str| documented.iter().filter(|(c, _)| c == cluster).count();
    assert_eq!(
        (on("a"), on("b")),
        (6, 4),
        "the guide's minimal set: {documented:?}"
    );
    for (cluster, args) in &documented {
        // The guide's topics start with `orders`; this test's with its own unique prefix.
        let args: Vec<String> = args
            .iter()
            .map(|a| match a.as_str() {
                "orders" => prefix.clone(),
                "a.orders" => format!("a.{prefix}"),
                _ => a.clone(),
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        allow(if cluster == "a" { &a } else { &b }, &args);
    }
    eprintln!(
        "adding the ACLs took {:.1}s",
        acls_started.elapsed().as_secs_f64()
    );

    // A source consumer group for the checkpoints (listed with the Describe ACL on groups).
    let group = unique("app");
    a.commit_group(&group, &topic, &[(0, 50), (1, 50)]);
    let (code, out) = check_connect(&pipeline);
    assert_eq!(code, 0, "the documented set is enough:\n{out}");
    guide_transcript("minimal-set", &out, &guide_names);
    assert!(!out.lines().any(|l| l.starts_with("  no ")), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("  warn")), "{out}");
    line(&out, "flow a->b: can run");
    line(
        &out,
        &format!("  yes  read, describe topic {topic} (flow a->b: mirrored topic)"),
    );

    // And it mirrors: records byte for byte, heartbeats and checkpoints written.
    let mirror = Refract::start(&pipeline, &[]);
    mirror.wait("200 records on b", || {
        b.topics().contains_key(&remote) && b.counts(&remote).iter().sum::<i64>() >= 200
    });
    assert_eq!(
        b.read_all(&remote),
        by_partition(&records, 2),
        "{remote}: byte for byte"
    );
    mirror.wait("heartbeats on b", || {
        b.topics().contains_key("heartbeats") && b.counts("heartbeats").iter().sum::<i64>() > 0
    });
    mirror.wait("checkpoints on b", || {
        b.topics().contains_key("a.checkpoints.internal")
            && b.counts("a.checkpoints.internal").iter().sum::<i64>() > 0
    });
    let log = mirror.log();
    for bad in [
        "AUTHORIZATION_FAILED",
        "Authorization failed",
        "not authorized",
    ] {
        assert!(!log.contains(bad), "refract hit {bad}:\n{log}");
    }
}

/// A principal missing one ACL at run time — Write on the remote topics of the target — gets a
/// degraded flow that names the partition, the reason and the cluster, never a silent stall;
/// `check --connect` names the missing ACL and the command that adds it.
#[test]
fn a_missing_write_acl_degrades_the_flow_and_check_names_it() {
    let ca = Ca::new("doctor CA");
    let server = ca.issue("broker", "broker", &["127.0.0.1", "localhost"], false);
    let a = Broker::start("a");
    let b = secure_broker("b", &ca, &server, &GUARDED);
    let prefix = unique("payments");
    let topic = format!("{prefix}-eu");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 2);
    a.produce(&topic, &sample_records(&topic, 2, 20));
    let add = |args: &[&str]| allow(&b, args);
    // Everything the target side needs except Write on the remote topics.
    add(&[
        "--operation",
        "Create",
        "--operation",
        "Describe",
        "--operation",
        "DescribeConfigs",
        "--topic",
        &format!("a.{prefix}"),
        "--resource-pattern-type",
        "prefixed",
    ]);
    add(&["--operation", "Read", "--group", "refract-a-b"]);
    let bb = b.listener("SASL_PLAINTEXT").to_string();
    let pipeline = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n{}{}{}",
        cluster("a", &a.bootstrap, &[]),
        cluster(
            "b",
            &bb,
            &[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "mirror"),
                ("sasl.password", MIRROR_PASSWORD),
            ],
        ),
        flow(
            "a",
            "b",
            &format!("{prefix}.*"),
            "sync_topic_acls = false\nsync_topic_configs = false\nemit_heartbeats = false\n\
             emit_checkpoints = false\nemit_offset_syncs = false\nrefresh_topics_interval = \"1s\"\n\
             commit_interval = \"500ms\"\n"
        )
    );

    let mirror = Refract::start(&pipeline, &[]);
    let addr = mirror.metrics_addr();
    let metrics = || http(&addr, "GET", "/metrics").1;
    mirror.wait("both partitions failing with authorization", || {
        let body = metrics();
        (0..2).all(|p| {
            series(
                &body,
                "refract_partition_errors_total",
                &[
                    ("flow", "a->b"),
                    ("topic", topic.as_str()),
                    ("partition", p.to_string().as_str()),
                    ("reason", "authorization"),
                ],
            )
            .is_some_and(|n| n >= 1.0)
        })
    });
    let (status, body) = http(&addr, "GET", "/health");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("a->b: degraded"), "{body}");
    let log = mirror.log();
    let warning = log
        .lines()
        .find(|l| l.contains(&format!("{topic}[0] degraded (authorization)")))
        .unwrap_or_else(|| panic!("a degraded warning for {topic}[0] in:\n{log}"));
    assert!(
        warning.contains("cluster b")
            && warning
                .to_ascii_lowercase()
                .contains("authorization failed"),
        "the warning names the cluster and the broker's refusal: {warning}"
    );
    assert!(!log.contains(MIRROR_PASSWORD), "{log}");
    assert_eq!(b.counts(&remote).iter().sum::<i64>(), 0, "nothing written");
    // The remote topics exist now (refract created them): `check --connect` names the missing
    // ACL and the command that adds it.
    let (code, out) = check_connect(&pipeline);
    assert_eq!(code, 1, "{out}");
    let write = out
        .lines()
        .find(|l| l.starts_with("  no ") && l.contains(&format!("topic {remote} ")))
        .unwrap_or_else(|| panic!("a line for the remote topics in:\n{out}"));
    assert!(
        write.contains("missing: write")
            && write.contains(&format!(
                "kafka-acls --bootstrap-server {bb} --add --allow-principal User:mirror --operation Write --topic {remote}"
            )),
        "{write}"
    );
}

/// A principal without Read on the flow's solo group (the guard against a second process on
/// the same pipeline) still mirrors, and the process says at run time that a second process
/// would not notice it, naming the group.
#[test]
fn a_missing_solo_group_acl_is_said_and_the_flow_runs() {
    let ca = Ca::new("doctor CA");
    let server = ca.issue("broker", "broker", &["127.0.0.1", "localhost"], false);
    let a = secure_broker("a", &ca, &server, &GUARDED);
    let b = Broker::start("b");
    let prefix = unique("ledger");
    let topic = format!("{prefix}-eu");
    let remote = format!("a.{topic}");
    a.create_topic(&topic, 2);
    a.produce(&topic, &sample_records(&topic, 2, 20));
    let add = |args: &[&str]| allow(&a, args);
    // The source side of the documented set, without the solo group.
    add(&[
        "--operation",
        "Read",
        "--operation",
        "DescribeConfigs",
        "--topic",
        &prefix,
        "--resource-pattern-type",
        "prefixed",
    ]);
    add(&["--operation", "Read", "--group", "refract-a-b"]);
    let pipeline = format!(
        "{}{}{}",
        cluster(
            "a",
            a.listener("SASL_PLAINTEXT"),
            &[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "mirror"),
                ("sasl.password", MIRROR_PASSWORD),
            ],
        ),
        cluster("b", &b.bootstrap, &[]),
        flow(
            "a",
            "b",
            &format!("{prefix}.*"),
            "sync_topic_acls = false\nemit_heartbeats = false\nemit_checkpoints = false\n\
             emit_offset_syncs = false\nrefresh_topics_interval = \"1s\"\n"
        )
    );
    let started = Instant::now();
    let mirror = Refract::start(&pipeline, &[]);
    mirror.wait("every record on b", || {
        b.topics().contains_key(&remote) && b.counts(&remote).iter().sum::<i64>() == 20
    });
    let log = mirror.log();
    let warning = log
        .lines()
        .find(|l| l.contains("cannot join group refract-a-b-solo-"))
        .unwrap_or_else(|| panic!("a warning about the solo group in:\n{log}"));
    assert!(
        warning.contains("WARN")
            && warning.contains("on source cluster a")
            && warning.contains("a second process on the same pipeline would not notice it"),
        "{warning}"
    );
    assert!(!log.contains(MIRROR_PASSWORD), "{log}");
    println!(
        "without the solo group's ACL: mirrored after {:.1}s; {warning}",
        started.elapsed().as_secs_f64()
    );
}

/// `check --connect` refuses an exactly-once flow towards a cluster whose transaction
/// coordinator cannot start (its transaction log wants more replicas than it has brokers),
/// naming the cluster, and passes one towards a cluster that can run transactions.
#[test]
fn exactly_once_needs_a_cluster_with_transactions() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let c = Broker::start_with("c", &[("transaction.state.log.replication.factor", "3")]);
    let topic = unique("eos-check");
    a.create_topic(&topic, 1);
    let text = format!(
        "{}{}{}{}{}",
        cluster("a", &a.bootstrap, &[]),
        cluster("b", &b.bootstrap, &[]),
        cluster("c", &c.bootstrap, &[]),
        flow("a", "b", &topic, "delivery = \"exactly-once\"\n"),
        flow("a", "c", &topic, "delivery = \"exactly-once\"\n"),
    );
    let (code, out) = check_connect(&text);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("cluster c cannot run transactions: transaction.state.log.replication.factor = 3 but the cluster has 1 broker(s)"),
        "{out}"
    );
    assert!(out.contains("flow a->c: cannot run"), "{out}");
    assert!(out.contains("flow a->b: can run"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("transactions available") && l.contains("flow a->b")),
        "{out}"
    );
}
