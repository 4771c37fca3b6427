//! One node-wide scheduler for the fsyncs of every log (group commit across
//! logs).
//!
//! Why: with `storage.fsync = always` every coordinator shard and every
//! partition used to run its own fsync loop on a blocking thread of its own,
//! each fsync starting as soon as the log's previous one ended. With 50
//! shards that is up to 50 fdatasyncs in flight on two cores, each covering
//! the few commits of one shard, and the CPU spent waking threads and
//! committing the file system's journal came out of the commits' budget.
//!
//! Here a log with unsynced records only *asks* for an fsync
//! ([`SyncScheduler::request`]); a small, fixed pool of threads serves the
//! logs that asked, in the order they asked, one fsync per log at a time.
//! A log's fsync covers whatever was appended up to the moment a thread
//! takes it up ([`SyncTarget::job`] is called then, not when it asked), so
//! the longer the queue, the more records each fsync covers: the number of
//! fsyncs per second stays bounded by the pool, and their batches grow with
//! the load. Each log keeps its own files (shards stay movable, snapshots and
//! recovery per log, no change to the data directory).
//!
//! A log that asks again while its fsync runs is queued again once it ends
//! (at the back: every log waiting gets its turn first). The rules do not
//! change: a log learns what is durable only from [`SyncTarget::synced`],
//! after the fsync returned; an error is handed to the log like a result
//! (it stops acknowledging, fail-stop) and never retried.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

/// An fsync to run: returns the log index up to which (exclusive) records
/// are durable.
pub type SyncWork = Box<dyn FnOnce() -> io::Result<u64> + Send>;

/// A log whose fsyncs the scheduler runs.
pub trait SyncTarget: Send + Sync + 'static {
    /// What to fsync now, covering everything appended so far; None if
    /// everything is already durable. Called on a pool thread, right before
    /// the fsync, so it must be quick (no I/O).
    fn job(&self) -> Option<SyncWork>;
    /// The fsync's outcome: the end it made durable, or its error.
    fn synced(&self, result: io::Result<u64>);
}

/// Worker threads when nothing configures the pool. On the CI machine's
/// virtual disk, 50 files fdatasynced from N threads (with 100-byte appends)
/// gave 10,700 fsyncs/s at 4 threads, 19,700 at 8, 23,200 at 16 and 21,200
/// at 50, at ~40 µs of CPU each: 16 gets the disk's parallelism without a
/// thread per log.
pub const DEFAULT_THREADS: usize = 16;

/// At most this many pool threads.
pub const MAX_THREADS: usize = 64;

/// Where a registered log stands; changed only under the scheduler's lock.
const IDLE: u8 = 0;
const QUEUED: u8 = 1;
const RUNNING: u8 = 2;
/// Running, and asked again meanwhile: queued again when it ends.
const RUNNING_AGAIN: u8 = 3;

/// A log's place in the scheduler. Keep it for as long as the log lives and
/// pass it to [`SyncScheduler::request`].
pub struct Registration {
    target: Arc<dyn SyncTarget>,
    state: AtomicU8,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration").field("state", &self.state.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

impl Registration {
    pub fn new(target: Arc<dyn SyncTarget>) -> Arc<Registration> {
        Arc::new(Registration { target, state: AtomicU8::new(IDLE) })
    }
}

struct Queue {
    waiting: VecDeque<Arc<Registration>>,
    /// Threads wanted; a thread whose number is at or above it exits.
    threads: usize,
    /// Threads running (numbered 0..started).
    started: usize,
    stopping: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    work: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The pool. Dropping it lets its threads finish the queue and exit.
pub struct SyncScheduler {
    shared: Arc<Shared>,
}

impl SyncScheduler {
    /// A scheduler running at most `threads` fsyncs at once.
    pub fn new(threads: usize) -> SyncScheduler {
        let scheduler = SyncScheduler {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue { waiting: VecDeque::new(), threads: 0, started: 0, stopping: false }),
                work: Condvar::new(),
            }),
        };
        scheduler.set_threads(threads);
        scheduler
    }

    /// The process's scheduler, shared by the coordinator's shards and the
    /// data plane's partitions (started with [`DEFAULT_THREADS`]; the daemon
    /// sets `storage.fsync_threads`).
    pub fn global() -> &'static SyncScheduler {
        static GLOBAL: OnceLock<SyncScheduler> = OnceLock::new();
        GLOBAL.get_or_init(|| SyncScheduler::new(DEFAULT_THREADS))
    }

    /// Runs at most `threads` (1..=[`MAX_THREADS`]) fsyncs at once from now on.
    pub fn set_threads(&self, threads: usize) {
        let threads = threads.clamp(1, MAX_THREADS);
        let mut q = self.shared.lock();
        q.threads = threads;
        while q.started < threads {
            let shared = Arc::clone(&self.shared);
            let number = q.started;
            let spawned =
                std::thread::Builder::new().name(format!("kcoord-fsync-{number}")).spawn(move || work(&shared, number));
            match spawned {
                Ok(_) => q.started += 1,
                Err(e) => {
                    tracing::error!(error = %e, "cannot start an fsync thread");
                    break;
                }
            }
        }
        drop(q);
        // Threads above the new number exit when they wake.
        self.shared.work.notify_all();
    }

    /// Asks for an fsync of `log` covering everything appended to it so far
    /// (and whatever is appended before a thread takes it up).
    pub fn request(&self, log: &Arc<Registration>) {
        let mut q = self.shared.lock();
        match log.state.load(Ordering::Relaxed) {
            IDLE => {
                log.state.store(QUEUED, Ordering::Relaxed);
                q.waiting.push_back(Arc::clone(log));
                drop(q);
                self.shared.work.notify_one();
            }
            RUNNING => log.state.store(RUNNING_AGAIN, Ordering::Relaxed),
            _ => {}
        }
    }
}

impl Drop for SyncScheduler {
    fn drop(&mut self) {
        self.shared.lock().stopping = true;
        self.shared.work.notify_all();
    }
}

/// A pool thread: takes the log that asked first, fsyncs it, reports.
fn work(shared: &Shared, number: usize) {
    loop {
        let log = {
            let mut q = shared.lock();
            loop {
                if number >= q.threads || (q.stopping && q.waiting.is_empty()) {
                    q.started -= 1;
                    return;
                }
                if let Some(log) = q.waiting.pop_front() {
                    log.state.store(RUNNING, Ordering::Relaxed);
                    break log;
                }
                q = shared.work.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        if let Some(job) = log.target.job() {
            let started = std::time::Instant::now();
            let result = job();
            metrics::histogram!("kcoord_fsync_duration_seconds").record(started.elapsed().as_secs_f64());
            log.target.synced(result);
        }
        let mut q = shared.lock();
        if log.state.load(Ordering::Relaxed) == RUNNING_AGAIN {
            log.state.store(QUEUED, Ordering::Relaxed);
            q.waiting.push_back(log);
            drop(q);
            shared.work.notify_one();
        } else {
            log.state.store(IDLE, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
#[path = "sync_scheduler_tests.rs"]
mod tests;
