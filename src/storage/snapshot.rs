//! Snapshots: the caller's live state at index `base`, written as framed
//! records in `snapshot-{base:020}.snap`, so that recovery replays live state
//! plus the records after `base` instead of the whole history.
//!
//! A snapshot is only trusted when it ends with a trailer frame: a fixed magic
//! followed by the number of records before it. The trailer is the last thing
//! written, so a snapshot that is missing it, or whose count disagrees, was
//! cut short or damaged and is never replayed. The file is also written under
//! a `.tmp` name and renamed only after an fsync, so a crash mid-write leaves
//! a `.tmp` file (deleted at open) rather than a short snapshot.

use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::disk::{Disk, FileSystem, OpenMode, SequentialWriter};
use super::error::LogError;
use super::frame::{frame_header, FrameScanner, Scanned, Stop};
use super::log::{Location, Visitor};
use super::segment::{parse_index, PositionalReader};

const SNAPSHOT_PREFIX: &str = "snapshot-";
const SNAPSHOT_SUFFIX: &str = ".snap";
const TMP_SUFFIX: &str = ".tmp";

/// First 8 bytes of the trailer payload; the other 8 are the record count.
const TRAILER_MAGIC: [u8; 8] = *b"KCSNAP\x00\x01";
const TRAILER_BYTES: usize = 16;

/// Buffers for writing and reading snapshots: large sequential I/O.
const IO_BUFFER: usize = 256 * 1024;

pub(crate) fn snapshot_file_name(base: u64) -> String {
    format!("{SNAPSHOT_PREFIX}{base:020}{SNAPSHOT_SUFFIX}")
}

/// The base of a snapshot file name, or None for any other file.
pub(crate) fn parse_snapshot_file_name(name: &str) -> Option<u64> {
    parse_index(name.strip_prefix(SNAPSHOT_PREFIX)?.strip_suffix(SNAPSHOT_SUFFIX)?)
}

/// Whether `name` is a temporary file that only a crash can have left behind.
pub(crate) fn is_tmp_file_name(name: &str) -> bool {
    name.ends_with(TMP_SUFFIX)
}

fn trailer(count: u64) -> [u8; TRAILER_BYTES] {
    let mut out = [0u8; TRAILER_BYTES];
    let (magic, rest) = out.split_at_mut(TRAILER_MAGIC.len());
    magic.copy_from_slice(&TRAILER_MAGIC);
    rest.copy_from_slice(&count.to_be_bytes());
    out
}

/// The count in a trailer payload, or None if `payload` is not a trailer.
/// Only the last frame of a file is ever interpreted this way, so a user
/// record that happens to look like a trailer is harmless anywhere else.
fn parse_trailer(payload: &[u8]) -> Option<u64> {
    let bytes: &[u8; TRAILER_BYTES] = payload.try_into().ok()?;
    let (magic, count) = bytes.split_at(TRAILER_MAGIC.len());
    if magic != TRAILER_MAGIC {
        return None;
    }
    Some(u64::from_be_bytes(count.try_into().ok()?))
}

/// Permission to write a snapshot at `base`, handed out by
/// [`Log::begin_snapshot`](super::log::Log::begin_snapshot) after it made
/// every record below `base` durable in closed segments. Holds no file
/// handles, so it is cheap to move to a blocking thread.
#[derive(Debug, Clone)]
pub struct SnapshotPlan {
    pub(crate) dir: PathBuf,
    pub(crate) base: u64,
    /// The log's file system.
    pub(crate) fs: Disk,
}

/// A snapshot that is complete and durable on disk, waiting for
/// [`Log::finish_snapshot`](super::log::Log::finish_snapshot) to delete what
/// it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotDone {
    pub(crate) base: u64,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
}

impl SnapshotDone {
    /// The index the snapshot stands at: it replaces every record below it.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Records in the snapshot (the trailer not counted).
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Size of the snapshot file.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl SnapshotPlan {
    /// The index the snapshot will stand at.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Writes `payloads` as the snapshot, then makes it durable and visible:
    /// fsync the `.tmp` file, rename it into place, fsync the directory.
    /// Payloads follow the same rules as [`Log::append`](super::log::Log::append)
    /// (non-empty, at most [`MAX_RECORD_BYTES`](super::frame::MAX_RECORD_BYTES)).
    /// On error the temporary file is removed and nothing else changed.
    pub fn write(self, payloads: &mut dyn Iterator<Item = Vec<u8>>) -> io::Result<SnapshotDone> {
        let tmp = self.dir.join(format!("{}{TMP_SUFFIX}", snapshot_file_name(self.base)));
        let fin = self.dir.join(snapshot_file_name(self.base));
        let fs = &*self.fs;
        match write_file(fs, &tmp, payloads) {
            Ok((records, bytes)) => {
                fs.rename(&tmp, &fin)?;
                fs.sync_dir(&self.dir)?;
                Ok(SnapshotDone { base: self.base, records, bytes })
            }
            Err(err) => {
                // Best effort: a leftover .tmp is deleted at the next open anyway.
                let _ = fs.remove_file(&tmp);
                Err(err)
            }
        }
    }
}

/// Writes and fsyncs the framed payloads plus trailer; returns the record
/// count and file size.
fn write_file(fs: &dyn FileSystem, path: &Path, payloads: &mut dyn Iterator<Item = Vec<u8>>) -> io::Result<(u64, u64)> {
    let file = fs.open(path, OpenMode::Create)?;
    let mut out = BufWriter::with_capacity(IO_BUFFER, SequentialWriter::new(&*file));
    let mut records = 0u64;
    for payload in payloads {
        out.write_all(&frame_header(&payload)?)?;
        out.write_all(&payload)?;
        records += 1;
    }
    let trailer = trailer(records);
    out.write_all(&frame_header(&trailer)?)?;
    out.write_all(&trailer)?;
    out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok((records, file.size()?))
}

/// A snapshot file that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SnapshotMeta {
    pub base: u64,
    pub path: PathBuf,
    pub records: u64,
    pub bytes: u64,
}

/// Why a snapshot file cannot be trusted, and where the damage starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InvalidSnapshot {
    pub offset: u64,
    pub reason: String,
}

/// Checks every CRC and the trailer of `snapshot-{base}.snap` in `dir`,
/// without keeping any payload. The outer error is an I/O failure; the inner
/// one says the file is damaged.
pub(crate) fn validate(
    fs: &dyn FileSystem,
    dir: &Path,
    base: u64,
) -> io::Result<Result<SnapshotMeta, InvalidSnapshot>> {
    let path = dir.join(snapshot_file_name(base));
    let file = fs.open(&path, OpenMode::Read)?;
    let bytes = file.size()?;
    let mut scanner = FrameScanner::new(BufReader::with_capacity(IO_BUFFER, PositionalReader::new(&*file)), bytes);
    let mut frames = 0u64;
    // The trailer count and offset of the most recent frame, if it was one.
    let mut last_trailer: Option<(u64, u64)> = None;
    loop {
        match scanner.next_frame()? {
            Scanned::Record { position, payload, .. } => {
                last_trailer = parse_trailer(payload).filter(|&count| count == frames).map(|count| (count, position));
                frames += 1;
            }
            Scanned::Stop(Stop::End) => {
                return Ok(match last_trailer {
                    Some((records, _)) => Ok(SnapshotMeta { base, path, records, bytes }),
                    None => Err(InvalidSnapshot {
                        offset: bytes,
                        reason: "snapshot has no valid trailer (incomplete or damaged)".to_string(),
                    }),
                });
            }
            Scanned::Stop(stop) => {
                return Ok(Err(InvalidSnapshot {
                    offset: scanner.position(),
                    reason: format!("snapshot damaged: {}", stop.describe()),
                }));
            }
        }
    }
}

/// Replays a validated snapshot's records. They stand for the state before
/// `meta.base`, so each is reported at index `meta.base` with `segment_base`
/// `u64::MAX` (see [`Location`]). The file is read again rather than kept in
/// memory from validation, so memory stays bounded by one record; if it
/// changed in between, that is reported as corruption.
pub(crate) fn replay(fs: &dyn FileSystem, meta: &SnapshotMeta, visit: &mut Visitor<'_>) -> Result<(), LogError> {
    let file = fs.open(&meta.path, OpenMode::Read).map_err(LogError::io(&meta.path))?;
    let mut scanner = FrameScanner::new(BufReader::with_capacity(IO_BUFFER, PositionalReader::new(&*file)), meta.bytes);
    for _ in 0..meta.records {
        match scanner.next_frame().map_err(LogError::io(&meta.path))? {
            Scanned::Record { position, payload, .. } => {
                let location = Location {
                    index: meta.base,
                    segment_base: u64::MAX,
                    position,
                    payload_len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
                };
                visit(location, payload).map_err(LogError::Visit)?;
            }
            Scanned::Stop(stop) => {
                return Err(LogError::Corrupt {
                    file: meta.path.clone(),
                    offset: scanner.position(),
                    reason: format!("snapshot changed while being read: {}", stop.describe()),
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::frame::encode_frame;

    use crate::storage::disk::{os, OsFs};

    fn plan(dir: &Path, base: u64) -> SnapshotPlan {
        SnapshotPlan { dir: dir.to_path_buf(), base, fs: os() }
    }

    fn read_back(dir: &Path, base: u64) -> Vec<(Location, Vec<u8>)> {
        let meta = validate(&OsFs, dir, base).unwrap().unwrap();
        let mut seen = Vec::new();
        replay(&OsFs, &meta, &mut |loc, p| {
            seen.push((loc, p.to_vec()));
            Ok(())
        })
        .unwrap();
        seen
    }

    #[test]
    fn snapshot_names_parse_back_and_reject_others() {
        assert_eq!(snapshot_file_name(7), "snapshot-00000000000000000007.snap");
        assert_eq!(parse_snapshot_file_name(&snapshot_file_name(7)), Some(7));
        assert_eq!(parse_snapshot_file_name("snapshot-7.snap"), None);
        assert_eq!(parse_snapshot_file_name("snapshot-00000000000000000007.snap.tmp"), None);
        assert!(is_tmp_file_name("snapshot-00000000000000000007.snap.tmp"));
    }

    #[test]
    fn written_snapshot_replays_its_records_at_its_base() {
        let dir = tempfile::tempdir().unwrap();
        let done = plan(dir.path(), 5).write(&mut vec![b"a".to_vec(), b"bc".to_vec()].into_iter()).unwrap();
        assert_eq!((done.base(), done.records()), (5, 2));
        assert_eq!(done.bytes(), 9 + 10 + 8 + 16);
        assert!(!dir.path().join("snapshot-00000000000000000005.snap.tmp").exists());
        let seen = read_back(dir.path(), 5);
        let payloads: Vec<&[u8]> = seen.iter().map(|(_, p)| p.as_slice()).collect();
        assert_eq!(payloads, vec![&b"a"[..], b"bc"]);
        assert!(seen.iter().all(|(l, _)| l.index == 5 && l.segment_base == u64::MAX));
        assert_eq!(seen[1].0.position, 9);
    }

    #[test]
    fn empty_snapshot_is_valid() {
        let dir = tempfile::tempdir().unwrap();
        plan(dir.path(), 0).write(&mut std::iter::empty()).unwrap();
        assert!(read_back(dir.path(), 0).is_empty());
    }

    #[test]
    fn user_records_that_look_like_trailers_are_just_records() {
        let dir = tempfile::tempdir().unwrap();
        let fake = trailer(0).to_vec();
        plan(dir.path(), 3).write(&mut vec![fake.clone(), fake.clone()].into_iter()).unwrap();
        let seen = read_back(dir.path(), 3);
        assert_eq!(seen.len(), 2);
        assert!(seen.iter().all(|(_, p)| *p == fake));
    }

    #[test]
    fn snapshot_without_trailer_is_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        encode_frame(&mut bytes, b"state").unwrap();
        std::fs::write(dir.path().join(snapshot_file_name(1)), &bytes).unwrap();
        let invalid = validate(&OsFs, dir.path(), 1).unwrap().unwrap_err();
        assert!(invalid.reason.contains("trailer"), "{}", invalid.reason);
    }

    #[test]
    fn trailer_with_the_wrong_count_is_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        encode_frame(&mut bytes, b"state").unwrap();
        encode_frame(&mut bytes, &trailer(2)).unwrap();
        std::fs::write(dir.path().join(snapshot_file_name(1)), &bytes).unwrap();
        assert!(validate(&OsFs, dir.path(), 1).unwrap().is_err());
    }

    #[test]
    fn damaged_snapshot_is_invalid_at_the_damaged_frame() {
        let dir = tempfile::tempdir().unwrap();
        plan(dir.path(), 2).write(&mut vec![b"one".to_vec(), b"two".to_vec()].into_iter()).unwrap();
        let path = dir.path().join(snapshot_file_name(2));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[12] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let invalid = validate(&OsFs, dir.path(), 2).unwrap().unwrap_err();
        assert_eq!(invalid.offset, 11);
    }

    #[test]
    fn empty_payload_fails_the_write_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = plan(dir.path(), 0).write(&mut vec![b"ok".to_vec(), Vec::new()].into_iter()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
