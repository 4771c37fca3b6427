//! The pure core of a shard: `(state, request, now) -> replies + records`.
//!
//! No sockets, no clocks, no tokio. Time is a parameter, records go to a
//! [`RecordSink`], and answers go to a list of [`Reply`]s addressed by
//! [`ReplyToken`]. A parked JoinGroup or SyncGroup is just a token stored in
//! its member until a later call (a request or a timer) answers it. This is
//! what makes every timing scenario a fast, deterministic unit test.

use crate::coordinator::Groups;
use std::collections::HashMap;

use bytes::Bytes;

use super::classic::{self, group::ClassicGroup, group::GroupState, history::Cause};
use super::consumer::describable::Describable;
use super::consumer::heartbeat::{self as consumer_heartbeat, ConsumerRuntime, MemberTimer};
use super::consumer::history::{ConsumerHistories, Seen, Watch};
use super::consumer::messages::{
    ConsumerDescribeRequest, ConsumerHeartbeatRequest, ConsumerHeartbeatResponse, DescribedConsumerGroup,
};
use super::consumer::target::{Assigners, TopicImage};
use super::delegation::{self, Admitted};
use super::messages::*;
use super::offsets;
use super::records::{self, EncodedRecords, Record, RecordKey, RecordValue, RecordView, StoredRecord};
use super::store::{RecordSink, Store};
use super::timers::{DeadlineQueue, Pop, Slot, TimerKey};
use crate::config::Config;
use crate::error_code::ErrorCode;
use std::marker::PhantomData;
use std::sync::Arc;

/// Identifies where a response must be delivered.
pub type ReplyToken = u64;

/// A request to a shard. Each variant carries one kind of call
/// ([`ShardCall`]), which fixes the one kind of answer it gets.
#[derive(Debug, Clone)]
pub enum Request {
    /// JoinGroup and SyncGroup are boxed: the two largest requests are
    /// rare, and either unboxed would make every request as large (moved
    /// several times on its way into and out of the shard's mailbox).
    Join(Box<JoinGroupRequest>),
    Sync(Box<SyncGroupRequest>),
    Heartbeat(HeartbeatRequest),
    Leave(LeaveGroupRequest),
    /// Answered [`CommitAnswer`].
    Commit(OffsetCommitRequest),
    /// Answered [`FetchAnswer`].
    Fetch(FetchOffsets),
    /// Answered [`OffsetDeleteAnswer`].
    OffsetDelete(OffsetDeleteRequest),
    Describe(DescribeGroup),
    List(ListGroupsRequest),
    Delete(DeleteGroup),
    DeleteTopicOffsets(DeleteTopicOffsets),
    Details(Details),
    Summaries(Summaries),
    Stats(Stats),
    Import(Import),
    TxnCommit(TxnCommit),
    Handover(Handover),
    /// KIP-848 ConsumerGroupHeartbeat (boxed: it is the largest request).
    ConsumerHeartbeat(Box<ConsumerHeartbeatRequest>),
    /// KIP-848 ConsumerGroupDescribe of one group.
    ConsumerDescribe(ConsumerDescribeRequest),
    /// A request with the topic metadata of the moment (standalone mode
    /// wraps JoinGroup and SyncGroup in it): a classic member of a consumer
    /// group names topics, the consumer group knows topic ids. Answered as
    /// the inner request ([`WithTopics`]).
    WithTopics {
        topics: Arc<TopicImage>,
        /// What the requester may DESCRIBE (a classic JoinGroup into a
        /// consumer group can refresh its regular expressions).
        describable: Describable,
        inner: Box<Request>,
    },
}

/// OffsetFetch of one group.
#[derive(Debug, Clone)]
pub struct FetchOffsets {
    pub group: OffsetFetchGroup,
    pub require_stable: bool,
}

/// DescribeGroups of one classic group.
#[derive(Debug, Clone)]
pub struct DescribeGroup {
    pub group_id: String,
    pub version: i16,
    pub include_authorized_operations: bool,
}

/// DeleteGroups of one group.
#[derive(Debug, Clone)]
pub struct DeleteGroup {
    pub group_id: String,
}

/// A topic was deleted: tombstone every group's offsets for it.
#[derive(Debug, Clone)]
pub struct DeleteTopicOffsets {
    pub topic: String,
}

/// Observability: one group in full.
#[derive(Debug, Clone)]
pub struct Details {
    pub group_id: String,
}

/// Observability: every group in brief.
#[derive(Debug, Clone, Copy)]
pub struct Summaries;

/// Observability: counts for metrics.
#[derive(Debug, Clone, Copy)]
pub struct Stats;

/// Sidecar mode: offsets committed on the upstream cluster, written as a
/// simple commit only if this shard has never seen the group (no group and
/// no offsets); otherwise nothing is written. With no topics it only asks
/// whether the group is known.
#[derive(Debug, Clone)]
pub struct Import(pub OffsetCommitRequest);

/// Sidecar mode: a TxnOffsetCommit to admit (its group, member, generation
/// and partitions); admitting it makes the group delegated (`delegation`).
#[derive(Debug, Clone)]
pub struct TxnCommit(pub OffsetCommitRequest);

/// Sidecar mode: the offsets of a delegated group still to be handed over
/// to the upstream (`done: false`), or the record that they were
/// (`done: true`).
#[derive(Debug, Clone)]
pub struct Handover {
    pub group_id: String,
    pub done: bool,
}

/// A call wrapped with the topic metadata of the moment
/// ([`Request::WithTopics`]); answered as `inner`.
#[derive(Debug, Clone)]
pub struct WithTopics<C> {
    pub topics: Arc<TopicImage>,
    pub describable: Describable,
    pub inner: C,
}

/// One kind of request to a shard and the one kind of answer it gets.
///
/// The core answers a request only through a [`ReplyTo`] made from the
/// request itself ([`ReplyTo::of`]), and the shell's and service's error
/// answers come from [`ShardCall::error`]: an answer of the wrong kind for
/// a request does not compile.
pub trait ShardCall: Into<Request> {
    type Reply: Answer;
    /// The answer Kafka gives when the shard cannot serve at all (loading,
    /// shutting down, owned by another node): what Kafka's
    /// `handleOperationException` builds, with nothing of the request
    /// echoed (a JoinGroup's member id is empty).
    fn error(&self, error: ErrorCode) -> Self::Reply;
    /// The answer Kafka gives without looking at the group, if any
    /// (`prechecks`).
    fn precheck(&self, _cfg: &CoreConfig) -> Option<Self::Reply> {
        None
    }
    /// Sidecar mode: the group's offsets are imported from the upstream
    /// before the first request that creates the group or reads or writes
    /// its offsets.
    const IMPORTS_FIRST: bool = false;
}

/// One kind of shard answer, as it travels back in a [`Response`].
pub trait Answer: Into<Response> + Sized + Unpin + Send {
    /// The answer back out of its [`Response`]; `None` for a response of
    /// another kind.
    fn from_response(response: Response) -> Option<Self>;
}

/// Where the answer to one request goes, typed by the kind of answer the
/// request gets.
pub struct ReplyTo<T> {
    token: ReplyToken,
    answer: PhantomData<fn(T)>,
}

impl<T> ReplyTo<T> {
    /// The address for the answer to `call`, received under `token`.
    pub fn of<C: ShardCall<Reply = T>>(_call: &C, token: ReplyToken) -> Self {
        ReplyTo { token, answer: PhantomData }
    }

    pub fn token(&self) -> ReplyToken {
        self.token
    }
}

impl<T: Into<Response>> ReplyTo<T> {
    /// The reply carrying `answer`.
    pub fn answer(self, answer: T) -> Reply {
        Reply { token: self.token, response: answer.into(), sealed: Sealed }
    }
}

impl<T> Clone for ReplyTo<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ReplyTo<T> {}

impl<T> PartialEq for ReplyTo<T> {
    fn eq(&self, other: &Self) -> bool {
        self.token == other.token
    }
}

impl<T> Eq for ReplyTo<T> {}

impl<T> std::fmt::Debug for ReplyTo<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReplyTo({})", self.token)
    }
}

impl Request {
    /// The request itself, without a [`Request::WithTopics`] wrapper.
    pub fn unwrapped(&self) -> &Request {
        match self {
            Request::WithTopics { inner, .. } => inner.unwrapped(),
            other => other,
        }
    }

    /// The group the request is about (ListGroups is about every group).
    pub fn group_id(&self) -> Option<&str> {
        Some(match self {
            Request::Join(r) => &r.group_id,
            Request::Sync(r) => &r.group_id,
            Request::Heartbeat(r) => &r.group_id,
            Request::Leave(r) => &r.group_id,
            Request::Commit(r) | Request::Import(Import(r)) | Request::TxnCommit(TxnCommit(r)) => &r.group_id,
            Request::Handover(r) => &r.group_id,
            Request::Fetch(r) => &r.group.group_id,
            Request::OffsetDelete(r) => &r.group_id,
            Request::Describe(r) => &r.group_id,
            Request::Delete(r) => &r.group_id,
            Request::Details(r) => &r.group_id,
            Request::ConsumerHeartbeat(r) => &r.group_id,
            Request::ConsumerDescribe(r) => &r.group_id,
            Request::WithTopics { inner, .. } => return inner.group_id(),
            Request::List(_) | Request::DeleteTopicOffsets(_) | Request::Summaries(_) | Request::Stats(_) => {
                return None
            }
        })
    }

    /// [`ShardCall::error`] of the call inside, as it travels.
    pub fn error_response(&self, error: ErrorCode) -> Response {
        match self {
            Request::Join(r) => r.error(error).into(),
            Request::Sync(r) => r.error(error).into(),
            Request::Heartbeat(r) => r.error(error).into(),
            Request::Leave(r) => r.error(error).into(),
            Request::Commit(r) => r.error(error).into(),
            Request::Fetch(r) => r.error(error).into(),
            Request::OffsetDelete(r) => r.error(error).into(),
            Request::Describe(r) => r.error(error).into(),
            Request::List(r) => r.error(error).into(),
            Request::Delete(r) => r.error(error).into(),
            Request::DeleteTopicOffsets(r) => r.error(error).into(),
            Request::Details(r) => r.error(error).into(),
            Request::Summaries(r) => r.error(error).into(),
            Request::Stats(r) => r.error(error).into(),
            Request::Import(r) => r.error(error).into(),
            Request::TxnCommit(r) => r.error(error).into(),
            Request::Handover(r) => r.error(error).into(),
            Request::ConsumerHeartbeat(r) => r.error(error).into(),
            Request::ConsumerDescribe(r) => r.error(error).into(),
            Request::WithTopics { inner, .. } => inner.error_response(error),
        }
    }
}

/// A shard's answer, as it travels from the shard to the caller. Each kind
/// of call's answer ([`ShardCall::Reply`]) converts into it and back.
///
/// The rare large answers are boxed, so that the usual ones (heartbeats,
/// commits) are not moved at their size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Join(Box<JoinGroupResponse>),
    Sync(SyncGroupResponse),
    Heartbeat(HeartbeatResponse),
    Leave(LeaveGroupResponse),
    Commit(OffsetCommitResponse),
    Fetch(OffsetFetchGroupResult),
    OffsetDelete(OffsetDeleteResponse),
    Describe(Box<DescribedGroup>),
    List(ListGroupsResponse),
    Delete(ErrorCode),
    Details(Option<Box<GroupDetails>>),
    Summaries(Vec<GroupSummary>),
    Stats(ShardStats),
    Import(Result<ImportOutcome, ErrorCode>),
    /// A commit or fetch for a delegated group (or a TxnOffsetCommit) was
    /// admitted and goes to the upstream, or was refused.
    Delegated(Result<Admitted, ErrorCode>),
    /// An OffsetDelete for a delegated group, checked against kcoord's
    /// members: the partitions answered NONE are deleted upstream (unless
    /// the answer carries a group error).
    DelegatedDelete(Admitted, OffsetDeleteResponse),
    /// Offsets still to hand over (None: nothing, or done).
    Handover(Result<Option<Vec<CommitTopic>>, ErrorCode>),
    ConsumerHeartbeat(ConsumerHeartbeatResponse),
    ConsumerDescribe(Box<DescribedConsumerGroup>),
}

/// The answer to an OffsetCommit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitAnswer {
    /// Committed (or refused) here.
    Written(OffsetCommitResponse),
    /// The group's offsets are delegated: admitted for the upstream, or refused.
    Delegated(Result<Admitted, ErrorCode>),
}

/// The answer to an OffsetFetch of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchAnswer {
    /// Read here.
    Read(OffsetFetchGroupResult),
    /// The group's offsets are delegated: admitted for the upstream, or refused.
    Delegated(Result<Admitted, ErrorCode>),
}

/// The answer to an OffsetDelete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetDeleteAnswer {
    /// Deleted (or refused) here.
    Deleted(OffsetDeleteResponse),
    /// The group's offsets are delegated: kcoord's check of the request;
    /// the partitions answered NONE are deleted upstream (unless it
    /// carries a group error).
    Delegated(Admitted, OffsetDeleteResponse),
}

/// Answers that travel as one [`Response`] variant each.
macro_rules! answers {
    ($($variant:ident($answer:ty)),* $(,)?) => {$(
        impl From<$answer> for Response {
            fn from(answer: $answer) -> Self {
                Response::$variant(answer)
            }
        }

        impl Answer for $answer {
            fn from_response(response: Response) -> Option<Self> {
                match response {
                    Response::$variant(answer) => Some(answer),
                    _ => None,
                }
            }
        }
    )*};
    (boxed: $($variant:ident($answer:ty)),* $(,)?) => {$(
        impl From<$answer> for Response {
            fn from(answer: $answer) -> Self {
                Response::$variant(Box::new(answer))
            }
        }

        impl Answer for $answer {
            fn from_response(response: Response) -> Option<Self> {
                match response {
                    Response::$variant(answer) => Some(*answer),
                    _ => None,
                }
            }
        }
    )*};
}

answers! {
    Sync(SyncGroupResponse),
    Heartbeat(HeartbeatResponse),
    Leave(LeaveGroupResponse),
    List(ListGroupsResponse),
    Delete(ErrorCode),
    Details(Option<Box<GroupDetails>>),
    Summaries(Vec<GroupSummary>),
    Stats(ShardStats),
    Import(Result<ImportOutcome, ErrorCode>),
    Delegated(Result<Admitted, ErrorCode>),
    Handover(Result<Option<Vec<CommitTopic>>, ErrorCode>),
    ConsumerHeartbeat(ConsumerHeartbeatResponse),
}

answers! {
    boxed:
    Join(JoinGroupResponse),
    Describe(DescribedGroup),
    ConsumerDescribe(DescribedConsumerGroup),
}

impl From<CommitAnswer> for Response {
    fn from(answer: CommitAnswer) -> Self {
        match answer {
            CommitAnswer::Written(r) => Response::Commit(r),
            CommitAnswer::Delegated(r) => Response::Delegated(r),
        }
    }
}

impl Answer for CommitAnswer {
    fn from_response(response: Response) -> Option<Self> {
        match response {
            Response::Commit(r) => Some(CommitAnswer::Written(r)),
            Response::Delegated(r) => Some(CommitAnswer::Delegated(r)),
            _ => None,
        }
    }
}

impl From<FetchAnswer> for Response {
    fn from(answer: FetchAnswer) -> Self {
        match answer {
            FetchAnswer::Read(r) => Response::Fetch(r),
            FetchAnswer::Delegated(r) => Response::Delegated(r),
        }
    }
}

impl Answer for FetchAnswer {
    fn from_response(response: Response) -> Option<Self> {
        match response {
            Response::Fetch(r) => Some(FetchAnswer::Read(r)),
            Response::Delegated(r) => Some(FetchAnswer::Delegated(r)),
            _ => None,
        }
    }
}

impl From<OffsetDeleteAnswer> for Response {
    fn from(answer: OffsetDeleteAnswer) -> Self {
        match answer {
            OffsetDeleteAnswer::Deleted(r) => Response::OffsetDelete(r),
            OffsetDeleteAnswer::Delegated(a, r) => Response::DelegatedDelete(a, r),
        }
    }
}

impl Answer for OffsetDeleteAnswer {
    fn from_response(response: Response) -> Option<Self> {
        match response {
            Response::OffsetDelete(r) => Some(OffsetDeleteAnswer::Deleted(r)),
            Response::DelegatedDelete(a, r) => Some(OffsetDeleteAnswer::Delegated(a, r)),
            _ => None,
        }
    }
}

/// Calls whose payload is the variant's own: `impl From<payload> for Request`
/// (`Box` for the variants that box it).
macro_rules! calls {
    ($($variant:ident($call:ty)),* $(,)?) => {$(
        impl From<$call> for Request {
            fn from(call: $call) -> Self {
                Request::$variant(call.into())
            }
        }
    )*};
}

calls! {
    Join(JoinGroupRequest),
    Sync(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    Leave(LeaveGroupRequest),
    Commit(OffsetCommitRequest),
    Fetch(FetchOffsets),
    OffsetDelete(OffsetDeleteRequest),
    Describe(DescribeGroup),
    List(ListGroupsRequest),
    Delete(DeleteGroup),
    DeleteTopicOffsets(DeleteTopicOffsets),
    Details(Details),
    Summaries(Summaries),
    Stats(Stats),
    Import(Import),
    TxnCommit(TxnCommit),
    Handover(Handover),
    ConsumerDescribe(ConsumerDescribeRequest),
}

impl From<ConsumerHeartbeatRequest> for Request {
    fn from(call: ConsumerHeartbeatRequest) -> Self {
        Request::ConsumerHeartbeat(Box::new(call))
    }
}

impl<C: ShardCall> From<WithTopics<C>> for Request {
    fn from(call: WithTopics<C>) -> Self {
        Request::WithTopics { topics: call.topics, describable: call.describable, inner: Box::new(call.inner.into()) }
    }
}

impl ShardCall for JoinGroupRequest {
    type Reply = JoinGroupResponse;
    const IMPORTS_FIRST: bool = true;
    fn error(&self, error: ErrorCode) -> JoinGroupResponse {
        JoinGroupResponse::error(error, "")
    }
    fn precheck(&self, cfg: &CoreConfig) -> Option<JoinGroupResponse> {
        super::prechecks::join(self, cfg)
    }
}

impl ShardCall for SyncGroupRequest {
    type Reply = SyncGroupResponse;
    fn error(&self, error: ErrorCode) -> SyncGroupResponse {
        SyncGroupResponse::error(error)
    }
    fn precheck(&self, _cfg: &CoreConfig) -> Option<SyncGroupResponse> {
        super::prechecks::sync(self)
    }
}

impl ShardCall for HeartbeatRequest {
    type Reply = HeartbeatResponse;
    fn error(&self, error: ErrorCode) -> HeartbeatResponse {
        HeartbeatResponse { error }
    }
    fn precheck(&self, _cfg: &CoreConfig) -> Option<HeartbeatResponse> {
        super::prechecks::heartbeat(self)
    }
}

impl ShardCall for LeaveGroupRequest {
    type Reply = LeaveGroupResponse;
    fn error(&self, error: ErrorCode) -> LeaveGroupResponse {
        LeaveGroupResponse { error, members: vec![] }
    }
    fn precheck(&self, _cfg: &CoreConfig) -> Option<LeaveGroupResponse> {
        super::prechecks::leave(self)
    }
}

impl ShardCall for OffsetCommitRequest {
    type Reply = CommitAnswer;
    const IMPORTS_FIRST: bool = true;
    fn error(&self, error: ErrorCode) -> CommitAnswer {
        CommitAnswer::Written(offsets::commit_error_response(self, error))
    }
}

impl FetchOffsets {
    /// The group error with no topics, as Kafka 4.x answers: a v0-1
    /// answer, which has no group-level error, then carries none.
    pub fn error_result(&self, error: ErrorCode) -> OffsetFetchGroupResult {
        OffsetFetchGroupResult { group_id: self.group.group_id.clone(), error, topics: vec![] }
    }
}

impl ShardCall for FetchOffsets {
    type Reply = FetchAnswer;
    const IMPORTS_FIRST: bool = true;
    fn error(&self, error: ErrorCode) -> FetchAnswer {
        FetchAnswer::Read(self.error_result(error))
    }
}

impl ShardCall for OffsetDeleteRequest {
    type Reply = OffsetDeleteAnswer;
    fn error(&self, error: ErrorCode) -> OffsetDeleteAnswer {
        OffsetDeleteAnswer::Deleted(OffsetDeleteResponse { error, topics: vec![] })
    }
    fn precheck(&self, _cfg: &CoreConfig) -> Option<OffsetDeleteAnswer> {
        super::prechecks::offset_delete(self).map(OffsetDeleteAnswer::Deleted)
    }
}

impl ShardCall for DescribeGroup {
    type Reply = DescribedGroup;
    fn error(&self, error: ErrorCode) -> DescribedGroup {
        DescribedGroup::bare(&self.group_id, error, "")
    }
}

impl ShardCall for ListGroupsRequest {
    type Reply = ListGroupsResponse;
    fn error(&self, error: ErrorCode) -> ListGroupsResponse {
        ListGroupsResponse { error, groups: vec![] }
    }
}

impl ShardCall for DeleteGroup {
    type Reply = ErrorCode;
    fn error(&self, error: ErrorCode) -> ErrorCode {
        error
    }
}

impl ShardCall for DeleteTopicOffsets {
    type Reply = ErrorCode;
    fn error(&self, error: ErrorCode) -> ErrorCode {
        error
    }
}

impl ShardCall for Details {
    type Reply = Option<Box<GroupDetails>>;
    fn error(&self, _error: ErrorCode) -> Option<Box<GroupDetails>> {
        None
    }
}

impl ShardCall for Summaries {
    type Reply = Vec<GroupSummary>;
    fn error(&self, _error: ErrorCode) -> Vec<GroupSummary> {
        Vec::new()
    }
}

impl ShardCall for Stats {
    type Reply = ShardStats;
    fn error(&self, _error: ErrorCode) -> ShardStats {
        ShardStats::default()
    }
}

impl ShardCall for Import {
    type Reply = Result<ImportOutcome, ErrorCode>;
    fn error(&self, error: ErrorCode) -> Self::Reply {
        Err(error)
    }
}

impl ShardCall for TxnCommit {
    type Reply = Result<Admitted, ErrorCode>;
    const IMPORTS_FIRST: bool = true;
    fn error(&self, error: ErrorCode) -> Self::Reply {
        Err(error)
    }
}

impl ShardCall for Handover {
    type Reply = Result<Option<Vec<CommitTopic>>, ErrorCode>;
    fn error(&self, error: ErrorCode) -> Self::Reply {
        Err(error)
    }
}

impl ShardCall for ConsumerHeartbeatRequest {
    type Reply = ConsumerHeartbeatResponse;
    const IMPORTS_FIRST: bool = true;
    fn error(&self, error: ErrorCode) -> ConsumerHeartbeatResponse {
        ConsumerHeartbeatResponse { error_message: None, ..ConsumerHeartbeatResponse::error(error, "") }
    }
}

impl ShardCall for ConsumerDescribeRequest {
    type Reply = DescribedConsumerGroup;
    fn error(&self, error: ErrorCode) -> DescribedConsumerGroup {
        DescribedConsumerGroup::error(&self.group_id, error, None)
    }
}

impl<C: ShardCall> ShardCall for WithTopics<C> {
    type Reply = C::Reply;
    const IMPORTS_FIRST: bool = C::IMPORTS_FIRST;
    fn error(&self, error: ErrorCode) -> C::Reply {
        self.inner.error(error)
    }
    fn precheck(&self, cfg: &CoreConfig) -> Option<C::Reply> {
        self.inner.precheck(cfg)
    }
}

/// What an [`Import`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportOutcome {
    /// The shard already has the group: kcoord is its source of truth.
    AlreadyKnown,
    /// The group is new here; this many offsets were written.
    Imported(usize),
}

/// A response addressed to a waiting request. Only this module makes one:
/// through a [`ReplyTo`], or from a request's own error and precheck
/// answers ([`Request::error_response`], `prechecks::answer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub token: ReplyToken,
    pub response: Response,
    sealed: Sealed,
}

/// Keeps [`Reply`] from being made outside this module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sealed;

/// Source of the random part of member ids (a UUID in production, a
/// counter in deterministic tests).
pub trait IdSource: Send {
    fn next_uuid(&mut self) -> String;
}

/// Random version-4 UUIDs, as Kafka's `UUID.randomUUID()`.
#[derive(Debug, Default)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn next_uuid(&mut self) -> String {
        uuid::Uuid::new_v4().to_string()
    }
}

/// Predictable ids for tests: 00000000-0000-0000-0000-000000000001, ...
#[derive(Debug, Default)]
pub struct CountingIds(pub u64);

impl IdSource for CountingIds {
    fn next_uuid(&mut self) -> String {
        self.0 += 1;
        format!("00000000-0000-0000-0000-{:012}", self.0)
    }
}

/// The settings the core needs, in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i32,
    pub max_size: i32,
    pub new_member_join_timeout_ms: i32,
    pub offsets_retention_ms: i64,
    pub retention_check_interval_ms: i64,
    pub metadata_max_bytes: i32,
    pub tombstone_retention_ms: i64,
    /// Rebalances remembered per group.
    pub rebalance_history: usize,
    /// KIP-848 consumer groups (`group.consumer.*`).
    pub consumer: ConsumerConfig,
}

/// The `group.consumer.*` settings the core applies, in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: i32,
    /// `group.consumer.assignors`: names, the first being the default.
    pub assignors: Vec<String>,
    /// `group.consumer.migration_policy`.
    pub migration_policy: crate::config::MigrationPolicy,
}

impl ConsumerConfig {
    pub fn from_config(c: &crate::config::ConsumerGroupConfig) -> Self {
        ConsumerConfig {
            session_timeout_ms: c.session_timeout_ms,
            heartbeat_interval_ms: c.heartbeat_interval_ms,
            max_size: c.max_size,
            assignors: c.assignors.clone(),
            migration_policy: c.migration_policy,
        }
    }
}

impl CoreConfig {
    pub fn from_config(c: &Config) -> Self {
        CoreConfig {
            min_session_timeout_ms: c.group.min_session_timeout_ms,
            max_session_timeout_ms: c.group.max_session_timeout_ms,
            initial_rebalance_delay_ms: c.group.initial_rebalance_delay_ms,
            max_size: c.group.max_size,
            new_member_join_timeout_ms: c.group.new_member_join_timeout_ms,
            offsets_retention_ms: c.offsets.retention_minutes.saturating_mul(60_000),
            retention_check_interval_ms: c.offsets.retention_check_interval_ms,
            metadata_max_bytes: c.offsets.metadata_max_bytes,
            tombstone_retention_ms: c.offsets.tombstone_retention_ms,
            rebalance_history: c.group.rebalance_history,
            consumer: ConsumerConfig::from_config(&c.group.consumer),
        }
    }
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self::from_config(&Config::default())
    }
}

/// Everything an operation on one group may touch besides the group itself.
pub struct Cx<'a> {
    pub now: i64,
    pub cfg: &'a CoreConfig,
    pub timers: &'a mut DeadlineQueue,
    pub out: &'a mut Vec<Reply>,
    pub store: &'a mut Store,
    pub sink: &'a mut dyn RecordSink,
    /// The shard's buffer for encoding a write's records.
    pub encoded: &'a mut EncodedRecords,
    pub ids: &'a mut dyn IdSource,
    /// Records written through this context so far.
    pub appended: u64,
}

impl Cx<'_> {
    /// Answers a request, with the kind of answer it gets.
    pub fn reply<T: Into<Response>>(&mut self, to: ReplyTo<T>, answer: T) {
        self.out.push(to.answer(answer));
    }

    /// Writes records and, only if the write succeeded, replays them into the
    /// durable state. What is replayed is decoded from the very bytes that
    /// were written, so live state equals a later recovery's by construction
    /// (e.g. an OffsetCommitValue v1 carries no leader epoch, live or
    /// reloaded, as in Kafka). On failure nothing changed and the error is
    /// mapped as Kafka maps coordinator write errors.
    pub fn append(&mut self, records: Vec<Record>) -> Result<(), ErrorCode> {
        let now = self.now;
        self.append_encoded(|encoded| records.iter().try_for_each(|r| encoded.push(r, now)))
    }

    /// [`Cx::append`] of the records `encode` puts into the shard's buffer,
    /// for a caller that encodes them without building [`Record`]s first
    /// (`EncodedRecords::push_offset`).
    pub fn append_encoded(
        &mut self,
        encode: impl FnOnce(&mut EncodedRecords) -> Result<(), records::RecordError>,
    ) -> Result<(), ErrorCode> {
        let encoded = &mut *self.encoded;
        encoded.clear();
        encode(encoded).map_err(|e| {
            // Kafka's parsers and serializers refuse such strings; we
            // refuse the operation before anything reaches the log.
            tracing::warn!(error = %e, "refusing a write whose record cannot be stored");
            ErrorCode::UNKNOWN_SERVER_ERROR
        })?;
        if encoded.is_empty() {
            return Ok(());
        }
        self.sink.append(encoded).map_err(ErrorCode::for_coordinator_write)?;
        self.appended += encoded.len() as u64;
        for p in encoded.iter() {
            match records::decode_view(p) {
                Ok(view) => self.store.replay_view(&view),
                Err(e) => tracing::error!(error = %e, "a record we encoded does not decode"),
            }
        }
        Ok(())
    }
}

/// Classic-protocol requests for a consumer group's id (online migration).
mod classic_to_consumer {
    use super::*;
    use crate::coordinator::consumer::classic_member;

    /// Serves JoinGroup, SyncGroup, Heartbeat and LeaveGroup for a group id
    /// that is a consumer group, as Kafka's `classicGroup*ToConsumerGroup`;
    /// a JoinGroup for an empty consumer group first deletes it (Kafka's
    /// `maybeDeleteEmptyConsumerGroup`) and then goes to a new classic
    /// group. Returns the request when it is not for a consumer group.
    pub fn route(
        groups: &mut Groups,
        rt: &mut ConsumerRuntime,
        req: Request,
        token: ReplyToken,
        cx: &mut Cx,
    ) -> Option<Request> {
        let Some(group_id) = req.group_id() else { return Some(req) };
        let Some(g) = cx.store.consumer_group(group_id) else { return Some(req) };
        let empty = g.members.is_empty();
        match req {
            Request::Join(r) => {
                let to = ReplyTo::of(&*r, token);
                if !empty {
                    let resp = classic_member::join(rt, &r, cx);
                    cx.reply(to, resp);
                } else {
                    let tombstones = super::super::consumer::group::tombstones(g);
                    match cx.append(tombstones) {
                        Ok(()) => {
                            // Its offsets stay: they make a simple group, as
                            // they do when the log is replayed.
                            let id = r.group_id.clone();
                            if cx.store.has_offsets(&id) && !groups.contains_key(&id) {
                                let mut simple = ClassicGroup::new(&id, cx.now);
                                simple.state_timestamp = None;
                                groups.insert(id, simple);
                            }
                            return Some(Request::Join(r));
                        }
                        Err(e) => cx.reply(to, JoinGroupResponse::error(e, r.member_id)),
                    }
                }
            }
            Request::Sync(r) => {
                let resp = classic_member::sync(rt, &r, cx);
                cx.reply(ReplyTo::of(&*r, token), resp);
            }
            Request::Heartbeat(r) => {
                let resp = classic_member::heartbeat(rt, &r, cx);
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            Request::Leave(r) => {
                let resp = classic_member::leave(groups, rt, &r, cx);
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            other => return Some(other),
        }
        None
    }
}

/// One shard's groups, offsets and timers.
pub struct ShardCore {
    cfg: CoreConfig,
    pub(crate) groups: Groups,
    store: Store,
    timers: DeadlineQueue,
    ids: Box<dyn IdSource>,
    retention: Slot,
    /// KIP-848 consumer groups' timers, assignors and topic metadata (their
    /// state itself is in the store).
    consumer: ConsumerRuntime,
    /// Consumer groups' epoch history (in-memory, like classic groups').
    consumer_history: ConsumerHistories,
    /// Reused by every write ([`Cx::append`]).
    encoded: EncodedRecords,
}

impl ShardCore {
    /// A core with the configured server-side assignors
    /// (`group.consumer.assignors`, resolved by [`Assigners::configured`]).
    pub fn new(cfg: CoreConfig, ids: Box<dyn IdSource>) -> Self {
        let assigners = Assigners::configured(&cfg.consumer.assignors);
        Self::with_assigners(cfg, ids, assigners)
    }

    /// A core whose consumer groups use `assigners` (the first is the default).
    pub fn with_assigners(cfg: CoreConfig, ids: Box<dyn IdSource>, assigners: Assigners) -> Self {
        ShardCore {
            cfg,
            groups: Groups::default(),
            store: Store::new(),
            timers: DeadlineQueue::new(),
            ids,
            retention: Slot::default(),
            consumer: ConsumerRuntime::new(assigners),
            consumer_history: ConsumerHistories::default(),
            encoded: EncodedRecords::default(),
        }
    }

    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn group(&self, group_id: &str) -> Option<&ClassicGroup> {
        self.groups.get(group_id)
    }

    pub fn groups(&self) -> impl Iterator<Item = &ClassicGroup> {
        self.groups.values()
    }

    /// Replays one record while loading the log: durable state, plus the
    /// live group rebuilt from its latest record (Kafka's `replay` on load).
    pub fn load(&mut self, stored: StoredRecord) {
        self.store.replay(&stored);
        match (&stored.record.key, &stored.record.value) {
            (RecordKey::Group { group }, Some(RecordValue::Group(v))) => {
                self.groups.insert(group.clone(), ClassicGroup::from_record(group, v));
            }
            (RecordKey::Group { group }, None) => {
                self.groups.remove(group);
            }
            (RecordKey::Offset { group, .. }, Some(_)) => self.offset_loaded(group, stored.timestamp),
            (RecordKey::Offset { .. }, None) => {}
            // A consumer group replaces a simple (memberless) classic group
            // of the same id, as Kafka's replay does.
            (RecordKey::Consumer { group, .. }, Some(_))
                if self.groups.get(group).is_some_and(|g| g.members.is_empty()) =>
            {
                self.groups.remove(group);
            }
            // A consumer group deleted with its offsets kept (a classic
            // JoinGroup took its id): the offsets make a simple group again,
            // as they do live and in a snapshot, where they come first.
            (RecordKey::Consumer { group, kind: records::ConsumerKey::Metadata }, None)
                if self.store.has_offsets(group) =>
            {
                self.offset_loaded(group, stored.timestamp);
            }
            _ => {}
        }
    }

    /// An offset for a group we have not seen creates a simple group,
    /// unless the id belongs to a consumer group.
    fn offset_loaded(&mut self, group: &str, timestamp: i64) {
        if !self.groups.contains_key(group) && self.store.consumer_group(group).is_none() {
            let mut g = ClassicGroup::new(group, timestamp);
            g.state_timestamp = None;
            self.groups.insert(group.to_string(), g);
        }
    }

    /// Loads one log payload (the fast path for offset commits, which make
    /// up most of a log).
    pub fn load_payload(&mut self, payload: &[u8]) -> Result<(), records::RecordError> {
        match records::decode_view(payload)? {
            RecordView::Other(stored) => self.load(stored),
            view @ RecordView::Offset { timestamp, group, value: Some(_), .. } => {
                self.store.replay_view(&view);
                self.offset_loaded(group, timestamp);
            }
            view => self.store.replay_view(&view),
        }
        Ok(())
    }

    /// Kafka's `onLoaded`: arm every member's session, rebalance groups over
    /// the (possibly lowered) size limit, start the retention timer.
    pub fn on_loaded(&mut self, now: i64, sink: &mut dyn RecordSink, out: &mut Vec<Reply>) {
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        let (groups, consumer, mut cx) = self.split_all(now, sink, out);
        for id in ids {
            let Some(g) = groups.get_mut(&id) else { continue };
            let members: Vec<String> = g.members.keys().cloned().collect();
            for m in members {
                classic::rebalance::reschedule_heartbeat(g, &m, &mut cx);
            }
            if g.members.len() > cx.cfg.max_size.max(0) as usize {
                classic::rebalance::prepare_rebalance(g, &mut cx, Cause::OverMaxSize);
            }
        }
        consumer.on_loaded(&mut cx);
        let next = now + self.cfg.retention_check_interval_ms;
        self.retention.schedule(next, || TimerKey::Retention, &mut self.timers);
    }

    fn split<'a>(
        &'a mut self,
        now: i64,
        sink: &'a mut dyn RecordSink,
        out: &'a mut Vec<Reply>,
    ) -> (&'a mut Groups, Cx<'a>) {
        let (groups, _, cx) = self.split_all(now, sink, out);
        (groups, cx)
    }

    fn split_all<'a>(
        &'a mut self,
        now: i64,
        sink: &'a mut dyn RecordSink,
        out: &'a mut Vec<Reply>,
    ) -> (&'a mut Groups, &'a mut ConsumerRuntime, Cx<'a>) {
        (
            &mut self.groups,
            &mut self.consumer,
            Cx {
                now,
                cfg: &self.cfg,
                timers: &mut self.timers,
                out,
                store: &mut self.store,
                sink,
                encoded: &mut self.encoded,
                ids: self.ids.as_mut(),
                appended: 0,
            },
        )
    }

    /// Serves one request; answers (now or later) go to `out`.
    pub fn handle(
        &mut self,
        now: i64,
        token: ReplyToken,
        req: Request,
        sink: &mut dyn RecordSink,
        out: &mut Vec<Reply>,
    ) {
        let watch = self.watch(&req);
        let req = match req {
            Request::WithTopics { topics, describable, inner } => {
                self.consumer.topics = topics;
                self.consumer.describable = describable;
                *inner
            }
            req => req,
        };
        let (groups, consumer, mut cx) = self.split_all(now, sink, out);
        if let Some(response) = super::prechecks::answer(&req, cx.cfg) {
            return cx.out.push(Reply { token, response, sealed: Sealed });
        }
        if let Some(req) = classic_to_consumer::route(groups, consumer, req, token, &mut cx) {
            self.handle_own(req, token, now, sink, out);
        }
        if let Some(w) = watch {
            self.observe(w, now);
        }
    }

    /// Looks at the consumer group a request may change, for its history.
    fn watch(&self, req: &Request) -> Option<Watch> {
        Watch::request(req, &self.store, &self.groups, &self.consumer.topics)
    }

    /// Records in the group's history what the operation did to it.
    fn observe(&mut self, w: Watch, now: i64) {
        let seen = Seen {
            store: &self.store,
            assigners: &self.consumer.assigners,
            topics: &self.consumer.topics,
            now,
            capacity: self.cfg.rebalance_history,
        };
        self.consumer_history.after(w, &seen);
    }

    /// The epoch history of a consumer group, oldest first.
    pub fn consumer_history(&self, group_id: &str) -> Vec<super::consumer::history::EpochChange> {
        self.consumer_history.entries(group_id)
    }

    /// Serves a request that goes to the kind of group it was made for.
    fn handle_own(
        &mut self,
        req: Request,
        token: ReplyToken,
        now: i64,
        sink: &mut dyn RecordSink,
        out: &mut Vec<Reply>,
    ) {
        let req = match req {
            Request::Details(r) => return out.push(ReplyTo::of(&r, token).answer(self.details(&r.group_id))),
            Request::Summaries(r) => return out.push(ReplyTo::of(&r, token).answer(self.summaries())),
            req => req,
        };
        let (groups, consumer, mut cx) = self.split_all(now, sink, out);
        match req {
            Request::ConsumerDescribe(r) => {
                let resp = super::consumer::describe::describe(cx.store, groups, &consumer.assigners, &r);
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            Request::ConsumerHeartbeat(r) => {
                let to = ReplyTo::of(&*r, token);
                let resp = consumer_heartbeat::heartbeat(groups, consumer, *r, &mut cx);
                cx.reply(to, resp);
            }
            Request::Join(r) => {
                let to = ReplyTo::of(&*r, token);
                classic::join::join_group(groups, *r, to, &mut cx)
            }
            Request::Sync(r) => {
                let to = ReplyTo::of(&*r, token);
                classic::sync::sync_group(groups, *r, to, &mut cx)
            }
            Request::Heartbeat(r) => {
                let resp = classic::heartbeat::heartbeat(groups, &r, &mut cx);
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            Request::Leave(r) => {
                let resp = classic::leave::leave_group(groups, &r, &mut cx);
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            Request::Commit(r) => {
                let to = ReplyTo::of(&r, token);
                let resp = match cx.store.delegation(&r.group_id) {
                    Some(_) => CommitAnswer::Delegated(delegation::admit_commit(groups, &r, &mut cx)),
                    None => CommitAnswer::Written(offsets::commit(groups, r, &mut cx)),
                };
                cx.reply(to, resp);
            }
            Request::Fetch(r) => {
                let resp = match cx.store.delegation(&r.group.group_id) {
                    Some(_) => FetchAnswer::Delegated(delegation::admit_fetch(&r.group, &cx)),
                    None => FetchAnswer::Read(offsets::fetch(groups, &r.group, &cx)),
                };
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            Request::TxnCommit(r) => {
                let resp = delegation::admit_transactional(groups, &r.0, &mut cx);
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            Request::Handover(r) => {
                let resp = if r.done {
                    match delegation::handed_over(&r.group_id, &mut cx) {
                        ErrorCode::NONE => Ok(None),
                        e => Err(e),
                    }
                } else {
                    Ok(delegation::offsets_to_hand_over(&r.group_id, &cx))
                };
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            Request::OffsetDelete(r) => {
                let resp = match cx.store.delegation(&r.group_id) {
                    Some(_) => {
                        let (admitted, checked) = delegation::admit_delete(groups, &r, &cx);
                        OffsetDeleteAnswer::Delegated(admitted, checked)
                    }
                    None => OffsetDeleteAnswer::Deleted(offsets::delete_offsets(groups, &r, &mut cx)),
                };
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            Request::Describe(r) => {
                let resp = classic::describe::describe(groups, &r.group_id, r.version, r.include_authorized_operations);
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            Request::List(r) => {
                let mut listed = classic::describe::list(groups, &r);
                listed.extend(super::consumer::describe::list(cx.store, &r));
                listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
                cx.reply(ReplyTo::of(&r, token), ListGroupsResponse { error: ErrorCode::NONE, groups: listed });
            }
            Request::Delete(r) => {
                let err = offsets::delete_group(groups, &r.group_id, &mut cx);
                cx.reply(ReplyTo::of(&r, token), err);
            }
            Request::DeleteTopicOffsets(r) => {
                let err = offsets::delete_topic_offsets(&r.topic, &mut cx);
                cx.reply(ReplyTo::of(&r, token), err);
            }
            // Served before the split; never reached.
            Request::Details(r) => cx.reply(ReplyTo::of(&r, token), r.error(ErrorCode::UNKNOWN_SERVER_ERROR)),
            Request::Summaries(r) => cx.reply(ReplyTo::of(&r, token), r.error(ErrorCode::UNKNOWN_SERVER_ERROR)),
            Request::Stats(r) => {
                let s = classic::describe::stats(groups, cx.store);
                cx.reply(ReplyTo::of(&r, token), s);
            }
            Request::Import(r) => {
                let resp = offsets::import(groups, &r.0, &mut cx);
                cx.reply(ReplyTo::of(&r, token), resp);
            }
            Request::WithTopics { inner, .. } => {
                // Unwrapped by `handle`; a nested one carries nothing more.
                let response = inner.error_response(ErrorCode::INVALID_REQUEST);
                cx.out.push(Reply { token, response, sealed: Sealed });
            }
        }
    }

    /// Observability (`/v1/groups`): one group in full, classic or consumer
    /// with its history.
    fn details(&self, group_id: &str) -> Option<Box<GroupDetails>> {
        let consumer = &self.consumer;
        let d = classic::describe::details(&self.groups, &self.store, group_id).or_else(|| {
            let session = self.cfg.consumer.session_timeout_ms;
            let (assigners, topics) = (&consumer.assigners, &consumer.topics);
            let mut d = super::consumer::describe::details(&self.store, assigners, topics, session, group_id)?;
            if let Some(c) = d.consumer.as_mut() {
                c.rebalances = self.consumer_history.entries(group_id);
            }
            Some(d)
        });
        d.map(Box::new)
    }

    /// Observability (`/v1/groups`): every group in brief.
    fn summaries(&self) -> Vec<GroupSummary> {
        let consumer = &self.consumer;
        let mut s = classic::describe::summaries(&self.groups);
        let history = &self.consumer_history;
        s.extend(super::consumer::describe::summaries(&self.store, &consumer.assigners).map(|mut g| {
            g.last_rebalance_cause = history.last_cause(&g.group_id).map(str::to_string);
            g.rebalance_starts_ms = history.starts(&g.group_id);
            g
        }));
        s
    }

    /// The earliest pending deadline (possibly of a stale entry).
    pub fn next_deadline(&self) -> Option<i64> {
        self.timers.next_deadline()
    }

    /// Runs every timer due at `now`.
    pub fn fire_timers(&mut self, now: i64, sink: &mut dyn RecordSink, out: &mut Vec<Reply>) {
        while let Some((deadline, key)) = self.timers.pop_due(now) {
            match key {
                TimerKey::Retention => {
                    let fired = self.retention.on_pop(deadline, now, || TimerKey::Retention, &mut self.timers);
                    if fired == Pop::Fire {
                        let (groups, mut cx) = self.split(now, sink, out);
                        offsets::expire_offsets(groups, &mut cx);
                        self.consumer_history.retain_existing(&self.store);
                        let next = now + self.cfg.retention_check_interval_ms;
                        self.retention.schedule(next, || TimerKey::Retention, &mut self.timers);
                    }
                }
                TimerKey::Heartbeat { group, member } => {
                    let (groups, mut cx) = self.split(now, sink, out);
                    if let Some(g) = groups.get_mut(&group) {
                        classic::rebalance::on_heartbeat_timer(g, &member, deadline, &mut cx);
                    }
                }
                TimerKey::Join { group } => {
                    let (groups, mut cx) = self.split(now, sink, out);
                    if let Some(g) = groups.get_mut(&group) {
                        classic::rebalance::on_join_timer(g, deadline, &mut cx);
                    }
                }
                TimerKey::ConsumerSession { group, member } => {
                    self.consumer_timer(MemberTimer::Session, &group, &member, deadline, now, sink, out)
                }
                TimerKey::ConsumerRebalance { group, member } => {
                    self.consumer_timer(MemberTimer::Rebalance, &group, &member, deadline, now, sink, out)
                }
                TimerKey::ConsumerJoin { group, member } => {
                    self.consumer_timer(MemberTimer::Join, &group, &member, deadline, now, sink, out)
                }
                TimerKey::ConsumerSync { group, member } => {
                    self.consumer_timer(MemberTimer::Sync, &group, &member, deadline, now, sink, out)
                }
                TimerKey::Sync { group } => {
                    let (groups, mut cx) = self.split(now, sink, out);
                    if let Some(g) = groups.get_mut(&group) {
                        classic::rebalance::on_sync_timer(g, deadline, &mut cx);
                    }
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn consumer_timer(
        &mut self,
        which: MemberTimer,
        group: &str,
        member: &str,
        deadline: i64,
        now: i64,
        sink: &mut dyn RecordSink,
        out: &mut Vec<Reply>,
    ) {
        let watch = Watch::timer(group, which, member, &self.store, &self.consumer.topics);
        let (groups, consumer, mut cx) = self.split_all(now, sink, out);
        consumer.on_timer(groups, which, group, member, deadline, &mut cx);
        if let Some(w) = watch {
            self.observe(w, now);
        }
    }

    /// Kafka's unload on resignation: every group becomes Dead and parked
    /// requests get NOT_COORDINATOR. Used at shutdown.
    pub fn unload(&mut self, now: i64, out: &mut Vec<Reply>) {
        for g in self.groups.values_mut() {
            classic::rebalance::unload(g, now, out);
        }
        self.groups.clear();
        self.consumer_history.clear();
    }

    /// Records that rebuild the durable state (compaction snapshot).
    pub fn snapshot(&mut self, now: i64) -> Vec<Bytes> {
        let keep = self.cfg.tombstone_retention_ms;
        self.store.snapshot(now, keep)
    }

    /// Number of live groups by state, for metrics.
    pub fn count_by_state(&self) -> HashMap<GroupState, usize> {
        let mut m = HashMap::new();
        for g in self.groups.values() {
            *m.entry(g.state).or_insert(0) += 1;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's error answer, sent through the shard's channel as a
    /// [`Response`], comes back out as the call's own answer.
    fn error_answer_round_trips<C: ShardCall + Clone>(call: C)
    where
        C::Reply: PartialEq + std::fmt::Debug,
    {
        let error = ErrorCode::COORDINATOR_LOAD_IN_PROGRESS;
        let request: Request = call.clone().into();
        assert_eq!(C::Reply::from_response(request.error_response(error)), Some(call.error(error)));
    }

    #[test]
    fn every_calls_error_answer_is_of_its_own_kind() {
        let group = || "g".to_string();
        error_answer_round_trips(HeartbeatRequest {
            group_id: group(),
            generation_id: 1,
            member_id: "m".into(),
            group_instance_id: None,
        });
        error_answer_round_trips(LeaveGroupRequest { group_id: group(), members: vec![] });
        error_answer_round_trips(OffsetDeleteRequest { group_id: group(), topics: vec![] });
        error_answer_round_trips(FetchOffsets {
            group: OffsetFetchGroup { group_id: group(), member_id: None, member_epoch: -1, topics: None },
            require_stable: false,
        });
        error_answer_round_trips(DescribeGroup { group_id: group(), version: 5, include_authorized_operations: false });
        error_answer_round_trips(ListGroupsRequest { states_filter: vec![], types_filter: vec![] });
        error_answer_round_trips(DeleteGroup { group_id: group() });
        error_answer_round_trips(DeleteTopicOffsets { topic: "t".into() });
        error_answer_round_trips(Details { group_id: group() });
        error_answer_round_trips(Summaries);
        error_answer_round_trips(Stats);
        error_answer_round_trips(Handover { group_id: group(), done: false });
    }

    #[test]
    fn an_answer_of_another_kind_does_not_convert() {
        let heartbeat = Response::Heartbeat(HeartbeatResponse { error: ErrorCode::NONE });
        assert_eq!(CommitAnswer::from_response(heartbeat.clone()), None);
        assert_eq!(LeaveGroupResponse::from_response(heartbeat), None);
        let delegated = Response::Delegated(Err(ErrorCode::NOT_COORDINATOR));
        assert_eq!(
            FetchAnswer::from_response(delegated.clone()),
            Some(FetchAnswer::Delegated(Err(ErrorCode::NOT_COORDINATOR)))
        );
        assert_eq!(OffsetDeleteAnswer::from_response(delegated), None);
    }
}
