//! The shard shell: everything a shard does around its [`ShardCore`], as a
//! synchronous state machine over a [`ShardLog`] and a [`Clock`].
//!
//! The shard's tokio task (`shard`) only waits for events and feeds them
//! here; what must happen off the shard's thread (an fsync, a snapshot
//! write, stopping the daemon) comes back as an [`Effect`]. So the rules
//! that keep acknowledgements honest are tested without a runtime, a disk
//! or real time (`shell_tests`), and a simulation can drive the real shell.
//!
//! The shell:
//! - answers COORDINATOR_LOAD_IN_PROGRESS while the log loads (Heartbeat:
//!   NONE, as Kafka), and COORDINATOR_NOT_AVAILABLE if loading failed;
//! - runs the core for each request and for due timers, writing the
//!   records it produces;
//! - holds back every answer that depends on a write until the write is
//!   durable (`storage.fsync = always`), asking for one fsync per batch of
//!   requests (group commit);
//! - stops acknowledging for good after a failed fsync or a poisoned log,
//!   and reports it (fail-stop);
//! - compacts the log by snapshot when history outgrows live state, backing
//!   off after failures;
//! - shuts down in Kafka's order: unload, finish a running compaction, a
//!   final fsync, then the answers it made durable.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::clock::Clock;
use super::shard_log::{LogSink, ShardLog};
use crate::config::FsyncPolicy;
use crate::coordinator::state::core::{Reply, ReplyToken, Request, Response, ShardCall, ShardCore};
use crate::error_code::ErrorCode;

/// What the shard's fsyncs made durable: the log's synced end, or the error
/// of the fsync that failed (after which nothing more counts as durable).
pub type Durable = Result<u64, String>;

/// The first pause after a failed compaction; it doubles up to the maximum.
pub const COMPACTION_RETRY_MIN: Duration = Duration::from_secs(1);
pub const COMPACTION_RETRY_MAX: Duration = Duration::from_secs(300);

/// What the shell's settings are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShellSettings {
    pub id: u32,
    pub fsync: FsyncPolicy,
    pub compaction_trigger_bytes: u64,
}

/// Work the shell asks its adapter to do outside the shard's thread.
pub enum Effect<L: ShardLog> {
    /// Offer this fsync to the node's sync scheduler (it replaces an offer
    /// not yet taken up, which it covers); report the outcome with
    /// [`ShardShell::on_synced`].
    Fsync(L::SyncJob),
    /// Withdraw an fsync on offer: shutdown's final fsync covers it.
    WithdrawFsync,
    /// Write this snapshot on a blocking thread; report the outcome with
    /// [`ShardShell::on_compacted`].
    Compact { plan: L::SnapshotPlan, payloads: Vec<Bytes> },
    /// The shard failed for good; the daemon must stop.
    Fatal(String),
}

/// A loaded shard.
struct Loaded<L> {
    core: ShardCore,
    log: L,
    /// Fast-hashed: one insert and one removal per request.
    pending: crate::coordinator::FastMap<ReplyToken, oneshot::Sender<Response>>,
    next_token: ReplyToken,
    /// Answers held until the log is durable (`always`), or written
    /// (`interval`, `never`), up to the given end.
    waiting: VecDeque<(u64, Reply)>,
    /// The core's answers to the event being handled, emptied by [`route`]
    /// and kept for the next: a vector per request was an allocation each.
    replies: Vec<Reply>,
    compacting: bool,
    /// After a failed compaction, when to try again and how long the next
    /// pause is: a disk that is full or failing is not hammered with
    /// snapshots (each of which rolls a segment) on every request.
    compaction_retry: Option<(i64, Duration)>,
    failed: bool,
    /// An fsync failed: unlike a poisoned log, whose earlier fsyncs still
    /// count, nothing is durable past the last good fsync.
    fsync_failed: bool,
    /// Shutdown waits for the running compaction.
    stopping: bool,
}

enum Phase<L> {
    Loading,
    LoadFailed,
    Serving(Box<Loaded<L>>),
    Stopped,
}

/// One shard's event handling. Events: [`ShardShell::on_loaded`], a batch of
/// requests ([`ShardShell::on_request`] each, then
/// [`ShardShell::on_batch_end`]), [`ShardShell::on_synced`] (an fsync
/// finished or failed), [`ShardShell::on_compacted`], [`ShardShell::on_tick`]
/// (the `interval` fsync policy), [`ShardShell::on_timer`] (a core deadline)
/// and [`ShardShell::on_shutdown`]. A failed write is the log's answer to an
/// append, seen synchronously.
pub struct ShardShell<L: ShardLog, C> {
    settings: ShellSettings,
    clock: C,
    phase: Phase<L>,
    effects: Vec<Effect<L>>,
    /// Stopped with everything this shard wrote durable in its own log
    /// files (its final fsync succeeded, or it never served).
    stopped_durably: bool,
    /// The time the requests of the batch being drained are served at
    /// ([`ShardShell::begin_batch`]): read once for them all, not once a
    /// request (clock reads were ~3 % of a busy daemon's CPU).
    batch_now: Option<i64>,
}

/// Kafka answers heartbeats "blindly" while loading.
pub fn loading_response(req: &Request) -> Response {
    match req {
        Request::Heartbeat(r) => r.error(ErrorCode::NONE).into(),
        other => other.error_response(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
    }
}

impl<L: ShardLog, C: Clock> ShardShell<L, C> {
    /// A shard whose log is loading.
    pub fn loading(settings: ShellSettings, clock: C) -> Self {
        ShardShell {
            settings,
            clock,
            phase: Phase::Loading,
            effects: Vec::new(),
            stopped_durably: false,
            batch_now: None,
        }
    }

    /// The log loaded into `core` (or could not be read).
    pub fn on_loaded(&mut self, loaded: Result<(ShardCore, L), String>) {
        if !matches!(self.phase, Phase::Loading) {
            return;
        }
        let (core, log) = match loaded {
            Ok(v) => v,
            Err(e) => {
                metrics::counter!("kcoord_shard_failures_total", "stage" => "load").increment(1);
                self.effects.push(Effect::Fatal(e));
                self.phase = Phase::LoadFailed;
                return;
            }
        };
        let mut shard = Box::new(Loaded {
            core,
            log,
            pending: crate::coordinator::FastMap::default(),
            next_token: 0,
            waiting: VecDeque::new(),
            replies: Vec::new(),
            compacting: false,
            compaction_retry: None,
            failed: false,
            fsync_failed: false,
            stopping: false,
        });
        let mut out = Vec::new();
        let mut sink = LogSink { log: &mut shard.log, shard: self.settings.id };
        shard.core.on_loaded(self.clock.now_ms(), &mut sink, &mut out);
        route(&self.settings, &mut shard, &mut out);
        self.phase = Phase::Serving(shard);
    }

    /// Whether the log has loaded (successfully or not).
    pub fn is_loading(&self) -> bool {
        matches!(self.phase, Phase::Loading)
    }

    /// Whether shutdown has begun and waits for a running compaction.
    pub fn is_stopping(&self) -> bool {
        matches!(&self.phase, Phase::Serving(s) if s.stopping)
    }

    /// Whether shutdown has finished: the adapter can confirm it and end.
    pub fn is_stopped(&self) -> bool {
        matches!(self.phase, Phase::Stopped)
    }

    /// Stopped, and everything it wrote is durable in its log's own files:
    /// the node's journal no longer holds anything this shard needs.
    pub fn stopped_durably(&self) -> bool {
        self.is_stopped() && self.stopped_durably
    }

    /// The work for the adapter that the events so far produced.
    pub fn effects(&mut self) -> std::vec::Drain<'_, Effect<L>> {
        self.effects.drain(..)
    }

    /// The core's state, for tests and simulations.
    pub fn core(&self) -> Option<&ShardCore> {
        match &self.phase {
            Phase::Serving(s) => Some(&s.core),
            _ => None,
        }
    }

    /// The log, for tests and simulations.
    pub fn log(&self) -> Option<&L> {
        match &self.phase {
            Phase::Serving(s) => Some(&s.log),
            _ => None,
        }
    }

    /// The log, for tests and simulations that inject faults.
    pub fn log_mut(&mut self) -> Option<&mut L> {
        match &mut self.phase {
            Phase::Serving(s) => Some(&mut s.log),
            _ => None,
        }
    }

    /// How long until the core's next timer is due (None: no timer).
    pub fn next_timer_in(&self) -> Option<Duration> {
        let Phase::Serving(s) = &self.phase else { return None };
        let deadline = s.core.next_deadline()?;
        Some(Duration::from_millis(deadline.saturating_sub(self.clock.now_ms()).max(0) as u64))
    }

    /// One request of a batch. Its answer goes to `reply`, now or once what
    /// it depends on is durable.
    pub fn on_request(&mut self, req: Request, reply: oneshot::Sender<Response>) {
        let s = match &mut self.phase {
            Phase::Serving(s) => s,
            Phase::Loading => {
                let _ = reply.send(loading_response(&req));
                return;
            }
            Phase::LoadFailed => {
                let _ = reply.send(req.error_response(ErrorCode::COORDINATOR_NOT_AVAILABLE));
                return;
            }
            Phase::Stopped => {
                let _ = reply.send(req.error_response(ErrorCode::NOT_COORDINATOR));
                return;
            }
        };
        if s.failed || s.stopping {
            let _ = reply.send(req.error_response(ErrorCode::NOT_COORDINATOR));
            return;
        }
        s.next_token += 1;
        let token = s.next_token;
        s.pending.insert(token, reply);
        let mut out = std::mem::take(&mut s.replies);
        let mut sink = LogSink { log: &mut s.log, shard: self.settings.id };
        let now = self.batch_now.unwrap_or_else(|| self.clock.now_ms());
        s.core.handle(now, token, req, &mut sink, &mut out);
        route(&self.settings, s, &mut out);
        keep_replies(s, out);
        stop_if_poisoned(&self.settings, s, &mut self.effects);
    }

    /// The start of a batch of requests drained from the mailbox back to
    /// back: they are all served at the time read now. A batch takes at most
    /// a few milliseconds, far below any timeout it could shift.
    pub fn begin_batch(&mut self) {
        self.batch_now = Some(self.clock.now_ms());
    }

    /// The end of a batch of requests: due timers run, then one fsync covers
    /// every write of the batch (group commit).
    pub fn on_batch_end(&mut self) {
        self.batch_now = None;
        if matches!(self.phase, Phase::Serving(_)) {
            self.fire_timers();
            self.after_event();
        }
    }

    /// A core deadline passed.
    pub fn on_timer(&mut self) {
        if matches!(self.phase, Phase::Serving(_)) {
            self.fire_timers();
            self.after_event();
        }
    }

    /// The `interval` fsync policy's tick: offer an fsync.
    pub fn on_tick(&mut self) {
        if let Phase::Serving(s) = &mut self.phase {
            start_sync(s, &mut self.effects);
            self.after_event();
        }
    }

    /// An fsync finished: answers it made durable leave. A failed one stops
    /// the shard: nothing written since the last good fsync can be trusted
    /// to be on disk.
    pub fn on_synced(&mut self, durable: Durable) {
        let Phase::Serving(s) = &mut self.phase else { return };
        match durable {
            // After a failed fsync nothing more counts as durable (the
            // adapter's watch never turns back to Ok either).
            Ok(_) if s.fsync_failed => {}
            Ok(end) => {
                s.log.mark_synced(end);
                let synced = s.log.synced();
                release(s, synced);
            }
            Err(e) => {
                s.fsync_failed = true;
                if !s.failed {
                    fail(s, format!("fsync of coordinator shard {} failed: {e}", self.settings.id), &mut self.effects)
                }
            }
        }
        self.after_event();
    }

    /// The snapshot asked for by [`Effect::Compact`] was written (or not).
    pub fn on_compacted(&mut self, written: io::Result<L::SnapshotDone>) {
        let now = self.clock.now_ms();
        let id = self.settings.id;
        let Phase::Serving(s) = &mut self.phase else { return };
        s.compacting = false;
        if s.stopping {
            if let Ok(done) = written {
                let _ = s.log.finish_snapshot(done);
            }
            self.finish_shutdown();
            return;
        }
        match written {
            Ok(done) => match s.log.finish_snapshot(done) {
                Ok(c) => {
                    s.compaction_retry = None;
                    tracing::info!(
                        shard = id,
                        base = c.base,
                        records = c.records,
                        bytes = c.bytes,
                        "compaction finished"
                    )
                }
                Err(e) => {
                    tracing::warn!(shard = id, error = %e, "cannot finish compaction");
                    compaction_failed(s, now);
                }
            },
            Err(e) => {
                tracing::warn!(shard = id, error = %e, "compaction failed; will retry");
                compaction_failed(s, now);
            }
        }
        self.after_event();
    }

    /// Kafka's unload: parked requests get NOT_COORDINATOR; a running
    /// compaction is finished; pending writes are made durable and
    /// acknowledged; then the shard stops ([`ShardShell::is_stopped`]).
    pub fn on_shutdown(&mut self) {
        self.batch_now = None;
        let now = self.clock.now_ms();
        let s = match &mut self.phase {
            Phase::Serving(s) => s,
            Phase::Stopped => return,
            Phase::Loading | Phase::LoadFailed => {
                // It never wrote a record.
                self.stopped_durably = true;
                self.phase = Phase::Stopped;
                return;
            }
        };
        if s.stopping {
            return;
        }
        s.stopping = true;
        let mut out = Vec::new();
        s.core.unload(now, &mut out);
        for r in out {
            deliver(s, r);
        }
        // An fsync the scheduler may still run for this log is harmless:
        // the final one covers everything.
        self.effects.push(Effect::WithdrawFsync);
        if !s.compacting {
            self.finish_shutdown();
        }
    }

    fn finish_shutdown(&mut self) {
        let id = self.settings.id;
        let Phase::Serving(s) = &mut self.phase else { return };
        if !s.failed {
            // Also records the end in the log's manifest, so that records
            // cut from the end of the log before the next start are noticed.
            match s.log.sync_and_record_end() {
                Ok(()) => {
                    while let Some((_, reply)) = s.waiting.pop_front() {
                        deliver(s, reply);
                    }
                    self.stopped_durably = true;
                }
                Err(e) => tracing::error!(shard = id, error = %e, "final fsync failed"),
            }
        }
        // Anything still pending is dropped: its connection sees the close.
        self.phase = Phase::Stopped;
    }

    fn fire_timers(&mut self) {
        let now = self.clock.now_ms();
        let Phase::Serving(s) = &mut self.phase else { return };
        let mut out = std::mem::take(&mut s.replies);
        let mut sink = LogSink { log: &mut s.log, shard: self.settings.id };
        s.core.fire_timers(now, &mut sink, &mut out);
        route(&self.settings, s, &mut out);
        keep_replies(s, out);
        stop_if_poisoned(&self.settings, s, &mut self.effects);
    }

    /// After every event: the event's records written with one write,
    /// group commit (`always`) and compaction.
    fn after_event(&mut self) {
        let now = self.clock.now_ms();
        let Phase::Serving(s) = &mut self.phase else { return };
        if self.settings.fsync == FsyncPolicy::Always {
            start_sync(s, &mut self.effects);
        } else if !s.failed && s.log.write_appended().is_ok() {
            let written = s.log.written();
            release(s, written);
        }
        // Writing the appended records (directly, or by handing them to the
        // journal) can fail; a failed write poisons the log.
        stop_if_poisoned(&self.settings, s, &mut self.effects);
        maybe_compact(&self.settings, s, now, &mut self.effects);
    }
}

/// Sends answers now, or holds them until everything written so far is
/// durable. Every answer waits, not only those of requests that wrote: an
/// answer can reveal state from an earlier write still being synced (a
/// follower's SyncGroup seeing the leader's assignment, an OffsetFetch
/// seeing a commit), and a crash must not take back what a client saw.
/// Kafka's coordinator runtime completes every write operation, records or
/// not, only once the log is committed up to its last write.
///
/// Without `always` the promise is weaker but kept as well: nothing is
/// answered before it is in the log's files (the page cache), so that a
/// crash of the process alone takes back nothing a client saw. The batch's
/// records are written with one write at its end (`after_event`), and the
/// answers go then.
fn route<L: ShardLog>(settings: &ShellSettings, s: &mut Loaded<L>, out: &mut Vec<Reply>) {
    let end = s.log.end();
    let hold = match settings.fsync {
        FsyncPolicy::Always => s.log.synced() < end,
        FsyncPolicy::Interval | FsyncPolicy::Never => s.log.written() < end,
    };
    for r in out.drain(..) {
        if hold {
            s.waiting.push_back((end, r));
        } else {
            deliver(s, r);
        }
    }
}

/// Answers a shard keeps room for between events; a rare event with many
/// (a mass expiry of a large group) does not hold its memory afterwards.
const KEPT_REPLIES: usize = 256;

/// Gives the emptied answer vector back to the shard for the next event.
fn keep_replies<L>(s: &mut Loaded<L>, out: Vec<Reply>) {
    if out.capacity() <= KEPT_REPLIES {
        s.replies = out;
    }
}

/// Sends the held answers whose writes are covered up to `end` (durable
/// under `always`, written otherwise), in the order they were held.
fn release<L>(s: &mut Loaded<L>, end: u64) {
    while s.waiting.front().is_some_and(|(e, _)| *e <= end) {
        if let Some((_, reply)) = s.waiting.pop_front() {
            deliver(s, reply);
        }
    }
}

fn deliver<L>(s: &mut Loaded<L>, r: Reply) {
    if let Some(tx) = s.pending.remove(&r.token) {
        let _ = tx.send(r.response);
    }
}

/// A log whose failed append could not be undone refuses every later write;
/// like a failed fsync, that stops the daemon rather than leave a shard
/// answering errors forever.
fn stop_if_poisoned<L: ShardLog>(settings: &ShellSettings, s: &mut Loaded<L>, effects: &mut Vec<Effect<L>>) {
    if s.failed {
        return;
    }
    if let Some(reason) = s.log.poisoned().map(str::to_string) {
        fail(s, format!("coordinator shard {}: {reason}", settings.id), effects);
    }
}

/// Stops acknowledging for good and stops the daemon.
fn fail<L: ShardLog>(s: &mut Loaded<L>, message: String, effects: &mut Vec<Effect<L>>) {
    tracing::error!("{message}");
    metrics::counter!("kcoord_shard_failures_total", "stage" => "fsync").increment(1);
    s.failed = true;
    effects.push(Effect::Fatal(message));
}

/// Asks for an fsync of everything appended so far.
fn start_sync<L: ShardLog>(s: &mut Loaded<L>, effects: &mut Vec<Effect<L>>) {
    if s.failed || s.stopping {
        return;
    }
    if let Some(job) = s.log.sync_job() {
        effects.push(Effect::Fsync(job));
    }
}

fn maybe_compact<L: ShardLog>(settings: &ShellSettings, s: &mut Loaded<L>, now: i64, effects: &mut Vec<Effect<L>>) {
    if s.compacting || s.failed || s.stopping {
        return;
    }
    if s.compaction_retry.is_some_and(|(at, _)| now < at) {
        return;
    }
    let since = s.log.bytes_since_snapshot();
    if since < settings.compaction_trigger_bytes.max(s.log.snapshot_bytes()) {
        return;
    }
    let plan = match s.log.begin_snapshot() {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(shard = settings.id, error = %e, "cannot start compaction");
            compaction_failed(s, now);
            return;
        }
    };
    let payloads = s.core.snapshot(now);
    tracing::info!(shard = settings.id, records = payloads.len(), history_bytes = since, "compacting coordinator log");
    s.compacting = true;
    effects.push(Effect::Compact { plan, payloads });
}

/// Schedules the next compaction attempt after a failure, backing off.
fn compaction_failed<L>(s: &mut Loaded<L>, now: i64) {
    let pause = match s.compaction_retry {
        Some((_, last)) => (last * 2).min(COMPACTION_RETRY_MAX),
        None => COMPACTION_RETRY_MIN,
    };
    let at = now.saturating_add(i64::try_from(pause.as_millis()).unwrap_or(i64::MAX));
    s.compaction_retry = Some((at, pause));
}
