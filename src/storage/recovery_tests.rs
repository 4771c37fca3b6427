//! What opening does with damage: torn tails are truncated, anything else is
//! refused with a precise error, or truncated there when repairing.

use std::path::Path;

use super::error::LogError;
use super::test_util::*;

/// Bytes of one `record(i)` frame: 8 header + 11 payload.
const FRAME: u64 = 19;

/// A log of `n` records, `per_segment` records per segment.
fn log_with(dir: &Path, n: u64, per_segment: u64) {
    let (mut log, _) = open(dir, options(per_segment * FRAME));
    append_records(&mut log, 0..n);
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
    log_with(tmp.path(), 3, 100);
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
    log_with(tmp.path(), 3, 100);
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
    log_with(tmp.path(), 3, 100);
    patch(&segment_path(tmp.path(), 0), FRAME as usize, &[0u8; 8]);
    let (_, offset, reason) = corrupt_at(try_open(tmp.path(), options(100 * FRAME)).unwrap_err());
    assert_eq!(offset, FRAME);
    assert!(reason.contains("zero length"), "{reason}");
}

#[test]
fn length_beyond_the_maximum_is_corruption_even_at_the_tail() {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 2, 100);
    patch(&segment_path(tmp.path(), 0), FRAME as usize, &u32::MAX.to_be_bytes());
    let (_, offset, reason) = corrupt_at(try_open(tmp.path(), options(100 * FRAME)).unwrap_err());
    assert_eq!(offset, FRAME);
    assert!(reason.contains("exceeds"), "{reason}");
}

#[test]
fn a_damaged_length_field_before_fsynced_records_stops_the_open_instead_of_dropping_them() {
    let tmp = tempfile::tempdir().unwrap();
    log_with(tmp.path(), 3, 100);
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
    log_with(tmp.path(), 3, 100);
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
