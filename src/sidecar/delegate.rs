//! Groups whose offsets are delegated to the upstream's coordinator
//! (`coordinator::delegation` holds the rules and the durable state): the
//! sidecar hands kcoord's offsets over, then sends the commits and fetches
//! kcoord admitted to the upstream coordinator of the group, and answers
//! the client with the upstream's results.
//!
//! - A TxnOffsetCommit goes up as the client sent it (same version,
//!   transactional id, producer id and epoch), but as a commit outside the
//!   group's generation (generation −1, no member id, no instance id): the
//!   upstream's coordinator does not know kcoord's members, and accepts
//!   such a commit for a group that is empty there, in the old coordinator
//!   (`GroupCoordinator.doTxnCommitOffsets`) and the new one
//!   (`validateTransactionalOffsetCommit` creates a simple group). The
//!   upstream keeps the offsets pending until EndTxn, as for any producer.
//! - An OffsetCommit goes up as a simple commit (generation −1), after
//!   kcoord's member and generation checks, so commits keep the order in
//!   which kcoord admitted them.
//! - An OffsetFetch asks the upstream with the client's `require_stable`.
//!
//! Upstream errors about the upstream's own view of the group (not
//! coordinator, loading, members it has there) would send a client after a
//! coordinator or a membership that is not the problem; they are answered
//! COORDINATOR_LOAD_IN_PROGRESS, which every client retries, and logged.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest as WireCommit, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};

use super::mirror::{Committed, Mirror};
use super::upstream::UpstreamError;
use crate::coordinator::messages::{
    FetchedPartition, FetchedTopic, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchGroup,
    OffsetFetchGroupResult, PartitionError, TopicErrors, TxnFields,
};
use crate::coordinator::offsets::commit_error_response;
use crate::coordinator::service::DelegatedDelete;
use crate::coordinator::Coordinator;
use crate::error_code::ErrorCode;
use crate::protocol::client::s;

/// Delegated groups remembered since start-up at most (see
/// `Mirror::delegated`); past it the oldest knowledge is dropped, which only
/// matters for a group being handed over at that moment.
const MAX_DELEGATED_GROUPS: usize = 1_000_000;

impl Mirror {
    fn remember_delegated(&self, group: &str) {
        let mut d = self.delegated.lock().unwrap_or_else(|p| p.into_inner());
        if d.len() >= MAX_DELEGATED_GROUPS {
            d.clear();
        }
        d.insert(group.to_string(), ());
    }

    /// Gives the upstream kcoord's offsets for a group that was just
    /// delegated, then drops them here. Holds the writer, so no
    /// write-through of the group is in flight meanwhile, and none follows:
    /// the group counts as delegated from before it takes the writer.
    pub(super) async fn hand_over(&self, coordinator: &Coordinator, group: &str) -> Result<(), ErrorCode> {
        self.remember_delegated(group);
        let _writer = self.writer.lock().await;
        self.pending().offsets.remove(group);
        let topics = match coordinator.offsets_to_hand_over(group).await {
            Err(_) => return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(None)) => return Ok(()),
            Ok(Ok(Some(t))) => t,
        };
        let offsets: BTreeMap<(String, i32), Committed> = topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let c = Committed { offset: p.offset, leader_epoch: p.leader_epoch, metadata: p.metadata.clone() };
                    ((t.name.clone(), p.partition), c)
                })
            })
            .collect();
        if !offsets.is_empty() && self.commit_upstream(group, &offsets).await.is_err() {
            metrics::counter!("kcoord_sidecar_delegated_handovers_total", "result" => "retry").increment(1);
            tracing::warn!(%group, "cannot hand the group's offsets over to the upstream yet; answering COORDINATOR_LOAD_IN_PROGRESS");
            return Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
        }
        match coordinator.offsets_handed_over(group).await {
            Ok(Ok(())) => {
                metrics::counter!("kcoord_sidecar_delegated_handovers_total", "result" => "ok").increment(1);
                tracing::info!(%group, offsets = offsets.len(), "handed the group's offsets over to the upstream's coordinator");
                Ok(())
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        }
    }

    /// Commits an admitted commit (or TxnOffsetCommit) upstream.
    pub(super) async fn forward_commit(
        &self,
        coordinator: &Coordinator,
        req: OffsetCommitRequest,
        txn: Option<TxnFields>,
        hand_over_first: bool,
    ) -> OffsetCommitResponse {
        let api = if txn.is_some() { "TxnOffsetCommit" } else { "OffsetCommit" };
        if hand_over_first {
            if let Err(e) = self.hand_over(coordinator, &req.group_id).await {
                metrics::counter!("kcoord_sidecar_delegated_requests_total", "api" => api, "result" => "error")
                    .increment(1);
                return commit_error_response(&req, e);
            }
        }
        let answered = match &txn {
            Some(t) => self.txn_commit_upstream(&req, t).await,
            None => self.plain_commit_upstream(&req).await,
        };
        let answered = match answered {
            Ok(a) => a,
            Err(e) => {
                metrics::counter!("kcoord_sidecar_delegated_requests_total", "api" => api, "result" => "error")
                    .increment(1);
                tracing::warn!(group = %req.group_id, error = %e, "{api} for a delegated group failed upstream; answering COORDINATOR_LOAD_IN_PROGRESS");
                return commit_error_response(&req, ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
            }
        };
        let response = OffsetCommitResponse {
            topics: req
                .topics
                .iter()
                .map(|t| TopicErrors {
                    name: t.name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| {
                            let upstream = answered
                                .get(&(t.name.clone(), p.partition))
                                .copied()
                                .unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR);
                            PartitionError { partition: p.partition, error: self.client_error(&req.group_id, upstream) }
                        })
                        .collect(),
                })
                .collect(),
        };
        let failed = response.topics.iter().flat_map(|t| &t.partitions).any(|p| !p.error.is_none());
        let result = if failed { "error" } else { "ok" };
        metrics::counter!("kcoord_sidecar_delegated_requests_total", "api" => api, "result" => result).increment(1);
        response
    }

    async fn txn_commit_upstream(
        &self,
        req: &OffsetCommitRequest,
        txn: &TxnFields,
    ) -> Result<HashMap<(String, i32), ErrorCode>, UpstreamError> {
        let wire = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s(&txn.transactional_id)))
            .with_group_id(GroupId(s(&req.group_id)))
            .with_producer_id(ProducerId(txn.producer_id))
            .with_producer_epoch(txn.producer_epoch)
            .with_generation_id(-1)
            .with_member_id(s(""))
            .with_group_instance_id(None)
            .with_topics(
                req.topics
                    .iter()
                    .map(|t| {
                        TxnOffsetCommitRequestTopic::default().with_name(TopicName(s(&t.name))).with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    TxnOffsetCommitRequestPartition::default()
                                        .with_partition_index(p.partition)
                                        .with_committed_offset(p.offset)
                                        .with_committed_leader_epoch(p.leader_epoch)
                                        .with_committed_metadata(p.metadata.as_deref().map(s))
                                })
                                .collect(),
                        )
                    })
                    .collect(),
            );
        // The client's own version: v5 (KIP-890) changes what the upstream verifies.
        let (_, resp) = self.upstream.call_coordinator(&req.group_id, &wire, txn.version, txn.version).await?;
        Ok(resp
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| ((t.name.0.to_string(), p.partition_index), ErrorCode(p.error_code)))
            })
            .collect())
    }

    async fn plain_commit_upstream(
        &self,
        req: &OffsetCommitRequest,
    ) -> Result<HashMap<(String, i32), ErrorCode>, UpstreamError> {
        let wire = WireCommit::default()
            .with_group_id(GroupId(s(&req.group_id)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(s(""))
            .with_retention_time_ms(req.retention_time_ms)
            .with_topics(
                req.topics
                    .iter()
                    .map(|t| {
                        OffsetCommitRequestTopic::default().with_name(TopicName(s(&t.name))).with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    OffsetCommitRequestPartition::default()
                                        .with_partition_index(p.partition)
                                        .with_committed_offset(p.offset)
                                        .with_committed_leader_epoch(p.leader_epoch)
                                        .with_committed_metadata(p.metadata.as_deref().map(s))
                                })
                                .collect(),
                        )
                    })
                    .collect(),
            );
        // v2–v9: by topic name, with a generation (as the write-through).
        let (_, resp) = self.upstream.call_coordinator(&req.group_id, &wire, 2, 9).await?;
        Ok(resp
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| ((t.name.0.to_string(), p.partition_index), ErrorCode(p.error_code)))
            })
            .collect())
    }

    /// Reads an admitted fetch's offsets from the upstream.
    pub(super) async fn forward_fetch(
        &self,
        coordinator: &Coordinator,
        group: OffsetFetchGroup,
        require_stable: bool,
        hand_over_first: bool,
    ) -> OffsetFetchGroupResult {
        let error_result = |error| OffsetFetchGroupResult { group_id: group.group_id.clone(), error, topics: vec![] };
        if hand_over_first {
            if let Err(e) = self.hand_over(coordinator, &group.group_id).await {
                metrics::counter!("kcoord_sidecar_delegated_requests_total", "api" => "OffsetFetch", "result" => "error")
                    .increment(1);
                return error_result(e);
            }
        }
        // All topics: named, since not every broker answers a null list.
        let asked: Vec<(String, Vec<i32>)> = match &group.topics {
            Some(topics) => topics.iter().map(|t| (t.name.clone(), t.partitions.clone())).collect(),
            None => self.catalog_topics(),
        };
        let answered = match self.upstream_offsets(&group.group_id, &asked, require_stable).await {
            Ok(a) => a,
            Err(e) => {
                metrics::counter!("kcoord_sidecar_delegated_requests_total", "api" => "OffsetFetch", "result" => "error")
                    .increment(1);
                tracing::warn!(group = %group.group_id, error = %e, "OffsetFetch for a delegated group failed upstream; answering COORDINATOR_LOAD_IN_PROGRESS");
                return error_result(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
            }
        };
        metrics::counter!("kcoord_sidecar_delegated_requests_total", "api" => "OffsetFetch", "result" => "ok")
            .increment(1);
        let mut by_partition: HashMap<(String, i32), FetchedPartition> = HashMap::new();
        for t in answered {
            for p in t.partitions {
                by_partition.insert(
                    (t.name.0.to_string(), p.partition_index),
                    FetchedPartition {
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default(),
                        error: self.client_error(&group.group_id, ErrorCode(p.error_code)),
                    },
                );
            }
        }
        let all = group.topics.is_none();
        let topics = asked
            .into_iter()
            .map(|(name, partitions)| {
                let partitions: Vec<FetchedPartition> = partitions
                    .into_iter()
                    .filter_map(|p| match by_partition.remove(&(name.clone(), p)) {
                        // Every partition asked for is answered; for "all
                        // topics", only those with an offset (or an error), as kcoord's own fetch.
                        Some(f) if !all || f.offset >= 0 || !f.error.is_none() => Some(f),
                        Some(_) => None,
                        None => (!all).then(|| FetchedPartition::none(p)),
                    })
                    .collect();
                FetchedTopic { name, partitions }
            })
            .filter(|t| !all || !t.partitions.is_empty())
            .collect();
        OffsetFetchGroupResult { group_id: group.group_id, error: ErrorCode::NONE, topics }
    }

    /// Deletes upstream the partitions kcoord's checks let go (answered NONE
    /// in `checked`), and answers with the upstream's results for them.
    /// The group has no offsets upstream at all (GROUP_ID_NOT_FOUND there):
    /// nothing to delete, which Kafka answers NONE for a group it knows.
    pub(super) async fn forward_offset_delete(
        &self,
        coordinator: &Coordinator,
        delete: DelegatedDelete,
    ) -> OffsetDeleteResponse {
        let DelegatedDelete { group_id, mut checked, hand_over_first } = delete;
        let group = group_id.as_str();
        let failed = |error| {
            metrics::counter!("kcoord_sidecar_delegated_requests_total", "api" => "OffsetDelete", "result" => "error")
                .increment(1);
            OffsetDeleteResponse { error, topics: vec![] }
        };
        if !checked.error.is_none() {
            return checked;
        }
        if hand_over_first {
            if let Err(e) = self.hand_over(coordinator, group).await {
                return failed(e);
            }
        }
        let asked: Vec<(&str, Vec<i32>)> = checked
            .topics
            .iter()
            .map(|t| {
                (t.name.as_str(), t.partitions.iter().filter(|p| p.error.is_none()).map(|p| p.partition).collect())
            })
            .filter(|(_, parts): &(&str, Vec<i32>)| !parts.is_empty())
            .collect();
        if asked.is_empty() {
            return checked;
        }
        let answer = match self.offset_delete_upstream(group, asked.iter().map(|(t, p)| (*t, p.iter().copied()))).await
        {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(%group, error = %e, "OffsetDelete for a delegated group failed upstream; answering COORDINATOR_LOAD_IN_PROGRESS");
                return failed(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
            }
        };
        match ErrorCode(answer.error_code) {
            ErrorCode::NONE => {}
            ErrorCode::GROUP_ID_NOT_FOUND => return checked,
            e => return failed(self.client_error(group, e)),
        }
        let answered: HashMap<(&str, i32), ErrorCode> = answer
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| ((t.name.0.as_str(), p.partition_index), ErrorCode(p.error_code)))
            })
            .collect();
        for t in &mut checked.topics {
            for p in t.partitions.iter_mut().filter(|p| p.error.is_none()) {
                let upstream =
                    answered.get(&(t.name.as_str(), p.partition)).copied().unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR);
                p.error = self.client_error(group, upstream);
            }
        }
        let refused = checked.topics.iter().flat_map(|t| &t.partitions).any(|p| !p.error.is_none());
        let result = if refused { "error" } else { "ok" };
        metrics::counter!("kcoord_sidecar_delegated_requests_total", "api" => "OffsetDelete", "result" => result)
            .increment(1);
        checked
    }

    /// Every upstream topic with all its partitions.
    fn catalog_topics(&self) -> Vec<(String, Vec<i32>)> {
        self.catalog.list().into_iter().map(|t| (t.name, (0..t.partitions).collect())).collect()
    }

    /// An upstream error as the client should see it (module docs).
    fn client_error(&self, group: &str, upstream: ErrorCode) -> ErrorCode {
        match upstream.0 {
            14..=16 => {
                self.upstream.forget_coordinator(group);
                ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
            }
            // The upstream's own members of the group (or a group the
            // upstream lost): nothing the client could fix.
            22 | 25 | 27 | 69 | 82 => {
                tracing::warn!(%group, error = ?upstream,
                    "the upstream's coordinator refuses a delegated commit (does the group still have members there?); answering COORDINATOR_LOAD_IN_PROGRESS");
                ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
            }
            _ => upstream,
        }
    }
}
