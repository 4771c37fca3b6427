//! "The log is the truth": after any sequence of client operations, loading
//! the records the shard wrote must rebuild exactly the durable state the live
//! shard holds, and every Stable or Empty group must come back as it is live.
//! The same holds for a compaction snapshot. Along the way, after every
//! step: a group's generation never goes backwards, and an acknowledged
//! commit is what an OffsetFetch would return at that moment.

use std::collections::HashMap;

use proptest::prelude::*;

use super::core::{CountingIds, DeleteGroup, DeleteTopicOffsets, Request, Response, ShardCore};
use super::messages::*;
use super::testkit::{join, test_config, Harness};
use crate::coordinator::classic::group::GroupState;
use crate::coordinator::consumer::messages::ConsumerHeartbeatRequest;
use crate::coordinator::consumer::records::Assignment;
use crate::coordinator::consumer::target::TopicImage;
use std::collections::HashSet;
use std::sync::Arc;
use uuid::Uuid;

#[derive(Debug, Clone)]
enum Op {
    Join {
        slot: usize,
        version: i16,
        static_member: bool,
        changed: bool,
    },
    Sync {
        slot: usize,
    },
    Heartbeat {
        slot: usize,
    },
    Leave {
        slot: usize,
    },
    Commit {
        slot: usize,
        partition: i32,
        offset: i64,
        simple: bool,
    },
    DeleteGroup {
        group: usize,
    },
    DeleteOffsets {
        group: usize,
        partition: i32,
    },
    DeleteTopic,
    Advance {
        ms: i64,
    },
    /// KIP-848: a consumer-protocol member (re-)joins; `shared` puts it in
    /// a classic group's id, to exercise the boundary between the two:
    /// online upgrade, classic members inside a consumer group, downgrade.
    CJoin {
        slot: usize,
        static_member: bool,
        both_topics: bool,
        shared: bool,
        /// 0: names only; else a regular expression (`REGEXES`), with the
        /// names too when `both_topics`.
        regex: usize,
    },
    /// Topic "xy" appears or disappears (regular expressions re-resolve).
    ToggleTopic,
    /// A heartbeat; `revoked` says whether the client gave up what it was
    /// told to (otherwise it reports nothing, which counts as still owning).
    CHeartbeat {
        slot: usize,
        revoked: bool,
    },
    /// Leave with epoch −1 (or −2 for a static member when `temporarily`).
    CLeave {
        slot: usize,
        temporarily: bool,
    },
}

const GROUPS: usize = 2;
const SLOTS: usize = 6;
/// Patterns consumer members may subscribe to ("" = none).
const REGEXES: [&str; 3] = ["", "x.*", "t|xy"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..SLOTS, prop_oneof![Just(3i16), Just(5i16), Just(9i16)], any::<bool>(), prop::bool::weighted(0.2))
            .prop_map(|(slot, version, static_member, changed)| Op::Join { slot, version, static_member, changed }),
        3 => (0..SLOTS).prop_map(|slot| Op::Sync { slot }),
        2 => (0..SLOTS).prop_map(|slot| Op::Heartbeat { slot }),
        1 => (0..SLOTS).prop_map(|slot| Op::Leave { slot }),
        3 => (0..SLOTS, 0..3i32, 0..1000i64, any::<bool>())
            .prop_map(|(slot, partition, offset, simple)| Op::Commit { slot, partition, offset, simple }),
        1 => (0..GROUPS).prop_map(|group| Op::DeleteGroup { group }),
        1 => (0..GROUPS, 0..3i32).prop_map(|(group, partition)| Op::DeleteOffsets { group, partition }),
        1 => Just(Op::DeleteTopic),
        2 => prop_oneof![Just(1i64), Just(5_000), Just(20_000), Just(700_000), Just(8 * 24 * 3600 * 1000)]
            .prop_map(|ms| Op::Advance { ms }),
        3 => (0..SLOTS, any::<bool>(), any::<bool>(), prop::bool::weighted(0.4), 0..REGEXES.len())
            .prop_map(|(slot, static_member, both_topics, shared, regex)| {
                Op::CJoin { slot, static_member, both_topics, shared, regex }
            }),
        1 => Just(Op::ToggleTopic),
        4 => (0..SLOTS, prop::bool::weighted(0.7)).prop_map(|(slot, revoked)| Op::CHeartbeat { slot, revoked }),
        1 => (0..SLOTS, any::<bool>()).prop_map(|(slot, temporarily)| Op::CLeave { slot, temporarily }),
    ]
}

/// What a simulated client knows.
#[derive(Debug, Default, Clone)]
struct Slot {
    member_id: String,
    generation: i32,
}

/// What a simulated consumer-protocol client knows.
#[derive(Debug, Default, Clone)]
struct CSlot {
    group: String,
    member_id: String,
    instance_id: Option<String>,
    epoch: i32,
    assignment: Assignment,
    /// Incarnations so far, to give each rejoin a fresh member id.
    incarnation: u32,
}

fn consumer_topics(with_xy: bool) -> Arc<TopicImage> {
    let mut topics =
        vec![("t".to_string(), Uuid::from_bytes([1; 16]), 4), ("x".to_string(), Uuid::from_bytes([2; 16]), 2)];
    if with_xy {
        topics.push(("xy".to_string(), Uuid::from_bytes([3; 16]), 3));
    }
    Arc::new(TopicImage::new(topics))
}

fn group_of(slot: usize) -> String {
    format!("g{}", slot % GROUPS)
}

struct Sim {
    h: Harness,
    slots: Vec<Slot>,
    cslots: Vec<CSlot>,
    tokens: HashMap<u64, usize>,
    /// Consumer heartbeats awaiting their answer: token → slot.
    ctokens: HashMap<u64, usize>,
    /// Commits awaiting their answer: token → (group, topic, partition, offset).
    commits: HashMap<u64, (String, String, i32, i64)>,
    /// The highest generation seen per existing group.
    generations: HashMap<String, i32>,
    /// Whether topic "xy" exists.
    with_xy: bool,
}

impl Sim {
    fn new() -> Sim {
        Sim {
            h: Harness::new(),
            slots: vec![Slot::default(); SLOTS],
            cslots: vec![CSlot::default(); SLOTS],
            tokens: HashMap::new(),
            ctokens: HashMap::new(),
            commits: HashMap::new(),
            generations: HashMap::new(),
            with_xy: false,
        }
    }

    /// Invariants that hold after every step.
    fn check_invariants(&mut self) {
        let mut seen = HashMap::new();
        for g in self.h.core.groups() {
            if let Some(&before) = self.generations.get(&g.group_id) {
                assert!(
                    g.generation_id >= before,
                    "generation of {} went from {before} to {}",
                    g.group_id,
                    g.generation_id
                );
            }
            seen.insert(g.group_id.clone(), g.generation_id);
        }
        // A deleted group may come back at generation 0, as in Kafka.
        self.generations = seen;
        // KIP-848: no partition is ever owned by two members, and the
        // target never runs ahead of the group epoch.
        for g in self.h.core.store().consumer_groups() {
            assert!(g.assignment_epoch <= g.group_epoch, "{}: assignment epoch ahead", g.group_id);
            let mut owned = HashSet::new();
            for m in g.members.values() {
                for (t, ps) in m.assigned.iter().chain(m.pending_revocation.iter()) {
                    for p in ps {
                        assert!(owned.insert((*t, *p)), "{}: {t}-{p} owned twice", g.group_id);
                    }
                }
            }
        }
    }

    fn absorb(&mut self) {
        self.h.fire();
        let replies = std::mem::take(&mut self.h.replies);
        for r in replies {
            if let (Some((group, topic, partition, offset)), Response::Commit(c)) =
                (self.commits.remove(&r.token), &r.response)
            {
                let acked = c.topics.iter().flat_map(|t| &t.partitions).any(|p| p.error.is_none());
                if acked {
                    let stored = self.h.core.store().offset(&group, &topic, partition).map(|v| v.offset);
                    assert_eq!(stored, Some(offset), "acknowledged commit of {group} {topic}-{partition}");
                }
            }
            if let (Some(slot), Response::ConsumerHeartbeat(c)) = (self.ctokens.remove(&r.token), &r.response) {
                let s = &mut self.cslots[slot];
                if c.error.is_none() {
                    s.epoch = c.member_epoch;
                    if c.member_epoch < 0 {
                        s.member_id.clear();
                        s.assignment.clear();
                    }
                    if let Some(a) = &c.assignment {
                        s.assignment = a.clone();
                    }
                } else if c.error == crate::ErrorCode::FENCED_MEMBER_EPOCH
                    || c.error == crate::ErrorCode::UNKNOWN_MEMBER_ID
                    || c.error == crate::ErrorCode::FENCED_INSTANCE_ID
                {
                    s.member_id.clear();
                    s.assignment.clear();
                }
                continue;
            }
            let Some(&slot) = self.tokens.get(&r.token) else { continue };
            let s = &mut self.slots[slot];
            match r.response {
                Response::Join(j) if j.error.is_none() || j.error == crate::ErrorCode::MEMBER_ID_REQUIRED => {
                    s.member_id = j.member_id;
                    if j.error.is_none() {
                        s.generation = j.generation_id;
                    }
                }
                Response::Join(j)
                    if j.error == crate::ErrorCode::UNKNOWN_MEMBER_ID
                        || j.error == crate::ErrorCode::FENCED_INSTANCE_ID =>
                {
                    *s = Slot::default();
                }
                _ => {}
            }
        }
    }

    fn send(&mut self, slot: usize, req: Request) {
        let commit = match &req {
            Request::Commit(c) => c.topics.first().and_then(|t| {
                t.partitions.first().map(|p| (c.group_id.clone(), t.name.clone(), p.partition, p.offset))
            }),
            _ => None,
        };
        let t = self.h.send(req);
        self.tokens.insert(t, slot);
        if let Some(c) = commit {
            self.commits.insert(t, c);
        }
    }

    /// A heartbeat from a consumer slot that changes nothing.
    fn consumer_request(&self, slot: usize) -> ConsumerHeartbeatRequest {
        let s = &self.cslots[slot];
        ConsumerHeartbeatRequest {
            instance_id: s.instance_id.clone(),
            client_id: format!("cc{slot}"),
            ..ConsumerHeartbeatRequest::unchanged(&s.group, &s.member_id, s.epoch, consumer_topics(self.with_xy))
        }
    }

    fn send_consumer(&mut self, slot: usize, req: ConsumerHeartbeatRequest) {
        let t = self.h.send(Request::ConsumerHeartbeat(Box::new(req)));
        self.ctokens.insert(t, slot);
    }

    fn apply(&mut self, op: &Op) {
        match op.clone() {
            Op::Join { slot, version, static_member, changed } => {
                let s = self.slots[slot].clone();
                let mut b = join(&group_of(slot), &s.member_id, &format!("c{slot}")).version(version);
                if static_member && version >= 5 {
                    b = b.instance(&format!("i{slot}"));
                }
                if changed {
                    b = b.metadata(&["t", "x"]);
                }
                let join = Request::Join(Box::new(b.build()));
                self.send(
                    slot,
                    Request::WithTopics {
                        topics: consumer_topics(self.with_xy),
                        describable: Default::default(),
                        inner: Box::new(join),
                    },
                );
            }
            Op::Sync { slot } => {
                let s = self.slots[slot].clone();
                let g = group_of(slot);
                // Disjoint consumer-protocol assignments of t, so that an
                // upgrade (online migration) carries them over.
                let members: Vec<(String, bytes::Bytes)> = self
                    .h
                    .core
                    .group(&g)
                    .map(|g| {
                        let n = g.members.len().max(1);
                        g.members
                            .keys()
                            .enumerate()
                            .map(|(i, m)| {
                                let parts: Vec<i32> = (0..4).filter(|p| *p as usize % n == i).collect();
                                (
                                    m.clone(),
                                    crate::protocol::consumer_protocol::encode_assignment(
                                        &[("t".to_string(), parts)],
                                        0,
                                    ),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let sync = Request::Sync(Box::new(SyncGroupRequest {
                    version: 3,
                    group_id: g,
                    generation_id: s.generation,
                    member_id: s.member_id,
                    group_instance_id: None,
                    protocol_type: None,
                    protocol_name: None,
                    assignments: members,
                }));
                self.send(
                    slot,
                    Request::WithTopics {
                        topics: consumer_topics(self.with_xy),
                        describable: Default::default(),
                        inner: Box::new(sync),
                    },
                );
            }
            Op::Heartbeat { slot } => {
                let s = self.slots[slot].clone();
                self.send(
                    slot,
                    Request::Heartbeat(HeartbeatRequest {
                        group_id: group_of(slot),
                        generation_id: s.generation,
                        member_id: s.member_id,
                        group_instance_id: None,
                    }),
                );
            }
            Op::Leave { slot } => {
                let s = self.slots[slot].clone();
                self.send(
                    slot,
                    Request::Leave(LeaveGroupRequest {
                        group_id: group_of(slot),
                        members: vec![LeaveMember { member_id: s.member_id, group_instance_id: None, reason: None }],
                    }),
                );
            }
            Op::Commit { slot, partition, offset, simple } => {
                let s = self.slots[slot].clone();
                let (member, generation) = if simple { (String::new(), -1) } else { (s.member_id, s.generation) };
                self.send(
                    slot,
                    Request::Commit(OffsetCommitRequest {
                        version: 8,
                        group_id: group_of(slot),
                        generation_id: generation,
                        member_id: member,
                        group_instance_id: None,
                        retention_time_ms: if offset % 7 == 0 { 60_000 } else { -1 },
                        topics: vec![CommitTopic {
                            name: if partition == 2 { "other".into() } else { "t".into() },
                            partitions: vec![CommitPartition {
                                partition,
                                offset,
                                leader_epoch: (offset % 3) as i32 - 1,
                                metadata: Some(format!("m{offset}")),
                            }],
                        }],
                    }),
                );
            }
            Op::DeleteGroup { group } => self.send(0, Request::Delete(DeleteGroup { group_id: format!("g{group}") })),
            Op::DeleteOffsets { group, partition } => self.send(
                0,
                Request::OffsetDelete(OffsetDeleteRequest {
                    group_id: format!("g{group}"),
                    topics: vec![FetchTopic { name: "t".into(), partitions: vec![partition] }],
                }),
            ),
            Op::DeleteTopic => self.send(0, Request::DeleteTopicOffsets(DeleteTopicOffsets { topic: "other".into() })),
            Op::Advance { ms } => self.h.advance(ms),
            Op::ToggleTopic => self.with_xy = !self.with_xy,
            Op::CJoin { slot, static_member, both_topics, shared, regex } => {
                let s = &mut self.cslots[slot];
                if s.member_id.is_empty() {
                    s.incarnation += 1;
                    s.member_id = format!("cm{slot}-{}", s.incarnation);
                    s.group = if shared { group_of(slot) } else { format!("c{}", slot % GROUPS) };
                    s.instance_id = static_member.then(|| format!("ci{slot}"));
                }
                s.epoch = 0;
                s.assignment.clear();
                let topics = match (regex, both_topics) {
                    (0, true) => vec!["t".to_string(), "x".to_string()],
                    (0, false) => vec!["t".to_string()],
                    (_, true) => vec!["t".to_string()],
                    (_, false) => vec![],
                };
                let req = ConsumerHeartbeatRequest {
                    rebalance_timeout_ms: 30_000,
                    subscribed_topic_names: Some(topics),
                    subscribed_topic_regex: Some(REGEXES[regex].to_string()),
                    topic_partitions: Some(vec![]),
                    ..self.consumer_request(slot)
                };
                self.send_consumer(slot, req);
            }
            Op::CHeartbeat { slot, revoked } => {
                if self.cslots[slot].member_id.is_empty() {
                    return self.after_op();
                }
                let owned = revoked.then(|| {
                    self.cslots[slot].assignment.iter().map(|(t, ps)| (*t, ps.iter().copied().collect())).collect()
                });
                let req = ConsumerHeartbeatRequest { topic_partitions: owned, ..self.consumer_request(slot) };
                self.send_consumer(slot, req);
            }
            Op::CLeave { slot, temporarily } => {
                if self.cslots[slot].member_id.is_empty() {
                    return self.after_op();
                }
                let static_leave = temporarily && self.cslots[slot].instance_id.is_some();
                let req = ConsumerHeartbeatRequest {
                    member_epoch: if static_leave { -2 } else { -1 },
                    ..self.consumer_request(slot)
                };
                self.send_consumer(slot, req);
            }
        }
        self.after_op();
    }

    fn after_op(&mut self) {
        self.absorb();
        self.check_invariants();
    }
}

/// A core rebuilt from log payloads.
fn rebuild(payloads: &[bytes::Bytes]) -> ShardCore {
    let mut core = ShardCore::new(test_config(), Box::new(CountingIds::default()));
    for p in payloads {
        core.load_payload(p).expect("every written record decodes");
    }
    core
}

/// Every live group that is Stable or Empty comes back identical from the log.
///
/// One divergence is Kafka's own: when writing the record of a group that
/// just became Empty fails, the group stays Empty in memory and a restart
/// brings back the previous generation (no member is waiting on that write).
/// `write_failed` allows exactly that case.
fn assert_groups_match(live: &ShardCore, fresh: &ShardCore, write_failed: bool) {
    for g in live.groups() {
        if !(g.is(GroupState::Stable) || g.is(GroupState::Empty)) {
            continue;
        }
        if write_failed && g.is(GroupState::Empty) && g.members.is_empty() {
            continue;
        }
        let has_durable_trace =
            live.store().group_record(&g.group_id).is_some() || live.store().has_offsets(&g.group_id);
        if !has_durable_trace {
            continue; // A group that wrote nothing (as in Kafka, it vanishes on restart).
        }
        let f = fresh.group(&g.group_id).unwrap_or_else(|| panic!("group {} missing after replay", g.group_id));
        assert_eq!(f.state, g.state, "state of {}", g.group_id);
        assert_eq!(f.generation_id, g.generation_id, "generation of {}", g.group_id);
        assert_eq!(f.protocol_type, g.protocol_type, "protocol type of {}", g.group_id);
        assert_eq!(f.protocol_name, g.protocol_name, "protocol of {}", g.group_id);
        assert_eq!(f.leader_id, g.leader_id, "leader of {}", g.group_id);
        let members = |x: &crate::coordinator::classic::group::ClassicGroup| {
            let mut v: Vec<(String, Option<String>, bytes::Bytes)> = x
                .members
                .values()
                .map(|m| (m.member_id.clone(), m.group_instance_id.clone(), m.assignment.clone()))
                .collect();
            v.sort();
            v
        };
        assert_eq!(members(f), members(g), "members of {}", g.group_id);
    }
    for f in fresh.groups() {
        assert!(live.group(&f.group_id).is_some(), "group {} exists only after replay", f.group_id);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn replaying_the_log_rebuilds_the_live_state(ops in prop::collection::vec(op(), 1..80), fail_at in prop::option::of(0usize..80)) {
        let mut sim = Sim::new();
        for (i, op) in ops.iter().enumerate() {
            if fail_at == Some(i) {
                sim.h.sink.fail_next = 1;
            }
            sim.apply(op);
            sim.h.sink.fail_next = 0;
        }
        let write_failed = fail_at.is_some_and(|i| i < ops.len());
        let fresh = rebuild(&sim.h.sink.payloads);
        prop_assert_eq!(fresh.store(), sim.h.core.store());
        assert_groups_match(&sim.h.core, &fresh, write_failed);

        // Compaction: the snapshot alone rebuilds the same durable state.
        let now = sim.h.now;
        let snapshot = sim.h.core.snapshot(now);
        let compacted = rebuild(&snapshot);
        prop_assert_eq!(compacted.store(), sim.h.core.store());
        assert_groups_match(&sim.h.core, &compacted, write_failed);
    }
}
