//! Retention: deleting whole old segments of partition logs by time and size.
//!
//! Kafka's rules (`UnifiedLog.deleteOldSegments`), oldest segment first,
//! stopping at the first one that is kept:
//! - time: `now - largest timestamp in the segment > retention.ms` (the
//!   largest record timestamp, or the file's modification time when the
//!   segment holds no timestamps); `retention.ms = -1` keeps everything;
//! - size: delete while the log would still hold at least `retention.bytes`
//!   without the segment; `retention.bytes = -1` is unlimited.
//!
//! The active segment counts too, as in Kafka, once all of it is visible to
//! consumers (below the high watermark) and it is not empty: when every
//! segment may go, the active one is rolled first (so the log always has an
//! active segment to append to) and then all the old ones are deleted; the
//! log start offset moves to the log end offset. Because storage records are
//! numbered independently of Kafka offsets, that offset is persisted first
//! (`partition::LOG_START_FILE`) whenever a deletion leaves no batch behind,
//! so a restart continues from it instead of from 0. Together with rolling
//! by `segment.ms` at append time this is what makes time retention apply
//! to a topic whose single segment never fills. Sizes count the storage
//! frame headers (8 bytes per batch) as well as the batches.

use super::partition::{write_log_start, ActiveSegment, Entry, Partition};
use crate::storage::SegmentInfo;

/// Effective retention settings of one topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    pub retention_ms: i64,
    pub retention_bytes: i64,
}

/// How many of the oldest `segments` to delete (all of them means the active
/// one too). `largest_ts[i]` is the largest timestamp of segment `i`;
/// `active_visible` says whether all of the active (last) segment is below
/// the high watermark, as Kafka requires of a deletable segment.
pub fn segments_to_delete(
    segments: &[SegmentInfo],
    largest_ts: &[i64],
    policy: RetentionPolicy,
    now_ms: i64,
    active_visible: bool,
) -> usize {
    let mut remaining: u64 = segments.iter().map(|s| s.bytes).sum();
    let mut n = 0;
    for (i, seg) in segments.iter().enumerate() {
        let active = i + 1 == segments.len();
        // Only the active segment can be empty; there is nothing to delete.
        if seg.bytes == 0 || (active && !active_visible) {
            break;
        }
        let ts = largest_ts.get(i).copied().unwrap_or(i64::MAX);
        let by_time = policy.retention_ms >= 0 && now_ms.saturating_sub(ts) > policy.retention_ms;
        let by_size =
            policy.retention_bytes >= 0 && remaining.saturating_sub(seg.bytes) >= policy.retention_bytes as u64;
        if !(by_time || by_size) {
            break;
        }
        remaining = remaining.saturating_sub(seg.bytes);
        n += 1;
    }
    n
}

/// Largest timestamp per segment, from the index (segments' entries are
/// contiguous and in order).
fn largest_timestamps(segments: &[SegmentInfo], entries: &std::collections::VecDeque<Entry>) -> Vec<i64> {
    let mut out = Vec::with_capacity(segments.len());
    let mut it = entries.iter().peekable();
    for seg in segments {
        let mut max = -1i64;
        while let Some(e) = it.next_if(|e| e.segment_base <= seg.base) {
            if e.segment_base == seg.base {
                max = max.max(e.max_timestamp);
            }
        }
        out.push(if max >= 0 { max } else { seg.modified_ms.min(i64::MAX as u64) as i64 });
    }
    out
}

impl Partition {
    /// Deletes the segments retention allows, moves the log start offset,
    /// and expires idle producers. Runs on a blocking thread (it deletes
    /// files, and may fsync when it rolls). Returns how many segments were
    /// deleted.
    pub(super) fn apply_retention(&self, policy: RetentionPolicy, now_ms: i64) -> usize {
        let mut s = self.lock();
        if s.deleted || s.failed.is_some() {
            return 0;
        }
        s.producers.expire(now_ms);
        let segments = s.log.segments();
        let active_visible = self.high_watermark(&s) >= s.next_offset;
        let timestamps = largest_timestamps(&segments, &s.entries);
        let n = segments_to_delete(&segments, &timestamps, policy, now_ms, active_visible);
        if n == 0 {
            return 0;
        }
        let warn = |what: &str, e: &std::io::Error| {
            tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "retention could not {what}");
        };
        if segments.get(n..).unwrap_or_default().iter().all(|seg| seg.bytes == 0) {
            if let Err(e) = write_log_start(&**s.log.disk(), &self.dir, s.next_offset) {
                warn("persist the log start offset", &e);
                return 0;
            }
        }
        if n >= segments.len() {
            if let Err(e) = s.log.roll_active() {
                warn("roll the active segment", &e);
                return 0;
            }
            s.active = ActiveSegment::empty(s.log.active_base(), now_ms);
        }
        let mut deleted = 0;
        for _ in 0..n {
            match s.log.delete_oldest_segment() {
                Ok(Some(_)) => deleted += 1,
                Ok(None) => break,
                Err(e) => {
                    warn("delete a segment", &e);
                    break;
                }
            }
        }
        // A deletion that failed after removing its file still moved the
        // log start (see `Log::delete_oldest_segment`).
        let moved = deleted > 0 || s.log.start() > s.first_index;
        if moved {
            s.forget_deleted();
            // A roll fsyncs what it closes: everything below it is durable.
            let synced = s.log.synced();
            s.durable_offset = s.durable_offset.max(s.offset_of_index(synced));
            tracing::info!(
                topic = %self.topic,
                partition = self.index,
                segments = deleted,
                log_start_offset = s.log_start,
                "retention deleted old segments"
            );
        }
        drop(s);
        if moved {
            self.synced.notify_waiters();
            self.data.notify_waiters();
        }
        deleted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FsyncPolicy;
    use crate::error_code::ErrorCode;
    use crate::storage::LogOptions;
    use crate::topics::batch::test_batches::batch;
    use crate::topics::batch::validate_produced;
    use crate::topics::partition::Offsets;

    const DAY: i64 = 86_400_000;

    fn open(dir: &std::path::Path, fsync: FsyncPolicy, segment_ms: i64) -> Partition {
        let options = LogOptions::new(1 << 20, false);
        Partition::open("t", 0, dir, options, fsync, segment_ms, 0).unwrap()
    }

    fn produce(p: &Partition, ts: i64, now_ms: i64) -> i64 {
        p.append(validate_produced(Some(&batch(&[b"a", b"b"], ts, None)), 9, 1 << 20).unwrap(), now_ms)
            .unwrap()
            .base_offset
    }

    fn seg(base: u64, bytes: u64) -> SegmentInfo {
        SegmentInfo { base, bytes, modified_ms: 0 }
    }

    const KEEP: RetentionPolicy = RetentionPolicy { retention_ms: -1, retention_bytes: -1 };

    #[test]
    fn time_retention_deletes_old_segments_oldest_first() {
        let segs = [seg(0, 10), seg(5, 10), seg(9, 10), seg(12, 10)];
        let ts = [100, 200, 900, 950];
        let p = RetentionPolicy { retention_ms: 500, ..KEEP };
        assert_eq!(segments_to_delete(&segs, &ts, p, 1000, true), 2);
        // A young segment stops the walk even if later ones are old.
        assert_eq!(segments_to_delete(&segs, &[100, 900, 100, 100], p, 1000, true), 1);
        assert_eq!(segments_to_delete(&segs, &ts, KEEP, i64::MAX, true), 0);
    }

    #[test]
    fn size_retention_keeps_at_least_retention_bytes() {
        let segs = [seg(0, 10), seg(5, 10), seg(9, 10), seg(12, 10)];
        let ts = [0; 4];
        let p = RetentionPolicy { retention_bytes: 15, ..KEEP };
        assert_eq!(segments_to_delete(&segs, &ts, p, 0, true), 2);
        let p = RetentionPolicy { retention_bytes: 0, ..KEEP };
        assert_eq!(segments_to_delete(&segs, &ts, p, 0, true), 4, "retention.bytes = 0 keeps nothing, as in Kafka");
    }

    #[test]
    fn the_active_segment_is_deletable_only_when_visible_and_not_empty() {
        let p = RetentionPolicy { retention_ms: 0, ..KEEP };
        let segs = [seg(0, 10), seg(5, 10)];
        assert_eq!(segments_to_delete(&segs, &[0, 0], p, 1000, true), 2);
        assert_eq!(segments_to_delete(&segs, &[0, 0], p, 1000, false), 1, "data above the high watermark stays");
        let segs = [seg(0, 10), seg(5, 10), seg(9, 0)];
        assert_eq!(segments_to_delete(&segs, &[0, 0, 0], p, 1000, true), 2, "an empty active segment stays");
    }

    #[test]
    fn time_retention_empties_a_log_whose_only_segment_is_active_and_offsets_continue_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path(), FsyncPolicy::Never, 7 * DAY);
        for _ in 0..3 {
            produce(&p, 1_000, 1_000);
        }
        assert_eq!(p.lock().log.segments().len(), 1, "one segment, the active one");
        let policy = RetentionPolicy { retention_ms: DAY, ..KEEP };
        assert_eq!(p.apply_retention(policy, 1_010 + DAY), 0, "not older than retention.ms yet");
        assert_eq!(p.apply_retention(policy, 1_011 + DAY), 1);
        assert_eq!(p.offsets(), Offsets { log_start: 6, high_watermark: 6, log_end: 6 });
        assert_eq!(p.read(0, 100, true).unwrap_err(), ErrorCode::OFFSET_OUT_OF_RANGE);
        assert!(p.read(6, 100, true).unwrap().bytes.is_empty());
        assert_eq!(p.apply_retention(policy, 10 * DAY), 0, "an empty active segment is kept");
        drop(p);
        // The log end survives a restart although no batch is stored.
        let p = open(dir.path(), FsyncPolicy::Never, 7 * DAY);
        assert_eq!(p.offsets(), Offsets { log_start: 6, high_watermark: 6, log_end: 6 });
        assert_eq!(produce(&p, 2 * DAY, 2 * DAY), 6);
        drop(p);
        let p = open(dir.path(), FsyncPolicy::Never, 7 * DAY);
        assert_eq!(p.offsets(), Offsets { log_start: 6, high_watermark: 8, log_end: 8 });
    }

    #[test]
    fn under_fsync_always_retention_waits_until_the_active_segment_is_visible() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path(), FsyncPolicy::Always, 7 * DAY);
        produce(&p, 1_000, 1_000);
        let policy = RetentionPolicy { retention_ms: 0, ..KEEP };
        assert_eq!(p.apply_retention(policy, DAY), 0, "not durable, so not visible: kept");
        p.sync_now();
        assert_eq!(p.apply_retention(policy, DAY), 1);
        assert_eq!(p.offsets(), Offsets { log_start: 2, high_watermark: 2, log_end: 2 });
    }

    #[test]
    fn the_active_segment_rolls_once_batch_timestamps_pass_segment_ms() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path(), FsyncPolicy::Never, 1_000);
        produce(&p, 5_000, 0);
        produce(&p, 6_000, 0);
        assert_eq!(p.lock().log.segments().len(), 1, "exactly segment.ms later: not yet");
        produce(&p, 6_011, 0);
        assert_eq!(p.lock().log.segments().len(), 2, "the batch's max timestamp is 6_021");
        // A later batch is compared with the first batch of the new segment.
        produce(&p, 7_000, 0);
        assert_eq!(p.lock().log.segments().len(), 2);
        // Closed segments of an expired time range are then deleted by time alone.
        let policy = RetentionPolicy { retention_ms: DAY, ..KEEP };
        assert_eq!(p.apply_retention(policy, 6_011 + DAY), 1);
        assert_eq!(p.offsets().log_start, 4);
    }

    #[test]
    fn without_timestamps_segment_age_counts_from_its_creation() {
        let s = ActiveSegment { base: 0, first_timestamp: Some(-1), created_ms: 100 };
        assert!(!s.roll_due(-1, 1_100, 1_000));
        assert!(s.roll_due(-1, 1_101, 1_000));
        assert!(!ActiveSegment::empty(0, 0).roll_due(i64::MAX, i64::MAX, 1), "an empty segment never rolls");
    }
}
