//! Sidecar mode: groups whose offsets are delegated to the upstream's
//! group coordinator.
//!
//! A TxnOffsetCommit cannot be served by kcoord's own offsets: the
//! transaction coordinator stays upstream, and only the upstream's group
//! coordinator learns from it whether the transaction committed or aborted.
//! So kcoord admits the commit (member, generation, group state: Kafka's
//! transactional validation) and the sidecar forwards it upstream. From the
//! first one on, the group is *delegated*: a durable record says so, its
//! offsets are read from and committed to the upstream (after kcoord's
//! validation), and kcoord keeps coordinating its members.
//!
//! Before the first request after delegation reaches the upstream, kcoord's
//! own offsets for the group are *handed over*: committed upstream as a
//! simple commit, then dropped here, with a second record saying so. Until
//! then every request for the group's offsets hands them over first, so the
//! upstream never serves positions older than kcoord acknowledged, and no
//! commit forwarded later can be overwritten by the handover.
//!
//! Delegation ends when the group is deleted (DeleteGroups).

use super::core::Cx;
use super::messages::{
    CommitPartition, CommitTopic, OffsetCommitRequest, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchGroup,
};
use super::offsets::{self, CommitKind};
use super::records::{DelegationValue, Record};
use super::Groups;
use crate::error_code::ErrorCode;

/// A request for a delegated group that may go to the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// While kcoord still holds offsets the upstream has not been given,
    /// they must be handed over before the request goes upstream.
    pub hand_over_first: bool,
}

/// Admits a TxnOffsetCommit (validation only, nothing of it is written
/// here) and makes the group delegated if it was not. A group with no
/// offsets here has nothing to hand over.
pub fn admit_transactional(groups: &mut Groups, req: &OffsetCommitRequest, cx: &mut Cx) -> Result<Admitted, ErrorCode> {
    let created = offsets::admit_commit(groups, req, CommitKind::Transactional, cx)?;
    if let Some(d) = cx.store.delegation(&req.group_id) {
        return Ok(Admitted { hand_over_first: !d.handed_over });
    }
    let handed_over = !cx.store.has_offsets(&req.group_id);
    if let Err(e) = cx.append(vec![Record::delegation(&req.group_id, Some(DelegationValue { handed_over }))]) {
        if created {
            groups.remove(&req.group_id);
        }
        return Err(e);
    }
    tracing::info!(group = %req.group_id, "transactional offsets committed: the group's offsets are now kept by the upstream's coordinator");
    Ok(Admitted { hand_over_first: !handed_over })
}

/// Admits an OffsetCommit for a delegated group (kcoord's usual member and
/// generation checks; the commit itself goes upstream).
pub fn admit_commit(groups: &mut Groups, req: &OffsetCommitRequest, cx: &mut Cx) -> Result<Admitted, ErrorCode> {
    offsets::admit_commit(groups, req, CommitKind::Plain, cx)?;
    Ok(upstream(cx, &req.group_id))
}

/// Admits an OffsetFetch for a delegated group (a KIP-848 member's epoch is
/// checked as for any fetch; the offsets come from upstream).
pub fn admit_fetch(req: &OffsetFetchGroup, cx: &Cx) -> Result<Admitted, ErrorCode> {
    if let Some(g) = cx.store.consumer_group(&req.group_id) {
        super::consumer::offsets::validate_fetch(g, req)?;
    }
    Ok(upstream(cx, &req.group_id))
}

/// Admits an OffsetDelete for a delegated group: Kafka's checks against
/// the members kcoord coordinates (a classic group with members refuses it;
/// subscribed topics keep their offsets). The partitions answered NONE are
/// then deleted upstream, where the offsets are. A group kcoord has no
/// members of (it may hold nothing here once its offsets were handed over)
/// is not refused: the upstream decides.
pub fn admit_delete(groups: &Groups, req: &OffsetDeleteRequest, cx: &Cx) -> (Admitted, OffsetDeleteResponse) {
    let checked = match offsets::subscribed_topics(groups, req, cx) {
        Ok(subscribed) => {
            OffsetDeleteResponse { error: ErrorCode::NONE, topics: offsets::subscription_errors(req, &subscribed) }
        }
        Err(ErrorCode::GROUP_ID_NOT_FOUND) => OffsetDeleteResponse {
            error: ErrorCode::NONE,
            topics: offsets::subscription_errors(req, &vec![false; req.topics.len()]),
        },
        Err(error) => OffsetDeleteResponse { error, topics: vec![] },
    };
    (upstream(cx, &req.group_id), checked)
}

fn upstream(cx: &Cx, group_id: &str) -> Admitted {
    Admitted { hand_over_first: cx.store.delegation(group_id).is_some_and(|d| !d.handed_over) }
}

/// The offsets still to hand over: `None` once they have been (or for a
/// group that is not delegated).
pub fn offsets_to_hand_over(group_id: &str, cx: &Cx) -> Option<Vec<CommitTopic>> {
    if cx.store.delegation(group_id)?.handed_over {
        return None;
    }
    let mut topics: Vec<CommitTopic> = cx
        .store
        .offsets(group_id)
        .map(|o| {
            o.iter()
                .map(|(name, parts)| {
                    let mut partitions: Vec<CommitPartition> = parts
                        .iter()
                        .map(|(p, v)| CommitPartition {
                            partition: *p,
                            offset: v.offset,
                            leader_epoch: v.leader_epoch,
                            metadata: Some(v.metadata.clone()),
                        })
                        .collect();
                    partitions.sort_by_key(|p| p.partition);
                    CommitTopic { name: name.clone(), partitions }
                })
                .collect()
        })
        .unwrap_or_default();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    Some(topics)
}

/// Records that the upstream now has the group's offsets and drops kcoord's
/// copies (which would otherwise be served or renewed upstream later).
pub fn handed_over(group_id: &str, cx: &mut Cx) -> ErrorCode {
    match cx.store.delegation(group_id) {
        Some(d) if !d.handed_over => {}
        _ => return ErrorCode::NONE,
    }
    let mut records = offsets::offset_tombstones(group_id, cx);
    records.push(Record::delegation(group_id, Some(DelegationValue { handed_over: true })));
    match cx.append(records) {
        Ok(()) => ErrorCode::NONE,
        Err(e) => e,
    }
}

/// The record that ends a group's delegation, if it has one (DeleteGroups).
pub fn end(group_id: &str, cx: &Cx) -> Option<Record> {
    cx.store.delegation(group_id).map(|_| Record::delegation(group_id, None))
}
