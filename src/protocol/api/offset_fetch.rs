//! OffsetFetch (key 9), v1–v10: one group up to v7 (`require_stable` from
//! v7), several groups per request from v8, member id/epoch from v9,
//! topics by id from v10 (Kafka 4.1).
//!
//! v1–v7 go through `kafka-protocol`'s structs; v8 and later, the layout
//! every current client uses, are read and written by hand, which is also
//! how v10 is served (`kafka-protocol` 0.18 stops at v9; the tests compare
//! the hand-written v8 and v9 with it). As with OffsetCommit, a v10
//! request's ids come beside the request ([`Decoded::topic_ids`]) for the
//! server to resolve, and the answer is written with ids it hands back.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use uuid::Uuid;

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::protocol::wire;

pub const SUPPORT: ApiSupport = ApiSupport::new(9, "OffsetFetch", 1, 10, Some(6));

/// The first version with several groups per request.
const GROUPS_FROM: i16 = 8;

/// The first version that names topics by id.
pub const TOPIC_IDS_FROM: i16 = 10;

/// A request as read.
#[derive(Debug)]
pub struct Decoded {
    pub req: m::OffsetFetchRequest,
    /// From v10, for each group, the id of each of its listed topics, in
    /// order; those topics' names are empty until the server resolves the
    /// ids. Empty before v10.
    pub topic_ids: Vec<Vec<Uuid>>,
}

pub fn decode(body: &mut Bytes, version: i16) -> Result<Decoded, DecodeError> {
    if version >= GROUPS_FROM {
        return wire::decode_with(&SUPPORT, version, body, |r| read_groups(r, version));
    }
    let r: OffsetFetchRequest = codec::decode(SUPPORT.name, body, version)?;
    let group = m::OffsetFetchGroup {
        group_id: st(&r.group_id.0),
        member_id: None,
        member_epoch: -1,
        topics: r.topics.as_ref().map(|ts| {
            ts.iter().map(|t| m::FetchTopic { name: st(&t.name.0), partitions: t.partition_indexes.clone() }).collect()
        }),
    };
    let req = m::OffsetFetchRequest { version, groups: vec![group], require_stable: version >= 7 && r.require_stable };
    Ok(Decoded { req, topic_ids: Vec::new() })
}

/// OffsetFetch v8–v10 (always flexible): groups, each with a member id and
/// epoch from v9 and a nullable list of topics, named by id from v10.
fn read_groups(r: &mut wire::Reader<'_>, version: i16) -> Result<Decoded, wire::WireError> {
    let by_id = version >= TOPIC_IDS_FROM;
    let count = r.array_len("the groups")?;
    let mut groups = Vec::with_capacity(count.min(wire::INITIAL_ENTRIES));
    let mut topic_ids = Vec::new();
    for _ in 0..count {
        let group_id = r.string("a group id")?;
        let (member_id, member_epoch) = match version >= 9 {
            true => (r.nullable_string("a member id")?, r.i32("a member epoch")?),
            false => (None, -1),
        };
        let mut ids = Vec::new();
        let topics = match r.nullable_array_len("a group's topics")? {
            None => None,
            Some(count) => {
                let mut topics = Vec::with_capacity(count.min(wire::INITIAL_ENTRIES));
                for _ in 0..count {
                    let name = r.topic_name_or_id(by_id, &mut ids)?;
                    let count = r.array_len("a topic's partitions")?;
                    let mut partitions = Vec::with_capacity(count.min(wire::INITIAL_ENTRIES));
                    for _ in 0..count {
                        partitions.push(r.i32("a partition index")?);
                    }
                    r.end_of_struct("a topic")?;
                    topics.push(m::FetchTopic { name, partitions });
                }
                Some(topics)
            }
        };
        r.end_of_struct("a group")?;
        if by_id {
            topic_ids.push(ids);
        }
        groups.push(m::OffsetFetchGroup { group_id, member_id, member_epoch, topics });
    }
    let require_stable = r.bool("require stable")?;
    r.end_of_struct("the request")?;
    Ok(Decoded { req: m::OffsetFetchRequest { version, groups, require_stable }, topic_ids })
}

/// Writes the answer; from v10 each topic is written as its id,
/// `topic_ids[g][i]` for `resp.groups[g].topics[i]` (the nil id where one
/// is missing).
pub fn encode(
    resp: &m::OffsetFetchResponse,
    version: i16,
    topic_ids: &[Vec<Uuid>],
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    if version >= GROUPS_FROM {
        return write_groups(resp, version, topic_ids, out);
    }
    let mut r = OffsetFetchResponse::default();
    if let Some(g) = resp.groups.first() {
        // v1 has no group-level error: it is copied into every partition.
        let copy_error = version < 2 && !g.error.is_none();
        r.topics = g
            .topics
            .iter()
            .map(|t| {
                OffsetFetchResponseTopic::default().with_name(TopicName(sb(t.name.clone()))).with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let mut x = OffsetFetchResponsePartition::default()
                                .with_partition_index(p.partition)
                                .with_committed_offset(if copy_error { -1 } else { p.offset })
                                .with_metadata(Some(sb(if copy_error { String::new() } else { p.metadata.clone() })))
                                .with_error_code(if copy_error { g.error.0 } else { p.error.0 });
                            if version >= 5 {
                                x.committed_leader_epoch = if copy_error { -1 } else { p.leader_epoch };
                            }
                            x
                        })
                        .collect(),
                )
            })
            .collect();
        if version >= 2 {
            r.error_code = g.error.0;
        }
    }
    codec::encode(SUPPORT.name, &r, version, out)
}

/// OffsetFetch v8–v10's answer (always flexible). An answer can be far
/// larger than its request (every committed offset of a group, each with
/// up to `offsets.metadata_max_bytes` of metadata), so the response limit
/// is checked as it grows, partition by partition, not once it is written.
fn write_groups(
    resp: &m::OffsetFetchResponse,
    version: i16,
    topic_ids: &[Vec<Uuid>],
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    // The buffer holds the frame's length and header too, as the limit counts them.
    let limit = codec::response_limit();
    let fits = |out: &BytesMut| match out.len() > limit {
        true => codec::check_size(SUPPORT.name, version, out.len()),
        false => Ok(()),
    };
    write_groups_checked(resp, version, topic_ids, out, fits)
}

fn write_groups_checked(
    resp: &m::OffsetFetchResponse,
    version: i16,
    topic_ids: &[Vec<Uuid>],
    out: &mut BytesMut,
    fits: impl Fn(&BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let err = |e: wire::WireError| EncodeError { api: SUPPORT.name, version, reason: e.to_string() };
    let by_id = version >= TOPIC_IDS_FROM;
    out.put_i32(0); // throttle time
    wire::put_array_len(out, resp.groups.len(), true).map_err(err)?;
    for (g, group) in resp.groups.iter().enumerate() {
        wire::put_string(out, &group.group_id, true).map_err(err)?;
        wire::put_array_len(out, group.topics.len(), true).map_err(err)?;
        for (i, t) in group.topics.iter().enumerate() {
            match by_id {
                true => wire::put_uuid(out, topic_ids.get(g).and_then(|ids| ids.get(i)).unwrap_or(&Uuid::nil())),
                false => wire::put_string(out, &t.name, true).map_err(err)?,
            }
            wire::put_array_len(out, t.partitions.len(), true).map_err(err)?;
            for p in &t.partitions {
                out.put_i32(p.partition);
                out.put_i64(p.offset);
                out.put_i32(p.leader_epoch);
                wire::put_string(out, &p.metadata, true).map_err(err)?;
                out.put_i16(p.error.0);
                wire::put_no_tags(out, true);
                fits(out)?;
            }
            wire::put_no_tags(out, true);
        }
        out.put_i16(group.error.0);
        wire::put_no_tags(out, true);
        fits(out)?;
    }
    wire::put_no_tags(out, true);
    fits(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::core::{FetchOffsets, Request, Response};
    use crate::ErrorCode;
    use kafka_protocol::protocol::Decodable;

    #[test]
    fn while_the_group_loads_v1_answers_no_partitions_and_v2_the_group_error_as_kafka_4() {
        let req = Request::Fetch(FetchOffsets {
            group: m::OffsetFetchGroup {
                group_id: "g".into(),
                member_id: None,
                member_epoch: -1,
                topics: Some(vec![m::FetchTopic { name: "t".into(), partitions: vec![0, 1] }]),
            },
            require_stable: false,
        });
        let Response::Fetch(group) = req.error_response(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS) else { panic!() };
        let answer = |version| {
            let mut out = BytesMut::new();
            encode(&m::OffsetFetchResponse { groups: vec![group.clone()] }, version, &[], &mut out).unwrap();
            OffsetFetchResponse::decode(&mut out.freeze(), version).unwrap()
        };
        let v1 = answer(1);
        assert!(v1.topics.is_empty());
        let v2 = answer(2);
        assert_eq!((v2.error_code, v2.topics.len()), (14, 0));
    }

    /// Requests of the groups layout as clients send them: null and listed
    /// topics, member ids, unknown tagged fields.
    fn group_requests(v: i16) -> Vec<OffsetFetchRequest> {
        use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
        use kafka_protocol::messages::GroupId;
        let mut listed = OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(sb("g".repeat(150))))
            .with_member_id(if v >= 9 { Some(sb("m-1")) } else { None })
            .with_member_epoch(if v >= 9 { 4 } else { -1 })
            .with_topics(Some(vec![
                OffsetFetchRequestTopics::default()
                    .with_name(TopicName(sb("orders")))
                    .with_partition_indexes((0..200).collect()),
                OffsetFetchRequestTopics::default().with_name(TopicName(sb("e\u{301}"))),
            ]));
        listed.unknown_tagged_fields.insert(5, Bytes::from_static(b"tag"));
        let all = OffsetFetchRequestGroup::default().with_group_id(GroupId(sb("h"))).with_topics(None);
        let mut many = OffsetFetchRequest::default().with_groups(vec![listed, all]).with_require_stable(true);
        many.unknown_tagged_fields.insert(2, Bytes::from_static(b"x"));
        vec![OffsetFetchRequest::default(), many]
    }

    /// What kcoord read through `kafka-protocol` before v8 was read by hand.
    fn through_kafka_protocol(body: &mut Bytes, version: i16) -> m::OffsetFetchRequest {
        let r: OffsetFetchRequest = codec::decode(SUPPORT.name, body, version).unwrap();
        let groups = r
            .groups
            .iter()
            .map(|g| m::OffsetFetchGroup {
                group_id: st(&g.group_id.0),
                member_id: if version >= 9 { g.member_id.as_ref().map(st) } else { None },
                member_epoch: if version >= 9 { g.member_epoch } else { -1 },
                topics: g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| m::FetchTopic { name: st(&t.name.0), partitions: t.partition_indexes.clone() })
                        .collect()
                }),
            })
            .collect();
        m::OffsetFetchRequest { version, groups, require_stable: r.require_stable }
    }

    #[test]
    fn group_requests_read_by_hand_match_kafka_protocols_reading() {
        use kafka_protocol::protocol::Encodable;
        for v in GROUPS_FROM..=9 {
            for req in group_requests(v) {
                let mut body = BytesMut::new();
                req.encode(&mut body, v).unwrap();
                let body = body.freeze();
                let mut ours = body.clone();
                let decoded = decode(&mut ours, v).unwrap();
                assert_eq!(decoded.req, through_kafka_protocol(&mut body.clone(), v), "v{v}");
                assert!(decoded.topic_ids.is_empty() && ours.is_empty(), "v{v}");
                for n in 0..body.len() {
                    assert!(decode(&mut body.slice(..n), v).is_err(), "v{v} cut at {n}");
                }
            }
        }
    }

    fn answer() -> m::OffsetFetchResponse {
        let partition = |p: i32| m::FetchedPartition {
            partition: p,
            offset: 100 + i64::from(p),
            leader_epoch: p % 4 - 1,
            metadata: if p % 3 == 0 { String::new() } else { "meta".repeat(p as usize % 50) },
            error: if p % 7 == 1 { ErrorCode::UNSTABLE_OFFSET_COMMIT } else { ErrorCode::NONE },
        };
        m::OffsetFetchResponse {
            groups: vec![
                m::OffsetFetchGroupResult {
                    group_id: "g".into(),
                    error: ErrorCode::NONE,
                    topics: vec![
                        m::FetchedTopic { name: "orders".into(), partitions: (0..130).map(partition).collect() },
                        m::FetchedTopic { name: "x".repeat(200), partitions: vec![] },
                    ],
                },
                m::OffsetFetchGroupResult {
                    group_id: "h".into(),
                    error: ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
                    topics: vec![],
                },
            ],
        }
    }

    #[test]
    fn group_answers_written_by_hand_match_kafka_protocols_bytes() {
        use kafka_protocol::messages::offset_fetch_response::{
            OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
        };
        use kafka_protocol::messages::GroupId;
        use kafka_protocol::protocol::Encodable;
        let resp = answer();
        let theirs = OffsetFetchResponse::default().with_groups(
            resp.groups
                .iter()
                .map(|g| {
                    OffsetFetchResponseGroup::default()
                        .with_group_id(GroupId(sb(g.group_id.clone())))
                        .with_error_code(g.error.0)
                        .with_topics(
                            g.topics
                                .iter()
                                .map(|t| {
                                    OffsetFetchResponseTopics::default()
                                        .with_name(TopicName(sb(t.name.clone())))
                                        .with_partitions(
                                            t.partitions
                                                .iter()
                                                .map(|p| {
                                                    OffsetFetchResponsePartitions::default()
                                                        .with_partition_index(p.partition)
                                                        .with_committed_offset(p.offset)
                                                        .with_committed_leader_epoch(p.leader_epoch)
                                                        .with_metadata(Some(sb(p.metadata.clone())))
                                                        .with_error_code(p.error.0)
                                                })
                                                .collect(),
                                        )
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
        for v in GROUPS_FROM..=9 {
            let mut expected = BytesMut::new();
            theirs.encode(&mut expected, v).unwrap();
            let mut ours = BytesMut::new();
            encode(&resp, v, &[], &mut ours).unwrap();
            assert_eq!(ours, expected, "v{v}");
        }
    }

    #[test]
    fn a_v10_fetch_names_its_topics_by_id() {
        let id = Uuid::from_u128(0xfeed_0000_0000_0000_0000_0000_0000_0001);
        let mut b = BytesMut::new();
        b.put_u8(3); // two groups
        b.put_slice(&[2, b'g', 0]); // "g", a null member id
        b.put_i32(-1);
        b.put_u8(2); // one topic
        b.put_u128(id.as_u128());
        b.put_u8(3);
        b.put_i32(0);
        b.put_i32(5);
        b.put_u8(0);
        b.put_u8(0);
        b.put_slice(&[2, b'h', 0]);
        b.put_i32(-1);
        b.put_u8(0); // every topic
        b.put_u8(0);
        b.put_u8(1); // require stable
        b.put_u8(0);
        let body = b.freeze();
        let decoded = decode(&mut body.clone(), 10).unwrap();
        assert_eq!(decoded.topic_ids, vec![vec![id], vec![]]);
        let g = &decoded.req.groups[0];
        assert_eq!(g.topics, Some(vec![m::FetchTopic { name: String::new(), partitions: vec![0, 5] }]));
        assert_eq!(decoded.req.groups[1].topics, None);
        assert!(decoded.req.require_stable);
        for n in 0..body.len() {
            assert!(decode(&mut body.slice(..n), 10).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn a_v10_answer_writes_ids_where_v9_writes_names() {
        let resp = answer();
        let id = Uuid::from_u128(42);
        let mut v9 = BytesMut::new();
        encode(&resp, 9, &[], &mut v9).unwrap();
        let mut v10 = BytesMut::new();
        encode(&resp, 10, &[vec![id, Uuid::from_u128(43)]], &mut v10).unwrap();
        // The first topic's name ("orders", compact: 7 then 6 bytes) becomes its 16-byte id.
        let at = 4 + 1 + 2; // throttle, groups, "g"
        assert_eq!(v9[at], 3, "two topics follow the group id");
        let name_at = at + 1;
        assert_eq!(&v9[name_at..name_at + 7], b"\x07orders");
        assert_eq!(&v10[name_at..name_at + 16], id.as_bytes());
        assert_eq!(v10.len(), v9.len() - 7 + 16 - (2 + 200) + 16);
    }

    #[test]
    fn a_fetch_answer_over_the_response_limit_is_refused_as_it_grows() {
        let resp = answer();
        for v in [8, 9, 10] {
            let mut out = BytesMut::new();
            let refused = codec::RESPONSE_LIMIT.sync_scope(300, || encode(&resp, v, &[], &mut out));
            assert!(refused.is_err(), "v{v}");
            assert!(out.len() < 400, "v{v}: stopped near the limit, at {} bytes", out.len());
        }
    }
}
