//! OffsetCommit (key 8), v2–v9 (v0–v1 were removed in Kafka 4.0).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicName};

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(8, "OffsetCommit", 2, 9, Some(8));

pub fn decode(body: &mut Bytes, version: i16) -> Result<m::OffsetCommitRequest, DecodeError> {
    let r: OffsetCommitRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(m::OffsetCommitRequest {
        version,
        group_id: st(&r.group_id.0),
        generation_id: r.generation_id_or_member_epoch,
        member_id: st(&r.member_id),
        group_instance_id: if version >= 7 { r.group_instance_id.as_ref().map(st) } else { None },
        retention_time_ms: if version <= 4 { r.retention_time_ms } else { -1 },
        topics: r
            .topics
            .iter()
            .map(|t| m::CommitTopic {
                name: st(&t.name.0),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| m::CommitPartition {
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: if version >= 6 { p.committed_leader_epoch } else { -1 },
                        metadata: p.committed_metadata.as_ref().map(st),
                    })
                    .collect(),
            })
            .collect(),
    })
}

pub fn encode(resp: &m::OffsetCommitResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = OffsetCommitResponse::default().with_topics(
        resp.topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default().with_name(TopicName(sb(t.name.clone()))).with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition)
                                .with_error_code(p.error.0)
                        })
                        .collect(),
                )
            })
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
