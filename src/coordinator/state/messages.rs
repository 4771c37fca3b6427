//! kcoord's own request and response types for the group APIs.
//!
//! Version-independent: the protocol layer maps every wire version onto these
//! (e.g. JoinGroup v0's missing rebalance timeout becomes the session
//! timeout) and back. The `version` fields are kept only where Kafka's
//! *behaviour* differs by version (KIP-394 MEMBER_ID_REQUIRED from v4, KIP-814
//! SkipAssignment from v9, GROUP_ID_NOT_FOUND for OffsetCommit v9+ and
//! DescribeGroups v6+).

use bytes::Bytes;

use crate::error_code::ErrorCode;

/// One protocol a member supports, in the member's order of preference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupRequest {
    pub version: i16,
    pub group_id: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    pub reason: Option<String>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse {
    pub error: ErrorCode,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    pub member_id: String,
    pub members: Vec<JoinGroupMember>,
}

impl JoinGroupResponse {
    /// Kafka's error template: generation -1, no protocol, no leader.
    pub fn error(error: ErrorCode, member_id: impl Into<String>) -> Self {
        JoinGroupResponse {
            error,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.into(),
            members: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupRequest {
    pub version: i16,
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResponse {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncGroupResponse {
    pub fn error(error: ErrorCode) -> Self {
        SyncGroupResponse { error, protocol_type: None, protocol_name: None, assignment: Bytes::new() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResponse {
    pub error: ErrorCode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupRequest {
    pub group_id: String,
    pub members: Vec<LeaveMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveMemberResult {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub error: ErrorCode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupResponse {
    /// Whole-request error (Dead group, unknown group below v3, ...).
    pub error: ErrorCode,
    pub members: Vec<LeaveMemberResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitPartition {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitTopic {
    pub name: String,
    pub partitions: Vec<CommitPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    pub version: i16,
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v2–v4 only; -1 means broker-side retention.
    pub retention_time_ms: i64,
    pub topics: Vec<CommitTopic>,
}

/// What a TxnOffsetCommit adds to an OffsetCommit: the transaction it is
/// part of (sidecar mode forwards these to the upstream as they came).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnFields {
    /// The client's TxnOffsetCommit version, which the upstream gets too.
    pub version: i16,
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionError {
    pub partition: i32,
    pub error: ErrorCode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicErrors {
    pub name: String,
    pub partitions: Vec<PartitionError>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitResponse {
    pub topics: Vec<TopicErrors>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopic {
    pub name: String,
    pub partitions: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchGroup {
    pub group_id: String,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    /// `None` asks for every committed offset of the group.
    pub topics: Option<Vec<FetchTopic>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchRequest {
    pub version: i16,
    pub groups: Vec<OffsetFetchGroup>,
    pub require_stable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub error: ErrorCode,
}

impl FetchedPartition {
    /// What Kafka answers for a partition with no committed offset.
    pub fn none(partition: i32) -> Self {
        FetchedPartition { partition, offset: -1, leader_epoch: -1, metadata: String::new(), error: ErrorCode::NONE }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedTopic {
    pub name: String,
    pub partitions: Vec<FetchedPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchGroupResult {
    pub group_id: String,
    pub error: ErrorCode,
    pub topics: Vec<FetchedTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchResponse {
    pub groups: Vec<OffsetFetchGroupResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDeleteRequest {
    pub group_id: String,
    pub topics: Vec<FetchTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDeleteResponse {
    pub error: ErrorCode,
    pub topics: Vec<TopicErrors>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeGroupsRequest {
    pub version: i16,
    pub groups: Vec<String>,
    pub include_authorized_operations: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    pub protocol_data: String,
    pub members: Vec<DescribedMember>,
    pub authorized_operations: Option<i32>,
}

impl DescribedGroup {
    /// A group answered without details (errors, unknown groups).
    pub fn bare(group_id: &str, error: ErrorCode, state: &str) -> Self {
        DescribedGroup {
            error,
            error_message: None,
            group_id: group_id.to_string(),
            state: state.to_string(),
            protocol_type: String::new(),
            protocol_data: String::new(),
            members: Vec::new(),
            authorized_operations: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListGroupsRequest {
    /// Lower-cased, trimmed state names; empty means no filter.
    pub states_filter: Vec<String>,
    /// Lower-cased type names; empty means no filter.
    pub types_filter: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
    pub group_type: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListGroupsResponse {
    pub error: ErrorCode,
    pub groups: Vec<ListedGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteGroupsResponse {
    pub results: Vec<(String, ErrorCode)>,
}

/// Everything known about one group, for the HTTP API and the admin CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDetails {
    pub group_id: String,
    pub state: String,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<MemberDetails>,
    pub offsets: Vec<OffsetDetails>,
    pub rebalances: Vec<crate::coordinator::classic::history::Rebalance>,
    /// What only a KIP-848 consumer group has (its members also appear in
    /// `members`, without classic assignment bytes).
    pub consumer: Option<ConsumerGroupDetails>,
}

/// A KIP-848 consumer group's epochs, assignor and members as
/// ConsumerGroupDescribe shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDetails {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<crate::coordinator::consumer::messages::DescribedConsumerMember>,
    /// The last group-epoch bumps with their causes and convergence.
    pub rebalances: Vec<crate::coordinator::consumer::history::EpochChange>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDetails {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDetails {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// One line per group for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    pub group_id: String,
    pub state: String,
    pub generation: i32,
    pub protocol_type: String,
    pub protocol: String,
    pub members: usize,
    pub last_rebalance_cause: Option<String>,
    /// When each rebalance (classic) or epoch bump (consumer) in the
    /// group's history started, oldest first (at most
    /// `group.rebalance_history`): the console counts the recent ones.
    pub rebalance_starts_ms: Vec<i64>,
}

/// Counts for metrics, per shard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardStats {
    pub groups_by_state: Vec<(String, usize)>,
    pub members: usize,
    pub offsets: usize,
}
