//! ConsumerGroupDescribe (key 69), v0–v1 (flexible); v1 adds `MemberType`.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::consumer_group_describe_response::{Assignment, DescribedGroup, Member, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::coordinator::consumer::messages::{DescribedConsumerGroup, DescribedTopicPartitions};
use crate::error_code::ErrorCode;
use crate::protocol::codec::{self, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(69, "ConsumerGroupDescribe", 0, 1, Some(0));

/// Kafka's "authorized operations not requested" sentinel.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// The group ids asked for, and whether authorized operations are wanted.
pub fn decode(body: &mut Bytes, version: i16) -> Result<(Vec<String>, bool), DecodeError> {
    let r: ConsumerGroupDescribeRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok((r.group_ids.iter().map(|g| st(&g.0)).collect(), r.include_authorized_operations))
}

fn assignment(parts: &[DescribedTopicPartitions]) -> Assignment {
    Assignment::default().with_topic_partitions(
        parts
            .iter()
            .map(|t| {
                TopicPartitions::default()
                    .with_topic_id(t.topic_id)
                    .with_topic_name(TopicName(StrBytes::from_string(t.topic_name.clone())))
                    .with_partitions(t.partitions.clone())
            })
            .collect(),
    )
}

pub fn encode(
    groups: &[DescribedConsumerGroup],
    authorized_operations: &dyn Fn(&str, ErrorCode) -> Option<i32>,
    version: i16,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let wire = ConsumerGroupDescribeResponse::default().with_groups(
        groups
            .iter()
            .map(|g| {
                DescribedGroup::default()
                    .with_error_code(g.error.0)
                    .with_error_message(g.error_message.clone().map(StrBytes::from_string))
                    .with_group_id(GroupId(StrBytes::from_string(g.group_id.clone())))
                    .with_group_state(StrBytes::from_string(g.group_state.clone()))
                    .with_group_epoch(g.group_epoch)
                    .with_assignment_epoch(g.assignment_epoch)
                    .with_assignor_name(StrBytes::from_string(g.assignor_name.clone()))
                    .with_authorized_operations(
                        authorized_operations(&g.group_id, g.error).unwrap_or(OPERATIONS_NOT_REQUESTED),
                    )
                    .with_members(
                        g.members
                            .iter()
                            .map(|m| {
                                Member::default()
                                    .with_member_id(StrBytes::from_string(m.member_id.clone()))
                                    .with_instance_id(m.instance_id.clone().map(StrBytes::from_string))
                                    .with_rack_id(m.rack_id.clone().map(StrBytes::from_string))
                                    .with_member_epoch(m.member_epoch)
                                    .with_client_id(StrBytes::from_string(m.client_id.clone()))
                                    .with_client_host(StrBytes::from_string(m.client_host.clone()))
                                    .with_subscribed_topic_names(
                                        m.subscribed_topic_names
                                            .iter()
                                            .map(|t| TopicName(StrBytes::from_string(t.clone())))
                                            .collect(),
                                    )
                                    .with_subscribed_topic_regex(
                                        m.subscribed_topic_regex.clone().map(StrBytes::from_string),
                                    )
                                    .with_assignment(assignment(&m.assignment))
                                    .with_target_assignment(assignment(&m.target_assignment))
                                    // v0 has no MemberType; the field is ignored there.
                                    .with_member_type(if version >= 1 { m.member_type } else { -1 })
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    codec::encode(SUPPORT.name, &wire, version, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::consumer::messages::DescribedConsumerMember;
    use crate::error_code::ErrorCode;
    use kafka_protocol::protocol::Decodable;
    use uuid::Uuid;

    #[test]
    fn a_described_group_encodes_in_both_versions() {
        let g = DescribedConsumerGroup {
            error: ErrorCode::NONE,
            error_message: None,
            group_id: "g".into(),
            group_state: "Stable".into(),
            group_epoch: 3,
            assignment_epoch: 3,
            assignor_name: "uniform".into(),
            members: vec![DescribedConsumerMember {
                member_id: "m".into(),
                instance_id: None,
                rack_id: None,
                member_epoch: 3,
                client_id: "c".into(),
                client_host: "/h".into(),
                subscribed_topic_names: vec!["t".into()],
                subscribed_topic_regex: None,
                assignment: vec![DescribedTopicPartitions {
                    topic_id: Uuid::from_bytes([3; 16]),
                    topic_name: "t".into(),
                    partitions: vec![0, 1],
                }],
                target_assignment: vec![],
                member_type: 1,
            }],
        };
        for v in 0..=1 {
            let mut out = BytesMut::new();
            encode(std::slice::from_ref(&g), &|_, _| None, v, &mut out).unwrap();
            let back = ConsumerGroupDescribeResponse::decode(&mut out.freeze(), v).unwrap();
            let d = &back.groups[0];
            assert_eq!((d.group_epoch, d.authorized_operations), (3, i32::MIN));
            assert_eq!(d.members[0].assignment.topic_partitions[0].partitions, vec![0, 1]);
            if v == 1 {
                assert_eq!(d.members[0].member_type, 1);
            }
        }
    }
}
