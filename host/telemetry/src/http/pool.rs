//! The threads that run the expensive handlers (`/metrics`, `/status`) and their bounded queue.
//!
//! Why not tokio's blocking pool: its queue has no bound and a request that timed out stays in
//! it, so a flood of complete requests (every one of them legitimate on its own) piles up work
//! faster than it is done and everything behind it waits. Here a request that finds the queue
//! full is refused at once (503 with `Retry-After`), and a queued request whose client is gone
//! (timed out, disconnected) is dropped before it runs.

use std::collections::HashSet;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::Response;
use tokio::sync::oneshot;

/// A handler's work: the response it builds.
pub(super) type Job = Box<dyn FnOnce() -> Response<Full<Bytes>> + Send>;

/// The answer to a queued job: `None` when the handler panicked.
pub(super) type Answer = oneshot::Receiver<Option<Response<Full<Bytes>>>>;

/// A job and where its answer goes.
struct Task {
    job: Job,
    reply: oneshot::Sender<Option<Response<Full<Bytes>>>>,
}

/// Why a job was not queued.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// Every thread is busy and the queue is full.
    Full,
    /// The pool is shutting down.
    Closed,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fixed set of threads taking jobs from a queue of bounded length.
pub(super) struct Pool {
    queue: Option<SyncSender<Task>>,
    threads: Threads,
}

impl Pool {
    /// Starts `threads` threads named `name` behind a queue of at most `queued` jobs; a thread
    /// still running a job when the pool is dropped and the grace period is over is counted in
    /// `left_running`.
    pub(super) fn start(
        name: &str,
        threads: usize,
        queued: usize,
        left_running: &Arc<AtomicUsize>,
    ) -> io::Result<Self> {
        let (queue, tasks) = mpsc::sync_channel::<Task>(queued);
        let tasks = Arc::new(Mutex::new(tasks));
        let mut crew = Threads::new(left_running);
        for _ in 0..threads {
            let tasks = Arc::clone(&tasks);
            crew.spawn(name, move || work(&tasks))?;
        }
        Ok(Self {
            queue: Some(queue),
            threads: crew,
        })
    }

    /// Queues `job`, or refuses it at once when the queue is full.
    pub(super) fn submit(&self, job: Job) -> Result<Answer, Refused> {
        let queue = self.queue.as_ref().ok_or(Refused::Closed)?;
        let (reply, answer) = oneshot::channel();
        match queue.try_send(Task { job, reply }) {
            Ok(()) => Ok(answer),
            Err(TrySendError::Full(_)) => Err(Refused::Full),
            Err(TrySendError::Disconnected(_)) => Err(Refused::Closed),
        }
    }
}

impl Drop for Pool {
    /// Closes the queue (the jobs still in it belong to connections that are closed by now,
    /// so they are skipped) and gives running handlers a moment to end; a stuck one is not
    /// waited for.
    fn drop(&mut self) {
        self.queue = None;
        self.threads.join_within(Duration::from_secs(1));
    }
}

/// One thread's loop: takes the next job until the queue closes.
fn work(tasks: &Mutex<Receiver<Task>>) {
    loop {
        // The lock is held only while waiting for a job, never while one runs.
        let next = lock(tasks).recv();
        let Ok(Task { job, reply }) = next else {
            return;
        };
        if reply.is_closed() {
            // Its client gave up while it waited: nobody would read the answer.
            continue;
        }
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).ok();
        let _ = reply.send(answer);
    }
}

/// Threads the endpoint owns: on shutdown each is waited for, within a grace period.
pub(super) struct Threads {
    handles: Vec<JoinHandle<()>>,
    exited: mpsc::Sender<ThreadId>,
    /// (In a mutex only so that the endpoint's shared state is `Sync`.)
    exits: Mutex<Receiver<ThreadId>>,
    /// Adds the threads [`join_within`](Self::join_within) had to leave running.
    left_running: Arc<AtomicUsize>,
}

/// Says that its thread is done with its work, however it ends (a panic too), and which
/// thread it is.
///
/// It is sent from inside the thread's closure, so for a moment after it the thread is still
/// alive (returning from the closure, storing its result, running its thread-local
/// destructors) and [`JoinHandle::is_finished`] is still false: only the thread's id says which
/// threads are done.
struct Exit(mpsc::Sender<ThreadId>);

impl Drop for Exit {
    fn drop(&mut self) {
        let _ = self.0.send(std::thread::current().id());
    }
}

impl Threads {
    /// No threads yet; those left running at shutdown are added to `left_running`.
    pub(super) fn new(left_running: &Arc<AtomicUsize>) -> Self {
        let (exited, exits) = mpsc::channel();
        Self {
            handles: Vec::new(),
            exited,
            exits: Mutex::new(exits),
            left_running: Arc::clone(left_running),
        }
    }

    /// Starts `f` on a thread named `name`.
    pub(super) fn spawn(
        &mut self,
        name: &str,
        f: impl FnOnce() + Send + 'static,
    ) -> io::Result<()> {
        let exit = Exit(self.exited.clone());
        let handle = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let _exit = exit;
                f();
            })?;
        self.handles.push(handle);
        Ok(())
    }

    /// Waits at most `grace` for every thread (already told to stop) to end, and joins those
    /// that did; a thread stuck in a handler is left to end on its own, logged and added to
    /// the counter given to [`new`](Self::new).
    pub(super) fn join_within(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        let mut ended = HashSet::new();
        let exits = lock(&self.exits);
        while ended.len() < self.handles.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            match exits.recv_timeout(left) {
                Ok(id) => {
                    ended.insert(id);
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        drop(exits);
        // A thread that said it is done has left its work behind: joining it waits only for
        // it to return from its closure. (`is_finished` would call it stuck for that moment.)
        let (done, stuck): (Vec<_>, Vec<_>) = self
            .handles
            .drain(..)
            .partition(|handle| ended.contains(&handle.thread().id()));
        for handle in done {
            let _ = handle.join();
        }
        if !stuck.is_empty() {
            self.left_running.fetch_add(stuck.len(), Ordering::SeqCst);
            tracing::warn!(
                "HTTP endpoint: {} handler thread(s) still running at shutdown, not waited for",
                stuck.len()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::StatusCode;
    use std::sync::atomic::AtomicU32;

    fn ok() -> Response<Full<Bytes>> {
        Response::new(Full::new(Bytes::from_static(b"ok")))
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_abandoned_jobs_never_run() {
        let pool = Pool::start("test-pool", 1, 2, &Arc::default()).unwrap();
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let (started, has_started) = std::sync::mpsc::channel::<()>();
        let ran = Arc::new(AtomicU32::new(0));
        let blocking = pool
            .submit(Box::new(move || {
                let _ = started.send(());
                let _ = hold.recv();
                ok()
            }))
            .unwrap();
        has_started.recv().unwrap();
        let count = |ran: &Arc<AtomicU32>| -> Job {
            let ran = Arc::clone(ran);
            Box::new(move || {
                ran.fetch_add(1, Ordering::SeqCst);
                ok()
            })
        };
        let abandoned = pool.submit(count(&ran)).unwrap();
        let kept = pool.submit(count(&ran)).unwrap();
        assert_eq!(pool.submit(count(&ran)).unwrap_err(), Refused::Full);
        drop(abandoned);
        release.send(()).unwrap();
        assert_eq!(blocking.await.unwrap().unwrap().status(), StatusCode::OK);
        assert!(kept.await.unwrap().is_some());
        assert_eq!(ran.load(Ordering::SeqCst), 1, "the abandoned job ran");
        // A panicking handler answers `None` and the thread goes on.
        let panicked = pool.submit(Box::new(|| panic!("handler bug"))).unwrap();
        assert!(panicked.await.unwrap().is_none());
        assert!(pool.submit(count(&ran)).unwrap().await.unwrap().is_some());
    }

    #[test]
    fn shutdown_waits_for_idle_threads_but_not_for_a_stuck_one() {
        let left_running = Arc::new(AtomicUsize::new(0));
        let pool = Pool::start("test-pool", 3, 1, &left_running).unwrap();
        let (started_job, job_started) = std::sync::mpsc::channel::<()>();
        let (_never, hold) = std::sync::mpsc::channel::<()>();
        let _stuck = pool.submit(Box::new(move || {
            let _ = started_job.send(());
            let _ = hold.recv();
            ok()
        }));
        job_started.recv().unwrap();
        let started = Instant::now();
        drop(pool);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(5),
            "{took:?}"
        );
        assert_eq!(left_running.load(Ordering::SeqCst), 1);
        // Idle threads end as soon as the queue closes, and none of them is ever taken for
        // stuck while it returns (it was, now and then, when `is_finished` decided).
        let left_running = Arc::new(AtomicUsize::new(0));
        for _ in 0..50 {
            let idle = Pool::start("test-pool", 3, 1, &left_running).unwrap();
            let started = Instant::now();
            drop(idle);
            assert!(started.elapsed() < Duration::from_secs(1));
        }
        assert_eq!(left_running.load(Ordering::SeqCst), 0);
    }
}
