//! Host-side bindings generated from `wit/`.

wasmtime::component::bindgen!({
    world: "policy-plugin",
    path: "../../wit",
});

pub use refract::plugin::types::{LogLevel, PluginError as WitPluginError};
