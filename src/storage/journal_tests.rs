use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::storage::simdisk::SimDisk;
use crate::storage::test_util::record;
use crate::storage::{Log, LogOptions};

const ROOT: &str = "/data";
const LOG_DIR: &str = "/data/coordinator/shard-0000";

fn journaled(sim: &SimDisk, segment_bytes: u64) -> LogOptions {
    LogOptions { segment_bytes, repair: false, files: None, fs: sim.disk(), journaled: true, batched_writes: false }
}

fn open(sim: &SimDisk, segment_bytes: u64) -> (Log, Vec<Vec<u8>>) {
    let mut seen = Vec::new();
    let log = Log::open(Path::new(LOG_DIR), journaled(sim, segment_bytes), &mut |_, p| {
        seen.push(p.to_vec());
        Ok(())
    })
    .unwrap();
    (log, seen)
}

/// Appends records `range` (one append each) and hands them to `files` in
/// one round, as a shard's batch; returns the end made durable.
fn append_and_journal(log: &mut Log, files: &mut JournalFiles, range: std::ops::Range<u64>) -> u64 {
    for i in range {
        log.append(&[&record(i)]).unwrap();
    }
    let write = log.journal_write().expect("something to journal");
    files.write(std::iter::once(&write)).unwrap();
    log.mark_synced(write.end());
    write.end()
}

#[test]
fn records_the_journal_made_durable_survive_a_crash_that_loses_the_logs_own_writes() {
    let sim = SimDisk::new(7);
    sim.set_reorder(false);
    let (mut log, _) = open(&sim, 1 << 20);
    let mut files = JournalFiles::create(sim.disk(), Path::new(ROOT), 1 << 20).unwrap();
    assert_eq!(append_and_journal(&mut log, &mut files, 0..5), 5);
    assert_eq!(append_and_journal(&mut log, &mut files, 5..9), 9);
    assert_eq!(log.synced(), 9);
    drop((log, files));
    sim.crash();

    let redone = recover(&*sim.disk(), Path::new(ROOT), false).unwrap();
    assert_eq!(redone.entries, 2, "{redone:?}");
    let (_, seen) = open(&sim, 1 << 20);
    assert_eq!(seen, (0..9).map(record).collect::<Vec<_>>());
    assert!(sim.disk().list(&Path::new(ROOT).join(JOURNAL_DIR)).unwrap().is_empty(), "recovery deletes the journal");
}

#[test]
fn a_torn_last_entry_was_never_acknowledged_and_is_dropped() {
    let sim = SimDisk::new(3);
    let (mut log, _) = open(&sim, 1 << 20);
    let mut files = JournalFiles::create(sim.disk(), Path::new(ROOT), 1 << 20).unwrap();
    append_and_journal(&mut log, &mut files, 0..3);
    drop((log, files));
    sim.crash();
    // A crash in the middle of the next round's write: half an entry.
    let journal = Path::new(ROOT).join(JOURNAL_DIR).join(file_name(0));
    let file = sim.disk().open(&journal, OpenMode::ReadWrite).unwrap();
    let len = file.size().unwrap();
    file.write_all_at(&[0, 0, 0, 200, 1, 2, 3], len).unwrap();
    file.sync_data().unwrap();

    let redone = recover(&*sim.disk(), Path::new(ROOT), false).unwrap();
    assert_eq!(redone.entries, 1);
    let (_, seen) = open(&sim, 1 << 20);
    assert_eq!(seen, (0..3).map(record).collect::<Vec<_>>());
}

#[test]
fn damage_in_a_full_journal_file_is_refused_because_its_entries_were_acknowledged() {
    let sim = SimDisk::new(5);
    let (mut log, _) = open(&sim, 1 << 20);
    let mut files = JournalFiles::create(sim.disk(), Path::new(ROOT), 1).unwrap();
    append_and_journal(&mut log, &mut files, 0..3);
    // The file is full: the next one starts, and its checkpoint is not run.
    let _pending_checkpoint = files.next_if_full().unwrap().unwrap();
    let journal = Path::new(ROOT).join(JOURNAL_DIR).join(file_name(0));
    let file = sim.disk().open(&journal, OpenMode::ReadWrite).unwrap();
    file.write_all_at(b"X", 20).unwrap();
    file.sync_data().unwrap();

    let err = recover(&*sim.disk(), Path::new(ROOT), false).unwrap_err().to_string();
    assert!(err.contains("damaged") && err.contains("--repair"), "{err}");
    recover(&*sim.disk(), Path::new(ROOT), true).unwrap();
}

#[test]
fn a_checkpoint_fsyncs_the_logs_own_files_before_deleting_the_full_journal_file() {
    let sim = SimDisk::new(11);
    let (mut log, _) = open(&sim, 1 << 20);
    let mut files = JournalFiles::create(sim.disk(), Path::new(ROOT), 64).unwrap();
    append_and_journal(&mut log, &mut files, 0..4);
    let checkpoint = files.next_if_full().unwrap().expect("the first file is full");
    checkpoint.run().unwrap();
    let names = sim.disk().list(&Path::new(ROOT).join(JOURNAL_DIR)).unwrap();
    assert_eq!(names, vec![std::ffi::OsString::from(file_name(1))]);
    // The checkpoint's fsync lets the recovery point move on.
    log.mark_synced(4);
    drop((log, files));
    sim.crash();

    let redone = recover(&*sim.disk(), Path::new(ROOT), false).unwrap();
    assert_eq!(redone.entries, 0);
    let (_, seen) = open(&sim, 1 << 20);
    assert_eq!(seen, (0..4).map(record).collect::<Vec<_>>(), "the log's own files hold them");
}

#[test]
fn an_entry_whose_segment_a_snapshot_deleted_is_skipped() {
    let sim = SimDisk::new(13);
    let (mut log, _) = open(&sim, 1 << 20);
    let mut files = JournalFiles::create(sim.disk(), Path::new(ROOT), 1 << 20).unwrap();
    append_and_journal(&mut log, &mut files, 0..3);
    let plan = log.begin_snapshot().unwrap();
    let done = plan.write(&mut (0..3).map(record)).unwrap();
    log.finish_snapshot(done).unwrap();
    drop((log, files));
    sim.crash();

    let redone = recover(&*sim.disk(), Path::new(ROOT), false).unwrap();
    assert_eq!((redone.entries, redone.skipped), (0, 1), "{redone:?}");
    let (log, seen) = open(&sim, 1 << 20);
    assert_eq!(seen, (0..3).map(record).collect::<Vec<_>>());
    assert_eq!(log.end(), 3);
}

/// Records what the journal reported.
#[derive(Default)]
struct Reported(Mutex<Vec<Result<u64, String>>>);

impl SyncTarget for Reported {
    fn job(&self) -> Option<super::super::SyncWork> {
        None
    }
    fn synced(&self, result: io::Result<u64>) {
        self.0.lock().unwrap().push(result.map_err(|e| e.to_string()));
    }
}

fn wait_for(reported: &Reported, n: usize) -> Vec<Result<u64, String>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = reported.0.lock().unwrap().clone();
        if seen.len() >= n || Instant::now() > deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_writer_thread_acknowledges_in_order_and_checkpoints_full_files() {
    let sim = SimDisk::new(17);
    let (mut log, _) = open(&sim, 1 << 20);
    let journal = Journal::start(sim.disk(), Path::new(ROOT), 200).unwrap();
    let reported = Arc::new(Reported::default());
    for i in 0..20 {
        log.append(&[&record(i)]).unwrap();
        journal.submit(log.journal_write().unwrap(), reported.clone());
    }
    let seen = wait_for(&reported, 20);
    assert_eq!(seen, (1..=20).map(Ok).collect::<Vec<_>>());
    drop(journal);
    let files = sim.disk().list(&Path::new(ROOT).join(JOURNAL_DIR)).unwrap();
    assert!(files.len() <= 2, "full files are checkpointed away: {files:?}");
    sim.crash();
    recover(&*sim.disk(), Path::new(ROOT), false).unwrap();
    let (_, seen) = open(&sim, 1 << 20);
    assert_eq!(seen, (0..20).map(record).collect::<Vec<_>>());
}

#[test]
fn after_a_failed_journal_write_nothing_more_is_acknowledged() {
    let sim = SimDisk::new(19);
    let (mut log, _) = open(&sim, 1 << 20);
    let journal = Journal::start(sim.disk(), Path::new(ROOT), 1 << 20).unwrap();
    let reported = Arc::new(Reported::default());
    log.append(&[&record(0)]).unwrap();
    let write = log.journal_write().unwrap();
    // The journal's fdatasync fails.
    sim.set_faults(crate::storage::simdisk::Faults { write: 0.0, sync: 1.0, rename: 0.0, sync_dir: 0.0 });
    journal.submit(write, reported.clone());
    let first = wait_for(&reported, 1);
    assert!(first.first().is_some_and(|r| r.is_err()), "{first:?}");
    sim.set_faults(crate::storage::simdisk::Faults::NONE);
    log.append(&[&record(1)]).unwrap();
    journal.submit(log.journal_write().unwrap(), reported.clone());
    let seen = wait_for(&reported, 2);
    assert!(seen.get(1).is_some_and(|r| r.is_err()), "{seen:?}");
}

#[test]
fn a_journaled_log_writes_a_batch_once_and_a_failed_write_poisons_it() {
    let sim = SimDisk::new(23);
    let (mut log, _) = open(&sim, 1 << 20);
    let segment = Path::new(LOG_DIR).join(crate::storage::segment::segment_file_name(0));
    log.append(&[&record(0)]).unwrap();
    log.append(&[&record(1)]).unwrap();
    assert_eq!(sim.disk().read(&segment).unwrap().len(), 0, "appends wait for the end of the batch");
    let write = log.journal_write().unwrap();
    assert_eq!(sim.disk().read(&segment).unwrap(), write.bytes, "one write of the whole batch");

    log.append(&[&record(2)]).unwrap();
    log.make_active_read_only().unwrap();
    assert!(log.journal_write().is_none(), "nothing to hand over once the write failed");
    assert!(log.poisoned().is_some_and(|r| r.contains("writing appended records")), "{:?}", log.poisoned());
    assert!(log.append(&[&record(3)]).is_err());
}

#[test]
fn a_clean_shutdown_retires_the_journal_and_a_crash_after_it_loses_nothing() {
    let sim = SimDisk::new(29);
    sim.set_reorder(false);
    let (mut log, _) = open(&sim, 1 << 20);
    let journal = Journal::start(sim.disk(), Path::new(ROOT), 1 << 20).unwrap();
    let reported = Arc::new(Reported::default());
    for i in 0..5 {
        log.append(&[&record(i)]).unwrap();
        journal.submit(log.journal_write().unwrap(), reported.clone());
    }
    assert_eq!(wait_for(&reported, 5).last(), Some(&Ok(5)));
    // The shard's final fsync, then the daemon retires the journal.
    log.sync_and_record_end().unwrap();
    journal.retire().unwrap();
    assert!(sim.disk().list(&Path::new(ROOT).join(JOURNAL_DIR)).unwrap().is_empty(), "nothing left to replay");
    log.append(&[&record(5)]).unwrap();
    journal.submit(log.journal_write().unwrap(), reported.clone());
    assert!(wait_for(&reported, 6).get(5).is_some_and(|r| r.is_err()), "a retired journal acknowledges nothing");
    drop((log, journal));
    sim.crash();

    assert_eq!(recover(&*sim.disk(), Path::new(ROOT), false).unwrap().entries, 0);
    let (_, seen) = open(&sim, 1 << 20);
    assert_eq!(seen, (0..5).map(record).collect::<Vec<_>>(), "every acknowledged record is in the log's own files");
}

#[test]
fn a_journal_that_failed_is_kept_at_shutdown_for_the_next_start() {
    let sim = SimDisk::new(31);
    let (mut log, _) = open(&sim, 1 << 20);
    let journal = Journal::start(sim.disk(), Path::new(ROOT), 1 << 20).unwrap();
    let reported = Arc::new(Reported::default());
    log.append(&[&record(0)]).unwrap();
    journal.submit(log.journal_write().unwrap(), reported.clone());
    assert_eq!(wait_for(&reported, 1), vec![Ok(1)]);
    sim.set_faults(crate::storage::simdisk::Faults { write: 0.0, sync: 1.0, rename: 0.0, sync_dir: 0.0 });
    log.append(&[&record(1)]).unwrap();
    journal.submit(log.journal_write().unwrap(), reported.clone());
    assert!(wait_for(&reported, 2).get(1).is_some_and(|r| r.is_err()));
    sim.set_faults(crate::storage::simdisk::Faults::NONE);

    let refused = journal.retire().unwrap_err().to_string();
    assert!(refused.contains("kept for the next start"), "{refused}");
    assert!(!sim.disk().list(&Path::new(ROOT).join(JOURNAL_DIR)).unwrap().is_empty(), "the files stay");
}
