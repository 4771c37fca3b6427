//! LeaveGroup (Kafka's `classicGroupLeave`), including KIP-345 batch leave by instance id.

use crate::coordinator::Groups;

use super::group::{ClassicGroup, GroupState};
use super::history::Cause;
use super::rebalance::{self, maybe_complete_join_phase, maybe_prepare_rebalance_or_complete_join};
use super::validate_existing_member;
use crate::coordinator::core::Cx;
use crate::coordinator::messages::{LeaveGroupRequest, LeaveGroupResponse, LeaveMemberResult};
use crate::error_code::ErrorCode;

pub fn leave_group(groups: &mut Groups, req: &LeaveGroupRequest, cx: &mut Cx) -> LeaveGroupResponse {
    let Some(g) = groups.get_mut(&req.group_id) else {
        // Every member is unknown; the protocol layer turns this into a
        // top-level error below v3.
        return LeaveGroupResponse {
            error: ErrorCode::NONE,
            members: req
                .members
                .iter()
                .map(|m| LeaveMemberResult {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    error: ErrorCode::UNKNOWN_MEMBER_ID,
                })
                .collect(),
        };
    };
    if g.is(GroupState::Dead) {
        return LeaveGroupResponse { error: ErrorCode::COORDINATOR_NOT_AVAILABLE, members: vec![] };
    }
    let mut results = Vec::with_capacity(req.members.len());
    let mut removed = Vec::new();
    let mut reasons = Vec::new();
    for m in &req.members {
        let error = if m.member_id.is_empty() {
            // Administrative removal by instance id.
            match m.group_instance_id.as_deref().and_then(|i| g.static_member_id(i)).cloned() {
                Some(id) => {
                    remove(g, &id, m.reason.as_deref(), cx);
                    removed.push(id);
                    reasons.extend(m.reason.clone());
                    ErrorCode::NONE
                }
                None => ErrorCode::UNKNOWN_MEMBER_ID,
            }
        } else if g.is_pending_member(&m.member_id) {
            g.remove(&m.member_id);
            removed.push(m.member_id.clone());
            ErrorCode::NONE
        } else {
            match validate_existing_member(g, &m.member_id, m.group_instance_id.as_deref()) {
                Ok(()) => {
                    remove(g, &m.member_id, m.reason.as_deref(), cx);
                    removed.push(m.member_id.clone());
                    reasons.extend(m.reason.clone());
                    ErrorCode::NONE
                }
                Err(e) => e,
            }
        };
        results.push(LeaveMemberResult {
            member_id: m.member_id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            error,
        });
    }
    if !removed.is_empty() {
        match g.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                maybe_prepare_rebalance_or_complete_join(g, cx, Cause::MemberLeft { member_ids: removed, reasons })
            }
            GroupState::PreparingRebalance => maybe_complete_join_phase(g, cx),
            _ => {}
        }
    }
    LeaveGroupResponse { error: ErrorCode::NONE, members: results }
}

fn remove(g: &mut ClassicGroup, member_id: &str, reason: Option<&str>, cx: &mut Cx) {
    tracing::info!(group = %g.group_id, member = member_id, reason = reason.unwrap_or("not provided"), "member is leaving the group");
    rebalance::remove_member(g, member_id, cx);
}
