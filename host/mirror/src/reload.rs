//! A reload planned as data, then applied: [`plan`] compares what runs with what the new
//! pipeline wants and returns a [`FlowDiff`] — which flows to remove, rebuild, hand new plugins,
//! stop writing reverse heartbeats, or add — or refuses a change that cannot apply while running ([`NotLive`]). It reads no file
//! and touches no cluster; [`crate::Mirror::reload`] loads the plugins the diff needs and applies
//! it in steps.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use refract_config::{Cluster, Flow, Pipeline};

/// Content hash per plugin file a flow loads.
pub type PluginHashes = Vec<(PathBuf, u64)>;

/// Everything a running flow was built from: if any of it changes, the flow is rebuilt.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowShape {
    /// The flow's settings.
    pub flow: Flow,
    /// Its source cluster.
    pub source: Cluster,
    /// Its target cluster.
    pub target: Cluster,
    /// Derived from the other flows: it also writes the reverse pair's heartbeats (no flow runs
    /// the other way).
    pub reverse_heartbeats: bool,
    /// Its plugin files' contents: a change alone swaps plugins, without a rebuild.
    pub plugins: PluginHashes,
}

impl FlowShape {
    /// The flow's name (`source->target`).
    pub fn name(&self) -> String {
        self.flow.name()
    }

    /// Whether `other` needs this flow rebuilt: its settings or clusters changed, or it must
    /// start writing the reverse heartbeats (that needs a producer on the source). Stopping
    /// them, and new plugin file contents, apply live.
    fn rebuilt_by(&self, other: &FlowShape) -> bool {
        // The read rate limits apply live.
        let same_but_throttle = Flow {
            throttle: other.flow.throttle,
            ..self.flow.clone()
        };
        same_but_throttle != other.flow
            || self.source != other.source
            || self.target != other.target
            || (!self.reverse_heartbeats && other.reverse_heartbeats)
    }
}

/// What the planner compares: the pipeline settings that cannot change live, and each flow.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineShape {
    /// `[metrics] listen`.
    pub metrics_listen: Option<SocketAddr>,
    /// `[metrics]`'s reload access, HTTPS files and allowed hosts.
    pub endpoint: refract_config::Endpoint,
    /// `[cluster]`.
    pub cluster: Option<refract_config::ClusterMode>,
    /// The flows this process runs.
    pub flows: Vec<FlowShape>,
}

impl PipelineShape {
    /// The shape of `flows` of `pipeline` (those this process runs), hashing plugin files with
    /// `hash`.
    pub fn of(pipeline: &Pipeline, flows: &[&Flow], hash: impl Fn(&Path) -> u64) -> Self {
        Self {
            metrics_listen: pipeline.metrics_listen,
            endpoint: pipeline.endpoint.clone(),
            cluster: pipeline.cluster.clone(),
            flows: flows
                .iter()
                .map(|f| flow_shape(pipeline, f, &hash))
                .collect(),
        }
    }
}

/// The shape of one flow of `pipeline`.
pub fn flow_shape(pipeline: &Pipeline, flow: &Flow, hash: impl Fn(&Path) -> u64) -> FlowShape {
    // MM2 runs a heartbeat connector for every cluster pair; a flow emits the reverse pair's
    // heartbeats unless another flow of the pipeline runs in that direction.
    let reverse_heartbeats = !pipeline
        .flows
        .iter()
        .any(|f| f.source == flow.target && f.target == flow.source);
    FlowShape {
        flow: flow.clone(),
        source: pipeline.clusters[&flow.source].clone(),
        target: pipeline.clusters[&flow.target].clone(),
        reverse_heartbeats,
        plugins: plugin_files(flow)
            .into_iter()
            .map(|p| {
                let h = hash(&p);
                (p, h)
            })
            .collect(),
    }
}

/// The plugin files a flow uses.
pub fn plugin_files(flow: &Flow) -> Vec<PathBuf> {
    std::iter::once(&flow.policy)
        .chain(flow.processors.iter().map(|p| &p.plugin))
        .filter_map(|spec| match &spec.location {
            refract_config::PluginLocation::File(path) => Some(path.clone()),
            refract_config::PluginLocation::Builtin(_) => None,
        })
        .collect()
}

/// What a reload changes, by flow name, each list in pipeline order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FlowDiff {
    /// Running flows the new pipeline does not have: stopped (progress committed).
    pub remove: Vec<String>,
    /// Flows whose settings, clusters or derived inputs changed: stopped and started again from
    /// their committed progress.
    pub rebuild: Vec<String>,
    /// Flows where only plugin files changed: new plugins swapped in between two batches.
    pub swap_plugins: Vec<String>,
    /// Flows that stop writing the reverse pair's heartbeats, live (a flow in the other
    /// direction now writes them): nothing else of theirs changed.
    pub stop_reverse_heartbeats: Vec<String>,
    /// Flows whose read rate limits (`max_bytes_per_second`, `max_records_per_second`)
    /// changed, live: nothing else of theirs changed.
    pub retune: Vec<String>,
    /// New flows: started.
    pub add: Vec<String>,
}

impl FlowDiff {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty()
            && self.rebuild.is_empty()
            && self.swap_plugins.is_empty()
            && self.stop_reverse_heartbeats.is_empty()
            && self.retune.is_empty()
            && self.add.is_empty()
    }
}

/// A change the running process cannot apply: the whole reload is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotLive {
    /// The metrics endpoint's address.
    #[error(
        "[metrics] listen changed from {old} to {new}: the HTTP endpoint cannot move while \
         refract runs; restart refract to apply it"
    )]
    MetricsListen {
        /// As it runs.
        old: String,
        /// As the new pipeline says.
        new: String,
    },
    /// The endpoint's access and HTTPS settings (the certificate files' contents are re-read
    /// on change; their paths are not).
    #[error(
        "[metrics] reload, reload_token, tls_cert, tls_key or allowed_hosts changed: the HTTP \
         endpoint keeps the settings it started with; restart refract to apply them (a \
         renewed certificate in the same files needs no restart)"
    )]
    Endpoint,
    /// Cluster mode's settings.
    #[error(
        "[cluster] changed: a process cannot join or leave cluster mode, or change its instance \
         name or session timeout, while it runs; restart refract to apply it (one process at a \
         time, so the others take its tasks over meanwhile)"
    )]
    Cluster,
}

/// What turning `old` (running) into `new` (wanted) takes.
pub fn plan(old: &PipelineShape, new: &PipelineShape) -> Result<FlowDiff, NotLive> {
    if old.metrics_listen != new.metrics_listen {
        let show = |a: &Option<SocketAddr>| a.map_or_else(|| "none".to_string(), |a| a.to_string());
        return Err(NotLive::MetricsListen {
            old: show(&old.metrics_listen),
            new: show(&new.metrics_listen),
        });
    }
    if old.endpoint != new.endpoint {
        return Err(NotLive::Endpoint);
    }
    if old.cluster != new.cluster {
        return Err(NotLive::Cluster);
    }
    let mut diff = FlowDiff::default();
    for running in &old.flows {
        match new.flows.iter().find(|w| w.name() == running.name()) {
            None => diff.remove.push(running.name()),
            Some(wanted) if running.rebuilt_by(wanted) => diff.rebuild.push(running.name()),
            Some(wanted) => {
                if running.plugins != wanted.plugins {
                    diff.swap_plugins.push(running.name());
                }
                if running.reverse_heartbeats && !wanted.reverse_heartbeats {
                    diff.stop_reverse_heartbeats.push(running.name());
                }
                if running.flow.throttle != wanted.flow.throttle {
                    diff.retune.push(running.name());
                }
            }
        }
    }
    for wanted in &new.flows {
        if !old.flows.iter().any(|r| r.name() == wanted.name()) {
            diff.add.push(wanted.name());
        }
    }
    Ok(diff)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipeline of clusters a, b, c and `flows` (TOML `[[flow]]` tables).
    fn pipeline(flows: &str, metrics: &str) -> Pipeline {
        let text = format!(
            "{metrics}[clusters.a]\nbootstrap = \"a:9092\"\n[clusters.b]\nbootstrap = \"b:9092\"\n\
             [clusters.c]\nbootstrap = \"c:9092\"\n{flows}"
        );
        // The pipeline's folder holds `policy.wasm` (its contents do not matter: the planner
        // takes the hash it is given).
        let dir = std::env::temp_dir().join(format!("refract-reload-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("policy.wasm"), b"not read").expect("plugin file");
        Pipeline::parse(&dir.join("pipeline.toml"), &text).expect("valid pipeline")
    }

    fn shape(flows: &str, metrics: &str, hash: u64) -> PipelineShape {
        let p = pipeline(flows, metrics);
        let all: Vec<&Flow> = p.flows.iter().collect();
        PipelineShape::of(&p, &all, |_| hash)
    }

    const AB: &str = "[[flow]]\nsource = \"a\"\ntarget = \"b\"\n";
    const BA: &str = "[[flow]]\nsource = \"b\"\ntarget = \"a\"\n";
    const AC: &str = "[[flow]]\nsource = \"a\"\ntarget = \"c\"\n";
    const AB_FILE: &str =
        "[[flow]]\nsource = \"a\"\ntarget = \"b\"\npolicy = { plugin = \"policy.wasm\" }\n";

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// (case, old flows, new flows, old hash, new hash, remove, rebuild, swap, add)
    type Case<'a> = (
        &'a str,
        String,
        String,
        u64,
        u64,
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
    );

    #[test]
    fn a_reverse_flow_added_stops_the_reverse_heartbeats_live() {
        let diff = plan(&shape(AB, "", 1), &shape(&format!("{AB}{BA}"), "", 1)).expect("plan");
        assert_eq!(diff.stop_reverse_heartbeats, names(&["a->b"]));
        assert!(diff.rebuild.is_empty());
    }

    #[test]
    fn plans_by_table() {
        let ab_slow = AB.to_string() + "commit_interval = \"9s\"\n";
        let cases: Vec<Case> = vec![
            ("unchanged", AB.into(), AB.into(), 1, 1, &[], &[], &[], &[]),
            (
                "added",
                AB.into(),
                format!("{AB}{AC}"),
                1,
                1,
                &[],
                &[],
                &[],
                &["a->c"],
            ),
            (
                "removed",
                format!("{AB}{AC}"),
                AC.into(),
                1,
                1,
                &["a->b"],
                &[],
                &[],
                &[],
            ),
            (
                "a setting changed",
                AB.into(),
                ab_slow,
                1,
                1,
                &[],
                &["a->b"],
                &[],
                &[],
            ),
            (
                "plugin file changed",
                AB_FILE.into(),
                AB_FILE.into(),
                1,
                2,
                &[],
                &[],
                &["a->b"],
                &[],
            ),
            (
                "builtin policy: no file to change",
                AB.into(),
                AB.into(),
                1,
                2,
                &[],
                &[],
                &[],
                &[],
            ),
            // Adding b->a takes the reverse heartbeats away from a->b, live (next test);
            // removing it gives them back, which needs a producer on a: a->b is rebuilt.
            (
                "reverse flow added",
                AB.into(),
                format!("{AB}{BA}"),
                1,
                1,
                &[],
                &[],
                &[],
                &["b->a"],
            ),
            (
                "reverse flow removed",
                format!("{AB}{BA}"),
                AB.into(),
                1,
                1,
                &["b->a"],
                &["a->b"],
                &[],
                &[],
            ),
        ];
        for (case, old, new, h_old, h_new, remove, rebuild, swap, add) in cases {
            let diff = plan(&shape(&old, "", h_old), &shape(&new, "", h_new)).expect(case);
            assert_eq!(
                diff,
                FlowDiff {
                    remove: names(remove),
                    rebuild: names(rebuild),
                    swap_plugins: names(swap),
                    add: names(add),
                    stop_reverse_heartbeats: diff.stop_reverse_heartbeats.clone(),
                    retune: Vec::new(),
                },
                "{case}"
            );
        }
    }

    #[test]
    fn read_rate_limits_change_live_and_other_settings_still_rebuild() {
        let limited = AB.to_string() + "max_bytes_per_second = \"2MiB\"\n";
        let faster =
            AB.to_string() + "max_bytes_per_second = 4000000\nmax_records_per_second = 10\n";
        let diff = plan(&shape(AB, "", 1), &shape(&limited, "", 1)).expect("plan");
        assert_eq!(diff.retune, names(&["a->b"]));
        assert!(diff.rebuild.is_empty() && diff.swap_plugins.is_empty());
        let diff = plan(&shape(&limited, "", 1), &shape(&faster, "", 1)).expect("plan");
        assert_eq!(diff.retune, names(&["a->b"]));
        let slower_commits = faster.clone() + "commit_interval = \"9s\"\n";
        let diff = plan(&shape(&limited, "", 1), &shape(&slower_commits, "", 1)).expect("plan");
        assert_eq!(diff.rebuild, names(&["a->b"]));
        assert!(diff.retune.is_empty());
    }

    #[test]
    fn an_endpoint_setting_cannot_change_live() {
        let old = shape(AB, "[metrics]\nlisten = \"127.0.0.1:9464\"\n", 1);
        let new = shape(
            AB,
            "[metrics]\nlisten = \"127.0.0.1:9464\"\nreload = false\n",
            1,
        );
        assert_eq!(plan(&old, &new).expect_err("refused"), NotLive::Endpoint);
    }

    #[test]
    fn a_cluster_change_rebuilds_the_flows_that_use_it() {
        let old = shape(&format!("{AB}{AC}"), "", 1);
        let mut new = old.clone();
        new.flows[1].target = pipeline(
            &format!("[clusters.c.client]\n\"client.rack\" = \"r2\"\n{AB}{AC}"),
            "",
        )
        .clusters["c"]
            .clone();
        let diff = plan(&old, &new).expect("plan");
        assert_eq!(diff.rebuild, names(&["a->c"]));
        assert!(diff.remove.is_empty() && diff.add.is_empty());
    }

    #[test]
    fn the_metrics_endpoint_cannot_move_live() {
        let old = shape(AB, "[metrics]\nlisten = \"127.0.0.1:9464\"\n", 1);
        let new = shape(AB, "[metrics]\nlisten = \"127.0.0.1:9465\"\n", 1);
        let err = plan(&old, &new).expect_err("refused");
        assert_eq!(
            err,
            NotLive::MetricsListen {
                old: "127.0.0.1:9464".into(),
                new: "127.0.0.1:9465".into()
            }
        );
        assert!(err.to_string().contains("restart refract"), "{err}");
        assert!(plan(&old, &shape(AB, "", 1)).is_err(), "removing it too");
        assert!(plan(&old, &old).expect("same").is_empty());
    }
}
