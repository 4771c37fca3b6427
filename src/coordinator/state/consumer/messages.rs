//! ConsumerGroupHeartbeat as the core sees it: the wire fields that matter,
//! decoded by the protocol layer, plus the topic metadata the shard must
//! resolve subscriptions against (the core has no catalog of its own).

use std::sync::Arc;

use uuid::Uuid;

use super::describable::Describable;
use super::records::Assignment;
use super::target::TopicImage;
use crate::error_code::ErrorCode;

/// A ConsumerGroupHeartbeat request (v0–v1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatRequest {
    pub version: i16,
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// −1 when not sent (unchanged).
    pub rebalance_timeout_ms: i32,
    /// None when unchanged since the last heartbeat.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// What the member owns; None when unchanged.
    pub topic_partitions: Option<Vec<(Uuid, Vec<i32>)>>,
    pub client_id: String,
    pub client_host: String,
    /// The topics known when the request was sent to the shard.
    pub topics: Arc<TopicImage>,
    /// The topics the requester may DESCRIBE: what its refresh of the
    /// group's regular expressions may resolve to.
    pub describable: Describable,
}

impl ConsumerHeartbeatRequest {
    /// A v1 heartbeat of `member` at `epoch` that changes nothing (only the
    /// required fields): what the core's tests build their requests on.
    #[cfg(test)]
    pub fn unchanged(group_id: &str, member: &str, epoch: i32, topics: Arc<TopicImage>) -> Self {
        ConsumerHeartbeatRequest {
            version: 1,
            group_id: group_id.into(),
            member_id: member.into(),
            member_epoch: epoch,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            subscribed_topic_regex: None,
            server_assignor: None,
            topic_partitions: None,
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            topics,
            describable: Describable::all(),
        }
    }

    /// The owned partitions as an assignment (None when not sent).
    pub fn owned(&self) -> Option<Assignment> {
        self.topic_partitions.as_ref().map(|tps| {
            let mut a = Assignment::new();
            for (t, ps) in tps {
                a.entry(*t).or_default().extend(ps.iter().copied());
            }
            a
        })
    }
}

/// A ConsumerGroupHeartbeat response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatResponse {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Present on a full request or when the assignment changed.
    pub assignment: Option<Assignment>,
}

impl ConsumerHeartbeatResponse {
    pub fn error(error: ErrorCode, message: impl Into<String>) -> Self {
        ConsumerHeartbeatResponse {
            error,
            error_message: Some(message.into()),
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

/// ConsumerGroupDescribe for one group (the service fans a request out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerDescribeRequest {
    pub group_id: String,
    /// Resolves topic ids to names in assignments.
    pub topics: Arc<TopicImage>,
}

/// One partition set with its topic name, as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedTopicPartitions {
    pub topic_id: Uuid,
    /// "" when the topic is not known (any more).
    pub topic_name: String,
    pub partitions: Vec<i32>,
}

/// One member in ConsumerGroupDescribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Vec<DescribedTopicPartitions>,
    pub target_assignment: Vec<DescribedTopicPartitions>,
    /// v1 `MemberType`: 1 consumer protocol (0 classic, −1 unknown).
    pub member_type: i8,
}

/// One group in ConsumerGroupDescribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedConsumerGroup {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub group_id: String,
    pub group_state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<DescribedConsumerMember>,
}

impl DescribedConsumerGroup {
    pub fn error(group_id: &str, error: ErrorCode, message: Option<String>) -> Self {
        DescribedConsumerGroup {
            error,
            error_message: message,
            group_id: group_id.to_string(),
            group_state: String::new(),
            group_epoch: 0,
            assignment_epoch: 0,
            assignor_name: String::new(),
            members: Vec::new(),
        }
    }
}
