//! A deterministic harness around [`ShardCore`] for unit and property tests:
//! simulated time, an in-memory log, predictable member ids, and helpers to
//! build requests and collect answers.
#![cfg(test)]

use bytes::Bytes;

use super::core::{
    CoreConfig, CountingIds, DescribeGroup, FetchOffsets, Reply, ReplyToken, Request, Response, ShardCore,
};
use super::messages::*;
use super::records;
use super::store::MemorySink;
use crate::error_code::ErrorCode;

pub struct Harness {
    pub core: ShardCore,
    pub sink: MemorySink,
    pub now: i64,
    next_token: ReplyToken,
    pub replies: Vec<Reply>,
}

/// Fast test settings: no initial delay unless a test sets one.
pub fn test_config() -> CoreConfig {
    CoreConfig {
        min_session_timeout_ms: 6000,
        max_session_timeout_ms: 1_800_000,
        initial_rebalance_delay_ms: 0,
        max_size: i32::MAX,
        new_member_join_timeout_ms: 300_000,
        offsets_retention_ms: 7 * 24 * 3600 * 1000,
        retention_check_interval_ms: 600_000,
        metadata_max_bytes: 4096,
        tombstone_retention_ms: 86_400_000,
        rebalance_history: 32,
        consumer: super::core::ConsumerConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: i32::MAX,
            assignors: vec!["uniform".into(), "range".into()],
            migration_policy: crate::config::MigrationPolicy::Bidirectional,
        },
    }
}

pub const T0: i64 = 1_700_000_000_000;

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    pub fn new() -> Self {
        Self::with(test_config())
    }

    pub fn with(cfg: CoreConfig) -> Self {
        Self::with_core(ShardCore::with_assigners(
            cfg,
            Box::new(CountingIds::default()),
            super::consumer::target::testing::assigners(),
        ))
    }

    pub fn with_core(core: ShardCore) -> Self {
        let mut h = Harness { core, sink: MemorySink::default(), now: T0, next_token: 0, replies: Vec::new() };
        let mut out = Vec::new();
        h.core.on_loaded(h.now, &mut h.sink, &mut out);
        h.replies.extend(out);
        h
    }

    /// Sends a request; returns its token (the answer may come later).
    /// Timers due now are not run until an answer is looked at, so several
    /// requests can arrive "at the same instant", as a batch does in the shard.
    pub fn send(&mut self, req: Request) -> ReplyToken {
        self.next_token += 1;
        let token = self.next_token;
        let mut out = Vec::new();
        self.core.handle(self.now, token, req, &mut self.sink, &mut out);
        self.replies.extend(out);
        token
    }

    /// Runs due timers at the current time.
    pub fn fire(&mut self) {
        let mut out = Vec::new();
        self.core.fire_timers(self.now, &mut self.sink, &mut out);
        self.replies.extend(out);
    }

    /// Moves time forward, firing timers at each deadline on the way.
    pub fn advance(&mut self, ms: i64) {
        let end = self.now + ms;
        while let Some(d) = self.core.next_deadline() {
            if d > end {
                break;
            }
            self.now = self.now.max(d);
            self.fire();
        }
        self.now = end;
        self.fire();
    }

    /// The answer to `token` once due timers have run (removes it).
    pub fn take(&mut self, token: ReplyToken) -> Option<Response> {
        self.fire();
        self.take_now(token)
    }

    /// The answer to `token` without running timers.
    pub fn take_now(&mut self, token: ReplyToken) -> Option<Response> {
        let i = self.replies.iter().position(|r| r.token == token)?;
        Some(self.replies.remove(i).response)
    }

    pub fn answered(&mut self, token: ReplyToken) -> bool {
        self.fire();
        self.replies.iter().any(|r| r.token == token)
    }

    pub fn join_response(&mut self, token: ReplyToken) -> JoinGroupResponse {
        match self.take(token) {
            Some(Response::Join(r)) => *r,
            other => panic!("expected a JoinGroup answer for token {token}, got {other:?}"),
        }
    }

    pub fn sync_response(&mut self, token: ReplyToken) -> SyncGroupResponse {
        match self.take(token) {
            Some(Response::Sync(r)) => r,
            other => panic!("expected a SyncGroup answer for token {token}, got {other:?}"),
        }
    }

    pub fn heartbeat(&mut self, group: &str, member: &str, generation: i32) -> ErrorCode {
        let t = self.send(Request::Heartbeat(HeartbeatRequest {
            group_id: group.into(),
            generation_id: generation,
            member_id: member.into(),
            group_instance_id: None,
        }));
        match self.take(t) {
            Some(Response::Heartbeat(r)) => r.error,
            other => panic!("{other:?}"),
        }
    }

    /// A full dynamic join at v5: MEMBER_ID_REQUIRED, then the parked rejoin.
    /// Returns the rejoin's token and the member id.
    pub fn join_dynamic(&mut self, group: &str, client: &str, protocols: &[&str]) -> (ReplyToken, String) {
        let t = self.send(Request::Join(Box::new(join(group, "", client).protocols(protocols).build())));
        let r = match self.take_now(t) {
            Some(Response::Join(r)) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(r.error, ErrorCode::MEMBER_ID_REQUIRED);
        let id = r.member_id;
        let t = self.send(Request::Join(Box::new(join(group, &id, client).protocols(protocols).build())));
        (t, id)
    }

    pub fn sync(&mut self, group: &str, member: &str, generation: i32, assignments: &[(&str, &str)]) -> ReplyToken {
        self.send(Request::Sync(Box::new(SyncGroupRequest {
            version: 3,
            group_id: group.into(),
            generation_id: generation,
            member_id: member.into(),
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: assignments
                .iter()
                .map(|(m, a)| (m.to_string(), Bytes::copy_from_slice(a.as_bytes())))
                .collect(),
        })))
    }

    pub fn commit(
        &mut self,
        group: &str,
        member: &str,
        generation: i32,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> ErrorCode {
        let t = self.send(Request::Commit(OffsetCommitRequest {
            version: 8,
            group_id: group.into(),
            generation_id: generation,
            member_id: member.into(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: vec![CommitTopic {
                name: topic.into(),
                partitions: vec![CommitPartition {
                    partition,
                    offset,
                    leader_epoch: -1,
                    metadata: Some(String::new()),
                }],
            }],
        }));
        match self.take(t) {
            Some(Response::Commit(r)) => r.topics[0].partitions[0].error,
            other => panic!("{other:?}"),
        }
    }

    pub fn fetch(&mut self, group: &str, topic: &str, partition: i32) -> FetchedPartition {
        let t = self.send(Request::Fetch(FetchOffsets {
            group: OffsetFetchGroup {
                group_id: group.into(),
                member_id: None,
                member_epoch: -1,
                topics: Some(vec![FetchTopic { name: topic.into(), partitions: vec![partition] }]),
            },
            require_stable: false,
        }));
        match self.take(t) {
            Some(Response::Fetch(r)) => r.topics[0].partitions[0].clone(),
            other => panic!("{other:?}"),
        }
    }

    pub fn describe(&mut self, group: &str) -> DescribedGroup {
        let t = self.send(Request::Describe(DescribeGroup {
            group_id: group.into(),
            version: 5,
            include_authorized_operations: false,
        }));
        match self.take(t) {
            Some(Response::Describe(d)) => *d,
            other => panic!("{other:?}"),
        }
    }

    pub fn state(&self, group: &str) -> Option<&'static str> {
        self.core.group(group).map(|g| g.state.as_str())
    }

    pub fn leave(&mut self, group: &str, members: &[(&str, Option<&str>)]) -> LeaveGroupResponse {
        let t = self.send(Request::Leave(LeaveGroupRequest {
            group_id: group.into(),
            members: members
                .iter()
                .map(|(m, i)| LeaveMember {
                    member_id: m.to_string(),
                    group_instance_id: i.map(str::to_string),
                    reason: None,
                })
                .collect(),
        }));
        match self.take(t) {
            Some(Response::Leave(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    /// Decodes everything written to the log so far.
    pub fn log(&self) -> Vec<records::StoredRecord> {
        self.sink.payloads.iter().map(|p| records::decode(p).unwrap()).collect()
    }
}

/// Builds a JoinGroupRequest.
pub struct JoinBuilder(JoinGroupRequest);

pub fn join(group: &str, member: &str, client: &str) -> JoinBuilder {
    JoinBuilder(JoinGroupRequest {
        version: 5,
        group_id: group.into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 60_000,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![Protocol { name: "range".into(), metadata: subscription(&["t"]) }],
        reason: None,
        client_id: client.into(),
        client_host: "/127.0.0.1".into(),
    })
}

impl JoinBuilder {
    pub fn version(mut self, v: i16) -> Self {
        self.0.version = v;
        self
    }
    pub fn instance(mut self, i: &str) -> Self {
        self.0.group_instance_id = Some(i.into());
        self
    }
    pub fn session(mut self, ms: i32) -> Self {
        self.0.session_timeout_ms = ms;
        self
    }
    pub fn rebalance(mut self, ms: i32) -> Self {
        self.0.rebalance_timeout_ms = ms;
        self
    }
    pub fn protocol_type(mut self, t: &str) -> Self {
        self.0.protocol_type = t.into();
        self
    }
    pub fn protocols(mut self, names: &[&str]) -> Self {
        self.0.protocols =
            names.iter().map(|n| Protocol { name: n.to_string(), metadata: subscription(&["t"]) }).collect();
        self
    }
    pub fn metadata(mut self, topics: &[&str]) -> Self {
        for p in &mut self.0.protocols {
            p.metadata = subscription(topics);
        }
        self
    }
    pub fn build(self) -> JoinGroupRequest {
        self.0
    }
}

/// A ConsumerProtocolSubscription v0 for `topics`.
pub fn subscription(topics: &[&str]) -> Bytes {
    crate::protocol::consumer_protocol::encode_subscription(topics)
}
