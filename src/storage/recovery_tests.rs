//! What opening does with damage: torn tails are truncated, anything else is
//! refused with a precise error, or truncated there when repairing.

use std::path::Path;

use super::error::LogError;
use super::segment::segment_file_name;
use super::test_util::*;

/// Bytes of one `record(i)` frame: 8 header + 11 payload.
const FRAME: u64 = 19;

/// A log of `n` records, `per_segment` records per segment, left as a crash
/// leaves it: the manifest's recovery point is where the active segment
/// began, so damage in that segment looks like unsynced writes.
fn log_with(dir: &Path, n: u64, per_segment: u64) {
    let (mut log, _) = open(dir, options(per_segment * FRAME));
    append_records(&mut log, 0..n);
}

/// [`log_with`], then a clean close that records every record as durable:
/// damage in it now hits acknowledged records, as a rotten sector would.
fn durable_log_with(dir: &Path, n: u64, per_segment: u64) {
    let (mut log, _) = open(dir, options(per_segment * FRAME));
    append_records(&mut log, 0..n);
    log.sync_and_record_end().unwrap();
}

fn corrupt_at(err: LogError) -> (String, u64, String) {
    match err {
        LogError::Corrupt { file, offset, reason } => {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            (name, offset, reason)
        }
        other => panic!("expected Corrupt, got {other}"),
    }
}

/// Damages the tail of a 3-record single-segment log, then checks that open
/// drops exactly the last record, cuts the file there, and appends after it.
fn assert_torn_tail_is_truncated(damage: impl FnOnce(&Path)) {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 3, 100);
    let segment = segment_path(tmp.path(), 0);
    damage(&segment);

    let (mut log, seen) = open(tmp.path(), options(100 * FRAME));
    assert_eq!(payloads(&seen), (0..2).map(record).collect::<Vec<_>>());
    assert_eq!(file_len(&segment), 2 * FRAME);
    assert_eq!((log.end(), log.synced()), (2, 2));
    let again = log.append(&[&record(2)]).unwrap();
    assert_eq!((again[0].index, again[0].position), (2, 2 * FRAME));
    drop(log);
    let (_, seen) = open(tmp.path(), options(100 * FRAME));
    assert_eq!(payloads(&seen), (0..3).map(record).collect::<Vec<_>>());
}

#[test]
fn torn_header_of_the_final_record_is_truncated_on_open() {
    assert_torn_tail_is_truncated(|p| {
        std::fs::OpenOptions::new().write(true).open(p).unwrap().set_len(2 * FRAME + 5).unwrap()
    });
}

#[test]
fn torn_payload_of_the_final_record_is_truncated_on_open() {
    assert_torn_tail_is_truncated(|p| {
        std::fs::OpenOptions::new().write(true).open(p).unwrap().set_len(3 * FRAME - 1).unwrap()
    });
}

#[test]
fn garbage_final_record_with_a_bad_crc_is_truncated_on_open() {
    assert_torn_tail_is_truncated(|p| patch(p, (3 * FRAME - 4) as usize, b"\xde\xad"));
}

#[test]
fn zero_filled_final_record_is_truncated_on_open() {
    assert_torn_tail_is_truncated(|p| patch(p, (2 * FRAME) as usize, &[0u8; FRAME as usize]));
}

#[test]
fn zero_filled_tail_after_the_final_record_is_truncated_on_open() {
    assert_torn_tail_is_truncated(|p| {
        // Record 2 half zeroed, then a zero run where later frames would be.
        patch(p, (2 * FRAME + 10) as usize, &[0u8; 9]);
        let mut content = std::fs::read(p).unwrap();
        content.extend_from_slice(&[0u8; 8192]);
        std::fs::write(p, content).unwrap();
    });
}

/// A disk that writes unsynced pages back out of order can lose an earlier
/// write and keep a later one: a hole of zeros with intact frames after it.
/// Nothing there was ever acknowledged (an fsync covering the later frames
/// would have covered the hole), so, as Kafka does after its recovery point,
/// opening truncates at the hole instead of asking for `--repair`.
#[test]
fn a_hole_left_by_out_of_order_write_back_after_the_recovery_point_is_truncated() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(100 * FRAME));
    append_records(&mut log, 0..2);
    log.sync_and_record_end().unwrap();
    append_records(&mut log, 2..5);
    drop(log);
    let segment = segment_path(tmp.path(), 0);
    patch(&segment, (2 * FRAME) as usize, &[0u8; FRAME as usize]);

    let (mut log, seen) = open(tmp.path(), options(100 * FRAME));
    assert_eq!(payloads(&seen), (0..2).map(record).collect::<Vec<_>>());
    assert_eq!(file_len(&segment), 2 * FRAME);
    assert_eq!(log.append(&[&record(2)]).unwrap()[0].index, 2);
    drop(log);
    let (_, seen) = open(tmp.path(), options(100 * FRAME));
    assert_eq!(payloads(&seen), (0..3).map(record).collect::<Vec<_>>());
}

#[test]
fn the_same_hole_before_the_recovery_point_is_refused_as_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    durable_log_with(tmp.path(), 5, 100);
    patch(&segment_path(tmp.path(), 0), (2 * FRAME) as usize, &[0u8; FRAME as usize]);
    let (_, offset, reason) = corrupt_at(try_open(tmp.path(), options(100 * FRAME)).unwrap_err());
    assert_eq!(offset, 2 * FRAME);
    assert!(reason.contains("zero length"), "{reason}");
    assert_eq!(file_len(&segment_path(tmp.path(), 0)), 5 * FRAME, "nothing was cut");
}

/// Appends that are synced one by one move the recovery point along (every
/// eighth of a segment), so a later crash still refuses damage to records
/// acknowledged well before it, while a hole after the point is truncated.
#[test]
fn the_recovery_point_follows_synced_appends() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(100 * FRAME));
    for i in 0..30 {
        append_records(&mut log, i..i + 1);
        let job = log.sync_job().unwrap();
        log.mark_synced(job.run().unwrap());
    }
    drop(log);
    let segment = segment_path(tmp.path(), 0);
    let before = std::fs::read(&segment).unwrap();
    patch(&segment, (3 * FRAME) as usize, &[0u8; FRAME as usize]);
    let (_, offset, _) = corrupt_at(try_open(tmp.path(), options(100 * FRAME)).unwrap_err());
    assert_eq!(offset, 3 * FRAME, "record 3 was acknowledged long before the crash");

    std::fs::write(&segment, &before).unwrap();
    patch(&segment, (29 * FRAME) as usize, &[0u8; 8]);
    let (log, seen) = open(tmp.path(), options(100 * FRAME));
    assert_eq!((log.end(), seen.len()), (29, 29), "the last record was after the recovery point");
}

/// One append is one write of the coordinator (a member's records, a
/// group's assignment): a crash that cuts it between its records must drop
/// all of them, never replay the first ones alone.
#[test]
fn a_write_of_several_records_cut_between_them_by_a_crash_is_dropped_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(100 * FRAME));
    append_records(&mut log, 0..2);
    let (r2, r3, r4) = (record(2), record(3), record(4));
    log.append(&[&r2, &r3, &r4]).unwrap();
    drop(log);
    let segment = segment_path(tmp.path(), 0);
    for cut in [3 * FRAME, 4 * FRAME, 4 * FRAME + 5] {
        std::fs::OpenOptions::new().write(true).open(&segment).unwrap().set_len(cut).unwrap();
        let (log, seen) = open(tmp.path(), options(100 * FRAME));
        assert_eq!(payloads(&seen), (0..2).map(record).collect::<Vec<_>>(), "cut at {cut}");
        assert_eq!((log.end(), file_len(&segment)), (2, 2 * FRAME), "cut at {cut}");
        drop(log);
        // Put the write back for the next cut.
        let (mut log, _) = open(tmp.path(), options(100 * FRAME));
        log.append(&[&r2, &r3, &r4]).unwrap();
    }
    let (_, seen) = open(tmp.path(), options(100 * FRAME));
    assert_eq!(payloads(&seen), (0..5).map(record).collect::<Vec<_>>(), "a whole write replays whole");
}

#[test]
fn an_entirely_zero_last_segment_is_emptied() {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 2, 1);
    std::fs::write(segment_path(tmp.path(), 2), [0u8; 4096]).unwrap();
    let (mut log, seen) = open(tmp.path(), options(FRAME));
    assert_eq!(seen.len(), 2);
    assert_eq!(file_len(&segment_path(tmp.path(), 2)), 0);
    assert_eq!(log.append(&[b"x"]).unwrap()[0].index, 2);
}

#[test]
fn crc_corruption_in_the_middle_is_reported_with_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    durable_log_with(tmp.path(), 3, 100);
    patch(&segment_path(tmp.path(), 0), (FRAME + 9) as usize, b"X");
    let err = try_open(tmp.path(), options(100 * FRAME)).unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&*segment_path(tmp.path(), 0).to_string_lossy()), "{message}");
    assert!(message.contains(&format!("offset {FRAME}")), "{message}");
    assert!(message.contains("kcoord serve --repair"), "{message}");
    let (file, offset, reason) = corrupt_at(err);
    assert_eq!((file.as_str(), offset), ("00000000000000000000.log", FRAME));
    assert!(reason.contains("CRC"), "{reason}");
}

#[test]
fn repair_truncates_at_mid_segment_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    durable_log_with(tmp.path(), 3, 100);
    patch(&segment_path(tmp.path(), 0), (FRAME + 9) as usize, b"X");
    let (mut log, seen) = open(tmp.path(), repairing(100 * FRAME));
    assert_eq!(payloads(&seen), vec![record(0)]);
    assert_eq!(file_len(&segment_path(tmp.path(), 0)), FRAME);
    assert_eq!(log.append(&[b"new"]).unwrap()[0].index, 1);
    drop(log);
    // Once repaired, the log opens normally.
    let (_, seen) = open(tmp.path(), options(100 * FRAME));
    assert_eq!(payloads(&seen), vec![record(0), b"new".to_vec()]);
}

#[test]
fn corruption_in_a_non_last_segment_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 6, 2);
    // The last record of the middle segment: at its file's tail, but the
    // segment is closed, so no crash can explain it.
    patch(&segment_path(tmp.path(), 2), (2 * FRAME - 1) as usize, b"!");
    let (file, offset, reason) = corrupt_at(try_open(tmp.path(), options(2 * FRAME)).unwrap_err());
    assert_eq!((file.as_str(), offset), ("00000000000000000002.log", FRAME));
    assert!(reason.contains("not the last"), "{reason}");
}

#[test]
fn repair_of_a_non_last_segment_drops_every_later_segment() {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 6, 2);
    patch(&segment_path(tmp.path(), 2), (2 * FRAME - 1) as usize, b"!");
    let (mut log, seen) = open(tmp.path(), repairing(2 * FRAME));
    assert_eq!(payloads(&seen), (0..3).map(record).collect::<Vec<_>>());
    assert_eq!(files(tmp.path()), vec!["00000000000000000000.log", "00000000000000000002.log"]);
    assert_eq!(log.end(), 3);
    let loc = log.append(&[b"new"]).unwrap()[0];
    assert_eq!((loc.index, loc.segment_base, loc.position), (3, 2, FRAME));
}

#[test]
fn torn_tail_in_a_non_last_segment_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 4, 2);
    let first = segment_path(tmp.path(), 0);
    std::fs::OpenOptions::new().write(true).open(&first).unwrap().set_len(2 * FRAME - 1).unwrap();
    let (file, offset, _) = corrupt_at(try_open(tmp.path(), options(2 * FRAME)).unwrap_err());
    assert_eq!((file.as_str(), offset), ("00000000000000000000.log", FRAME));
}

#[test]
fn a_gap_between_segments_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 6, 2);
    std::fs::remove_file(segment_path(tmp.path(), 2)).unwrap();
    // The manifest names the missing segment itself.
    let (file, _, reason) = corrupt_at(try_open(tmp.path(), options(2 * FRAME)).unwrap_err());
    assert_eq!(file.as_str(), "00000000000000000002.log");
    assert!(reason.contains("missing"), "{reason}");
    // Without one (a directory from before manifests), the gap gives it away.
    std::fs::remove_file(tmp.path().join(super::manifest::MANIFEST_FILE)).unwrap();
    let (file, offset, reason) = corrupt_at(try_open(tmp.path(), options(2 * FRAME)).unwrap_err());
    assert_eq!((file.as_str(), offset), ("00000000000000000004.log", 0));
    assert!(reason.contains("index 4") && reason.contains("index 2"), "{reason}");
}

#[test]
fn repair_of_a_gap_drops_the_segments_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 6, 2);
    std::fs::remove_file(segment_path(tmp.path(), 2)).unwrap();
    let (mut log, seen) = open(tmp.path(), repairing(2 * FRAME));
    assert_eq!(payloads(&seen), (0..2).map(record).collect::<Vec<_>>());
    assert_eq!(files(tmp.path()), vec!["00000000000000000000.log"]);
    let loc = log.append(&[b"new"]).unwrap()[0];
    assert_eq!((loc.index, loc.segment_base), (2, 2));
}

#[test]
fn a_segment_with_more_records_than_its_successor_allows_is_a_gap() {
    // Overlap: segment 0 holds 3 records but segment 2 claims to start at 2.
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 4, 2);
    let mut extra = Vec::new();
    super::frame::encode_frame(&mut extra, &record(99)).unwrap();
    let first = segment_path(tmp.path(), 0);
    let mut content = std::fs::read(&first).unwrap();
    content.extend_from_slice(&extra);
    std::fs::write(&first, content).unwrap();
    let (file, _, _) = corrupt_at(try_open(tmp.path(), options(2 * FRAME)).unwrap_err());
    assert_eq!(file, "00000000000000000002.log");
}

#[test]
fn zero_length_field_followed_by_data_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    durable_log_with(tmp.path(), 3, 100);
    patch(&segment_path(tmp.path(), 0), FRAME as usize, &[0u8; 8]);
    let (_, offset, reason) = corrupt_at(try_open(tmp.path(), options(100 * FRAME)).unwrap_err());
    assert_eq!(offset, FRAME);
    assert!(reason.contains("zero length"), "{reason}");
}

#[test]
fn length_beyond_the_maximum_is_corruption_even_at_the_tail() {
    let tmp = tempfile::tempdir().unwrap();
    durable_log_with(tmp.path(), 2, 100);
    patch(&segment_path(tmp.path(), 0), FRAME as usize, &u32::MAX.to_be_bytes());
    let (_, offset, reason) = corrupt_at(try_open(tmp.path(), options(100 * FRAME)).unwrap_err());
    assert_eq!(offset, FRAME);
    assert!(reason.contains("exceeds"), "{reason}");
}

#[test]
fn a_damaged_length_field_before_fsynced_records_stops_the_open_instead_of_dropping_them() {
    let tmp = tempfile::tempdir().unwrap();
    durable_log_with(tmp.path(), 3, 100);
    // Record 1's length now runs past the end of the active segment, but
    // record 2 after it is intact: not what a crash leaves, so not truncated.
    patch(&segment_path(tmp.path(), 0), FRAME as usize, &1000u32.to_be_bytes());
    let (_, offset, reason) = corrupt_at(try_open(tmp.path(), options(100 * FRAME)).unwrap_err());
    assert_eq!(offset, FRAME);
    assert!(reason.contains("intact records follow"), "{reason}");
    assert_eq!(file_len(&segment_path(tmp.path(), 0)), 3 * FRAME, "nothing was cut");
}

#[test]
fn records_before_the_corruption_are_visited_before_the_error() {
    let tmp = tempfile::tempdir().unwrap();
    durable_log_with(tmp.path(), 3, 100);
    patch(&segment_path(tmp.path(), 0), (FRAME + 9) as usize, b"X");
    let mut visited = Vec::new();
    let result = super::log::Log::open(tmp.path(), options(100 * FRAME), &mut |loc, _| {
        visited.push(loc.index);
        Ok(())
    });
    assert!(result.is_err());
    assert_eq!(visited, vec![0]);
}

#[test]
fn an_empty_segment_left_by_an_interrupted_roll_becomes_the_active_one() {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 2, 1);
    // The crash came after the new segment was created, before any append.
    std::fs::write(segment_path(tmp.path(), 2), b"").unwrap();
    let (mut log, seen) = open(tmp.path(), options(FRAME));
    assert_eq!(seen.len(), 2);
    let loc = log.append(&[b"x"]).unwrap()[0];
    assert_eq!((loc.index, loc.segment_base, loc.position), (2, 2, 0));
}

/// Opens with [`Replay::TrustClosed`] and collects what was replayed.
fn open_trusting(dir: &Path, prefix: usize) -> Result<(super::log::Log, Replayed), LogError> {
    let mut seen = Vec::new();
    let replay = super::log::Replay::TrustClosed { prefix };
    let log = super::log::Log::open_with(dir, options(3 * FRAME), replay, &mut |loc, payload| {
        seen.push((loc, payload.to_vec()));
        Ok(())
    })?;
    Ok((log, seen))
}

#[test]
fn a_trusting_open_reads_only_headers_of_closed_segments_and_finds_the_same_records() {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 9, 3);
    let (_, full) = open(tmp.path(), options(3 * FRAME));
    let (log, trusted) = open_trusting(tmp.path(), 4).unwrap();
    assert_eq!(log.end(), 9);
    let locations = |r: &Replayed| r.iter().map(|(l, _)| *l).collect::<Vec<_>>();
    assert_eq!(locations(&trusted), locations(&full), "same indexes, positions and lengths");
    for (i, (loc, payload)) in trusted.iter().enumerate() {
        let whole = record(i as u64);
        let expect = if loc.segment_base < 6 { &whole[..4] } else { &whole[..] };
        assert_eq!(payload.as_slice(), expect, "record {i}: a prefix from closed segments, all of the active one");
    }
}

#[test]
fn a_trusting_open_skips_crcs_of_closed_segments_only() {
    let tmp = tempfile::tempdir().unwrap();
    durable_log_with(tmp.path(), 9, 3);
    // A flipped payload byte in a closed segment: only a full scan sees it.
    patch(&segment_path(tmp.path(), 3), FRAME as usize + 10, b"X");
    assert_eq!(open_trusting(tmp.path(), 4).unwrap().0.end(), 9);
    assert_eq!(corrupt_at(try_open(tmp.path(), options(3 * FRAME)).unwrap_err()).0, segment_file_name(3));
    // In the active segment the CRC is still checked.
    let tmp = tempfile::tempdir().unwrap();
    durable_log_with(tmp.path(), 9, 3);
    patch(&segment_path(tmp.path(), 6), 10, b"X");
    assert_eq!(corrupt_at(open_trusting(tmp.path(), 4).unwrap_err()).0, segment_file_name(6));
}

#[test]
fn frame_lengths_that_do_not_fit_a_closed_segment_are_corrupt_for_a_trusting_open() {
    for (what, offset, bytes) in [
        ("zero length", FRAME as usize, &[0u8, 0, 0, 0][..]),
        ("past the end", FRAME as usize, &[0, 0, 1, 0][..]),
        ("too short for the last frame", 2 * FRAME as usize, &[0, 0, 0, 10][..]),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        log_with(tmp.path(), 9, 3);
        patch(&segment_path(tmp.path(), 0), offset, bytes);
        let (file, at, _) = corrupt_at(open_trusting(tmp.path(), 4).unwrap_err());
        assert_eq!(file, segment_file_name(0), "{what}");
        assert!(at <= offset as u64 + FRAME, "{what}: {at}");
        // Nothing was changed on disk: a full open still refuses the same file.
        assert_eq!(corrupt_at(try_open(tmp.path(), options(3 * FRAME)).unwrap_err()).0, segment_file_name(0), "{what}");
    }
}

#[test]
fn after_a_clean_close_a_trusting_open_reads_only_headers_of_the_active_segment_too() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(3 * FRAME));
    append_records(&mut log, 0..8);
    log.sync_and_mark_clean().unwrap();
    drop(log);
    let (mut log, seen) = open_trusting(tmp.path(), 4).unwrap();
    assert!(seen.iter().all(|(_, p)| p.len() == 4), "no payload read in full");
    assert_eq!(log.end(), 8);
    assert!(!tmp.path().join(super::log::CLEAN_MARKER).exists(), "the marker is consumed by opening");
    append_records(&mut log, 8..9);
    drop(log);
    // No clean close this time: the active segment is scanned again.
    let (_, seen) = open_trusting(tmp.path(), 4).unwrap();
    assert_eq!(seen.iter().filter(|(_, p)| p.len() > 4).count(), 3, "the active segment's records in full");
}

#[test]
fn an_active_segment_that_changed_after_its_clean_close_is_scanned_and_its_torn_tail_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path(), options(100 * FRAME));
    append_records(&mut log, 0..3);
    log.sync_and_mark_clean().unwrap();
    drop(log);
    // Something was written after the marker: half a frame, as a crash leaves.
    let segment = segment_path(tmp.path(), 0);
    let mut bytes = std::fs::read(&segment).unwrap();
    let torn = bytes[..FRAME as usize - 3].to_vec();
    bytes.extend_from_slice(&torn);
    std::fs::write(&segment, bytes).unwrap();
    let (log, seen) = open_trusting(tmp.path(), 4).unwrap();
    assert_eq!(payloads(&seen), (0..3).map(record).collect::<Vec<_>>(), "scanned in full");
    assert_eq!((log.end(), file_len(&segment)), (3, 3 * FRAME), "the torn tail is truncated");
}

#[test]
fn a_trusting_open_skips_payloads_larger_than_its_read_buffer() {
    let tmp = tempfile::tempdir().unwrap();
    let big = |i: u8| vec![i; 200 * 1024];
    let (mut log, _) = open(tmp.path(), options(300 * 1024));
    for i in 0..6u8 {
        log.append(&[&big(i), b"small"]).unwrap();
    }
    drop(log);
    let (_, full) = try_open(tmp.path(), options(300 * 1024)).unwrap();
    let (log, trusted) = open_trusting(tmp.path(), 4).unwrap();
    assert_eq!(log.end(), 12);
    let locations = |r: &Replayed| r.iter().map(|(l, _)| *l).collect::<Vec<_>>();
    assert_eq!(locations(&trusted), locations(&full));
    let heads: Vec<Vec<u8>> = full.iter().map(|(_, p)| p[..4.min(p.len())].to_vec()).collect();
    assert_eq!(trusted.iter().map(|(_, p)| p[..4.min(p.len())].to_vec()).collect::<Vec<_>>(), heads);
}
