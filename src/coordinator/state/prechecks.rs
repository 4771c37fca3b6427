//! The checks Kafka makes before a request reaches its group's shard
//! (`GroupCoordinatorService`, and KafkaApis for SyncGroup's protocol
//! fields). They depend on nothing but the request and the configuration,
//! so Kafka answers them the same whether the shard is loaded, still
//! loading, failed, or owned by another node. kcoord applies them in the
//! same place: the service calls [`answer`] before routing, and the core
//! calls it first too, so the pure state machine never sees such a request.

use super::classic;
use super::core::{CoreConfig, Request, Response};
use super::messages::{
    HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, OffsetDeleteResponse, SyncGroupResponse,
};
use crate::error_code::ErrorCode;

/// The answer Kafka gives `req` without looking at its group, if any.
pub fn answer(req: &Request, cfg: &CoreConfig) -> Option<Response> {
    let invalid_group = |id: &str| id.is_empty().then_some(ErrorCode::INVALID_GROUP_ID);
    Some(match req {
        Request::WithTopics { inner, .. } => return answer(inner, cfg),
        // Kafka echoes the member id in these answers (and only in these:
        // errors from the shard's runtime carry an empty one).
        Request::Join(r) => {
            Response::Join(JoinGroupResponse::error(classic::join::precheck(r, cfg)?, r.member_id.clone()))
        }
        Request::Sync(r) => Response::Sync(SyncGroupResponse::error(classic::sync::precheck(r)?)),
        Request::Heartbeat(r) => Response::Heartbeat(HeartbeatResponse { error: invalid_group(&r.group_id)? }),
        Request::Leave(r) => {
            Response::Leave(LeaveGroupResponse { error: invalid_group(&r.group_id)?, members: vec![] })
        }
        Request::OffsetDelete(r) => {
            Response::OffsetDelete(OffsetDeleteResponse { error: invalid_group(&r.group_id)?, topics: vec![] })
        }
        _ => return None,
    })
}
