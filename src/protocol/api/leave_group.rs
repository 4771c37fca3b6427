//! LeaveGroup (key 13), v0–v5. v0–v2 carry one member id and answer with a
//! single error; v3+ (KIP-345) carry a batch with per-member errors.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use crate::coordinator::messages as m;
use crate::error_code::ErrorCode;
use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(13, "LeaveGroup", 0, 5, Some(4));

pub fn decode(body: &mut Bytes, version: i16) -> Result<m::LeaveGroupRequest, DecodeError> {
    let r: LeaveGroupRequest = codec::decode(SUPPORT.name, body, version)?;
    let members = if version >= 3 {
        r.members
            .iter()
            .map(|x| m::LeaveMember {
                member_id: st(&x.member_id),
                group_instance_id: x.group_instance_id.as_ref().map(st),
                reason: if version >= 5 { x.reason.as_ref().map(st) } else { None },
            })
            .collect()
    } else {
        vec![m::LeaveMember { member_id: st(&r.member_id), group_instance_id: None, reason: None }]
    };
    Ok(m::LeaveGroupRequest { group_id: st(&r.group_id.0), members })
}

pub fn encode(resp: &m::LeaveGroupResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let mut r = LeaveGroupResponse::default();
    if version >= 3 {
        r.error_code = resp.error.0;
        r.members = resp
            .members
            .iter()
            .map(|x| {
                MemberResponse::default()
                    .with_member_id(sb(x.member_id.clone()))
                    .with_group_instance_id(osb(x.group_instance_id.clone()))
                    .with_error_code(x.error.0)
            })
            .collect();
    } else {
        // The top-level error, else the first member error.
        let first = resp.members.iter().map(|x| x.error).find(|e| !e.is_none()).unwrap_or(ErrorCode::NONE);
        r.error_code = if resp.error.is_none() { first.0 } else { resp.error.0 };
    }
    codec::encode(SUPPORT.name, &r, version, out)
}
