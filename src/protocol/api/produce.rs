//! Produce (key 0), v3–v10: RecordBatch v2 only (v3 is the first version
//! that carries it; librdkafka needs Produce ≥ 3 with Fetch ≥ 4 to write it).
//! v5 adds the log start offset, v8 per-record errors and an error message,
//! v9 is flexible, v10 adds leader hints used only with NOT_LEADER errors.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};

use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::topics::produce as t;

pub const SUPPORT: ApiSupport = ApiSupport::new(0, "Produce", 3, 10, Some(9));

pub fn decode(body: &mut Bytes, version: i16) -> Result<t::ProduceRequest, DecodeError> {
    let r: ProduceRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(t::ProduceRequest {
        version,
        acks: r.acks,
        transactional_id: r.transactional_id.as_ref().map(|id| st(&id.0)),
        topics: r
            .topic_data
            .iter()
            .map(|topic| t::ProduceTopic {
                name: st(&topic.name.0),
                partitions: topic
                    .partition_data
                    .iter()
                    .map(|p| t::ProducePartition { index: p.index, records: p.records.clone() })
                    .collect(),
            })
            .collect(),
    })
}

pub fn encode(resp: &t::ProduceResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = ProduceResponse::default().with_responses(
        resp.topics
            .iter()
            .map(|topic| {
                TopicProduceResponse::default().with_name(TopicName(sb(topic.name.clone()))).with_partition_responses(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut x = PartitionProduceResponse::default()
                                .with_index(p.index)
                                .with_error_code(p.error.0)
                                .with_base_offset(p.base_offset)
                                .with_log_append_time_ms(p.log_append_time_ms);
                            if version >= 5 {
                                x.log_start_offset = p.log_start_offset;
                            }
                            if version >= 8 {
                                x.error_message = osb(p.error_message.clone());
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
