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
//! Two differences, both forced by the storage engine: the active segment is
//! never deleted (Kafka rolls and deletes it), and the last segment holding a
//! batch is kept even if it is old, because the log end offset is only known
//! from the batches stored (a log with none would restart at offset 0 and
//! hand out offsets twice). Sizes count the storage frame headers (8 bytes
//! per batch) as well as the batches.

use super::partition::{Entry, Partition};
use crate::storage::SegmentInfo;

/// Effective retention settings of one topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    pub retention_ms: i64,
    pub retention_bytes: i64,
}

/// How many of the oldest `segments` to delete. `largest_ts[i]` is the
/// largest timestamp of segment `i`.
pub fn segments_to_delete(segments: &[SegmentInfo], largest_ts: &[i64], policy: RetentionPolicy, now_ms: i64) -> usize {
    let mut remaining: u64 = segments.iter().map(|s| s.bytes).sum();
    let mut n = 0;
    for (i, seg) in segments.iter().enumerate() {
        let later = segments.get(i + 1..).unwrap_or_default();
        if later.is_empty() || later.iter().all(|s| s.bytes == 0) {
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
    /// files). Returns how many segments were deleted.
    pub(super) fn apply_retention(&self, policy: RetentionPolicy, now_ms: i64) -> usize {
        let mut s = self.lock();
        if s.deleted || s.failed.is_some() {
            return 0;
        }
        s.producers.expire(now_ms);
        let segments = s.log.segments();
        let n = segments_to_delete(&segments, &largest_timestamps(&segments, &s.entries), policy, now_ms);
        let mut deleted = 0;
        for _ in 0..n {
            match s.log.delete_oldest_segment() {
                Ok(Some(_)) => deleted += 1,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "retention could not delete a segment");
                    break;
                }
            }
        }
        if deleted > 0 {
            s.forget_deleted();
            tracing::info!(
                topic = %self.topic,
                partition = self.index,
                segments = deleted,
                log_start_offset = s.log_start,
                "retention deleted old segments"
            );
        }
        deleted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: u64, bytes: u64) -> SegmentInfo {
        SegmentInfo { base, bytes, modified_ms: 0 }
    }

    const KEEP: RetentionPolicy = RetentionPolicy { retention_ms: -1, retention_bytes: -1 };

    #[test]
    fn time_retention_deletes_old_segments_oldest_first() {
        let segs = [seg(0, 10), seg(5, 10), seg(9, 10), seg(12, 10)];
        let ts = [100, 200, 900, 950];
        let p = RetentionPolicy { retention_ms: 500, ..KEEP };
        assert_eq!(segments_to_delete(&segs, &ts, p, 1000), 2);
        // A young segment stops the walk even if later ones are old.
        assert_eq!(segments_to_delete(&segs, &[100, 900, 100, 100], p, 1000), 1);
        assert_eq!(segments_to_delete(&segs, &ts, KEEP, i64::MAX), 0);
    }

    #[test]
    fn size_retention_keeps_at_least_retention_bytes() {
        let segs = [seg(0, 10), seg(5, 10), seg(9, 10), seg(12, 10)];
        let ts = [0; 4];
        let p = RetentionPolicy { retention_bytes: 15, ..KEEP };
        assert_eq!(segments_to_delete(&segs, &ts, p, 0), 2);
        let p = RetentionPolicy { retention_bytes: 0, ..KEEP };
        assert_eq!(segments_to_delete(&segs, &ts, p, 0), 3, "never the active segment");
    }

    #[test]
    fn the_last_segment_with_data_is_kept_when_the_active_one_is_empty() {
        let segs = [seg(0, 10), seg(5, 10), seg(9, 0)];
        let p = RetentionPolicy { retention_ms: 0, ..KEEP };
        assert_eq!(segments_to_delete(&segs, &[0, 0, 0], p, 1000), 1);
    }
}
