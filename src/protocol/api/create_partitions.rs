//! CreatePartitions (key 37), v0–v3. v2 is flexible; v3 changes nothing on
//! the wire (it marks clients that handle THROTTLING_QUOTA_EXCEEDED).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, TopicName};

use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::topics::create_partitions as t;

pub const SUPPORT: ApiSupport = ApiSupport::new(37, "CreatePartitions", 0, 3, Some(2));

pub fn decode(body: &mut Bytes, version: i16) -> Result<t::CreatePartitionsRequest, DecodeError> {
    let r: CreatePartitionsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(t::CreatePartitionsRequest {
        timeout_ms: r.timeout_ms,
        validate_only: r.validate_only,
        topics: r
            .topics
            .iter()
            .map(|topic| t::GrowTopic {
                name: st(&topic.name.0),
                count: topic.count,
                assignments: topic
                    .assignments
                    .as_ref()
                    .map(|a| a.iter().map(|x| x.broker_ids.iter().map(|b| b.0).collect()).collect()),
            })
            .collect(),
    })
}

pub fn encode(resp: &t::CreatePartitionsResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = CreatePartitionsResponse::default().with_results(
        resp.results
            .iter()
            .map(|x| {
                CreatePartitionsTopicResult::default()
                    .with_name(TopicName(sb(x.name.clone())))
                    .with_error_code(x.error.0)
                    .with_error_message(osb(x.message.clone()))
            })
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
