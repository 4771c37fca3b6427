//! TxnOffsetCommit (key 28), v0–v5: served in sidecar mode only, where it
//! is admitted by kcoord's coordinator and delegated to the upstream's
//! (`coordinator::delegation`). Standalone kcoord has no transaction
//! coordinator and does not advertise it.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic;
use kafka_protocol::messages::TxnOffsetCommitRequest;

use super::offset_commit::{encode_errors, ErrorsLayout};
use crate::coordinator::messages as m;
use crate::protocol::codec::{self, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(28, "TxnOffsetCommit", 0, 5, Some(3));

/// The commit it asks for (group, member, generation, offsets) and the
/// transaction it belongs to. Before v3 there is no member, generation or
/// instance id: the commit is then outside any generation, as Kafka reads it.
pub fn decode(body: &mut Bytes, version: i16) -> Result<(m::OffsetCommitRequest, m::TxnFields), DecodeError> {
    let r: TxnOffsetCommitRequest = codec::decode(SUPPORT.name, body, version)?;
    let modern = version >= 3;
    let commit = m::OffsetCommitRequest {
        version,
        group_id: st(&r.group_id.0),
        generation_id: if modern { r.generation_id } else { -1 },
        member_id: if modern { st(&r.member_id) } else { String::new() },
        group_instance_id: if modern { r.group_instance_id.as_ref().map(st) } else { None },
        retention_time_ms: -1,
        topics: commit_topics(&r.topics, version >= 2),
    };
    let txn = m::TxnFields {
        version,
        transactional_id: st(&r.transactional_id.0),
        producer_id: r.producer_id.0,
        producer_epoch: r.producer_epoch,
    };
    Ok((commit, txn))
}

/// The core's view of the request's topics. `has_leader_epoch` is false for
/// versions that predate the field, whose value is then -1 (unknown).
fn commit_topics(topics: &[TxnOffsetCommitRequestTopic], has_leader_epoch: bool) -> Vec<m::CommitTopic> {
    topics
        .iter()
        .map(|t| m::CommitTopic {
            name: st(&t.name.0),
            partitions: t
                .partitions
                .iter()
                .map(|p| m::CommitPartition {
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if has_leader_epoch { p.committed_leader_epoch } else { -1 },
                    metadata: p.committed_metadata.as_ref().map(st),
                })
                .collect(),
        })
        .collect()
}

pub fn encode(resp: &m::OffsetCommitResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let layout = ErrorsLayout {
        api: SUPPORT.name,
        version,
        throttle: true,
        flexible: SUPPORT.is_flexible(version),
        topic_ids: None,
    };
    encode_errors(resp, layout, out)
}
