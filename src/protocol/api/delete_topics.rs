//! DeleteTopics (key 20), v1–v6 (v0 was removed in Kafka 4.0). v4 is
//! flexible, v5 adds error messages, v6 addresses topics by name or by id.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};

use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::topics::admin as t;

pub const SUPPORT: ApiSupport = ApiSupport::new(20, "DeleteTopics", 1, 6, Some(4));

pub fn decode(body: &mut Bytes, version: i16) -> Result<Vec<t::DeleteTopic>, DecodeError> {
    let r: DeleteTopicsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(if version >= 6 {
        r.topics.iter().map(|x| t::DeleteTopic { name: x.name.as_ref().map(|n| st(&n.0)), id: x.topic_id }).collect()
    } else {
        r.topic_names.iter().map(|n| t::DeleteTopic { name: Some(st(&n.0)), id: uuid::Uuid::nil() }).collect()
    })
}

pub fn encode(results: &[t::DeletedTopic], version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = DeleteTopicsResponse::default().with_responses(
        results
            .iter()
            .map(|d| {
                let mut x = DeletableTopicResult::default().with_error_code(d.error.0);
                // Names are only nullable from v6.
                x.name = match (&d.name, version >= 6) {
                    (Some(n), _) => Some(TopicName(sb(n.clone()))),
                    (None, true) => None,
                    (None, false) => Some(TopicName(sb(String::new()))),
                };
                if version >= 5 {
                    x.error_message = osb(d.message.clone());
                }
                if version >= 6 {
                    x.topic_id = d.id;
                }
                x
            })
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
