//! Bindings for the `refract:plugin/policy-plugin@0.1.0` world, with every type of the shared
//! `types` interface; the types and the `host` import are shared with the other worlds.
//!
//! Each world lives in a crate of its own because the export macros of an interface that several
//! worlds export (`lifecycle`) are named after the interface and exported at the crate root.

/// The generated bindings.
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "policy-plugin",
        path: "../../../../wit",
        pub_export_macro: true,
        default_bindings_module: "refract_plugin_sdk::bindings",
        additional_derives: [PartialEq, Eq],
        generate_unused_types: true,
    });
}

mod error;
mod record;
