//! refract's `builtin:identity` policy plugin: MirrorMaker 2's `IdentityReplicationPolicy`.
//!
//! Remote topics keep their names, except heartbeat-like topics (names ending in `heartbeats`),
//! which are named as by the default policy. Config keys: `separator` (string, default `"."`) and
//! `internal_topic_separator_enabled` (bool, default `true`); see [`refract_plugin_sdk::mm2`].

refract_plugin_sdk::export_policy!(refract_plugin_sdk::mm2::IdentityReplicationPolicy);
