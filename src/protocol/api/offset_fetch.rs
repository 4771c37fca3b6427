//! OffsetFetch (key 9), v1–v9: one group up to v7 (`require_stable` from
//! v7), several groups per request from v8, member id/epoch from v9.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(9, "OffsetFetch", 1, 9, Some(6));

pub fn decode(body: &mut Bytes, version: i16) -> Result<m::OffsetFetchRequest, DecodeError> {
    let r: OffsetFetchRequest = codec::decode(SUPPORT.name, body, version)?;
    let groups = if version >= 8 {
        r.groups
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
            .collect()
    } else {
        vec![m::OffsetFetchGroup {
            group_id: st(&r.group_id.0),
            member_id: None,
            member_epoch: -1,
            topics: r.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| m::FetchTopic { name: st(&t.name.0), partitions: t.partition_indexes.clone() })
                    .collect()
            }),
        }]
    };
    Ok(m::OffsetFetchRequest { version, groups, require_stable: version >= 7 && r.require_stable })
}

pub fn encode(resp: &m::OffsetFetchResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let mut r = OffsetFetchResponse::default();
    if version >= 8 {
        r.groups = resp
            .groups
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
            .collect();
    } else if let Some(g) = resp.groups.first() {
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
            encode(&m::OffsetFetchResponse { groups: vec![group.clone()] }, version, &mut out).unwrap();
            OffsetFetchResponse::decode(&mut out.freeze(), version).unwrap()
        };
        let v1 = answer(1);
        assert!(v1.topics.is_empty());
        let v2 = answer(2);
        assert_eq!((v2.error_code, v2.topics.len()), (14, 0));
    }
}
