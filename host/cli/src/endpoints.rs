//! What the `[metrics] listen` HTTP endpoint answers for a running mirror.

use std::sync::Arc;

use refract_mirror::Mirror;
use refract_telemetry::http::Endpoints;
use serde_json::{json, Value};

/// The endpoints of one running mirror.
pub struct MirrorEndpoints(pub Arc<Mirror>);

/// The mirror's state as JSON: what `/status` returns and `refract status` prints.
pub fn status_json(mirror: &Mirror) -> Value {
    let flows: Vec<Value> = mirror
        .status()
        .into_iter()
        .map(|(name, s)| {
            json!({
                "flow": name,
                "state": s.state,
                "topics": s.routes,
                "records_sent": s.records_sent,
                "records_dropped": s.records_dropped,
                "records_skipped": s.records_skipped,
                "records_dead_lettered": s.records_dead_lettered,
                "records_looped": s.records_looped,
                "duplicates_on_start": s.duplicates,
                "restarts": s.restarts,
                "plugin_swaps": s.plugin_swaps,
                "offset_syncs": s.offset_syncs,
                "checkpoints": s.checkpoints,
                "heartbeats": s.heartbeats,
                "group_offsets_synced": s.group_offsets_synced,
                "lag": s.lag,
                "halted": s.halted,
                "last_error": s.last_error,
            })
        })
        .collect();
    let reloads = mirror.reload_stats();
    json!({
        "healthy": mirror.healthy(),
        "flows": flows,
        "reloads": { "ok": reloads.ok, "rejected": reloads.rejected, "last_error": reloads.last_error },
    })
}

impl Endpoints for MirrorEndpoints {
    fn metrics(&self) -> String {
        self.0.metrics().render()
    }

    fn health(&self) -> (bool, String) {
        let lines: Vec<String> = self
            .0
            .status()
            .into_iter()
            .map(|(name, s)| format!("{name}: {}", s.state))
            .collect();
        (self.0.healthy(), lines.join("\n") + "\n")
    }

    fn reload(&self) -> (bool, String) {
        match self.0.reload() {
            Ok(summary) => (true, format!("reloaded: {summary}\n")),
            Err(e) => (false, format!("rejected, nothing changed: {e:#}\n")),
        }
    }

    fn status(&self) -> String {
        status_json(&self.0).to_string()
    }
}
