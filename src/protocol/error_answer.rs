//! An API's answer that carries nothing but an error, for the APIs whose
//! response has a top-level error code: what Kafka's `getErrorResponse`
//! gives a request it refuses before reading it (e.g. a request in the
//! middle of a SASL exchange, answered ILLEGAL_SASL_STATE).

use bytes::BytesMut;
use kafka_protocol::messages::*;

use super::api;
use super::codec::{self, EncodeError};
use crate::error_code::ErrorCode;

/// Encodes `api_key`'s error-only response body at `version` into `out`;
/// `None` when that version of the API answers errors per item (topic,
/// partition, group) rather than at the top, so there is no such answer.
pub fn encode(api_key: i16, version: i16, error: ErrorCode, out: &mut BytesMut) -> Option<Result<(), EncodeError>> {
    let e = error.0;
    macro_rules! answer {
        ($support:expr, $msg:expr) => {
            Some(codec::encode($support.name, &$msg, version, out))
        };
    }
    match api_key {
        k if k == api::api_versions::SUPPORT.key => {
            answer!(api::api_versions::SUPPORT, ApiVersionsResponse::default().with_error_code(e))
        }
        k if k == api::sasl_handshake::SUPPORT.key => {
            answer!(api::sasl_handshake::SUPPORT, SaslHandshakeResponse::default().with_error_code(e))
        }
        k if k == api::join_group::SUPPORT.key => {
            answer!(api::join_group::SUPPORT, JoinGroupResponse::default().with_error_code(e))
        }
        k if k == api::sync_group::SUPPORT.key => {
            answer!(api::sync_group::SUPPORT, SyncGroupResponse::default().with_error_code(e))
        }
        k if k == api::heartbeat::SUPPORT.key => {
            answer!(api::heartbeat::SUPPORT, HeartbeatResponse::default().with_error_code(e))
        }
        k if k == api::leave_group::SUPPORT.key => {
            answer!(api::leave_group::SUPPORT, LeaveGroupResponse::default().with_error_code(e))
        }
        k if k == api::list_groups::SUPPORT.key => {
            answer!(api::list_groups::SUPPORT, ListGroupsResponse::default().with_error_code(e))
        }
        k if k == api::find_coordinator::SUPPORT.key && version < 4 => {
            answer!(api::find_coordinator::SUPPORT, FindCoordinatorResponse::default().with_error_code(e))
        }
        k if k == api::fetch::SUPPORT.key && version >= 7 => {
            answer!(api::fetch::SUPPORT, FetchResponse::default().with_error_code(e))
        }
        k if k == api::init_producer_id::SUPPORT.key => {
            answer!(api::init_producer_id::SUPPORT, InitProducerIdResponse::default().with_error_code(e))
        }
        k if k == api::describe_acls::SUPPORT.key => {
            answer!(api::describe_acls::SUPPORT, DescribeAclsResponse::default().with_error_code(e))
        }
        k if k == api::offset_delete::SUPPORT.key => {
            answer!(api::offset_delete::SUPPORT, OffsetDeleteResponse::default().with_error_code(e))
        }
        k if k == api::consumer_group_heartbeat::SUPPORT.key => {
            answer!(
                api::consumer_group_heartbeat::SUPPORT,
                ConsumerGroupHeartbeatResponse::default().with_error_code(e)
            )
        }
        _ => None,
    }
}
