//! Heartbeat (key 12), v0–v4.

use bytes::{BufMut, Bytes, BytesMut};

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::protocol::wire;

pub const SUPPORT: ApiSupport = ApiSupport::new(12, "Heartbeat", 0, 4, Some(4));

/// Read by hand, as OffsetCommit: the request clients send most often
/// (the tests compare the reading with `kafka-protocol`'s at every version).
pub fn decode(body: &mut Bytes, version: i16) -> Result<m::HeartbeatRequest, DecodeError> {
    wire::decode_with(&SUPPORT, version, body, |r| {
        let group_id = r.string("the group id")?;
        let generation_id = r.i32("the generation")?;
        let member_id = r.string("the member id")?;
        let group_instance_id = if version >= 3 { r.nullable_string("the group instance id")? } else { None };
        r.end_of_struct("the request")?;
        Ok(m::HeartbeatRequest { group_id, generation_id, member_id, group_instance_id })
    })
}

/// Written by hand: throttle_time_ms (v1+), the error, no tagged fields.
pub fn encode(resp: &m::HeartbeatResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    if version >= 1 {
        out.put_i32(0);
    }
    out.put_i16(resp.error.0);
    wire::put_no_tags(out, SUPPORT.is_flexible(version));
    codec::check_size(SUPPORT.name, version, out.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::ErrorCode;
    use crate::protocol::codec::st;
    use kafka_protocol::messages::{GroupId, HeartbeatRequest, HeartbeatResponse};
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn heartbeats_read_and_answered_by_hand_match_kafka_protocol_at_every_version() {
        for v in SUPPORT.min..=SUPPORT.max {
            let mut req = HeartbeatRequest::default()
                .with_group_id(GroupId(codec::sb("g".repeat(150))))
                .with_generation_id(12)
                .with_member_id(codec::sb("consumer-1-6f1c"))
                .with_group_instance_id(if v >= 3 { Some(codec::sb("i-1")) } else { None });
            if v >= 4 {
                req.unknown_tagged_fields.insert(5, Bytes::from_static(b"x"));
            }
            let mut body = BytesMut::new();
            req.encode(&mut body, v).unwrap();
            let body = body.freeze();
            let theirs: HeartbeatRequest = codec::decode(SUPPORT.name, &mut body.clone(), v).unwrap();
            let expected = m::HeartbeatRequest {
                group_id: st(&theirs.group_id.0),
                generation_id: theirs.generation_id,
                member_id: st(&theirs.member_id),
                group_instance_id: theirs.group_instance_id.as_ref().map(st),
            };
            let mut ours = body.clone();
            assert_eq!(decode(&mut ours, v).unwrap(), expected, "v{v}");
            assert!(ours.is_empty());
            for n in 0..body.len() {
                assert!(decode(&mut body.slice(..n), v).is_err(), "v{v} cut at {n}");
            }
            for error in [ErrorCode::NONE, ErrorCode::REBALANCE_IN_PROGRESS] {
                let mut expected = BytesMut::new();
                HeartbeatResponse::default().with_error_code(error.0).encode(&mut expected, v).unwrap();
                let mut written = BytesMut::new();
                codec::RESPONSE_LIMIT
                    .sync_scope(usize::MAX, || encode(&m::HeartbeatResponse { error }, v, &mut written))
                    .unwrap();
                assert_eq!(written, expected, "v{v}");
            }
        }
    }
}
