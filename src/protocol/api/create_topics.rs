//! CreateTopics (key 19), v2–v7 (v0–v1 were removed in Kafka 4.0). v5 is
//! flexible and returns the partition count, replication factor and configs
//! of created topics; v7 returns the topic id.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};

use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::topics::admin as t;

pub const SUPPORT: ApiSupport = ApiSupport::new(19, "CreateTopics", 2, 7, Some(5));

pub fn decode(body: &mut Bytes, version: i16) -> Result<t::CreateTopicsRequest, DecodeError> {
    let r: CreateTopicsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(t::CreateTopicsRequest {
        validate_only: r.validate_only,
        topics: r
            .topics
            .iter()
            .map(|topic| t::NewTopic {
                name: st(&topic.name.0),
                num_partitions: topic.num_partitions,
                replication_factor: topic.replication_factor,
                assignments: topic
                    .assignments
                    .iter()
                    .map(|a| (a.partition_index, a.broker_ids.iter().map(|b| b.0).collect()))
                    .collect(),
                configs: topic.configs.iter().map(|c| (st(&c.name), c.value.as_ref().map(st))).collect(),
            })
            .collect(),
    })
}

pub fn encode(resp: &t::CreateTopicsResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = CreateTopicsResponse::default().with_topics(
        resp.topics
            .iter()
            .map(|topic| {
                let mut x = CreatableTopicResult::default()
                    .with_name(TopicName(sb(topic.name.clone())))
                    .with_error_code(topic.error.0)
                    .with_error_message(osb(topic.message.clone()));
                if version >= 5 {
                    x.topic_config_error_code = topic.config_error.0;
                    x.num_partitions = topic.num_partitions;
                    x.replication_factor = topic.replication_factor;
                    x.configs = topic.configs.as_ref().map(|cs| {
                        cs.iter()
                            .map(|c| {
                                CreatableTopicConfigs::default()
                                    .with_name(sb(c.name.clone()))
                                    .with_value(Some(sb(c.value.clone())))
                                    .with_config_source(c.source)
                            })
                            .collect()
                    });
                }
                if version >= 7 {
                    x.topic_id = topic.topic_id;
                }
                x
            })
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
