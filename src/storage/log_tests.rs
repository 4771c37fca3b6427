//! Behaviour of a healthy log: appends, replay, rolling, reads, retention,
//! group-commit bookkeeping, and failed appends.

use std::io;

use super::frame::encode_frame;
use super::log::{Location, Log, LogOptions};
use super::test_util::*;

/// Bytes of one `record(i)` frame: 8 header + 11 payload.
const FRAME: u64 = 19;

#[test]
fn a_new_log_is_empty_and_creates_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a").join("log");
    let (log, seen) = open(&dir, options(1024));
    assert!(seen.is_empty());
    assert_eq!((log.start(), log.end(), log.synced()), (0, 0, 0));
    assert_eq!(files(&dir), vec!["00000000000000000000.log"]);
    assert_eq!(log.dir(), dir);
}

#[test]
fn appended_records_replay_with_the_same_indices_and_locations() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(1 << 20));
    let mut appended = log.append(&[b"a", b"bb"]).unwrap();
    appended.extend(log.append(&[b"ccc"]).unwrap());
    assert_eq!(
        appended,
        vec![
            Location { index: 0, segment_base: 0, position: 0, payload_len: 1 },
            Location { index: 1, segment_base: 0, position: 9, payload_len: 2 },
            Location { index: 2, segment_base: 0, position: 19, payload_len: 3 },
        ]
    );
    assert_eq!(log.end(), 3);
    drop(log);

    let (log, seen) = open(tmp.path(), options(1 << 20));
    let locations: Vec<Location> = seen.iter().map(|(l, _)| *l).collect();
    assert_eq!(locations, appended);
    assert_eq!(payloads(&seen), vec![b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]);
    assert_eq!((log.start(), log.end(), log.synced()), (0, 3, 3));
}

#[test]
fn empty_batch_appends_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(1024));
    assert!(log.append(&[]).unwrap().is_empty());
    assert_eq!(log.end(), 0);
}

#[test]
fn empty_payload_is_rejected_and_nothing_of_the_batch_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(1024));
    let err = log.append(&[b"fine", b""]).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(log.end(), 0);
    assert_eq!(file_len(&segment_path(tmp.path(), 0)), 0);
}

#[test]
fn full_segment_rolls_on_the_next_append_and_replay_spans_segments() {
    let tmp = tempfile::tempdir().unwrap();
    // Two records fill a segment: the third append rolls.
    let (mut log, _) = open(tmp.path(), options(2 * FRAME));
    let locations = append_records(&mut log, 0..5);
    let bases: Vec<u64> = locations.iter().map(|l| l.segment_base).collect();
    assert_eq!(bases, vec![0, 0, 2, 2, 4]);
    assert_eq!(locations[2].position, 0);
    assert_eq!(
        files(tmp.path()),
        vec!["00000000000000000000.log", "00000000000000000002.log", "00000000000000000004.log"]
    );
    // Rolling fsyncs the closed segments, so they count as synced.
    assert_eq!(log.synced(), 4);
    drop(log);

    let (mut log, seen) = open(tmp.path(), options(2 * FRAME));
    assert_eq!(seen.iter().map(|(l, _)| *l).collect::<Vec<_>>(), locations);
    assert_eq!(payloads(&seen), (0..5).map(record).collect::<Vec<_>>());
    // The reopened active segment keeps filling up where it was.
    assert_eq!(log.append(&[&record(5)]).unwrap()[0].segment_base, 4);
    assert_eq!(log.append(&[&record(6)]).unwrap()[0].segment_base, 6);
}

#[test]
fn a_batch_larger_than_a_segment_stays_in_one_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(10));
    let batch: Vec<Vec<u8>> = (0..4).map(record).collect();
    let refs: Vec<&[u8]> = batch.iter().map(|p| p.as_slice()).collect();
    let locations = log.append(&refs).unwrap();
    assert!(locations.iter().all(|l| l.segment_base == 0));
    assert_eq!(log.append(&[b"next"]).unwrap()[0].segment_base, 4);
    assert_eq!(log.segments().iter().map(|s| s.bytes).collect::<Vec<_>>(), vec![4 * FRAME, 12]);
}

#[test]
fn read_at_returns_the_stored_frame_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(2 * FRAME));
    let locations = append_records(&mut log, 0..3);
    for (i, loc) in (0u64..).zip(&locations) {
        let mut expected = Vec::new();
        encode_frame(&mut expected, &record(i)).unwrap();
        assert_eq!(log.read_at(loc.segment_base, loc.position, loc.frame_len()).unwrap(), expected);
    }
}

#[test]
fn read_at_refuses_ranges_past_the_records_and_unknown_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(1024));
    append_records(&mut log, 0..1);
    assert_eq!(log.read_at(0, 0, FRAME as usize + 1).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    assert_eq!(log.read_at(0, u64::MAX, 2).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    assert_eq!(log.read_at(7, 0, 1).unwrap_err().kind(), io::ErrorKind::NotFound);
}

#[test]
fn delete_oldest_segment_moves_start_and_never_deletes_the_active_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(FRAME));
    let locations = append_records(&mut log, 0..3);
    assert_eq!(log.segments().iter().map(|s| s.base).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(log.segments().iter().all(|s| s.bytes == FRAME && s.modified_ms > 0));

    let deleted = log.delete_oldest_segment().unwrap().unwrap();
    assert_eq!((deleted.base, deleted.bytes), (0, FRAME));
    assert_eq!(log.start(), 1);
    assert!(!segment_path(tmp.path(), 0).exists());
    assert_eq!(log.read_at(0, 0, 1).unwrap_err().kind(), io::ErrorKind::NotFound);
    assert!(log.read_at(1, 0, locations[1].frame_len()).is_ok());

    assert_eq!(log.delete_oldest_segment().unwrap().unwrap().base, 1);
    assert_eq!(log.delete_oldest_segment().unwrap(), None);
    assert_eq!((log.start(), log.end()), (2, 3));
    drop(log);

    // A log whose oldest segments were dropped by retention reopens as such.
    let (mut log, seen) = open(tmp.path(), options(FRAME));
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0.index, 2);
    assert_eq!((log.start(), log.end()), (2, 3));
    assert_eq!(log.append(&[b"x"]).unwrap()[0].index, 3);
}

#[test]
fn sync_job_covers_what_was_appended_and_mark_synced_ignores_older_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(1 << 20));
    assert!(log.sync_job().is_none());

    append_records(&mut log, 0..2);
    let first = log.sync_job().unwrap();
    assert_eq!(first.end(), 2);
    append_records(&mut log, 2..5);
    let second = log.sync_job().unwrap();
    assert_eq!(second.end(), 5);

    // The later job finishes first (group commit on a blocking pool).
    let second_end = std::thread::spawn(move || second.run()).join().unwrap().unwrap();
    log.mark_synced(second_end);
    assert_eq!(log.synced(), 5);
    log.mark_synced(first.run().unwrap());
    assert_eq!(log.synced(), 5);
    assert!(log.sync_job().is_none());

    // An end beyond what exists is clamped.
    log.mark_synced(100);
    assert_eq!(log.synced(), 5);

    append_records(&mut log, 5..6);
    assert_eq!(log.synced(), 5);
    log.sync().unwrap();
    assert_eq!(log.synced(), 6);
}

#[test]
fn sync_job_is_send() {
    fn assert_send<T: Send + 'static>() {}
    assert_send::<super::log::SyncJob>();
    assert_send::<super::snapshot::SnapshotPlan>();
    assert_send::<super::snapshot::SnapshotDone>();
}

#[test]
fn failed_write_is_cut_back_leaving_the_log_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(1 << 20));
    append_records(&mut log, 0..2);
    let before = file_len(&segment_path(tmp.path(), 0));

    // The disk fills up half-way through the batch.
    let err = log
        .append_via(&[&record(2), &record(3)], &mut |file, bytes, offset| {
            file.write_all_at(&bytes[..bytes.len() / 2 + 3], offset)?;
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        })
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(file_len(&segment_path(tmp.path(), 0)), before);
    assert_eq!(log.end(), 2);

    // The log goes on as if the failed batch had never been tried.
    let locations = log.append(&[&record(2)]).unwrap();
    assert_eq!((locations[0].index, locations[0].position), (2, before));
    drop(log);
    let (_, seen) = open(tmp.path(), options(1 << 20));
    assert_eq!(payloads(&seen), (0..3).map(record).collect::<Vec<_>>());
}

#[test]
fn failed_write_that_cannot_be_cut_back_poisons_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(1 << 20));
    append_records(&mut log, 0..1);
    // A read-only handle makes both the write and the truncation fail.
    log.make_active_read_only().unwrap();
    let err = log.append(&[&record(1)]).unwrap_err();
    assert!(err.to_string().contains("truncating"), "{err}");

    let later = log.append(&[&record(1)]).unwrap_err();
    assert!(later.to_string().contains("unusable"), "{later}");
    assert!(log.begin_snapshot().is_err());
    assert_eq!(log.end(), 1);
}

#[test]
fn visitor_error_aborts_open() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(1024));
    append_records(&mut log, 0..3);
    drop(log);
    let mut count = 0;
    let err = Log::open(tmp.path(), options(1024), &mut |loc, _| {
        count += 1;
        if loc.index == 1 {
            Err("bad record".to_string())
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert_eq!(count, 2);
    assert!(matches!(&err, super::error::LogError::Visit(m) if m == "bad record"), "{err}");
}

#[test]
fn unknown_files_in_the_directory_are_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("README"), b"hello").unwrap();
    std::fs::write(tmp.path().join("12.log"), b"not a segment").unwrap();
    let (mut log, seen) = open(tmp.path(), options(1024));
    assert!(seen.is_empty());
    append_records(&mut log, 0..1);
    assert!(tmp.path().join("README").exists());
    assert!(tmp.path().join("12.log").exists());
}

#[test]
fn opening_a_file_as_a_log_is_an_io_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("file");
    std::fs::write(&path, b"x").unwrap();
    let err = try_open(&path, options(1024)).unwrap_err();
    assert!(matches!(err, super::error::LogError::Io { .. }), "{err}");
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
}

/// Many logs sharing a cache of a few open files (partition logs): every
/// append, roll, fsync, read and reopen works although each log's files are
/// closed and reopened in between, and the cache never holds more files
/// than its capacity.
#[test]
fn logs_sharing_a_small_file_cache_work_with_their_files_closed_in_between() {
    use super::handles::{FileCache, MIN_CAPACITY};
    let tmp = tempfile::tempdir().unwrap();
    let cache = FileCache::new(MIN_CAPACITY);
    let mut options = options(4 * FRAME);
    options.files = Some(cache.clone());
    let dirs: Vec<_> = (0..3 * MIN_CAPACITY).map(|i| tmp.path().join(format!("p{i}"))).collect();
    let mut logs: Vec<Log> = dirs.iter().map(|d| open(d, options.clone()).0).collect();
    for round in 0..10u64 {
        for log in &mut logs {
            log.append(&[&record(round)]).unwrap();
            let job = log.sync_job().unwrap();
            log.mark_synced(job.run().unwrap());
            assert!(cache.open_files() <= MIN_CAPACITY);
        }
    }
    for log in &logs {
        assert!(log.segments().len() > 1, "rolled");
        // The first record, in a closed segment whose file was closed.
        let frame = log.read_at(0, 0, FRAME as usize).unwrap();
        assert!(frame.ends_with(&record(0)));
    }
    drop(logs);
    assert_eq!(cache.open_files(), 0, "closed logs give their files back");
    for dir in &dirs {
        let (log, seen) = open(dir, options.clone());
        assert_eq!(payloads(&seen), (0..10).map(record).collect::<Vec<_>>());
        assert_eq!(log.end(), 10);
    }
}

/// A batch's buffer serves the next batch (one allocation less per batch,
/// and none to grow it append by append), unless the batch was large: a
/// burst does not keep its memory.
#[test]
fn a_batched_log_reuses_a_small_batch_buffer_for_the_next_batch_and_drops_a_large_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), LogOptions { batched_writes: true, ..options(1 << 20) });
    let mut next = 0u64;
    let mut batch = |log: &mut Log, n: u64| {
        for _ in 0..n {
            log.append(&[&record(next)]).unwrap();
            next += 1;
        }
        log.write_appended().unwrap();
    };
    batch(&mut log, 4);
    let kept = log.spare_batch_capacity();
    assert!(kept >= 4 * FRAME as usize, "{kept}");
    batch(&mut log, 4);
    assert_eq!(log.spare_batch_capacity(), kept, "the same buffer again");
    let large = 70 * 1024 / FRAME + 1;
    batch(&mut log, large);
    assert_eq!(log.spare_batch_capacity(), 0, "a batch over 64 KiB is not kept");
    batch(&mut log, 2);
    drop(log);

    let (_, seen) = open(tmp.path(), LogOptions { batched_writes: true, ..options(1 << 20) });
    assert_eq!(payloads(&seen), (0..next).map(record).collect::<Vec<_>>(), "every batch replays in order");
}

#[test]
fn a_batched_log_writes_its_appends_with_one_write_when_asked_and_a_failed_write_poisons_it() {
    let tmp = tempfile::tempdir().unwrap();
    let batched = || LogOptions { batched_writes: true, ..options(1 << 20) };
    let (mut log, _) = open(tmp.path(), batched());
    let segment = tmp.path().join(super::segment::segment_file_name(0));
    log.append(&[&record(0)]).unwrap();
    log.append(&[&record(1), &record(2)]).unwrap();
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), 0, "appends wait for the batch's write");
    assert_eq!((log.end(), log.written()), (3, 0));

    log.write_appended().unwrap();
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), 3 * FRAME);
    assert_eq!(log.written(), 3);
    log.write_appended().unwrap();
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), 3 * FRAME, "nothing written twice");

    log.append(&[&record(3)]).unwrap();
    log.make_active_read_only().unwrap();
    assert!(log.write_appended().is_err());
    assert!(log.poisoned().is_some_and(|r| r.contains("writing appended records")), "{:?}", log.poisoned());
    assert!(log.append(&[&record(4)]).is_err(), "a poisoned log refuses appends");
    drop(log);

    let (log, seen) = open(tmp.path(), batched());
    assert_eq!(payloads(&seen), (0..3).map(record).collect::<Vec<_>>(), "what was written replays");
    assert_eq!(log.end(), 3);
}
