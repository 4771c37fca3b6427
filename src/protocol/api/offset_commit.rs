//! OffsetCommit (key 8), v2–v9 (v0–v1 were removed in Kafka 4.0).
//!
//! Also home of the topic/partition mapping that OffsetCommit and
//! TxnOffsetCommit share: their wire types differ, their offsets do not.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition;
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

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
        topics: commit_topics(r.topics.iter().map(|t| (&t.name, t.partitions.as_slice())), version >= 6),
    })
}

pub fn encode(resp: &m::OffsetCommitResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = OffsetCommitResponse::default().with_topics(response_topics(
        resp,
        |partition, error| {
            OffsetCommitResponsePartition::default().with_partition_index(partition).with_error_code(error)
        },
        |name, partitions| OffsetCommitResponseTopic::default().with_name(name).with_partitions(partitions),
    ));
    codec::encode(SUPPORT.name, &r, version, out)
}

/// A partition of a commit request, whichever API carried it.
pub(super) trait CommittedPartition {
    fn index(&self) -> i32;
    fn offset(&self) -> i64;
    fn leader_epoch(&self) -> i32;
    fn metadata(&self) -> Option<&StrBytes>;
}

impl CommittedPartition for OffsetCommitRequestPartition {
    fn index(&self) -> i32 {
        self.partition_index
    }
    fn offset(&self) -> i64 {
        self.committed_offset
    }
    fn leader_epoch(&self) -> i32 {
        self.committed_leader_epoch
    }
    fn metadata(&self) -> Option<&StrBytes> {
        self.committed_metadata.as_ref()
    }
}

impl CommittedPartition for TxnOffsetCommitRequestPartition {
    fn index(&self) -> i32 {
        self.partition_index
    }
    fn offset(&self) -> i64 {
        self.committed_offset
    }
    fn leader_epoch(&self) -> i32 {
        self.committed_leader_epoch
    }
    fn metadata(&self) -> Option<&StrBytes> {
        self.committed_metadata.as_ref()
    }
}

/// The core's view of a commit request's topics. `has_leader_epoch` is false
/// for versions that predate the field, whose value is then -1 (unknown).
pub(super) fn commit_topics<'a, P: CommittedPartition + 'a>(
    topics: impl Iterator<Item = (&'a TopicName, &'a [P])>,
    has_leader_epoch: bool,
) -> Vec<m::CommitTopic> {
    topics
        .map(|(name, partitions)| m::CommitTopic {
            name: st(&name.0),
            partitions: partitions
                .iter()
                .map(|p| m::CommitPartition {
                    partition: p.index(),
                    offset: p.offset(),
                    leader_epoch: if has_leader_epoch { p.leader_epoch() } else { -1 },
                    metadata: p.metadata().map(st),
                })
                .collect(),
        })
        .collect()
}

/// A commit response's topics in the wire types of the API that answers,
/// built by `partition(index, error)` and `topic(name, partitions)`.
pub(super) fn response_topics<T, P>(
    resp: &m::OffsetCommitResponse,
    partition: impl Fn(i32, i16) -> P,
    topic: impl Fn(TopicName, Vec<P>) -> T,
) -> Vec<T> {
    resp.topics
        .iter()
        .map(|t| {
            let partitions = t.partitions.iter().map(|p| partition(p.partition, p.error.0)).collect();
            topic(TopicName(sb(t.name.clone())), partitions)
        })
        .collect()
}
