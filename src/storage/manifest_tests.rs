//! Files deleted or cut behind kcoord's back: every loss of acknowledged
//! records the manifest can see refuses the open, naming what is missing;
//! `--repair` accepts it; a directory from before manifests opens and gets
//! one.

use std::path::Path;

use super::error::LogError;
use super::log::Log;
use super::manifest::{self, MANIFEST_FILE};
use super::test_util::*;

/// Bytes of one `record(i)` frame: 8 header + 11 payload.
const FRAME: u64 = 19;

/// 10 records, 3 per segment: segments 0, 3, 6 and the active 9.
fn log_of_four_segments(dir: &Path) -> Log {
    let (mut log, _) = open(dir, options(3 * FRAME));
    append_records(&mut log, 0..10);
    assert_eq!(log.segments().iter().map(|s| s.base).collect::<Vec<_>>(), vec![0, 3, 6, 9]);
    log
}

fn refusal(dir: &Path) -> (String, String) {
    match try_open(dir, options(3 * FRAME)) {
        Err(LogError::Corrupt { file, reason, .. }) => {
            (file.file_name().unwrap().to_string_lossy().into_owned(), reason)
        }
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok((log, _)) => panic!("opened with end {}", log.end()),
    }
}

fn indices(seen: &Replayed) -> Vec<u64> {
    seen.iter().map(|(loc, _)| loc.index).collect()
}

fn snapshot(log: &mut Log) -> u64 {
    let plan = log.begin_snapshot().unwrap();
    let base = plan.base();
    let done = plan.write(&mut vec![b"state".to_vec()].into_iter()).unwrap();
    log.finish_snapshot(done).unwrap();
    base
}

#[test]
fn deleting_the_first_segment_of_a_log_without_a_snapshot_refuses_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    drop(log_of_four_segments(tmp.path()));
    std::fs::remove_file(segment_path(tmp.path(), 0)).unwrap();
    let (file, reason) = refusal(tmp.path());
    assert_eq!(file, "00000000000000000000.log");
    assert!(reason.contains("missing") && reason.contains(MANIFEST_FILE), "{reason}");
    // --repair accepts the loss, and the manifest then holds what is left.
    let (_, seen) = open(tmp.path(), repairing(3 * FRAME));
    assert_eq!(indices(&seen), (3..10).collect::<Vec<_>>());
    open(tmp.path(), options(3 * FRAME));
}

#[test]
fn deleting_the_active_segment_refuses_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    drop(log_of_four_segments(tmp.path()));
    std::fs::remove_file(segment_path(tmp.path(), 9)).unwrap();
    assert_eq!(refusal(tmp.path()).0, "00000000000000000009.log");
    let (log, _) = open(tmp.path(), repairing(3 * FRAME));
    assert_eq!(log.end(), 9);
}

#[test]
fn deleting_every_segment_refuses_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    drop(log_of_four_segments(tmp.path()));
    for base in [0, 3, 6, 9] {
        std::fs::remove_file(segment_path(tmp.path(), base)).unwrap();
    }
    let (file, reason) = refusal(tmp.path());
    assert_eq!(file, "00000000000000000000.log");
    assert!(reason.contains("4 segment(s)"), "{reason}");
}

#[test]
fn deleting_the_only_snapshot_refuses_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = log_of_four_segments(tmp.path());
    let base = snapshot(&mut log);
    append_records(&mut log, 10..12);
    drop(log);
    std::fs::remove_file(snapshot_path(tmp.path(), base)).unwrap();
    let (file, reason) = refusal(tmp.path());
    assert_eq!(file, format!("snapshot-{base:020}.snap"));
    assert!(reason.contains("would be lost"), "{reason}");
    let (_, seen) = open(tmp.path(), repairing(3 * FRAME));
    assert_eq!(indices(&seen), vec![10, 11], "repair starts from the segments after it");
}

#[test]
fn cutting_records_from_the_end_after_a_clean_close_refuses_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = log_of_four_segments(tmp.path());
    log.sync_and_record_end().unwrap();
    drop(log);
    // On a record boundary: the scan alone sees a shorter, intact log.
    let active = segment_path(tmp.path(), 9);
    std::fs::OpenOptions::new().write(true).open(&active).unwrap().set_len(0).unwrap();
    let (file, reason) = refusal(tmp.path());
    assert_eq!(file, "00000000000000000009.log");
    assert!(reason.contains("1 acknowledged records are missing"), "{reason}");
    let (log, _) = open(tmp.path(), repairing(3 * FRAME));
    assert_eq!(log.end(), 9);
}

#[test]
fn retention_and_snapshots_keep_the_manifest_true() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = log_of_four_segments(tmp.path());
    log.delete_oldest_segment().unwrap();
    drop(log);
    let (mut log, seen) = open(tmp.path(), options(3 * FRAME));
    assert_eq!(indices(&seen), (3..10).collect::<Vec<_>>());
    append_records(&mut log, 10..14);
    drop(log);

    let tmp = tempfile::tempdir().unwrap();
    let mut log = log_of_four_segments(tmp.path());
    snapshot(&mut log);
    append_records(&mut log, 10..14);
    snapshot(&mut log);
    drop(log);
    open(tmp.path(), options(3 * FRAME));
}

#[test]
fn a_crash_before_the_manifest_records_a_new_snapshot_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = log_of_four_segments(tmp.path());
    let before = std::fs::read(manifest::path(tmp.path())).unwrap();
    let base = snapshot(&mut log);
    drop(log);
    // The manifest as it was before finish_snapshot, and the covered segments still there.
    std::fs::write(manifest::path(tmp.path()), before).unwrap();
    let (log, seen) = open(tmp.path(), options(3 * FRAME));
    assert_eq!((log.end(), indices(&seen)), (base, vec![base]));
}

#[test]
fn a_log_directory_from_before_manifests_opens_and_gets_one() {
    let tmp = tempfile::tempdir().unwrap();
    drop(log_of_four_segments(tmp.path()));
    std::fs::remove_file(manifest::path(tmp.path())).unwrap();
    let (log, seen) = open(tmp.path(), options(3 * FRAME));
    assert_eq!((log.end(), seen.len()), (10, 10));
    let m = manifest::read(&crate::storage::disk::OsFs, tmp.path()).unwrap().unwrap();
    assert_eq!((m.segments, m.end, m.snapshot), (vec![0, 3, 6, 9], 10, None));
}

#[test]
fn an_interrupted_manifest_update_is_cleaned_up_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    drop(log_of_four_segments(tmp.path()));
    std::fs::write(tmp.path().join(manifest::MANIFEST_TMP), b"{").unwrap();
    open(tmp.path(), options(3 * FRAME));
    assert!(!tmp.path().join(manifest::MANIFEST_TMP).exists());
}
