//! The endpoint's open connections: each one's phase and deadline, and the eviction that keeps
//! idle or slow clients from taking the capacity a probe needs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::REQUEST_TIMEOUT;

/// Where a connection is in its one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Phase {
    /// Waiting for the client's request (TLS handshake, head, body): evictable.
    Reading = 0,
    /// A handler is answering: not evictable (bounded by the handler's timeout).
    Handling = 1,
    /// The response is being written: evictable.
    Writing = 2,
}

/// One open connection.
pub(super) struct Connection {
    id: u64,
    phase: AtomicU8,
    deadline: Mutex<Instant>,
    evicted: AtomicBool,
    changed: Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connection {
    /// Moves to `phase`, with `budget` from now as the connection's deadline.
    pub(super) fn enter(&self, phase: Phase, budget: Duration) {
        self.phase.store(phase as u8, Ordering::SeqCst);
        *lock(&self.deadline) = Instant::now() + budget;
        self.changed.notify_one();
    }

    fn evictable(&self) -> bool {
        self.phase.load(Ordering::SeqCst) != Phase::Handling as u8
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        self.changed.notify_one();
    }

    /// Completes when the connection's deadline has passed or it was evicted.
    pub(super) async fn expired(&self) {
        loop {
            if self.evicted.load(Ordering::SeqCst) {
                return;
            }
            let deadline = *lock(&self.deadline);
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = self.changed.notified() => {}
            }
        }
    }
}

/// The open connections, oldest first.
pub(super) struct Connections {
    max: usize,
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<Connection>>>,
    evictions: AtomicU64,
}

impl Connections {
    pub(super) fn new(max: usize) -> Self {
        Self {
            max,
            next: AtomicU64::new(0),
            open: Mutex::new(BTreeMap::new()),
            evictions: AtomicU64::new(0),
        }
    }

    /// Registers a new connection, evicting the oldest evictable one when `max` are open.
    /// `None` when every open connection is being answered: the newcomer is shed.
    pub(super) fn admit(&self) -> Option<Arc<Connection>> {
        let mut open = lock(&self.open);
        if open.len() >= self.max {
            let oldest = open
                .iter()
                .find(|(_, c)| c.evictable())
                .map(|(id, _)| *id)?;
            if let Some(victim) = open.remove(&oldest) {
                victim.evict();
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection {
            id,
            phase: AtomicU8::new(Phase::Reading as u8),
            deadline: Mutex::new(Instant::now() + REQUEST_TIMEOUT),
            evicted: AtomicBool::new(false),
            changed: Notify::new(),
        });
        open.insert(id, Arc::clone(&connection));
        Some(connection)
    }

    /// Forgets a connection that ended.
    pub(super) fn close(&self, connection: &Connection) {
        lock(&self.open).remove(&connection.id);
    }

    #[cfg(test)]
    pub(super) fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_oldest_idle_connection_makes_room_and_handlers_are_never_evicted() {
        let connections = Connections::new(3);
        let a = connections.admit().unwrap();
        let b = connections.admit().unwrap();
        let c = connections.admit().unwrap();
        a.enter(Phase::Handling, Duration::from_secs(5));
        let d = connections.admit().unwrap();
        // b was the oldest one not being answered.
        assert!(b.evicted.load(Ordering::SeqCst));
        assert!(!a.evicted.load(Ordering::SeqCst) && !c.evicted.load(Ordering::SeqCst));
        b.expired().await;
        c.enter(Phase::Handling, Duration::from_secs(5));
        d.enter(Phase::Handling, Duration::from_secs(5));
        assert!(
            connections.admit().is_none(),
            "all three are being answered"
        );
        d.enter(Phase::Writing, Duration::from_secs(5));
        assert!(connections.admit().is_some());
        assert!(d.evicted.load(Ordering::SeqCst));
        assert_eq!(connections.evictions(), 2);
        connections.close(&a);
        assert_eq!(lock(&connections.open).len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_moves_with_the_phase() {
        let connections = Connections::new(1);
        let a = connections.admit().unwrap();
        let started = Instant::now();
        a.enter(Phase::Handling, Duration::from_secs(7));
        a.expired().await;
        assert_eq!(started.elapsed(), Duration::from_secs(7));
    }
}
