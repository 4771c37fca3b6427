//! Heartbeat (Kafka's `classicGroupHeartbeat`).

use crate::coordinator::Groups;

use super::group::GroupState;
use super::{rebalance, validate_existing_member};
use crate::coordinator::core::Cx;
use crate::coordinator::messages::{HeartbeatRequest, HeartbeatResponse};
use crate::error_code::ErrorCode;

pub fn heartbeat(groups: &mut Groups, req: &HeartbeatRequest, cx: &mut Cx) -> HeartbeatResponse {
    HeartbeatResponse { error: heartbeat_error(groups, req, cx) }
}

fn heartbeat_error(groups: &mut Groups, req: &HeartbeatRequest, cx: &mut Cx) -> ErrorCode {
    let Some(g) = groups.get_mut(&req.group_id) else { return ErrorCode::UNKNOWN_MEMBER_ID };
    if g.is(GroupState::Dead) {
        return ErrorCode::COORDINATOR_NOT_AVAILABLE;
    }
    if let Err(e) = validate_existing_member(g, &req.member_id, req.group_instance_id.as_deref()) {
        return e;
    }
    if req.generation_id != g.generation_id {
        return ErrorCode::ILLEGAL_GENERATION;
    }
    match g.state {
        GroupState::Empty => ErrorCode::UNKNOWN_MEMBER_ID,
        GroupState::PreparingRebalance => {
            rebalance::reschedule_heartbeat(g, &req.member_id, cx);
            ErrorCode::REBALANCE_IN_PROGRESS
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            rebalance::reschedule_heartbeat(g, &req.member_id, cx);
            ErrorCode::NONE
        }
        GroupState::Dead => ErrorCode::COORDINATOR_NOT_AVAILABLE,
    }
}
