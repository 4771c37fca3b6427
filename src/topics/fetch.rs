//! Fetch: whole stored batches from the one holding the fetch offset, with
//! Kafka's long polling and size rules, and no fetch sessions.
//!
//! - Long polling: if fewer than `min_bytes` are readable and nothing went
//!   wrong, the request parks until a partition it reads gets new data
//!   (each partition's `Notify`), `max_wait_ms` passes, or the daemon shuts
//!   down. At most [`MAX_PARKED_FETCHES`](super::service::MAX_PARKED_FETCHES) wait at once and no wait exceeds
//!   [`MAX_WAIT`]; beyond that a fetch is answered with what there is.
//! - Sizes (KIP-74): partitions are read in request order, each up to its
//!   `partition_max_bytes` and the request's remaining `max_bytes` (capped
//!   at Kafka's `fetch.max.bytes` default), but the first batch of the first
//!   partition that has data is returned even if it is larger, so a
//!   consumer always makes progress.
//! - Sessions: every answer has session id 0, which every client takes as
//!   "sessionless, send full fetches"; an incremental fetch (epoch > 0)
//!   gets FETCH_SESSION_ID_NOT_FOUND, as from a Kafka broker whose session
//!   cache has no room.
//! - Errors carry Kafka's -1 offsets; records are never null.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::select_all;
use tokio::sync::futures::Notified;
use uuid::Uuid;

use super::partition::{Partition, LEADER_EPOCH};
use super::service::{DataPlane, TopicLogs};
use crate::error_code::ErrorCode;

/// Longest a fetch is parked, whatever `max_wait_ms` says.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// Kafka's default broker `fetch.max.bytes`: the most one response carries
/// (apart from a single oversized first batch).
pub const FETCH_MAX_BYTES: usize = 57_671_680;

#[derive(Debug, Clone)]
pub struct FetchRequest {
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub isolation_level: i8,
    pub session_id: i32,
    pub session_epoch: i32,
    pub topics: Vec<FetchTopic>,
}

/// A topic by name (v4–v12) or by id (v13+: `name` is None).
#[derive(Debug, Clone)]
pub struct FetchTopic {
    pub name: Option<String>,
    pub id: Uuid,
    pub partitions: Vec<FetchPartition>,
}

#[derive(Debug, Clone)]
pub struct FetchPartition {
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    pub error: ErrorCode,
    pub session_id: i32,
    /// read_committed: aborted transactions are an empty list (else null).
    pub read_committed: bool,
    pub topics: Vec<FetchedTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedTopic {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<FetchedPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    pub partition: i32,
    pub error: ErrorCode,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub records: Bytes,
}

impl FetchedPartition {
    pub fn error(partition: i32, error: ErrorCode) -> Self {
        FetchedPartition {
            partition,
            error,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            records: Bytes::new(),
        }
    }
}

/// Kafka's leader-epoch check (`Partition.localLogWithEpochOrThrow`): -1
/// means "not checked"; our epoch is always [`LEADER_EPOCH`].
pub fn check_leader_epoch(requested: i32) -> Result<(), ErrorCode> {
    if requested == -1 || requested == LEADER_EPOCH {
        Ok(())
    } else if requested < LEADER_EPOCH {
        Err(ErrorCode::FENCED_LEADER_EPOCH)
    } else {
        Err(ErrorCode::UNKNOWN_LEADER_EPOCH)
    }
}

/// One requested partition, resolved once per request.
struct Target {
    topic: usize,
    req: FetchPartition,
    log: Result<Arc<Partition>, ErrorCode>,
}

impl DataPlane {
    pub async fn fetch(&self, req: FetchRequest) -> FetchResponse {
        let read_committed = req.isolation_level == 1;
        if req.session_epoch != 0 && req.session_epoch != -1 {
            return FetchResponse {
                error: ErrorCode::FETCH_SESSION_ID_NOT_FOUND,
                session_id: 0,
                read_committed,
                topics: vec![],
            };
        }
        let (topics, targets) = self.resolve(&req);
        let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT);
        let deadline = tokio::time::Instant::now() + wait;
        let mut closing = self.closing.subscribe();
        let mut permit = None;
        loop {
            // Register for wake-ups before looking, so data appended between
            // the look and the wait is not missed.
            let mut wakeups: Vec<Pin<Box<Notified<'_>>>> =
                targets.iter().filter_map(|t| t.log.as_ref().ok()).map(|p| Box::pin(p.data.notified())).collect();
            for w in &mut wakeups {
                w.as_mut().enable();
            }
            let ready = wait.is_zero()
                || wakeups.is_empty()
                || self.is_closing()
                || tokio::time::Instant::now() >= deadline
                || self.readable_enough(&targets, req.min_bytes);
            if ready {
                break;
            }
            if permit.is_none() {
                match self.parked.try_acquire() {
                    Ok(p) => permit = Some(p),
                    Err(_) => break,
                }
            }
            tokio::select! {
                _ = select_all(wakeups) => {}
                _ = tokio::time::sleep_until(deadline) => {}
                _ = closing.wait_for(|c| *c) => {}
            }
        }
        drop(permit);
        self.read_all(&req, topics, &targets, read_committed)
    }

    /// Resolves every requested partition to its log or an error.
    fn resolve(&self, req: &FetchRequest) -> (Vec<FetchedTopic>, Vec<Target>) {
        let mut topics = Vec::with_capacity(req.topics.len());
        let mut targets = Vec::new();
        for (ti, t) in req.topics.iter().enumerate() {
            let (logs, missing): (Option<Arc<TopicLogs>>, ErrorCode) = match &t.name {
                Some(name) => (self.topic(name), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
                None => (self.topic_by_id(&t.id), ErrorCode::UNKNOWN_TOPIC_ID),
            };
            for p in &t.partitions {
                let log = match &logs {
                    None => Err(missing),
                    Some(l) => l
                        .partition(p.partition)
                        .cloned()
                        .ok_or(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                        .and_then(|log| check_leader_epoch(p.current_leader_epoch).map(|()| log)),
                };
                targets.push(Target { topic: ti, req: p.clone(), log });
            }
            topics.push(FetchedTopic {
                name: t.name.clone().unwrap_or_default(),
                id: t.id,
                partitions: Vec::with_capacity(t.partitions.len()),
            });
        }
        (topics, targets)
    }

    /// Kafka answers at once when `min_bytes` are readable or any
    /// partition has an error.
    fn readable_enough(&self, targets: &[Target], min_bytes: i32) -> bool {
        let need = usize::try_from(min_bytes).unwrap_or(0);
        let mut total = 0usize;
        for t in targets {
            let log = match &t.log {
                Ok(log) => log,
                Err(_) => return true,
            };
            match log.available(t.req.fetch_offset, need.saturating_sub(total)) {
                Ok(n) => total = total.saturating_add(n),
                Err(_) => return true,
            }
            if total >= need {
                return true;
            }
        }
        total >= need
    }

    fn read_all(
        &self,
        req: &FetchRequest,
        mut topics: Vec<FetchedTopic>,
        targets: &[Target],
        read_committed: bool,
    ) -> FetchResponse {
        let mut limit = usize::try_from(req.max_bytes).unwrap_or(0).min(FETCH_MAX_BYTES);
        let mut min_one = true;
        for t in targets {
            let answer = match &t.log {
                Err(e) => FetchedPartition::error(t.req.partition, *e),
                Ok(log) => {
                    let max = usize::try_from(t.req.partition_max_bytes).unwrap_or(0).min(limit);
                    match log.read(t.req.fetch_offset, max, min_one) {
                        Err(e) => FetchedPartition::error(t.req.partition, e),
                        Ok(read) => {
                            if !read.bytes.is_empty() {
                                min_one = false;
                                limit = limit.saturating_sub(read.bytes.len());
                            }
                            let o = read.offsets;
                            FetchedPartition {
                                partition: t.req.partition,
                                error: ErrorCode::NONE,
                                high_watermark: o.high_watermark,
                                last_stable_offset: o.high_watermark,
                                log_start_offset: o.log_start,
                                records: Bytes::from(read.bytes),
                            }
                        }
                    }
                }
            };
            if let Some(topic) = topics.get_mut(t.topic) {
                topic.partitions.push(answer);
            }
        }
        FetchResponse { error: ErrorCode::NONE, session_id: 0, read_committed, topics }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_epochs_are_checked_like_kafka() {
        assert_eq!(check_leader_epoch(-1), Ok(()));
        assert_eq!(check_leader_epoch(0), Ok(()));
        assert_eq!(check_leader_epoch(1), Err(ErrorCode::UNKNOWN_LEADER_EPOCH));
        assert_eq!(check_leader_epoch(-2), Err(ErrorCode::FENCED_LEADER_EPOCH));
    }
}
