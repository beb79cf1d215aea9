//! `refract check --connect`: connects to every cluster a pipeline's flows use, with the
//! pipeline's client settings, and tells what works and what is missing: reachability, TLS,
//! authentication (with the cause in words when one fails), the principal Kafka sees, and each
//! permission the flows need, probed without side effects.
//!
//! Probes (all read-only): Metadata (reachability, visible topics), DescribeTopics and
//! DescribeCluster and DescribeConsumerGroups with the principal's authorized operations
//! (KIP-430), CreateTopics with `validate_only` for topics that do not exist yet, and ListGroups.
//!
//! Connecting, and naming the cause when that fails, is refract-kafka's
//! ([`refract_kafka::connect`]). Here: `needs` derives what each flow needs of each cluster,
//! `evaluation` probes it, `hints` says how to grant what is missing, and `report` puts the
//! report together.

mod evaluation;
mod hints;
mod needs;
mod report;

pub use report::{check_connect, Report};
