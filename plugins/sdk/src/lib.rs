//! Guest SDK for refract replication-policy plugins.
//!
//! A policy plugin is a WebAssembly component for the `refract:plugin/policy-plugin` world. With
//! this crate, writing one comes down to implementing [`ReplicationPolicy`] for a type and naming
//! that type in [`export_policy!`]; the macro generates the batched WIT exports around it.
//!
//! ```no_run
//! use refract_plugin_sdk::config::ConfigTable;
//! use refract_plugin_sdk::{PluginError, ReplicationPolicy};
//!
//! /// Prefixes every remote topic with `<prefix>-`.
//! struct Prefixed {
//!     prefix: String,
//! }
//!
//! impl ReplicationPolicy for Prefixed {
//!     const NAME: &'static str = "prefixed";
//!     const VERSION: &'static str = env!("CARGO_PKG_VERSION");
//!
//!     fn from_config(config: &str) -> Result<Self, PluginError> {
//!         let mut table = ConfigTable::parse(config)?;
//!         let prefix = table.string("prefix")?.unwrap_or_else(|| "mirror".to_owned());
//!         table.finish()?;
//!         Ok(Self { prefix })
//!     }
//!
//!     fn format_remote_topic(&self, _source_cluster: &str, topic: &str) -> String {
//!         format!("{}-{topic}", self.prefix)
//!     }
//!
//!     fn topic_source(&self, _topic: &str) -> Option<String> {
//!         None
//!     }
//!
//!     fn upstream_topic(&self, _topic: &str) -> Option<String> {
//!         None
//!     }
//! }
//!
//! refract_plugin_sdk::export_policy!(Prefixed);
//! ```
//!
//! Build the crate as a `cdylib` for `wasm32-wasip2`; the resulting `.wasm` file is the component.

/// Bindings generated from the refract plugin WIT (`refract:plugin@0.1.0`, world `policy-plugin`).
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "policy-plugin",
        path: "../../wit",
        pub_export_macro: true,
        default_bindings_module: "refract_plugin_sdk::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

pub mod config;
mod error;
mod logging;
pub mod mm2;
mod policy;

#[doc(hidden)]
pub mod __private;

pub use bindings::refract::plugin::types::{LogLevel, PluginError, PluginInfo};
pub use logging::{debug, error, info, log, trace, warn};
pub use policy::ReplicationPolicy;
pub use toml;

/// Exports a [`ReplicationPolicy`] implementation as the plugin's `lifecycle` and
/// `replication-policy` interfaces.
///
/// Use it once per plugin crate, at module level: `refract_plugin_sdk::export_policy!(MyPolicy);`.
/// `init` builds the policy with [`ReplicationPolicy::from_config`] and keeps it for the life of
/// the instance; every batched call then answers topic by topic through it. Calls made before a
/// successful `init` return `plugin-error::failed("init was not called")`, except the three that
/// return a bare string: the WIT gives them no error channel, so they log that message at error
/// level and trap.
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        const _: () = {
            use $crate::__private::{self as rt, Answers, Name};
            use $crate::bindings::exports::refract::plugin::{lifecycle, replication_policy};

            ::std::thread_local! {
                static POLICY: rt::Slot<$policy> = const { rt::empty_slot() };
            }

            struct RefractPolicyExport;

            impl lifecycle::Guest for RefractPolicyExport {
                fn info() -> $crate::PluginInfo {
                    rt::info::<$policy>()
                }

                fn init(config: Name) -> ::core::result::Result<(), $crate::PluginError> {
                    rt::init(&POLICY, &config)
                }
            }

            impl replication_policy::Guest for RefractPolicyExport {
                fn format_remote_topics(source: Name, topics: rt::Names) -> Answers<Name> {
                    rt::format_remote_topics(&POLICY, &source, &topics)
                }

                fn topic_sources(topics: rt::Names) -> Answers<::core::option::Option<Name>> {
                    rt::topic_sources(&POLICY, &topics)
                }

                fn upstream_topics(topics: rt::Names) -> Answers<::core::option::Option<Name>> {
                    rt::upstream_topics(&POLICY, &topics)
                }

                fn is_internal_topics(topics: rt::Names) -> Answers<bool> {
                    rt::is_internal_topics(&POLICY, &topics)
                }

                fn heartbeats_topic() -> Name {
                    rt::heartbeats_topic(&POLICY)
                }

                fn offset_syncs_topic(cluster_alias: Name) -> Name {
                    rt::offset_syncs_topic(&POLICY, &cluster_alias)
                }

                fn checkpoints_topic(cluster_alias: Name) -> Name {
                    rt::checkpoints_topic(&POLICY, &cluster_alias)
                }
            }

    $crate::bindings::export!(RefractPolicyExport with_types_in $crate::bindings);
        };
    };
}
