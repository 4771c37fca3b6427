//! One topic partition: a [`storage::Log`](crate::storage::Log) holding one
//! Kafka RecordBatch per record, an in-memory index from Kafka offsets to
//! where each batch is stored, and the partition's producer state.
//!
//! The storage engine numbers its records densely from 0 and knows nothing
//! of Kafka offsets, so the index (one small entry per stored batch, built at
//! open from the `Location`s the log reports) maps a fetch offset to the
//! batch that holds it. Entries leave the index when retention deletes their
//! segment. At ~48 bytes per batch it is the one piece of memory that grows
//! with stored data (documented in `docs/operations.md`).
//!
//! Everything about a partition sits behind one mutex: appends are short
//! (a page-cache write), fsyncs run outside it (`durability.rs`), and so do
//! the disk reads of a Fetch: under the mutex a read only picks the batches
//! and takes a [`SegmentReader`] per segment, then copies them with the
//! mutex released, so a slow read never holds up producers.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::batch::{self, BatchHeader, ProducedBatch};
use super::producer_state::{ProducerStates, SequenceError, Verdict};
use crate::config::FsyncPolicy;
use crate::error_code::ErrorCode;
use crate::storage::disk::FileSystem;
use crate::storage::frame::HEADER_BYTES as FRAME_HEADER;
use crate::storage::{Location, Log, LogError, LogOptions, Replay, SegmentReader};

/// The leader epoch of every partition: kcoord is the only replica and never
/// changes leader, so the epoch stays 0 forever (clients then never need
/// OffsetForLeaderEpoch).
pub const LEADER_EPOCH: i32 = 0;

/// Where one stored batch is and what it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub segment_base: u64,
    /// Offset of the storage frame header in the segment.
    pub position: u64,
    pub payload_len: u32,
}

impl Entry {
    fn new(h: &BatchHeader, loc: &Location) -> Entry {
        Entry {
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
            segment_base: loc.segment_base,
            position: loc.position,
            payload_len: loc.payload_len,
        }
    }
}

/// What rolling the active segment by time needs to know about it (Kafka's
/// `LogSegment.shouldRoll`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ActiveSegment {
    /// The storage index the segment starts at (its name).
    pub base: u64,
    /// Max timestamp of the segment's first batch (Kafka's
    /// `rollingBasedTimestamp`); None while the segment holds nothing.
    pub first_timestamp: Option<i64>,
    /// When this process started the segment or opened the log, as Kafka's
    /// `LogSegment.created`: the age used when batches carry no timestamp.
    pub created_ms: i64,
}

impl ActiveSegment {
    pub fn empty(base: u64, now_ms: i64) -> ActiveSegment {
        ActiveSegment { base, first_timestamp: None, created_ms: now_ms }
    }

    /// Kafka's rule: a non-empty segment is rolled once the incoming batch's
    /// max timestamp is more than `segment_ms` past the first batch's, or,
    /// when the first batch has no timestamp, once the segment is that old.
    /// Record timestamps rather than the clock, so that a segment is closed
    /// in step with the timestamps time retention looks at.
    pub fn roll_due(&self, incoming_max_timestamp: i64, now_ms: i64, segment_ms: i64) -> bool {
        let waited = match self.first_timestamp {
            None => return false,
            Some(first) if first >= 0 => incoming_max_timestamp.saturating_sub(first),
            Some(_) => now_ms.saturating_sub(self.created_ms),
        };
        waited > segment_ms
    }
}

/// The file in a partition directory holding the log start offset as of the
/// last time retention left the log without batches. The storage engine
/// numbers records, not Kafka offsets, so without it a log whose every batch
/// was deleted would restart at offset 0 and hand out offsets twice (Kafka
/// keeps the same fact in the name of its empty active segment and in
/// `log-start-offset-checkpoint`).
pub(super) const LOG_START_FILE: &str = "log-start-offset";

/// Reads [`LOG_START_FILE`]: None if there is none.
fn read_log_start(fs: &dyn FileSystem, dir: &Path) -> Result<Option<i64>, String> {
    let path = dir.join(LOG_START_FILE);
    match fs.read(&path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            text.trim().parse::<i64>().map(Some).map_err(|_| format!("{}: not an offset: {text:?}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Persists [`LOG_START_FILE`] atomically (and durably) before retention
/// deletes the last batches.
pub(super) fn write_log_start(fs: &dyn FileSystem, dir: &Path, offset: i64) -> std::io::Result<()> {
    crate::storage::fsutil::write_atomically_on(fs, &dir.join(LOG_START_FILE), format!("{offset}\n").as_bytes())
}

/// Mutable state of a partition.
#[derive(Debug)]
pub(super) struct State {
    pub log: Log,
    /// One entry per stored record, in order; `entries[k]` is storage record
    /// `first_index + k`.
    pub entries: VecDeque<Entry>,
    pub first_index: u64,
    /// Kafka's log start offset: the first offset still stored.
    pub log_start: i64,
    /// Kafka's log end offset: the offset the next batch gets.
    pub next_offset: i64,
    /// Every offset below this is on disk (fsynced).
    pub durable_offset: i64,
    pub producers: ProducerStates,
    pub active: ActiveSegment,
    /// An fsync failed: nothing more is acknowledged.
    pub failed: Option<String>,
    /// The topic was deleted: every operation answers UNKNOWN_TOPIC_OR_PARTITION.
    pub deleted: bool,
}

impl State {
    /// The Kafka offset of storage record `index` (the log end offset for
    /// the index just past the last record).
    pub fn offset_of_index(&self, index: u64) -> i64 {
        if index < self.first_index {
            return self.log_start;
        }
        let k = usize::try_from(index - self.first_index).unwrap_or(usize::MAX);
        self.entries.get(k).map_or(self.next_offset, |e| e.base_offset)
    }

    /// Position of the first entry whose batch ends at or after `offset`.
    fn entry_for(&self, offset: i64) -> usize {
        self.entries.partition_point(|e| e.last_offset < offset)
    }

    /// Drops index entries of records the log no longer stores.
    pub fn forget_deleted(&mut self) {
        let start = self.log.start();
        while self.first_index < start && self.entries.pop_front().is_some() {
            self.first_index += 1;
        }
        self.first_index = self.first_index.max(start);
        self.log_start = self.entries.front().map_or(self.next_offset, |e| e.base_offset);
        self.producers.truncate_head(self.log_start);
    }

    /// Reads the payload of one stored batch.
    pub fn read_batch(&self, e: &Entry) -> std::io::Result<Vec<u8>> {
        self.log.read_at(e.segment_base, e.position + FRAME_HEADER as u64, e.payload_len as usize)
    }
}

/// What replaying a partition log rebuilds.
struct Replayed {
    log: Log,
    entries: VecDeque<Entry>,
    producers: ProducerStates,
    first_index: Option<u64>,
    next_offset: Option<i64>,
}

impl Replayed {
    /// Opens the log, indexing every stored batch from its header.
    fn open(dir: &Path, options: LogOptions, replay: Replay) -> Result<Replayed, LogError> {
        let mut entries = VecDeque::new();
        let mut producers = ProducerStates::new();
        let mut first_index: Option<u64> = None;
        let mut next_offset: Option<i64> = None;
        let log = Log::open_with(dir, options, replay, &mut |loc, payload| {
            if loc.is_snapshot() {
                return Err("partition logs never hold snapshots".to_string());
            }
            // `payload` may be only the batch header (closed segments): the
            // stored length is the frame's.
            let h = batch::read_stored(payload, loc.payload_len as usize)
                .map_err(|e| format!("record {}: {e}", loc.index))?;
            if let Some(n) = next_offset {
                if h.base_offset < n {
                    return Err(format!("record {}: offset {} goes back below {n}", loc.index, h.base_offset));
                }
            }
            if first_index.is_none() {
                first_index = Some(loc.index);
            }
            entries.push_back(Entry::new(&h, &loc));
            producers.record(&h);
            next_offset = Some(h.last_offset().saturating_add(1));
            Ok(())
        })?;
        Ok(Replayed { log, entries, producers, first_index, next_offset })
    }
}

/// One partition of a topic.
#[derive(Debug)]
pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub dir: PathBuf,
    pub(super) fsync: FsyncPolicy,
    /// Kafka `segment.ms`: see [`ActiveSegment::roll_due`].
    pub(super) segment_ms: i64,
    pub(super) state: Mutex<State>,
    /// Woken when more data becomes visible to fetchers, or the partition
    /// goes away.
    pub(super) data: Notify,
    /// Woken when an fsync of the partition returns.
    pub(super) synced: Notify,
    /// The partition's place in the node's sync scheduler (`durability.rs`),
    /// made on the first fsync.
    pub(super) sync_registration: std::sync::OnceLock<Arc<crate::storage::Registration>>,
}

/// Offsets a client sees for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    pub log_start: i64,
    /// The high watermark: the end of what consumers may read.
    pub high_watermark: i64,
    pub log_end: i64,
}

/// The outcome of a successful append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: i64,
    pub log_start: i64,
    /// Storage index the answer must wait for under `fsync = always`.
    pub durable_at: u64,
}

/// A refused append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendError {
    pub code: ErrorCode,
    pub message: Option<String>,
}

impl From<SequenceError> for AppendError {
    fn from(e: SequenceError) -> Self {
        AppendError { code: e.code, message: Some(e.message) }
    }
}

impl AppendError {
    fn code(code: ErrorCode) -> Self {
        AppendError { code, message: None }
    }
}

/// Whole batches read for a Fetch, and the offsets at the time.
#[derive(Debug)]
pub struct ReadBatches {
    pub bytes: Vec<u8>,
    pub offsets: Offsets,
}

/// The batches a read returns, chosen under the partition lock, with a
/// reader per run of batches in the same segment (in order).
#[derive(Debug)]
struct ReadPlan {
    offsets: Offsets,
    batches: Vec<Entry>,
    readers: Vec<SegmentReader>,
    /// Payload bytes of `batches`.
    total: usize,
}

impl ReadPlan {
    /// Copies the batches' payloads, without any lock: one read per run of
    /// batches in the same segment, then the storage frame headers between
    /// them are skipped while copying.
    fn execute(self) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(self.total);
        let runs = self.batches.chunk_by(|a, b| a.segment_base == b.segment_base);
        for (run, reader) in runs.zip(&self.readers) {
            let (Some(first), Some(last)) = (run.first(), run.last()) else { continue };
            let span = last.position.saturating_sub(first.position) as usize + FRAME_HEADER + last.payload_len as usize;
            let raw = reader.read_at(first.position, span)?;
            for e in run {
                let from = e.position.saturating_sub(first.position) as usize + FRAME_HEADER;
                let payload = raw.get(from..from + e.payload_len as usize).ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, "a batch lies outside the bytes read")
                })?;
                bytes.extend_from_slice(payload);
            }
        }
        Ok(bytes)
    }
}

impl Partition {
    /// Opens (or creates) the partition log in `dir`, rebuilding the index
    /// and producer state from every stored batch header.
    pub fn open(
        topic: &str,
        index: i32,
        dir: &Path,
        options: LogOptions,
        fsync: FsyncPolicy,
        segment_ms: i64,
        now_ms: i64,
    ) -> Result<Partition, String> {
        // Closed segments were fsynced when they were closed: reading their
        // batch headers is enough (see `Replay::TrustClosed`). If they do not
        // add up, or the operator asked for a repair, every byte is checked.
        let trusted = Replay::TrustClosed { prefix: batch::HEADER_BYTES };
        let repair = options.repair;
        let replayed = match Replayed::open(dir, options.clone(), if repair { Replay::Full } else { trusted }) {
            Err(e @ (LogError::Corrupt { .. } | LogError::Visit(_))) if !repair => {
                tracing::warn!(topic, partition = index, error = %e, "closed segments do not add up; checking every byte");
                Replayed::open(dir, options, Replay::Full)
            }
            other => other,
        };
        let Replayed { log, entries, mut producers, first_index, next_offset } =
            replayed.map_err(|e| format!("partition {topic}-{index} ({}): {e}", dir.display()))?;
        producers.expire(now_ms);
        let checkpoint =
            read_log_start(&*log.disk().clone(), dir).map_err(|e| format!("partition {topic}-{index}: {e}"))?;
        // Batches stored after the checkpoint was written start at or after
        // it, so the larger of the two is where the log ends.
        let next_offset = next_offset.unwrap_or(0).max(checkpoint.unwrap_or(0));
        let active_base = log.active_base();
        let active = ActiveSegment {
            base: active_base,
            first_timestamp: entries
                .iter()
                .rev()
                .take_while(|e| e.segment_base == active_base)
                .last()
                .map(|e| e.max_timestamp),
            created_ms: now_ms,
        };
        let mut state = State {
            first_index: first_index.unwrap_or_else(|| log.start()),
            log,
            entries,
            log_start: 0,
            next_offset,
            durable_offset: next_offset,
            producers,
            active,
            failed: None,
            deleted: false,
        };
        state.log_start = state.entries.front().map_or(next_offset, |e| e.base_offset);
        Ok(Partition {
            topic: topic.to_string(),
            index,
            dir: dir.to_path_buf(),
            fsync,
            segment_ms,
            state: Mutex::new(state),
            data: Notify::new(),
            synced: Notify::new(),
            sync_registration: std::sync::OnceLock::new(),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The end of what consumers may read: with `fsync = always` only
    /// durable data is visible, so nothing a consumer saw (or committed an
    /// offset past) can disappear in a machine crash; otherwise everything
    /// appended.
    pub(super) fn high_watermark(&self, s: &State) -> i64 {
        match self.fsync {
            FsyncPolicy::Always => s.durable_offset,
            FsyncPolicy::Interval | FsyncPolicy::Never => s.next_offset,
        }
    }

    fn offsets_of(&self, s: &State) -> Offsets {
        Offsets { log_start: s.log_start, high_watermark: self.high_watermark(s), log_end: s.next_offset }
    }

    pub fn offsets(&self) -> Offsets {
        let s = self.lock();
        self.offsets_of(&s)
    }

    /// Highest producer id stored in this partition.
    pub fn max_producer_id(&self) -> Option<i64> {
        self.lock().producers.max_producer_id()
    }

    /// Appends a validated batch at the log end, unless the producer state
    /// says it is a duplicate (then answers with the original offset). The
    /// active segment is rolled first when `segment.ms` says so (`now_ms` is
    /// the wall clock, injected for tests).
    pub fn append(&self, produced: ProducedBatch, now_ms: i64) -> Result<Appended, AppendError> {
        let ProducedBatch { mut header, mut bytes, .. } = produced;
        let mut s = self.lock();
        if s.deleted {
            return Err(AppendError::code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION));
        }
        if s.failed.is_some() {
            return Err(AppendError::code(ErrorCode::KAFKA_STORAGE_ERROR));
        }
        if let Verdict::Duplicate(original) = s.producers.check(&header)? {
            // The original may still be waiting for its fsync: wait for
            // everything appended so far.
            return Ok(Appended { base_offset: original.base_offset, log_start: s.log_start, durable_at: s.log.end() });
        }
        if s.active.roll_due(header.max_timestamp, now_ms, self.segment_ms) {
            // Rolling fsyncs the segment it closes (as a roll by size does).
            if let Err(e) = s.log.roll_active() {
                tracing::error!(topic = %self.topic, partition = self.index, error = %e, "rolling the partition log failed");
                return Err(AppendError { code: ErrorCode::KAFKA_STORAGE_ERROR, message: Some(e.to_string()) });
            }
        }
        let base = s.next_offset;
        batch::assign(&mut bytes, base, LEADER_EPOCH);
        header.base_offset = base;
        header.leader_epoch = LEADER_EPOCH;
        let loc = match s.log.append(&[&bytes]) {
            Ok(locs) => locs.into_iter().next(),
            Err(e) => {
                tracing::error!(topic = %self.topic, partition = self.index, error = %e, "partition log write failed");
                return Err(AppendError { code: ErrorCode::KAFKA_STORAGE_ERROR, message: Some(e.to_string()) });
            }
        };
        let Some(loc) = loc else {
            return Err(AppendError::code(ErrorCode::UNKNOWN_SERVER_ERROR));
        };
        if s.entries.is_empty() {
            s.first_index = loc.index;
            s.log_start = base;
        }
        s.entries.push_back(Entry::new(&header, &loc));
        s.producers.record(&header);
        s.next_offset = header.last_offset().saturating_add(1);
        if loc.segment_base != s.active.base {
            s.active = ActiveSegment::empty(loc.segment_base, now_ms);
        }
        s.active.first_timestamp.get_or_insert(header.max_timestamp);
        let appended = Appended { base_offset: base, log_start: s.log_start, durable_at: s.log.end() };
        drop(s);
        if self.fsync != FsyncPolicy::Always {
            self.data.notify_waiters();
        }
        Ok(appended)
    }

    /// Checks a fetch offset: OFFSET_OUT_OF_RANGE outside [log start, log end].
    fn check_offset(&self, s: &State, offset: i64) -> Result<Offsets, ErrorCode> {
        if s.deleted {
            return Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        }
        if offset < s.log_start || offset > s.next_offset {
            return Err(ErrorCode::OFFSET_OUT_OF_RANGE);
        }
        Ok(self.offsets_of(s))
    }

    /// Bytes of whole batches readable from `offset` (below the high
    /// watermark), counting no further than `enough`; errors as [`Self::read`].
    pub fn available(&self, offset: i64, enough: usize) -> Result<usize, ErrorCode> {
        let s = self.lock();
        let hw = self.check_offset(&s, offset)?.high_watermark;
        let mut total = 0usize;
        for e in s.entries.range(s.entry_for(offset)..) {
            if e.base_offset >= hw || total >= enough {
                break;
            }
            total = total.saturating_add(e.payload_len as usize);
        }
        Ok(total)
    }

    /// Reads whole batches from the one containing `offset`, up to the high
    /// watermark and `max_bytes`; with `min_one`, the first batch is returned
    /// even if it is larger (KIP-74), so a consumer always makes progress.
    /// The disk reads happen without the partition lock (see the module docs).
    pub fn read(&self, offset: i64, max_bytes: usize, min_one: bool) -> Result<ReadBatches, ErrorCode> {
        let plan = self.plan_read(offset, max_bytes, min_one)?;
        let offsets = plan.offsets;
        let bytes = plan.execute().map_err(|e| {
            tracing::error!(topic = %self.topic, partition = self.index, error = %e, "partition log read failed");
            ErrorCode::KAFKA_STORAGE_ERROR
        })?;
        Ok(ReadBatches { bytes, offsets })
    }

    /// The locked part of [`Partition::read`]: which batches, and a reader
    /// for each segment they are in.
    fn plan_read(&self, offset: i64, max_bytes: usize, min_one: bool) -> Result<ReadPlan, ErrorCode> {
        let s = self.lock();
        let offsets = self.check_offset(&s, offset)?;
        let mut batches: Vec<Entry> = Vec::new();
        let mut total = 0usize;
        for e in s.entries.range(s.entry_for(offset)..) {
            if e.base_offset >= offsets.high_watermark {
                break;
            }
            let next = total.saturating_add(e.payload_len as usize);
            if next > max_bytes && !(min_one && batches.is_empty()) {
                break;
            }
            total = next;
            batches.push(*e);
        }
        let mut readers = Vec::new();
        for run in batches.chunk_by(|a, b| a.segment_base == b.segment_base) {
            let Some(first) = run.first() else { continue };
            readers.push(s.log.segment_reader(first.segment_base).map_err(|e| {
                tracing::error!(topic = %self.topic, partition = self.index, error = %e, "partition log read failed");
                ErrorCode::KAFKA_STORAGE_ERROR
            })?);
        }
        Ok(ReadPlan { offsets, batches, readers, total })
    }

    /// Marks the partition deleted and wakes its parked fetches.
    pub(super) fn mark_deleted(&self, deleted: bool) {
        self.lock().deleted = deleted;
        self.data.notify_waiters();
        self.synced.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topics::batch::test_batches::batch;
    use crate::topics::batch::validate_produced;

    fn open(dir: &Path) -> Partition {
        open_with(dir, 604_800_000, false).unwrap()
    }

    fn open_with(dir: &Path, segment_ms: i64, repair: bool) -> Result<Partition, String> {
        let options = LogOptions::new(1024, repair);
        Partition::open("t", 0, dir, options, FsyncPolicy::Never, segment_ms, 0)
    }

    fn produce(p: &Partition, values: &[&[u8]], producer: Option<(i64, i16, i32)>) -> Result<Appended, AppendError> {
        p.append(validate_produced(Some(&batch(values, 1_000, producer)), 9, 1 << 20).unwrap(), 0)
    }

    #[test]
    fn offsets_are_assigned_densely_and_reads_return_whole_batches() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        assert_eq!(produce(&p, &[b"a", b"b"], None).unwrap().base_offset, 0);
        assert_eq!(produce(&p, &[b"c"], None).unwrap().base_offset, 2);
        assert_eq!(p.offsets(), Offsets { log_start: 0, high_watermark: 3, log_end: 3 });
        // Offset 1 is inside the first batch: it is returned whole.
        let r = p.read(1, 1 << 20, true).unwrap();
        let first = BatchHeader::read(&r.bytes).unwrap();
        assert_eq!(first.base_offset, 0);
        assert_eq!(r.bytes.len(), first.size() + BatchHeader::read(&r.bytes[first.size()..]).unwrap().size());
        assert!(p.read(3, 100, true).unwrap().bytes.is_empty());
        assert_eq!(p.read(4, 100, true).unwrap_err(), ErrorCode::OFFSET_OUT_OF_RANGE);
        assert_eq!(p.read(-1, 100, true).unwrap_err(), ErrorCode::OFFSET_OUT_OF_RANGE);
    }

    #[test]
    fn the_first_batch_is_returned_even_above_max_bytes_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        produce(&p, &[&[7u8; 300]], None).unwrap();
        assert_eq!(p.read(0, 10, false).unwrap().bytes.len(), 0);
        assert!(p.read(0, 10, true).unwrap().bytes.len() > 300);
        assert!(p.available(0, 1).unwrap() > 0);
    }

    #[test]
    fn batches_spanning_segments_are_read_back_in_order_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let p = open(dir.path());
            for i in 0..40u8 {
                produce(&p, &[&[i; 100]], Some((5, 0, i as i32))).unwrap();
            }
            assert!(p.lock().log.segments().len() > 2);
        }
        let p = open(dir.path());
        assert_eq!(p.offsets().log_end, 40);
        let r = p.read(0, 1 << 20, true).unwrap();
        let mut at = 0;
        let mut expect = 0;
        while at < r.bytes.len() {
            let h = BatchHeader::read(&r.bytes[at..]).unwrap();
            assert_eq!(h.base_offset, expect);
            assert_eq!(crc32c::crc32c(&r.bytes[at + 21..at + h.size()]), h.crc);
            expect += 1;
            at += h.size();
        }
        assert_eq!(expect, 40);
        // The producer state came back from the log: a retry is a duplicate.
        assert_eq!(produce(&p, &[&[39u8; 100]], Some((5, 0, 39))).unwrap().base_offset, 39);
        assert_eq!(p.offsets().log_end, 40);
        assert_eq!(produce(&p, &[b"x"], Some((5, 0, 41))).unwrap_err().code, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER);
    }

    #[test]
    fn a_read_planned_before_retention_deletes_the_segment_still_returns_its_batches() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        for i in 0..20u8 {
            produce(&p, &[&[i; 100]], None).unwrap();
        }
        let whole = p.read(0, 1 << 20, true).unwrap().bytes;
        let plan = p.plan_read(0, 1 << 20, true).unwrap();
        assert!(plan.readers.len() > 1, "the read spans segments");
        // The lock is free while the plan is executed: appends and retention go on.
        produce(&p, &[b"later"], None).unwrap();
        let policy = crate::topics::retention::RetentionPolicy { retention_ms: -1, retention_bytes: 0 };
        assert!(p.apply_retention(policy, 0) > 0);
        assert_eq!(p.read(0, 100, true).unwrap_err(), ErrorCode::OFFSET_OUT_OF_RANGE);
        assert_eq!(plan.execute().unwrap(), whole);
    }

    #[test]
    fn reopening_from_batch_headers_rebuilds_the_same_index_as_a_full_replay() {
        let dir = tempfile::tempdir().unwrap();
        {
            let p = open(dir.path());
            for i in 0..40u8 {
                produce(&p, &[&[i; 100], b"x"], Some((5, 0, 2 * i as i32))).unwrap();
            }
            assert!(p.lock().log.segments().len() > 2);
        }
        let options = LogOptions::new(1024, false);
        let full = Replayed::open(dir.path(), options, Replay::Full).unwrap();
        drop(full.log);
        let p = open(dir.path());
        let s = p.lock();
        assert_eq!(s.entries, full.entries);
        assert_eq!((Some(s.first_index), Some(s.next_offset)), (full.first_index, full.next_offset));
        assert_eq!(s.producers.max_producer_id(), Some(5));
    }

    #[test]
    fn a_closed_segment_whose_frame_lengths_do_not_add_up_is_refused_unless_repairing() {
        let dir = tempfile::tempdir().unwrap();
        {
            let p = open(dir.path());
            for i in 0..40u8 {
                produce(&p, &[&[i; 100]], None).unwrap();
            }
        }
        // Shorten the length field of the second frame of the first (closed) segment.
        let first = dir.path().join(format!("{:020}.log", 0));
        let mut bytes = std::fs::read(&first).unwrap();
        let second = FRAME_HEADER + u32::from_be_bytes(bytes[0..4].try_into().unwrap()) as usize;
        let len = u32::from_be_bytes(bytes[second..second + 4].try_into().unwrap());
        bytes[second..second + 4].copy_from_slice(&(len - 1).to_be_bytes());
        std::fs::write(&first, bytes).unwrap();
        let err = open_with(dir.path(), 1, false).unwrap_err();
        assert!(err.contains("is corrupt") && err.contains("--repair"), "{err}");
        let repaired = open_with(dir.path(), 1, true).unwrap();
        assert_eq!(repaired.offsets().log_end, 1, "truncated at the damage");
    }

    #[test]
    fn a_deleted_partition_refuses_everything() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        p.mark_deleted(true);
        assert_eq!(produce(&p, &[b"a"], None).unwrap_err().code, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        assert_eq!(p.read(0, 10, true).unwrap_err(), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    }
}
