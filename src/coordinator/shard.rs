//! A shard: the imperative shell around one [`ShardCore`].
//!
//! One tokio task owns the core and its log; requests arrive through a
//! bounded mailbox, so group state needs no locks. The task:
//! - loads the log first (on a blocking thread), answering
//!   COORDINATOR_LOAD_IN_PROGRESS meanwhile (Heartbeat: NONE, as Kafka);
//! - runs the core for each request and for due timers;
//! - writes records as the core produces them, and holds back every answer
//!   that depends on a write until the write is durable (`storage.fsync =
//!   always`): the shard asks the node's [`SyncScheduler`] for an fsync, and
//!   one fsync covers everything appended until the scheduler takes it up,
//!   so throughput grows with concurrency (group commit);
//! - compacts the log by snapshot when history outgrows live state.

use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio::task::JoinHandle;

use super::core::{CoreConfig, RandomIds, Reply, ReplyToken, Request, Response, ShardCore};
use super::messages::HeartbeatResponse;
use super::records::RecordError;
use super::store::RecordSink;
use crate::config::FsyncPolicy;
use crate::error_code::ErrorCode;
use crate::storage::{Log, LogOptions, Registration, SnapshotDone, SyncJob, SyncScheduler, SyncTarget, SyncWork};

/// The core's notion of time, in milliseconds since the epoch: the wall
/// clock read once, advanced by the monotonic clock. Deadlines (sessions,
/// joins, pending syncs) then never jump when the system clock is stepped:
/// a step forward would otherwise expire every member at once, a step back
/// would stop sessions expiring. Kafka's timers run on a monotonic clock
/// too. Record timestamps stay within the clock's slew of wall time, and
/// every start re-reads the wall clock.
pub fn coordinator_clock_ms() -> i64 {
    static ANCHOR: OnceLock<(i64, Instant)> = OnceLock::new();
    let (wall, start) = ANCHOR.get_or_init(|| {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
        (wall, Instant::now())
    });
    wall.saturating_add(i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX))
}

/// A message to a shard.
#[allow(clippy::large_enum_variant, reason = "requests are most messages; boxing them would add an allocation to each")]
pub enum ShardMsg {
    Request { req: Request, reply: oneshot::Sender<Response> },
    Shutdown { done: oneshot::Sender<()> },
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

/// Writes the core's records to the shard's log.
struct LogSink<'a> {
    log: &'a mut Log,
    shard: u32,
}

impl RecordSink for LogSink<'_> {
    fn append(&mut self, payloads: &[Bytes]) -> Result<(), ErrorCode> {
        let refs: Vec<&[u8]> = payloads.iter().map(|p| p.as_ref()).collect();
        match self.log.append(&refs) {
            Ok(_) => {
                metrics::counter!("kcoord_log_appends_total").increment(1);
                metrics::counter!("kcoord_log_appended_records_total").increment(payloads.len() as u64);
                Ok(())
            }
            Err(e) => {
                if crate::storage::handles::is_descriptor_exhaustion(&e) {
                    metrics::counter!("kcoord_descriptor_errors_total", "operation" => "coordinator_log").increment(1);
                }
                tracing::error!(shard = self.shard, error = %e, "coordinator log write failed");
                Err(ErrorCode::KAFKA_STORAGE_ERROR)
            }
        }
    }
}

/// Loads a shard's log into a fresh core (blocking).
fn load(settings: &ShardSettings) -> Result<(ShardCore, Log), String> {
    let started = std::time::Instant::now();
    let mut core = ShardCore::new(settings.core.clone(), Box::new(RandomIds));
    let mut records_loaded: u64 = 0;
    let options = LogOptions::new(settings.segment_bytes, settings.repair);
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

fn loading_response(req: &Request) -> Response {
    match req {
        // Kafka answers heartbeats "blindly" while loading.
        Request::Heartbeat(_) => Response::Heartbeat(HeartbeatResponse { error: ErrorCode::NONE }),
        other => other.error_response(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
    }
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
    let (core, log) = loop {
        tokio::select! {
            loaded = &mut loading => match loaded {
                Ok(v) => break v,
                Err(e) => {
                    metrics::counter!("kcoord_shard_failures_total", "stage" => "load").increment(1);
                    let _ = fatal.send(e);
                    // Keep answering until the daemon stops.
                    while let Some(msg) = rx.recv().await {
                        match msg {
                            ShardMsg::Request { req, reply } => {
                                let _ = reply.send(req.error_response(ErrorCode::COORDINATOR_NOT_AVAILABLE));
                            }
                            ShardMsg::Shutdown { done } => {
                                let _ = done.send(());
                                return;
                            }
                        }
                    }
                    return;
                }
            },
            msg = rx.recv() => match msg {
                Some(ShardMsg::Request { req, reply }) => {
                    let _ = reply.send(loading_response(&req));
                }
                Some(ShardMsg::Shutdown { done }) => {
                    let _ = done.send(());
                    return;
                }
                None => return,
            },
        }
    };
    let mut shard = Shard::new(settings, core, log, fatal);
    progress.mark_loaded();
    shard.serve(rx).await;
}

/// What the shard's fsyncs made durable: the log's synced end, or the error
/// of the fsync that failed (after which nothing more counts as durable).
type Durable = Result<u64, String>;

/// The shard's log as the sync scheduler sees it: the newest fsync the shard
/// offered (the log itself stays with the shard's task), and where the
/// outcome goes.
struct ShardSync {
    offered: std::sync::Mutex<Option<SyncJob>>,
    durable: watch::Sender<Durable>,
}

impl ShardSync {
    /// Replaces the fsync on offer by `job`, which covers more.
    fn offer(&self, job: SyncJob) {
        *self.offered.lock().unwrap_or_else(|p| p.into_inner()) = Some(job);
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

/// The state of a loaded shard.
struct Shard {
    settings: ShardSettings,
    core: ShardCore,
    log: Log,
    fatal: FatalSender,
    /// Fast-hashed: one insert and one removal per request.
    pending: super::FastMap<ReplyToken, oneshot::Sender<Response>>,
    next_token: ReplyToken,
    /// Answers held until the log is durable up to the given end.
    waiting: VecDeque<(u64, Reply)>,
    /// The shard's log in the node's sync scheduler.
    sync: Arc<ShardSync>,
    registration: Arc<Registration>,
    /// Changes when an fsync of the log returns.
    durable: watch::Receiver<Durable>,
    compaction: Option<JoinHandle<std::io::Result<SnapshotDone>>>,
    /// After a failed compaction, when to try again and how long the next
    /// pause is: a disk that is full or failing is not hammered with
    /// snapshots (each of which rolls a segment) on every request.
    compaction_retry: Option<(Instant, Duration)>,
    failed: bool,
}

/// The first pause after a failed compaction; it doubles up to the maximum.
const COMPACTION_RETRY_MIN: Duration = Duration::from_secs(1);
const COMPACTION_RETRY_MAX: Duration = Duration::from_secs(300);

enum Event {
    Synced,
    Compacted(Result<std::io::Result<SnapshotDone>, tokio::task::JoinError>),
    Msg(Option<ShardMsg>),
    Timer,
    Tick,
}

/// Requests handled before group-committing their writes.
const MAX_BATCH: usize = 512;

impl Shard {
    fn new(settings: ShardSettings, core: ShardCore, log: Log, fatal: FatalSender) -> Self {
        let (durable_tx, durable) = watch::channel(Ok(log.synced()));
        let sync = Arc::new(ShardSync { offered: std::sync::Mutex::new(None), durable: durable_tx });
        let registration = Registration::new(sync.clone());
        let mut shard = Shard {
            settings,
            core,
            log,
            fatal,
            pending: super::FastMap::default(),
            next_token: 0,
            waiting: VecDeque::new(),
            sync,
            registration,
            durable,
            compaction: None,
            compaction_retry: None,
            failed: false,
        };
        let mut out = Vec::new();
        let mut sink = LogSink { log: &mut shard.log, shard: shard.settings.id };
        shard.core.on_loaded(coordinator_clock_ms(), &mut sink, &mut out);
        shard.route(out);
        shard
    }

    async fn serve(&mut self, mut rx: mpsc::Receiver<ShardMsg>) {
        let timer = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(timer);
        let mut ticker = tokio::time::interval(self.settings.fsync_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let interval_sync = self.settings.fsync == FsyncPolicy::Interval;
        loop {
            let sleep_for = match self.core.next_deadline() {
                Some(d) => Duration::from_millis((d - coordinator_clock_ms()).max(0) as u64),
                None => Duration::from_secs(3600),
            };
            timer.as_mut().reset(tokio::time::Instant::now() + sleep_for);
            let event = tokio::select! {
                biased;
                r = self.durable.changed() => match r {
                    Ok(()) => Event::Synced,
                    // The sender lives in `self.sync`: never.
                    Err(_) => continue,
                },
                r = maybe(self.compaction.as_mut()) => Event::Compacted(r),
                m = rx.recv() => Event::Msg(m),
                _ = &mut timer => Event::Timer,
                _ = ticker.tick(), if interval_sync => Event::Tick,
            };
            match event {
                Event::Synced => {
                    let durable = self.durable.borrow_and_update().clone();
                    self.on_synced(durable);
                }
                Event::Compacted(r) => {
                    self.compaction = None;
                    self.on_compacted(r);
                }
                Event::Msg(None) => return self.shutdown(None).await,
                Event::Msg(Some(ShardMsg::Shutdown { done })) => return self.shutdown(Some(done)).await,
                Event::Msg(Some(ShardMsg::Request { req, reply })) => {
                    self.handle(req, reply);
                    // Take whatever else is queued before committing (group commit).
                    for _ in 0..MAX_BATCH {
                        match rx.try_recv() {
                            Ok(ShardMsg::Request { req, reply }) => self.handle(req, reply),
                            Ok(ShardMsg::Shutdown { done }) => return self.shutdown(Some(done)).await,
                            Err(_) => break,
                        }
                    }
                    self.fire_timers();
                }
                Event::Timer => self.fire_timers(),
                Event::Tick => self.start_sync(),
            }
            if self.settings.fsync == FsyncPolicy::Always {
                self.start_sync();
            }
            self.maybe_compact();
        }
    }

    fn handle(&mut self, req: Request, reply: oneshot::Sender<Response>) {
        if self.failed {
            let _ = reply.send(req.error_response(ErrorCode::NOT_COORDINATOR));
            return;
        }
        self.next_token += 1;
        let token = self.next_token;
        self.pending.insert(token, reply);
        let mut out = Vec::new();
        let mut sink = LogSink { log: &mut self.log, shard: self.settings.id };
        self.core.handle(coordinator_clock_ms(), token, req, &mut sink, &mut out);
        self.route(out);
        self.stop_if_poisoned();
    }

    /// A log whose failed append could not be undone refuses every later
    /// write; like a failed fsync, that stops the daemon rather than leave a
    /// shard answering errors forever.
    fn stop_if_poisoned(&mut self) {
        if let Some(reason) = self.log.poisoned().map(str::to_string) {
            if !self.failed {
                self.fail(format!("coordinator shard {}: {reason}", self.settings.id));
            }
        }
    }

    fn fire_timers(&mut self) {
        let mut out = Vec::new();
        let mut sink = LogSink { log: &mut self.log, shard: self.settings.id };
        self.core.fire_timers(coordinator_clock_ms(), &mut sink, &mut out);
        self.route(out);
        self.stop_if_poisoned();
    }

    /// Sends answers now, or holds them until everything written so far is
    /// durable. Every answer waits, not only those of requests that wrote:
    /// an answer can reveal state from an earlier write still being synced
    /// (a follower's SyncGroup seeing the leader's assignment, an OffsetFetch
    /// seeing a commit), and a crash must not take back what a client saw.
    /// Kafka's coordinator runtime completes every write operation, records
    /// or not, only once the log is committed up to its last write.
    fn route(&mut self, out: Vec<Reply>) {
        let hold = self.settings.fsync == FsyncPolicy::Always && self.log.synced() < self.log.end();
        let end = self.log.end();
        for r in out {
            if hold {
                self.waiting.push_back((end, r));
            } else {
                self.deliver(r);
            }
        }
    }

    fn deliver(&mut self, r: Reply) {
        if let Some(tx) = self.pending.remove(&r.token) {
            let _ = tx.send(r.response);
        }
    }

    /// Offers an fsync of everything appended so far to the node's sync
    /// scheduler (it replaces an offer not yet taken up, which it covers).
    fn start_sync(&mut self) {
        if self.failed {
            return;
        }
        if let Some(job) = self.log.sync_job() {
            self.sync.offer(job);
            SyncScheduler::global().request(&self.registration);
        }
    }

    fn on_synced(&mut self, durable: Durable) {
        match durable {
            Ok(end) => {
                self.log.mark_synced(end);
                let synced = self.log.synced();
                while self.waiting.front().is_some_and(|(e, _)| *e <= synced) {
                    if let Some((_, reply)) = self.waiting.pop_front() {
                        self.deliver(reply);
                    }
                }
            }
            Err(e) => {
                if !self.failed {
                    self.fail(format!("fsync of coordinator shard {} failed: {e}", self.settings.id))
                }
            }
        }
    }

    /// After a failed fsync nothing written since the last good one can be
    /// trusted to be on disk; stop acknowledging and stop the daemon.
    fn fail(&mut self, message: String) {
        tracing::error!("{message}");
        metrics::counter!("kcoord_shard_failures_total", "stage" => "fsync").increment(1);
        self.failed = true;
        let _ = self.fatal.send(message);
    }

    fn maybe_compact(&mut self) {
        if self.compaction.is_some() || self.failed {
            return;
        }
        if self.compaction_retry.is_some_and(|(at, _)| Instant::now() < at) {
            return;
        }
        let since = self.log.bytes_since_snapshot();
        if since < self.settings.compaction_trigger_bytes.max(self.log.snapshot_bytes()) {
            return;
        }
        let plan = match self.log.begin_snapshot() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(shard = self.settings.id, error = %e, "cannot start compaction");
                self.compaction_failed();
                return;
            }
        };
        let payloads = self.core.snapshot(coordinator_clock_ms());
        tracing::info!(
            shard = self.settings.id,
            records = payloads.len(),
            history_bytes = since,
            "compacting coordinator log"
        );
        self.compaction = Some(tokio::task::spawn_blocking(move || {
            let mut it = payloads.into_iter().map(|b| b.to_vec());
            plan.write(&mut it)
        }));
    }

    fn on_compacted(&mut self, r: Result<std::io::Result<SnapshotDone>, tokio::task::JoinError>) {
        match r {
            Ok(Ok(done)) => {
                let (base, records, bytes) = (done.base(), done.records(), done.bytes());
                match self.log.finish_snapshot(done) {
                    Ok(()) => {
                        self.compaction_retry = None;
                        tracing::info!(shard = self.settings.id, base, records, bytes, "compaction finished")
                    }
                    Err(e) => {
                        tracing::warn!(shard = self.settings.id, error = %e, "cannot finish compaction");
                        self.compaction_failed();
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(shard = self.settings.id, error = %e, "compaction failed; will retry");
                self.compaction_failed();
            }
            Err(e) => {
                tracing::warn!(shard = self.settings.id, error = %e, "compaction task failed");
                self.compaction_failed();
            }
        }
    }

    /// Schedules the next compaction attempt after a failure, backing off.
    fn compaction_failed(&mut self) {
        let pause = match self.compaction_retry {
            Some((_, last)) => (last * 2).min(COMPACTION_RETRY_MAX),
            None => COMPACTION_RETRY_MIN,
        };
        self.compaction_retry = Some((Instant::now() + pause, pause));
    }

    /// Kafka's unload: parked requests get NOT_COORDINATOR; pending writes
    /// are made durable and acknowledged; then the task ends.
    async fn shutdown(&mut self, done: Option<oneshot::Sender<()>>) {
        let mut out = Vec::new();
        self.core.unload(coordinator_clock_ms(), &mut out);
        for r in out {
            self.deliver(r);
        }
        // An fsync the scheduler may still run for this log is harmless:
        // the final one below covers everything.
        self.sync.offered.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(c) = self.compaction.take() {
            if let Ok(Ok(done)) = c.await {
                let _ = self.log.finish_snapshot(done);
            }
        }
        if !self.failed {
            // Also records the end in the log's manifest, so that records
            // cut from the end of the log before the next start are noticed.
            match self.log.sync_and_record_end() {
                Ok(()) => {
                    while let Some((_, reply)) = self.waiting.pop_front() {
                        self.deliver(reply);
                    }
                }
                Err(e) => tracing::error!(shard = self.settings.id, error = %e, "final fsync failed"),
            }
        }
        // Anything still pending is dropped: its connection sees the close.
        self.pending.clear();
        if let Some(done) = done {
            let _ = done.send(());
        }
    }
}
