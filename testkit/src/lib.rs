//! Shared harness for refract's integration tests (`tests/`) and its benchmark (`bench/`).
//!
//! Both start real single-node Apache Kafka brokers (KRaft, from the jars `.ci/install-kafka`
//! resolves; the tests three-node clusters too) on free loopback ports and check the records
//! that land on them. Before this crate the tests and the benchmark each carried a broker
//! launcher, a free-port helper and a cluster id generator of their own, which drifted apart;
//! here there is one of each. And being a library, its items are no dead code in a test binary
//! that leaves some of them unused, which a module compiled into each of the tests
//! (`tests/support`) cannot say of its own.
//!
//! - [`Broker`] ([`broker`]): finds Java and the Kafka jars, formats and starts a broker with
//!   [`BrokerOptions`], waits until it serves metadata, stops, kills, freezes and restarts it,
//!   and wraps the admin, produce and read calls the tests need; [`Cluster3`]: three such
//!   brokers as one KRaft cluster (replication factor 3, `min.insync.replicas` 2) with its
//!   leaders, coordinators and in-sync replicas;
//! - [`free_port`] and [`cluster_id`] ([`ports`]);
//! - record checks ([`records`]): [`TestRecord`], sample records, a background producer and
//!   [`assert_mirrored_in_order`];
//! - waits with one generous [`DEADLINE`] ([`wait`]);
//! - [`RefractProcess`] ([`process`]): a `refract run` process and one-shot commands of the
//!   binary a [`Build`] names (`env!("CARGO_BIN_EXE_refract")` exists only in the cli package's
//!   integration tests, which implement it);
//! - pipeline files ([`pipeline`](mod@pipeline)) and the metrics endpoint ([`metrics`]);
//! - golden files that `REFRACT_BLESS=1` rewrites ([`golden`]): generated references and
//!   expositions;
//! - [`Registry`] ([`registry`]): a real schema registry (Apicurio Registry, its storage an H2
//!   file in a temp folder, on the Java 21+ `.ci/install-apicurio` finds) with its
//!   Confluent-compatible URL, kill, restart and wipe, and the register and read calls the tests
//!   need; what its API does is written down at the top of the module;
//! - with the `tls` feature, test certificates, brokers with TLS and SASL listeners, and a
//!   registry reached over TLS that requires a client certificate (module `tls`,
//!   `Registry::start_tls`).
//!
//! Functions that tests call panic on failure (a failed test); [`Broker::launch`] and
//! [`Registry::launch`], for the benchmark, return errors instead.

pub mod broker;
pub mod c_api;
pub mod golden;
pub mod metrics;
pub mod pipeline;
pub mod ports;
pub mod process;
pub mod records;
pub mod registry;
#[cfg(feature = "tls")]
pub mod tls;
pub mod wait;

pub use broker::{java, kafka_java, kafka_libs, spawn_owned, Broker, BrokerOptions, Cluster3};
pub use metrics::{http, http_with, series};
pub use pipeline::{flow, path_str, pipeline, write_pipeline, FAST};
pub use ports::{cluster_id, free_port};
pub use process::{parse_offsets, Build, Offsets, RefractProcess};
pub use records::{
    assert_mirrored_in_order, by_partition, holds_last_records, sample_records, Deliveries,
    Producing, TestRecord, PROVENANCE,
};
pub use registry::{apicurio, Registry, RegistryError};
#[cfg(feature = "tls")]
pub use tls::{secure_broker, Secure, ADMIN_PASSWORD, MIRROR_PASSWORD};
pub use wait::{unique, wait_before, wait_or_explain, wait_until, DEADLINE};
