//! What the `[metrics] listen` HTTP endpoint answers for a running mirror.

use std::sync::{Arc, OnceLock};

use refract_mirror::{DegradedPartition, LostRecords, Mirror};
use refract_telemetry::http::{Endpoints, Options, ReloadAccess, TlsFiles};
use serde_json::{json, Value};

/// The endpoints of one mirror: served from before it starts (then `/health` is 503
/// `starting`), so a bad `[metrics]` setting stops refract before any flow runs.
#[derive(Default)]
pub struct MirrorEndpoints(OnceLock<Arc<Mirror>>);

impl MirrorEndpoints {
    /// The mirror is running: the endpoints answer for it from now on.
    pub fn serve(&self, mirror: Arc<Mirror>) {
        let _ = self.0.set(mirror);
    }
}

/// What the endpoint serves and who may reload, from `[metrics]`.
pub fn options(endpoint: &refract_config::Endpoint) -> Options {
    Options {
        reload: match &endpoint.reload {
            refract_config::ReloadAccess::Disabled => ReloadAccess::Disabled,
            refract_config::ReloadAccess::Open => ReloadAccess::Open,
            refract_config::ReloadAccess::Token(t) => ReloadAccess::Token(t.clone()),
            refract_config::ReloadAccess::Closed => ReloadAccess::Closed,
        },
        tls: endpoint
            .tls
            .as_ref()
            .map(|t| TlsFiles::new(&t.cert, &t.key)),
        allowed_hosts: endpoint.allowed_hosts.clone(),
    }
}

/// One degraded partition as `/status` shows it.
fn degraded_json(d: &DegradedPartition) -> Value {
    json!({
        "topic": d.topic,
        "remote_topic": d.remote_topic,
        "partition": d.partition,
        "reason": d.reason,
        "error": d.error,
        "since_ms": d.since_ms,
        "retries": d.retries,
        "offset": d.offset,
    })
}

/// One gap of records the source deleted before they were mirrored, as `/status` shows it.
fn lost_json(l: &LostRecords) -> Value {
    json!({
        "topic": l.topic,
        "remote_topic": l.remote_topic,
        "partition": l.partition,
        "first": l.first,
        "last": l.last,
        "count": l.count(),
        "since_ms": l.since_ms,
    })
}

/// The `/health` body: a line per flow with its state, then a line per unreachable cluster,
/// stall, checkpoint failure and degraded partition.
pub fn health_text(flows: &[(String, refract_mirror::FlowStatus)]) -> String {
    let mut out = String::new();
    for (name, s) in flows {
        out.push_str(&format!("{name}: {}\n", s.state.as_str()));
    }
    for (name, s) in flows {
        for u in &s.unreachable {
            out.push_str(&format!("flow {name} degraded: {}\n", u.summary()));
        }
        if let Some(why) = &s.stalled {
            out.push_str(&format!("flow {name} stalled: {why}\n"));
        }
        if let Some(why) = &s.checkpoints_failing {
            out.push_str(&format!("flow {name} checkpoints failing: {why}\n"));
        }
        for d in &s.degraded {
            out.push_str(&format!("flow {name} degraded: {}\n", d.summary()));
        }
    }
    out
}

/// The mirror's state as JSON: what `/status` returns and `refract status` prints.
pub fn status_json(mirror: &Mirror) -> Value {
    let flows: Vec<Value> = mirror
        .status()
        .iter()
        .map(|(name, s)| flow_json(name, s))
        .collect();
    let reloads = mirror.reload_stats();
    json!({
        "healthy": mirror.healthy(),
        "flows": flows,
        "reloads": { "ok": reloads.ok, "rejected": reloads.rejected, "last_error": reloads.last_error },
    })
}

/// One flow's part of `/status`.
pub fn flow_json(name: &str, s: &refract_mirror::FlowStatus) -> Value {
    json!({
        "flow": name,
        "state": s.state.as_str(),
        "topics": s.routes,
        "records_sent": s.records_sent,
        "records_filtered": s.records_filtered,
        "records_skipped": s.records_skipped,
        "records_dead_lettered": s.records_dead_lettered,
        "records_looped": s.records_looped,
        "records_lost": s.records_lost,
        "lost": s.lost.iter().map(lost_json).collect::<Vec<_>>(),
        "transactions_committed": s.transactions_committed,
        "transactions_aborted": s.transactions_aborted,
        "throttled_ms": s.throttled_ms,
        "duplicates_on_start": s.duplicates,
        "restarts": s.restarts,
        "plugin_swaps": s.plugin_swaps,
        "offset_syncs": s.offset_syncs,
        "checkpoints": s.checkpoints,
        "heartbeats": s.heartbeats,
        "group_offsets_synced": s.group_offsets_synced,
        "lag": s.lag,
        "lag_unknown": s.lag_unknown,
        "unreachable": s.unreachable.iter().map(|u| json!({
            "cluster": u.cluster,
            "role": u.side.as_str(),
            "bootstrap": u.bootstrap,
            "cause": u.cause,
            "since_ms": u.since_ms,
        })).collect::<Vec<_>>(),
        "stalled": s.stalled,
        "checkpoints_failing": s.checkpoints_failing,
        "degraded": s.degraded.iter().map(degraded_json).collect::<Vec<_>>(),
        "halted": s.halted,
        "last_error": s.last_error,
        "tasks": s.tasks,
        "partitions": s.partitions,
        "cluster": s.cluster.as_ref().map(cluster_json),
        "held_elsewhere": s.held_elsewhere,
        "schemas": s.schemas.as_ref().map(schemas_json),
    })
}

/// A flow's schema-id translation in `/status`.
fn schemas_json(v: &refract_mirror::SchemaView) -> Value {
    json!({
        "source_registry": v.source_registry,
        "target_registry": v.target_registry,
        "translated": v.stats.translated,
        "registered": v.stats.registered,
        "synced_subjects": v.stats.synced_subjects,
        "last_error": v.stats.last_error,
        "source_down": v.source_down,
        "target_down": v.target_down,
    })
}

/// Cluster mode's part of a flow's status: the group, this process, and every member with
/// the tasks it holds, their partitions and lag.
fn cluster_json(c: &refract_mirror::ClusterView) -> Value {
    json!({
        "group": c.group,
        "instance": c.instance,
        "duties": c.duties,
        "rebalances": c.rebalances,
        "last_handover_ms": c.last_handover_ms,
        "error": c.error,
        "members_error": c.members_error,
        "members": c.members.iter().map(|m| json!({
            "instance": m.instance,
            "host": m.host,
            "tasks": m.tasks,
            "partitions": m.partitions,
            "lag": m.lag,
        })).collect::<Vec<_>>(),
    })
}

impl Endpoints for MirrorEndpoints {
    fn metrics(&self) -> String {
        self.0
            .get()
            .map(|m| m.metrics().render())
            .unwrap_or_default()
    }

    fn health(&self) -> (bool, String) {
        match self.0.get() {
            Some(m) => (m.healthy(), health_text(&m.status())),
            None => (false, "starting\n".to_string()),
        }
    }

    fn reload(&self, detailed: bool) -> (bool, String) {
        let Some(mirror) = self.0.get() else {
            return (
                false,
                "refract is still starting: nothing to reload yet\n".into(),
            );
        };
        match mirror.reload() {
            Ok(summary) => (true, format!("reloaded: {summary}\n")),
            // Only the token holder sees the error chain (file names, settings); anyone else
            // learns the outcome, and the log has the rest.
            Err(e) if detailed => (false, format!("rejected, nothing changed: {e:#}\n")),
            Err(_) => (
                false,
                "rejected, nothing changed: the reason is in refract's log\n".to_string(),
            ),
        }
    }

    fn status(&self) -> String {
        match self.0.get() {
            Some(m) => status_json(m).to_string(),
            None => json!({"healthy": false, "starting": true, "flows": []}).to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use refract_mirror::FlowStatus;
    use std::io::{Read, Write};

    /// The status and body of `POST /reload` (with `headers`) on `server`, asked on loopback.
    fn post_reload(server: &refract_telemetry::http::Server, headers: &str) -> (u16, String) {
        let port = server.local_addr().port();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        write!(
            s,
            "POST /reload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}\r\n"
        )
        .unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        (head[9..12].parse().unwrap(), body.to_owned())
    }

    /// From the pipeline file to the answer: a pipeline listening on every interface that says
    /// nothing about reloading refuses `POST /reload` with 403 naming the keys that open it;
    /// `reload = true` or a token opens it (here the mirror has not started, so an admitted
    /// reload is 409 "still starting").
    #[test]
    fn a_non_loopback_listen_closes_reload_unless_the_pipeline_opens_it() {
        let flows = "[clusters.a]\nbootstrap = \"h:1\"\n[clusters.b]\nbootstrap = \"h:2\"\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";
        let token = "0123456789abcdef0";
        let cases = [
            ("", "", 403),
            ("reload = true\n", "", 409),
            (
                "reload_token = \"0123456789abcdef0\"\n",
                "Authorization: Bearer 0123456789abcdef0\r\n",
                409,
            ),
            ("reload_token = \"0123456789abcdef0\"\n", "", 401),
            ("reload = false\n", "", 404),
        ];
        for (metrics, headers, want) in cases {
            let text = format!("{flows}[metrics]\nlisten = \"0.0.0.0:0\"\n{metrics}");
            let pipeline =
                refract_config::Pipeline::parse_offline(std::path::Path::new("p.toml"), &text)
                    .unwrap();
            let listen = pipeline.metrics_listen.unwrap().to_string();
            let server = refract_telemetry::http::serve(
                &listen,
                Arc::new(MirrorEndpoints::default()),
                options(&pipeline.endpoint),
            )
            .unwrap();
            let (status, body) = post_reload(&server, headers);
            assert_eq!(status, want, "{metrics:?}: {body}");
            if want == 403 {
                assert!(
                    body.contains("[metrics] reload_token") && body.contains("reload = true"),
                    "{body}"
                );
            }
            assert!(!body.contains(token), "{body}");
        }
    }

    #[test]
    fn health_names_each_degraded_partition() {
        let degraded = DegradedPartition {
            topic: Some("big".into()),
            remote_topic: Some("a.big".into()),
            partition: Some(0),
            reason: "record_too_large",
            error: "Broker: Message size too large".into(),
            since_ms: 1,
            retries: 2,
            offset: Some(42),
        };
        let reads = DegradedPartition {
            topic: None,
            remote_topic: None,
            partition: None,
            reason: "fetch",
            error: "all brokers down".into(),
            since_ms: 1,
            retries: 0,
            offset: None,
        };
        let flows = vec![
            (
                "a->b".to_string(),
                FlowStatus {
                    state: refract_mirror::FlowState::Degraded,
                    degraded: vec![reads.clone(), degraded.clone()],
                    ..FlowStatus::default()
                },
            ),
            (
                "b->a".to_string(),
                FlowStatus {
                    state: refract_mirror::FlowState::Running,
                    ..FlowStatus::default()
                },
            ),
            (
                "a->c".to_string(),
                FlowStatus {
                    state: refract_mirror::FlowState::Degraded,
                    unreachable: vec![refract_mirror::watch::Unreachable {
                        cluster: "c".into(),
                        side: refract_config::Side::Target,
                        bootstrap: "h:9".into(),
                        cause: "Connection refused".into(),
                        since_ms: 1,
                    }],
                    stalled: Some(
                        "5 records behind and none acknowledged by cluster c for 61 s".into(),
                    ),
                    checkpoints_failing: Some("creating the admin client for c: refused".into()),
                    ..FlowStatus::default()
                },
            ),
        ];
        assert_eq!(
            health_text(&flows),
            "a->b: degraded\nb->a: running\na->c: degraded\n\
             flow a->b degraded: source reads fetch: all brokers down\n\
             flow a->b degraded: big[0] record_too_large: Broker: Message size too large (offset 42)\n\
             flow a->c degraded: cluster c (target, h:9) unreachable: Connection refused\n\
             flow a->c stalled: 5 records behind and none acknowledged by cluster c for 61 s\n\
             flow a->c checkpoints failing: creating the admin client for c: refused\n"
        );
        let json = degraded_json(&degraded);
        assert_eq!(
            json,
            json!({"topic": "big", "remote_topic": "a.big", "partition": 0,
                   "reason": "record_too_large", "error": "Broker: Message size too large",
                   "since_ms": 1, "retries": 2, "offset": 42})
        );
        assert_eq!(degraded_json(&reads)["topic"], Value::Null);
    }

    #[test]
    fn lost_records_show_their_partition_offsets_and_count() {
        let lost = LostRecords {
            topic: "orders".into(),
            remote_topic: "a.orders".into(),
            partition: 3,
            first: 100,
            last: 149,
            since_ms: 7,
        };
        assert_eq!(
            lost_json(&lost),
            json!({"topic": "orders", "remote_topic": "a.orders", "partition": 3,
                   "first": 100, "last": 149, "count": 50, "since_ms": 7})
        );
        assert_eq!(
            lost.to_string(),
            "orders[3]: 50 records lost (offsets 100..=149)"
        );
    }
}
