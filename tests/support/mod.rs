//! Test harness of the refract binary's integration tests: `refract-testkit` (real Apache Kafka
//! brokers, records, waits, pipelines, TLS), re-exported here, with the one thing only these
//! tests have: the `refract` binary cargo built for them and the guest plugins beside it.
//!
//! `hostile` holds the hostile test plugins the sandbox tests build themselves.

use std::path::PathBuf;

pub mod hostile;

pub use refract_testkit::*;

/// The build under test: the `refract` binary of this package and the guest plugins
/// `refract-plugin` builds from `plugins/`.
pub enum UnderTest {}

impl Build for UnderTest {
    fn refract_bin() -> &'static str {
        env!("CARGO_BIN_EXE_refract")
    }

    fn guest_dir() -> PathBuf {
        refract_plugin::guest_dir()
    }
}

/// A `refract run` process of the binary under test; its associated functions run the binary
/// in other ways ([`RefractProcess::output`], [`RefractProcess::translate`]) and find the guest
/// plugins ([`RefractProcess::guest`]).
pub type Refract = RefractProcess<UnderTest>;
