//! DescribeGroups (key 15), v0–v6.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, GroupId};
use kafka_protocol::protocol::Encodable;

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(15, "DescribeGroups", 0, 6, Some(5));

pub fn decode(body: &mut Bytes, version: i16) -> Result<m::DescribeGroupsRequest, DecodeError> {
    let r: DescribeGroupsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(m::DescribeGroupsRequest {
        version,
        groups: r.groups.iter().map(|g| st(&g.0)).collect(),
        include_authorized_operations: version >= 3 && r.include_authorized_operations,
    })
}

/// Encodes the answer. A group requested several times shares one answer
/// (the same `Arc`): it is encoded once and its bytes copied, and the total
/// is checked against the response limit before any copy, so describing a
/// large group many times cannot build a huge response in memory.
pub fn encode(groups: &[Arc<m::DescribedGroup>], version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let err = |reason: String| EncodeError { api: SUPPORT.name, version, reason };
    let mut encoded: HashMap<*const m::DescribedGroup, Bytes> = HashMap::new();
    let mut total = out.len().saturating_add(4 + 5 + 1);
    for g in groups {
        let bytes = match encoded.get(&Arc::as_ptr(g)) {
            Some(b) => b.clone(),
            None => {
                let wire = wire_group(g, version);
                let size = wire.compute_size(version).map_err(|e| err(e.to_string()))?;
                codec::check_size(SUPPORT.name, version, total.saturating_add(size))?;
                let mut buf = BytesMut::with_capacity(size);
                wire.encode(&mut buf, version).map_err(|e| err(e.to_string()))?;
                let b = buf.freeze();
                encoded.insert(Arc::as_ptr(g), b.clone());
                b
            }
        };
        total = total.saturating_add(bytes.len());
        codec::check_size(SUPPORT.name, version, total)?;
    }
    out.reserve(total.saturating_sub(out.len()));
    if version >= 1 {
        out.put_i32(0); // throttle_time_ms
    }
    let n = u32::try_from(groups.len()).map_err(|_| err("too many groups".into()))?;
    if version >= 5 {
        put_unsigned_varint(out, n + 1);
    } else {
        out.put_i32(n as i32);
    }
    for g in groups {
        if let Some(b) = encoded.get(&Arc::as_ptr(g)) {
            out.extend_from_slice(b);
        }
    }
    if version >= 5 {
        put_unsigned_varint(out, 0); // no tagged fields
    }
    Ok(())
}

fn put_unsigned_varint(out: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        out.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn wire_group(g: &m::DescribedGroup, version: i16) -> DescribedGroup {
    let mut d = DescribedGroup::default()
        .with_error_code(g.error.0)
        .with_group_id(GroupId(sb(g.group_id.clone())))
        .with_group_state(sb(g.state.clone()))
        .with_protocol_type(sb(g.protocol_type.clone()))
        .with_protocol_data(sb(g.protocol_data.clone()))
        .with_members(
            g.members
                .iter()
                .map(|x| {
                    let mut mm = DescribedGroupMember::default()
                        .with_member_id(sb(x.member_id.clone()))
                        .with_client_id(sb(x.client_id.clone()))
                        .with_client_host(sb(x.client_host.clone()))
                        .with_member_metadata(x.metadata.clone())
                        .with_member_assignment(x.assignment.clone());
                    if version >= 4 {
                        mm.group_instance_id = osb(x.group_instance_id.clone());
                    }
                    mm
                })
                .collect(),
        );
    if version >= 3 {
        if let Some(ops) = g.authorized_operations {
            d.authorized_operations = ops;
        }
    }
    if version >= 6 {
        d.error_message = osb(g.error_message.clone());
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::ErrorCode;
    use kafka_protocol::messages::DescribeGroupsResponse;

    fn group(id: &str) -> Arc<m::DescribedGroup> {
        let mut g = m::DescribedGroup::bare(id, ErrorCode::NONE, "Stable");
        g.protocol_type = "consumer".into();
        g.members.push(m::DescribedMember {
            member_id: "m-1".into(),
            group_instance_id: Some("i".into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            metadata: Bytes::from_static(b"meta"),
            assignment: Bytes::from_static(b"assign"),
        });
        g.authorized_operations = Some(8);
        g.error_message = Some("x".into());
        Arc::new(g)
    }

    #[test]
    fn shared_answers_encode_like_the_whole_message_at_every_version() {
        let a = group("a");
        let groups = vec![a.clone(), group("b"), a];
        for v in SUPPORT.min..=SUPPORT.max {
            let mut ours = BytesMut::new();
            encode(&groups, v, &mut ours).unwrap();
            let whole =
                DescribeGroupsResponse::default().with_groups(groups.iter().map(|g| wire_group(g, v)).collect());
            let mut theirs = BytesMut::new();
            codec::encode(SUPPORT.name, &whole, v, &mut theirs).unwrap();
            assert_eq!(ours, theirs, "v{v}");
        }
    }

    #[tokio::test]
    async fn a_group_repeated_past_the_response_limit_is_refused_before_it_is_copied() {
        let groups = vec![group("a"); 1000];
        let mut out = BytesMut::new();
        let r = codec::RESPONSE_LIMIT.scope(4096, async { encode(&groups, 5, &mut out) }).await;
        assert!(r.unwrap_err().reason.contains("server.max_response_bytes"));
        assert!(out.is_empty());
    }
}
