//! The pipeline in `examples/deploy/kubernetes/configmap.yaml` is one refract accepts: cluster
//! mode, its instance from the pod name, tasks, and secrets from the files and variables the
//! Deployment provides (here: files in a temp folder with the same names).

use std::path::Path;

use refract_config::Pipeline;

/// The `pipeline.toml: |` block scalar of the ConfigMap, unindented.
fn configmap_pipeline(yaml: &str) -> String {
    let mut lines = yaml
        .lines()
        .skip_while(|l| !l.trim_end().ends_with("pipeline.toml: |"));
    lines.next();
    let block: Vec<&str> = lines
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .collect();
    block
        .iter()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_kubernetes_example_pipeline_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let yaml = std::fs::read_to_string(root.join("examples/deploy/kubernetes/configmap.yaml"))
        .expect("configmap.yaml");
    let dir = tempfile::tempdir().expect("temp dir");
    let text = configmap_pipeline(&yaml);
    assert!(text.contains("[cluster]"), "{text}");
    // The Secret's files, where the pipeline reads them.
    let secrets = dir.path().join("secrets");
    std::fs::create_dir_all(&secrets).expect("secrets dir");
    for name in ["primary-password", "backup-password"] {
        std::fs::write(secrets.join(name), "pw\n").expect("secret file");
    }
    std::fs::write(
        secrets.join("reload-token"),
        "CHANGE-ME-reload-token-at-least-16-characters\n",
    )
    .expect("token file");
    let text = text.replace("/etc/refract/secrets/", &format!("{}/", secrets.display()));
    std::env::set_var("POD_NAME", "refract-6c9f7b-x2x4q");
    std::env::set_var("MIRROR_USERNAME", "mirror");
    let p = Pipeline::parse(&dir.path().join("pipeline.toml"), &text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let cluster = p.cluster.expect("cluster mode");
    assert_eq!(cluster.instance.as_deref(), Some("refract-6c9f7b-x2x4q"));
    assert_eq!(p.flows.len(), 1);
    assert!(p.flows[0].tasks > 1);
    assert_eq!(p.metrics_listen.map(|a| a.port()), Some(9464));
    // POST /reload needs the Secret's token; the headless Service's names are allowed hosts.
    assert_eq!(
        p.endpoint.reload,
        refract_config::ReloadAccess::Token("CHANGE-ME-reload-token-at-least-16-characters".into())
    );
    assert!(p
        .endpoint
        .allowed_hosts
        .contains(&"refract-metrics.refract.svc".to_string()));
}
