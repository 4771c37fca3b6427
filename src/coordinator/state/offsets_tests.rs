//! Committed offsets under simulated time: OffsetCommit and OffsetFetch by
//! group state (Kafka's edge cases), OffsetDelete and group
//! deletion, expiry, failed writes, and topic deletion.

use crate::coordinator::classic::tests::stable_group;
use crate::coordinator::core::{DeleteGroup, DeleteTopicOffsets, Request, Response};
use crate::coordinator::messages::*;
use crate::coordinator::testkit::*;
use crate::error_code::ErrorCode;

// 28
#[test]
fn offset_commit_follows_kafkas_group_state_rules() {
    let mut h = Harness::new();
    // Simple commit to an unknown group creates an Empty group without a protocol type.
    assert_eq!(h.commit("simple", "", -1, "t", 0, 5), ErrorCode::NONE);
    let d = h.describe("simple");
    assert_eq!((d.state.as_str(), d.protocol_type.as_str()), ("Empty", ""));
    // Unknown group with a generation: ILLEGAL_GENERATION below v9.
    assert_eq!(h.commit("nope", "m", 1, "t", 0, 5), ErrorCode::ILLEGAL_GENERATION);
    let (t0, a) = h.join_dynamic("g", "a", &["range"]);
    let r = h.join_response(t0);
    assert_eq!(h.state("g"), Some("CompletingRebalance"));
    assert_eq!(h.commit("g", &a, r.generation_id, "t", 0, 1), ErrorCode::REBALANCE_IN_PROGRESS);
    assert_eq!(h.commit("g", "", -1, "t", 0, 1), ErrorCode::UNKNOWN_MEMBER_ID, "no member id on a non-empty group");
    assert_eq!(h.commit("g", &a, 99, "t", 0, 1), ErrorCode::ILLEGAL_GENERATION);
    assert_eq!(h.commit("g", "stranger", r.generation_id, "t", 0, 1), ErrorCode::UNKNOWN_MEMBER_ID);
}

#[test]
fn offset_commit_v9_to_an_unknown_group_is_group_id_not_found() {
    let mut h = Harness::new();
    let t = h.send(Request::Commit(OffsetCommitRequest {
        version: 9,
        group_id: "nope".into(),
        generation_id: 3,
        member_id: "m".into(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: vec![CommitTopic {
            name: "t".into(),
            partitions: vec![CommitPartition { partition: 0, offset: 1, leader_epoch: -1, metadata: None }],
        }],
    }));
    match h.take(t) {
        Some(Response::Commit(r)) => assert_eq!(r.topics[0].partitions[0].error, ErrorCode::GROUP_ID_NOT_FOUND),
        other => panic!("{other:?}"),
    }
}

#[test]
fn commit_metadata_and_leader_epoch_round_trip_and_oversized_metadata_fails_only_its_partition() {
    let mut h = Harness::new();
    let big = "x".repeat(4097);
    let t = h.send(simple_commit(vec![CommitTopic {
        name: "t".into(),
        partitions: vec![
            CommitPartition { partition: 0, offset: 10, leader_epoch: 3, metadata: Some("meta-0".into()) },
            CommitPartition { partition: 1, offset: 11, leader_epoch: -1, metadata: Some(big) },
            CommitPartition { partition: 2, offset: 12, leader_epoch: -1, metadata: Some("é".repeat(4096)) },
        ],
    }]));
    match h.take(t) {
        Some(Response::Commit(r)) => {
            let e: Vec<ErrorCode> = r.topics[0].partitions.iter().map(|p| p.error).collect();
            assert_eq!(e, vec![ErrorCode::NONE, ErrorCode::OFFSET_METADATA_TOO_LARGE, ErrorCode::NONE]);
        }
        other => panic!("{other:?}"),
    }
    let p = h.fetch("g", "t", 0);
    assert_eq!((p.offset, p.leader_epoch, p.metadata.as_str()), (10, 3, "meta-0"));
    assert_eq!(h.fetch("g", "t", 1).offset, -1);
}

#[test]
fn a_commit_the_log_fails_to_write_fails_every_partition_also_those_with_oversized_metadata() {
    let mut h = Harness::new();
    h.sink.fail_next = 1;
    let t = h.send(simple_commit(vec![CommitTopic {
        name: "t".into(),
        partitions: vec![
            CommitPartition { partition: 0, offset: 10, leader_epoch: -1, metadata: None },
            CommitPartition { partition: 1, offset: 11, leader_epoch: -1, metadata: Some("x".repeat(4097)) },
        ],
    }]));
    match h.take(t) {
        Some(Response::Commit(r)) => {
            let e: Vec<ErrorCode> = r.topics[0].partitions.iter().map(|p| p.error).collect();
            // The storage error reaches clients as NOT_COORDINATOR, as Kafka maps it.
            assert_eq!(e, vec![ErrorCode::NOT_COORDINATOR; 2]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.fetch("g", "t", 0).offset, -1);
}

// 29
#[test]
fn fetching_unknown_groups_topics_and_partitions_returns_minus_one() {
    let mut h = Harness::new();
    for (g, t, p) in [("nope", "t", 0), ("g", "unknown", 0), ("g", "t", 7)] {
        if g == "g" {
            h.commit("g", "", -1, "t", 0, 1);
        }
        let r = h.fetch(g, t, p);
        assert_eq!(r, FetchedPartition::none(p), "{g} {t} {p}");
    }
}

// 30
#[test]
fn offset_delete_and_group_delete_follow_group_state() {
    let mut h = Harness::new();
    // A non-consumer protocol group that is not empty: NON_EMPTY_GROUP.
    let t = h.send(Request::Join(Box::new(join("c", "", "x").protocol_type("connect").version(3).build())));
    h.join_response(t);
    let t = h.send(Request::OffsetDelete(OffsetDeleteRequest {
        group_id: "c".into(),
        topics: vec![FetchTopic { name: "t".into(), partitions: vec![0] }],
    }));
    assert_eq!(
        h.take(t),
        Some(Response::OffsetDelete(OffsetDeleteResponse { error: ErrorCode::NON_EMPTY_GROUP, topics: vec![] }))
    );
    // A consumer group subscribed to the topic: per-partition GROUP_SUBSCRIBED_TO_TOPIC.
    let (ids, generation) = stable_group(&mut h, "g", 1);
    h.commit("g", &ids[0], generation, "t", 0, 1);
    h.commit("g", &ids[0], generation, "other", 0, 1);
    let t = h.send(Request::OffsetDelete(OffsetDeleteRequest {
        group_id: "g".into(),
        topics: vec![
            FetchTopic { name: "t".into(), partitions: vec![0] },
            FetchTopic { name: "other".into(), partitions: vec![0] },
        ],
    }));
    match h.take(t) {
        Some(Response::OffsetDelete(r)) => {
            assert_eq!(r.error, ErrorCode::NONE);
            assert_eq!(r.topics[0].partitions[0].error, ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC);
            assert_eq!(r.topics[1].partitions[0].error, ErrorCode::NONE);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.fetch("g", "other", 0).offset, -1);
    assert_eq!(h.fetch("g", "t", 0).offset, 1);
    // DeleteGroups: non-empty refused; once empty, offsets and group are gone.
    let t = h.send(Request::Delete(DeleteGroup { group_id: "g".into() }));
    assert_eq!(h.take(t), Some(Response::Delete(ErrorCode::NON_EMPTY_GROUP)));
    h.leave("g", &[(&ids[0], None)]);
    let t = h.send(Request::Delete(DeleteGroup { group_id: "g".into() }));
    assert_eq!(h.take(t), Some(Response::Delete(ErrorCode::NONE)));
    assert!(h.core.group("g").is_none());
    assert_eq!(h.fetch("g", "t", 0).offset, -1);
    let t = h.send(Request::Delete(DeleteGroup { group_id: "g".into() }));
    assert_eq!(h.take(t), Some(Response::Delete(ErrorCode::GROUP_ID_NOT_FOUND)));
}

#[test]
fn offsets_expire_seven_days_after_the_group_became_empty() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 1);
    h.commit("g", &ids[0], generation, "t", 0, 42);
    h.leave("g", &[(&ids[0], None)]);
    let emptied = h.now;
    let week = 7 * 24 * 3600 * 1000;
    // Retention runs every 10 minutes from load time (T0).
    h.advance(emptied + week - 1 - h.now);
    assert_eq!(h.fetch("g", "t", 0).offset, 42, "still within retention");
    h.advance(600_000);
    assert_eq!(h.fetch("g", "t", 0).offset, -1);
    assert!(h.core.group("g").is_none(), "an empty group without offsets is deleted");
}

#[test]
fn a_stable_consumer_group_only_expires_offsets_of_topics_it_no_longer_reads() {
    let mut h = Harness::new();
    let t = h.send(Request::Join(Box::new(join("g", "", "c").version(3).session(1_800_000).metadata(&["t"]).build())));
    let r = h.join_response(t);
    let id = r.member_id;
    let s = h.sync("g", &id, 1, &[]);
    h.sync_response(s);
    h.commit("g", &id, 1, "t", 0, 1);
    h.commit("g", &id, 1, "gone", 0, 1);
    for _ in 0..(8 * 24 * 3) {
        h.advance(20 * 60_000);
        assert_eq!(h.heartbeat("g", &id, 1), ErrorCode::NONE);
    }
    assert_eq!(h.fetch("g", "t", 0).offset, 1, "subscribed topic kept");
    assert_eq!(h.fetch("g", "gone", 0).offset, -1, "unsubscribed topic expired");
}

#[test]
fn simple_group_offsets_expire_per_commit_time() {
    let mut h = Harness::new();
    h.commit("s", "", -1, "t", 0, 1);
    h.advance(3 * 24 * 3600 * 1000);
    h.commit("s", "", -1, "t", 1, 2);
    h.advance(4 * 24 * 3600 * 1000 + 600_000);
    assert_eq!(h.fetch("s", "t", 0).offset, -1);
    assert_eq!(h.fetch("s", "t", 1).offset, 2);
}

#[test]
fn a_failed_commit_write_changes_nothing() {
    let mut h = Harness::new();
    h.commit("g", "", -1, "t", 0, 1);
    h.sink.fail_next = 1;
    assert_eq!(h.commit("g", "", -1, "t", 0, 2), ErrorCode::NOT_COORDINATOR);
    assert_eq!(h.fetch("g", "t", 0).offset, 1);
}

#[test]
fn a_failed_first_commit_leaves_no_simple_group_behind() {
    let mut h = Harness::new();
    h.sink.fail_next = 1;
    assert_eq!(h.commit("s", "", -1, "t", 0, 2), ErrorCode::NOT_COORDINATOR);
    assert_eq!(h.state("s"), None);
}

#[test]
fn deleting_a_topic_tombstones_its_offsets_in_every_group() {
    let mut h = Harness::new();
    h.commit("a", "", -1, "gone", 0, 1);
    h.commit("a", "", -1, "kept", 0, 2);
    h.commit("b", "", -1, "gone", 3, 4);
    let t = h.send(Request::DeleteTopicOffsets(DeleteTopicOffsets { topic: "gone".into() }));
    assert_eq!(h.take(t), Some(Response::Delete(ErrorCode::NONE)));
    assert_eq!(h.fetch("a", "gone", 0).offset, -1);
    assert_eq!(h.fetch("b", "gone", 3).offset, -1);
    assert_eq!(h.fetch("a", "kept", 0).offset, 2);
}

/// A commit without generation (a simple group's) to group "g".
fn simple_commit(topics: Vec<CommitTopic>) -> Request {
    Request::Commit(OffsetCommitRequest {
        version: 8,
        group_id: "g".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics,
    })
}

#[test]
fn a_commit_with_a_record_that_cannot_be_stored_fails_every_partition_in_order_and_writes_nothing() {
    let mut h = Harness::new();
    let part = |partition, metadata: &str| CommitPartition {
        partition,
        offset: 5,
        leader_epoch: -1,
        metadata: Some(metadata.into()),
    };
    let long = "t".repeat(40_000);
    let t = h.send(simple_commit(vec![
        // Written first, and one refused for its metadata's size.
        CommitTopic { name: "a".into(), partitions: vec![part(0, ""), part(1, &"m".repeat(5_000))] },
        // A topic name Kafka's offset records cannot hold.
        CommitTopic { name: long.clone(), partitions: vec![part(0, ""), part(1, "")] },
        CommitTopic { name: "c".into(), partitions: vec![part(2, "")] },
    ]));
    let Some(Response::Commit(r)) = h.take(t) else { panic!("expected a commit answer") };
    let answered: Vec<(&str, i32, ErrorCode)> =
        r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (t.name.as_str(), p.partition, p.error))).collect();
    let failed = ErrorCode::UNKNOWN_SERVER_ERROR;
    assert_eq!(
        answered,
        [("a", 0, failed), ("a", 1, failed), (long.as_str(), 0, failed), (long.as_str(), 1, failed), ("c", 2, failed)]
    );
    assert!(h.log().is_empty());
    assert_eq!(h.state("g"), None, "the simple group this commit would have created is gone");
}
