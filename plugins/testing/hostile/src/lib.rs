//! A hostile transform for the sandbox tests: on the record whose value equals `on` it
//! attacks the host the way `attack` names; every other record is kept unchanged. Each attack
//! aims at one limit the host must hold against a plugin that means harm, so a test can show that
//! limit holding through a real flow and through `refract plugin test`.
//!
//! | `attack` | what it does on the marker record | parameters (default) |
//! |---|---|---|
//! | `sleep` | `std::thread::sleep` for an hour, then keeps the record | |
//! | `spin-clock` | busy-waits until `Instant::now()` is an hour later | |
//! | `fan-out` | replaces the record with `count` copies | `count` (100000) |
//! | `big-copies` | replaces it with `count` records of a `size`-byte value | `count` (200), `size` (1 MiB) |
//! | `log-flood` | logs `line`-byte lines until `bytes` are written, then keeps it | `line` (64 KiB), `bytes` (100 MiB) |
//! | `huge-panic` | panics with a `size`-byte message | `size` (1 MiB) |
//! | `route` | replaces it with one copy sent to `topic`, `partition`, with `timestamp` | `topic`, `partition`, `timestamp` (the record's own) |
//! | `fail-batches` | on every record, not only the marker: fails each call on more than one record; replaces a record sent alone with `count` records of a `size`-byte value, or with `spin = true` busy-loops until stopped | `count` (1), `size` (1 MiB), `spin` (false) |

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use refract_plugin_sdk::config::ConfigTable;
use refract_plugin_sdk::{BatchInfo, Outcome, PluginError, Record, RecordTransform};

/// How long `sleep` sleeps and `spin-clock` waits for: far past any call deadline.
const AN_HOUR: Duration = Duration::from_secs(3600);

/// What the plugin does to the marker record.
enum Attack {
    Sleep,
    SpinClock,
    FanOut {
        count: usize,
    },
    BigCopies {
        count: usize,
        size: usize,
    },
    LogFlood {
        line: usize,
        bytes: usize,
    },
    HugePanic {
        size: usize,
    },
    FailBatches {
        count: usize,
        size: usize,
        spin: bool,
    },
    Route {
        topic: Option<String>,
        partition: Option<i32>,
        timestamp: Option<i64>,
    },
}

/// The configured attack and the value of the record that triggers it.
struct Hostile {
    attack: Attack,
    on: String,
}

/// Reads the non-negative integer `key`, `default` when absent.
fn size(table: &mut ConfigTable, key: &str, default: usize) -> Result<usize, PluginError> {
    match table.integer(key)? {
        None => Ok(default),
        Some(n) => usize::try_from(n).map_err(|_| table.error(key, "must not be negative")),
    }
}

impl RecordTransform for Hostile {
    const NAME: &'static str = "hostile";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn from_config(config: &str) -> Result<Self, PluginError> {
        let mut table = ConfigTable::parse(config)?;
        let on = table.required_string("on")?;
        let attack = match table.required_string("attack")?.as_str() {
            "sleep" => Attack::Sleep,
            "spin-clock" => Attack::SpinClock,
            "fan-out" => Attack::FanOut {
                count: size(&mut table, "count", 100_000)?,
            },
            "big-copies" => Attack::BigCopies {
                count: size(&mut table, "count", 200)?,
                size: size(&mut table, "size", 1 << 20)?,
            },
            "log-flood" => Attack::LogFlood {
                line: size(&mut table, "line", 64 << 10)?.max(1),
                bytes: size(&mut table, "bytes", 100 << 20)?,
            },
            "huge-panic" => Attack::HugePanic {
                size: size(&mut table, "size", 1 << 20)?,
            },
            "fail-batches" => Attack::FailBatches {
                count: size(&mut table, "count", 1)?,
                size: size(&mut table, "size", 1 << 20)?,
                spin: table.bool("spin")?.unwrap_or(false),
            },
            "route" => Attack::Route {
                topic: table.string("topic")?,
                partition: match table.integer("partition")? {
                    None => None,
                    Some(p) => {
                        Some(i32::try_from(p).map_err(|_| table.error("partition", "not an i32"))?)
                    }
                },
                timestamp: table.integer("timestamp")?,
            },
            other => return Err(table.error("attack", format!("unknown attack `{other}`"))),
        };
        table.finish()?;
        Ok(Self { attack, on })
    }

    fn transform_batch(
        &self,
        batch: &BatchInfo,
        records: Vec<Record>,
    ) -> Result<Vec<Outcome>, PluginError> {
        if matches!(self.attack, Attack::FailBatches { .. }) && records.len() > 1 {
            return Err(PluginError::failed(format!(
                "hostile fail-batches: refuses a batch of {} records",
                records.len()
            )));
        }
        Ok(records.iter().map(|r| self.transform(batch, r)).collect())
    }

    fn transform(&self, _batch: &BatchInfo, record: &Record) -> Outcome {
        if let Attack::FailBatches { count, size, spin } = &self.attack {
            if *spin {
                let mut x: u64 = 1;
                loop {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
            let value = shared_value(*size);
            return Outcome::Replace(
                (0..*count)
                    .map(|_| record.to_output().with_value(Some(value.alias())))
                    .collect(),
            );
        }
        if record.value_str() != Some(self.on.as_str()) {
            return Outcome::Keep;
        }
        match &self.attack {
            Attack::Sleep => {
                std::thread::sleep(AN_HOUR);
                Outcome::Keep
            }
            Attack::SpinClock => {
                let start = Instant::now();
                while start.elapsed() < AN_HOUR {
                    std::hint::spin_loop();
                }
                Outcome::Keep
            }
            Attack::FanOut { count } => {
                Outcome::Replace((0..*count).map(|_| record.to_output()).collect())
            }
            Attack::BigCopies { count, size } => {
                let value = shared_value(*size);
                Outcome::Replace(
                    (0..*count)
                        .map(|_| record.to_output().with_value(Some(value.alias())))
                        .collect(),
                )
            }
            Attack::LogFlood { line, bytes } => {
                let padding = "x".repeat(*line);
                let mut written = 0;
                let mut n = 0u64;
                while written < *bytes {
                    let mut text = format!("hostile log-flood line {n} ");
                    let room = line.saturating_sub(text.len());
                    text.push_str(&padding[..room]);
                    refract_plugin_sdk::info(&text);
                    written += text.len();
                    n += 1;
                }
                Outcome::Keep
            }
            Attack::HugePanic { size } => {
                let mut message = String::from("hostile huge-panic ");
                message.push_str(&"x".repeat(size.saturating_sub(message.len())));
                panic!("{message}")
            }
            Attack::FailBatches { .. } => Outcome::Keep,
            Attack::Route {
                topic,
                partition,
                timestamp,
            } => {
                let mut output = record.to_output();
                if let Some(topic) = topic {
                    output = output.with_topic(topic);
                }
                if let Some(partition) = partition {
                    output = output.with_partition(*partition);
                }
                if let Some(timestamp) = timestamp {
                    output = output.with_timestamp_ms(*timestamp);
                }
                Outcome::replace_with(output)
            }
        }
    }
}

refract_plugin_sdk::export_transform!(Hostile);

/// The address of the one buffer `big-copies` hands out many times; its frees are ignored.
static SHARED: AtomicUsize = AtomicUsize::new(0);

/// The process allocator, except that it never frees the buffer `big-copies` shares.
///
/// The canonical ABI lets a guest return many lists that all point at the same bytes, and a
/// hostile guest not written in Rust would do exactly that: one megabyte of its memory becomes
/// hundreds of megabytes the host must copy. In Rust each returned `Vec` owns its buffer and the
/// generated post-return code frees every one, so this allocator lets them share one.
struct SharingAllocator;

// SAFETY: every call is forwarded to `System`, except that a free of the shared buffer is
// skipped, which only leaks it (it lives as long as the instance anyway).
unsafe impl GlobalAlloc for SharingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ptr as usize != SHARED.load(Ordering::Relaxed) {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.dealloc(ptr, layout) }
        }
    }
}

#[global_allocator]
static ALLOCATOR: SharingAllocator = SharingAllocator;

/// A `size`-byte buffer built once per instance, handed out as many `Vec`s that all own it.
struct SharedValue {
    ptr: *mut u8,
    size: usize,
}

/// The shared buffer of `size` bytes (the config's, the same on every call): built on first use
/// and never freed.
fn shared_value(size: usize) -> SharedValue {
    let mut ptr = SHARED.load(Ordering::Relaxed) as *mut u8;
    if ptr.is_null() {
        ptr = vec![b'x'; size].leak().as_mut_ptr();
        SHARED.store(ptr as usize, Ordering::Relaxed);
    }
    SharedValue { ptr, size }
}

impl SharedValue {
    /// One more `Vec` owning the shared buffer.
    fn alias(&self) -> Vec<u8> {
        // SAFETY: not sound by Rust's rules (many `Vec`s own one allocation), and that is the
        // attack. It holds up in practice because nothing writes to, grows or drops these
        // vectors in Rust: the export code hands their pointers to the host and forgets them,
        // and the post-return frees it then makes are skipped by `SharingAllocator`.
        unsafe { Vec::from_raw_parts(self.ptr, self.size, self.size) }
    }
}
