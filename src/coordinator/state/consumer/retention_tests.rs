//! The offsets lifecycle of consumer groups in simulated time: OffsetDelete,
//! offset expiry and the deletion of empty groups (Kafka 4.x).

use std::sync::Arc;

use uuid::Uuid;

use super::messages::{ConsumerHeartbeatRequest, ConsumerHeartbeatResponse};
use super::target::TopicImage;
use crate::coordinator::core::{CountingIds, Request, Response, ShardCore};
use crate::coordinator::messages::{
    CommitPartition, CommitTopic, FetchTopic, OffsetCommitRequest, OffsetDeleteRequest, OffsetDeleteResponse,
};
use crate::coordinator::testkit::{test_config, Harness};
use crate::error_code::ErrorCode;

const RETENTION_MS: i64 = 60_000;
const CHECK_MS: i64 = 10_000;

fn harness() -> Harness {
    let mut cfg = test_config();
    cfg.offsets_retention_ms = RETENTION_MS;
    cfg.retention_check_interval_ms = CHECK_MS;
    Harness::with(cfg)
}

fn image() -> Arc<TopicImage> {
    Arc::new(TopicImage::new([
        ("foo".to_string(), Uuid::from_bytes([1; 16]), 2),
        ("bar".to_string(), Uuid::from_bytes([2; 16]), 2),
        ("re-1".to_string(), Uuid::from_bytes([3; 16]), 1),
    ]))
}

fn hb(member: &str, epoch: i32) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest::unchanged("grp", member, epoch, image())
}

fn heartbeat(h: &mut Harness, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse {
    let t = h.send(Request::ConsumerHeartbeat(Box::new(req)));
    match h.take(t) {
        Some(Response::ConsumerHeartbeat(r)) => {
            assert_eq!(r.error, ErrorCode::NONE, "{r:?}");
            r
        }
        other => panic!("expected a ConsumerGroupHeartbeat answer, got {other:?}"),
    }
}

/// m1 joins subscribed to foo by name and to `^re-.*` by pattern.
fn join(h: &mut Harness) -> i32 {
    let req = ConsumerHeartbeatRequest {
        rebalance_timeout_ms: 300_000,
        subscribed_topic_names: Some(vec!["foo".into()]),
        subscribed_topic_regex: Some("re-.*".into()),
        topic_partitions: Some(vec![]),
        ..hb("m1", 0)
    };
    heartbeat(h, req).member_epoch
}

fn commit(h: &mut Harness, member: &str, epoch: i32, topic: &str) -> ErrorCode {
    let t = h.send(Request::Commit(OffsetCommitRequest {
        version: 9,
        group_id: "grp".into(),
        generation_id: epoch,
        member_id: member.into(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: vec![CommitTopic {
            name: topic.into(),
            partitions: vec![CommitPartition { partition: 0, offset: 5, leader_epoch: -1, metadata: None }],
        }],
    }));
    match h.take(t) {
        Some(Response::Commit(r)) => r.topics[0].partitions[0].error,
        other => panic!("{other:?}"),
    }
}

fn offset_delete(h: &mut Harness, topics: &[&str]) -> OffsetDeleteResponse {
    let t = h.send(Request::OffsetDelete(OffsetDeleteRequest {
        group_id: "grp".into(),
        topics: topics.iter().map(|t| FetchTopic { name: t.to_string(), partitions: vec![0] }).collect(),
    }));
    match h.take(t) {
        Some(Response::OffsetDelete(r)) => r,
        other => panic!("{other:?}"),
    }
}

fn has_offset(h: &Harness, topic: &str) -> bool {
    h.core.store().offset("grp", topic, 0).is_some()
}

fn assert_replays(h: &Harness) {
    let mut cfg = test_config();
    cfg.offsets_retention_ms = RETENTION_MS;
    let mut fresh = ShardCore::new(cfg, Box::new(CountingIds::default()));
    for p in &h.sink.payloads {
        fresh.load_payload(p).unwrap();
    }
    assert_eq!(fresh.store(), h.core.store());
}

#[test]
fn offset_delete_of_an_active_consumer_group_spares_only_the_topics_it_reads() {
    let mut h = harness();
    let epoch = join(&mut h);
    for t in ["foo", "bar", "re-1"] {
        assert_eq!(commit(&mut h, "m1", epoch, t), ErrorCode::NONE);
    }
    let r = offset_delete(&mut h, &["foo", "bar", "re-1"]);
    assert_eq!(r.error, ErrorCode::NONE);
    let errors: Vec<ErrorCode> = r.topics.iter().map(|t| t.partitions[0].error).collect();
    assert_eq!(
        errors,
        vec![ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode::NONE, ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC],
        "foo by name and re-1 through the pattern are read"
    );
    assert!(has_offset(&h, "foo") && has_offset(&h, "re-1"));
    assert!(!has_offset(&h, "bar"));
    assert_replays(&h);
}

#[test]
fn offsets_of_topics_an_active_group_no_longer_reads_expire_and_the_others_stay() {
    let mut h = harness();
    let epoch = join(&mut h);
    assert_eq!(commit(&mut h, "m1", epoch, "foo"), ErrorCode::NONE);
    assert_eq!(commit(&mut h, "m1", epoch, "bar"), ErrorCode::NONE);
    // The member keeps heartbeating well past the retention time.
    for _ in 0..(2 * RETENTION_MS / 5_000) {
        h.advance(5_000);
        heartbeat(&mut h, hb("m1", epoch));
    }
    assert!(has_offset(&h, "foo"), "a topic the group reads keeps its offsets");
    assert!(!has_offset(&h, "bar"), "a topic it does not read expires");
    assert!(h.core.store().consumer_group("grp").is_some());
    assert_replays(&h);
}

#[test]
fn an_empty_consumer_group_expires_its_offsets_and_is_then_deleted() {
    let mut h = harness();
    let epoch = join(&mut h);
    assert_eq!(commit(&mut h, "m1", epoch, "foo"), ErrorCode::NONE);
    heartbeat(&mut h, hb("m1", -1));
    h.advance(RETENTION_MS / 2);
    assert!(has_offset(&h, "foo"), "offsets outlive the members for the retention time");
    assert!(h.core.store().consumer_group("grp").is_some());
    h.advance(RETENTION_MS);
    assert!(!has_offset(&h, "foo"));
    assert!(h.core.store().consumer_group("grp").is_none(), "the empty group without offsets is deleted");
    assert_replays(&h);
}

#[test]
fn an_empty_consumer_group_that_never_committed_is_deleted_at_the_next_check() {
    let mut h = harness();
    join(&mut h);
    heartbeat(&mut h, hb("m1", -1));
    h.advance(CHECK_MS + 1);
    assert!(h.core.store().consumer_group("grp").is_none());
    assert_replays(&h);
}
