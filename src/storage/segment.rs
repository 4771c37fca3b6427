//! One segment file: `{base:020}.log`, the records from index `base` on.
//!
//! Naming a segment after the index of its first record lets recovery check
//! that segments are contiguous and lets retention drop history by deleting
//! whole files, without any separate index that could disagree with them.

use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use super::disk::{DiskFile, FileHandle, FileSystem, OpenMode};
use super::error::LogError;
use super::frame::{FrameScanner, Scanned, Stop, CONTINUES, HEADER_BYTES, MAX_RECORD_BYTES};
use super::handles::{FileCache, FileRef};
use super::log::{Location, Visitor};

const SEGMENT_SUFFIX: &str = ".log";

/// Width of the zero-padded index in file names: enough for any u64, so that
/// names sort in index order.
pub(crate) const INDEX_DIGITS: usize = 20;

/// Read buffer for replay: big enough to make sequential reads cheap, small
/// enough not to matter per open log.
const REPLAY_BUFFER: usize = 64 * 1024;

pub(crate) fn segment_file_name(base: u64) -> String {
    format!("{base:020}{SEGMENT_SUFFIX}")
}

/// The base of a segment file name, or None for any other file.
pub(crate) fn parse_segment_file_name(name: &str) -> Option<u64> {
    parse_index(name.strip_suffix(SEGMENT_SUFFIX)?)
}

/// Parses exactly [`INDEX_DIGITS`] ASCII digits, so that stray files such as
/// `12.log` or `+0000000000000000001.log` are never mistaken for segments.
pub(crate) fn parse_index(digits: &str) -> Option<u64> {
    if digits.len() != INDEX_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Milliseconds since the Unix epoch, 0 for times before it.
pub(crate) fn millis_since_epoch(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

/// A segment file and what we know about it.
#[derive(Debug)]
pub(crate) struct Segment {
    pub base: u64,
    pub path: PathBuf,
    /// The file, held open or reached through a bounded cache (partition
    /// logs, see `handles`). Cloned into a [`SyncJob`](super::log::SyncJob)
    /// so that the file can be fsynced on another thread while appends
    /// continue.
    pub handle: FileRef,
    /// Bytes of complete records; appends write at this offset.
    pub bytes: u64,
    /// Kept in memory (set from the file at open, bumped on append) so that
    /// listing segments for retention never fails half-way.
    pub modified_ms: u64,
}

impl Segment {
    /// Opens an existing segment file on `fs` for reading and appending,
    /// through `files` if given.
    pub fn open(fs: &dyn FileSystem, dir: &Path, base: u64, files: Option<&Arc<FileCache>>) -> io::Result<Segment> {
        let path = dir.join(segment_file_name(base));
        let file = match files {
            Some(cache) => cache.open(&path, false)?,
            None => fs.open(&path, OpenMode::ReadWrite)?,
        };
        let bytes = file.size()?;
        let modified_ms = file.modified_ms()?;
        let handle = Self::handle(&path, file, files);
        Ok(Segment { base, path, handle, bytes, modified_ms })
    }

    /// Creates an empty segment file, replacing any leftover file of the same
    /// name (only ever an empty one from a roll that failed half-way). The
    /// caller fsyncs the directory.
    pub fn create(fs: &dyn FileSystem, dir: &Path, base: u64, files: Option<&Arc<FileCache>>) -> io::Result<Segment> {
        let path = dir.join(segment_file_name(base));
        let file = match files {
            Some(cache) => cache.open(&path, true)?,
            None => fs.open(&path, OpenMode::Create)?,
        };
        let handle = Self::handle(&path, file, files);
        Ok(Segment { base, path, handle, bytes: 0, modified_ms: millis_since_epoch(SystemTime::now()) })
    }

    fn handle(path: &Path, file: FileHandle, files: Option<&Arc<FileCache>>) -> FileRef {
        match files {
            Some(cache) => cache.adopt(path.to_path_buf(), file).0,
            None => FileRef::Pinned(file),
        }
    }

    /// The open file (reopened if the cache had closed it).
    pub fn file(&self) -> io::Result<FileHandle> {
        self.handle.file()
    }

    /// Cuts the file at `len` and makes the cut durable before anything is
    /// appended after it.
    pub fn truncate(&mut self, len: u64) -> io::Result<()> {
        let file = self.file()?;
        file.set_len(len)?;
        file.sync_all()?;
        self.bytes = len;
        Ok(())
    }

    /// Reads every record, numbering them from `self.base`, and calls `visit`
    /// for each. Returns the number of records and why the scan stopped; the
    /// caller decides whether a stop other than [`Stop::End`] is a torn tail
    /// or corruption, because that depends on where the segment sits.
    ///
    /// Records of a multi-record write (see [`frame::CONTINUES`]) are held
    /// back until its last frame is read, so a write cut short by a crash is
    /// never visited in part: the scan then stops at the write's first frame,
    /// with [`Stop::UnfinishedWrite`] if the data simply ended there. The
    /// held records are copies, bounded by what one append wrote.
    ///
    /// [`frame::CONTINUES`]: super::frame::CONTINUES
    pub fn replay(&self, visit: &mut Visitor<'_>) -> Result<SegmentScan, LogError> {
        let file = self.file().map_err(LogError::io(&self.path))?;
        let reader = BufReader::with_capacity(REPLAY_BUFFER, PositionalReader::new(&*file));
        let mut scanner = FrameScanner::new(reader, self.bytes);
        let mut records = 0u64;
        let mut unfinished: Vec<(Location, Vec<u8>)> = Vec::new();
        loop {
            match scanner.next_frame().map_err(LogError::io(&self.path))? {
                Scanned::Record { position, payload, continues } => {
                    let location = Location {
                        index: self.base.saturating_add(records).saturating_add(unfinished.len() as u64),
                        segment_base: self.base,
                        position,
                        // The scanner never yields more than MAX_RECORD_BYTES.
                        payload_len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
                    };
                    if continues {
                        unfinished.push((location, payload.to_vec()));
                        continue;
                    }
                    for (held, bytes) in unfinished.drain(..) {
                        visit(held, &bytes).map_err(LogError::Visit)?;
                        records += 1;
                    }
                    visit(location, payload).map_err(LogError::Visit)?;
                    records += 1;
                }
                Scanned::Stop(stop) => {
                    let Some((first, _)) = unfinished.first() else {
                        return Ok(SegmentScan { records, stop, stop_offset: scanner.position() });
                    };
                    let stop = if stop == Stop::End { Stop::UnfinishedWrite } else { stop };
                    return Ok(SegmentScan { records, stop, stop_offset: first.position });
                }
            }
        }
    }
}

impl Segment {
    /// Replays a closed segment from its frame headers: each record's
    /// location and the first `prefix` bytes of its payload (all of it if
    /// shorter), skipping the rest of the payload and its CRC check. Only for
    /// segments that were fsynced when they were closed (every roll does
    /// that): they cannot hold a torn write, so like Kafka below its
    /// recovery point there is nothing to recover, and reading every byte
    /// only to check CRCs would make start-up cost grow with all stored data.
    ///
    /// Any frame header that does not fit (a length of 0 or above the
    /// maximum, a frame running past the end) is reported as
    /// [`LogError::Corrupt`] without judging it further; the caller then
    /// rescans with [`Segment::replay`], which classifies the damage.
    pub fn replay_headers(&self, prefix: usize, visit: &mut Visitor<'_>) -> Result<u64, LogError> {
        let file = self.file().map_err(LogError::io(&self.path))?;
        let mut reader = BufReader::with_capacity(REPLAY_BUFFER, PositionalReader::new(&*file));
        let mut head = vec![0u8; prefix];
        let mut position = 0u64;
        let mut records = 0u64;
        let corrupt = |offset: u64, reason: String| LogError::Corrupt { file: self.path.clone(), offset, reason };
        let mut continues = false;
        while position < self.bytes {
            let remaining = self.bytes - position;
            if remaining < HEADER_BYTES as u64 {
                return Err(corrupt(position, "a frame header runs past the end of a closed segment".into()));
            }
            let mut header = [0u8; HEADER_BYTES];
            reader.read_exact(&mut header).map_err(LogError::io(&self.path))?;
            let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
            continues = len & CONTINUES != 0;
            let len = len & !CONTINUES;
            let len_usize = len as usize;
            if len == 0 || len_usize > MAX_RECORD_BYTES || u64::from(len) > remaining - HEADER_BYTES as u64 {
                return Err(corrupt(position, format!("length field {len} does not fit the closed segment")));
            }
            let take = len_usize.min(prefix);
            let head = head.get_mut(..take).unwrap_or_default();
            reader.read_exact(head).map_err(LogError::io(&self.path))?;
            reader.seek_relative((len_usize - take) as i64).map_err(LogError::io(&self.path))?;
            let location = Location {
                index: self.base.saturating_add(records),
                segment_base: self.base,
                position,
                payload_len: len,
            };
            visit(location, head).map_err(LogError::Visit)?;
            records += 1;
            position += HEADER_BYTES as u64 + u64::from(len);
        }
        if continues {
            // Appends never span segments, and a closed segment was synced
            // whole: an unfinished write here is damage, not a crash.
            return Err(corrupt(position, Stop::UnfinishedWrite.describe()));
        }
        Ok(records)
    }
}

/// A segment that goes away (deleted, or its log closed) gives its cache
/// slot back.
impl Drop for Segment {
    fn drop(&mut self) {
        self.handle.release();
    }
}

/// The result of replaying one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentScan {
    pub records: u64,
    pub stop: Stop,
    /// Offset of the frame that stopped the scan (the file size at a clean end).
    pub stop_offset: u64,
}

/// Reads a file with `pread`, so that scanning never depends on (or moves) the
/// shared file cursor.
pub(crate) struct PositionalReader<'a> {
    file: &'a dyn DiskFile,
    offset: u64,
}

impl<'a> PositionalReader<'a> {
    pub fn new(file: &'a dyn DiskFile) -> PositionalReader<'a> {
        PositionalReader { file, offset: 0 }
    }
}

impl Read for PositionalReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }
}

/// Moving the position is all seeking does (reads are positional), so
/// skipping a payload costs nothing; seeking from the end is not needed.
impl Seek for PositionalReader<'_> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let to = match pos {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => self.offset.checked_add_signed(d),
            SeekFrom::End(_) => None,
        };
        self.offset = to.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "unsupported seek"))?;
        Ok(self.offset)
    }
}

/// Bytes a record of `payload_len` occupies in a segment.
pub(crate) fn frame_bytes(payload_len: usize) -> u64 {
    (HEADER_BYTES + payload_len) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_are_zero_padded_and_parse_back() {
        assert_eq!(segment_file_name(42), "00000000000000000042.log");
        assert_eq!(parse_segment_file_name(&segment_file_name(42)), Some(42));
        assert_eq!(parse_segment_file_name(&segment_file_name(u64::MAX)), Some(u64::MAX));
    }

    #[test]
    fn other_file_names_are_not_segments() {
        for name in [
            "42.log",
            "0000000000000000004x.log",
            "00000000000000000042.log.tmp",
            "00000000000000000042.snap",
            "99999999999999999999.log",
            "+0000000000000000042.log",
            ".log",
        ] {
            assert_eq!(parse_segment_file_name(name), None, "{name}");
        }
    }

    #[test]
    fn names_sort_in_index_order() {
        let mut names: Vec<String> = [100u64, 9, 10_000, 0].iter().map(|&b| segment_file_name(b)).collect();
        names.sort();
        let bases: Vec<u64> = names.iter().filter_map(|n| parse_segment_file_name(n)).collect();
        assert_eq!(bases, vec![0, 9, 100, 10_000]);
    }
}
