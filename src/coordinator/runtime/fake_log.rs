//! An in-memory [`ShardLog`] for the shard shell's tests and the client
//! simulation: it keeps every record, knows which are durable, and fails
//! appends, fsyncs and snapshots on request. It keeps a journal of the
//! operations that matter for ordering (snapshots, the final fsync).
#![cfg(test)]

use std::io;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::shard_log::{Compacted, ShardLog};

/// A snapshot written off the shard's thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeSnapshot {
    pub base: u64,
    pub payloads: Vec<Bytes>,
}

/// A log in memory. Record `i` is `records[i - base]`, where `base` is the
/// newest snapshot's (records before it are only in the snapshot).
#[derive(Debug, Default)]
pub struct FakeLog {
    records: Vec<Bytes>,
    base: u64,
    snapshot: Option<FakeSnapshot>,
    synced: u64,
    /// Records below this index were written ([`ShardLog::write_appended`]).
    written: u64,
    poisoned: Option<String>,
    /// The next `write_appended` fails: the log is poisoned.
    pub fail_next_write: bool,
    /// Fail this many upcoming appends (nothing is written).
    pub fail_appends: usize,
    /// The next append fails and cannot be undone: the log is poisoned.
    pub poison_next_append: bool,
    /// Fail this many upcoming `begin_snapshot` calls.
    pub fail_begin_snapshot: usize,
    /// `begin_snapshot` calls so far.
    pub snapshot_attempts: usize,
    /// Report no history since the snapshot, so that no compaction starts.
    pub hide_history: bool,
    /// Fail the shutdown's fsync.
    pub fail_final_sync: bool,
    /// Snapshots finished and final fsyncs, in order; a clone outlives
    /// the shard that owns the log.
    pub journal: Journal,
}

/// What a [`FakeLog`] did, in order.
#[derive(Debug, Clone, Default)]
pub struct Journal(Arc<Mutex<Vec<&'static str>>>);

impl Journal {
    fn push(&self, what: &'static str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(what);
    }

    pub fn entries(&self) -> Vec<&'static str> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Bytes a record is counted as, for the compaction trigger.
const RECORD_BYTES: u64 = 100;

impl FakeLog {
    /// What a crash now would leave: the snapshot's records, then every
    /// record an fsync covered.
    pub fn durable(&self) -> Vec<Bytes> {
        let covered = usize::try_from(self.synced.saturating_sub(self.base)).unwrap_or(usize::MAX);
        self.replayed(covered)
    }

    /// What the log holds: the snapshot's records, then every record since.
    pub fn all(&self) -> Vec<Bytes> {
        self.replayed(self.records.len())
    }

    fn replayed(&self, records: usize) -> Vec<Bytes> {
        let mut out: Vec<Bytes> = self.snapshot.iter().flat_map(|s| s.payloads.iter().cloned()).collect();
        out.extend(self.records.iter().take(records).cloned());
        out
    }

    /// A log holding `records`, all durable (what a restart finds).
    pub fn from_records(records: Vec<Bytes>) -> FakeLog {
        let synced = records.len() as u64;
        FakeLog { records, synced, ..FakeLog::default() }
    }

    /// Writes a snapshot as the adapter's blocking thread would.
    pub fn write_snapshot(base: u64, payloads: Vec<Bytes>) -> FakeSnapshot {
        FakeSnapshot { base, payloads }
    }
}

impl ShardLog for FakeLog {
    type SyncJob = u64;
    type SnapshotPlan = u64;
    type SnapshotDone = FakeSnapshot;

    fn append(&mut self, payloads: &[&[u8]]) -> io::Result<()> {
        if let Some(reason) = &self.poisoned {
            return Err(io::Error::other(format!("log is unusable: {reason}")));
        }
        if self.poison_next_append {
            self.poison_next_append = false;
            self.poisoned = Some("an append could not be cut back".into());
            return Err(io::Error::other("torn append"));
        }
        if self.fail_appends > 0 {
            self.fail_appends -= 1;
            return Err(io::Error::other("injected write error"));
        }
        self.records.extend(payloads.iter().map(|p| Bytes::copy_from_slice(p)));
        Ok(())
    }

    fn end(&self) -> u64 {
        self.base + self.records.len() as u64
    }

    fn written(&self) -> u64 {
        self.written.max(self.synced)
    }

    fn write_appended(&mut self) -> io::Result<()> {
        if self.fail_next_write {
            self.fail_next_write = false;
            self.poisoned = Some("writing appended records failed".into());
            return Err(io::Error::other("injected write error"));
        }
        self.written = self.end();
        Ok(())
    }

    fn synced(&self) -> u64 {
        self.synced
    }

    fn sync_job(&mut self) -> Option<u64> {
        self.write_appended().ok()?;
        (self.synced < self.end()).then(|| self.end())
    }

    fn mark_synced(&mut self, end: u64) {
        self.synced = self.synced.max(end.min(self.end()));
    }

    fn sync_and_record_end(&mut self) -> io::Result<()> {
        self.journal.push("final fsync");
        if self.fail_final_sync {
            return Err(io::Error::other("injected fsync error"));
        }
        self.synced = self.end();
        Ok(())
    }

    fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    fn bytes_since_snapshot(&self) -> u64 {
        if self.hide_history {
            return 0;
        }
        self.records.len() as u64 * RECORD_BYTES
    }

    fn snapshot_bytes(&self) -> u64 {
        self.snapshot.as_ref().map_or(0, |s| s.payloads.len() as u64 * RECORD_BYTES)
    }

    fn begin_snapshot(&mut self) -> io::Result<u64> {
        self.snapshot_attempts += 1;
        if self.fail_begin_snapshot > 0 {
            self.fail_begin_snapshot -= 1;
            return Err(io::Error::other("injected ENOSPC"));
        }
        // Like rolling a segment: everything before the snapshot is durable.
        self.synced = self.end();
        Ok(self.end())
    }

    fn finish_snapshot(&mut self, done: FakeSnapshot) -> io::Result<Compacted> {
        self.journal.push("snapshot finished");
        let covered = usize::try_from(done.base.saturating_sub(self.base)).unwrap_or(usize::MAX);
        self.records.drain(..covered.min(self.records.len()));
        self.base = done.base;
        let summary = Compacted { base: done.base, records: done.payloads.len() as u64, bytes: 0 };
        self.snapshot = Some(done);
        Ok(summary)
    }
}
