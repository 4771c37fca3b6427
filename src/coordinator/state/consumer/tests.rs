//! ConsumerGroupHeartbeat behaviour, scenario by scenario, in simulated time
//! (in the spirit of Kafka's GroupMetadataManagerTest). The test assignor
//! deals partitions round-robin over members in id order.

use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

use super::group::{ConsumerGroup, ConsumerGroupState, MemberState};
use super::messages::{ConsumerHeartbeatRequest, ConsumerHeartbeatResponse};
use super::records::Assignment;
use super::target::TopicImage;
use crate::coordinator::core::{CountingIds, DeleteGroup, FetchOffsets, Request, Response, ShardCore};
use crate::coordinator::records::{self, RecordKey};
use crate::coordinator::testkit::{join, test_config, Harness};
use crate::error_code::ErrorCode;

const FOO: Uuid = Uuid::from_bytes([1; 16]);
const BAR: Uuid = Uuid::from_bytes([2; 16]);

fn image(foo_partitions: i32) -> Arc<TopicImage> {
    Arc::new(TopicImage::new([("foo".to_string(), FOO, foo_partitions), ("bar".to_string(), BAR, 3)]))
}

fn a(pairs: &[(Uuid, &[i32])]) -> Assignment {
    pairs.iter().filter(|(_, ps)| !ps.is_empty()).map(|(t, ps)| (*t, ps.iter().copied().collect())).collect()
}

fn owned(x: &Assignment) -> Option<Vec<(Uuid, Vec<i32>)>> {
    Some(x.iter().map(|(t, ps)| (*t, ps.iter().copied().collect())).collect())
}

/// A heartbeat that changes nothing (only the required fields).
fn hb(member: &str, epoch: i32) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest::unchanged("grp", member, epoch, image(6))
}

/// A (re-)join: epoch 0 with every field a first request needs.
fn joining(member: &str, topics: &[&str]) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        rebalance_timeout_ms: 300_000,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        topic_partitions: Some(vec![]),
        ..hb(member, 0)
    }
}

pub(super) fn send(h: &mut Harness, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse {
    let t = h.send(Request::ConsumerHeartbeat(Box::new(req)));
    match h.take(t) {
        Some(Response::ConsumerHeartbeat(r)) => r,
        other => panic!("expected a ConsumerGroupHeartbeat answer, got {other:?}"),
    }
}

pub(super) fn ok(h: &mut Harness, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse {
    let r = send(h, req);
    assert_eq!(r.error, ErrorCode::NONE, "{r:?}");
    r
}

fn group(h: &Harness) -> &ConsumerGroup {
    h.core.store().consumer_group("grp").expect("consumer group grp")
}

fn refused(r: &ConsumerHeartbeatResponse, code: ErrorCode, message: &str) {
    assert_eq!((r.error, r.error_message.as_deref()), (code, Some(message)), "{r:?}");
}

/// Live state equals the replay of what was written, snapshot included.
fn assert_replays(h: &Harness) {
    let mut fresh = ShardCore::new(test_config(), Box::new(CountingIds::default()));
    for p in &h.sink.payloads {
        fresh.load_payload(p).unwrap();
    }
    assert_eq!(fresh.store(), h.core.store());
}

#[test]
fn a_new_member_joins_with_epoch_zero_and_gets_the_group_epoch() {
    let mut h = Harness::new();
    let r = ok(&mut h, joining("m1", &["foo"]));
    assert_eq!((r.member_id.as_deref(), r.member_epoch, r.heartbeat_interval_ms), (Some("m1"), 1, 5000));
    assert_eq!(r.assignment, Some(a(&[(FOO, &[0, 1, 2, 3, 4, 5])])));
    let g = group(&h);
    assert_eq!((g.group_epoch, g.assignment_epoch, g.state()), (1, 1, ConsumerGroupState::Stable));
    // Kafka's records, in Kafka's order.
    let kinds: Vec<i16> = h
        .log()
        .iter()
        .map(|r| match &r.record.key {
            RecordKey::Consumer { kind, .. } => kind.version(),
            _ => 0,
        })
        .collect();
    assert_eq!(kinds, vec![5, 3, 7, 6, 8]);
    assert_replays(&h);
}

#[test]
fn a_heartbeat_that_changes_nothing_writes_nothing_and_carries_no_assignment() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"]));
    let before = h.sink.payloads.len();
    let r = ok(&mut h, hb("m1", 1));
    assert_eq!((r.member_epoch, r.assignment.clone()), (1, None));
    assert_eq!(h.sink.payloads.len(), before);
    // A full request (as after an error) gets the assignment again.
    let full = ConsumerHeartbeatRequest {
        rebalance_timeout_ms: 300_000,
        subscribed_topic_names: Some(vec!["foo".into()]),
        topic_partitions: owned(&a(&[(FOO, &[0, 1, 2, 3, 4, 5])])),
        ..hb("m1", 1)
    };
    assert_eq!(ok(&mut h, full).assignment, Some(a(&[(FOO, &[0, 1, 2, 3, 4, 5])])));
}

#[test]
fn partitions_owned_by_another_member_stay_unreleased_until_revoked() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"]));
    // m2 joins: target m1 {0,2,4}, m2 {1,3,5}, but m1 still owns them all.
    let r2 = ok(&mut h, joining("m2", &["foo"]));
    assert_eq!((r2.member_epoch, r2.assignment.clone()), (2, Some(Assignment::new())));
    assert_eq!(group(&h).members["m2"].state, MemberState::UnreleasedPartitions);
    assert_eq!(group(&h).state(), ConsumerGroupState::Reconciling);

    // m1 learns it must revoke: it keeps its epoch until it does.
    let all = a(&[(FOO, &[0, 1, 2, 3, 4, 5])]);
    let r1 = ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&all), ..hb("m1", 1) });
    assert_eq!((r1.member_epoch, r1.assignment.clone()), (1, Some(a(&[(FOO, &[0, 2, 4])]))));
    assert_eq!(group(&h).members["m1"].state, MemberState::UnrevokedPartitions);

    // m2 still waits.
    let r2 = ok(&mut h, hb("m2", 2));
    assert_eq!((r2.member_epoch, r2.assignment.clone()), (2, None));

    // m1 revoked: it moves to epoch 2, and m2 gets the released partitions.
    let mine = a(&[(FOO, &[0, 2, 4])]);
    let r1 = ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&mine), ..hb("m1", 1) });
    assert_eq!((r1.member_epoch, r1.assignment.clone()), (2, None));
    let r2 = ok(&mut h, hb("m2", 2));
    assert_eq!(r2.assignment, Some(a(&[(FOO, &[1, 3, 5])])));
    assert_eq!(group(&h).state(), ConsumerGroupState::Stable);
    assert_replays(&h);
}

#[test]
fn requests_are_validated_with_kafkas_messages() {
    let mut h = Harness::new();
    let cases: Vec<(ConsumerHeartbeatRequest, &str)> = vec![
        (ConsumerHeartbeatRequest { member_id: String::new(), ..joining("", &["foo"]) }, "MemberId can't be empty."),
        (ConsumerHeartbeatRequest { group_id: String::new(), ..joining("m", &["foo"]) }, "GroupId can't be empty."),
        (
            ConsumerHeartbeatRequest { instance_id: Some(String::new()), ..joining("m", &["foo"]) },
            "InstanceId can't be empty.",
        ),
        (ConsumerHeartbeatRequest { rack_id: Some(String::new()), ..joining("m", &["foo"]) }, "RackId can't be empty."),
        (
            ConsumerHeartbeatRequest { rebalance_timeout_ms: -1, ..joining("m", &["foo"]) },
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            ConsumerHeartbeatRequest { topic_partitions: None, ..joining("m", &["foo"]) },
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            ConsumerHeartbeatRequest { topic_partitions: Some(vec![(FOO, vec![0])]), ..joining("m", &["foo"]) },
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            ConsumerHeartbeatRequest { subscribed_topic_names: None, ..joining("m", &["foo"]) },
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        ),
        (hb("m", -2), "InstanceId can't be null."),
        (hb("m", -3), "MemberEpoch is invalid."),
        (hb("", 3), "MemberId can't be empty."),
        (ConsumerHeartbeatRequest { version: 0, ..hb("", -1) }, "MemberId can't be empty."),
    ];
    for (req, message) in cases {
        let r = send(&mut h, req);
        refused(&r, ErrorCode::INVALID_REQUEST, message);
    }
    let r = send(&mut h, ConsumerHeartbeatRequest { server_assignor: Some("sticky".into()), ..joining("m", &["foo"]) });
    refused(
        &r,
        ErrorCode::UNSUPPORTED_ASSIGNOR,
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range, failing.",
    );
    assert!(h.sink.payloads.is_empty());
}

#[test]
fn v0_members_get_a_server_generated_id() {
    let mut h = Harness::new();
    let r = ok(&mut h, ConsumerHeartbeatRequest { version: 0, ..joining("", &["foo"]) });
    let id = r.member_id.unwrap();
    assert_eq!(id.len(), 22, "{id}");
    assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    assert_eq!(r.member_epoch, 1);
}

#[test]
fn unknown_groups_and_members_are_refused() {
    let mut h = Harness::new();
    refused(&send(&mut h, hb("m1", 1)), ErrorCode::GROUP_ID_NOT_FOUND, "Group grp not found.");
    ok(&mut h, joining("m1", &["foo"]));
    refused(
        &send(&mut h, hb("nobody", 1)),
        ErrorCode::UNKNOWN_MEMBER_ID,
        "Member nobody is not a member of group grp.",
    );
    refused(
        &send(&mut h, hb("nobody", -1)),
        ErrorCode::UNKNOWN_MEMBER_ID,
        "Member nobody is not a member of group grp.",
    );
}

#[test]
fn a_member_with_the_wrong_epoch_is_fenced_unless_its_response_was_lost() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"]));
    refused(
        &send(&mut h, hb("m1", 2)),
        ErrorCode::FENCED_MEMBER_EPOCH,
        "The consumer group member has a greater member epoch (2) than the one known by the group coordinator (1). The member must abandon all its partitions and rejoin.",
    );
    // The join's answer was lost: the member retries with epoch 0 (its
    // previous epoch) owning nothing, and is forgiven.
    let r = ok(&mut h, joining("m1", &["foo"]));
    assert_eq!(r.member_epoch, 1);
    // Bump m1 to epoch 2 by a second member joining, then m1 revokes.
    ok(&mut h, joining("m2", &["foo"]));
    let all = a(&[(FOO, &[0, 1, 2, 3, 4, 5])]);
    ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&all), ..hb("m1", 1) });
    let mine = a(&[(FOO, &[0, 2, 4])]);
    assert_eq!(ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&mine), ..hb("m1", 1) }).member_epoch, 2);
    // Previous epoch but owning more than assigned: fenced.
    refused(
        &send(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&all), ..hb("m1", 1) }),
        ErrorCode::FENCED_MEMBER_EPOCH,
        "The consumer group member has a smaller member epoch (1) than the one known by the group coordinator (2). The member must abandon all its partitions and rejoin.",
    );
    // Previous epoch with a subset: accepted.
    assert_eq!(ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&mine), ..hb("m1", 1) }).member_epoch, 2);
}

#[test]
fn a_leaving_member_is_removed_and_the_group_epoch_bumped() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"]));
    ok(&mut h, joining("m2", &["foo"]));
    let r = ok(&mut h, hb("m2", -1));
    assert_eq!((r.member_id.as_deref(), r.member_epoch), (Some("m2"), -1));
    let g = group(&h);
    assert_eq!(g.group_epoch, 3);
    assert!(!g.members.contains_key("m2") && !g.target.contains_key("m2"));
    // m1 reconciles back to everything at epoch 3.
    let r = ok(&mut h, hb("m1", 1));
    assert_eq!((r.member_epoch, r.assignment.clone()), (3, None));
    assert_replays(&h);
}

#[test]
fn a_member_past_its_session_timeout_is_fenced() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"]));
    ok(&mut h, joining("m2", &["foo"]));
    for _ in 0..20 {
        h.advance(5_000);
        ok(&mut h, hb("m1", 1));
    }
    // m2 never heartbeat again after its join, 100 s ago.
    let g = group(&h);
    assert!(g.members.contains_key("m1"));
    assert!(!g.members.contains_key("m2"));
    assert_eq!(g.group_epoch, 3);
    h.advance(45_000);
    assert!(group(&h).members.is_empty());
    assert_eq!(group(&h).state(), ConsumerGroupState::Empty);
    assert_replays(&h);
}

#[test]
fn a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() {
    let mut h = Harness::new();
    ok(&mut h, ConsumerHeartbeatRequest { rebalance_timeout_ms: 10_000, ..joining("m1", &["foo"]) });
    ok(&mut h, joining("m2", &["foo"]));
    let all = a(&[(FOO, &[0, 1, 2, 3, 4, 5])]);
    ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&all), ..hb("m1", 1) });
    for _ in 0..3 {
        h.advance(3_000);
        ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&all), ..hb("m1", 1) });
        ok(&mut h, hb("m2", 2));
    }
    h.advance(1_001);
    assert!(!group(&h).members.contains_key("m1"), "fenced after 10 s in epoch 1");
    // m2 now gets everything.
    let r = ok(&mut h, hb("m2", 2));
    assert_eq!((r.member_epoch, r.assignment), (3, Some(all)));
}

#[test]
fn a_member_that_revokes_in_time_is_not_fenced_by_its_rebalance_timer() {
    let mut h = Harness::new();
    ok(&mut h, ConsumerHeartbeatRequest { rebalance_timeout_ms: 10_000, ..joining("m1", &["foo"]) });
    ok(&mut h, joining("m2", &["foo"]));
    let all = a(&[(FOO, &[0, 1, 2, 3, 4, 5])]);
    ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&all), ..hb("m1", 1) });
    h.advance(5_000);
    let mine = a(&[(FOO, &[0, 2, 4])]);
    ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&mine), ..hb("m1", 1) });
    h.advance(6_000);
    assert!(group(&h).members.contains_key("m1"));
}

#[test]
fn a_static_member_that_leaves_temporarily_gets_its_assignment_back() {
    let mut h = Harness::new();
    let st = |m: &str| ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..joining(m, &["foo"]) };
    ok(&mut h, st("m1"));
    ok(&mut h, joining("m2", &["foo"]));
    ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&a(&[(FOO, &[0, 1, 2, 3, 4, 5])])), ..hb("m1", 1) });
    ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&a(&[(FOO, &[0, 2, 4])])), ..hb("m1", 1) });
    let epoch = group(&h).group_epoch;

    // While m1 holds the instance, another member id cannot take it.
    refused(
        &send(&mut h, st("m3")),
        ErrorCode::UNRELEASED_INSTANCE_ID,
        "Static member m3 with instance id i1 cannot join the group because the instance id is owned by m1 member.",
    );
    let r = ok(&mut h, ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..hb("m1", -2) });
    assert_eq!(r.member_epoch, -2);
    assert_eq!(group(&h).group_epoch, epoch, "a temporary leave does not rebalance");
    assert_eq!(group(&h).members["m1"].assigned, a(&[(FOO, &[0, 2, 4])]));

    // The restarted instance (a new member id) gets the same partitions, no rebalance.
    let r = ok(&mut h, st("m3"));
    assert_eq!((r.member_epoch, r.assignment), (epoch, Some(a(&[(FOO, &[0, 2, 4])]))));
    let g = group(&h);
    assert_eq!(g.group_epoch, epoch);
    assert!(!g.members.contains_key("m1"));
    assert_eq!(g.static_members.get("i1").map(String::as_str), Some("m3"));
    // The old id is fenced by the new one.
    refused(
        &send(&mut h, ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..hb("m1", epoch) }),
        ErrorCode::FENCED_INSTANCE_ID,
        "Static member m1 with instance id i1 was fenced by member m3.",
    );
    assert_replays(&h);
}

#[test]
fn a_static_member_that_left_temporarily_is_removed_after_its_session_timeout() {
    let mut h = Harness::new();
    ok(&mut h, ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..joining("m1", &["foo"]) });
    ok(&mut h, ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..hb("m1", -2) });
    h.advance(44_000);
    assert!(group(&h).members.contains_key("m1"));
    h.advance(1_000);
    assert!(group(&h).members.is_empty());
    refused(
        &send(&mut h, ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..hb("m1", 1) }),
        ErrorCode::UNKNOWN_MEMBER_ID,
        "Instance id i1 is unknown.",
    );
}

#[test]
fn the_group_size_is_bounded() {
    let mut cfg = test_config();
    cfg.consumer.max_size = 2;
    let mut h = Harness::with(cfg);
    ok(&mut h, joining("m1", &["foo"]));
    ok(&mut h, joining("m2", &["foo"]));
    refused(
        &send(&mut h, joining("m3", &["foo"])),
        ErrorCode::GROUP_MAX_SIZE_REACHED,
        "The consumer group has reached its maximum capacity of 2 members.",
    );
    // Members already in the group are not refused.
    ok(&mut h, hb("m2", 2));
}

#[test]
fn a_failing_assignor_fails_the_heartbeat_and_writes_nothing() {
    let mut h = Harness::new();
    let r =
        send(&mut h, ConsumerHeartbeatRequest { server_assignor: Some("failing".into()), ..joining("m1", &["foo"]) });
    refused(&r, ErrorCode::UNKNOWN_SERVER_ERROR, "Failed to compute a new target assignment for epoch 1: no");
    assert!(h.sink.payloads.is_empty());
    assert!(h.core.store().consumer_group("grp").is_none());
}

#[test]
fn a_failed_write_changes_nothing() {
    let mut h = Harness::new();
    h.sink.fail_next = 1;
    let r = send(&mut h, joining("m1", &["foo"]));
    assert_eq!(r.error, ErrorCode::NOT_COORDINATOR);
    assert!(h.core.store().consumer_group("grp").is_none());
    ok(&mut h, joining("m1", &["foo"]));
}

#[test]
fn growing_partitions_bump_the_group_epoch_and_the_assignment_follows() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo", "bar"]));
    let r = ok(&mut h, ConsumerHeartbeatRequest { topics: image(8), ..hb("m1", 1) });
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.assignment, Some(a(&[(FOO, &[0, 1, 2, 3, 4, 5, 6, 7]), (BAR, &[0, 1, 2])])));
}

#[test]
fn changing_the_subscription_bumps_the_group_epoch_and_order_does_not_matter() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo", "bar"]));
    let same =
        ConsumerHeartbeatRequest { subscribed_topic_names: Some(vec!["bar".into(), "foo".into()]), ..hb("m1", 1) };
    assert_eq!(ok(&mut h, same).member_epoch, 1);
    let fewer = ConsumerHeartbeatRequest {
        subscribed_topic_names: Some(vec!["bar".into()]),
        topic_partitions: owned(&a(&[(FOO, &[0, 1, 2, 3, 4, 5]), (BAR, &[0, 1, 2])])),
        ..hb("m1", 1)
    };
    let r = ok(&mut h, fewer);
    // foo must be revoked first.
    assert_eq!((r.member_epoch, r.assignment), (1, Some(a(&[(BAR, &[0, 1, 2])]))));
    assert_eq!(group(&h).group_epoch, 2);
}

#[test]
fn an_empty_classic_group_gives_way_but_a_live_one_of_another_protocol_type_does_not() {
    let mut h = Harness::new();
    // A classic group with a member, not of the consumer protocol type.
    let t = h.send(Request::Join(Box::new(join("grp", "", "c").version(3).protocol_type("connect").build())));
    assert_eq!(h.join_response(t).error, ErrorCode::NONE);
    refused(
        &send(&mut h, joining("m1", &["foo"])),
        ErrorCode::GROUP_ID_NOT_FOUND,
        "Group grp is not a consumer group.",
    );
    // An empty classic group (offsets only) is replaced; its offsets stay.
    let mut h = Harness::new();
    h.commit("grp", "", -1, "foo", 0, 42);
    assert!(h.core.group("grp").is_some());
    ok(&mut h, joining("m1", &["foo"]));
    assert!(h.core.group("grp").is_none());
    assert_eq!(h.fetch("grp", "foo", 0).offset, 42);
    assert_replays(&h);
    // Classic requests for a consumer group must be of the consumer type.
    let t = h.send(Request::Join(Box::new(join("grp", "", "c").protocol_type("connect").build())));
    match h.take(t) {
        Some(Response::Join(j)) => assert_eq!(j.error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.heartbeat("grp", "x", 1), ErrorCode::UNKNOWN_MEMBER_ID);
    // And a restart does not turn the offsets into a classic group.
    let mut fresh = ShardCore::new(test_config(), Box::new(CountingIds::default()));
    for p in &h.sink.payloads {
        fresh.load_payload(p).unwrap();
    }
    assert!(fresh.group("grp").is_none());
}

#[test]
fn sessions_are_armed_again_after_a_restart() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"]));
    let payloads = h.sink.payloads.clone();
    let mut core = ShardCore::new(test_config(), Box::new(CountingIds::default()));
    for p in &payloads {
        core.load_payload(p).unwrap();
    }
    let mut h2 = Harness::with_core(core);
    h2.now = h.now;
    let mut out = Vec::new();
    h2.core.on_loaded(h2.now, &mut h2.sink, &mut out);
    h2.advance(45_000);
    assert!(h2.core.store().consumer_group("grp").unwrap().members.is_empty());
}

#[test]
fn every_record_written_decodes_to_a_consumer_record() {
    let mut h = Harness::new();
    ok(
        &mut h,
        ConsumerHeartbeatRequest {
            instance_id: Some("i".into()),
            rack_id: Some("r".into()),
            ..joining("m1", &["foo"])
        },
    );
    ok(&mut h, joining("m2", &["bar", "foo"]));
    for p in &h.sink.payloads {
        let r = records::decode(p).unwrap();
        assert!(matches!(r.record.key, RecordKey::Consumer { .. }));
    }
    let subs: BTreeSet<&String> = group(&h).subscribed_topics.keys().collect();
    assert_eq!(subs.len(), 2);
}

#[test]
fn offsets_are_committed_and_fetched_with_the_member_epoch() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"]));
    let commit = |h: &mut Harness, member: &str, epoch: i32, version: i16| {
        let t = h.send(Request::Commit(crate::coordinator::messages::OffsetCommitRequest {
            version,
            group_id: "grp".into(),
            generation_id: epoch,
            member_id: member.into(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: vec![crate::coordinator::messages::CommitTopic {
                name: "foo".into(),
                partitions: vec![crate::coordinator::messages::CommitPartition {
                    partition: 0,
                    offset: 7,
                    leader_epoch: -1,
                    metadata: None,
                }],
            }],
        }));
        match h.take(t) {
            Some(Response::Commit(r)) => r.topics[0].partitions[0].error,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(commit(&mut h, "m1", 1, 9), ErrorCode::NONE);
    assert_eq!(commit(&mut h, "m1", 0, 9), ErrorCode::STALE_MEMBER_EPOCH);
    assert_eq!(commit(&mut h, "m1", 1, 8), ErrorCode::UNSUPPORTED_VERSION);
    assert_eq!(commit(&mut h, "nobody", 1, 9), ErrorCode::UNKNOWN_MEMBER_ID);
    assert_eq!(commit(&mut h, "", -1, 9), ErrorCode::UNKNOWN_MEMBER_ID, "admin commits only to an empty group");
    assert!(h.core.group("grp").is_none(), "no classic group appears");

    let fetch = |h: &mut Harness, member: Option<&str>, epoch: i32| {
        let t = h.send(Request::Fetch(FetchOffsets {
            group: crate::coordinator::messages::OffsetFetchGroup {
                group_id: "grp".into(),
                member_id: member.map(str::to_string),
                member_epoch: epoch,
                topics: None,
            },
            require_stable: false,
        }));
        match h.take(t) {
            Some(Response::Fetch(r)) => r,
            other => panic!("{other:?}"),
        }
    };
    let r = fetch(&mut h, Some("m1"), 1);
    assert_eq!((r.error, r.topics[0].partitions[0].offset), (ErrorCode::NONE, 7));
    assert_eq!(fetch(&mut h, Some("m1"), 2).error, ErrorCode::STALE_MEMBER_EPOCH);
    assert_eq!(fetch(&mut h, Some("x"), 1).error, ErrorCode::UNKNOWN_MEMBER_ID);
    assert_eq!(fetch(&mut h, None, -1).error, ErrorCode::NONE);

    ok(&mut h, hb("m1", -1));
    assert_eq!(commit(&mut h, "", -1, 9), ErrorCode::NONE);
    assert_replays(&h);
}

#[test]
fn list_groups_shows_consumer_groups_with_their_type_and_state() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"]));
    h.commit("simple", "", -1, "foo", 0, 1);
    let list = |h: &mut Harness, states: &[&str], types: &[&str]| {
        let t = h.send(Request::List(crate::coordinator::messages::ListGroupsRequest {
            states_filter: states.iter().map(|s| s.to_string()).collect(),
            types_filter: types.iter().map(|s| s.to_string()).collect(),
        }));
        match h.take(t) {
            Some(Response::List(r)) => {
                r.groups.into_iter().map(|g| (g.group_id, g.state, g.group_type)).collect::<Vec<_>>()
            }
            other => panic!("{other:?}"),
        }
    };
    let c = ("grp".to_string(), "Stable".to_string(), "consumer".to_string());
    let s = ("simple".to_string(), "Empty".to_string(), "classic".to_string());
    assert_eq!(list(&mut h, &[], &[]), vec![c.clone(), s.clone()]);
    assert_eq!(list(&mut h, &[], &["consumer"]), vec![c.clone()]);
    assert_eq!(list(&mut h, &[], &["classic"]), vec![s.clone()]);
    assert_eq!(list(&mut h, &["stable"], &[]), vec![c]);
    assert_eq!(list(&mut h, &["empty"], &["consumer"]), vec![]);
}

#[test]
fn an_empty_consumer_group_can_be_deleted_with_its_offsets() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"]));
    let delete = |h: &mut Harness| {
        let t = h.send(Request::Delete(DeleteGroup { group_id: "grp".into() }));
        match h.take(t) {
            Some(Response::Delete(e)) => e,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(delete(&mut h), ErrorCode::NON_EMPTY_GROUP);
    ok(&mut h, hb("m1", -1));
    h.commit("grp", "", -1, "foo", 0, 5);
    assert_eq!(delete(&mut h), ErrorCode::NONE);
    assert!(h.core.store().consumer_group("grp").is_none());
    assert!(!h.core.store().has_offsets("grp"));
    assert_replays(&h);
    // The id is free again, for either protocol.
    ok(&mut h, joining("m2", &["foo"]));
    assert_eq!(group(&h).group_epoch, 1);
}

/// In sidecar mode a deleted group must not come back from the upstream's
/// copy before its deletion has reached it: a consumer group's tombstone
/// counts as a deletion, as a classic group's does, also after a restart.
#[test]
fn a_deleted_consumer_group_is_not_brought_back_by_an_import() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"]));
    ok(&mut h, hb("m1", -1));
    h.commit("grp", "", -1, "t", 0, 5);
    let t = h.send(Request::Delete(DeleteGroup { group_id: "grp".into() }));
    assert_eq!(h.take(t), Some(Response::Delete(ErrorCode::NONE)));
    assert!(h.core.store().was_deleted("grp"));
    assert_replays(&h);
    let outcome = crate::coordinator::state::import_tests::import(&mut h, "grp", &[(0, 5)]);
    assert_eq!(outcome, Ok(crate::coordinator::core::ImportOutcome::AlreadyKnown));
    assert_eq!(h.fetch("grp", "t", 0).offset, -1);
    // Joining again re-creates the group and forgets the deletion.
    ok(&mut h, joining("m2", &["foo"]));
    assert!(!h.core.store().was_deleted("grp"));
}

#[test]
fn consumer_group_describe_shows_epochs_members_and_assignments() {
    let mut h = Harness::new();
    let describe = |h: &mut Harness, id: &str| {
        let t = h.send(Request::ConsumerDescribe(super::messages::ConsumerDescribeRequest {
            group_id: id.into(),
            topics: image(6),
        }));
        match h.take(t) {
            Some(Response::ConsumerDescribe(d)) => d,
            other => panic!("{other:?}"),
        }
    };
    let d = describe(&mut h, "grp");
    assert_eq!((d.error, d.error_message.as_deref()), (ErrorCode::GROUP_ID_NOT_FOUND, Some("Group grp not found.")));
    ok(&mut h, ConsumerHeartbeatRequest { server_assignor: Some("range".into()), ..joining("m1", &["foo"]) });
    ok(&mut h, joining("m2", &["foo"]));
    let d = describe(&mut h, "grp");
    assert_eq!(d.error, ErrorCode::NONE);
    assert_eq!((d.group_state.as_str(), d.group_epoch, d.assignment_epoch), ("Reconciling", 2, 2));
    assert_eq!(d.assignor_name, "range");
    let m1 = &d.members[0];
    assert_eq!((m1.member_id.as_str(), m1.member_epoch, m1.member_type), ("m1", 1, 1));
    assert_eq!(m1.assignment[0].topic_name, "foo");
    assert_eq!(m1.assignment[0].partitions, vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(m1.target_assignment[0].partitions, vec![0, 2, 4]);
    h.commit("classic", "", -1, "foo", 0, 1);
    let d = describe(&mut h, "classic");
    assert_eq!(d.error_message.as_deref(), Some("Group classic is not a consumer group."));
}

#[test]
fn the_default_server_assignor_is_uniform_and_spreads_partitions_without_overlap() {
    // The shard as the daemon builds it: `group.consumer.assignors` resolved
    // to the built-in assignors, `uniform` first.
    let mut h = Harness::with_core(ShardCore::new(test_config(), Box::new(CountingIds::default())));
    for m in ["m1", "m2", "m3"] {
        ok(&mut h, joining(m, &["foo", "bar"]));
    }
    // Heartbeat until every member has reconciled to the final target.
    for _ in 0..5 {
        for m in ["m1", "m2", "m3"] {
            let epoch = group(&h).members.get(m).map(|x| x.member_epoch).unwrap();
            let owned_now = group(&h).members.get(m).map(|x| x.assigned.clone()).unwrap();
            ok(&mut h, ConsumerHeartbeatRequest { topic_partitions: owned(&owned_now), ..hb(m, epoch) });
        }
    }
    let g = group(&h);
    assert_eq!(g.state(), ConsumerGroupState::Stable);
    let mut seen = BTreeSet::new();
    let mut sizes = Vec::new();
    for m in g.members.values() {
        let n: usize = m.assigned.values().map(BTreeSet::len).sum();
        sizes.push(n);
        for (t, ps) in &m.assigned {
            for p in ps {
                assert!(seen.insert((*t, *p)), "{t}/{p} owned twice");
            }
        }
    }
    assert_eq!(seen.len(), 6 + 3, "every partition of foo and bar is owned");
    assert_eq!(sizes, vec![3, 3, 3]);
    let r = send(&mut h, ConsumerHeartbeatRequest { server_assignor: Some("nope".into()), ..joining("m4", &["foo"]) });
    assert_eq!(r.error, ErrorCode::UNSUPPORTED_ASSIGNOR, "{r:?}");
    assert_replays(&h);
}
