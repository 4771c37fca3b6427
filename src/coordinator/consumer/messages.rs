//! ConsumerGroupHeartbeat as the core sees it: the wire fields that matter,
//! decoded by the protocol layer, plus the topic metadata the shard must
//! resolve subscriptions against (the core has no catalog of its own).

use std::sync::Arc;

use uuid::Uuid;

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
}

impl ConsumerHeartbeatRequest {
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
