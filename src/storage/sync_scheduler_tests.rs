//! The scheduler against fake logs whose fsyncs the test holds and releases.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;

/// Generous: the machine is shared with builds.
const DEADLINE: Duration = Duration::from_secs(30);

/// A log with an end that tests advance; each fsync announces itself on
/// `started` (with its end) and, when `hold` is set, waits for `release`.
struct FakeLog {
    name: &'static str,
    end: AtomicU64,
    durable: AtomicU64,
    fail: AtomicBool,
    hold: AtomicBool,
    started: Mutex<Sender<(&'static str, u64)>>,
    release: Arc<Mutex<Receiver<()>>>,
    results: Mutex<Vec<Result<u64, String>>>,
}

struct Harness {
    started: Receiver<(&'static str, u64)>,
    started_tx: Sender<(&'static str, u64)>,
    release: Sender<()>,
    release_rx: Arc<Mutex<Receiver<()>>>,
}

impl Harness {
    fn new() -> Harness {
        let (started_tx, started) = channel();
        let (release, release_rx) = channel();
        Harness { started, started_tx, release, release_rx: Arc::new(Mutex::new(release_rx)) }
    }

    fn log(&self, name: &'static str, hold: bool) -> (Arc<FakeLog>, Arc<Registration>) {
        let log = Arc::new(FakeLog {
            name,
            end: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            fail: AtomicBool::new(false),
            hold: AtomicBool::new(hold),
            started: Mutex::new(self.started_tx.clone()),
            release: Arc::clone(&self.release_rx),
            results: Mutex::new(Vec::new()),
        });
        let registration = Registration::new(log.clone());
        (log, registration)
    }

    /// The next fsync to start: its log and the end it covers.
    fn next_fsync(&self) -> (&'static str, u64) {
        self.started.recv_timeout(DEADLINE).expect("an fsync should have started")
    }
}

impl SyncTarget for FakeLog {
    fn job(&self) -> Option<SyncWork> {
        let end = self.end.load(Ordering::SeqCst);
        if self.durable.load(Ordering::SeqCst) >= end {
            return None;
        }
        let name = self.name;
        let started = self.started.lock().unwrap().clone();
        let release = self.hold.load(Ordering::SeqCst).then(|| Arc::clone(&self.release));
        let fail = self.fail.load(Ordering::SeqCst);
        Some(Box::new(move || {
            started.send((name, end)).unwrap();
            if let Some(release) = release {
                release.lock().unwrap().recv_timeout(DEADLINE).expect("the test should release the fsync");
            }
            if fail {
                Err(io::Error::other("disk on fire"))
            } else {
                Ok(end)
            }
        }))
    }

    fn synced(&self, result: io::Result<u64>) {
        if let Ok(end) = &result {
            self.durable.fetch_max(*end, Ordering::SeqCst);
        }
        self.results.lock().unwrap().push(result.map_err(|e| e.to_string()));
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + DEADLINE;
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::yield_now();
    }
}

fn results(log: &FakeLog) -> Vec<Result<u64, String>> {
    log.results.lock().unwrap().clone()
}

#[test]
fn appends_made_while_a_log_waits_for_its_turn_are_covered_by_one_fsync() {
    let h = Harness::new();
    let scheduler = SyncScheduler::new(1);
    let (busy, busy_reg) = h.log("busy", true);
    let (log, reg) = h.log("log", false);
    busy.end.store(1, Ordering::SeqCst);
    scheduler.request(&busy_reg);
    assert_eq!(h.next_fsync(), ("busy", 1));
    // The only thread is busy: three appends, each asking for an fsync.
    for end in 1..=3 {
        log.end.store(end, Ordering::SeqCst);
        scheduler.request(&reg);
    }
    h.release.send(()).unwrap();
    assert_eq!(h.next_fsync(), ("log", 3), "one fsync covers all three");
    wait_until("the log hears of it", || !results(&log).is_empty());
    assert_eq!(results(&log), vec![Ok(3)]);
    assert!(h.started.recv_timeout(Duration::from_millis(50)).is_err(), "no second fsync");
}

#[test]
fn nothing_is_reported_durable_before_its_fsync_returns() {
    let h = Harness::new();
    let scheduler = SyncScheduler::new(2);
    let (log, reg) = h.log("log", true);
    log.end.store(5, Ordering::SeqCst);
    scheduler.request(&reg);
    assert_eq!(h.next_fsync(), ("log", 5));
    assert!(results(&log).is_empty(), "the fsync has not returned yet");
    assert_eq!(log.durable.load(Ordering::SeqCst), 0);
    h.release.send(()).unwrap();
    wait_until("the fsync is reported", || !results(&log).is_empty());
    assert_eq!(results(&log), vec![Ok(5)]);
}

#[test]
fn a_log_that_asks_again_during_its_fsync_gets_another_one_after_it() {
    let h = Harness::new();
    let scheduler = SyncScheduler::new(4);
    let (log, reg) = h.log("log", true);
    log.end.store(1, Ordering::SeqCst);
    scheduler.request(&reg);
    assert_eq!(h.next_fsync(), ("log", 1));
    log.end.store(2, Ordering::SeqCst);
    scheduler.request(&reg);
    // Free threads remain, but one fsync per log runs at a time.
    assert!(h.started.recv_timeout(Duration::from_millis(50)).is_err());
    h.release.send(()).unwrap();
    assert_eq!(h.next_fsync(), ("log", 2));
    h.release.send(()).unwrap();
    wait_until("both fsyncs are reported", || results(&log).len() == 2);
    assert_eq!(results(&log), vec![Ok(1), Ok(2)], "in order");
}

#[test]
fn logs_are_served_in_the_order_they_asked() {
    let h = Harness::new();
    let scheduler = SyncScheduler::new(1);
    let (busy, busy_reg) = h.log("busy", true);
    busy.end.store(1, Ordering::SeqCst);
    scheduler.request(&busy_reg);
    assert_eq!(h.next_fsync().0, "busy");
    let logs: Vec<_> = ["c", "a", "b"].into_iter().map(|n| h.log(n, false)).collect();
    for (log, reg) in &logs {
        log.end.store(1, Ordering::SeqCst);
        scheduler.request(reg);
    }
    h.release.send(()).unwrap();
    let order: Vec<_> = (0..3).map(|_| h.next_fsync().0).collect();
    assert_eq!(order, ["c", "a", "b"]);
}

#[test]
fn fsyncs_of_different_logs_run_at_once() {
    let h = Harness::new();
    let scheduler = SyncScheduler::new(2);
    let (a, a_reg) = h.log("a", true);
    let (b, b_reg) = h.log("b", true);
    a.end.store(1, Ordering::SeqCst);
    b.end.store(1, Ordering::SeqCst);
    scheduler.request(&a_reg);
    scheduler.request(&b_reg);
    let mut both = [h.next_fsync().0, h.next_fsync().0];
    both.sort();
    assert_eq!(both, ["a", "b"], "the second started while the first was held");
    h.release.send(()).unwrap();
    h.release.send(()).unwrap();
    wait_until("both are reported", || results(&a).len() == 1 && results(&b).len() == 1);
}

#[test]
fn a_failed_fsync_is_reported_to_its_log_once_and_other_logs_still_sync() {
    let h = Harness::new();
    let scheduler = SyncScheduler::new(1);
    let (bad, bad_reg) = h.log("bad", false);
    let (good, good_reg) = h.log("good", false);
    bad.fail.store(true, Ordering::SeqCst);
    bad.end.store(4, Ordering::SeqCst);
    good.end.store(2, Ordering::SeqCst);
    scheduler.request(&bad_reg);
    scheduler.request(&good_reg);
    wait_until("both are reported", || !results(&bad).is_empty() && !results(&good).is_empty());
    assert_eq!(results(&bad), vec![Err("disk on fire".to_string())]);
    assert_eq!(bad.durable.load(Ordering::SeqCst), 0, "nothing of the failed log counts as durable");
    assert_eq!(results(&good), vec![Ok(2)]);
    assert_eq!(h.next_fsync(), ("bad", 4));
    assert_eq!(h.next_fsync(), ("good", 2));
    assert!(h.started.recv_timeout(Duration::from_millis(50)).is_err(), "the failed fsync is not retried");
}

#[test]
fn a_log_with_nothing_to_sync_costs_no_fsync() {
    let h = Harness::new();
    let scheduler = SyncScheduler::new(1);
    let (log, reg) = h.log("log", false);
    scheduler.request(&reg);
    log.end.store(1, Ordering::SeqCst);
    scheduler.request(&reg);
    assert_eq!(h.next_fsync(), ("log", 1));
    wait_until("reported", || results(&log).len() == 1);
}

#[test]
fn fewer_threads_take_effect_and_work_goes_on() {
    let h = Harness::new();
    let scheduler = SyncScheduler::new(8);
    scheduler.set_threads(1);
    wait_until("the extra threads exit", || scheduler.shared.lock().started == 1);
    let (log, reg) = h.log("log", false);
    log.end.store(1, Ordering::SeqCst);
    scheduler.request(&reg);
    wait_until("reported", || results(&log).len() == 1);
}
