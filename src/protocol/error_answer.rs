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
    // Versions that answer per item: FindCoordinator v4+ (per key), Fetch
    // before v7 (per partition).
    if (api_key == api::find_coordinator::SUPPORT.key && version >= 4)
        || (api_key == api::fetch::SUPPORT.key && version < 7)
    {
        return None;
    }
    macro_rules! error_only {
        ($($api:ident => $response:ty),* $(,)?) => {
            match api_key {
                $(k if k == api::$api::SUPPORT.key => {
                    let answer = <$response>::default().with_error_code(error.0);
                    Some(codec::encode(api::$api::SUPPORT.name, &answer, version, out))
                })*
                _ => None,
            }
        };
    }
    error_only!(
        api_versions => ApiVersionsResponse,
        sasl_handshake => SaslHandshakeResponse,
        join_group => JoinGroupResponse,
        sync_group => SyncGroupResponse,
        heartbeat => HeartbeatResponse,
        leave_group => LeaveGroupResponse,
        list_groups => ListGroupsResponse,
        find_coordinator => FindCoordinatorResponse,
        fetch => FetchResponse,
        init_producer_id => InitProducerIdResponse,
        describe_acls => DescribeAclsResponse,
        offset_delete => OffsetDeleteResponse,
        consumer_group_heartbeat => ConsumerGroupHeartbeatResponse,
    )
}
