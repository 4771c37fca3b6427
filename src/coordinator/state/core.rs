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
use super::records::{self, Record, RecordKey, RecordValue, RecordView, StoredRecord};
use super::store::{RecordSink, Store};
use super::timers::{DeadlineQueue, Pop, Slot, TimerKey};
use crate::config::Config;
use crate::error_code::ErrorCode;
use std::sync::Arc;

/// Identifies where a response must be delivered.
pub type ReplyToken = u64;

/// A request to a shard.
#[derive(Debug, Clone)]
pub enum Request {
    Join(JoinGroupRequest),
    Sync(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    Leave(LeaveGroupRequest),
    Commit(OffsetCommitRequest),
    Fetch {
        group: OffsetFetchGroup,
        require_stable: bool,
    },
    OffsetDelete(OffsetDeleteRequest),
    Describe {
        group_id: String,
        version: i16,
        include_authorized_operations: bool,
    },
    List(ListGroupsRequest),
    Delete {
        group_id: String,
    },
    /// A topic was deleted: tombstone every group's offsets for it.
    DeleteTopicOffsets {
        topic: String,
    },
    /// Observability: one group in full.
    Details {
        group_id: String,
    },
    /// Observability: every group in brief.
    Summaries,
    /// Observability: counts for metrics.
    Stats,
    /// Sidecar mode: offsets committed on the upstream cluster, written as
    /// a simple commit only if this shard has never seen the group (no group
    /// and no offsets); otherwise nothing is written. With no topics it
    /// only asks whether the group is known.
    Import(OffsetCommitRequest),
    /// Sidecar mode: a TxnOffsetCommit to admit (its group, member,
    /// generation and partitions); admitting it makes the group delegated
    /// (`delegation`). Answered [`Response::Delegated`].
    TxnCommit(OffsetCommitRequest),
    /// Sidecar mode: the offsets of a delegated group still to be handed
    /// over to the upstream (`done: false`), or the record that they were
    /// (`done: true`). Answered [`Response::Handover`].
    Handover {
        group_id: String,
        done: bool,
    },
    /// KIP-848 ConsumerGroupHeartbeat (boxed: it is the largest request).
    ConsumerHeartbeat(Box<ConsumerHeartbeatRequest>),
    /// KIP-848 ConsumerGroupDescribe of one group.
    ConsumerDescribe(ConsumerDescribeRequest),
    /// A request with the topic metadata of the moment (standalone mode
    /// wraps JoinGroup and SyncGroup in it): a classic member of a consumer
    /// group names topics, the consumer group knows topic ids.
    WithTopics {
        topics: Arc<TopicImage>,
        /// What the requester may DESCRIBE (a classic JoinGroup into a
        /// consumer group can refresh its regular expressions).
        describable: Describable,
        inner: Box<Request>,
    },
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
            Request::Commit(r) | Request::Import(r) | Request::TxnCommit(r) => &r.group_id,
            Request::Handover { group_id, .. } => group_id,
            Request::Fetch { group, .. } => &group.group_id,
            Request::OffsetDelete(r) => &r.group_id,
            Request::Describe { group_id, .. } => group_id,
            Request::Delete { group_id } => group_id,
            Request::Details { group_id } => group_id,
            Request::ConsumerHeartbeat(r) => &r.group_id,
            Request::ConsumerDescribe(r) => &r.group_id,
            Request::WithTopics { inner, .. } => return inner.group_id(),
            Request::List(_) | Request::DeleteTopicOffsets { .. } | Request::Summaries | Request::Stats => return None,
        })
    }

    /// The error answer Kafka gives when the shard cannot serve at all
    /// (loading, shutting down, owned by another node): what Kafka's
    /// `handleOperationException` builds, with nothing of the request
    /// echoed (a JoinGroup's member id is empty).
    pub fn error_response(&self, error: ErrorCode) -> Response {
        match self {
            Request::Join(_) => Response::Join(JoinGroupResponse::error(error, "")),
            Request::Sync(_) => Response::Sync(SyncGroupResponse::error(error)),
            Request::Heartbeat(_) => Response::Heartbeat(HeartbeatResponse { error }),
            Request::Leave(_) => Response::Leave(LeaveGroupResponse { error, members: vec![] }),
            Request::Commit(r) => Response::Commit(offsets::commit_error_response(r, error)),
            Request::Import(_) => Response::Import(Err(error)),
            Request::TxnCommit(_) => Response::Delegated(Err(error)),
            Request::Handover { .. } => Response::Handover(Err(error)),
            // The group error with no topics, as Kafka 4.x answers: a v0-1
            // answer, which has no group-level error, then carries none.
            Request::Fetch { group, .. } => {
                Response::Fetch(OffsetFetchGroupResult { group_id: group.group_id.clone(), error, topics: vec![] })
            }
            Request::OffsetDelete(_) => Response::OffsetDelete(OffsetDeleteResponse { error, topics: vec![] }),
            Request::Describe { group_id, .. } => Response::Describe(DescribedGroup::bare(group_id, error, "")),
            Request::List(_) => Response::List(ListGroupsResponse { error, groups: vec![] }),
            Request::Delete { .. } | Request::DeleteTopicOffsets { .. } => Response::Delete(error),
            Request::Details { .. } => Response::Details(None),
            Request::Summaries => Response::Summaries(Vec::new()),
            Request::Stats => Response::Stats(ShardStats::default()),
            Request::ConsumerDescribe(r) => {
                Response::ConsumerDescribe(DescribedConsumerGroup::error(&r.group_id, error, None))
            }
            Request::WithTopics { inner, .. } => inner.error_response(error),
            Request::ConsumerHeartbeat(_) => Response::ConsumerHeartbeat(ConsumerHeartbeatResponse {
                error_message: None,
                ..ConsumerHeartbeatResponse::error(error, "")
            }),
        }
    }
}

/// A shard's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Join(JoinGroupResponse),
    Sync(SyncGroupResponse),
    Heartbeat(HeartbeatResponse),
    Leave(LeaveGroupResponse),
    Commit(OffsetCommitResponse),
    Fetch(OffsetFetchGroupResult),
    OffsetDelete(OffsetDeleteResponse),
    Describe(DescribedGroup),
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
    ConsumerDescribe(DescribedConsumerGroup),
}

/// What an [`Request::Import`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportOutcome {
    /// The shard already has the group: kcoord is its source of truth.
    AlreadyKnown,
    /// The group is new here; this many offsets were written.
    Imported(usize),
}

/// A response addressed to a waiting request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub token: ReplyToken,
    pub response: Response,
}

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
    pub ids: &'a mut dyn IdSource,
    /// Records written through this context so far.
    pub appended: u64,
}

impl Cx<'_> {
    pub fn reply(&mut self, token: ReplyToken, response: Response) {
        self.out.push(Reply { token, response });
    }

    /// Writes records and, only if the write succeeded, replays them into the
    /// durable state. What is replayed is decoded from the very bytes that
    /// were written, so live state equals a later recovery's by construction
    /// (e.g. an OffsetCommitValue v1 carries no leader epoch, live or
    /// reloaded, as in Kafka). On failure nothing changed and the error is
    /// mapped as Kafka maps coordinator write errors.
    pub fn append(&mut self, records: Vec<Record>) -> Result<(), ErrorCode> {
        if records.is_empty() {
            return Ok(());
        }
        let payloads =
            records.iter().map(|r| records::encode(r, self.now)).collect::<Result<Vec<Bytes>, _>>().map_err(|e| {
                // Kafka's parsers and serializers refuse such strings; we
                // refuse the operation before anything reaches the log.
                tracing::warn!(error = %e, "refusing a write whose record cannot be stored");
                ErrorCode::UNKNOWN_SERVER_ERROR
            })?;
        self.sink.append(&payloads).map_err(ErrorCode::for_coordinator_write)?;
        self.appended += payloads.len() as u64;
        for p in &payloads {
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
                if !empty {
                    let resp = classic_member::join(rt, &r, cx);
                    cx.reply(token, Response::Join(resp));
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
                        Err(e) => cx.reply(token, Response::Join(JoinGroupResponse::error(e, r.member_id))),
                    }
                }
            }
            Request::Sync(r) => {
                let resp = classic_member::sync(rt, &r, cx);
                cx.reply(token, Response::Sync(resp));
            }
            Request::Heartbeat(r) => {
                let resp = classic_member::heartbeat(rt, &r, cx);
                cx.reply(token, Response::Heartbeat(resp));
            }
            Request::Leave(r) => {
                let resp = classic_member::leave(rt, &r, cx);
                cx.reply(token, Response::Leave(resp));
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
        if let Some(resp) = super::prechecks::answer(&req, cx.cfg) {
            return cx.reply(token, resp);
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
        if let Some(response) = self.observed(&req) {
            out.push(Reply { token, response });
            return;
        }
        let (groups, consumer, mut cx) = self.split_all(now, sink, out);
        match req {
            Request::ConsumerDescribe(r) => {
                let resp = super::consumer::describe::describe(cx.store, groups, &consumer.assigners, &r);
                cx.reply(token, Response::ConsumerDescribe(resp));
            }
            Request::ConsumerHeartbeat(r) => {
                let resp = consumer_heartbeat::heartbeat(groups, consumer, *r, &mut cx);
                cx.reply(token, Response::ConsumerHeartbeat(resp));
            }
            Request::Join(r) => classic::join::join_group(groups, r, token, &mut cx),
            Request::Sync(r) => classic::sync::sync_group(groups, r, token, &mut cx),
            Request::Heartbeat(r) => {
                let resp = classic::heartbeat::heartbeat(groups, &r, &mut cx);
                cx.reply(token, Response::Heartbeat(resp));
            }
            Request::Leave(r) => {
                let resp = classic::leave::leave_group(groups, &r, &mut cx);
                cx.reply(token, Response::Leave(resp));
            }
            Request::Commit(r) => {
                let resp = match cx.store.delegation(&r.group_id) {
                    Some(_) => Response::Delegated(delegation::admit_commit(groups, &r, &mut cx)),
                    None => Response::Commit(offsets::commit(groups, &r, &mut cx)),
                };
                cx.reply(token, resp);
            }
            Request::Fetch { group, require_stable: _ } => {
                let resp = match cx.store.delegation(&group.group_id) {
                    Some(_) => Response::Delegated(delegation::admit_fetch(&group, &cx)),
                    None => Response::Fetch(offsets::fetch(groups, &group, &cx)),
                };
                cx.reply(token, resp);
            }
            Request::TxnCommit(r) => {
                let resp = delegation::admit_transactional(groups, &r, &mut cx);
                cx.reply(token, Response::Delegated(resp));
            }
            Request::Handover { group_id, done } => {
                let resp = if done {
                    match delegation::handed_over(&group_id, &mut cx) {
                        ErrorCode::NONE => Ok(None),
                        e => Err(e),
                    }
                } else {
                    Ok(delegation::offsets_to_hand_over(&group_id, &cx))
                };
                cx.reply(token, Response::Handover(resp));
            }
            Request::OffsetDelete(r) => {
                let resp = match cx.store.delegation(&r.group_id) {
                    Some(_) => {
                        let (admitted, checked) = delegation::admit_delete(groups, &r, &cx);
                        Response::DelegatedDelete(admitted, checked)
                    }
                    None => Response::OffsetDelete(offsets::delete_offsets(groups, &r, &mut cx)),
                };
                cx.reply(token, resp);
            }
            Request::Describe { group_id, version, include_authorized_operations } => {
                let resp = classic::describe::describe(groups, &group_id, version, include_authorized_operations);
                cx.reply(token, Response::Describe(resp));
            }
            Request::List(r) => {
                let mut groups = classic::describe::list(groups, &r);
                groups.extend(super::consumer::describe::list(cx.store, &r));
                groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
                cx.reply(token, Response::List(ListGroupsResponse { error: ErrorCode::NONE, groups }));
            }
            Request::Delete { group_id } => {
                let err = offsets::delete_group(groups, &group_id, &mut cx);
                cx.reply(token, Response::Delete(err));
            }
            Request::DeleteTopicOffsets { topic } => {
                let err = offsets::delete_topic_offsets(&topic, &mut cx);
                cx.reply(token, Response::Delete(err));
            }
            Request::Details { .. } | Request::Summaries => {
                // Served by `observed` before the split; never reached.
                cx.reply(token, req.error_response(ErrorCode::UNKNOWN_SERVER_ERROR));
            }
            Request::Stats => {
                let s = classic::describe::stats(groups, cx.store);
                cx.reply(token, Response::Stats(s));
            }
            Request::Import(r) => {
                let resp = offsets::import(groups, &r, &mut cx);
                cx.reply(token, Response::Import(resp));
            }
            Request::WithTopics { inner, .. } => {
                // Unwrapped by `handle`; a nested one carries nothing more.
                cx.reply(token, inner.error_response(ErrorCode::INVALID_REQUEST));
            }
        }
    }

    /// The observability views (`/v1/groups`): classic groups and consumer
    /// groups with their histories. `None` for any other request.
    fn observed(&self, req: &Request) -> Option<Response> {
        let consumer = &self.consumer;
        Some(match req {
            Request::Details { group_id } => {
                let d = classic::describe::details(&self.groups, &self.store, group_id).or_else(|| {
                    let session = self.cfg.consumer.session_timeout_ms;
                    let (assigners, topics) = (&consumer.assigners, &consumer.topics);
                    let mut d = super::consumer::describe::details(&self.store, assigners, topics, session, group_id)?;
                    if let Some(c) = d.consumer.as_mut() {
                        c.rebalances = self.consumer_history.entries(group_id);
                    }
                    Some(d)
                });
                Response::Details(d.map(Box::new))
            }
            Request::Summaries => {
                let mut s = classic::describe::summaries(&self.groups);
                let history = &self.consumer_history;
                s.extend(super::consumer::describe::summaries(&self.store, &consumer.assigners).map(|mut g| {
                    g.last_rebalance_cause = history.last_cause(&g.group_id).map(str::to_string);
                    g.rebalance_starts_ms = history.starts(&g.group_id);
                    g
                }));
                Response::Summaries(s)
            }
            _ => return None,
        })
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
