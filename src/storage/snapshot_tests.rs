//! Compaction by snapshot, and recovery from crashes at every step of it.

use std::path::Path;

use super::error::LogError;
use super::log::{Location, Log};
use super::test_util::*;

/// Bytes of one `record(i)` frame: 8 header + 11 payload.
const FRAME: u64 = 19;

fn state(names: &[&str]) -> Vec<Vec<u8>> {
    names.iter().map(|n| n.as_bytes().to_vec()).collect()
}

/// Takes a snapshot holding `content`; finishes it only if `finish`.
fn snapshot(log: &mut Log, content: &[Vec<u8>], finish: bool) -> u64 {
    let plan = log.begin_snapshot().unwrap();
    let base = plan.base();
    let done = std::thread::spawn({
        let content = content.to_vec();
        move || plan.write(&mut content.into_iter())
    })
    .join()
    .unwrap()
    .unwrap();
    if finish {
        log.finish_snapshot(done).unwrap();
    }
    base
}

/// Splits a replay into snapshot records (checked to sit at `base`) and the
/// indices and payloads of segment records.
type Split = (Vec<Vec<u8>>, Vec<(u64, Vec<u8>)>);

fn split(seen: &Replayed, base: u64) -> Split {
    let mut snap = Vec::new();
    let mut rest = Vec::new();
    for (loc, payload) in seen {
        if loc.is_snapshot() {
            assert!(rest.is_empty(), "snapshot records come first");
            assert_eq!(loc.index, base);
            snap.push(payload.clone());
        } else {
            rest.push((loc.index, payload.clone()));
        }
    }
    (snap, rest)
}

fn records(range: std::ops::Range<u64>) -> Vec<(u64, Vec<u8>)> {
    range.map(|i| (i, record(i))).collect()
}

fn damage(path: &Path) {
    patch(path, 10, b"\xff\xff");
}

#[test]
fn snapshot_then_reopen_replays_snapshot_records_then_later_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(2 * FRAME));
    append_records(&mut log, 0..5);
    let base = snapshot(&mut log, &state(&["state-a", "state-b"]), true);
    assert_eq!(base, 5);
    assert_eq!((log.start(), log.end(), log.synced()), (5, 5, 5));
    assert_eq!(files(tmp.path()), vec!["00000000000000000005.log", "snapshot-00000000000000000005.snap"]);
    append_records(&mut log, 5..8);
    drop(log);

    let (mut log, seen) = open(tmp.path(), options(2 * FRAME));
    assert_eq!(seen[0].0, Location { index: 5, segment_base: u64::MAX, position: 0, payload_len: 7 });
    let (snap, rest) = split(&seen, 5);
    assert_eq!(snap, state(&["state-a", "state-b"]));
    assert_eq!(rest, records(5..8));
    assert_eq!((log.start(), log.end()), (5, 8));
    assert_eq!(log.append(&[&record(8)]).unwrap()[0].index, 8);
}

#[test]
fn finishing_a_snapshot_deletes_covered_segments_and_older_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(FRAME));
    append_records(&mut log, 0..3);
    assert_eq!((log.snapshot_bytes(), log.bytes_since_snapshot()), (0, 3 * FRAME));

    snapshot(&mut log, &state(&["one"]), true);
    let first_snapshot = file_len(&snapshot_path(tmp.path(), 3));
    assert_eq!((log.snapshot_bytes(), log.bytes_since_snapshot()), (first_snapshot, 0));
    append_records(&mut log, 3..5);
    assert_eq!(log.bytes_since_snapshot(), 2 * FRAME);

    snapshot(&mut log, &state(&["one", "two"]), true);
    assert_eq!(files(tmp.path()), vec!["00000000000000000005.log", "snapshot-00000000000000000005.snap"]);
    assert_eq!(log.snapshot_bytes(), file_len(&snapshot_path(tmp.path(), 5)));
    assert_eq!(log.bytes_since_snapshot(), 0);
    assert_eq!(log.start(), 5);
}

#[test]
fn snapshot_of_an_empty_active_segment_does_not_roll() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(1024));
    assert_eq!(snapshot(&mut log, &[], true), 0);
    assert_eq!(snapshot(&mut log, &state(&["replaced"]), true), 0);
    assert_eq!(files(tmp.path()), vec!["00000000000000000000.log", "snapshot-00000000000000000000.snap"]);
    drop(log);
    let (_, seen) = open(tmp.path(), options(1024));
    assert_eq!(split(&seen, 0), (state(&["replaced"]), vec![]));
}

#[test]
fn leftover_tmp_snapshot_is_ignored_and_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(2 * FRAME));
    append_records(&mut log, 0..3);
    let plan = log.begin_snapshot().unwrap();
    // The crash came while the snapshot was being written.
    let tmp_file = tmp.path().join("snapshot-00000000000000000003.snap.tmp");
    std::fs::write(&tmp_file, b"\x00\x00\x00\x05partial").unwrap();
    drop((log, plan));

    let (_, seen) = open(tmp.path(), options(2 * FRAME));
    assert_eq!(split(&seen, 0), (vec![], records(0..3)));
    assert!(!tmp_file.exists());
}

#[test]
fn crash_after_the_rename_before_deleting_segments_is_finished_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(2 * FRAME));
    append_records(&mut log, 0..3);
    snapshot(&mut log, &state(&["old"]), true);
    append_records(&mut log, 3..6);
    // Written and renamed into place, but the log was never told.
    let base = snapshot(&mut log, &state(&["new"]), false);
    append_records(&mut log, 6..7);
    drop(log);
    assert!(snapshot_path(tmp.path(), 3).exists());
    assert!(segment_path(tmp.path(), 3).exists());

    let (log, seen) = open(tmp.path(), options(2 * FRAME));
    assert_eq!(split(&seen, base), (state(&["new"]), records(6..7)));
    assert_eq!(files(tmp.path()), vec!["00000000000000000006.log", "snapshot-00000000000000000006.snap"]);
    assert_eq!(log.start(), 6);
    assert_eq!(log.snapshot_bytes(), file_len(&snapshot_path(tmp.path(), 6)));
}

#[test]
fn invalid_newest_snapshot_falls_back_to_an_older_valid_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(2 * FRAME));
    append_records(&mut log, 0..2);
    snapshot(&mut log, &state(&["old"]), true);
    append_records(&mut log, 2..4);
    snapshot(&mut log, &state(&["new"]), false);
    append_records(&mut log, 4..5);
    drop(log);
    damage(&snapshot_path(tmp.path(), 4));

    let (_, seen) = open(tmp.path(), options(2 * FRAME));
    assert_eq!(split(&seen, 2), (state(&["old"]), records(2..5)));
}

#[test]
fn invalid_snapshot_is_ignored_when_the_whole_history_is_present() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(2 * FRAME));
    append_records(&mut log, 0..3);
    snapshot(&mut log, &state(&["s"]), false);
    append_records(&mut log, 3..4);
    drop(log);
    damage(&snapshot_path(tmp.path(), 3));

    let (_, seen) = open(tmp.path(), options(2 * FRAME));
    assert_eq!(split(&seen, 0), (vec![], records(0..4)));
}

#[test]
fn invalid_snapshot_without_the_history_before_it_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(2 * FRAME));
    append_records(&mut log, 0..3);
    snapshot(&mut log, &state(&["s"]), true);
    append_records(&mut log, 3..4);
    drop(log);
    let path = snapshot_path(tmp.path(), 3);
    damage(&path);

    match try_open(tmp.path(), options(2 * FRAME)).unwrap_err() {
        LogError::Corrupt { file, .. } => assert_eq!(file, path),
        other => panic!("expected Corrupt, got {other}"),
    }
    // Repair keeps what can be kept: the records after the lost state.
    let (mut log, seen) = open(tmp.path(), repairing(2 * FRAME));
    assert_eq!(split(&seen, 0), (vec![], records(3..4)));
    assert_eq!(log.append(&[b"x"]).unwrap()[0].index, 4);
}

#[test]
fn valid_snapshot_whose_next_segment_is_missing_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(2 * FRAME));
    append_records(&mut log, 0..1);
    snapshot(&mut log, &state(&["s"]), true);
    append_records(&mut log, 1..4);
    drop(log);
    std::fs::remove_file(segment_path(tmp.path(), 1)).unwrap();

    let err = try_open(tmp.path(), options(2 * FRAME)).unwrap_err();
    assert!(matches!(err, LogError::Corrupt { .. }), "{err}");
    // Repair starts from the snapshot and drops the records after the hole.
    let (mut log, seen) = open(tmp.path(), repairing(2 * FRAME));
    assert_eq!(split(&seen, 1), (state(&["s"]), vec![]));
    assert_eq!(files(tmp.path()), vec!["00000000000000000001.log", "snapshot-00000000000000000001.snap"]);
    assert_eq!(log.append(&[b"x"]).unwrap()[0].index, 1);
}

#[test]
fn torn_tail_after_a_snapshot_is_truncated() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(100 * FRAME));
    append_records(&mut log, 0..2);
    snapshot(&mut log, &state(&["s"]), true);
    append_records(&mut log, 2..4);
    drop(log);
    let active = segment_path(tmp.path(), 2);
    std::fs::OpenOptions::new().write(true).open(&active).unwrap().set_len(2 * FRAME - 3).unwrap();

    let (_, seen) = open(tmp.path(), options(100 * FRAME));
    assert_eq!(split(&seen, 2), (state(&["s"]), records(2..3)));
}

#[test]
fn retention_is_refused_on_a_log_with_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(FRAME));
    append_records(&mut log, 0..2);
    snapshot(&mut log, &[], true);
    append_records(&mut log, 2..4);
    assert!(log.delete_oldest_segment().is_err());
    assert_eq!(log.start(), 2);
}

#[test]
fn finishing_an_older_snapshot_after_a_newer_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(FRAME));
    append_records(&mut log, 0..1);
    let old_plan = log.begin_snapshot().unwrap();
    let old = old_plan.write(&mut std::iter::empty()).unwrap();
    append_records(&mut log, 1..2);
    snapshot(&mut log, &[], true);
    assert!(log.finish_snapshot(old).is_err());
    assert_eq!(log.start(), 2);
}

#[test]
fn visitor_sees_snapshot_records_with_their_file_positions() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(1024));
    append_records(&mut log, 0..1);
    snapshot(&mut log, &state(&["ab", "cde"]), true);
    drop(log);
    let (_, seen) = open(tmp.path(), options(1024));
    let locations: Vec<Location> = seen.iter().map(|(l, _)| *l).collect();
    assert_eq!(
        locations,
        vec![
            Location { index: 1, segment_base: Location::SNAPSHOT, position: 0, payload_len: 2 },
            Location { index: 1, segment_base: Location::SNAPSHOT, position: 10, payload_len: 3 },
        ]
    );
}
