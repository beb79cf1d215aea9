//! Shared harness for refract's integration tests (`tests/`) and its benchmark (`bench/`).
//!
//! Both start real single-node Apache Kafka brokers (KRaft, from the jars `.ci/install-kafka`
//! resolves) on free loopback ports and check the records that land on them. Before this crate
//! the tests and the benchmark each carried a broker launcher, a free-port helper and a cluster
//! id generator of their own, which drifted apart; here there is one of each:
//!
//! - [`Broker`] ([`broker`]): finds Java and the Kafka jars, formats and starts a broker with
//!   [`BrokerOptions`], waits until it serves metadata, stops, kills, freezes and restarts it,
//!   and wraps the admin calls the tests need;
//! - [`free_port`] and [`cluster_id`] ([`ports`]);
//! - record checks ([`records`]): [`TestRecord`], producing and reading topics back, and
//!   [`assert_mirrored_in_order`];
//! - waits with one generous [`DEADLINE`] ([`wait`]);
//! - [`RefractProcess`] ([`process`]): a `refract run` process whose binary the caller names
//!   (`env!("CARGO_BIN_EXE_refract")` exists only in the cli package's integration tests).
//!
//! Functions that tests call panic on failure (a failed test); [`Broker::launch`], which the
//! benchmark calls, returns errors instead.

pub mod broker;
pub mod ports;
pub mod process;
pub mod records;
pub mod wait;

pub use broker::{java, kafka_java, kafka_libs, spawn_owned, Broker, BrokerOptions};
pub use ports::{cluster_id, free_port};
pub use process::{write_pipeline, RefractProcess};
pub use records::{
    assert_mirrored_in_order, by_partition, sample_records, Deliveries, Producing, TestRecord,
    PROVENANCE,
};
pub use wait::{unique, wait_before, wait_or_explain, wait_until, DEADLINE};
