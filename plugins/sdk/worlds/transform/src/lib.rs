//! Bindings for the `refract:plugin/transform-plugin@0.1.0` world; its types and the `host` import
//! are those of `refract-plugin-world-policy`.

/// The generated bindings.
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "transform-plugin",
        path: "../../../../wit",
        pub_export_macro: true,
        default_bindings_module: "refract_plugin_sdk::transform_bindings",
        with: {
            "refract:plugin/types@0.1.0": refract_plugin_world_policy::bindings::refract::plugin::types,
            "refract:plugin/host@0.1.0": refract_plugin_world_policy::bindings::refract::plugin::host,
        },
    });
}
