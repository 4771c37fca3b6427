//! ListOffsets: offsets by special timestamp or by time, per Kafka's
//! `UnifiedLog.fetchOffsetByTimestamp` and `ReplicaManager.fetchOffset`.
//!
//! | timestamp | from | answer |
//! |---|---|---|
//! | -2 earliest | v1 | log start offset |
//! | -1 latest | v1 | high watermark (= last stable offset) |
//! | -3 max timestamp | v7 | the first record with the largest timestamp |
//! | -4 earliest local | v8 | log start offset (all data is local) |
//! | -5 latest tiered | v9 | offset -1 (no tiered storage, as Kafka) |
//! | t >= 0 | v1 | the first record with timestamp >= t |
//!
//! Any other negative timestamp, or one newer than the request version,
//! gets UNSUPPORTED_VERSION; a partition named twice gets INVALID_REQUEST.
//! Lookups walk batch headers in the index and read one batch; inside an
//! uncompressed batch the exact record is found, inside a compressed one
//! (whose records we never decompress) the batch stands for its records:
//! its base offset for a time lookup, its last offset for the max timestamp.
//! Found offsets at or beyond the high watermark count as not found.

use super::batch::{self, BatchHeader};
use super::fetch::check_leader_epoch;
use super::partition::{Partition, State, LEADER_EPOCH};
use super::service::DataPlane;
use crate::error_code::ErrorCode;

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL: i64 = -4;
pub const LATEST_TIERED: i64 = -5;

/// The first version that may ask for a special timestamp.
fn min_version(timestamp: i64) -> Option<i16> {
    match timestamp {
        LATEST | EARLIEST => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL => Some(8),
        LATEST_TIERED => Some(9),
        _ => None,
    }
}

#[derive(Debug, Clone)]
pub struct ListOffsetsRequest {
    pub version: i16,
    pub isolation_level: i8,
    pub topics: Vec<ListOffsetsTopic>,
}

#[derive(Debug, Clone)]
pub struct ListOffsetsTopic {
    pub name: String,
    pub partitions: Vec<ListOffsetsPartition>,
}

#[derive(Debug, Clone, Copy)]
pub struct ListOffsetsPartition {
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsResponse {
    pub topics: Vec<ListedTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTopic {
    pub name: String,
    pub partitions: Vec<ListedPartition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedPartition {
    pub partition: i32,
    pub error: ErrorCode,
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: i32,
}

impl ListedPartition {
    fn found(partition: i32, timestamp: i64, offset: i64, leader_epoch: i32) -> Self {
        ListedPartition { partition, error: ErrorCode::NONE, timestamp, offset, leader_epoch }
    }

    fn not_found(partition: i32) -> Self {
        Self::found(partition, -1, -1, -1)
    }

    pub fn error(partition: i32, error: ErrorCode) -> Self {
        ListedPartition { partition, error, timestamp: -1, offset: -1, leader_epoch: -1 }
    }
}

impl DataPlane {
    pub fn list_offsets(&self, req: &ListOffsetsRequest) -> ListOffsetsResponse {
        let mut seen = std::collections::HashMap::<(&str, i32), usize>::new();
        for t in &req.topics {
            for p in &t.partitions {
                *seen.entry((t.name.as_str(), p.partition)).or_default() += 1;
            }
        }
        let topics = req
            .topics
            .iter()
            .map(|t| {
                let logs = self.topic(&t.name);
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        if seen.get(&(t.name.as_str(), p.partition)).copied().unwrap_or(0) > 1 {
                            return ListedPartition::error(p.partition, ErrorCode::INVALID_REQUEST);
                        }
                        if p.timestamp < 0 && min_version(p.timestamp).is_none_or(|v| req.version < v) {
                            return ListedPartition::error(p.partition, ErrorCode::UNSUPPORTED_VERSION);
                        }
                        let Some(log) = logs.as_ref().and_then(|l| l.partition(p.partition)) else {
                            return ListedPartition::error(p.partition, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
                        };
                        if let Err(e) = check_leader_epoch(p.current_leader_epoch) {
                            return ListedPartition::error(p.partition, e);
                        }
                        log.offset_for(p.partition, p.timestamp)
                    })
                    .collect();
                ListedTopic { name: t.name.clone(), partitions }
            })
            .collect();
        ListOffsetsResponse { topics }
    }
}

impl Partition {
    /// Answers one ListOffsets lookup (the timestamp is known valid).
    pub fn offset_for(&self, partition: i32, timestamp: i64) -> ListedPartition {
        let s = self.lock();
        if s.deleted {
            return ListedPartition::error(partition, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        }
        let hw = self.high_watermark(&s);
        let result = match timestamp {
            EARLIEST | EARLIEST_LOCAL => Ok(Some((-1, s.log_start))),
            LATEST => Ok(Some((-1, hw))),
            LATEST_TIERED => return ListedPartition::not_found(partition),
            MAX_TIMESTAMP => max_timestamp(&s, hw),
            t => by_timestamp(&s, hw, t),
        };
        match result {
            Ok(Some((ts, offset))) if timestamp < 0 || offset < hw => {
                ListedPartition::found(partition, ts, offset, LEADER_EPOCH)
            }
            Ok(_) => ListedPartition::not_found(partition),
            Err(e) => {
                tracing::error!(topic = %self.topic, partition, error = %e, "partition log read failed");
                ListedPartition::error(partition, ErrorCode::KAFKA_STORAGE_ERROR)
            }
        }
    }
}

type Lookup = std::io::Result<Option<(i64, i64)>>;

/// Reads a stored batch and its header.
fn stored(s: &State, e: &super::partition::Entry) -> std::io::Result<(Vec<u8>, BatchHeader)> {
    let bytes = s.read_batch(e)?;
    let h = batch::read_stored(&bytes, bytes.len()).map_err(std::io::Error::other)?;
    Ok((bytes, h))
}

/// The first record carrying the largest timestamp below the high watermark.
fn max_timestamp(s: &State, hw: i64) -> Lookup {
    let mut best: Option<&super::partition::Entry> = None;
    for e in s.entries.iter().take_while(|e| e.base_offset < hw) {
        if best.is_none_or(|b| e.max_timestamp > b.max_timestamp) {
            best = Some(e);
        }
    }
    let Some(e) = best else { return Ok(None) };
    let (bytes, h) = stored(s, e)?;
    let offset = batch::record_times(&bytes, &h)
        .and_then(|records| records.into_iter().find(|(_, ts)| *ts == h.max_timestamp).map(|(o, _)| o))
        .unwrap_or_else(|| h.last_offset());
    Ok(Some((h.max_timestamp, offset)))
}

/// The first record (at or after the log start) with a timestamp >= `target`.
fn by_timestamp(s: &State, hw: i64, target: i64) -> Lookup {
    let Some(e) = s.entries.iter().take_while(|e| e.base_offset < hw).find(|e| e.max_timestamp >= target) else {
        return Ok(None);
    };
    let (bytes, h) = stored(s, e)?;
    Ok(Some(match batch::record_times(&bytes, &h) {
        Some(records) => match records.into_iter().find(|(o, ts)| *ts >= target && *o >= s.log_start) {
            Some((o, ts)) => (ts, o),
            None => return Ok(None),
        },
        None => (h.max_timestamp, h.base_offset.max(s.log_start)),
    }))
}
