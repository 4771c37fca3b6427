//! A consumer group member as a Kafka consumer is one on the wire: the
//! consumer protocol's subscription and assignment bytes, JoinGroup with
//! KIP-394's MEMBER_ID_REQUIRED round trip, and the leader's SyncGroup.

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kcoord::protocol::consumer_protocol;

use super::{sb, Client};

/// A ConsumerProtocolSubscription v0 of `topics`, without user data.
pub fn subscription(topics: &[&str]) -> Bytes {
    consumer_protocol::encode_subscription(topics)
}

/// A ConsumerProtocolAssignment v0 of `partitions` of `topic`, without user data.
pub fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    consumer_protocol::encode_assignment(&[(topic.to_string(), partitions.to_vec())], 0)
}

/// A JoinGroup (v8 fields) for a range consumer of `topics`: 10 s session
/// and rebalance timeouts, KIP-800 reason "starting up".
pub fn join_request(group: &str, member: &str, topics: &[&str]) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(sb(member))
        .with_protocol_type(sb("consumer"))
        .with_reason(Some(sb("starting up")))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(sb("range"))
            .with_metadata(subscription(topics))])
}

/// Sends JoinGroup v8; a new member told MEMBER_ID_REQUIRED rejoins with its id.
pub async fn join(c: &mut Client, req: JoinGroupRequest) -> JoinGroupResponse {
    let r = c.send(&req, 8).await;
    if r.error_code == 79 {
        return c.send(&req.with_member_id(r.member_id.clone()), 8).await;
    }
    r
}

/// SyncGroup v3 from `member`, with the leader's `assignments` (empty for a follower).
pub async fn sync(
    c: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
    assignments: &[(&str, Bytes)],
) -> SyncGroupResponse {
    let req = SyncGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id(generation)
        .with_member_id(sb(member))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| SyncGroupRequestAssignment::default().with_member_id(sb(m)).with_assignment(a.clone()))
                .collect(),
        );
    c.send(&req, 3).await
}

/// Joins alone and takes `partitions` of `topic`; returns (member id, generation).
pub async fn join_alone(c: &mut Client, group: &str, topic: &str, partitions: &[i32]) -> (String, i32) {
    let j = join(c, join_request(group, "", &[topic])).await;
    assert_eq!(j.error_code, 0, "{j:?}");
    let member = j.member_id.to_string();
    let s = sync(c, group, j.generation_id, &member, &[(&member, assignment(topic, partitions))]).await;
    assert_eq!(s.error_code, 0, "{s:?}");
    (member, j.generation_id)
}
