//! Conversion tests: MM2 files in, pipelines and errors out.

use super::*;
use crate::flow::{DefaultsFrom, OffsetSyncsLocation, PluginLocation};
use std::time::Duration;

fn convert_text(text: &str) -> Result<Mm2Conversion, ConfigError> {
    convert_mm2_properties(Path::new("mm2.properties"), text)
}

/// Converts, then validates as `Pipeline::load` would.
fn load_text(text: &str) -> Result<Pipeline, ConfigError> {
    load(Path::new("mm2.properties"), text)
}

fn props(text: &str) -> Vec<(String, String, usize)> {
    parse_properties(Path::new("p.properties"), text)
        .unwrap()
        .into_iter()
        .map(|p| (p.key, p.value, p.line))
        .collect()
}

fn kv(key: &str, value: &str, line: usize) -> (String, String, usize) {
    (key.to_string(), value.to_string(), line)
}

const TWO: &str =
    "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\na->b.enabled = true\n";

// --- fixtures -----------------------------------------------------------------------------

const ACTIVE_STANDBY: &str = include_str!("../../tests/fixtures/mm2/active-standby.properties");
const ACTIVE_ACTIVE: &str = include_str!("../../tests/fixtures/mm2/active-active.properties");
const IDENTITY_DR: &str = include_str!("../../tests/fixtures/mm2/identity-dr.properties");
const TWO_CLUSTERS_REGEX: &str =
    include_str!("../../tests/fixtures/mm2/two-clusters-regex.properties");

fn fixture(name: &str, text: &str) -> (Mm2Conversion, Pipeline) {
    let path = Path::new(name);
    let conversion = convert_mm2_properties(path, text).unwrap();
    let pipeline = Pipeline::parse(path, &conversion.toml)
        .unwrap_or_else(|e| panic!("{e}\n{}", conversion.toml));
    (conversion, pipeline)
}

#[test]
fn active_standby() {
    let (c, p) = fixture("active-standby.properties", ACTIVE_STANDBY);
    assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
    assert_eq!(p.flows.len(), 1);
    let f = &p.flows[0];
    assert_eq!(f.name(), "primary->backup");
    assert_eq!(
        p.clusters["primary"].bootstrap,
        "kafka-primary-1:9092,kafka-primary-2:9092,kafka-primary-3:9092"
    );
    for topic in ["orders", "payments", "inventory-eu"] {
        assert!(f.topics.should_replicate(topic), "{topic}");
    }
    // `.*\.internal` is `.*.internal` after Java's unescaping: it excludes `x-internal` too.
    for topic in [
        "orders-v2",
        "app.internal",
        "app-internal",
        "__consumer_offsets",
    ] {
        assert!(!f.topics.should_replicate(topic), "{topic}");
    }
    assert!(f.checkpoints.groups.should_replicate("billing"));
    assert!(!f.checkpoints.groups.should_replicate("console-consumer-7"));
    assert!(
        f.checkpoints.groups.should_replicate("connect-x"),
        "exclude list replaced"
    );
    assert_eq!(f.replication_factor, 3);
    assert_eq!(f.internal_replication_factor, 3);
    assert_eq!(
        f.policy.location,
        PluginLocation::Builtin("builtin:default".into())
    );
    assert_eq!(f.heartbeats.interval, Duration::from_secs(1));
    assert_eq!(f.checkpoints.interval, Duration::from_secs(10));
    assert!(f.config_sync.enabled && f.acl_sync.enabled);
    assert_eq!(f.refresh_topics_interval, Duration::from_secs(30));
    // tasks.max = 8: the flow's partitions are divided into 8 tasks.
    assert_eq!(f.tasks, 8);
    assert_eq!(
        c.notes,
        [
            "primary->backup.topics.exclude (line 10): the .properties format reads `\\.` as `.`, so MirrorMaker 2 and refract both see `.*.internal,__.*`; write `\\\\.` to keep a regex escape",
            "MirrorMaker 2 would also emit heartbeats for backup->primary, whose flows are not enabled; refract emits heartbeats only in enabled flows",
        ]
    );
    assert!(c.toml.starts_with(
        "# Pipeline converted from active-standby.properties (MirrorMaker 2 properties).\n# Notes:\n"
    ));
}

#[test]
fn active_active() {
    let (c, p) = fixture("active-active.properties", ACTIVE_ACTIVE);
    assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
    let names: Vec<String> = p.flows.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["us-east->us-west", "us-west->us-east"]);
    for f in &p.flows {
        assert!(f.topics.should_replicate("orders.eu"));
        assert!(f.topics.should_replicate("orders"));
        assert!(f.topics.should_replicate("payments"));
        assert!(
            !f.topics.should_replicate("orders-test"),
            "topics.blacklist"
        );
        assert!(!f.topics.should_replicate("payments-v2"));
        assert!(f.checkpoints.groups.should_replicate("app-1"));
        assert!(
            !f.checkpoints.groups.should_replicate("console-consumer-1"),
            "MM2's default exclude"
        );
        assert_eq!(f.policy.config.trim(), "separator = \"_\"");
        assert!(f.config_sync.exclude.matches("min.insync.replicas"));
        assert!(f.config_sync.exclude.matches("retention.bytes"));
        assert!(!f.config_sync.exclude.matches("retention.ms"));
    }
    assert!(!p.flows[0].config_sync.enabled, "per-flow override");
    assert!(p.flows[1].config_sync.enabled);
    let east = p.clusters["us-east"].client_config(crate::ClientRole::Producer);
    assert_eq!(east["security.protocol"], "PLAINTEXT");
    let west = &p.clusters["us-west"];
    assert_eq!(
        west.client_config(crate::ClientRole::Consumer)["auto.offset.reset"],
        "earliest"
    );
    assert!(!west
        .client_config(crate::ClientRole::Producer)
        .contains_key("auto.offset.reset"));
    assert_eq!(
        c.notes,
        [
            "topics.blacklist (line 10): read as topics.exclude (its MirrorMaker 2 3.x name, removed in 4.0)",
            "config.properties.exclude (line 14): the .properties format reads `\\.` as `.`, so MirrorMaker 2 and refract both see `min.insync.replicas, retention.bytes`; write `\\\\.` to keep a regex escape",
        ]
    );
}

#[test]
fn identity_dr() {
    let (c, p) = fixture("identity-dr.properties", IDENTITY_DR);
    assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
    assert_eq!(p.flows.len(), 1);
    let f = &p.flows[0];
    assert_eq!(f.name(), "dc1->dc2");
    assert_eq!(
        f.policy.location,
        PluginLocation::Builtin("builtin:identity".into())
    );
    assert!(f.checkpoints.sync_group_offsets);
    assert_eq!(f.offset_syncs.lag_max, 10);
    assert_eq!(f.checkpoints.interval, Duration::from_secs(5));
    assert_eq!(
        f.checkpoints.sync_group_offsets_interval,
        Duration::from_secs(5)
    );
    assert!(f.topics.should_replicate("anything"));
    assert!(
        !f.topics.should_replicate("__consumer_offsets"),
        "MM2's default exclude still applies"
    );
    assert_eq!(
        c.notes,
        ["MirrorMaker 2 would also emit heartbeats for dc2->dc1, whose flows are not enabled; refract emits heartbeats only in enabled flows"]
    );
}

#[test]
fn two_clusters_regex() {
    let (c, p) = fixture("two-clusters-regex.properties", TWO_CLUSTERS_REGEX);
    assert!(c.unsupported.is_empty(), "{:?}", c.unsupported);
    assert_eq!(p.flows.len(), 1);
    let f = &p.flows[0];
    assert_eq!(f.name(), "kafka1->kafka2");
    assert_eq!(f.topics.include.patterns(), ["foo.*", "bar.*"]);
    assert!(f.topics.should_replicate("foo1"));
    assert!(f.topics.should_replicate("bar.x"));
    assert!(!f.topics.should_replicate("baz"));
    assert_eq!(
        p.clusters["kafka2"].bootstrap,
        "dev2:9092,dev3:9092,dev4:9092"
    );
    assert_eq!(
        c.notes,
        [
            "MirrorMaker 2 would also emit heartbeats for kafka2->kafka1, whose flows are not enabled; refract emits heartbeats only in enabled flows",
        ]
    );
}

#[test]
fn load_dispatches_on_the_extension_and_keeps_warnings() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let path = Path::new(dir).join("tests/fixtures/mm2/active-standby.properties");
    let p = Pipeline::load(&path).unwrap();
    assert_eq!(p.file, path);
    assert_eq!(p.flows[0].name(), "primary->backup");
    assert_eq!(p.warnings.len(), 2);
    assert!(p.warnings[1].starts_with(&format!(
        "{}: MirrorMaker 2 would also emit",
        path.display()
    )));

    let p = load_text(&format!(
        "{TWO}transforms = x\ntopic.filter.class = com.x.F\n"
    ))
    .unwrap();
    assert_eq!(
        p.warnings[0],
        "mm2.properties: ignored MirrorMaker 2 settings refract does not support: topic.filter.class, transforms"
    );
}

// --- properties syntax --------------------------------------------------------------------

#[test]
fn separators_comments_and_blanks() {
    let text = "# comment\n! also a comment\n  \n a = 1\nb: 2\nc 3\nd=4\ne   :   5  \nf\ng =\n\th\t=\t= x\n";
    assert_eq!(
        props(text),
        [
            kv("a", "1", 4),
            kv("b", "2", 5),
            kv("c", "3", 6),
            kv("d", "4", 7),
            kv("e", "5  ", 8),
            kv("f", "", 9),
            kv("g", "", 10),
            kv("h", "= x", 11),
        ]
    );
}

#[test]
fn continuations() {
    let text = "topics = a, \\\n    b, \\\n\tc\nnext = 1\nodd = x\\\\\nafter = 2\nlast = y\\";
    assert_eq!(
        props(text),
        [
            kv("topics", "a, b, c", 1),
            kv("next", "1", 4),
            kv("odd", "x\\", 5),
            kv("after", "2", 6),
            kv("last", "y", 7),
        ]
    );
    // A continued line that starts with `#` is not a comment; an empty one ends the entry.
    assert_eq!(
        props("a = 1\\\n  # 2\nb = \\\n\nc = 3\r\nd = 4\re = 5"),
        [
            kv("a", "1# 2", 1),
            kv("b", "", 3),
            kv("c", "3", 5),
            kv("d", "4", 6),
            kv("e", "5", 7),
        ]
    );
    // A comment line ending in a backslash does not continue.
    assert_eq!(props("# x \\\ny = 1"), [kv("y", "1", 2)]);
}

#[test]
fn escapes_follow_java() {
    let text = "min\\.insync = a\\.b\\\\.c\nkey\\ with\\=sep\\:s = v\\ttab\\u00e9\\uD83D\\uDE00\nx = \\#\\!\n";
    assert_eq!(
        props(text),
        [
            kv("min.insync", "a.b\\.c", 1),
            kv("key with=sep:s", "v\ttab\u{e9}\u{1F600}", 2),
            kv("x", "#!", 3),
        ]
    );
    let parsed = parse_properties(Path::new("p"), "a = x\\.y\nb = \\=\\:\\\\").unwrap();
    assert_eq!(parsed[0].dropped_escape.as_deref(), Some("\\."));
    assert_eq!(parsed[1].dropped_escape, None);
    let err = parse_properties(Path::new("p.properties"), "\n\nbad = \\u12G4\n").unwrap_err();
    assert_eq!(err.line, Some(3));
    assert_eq!(err.key, "bad");
    assert!(
        err.to_string()
            .starts_with("p.properties:3: bad: malformed"),
        "{err}"
    );
}

#[test]
fn later_duplicates_win() {
    let c = convert_text(&format!("{TWO}topics = x\ntopics = y\n")).unwrap();
    assert!(c.toml.contains("topics = [\"y\"]"), "{}", c.toml);
    assert_eq!(
        c.notes[0],
        "topics (line 6): also set on line 5; the later value wins, as in Java"
    );
}

// --- resolution ---------------------------------------------------------------------------

#[test]
fn flow_settings_override_top_level_ones() {
    let text = "clusters = a, b, c\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\nc.bootstrap.servers = h:3\n\
        a->b.enabled = true\na->c.enabled = TRUE\nc->a.enabled = false\n\
        topics = t.*\na->c.topics = only\noffset.lag.max = 7\na->b.offset.lag.max = 0\n\
        emit.heartbeats.enabled = false\n";
    let p = load_text(text).unwrap();
    let names: Vec<String> = p.flows.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["a->b", "a->c"]);
    let (ab, ac) = (&p.flows[0], &p.flows[1]);
    assert!(ab.topics.should_replicate("t1") && !ab.topics.should_replicate("only"));
    assert!(ac.topics.should_replicate("only") && !ac.topics.should_replicate("t1"));
    assert_eq!((ab.offset_syncs.lag_max, ac.offset_syncs.lag_max), (0, 7));
    assert!(!ab.heartbeats.enabled && !ac.heartbeats.enabled);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn blacklist_aliases() {
    let text = format!(
        "{TWO}topics.blacklist = x.*\ngroups.blacklist = g1\nconfig.properties.blacklist = c1\n"
    );
    let p = load_text(&text).unwrap();
    let f = &p.flows[0];
    assert!(!f.topics.should_replicate("x1") && f.topics.should_replicate("__y"));
    assert!(
        !f.checkpoints.groups.should_replicate("g1")
            && f.checkpoints.groups.should_replicate("connect-1")
    );
    assert!(f.config_sync.exclude.matches("c1"));
    assert!(!f.config_sync.exclude.matches("min.insync.replicas"));
    assert_eq!(
        p.warnings.len(),
        4,
        "3 aliases and heartbeats: {:?}",
        p.warnings
    );

    // As in MM2 3.x the new name wins over the alias even when the alias is per flow.
    let text = format!("{TWO}topics.exclude = new\na->b.topics.blacklist = old\n");
    let c = convert_text(&text).unwrap();
    assert!(c.toml.contains("topics_exclude = [\"new\"]"), "{}", c.toml);
    assert_eq!(
        c.notes[0],
        "a->b.topics.blacklist (line 6): ignored; topics.exclude is also set and wins, as in MirrorMaker 2 3.x"
    );
}

#[test]
fn every_setting_converts() {
    let text = format!(
        "{TWO}replication.policy.class = IdentityReplicationPolicy\n\
         replication.policy.separator = -\n\
         replication.policy.internal.topic.separator.enabled = False\n\
         refresh.topics.interval.seconds = 11\n\
         offset.flush.interval.ms = 2500\n\
         replication.factor = -1\n\
         checkpoints.topic.replication.factor = 2\n\
         heartbeats.topic.replication.factor = 1\n\
         heartbeats.replication.enabled = false\n\
         sync.topic.configs.enabled = false\n\
         sync.topic.configs.interval.seconds = 12\n\
         use.defaults.from = source\n\
         sync.topic.acls.enabled = false\n\
         sync.topic.acls.interval.seconds = 13\n\
         groups = \n\
         groups.exclude = a, b\n\
         refresh.groups.interval.seconds = 14\n\
         emit.checkpoints.enabled = true\n\
         emit.checkpoints.interval.seconds = 15\n\
         sync.group.offsets.enabled = true\n\
         sync.group.offsets.interval.seconds = 16\n\
         emit.offset-syncs.enabled = true\n\
         offset-syncs.topic.location = target\n\
         offset.lag.max = 0\n\
         emit.heartbeats.enabled = true\n\
         emit.heartbeats.interval.seconds = 17\n\
         refresh.topics.enabled = true\n"
    );
    let p = load_text(&text).unwrap();
    let f = &p.flows[0];
    assert_eq!(
        f.policy.location,
        PluginLocation::Builtin("builtin:identity".into())
    );
    let cfg: toml::Table = toml::from_str(&f.policy.config).unwrap();
    assert_eq!(cfg["separator"].as_str(), Some("-"));
    assert_eq!(
        cfg["internal_topic_separator_enabled"].as_bool(),
        Some(false)
    );
    assert_eq!(f.refresh_topics_interval, Duration::from_secs(11));
    assert_eq!(f.delivery.commit_interval, Duration::from_millis(2500));
    assert_eq!(f.replication_factor, -1);
    assert_eq!(f.internal_replication_factor, 2);
    assert!(!f.heartbeats.replication && !f.config_sync.enabled && !f.acl_sync.enabled);
    assert_eq!(f.config_sync.interval, Duration::from_secs(12));
    assert_eq!(f.config_sync.use_defaults_from, DefaultsFrom::Source);
    assert_eq!(f.acl_sync.interval, Duration::from_secs(13));
    assert!(
        !f.checkpoints.groups.should_replicate("anything"),
        "empty list matches nothing"
    );
    assert!(
        f.checkpoints.groups.exclude.matches("b")
            && !f.checkpoints.groups.exclude.matches("connect-x")
    );
    assert_eq!(
        f.checkpoints.refresh_groups_interval,
        Duration::from_secs(14)
    );
    assert!(f.checkpoints.enabled && f.checkpoints.sync_group_offsets && f.offset_syncs.enabled);
    assert_eq!(f.checkpoints.interval, Duration::from_secs(15));
    assert_eq!(
        f.checkpoints.sync_group_offsets_interval,
        Duration::from_secs(16)
    );
    assert_eq!(f.offset_syncs.location, OffsetSyncsLocation::Target);
    assert_eq!(f.offset_syncs.lag_max, 0);
    assert!(f.heartbeats.enabled);
    assert_eq!(f.heartbeats.interval, Duration::from_secs(17));
    assert_eq!(
        p.warnings,
        [
            "mm2.properties: checkpoints.topic.replication.factor = 2, heartbeats.topic.replication.factor = 1: refract has one internal_replication_factor for all its internal topics; using the largest, 2",
            "mm2.properties: MirrorMaker 2 would also emit heartbeats for b->a, whose flows are not enabled; refract emits heartbeats only in enabled flows",
        ]
    );
}

/// MM2's worker for `A->B` keeps its positions in `offset.storage.topic` (top level first,
/// then the target cluster's), else `mm2-offsets.A.internal`; refract reads the same topic.
#[test]
fn offset_storage_topic_names_where_mm2_positions_are() {
    let three = "clusters = a, b, c\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n\
        c.bootstrap.servers = h:3\na->b.enabled = true\na->c.enabled = true\n";
    let topics = |text: &str| -> Vec<String> {
        let p = load_text(text).unwrap();
        assert!(
            !p.warnings
                .iter()
                .any(|w| w.contains("offset.storage.topic")),
            "{:?}",
            p.warnings
        );
        p.flows
            .iter()
            .map(|f| f.mm2_offsets_topic.clone())
            .collect()
    };
    assert_eq!(
        topics(three),
        ["mm2-offsets.a.internal", "mm2-offsets.a.internal"]
    );
    assert_eq!(
        topics(&format!("{three}c.offset.storage.topic = c-offsets\n")),
        ["mm2-offsets.a.internal", "c-offsets"]
    );
    assert_eq!(
        topics(&format!(
            "{three}c.offset.storage.topic = c-offsets\noffset.storage.topic = all-offsets\n"
        )),
        ["all-offsets", "all-offsets"]
    );
    let c = convert_text(&format!("{three}b.offset.storage.topic = b-offsets\n")).unwrap();
    assert!(
        c.toml.contains("mm2_offsets_topic = \"b-offsets\""),
        "{}",
        c.toml
    );
    // MM2 reads no per-flow offset.storage.topic: reported as ignored
    let c = convert_text(&format!("{three}a->b.offset.storage.topic = x\n")).unwrap();
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("a->b.offset.storage.topic = x")),
        "{:?}",
        c.notes
    );
}

#[test]
fn client_settings() {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("creds.properties");
    std::fs::write(&creds, "password = pw-from-file\n").unwrap();
    let text = format!("clusters = a, b\na.bootstrap.servers = h:1 , h:2\nbootstrap.servers = fallback:1\n\
        a->b.enabled = true\n\
        security.protocol = SASL_SSL\nsasl.mechanism = SCRAM-SHA-512\n\
        sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"mirror\" password=\"${{file:{}:password}}\";\n\
        b.security.protocol = SSL\nb.ssl.truststore.location = /t.pem\nb.ssl.endpoint.identification.algorithm =\n\
        a.client.id = mirror\na.consumer.fetch.max.wait.ms = 50\na.consumer.max.poll.records = 9\n\
        a.producer.acks = 1\na.producer.compression.type = zstd \na.admin.bootstrap.servers = x:1\n\
        a.ssl.truststore.password = secret\nconfig.providers = file\n\
        config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n",
        creds.display()
    );
    let c = convert_text(&text).unwrap();
    assert_eq!(
        c.unsupported,
        [
            "a.admin.bootstrap.servers",
            "a.consumer.max.poll.records",
            "a.producer.acks",
        ]
    );
    let notes = c.notes.join("\n");
    assert!(notes.contains("a.producer.acks (line 14): ignored; refract sets `acks` itself"));
    assert!(notes.contains("a.admin.bootstrap.servers (line 16): ignored; every client of `a` connects to a.bootstrap.servers"));
    assert!(notes.contains("a.ssl.truststore.password (line 17): ignored; librdkafka reads CA certificates from PEM, which has no password"));
    assert!(
        !notes.contains("sasl.jaas.config"),
        "the password is a reference: {notes}"
    );
    let reference = format!("\"${{file:{}:password}}\"", creds.display());
    assert!(
        c.toml.contains(&format!("[clusters.a.client]\n\"client.id\" = \"mirror\"\n\"sasl.mechanism\" = \"SCRAM-SHA-512\"\n\"sasl.password\" = {reference}\n\"sasl.username\" = \"mirror\"\n\"security.protocol\" = \"SASL_SSL\"\n")),
        "{}",
        c.toml
    );
    assert!(
        c.toml.contains("\"ssl.ca.location\" = \"/t.pem\""),
        "{}",
        c.toml
    );
    assert!(!c.toml.contains("secret") && !c.toml.contains("pw-from-file"));
    let p = load_text(&text).unwrap();
    use crate::ClientRole::*;
    let a = &p.clusters["a"];
    assert_eq!(a.bootstrap, "h:1,h:2");
    let consumer = a.client_config(Consumer);
    assert_eq!(consumer["security.protocol"], "SASL_SSL");
    assert_eq!(consumer["sasl.mechanism"], "SCRAM-SHA-512");
    assert_eq!(consumer["sasl.username"], "mirror");
    assert_eq!(consumer["sasl.password"], "pw-from-file");
    assert_eq!(
        a.display_settings(Consumer)["sasl.password"],
        reference.trim_matches('"')
    );
    assert_eq!(consumer["client.id"], "mirror");
    assert_eq!(consumer["fetch.wait.max.ms"], "50");
    assert!(!consumer.contains_key("max.poll.records"));
    let producer = a.client_config(Producer);
    assert_eq!(producer["compression.type"], "zstd");
    assert!(!producer.contains_key("acks"));
    assert_eq!(a.client_config(Admin)["bootstrap.servers"], "h:1,h:2");
    let b = &p.clusters["b"];
    assert_eq!(
        b.bootstrap, "fallback:1",
        "top-level bootstrap.servers is a fallback"
    );
    let b = b.client_config(Admin);
    assert_eq!(
        b["security.protocol"], "SSL",
        "the cluster's own setting wins"
    );
    assert_eq!(b["sasl.mechanism"], "SCRAM-SHA-512");
    assert_eq!(b["sasl.password"], "pw-from-file");
    assert_eq!(b["ssl.ca.location"], "/t.pem");
    assert_eq!(b["ssl.endpoint.identification.algorithm"], "none");
    assert!(!format!("{p:?}").contains("pw-from-file"));
}

#[test]
fn kafkas_sample_config_converts_cleanly() {
    // config/connect-mirror-maker.properties as shipped with Apache Kafka.
    let text = "clusters = A, B\nA.bootstrap.servers = A_host1:9092, A_host2:9092, A_host3:9092\n\
        B.bootstrap.servers = B_host1:9092, B_host2:9092, B_host3:9092\nreplication.factor=1\n\
        A->B.enabled = true\n# B->A.enabled = true\ncheckpoints.topic.replication.factor=1\n\
        heartbeats.topic.replication.factor=1\noffset-syncs.topic.replication.factor=1\n\
        offset.storage.replication.factor=1\nstatus.storage.replication.factor=1\n\
        config.storage.replication.factor=1\n";
    let p = load_text(text).unwrap();
    assert_eq!(p.flows[0].name(), "A->B");
    assert_eq!(p.flows[0].internal_replication_factor, 1);
    assert!(p.warnings.iter().all(|w| !w.contains("does not support")));
}

// Error messages (file, line, key) and the odd inputs are snapshots: tests/ui/mm2/ and
// tests/mm2_ui.rs.

#[test]
fn an_interval_past_the_maximum_names_the_property() {
    let err = load_text(&format!(
        "{TWO}offset.flush.interval.ms = 99999999999999999\n"
    ))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "mm2.properties:5: offset.flush.interval.ms: `99999999999999999ms` is longer than the maximum of 365 days (converted to `flow[0].commit_interval`)"
    );
}

#[test]
fn registry_urls_become_schema_registries_and_translation() {
    let text = format!(
        "{TWO}a.schema.registry.url = http://reg-a:8081\na.schema.registry.basic.auth.user.info = mirror:s3cret-reg\nb.schema.registry.url = https://reg-b:8081\n"
    );
    let converted = convert_text(&text).unwrap();
    assert!(
        converted.toml.contains("[clusters.a.schema_registry]"),
        "{}",
        converted.toml
    );
    assert!(!format!("{converted:?}").contains("s3cret-reg"));
    let p = load_text(&text).unwrap();
    let a = p.clusters["a"].schema_registry.as_ref().unwrap();
    assert_eq!(a.url, "http://reg-a:8081");
    assert_eq!(a.basic_auth(), Some(("mirror", "s3cret-reg")));
    assert_eq!(
        p.clusters["b"].schema_registry.as_ref().unwrap().url,
        "https://reg-b:8081"
    );
    assert!(p.flows[0].schemas.translate());
    assert!(
        converted
            .notes
            .iter()
            .any(|n| n.contains("schemas = \"translate\"")),
        "{:?}",
        converted.notes
    );

    // One registry: no translation (it needs both).
    let one = format!("{TWO}a.schema.registry.url = http://reg-a:8081\n");
    let p = load_text(&one).unwrap();
    assert!(p.clusters["a"].schema_registry.is_some());
    assert!(!p.flows[0].schemas.translate());
}
