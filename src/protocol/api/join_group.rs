//! JoinGroup (key 11), v0–v9.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use crate::coordinator::messages::{self as m, Protocol};
use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(11, "JoinGroup", 0, 9, Some(6));

pub fn decode(
    body: &mut Bytes,
    version: i16,
    client_id: &str,
    client_host: &str,
) -> Result<m::JoinGroupRequest, DecodeError> {
    let r: JoinGroupRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(m::JoinGroupRequest {
        version,
        group_id: st(&r.group_id.0),
        session_timeout_ms: r.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if version == 0 { r.session_timeout_ms } else { r.rebalance_timeout_ms },
        member_id: st(&r.member_id),
        group_instance_id: r.group_instance_id.as_ref().map(st),
        protocol_type: st(&r.protocol_type),
        // Copied out of the request frame: a slice would keep the whole read
        // buffer alive for as long as the member exists (~5 KB per member).
        protocols: r
            .protocols
            .iter()
            .map(|p| Protocol { name: st(&p.name), metadata: Bytes::copy_from_slice(&p.metadata) })
            .collect(),
        reason: r.reason.as_ref().map(st),
        client_id: client_id.to_string(),
        client_host: client_host.to_string(),
    })
}

pub fn encode(resp: &m::JoinGroupResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let mut r = JoinGroupResponse::default()
        .with_error_code(resp.error.0)
        .with_generation_id(resp.generation_id)
        .with_leader(sb(resp.leader.clone()))
        .with_member_id(sb(resp.member_id.clone()))
        .with_members(
            resp.members
                .iter()
                .map(|mm| {
                    let mut x = JoinGroupResponseMember::default()
                        .with_member_id(sb(mm.member_id.clone()))
                        .with_metadata(mm.metadata.clone());
                    if version >= 5 {
                        x.group_instance_id = osb(mm.group_instance_id.clone());
                    }
                    x
                })
                .collect(),
        );
    // Below v7 the name is not nullable: a missing protocol is "". From v7
    // it is nullable, "" is sent as null (as Kafka's JoinGroupResponse
    // does), and the type is present.
    r.protocol_name = if version >= 7 {
        osb(resp.protocol_name.clone().filter(|name| !name.is_empty()))
    } else {
        Some(sb(resp.protocol_name.clone().unwrap_or_default()))
    };
    if version >= 7 {
        r.protocol_type = osb(resp.protocol_type.clone());
    }
    if version >= 9 {
        r.skip_assignment = resp.skip_assignment;
    }
    codec::encode(SUPPORT.name, &r, version, out)
}
