//! refract's `builtin:default` policy plugin: MirrorMaker 2's `DefaultReplicationPolicy`.
//!
//! Remote topics are named `<source cluster><separator><topic>`. Config keys: `separator`
//! (string, default `"."`) and `internal_topic_separator_enabled` (bool, default `true`); see
//! [`refract_plugin_sdk::mm2`].

refract_plugin_sdk::export_policy!(refract_plugin_sdk::mm2::DefaultReplicationPolicy);
