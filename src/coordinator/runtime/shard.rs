//! A shard's tokio task: the thin adapter that runs one [`ShardShell`].
//!
//! One tokio task owns the shell (and so the core and its log); requests
//! arrive through a bounded mailbox, so group state needs no locks. The
//! task only waits for events and feeds them to the shell, whose rules
//! (loading, group-commit gating, fail-stop, compaction back-off, shutdown
//! order) are synchronous and tested on their own (`shell`). It does what
//! the shell asks outside its thread: loads the log on a blocking thread,
//! hands its appends to the node's [`Journal`] (`fsync = always`: one
//! fdatasync a round covers every shard) or offers fsyncs to the node's
//! [`SyncScheduler`] (one fsync covers everything appended until the
//! scheduler takes it up), so throughput grows with concurrency (group
//! commit), writes snapshots on a blocking thread, and reports fatal
//! failures.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio::task::JoinHandle;

pub use super::clock::coordinator_clock_ms;
use super::clock::SystemClock;
use super::shard_log::LogSync;
use super::shell::{Durable, Effect, ShardShell, ShellSettings};
use crate::config::FsyncPolicy;
use crate::coordinator::state::core::{CoreConfig, RandomIds, Request, Response, ShardCore};
use crate::coordinator::state::records::RecordError;
use crate::storage::{
    Journal, Log, LogOptions, Registration, SnapshotDone, SyncJob, SyncScheduler, SyncTarget, SyncWork,
};

/// A message to a shard.
pub enum ShardMsg {
    Request {
        req: Request,
        reply: oneshot::Sender<Response>,
    },
    /// `done` learns whether the shard stopped with everything it wrote
    /// durable in its own log ([`ShardShell::stopped_durably`]).
    Shutdown {
        done: oneshot::Sender<bool>,
    },
}

/// How to reach a shard.
#[derive(Clone)]
pub struct ShardHandle {
    pub id: u32,
    pub tx: mpsc::Sender<ShardMsg>,
}

/// Everything a shard needs to run.
#[derive(Debug, Clone)]
pub struct ShardSettings {
    pub id: u32,
    pub dir: PathBuf,
    pub core: CoreConfig,
    pub fsync: FsyncPolicy,
    pub fsync_interval: Duration,
    pub segment_bytes: u64,
    pub compaction_trigger_bytes: u64,
    pub repair: bool,
    /// The node's journal, when it makes appends durable (`fsync = always`).
    pub journal: Option<Arc<Journal>>,
}

/// Unrecoverable shard failures (corrupt log, failed fsync) are reported
/// here; the daemon stops.
pub type FatalSender = mpsc::UnboundedSender<String>;

/// Counts shards that finished loading, so callers can wait for all.
#[derive(Debug, Default)]
pub struct LoadProgress {
    loaded: std::sync::atomic::AtomicUsize,
    notify: tokio::sync::Notify,
}

impl LoadProgress {
    fn mark_loaded(&self) {
        self.loaded.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn loaded(&self) -> usize {
        self.loaded.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until `n` shards have loaded.
    pub async fn wait_for(&self, n: usize) {
        loop {
            let notified = self.notify.notified();
            if self.loaded() >= n {
                return;
            }
            notified.await;
        }
    }
}

/// Starts a shard task.
pub fn spawn(
    settings: ShardSettings,
    mailbox: usize,
    load_permits: Arc<Semaphore>,
    fatal: FatalSender,
    progress: Arc<LoadProgress>,
) -> ShardHandle {
    let (tx, rx) = mpsc::channel(mailbox);
    let id = settings.id;
    tokio::spawn(run(settings, rx, load_permits, fatal, progress));
    ShardHandle { id, tx }
}

/// Loads a shard's log into a fresh core (blocking).
fn load(settings: &ShardSettings) -> Result<(ShardCore, Log), String> {
    let started = std::time::Instant::now();
    let mut core = ShardCore::new(settings.core.clone(), Box::new(RandomIds));
    let mut records_loaded: u64 = 0;
    let mut options = LogOptions::new(settings.segment_bytes, settings.repair);
    options.journaled = settings.journal.is_some();
    // The shell writes each batch's records with one write (`on_batch_end`).
    options.batched_writes = true;
    let log = Log::open(&settings.dir, options, &mut |loc, payload| match core.load_payload(payload) {
        Ok(()) => {
            records_loaded += 1;
            Ok(())
        }
        Err(RecordError::UnknownKeyVersion(v)) => {
            // A record type kcoord does not use (e.g. KIP-848 groups): skip it.
            tracing::warn!(
                shard = settings.id,
                index = loc.index,
                key_version = v,
                "skipping a record of an unknown type"
            );
            Ok(())
        }
        Err(e) => Err(format!("record {} is unreadable: {e}", loc.index)),
    })
    .map_err(|e| format!("coordinator shard {} ({}): {e}", settings.id, settings.dir.display()))?;
    if records_loaded > 0 {
        tracing::info!(
            shard = settings.id,
            records = records_loaded,
            groups = core.groups().count(),
            offsets = core.store().offset_count(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded coordinator shard"
        );
    }
    Ok((core, log))
}

/// Awaits an optional future; never completes if there is none.
async fn maybe<F: Future + Unpin>(f: Option<&mut F>) -> F::Output {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// The shard's log as the sync scheduler sees it: the newest fsync the shard
/// offered (the log itself stays with the shard's task), and where the
/// outcome goes.
struct ShardSync {
    offered: std::sync::Mutex<Option<SyncJob>>,
    durable: watch::Sender<Durable>,
}

impl ShardSync {
    /// Replaces the fsync on offer by `job`, which covers more.
    fn offer(&self, job: Option<SyncJob>) {
        *self.offered.lock().unwrap_or_else(|p| p.into_inner()) = job;
    }
}

impl SyncTarget for ShardSync {
    fn job(&self) -> Option<SyncWork> {
        let job = self.offered.lock().unwrap_or_else(|p| p.into_inner()).take()?;
        let durable = match &*self.durable.borrow() {
            Ok(end) => *end,
            Err(_) => return None,
        };
        if job.end() <= durable {
            return None;
        }
        let batch = job.end() - durable;
        Some(Box::new(move || {
            metrics::histogram!("kcoord_fsync_batch_records").record(batch as f64);
            job.run()
        }))
    }

    fn synced(&self, result: std::io::Result<u64>) {
        self.durable.send_modify(|durable| match (&*durable, result) {
            (Err(_), _) => {}
            (Ok(before), Ok(end)) => *durable = Ok((*before).max(end)),
            (Ok(_), Err(e)) => *durable = Err(e.to_string()),
        });
    }
}

/// Requests handled before group-committing their writes.
const MAX_BATCH: usize = 512;

type Compaction = JoinHandle<std::io::Result<SnapshotDone>>;

/// The shell's surroundings: where its effects go.
struct Adapter {
    fatal: FatalSender,
    /// The shard's log in the node's sync scheduler (once loaded).
    sync: Option<(Arc<ShardSync>, Arc<Registration>)>,
    journal: Option<Arc<Journal>>,
    compaction: Option<Compaction>,
}

impl Adapter {
    fn apply(&mut self, shell: &mut ShardShell<Log, SystemClock>) {
        for effect in shell.effects() {
            match effect {
                Effect::Fsync(LogSync::Fsync(job)) => {
                    if let Some((sync, registration)) = &self.sync {
                        sync.offer(Some(job));
                        SyncScheduler::global().request(registration);
                    }
                }
                Effect::Fsync(LogSync::Journal(write)) => {
                    if let (Some((sync, _)), Some(journal)) = (&self.sync, &self.journal) {
                        journal.submit(write, sync.clone());
                    }
                }
                Effect::WithdrawFsync => {
                    if let Some((sync, _)) = &self.sync {
                        sync.offer(None);
                    }
                }
                Effect::Compact { plan, payloads } => {
                    self.compaction = Some(tokio::task::spawn_blocking(move || {
                        let mut it = payloads.into_iter().map(|b| b.to_vec());
                        plan.write(&mut it)
                    }));
                }
                Effect::Fatal(message) => {
                    let _ = self.fatal.send(message);
                }
            }
        }
    }
}

/// A compaction's outcome, a panic on its thread included.
fn joined(r: Result<std::io::Result<SnapshotDone>, tokio::task::JoinError>) -> std::io::Result<SnapshotDone> {
    r.unwrap_or_else(|e| Err(std::io::Error::other(format!("compaction task failed: {e}"))))
}

enum Event {
    /// Boxed: a loaded core is large, and this happens once.
    Loaded(Box<Result<(ShardCore, Log), String>>),
    Synced,
    Compacted(std::io::Result<SnapshotDone>),
    Msg(Option<ShardMsg>),
    Timer,
    Tick,
}

async fn run(
    settings: ShardSettings,
    mut rx: mpsc::Receiver<ShardMsg>,
    permits: Arc<Semaphore>,
    fatal: FatalSender,
    progress: Arc<LoadProgress>,
) {
    let load_settings = settings.clone();
    let loading = async move {
        let _permit = permits.acquire_owned().await;
        tokio::task::spawn_blocking(move || load(&load_settings))
            .await
            .unwrap_or_else(|e| Err(format!("loading panicked: {e}")))
    };
    tokio::pin!(loading);
    let mut loading_done = false;
    let mut shell = ShardShell::loading(
        ShellSettings {
            id: settings.id,
            fsync: settings.fsync,
            compaction_trigger_bytes: settings.compaction_trigger_bytes,
        },
        SystemClock,
    );
    let mut adapter = Adapter { fatal, sync: None, journal: settings.journal.clone(), compaction: None };
    let (durable_tx, mut durable) = watch::channel(Ok(0));
    let mut durable_tx = Some(durable_tx);
    let timer = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(timer);
    let mut ticker = tokio::time::interval(settings.fsync_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let interval_sync = settings.fsync == FsyncPolicy::Interval;
    let mut done: Option<oneshot::Sender<bool>> = None;
    while !shell.is_stopped() {
        let serving = !shell.is_loading() && adapter.sync.is_some();
        let sleep_for = shell.next_timer_in().unwrap_or(Duration::from_secs(3600));
        timer.as_mut().reset(tokio::time::Instant::now() + sleep_for);
        let event = tokio::select! {
            biased;
            loaded = &mut loading, if !loading_done => Event::Loaded(Box::new(loaded)),
            r = durable.changed(), if serving => match r {
                Ok(()) => Event::Synced,
                // The sender lives in the sync target: never.
                Err(_) => continue,
            },
            r = maybe(adapter.compaction.as_mut()) => Event::Compacted(joined(r)),
            m = rx.recv() => Event::Msg(m),
            _ = &mut timer, if serving => Event::Timer,
            _ = ticker.tick(), if serving && interval_sync => Event::Tick,
        };
        match event {
            Event::Loaded(loaded) => {
                loading_done = true;
                if let Ok((_, log)) = &*loaded {
                    if let Some(tx) = durable_tx.take() {
                        let _ = tx.send_replace(Ok(log.synced()));
                        durable.borrow_and_update();
                        let sync = Arc::new(ShardSync { offered: std::sync::Mutex::new(None), durable: tx });
                        let registration = Registration::new(sync.clone());
                        adapter.sync = Some((sync, registration));
                    }
                }
                let ok = loaded.is_ok();
                shell.on_loaded(*loaded);
                if ok {
                    progress.mark_loaded();
                }
            }
            Event::Synced => {
                let value = durable.borrow_and_update().clone();
                shell.on_synced(value);
            }
            Event::Compacted(r) => {
                adapter.compaction = None;
                shell.on_compacted(r);
            }
            Event::Msg(None) => shell.on_shutdown(),
            Event::Msg(Some(ShardMsg::Shutdown { done: d })) => {
                done = Some(d);
                shell.on_shutdown();
            }
            Event::Msg(Some(ShardMsg::Request { req, reply })) => {
                if serving {
                    shell.begin_batch();
                }
                shell.on_request(req, reply);
                if serving {
                    // Take whatever else is queued before committing (group commit).
                    let mut batch_ended = false;
                    for _ in 0..MAX_BATCH {
                        match rx.try_recv() {
                            Ok(ShardMsg::Request { req, reply }) => shell.on_request(req, reply),
                            Ok(ShardMsg::Shutdown { done: d }) => {
                                done = Some(d);
                                shell.on_shutdown();
                                batch_ended = true;
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    if !batch_ended {
                        shell.on_batch_end();
                    }
                }
            }
            Event::Timer => shell.on_timer(),
            Event::Tick => shell.on_tick(),
        }
        adapter.apply(&mut shell);
        if shell.is_stopping() {
            // Shutdown waits for the running compaction, and for nothing else.
            let written = match adapter.compaction.take() {
                Some(c) => joined(c.await),
                None => Err(std::io::Error::other("no compaction is running")),
            };
            shell.on_compacted(written);
            adapter.apply(&mut shell);
        }
    }
    if let Some(done) = done {
        let _ = done.send(shell.stopped_durably());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request travels into the shard's mailbox and out again, and its
    /// answer back, as values moved several times on the way. Up to 128
    /// bytes the compiler moves them with a few vector stores; beyond that
    /// each move is a call to `memcpy`, which was 12 % of a commit's
    /// instructions while JoinGroup's 208 bytes set the size of every
    /// request (docs/benchmarks.md, "Messages moved at the size of the
    /// largest"). Box the rare large variant that grows one of these.
    #[test]
    fn the_messages_between_connections_and_shards_stay_small() {
        for (name, size) in [
            ("ShardMsg", std::mem::size_of::<ShardMsg>()),
            ("Response", std::mem::size_of::<Response>()),
            ("Outcome", std::mem::size_of::<crate::server::dispatch::Outcome>()),
        ] {
            assert!(size <= 128, "{name} is {size} bytes: box the rare large variant that grew it");
        }
    }
}
