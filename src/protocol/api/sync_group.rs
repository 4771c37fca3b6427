//! SyncGroup (key 14), v0–v5.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, osb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(14, "SyncGroup", 0, 5, Some(4));

pub fn decode(body: &mut Bytes, version: i16) -> Result<m::SyncGroupRequest, DecodeError> {
    let r: SyncGroupRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(m::SyncGroupRequest {
        version,
        group_id: st(&r.group_id.0),
        generation_id: r.generation_id,
        member_id: st(&r.member_id),
        group_instance_id: r.group_instance_id.as_ref().map(st),
        protocol_type: if version >= 5 { r.protocol_type.as_ref().map(st) } else { None },
        protocol_name: if version >= 5 { r.protocol_name.as_ref().map(st) } else { None },
        // Copied out of the request frame, which members must not pin.
        assignments: r.assignments.iter().map(|a| (st(&a.member_id), Bytes::copy_from_slice(&a.assignment))).collect(),
    })
}

pub fn encode(resp: &m::SyncGroupResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let mut r = SyncGroupResponse::default().with_error_code(resp.error.0).with_assignment(resp.assignment.clone());
    if version >= 5 {
        r.protocol_type = osb(resp.protocol_type.clone());
        r.protocol_name = osb(resp.protocol_name.clone());
    }
    codec::encode(SUPPORT.name, &r, version, out)
}
