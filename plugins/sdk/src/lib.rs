//! Guest SDK for refract plugins: replication policies, record filters and record transforms.
//!
//! A plugin is a WebAssembly component for one world of `refract:plugin`: `policy-plugin`,
//! `filter-plugin` or `transform-plugin`. With this crate, writing one comes down to implementing
//! [`ReplicationPolicy`], [`RecordFilter`] or [`RecordTransform`] for a type and naming that type in
//! [`export_policy!`], [`export_filter!`] or [`export_transform!`]; the macro generates the batched
//! WIT exports of that world, and only of that world, around it. Use one macro per crate.
//!
//! A filter:
//!
//! ```no_run
//! use refract_plugin_sdk::{BatchInfo, PluginError, Record, RecordFilter};
//!
//! /// Drops records with the header `env: test`.
//! struct DropTest;
//!
//! impl RecordFilter for DropTest {
//!     const NAME: &'static str = "drop-test";
//!     const VERSION: &'static str = "0.1.0";
//!
//!     fn from_config(_config: &str) -> Result<Self, PluginError> {
//!         Ok(DropTest)
//!     }
//!
//!     fn keep(&self, _batch: &BatchInfo, record: &Record) -> bool {
//!         record.header("env") != Some(b"test".as_slice())
//!     }
//! }
//!
//! refract_plugin_sdk::export_filter!(DropTest);
//! ```
//!
//! A transform:
//!
//! ```no_run
//! use refract_plugin_sdk::{BatchInfo, Outcome, PluginError, Record, RecordTransform};
//!
//! /// Upper-cases UTF-8 values; drops tombstones.
//! struct Upper;
//!
//! impl RecordTransform for Upper {
//!     const NAME: &'static str = "upper";
//!     const VERSION: &'static str = "0.1.0";
//!
//!     fn from_config(_config: &str) -> Result<Self, PluginError> {
//!         Ok(Upper)
//!     }
//!
//!     fn transform(&self, _batch: &BatchInfo, record: &Record) -> Outcome {
//!         match record.value_str() {
//!             _ if record.is_tombstone() => Outcome::Drop,
//!             None => Outcome::reject("value is not UTF-8"),
//!             Some(text) => Outcome::replace_with(
//!                 record.to_output().with_value(Some(text.to_uppercase().into_bytes())),
//!             ),
//!         }
//!     }
//! }
//!
//! refract_plugin_sdk::export_transform!(Upper);
//! ```
//!
//! A policy:
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

/// Bindings generated from the refract plugin WIT (`refract:plugin@0.1.0`, world `policy-plugin`),
/// with every type of the shared `types` interface.
pub use refract_plugin_world_policy::bindings;

/// Bindings for the `filter-plugin` world; its types and imports are those of [`bindings`].
pub use refract_plugin_world_filter::bindings as filter_bindings;

/// Bindings for the `transform-plugin` world; its types and imports are those of [`bindings`].
pub use refract_plugin_world_transform::bindings as transform_bindings;

pub mod config;

mod filter;
mod logging;
pub mod mm2;
mod policy;
mod record;
pub mod template;
mod transform;

#[doc(hidden)]
pub mod __private;

pub use bindings::refract::plugin::types::{
    Header, LogLevel, Outcome, OutputRecord, PluginError, PluginInfo,
};
pub use filter::RecordFilter;
pub use logging::{debug, error, info, log, trace, warn};
pub use policy::ReplicationPolicy;
pub use record::{BatchInfo, Record};
pub use toml;
pub use transform::RecordTransform;

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

/// Exports a [`RecordFilter`] implementation as the plugin's `lifecycle` and `record-filter`
/// interfaces, for the `filter-plugin` world.
///
/// Use it once per plugin crate, at module level: `refract_plugin_sdk::export_filter!(MyFilter);`.
/// `init` builds the filter with [`RecordFilter::from_config`] and keeps it for the life of the
/// instance. A `filter` call made before a successful `init` returns
/// `plugin-error::failed("init was not called")`, as does an answer with a wrong number of flags.
#[macro_export]
macro_rules! export_filter {
    ($filter:ty) => {
        const _: () = {
            use $crate::__private as rt;
            use $crate::filter_bindings::exports::refract::plugin::{lifecycle, record_filter};

            ::std::thread_local! {
                static FILTER: rt::Slot<$filter> = const { rt::empty_slot() };
            }

            struct RefractFilterExport;

            impl lifecycle::Guest for RefractFilterExport {
                fn info() -> $crate::PluginInfo {
                    rt::filter_info::<$filter>()
                }

                fn init(config: rt::Name) -> ::core::result::Result<(), $crate::PluginError> {
                    rt::filter_init(&FILTER, &config)
                }
            }

            impl record_filter::Guest for RefractFilterExport {
                fn filter(
                    batch: rt::RecordBatch,
                ) -> ::core::result::Result<::std::vec::Vec<bool>, $crate::PluginError> {
                    rt::filter(&FILTER, batch)
                }
            }

            $crate::filter_bindings::export!(
                RefractFilterExport with_types_in $crate::filter_bindings
            );
        };
    };
}

/// Exports a [`RecordTransform`] implementation as the plugin's `lifecycle` and
/// `record-transform` interfaces, for the `transform-plugin` world.
///
/// Use it once per plugin crate, at module level:
/// `refract_plugin_sdk::export_transform!(MyTransform);`. `init` builds the transform with
/// [`RecordTransform::from_config`] and keeps it for the life of the instance. A `transform` call
/// made before a successful `init` returns `plugin-error::failed("init was not called")`, as does
/// an answer with a wrong number of outcomes.
#[macro_export]
macro_rules! export_transform {
    ($transform:ty) => {
        const _: () = {
            use $crate::__private as rt;
            use $crate::transform_bindings::exports::refract::plugin::{
                lifecycle, record_transform,
            };

            ::std::thread_local! {
                static TRANSFORM: rt::Slot<$transform> = const { rt::empty_slot() };
            }

            struct RefractTransformExport;

            impl lifecycle::Guest for RefractTransformExport {
                fn info() -> $crate::PluginInfo {
                    rt::transform_info::<$transform>()
                }

                fn init(config: rt::Name) -> ::core::result::Result<(), $crate::PluginError> {
                    rt::transform_init(&TRANSFORM, &config)
                }
            }

            impl record_transform::Guest for RefractTransformExport {
                fn transform(
                    batch: rt::RecordBatch,
                ) -> ::core::result::Result<::std::vec::Vec<$crate::Outcome>, $crate::PluginError>
                {
                    rt::transform(&TRANSFORM, batch)
                }
            }

            $crate::transform_bindings::export!(
                RefractTransformExport with_types_in $crate::transform_bindings
            );
        };
    };
}
