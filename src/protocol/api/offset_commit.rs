//! OffsetCommit (key 8), v2–v10 (v0–v1 were removed in Kafka 4.0).
//!
//! v10 (Kafka 4.1, KIP-848's follow-up) names topics by id instead of by
//! name, in the request and in the answer. The coordinator works with
//! names, so a v10 request is read with its ids beside it
//! ([`Decoded::topic_ids`]), and the server resolves them (as Kafka's
//! `KafkaApis` does before its coordinator sees the request) and writes
//! the answer's ids back.
//!
//! Also home of the response encoding that OffsetCommit and TxnOffsetCommit
//! share: their answers have one shape.

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::protocol::wire;

pub const SUPPORT: ApiSupport = ApiSupport::new(8, "OffsetCommit", 2, 10, Some(8));

/// The first version that names topics by id.
pub const TOPIC_IDS_FROM: i16 = 10;

/// A request as read.
#[derive(Debug)]
pub struct Decoded {
    pub req: m::OffsetCommitRequest,
    /// From v10, the id of each of `req.topics`, in order; those topics'
    /// names are empty until the server resolves the ids. Empty before v10.
    pub topic_ids: Vec<Uuid>,
}

/// Reads the request by hand, straight into kcoord's types: every commit
/// arrives this way, and `kafka-protocol`'s struct first cost an
/// allocation per topic and per partition list, and a second pass (the
/// tests compare the two readings at every version it knows).
pub fn decode(body: &mut Bytes, version: i16) -> Result<Decoded, DecodeError> {
    wire::decode_with(&SUPPORT, version, body, |r| read(r, version))
}

/// OffsetCommit v2–v10: v2–v4 carry a retention time, v6 adds leader
/// epochs, v7 the group instance id, v8 is flexible, v10 names topics by id.
fn read(r: &mut wire::Reader<'_>, version: i16) -> Result<Decoded, wire::WireError> {
    let by_id = version >= TOPIC_IDS_FROM;
    let group_id = r.string("the group id")?;
    let generation_id = r.i32("the generation")?;
    let member_id = r.string("the member id")?;
    let group_instance_id = if version >= 7 { r.nullable_string("the group instance id")? } else { None };
    let retention_time_ms = if version <= 4 { r.i64("the retention time")? } else { -1 };
    let count = r.array_len("the topics")?;
    let mut topics = Vec::with_capacity(count.min(wire::INITIAL_ENTRIES));
    let mut topic_ids = Vec::new();
    for _ in 0..count {
        let name = r.topic_name_or_id(by_id, &mut topic_ids)?;
        let count = r.array_len("a topic's partitions")?;
        let mut partitions = Vec::with_capacity(count.min(wire::INITIAL_ENTRIES));
        for _ in 0..count {
            let partition = r.i32("a partition index")?;
            let offset = r.i64("a committed offset")?;
            let leader_epoch = if version >= 6 { r.i32("a leader epoch")? } else { -1 };
            let metadata = r.nullable_string("a partition's metadata")?;
            r.end_of_struct("a partition")?;
            partitions.push(m::CommitPartition { partition, offset, leader_epoch, metadata });
        }
        r.end_of_struct("a topic")?;
        topics.push(m::CommitTopic { name, partitions });
    }
    r.end_of_struct("the request")?;
    let req = m::OffsetCommitRequest {
        version,
        group_id,
        generation_id,
        member_id,
        group_instance_id,
        retention_time_ms,
        topics,
    };
    Ok(Decoded { req, topic_ids })
}

/// Writes the answer; from v10 each topic is written as its id,
/// `topic_ids[i]` for `resp.topics[i]` (the nil id where one is missing).
pub fn encode(
    resp: &m::OffsetCommitResponse,
    version: i16,
    topic_ids: &[Uuid],
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let layout = ErrorsLayout {
        api: SUPPORT.name,
        version,
        throttle: version >= 3,
        flexible: SUPPORT.is_flexible(version),
        topic_ids: (version >= TOPIC_IDS_FROM).then_some(topic_ids),
    };
    encode_errors(resp, layout, out)
}

/// How a version of OffsetCommit's or TxnOffsetCommit's response lays out
/// its per-partition errors (the two share one shape).
pub(super) struct ErrorsLayout<'a> {
    pub api: &'static str,
    pub version: i16,
    /// Whether `throttle_time_ms` comes first.
    pub throttle: bool,
    pub flexible: bool,
    /// Topics written by id (OffsetCommit v10), aligned with the answer's
    /// topics; `None` writes names.
    pub topic_ids: Option<&'a [Uuid]>,
}

/// Writes a commit response by hand: every commit is answered with one, and
/// building `kafka-protocol`'s struct first cost an allocation per topic,
/// per partition list and per name (the tests compare the bytes with
/// `kafka-protocol`'s at every version).
pub(super) fn encode_errors(
    resp: &m::OffsetCommitResponse,
    layout: ErrorsLayout<'_>,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let ErrorsLayout { api, version, throttle, flexible, topic_ids } = layout;
    let err = |e: wire::WireError| EncodeError { api, version, reason: e.to_string() };
    if throttle {
        out.put_i32(0);
    }
    wire::put_array_len(out, resp.topics.len(), flexible).map_err(err)?;
    for (i, t) in resp.topics.iter().enumerate() {
        match topic_ids {
            Some(ids) => wire::put_uuid(out, ids.get(i).unwrap_or(&Uuid::nil())),
            None => wire::put_string(out, &t.name, flexible).map_err(err)?,
        }
        wire::put_array_len(out, t.partitions.len(), flexible).map_err(err)?;
        for p in &t.partitions {
            out.put_i32(p.partition);
            out.put_i16(p.error.0);
            wire::put_no_tags(out, flexible);
        }
        wire::put_no_tags(out, flexible);
    }
    wire::put_no_tags(out, flexible);
    codec::check_size(api, version, out.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::ErrorCode;
    use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
    use kafka_protocol::messages::txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };
    use kafka_protocol::messages::{OffsetCommitResponse, TopicName, TxnOffsetCommitResponse};
    use kafka_protocol::protocol::Encodable;

    /// The last version `kafka-protocol` 0.18 knows; v10 is checked against
    /// bytes written here from Kafka's schema.
    const KAFKA_PROTOCOL_MAX: i16 = 9;

    /// Responses of every shape: none, one, many topics; partitions past a
    /// one-byte compact length; names past one.
    fn responses() -> Vec<m::OffsetCommitResponse> {
        let topic = |name: String, n: i32| m::TopicErrors {
            name,
            partitions: (0..n)
                .map(|p| m::PartitionError {
                    partition: p * 3,
                    error: if p % 5 == 1 { ErrorCode::OFFSET_METADATA_TOO_LARGE } else { ErrorCode::NONE },
                })
                .collect(),
        };
        vec![
            m::OffsetCommitResponse { topics: vec![] },
            m::OffsetCommitResponse { topics: vec![topic("orders".into(), 1)] },
            m::OffsetCommitResponse {
                topics: vec![topic("a".into(), 0), topic("x".repeat(300), 200), topic("é".into(), 3)],
            },
        ]
    }

    fn by_hand(
        resp: &m::OffsetCommitResponse,
        f: impl Fn(&m::OffsetCommitResponse, i16, &mut BytesMut) -> Result<(), EncodeError>,
        v: i16,
    ) -> BytesMut {
        let mut out = BytesMut::new();
        codec::RESPONSE_LIMIT.sync_scope(usize::MAX, || f(resp, v, &mut out)).unwrap();
        out
    }

    /// A commit answer's topics in `kafka-protocol`'s types of the API
    /// that answers, built by `partition(index, error)` and `topic(name, partitions)`.
    fn their_topics<T, P>(
        resp: &m::OffsetCommitResponse,
        partition: impl Fn(i32, i16) -> P,
        topic: impl Fn(TopicName, Vec<P>) -> T,
    ) -> Vec<T> {
        resp.topics
            .iter()
            .map(|t| {
                let partitions = t.partitions.iter().map(|p| partition(p.partition, p.error.0)).collect();
                topic(TopicName(codec::sb(t.name.clone())), partitions)
            })
            .collect()
    }

    #[test]
    fn commit_answers_encode_exactly_as_kafka_protocol_would() {
        let txn = crate::protocol::api::txn_offset_commit::SUPPORT;
        for resp in responses() {
            for v in SUPPORT.min..=KAFKA_PROTOCOL_MAX {
                let topics = their_topics(
                    &resp,
                    |p, e| OffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(e),
                    |name, partitions| OffsetCommitResponseTopic::default().with_name(name).with_partitions(partitions),
                );
                let mut expected = BytesMut::new();
                OffsetCommitResponse::default().with_topics(topics).encode(&mut expected, v).unwrap();
                assert_eq!(by_hand(&resp, |r, v, out| encode(r, v, &[], out), v), expected, "OffsetCommit v{v}");
            }
            for v in txn.min..=txn.max {
                let topics = their_topics(
                    &resp,
                    |p, e| TxnOffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(e),
                    |name, partitions| {
                        TxnOffsetCommitResponseTopic::default().with_name(name).with_partitions(partitions)
                    },
                );
                let mut expected = BytesMut::new();
                TxnOffsetCommitResponse::default().with_topics(topics).encode(&mut expected, v).unwrap();
                let written = by_hand(&resp, crate::protocol::api::txn_offset_commit::encode, v);
                assert_eq!(written, expected, "TxnOffsetCommit v{v}");
            }
        }
    }

    /// Requests of every shape at version `v`, as a client would send them
    /// (each field only where the version has it).
    fn requests(v: i16) -> Vec<kafka_protocol::messages::OffsetCommitRequest> {
        use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
        use kafka_protocol::messages::{GroupId, OffsetCommitRequest};
        let partition = |p: i32, metadata: Option<&str>| {
            let mut part = OffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(1_000 + i64::from(p))
                .with_committed_leader_epoch(if v >= 6 { p % 3 } else { -1 })
                .with_committed_metadata(metadata.map(codec::sb));
            if v >= 8 {
                part.unknown_tagged_fields.insert(7, Bytes::from_static(b"tag"));
            }
            part
        };
        let topic = |name: String, partitions: Vec<OffsetCommitRequestPartition>| {
            OffsetCommitRequestTopic::default().with_name(TopicName(codec::sb(name))).with_partitions(partitions)
        };
        let mut tagged = OffsetCommitRequest::default()
            .with_group_id(GroupId(codec::sb("g".repeat(200))))
            .with_generation_id_or_member_epoch(7)
            .with_member_id(codec::sb("m-1"))
            .with_group_instance_id(if v >= 7 { Some(codec::sb("i-1")) } else { None })
            .with_retention_time_ms(if v <= 4 { 60_000 } else { -1 })
            .with_topics(vec![
                topic(
                    "orders".into(),
                    (0..150).map(|p| partition(p, if p % 2 == 0 { Some("meta") } else { None })).collect(),
                ),
                topic("e\u{301}".into(), vec![]),
                topic("x".repeat(300), vec![partition(9, Some(""))]),
            ]);
        if v >= 8 {
            tagged.unknown_tagged_fields.insert(3, Bytes::from_static(b"unknown"));
        }
        vec![
            OffsetCommitRequest::default().with_group_id(GroupId(codec::sb("g"))).with_member_id(codec::sb("")),
            tagged,
        ]
    }

    /// The request as kcoord read it through `kafka-protocol` before.
    fn through_kafka_protocol(body: &mut Bytes, version: i16) -> m::OffsetCommitRequest {
        let r: kafka_protocol::messages::OffsetCommitRequest = codec::decode(SUPPORT.name, body, version).unwrap();
        m::OffsetCommitRequest {
            version,
            group_id: r.group_id.0.to_string(),
            generation_id: r.generation_id_or_member_epoch,
            member_id: r.member_id.to_string(),
            group_instance_id: if version >= 7 { r.group_instance_id.map(|s| s.to_string()) } else { None },
            retention_time_ms: if version <= 4 { r.retention_time_ms } else { -1 },
            topics: r
                .topics
                .iter()
                .map(|t| m::CommitTopic {
                    name: t.name.0.to_string(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| m::CommitPartition {
                            partition: p.partition_index,
                            offset: p.committed_offset,
                            leader_epoch: if version >= 6 { p.committed_leader_epoch } else { -1 },
                            metadata: p.committed_metadata.as_ref().map(|s| s.to_string()),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn commits_read_by_hand_match_kafka_protocols_reading_at_every_version() {
        for v in SUPPORT.min..=KAFKA_PROTOCOL_MAX {
            for req in requests(v) {
                let mut body = BytesMut::new();
                req.encode(&mut body, v).unwrap();
                let body = body.freeze();
                let expected = through_kafka_protocol(&mut body.clone(), v);
                let mut ours = body.clone();
                let decoded = decode(&mut ours, v).unwrap();
                assert_eq!(decoded.req, expected, "v{v}");
                assert!(decoded.topic_ids.is_empty(), "v{v} names its topics");
                assert!(ours.is_empty(), "v{v}: the whole body is read");
                // Every truncation is refused, never a panic.
                for n in 0..body.len() {
                    assert!(decode(&mut body.slice(..n), v).is_err(), "v{v} cut at {n}");
                }
            }
        }
    }

    #[test]
    fn hostile_lengths_are_refused_without_reserving_their_memory() {
        // Group "g", generation, member "", then 2^31-1 topics that never come.
        let mut body = BytesMut::new();
        body.put_i16(1);
        body.put_slice(b"g");
        body.put_i32(1);
        body.put_i16(0);
        body.put_i32(i32::MAX);
        assert!(decode(&mut body.clone().freeze(), 5).is_err());
        // Negative lengths other than null are malformed; a null group id too.
        let mut negative = BytesMut::new();
        negative.put_i16(-2);
        assert!(decode(&mut negative.freeze(), 5).is_err());
        let mut null = BytesMut::new();
        null.put_i16(-1);
        assert!(decode(&mut null.freeze(), 5).is_err());
        // Flexible: a compact null (0) for the topics array.
        let mut compact = BytesMut::new();
        compact.put_slice(&[2, b'g']);
        compact.put_i32(1);
        compact.put_slice(&[1, 1, 0]);
        assert!(decode(&mut compact.freeze(), 8).is_err());
    }

    #[test]
    fn a_commit_answer_over_the_response_limit_is_refused() {
        let resp = m::OffsetCommitResponse {
            topics: vec![m::TopicErrors {
                name: "t".into(),
                partitions: (0..100).map(|p| m::PartitionError { partition: p, error: ErrorCode::NONE }).collect(),
            }],
        };
        let mut out = BytesMut::new();
        let refused = codec::RESPONSE_LIMIT.sync_scope(64, || encode(&resp, 8, &[], &mut out));
        assert!(refused.is_err());
    }

    /// A v10 request as Kafka's schema lays it out: flexible, topics by id.
    fn v10_request(topics: &[(Uuid, &[(i32, i64)])]) -> Bytes {
        let mut b = BytesMut::new();
        wire::put_string(&mut b, "g", true).unwrap();
        b.put_i32(3);
        wire::put_string(&mut b, "m-1", true).unwrap();
        b.put_u8(0); // a null group instance id
        wire::put_array_len(&mut b, topics.len(), true).unwrap();
        for (id, partitions) in topics {
            wire::put_uuid(&mut b, id);
            wire::put_array_len(&mut b, partitions.len(), true).unwrap();
            for &(p, offset) in partitions.iter() {
                b.put_i32(p);
                b.put_i64(offset);
                b.put_i32(-1);
                b.put_u8(1); // metadata ""
                b.put_u8(0);
            }
            b.put_u8(0);
        }
        b.put_u8(0);
        b.freeze()
    }

    #[test]
    fn a_v10_commit_names_its_topics_by_id_and_is_read_whole() {
        let (a, b) = (Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677), Uuid::from_u128(7));
        let body = v10_request(&[(a, &[(0, 10), (2, 12)]), (b, &[])]);
        let mut ours = body.clone();
        let decoded = decode(&mut ours, 10).unwrap();
        assert!(ours.is_empty());
        assert_eq!(decoded.topic_ids, vec![a, b]);
        assert_eq!(decoded.req.topics.len(), 2);
        assert!(decoded.req.topics.iter().all(|t| t.name.is_empty()), "names wait for the ids' resolution");
        let offsets: Vec<(i32, i64)> =
            decoded.req.topics[0].partitions.iter().map(|p| (p.partition, p.offset)).collect();
        assert_eq!(offsets, vec![(0, 10), (2, 12)]);
        assert_eq!(decoded.req.topics[0].partitions[0].metadata.as_deref(), Some(""));
        for n in 0..body.len() {
            assert!(decode(&mut body.slice(..n), 10).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn a_v10_answer_writes_each_topics_id_where_names_were() {
        let resp = m::OffsetCommitResponse {
            topics: vec![
                m::TopicErrors {
                    name: "orders".into(),
                    partitions: vec![m::PartitionError { partition: 1, error: ErrorCode::NONE }],
                },
                m::TopicErrors {
                    name: String::new(),
                    partitions: vec![m::PartitionError { partition: 0, error: ErrorCode::UNKNOWN_TOPIC_ID }],
                },
            ],
        };
        let ids = [Uuid::from_u128(1 << 100), Uuid::from_u128(5)];
        let mut expected = BytesMut::new();
        expected.put_i32(0); // throttle
        expected.put_u8(3); // two topics
        for (id, (p, e)) in ids.iter().zip([(1, 0i16), (0, ErrorCode::UNKNOWN_TOPIC_ID.0)]) {
            expected.put_u128(id.as_u128());
            expected.put_u8(2);
            expected.put_i32(p);
            expected.put_i16(e);
            expected.put_u8(0);
            expected.put_u8(0);
        }
        expected.put_u8(0);
        assert_eq!(by_hand(&resp, |r, v, out| encode(r, v, &ids, out), 10), expected);
    }
}
