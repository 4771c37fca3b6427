//! Where the client simulation's (`sim`) coordinator keeps its log: the
//! in-memory fake log, or the real storage [`Log`] on the simulated disk
//! (`storage::simdisk`), whose crash keeps only what a completed fsync (and
//! a directory fsync for names) covered and which fails writes and fsyncs
//! on demand. The simulation is written once against [`SimStorage`]; the
//! disk variant is the one that checks acknowledgements against real
//! durability.
#![cfg(test)]

use std::io;
use std::path::Path;

use bytes::Bytes;

use super::clock::ManualClock;
use super::fake_log::FakeLog;
use super::shard_log::LogSync;
use super::shard_log::ShardLog;
use super::shell::{Durable, ShardShell};
use crate::coordinator::state::core::{CoreConfig, CountingIds, ShardCore};
use crate::storage::journal::{recover, JournalFiles};
use crate::storage::simdisk::{Faults, SimDisk};
use crate::storage::{JournalWrite, Log, LogError, LogOptions, Replay, SnapshotDone, SnapshotPlan};

pub type Shell<L> = ShardShell<L, ManualClock>;

/// A shard's storage as the simulation drives it.
pub trait SimStorage {
    type Log: ShardLog;

    /// A fresh core rebuilt from what the storage holds (at the start, after
    /// a crash or after a clean shutdown), with its log.
    fn replay(&mut self, config: &CoreConfig, ids: u64) -> Result<(ShardCore, Self::Log), String>;
    /// The machine crashes: the shard (and its log) dies, and only what
    /// fsyncs covered is kept. `shell` is dropped first.
    fn crash(&mut self, shell: Shell<Self::Log>);
    /// Runs an fsync the shell asked for.
    fn run_sync(&mut self, job: <Self::Log as ShardLog>::SyncJob) -> Durable;
    /// Whether fsyncs must run in the order they were asked for (a journal
    /// writes its entries in order; a log's own fsyncs may finish in any).
    fn ordered_syncs(&self) -> bool {
        false
    }
    /// Writes a snapshot the shell asked for.
    fn write_snapshot(
        &mut self,
        plan: <Self::Log as ShardLog>::SnapshotPlan,
        payloads: Vec<Bytes>,
    ) -> io::Result<<Self::Log as ShardLog>::SnapshotDone>;
    /// Every record the log holds, snapshot first, if it can tell without
    /// reopening (for the periodic "live state = replay" check).
    fn records(log: &Self::Log) -> Option<Vec<Bytes>>;
    /// Turns injected disk faults on or off (a no-op without a disk).
    fn set_faults(&mut self, on: bool);
    /// What the run did to the storage, for the campaign's summary.
    fn stats(&self) -> StorageStats;
}

/// What the simulated disk did in a run (all zero for the fake log).
#[derive(Debug, Default, Clone, Copy)]
pub struct StorageStats {
    pub crashes: u64,
    pub injected_faults: u64,
    /// Unsynced writes a crash discarded.
    pub dropped_writes: u64,
    /// Writes a crash kept only a part of.
    pub torn_writes: u64,
    pub dropped_name_changes: u64,
    pub failed_fsyncs: u64,
}

impl StorageStats {
    pub fn add(&mut self, o: StorageStats) {
        self.crashes += o.crashes;
        self.injected_faults += o.injected_faults;
        self.dropped_writes += o.dropped_writes;
        self.torn_writes += o.torn_writes;
        self.dropped_name_changes += o.dropped_name_changes;
        self.failed_fsyncs += o.failed_fsyncs;
    }
}

/// Replays `payload` into `core`, as the daemon's loader does.
fn replay_into(core: &mut ShardCore, index: u64, payload: &[u8]) -> Result<(), String> {
    core.load_payload(payload).map_err(|e| format!("record {index} does not replay: {e}"))
}

/// The fake log: a crash keeps the records an fsync covered.
#[derive(Default)]
pub struct FakeStorage {
    durable: Vec<Bytes>,
}

impl FakeStorage {
    /// Storage holding these records, all durable.
    pub fn with_records(durable: Vec<Bytes>) -> FakeStorage {
        FakeStorage { durable }
    }
}

impl SimStorage for FakeStorage {
    type Log = FakeLog;

    fn replay(&mut self, config: &CoreConfig, ids: u64) -> Result<(ShardCore, FakeLog), String> {
        let mut core = ShardCore::new(config.clone(), Box::new(CountingIds(ids)));
        for (i, p) in self.durable.iter().enumerate() {
            replay_into(&mut core, i as u64, p)?;
        }
        Ok((core, FakeLog::from_records(self.durable.clone())))
    }

    fn crash(&mut self, shell: Shell<FakeLog>) {
        if let Some(log) = shell.log() {
            self.durable = log.durable();
        }
    }

    fn run_sync(&mut self, end: u64) -> Durable {
        Ok(end)
    }

    fn write_snapshot(&mut self, base: u64, payloads: Vec<Bytes>) -> io::Result<super::fake_log::FakeSnapshot> {
        Ok(FakeLog::write_snapshot(base, payloads))
    }

    fn records(log: &FakeLog) -> Option<Vec<Bytes>> {
        Some(log.all())
    }

    fn set_faults(&mut self, _on: bool) {}

    fn stats(&self) -> StorageStats {
        StorageStats::default()
    }
}

const DIR: &str = "/data/coordinator/shard-0000";

/// The data directory, where the journal lives.
const ROOT: &str = "/data";

/// Small journal files, so that checkpoints happen within a run.
const JOURNAL_FILE_BYTES: u64 = 2_048;

/// Small segments, so that rolls happen within a run.
const SEGMENT_BYTES: u64 = 4_096;

/// Opens that fail on an injected fault before faults are turned off for
/// the rest of the restart.
const FAULTY_OPENS: u32 = 3;

/// The storage [`Log`] on a [`SimDisk`].
pub struct DiskStorage {
    pub sim: SimDisk,
    /// The failure probabilities while faults are on (none for seeds
    /// without disk faults).
    faults: Faults,
    pub fsync_failures: u64,
    /// The node's journal makes appends durable (`fsync = always`), written
    /// synchronously when the simulation runs a sync; None until the first
    /// replay, and after a crash or a journal failure.
    journaled: bool,
    journal: Option<JournalFiles>,
}

impl DiskStorage {
    pub fn new(seed: u64, faults: Faults, reorder: bool) -> DiskStorage {
        let sim = SimDisk::new(seed);
        sim.set_reorder(reorder);
        DiskStorage { sim, faults, fsync_failures: 0, journaled: false, journal: None }
    }

    /// The same, with the node's journal in front of the log.
    pub fn journaled(seed: u64, faults: Faults, reorder: bool) -> DiskStorage {
        DiskStorage { journaled: true, ..DiskStorage::new(seed, faults, reorder) }
    }

    /// What the daemon does before the shards open: replay the journal into
    /// the logs, then start an empty one.
    fn open_journal(&mut self) -> io::Result<()> {
        self.journal = None;
        if !self.journaled {
            return Ok(());
        }
        recover(&*self.sim.disk(), Path::new(ROOT), false)?;
        self.journal = Some(JournalFiles::create(self.sim.disk(), Path::new(ROOT), JOURNAL_FILE_BYTES)?);
        Ok(())
    }

    /// Writes one journal entry, and checkpoints a full file.
    fn journal_write(&mut self, write: &JournalWrite) -> io::Result<u64> {
        let journal = self.journal.as_mut().ok_or_else(|| io::Error::other("the journal failed earlier"))?;
        let written = journal.write(std::iter::once(write)).and_then(|()| journal.next_if_full());
        match written {
            Ok(Some(checkpoint)) => checkpoint.run().map(|()| write.end()),
            Ok(None) => Ok(write.end()),
            Err(e) => Err(e),
        }
        .inspect_err(|_| self.journal = None)
    }
}

impl SimStorage for DiskStorage {
    type Log = Log;

    /// Opens the log as the daemon does, replaying every record into a new
    /// core. An open that hits an injected fault crashes the machine again
    /// and retries (without faults after a few attempts). It is never
    /// refused as damaged: what a crash leaves after the recovery point,
    /// even out of order, is truncated (see `storage::recovery`).
    fn replay(&mut self, config: &CoreConfig, ids: u64) -> Result<(ShardCore, Log), String> {
        let mut attempt = 0;
        loop {
            if attempt == FAULTY_OPENS {
                self.sim.set_faults(Faults::NONE);
            }
            let mut core = ShardCore::new(config.clone(), Box::new(CountingIds(ids)));
            let options = LogOptions {
                segment_bytes: SEGMENT_BYTES,
                repair: false,
                files: None,
                fs: self.sim.disk(),
                journaled: self.journaled,
                batched_writes: true,
            };
            if let Err(e) = self.open_journal() {
                if attempt < FAULTY_OPENS {
                    self.sim.crash();
                    attempt += 1;
                    continue;
                }
                return Err(format!("the journal does not replay: {e}"));
            }
            let opened = Log::open_with(Path::new(DIR), options, Replay::Full, &mut |loc, p| {
                replay_into(&mut core, loc.index, p)
            });
            match opened {
                Ok(log) => return Ok((core, log)),
                Err(LogError::Io { .. }) if attempt < FAULTY_OPENS => self.sim.crash(),
                Err(e) => return Err(format!("the coordinator's log does not open: {e}")),
            }
            attempt += 1;
        }
    }

    fn crash(&mut self, shell: Shell<Log>) {
        drop(shell);
        self.journal = None;
        self.sim.crash();
    }

    fn run_sync(&mut self, job: LogSync) -> Durable {
        let done = match job {
            LogSync::Fsync(job) => job.run(),
            LogSync::Journal(write) => self.journal_write(&write),
        };
        done.map_err(|e| {
            self.fsync_failures += 1;
            e.to_string()
        })
    }

    fn ordered_syncs(&self) -> bool {
        self.journaled
    }

    fn write_snapshot(&mut self, plan: SnapshotPlan, payloads: Vec<Bytes>) -> io::Result<SnapshotDone> {
        plan.write(&mut payloads.into_iter().map(|p| p.to_vec()))
    }

    fn records(_: &Log) -> Option<Vec<Bytes>> {
        None
    }

    fn set_faults(&mut self, on: bool) {
        self.sim.set_faults(if on { self.faults } else { Faults::NONE });
    }

    fn stats(&self) -> StorageStats {
        let s = self.sim.stats();
        StorageStats {
            crashes: s.crashes,
            injected_faults: s.injected_faults,
            dropped_writes: s.dropped_writes,
            torn_writes: s.torn_writes,
            dropped_name_changes: s.dropped_name_changes,
            failed_fsyncs: self.fsync_failures,
        }
    }
}
