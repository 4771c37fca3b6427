//! OffsetCommit (key 8), v2–v9 (v0–v1 were removed in Kafka 4.0).
//!
//! Also home of the response encoding that OffsetCommit and TxnOffsetCommit
//! share: their answers have one shape.

use bytes::{BufMut, Bytes, BytesMut};

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::protocol::wire;

pub const SUPPORT: ApiSupport = ApiSupport::new(8, "OffsetCommit", 2, 9, Some(8));

/// Reads the request by hand, straight into kcoord's types: every commit
/// arrives this way, and `kafka-protocol`'s struct first cost an
/// allocation per topic and per partition list, and a second pass (the
/// tests compare the two readings at every version).
pub fn decode(body: &mut Bytes, version: i16) -> Result<m::OffsetCommitRequest, DecodeError> {
    wire::decode_with(&SUPPORT, version, body, |r| read(r, version))
}

/// OffsetCommit v2–v9: v2–v4 carry a retention time, v6 adds leader
/// epochs, v7 the group instance id, v8 is flexible.
fn read(r: &mut wire::Reader<'_>, version: i16) -> Result<m::OffsetCommitRequest, wire::WireError> {
    let group_id = r.string("the group id")?;
    let generation_id = r.i32("the generation")?;
    let member_id = r.string("the member id")?;
    let group_instance_id = if version >= 7 { r.nullable_string("the group instance id")? } else { None };
    let retention_time_ms = if version <= 4 { r.i64("the retention time")? } else { -1 };
    let count = r.array_len("the topics")?;
    let mut topics = Vec::with_capacity(count.min(wire::INITIAL_ENTRIES));
    for _ in 0..count {
        let name = r.string("a topic name")?;
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
    Ok(m::OffsetCommitRequest {
        version,
        group_id,
        generation_id,
        member_id,
        group_instance_id,
        retention_time_ms,
        topics,
    })
}

pub fn encode(resp: &m::OffsetCommitResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let layout =
        ErrorsLayout { api: SUPPORT.name, version, throttle: version >= 3, flexible: SUPPORT.is_flexible(version) };
    encode_errors(resp, layout, out)
}

/// How a version of OffsetCommit's or TxnOffsetCommit's response lays out
/// its per-partition errors (the two share one shape).
pub(super) struct ErrorsLayout {
    pub api: &'static str,
    pub version: i16,
    /// Whether `throttle_time_ms` comes first.
    pub throttle: bool,
    pub flexible: bool,
}

/// Writes a commit response by hand: every commit is answered with one, and
/// building `kafka-protocol`'s struct first cost an allocation per topic,
/// per partition list and per name (the tests compare the bytes with
/// `kafka-protocol`'s at every version).
pub(super) fn encode_errors(
    resp: &m::OffsetCommitResponse,
    layout: ErrorsLayout,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let ErrorsLayout { api, version, throttle, flexible } = layout;
    let err = |e: wire::WireError| EncodeError { api, version, reason: e.to_string() };
    if throttle {
        out.put_i32(0);
    }
    wire::put_array_len(out, resp.topics.len(), flexible).map_err(err)?;
    for t in &resp.topics {
        wire::put_string(out, &t.name, flexible).map_err(err)?;
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
        f: fn(&m::OffsetCommitResponse, i16, &mut BytesMut) -> Result<(), EncodeError>,
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
            for v in SUPPORT.min..=SUPPORT.max {
                let topics = their_topics(
                    &resp,
                    |p, e| OffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(e),
                    |name, partitions| OffsetCommitResponseTopic::default().with_name(name).with_partitions(partitions),
                );
                let mut expected = BytesMut::new();
                OffsetCommitResponse::default().with_topics(topics).encode(&mut expected, v).unwrap();
                assert_eq!(by_hand(&resp, encode, v), expected, "OffsetCommit v{v}");
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
        for v in SUPPORT.min..=SUPPORT.max {
            for req in requests(v) {
                let mut body = BytesMut::new();
                req.encode(&mut body, v).unwrap();
                let body = body.freeze();
                let expected = through_kafka_protocol(&mut body.clone(), v);
                let mut ours = body.clone();
                assert_eq!(decode(&mut ours, v).unwrap(), expected, "v{v}");
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
        let refused = codec::RESPONSE_LIMIT.sync_scope(64, || encode(&resp, 8, &mut out));
        assert!(refused.is_err());
    }
}
