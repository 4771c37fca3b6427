//! The shard shell's rules, driven event by event over a fake log and a
//! manual clock: when answers leave, fail-stop, compaction back-off,
//! shutdown order and loading.

use tokio::sync::oneshot;

use super::clock::ManualClock;
use super::fake_log::FakeLog;
use super::shard_log::ShardLog;
use super::shell::{Effect, ShardShell, ShellSettings, COMPACTION_RETRY_MAX};
use crate::config::FsyncPolicy;
use crate::coordinator::state::core::{CoreConfig, CountingIds, FetchOffsets, Request, Response, ShardCore};
use crate::coordinator::state::messages::*;
use crate::coordinator::state::testkit::{join, test_config, T0};
use crate::error_code::ErrorCode;

type Shell = ShardShell<FakeLog, ManualClock>;

/// What the shell asked its adapter for, in order.
#[derive(Debug, PartialEq)]
enum Asked {
    Fsync(u64),
    Withdraw,
    Compact(u64),
    Fatal,
}

struct Rig {
    shell: Shell,
    clock: ManualClock,
    /// Snapshots asked for and not yet reported written.
    compactions: Vec<(u64, Vec<bytes::Bytes>)>,
}

fn settings(fsync: FsyncPolicy, compaction_trigger_bytes: u64) -> ShellSettings {
    ShellSettings { id: 7, fsync, compaction_trigger_bytes }
}

impl Rig {
    fn new() -> Rig {
        Rig::with(settings(FsyncPolicy::Always, u64::MAX), test_config(), FakeLog::default())
    }

    fn with(settings: ShellSettings, cfg: CoreConfig, log: FakeLog) -> Rig {
        let clock = ManualClock::at(T0);
        let mut shell = ShardShell::loading(settings, clock.clone());
        let core = ShardCore::new(cfg, Box::new(CountingIds::default()));
        shell.on_loaded(Ok((core, log)));
        Rig { shell, clock, compactions: Vec::new() }
    }

    /// One batch of requests; returns where each answer will arrive.
    fn batch(&mut self, reqs: Vec<Request>) -> Vec<oneshot::Receiver<Response>> {
        let rxs = reqs
            .into_iter()
            .map(|req| {
                let (tx, rx) = oneshot::channel();
                self.shell.on_request(req, tx);
                rx
            })
            .collect();
        self.shell.on_batch_end();
        rxs
    }

    fn one(&mut self, req: Request) -> oneshot::Receiver<Response> {
        self.batch(vec![req]).remove(0)
    }

    /// Drains the shell's effects, keeping snapshots to report later.
    fn asked(&mut self) -> Vec<Asked> {
        let mut out = Vec::new();
        for e in self.shell.effects() {
            out.push(match e {
                Effect::Fsync(end) => Asked::Fsync(end),
                Effect::WithdrawFsync => Asked::Withdraw,
                Effect::Compact { plan, payloads } => {
                    self.compactions.push((plan, payloads));
                    Asked::Compact(plan)
                }
                Effect::Fatal(_) => Asked::Fatal,
            });
        }
        out
    }

    /// Every fsync asked for so far succeeds.
    fn sync_all(&mut self) {
        let end = self.log().end();
        self.shell.on_synced(Ok(end));
        self.asked();
    }

    fn log(&mut self) -> &mut FakeLog {
        self.shell.log_mut().expect("the shard is loaded")
    }
}

fn commit(group: &str, offset: i64) -> Request {
    Request::Commit(OffsetCommitRequest {
        version: 8,
        group_id: group.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: vec![CommitTopic {
            name: "t".into(),
            partitions: vec![CommitPartition { partition: 0, offset, leader_epoch: -1, metadata: Some(String::new()) }],
        }],
    })
}

fn fetch(group: &str) -> Request {
    Request::Fetch(FetchOffsets {
        group: OffsetFetchGroup {
            group_id: group.into(),
            member_id: None,
            member_epoch: -1,
            topics: Some(vec![FetchTopic { name: "t".into(), partitions: vec![0] }]),
        },
        require_stable: false,
    })
}

fn heartbeat(group: &str) -> Request {
    Request::Heartbeat(HeartbeatRequest {
        group_id: group.into(),
        generation_id: 1,
        member_id: "m".into(),
        group_instance_id: None,
    })
}

/// The answer if it has left, None if it is still held.
fn answer(rx: &mut oneshot::Receiver<Response>) -> Option<Response> {
    rx.try_recv().ok()
}

fn commit_error(rx: &mut oneshot::Receiver<Response>) -> Option<ErrorCode> {
    match answer(rx)? {
        Response::Commit(r) => Some(r.topics[0].partitions[0].error),
        other => panic!("expected an OffsetCommit answer, got {other:?}"),
    }
}

fn fetched_offset(rx: &mut oneshot::Receiver<Response>) -> Option<i64> {
    match answer(rx)? {
        Response::Fetch(r) => Some(r.topics[0].partitions[0].offset),
        other => panic!("expected an OffsetFetch answer, got {other:?}"),
    }
}

fn error_of(resp: Response) -> ErrorCode {
    match resp {
        Response::Commit(r) => r.topics[0].partitions[0].error,
        Response::Fetch(r) => r.error,
        Response::Heartbeat(r) => r.error,
        Response::Join(r) => r.error,
        other => panic!("unexpected answer {other:?}"),
    }
}

/// A rig whose batches fire no timers of their own: no retention sweep
/// writes tombstones while a test counts records.
fn quiet_config() -> CoreConfig {
    CoreConfig { retention_check_interval_ms: i64::MAX / 4, ..test_config() }
}

#[test]
fn no_answer_leaves_before_the_write_it_depends_on_is_durable() {
    let mut rig = Rig::new();
    // A commit and a read of it in one batch: the read reveals the commit.
    let mut rxs = rig.batch(vec![commit("g", 5), fetch("g")]);
    assert_eq!(rig.asked(), vec![Asked::Fsync(1)], "one fsync covers the batch");
    assert_eq!(commit_error(&mut rxs[0]), None, "the commit is not durable yet");
    assert_eq!(fetched_offset(&mut rxs[1]), None, "the read shows the unsynced commit");

    // A second batch writes again before the first fsync returns.
    let mut second = rig.one(commit("g", 6));
    assert_eq!(rig.asked(), vec![Asked::Fsync(2)]);

    // The first fsync covers only the first batch.
    rig.shell.on_synced(Ok(1));
    assert_eq!(commit_error(&mut rxs[0]), Some(ErrorCode::NONE));
    assert_eq!(fetched_offset(&mut rxs[1]), Some(5));
    assert_eq!(commit_error(&mut second), None, "its write is past the synced end");

    rig.shell.on_synced(Ok(2));
    assert_eq!(commit_error(&mut second), Some(ErrorCode::NONE));
    rig.asked();

    // With everything durable a read leaves at once, with no fsync.
    let mut read = rig.one(fetch("g"));
    assert_eq!(fetched_offset(&mut read), Some(6));
    assert_eq!(rig.asked(), vec![]);
}

#[test]
fn with_the_interval_policy_answers_leave_at_once_and_a_tick_asks_for_the_fsync() {
    let mut rig = Rig::with(settings(FsyncPolicy::Interval, u64::MAX), quiet_config(), FakeLog::default());
    let mut rx = rig.one(commit("g", 5));
    assert_eq!(commit_error(&mut rx), Some(ErrorCode::NONE));
    assert_eq!(rig.asked(), vec![], "no fsync per batch");
    rig.shell.on_tick();
    assert_eq!(rig.asked(), vec![Asked::Fsync(1)]);
}

#[test]
fn without_always_answers_wait_for_their_batch_to_be_written_with_one_write() {
    let mut rig = Rig::with(settings(FsyncPolicy::Never, u64::MAX), quiet_config(), FakeLog::default());
    let (tx, mut committed) = oneshot::channel();
    rig.shell.on_request(commit("g", 5), tx);
    let (tx, mut read) = oneshot::channel();
    rig.shell.on_request(fetch("g"), tx);
    assert_eq!(commit_error(&mut committed), None, "not before its record is written");
    assert_eq!(fetched_offset(&mut read), None, "nor an answer that shows it");
    assert_eq!(rig.log().written(), 0);

    rig.shell.on_batch_end();
    assert_eq!(rig.log().written(), 1);
    assert_eq!(commit_error(&mut committed), Some(ErrorCode::NONE));
    assert_eq!(fetched_offset(&mut read), Some(5));
    assert_eq!(rig.asked(), vec![], "no fsync");
}

#[test]
fn without_always_a_failed_batch_write_stops_the_shard_and_acknowledges_nothing() {
    let mut rig = Rig::with(settings(FsyncPolicy::Never, u64::MAX), quiet_config(), FakeLog::default());
    rig.log().fail_next_write = true;
    let mut lost = rig.one(commit("g", 5));
    assert_eq!(rig.asked(), vec![Asked::Fatal], "the daemon is told to stop");
    assert_eq!(commit_error(&mut lost), None);

    let mut later = rig.one(fetch("g"));
    assert_eq!(answer(&mut later).map(error_of), Some(ErrorCode::NOT_COORDINATOR));
    rig.shell.on_shutdown();
    assert!(rig.shell.is_stopped());
    assert!(matches!(lost.try_recv(), Err(oneshot::error::TryRecvError::Closed)), "the connection sees a close");
}

#[test]
fn a_failed_fsync_stops_every_later_acknowledgement() {
    let log = FakeLog::default();
    let journal = log.journal.clone();
    let mut rig = Rig::with(settings(FsyncPolicy::Always, u64::MAX), quiet_config(), log);
    let mut held = rig.one(commit("g", 5));
    assert_eq!(rig.asked(), vec![Asked::Fsync(1)]);

    rig.shell.on_synced(Err("EIO".into()));
    assert_eq!(rig.asked(), vec![Asked::Fatal], "the daemon is told to stop");
    assert_eq!(commit_error(&mut held), None);

    // Even a later fsync that claims success acknowledges nothing.
    rig.shell.on_synced(Ok(1));
    assert_eq!(commit_error(&mut held), None);

    // New requests get NOT_COORDINATOR (clients retry elsewhere), and no
    // fsync is asked for again.
    let mut later = rig.one(commit("g", 6));
    assert_eq!(answer(&mut later).map(error_of), Some(ErrorCode::NOT_COORDINATOR));
    let mut read = rig.one(fetch("g"));
    assert_eq!(answer(&mut read).map(error_of), Some(ErrorCode::NOT_COORDINATOR));
    assert_eq!(rig.asked(), vec![]);

    // Shutdown does not fsync either: the held commit is never acknowledged.
    rig.shell.on_shutdown();
    assert!(rig.shell.is_stopped());
    assert!(journal.entries().is_empty(), "no final fsync");
    assert!(matches!(held.try_recv(), Err(oneshot::error::TryRecvError::Closed)), "the connection sees a close");
}

#[test]
fn a_poisoned_log_stops_the_shard_with_not_coordinator_and_stops_the_daemon() {
    let mut rig = Rig::with(settings(FsyncPolicy::Always, u64::MAX), quiet_config(), FakeLog::default());
    let mut before = rig.one(commit("g", 5));
    assert_eq!(rig.asked(), vec![Asked::Fsync(1)]);

    rig.log().poison_next_append = true;
    let mut torn = rig.one(commit("g", 6));
    assert_eq!(rig.asked(), vec![Asked::Fatal], "the daemon is told to stop");
    assert_eq!(commit_error(&mut torn), None, "its answer waits behind the earlier write");

    // The fsync offered before the failure covers the earlier commit: that
    // one is durable and acknowledged; the torn one answers NOT_COORDINATOR
    // (Kafka's answer to a failed coordinator write).
    rig.shell.on_synced(Ok(1));
    assert_eq!(commit_error(&mut before), Some(ErrorCode::NONE));
    assert_eq!(commit_error(&mut torn), Some(ErrorCode::NOT_COORDINATOR));

    let mut later = rig.one(fetch("g"));
    assert_eq!(answer(&mut later).map(error_of), Some(ErrorCode::NOT_COORDINATOR));
    assert_eq!(rig.asked(), vec![], "nothing more is written or synced");
}

#[test]
fn a_failed_write_that_the_log_undid_answers_not_coordinator_and_the_shard_carries_on() {
    let mut rig = Rig::with(settings(FsyncPolicy::Always, u64::MAX), quiet_config(), FakeLog::default());
    rig.log().fail_appends = 1;
    let mut failed = rig.one(commit("g", 5));
    // Kafka maps a failed coordinator write to NOT_COORDINATOR: clients
    // look the coordinator up again and retry.
    assert_eq!(commit_error(&mut failed), Some(ErrorCode::NOT_COORDINATOR));
    assert_eq!(rig.asked(), vec![], "nothing written, nothing to sync, no failure");

    let mut ok = rig.one(commit("g", 6));
    assert_eq!(rig.asked(), vec![Asked::Fsync(1)]);
    rig.shell.on_synced(Ok(1));
    assert_eq!(commit_error(&mut ok), Some(ErrorCode::NONE));
}

/// Commits until the shell asks for a snapshot attempt.
fn compaction_rig(fail_begin: usize) -> Rig {
    let mut log = FakeLog::default();
    log.fail_begin_snapshot = fail_begin;
    Rig::with(settings(FsyncPolicy::Always, 100), quiet_config(), log)
}

fn attempts(rig: &mut Rig) -> usize {
    rig.log().snapshot_attempts
}

#[test]
fn compaction_backs_off_after_failures_doubling_up_to_five_minutes() {
    let mut rig = compaction_rig(usize::MAX);
    drop(rig.one(commit("g", 1)));
    assert_eq!(attempts(&mut rig), 1, "history over the trigger starts a snapshot");

    // Pauses of 1 s, 2 s, 4 s, ... up to 300 s; requests during a pause
    // do not retry.
    let mut pause_ms = 1000;
    for n in 2..=13 {
        rig.clock.advance(pause_ms - 1);
        drop(rig.one(commit("g", n)));
        assert_eq!(attempts(&mut rig), n as usize - 1, "no attempt {n} within a pause of {pause_ms} ms");
        rig.clock.advance(1);
        drop(rig.one(commit("g", n)));
        assert_eq!(attempts(&mut rig), n as usize, "attempt {n} once the pause of {pause_ms} ms is over");
        pause_ms = (pause_ms * 2).min(COMPACTION_RETRY_MAX.as_millis() as i64);
    }
    assert_eq!(pause_ms, 300_000, "the pause stops growing at five minutes");
}

#[test]
fn a_failed_snapshot_write_backs_off_and_a_good_one_resets_the_pause() {
    let mut rig = compaction_rig(0);
    drop(rig.one(commit("g", 1)));
    let asked = rig.asked();
    assert!(asked.contains(&Asked::Compact(1)), "{asked:?}");
    let (base, _) = rig.compactions.remove(0);

    // The snapshot write failed on its thread: no new attempt for 1 s.
    rig.shell.on_compacted(Err(std::io::Error::other("ENOSPC")));
    drop(rig.one(commit("g", 2)));
    assert_eq!(attempts(&mut rig), 1);
    rig.clock.advance(1000);
    drop(rig.one(commit("g", 3)));
    assert_eq!(attempts(&mut rig), 2);
    assert!(rig.asked().iter().any(|a| matches!(a, Asked::Compact(_))));

    // This one succeeds: the log keeps only what follows the snapshot.
    let (base2, payloads2) = rig.compactions.pop().expect("a snapshot was asked for");
    assert!(base2 > base);
    rig.shell.on_compacted(Ok(FakeLog::write_snapshot(base2, payloads2)));
    assert_eq!(rig.log().journal.entries(), vec!["snapshot finished"]);
    assert_eq!(rig.log().end(), base2, "the snapshot replaced the history before it");
}

#[test]
fn shutdown_unloads_then_finishes_compaction_then_fsyncs_then_acknowledges() {
    let cfg = CoreConfig { initial_rebalance_delay_ms: 3000, ..quiet_config() };
    let log = FakeLog::default();
    let journal = log.journal.clone();
    let mut rig = Rig::with(settings(FsyncPolicy::Always, 100), cfg, log);

    // A member waits in a join (the group's initial delay), a commit waits
    // for its fsync, and a compaction runs.
    rig.log().hide_history = true;
    let first = rig.one(Request::Join(Box::new(join("g", "", "c").protocols(&["range"]).build())));
    rig.sync_all();
    let member = match first.blocking_recv_now() {
        Response::Join(r) => r.member_id,
        other => panic!("{other:?}"),
    };
    let mut parked = rig.one(Request::Join(Box::new(join("g", &member, "c").protocols(&["range"]).build())));
    rig.sync_all();
    rig.log().hide_history = false;
    let mut held = rig.one(commit("h", 5));
    rig.asked();
    assert_eq!(rig.compactions.len(), 1, "a compaction is running");
    assert_eq!(answer(&mut parked), None);

    rig.shell.on_shutdown();
    assert_eq!(answer(&mut parked).map(error_of), Some(ErrorCode::NOT_COORDINATOR), "unload answers parked requests");
    assert_eq!(rig.asked(), vec![Asked::Withdraw], "the offered fsync is withdrawn");
    assert!(!rig.shell.is_stopped(), "shutdown waits for the running compaction");
    assert_eq!(commit_error(&mut held), None);
    assert!(journal.entries().is_empty(), "no final fsync before the compaction ends");

    let (base, payloads) = rig.compactions.remove(0);
    rig.shell.on_compacted(Ok(FakeLog::write_snapshot(base, payloads)));
    assert!(rig.shell.is_stopped());
    assert_eq!(journal.entries(), vec!["snapshot finished", "final fsync"]);
    assert_eq!(commit_error(&mut held), Some(ErrorCode::NONE), "the final fsync made it durable");
}

#[test]
fn shutdown_fsyncs_what_is_held_and_a_failed_final_fsync_acknowledges_nothing() {
    let mut rig = Rig::with(settings(FsyncPolicy::Always, u64::MAX), quiet_config(), FakeLog::default());
    let mut held = rig.one(commit("g", 5));
    rig.shell.on_shutdown();
    assert!(rig.shell.is_stopped());
    assert_eq!(commit_error(&mut held), Some(ErrorCode::NONE));

    let mut log = FakeLog::default();
    log.fail_final_sync = true;
    let mut rig = Rig::with(settings(FsyncPolicy::Always, u64::MAX), quiet_config(), log);
    let mut held = rig.one(commit("g", 5));
    rig.shell.on_shutdown();
    assert!(rig.shell.is_stopped());
    assert!(matches!(held.try_recv(), Err(oneshot::error::TryRecvError::Closed)));
}

#[test]
fn loading_answers_coordinator_load_in_progress_and_heartbeats_none_as_kafka() {
    let mut shell: Shell = ShardShell::loading(settings(FsyncPolicy::Always, u64::MAX), ManualClock::at(T0));
    let ask = |shell: &mut Shell, req: Request| {
        let (tx, mut rx) = oneshot::channel();
        shell.on_request(req, tx);
        shell.on_batch_end();
        answer(&mut rx).map(error_of)
    };
    assert_eq!(ask(&mut shell, commit("g", 1)), Some(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS));
    assert_eq!(ask(&mut shell, fetch("g")), Some(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS));
    assert_eq!(ask(&mut shell, heartbeat("g")), Some(ErrorCode::NONE));
    assert!(shell.effects().next().is_none());

    // A log that cannot be read stops the daemon; until then the shard
    // answers COORDINATOR_NOT_AVAILABLE.
    shell.on_loaded(Err("record 3 is unreadable".into()));
    assert!(matches!(shell.effects().collect::<Vec<_>>().as_slice(), [Effect::Fatal(_)]));
    assert_eq!(ask(&mut shell, commit("g", 1)), Some(ErrorCode::COORDINATOR_NOT_AVAILABLE));

    shell.on_shutdown();
    assert!(shell.is_stopped());
}

#[test]
fn a_shutdown_while_loading_stops_at_once() {
    let mut shell: Shell = ShardShell::loading(settings(FsyncPolicy::Always, u64::MAX), ManualClock::at(T0));
    shell.on_shutdown();
    assert!(shell.is_stopped());
}

#[test]
fn a_session_expires_when_the_injected_clock_passes_its_deadline() {
    let mut rig = Rig::with(settings(FsyncPolicy::Interval, u64::MAX), quiet_config(), FakeLog::default());
    let first = rig.one(Request::Join(Box::new(join("g", "", "c").protocols(&["range"]).build())));
    let member = match first.blocking_recv_now() {
        Response::Join(r) => r.member_id,
        other => panic!("{other:?}"),
    };
    let mut joined =
        rig.one(Request::Join(Box::new(join("g", &member, "c").protocols(&["range"]).session(10_000).build())));
    assert_eq!(answer(&mut joined).map(error_of), Some(ErrorCode::NONE));
    assert!(rig.shell.next_timer_in().is_some());

    rig.clock.advance(10_001);
    rig.shell.on_timer();
    let members = rig.shell.core().and_then(|c| c.group("g")).map(|g| g.members.len());
    assert_eq!(members, Some(0), "the silent member expired");
}

/// Answers the tests expect to have left already.
trait RecvNow {
    fn blocking_recv_now(self) -> Response;
}

impl RecvNow for oneshot::Receiver<Response> {
    fn blocking_recv_now(mut self) -> Response {
        answer(&mut self).expect("answered at once")
    }
}

/// The requests of one batch are served at the time the batch began (one
/// clock read for them all); once it ends, the next request reads the clock
/// again, so sessions and commit times never stay at a batch's time.
#[test]
fn a_batch_is_served_at_its_start_and_the_next_request_at_the_clock() {
    let mut rig = Rig::new();
    rig.shell.begin_batch();
    rig.clock.advance(5);
    let (tx, _first) = oneshot::channel();
    rig.shell.on_request(commit("g", 1), tx);
    rig.shell.on_batch_end();
    rig.clock.advance(7);
    let _second = rig.one(commit("g", 2));
    let stamps: Vec<i64> = rig
        .log()
        .all()
        .iter()
        .filter_map(|p| match crate::coordinator::state::records::decode_view(p) {
            Ok(crate::coordinator::state::records::RecordView::Offset { value: Some(v), .. }) => {
                Some(v.commit_timestamp)
            }
            _ => None,
        })
        .collect();
    assert_eq!(stamps, [T0, T0 + 12]);
}
