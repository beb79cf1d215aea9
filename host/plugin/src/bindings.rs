//! Host-side bindings generated from `wit/`, one module per world. The filter and transform
//! worlds reuse the policy world's `types` and `host` bindings, so a record or an error is one
//! Rust type whichever world it crosses, and one linker serves every plugin.

/// The `policy-plugin` world (generated code: its items carry the WIT's own names).
#[allow(missing_docs)]
pub mod policy {
    wasmtime::component::bindgen!({
        world: "policy-plugin",
        path: "../../wit",
    });
}

pub mod filter {
    wasmtime::component::bindgen!({
        world: "filter-plugin",
        path: "../../wit",
        with: {
            "refract:plugin/types": super::policy::refract::plugin::types,
            "refract:plugin/host": super::policy::refract::plugin::host,
        },
    });
}

pub mod transform {
    wasmtime::component::bindgen!({
        world: "transform-plugin",
        path: "../../wit",
        with: {
            "refract:plugin/types": super::policy::refract::plugin::types,
            "refract:plugin/host": super::policy::refract::plugin::host,
        },
    });
}

pub use policy::refract::plugin::types::{
    Header, KafkaRecord, LogLevel, Outcome, OutputRecord, PluginError as WitPluginError,
    PluginInfo, RecordBatch,
};
