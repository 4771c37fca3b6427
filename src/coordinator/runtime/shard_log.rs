//! What a shard needs from its log, as a trait: the storage layer's
//! [`Log`] in production, an in-memory fake in the shell's tests and the
//! client simulation. Only the operations the shard shell uses are here;
//! fsyncs and snapshot writes run off the shard's thread, so they appear as
//! values the shell hands to its adapter ([`ShardLog::SyncJob`],
//! [`ShardLog::SnapshotPlan`]) rather than as calls.

use std::io;

use crate::coordinator::state::records::EncodedRecords;
use crate::coordinator::state::store::RecordSink;
use crate::error_code::ErrorCode;
use crate::observability::striped::{LOG_APPENDED_RECORDS, LOG_APPENDS};
use crate::storage::{JournalWrite, Log, SnapshotDone, SnapshotPlan, SyncJob};

/// What a finished snapshot covers, for the log line that reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    pub base: u64,
    pub records: u64,
    pub bytes: u64,
}

/// A shard's append-only log of records. Positions are record indexes.
pub trait ShardLog {
    /// An fsync of everything appended so far, to run off the shard's thread.
    type SyncJob;
    /// A snapshot to write off the shard's thread.
    type SnapshotPlan;
    /// A written snapshot, to install with [`ShardLog::finish_snapshot`].
    type SnapshotDone;

    /// Appends records, all or nothing.
    fn append(&mut self, payloads: &[&[u8]]) -> io::Result<()>;
    /// Index of the next record to be appended.
    fn end(&self) -> u64;
    /// Every record below this index is in the log's files (the page cache
    /// at least); the rest waits for [`ShardLog::write_appended`].
    fn written(&self) -> u64;
    /// Writes what was appended since the last call, as one write. A
    /// failed write poisons the log ([`ShardLog::poisoned`]).
    fn write_appended(&mut self) -> io::Result<()>;
    /// Every record below this index is durable.
    fn synced(&self) -> u64;
    /// What makes everything appended so far durable (an fsync, or bytes
    /// for the node's journal), or None if all is durable or on its way.
    fn sync_job(&mut self) -> Option<Self::SyncJob>;
    /// Records that an fsync up to `end` succeeded.
    fn mark_synced(&mut self, end: u64);
    /// fsyncs on the calling thread and records the end (clean shutdown).
    fn sync_and_record_end(&mut self) -> io::Result<()>;
    /// Why the log refuses every write, once an append could not be undone.
    fn poisoned(&self) -> Option<&str>;
    /// Bytes a recovery would replay on top of the newest snapshot.
    fn bytes_since_snapshot(&self) -> u64;
    /// Size of the newest snapshot.
    fn snapshot_bytes(&self) -> u64;
    /// Starts a snapshot at [`ShardLog::end`].
    fn begin_snapshot(&mut self) -> io::Result<Self::SnapshotPlan>;
    /// Installs a written snapshot and drops what it covers.
    fn finish_snapshot(&mut self, done: Self::SnapshotDone) -> io::Result<Compacted>;
}

/// How a shard's appends become durable: an fsync of its own active
/// segment (the node's sync scheduler runs it), or the bytes it appended,
/// handed to the node's journal (`storage.fsync = always`).
#[derive(Debug)]
pub enum LogSync {
    Fsync(SyncJob),
    Journal(JournalWrite),
}

impl ShardLog for Log {
    type SyncJob = LogSync;
    type SnapshotPlan = SnapshotPlan;
    type SnapshotDone = SnapshotDone;

    fn append(&mut self, payloads: &[&[u8]]) -> io::Result<()> {
        Log::append_unlocated(self, payloads)
    }

    fn end(&self) -> u64 {
        Log::end(self)
    }

    fn written(&self) -> u64 {
        Log::written(self)
    }

    fn write_appended(&mut self) -> io::Result<()> {
        Log::write_appended(self).inspect_err(|e| {
            if crate::storage::handles::is_descriptor_exhaustion(e) {
                metrics::counter!("kcoord_descriptor_errors_total", "operation" => "coordinator_log").increment(1);
            }
        })
    }

    fn synced(&self) -> u64 {
        Log::synced(self)
    }

    fn sync_job(&mut self) -> Option<LogSync> {
        if self.is_journaled() {
            self.journal_write().map(LogSync::Journal)
        } else {
            // The fsync covers only what reached the segment file.
            Log::write_appended(self).ok()?;
            Log::sync_job(self).map(LogSync::Fsync)
        }
    }

    fn mark_synced(&mut self, end: u64) {
        Log::mark_synced(self, end)
    }

    fn sync_and_record_end(&mut self) -> io::Result<()> {
        Log::sync_and_record_end(self)
    }

    fn poisoned(&self) -> Option<&str> {
        Log::poisoned(self)
    }

    fn bytes_since_snapshot(&self) -> u64 {
        Log::bytes_since_snapshot(self)
    }

    fn snapshot_bytes(&self) -> u64 {
        Log::snapshot_bytes(self)
    }

    fn begin_snapshot(&mut self) -> io::Result<SnapshotPlan> {
        Log::begin_snapshot(self)
    }

    fn finish_snapshot(&mut self, done: SnapshotDone) -> io::Result<Compacted> {
        let summary = Compacted { base: done.base(), records: done.records(), bytes: done.bytes() };
        Log::finish_snapshot(self, done)?;
        Ok(summary)
    }
}

/// Writes the core's records to a shard's log.
pub struct LogSink<'a, L> {
    pub log: &'a mut L,
    pub shard: u32,
}

impl<L: ShardLog> RecordSink for LogSink<'_, L> {
    fn append(&mut self, records: &EncodedRecords) -> Result<(), ErrorCode> {
        // Most writes are one record (a commit of one partition, a heartbeat's
        // expiry): those need no vector of references.
        let mut payloads = records.iter();
        let written = match (payloads.next(), records.len()) {
            (Some(one), 1) => self.log.append(&[one]),
            _ => self.log.append(&records.iter().collect::<Vec<&[u8]>>()),
        };
        match written {
            Ok(()) => {
                LOG_APPENDS.increment(1);
                LOG_APPENDED_RECORDS.increment(records.len() as u64);
                Ok(())
            }
            Err(e) => {
                if crate::storage::handles::is_descriptor_exhaustion(&e) {
                    metrics::counter!("kcoord_descriptor_errors_total", "operation" => "coordinator_log").increment(1);
                }
                tracing::error!(shard = self.shard, error = %e, "coordinator log write failed");
                Err(ErrorCode::KAFKA_STORAGE_ERROR)
            }
        }
    }
}
