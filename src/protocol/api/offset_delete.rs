//! OffsetDelete (key 47), v0 (KIP-496).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, TopicName};

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(47, "OffsetDelete", 0, 0, None);

pub fn decode(body: &mut Bytes, version: i16) -> Result<m::OffsetDeleteRequest, DecodeError> {
    let r: OffsetDeleteRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(m::OffsetDeleteRequest {
        group_id: st(&r.group_id.0),
        topics: r
            .topics
            .iter()
            .map(|t| m::FetchTopic {
                name: st(&t.name.0),
                partitions: t.partitions.iter().map(|p| p.partition_index).collect(),
            })
            .collect(),
    })
}

pub fn encode(resp: &m::OffsetDeleteResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = OffsetDeleteResponse::default().with_error_code(resp.error.0).with_topics(
        resp.topics
            .iter()
            .map(|t| {
                OffsetDeleteResponseTopic::default().with_name(TopicName(sb(t.name.clone()))).with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetDeleteResponsePartition::default()
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
