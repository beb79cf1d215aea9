//! What a plugin instance may take from the host, enforced so that guest code cannot escape it:
//! one memory budget for the whole instance, capped counts of memories, tables and core
//! instances, and clocks that never let a guest wait inside host code.
//!
//! Why clocks are virtual rather than merely hidden: wasmtime's epoch interruption only stops a
//! guest while it runs guest code. A WASI clock subscription (`std::thread::sleep`, Python's
//! `time.sleep`, a `poll` on a timer) blocks inside the host, where no deadline can reach it.
//! Denying the clock interfaces is not an option either: every Rust, Python, JavaScript and Go
//! guest imports them, and Go's runtime refuses to start on a zero clock. So each instance gets
//! a [`VirtualClock`]: it never reads the host's time, and every subscription is ready at once —
//! a sleep returns immediately (virtual time jumps past it), and a guest that spins until real
//! time has passed spins in guest code, where `call_timeout` stops it. Plugins transform
//! records; the record's own timestamp is the time they should use.

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime::ResourceLimiter;
use wasmtime_wasi::p2::bindings::clocks::{monotonic_clock, wall_clock};
use wasmtime_wasi::p2::{subscribe, DynPollable, Pollable};

use crate::guest_text::bytes_text;
use crate::runtime::PluginState;

/// Bytes one table element counts against the memory budget (a function reference).
pub const TABLE_ELEMENT_BYTES: usize = 8;

/// Most core module instances one plugin instance may create. Measured (the fewest each plugin
/// in the repository instantiates with): Rust 3, C, Go and componentize-js 4, componentize-py 14.
pub const MAX_CORE_INSTANCES: usize = 32;
/// Most linear memories one plugin instance may create (measured: 1 for every plugin in the
/// repository, Rust, C, Go, Python and JavaScript alike).
pub const MAX_MEMORIES: usize = 4;
/// Most tables one plugin instance may create (measured: 2 for every plugin in the repository).
pub const MAX_TABLES: usize = 8;

/// Most resource handles (streams, pollables) one plugin instance may hold at once; each is host
/// memory the guest does not pay for in its own budget. Plugins hold a few dozen.
pub const MAX_HANDLES: usize = 10_000;
/// Most random bytes one `wasi:random` call may ask the host to produce.
pub const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// The memory budget was exhausted: the error a plugin's growth fails with, found again in the
/// error chain to name the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BudgetExceeded {
    /// What tried to grow.
    pub(crate) what: &'static str,
    /// The instance's use before the growth, in bytes.
    pub(crate) used: usize,
    /// The growth asked for, in bytes.
    pub(crate) asked: usize,
    /// The budget, in bytes.
    pub(crate) budget: usize,
}

impl std::fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "it tried to grow a {} by {} while its memories and tables held {}, past its memory budget of {} (memory_limit)",
            self.what,
            bytes_text(self.asked),
            bytes_text(self.used),
            bytes_text(self.budget)
        )
    }
}

impl std::error::Error for BudgetExceeded {}

/// One memory budget for a whole plugin instance: every linear memory and every table (at
/// [`TABLE_ELEMENT_BYTES`] per element) of every core instance counts against it, from their
/// initial sizes on. Linear memory never shrinks, so use only grows. Growth past the budget traps.
#[derive(Debug)]
pub(crate) struct InstanceBudget {
    budget: usize,
    used: usize,
    /// The last growth granted, taken back if the allocation then failed.
    last_grant: usize,
}

impl InstanceBudget {
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            budget,
            used: 0,
            last_grant: 0,
        }
    }

    fn grow(&mut self, what: &'static str, asked: usize) -> wasmtime::Result<bool> {
        match self.used.checked_add(asked) {
            Some(total) if total <= self.budget => {
                self.used = total;
                self.last_grant = asked;
                Ok(true)
            }
            _ => Err(wasmtime::Error::new(BudgetExceeded {
                what,
                used: self.used,
                asked,
                budget: self.budget,
            })),
        }
    }

    fn grow_failed(&mut self) {
        self.used = self
            .used
            .saturating_sub(std::mem::take(&mut self.last_grant));
    }

    /// Bytes of memory and tables the instance holds now.
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used
    }
}

impl ResourceLimiter for InstanceBudget {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow("linear memory", desired.saturating_sub(current))
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.grow_failed();
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let elements = desired.saturating_sub(current);
        self.grow("table", elements.saturating_mul(TABLE_ELEMENT_BYTES))
    }

    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.grow_failed();
        Ok(())
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

/// Replaces WASI's clocks in `linker` (which already holds the rest of WASI p2) with the
/// instance's [`VirtualClock`].
pub(crate) fn link_virtual_clocks(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    wall_clock::add_to_linker::<_, Virtual>(linker, PluginState::clocks)?;
    monotonic_clock::add_to_linker::<_, Virtual>(linker, PluginState::clocks)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// A plugin instance's time: it starts at 1 s (Go's runtime refuses a zero clock), advances
/// 1 µs at every read so durations are never zero, and jumps forward by whatever a guest
/// subscribes to — a sleep completes at once, in virtual time only. The wall clock reads the
/// Unix epoch plus the same virtual time.
#[derive(Debug)]
pub(crate) struct VirtualClock {
    nanos: u64,
}

impl Default for VirtualClock {
    fn default() -> Self {
        Self {
            nanos: 1_000_000_000,
        }
    }
}

impl VirtualClock {
    fn read(&mut self) -> u64 {
        self.nanos = self.nanos.saturating_add(1_000);
        self.nanos
    }
}

struct Virtual;

impl HasData for Virtual {
    type Data<'a> = VirtualClocks<'a>;
}

/// What the clock interfaces need of an instance's state: its clock and its resource table.
pub(crate) struct VirtualClocks<'a> {
    pub(crate) clock: &'a mut VirtualClock,
    pub(crate) table: &'a mut ResourceTable,
}

/// A clock subscription: always ready.
struct Ready;

#[async_trait::async_trait]
impl Pollable for Ready {
    async fn ready(&mut self) {}
}

impl VirtualClocks<'_> {
    /// A subscription that is ready at once, the clock moved on to `until`.
    fn ready_at(&mut self, until: u64) -> wasmtime::Result<Resource<DynPollable>> {
        self.clock.nanos = self.clock.nanos.max(until);
        let ready = self.table.push(Ready)?;
        subscribe(self.table, ready)
    }
}

impl monotonic_clock::Host for VirtualClocks<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        Ok(self.clock.read())
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        Ok(1_000)
    }

    fn subscribe_instant(
        &mut self,
        when: monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.ready_at(when)
    }

    fn subscribe_duration(
        &mut self,
        duration: monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        let until = self.clock.nanos.saturating_add(duration);
        self.ready_at(until)
    }
}

impl wall_clock::Host for VirtualClocks<'_> {
    fn now(&mut self) -> wasmtime::Result<wall_clock::Datetime> {
        let nanos = self.clock.read();
        Ok(wall_clock::Datetime {
            seconds: nanos / 1_000_000_000,
            nanoseconds: (nanos % 1_000_000_000) as u32,
        })
    }

    fn resolution(&mut self) -> wasmtime::Result<wall_clock::Datetime> {
        Ok(wall_clock::Datetime {
            seconds: 0,
            nanoseconds: 1_000,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memories_and_tables_share_one_budget() {
        let mut b = InstanceBudget::new(10 << 20);
        assert!(b.memory_growing(0, 4 << 20, None).unwrap());
        assert!(b.memory_growing(0, 4 << 20, None).unwrap());
        // 1 Mi elements of 8 bytes = 8 MiB: past the 2 MiB left.
        let err = b.table_growing(0, 1 << 20, None).unwrap_err();
        let exceeded = err.downcast_ref::<BudgetExceeded>().copied().unwrap();
        assert_eq!(exceeded.what, "table");
        assert_eq!(exceeded.used, 8 << 20);
        assert!(exceeded
            .to_string()
            .contains("memory budget of 10 MiB (memory_limit)"));
        assert!(b.table_growing(0, 1024, None).unwrap());
        assert_eq!(b.used(), (8 << 20) + 8192);
        // A growth the allocator then could not back is taken back.
        assert!(b.memory_growing(4 << 20, 5 << 20, None).unwrap());
        b.memory_grow_failed(wasmtime::format_err!("mmap failed"))
            .unwrap();
        assert_eq!(b.used(), (8 << 20) + 8192);
        // Growth by an absurd amount does not overflow.
        assert!(b.table_growing(0, usize::MAX, None).is_err());
    }

    #[test]
    fn virtual_time_never_stands_still_and_sleeps_complete_at_once() {
        use monotonic_clock::Host as _;
        let mut clock = VirtualClock::default();
        let mut table = ResourceTable::new();
        let mut clocks = VirtualClocks {
            clock: &mut clock,
            table: &mut table,
        };
        let t0 = clocks.now().unwrap();
        assert!(t0 > 0, "Go's runtime refuses a zero clock");
        let t1 = clocks.now().unwrap();
        assert!(t1 > t0);
        let hour = 3_600_000_000_000;
        clocks.subscribe_duration(hour).unwrap();
        assert!(
            clocks.now().unwrap() >= t1 + hour,
            "the sleep happened in virtual time"
        );
        clocks.subscribe_instant(0).unwrap();
        assert!(clocks.now().unwrap() >= t1 + hour, "never backwards");
    }
}
