//! The checks Kafka makes before a request reaches its group's shard
//! (`GroupCoordinatorService`, and KafkaApis for SyncGroup's protocol
//! fields). They depend on nothing but the request and the configuration,
//! so Kafka answers them the same whether the shard is loaded, still
//! loading, failed, or owned by another node. kcoord applies them in the
//! same place: the service asks each call's `ShardCall::precheck` before
//! routing, and the core calls [`answer`] first too, so the pure state
//! machine never sees such a request.

use super::classic;
use super::core::{CoreConfig, Request, Response, ShardCall};
use super::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, SyncGroupRequest, SyncGroupResponse,
};
use crate::error_code::ErrorCode;

/// The answer Kafka gives `req` without looking at its group, if any.
pub fn answer(req: &Request, cfg: &CoreConfig) -> Option<Response> {
    match req {
        Request::WithTopics { inner, .. } => answer(inner, cfg),
        Request::Join(r) => r.precheck(cfg).map(Response::from),
        Request::Sync(r) => r.precheck(cfg).map(Response::from),
        Request::Heartbeat(r) => r.precheck(cfg).map(Response::from),
        Request::Leave(r) => r.precheck(cfg).map(Response::from),
        Request::OffsetDelete(r) => r.precheck(cfg).map(Response::from),
        _ => None,
    }
}

fn invalid_group(id: &str) -> Option<ErrorCode> {
    id.is_empty().then_some(ErrorCode::INVALID_GROUP_ID)
}

/// Kafka echoes the member id in this answer (and only in these: errors
/// from the shard's runtime carry an empty one).
pub fn join(r: &JoinGroupRequest, cfg: &CoreConfig) -> Option<JoinGroupResponse> {
    Some(JoinGroupResponse::error(classic::join::precheck(r, cfg)?, r.member_id.clone()))
}

pub fn sync(r: &SyncGroupRequest) -> Option<SyncGroupResponse> {
    Some(SyncGroupResponse::error(classic::sync::precheck(r)?))
}

pub fn heartbeat(r: &HeartbeatRequest) -> Option<HeartbeatResponse> {
    Some(HeartbeatResponse { error: invalid_group(&r.group_id)? })
}

pub fn leave(r: &LeaveGroupRequest) -> Option<LeaveGroupResponse> {
    Some(LeaveGroupResponse { error: invalid_group(&r.group_id)?, members: vec![] })
}

pub fn offset_delete(r: &OffsetDeleteRequest) -> Option<OffsetDeleteResponse> {
    Some(OffsetDeleteResponse { error: invalid_group(&r.group_id)?, topics: vec![] })
}
