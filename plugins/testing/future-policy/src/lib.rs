//! A policy built against `refract:plugin@0.2.0`, used to check that refract refuses it.

wit_bindgen::generate!({
    inline: "
        package refract:plugin@0.2.0;
        interface replication-policy {
            format-remote-topics: func(source-cluster: string, topics: list<string>) -> list<string>;
        }
        world policy-plugin { export replication-policy; }
    ",
    world: "policy-plugin",
});

struct Future;

impl exports::refract::plugin::replication_policy::Guest for Future {
    fn format_remote_topics(source_cluster: String, topics: Vec<String>) -> Vec<String> {
        topics
            .into_iter()
            .map(|t| format!("{source_cluster}/{t}"))
            .collect()
    }
}

export!(Future);
