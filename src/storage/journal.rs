//! The node's journal: one fdatasync makes every coordinator shard's new
//! records durable at once.
//!
//! Why: with `storage.fsync = always`, each of the 50 shard logs used to be
//! fsynced on its own, so a round of commits spread over the shards cost up
//! to 50 fdatasyncs (each a file-system journal commit, ~40 µs of CPU) where
//! one would do. Here a shard still appends to its own segment files (in the
//! page cache; its state stays loadable, snapshottable and movable on its
//! own), and hands the bytes it appended to the journal ([`Journal::submit`]).
//! One writer thread takes everything handed over since its last round,
//! writes it to the journal file with one write and makes it durable with
//! one fdatasync, then tells each log the end it made durable
//! ([`SyncTarget::synced`]). Answers still wait for that: nothing is
//! acknowledged before it is on disk.
//!
//! An entry says where its bytes belong: the log directory (relative to the
//! data directory), the segment and the position in it. The log's own files
//! are fsynced later:
//! - when a segment closes (a roll already fsyncs it);
//! - when the journal file fills up: a checkpoint fsyncs the active segment
//!   of every log that wrote to it, then deletes it;
//! - at a clean shutdown (each shard's final fsync). Once every shard's
//!   final fsync succeeded, the journal holds nothing its logs lack, and
//!   [`Journal::retire`] deletes its files: a clean restart replays nothing.
//!
//! Recovery ([`recover`]), before any shard opens: every intact entry is
//! written again at its place (redo; the same bytes, so repeating it is
//! harmless), the files written are fsynced, and the journal files are
//! deleted. A shard's log then opens as it always did, with every
//! acknowledged record in its own files. An entry whose segment no longer
//! exists is skipped: only a snapshot deletes a shard's segments, and it is
//! durable before it does.
//!
//! Faults: a failed write or fsync of the journal, or a failed checkpoint,
//! is reported to every log that handed bytes over (and to every later
//! one), never retried: the shards stop acknowledging and stop the daemon,
//! as after a failed fsync of their own (fail-stop).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::disk::{remove_if_present, Disk, FileHandle, FileSystem, OpenMode};
use super::fsutil;
use super::log::SyncJob;
use super::segment::segment_file_name;
use super::sync_scheduler::SyncTarget;

/// The journal's directory, under the data directory.
pub const JOURNAL_DIR: &str = "journal";

const FILE_SUFFIX: &str = ".wal";

/// Journal file size at which the writer starts a new file and checkpoints
/// the old one. Bounds the journal on disk (at most two files and one
/// entry) and what a recovery reads.
pub const DEFAULT_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Bytes before an entry's checksummed part: its length and CRC-32C.
const ENTRY_HEADER: usize = 8;

/// Fixed fields of the checksummed part: position, segment base, path length.
const ENTRY_FIXED: usize = 8 + 8 + 2;

/// An entry longer than this is damage, not an entry (a shard's batch is at
/// most 512 requests of bounded size).
const MAX_ENTRY_BYTES: usize = 1 << 30;

fn file_name(sequence: u64) -> String {
    format!("{sequence:020}{FILE_SUFFIX}")
}

fn parse_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(FILE_SUFFIX)?;
    (digits.len() == 20).then(|| digits.parse().ok()).flatten()
}

/// Bytes a log appended to its active segment since it last handed bytes
/// over, with what the journal needs to checkpoint them later. Made by
/// [`Log::journal_write`](super::Log::journal_write).
#[derive(Debug)]
pub struct JournalWrite {
    pub(crate) dir: Arc<Path>,
    pub(crate) segment_base: u64,
    pub(crate) position: u64,
    pub(crate) bytes: Vec<u8>,
    /// Records in `bytes`.
    pub(crate) records: u64,
    /// The log index up to which (exclusive) these bytes complete the log.
    pub(crate) end: u64,
    /// The log's own fsync of the segment, for the checkpoint.
    pub(crate) own: SyncJob,
    /// Where the checkpoint reports the end its own fsync covered.
    pub(crate) own_synced: Arc<AtomicU64>,
}

impl JournalWrite {
    /// The log index up to which (exclusive) this write completes the log.
    pub fn end(&self) -> u64 {
        self.end
    }
}

/// What a recovery did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Redone {
    pub entries: u64,
    pub bytes: u64,
    /// Entries whose segment a snapshot had deleted.
    pub skipped: u64,
    pub files: u64,
}

/// Writes every intact entry the journal under `root` holds back to its
/// segment, fsyncs what it wrote, and deletes the journal files. Damage at
/// the end of the newest file is a write the crash cut short (never
/// acknowledged) and ends the replay; damage anywhere else is refused
/// unless `repair`, because those entries were acknowledged.
pub fn recover(fs: &dyn FileSystem, root: &Path, repair: bool) -> io::Result<Redone> {
    let dir = root.join(JOURNAL_DIR);
    if !fs.is_dir(&dir) {
        return Ok(Redone::default());
    }
    let sequences = file_sequences(fs, &dir)?;
    let mut redone = Redone::default();
    let mut written: HashMap<PathBuf, FileHandle> = HashMap::new();
    let newest = sequences.last().copied();
    for &sequence in &sequences {
        let path = dir.join(file_name(sequence));
        let content = fs.read(&path)?;
        let mut at = 0usize;
        while at < content.len() {
            let entry = match parse_entry(&content, at) {
                Some(entry) => entry,
                None if Some(sequence) == newest || repair => {
                    if Some(sequence) != newest {
                        tracing::warn!(file = %path.display(), at, "repair: journal damaged; dropping the rest of it");
                    }
                    break;
                }
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "journal file {} is damaged at byte {at}, before its end: it holds acknowledged records \
                             (start with --repair to drop the rest of the file)",
                            path.display()
                        ),
                    ))
                }
            };
            at = entry.next;
            let segment = root.join(entry.dir).join(segment_file_name(entry.segment_base));
            let file = match written.get(&segment) {
                Some(file) => file.clone(),
                None => match fs.open(&segment, OpenMode::ReadWrite) {
                    Ok(file) => {
                        written.insert(segment.clone(), file.clone());
                        file
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        redone.skipped += 1;
                        continue;
                    }
                    Err(e) => return Err(e),
                },
            };
            file.write_all_at(entry.bytes, entry.position)?;
            redone.entries += 1;
            redone.bytes += entry.bytes.len() as u64;
        }
    }
    for file in written.values() {
        file.sync_data()?;
    }
    redone.files = written.len() as u64;
    remove_files(fs, &dir, &sequences)?;
    Ok(redone)
}

/// Deletes the journal files `sequences` under `dir`, durably.
fn remove_files(fs: &dyn FileSystem, dir: &Path, sequences: &[u64]) -> io::Result<()> {
    for &sequence in sequences {
        remove_if_present(fs, &dir.join(file_name(sequence)))?;
    }
    fs.sync_dir(dir)
}

/// The sequence numbers of the journal files under `dir`, oldest first.
fn file_sequences(fs: &dyn FileSystem, dir: &Path) -> io::Result<Vec<u64>> {
    let mut sequences: Vec<u64> = fs.list(dir)?.iter().filter_map(|n| n.to_str().and_then(parse_file_name)).collect();
    sequences.sort_unstable();
    Ok(sequences)
}

/// One entry, borrowed from a journal file's content.
struct Entry<'a> {
    dir: &'a Path,
    segment_base: u64,
    position: u64,
    bytes: &'a [u8],
    /// Where the next entry starts.
    next: usize,
}

fn parse_entry(content: &[u8], at: usize) -> Option<Entry<'_>> {
    let header = content.get(at..at.checked_add(ENTRY_HEADER)?)?;
    let len = u32::from_be_bytes(header.get(..4)?.try_into().ok()?) as usize;
    let crc = u32::from_be_bytes(header.get(4..8)?.try_into().ok()?);
    if !(ENTRY_FIXED..=MAX_ENTRY_BYTES).contains(&len) {
        return None;
    }
    let start = at + ENTRY_HEADER;
    let body = content.get(start..start.checked_add(len)?)?;
    if crc32c::crc32c(body) != crc {
        return None;
    }
    let position = u64::from_be_bytes(body.get(..8)?.try_into().ok()?);
    let segment_base = u64::from_be_bytes(body.get(8..16)?.try_into().ok()?);
    let dir_len = u16::from_be_bytes(body.get(16..18)?.try_into().ok()?) as usize;
    let dir = std::str::from_utf8(body.get(ENTRY_FIXED..ENTRY_FIXED.checked_add(dir_len)?)?).ok()?;
    let bytes = body.get(ENTRY_FIXED + dir_len..)?;
    Some(Entry { dir: Path::new(dir), segment_base, position, bytes, next: start + len })
}

/// Appends one entry for `write` to `out`; its directory is written relative
/// to `root` where it lies under it.
fn encode_entry(out: &mut Vec<u8>, root: &Path, write: &JournalWrite) -> io::Result<()> {
    let dir = write.dir.strip_prefix(root).unwrap_or(&write.dir);
    let dir = dir.to_str().ok_or_else(|| io::Error::other(format!("{} is not UTF-8", dir.display())))?;
    let dir_len = u16::try_from(dir.len()).map_err(|_| io::Error::other("log directory path too long"))?;
    let len = ENTRY_FIXED + dir.len() + write.bytes.len();
    if len > MAX_ENTRY_BYTES {
        return Err(io::Error::other(format!("a journal entry of {len} bytes is too large")));
    }
    let start = out.len();
    out.extend_from_slice(&[0; ENTRY_HEADER]);
    out.extend_from_slice(&write.position.to_be_bytes());
    out.extend_from_slice(&write.segment_base.to_be_bytes());
    out.extend_from_slice(&dir_len.to_be_bytes());
    out.extend_from_slice(dir.as_bytes());
    out.extend_from_slice(&write.bytes);
    let crc = crc32c::crc32c(out.get(start + ENTRY_HEADER..).unwrap_or_default());
    let mut header = [0u8; ENTRY_HEADER];
    let (len_field, crc_field) = header.split_at_mut(4);
    len_field.copy_from_slice(&(len as u32).to_be_bytes());
    crc_field.copy_from_slice(&crc.to_be_bytes());
    if let Some(slot) = out.get_mut(start..start + ENTRY_HEADER) {
        slot.copy_from_slice(&header);
    }
    Ok(())
}

/// At start-up, before any shard opens: replays and deletes what the journal
/// under `data_dir` holds ([`recover`]), then, if `run` (`storage.fsync =
/// always`), starts an empty one for the shards to use.
pub fn open(data_dir: &Path, run: bool, repair: bool) -> io::Result<Option<Arc<Journal>>> {
    let fs = super::disk::os();
    let redone = recover(&*fs, data_dir, repair)?;
    if redone.entries > 0 || redone.skipped > 0 {
        tracing::info!(
            entries = redone.entries,
            bytes = redone.bytes,
            skipped = redone.skipped,
            files = redone.files,
            "journal replayed into the coordinator's logs"
        );
    }
    if !run {
        return Ok(None);
    }
    Journal::start(fs, data_dir, DEFAULT_FILE_BYTES).map(|j| Some(Arc::new(j)))
}

type Submitted = (JournalWrite, Arc<dyn SyncTarget>);

/// Why a retired journal refuses writes.
const RETIRED: &str = "the journal was retired at shutdown";

struct State {
    queue: Vec<Submitted>,
    /// Why the journal stopped acknowledging, once it did.
    failed: Option<String>,
    stopping: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The running journal. Dropping it lets the writer finish what was handed
/// over and stop.
pub struct Journal {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
    fs: Disk,
    dir: PathBuf,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").finish_non_exhaustive()
    }
}

impl Journal {
    /// Starts an empty journal under `root` (call [`recover`] first: a
    /// leftover file with the first name is emptied). Files are
    /// `file_bytes` long before the writer moves to the next.
    pub fn start(fs: Disk, root: &Path, file_bytes: u64) -> io::Result<Journal> {
        let files = JournalFiles::create(Arc::clone(&fs), root, file_bytes)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State { queue: Vec::new(), failed: None, stopping: false }),
            work: Condvar::new(),
        });
        let writer = Writer { shared: Arc::clone(&shared), files, checkpoint: None };
        let writer = std::thread::Builder::new().name("kcoord-journal".into()).spawn(move || writer.run())?;
        Ok(Journal { shared, writer: Mutex::new(Some(writer)), fs, dir: root.join(JOURNAL_DIR) })
    }

    /// At a clean shutdown, once every shard's own final fsync succeeded:
    /// lets the writer finish, then deletes the journal's files, whose
    /// every entry is now in its log's own durable files. A journal that
    /// failed keeps its files for the next start to replay. Anything handed
    /// over later gets an error.
    pub fn retire(&self) -> io::Result<()> {
        self.stop_writer();
        {
            let mut state = self.shared.lock();
            match state.failed.as_deref() {
                Some(RETIRED) => return Ok(()),
                Some(reason) => {
                    return Err(io::Error::other(format!("the journal is kept for the next start: {reason}")))
                }
                None => state.failed = Some(RETIRED.into()),
            }
        }
        let sequences = file_sequences(&*self.fs, &self.dir)?;
        remove_files(&*self.fs, &self.dir, &sequences)
    }

    /// Lets the writer finish what was handed over, and waits for it (and
    /// for its running checkpoint).
    fn stop_writer(&self) {
        self.shared.lock().stopping = true;
        self.shared.work.notify_all();
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = writer {
            if writer.join().is_err() {
                self.shared.lock().failed.get_or_insert_with(|| "the journal's writer panicked".into());
            }
        }
    }

    /// Hands `write` over; `target` learns the end it made durable (or the
    /// journal's failure) once the fdatasync that covers it returned.
    pub fn submit(&self, write: JournalWrite, target: Arc<dyn SyncTarget>) {
        let mut state = self.shared.lock();
        let refused = match (&state.failed, state.stopping) {
            (Some(reason), _) => Some(reason.clone()),
            // The writer may already be gone: nothing would answer.
            (None, true) => Some("the journal is stopping".to_string()),
            (None, false) => None,
        };
        if let Some(reason) = refused {
            drop(state);
            target.synced(Err(io::Error::other(reason)));
            return;
        }
        state.queue.push((write, target));
        let first = state.queue.len() == 1;
        drop(state);
        if first {
            self.shared.work.notify_one();
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.stop_writer();
    }
}

/// What a checkpoint needs of one log: its own fsync covering its last
/// entry in the file being closed.
#[derive(Debug)]
struct Covered {
    own: SyncJob,
    end: u64,
    own_synced: Arc<AtomicU64>,
}

/// The journal's files, written by one thread at a time: the writer
/// thread in the daemon, the simulation's step in tests.
#[derive(Debug)]
pub struct JournalFiles {
    fs: Disk,
    root: PathBuf,
    dir: PathBuf,
    file_bytes: u64,
    sequence: u64,
    file: FileHandle,
    position: u64,
    /// Reused for every round's entries.
    buffer: Vec<u8>,
    /// The logs with entries in the current file, by directory.
    covered: HashMap<Arc<Path>, Covered>,
}

/// The largest round buffer kept between rounds.
const KEPT_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// A full journal file and what must be fsynced before it may go.
#[derive(Debug)]
pub struct Checkpoint {
    fs: Disk,
    dir: PathBuf,
    full: PathBuf,
    covered: Vec<Covered>,
}

impl Checkpoint {
    /// fsyncs every log's own segment past its entries in the full file,
    /// records what that made durable, then deletes the file.
    pub fn run(self) -> io::Result<()> {
        for c in self.covered {
            c.own.run()?;
            c.own_synced.fetch_max(c.end, Ordering::AcqRel);
        }
        remove_if_present(&*self.fs, &self.full)?;
        self.fs.sync_dir(&self.dir)
    }
}

impl JournalFiles {
    /// An empty first file under `root` (see [`Journal::start`]).
    pub fn create(fs: Disk, root: &Path, file_bytes: u64) -> io::Result<JournalFiles> {
        let dir = root.join(JOURNAL_DIR);
        fsutil::create_dir_all_durably_on(&*fs, &dir)?;
        let file = fs.open(&dir.join(file_name(0)), OpenMode::Create)?;
        fs.sync_dir(&dir)?;
        Ok(JournalFiles {
            fs,
            root: root.to_path_buf(),
            dir,
            file_bytes: file_bytes.max(1),
            sequence: 0,
            file,
            position: 0,
            buffer: Vec::new(),
            covered: HashMap::new(),
        })
    }

    /// Makes `writes` durable with one write and one fdatasync. After an
    /// error nothing more may be written (the file may end in a torn entry).
    pub fn write<'a>(&mut self, writes: impl Iterator<Item = &'a JournalWrite> + Clone) -> io::Result<()> {
        self.buffer.clear();
        for write in writes.clone() {
            encode_entry(&mut self.buffer, &self.root, write)?;
        }
        let started = std::time::Instant::now();
        self.file.write_all_at(&self.buffer, self.position)?;
        self.file.sync_data()?;
        metrics::histogram!("kcoord_fsync_duration_seconds").record(started.elapsed().as_secs_f64());
        metrics::counter!("kcoord_journal_bytes_total").increment(self.buffer.len() as u64);
        self.position += self.buffer.len() as u64;
        if self.buffer.capacity() > KEPT_BUFFER_BYTES {
            self.buffer = Vec::new();
        }
        let mut records = 0u64;
        for write in writes {
            records += write.records;
            let covered = Covered { own: write.own.clone(), end: write.end, own_synced: Arc::clone(&write.own_synced) };
            self.covered.insert(Arc::clone(&write.dir), covered);
        }
        metrics::histogram!("kcoord_fsync_batch_records").record(records as f64);
        Ok(())
    }

    /// Once the current file is full: starts the next one and returns the
    /// checkpoint that lets the full one go.
    pub fn next_if_full(&mut self) -> io::Result<Option<Checkpoint>> {
        if self.position < self.file_bytes {
            return Ok(None);
        }
        let full = self.dir.join(file_name(self.sequence));
        let next = self.dir.join(file_name(self.sequence + 1));
        self.file = self.fs.open(&next, OpenMode::Create)?;
        self.fs.sync_dir(&self.dir)?;
        self.sequence += 1;
        self.position = 0;
        metrics::counter!("kcoord_journal_checkpoints_total").increment(1);
        Ok(Some(Checkpoint {
            fs: Arc::clone(&self.fs),
            dir: self.dir.clone(),
            full,
            covered: self.covered.drain().map(|(_, c)| c).collect(),
        }))
    }
}

/// The writer thread's state.
struct Writer {
    shared: Arc<Shared>,
    files: JournalFiles,
    /// The checkpoint of the previous file, running.
    checkpoint: Option<JoinHandle<io::Result<()>>>,
}

impl Writer {
    fn run(mut self) {
        let mut round: Vec<Submitted> = Vec::new();
        loop {
            let failed = {
                let mut state = self.shared.lock();
                while state.queue.is_empty() && !state.stopping && state.failed.is_none() {
                    state = self.shared.work.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                std::mem::swap(&mut state.queue, &mut round);
                if round.is_empty() && state.failed.is_none() {
                    break;
                }
                state.failed.clone()
            };
            if let Some(reason) = failed {
                // A checkpoint failed: nothing more is acknowledged.
                self.fail(reason, &mut round);
                break;
            }
            if let Err(e) = self.files.write(round.iter().map(|(w, _)| w)) {
                self.fail(format!("writing the journal failed: {e}"), &mut round);
                break;
            }
            for (write, target) in round.drain(..) {
                target.synced(Ok(write.end));
            }
            if let Err(e) = self.checkpoint_if_full() {
                self.fail(format!("starting a new journal file failed: {e}"), &mut round);
                break;
            }
        }
        if let Some(checkpoint) = self.checkpoint.take() {
            let _ = checkpoint.join();
        }
    }

    /// Moves to the next file once this one is full, and checkpoints the
    /// full one in the background (after the previous checkpoint ended:
    /// at most two files wait).
    fn checkpoint_if_full(&mut self) -> io::Result<()> {
        if self.files.position < self.files.file_bytes {
            return Ok(());
        }
        if let Some(previous) = self.checkpoint.take() {
            previous.join().unwrap_or_else(|_| Err(io::Error::other("journal checkpoint panicked")))?;
        }
        let Some(checkpoint) = self.files.next_if_full()? else { return Ok(()) };
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new().name("kcoord-journal-ckpt".into()).spawn(move || {
            let result = checkpoint.run();
            if let Err(e) = &result {
                shared.lock().failed.get_or_insert_with(|| format!("checkpointing the journal failed: {e}"));
                shared.work.notify_all();
            }
            result
        })?;
        self.checkpoint = Some(spawned);
        Ok(())
    }

    /// Stops acknowledging: `round` and everything handed over later get
    /// the error.
    fn fail(&mut self, reason: String, round: &mut Vec<Submitted>) {
        tracing::error!("{reason}; the journal stops acknowledging");
        let (reason, queued) = {
            let mut state = self.shared.lock();
            let reason = state.failed.get_or_insert(reason).clone();
            (reason, std::mem::take(&mut state.queue))
        };
        for (_, target) in round.drain(..).chain(queued) {
            target.synced(Err(io::Error::other(reason.clone())));
        }
    }
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
