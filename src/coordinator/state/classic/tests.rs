//! The classic group state machine under simulated time: Kafka's own edge
//! cases (those its GroupMetadataManager tests check), the initial-delay arithmetic and static membership.

use bytes::Bytes;

use crate::coordinator::core::{DescribeGroup, Request, Response};
use crate::coordinator::messages::*;
use crate::coordinator::records::{GroupValue, MemberValue, Record, RecordValue, StoredRecord};
use crate::coordinator::testkit::*;
use crate::error_code::ErrorCode;

/// Forms a Stable group of dynamic members; returns their ids (leader first)
/// and the generation.
pub(crate) fn stable_group(h: &mut Harness, group: &str, n: usize) -> (Vec<String>, i32) {
    let mut parked = Vec::new();
    for i in 0..n {
        parked.push(h.join_dynamic(group, &format!("c{i}"), &["range"]));
    }
    h.fire();
    let mut leader = None;
    let mut generation = -1;
    let mut ids = Vec::new();
    for (t, id) in &parked {
        let r = h.join_response(*t);
        assert_eq!(r.error, ErrorCode::NONE);
        generation = r.generation_id;
        if r.leader == *id {
            leader = Some(id.clone());
        }
        ids.push(id.clone());
    }
    let leader = leader.expect("a leader");
    ids.retain(|i| *i != leader);
    ids.insert(0, leader.clone());
    let assignments: Vec<(String, String)> = ids.iter().map(|m| (m.clone(), format!("assign-{m}"))).collect();
    let refs: Vec<(&str, &str)> = assignments.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let mut tokens = Vec::new();
    for m in ids.iter().skip(1) {
        tokens.push(h.sync(group, m, generation, &[]));
    }
    tokens.push(h.sync(group, &leader, generation, &refs));
    for t in tokens {
        assert_eq!(h.sync_response(t).error, ErrorCode::NONE);
    }
    assert_eq!(h.state(group), Some("Stable"));
    (ids, generation)
}

// 1, 2
#[test]
fn join_with_unknown_member_id_is_unknown_member_id() {
    let mut h = Harness::new();
    let t = h.send(Request::Join(Box::new(join("g", "nobody", "c").build())));
    assert_eq!(h.join_response(t).error, ErrorCode::UNKNOWN_MEMBER_ID, "group does not exist");
    stable_group(&mut h, "g", 1);
    let t = h.send(Request::Join(Box::new(join("g", "nobody", "c").build())));
    let r = h.join_response(t);
    assert_eq!(r.error, ErrorCode::UNKNOWN_MEMBER_ID, "existing group");
    assert_eq!(r.member_id, "nobody");
}

// 3
#[test]
fn join_with_empty_protocols_or_type_is_inconsistent_group_protocol() {
    let mut h = Harness::new();
    let mut req = join("g", "", "c").build();
    req.protocols.clear();
    let t = h.send(Request::Join(Box::new(req)));
    assert_eq!(h.join_response(t).error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    let t = h.send(Request::Join(Box::new(join("g", "", "c").protocol_type("").build())));
    assert_eq!(h.join_response(t).error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
}

// 4
#[test]
fn join_without_a_common_protocol_is_inconsistent_group_protocol() {
    let mut h = Harness::new();
    stable_group(&mut h, "g", 1);
    let t = h.send(Request::Join(Box::new(join("g", "", "kafkajs").protocols(&["RoundRobinAssigner"]).build())));
    let r = h.join_response(t);
    assert_eq!(r.error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    assert_eq!(r.member_id, "");
    let t = h.send(Request::Join(Box::new(join("g", "", "x").protocol_type("connect").build())));
    assert_eq!(h.join_response(t).error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL, "protocol type differs");
}

// 5
#[test]
fn session_timeout_outside_bounds_and_empty_group_id_are_rejected() {
    let mut h = Harness::new();
    for ms in [5999, 1_800_001] {
        let t = h.send(Request::Join(Box::new(join("g", "", "c").session(ms).build())));
        assert_eq!(h.join_response(t).error, ErrorCode::INVALID_SESSION_TIMEOUT, "{ms}");
    }
    let t = h.send(Request::Join(Box::new(join("", "m", "c").build())));
    let r = h.join_response(t);
    assert_eq!((r.error, r.member_id.as_str()), (ErrorCode::INVALID_GROUP_ID, "m"));
    assert!(h.core.group("g").is_none(), "rejected joins create nothing");
}

// 6
#[test]
fn dynamic_member_from_v4_gets_member_id_required_then_joins() {
    let mut h = Harness::new();
    let t = h.send(Request::Join(Box::new(join("g", "", "client").build())));
    let r = h.join_response(t);
    assert_eq!(r.error, ErrorCode::MEMBER_ID_REQUIRED);
    assert_eq!(r.member_id, "client-00000000-0000-0000-0000-000000000001");
    assert_eq!((r.generation_id, r.leader.as_str()), (-1, ""));
    let t = h.send(Request::Join(Box::new(join("g", &r.member_id, "client").build())));
    let j = h.join_response(t);
    assert_eq!(j.error, ErrorCode::NONE);
    assert_eq!(j.generation_id, 1);
    assert_eq!(j.leader, r.member_id);
    assert_eq!(j.members.len(), 1);
}

#[test]
fn dynamic_member_below_v4_joins_without_member_id_required() {
    let mut h = Harness::new();
    for v in 0..4 {
        let group = format!("g{v}");
        let t = h.send(Request::Join(Box::new(join(&group, "", "client").version(v).build())));
        let r = h.join_response(t);
        assert_eq!(r.error, ErrorCode::NONE, "v{v}");
        assert_eq!(r.generation_id, 1);
    }
}

#[test]
fn pending_member_that_never_rejoins_is_dropped_after_its_session_timeout() {
    let mut h = Harness::new();
    let t = h.send(Request::Join(Box::new(join("g", "", "c").session(10_000).build())));
    let id = h.join_response(t).member_id;
    assert!(h.core.group("g").unwrap().is_pending_member(&id));
    h.advance(9_999);
    assert!(h.core.group("g").unwrap().is_pending_member(&id));
    h.advance(1);
    assert!(!h.core.group("g").unwrap().is_pending_member(&id));
    // A pending member is not a member: its heartbeat is unknown.
    assert_eq!(h.heartbeat("g", &id, 0), ErrorCode::UNKNOWN_MEMBER_ID);
}

// 7
#[test]
fn join_phase_waits_for_pending_members_and_completes_when_they_rejoin() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 1);
    // A new member gets its id; the leader rejoins, starting a rebalance.
    let t = h.send(Request::Join(Box::new(join("g", "", "new").build())));
    let pending = h.join_response(t).member_id;
    let leader_join = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    assert!(!h.answered(leader_join), "waits for the pending member");
    let new_join = h.send(Request::Join(Box::new(join("g", &pending, "new").build())));
    let r = h.join_response(leader_join);
    assert_eq!(r.generation_id, generation + 1);
    assert_eq!(r.members.len(), 2);
    assert_eq!(h.join_response(new_join).error, ErrorCode::NONE);
}

#[test]
fn join_phase_completes_when_a_pending_member_times_out() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 1);
    let t = h.send(Request::Join(Box::new(join("g", "", "new").session(10_000).build())));
    let _pending = h.join_response(t).member_id;
    let leader_join = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    h.advance(9_999);
    assert!(!h.answered(leader_join));
    h.advance(1);
    let r = h.join_response(leader_join);
    assert_eq!((r.error, r.generation_id, r.members.len()), (ErrorCode::NONE, generation + 1, 1));
}

// 8
#[test]
fn first_join_waits_for_the_initial_rebalance_delay() {
    let mut cfg = test_config();
    cfg.initial_rebalance_delay_ms = 3000;
    let mut h = Harness::with(cfg);
    let (t, _) = h.join_dynamic("g", "c", &["range"]);
    h.advance(2999);
    assert!(!h.answered(t));
    h.advance(1);
    assert_eq!(h.join_response(t).generation_id, 1);
}

// 9
#[test]
fn initial_delay_extends_for_each_new_member_up_to_the_rebalance_timeout() {
    let d = 3000;
    let mut cfg = test_config();
    cfg.initial_rebalance_delay_ms = d;
    let mut h = Harness::with(cfg);
    // Rebalance timeout R = 2D.
    let t1 = h.send(Request::Join(Box::new(join("g", "", "a").version(3).rebalance(2 * d).build())));
    h.advance((d - 1) as i64);
    let t2 = h.send(Request::Join(Box::new(join("g", "", "b").version(3).rebalance(2 * d).build())));
    h.advance(1); // t = D: a member joined in the first window: extend.
    assert!(!h.answered(t1));
    h.advance((d - 1) as i64);
    let t3 = h.send(Request::Join(Box::new(join("g", "", "c").version(3).rebalance(2 * d).build())));
    assert!(!h.answered(t1));
    h.advance(1); // t = 2D: nothing remains of R: complete even though c just joined.
    for t in [t1, t2, t3] {
        assert_eq!(h.join_response(t).generation_id, 1);
    }
}

#[test]
fn initial_delay_without_new_members_completes_after_one_delay() {
    let d = 3000;
    let mut cfg = test_config();
    cfg.initial_rebalance_delay_ms = d;
    let mut h = Harness::with(cfg);
    let t1 = h.send(Request::Join(Box::new(join("g", "", "a").version(3).rebalance(2 * d).build())));
    h.advance(d as i64);
    assert_eq!(h.join_response(t1).generation_id, 1);
}

// 10
#[test]
fn generation_increments_on_every_rebalance() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    assert_eq!(generation, 1);
    for expected in 2..5 {
        let t0 = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
        let t1 = h.send(Request::Join(Box::new(join("g", &ids[1], "c1").build())));
        assert_eq!(h.join_response(t0).generation_id, expected);
        assert_eq!(h.join_response(t1).generation_id, expected);
        let s1 = h.sync("g", &ids[1], expected, &[]);
        let s0 = h.sync("g", &ids[0], expected, &[]);
        h.sync_response(s0);
        h.sync_response(s1);
    }
}

// 11
#[test]
fn leader_rejoining_a_stable_group_starts_a_rebalance() {
    let mut h = Harness::new();
    let (ids, _) = stable_group(&mut h, "g", 2);
    let t = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    assert!(!h.answered(t));
    assert_eq!(h.state("g"), Some("PreparingRebalance"));
}

// 12
#[test]
fn follower_rejoining_with_the_same_metadata_gets_the_current_generation() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    let t = h.send(Request::Join(Box::new(join("g", &ids[1], "c1").build())));
    let r = h.join_response(t);
    assert_eq!((r.error, r.generation_id, r.leader.as_str()), (ErrorCode::NONE, generation, ids[0].as_str()));
    assert!(r.members.is_empty());
    assert_eq!(h.state("g"), Some("Stable"));
    // Changed metadata forces a rebalance.
    let t = h.send(Request::Join(Box::new(join("g", &ids[1], "c1").metadata(&["t", "u"]).build())));
    assert!(!h.answered(t));
    assert_eq!(h.state("g"), Some("PreparingRebalance"));
}

// 13
#[test]
fn dynamic_members_that_do_not_rejoin_are_removed_and_static_members_kept() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    // A static member joins: rebalance.
    let s = h.send(Request::Join(Box::new(join("g", "", "s").instance("inst").build())));
    assert!(!h.answered(s));
    // Only the static member and the leader rejoin; c1 never does.
    let l = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    h.advance(60_000);
    let r = h.join_response(l);
    assert_eq!(r.generation_id, generation + 1);
    let members: Vec<&str> = r.members.iter().map(|m| m.member_id.as_str()).collect();
    assert!(!members.contains(&ids[1].as_str()), "c1 removed");
    assert_eq!(members.len(), 2);
    assert_eq!(h.join_response(s).error, ErrorCode::NONE);
}

#[test]
fn static_members_that_do_not_rejoin_stay_in_the_group() {
    let mut h = Harness::new();
    let s = h.send(Request::Join(Box::new(join("g", "", "s").instance("i1").build())));
    let sid = h.join_response(s).member_id;
    let x = h.sync("g", &sid, 1, &[(&sid, "a")]);
    h.sync_response(x);
    let (d, did) = h.join_dynamic("g", "d", &["range"]);
    // The static member keeps heartbeating but does not rejoin.
    for _ in 0..11 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("g", &sid, 1), ErrorCode::REBALANCE_IN_PROGRESS);
    }
    h.advance(5_000);
    let r = h.join_response(d);
    assert_eq!(r.generation_id, 2);
    assert_eq!(r.leader, did, "the leader is re-elected among members that rejoined");
    assert!(r.members.iter().any(|m| m.member_id == sid && m.group_instance_id.as_deref() == Some("i1")));
}

// 14
#[test]
fn no_member_rejoining_extends_the_join_phase() {
    let mut h = Harness::new();
    // Two static members, Stable.
    let a = h.send(Request::Join(Box::new(join("g", "", "a").instance("ia").build())));
    let b = h.send(Request::Join(Box::new(join("g", "", "b").instance("ib").build())));
    let (a, b) = (h.join_response(a), h.join_response(b));
    let s1 = h.sync("g", &b.member_id, 1, &[]);
    let s0 = h.sync("g", &a.member_id, 1, &[]);
    h.sync_response(s0);
    h.sync_response(s1);
    // A dynamic member joins (rebalance) and leaves before the phase completes.
    let (_t, d) = h.join_dynamic("g", "d", &["range"]);
    h.leave("g", &[(&d, None)]);
    // a and b keep their sessions alive but never rejoin.
    for _ in 0..12 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("g", &a.member_id, 1), ErrorCode::REBALANCE_IN_PROGRESS);
        assert_eq!(h.heartbeat("g", &b.member_id, 1), ErrorCode::REBALANCE_IN_PROGRESS);
    }
    let g = h.core.group("g").unwrap();
    assert_eq!(g.state.as_str(), "PreparingRebalance");
    assert_eq!(g.generation_id, 1);
    // Their sessions expire: the group empties and the generation moves on.
    h.advance(10_000);
    let g = h.core.group("g").unwrap();
    assert_eq!((g.state.as_str(), g.generation_id), ("Empty", 2));
}

/// JoinGroup's rebalance timeout is not validated (as in Kafka), so a
/// client may send 0 or a negative one. With only static members left that
/// do not rejoin, the join phase is extended by the rebalance timeout; a
/// non-positive one re-armed the join timer at the instant it fired, and
/// the shard ran that timer forever, answering nothing again (found by the
/// session fuzz target). Runs on a thread so that a regression fails
/// instead of hanging the test run.
#[test]
fn a_join_phase_waiting_on_static_members_with_a_zero_or_negative_rebalance_timeout_does_not_stop_the_shard() {
    // (A stored -1 is read back as the session timeout, as Kafka's v0 members.)
    for rebalance in [0, -5_000] {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut h = Harness::new();
            let members = vec![loaded_member("s0", Some("i0"), rebalance), loaded_member("s1", Some("i1"), rebalance)];
            load_members(&mut h, "g", members);
            // s1 leaves: a rebalance that s0, static, never rejoins.
            h.leave("g", &[("", Some("i1"))]);
            h.advance(5_000);
            assert_eq!(h.heartbeat("g", "s0", 5), ErrorCode::REBALANCE_IN_PROGRESS);
            // A member joining meanwhile is taken in at the next check, within a second.
            let (t, e) = h.join_dynamic("g", "e", &["range"]);
            h.advance(1_000);
            let r = h.join_response(t);
            assert_eq!((r.error, r.generation_id, r.leader.as_str()), (ErrorCode::NONE, 6, e.as_str()));
            done.send(()).unwrap();
        });
        let outcome = finished.recv_timeout(std::time::Duration::from_secs(60));
        assert!(outcome.is_ok(), "rebalance timeout {rebalance}: the shard kept firing the join timer");
    }
}

pub(super) fn load_group(h: &mut Harness, group: &str, n: usize) -> Vec<String> {
    let members: Vec<MemberValue> = (0..n).map(|i| loaded_member(&format!("m{i}"), None, 60_000)).collect();
    load_members(h, group, members)
}

fn loaded_member(id: &str, instance: Option<&str>, rebalance_timeout: i32) -> MemberValue {
    MemberValue {
        member_id: id.into(),
        group_instance_id: instance.map(String::from),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout,
        session_timeout: 10_000,
        subscription: subscription(&["t"]),
        assignment: Bytes::from_static(b"a"),
    }
}

/// Loads a Stable group of `members` at generation 5, led by the first.
fn load_members(h: &mut Harness, group: &str, members: Vec<MemberValue>) -> Vec<String> {
    let ids: Vec<String> = members.iter().map(|m| m.member_id.clone()).collect();
    h.core.load(StoredRecord {
        timestamp: T0,
        record: Record::group(
            group,
            GroupValue {
                protocol_type: "consumer".into(),
                generation: 5,
                protocol: Some("range".into()),
                leader: ids.first().cloned(),
                current_state_timestamp: T0,
                members,
            },
        ),
    });
    let mut out = Vec::new();
    h.core.on_loaded(h.now, &mut h.sink, &mut out);
    h.replies.extend(out);
    ids
}

// 15
#[test]
fn members_beyond_a_lowered_max_size_are_kicked_out_when_they_rejoin() {
    let mut cfg = test_config();
    cfg.max_size = 10;
    let mut h = Harness::with(cfg);
    let ids = load_group(&mut h, "g", 12);
    assert_eq!(h.state("g"), Some("PreparingRebalance"), "over the limit after loading");
    let mut tokens = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        tokens.push(h.send(Request::Join(Box::new(join("g", id, "c").build()))));
        if i >= 10 {
            let r = h.join_response(tokens[i]);
            assert_eq!((r.error, r.member_id.as_str()), (ErrorCode::GROUP_MAX_SIZE_REACHED, ""));
        }
    }
    assert_eq!(h.core.group("g").unwrap().members.len(), 10);
    assert!(!h.answered(tokens[0]), "completes at the rebalance timeout, not at once");
    h.advance(60_000);
    assert_eq!(h.state("g"), Some("CompletingRebalance"));
    for t in &tokens[..10] {
        assert_eq!(h.join_response(*t).generation_id, 6);
    }
}

// 16
#[test]
fn joining_a_full_group_gets_group_max_size_reached() {
    let mut cfg = test_config();
    cfg.max_size = 1;
    let mut h = Harness::with(cfg);
    let a = h.send(Request::Join(Box::new(join("g", "", "a").instance("ia").build())));
    let b = h.send(Request::Join(Box::new(join("g", "", "b").instance("ib").build())));
    assert_eq!(h.join_response(b).error, ErrorCode::GROUP_MAX_SIZE_REACHED);
    assert_eq!(h.join_response(a).error, ErrorCode::NONE);
    // Dynamic members get their id, then are refused when they rejoin.
    let t = h.send(Request::Join(Box::new(join("g", "", "c").build())));
    let id = h.join_response(t).member_id;
    let t = h.send(Request::Join(Box::new(join("g", &id, "c").build())));
    assert_eq!(h.join_response(t).error, ErrorCode::GROUP_MAX_SIZE_REACHED);
}

pub(super) fn static_stable_group(h: &mut Harness) -> (String, String) {
    let a = h.send(Request::Join(Box::new(join("g", "", "a").instance("ia").build())));
    let b = h.send(Request::Join(Box::new(join("g", "", "b").instance("ib").build())));
    let (a, b) = (h.join_response(a), h.join_response(b));
    assert_eq!(a.leader, a.member_id);
    let s1 = h.sync("g", &b.member_id, 1, &[]);
    let s0 = h.sync("g", &a.member_id, 1, &[(&a.member_id, "A"), (&b.member_id, "B")]);
    h.sync_response(s0);
    h.sync_response(s1);
    (a.member_id, b.member_id)
}

/// A static group of two that both rejoined: CompletingRebalance at generation 2.
pub(super) fn static_group_completing_a_rebalance(h: &mut Harness) -> (String, String) {
    let (a, b) = static_stable_group(h);
    let ta = h.send(Request::Join(Box::new(join("g", &a, "a").build())));
    let tb = h.send(Request::Join(Box::new(join("g", &b, "b").build())));
    h.join_response(ta);
    h.join_response(tb);
    (a, b)
}

// 17
#[test]
fn static_leader_rejoining_with_unknown_member_id_replaces_itself_without_rebalance() {
    let mut h = Harness::new();
    let (a, b) = static_stable_group(&mut h);
    let records_before = h.log().len();
    let t = h.send(Request::Join(Box::new(join("g", "", "a2").instance("ia").build())));
    let r = h.join_response(t);
    assert_eq!(r.error, ErrorCode::NONE);
    assert_ne!(r.member_id, a);
    assert!(r.member_id.starts_with("ia-"), "static ids start with the instance id");
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.leader, a, "below v9 the old leader id is returned");
    assert!(r.members.is_empty());
    assert!(!r.skip_assignment);
    assert_eq!(h.state("g"), Some("Stable"));
    assert_eq!(h.log().len(), records_before + 1, "the replacement is persisted");
    // The new incarnation keeps the old assignment.
    let s = h.sync("g", &r.member_id, 1, &[]);
    assert_eq!(h.sync_response(s).assignment, Bytes::from_static(b"A"));
    // The old id is fenced with its instance id, unknown without.
    let t = h.send(Request::Sync(Box::new(SyncGroupRequest {
        version: 3,
        group_id: "g".into(),
        generation_id: 1,
        member_id: a.clone(),
        group_instance_id: Some("ia".into()),
        protocol_type: None,
        protocol_name: None,
        assignments: vec![],
    })));
    assert_eq!(h.sync_response(t).error, ErrorCode::FENCED_INSTANCE_ID);
    let t = h.sync("g", &a, 1, &[]);
    assert_eq!(h.sync_response(t).error, ErrorCode::UNKNOWN_MEMBER_ID);
    assert_eq!(h.heartbeat("g", &b, 1), ErrorCode::NONE, "the follower is undisturbed");
}

#[test]
fn a_failed_static_replacement_write_restores_the_old_member_and_names_the_leader() {
    let mut h = Harness::new();
    let (a, b) = static_stable_group(&mut h);
    h.sink.fail_next = 1;
    let t = h.send(Request::Join(Box::new(join("g", "", "b2").instance("ib").build())));
    let r = h.join_response(t);
    assert_eq!(r.error, ErrorCode::NOT_COORDINATOR);
    assert_eq!((r.member_id.as_str(), r.generation_id, r.leader.as_str()), ("", 1, a.as_str()));
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(h.heartbeat("g", &b, 1), ErrorCode::NONE, "the old incarnation is still the member");
    assert_eq!(h.state("g"), Some("Stable"));
}

#[test]
fn static_leader_rejoining_at_v9_is_told_to_skip_assignment() {
    let mut h = Harness::new();
    let (_a, _b) = static_stable_group(&mut h);
    let t = h.send(Request::Join(Box::new(join("g", "", "a2").instance("ia").version(9).build())));
    let r = h.join_response(t);
    assert_eq!(r.error, ErrorCode::NONE);
    assert!(r.skip_assignment);
    assert_eq!(r.leader, r.member_id);
    assert_eq!(r.members.len(), 2);
    // A static follower at v9 is not.
    let t = h.send(Request::Join(Box::new(join("g", "", "b2").instance("ib").version(9).build())));
    let r = h.join_response(t);
    assert!(!r.skip_assignment);
    assert!(r.members.is_empty());
}

#[test]
fn a_replaced_static_members_parked_join_is_fenced() {
    let mut h = Harness::new();
    let (a, b) = static_stable_group(&mut h);
    // b changes metadata: rebalance; b is parked.
    let tb = h.send(Request::Join(Box::new(join("g", &b, "b").metadata(&["x"]).build())));
    assert!(!h.answered(tb));
    // a new incarnation of b joins.
    let tb2 = h.send(Request::Join(Box::new(join("g", "", "b2").instance("ib").build())));
    let old = h.join_response(tb);
    assert_eq!((old.error, old.member_id.as_str()), (ErrorCode::FENCED_INSTANCE_ID, b.as_str()));
    // a rejoins; the phase completes with the new incarnation.
    let ta = h.send(Request::Join(Box::new(join("g", &a, "a").build())));
    let r = h.join_response(ta);
    assert_eq!(r.error, ErrorCode::NONE);
    assert_eq!(h.join_response(tb2).error, ErrorCode::NONE);
}

// 18
#[test]
fn static_member_with_a_mismatched_member_id_is_fenced() {
    let mut h = Harness::new();
    let (a, _b) = static_stable_group(&mut h);
    let mut req = join("g", "ia-not-the-id", "a").instance("ia").build();
    req.member_id = "ia-not-the-id".into();
    let t = h.send(Request::Join(Box::new(req)));
    assert_eq!(h.join_response(t).error, ErrorCode::FENCED_INSTANCE_ID);
    let t = h.send(Request::Heartbeat(HeartbeatRequest {
        group_id: "g".into(),
        generation_id: 1,
        member_id: "other".into(),
        group_instance_id: Some("ia".into()),
    }));
    assert_eq!(h.take(t), Some(Response::Heartbeat(HeartbeatResponse { error: ErrorCode::FENCED_INSTANCE_ID })));
    let _ = a;
}

// 19
#[test]
fn unknown_instance_id_with_a_known_member_id_is_unknown_member_id() {
    let mut h = Harness::new();
    let (a, _b) = static_stable_group(&mut h);
    let t = h.send(Request::Join(Box::new(join("g", &a, "a").instance("nope").build())));
    assert_eq!(h.join_response(t).error, ErrorCode::UNKNOWN_MEMBER_ID);
}

// 20
#[test]
fn replacement_in_completing_rebalance_answers_parked_syncs_with_rebalance_in_progress() {
    let mut h = Harness::new();
    let (_a, b) = static_group_completing_a_rebalance(&mut h);
    let s_b = h.sync("g", &b, 2, &[]);
    assert!(!h.answered(s_b));
    let _ = h.send(Request::Join(Box::new(join("g", "", "a2").instance("ia").build())));
    assert_eq!(h.sync_response(s_b).error, ErrorCode::REBALANCE_IN_PROGRESS);
    assert_eq!(h.state("g"), Some("PreparingRebalance"));
}

// 21
#[test]
fn sync_errors_for_unknown_groups_members_and_generations() {
    let mut h = Harness::new();
    let t = h.sync("nope", "m", 1, &[]);
    assert_eq!(h.sync_response(t).error, ErrorCode::UNKNOWN_MEMBER_ID);
    let (ids, generation) = stable_group(&mut h, "g", 1);
    let t = h.sync("g", "stranger", generation, &[]);
    assert_eq!(h.sync_response(t).error, ErrorCode::UNKNOWN_MEMBER_ID);
    let t = h.sync("g", &ids[0], generation + 1, &[]);
    assert_eq!(h.sync_response(t).error, ErrorCode::ILLEGAL_GENERATION);
}

// 22
#[test]
fn sync_with_a_different_protocol_type_or_name_is_inconsistent() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 1);
    let mk = |pt: Option<&str>, pn: Option<&str>, v: i16| {
        Request::Sync(Box::new(SyncGroupRequest {
            version: v,
            group_id: "g".into(),
            generation_id: generation,
            member_id: ids[0].clone(),
            group_instance_id: None,
            protocol_type: pt.map(str::to_string),
            protocol_name: pn.map(str::to_string),
            assignments: vec![],
        }))
    };
    for (pt, pn, v, want) in [
        (Some("connect"), Some("range"), 5, ErrorCode::INCONSISTENT_GROUP_PROTOCOL),
        (Some("consumer"), Some("roundrobin"), 5, ErrorCode::INCONSISTENT_GROUP_PROTOCOL),
        (Some("consumer"), Some("range"), 5, ErrorCode::NONE),
        (None, None, 3, ErrorCode::NONE),
        (None, Some("range"), 5, ErrorCode::INCONSISTENT_GROUP_PROTOCOL),
    ] {
        let t = h.send(mk(pt, pn, v));
        assert_eq!(h.sync_response(t).error, want, "{pt:?} {pn:?} v{v}");
    }
}

// 23
#[test]
fn a_member_the_leader_did_not_assign_gets_an_empty_assignment() {
    let mut h = Harness::new();
    let (t0, a) = h.join_dynamic("g", "a", &["range"]);
    let (t1, b) = h.join_dynamic("g", "b", &["range"]);
    let r0 = h.join_response(t0);
    h.join_response(t1);
    let leader = r0.leader.clone();
    let follower = if leader == a { b.clone() } else { a.clone() };
    let sf = h.sync("g", &follower, 1, &[]);
    let sl = h.sync("g", &leader, 1, &[(&leader, "L"), ("not-a-member", "X")]);
    let rf = h.sync_response(sf);
    assert_eq!((rf.error, rf.assignment.len()), (ErrorCode::NONE, 0));
    assert_eq!(h.sync_response(sl).assignment, Bytes::from_static(b"L"));
    assert_eq!(h.heartbeat("g", &follower, 1), ErrorCode::NONE);
}

// 24
#[test]
fn a_leader_that_never_syncs_expires_and_followers_are_told_to_rejoin() {
    let mut h = Harness::new();
    let (t0, a) = h.join_dynamic("g", "a", &["range"]);
    let (t1, b) = h.join_dynamic("g", "b", &["range"]);
    let leader = h.join_response(t0).leader;
    h.join_response(t1);
    let follower = if leader == a { b } else { a };
    let sf = h.sync("g", &follower, 1, &[]);
    // The parked follower is not expired; the silent leader is (10 s session).
    h.advance(10_000);
    let r = h.sync_response(sf);
    assert_eq!(r.error, ErrorCode::REBALANCE_IN_PROGRESS);
    let g = h.core.group("g").unwrap();
    assert!(!g.has_member(&leader));
    assert!(g.has_member(&follower));
    assert_eq!(g.state.as_str(), "PreparingRebalance");
}

#[test]
fn members_that_never_sync_are_removed_at_the_pending_sync_timeout() {
    let mut h = Harness::new();
    let (t0, a) = h.join_dynamic("g", "a", &["range"]);
    let (t1, b) = h.join_dynamic("g", "b", &["range"]);
    h.join_response(t0);
    h.join_response(t1);
    // Both keep heartbeating but never sync; the rebalance timeout is 60 s.
    for _ in 0..11 {
        h.advance(5_000);
        h.heartbeat("g", &a, 1);
        h.heartbeat("g", &b, 1);
    }
    h.advance(5_000);
    let g = h.core.group("g").unwrap();
    assert!(g.members.is_empty());
    assert_eq!(g.state.as_str(), "Empty");
}

// 25
#[test]
fn heartbeat_answers_by_group_state() {
    let mut h = Harness::new();
    assert_eq!(h.heartbeat("nope", "m", 1), ErrorCode::UNKNOWN_MEMBER_ID);
    let (ids, generation) = stable_group(&mut h, "g", 2);
    assert_eq!(h.heartbeat("g", &ids[1], generation), ErrorCode::NONE);
    assert_eq!(h.heartbeat("g", &ids[1], generation + 1), ErrorCode::ILLEGAL_GENERATION);
    assert_eq!(h.heartbeat("g", "stranger", generation), ErrorCode::UNKNOWN_MEMBER_ID);
    let _t = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    assert_eq!(h.heartbeat("g", &ids[1], generation), ErrorCode::REBALANCE_IN_PROGRESS);
    // An empty group knows no members.
    h.advance(60_000);
    h.leave("g", &[(&ids[0], None)]);
    assert_eq!(h.state("g"), Some("Empty"));
    assert_eq!(h.heartbeat("g", &ids[0], 3), ErrorCode::UNKNOWN_MEMBER_ID);
}

// 26
#[test]
fn a_silent_member_is_removed_at_its_session_timeout_and_the_group_rebalances() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    for _ in 0..3 {
        h.advance(3_000);
        assert_eq!(h.heartbeat("g", &ids[0], generation), ErrorCode::NONE);
    }
    h.advance(1_000);
    // ids[1] never heartbeated: gone after 10 s.
    let g = h.core.group("g").unwrap();
    assert!(!g.has_member(&ids[1]));
    assert!(g.has_member(&ids[0]));
    assert_eq!(g.state.as_str(), "PreparingRebalance");
}

#[test]
fn an_offset_commit_keeps_a_members_session_alive() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 1);
    for i in 0..5 {
        h.advance(8_000);
        assert_eq!(h.commit("g", &ids[0], generation, "t", 0, i), ErrorCode::NONE);
    }
    assert!(h.core.group("g").unwrap().has_member(&ids[0]));
    assert_eq!(h.state("g"), Some("Stable"));
}

// 27
#[test]
fn batch_leave_reports_each_member() {
    let mut h = Harness::new();
    let (a, b) = static_stable_group(&mut h);
    let r = h.leave("g", &[(&a, Some("ia")), ("wrong-id", Some("ib")), ("nobody", None), ("", Some("zz"))]);
    assert_eq!(r.error, ErrorCode::NONE);
    let errors: Vec<ErrorCode> = r.members.iter().map(|m| m.error).collect();
    assert_eq!(
        errors,
        vec![
            ErrorCode::NONE,
            ErrorCode::FENCED_INSTANCE_ID,
            ErrorCode::UNKNOWN_MEMBER_ID,
            ErrorCode::UNKNOWN_MEMBER_ID
        ]
    );
    // Removal by instance id alone (the admin path).
    let r = h.leave("g", &[("", Some("ib"))]);
    assert_eq!(r.members[0].error, ErrorCode::NONE);
    assert_eq!(h.state("g"), Some("Empty"));
    let _ = b;
    let r = h.leave("unknown", &[("x", None), ("y", None)]);
    assert!(r.members.iter().all(|m| m.error == ErrorCode::UNKNOWN_MEMBER_ID));
}

#[test]
fn last_member_leaving_empties_the_group_and_records_it() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 1);
    h.leave("g", &[(&ids[0], None)]);
    let g = h.core.group("g").unwrap();
    assert_eq!((g.state.as_str(), g.generation_id), ("Empty", generation + 1));
    match &h.log().last().unwrap().record.value {
        Some(RecordValue::Group(v)) => {
            assert!(v.members.is_empty());
            assert_eq!(v.generation, generation + 1);
            assert_eq!(v.protocol_type, "consumer");
            assert_eq!(v.protocol, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_new_group_is_committed_with_an_empty_record() {
    let mut h = Harness::new();
    let t = h.send(Request::Join(Box::new(join("g", "", "c").build())));
    h.join_response(t);
    let log = h.log();
    assert_eq!(log.len(), 1);
    match &log[0].record.value {
        Some(RecordValue::Group(v)) => {
            assert_eq!((v.generation, v.protocol_type.as_str(), v.members.len()), (0, "", 0));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_empty_record_of_a_new_group_has_no_protocol_type_even_when_its_first_member_joins_at_once() {
    // v3 has no MEMBER_ID_REQUIRED round trip: the creating request adds a
    // "consumer" member, yet Kafka's creation record still says "".
    let mut h = Harness::new();
    let t = h.send(Request::Join(Box::new(join("g", "", "c").version(3).build())));
    h.join_response(t);
    let log = h.log();
    match &log[0].record.value {
        Some(RecordValue::Group(v)) => assert_eq!((v.generation, v.protocol_type.as_str()), (0, "")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_assignment_write_fails_every_parked_sync_and_rebalances() {
    let mut h = Harness::new();
    let (t0, a) = h.join_dynamic("g", "a", &["range"]);
    let (t1, b) = h.join_dynamic("g", "b", &["range"]);
    let leader = h.join_response(t0).leader;
    h.join_response(t1);
    let follower = if leader == a { b } else { a };
    let sf = h.sync("g", &follower, 1, &[]);
    h.sink.fail_next = 1;
    let sl = h.sync("g", &leader, 1, &[(&leader, "x"), (&follower, "y")]);
    assert_eq!(h.sync_response(sf).error, ErrorCode::NOT_COORDINATOR);
    assert_eq!(h.sync_response(sl).error, ErrorCode::NOT_COORDINATOR);
    assert_eq!(h.state("g"), Some("PreparingRebalance"));
}

#[test]
fn a_group_id_too_long_for_kafkas_records_is_refused_and_nothing_is_written() {
    let mut h = Harness::new();
    let long = "g".repeat(40_000);
    let t = h.send(Request::Join(Box::new(join(&long, "", "c").version(6).build())));
    assert_eq!(h.join_response(t).error, ErrorCode::UNKNOWN_SERVER_ERROR);
    assert_eq!(h.commit(&long, "", -1, "t", 0, 1), ErrorCode::UNKNOWN_SERVER_ERROR);
    assert!(h.log().is_empty());
    assert_eq!(h.state(&long), None);
}

#[test]
fn a_superseded_parked_join_is_answered() {
    let mut h = Harness::new();
    let (ids, _) = stable_group(&mut h, "g", 2);
    let first = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    let second = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    assert_eq!(h.join_response(first).error, ErrorCode::REBALANCE_IN_PROGRESS);
    assert!(!h.answered(second));
}

#[test]
fn describe_shows_members_with_metadata_only_when_stable() {
    let mut h = Harness::new();
    let (ids, _) = stable_group(&mut h, "g", 2);
    let d = h.describe("g");
    assert_eq!((d.state.as_str(), d.protocol_type.as_str(), d.protocol_data.as_str()), ("Stable", "consumer", "range"));
    assert_eq!(d.members.len(), 2);
    let m = d.members.iter().find(|m| m.member_id == ids[1]).unwrap();
    assert_eq!(m.client_id, "c1");
    assert_eq!(m.client_host, "/127.0.0.1");
    assert_eq!(m.metadata, subscription(&["t"]));
    assert_eq!(m.assignment, Bytes::from(format!("assign-{}", ids[1])));
    let _t = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    let d = h.describe("g");
    assert_eq!((d.state.as_str(), d.protocol_data.as_str()), ("PreparingRebalance", ""));
    assert!(d.members.iter().all(|m| m.metadata.is_empty()));
    assert!(d.members.iter().any(|m| !m.assignment.is_empty()), "stored assignments are still shown");
    // Unknown groups: Dead below v6, GROUP_ID_NOT_FOUND from v6.
    let d = h.describe("nope");
    assert_eq!((d.error, d.state.as_str()), (ErrorCode::NONE, "Dead"));
    let t = h.send(Request::Describe(DescribeGroup {
        group_id: "nope".into(),
        version: 6,
        include_authorized_operations: false,
    }));
    match h.take(t) {
        Some(Response::Describe(d)) => assert_eq!(d.error, ErrorCode::GROUP_ID_NOT_FOUND),
        other => panic!("{other:?}"),
    }
}

#[test]
fn list_groups_filters_by_state_and_type() {
    let mut h = Harness::new();
    stable_group(&mut h, "stable", 1);
    h.commit("simple", "", -1, "t", 0, 1);
    let list = |h: &mut Harness, states: &[&str], types: &[&str]| -> Vec<String> {
        let t = h.send(Request::List(ListGroupsRequest {
            states_filter: states.iter().map(|s| s.to_string()).collect(),
            types_filter: types.iter().map(|s| s.to_string()).collect(),
        }));
        match h.take(t) {
            Some(Response::List(r)) => r.groups.into_iter().map(|g| g.group_id).collect(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(list(&mut h, &[], &[]), vec!["simple", "stable"]);
    assert_eq!(list(&mut h, &["empty"], &[]), vec!["simple"]);
    assert_eq!(list(&mut h, &["stable"], &["classic"]), vec!["stable"]);
    assert!(list(&mut h, &[], &["consumer"]).is_empty());
}

#[test]
fn a_member_id_from_a_huge_client_id_is_bounded_and_the_group_completes_its_rebalance() {
    let mut h = Harness::new();
    let client = "c".repeat(32_767);
    let t = h.send(Request::Join(Box::new(join("g", "", &client).version(3).build())));
    h.fire();
    let r = h.join_response(t);
    assert_eq!(r.error, ErrorCode::NONE);
    assert!(r.member_id.len() <= 32_767, "{}", r.member_id.len());
    assert!(r.member_id.starts_with("ccc"));
    let s = h.sync("g", &r.member_id, r.generation_id, &[(&r.member_id, "a")]);
    assert_eq!(h.sync_response(s).error, ErrorCode::NONE, "the group record is written");
    assert_eq!(h.state("g"), Some("Stable"));
}

#[test]
fn a_member_id_under_the_bound_is_kafkas_prefix_dash_uuid() {
    use super::join::new_member_id;
    assert_eq!(new_member_id("client", "u-u-i-d"), "client-u-u-i-d");
    let uuid = "00000000-0000-0000-0000-000000000001";
    let exact = "x".repeat(32_767 - 37);
    assert_eq!(new_member_id(&exact, uuid), format!("{exact}-{uuid}"));
    // Cut on a character boundary: 'é' is two bytes.
    let id = new_member_id(&"é".repeat(20_000), uuid);
    assert!(id.len() <= 32_767 && id.ends_with(uuid));
}

#[test]
fn a_join_whose_instance_id_or_protocol_name_no_record_can_hold_is_invalid_request() {
    let mut h = Harness::new();
    let long = "i".repeat(32_768);
    let t = h.send(Request::Join(Box::new(join("g", "", "c").instance(&long).build())));
    assert_eq!(h.join_response(t).error, ErrorCode::INVALID_REQUEST);
    let t = h.send(Request::Join(Box::new(join("g", "", "c").protocols(&[&long]).build())));
    assert_eq!(h.join_response(t).error, ErrorCode::INVALID_REQUEST);
    assert_eq!(h.state("g"), None, "no group was created");
    // The longest storable instance id still joins and completes.
    let max = "i".repeat(32_767);
    let t = h.send(Request::Join(Box::new(join("g", "", "c").instance(&max).build())));
    h.fire();
    let r = h.join_response(t);
    assert_eq!(r.error, ErrorCode::NONE);
    let s = h.sync("g", &r.member_id, r.generation_id, &[(&r.member_id, "a")]);
    assert_eq!(h.sync_response(s).error, ErrorCode::NONE);
}
