//! Online migration between classic and consumer groups, in simulated time:
//! a classic group upgraded by its first consumer-protocol member, classic
//! members living inside the consumer group (join, sync, heartbeat, leave,
//! session expiry), the downgrade when the last consumer-protocol member
//! leaves, the migration policy, and replay of all of it.

use std::sync::Arc;

use bytes::Bytes;
use uuid::Uuid;

use super::group::MemberState;
use super::messages::{ConsumerHeartbeatRequest, ConsumerHeartbeatResponse};
use super::records::Assignment;
use super::target::TopicImage;
use crate::config::MigrationPolicy;
use crate::coordinator::classic::group::GroupState;
use crate::coordinator::core::{CoreConfig, CountingIds, Request, Response, ShardCore};
use crate::coordinator::messages::*;
use crate::coordinator::testkit::{join, test_config, Harness};
use crate::error_code::ErrorCode;

const FOO: Uuid = Uuid::from_bytes([1; 16]);

fn image() -> Arc<TopicImage> {
    Arc::new(TopicImage::new([("foo".to_string(), FOO, 6)]))
}

fn foo(parts: &[i32]) -> Assignment {
    if parts.is_empty() {
        return Assignment::new();
    }
    [(FOO, parts.iter().copied().collect())].into_iter().collect()
}

fn with_topics(req: Request) -> Request {
    Request::WithTopics { topics: image(), describable: Default::default(), inner: Box::new(req) }
}

/// A consumer-protocol (re-)join at epoch 0 subscribing to foo.
fn cjoin(member: &str) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(vec!["foo".into()]),
        topic_partitions: Some(vec![]),
        ..ConsumerHeartbeatRequest::unchanged("grp", member, 0, image())
    }
}

fn chb(h: &mut Harness, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse {
    let t = h.send(Request::ConsumerHeartbeat(Box::new(req)));
    match h.take(t) {
        Some(Response::ConsumerHeartbeat(r)) => r,
        other => panic!("{other:?}"),
    }
}

/// A consumer-protocol heartbeat reporting what the member owns.
fn cbeat(h: &mut Harness, member: &str, epoch: i32, owned: &Assignment) -> ConsumerHeartbeatResponse {
    let req = ConsumerHeartbeatRequest {
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        topic_partitions: Some(owned.iter().map(|(t, ps)| (*t, ps.iter().copied().collect())).collect()),
        ..cjoin(member)
    };
    chb(h, req)
}

fn classic_join(h: &mut Harness, member: &str) -> JoinGroupResponse {
    let req = join("grp", member, "classic").metadata(&["foo"]).build();
    let t = h.send(with_topics(Request::Join(Box::new(req))));
    h.join_response(t)
}

fn sync_req(member: &str, generation: i32, assignments: Vec<(String, Bytes)>) -> SyncGroupRequest {
    SyncGroupRequest {
        version: 5,
        group_id: "grp".into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments,
    }
}

fn classic_sync(h: &mut Harness, member: &str, generation: i32) -> SyncGroupResponse {
    let t = h.send(with_topics(Request::Sync(Box::new(sync_req(member, generation, vec![])))));
    h.sync_response(t)
}

fn partitions_of(assignment: &[u8]) -> Vec<i32> {
    let named =
        crate::protocol::consumer_protocol::parse_assignment(assignment).expect("a consumer protocol assignment");
    named.into_iter().filter(|(t, _)| t == "foo").flat_map(|(_, ps)| ps).collect()
}

/// A Stable classic group of two members, a (leader) with foo 0-2 and b
/// with foo 3-5. Returns (generation, a, b).
fn classic_group(h: &mut Harness) -> (i32, String, String) {
    let (ta, a) = h.join_dynamic("grp", "ca", &["range"]);
    let (tb, b) = h.join_dynamic("grp", "cb", &["range"]);
    let _ = (ta, tb);
    // Re-send with foo subscriptions (join_dynamic subscribes to "t").
    let ja = h.send(Request::Join(Box::new(join("grp", &a, "ca").metadata(&["foo"]).build())));
    let jb = h.send(Request::Join(Box::new(join("grp", &b, "cb").metadata(&["foo"]).build())));
    let ra = h.join_response(ja);
    let rb = h.join_response(jb);
    assert_eq!((ra.error, rb.error), (ErrorCode::NONE, ErrorCode::NONE));
    let generation = ra.generation_id;
    let leader = ra.leader.clone();
    let enc =
        |ps: &[i32]| crate::protocol::consumer_protocol::encode_assignment(&[("foo".to_string(), ps.to_vec())], 0);
    let assignments = vec![(a.clone(), enc(&[0, 1, 2])), (b.clone(), enc(&[3, 4, 5]))];
    let (first, second) = if leader == a { (&a, &b) } else { (&b, &a) };
    let t1 = h.send(Request::Sync(Box::new(sync_req(first, generation, assignments))));
    let t2 = h.send(Request::Sync(Box::new(sync_req(second, generation, vec![]))));
    assert_eq!(h.sync_response(t1).error, ErrorCode::NONE);
    assert_eq!(h.sync_response(t2).error, ErrorCode::NONE);
    assert_eq!(h.core.group("grp").map(|g| g.state), Some(GroupState::Stable));
    (generation, a, b)
}

/// Live state equals the replay of what was written, classic groups included.
fn assert_replays(h: &Harness) {
    let mut fresh = ShardCore::new(h.core.config().clone(), Box::new(CountingIds::default()));
    for p in &h.sink.payloads {
        fresh.load_payload(p).unwrap();
    }
    assert_eq!(fresh.store(), h.core.store());
    assert_eq!(fresh.group("grp").is_some(), h.core.group("grp").is_some(), "the classic form replays too");
}

fn with_policy(policy: MigrationPolicy) -> Harness {
    let mut cfg: CoreConfig = test_config();
    cfg.consumer.migration_policy = policy;
    Harness::with(cfg)
}

#[test]
fn an_upgrade_starts_the_consumer_group_history_with_the_classic_generation() {
    let mut h = Harness::new();
    let (generation, _a, _b) = classic_group(&mut h);
    assert_eq!(chb(&mut h, cjoin("m3")).error, ErrorCode::NONE);
    let e = h.core.consumer_history("grp");
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].cause,
        super::history::Cause::MigratedFromClassic {
            member_id: "m3".into(),
            classic_generation: generation,
            classic_members: 2
        }
    );
    assert_eq!((e[0].group_epoch_before, e[0].group_epoch), (generation, generation + 1));
}

#[test]
fn a_stable_classic_group_upgrades_when_its_first_consumer_protocol_member_joins() {
    let mut h = Harness::new();
    let (generation, a, b) = classic_group(&mut h);
    let r = chb(&mut h, cjoin("m3"));
    assert_eq!(r.error, ErrorCode::NONE, "{r:?}");
    assert!(h.core.group("grp").is_none(), "the classic group is gone");
    let g = h.core.store().consumer_group("grp").expect("now a consumer group");
    assert_eq!(g.members.len(), 3);
    assert_eq!(r.member_epoch, generation + 1, "the new member bumps the group epoch");
    // The classic members keep what the classic assignment gave them.
    let ma = &g.members[&a];
    assert!(ma.uses_classic_protocol());
    assert_eq!((ma.member_epoch, ma.state), (generation, MemberState::Stable));
    assert_eq!(ma.assigned, foo(&[0, 1, 2]));
    assert_eq!(g.members[&b].assigned, foo(&[3, 4, 5]));
    assert_eq!(g.members[&a].classic_session_timeout_ms(), Some(10_000));
    // The newcomer waits for partitions the classic members still own.
    assert_eq!(r.assignment, Some(Assignment::new()));
    assert_eq!(g.members["m3"].state, MemberState::UnreleasedPartitions);
    assert_replays(&h);
}

#[test]
fn classic_members_are_told_to_rejoin_and_converge_without_sharing_a_partition() {
    let mut h = Harness::new();
    let (generation, a, b) = classic_group(&mut h);
    let r3 = chb(&mut h, cjoin("m3"));
    let epoch = r3.member_epoch;
    // Heartbeats of the classic generation now ask for a rejoin.
    assert_eq!(h.heartbeat("grp", &a, generation), ErrorCode::REBALANCE_IN_PROGRESS);
    assert_eq!(h.heartbeat("grp", &b, epoch), ErrorCode::ILLEGAL_GENERATION);
    // An eager classic member revokes everything before rejoining (its
    // subscription owns nothing): it moves to the new epoch at once.
    for m in [&a, &b] {
        let j = classic_join(&mut h, m);
        assert_eq!(j.error, ErrorCode::NONE, "{j:?}");
        assert_eq!((j.generation_id, j.member_id.as_str()), (epoch, m.as_str()));
        assert_eq!((j.protocol_type.as_deref(), j.protocol_name.as_deref()), (Some("consumer"), Some("range")));
        assert!(j.leader.is_empty() && j.members.is_empty(), "no leader: the coordinator assigns");
        let s = classic_sync(&mut h, m, epoch);
        assert_eq!(s.error, ErrorCode::NONE, "{s:?}");
        assert_eq!(h.heartbeat("grp", m, epoch), ErrorCode::NONE, "waits for partitions still owned");
    }
    // a waited for a partition b owned; b has let it go, so a's next
    // heartbeat tells it to rejoin and collect it.
    assert_eq!(h.heartbeat("grp", &a, epoch), ErrorCode::REBALANCE_IN_PROGRESS);
    assert_eq!(classic_join(&mut h, &a).error, ErrorCode::NONE);
    let s = classic_sync(&mut h, &a, epoch);
    assert_eq!(partitions_of(&s.assignment).len(), 2, "{s:?}");
    assert_eq!(h.heartbeat("grp", &b, epoch), ErrorCode::NONE);
    // Now the consumer-protocol member gets the partitions freed for it.
    let r = cbeat(&mut h, "m3", epoch, &Assignment::new());
    let g = h.core.store().consumer_group("grp").unwrap();
    assert_eq!(g.members["m3"].state, MemberState::Stable, "{r:?}");
    assert_eq!(r.assignment.map(|a| a.values().map(|p| p.len()).sum::<usize>()), Some(2));
    let mut owners = std::collections::BTreeMap::new();
    for m in g.members.values() {
        for p in m.assigned.get(&FOO).into_iter().flatten() {
            assert!(owners.insert(*p, m.member_id.clone()).is_none(), "partition {p} owned twice");
        }
    }
    assert_eq!(owners.len(), 6);
    assert_replays(&h);
}

#[test]
fn the_group_downgrades_when_its_last_consumer_protocol_member_leaves() {
    let mut h = Harness::new();
    let (_, a, b) = classic_group(&mut h);
    let r3 = chb(&mut h, cjoin("m3"));
    let epoch = r3.member_epoch;
    let leave = ConsumerHeartbeatRequest { member_epoch: -1, ..cjoin("m3") };
    let r = chb(&mut h, leave);
    assert_eq!((r.error, r.member_epoch), (ErrorCode::NONE, -1), "{r:?}");
    assert!(h.core.store().consumer_group("grp").is_none(), "the consumer group is gone");
    let c = h.core.group("grp").expect("a classic group again");
    assert_eq!(c.state, GroupState::PreparingRebalance, "its members must rejoin");
    assert_eq!(c.generation_id, epoch);
    assert_eq!(c.protocol_name.as_deref(), Some("range"));
    // Each member's assignment is its target, in its protocol's version.
    let total: usize = c.members.values().map(|m| partitions_of(&m.assignment).len()).sum();
    assert_eq!(total, 4, "the target of the two classic members");
    assert_replays(&h);
    // The classic members rejoin and the classic protocol takes over.
    assert_eq!(h.heartbeat("grp", &a, epoch), ErrorCode::REBALANCE_IN_PROGRESS);
    let ja = h.send(Request::Join(Box::new(join("grp", &a, "ca").metadata(&["foo"]).build())));
    let jb = h.send(Request::Join(Box::new(join("grp", &b, "cb").metadata(&["foo"]).build())));
    let (ra, rb) = (h.join_response(ja), h.join_response(jb));
    assert_eq!((ra.error, rb.error), (ErrorCode::NONE, ErrorCode::NONE));
    assert_eq!(ra.generation_id, epoch + 1);
    assert_eq!(h.core.group("grp").map(|g| g.state), Some(GroupState::CompletingRebalance));
}

#[test]
fn policy_disabled_keeps_a_non_empty_classic_group_classic() {
    let mut h = with_policy(MigrationPolicy::Disabled);
    classic_group(&mut h);
    let r = chb(&mut h, cjoin("m3"));
    assert_eq!(
        (r.error, r.error_message.as_deref()),
        (ErrorCode::GROUP_ID_NOT_FOUND, Some("Group grp is not a consumer group."))
    );
    assert!(h.core.group("grp").is_some());
    let mut h = with_policy(MigrationPolicy::Downgrade);
    classic_group(&mut h);
    assert_eq!(chb(&mut h, cjoin("m3")).error, ErrorCode::GROUP_ID_NOT_FOUND);
}

#[test]
fn policy_upgrade_keeps_the_consumer_group_when_its_last_consumer_member_leaves() {
    let mut h = with_policy(MigrationPolicy::Upgrade);
    classic_group(&mut h);
    chb(&mut h, cjoin("m3"));
    let r = chb(&mut h, ConsumerHeartbeatRequest { member_epoch: -1, ..cjoin("m3") });
    assert_eq!(r.error, ErrorCode::NONE);
    assert!(h.core.group("grp").is_none());
    assert_eq!(h.core.store().consumer_group("grp").map(|g| g.members.len()), Some(2));
    assert_replays(&h);
}

#[test]
fn a_classic_member_is_fenced_after_its_own_session_timeout() {
    let mut h = Harness::new();
    let (_, a, b) = classic_group(&mut h);
    let epoch = chb(&mut h, cjoin("m3")).member_epoch;
    for _ in 0..4 {
        h.advance(4_000);
        cbeat(&mut h, "m3", epoch, &Assignment::new());
        let _ = h.heartbeat("grp", &b, 1);
    }
    let g = h.core.store().consumer_group("grp").unwrap();
    assert!(!g.members.contains_key(&a), "10 s without a heartbeat");
    assert!(g.members.contains_key(&b) && g.members.contains_key("m3"));
    assert_replays(&h);
}

#[test]
fn a_classic_member_that_joins_but_never_syncs_is_fenced_after_its_rebalance_timeout() {
    let mut h = Harness::new();
    chb(&mut h, cjoin("m1"));
    let j = classic_join(&mut h, "");
    assert_eq!(j.error, ErrorCode::MEMBER_ID_REQUIRED);
    let id = j.member_id;
    let j = classic_join(&mut h, &id);
    assert_eq!(j.error, ErrorCode::NONE, "{j:?}");
    for _ in 0..8 {
        h.advance(8_000);
        let _ = h.heartbeat("grp", &id, j.generation_id);
        let m1 = h.core.store().consumer_group("grp").unwrap().members["m1"].clone();
        assert_eq!(cbeat(&mut h, "m1", m1.member_epoch, &m1.assigned).error, ErrorCode::NONE);
    }
    assert!(!h.core.store().consumer_group("grp").unwrap().members.contains_key(&id), "60 s without a SyncGroup");
}

#[test]
fn classic_requests_to_a_consumer_group_are_validated_as_kafka() {
    let mut h = Harness::new();
    let r1 = chb(&mut h, cjoin("m1"));
    // A classic member joins a consumer group (no upgrade needed).
    let id = classic_join(&mut h, "").member_id;
    let j = classic_join(&mut h, &id);
    assert_eq!(j.error, ErrorCode::NONE);
    let epoch = j.generation_id;
    assert!(epoch > r1.member_epoch);
    // Wrong generation, wrong protocol name, a consumer-protocol member.
    assert_eq!(classic_sync(&mut h, &id, epoch + 5).error, ErrorCode::ILLEGAL_GENERATION);
    let mut bad = sync_req(&id, epoch, vec![]);
    bad.protocol_name = Some("roundrobin".into());
    let t = h.send(Request::Sync(Box::new(bad)));
    assert_eq!(h.sync_response(t).error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    assert_eq!(classic_sync(&mut h, "m1", r1.member_epoch).error, ErrorCode::UNKNOWN_MEMBER_ID);
    assert_eq!(h.heartbeat("grp", "nobody", epoch), ErrorCode::UNKNOWN_MEMBER_ID);
    // A different protocol type cannot join.
    let t = h.send(Request::Join(Box::new(join("grp", "", "x").protocol_type("connect").build())));
    assert_eq!(h.join_response(t).error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    // Classic LeaveGroup: the classic member goes, an unknown one is refused.
    let l = leave(&mut h, &[(&id, None), ("nobody", None)]);
    let errors: Vec<ErrorCode> = l.members.iter().map(|m| m.error).collect();
    assert_eq!(errors, vec![ErrorCode::NONE, ErrorCode::UNKNOWN_MEMBER_ID]);
    let g = h.core.store().consumer_group("grp").unwrap();
    assert_eq!(g.members.len(), 1);
    assert_eq!(g.group_epoch, epoch + 1, "a leave bumps the group epoch");
    assert_replays(&h);
}

/// A LeaveGroup naming (member id, instance id) pairs, as the admin
/// client's `removeMembersFromConsumerGroup` and classic members send it.
fn leave(h: &mut Harness, who: &[(&str, Option<&str>)]) -> LeaveGroupResponse {
    let members = who
        .iter()
        .map(|(m, i)| LeaveMember { member_id: m.to_string(), group_instance_id: i.map(str::to_string), reason: None })
        .collect();
    let t = h.send(Request::Leave(LeaveGroupRequest { group_id: "grp".into(), members }));
    match h.take(t) {
        Some(Response::Leave(l)) => l,
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_administrative_leave_removes_consumer_protocol_members_by_member_id_and_by_instance_id() {
    // Kafka 4.0 (KAFKA-18188): the admin client's removeMembersFromConsumerGroup
    // removes consumer-protocol members too, static ones for good; each
    // answer echoes the request's member id and instance id.
    let mut h = Harness::new();
    chb(&mut h, ConsumerHeartbeatRequest { instance_id: Some("i-a".into()), ..cjoin("a") });
    chb(&mut h, cjoin("b"));
    let c = chb(&mut h, cjoin("c"));
    let epoch = h.core.store().consumer_group("grp").unwrap().group_epoch;
    let l = leave(
        &mut h,
        &[("", Some("i-a")), ("b", None), ("nobody", None), ("", Some("i-unknown")), ("not-a", Some("i-a"))],
    );
    let got: Vec<(&str, Option<&str>, ErrorCode)> =
        l.members.iter().map(|m| (m.member_id.as_str(), m.group_instance_id.as_deref(), m.error)).collect();
    assert_eq!(
        got,
        vec![
            ("", Some("i-a"), ErrorCode::NONE),
            ("b", None, ErrorCode::NONE),
            ("nobody", None, ErrorCode::UNKNOWN_MEMBER_ID),
            ("", Some("i-unknown"), ErrorCode::UNKNOWN_MEMBER_ID),
            ("not-a", Some("i-a"), ErrorCode::FENCED_INSTANCE_ID),
        ]
    );
    assert_eq!(l.error, ErrorCode::NONE);
    let g = h.core.store().consumer_group("grp").unwrap();
    assert_eq!(g.members.keys().collect::<Vec<_>>(), vec!["c"], "the static member is gone, not parked");
    assert_eq!(g.group_epoch, epoch + 1, "one epoch bump for both");
    assert_replays(&h);
    // The removed members are unknown now; the one left gets every partition.
    assert_eq!(cbeat(&mut h, "b", epoch, &Assignment::new()).error, ErrorCode::UNKNOWN_MEMBER_ID);
    let mut owned = c.assignment.map(|a| a.into_iter().collect::<Assignment>()).unwrap_or_default();
    for _ in 0..4 {
        let member_epoch = h.core.store().consumer_group("grp").unwrap().members["c"].member_epoch;
        let r = cbeat(&mut h, "c", member_epoch, &owned);
        assert_eq!(r.error, ErrorCode::NONE, "{r:?}");
        if let Some(a) = r.assignment {
            owned = a.into_iter().collect();
        }
    }
    assert_eq!(owned, foo(&[0, 1, 2, 3, 4, 5]));
}

#[test]
fn removing_every_member_leaves_an_empty_consumer_group_with_its_target_at_the_new_epoch() {
    let mut h = Harness::new();
    chb(&mut h, cjoin("a"));
    chb(&mut h, cjoin("b"));
    let epoch = h.core.store().consumer_group("grp").unwrap().group_epoch;
    let l = leave(&mut h, &[("a", None), ("b", None), ("a", None)]);
    assert!(l.members.iter().all(|m| m.error == ErrorCode::NONE), "{l:?}");
    let g = h.core.store().consumer_group("grp").unwrap();
    assert!(g.members.is_empty());
    assert_eq!((g.group_epoch, g.assignment_epoch), (epoch + 1, epoch + 1));
    assert_replays(&h);
}

#[test]
fn removing_the_last_consumer_protocol_member_through_leave_group_downgrades_the_group() {
    let mut h = Harness::new();
    let (_, a, _) = classic_group(&mut h);
    chb(&mut h, ConsumerHeartbeatRequest { instance_id: Some("i-3".into()), ..cjoin("m3") });
    let epoch = h.core.store().consumer_group("grp").unwrap().group_epoch;
    assert_eq!(leave(&mut h, &[("", Some("i-3"))]).members[0].error, ErrorCode::NONE);
    assert!(h.core.store().consumer_group("grp").is_none(), "the consumer group is gone");
    let c = h.core.group("grp").expect("a classic group again");
    assert_eq!((c.state, c.generation_id, c.members.len()), (GroupState::PreparingRebalance, epoch, 2));
    assert_replays(&h);
    assert_eq!(h.heartbeat("grp", &a, epoch), ErrorCode::REBALANCE_IN_PROGRESS);
}

#[test]
fn a_classic_member_commits_with_its_member_epoch_as_generation() {
    let mut h = Harness::new();
    chb(&mut h, cjoin("m1"));
    let id = classic_join(&mut h, "").member_id;
    let epoch = classic_join(&mut h, &id).generation_id;
    assert_eq!(h.commit("grp", &id, epoch, "foo", 0, 42), ErrorCode::NONE, "OffsetCommit v8 from a classic member");
    assert_eq!(h.commit("grp", &id, epoch - 1, "foo", 0, 43), ErrorCode::ILLEGAL_GENERATION);
    assert_eq!(h.commit("grp", "m1", 1, "foo", 0, 44), ErrorCode::UNSUPPORTED_VERSION);
}

#[test]
fn a_classic_join_to_an_empty_consumer_group_makes_it_classic_again() {
    let mut h = Harness::new();
    chb(&mut h, cjoin("m1"));
    chb(&mut h, ConsumerHeartbeatRequest { member_epoch: -1, ..cjoin("m1") });
    assert!(h.core.store().consumer_group("grp").is_some_and(|g| g.members.is_empty()));
    let (t, _) = h.join_dynamic("grp", "c", &["range"]);
    assert_eq!(h.join_response(t).error, ErrorCode::NONE);
    assert!(h.core.store().consumer_group("grp").is_none());
    assert!(h.core.group("grp").is_some());
    assert_replays(&h);
}

#[test]
fn an_upgrade_and_a_downgrade_survive_compaction() {
    let mut h = Harness::new();
    classic_group(&mut h);
    chb(&mut h, cjoin("m3"));
    let mut snap_core = ShardCore::new(test_config(), Box::new(CountingIds::default()));
    for p in h.core.snapshot(h.now) {
        snap_core.load_payload(&p).unwrap();
    }
    assert_eq!(snap_core.store(), h.core.store());
    chb(&mut h, ConsumerHeartbeatRequest { member_epoch: -1, ..cjoin("m3") });
    let mut snap_core = ShardCore::new(test_config(), Box::new(CountingIds::default()));
    for p in h.core.snapshot(h.now) {
        snap_core.load_payload(&p).unwrap();
    }
    assert_eq!(snap_core.store(), h.core.store());
    assert!(snap_core.group("grp").is_some() && snap_core.store().consumer_group("grp").is_none());
}
