//! Produce: validate each partition's batch, append it, and answer once it
//! is durable.
//!
//! Kafka's order of checks per partition: acks value, topic and partition,
//! the batch itself (`batch::validate_produced`, which decompresses
//! compressed batches to check their records, at most
//! `server.max_request_bytes` per request in all), then the producer's
//! sequence (`producer_state`). Every partition of a request is appended
//! first and the durability waits run together, so one group-commit fsync
//! per partition covers the whole request (and every other request appended
//! meanwhile).
//!
//! acks = 0 gets no response at all; but, as Kafka does, a failed acks = 0
//! write closes the connection, the only way to tell such a producer to
//! refresh its metadata.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::join_all;

use super::batch::validate_produced;
use super::partition::Partition;
use super::service::DataPlane;
use crate::config::FsyncPolicy;
use crate::error_code::ErrorCode;

/// A Produce request, as kcoord reads it (v3+: RecordBatch v2).
#[derive(Debug, Clone)]
pub struct ProduceRequest {
    pub version: i16,
    pub acks: i16,
    pub transactional_id: Option<String>,
    pub topics: Vec<ProduceTopic>,
}

#[derive(Debug, Clone)]
pub struct ProduceTopic {
    pub name: String,
    pub partitions: Vec<ProducePartition>,
}

#[derive(Debug, Clone)]
pub struct ProducePartition {
    pub index: i32,
    pub records: Option<Bytes>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceResponse {
    pub topics: Vec<ProducedTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducedTopic {
    pub name: String,
    pub partitions: Vec<ProducedPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducedPartition {
    pub index: i32,
    pub error: ErrorCode,
    pub base_offset: i64,
    /// -1: kcoord keeps the producer's CreateTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    pub error_message: Option<String>,
}

impl ProducedPartition {
    pub fn error(index: i32, error: ErrorCode, message: Option<String>) -> Self {
        ProducedPartition {
            index,
            error,
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: -1,
            error_message: message,
        }
    }
}

/// A durability wait still owed for a partition answer.
struct Pending {
    topic: usize,
    partition: usize,
    log: Arc<Partition>,
    durable_at: u64,
}

impl DataPlane {
    /// Serves a Produce request; `Ok(None)` means "send no response"
    /// (acks = 0), `Err` means "close the connection" (a failed acks = 0
    /// write).
    pub async fn produce(&self, req: ProduceRequest) -> Result<Option<ProduceResponse>, String> {
        let valid_acks = matches!(req.acks, -1..=1);
        let mut pending = Vec::new();
        let mut budget = self.settings.decompress_budget;
        let mut topics = Vec::with_capacity(req.topics.len());
        for (ti, t) in req.topics.iter().enumerate() {
            let logs = self.topic(&t.name);
            let mut partitions = Vec::with_capacity(t.partitions.len());
            for (pi, p) in t.partitions.iter().enumerate() {
                let answer = if !valid_acks {
                    ProducedPartition::error(p.index, ErrorCode::INVALID_REQUIRED_ACKS, None)
                } else {
                    match logs.as_ref().and_then(|l| l.partition(p.index)) {
                        None => ProducedPartition::error(p.index, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, None),
                        Some(log) => match self.append_one(log, p, req.version, &mut budget) {
                            Ok((answer, durable_at)) => {
                                if self.settings.fsync == FsyncPolicy::Always {
                                    pending.push(Pending { topic: ti, partition: pi, log: log.clone(), durable_at });
                                }
                                answer
                            }
                            Err(answer) => answer,
                        },
                    }
                };
                partitions.push(answer);
            }
            topics.push(ProducedTopic { name: t.name.clone(), partitions });
        }
        let mut resp = ProduceResponse { topics };
        if req.acks == 0 {
            for p in &pending {
                p.log.start_sync(&self.fatal);
            }
            return match first_error(&resp) {
                None => Ok(None),
                Some((name, index, error)) => Err(format!(
                    "acks=0 produce to {name}-{index} failed with {error}; closing the connection as Kafka does"
                )),
            };
        }
        let waits = pending.iter().map(|p| p.log.wait_durable(p.durable_at, &self.fatal));
        for (p, result) in pending.iter().zip(join_all(waits).await) {
            if let Err(error) = result {
                if let Some(answer) = resp.topics.get_mut(p.topic).and_then(|t| t.partitions.get_mut(p.partition)) {
                    *answer = ProducedPartition::error(answer.index, error, None);
                }
            }
        }
        Ok(Some(resp))
    }

    /// Validates and appends one partition's batch; what decompressing it
    /// took comes off the request's `budget`.
    fn append_one(
        &self,
        log: &Partition,
        p: &ProducePartition,
        version: i16,
        budget: &mut usize,
    ) -> Result<(ProducedPartition, u64), ProducedPartition> {
        let batch = validate_produced(p.records.as_deref(), version, *budget)
            .map_err(|e| ProducedPartition::error(p.index, e.code, Some(e.message)))?;
        *budget -= batch.decompressed;
        let appended = log
            .append(batch, crate::wall_clock::wall_clock_ms())
            .map_err(|e| ProducedPartition::error(p.index, e.code, e.message))?;
        Ok((
            ProducedPartition {
                index: p.index,
                error: ErrorCode::NONE,
                base_offset: appended.base_offset,
                log_append_time_ms: -1,
                log_start_offset: appended.log_start,
                error_message: None,
            },
            appended.durable_at,
        ))
    }
}

fn first_error(resp: &ProduceResponse) -> Option<(&str, i32, ErrorCode)> {
    resp.topics
        .iter()
        .find_map(|t| t.partitions.iter().find(|p| !p.error.is_none()).map(|p| (t.name.as_str(), p.index, p.error)))
}
