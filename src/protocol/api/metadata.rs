//! Metadata (key 3), v0–v13.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};

use crate::cluster::{self, TopicRef, TopicSelector};
use crate::protocol::codec::{self, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

/// v10 and v11 are deliberately included only because v12/v13 are too:
/// librdkafka asserts if the *maximum* is 10 or 11.
pub const SUPPORT: ApiSupport = ApiSupport::new(3, "Metadata", 0, 13, Some(9));

pub fn decode(body: &mut Bytes, version: i16) -> Result<cluster::MetadataRequest, DecodeError> {
    let r: MetadataRequest = codec::decode(SUPPORT.name, body, version)?;
    let topics = match r.topics {
        None => TopicSelector::All,
        // v0 has no null: an empty list means every topic.
        Some(t) if version == 0 && t.is_empty() => TopicSelector::All,
        Some(t) => TopicSelector::Only(
            t.iter()
                .map(|t| {
                    // A lookup by id carries a null name (an empty one from lenient clients).
                    let name = t.name.as_ref().map(|n| st(&n.0)).filter(|n| !n.is_empty() || t.topic_id.is_nil());
                    TopicRef { name, id: t.topic_id }
                })
                .collect(),
        ),
    };
    Ok(cluster::MetadataRequest {
        topics,
        allow_auto_topic_creation: r.allow_auto_topic_creation,
        include_cluster_authorized_operations: r.include_cluster_authorized_operations,
        include_topic_authorized_operations: r.include_topic_authorized_operations,
    })
}

pub fn encode(m: &cluster::MetadataResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let mut resp = MetadataResponse::default();
    resp.brokers = m
        .brokers
        .iter()
        .map(|b| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(sb(b.host.clone()))
                .with_port(b.port)
        })
        .collect();
    if version >= 2 {
        resp.cluster_id = Some(sb(m.cluster_id.clone()));
    }
    if version >= 1 {
        resp.controller_id = BrokerId(m.controller_id);
    }
    if (8..=10).contains(&version) {
        if let Some(ops) = m.cluster_authorized_operations {
            resp.cluster_authorized_operations = ops;
        }
    }
    resp.topics = m
        .topics
        .iter()
        .map(|t| {
            let mut topic = MetadataResponseTopic::default()
                .with_error_code(t.error.0)
                .with_is_internal(t.is_internal)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let mut part = MetadataResponsePartition::default()
                                .with_error_code(p.error.0)
                                .with_partition_index(p.index)
                                .with_leader_id(BrokerId(p.leader))
                                .with_replica_nodes(p.replicas.iter().map(|&r| BrokerId(r)).collect())
                                .with_isr_nodes(p.isr.iter().map(|&r| BrokerId(r)).collect());
                            if version >= 7 {
                                part.leader_epoch = p.leader_epoch;
                            }
                            part
                        })
                        .collect(),
                );
            // Names are only nullable from v12; older versions always carry one.
            topic.name = match (&t.name, version >= 12) {
                (Some(n), _) => Some(TopicName(sb(n.clone()))),
                (None, true) => None,
                (None, false) => Some(TopicName(sb(String::new()))),
            };
            if version >= 10 {
                topic.topic_id = t.id;
            }
            if version >= 8 {
                if let Some(ops) = t.authorized_operations {
                    topic.topic_authorized_operations = ops;
                }
            }
            topic
        })
        .collect();
    codec::encode(SUPPORT.name, &resp, version, out)
}
