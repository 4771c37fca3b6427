//! SyncGroup (Kafka's `classicGroupSync`): followers wait; the leader's assignment is
//! written as a GroupMetadata record and, once written, sent to everyone.

use crate::coordinator::Groups;
use std::collections::HashMap;

use bytes::Bytes;

use super::group::{ClassicGroup, GroupState};
use super::history::{Cause, Outcome};
use super::rebalance::{self, remove_pending_sync_member};
use super::validate_existing_member;
use crate::coordinator::core::{Cx, ReplyTo};
use crate::coordinator::messages::{SyncGroupRequest, SyncGroupResponse};
use crate::coordinator::records::Record;
use crate::error_code::ErrorCode;

fn reply(cx: &mut Cx, token: ReplyTo<SyncGroupResponse>, error: ErrorCode) {
    cx.reply(token, SyncGroupResponse::error(error));
}

/// Both values known and different.
fn inconsistent(request: Option<&str>, group: Option<&str>) -> bool {
    matches!((request, group), (Some(a), Some(b)) if a != b)
}

fn validate(g: &ClassicGroup, req: &SyncGroupRequest) -> Result<(), ErrorCode> {
    if g.is(GroupState::Dead) {
        return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
    }
    validate_existing_member(g, &req.member_id, req.group_instance_id.as_deref())?;
    if req.generation_id != g.generation_id {
        return Err(ErrorCode::ILLEGAL_GENERATION);
    }
    if inconsistent(req.protocol_type.as_deref(), g.protocol_type.as_deref())
        || inconsistent(req.protocol_name.as_deref(), g.protocol_name.as_deref())
    {
        return Err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    }
    Ok(())
}

/// The checks Kafka makes before it looks at the group, whatever its type
/// (see `coordinator::prechecks`).
pub fn precheck(req: &SyncGroupRequest) -> Option<ErrorCode> {
    if req.version >= 5 && (req.protocol_type.is_none() || req.protocol_name.is_none()) {
        return Some(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    }
    if req.group_id.is_empty() {
        return Some(ErrorCode::INVALID_GROUP_ID);
    }
    None
}

pub fn sync_group(groups: &mut Groups, req: SyncGroupRequest, token: ReplyTo<SyncGroupResponse>, cx: &mut Cx) {
    let Some(g) = groups.get_mut(&req.group_id) else {
        return reply(cx, token, ErrorCode::UNKNOWN_MEMBER_ID);
    };
    if let Err(e) = validate(g, &req) {
        return reply(cx, token, e);
    }
    let member_id = req.member_id.clone();
    match g.state {
        GroupState::PreparingRebalance => reply(cx, token, ErrorCode::REBALANCE_IN_PROGRESS),
        GroupState::CompletingRebalance => {
            // A second SyncGroup while one is parked supersedes it.
            rebalance::complete_sync_future(
                g,
                &member_id,
                SyncGroupResponse::error(ErrorCode::REBALANCE_IN_PROGRESS),
                cx,
            );
            if let Some(m) = g.members.get_mut(&member_id) {
                m.awaiting_sync = Some(token);
            }
            remove_pending_sync_member(g, &member_id);
            if g.is_leader(&member_id) {
                complete_with_leader_assignment(g, req.assignments, cx);
            }
        }
        GroupState::Stable => {
            remove_pending_sync_member(g, &member_id);
            let assignment = g.members.get(&member_id).map(|m| m.assignment.clone()).unwrap_or_default();
            cx.reply(
                token,
                SyncGroupResponse {
                    error: ErrorCode::NONE,
                    protocol_type: g.protocol_type.clone(),
                    protocol_name: g.protocol_name.clone(),
                    assignment,
                },
            );
        }
        GroupState::Empty => reply(cx, token, ErrorCode::UNKNOWN_MEMBER_ID),
        GroupState::Dead => reply(cx, token, ErrorCode::COORDINATOR_NOT_AVAILABLE),
    }
}

/// The leader's SyncGroup: members it left out get empty assignments;
/// entries for unknown member ids are dropped; the record is written and
/// only then is the assignment stored and sent.
fn complete_with_leader_assignment(g: &mut ClassicGroup, assignments: Vec<(String, Bytes)>, cx: &mut Cx) {
    let mut assignment: HashMap<String, Bytes> = HashMap::with_capacity(g.members.len());
    for (member, bytes) in assignments {
        if g.has_member(&member) {
            assignment.insert(member, bytes);
        }
    }
    let missing: Vec<String> = g.members.keys().filter(|m| !assignment.contains_key(*m)).cloned().collect();
    if !missing.is_empty() {
        tracing::warn!(group = %g.group_id, members = ?missing, "leader sent no assignment for some members; they get an empty one");
    }
    for m in missing {
        assignment.insert(m, Bytes::new());
    }
    let record = Record::group(&g.group_id, g.to_record(Some(&assignment)));
    match cx.append(vec![record]) {
        Ok(()) => {
            rebalance::set_and_propagate_assignment(g, &assignment, cx);
            g.transition_to(GroupState::Stable, cx.now);
            rebalance::finish_rebalance(g, cx.now, Outcome::Stable);
        }
        Err(e) => {
            tracing::warn!(group = %g.group_id, error = ?e, "failed to store the group's assignment");
            rebalance::reset_and_propagate_assignment_with_error(g, e, cx);
            rebalance::maybe_prepare_rebalance_or_complete_join(
                g,
                cx,
                Cause::AssignmentWriteFailed { error: e.name().to_string() },
            );
        }
    }
}
