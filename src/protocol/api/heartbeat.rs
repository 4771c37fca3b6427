//! Heartbeat (key 12), v0–v4.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(12, "Heartbeat", 0, 4, Some(4));

pub fn decode(body: &mut Bytes, version: i16) -> Result<m::HeartbeatRequest, DecodeError> {
    let r: HeartbeatRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(m::HeartbeatRequest {
        group_id: st(&r.group_id.0),
        generation_id: r.generation_id,
        member_id: st(&r.member_id),
        group_instance_id: r.group_instance_id.as_ref().map(st),
    })
}

pub fn encode(resp: &m::HeartbeatResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    codec::encode(SUPPORT.name, &HeartbeatResponse::default().with_error_code(resp.error.0), version, out)
}
