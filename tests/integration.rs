//! The refract binary's integration tests, one module per area, compiled into one test binary:
//! real Apache Kafka brokers (and MirrorMaker 2, and librdkafka's mock cluster for faults), real
//! `.wasm` plugins and the `refract` binary cargo built for them. Brokers a module starts with
//! `Broker::shared` serve every module of the binary that asks for the same cluster name.
//!
//! `cargo test -p refract --test integration -- MODULE::` runs one module.

mod support;

mod cluster;
mod degraded;
mod demo;
mod doctor;
mod errors;
mod exact_offsets;
mod exactly_once;
mod faults;
mod kafka_admin;
mod languages;
mod live;
mod mirror;
mod mm2;
mod mm2_interop;
mod multi_broker;
mod plugin_cli;
mod processors;
mod scaffolds;
mod schema_tls;
mod schemas;
mod security;
mod verify;
