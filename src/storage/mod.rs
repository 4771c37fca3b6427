//! Durable storage: a small segmented append-only log (length + CRC-32C
//! framed records, group commit, torn-tail recovery, compaction by snapshot)
//! shared by the coordinator's offsets logs and standalone partition logs.
//!
//! - `disk`: the file operations all of it goes through, real or simulated.
//! - `simdisk`: an in-memory disk for crash tests (loses what no fsync
//!   covered, tears writes, fails on demand).
//! - `frame`: the on-disk record format and a scanner that classifies damage.
//! - `segment`: one `{base:020}.log` file.
//! - `log`: the log itself (append, group commit, reads, retention, snapshots).
//! - `snapshot`: writing and validating `snapshot-{base:020}.snap` files.
//! - `recovery`: what `Log::open` repairs, and what it refuses to guess about.
//! - `manifest`: the files and end index a log directory must have.
//! - `handles`: the bounded cache of open segment files partition logs share.
//! - `sync_scheduler`: the node-wide pool that runs every log's group-commit
//!   fsyncs.
//! - `journal`: the node's journal, whose one fdatasync a round makes every
//!   coordinator shard's appends durable (`storage.fsync = always`).

pub mod disk;
pub mod error;
pub mod frame;
pub mod fsutil;
pub mod handles;
pub mod journal;
pub mod log;
mod manifest;
mod recovery;
mod segment;
pub mod simdisk;
pub mod snapshot;
pub mod sync_scheduler;

pub use error::LogError;
pub use handles::FileCache;
pub use journal::{Journal, JournalWrite};
pub use log::{Location, Log, LogOptions, Replay, SegmentInfo, SegmentReader, SyncJob, Visitor};
pub use snapshot::{SnapshotDone, SnapshotPlan};
pub use sync_scheduler::{Registration, SyncScheduler, SyncTarget, SyncWork};

#[cfg(test)]
pub(crate) mod crash_sim;
#[cfg(test)]
mod crash_sim_tests;
#[cfg(test)]
mod log_proptest;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod manifest_tests;
#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod test_util;
