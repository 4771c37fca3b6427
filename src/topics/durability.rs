//! Making partition appends durable: group commit per partition log.
//!
//! With `storage.fsync = always` a Produce answer (acks = 1 or -1) waits
//! until its batch is fdatasynced. The fsyncs run on the node's
//! [`SyncScheduler`], shared with the coordinator's shards: a waiter asks it
//! for an fsync of the partition and waits for the partition's synced end to
//! pass its batch. The scheduler runs at most one fsync per partition at a
//! time, taking a [`SyncJob`](crate::storage::SyncJob) covering everything
//! appended up to the moment it starts, so one fsync covers every batch
//! appended while the partition waited for its turn. Waiters never run
//! syncs themselves (a dropped request must not strand the partition with a
//! sync half done).
//!
//! With `interval` a background loop asks the scheduler for every partition
//! every `storage.fsync_interval_ms`; with `never` nothing is synced until
//! shutdown.
//!
//! A failed fsync may have dropped pages the kernel will not write again, so
//! the partition stops acknowledging (KAFKA_STORAGE_ERROR) and the daemon is
//! told to stop, as the coordinator does.

use std::io;
use std::sync::{Arc, Weak};

use tokio::sync::mpsc;

use super::partition::Partition;
use crate::config::FsyncPolicy;
use crate::error_code::ErrorCode;
use crate::storage::{Registration, SyncScheduler, SyncTarget, SyncWork};

/// Where unrecoverable failures are reported (the daemon stops).
pub type FatalSender = mpsc::UnboundedSender<String>;

/// A partition as the sync scheduler sees it. It holds the partition
/// weakly: an fsync still queued for a deleted partition finds nothing to do.
struct PartitionSync {
    partition: Weak<Partition>,
    fatal: FatalSender,
}

impl SyncTarget for PartitionSync {
    fn job(&self) -> Option<SyncWork> {
        let partition = self.partition.upgrade()?;
        let s = partition.lock();
        if s.failed.is_some() {
            return None;
        }
        let job = s.log.sync_job()?;
        Some(Box::new(move || job.run()))
    }

    fn synced(&self, result: io::Result<u64>) {
        let Some(partition) = self.partition.upgrade() else { return };
        {
            let mut s = partition.lock();
            match result {
                Ok(end) => {
                    s.log.mark_synced(end);
                    let synced = s.log.synced();
                    s.durable_offset = s.offset_of_index(synced);
                }
                Err(e) => partition.fail(&mut s, format!("fsync failed: {e}"), &self.fatal),
            }
        }
        partition.synced.notify_waiters();
        if partition.fsync == FsyncPolicy::Always {
            partition.data.notify_waiters();
        }
    }
}

impl Partition {
    /// Asks the node's sync scheduler for an fsync covering everything
    /// appended so far (a no-op if one is already queued: it will cover it).
    pub(super) fn start_sync(self: &Arc<Self>, fatal: &FatalSender) {
        let registration = self.sync_registration.get_or_init(|| {
            Registration::new(Arc::new(PartitionSync { partition: Arc::downgrade(self), fatal: fatal.clone() }))
        });
        SyncScheduler::global().request(registration);
    }

    fn fail(&self, s: &mut super::partition::State, message: String, fatal: &FatalSender) {
        let message = format!("partition {}-{}: {message}", self.topic, self.index);
        tracing::error!("{message}; the partition stops acknowledging writes");
        s.failed = Some(message.clone());
        let _ = fatal.send(message);
    }

    /// Waits until storage record `end` (exclusive) is durable.
    pub(super) async fn wait_durable(self: &Arc<Self>, end: u64, fatal: &FatalSender) -> Result<(), ErrorCode> {
        loop {
            let notified = self.synced.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let s = self.lock();
                if s.failed.is_some() {
                    return Err(ErrorCode::KAFKA_STORAGE_ERROR);
                }
                if s.log.synced() >= end {
                    return Ok(());
                }
            }
            self.start_sync(fatal);
            notified.await;
        }
    }

    /// fsyncs on the calling (blocking) thread and marks the log cleanly
    /// closed, so the next start reads only batch headers; used at shutdown.
    pub(super) fn sync_now(&self) {
        let mut s = self.lock();
        if s.failed.is_some() || s.deleted {
            return;
        }
        match s.log.sync_and_mark_clean() {
            Ok(()) => {
                let synced = s.log.synced();
                s.durable_offset = s.offset_of_index(synced);
            }
            Err(e) => {
                tracing::error!(topic = %self.topic, partition = self.index, error = %e, "final fsync failed");
                s.failed = Some(e.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LogOptions;
    use crate::topics::batch::test_batches::batch;
    use crate::topics::batch::validate_produced;

    #[tokio::test]
    async fn under_fsync_always_appends_become_visible_only_once_durable() {
        let dir = tempfile::tempdir().unwrap();
        let options = LogOptions::new(1 << 20, false);
        let p = Arc::new(Partition::open("t", 0, dir.path(), options, FsyncPolicy::Always, 604_800_000, 0).unwrap());
        let (fatal, _rx) = mpsc::unbounded_channel();
        let produce =
            |v: &[u8]| p.append(validate_produced(Some(&batch(&[v], 1, None)), 9, 1 << 20).unwrap(), 0).unwrap();
        let (a, b) = (produce(b"a"), produce(b"b"));
        assert_eq!((a.base_offset, b.base_offset), (0, 1));
        assert_eq!(p.offsets().high_watermark, 0, "nothing is visible before it is durable");
        // Both waits are covered by the same group commit.
        let (ra, rb) = tokio::join!(p.wait_durable(a.durable_at, &fatal), p.wait_durable(b.durable_at, &fatal));
        assert_eq!((ra, rb), (Ok(()), Ok(())));
        assert_eq!(p.offsets().high_watermark, 2);
    }

    /// A sync target that never fsyncs: the test plays the sync scheduler
    /// and reports each fsync's outcome itself, through the partition's
    /// real [`PartitionSync`].
    struct NeverSyncs;

    impl SyncTarget for NeverSyncs {
        fn job(&self) -> Option<SyncWork> {
            None
        }

        fn synced(&self, _: io::Result<u64>) {}
    }

    struct Rig {
        p: Arc<Partition>,
        fatal: FatalSender,
        stopped: mpsc::UnboundedReceiver<String>,
        /// How the scheduler reports fsyncs of this partition.
        outcome: PartitionSync,
        _dir: tempfile::TempDir,
    }

    fn rig() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let options = LogOptions::new(1 << 20, false);
        let p = Arc::new(Partition::open("t", 0, dir.path(), options, FsyncPolicy::Always, 604_800_000, 0).unwrap());
        p.sync_registration.set(Registration::new(Arc::new(NeverSyncs))).unwrap();
        let (fatal, stopped) = mpsc::unbounded_channel();
        let outcome = PartitionSync { partition: Arc::downgrade(&p), fatal: fatal.clone() };
        Rig { p, fatal, stopped, outcome, _dir: dir }
    }

    impl Rig {
        /// Appends an acks=all produce and starts waiting for its answer.
        fn produce(&self, value: &[u8]) -> (u64, tokio::task::JoinHandle<Result<(), ErrorCode>>) {
            let batch = validate_produced(Some(&batch(&[value], 1, None)), 9, 1 << 20).unwrap();
            let end = self.p.append(batch, 0).unwrap().durable_at;
            let (p, fatal) = (self.p.clone(), self.fatal.clone());
            (end, tokio::spawn(async move { p.wait_durable(end, &fatal).await }))
        }
    }

    /// Lets every spawned task run as far as it can.
    async fn settle() {
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn an_acks_all_produce_is_answered_only_once_an_fsync_covers_it() {
        let r = rig();
        let (a_end, a) = r.produce(b"a");
        settle().await;
        assert!(!a.is_finished(), "no fsync has returned: the produce must not be answered");
        assert_eq!(r.p.offsets().high_watermark, 0, "nor may a fetch see it");

        // An fsync that covers the first batch only (a second was appended
        // while it ran) answers the first.
        let (b_end, b) = r.produce(b"b");
        r.outcome.synced(Ok(a_end));
        assert_eq!(a.await.unwrap(), Ok(()));
        settle().await;
        assert!(!b.is_finished(), "its write is past the synced end");
        assert_eq!(r.p.offsets().high_watermark, 1);

        r.outcome.synced(Ok(b_end));
        assert_eq!(b.await.unwrap(), Ok(()));
        assert_eq!(r.p.offsets().high_watermark, 2);
    }

    #[tokio::test]
    async fn a_failed_fsync_answers_storage_error_and_stops_every_later_acknowledgement() {
        let mut r = rig();
        let (end, waiting) = r.produce(b"a");
        r.outcome.synced(Err(io::Error::other("EIO")));
        assert_eq!(waiting.await.unwrap(), Err(ErrorCode::KAFKA_STORAGE_ERROR));
        assert!(r.stopped.try_recv().is_ok(), "the daemon is told to stop");

        // A later fsync that claims success changes nothing already failed,
        // and new writes are refused.
        r.outcome.synced(Ok(end));
        let batch = validate_produced(Some(&batch(&[b"b"], 1, None)), 9, 1 << 20).unwrap();
        assert_eq!(r.p.append(batch, 0).err().map(|e| e.code), Some(ErrorCode::KAFKA_STORAGE_ERROR));
        assert_eq!(r.p.wait_durable(end, &r.fatal).await, Err(ErrorCode::KAFKA_STORAGE_ERROR));
    }
}
