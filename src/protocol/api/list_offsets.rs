//! ListOffsets (key 2), v1–v10. v2 adds the isolation level, v4 leader
//! epochs, v6 is flexible, v7 allows -3 (max timestamp), v8 -4 (earliest
//! local), v9 -5 (latest tiered), v10 a timeout for tiered lookups (unused:
//! all data is local). Which timestamp each version may use is checked in
//! `topics::list_offsets`.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};

use crate::protocol::codec::{self, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::topics::list_offsets as t;

pub const SUPPORT: ApiSupport = ApiSupport::new(2, "ListOffsets", 1, 10, Some(6));

pub fn decode(body: &mut Bytes, version: i16) -> Result<t::ListOffsetsRequest, DecodeError> {
    let r: ListOffsetsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(t::ListOffsetsRequest {
        version,
        isolation_level: if version >= 2 { r.isolation_level } else { 0 },
        topics: r
            .topics
            .iter()
            .map(|topic| t::ListOffsetsTopic {
                name: st(&topic.name.0),
                partitions: topic
                    .partitions
                    .iter()
                    .map(|p| t::ListOffsetsPartition {
                        partition: p.partition_index,
                        current_leader_epoch: if version >= 4 { p.current_leader_epoch } else { -1 },
                        timestamp: p.timestamp,
                    })
                    .collect(),
            })
            .collect(),
    })
}

pub fn encode(resp: &t::ListOffsetsResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = ListOffsetsResponse::default().with_topics(
        resp.topics
            .iter()
            .map(|topic| {
                ListOffsetsTopicResponse::default().with_name(TopicName(sb(topic.name.clone()))).with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut x = ListOffsetsPartitionResponse::default()
                                .with_partition_index(p.partition)
                                .with_error_code(p.error.0)
                                .with_timestamp(p.timestamp)
                                .with_offset(p.offset);
                            if version >= 4 {
                                x.leader_epoch = p.leader_epoch;
                            }
                            x
                        })
                        .collect(),
                )
            })
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
