//! The segmented append-only log.
//!
//! Records get a dense 0-based index across the whole log. They are appended
//! to the active (last) segment; full segments are closed (fsynced) and never
//! written again, so that only the active segment can ever hold a torn write
//! and only it needs fsyncing for group commit. History is dropped either by
//! deleting whole old segments (retention, for partition logs) or by writing
//! a snapshot of the caller's live state (compaction, for the coordinator).
//!
//! The log never decides *when* to fsync: the caller does, through
//! [`Log::sync_job`] (group commit on a blocking thread) or [`Log::sync`].

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use super::disk::{self, remove_if_present, Disk, DiskFile, FileHandle, OpenMode};
use super::error::LogError;
use super::frame::{check_payload_len, encode_frame_of_write};
use super::handles::{FileCache, FileRef};
use super::journal::JournalWrite;
use super::manifest::{self, Manifest};
use super::recovery::recover;
use super::segment::{frame_bytes, millis_since_epoch, Segment};
use super::snapshot::{parse_snapshot_file_name, SnapshotDone, SnapshotPlan};

/// How a [`Log`] is run.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// Once the active segment holds this many bytes, the next append starts
    /// a new one. A single batch is never split, so a segment can exceed it.
    pub segment_bytes: u64,
    /// Truncate at corruption instead of refusing to open (`--repair`).
    pub repair: bool,
    /// Where segment files are kept open: None holds every segment's file
    /// open (a fixed number of logs, such as the coordinator's shards); a
    /// cache shared by many logs (partition logs) bounds the descriptors
    /// they use together, see `handles`.
    pub files: Option<Arc<FileCache>>,
    /// The file system the log lives on: the real one, or a simulated disk
    /// in tests (see `disk` and `simdisk`). A `files` cache must open its
    /// files on the same one.
    pub fs: Disk,
    /// Whether the log's appends are made durable by the node's journal
    /// ([`Log::journal_write`], see `journal`) rather than by fsyncs of its
    /// own segment ([`Log::sync_job`]).
    pub journaled: bool,
    /// Whether appends wait in memory until [`Log::write_appended`] writes
    /// them with one write (a coordinator shard's batch), instead of each
    /// append writing its own; journaled logs always do. The owner holds
    /// every answer that depends on them until then, and stops if that
    /// write fails: the records already count as appended.
    pub batched_writes: bool,
}

impl LogOptions {
    /// Options with every segment file held open, on the real file system.
    pub fn new(segment_bytes: u64, repair: bool) -> LogOptions {
        LogOptions { segment_bytes, repair, files: None, fs: disk::os(), journaled: false, batched_writes: false }
    }
}

impl Default for LogOptions {
    fn default() -> LogOptions {
        LogOptions::new(64 * 1024 * 1024, false)
    }
}

/// The file [`Log::sync_and_mark_clean`] writes: the active segment's base
/// and size after its last fsync. Opening removes it.
pub(crate) const CLEAN_MARKER: &str = "clean-shutdown";

/// The recovery point moves every `segment_bytes / RECOVERY_POINT_STRIDE`
/// bytes appended and synced (see [`Log::mark_synced`]).
pub const RECOVERY_POINT_STRIDE: u64 = 8;

/// How [`Log::open_with`] replays the segments before the active one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Every byte of every segment, CRCs checked (what [`Log::open`] does).
    Full,
    /// Closed segments from their frame headers alone: the visitor gets the
    /// first `prefix` bytes of each payload (with the full length in
    /// [`Location::payload_len`]) and no CRC is checked. The active segment,
    /// the only one a crash can tear, is still scanned in full, unless
    /// [`Log::sync_and_mark_clean`] recorded its size and it still has
    /// exactly that size (then nothing was written after that fsync). For
    /// callers that index records and need only a header of each (partition
    /// logs).
    TrustClosed { prefix: usize },
}

/// The replay callback of [`Log::open`]: receives each record's location and
/// payload; an `Err` aborts opening with [`LogError::Visit`].
pub type Visitor<'a> = dyn FnMut(Location, &[u8]) -> Result<(), String> + 'a;

/// Where a record is stored, for callers that index records themselves
/// (partition logs serving Fetch with [`Log::read_at`]).
///
/// Records replayed from a snapshot are different: a snapshot stands for the
/// state *before* its base, not for particular records of history, so all of
/// its records are reported with `index` = the snapshot's base and
/// `segment_base` = [`Location::SNAPSHOT`] (`u64::MAX`); their `position` is
/// the frame's offset in the snapshot file and they cannot be read back with
/// [`Log::read_at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub index: u64,
    pub segment_base: u64,
    /// Byte offset of the frame header in the segment file.
    pub position: u64,
    pub payload_len: u32,
}

impl Location {
    /// The `segment_base` of records replayed from a snapshot.
    pub const SNAPSHOT: u64 = u64::MAX;

    /// Whether this record came from a snapshot rather than a segment.
    pub fn is_snapshot(&self) -> bool {
        self.segment_base == Location::SNAPSHOT
    }

    /// Bytes of the whole frame (header + payload), what [`Log::read_at`]
    /// needs to return a record as stored.
    pub fn frame_len(&self) -> usize {
        super::frame::HEADER_BYTES + self.payload_len as usize
    }
}

/// One segment, for retention decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Index of the segment's first record.
    pub base: u64,
    pub bytes: u64,
    /// Last modification, in milliseconds since the Unix epoch.
    pub modified_ms: u64,
}

/// An fsync of everything appended up to `end`, detached from the log so that
/// it can run on a blocking thread while appends continue (group commit).
#[derive(Debug, Clone)]
pub struct SyncJob {
    file: FileRef,
    /// The file as it was open when the job was made (the append just
    /// used it, so it is open unless the cache failed to reopen it): holding
    /// it means the fsync itself never needs a descriptor.
    open: Option<FileHandle>,
    end: u64,
}

impl SyncJob {
    /// The index up to which (exclusive) this job makes records durable.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// fdatasyncs the active segment and returns [`SyncJob::end`], to be
    /// passed to [`Log::mark_synced`]. After an error the kernel may have
    /// dropped the unwritten pages, so the records must not be treated as
    /// durable (and retrying the fsync does not prove they are).
    pub fn run(self) -> io::Result<u64> {
        match self.open {
            Some(file) => file.sync_data()?,
            None => self.file.file()?.sync_data()?,
        }
        Ok(self.end)
    }
}

/// A segment's file and its size at one moment, to read records without
/// holding the [`Log`] (partition fetches copy batches outside the partition
/// lock). Reading is safe because the bytes of records already appended are
/// never rewritten: a segment only grows, a failed append cuts back only
/// what it added itself, and an open file stays readable even after
/// retention or topic deletion removes its name.
#[derive(Debug, Clone)]
pub struct SegmentReader {
    file: FileHandle,
    path: PathBuf,
    /// Bytes of complete records when the reader was taken.
    bytes: u64,
}

impl SegmentReader {
    /// Reads `len` bytes at `position`; fails if the range goes past the
    /// records the segment held when the reader was taken.
    pub fn read_at(&self, position: u64, len: usize) -> io::Result<Vec<u8>> {
        let in_range = position.checked_add(len as u64).is_some_and(|end| end <= self.bytes);
        if !in_range {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "reading {len} bytes at {position} goes past the {} bytes of {}",
                    self.bytes,
                    self.path.display()
                ),
            ));
        }
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }
}

/// What we know about the newest snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SnapshotState {
    base: u64,
    bytes: u64,
}

/// A segmented append-only log in one directory. See the module docs.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    options: LogOptions,
    /// Sorted by base, contiguous, never empty; the last one is active.
    segments: Vec<Segment>,
    end: u64,
    /// Records below this index are in the log's own files, fsynced.
    synced: u64,
    /// Records below this index are durable in the node's journal.
    journaled: u64,
    /// What this log appended since it last handed bytes to the journal
    /// (journaled logs) or wrote them ([`LogOptions::batched_writes`]), not
    /// yet written to the segment.
    pending: Option<Pending>,
    /// The end the journal's checkpoints fsynced in the log's own files.
    own_synced: Arc<AtomicU64>,
    /// The directory, shared with journal writes.
    shared_dir: Arc<Path>,
    /// The recovery point the manifest records.
    recovery_point: u64,
    /// The active segment's size when the manifest last recorded the
    /// durable end (the recovery point): see [`Log::mark_synced`].
    recovery_point_bytes: u64,
    snapshot: Option<SnapshotState>,
    /// Set when a failed append could not be undone: the active segment may
    /// end in garbage, so appending after it would bury good records behind
    /// a frame that recovery rejects.
    poisoned: Option<String>,
    /// The last append's framing buffer, reused by the next one (up to
    /// [`KEPT_FRAMING_BYTES`]): most appends are a record or two.
    framing: Vec<u8>,
    /// The bytes of the last pending batch once written, reused for the
    /// next batch (up to [`KEPT_FRAMING_BYTES`]): a batched log used to
    /// allocate each batch's buffer and grow it append by append.
    spare_pending: Vec<u8>,
}

/// A journaled or batched log's appends since it last handed bytes to the
/// journal or wrote them: contiguous in the active segment, and not written
/// to it yet (one write per batch instead of one per append; see
/// `flush_pending`).
#[derive(Debug)]
struct Pending {
    segment_base: u64,
    position: u64,
    bytes: Vec<u8>,
    records: u64,
}

/// The largest framing buffer a log keeps between appends.
const KEPT_FRAMING_BYTES: usize = 64 * 1024;

/// Writes framed bytes at an offset of the active segment; replaced in tests
/// to inject write failures.
type WriteAt<'a> = &'a mut dyn FnMut(&dyn DiskFile, &[u8], u64) -> io::Result<()>;

impl Log {
    /// Opens (creating the directory and first segment if needed) and
    /// replays: first the newest valid snapshot, then every segment from the
    /// snapshot's base on, calling `visit(location, payload)` for each record
    /// in index order. `visit` may return `Err` to abort opening
    /// ([`LogError::Visit`]). See `recovery.rs` for what is repaired and what
    /// is refused.
    pub fn open(dir: &Path, options: LogOptions, visit: &mut Visitor<'_>) -> Result<Log, LogError> {
        Self::open_with(dir, options, Replay::Full, visit)
    }

    /// [`Log::open`] with a choice of how closed segments are replayed. With
    /// [`Replay::TrustClosed`], damage in a closed segment's frame headers is
    /// reported as [`LogError::Corrupt`] before anything is repaired; the
    /// caller should then open again with [`Replay::Full`] (which refuses or,
    /// with `repair`, truncates), having discarded what it was visited.
    pub fn open_with(
        dir: &Path,
        options: LogOptions,
        replay: Replay,
        visit: &mut Visitor<'_>,
    ) -> Result<Log, LogError> {
        let recovered = recover(dir, &options, replay, visit)?;
        Ok(Log {
            dir: dir.to_path_buf(),
            options,
            recovery_point_bytes: recovered.segments.last().map_or(0, |s| s.bytes),
            segments: recovered.segments,
            end: recovered.end,
            synced: recovered.end,
            journaled: recovered.end,
            pending: None,
            own_synced: Arc::new(AtomicU64::new(recovered.end)),
            shared_dir: Arc::from(dir),
            recovery_point: recovered.end,
            snapshot: recovered.snapshot.map(|m| SnapshotState { base: m.base, bytes: m.bytes }),
            poisoned: None,
            framing: Vec::new(),
            spare_pending: Vec::new(),
        })
    }

    /// The file system this log lives on.
    pub fn disk(&self) -> &Disk {
        &self.options.fs
    }

    /// Whether the node's journal makes this log's appends durable.
    pub fn is_journaled(&self) -> bool {
        self.options.journaled
    }

    /// The directory this log lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends records with one write to the active segment (rolling first if
    /// it is full) and returns where each went. Payloads must be non-empty and
    /// at most [`MAX_RECORD_BYTES`](super::frame::MAX_RECORD_BYTES). If the
    /// write fails (e.g. ENOSPC) the file is cut back to its previous length,
    /// so the log is exactly as before; if even that fails, the log refuses
    /// every later append. The records of one call survive a crash together
    /// or not at all (see [`CONTINUES`](super::frame::CONTINUES)).
    pub fn append(&mut self, payloads: &[&[u8]]) -> io::Result<Vec<Location>> {
        let mut locations = Vec::with_capacity(payloads.len());
        self.append_with(payloads, &mut |file, bytes, offset| file.write_all_at(bytes, offset), Some(&mut locations))?;
        Ok(locations)
    }

    /// [`Log::append`] for a caller that does not read its records back by
    /// location (a coordinator shard replays what it wrote from memory):
    /// no vector of locations per write.
    pub fn append_unlocated(&mut self, payloads: &[&[u8]]) -> io::Result<()> {
        self.append_with(payloads, &mut |file, bytes, offset| file.write_all_at(bytes, offset), None)
    }

    fn append_with(
        &mut self,
        payloads: &[&[u8]],
        write: WriteAt<'_>,
        mut locations: Option<&mut Vec<Location>>,
    ) -> io::Result<()> {
        self.check_not_poisoned()?;
        if payloads.is_empty() {
            return Ok(());
        }
        let mut total = 0usize;
        for payload in payloads {
            check_payload_len(payload.len())?;
            total = total.saturating_add(frame_bytes(payload.len()) as usize);
        }
        if self.active()?.bytes >= self.options.segment_bytes.max(1) {
            self.roll()?;
        }
        let first_index = self.end;
        let active = active_mut(&mut self.segments)?;
        let file = active.file()?;
        let before = active.bytes;
        let mut framed = std::mem::take(&mut self.framing);
        framed.clear();
        framed.reserve(total);
        let last = first_index + payloads.len() as u64 - 1;
        for (index, payload) in (first_index..).zip(payloads) {
            if let Some(locations) = locations.as_mut() {
                locations.push(Location {
                    index,
                    segment_base: active.base,
                    position: before + framed.len() as u64,
                    // check_payload_len bounds it by MAX_RECORD_BYTES < u32::MAX.
                    payload_len: payload.len() as u32,
                });
            }
            // Marked so that recovery keeps the records of this write
            // together or drops them together.
            encode_frame_of_write(&mut framed, payload, index != last)?;
        }
        // A journaled log writes a batch's appends with one write when it
        // hands them to the journal, a batched one when its owner asks
        // (`flush_pending`).
        let batched = self.options.journaled || self.options.batched_writes;
        let written = if batched { Ok(()) } else { write(&*file, &framed, before) };
        if let Err(err) = written {
            // Cut off whatever part of the batch reached the file, durably, so
            // that a failed batch can never reappear after a crash.
            let undo = file.set_len(before).and_then(|()| file.sync_data());
            if let Err(undo_err) = undo {
                let reason = format!(
                    "appending to {} failed ({err}) and truncating it back to {before} bytes also failed ({undo_err})",
                    active.path.display()
                );
                return Err(self.poison(err.kind(), reason));
            }
            return Err(err);
        }
        active.bytes = before + framed.len() as u64;
        self.end = first_index + payloads.len() as u64;
        if batched {
            match &mut self.pending {
                // The batch's first append set the segment's time: the rest
                // follow within the batch, and reading the clock for each
                // cost more than the append's own bookkeeping.
                Some(p) if p.segment_base == active.base && p.position + p.bytes.len() as u64 == before => {
                    p.bytes.extend_from_slice(&framed);
                    p.records += payloads.len() as u64;
                }
                pending => {
                    let records = payloads.len() as u64;
                    active.modified_ms = millis_since_epoch(SystemTime::now());
                    let mut bytes = std::mem::take(&mut self.spare_pending);
                    bytes.clear();
                    bytes.extend_from_slice(&framed);
                    *pending = Some(Pending { segment_base: active.base, position: before, bytes, records });
                }
            }
        } else {
            active.modified_ms = millis_since_epoch(SystemTime::now());
        }
        if framed.capacity() <= KEPT_FRAMING_BYTES {
            self.framing = framed;
        }
        Ok(())
    }

    /// Closes the active segment and starts a new one at `end`. The old one
    /// is fsynced (with the directory) first, so that a closed segment is
    /// always durable and never needs syncing again.
    ///
    /// A failed fsync here poisons the log. Retrying it would prove nothing
    /// (the kernel may have dropped the pages it could not write, and the
    /// next fsync then succeeds). And once the new segment file exists, the
    /// log must not go on appending to the old one: the file, named after
    /// the index the roll began at, would then sit in the middle of records
    /// the old segment holds, and the next open would refuse the log as
    /// damaged (found by the simulated-disk tests: a compaction's roll whose
    /// directory fsync failed, followed by more appends).
    fn roll(&mut self) -> io::Result<()> {
        self.flush_pending()?;
        let closed = self.active()?.file()?.sync_data().and_then(|()| self.options.fs.sync_dir(&self.dir));
        if let Err(e) = closed {
            return Err(self.poison(e.kind(), format!("fsyncing the segment closed by a roll failed ({e})")));
        }
        self.synced = self.end;
        // The closed segment is durable on its own now.
        self.drop_pending();
        let segment = Segment::create(&*self.options.fs, &self.dir, self.end, self.options.files.as_ref())?;
        if let Err(e) = self.options.fs.sync_dir(&self.dir) {
            let reason = format!("fsyncing the directory after creating {} failed ({e})", segment.path.display());
            return Err(self.poison(e.kind(), reason));
        }
        self.segments.push(segment);
        // Before anything is appended to it, so that its loss is noticed.
        self.record_manifest(0)
    }

    /// Rewrites the manifest for the segments from `first` (an index into
    /// `segments`) on and the current snapshot.
    fn record_manifest(&mut self, first: usize) -> io::Result<()> {
        self.record_manifest_with(first, self.snapshot.map(|s| s.base))
    }

    fn record_manifest_with(&mut self, first: usize, snapshot: Option<u64>) -> io::Result<()> {
        let segments = self.segments.get(first..).unwrap_or_default().iter().map(|s| s.base).collect();
        manifest::write(&*self.options.fs, &self.dir, &Manifest::new(snapshot, segments, self.synced))?;
        self.recovery_point = self.synced;
        self.recovery_point_bytes = self.segments.last().map_or(0, |s| s.bytes);
        Ok(())
    }

    /// Closes the active segment and starts an empty one at [`Log::end`],
    /// unless the active segment is empty already; returns whether it rolled.
    /// Partition logs roll by time (`segment.ms`) and before retention
    /// deletes every segment that holds data, as Kafka does.
    pub fn roll_active(&mut self) -> io::Result<bool> {
        self.check_not_poisoned()?;
        if self.active()?.bytes == 0 {
            return Ok(false);
        }
        self.roll()?;
        Ok(true)
    }

    /// Base index of the active segment.
    pub fn active_base(&self) -> u64 {
        self.segments.last().map_or(self.end, |s| s.base)
    }

    /// Index of the next record to be appended.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Index of the first record still stored in a segment; moves forward
    /// with snapshots and retention.
    pub fn start(&self) -> u64 {
        self.segments.first().map_or(self.end, |s| s.base)
    }

    /// Every record with an index below this is known to be durable: in the
    /// log's own files or, for a journaled log, in the journal.
    pub fn synced(&self) -> u64 {
        self.synced.max(self.journaled)
    }

    /// A job that fsyncs everything appended so far, or None if nothing is
    /// unsynced. Syncing the active segment is enough because rolling already
    /// fsynced every closed one.
    pub fn sync_job(&self) -> Option<SyncJob> {
        if self.synced >= self.end {
            return None;
        }
        self.own_sync_job()
    }

    fn own_sync_job(&self) -> Option<SyncJob> {
        let active = self.segments.last()?;
        Some(SyncJob { file: active.handle.clone(), open: active.file().ok(), end: self.end })
    }

    /// For a log with [`LogOptions::batched_writes`]: writes what was
    /// appended since the last call, with one write. A failed write poisons
    /// the log (the records already count as appended).
    pub fn write_appended(&mut self) -> io::Result<()> {
        if self.options.journaled {
            // Its bytes reach the segment when they go to the journal.
            return Ok(());
        }
        self.flush_pending()?;
        self.drop_pending();
        Ok(())
    }

    /// Forgets the pending batch once its bytes are written, keeping its
    /// buffer for the next one.
    fn drop_pending(&mut self) {
        if let Some(p) = self.pending.take() {
            if p.bytes.capacity() <= KEPT_FRAMING_BYTES {
                self.spare_pending = p.bytes;
            }
        }
    }

    /// The capacity kept for the next pending batch (tests).
    #[cfg(test)]
    pub(crate) fn spare_batch_capacity(&self) -> usize {
        self.spare_pending.capacity()
    }

    /// Records below this index are in the segment files (the page cache
    /// at least): all of them but a batched log's appends not written yet.
    pub fn written(&self) -> u64 {
        match &self.pending {
            Some(p) if !self.options.journaled => self.end.saturating_sub(p.records),
            _ => self.end,
        }
    }

    /// For a journaled log: the bytes appended since the last call, to hand
    /// to the node's journal, or None if everything is durable already. The
    /// answer to [`Journal::submit`](super::Journal::submit) goes to
    /// [`Log::mark_synced`] as for an fsync.
    pub fn journal_write(&mut self) -> Option<JournalWrite> {
        if self.synced() >= self.end {
            self.pending = None;
            return None;
        }
        self.flush_pending().ok()?;
        let own = self.own_sync_job()?;
        let pending = self.pending.take()?;
        Some(JournalWrite {
            dir: Arc::clone(&self.shared_dir),
            segment_base: pending.segment_base,
            position: pending.position,
            bytes: pending.bytes,
            records: pending.records,
            end: self.end,
            own,
            own_synced: Arc::clone(&self.own_synced),
        })
    }

    /// Records that a [`SyncJob`] succeeded. Jobs may finish out of order, so
    /// an end lower than the current one is ignored.
    ///
    /// Every [`RECOVERY_POINT_STRIDE`] of the segment size, this also moves
    /// the recovery point: the manifest records the new durable end. Opening
    /// truncates damage of any shape after the recovery point (unsynced
    /// writes a crash left out of order) but refuses damage before it, so
    /// moving it keeps a rotten sector in acknowledged records from being
    /// mistaken for a crash's leftovers. It costs a manifest write (two
    /// fsyncs) per stride, on the caller's thread, as a roll does. If that
    /// write fails, the log is poisoned like a failed roll.
    pub fn mark_synced(&mut self, end: u64) {
        if self.options.journaled {
            // Durable in the journal; the recovery point moves only with
            // what the journal's checkpoints fsynced in the log's own files.
            self.journaled = self.journaled.max(end.min(self.end));
            self.synced = self.synced.max(self.own_synced.load(Ordering::Acquire).min(self.end));
        } else {
            self.synced = self.synced.max(end.min(self.end));
        }
        let active = self.segments.last().map_or(0, |s| s.bytes);
        let stride = self.options.segment_bytes / RECOVERY_POINT_STRIDE;
        let moved = self.synced > self.recovery_point;
        if self.poisoned.is_none() && moved && active.saturating_sub(self.recovery_point_bytes) >= stride.max(1) {
            if let Err(e) = self.record_manifest(0) {
                let _ = self.poison(e.kind(), format!("recording the recovery point in the manifest failed ({e})"));
            }
        }
    }

    /// [`Log::sync`], then records the active segment's base and size in
    /// `CLEAN_MARKER` so that the next [`Replay::TrustClosed`] open can skip
    /// scanning it too: for a clean shutdown (Kafka's clean-shutdown file).
    /// A size that differs at the next open means something was written
    /// after this (or torn by a crash) and the segment is scanned in full.
    ///
    /// The marker itself is not fsynced (two fsyncs per partition would
    /// lengthen every shutdown): a crash can only lose it or leave it empty,
    /// and then the next open scans the segment, which is always safe. It
    /// is renamed into place so it is never seen half-written.
    pub fn sync_and_mark_clean(&mut self) -> io::Result<()> {
        self.sync_and_record_end()?;
        let active = self.active()?;
        if active.bytes == 0 {
            return Ok(());
        }
        let path = self.dir.join(CLEAN_MARKER);
        let tmp = self.dir.join(format!("{CLEAN_MARKER}.tmp"));
        let fs = &self.options.fs;
        fs.open(&tmp, OpenMode::Create)?.write_all_at(format!("{} {}\n", active.base, active.bytes).as_bytes(), 0)?;
        fs.rename(&tmp, &path)
    }

    /// [`Log::sync`], then records the end in the manifest (durably), so
    /// that records cut from the end of the active segment before the next
    /// open are noticed: for a clean shutdown.
    pub fn sync_and_record_end(&mut self) -> io::Result<()> {
        self.sync()?;
        self.record_manifest(0)
    }

    /// fsyncs everything appended so far, on the calling thread.
    pub fn sync(&mut self) -> io::Result<()> {
        self.flush_pending()?;
        self.active()?.file()?.sync_data()?;
        self.synced = self.end;
        self.drop_pending();
        Ok(())
    }

    /// Reads `len` bytes at `position` of segment `segment_base` (typically a
    /// whole frame, see [`Location::frame_len`]). Fails if the segment no
    /// longer exists or the range goes past the records it holds.
    pub fn read_at(&self, segment_base: u64, position: u64, len: usize) -> io::Result<Vec<u8>> {
        self.segment_reader(segment_base)?.read_at(position, len)
    }

    /// A reader of segment `segment_base` as it is now (see [`SegmentReader`]).
    pub fn segment_reader(&self, segment_base: u64) -> io::Result<SegmentReader> {
        let segment = self
            .segments
            .binary_search_by_key(&segment_base, |s| s.base)
            .ok()
            .and_then(|i| self.segments.get(i))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("segment {segment_base} of {} no longer exists", self.dir.display()),
                )
            })?;
        Ok(SegmentReader { file: segment.file()?, path: segment.path.clone(), bytes: segment.bytes })
    }

    /// The segments, oldest first, for retention decisions.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        self.segments.iter().map(|s| SegmentInfo { base: s.base, bytes: s.bytes, modified_ms: s.modified_ms }).collect()
    }

    /// Deletes the oldest closed segment (never the active one) and returns
    /// what it was; [`Log::start`] moves to the next segment's base. Refused
    /// on a log with a snapshot, whose recovery needs every segment after it.
    pub fn delete_oldest_segment(&mut self) -> io::Result<Option<SegmentInfo>> {
        if self.snapshot.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a log compacted by snapshots cannot also drop segments by retention",
            ));
        }
        let Some(oldest) = self.segments.first().filter(|_| self.segments.len() > 1) else {
            return Ok(None);
        };
        let info = SegmentInfo { base: oldest.base, bytes: oldest.bytes, modified_ms: oldest.modified_ms };
        let path = oldest.path.clone();
        // The manifest first: a segment it no longer lists may go.
        self.record_manifest(1)?;
        self.options.fs.remove_file(&path)?;
        // Gone from the directory, so gone from the log, whatever follows:
        // a caller that kept serving its records after a failed directory
        // fsync would show a log start that a crash then jumps past.
        self.segments.remove(0);
        if let Err(e) = self.options.fs.sync_dir(&self.dir) {
            let reason = format!("fsyncing the directory after deleting {} failed ({e})", path.display());
            return Err(self.poison(e.kind(), reason));
        }
        Ok(Some(info))
    }

    /// Bytes of segment files not covered by the newest snapshot: what a
    /// recovery would replay on top of it, to decide when to snapshot again.
    pub fn bytes_since_snapshot(&self) -> u64 {
        let base = self.snapshot.map_or(0, |s| s.base);
        self.segments.iter().filter(|s| s.base >= base).map(|s| s.bytes).sum()
    }

    /// Size of the newest snapshot file (0 if none).
    pub fn snapshot_bytes(&self) -> u64 {
        self.snapshot.map_or(0, |s| s.bytes)
    }

    /// Starts a snapshot at [`Log::end`]: rolls the active segment, so that
    /// every earlier record is in closed, fsynced segments and the records
    /// after the snapshot start in a segment of their own, then returns the
    /// plan for [`SnapshotPlan::write`]. The caller must capture its state as
    /// of this point (after applying exactly the records below `end`).
    pub fn begin_snapshot(&mut self) -> io::Result<SnapshotPlan> {
        self.check_not_poisoned()?;
        if self.active()?.bytes > 0 {
            self.roll()?;
        }
        Ok(SnapshotPlan { dir: self.dir.clone(), base: self.end, fs: Arc::clone(&self.options.fs) })
    }

    /// Completes a snapshot written by [`SnapshotPlan::write`]: deletes every
    /// segment before its base and every older snapshot, then fsyncs the
    /// directory. A crash in the middle is harmless: open finishes the job.
    pub fn finish_snapshot(&mut self, done: SnapshotDone) -> io::Result<()> {
        if self.snapshot.is_some_and(|s| s.base > done.base) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("snapshot {} is older than the current one", done.base),
            ));
        }
        if !self.segments.iter().any(|s| s.base == done.base) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("snapshot {} does not start at a segment of this log", done.base),
            ));
        }
        let covered = self.segments.partition_point(|s| s.base < done.base);
        // The manifest first: what it no longer lists may go.
        self.record_manifest_with(covered, Some(done.base))?;
        let fs = &*self.options.fs;
        for segment in self.segments.get(..covered).unwrap_or_default() {
            remove_if_present(fs, &segment.path)?;
        }
        self.segments.drain(..covered);
        for name in fs.list(&self.dir)? {
            let older = name.to_str().and_then(parse_snapshot_file_name).is_some_and(|base| base < done.base);
            if older {
                remove_if_present(fs, &self.dir.join(name))?;
            }
        }
        fs.sync_dir(&self.dir)?;
        self.snapshot = Some(SnapshotState { base: done.base, bytes: done.bytes });
        Ok(())
    }

    /// A journaled log's appends reach its active segment here, with one
    /// write for all of them (the page cache; the journal makes them
    /// durable). The records already count as appended (the shard has
    /// applied them), so a failed write cannot be undone: it poisons the log
    /// and the shard stops, and recovery finds them only if the journal
    /// made them durable.
    fn flush_pending(&mut self) -> io::Result<()> {
        let Some(pending) = &self.pending else { return Ok(()) };
        let written = self.segments.last().ok_or_else(no_active_segment).and_then(|active| {
            if active.base != pending.segment_base {
                return Err(io::Error::other("appended bytes of a closed segment were never written"));
            }
            active.file()?.write_all_at(&pending.bytes, pending.position)
        });
        match written {
            Ok(()) => Ok(()),
            Err(e) => {
                self.pending = None;
                Err(self.poison(e.kind(), format!("writing appended records to {} failed ({e})", self.dir.display())))
            }
        }
    }

    fn active(&self) -> io::Result<&Segment> {
        self.segments.last().ok_or_else(no_active_segment)
    }

    /// Why the log refuses appends, once a failed append could not be cut
    /// back: its owner must stop, because nothing written can be trusted.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Makes the log refuse every later append (see [`Log::poisoned`]);
    /// returns the error to report.
    fn poison(&mut self, kind: io::ErrorKind, reason: String) -> io::Error {
        tracing::error!("{reason}; the log refuses further appends");
        self.poisoned = Some(reason.clone());
        io::Error::new(kind, reason)
    }

    fn check_not_poisoned(&self) -> io::Result<()> {
        match &self.poisoned {
            Some(reason) => Err(io::Error::other(format!("log is unusable: {reason}"))),
            None => Ok(()),
        }
    }
}

/// The active segment, borrowed from the segment list alone so that the rest
/// of the log stays usable (a method on `&mut Log` would borrow all of it).
fn active_mut(segments: &mut [Segment]) -> io::Result<&mut Segment> {
    segments.last_mut().ok_or_else(no_active_segment)
}

/// The invariant "there is always an active segment" is broken; reported as
/// an error rather than a panic.
fn no_active_segment() -> io::Error {
    io::Error::other("log has no active segment")
}

#[cfg(test)]
impl Log {
    /// Test seam: [`Log::append`] with the write replaced, to simulate a disk
    /// that fails part-way through a batch.
    pub(crate) fn append_via(&mut self, payloads: &[&[u8]], write: WriteAt<'_>) -> io::Result<Vec<Location>> {
        let mut locations = Vec::new();
        self.append_with(payloads, write, Some(&mut locations))?;
        Ok(locations)
    }

    /// Test seam: swaps the active segment's handle for a read-only one, so
    /// that the truncation undoing a failed write fails for real.
    pub(crate) fn make_active_read_only(&mut self) -> io::Result<()> {
        let active = active_mut(&mut self.segments)?;
        active.handle = FileRef::Pinned(self.options.fs.open(&active.path, OpenMode::Read)?);
        Ok(())
    }
}
