//! A transform for tests. Config: `copies` (fan each record out into this many copies, each
//! with a `copy` header 1..=n; default 1 = keep), and `panic_on`, `loop_on`, `grow_on`,
//! `reject_on`: a record whose value equals that text makes the plugin panic, spin forever,
//! allocate without bound, or reject it.

use refract_plugin_sdk::config::ConfigTable;
use refract_plugin_sdk::{BatchInfo, Outcome, PluginError, Record, RecordTransform};

/// The configured behaviour.
struct TestTransform {
    copies: i64,
    panic_on: Option<String>,
    loop_on: Option<String>,
    grow_on: Option<String>,
    reject_on: Option<String>,
}

impl RecordTransform for TestTransform {
    const NAME: &'static str = "test-transform";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let mut table = ConfigTable::parse(config)?;
        let copies = table.integer("copies")?.unwrap_or(1);
        let this = Self {
            copies,
            panic_on: table.string("panic_on")?,
            loop_on: table.string("loop_on")?,
            grow_on: table.string("grow_on")?,
            reject_on: table.string("reject_on")?,
        };
        table.finish()?;
        if copies < 0 {
            return Err(PluginError::invalid_config("copies: must not be negative"));
        }
        Ok(this)
    }

    fn transform(&self, _batch: &BatchInfo, record: &Record) -> Outcome {
        let value = record.value_str();
        let is = |marker: &Option<String>| marker.is_some() && marker.as_deref() == value;
        if is(&self.panic_on) {
            panic!("test-transform panicked on purpose");
        }
        if is(&self.loop_on) {
            let mut x: u64 = 1;
            loop {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        if is(&self.grow_on) {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        if is(&self.reject_on) {
            return Outcome::reject("test-transform rejects this value");
        }
        if self.copies == 1 {
            return Outcome::Keep;
        }
        Outcome::Replace(
            (1..=self.copies)
                .map(|i| {
                    record
                        .to_output()
                        .with_header("copy", i.to_string().into_bytes())
                })
                .collect(),
        )
    }
}

refract_plugin_sdk::export_transform!(TestTransform);
