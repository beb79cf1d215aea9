//! The report of `refract check --connect`: connects to every cluster the flows use, asks each
//! for what the flows need, and prints one line per need and a verdict per flow.

use std::collections::BTreeMap;

use anyhow::Result;

use refract_config::{DeliveryMode, Pipeline};
use refract_kafka::connect::{ConnectError, CONNECT_TIMEOUT};

use super::evaluation::{evaluate, transactions, Session};
use super::hints::shell;
use super::needs::{flow_needs, Need};
use crate::PreparedFlow;

/// One answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    Yes,
    No,
    Warn,
    Unknown,
}

impl Mark {
    pub(super) fn text(self) -> &'static str {
        match self {
            Mark::Yes => "yes ",
            Mark::No => "no  ",
            Mark::Warn => "warn",
            Mark::Unknown => "?   ",
        }
    }
}

/// The outcome of [`check_connect`]: the report and whether every flow can run.
pub struct Report {
    /// Human-readable lines.
    pub lines: Vec<String>,
    /// Whether every flow can run (missing features are warnings, not failures).
    pub all_flows_can_run: bool,
}

/// Connects to every cluster the flows use and checks what each flow needs there.
pub fn check_connect(pipeline: &Pipeline, flows: &[PreparedFlow]) -> Result<Report> {
    let mut aliases: Vec<&str> = Vec::new();
    for p in flows {
        for alias in [&p.flow.source, &p.flow.target] {
            if !aliases.contains(&alias.as_str()) {
                aliases.push(alias);
            }
        }
    }
    let mut sessions: BTreeMap<String, Result<Session, ConnectError>> = BTreeMap::new();
    for alias in &aliases {
        let cluster = pipeline
            .clusters
            .get(*alias)
            .ok_or_else(|| anyhow::anyhow!("flow names unknown cluster {alias}"))?;
        let mut session = Session::connect(cluster, CONNECT_TIMEOUT);
        if let Ok(s) = session.as_mut() {
            s.detect_authorizer();
        }
        sessions.insert(alias.to_string(), session);
    }
    // Needs per cluster, in flow order.
    let mut needs: BTreeMap<String, Vec<(Need, i32)>> = BTreeMap::new();
    for p in flows {
        let source = sessions.get(&p.flow.source).and_then(|s| s.as_ref().ok());
        let has_reverse = pipeline
            .flows
            .iter()
            .any(|f| f.source == p.flow.target && f.target == p.flow.source);
        let (on_source, on_target) =
            flow_needs(p, source, has_reverse, pipeline.cluster.is_some())?;
        let rf_remote = p.flow.replication_factor;
        let rf_internal = p.flow.internal_replication_factor;
        for (alias, list) in [(&p.flow.source, on_source), (&p.flow.target, on_target)] {
            let entry = needs.entry(alias.clone()).or_default();
            for n in list {
                let rf = if n.why == "remote topic" || n.why == "dead-letter topic" {
                    rf_remote
                } else {
                    rf_internal
                };
                entry.push((n, rf));
            }
        }
    }
    let mut lines = Vec::new();
    let mut failed_flows: BTreeMap<String, usize> = BTreeMap::new();
    let mut warned_flows: BTreeMap<String, usize> = BTreeMap::new();
    for alias in &aliases {
        let Some(session) = sessions.get_mut(*alias) else {
            continue;
        };
        let session = match session {
            Ok(s) => s,
            Err(e) => {
                lines.push(e.to_string());
                for p in flows {
                    if p.flow.source == *alias || p.flow.target == *alias {
                        *failed_flows.entry(p.flow.name()).or_default() += 1;
                    }
                }
                continue;
            }
        };
        lines.push(session.header());
        match session.authorizer {
            Some(false) => lines.push("  no authorizer (or a super user): all allowed".to_string()),
            Some(true) => {}
            None => lines.push("  could not tell whether the broker has an authorizer".to_string()),
        }
        for p in flows.iter().filter(|p| {
            p.flow.target == *alias && p.flow.delivery.mode == DeliveryMode::ExactlyOnce
        }) {
            let name = p.flow.name();
            match transactions(session, CONNECT_TIMEOUT) {
                Ok(text) => lines.push(format!(
                    "  {} {text} (flow {name}: exactly-once)",
                    Mark::Yes.text()
                )),
                Err(why) => {
                    *failed_flows.entry(name.clone()).or_default() += 1;
                    lines.push(format!(
                        "  {} cluster {alias} cannot run transactions: {why} (flow {name}: exactly-once; use delivery = \"at-least-once\" towards it)",
                        Mark::No.text()
                    ));
                }
            }
            if !session.unrestricted() {
                // One id per task: `refract-a-b` for one task, `refract-a-b-<task>` for several
                // (a prefixed grant covers them all).
                let whole = crate::transactional_id(&p.flow, crate::TaskId::WHOLE);
                let (what, pattern) = if p.flow.tasks > 1 {
                    (
                        format!(
                            "transactional ids {whole}-0 .. {whole}-{}",
                            p.flow.tasks - 1
                        ),
                        " --resource-pattern-type prefixed",
                    )
                } else {
                    (format!("transactional id {whole}"), "")
                };
                lines.push(format!(
                    "  {} Write, Describe {what} (flow {name}: exactly-once; Kafka cannot be asked whether it is granted; if not: kafka-acls --bootstrap-server {} --add --allow-principal {} --operation Write --operation Describe --transactional-id {}{pattern})",
                    Mark::Unknown.text(),
                    shell(&session.conn.bootstrap),
                    shell(&session.conn.principal.name),
                    shell(&whole)
                ));
            }
        }
        let list = needs.remove(*alias).unwrap_or_default();
        if session.unrestricted() {
            continue;
        }
        for (need, rf) in list {
            let answer = evaluate(session, &need, rf);
            match answer.mark {
                Mark::No => *failed_flows.entry(need.flow.clone()).or_default() += 1,
                Mark::Warn => *warned_flows.entry(need.flow.clone()).or_default() += 1,
                _ => {}
            }
            lines.push(format!("  {} {}", answer.mark.text(), answer.text));
        }
    }
    for p in flows.iter().filter(|p| p.flow.schemas.translate()) {
        let name = p.flow.name();
        for alias in [&p.flow.source, &p.flow.target] {
            let Some(config) = pipeline
                .clusters
                .get(alias)
                .and_then(|c| c.schema_registry.as_ref())
            else {
                continue;
            };
            let answer = refract_schema::RegistryClient::new(alias, config)
                .map_err(|e| format!("{e:#}"))
                .and_then(|client| client.probe().map_err(|e| e.to_string()));
            match answer {
                Ok(subjects) => lines.push(format!(
                    "  {} cluster {alias}'s schema registry {} answers ({subjects} subjects) (flow {name}: schemas = \"translate\"{})",
                    Mark::Yes.text(),
                    config.url_shown(),
                    if *alias == p.flow.target {
                        "; registering schemas there cannot be probed without writing"
                    } else {
                        ""
                    }
                )),
                Err(why) => {
                    *failed_flows.entry(name.clone()).or_default() += 1;
                    lines.push(format!(
                        "  {} {why} (flow {name}: schemas = \"translate\")",
                        Mark::No.text()
                    ));
                }
            }
        }
    }
    for p in flows {
        let name = p.flow.name();
        let line = match (failed_flows.get(&name), warned_flows.get(&name)) {
            (Some(n), _) => format!("flow {name}: cannot run ({n} problem(s) above)"),
            (None, Some(n)) => format!("flow {name}: can run; {n} feature(s) off (warnings above)"),
            (None, None) => format!("flow {name}: can run"),
        };
        lines.push(line);
        if pipeline.cluster.is_none() {
            if let Some(Ok(session)) = sessions.get(&p.flow.source) {
                lines.push(format!("  {}", running_now(session, &p.flow)));
            }
        }
    }
    Ok(Report {
        lines,
        all_flows_can_run: failed_flows.is_empty(),
    })
}

/// Who runs `flow` now, as its source's groups show (outside cluster mode a second process
/// waits on standby for the first, see `membership::solo`).
fn running_now(session: &Session, flow: &refract_config::Flow) -> String {
    let group = crate::membership::solo_group(flow);
    match crate::membership::others_running(
        &session.conn.admin,
        flow,
        refract_config::names::CHECK_CLIENT,
    ) {
        Ok(others) if others.is_empty() => format!(
            "running: no refract process runs it now (group {group}: a second process on this pipeline without [cluster] waits on standby for the first)"
        ),
        Ok(others) => format!(
            "running: run now by {} (group {group}): a process started on this pipeline waits on standby until it stops",
            others
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(e) => format!(
            "running: cannot tell whether a refract process runs it now ({e}); a second process would then not wait for the first"
        ),
    }
}
