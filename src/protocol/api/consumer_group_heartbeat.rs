//! ConsumerGroupHeartbeat (key 68), v0–v1 (both flexible). v1 differs only
//! in that the client must generate its member id (KIP-1082), which the
//! core checks from the version.
//! See docs/consumer-groups.md for what is served and what is not yet.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use crate::coordinator::consumer::messages as m;
use crate::coordinator::consumer::target::TopicImage;
use crate::protocol::codec::{self, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(68, "ConsumerGroupHeartbeat", 0, 1, Some(0));

/// Decodes a request; the caller fills in `topics` (the catalog's view).
pub fn decode(
    body: &mut Bytes,
    version: i16,
    client_id: &str,
    client_host: &str,
) -> Result<m::ConsumerHeartbeatRequest, DecodeError> {
    let r: ConsumerGroupHeartbeatRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(m::ConsumerHeartbeatRequest {
        version,
        group_id: st(&r.group_id.0),
        member_id: st(&r.member_id),
        member_epoch: r.member_epoch,
        instance_id: r.instance_id.as_ref().map(st),
        rack_id: r.rack_id.as_ref().map(st),
        rebalance_timeout_ms: r.rebalance_timeout_ms,
        subscribed_topic_names: r.subscribed_topic_names.map(|v| v.iter().map(|t| st(&t.0)).collect()),
        // librdkafka sends an empty regex when it subscribes by name: Kafka
        // then clears the member's regex (see `heartbeat::updated_member`),
        // so the empty string is kept.
        subscribed_topic_regex: r.subscribed_topic_regex.as_ref().map(st),
        server_assignor: r.server_assignor.as_ref().map(st),
        topic_partitions: r.topic_partitions.map(|v| v.into_iter().map(|tp| (tp.topic_id, tp.partitions)).collect()),
        client_id: client_id.to_string(),
        client_host: client_host.to_string(),
        topics: Arc::new(TopicImage::default()),
        // The server fills in what the requester may DESCRIBE.
        describable: crate::coordinator::consumer::describable::Describable::all(),
    })
}

pub fn encode(resp: &m::ConsumerHeartbeatResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let assignment = resp.assignment.as_ref().map(|a| {
        Assignment::default().with_topic_partitions(
            a.iter()
                .map(|(t, ps)| {
                    TopicPartitions::default().with_topic_id(*t).with_partitions(ps.iter().copied().collect())
                })
                .collect(),
        )
    });
    let wire = ConsumerGroupHeartbeatResponse::default()
        .with_error_code(resp.error.0)
        .with_error_message(resp.error_message.clone().map(StrBytes::from_string))
        .with_member_id(resp.member_id.clone().map(StrBytes::from_string))
        .with_member_epoch(resp.member_epoch)
        .with_heartbeat_interval_ms(resp.heartbeat_interval_ms)
        .with_assignment(assignment);
    codec::encode(SUPPORT.name, &wire, version, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::ErrorCode;
    use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as OwnedTp;
    use kafka_protocol::messages::{GroupId, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable};
    use uuid::Uuid;

    #[test]
    fn a_librdkafka_style_v1_request_decodes() {
        let t = Uuid::from_bytes([7; 16]);
        let wire = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_member_id(StrBytes::from_static_str("m"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(300_000)
            .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("t"))]))
            .with_topic_partitions(Some(vec![OwnedTp::default().with_topic_id(t).with_partitions(vec![1])]));
        let mut b = BytesMut::new();
        wire.encode(&mut b, 1).unwrap();
        let r = decode(&mut b.freeze(), 1, "rdkafka", "/10.0.0.1").unwrap();
        assert_eq!((r.version, r.group_id.as_str(), r.member_id.as_str(), r.member_epoch), (1, "g", "m", 0));
        assert_eq!(r.subscribed_topic_names, Some(vec!["t".to_string()]));
        assert_eq!(r.topic_partitions, Some(vec![(t, vec![1])]));
        assert_eq!((r.instance_id, r.server_assignor, r.client_id.as_str()), (None, None, "rdkafka"));
    }

    #[test]
    fn responses_encode_with_and_without_an_assignment() {
        let t = Uuid::from_bytes([7; 16]);
        let resp = m::ConsumerHeartbeatResponse {
            error: ErrorCode::NONE,
            error_message: None,
            member_id: Some("m".into()),
            member_epoch: 3,
            heartbeat_interval_ms: 5000,
            assignment: Some([(t, [0, 2].into_iter().collect())].into_iter().collect()),
        };
        for v in 0..=1 {
            let mut out = BytesMut::new();
            encode(&resp, v, &mut out).unwrap();
            let back = ConsumerGroupHeartbeatResponse::decode(&mut out.freeze(), v).unwrap();
            assert_eq!((back.member_epoch, back.heartbeat_interval_ms), (3, 5000));
            let a = back.assignment.unwrap();
            assert_eq!(a.topic_partitions[0].partitions, vec![0, 2]);
        }
        let refused = m::ConsumerHeartbeatResponse::error(ErrorCode::FENCED_MEMBER_EPOCH, "x");
        let mut out = BytesMut::new();
        encode(&refused, 1, &mut out).unwrap();
        let back = ConsumerGroupHeartbeatResponse::decode(&mut out.freeze(), 1).unwrap();
        assert_eq!((back.error_code, back.assignment.is_none()), (110, true));
    }
}
