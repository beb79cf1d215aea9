//! Bad pipelines and bad plugins are rejected before anything starts, with errors that name the
//! file, line, key or plugin, and nothing is produced to the target.

use crate::support::*;

struct Case {
    name: &'static str,
    /// The second flow's TOML (the first flow is valid).
    flow: String,
    /// Every one of these must appear in the error.
    expect: Vec<String>,
}

fn cases() -> Vec<Case> {
    let rename = Refract::guest("rename.wasm").display().to_string();
    let misbehaving = Refract::guest("misbehaving_policy.wasm")
        .display()
        .to_string();
    let filter_shaped = Refract::guest("filter_shaped.wasm").display().to_string();
    let future = Refract::guest("future_policy.wasm").display().to_string();
    let filter_processor = Refract::guest("filter_processor.wasm")
        .display()
        .to_string();
    let flow = |extra: &str| format!("[[flow]]\nsource = \"a\"\ntarget = \"c\"\n{extra}\n");
    vec![
        Case { name: "unknown key", flow: flow("topicz = [\"x\"]"), expect: vec![":11:".into(), "topicz".into()] },
        Case { name: "bad regex", flow: flow("topics = [\"ok\", \"orders[\"]"), expect: vec![":11:".into(), "flow[0].topics[1]".into(), "invalid regex".into()] },
        Case {
            name: "unknown cluster",
            flow: "[[flow]]\nsource = \"a\"\ntarget = \"nowhere\"\n".into(),
            expect: vec![":10:".into(), "flow[0].target".into(), "unknown cluster `nowhere`".into()],
        },
        Case {
            name: "source is target",
            flow: "[[flow]]\nsource = \"a\"\ntarget = \"a\"\n".into(),
            expect: vec![":10:".into(), "flow[0].target".into(), "into itself".into()],
        },
        Case {
            name: "missing plugin file",
            flow: flow("policy = { plugin = \"plugins/none.wasm\" }"),
            expect: vec![":11:".into(), "flow[0].policy.plugin".into(), "does not exist".into()],
        },
        Case {
            name: "plugin rejects its config",
            flow: flow(&format!("policy = {{ plugin = \"{rename}\", config = {{ rules = [{{ match = \"(\", replace = \"x\" }}] }} }}")),
            expect: vec![rename.clone(), "flow[0].policy".into(), "init rejected its config".into(), "rules[1].match".into()],
        },
        Case {
            name: "plugin traps in init",
            flow: flow(&format!("policy = {{ plugin = \"{misbehaving}\", config = {{ panic_in = \"init\" }} }}")),
            expect: vec![misbehaving.clone(), "init was stopped".into(), "wasm trap".into(), "misbehaving-policy panicked on purpose".into()],
        },
        Case {
            name: "plugin exports the wrong world",
            flow: flow(&format!("policy = {{ plugin = \"{filter_shaped}\" }}")),
            expect: vec![filter_shaped.clone(), "wrong plugin kind".into(), "a filter plugin".into(), "refract:plugin/replication-policy".into()],
        },
        Case {
            name: "filter processor given as a policy",
            flow: flow(&format!("policy = {{ plugin = \"{filter_processor}\" }}")),
            expect: vec![filter_processor.clone(), "flow[0].policy".into(), "a filter plugin (world filter-plugin)".into()],
        },
        Case {
            name: "policy given as a processor",
            flow: flow(&format!("processors = [{{ plugin = \"{rename}\" }}]")),
            expect: vec![
                rename.clone(),
                "flow[0].processors[0]".into(),
                "a policy plugin (world policy-plugin)".into(),
                "refract:plugin/record-filter or refract:plugin/record-transform".into(),
            ],
        },
        Case {
            name: "processor rejects its config",
            flow: flow("processors = [{ plugin = \"builtin:filter\", config = { action = \"explode\" } }]"),
            expect: vec!["builtin:filter".into(), "flow[0].processors[0]".into(), "init rejected its config".into(), "action".into()],
        },
        Case {
            name: "plugin built for another contract version",
            flow: flow(&format!("policy = {{ plugin = \"{future}\" }}")),
            expect: vec![future.clone(), "refract:plugin@0.2.0".into(), "0.1.x".into()],
        },
        Case {
            name: "not WebAssembly",
            flow: flow("policy = { plugin = \"garbage.wasm\" }"),
            expect: vec!["garbage.wasm".into(), "not a usable WebAssembly component".into()],
        },
        Case {
            name: "core module, not a component",
            flow: flow("policy = { plugin = \"core.wasm\" }"),
            expect: vec!["core.wasm".into(), "core WebAssembly module, not a component".into()],
        },
    ]
}

#[test]
fn bad_pipelines_and_plugins_are_rejected_before_anything_starts() {
    let a = Broker::start("a");
    let b = Broker::start("b");
    let topic = unique("orders");
    a.create_topic(&topic, 1);
    a.produce(&topic, &sample_records(&topic, 1, 10));
    for case in cases() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("garbage.wasm"), b"this is not wasm").expect("write");
        std::fs::write(dir.path().join("core.wasm"), b"\0asm\x01\0\0\0").expect("write");
        // Lines 1-6: clusters, 7: blank, 8-11: the bad flow (flow[0]); a valid flow a->b follows it.
        let text = format!(
            "[clusters.a]\nbootstrap = \"{}\"\n[clusters.b]\nbootstrap = \"{}\"\n[clusters.c]\nbootstrap = \"{}\"\n\n{}\n[[flow]]\nsource = \"a\"\ntarget = \"b\"\n",
            a.bootstrap, b.bootstrap, b.bootstrap, case.flow
        );
        let path = write_pipeline(dir.path(), &text);
        let path_str = path.display().to_string();
        for command in ["check", "run"] {
            let out = Refract::output(&[command, &path_str]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{}: `refract {command}` must fail; stderr:\n{stderr}",
                case.name
            );
            let error = stderr
                .lines()
                .find(|l| l.starts_with("error: "))
                .unwrap_or_default();
            for want in &case.expect {
                assert!(
                    error.contains(want.as_str()),
                    "{}: `refract {command}` error lacks `{want}`:\n{stderr}",
                    case.name
                );
            }
            assert!(
                error.contains(&path_str),
                "{}: the error names the pipeline file: {error}",
                case.name
            );
        }
        assert!(
            b.user_topics().is_empty(),
            "{}: nothing may be created on the target, found {:?}",
            case.name,
            b.user_topics()
        );
    }
}
