//! Regular-expression subscriptions, scenario by scenario, in simulated
//! time (Kafka's `GroupMetadataManagerTest` regex cases, in spirit). The
//! test assignor deals partitions round-robin over members in id order.

use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

use super::messages::ConsumerHeartbeatRequest;
use super::records::Assignment;
use super::regex::REGEX_BATCH_REFRESH_INTERVAL_MS;
use super::target::TopicImage;
use super::tests::{ok, send};
use crate::coordinator::core::{CountingIds, ShardCore};
use crate::coordinator::records::{ConsumerKey, RecordKey};
use crate::coordinator::testkit::{test_config, Harness};
use crate::error_code::ErrorCode;

const FOO_A: Uuid = Uuid::from_bytes([1; 16]);
const FOO_B: Uuid = Uuid::from_bytes([2; 16]);
const BAR: Uuid = Uuid::from_bytes([3; 16]);

fn image(topics: &[(&str, Uuid, i32)]) -> Arc<TopicImage> {
    Arc::new(TopicImage::new(topics.iter().map(|(n, id, p)| (n.to_string(), *id, *p))))
}

fn foo_a_and_bar() -> Arc<TopicImage> {
    image(&[("foo-a", FOO_A, 2), ("bar", BAR, 2)])
}

fn all_three() -> Arc<TopicImage> {
    image(&[("foo-a", FOO_A, 2), ("foo-b", FOO_B, 2), ("bar", BAR, 2)])
}

fn hb(member: &str, epoch: i32, topics: Arc<TopicImage>) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest::unchanged("grp", member, epoch, topics)
}

fn joining_regex(member: &str, regex: &str, topics: Arc<TopicImage>) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        rebalance_timeout_ms: 300_000,
        subscribed_topic_regex: Some(regex.into()),
        topic_partitions: Some(vec![]),
        ..hb(member, 0, topics)
    }
}

fn topics_of(a: &Assignment) -> BTreeSet<Uuid> {
    a.iter().filter(|(_, ps)| !ps.is_empty()).map(|(t, _)| *t).collect()
}

fn resolved(h: &Harness, regex: &str) -> Option<Vec<String>> {
    let g = h.core.store().consumer_group("grp")?;
    g.resolved_regexes.get(regex).map(|v| v.topics.clone())
}

fn group_epoch(h: &Harness) -> i32 {
    h.core.store().consumer_group("grp").map_or(0, |g| g.group_epoch)
}

fn regex_records(h: &Harness) -> usize {
    h.log()
        .iter()
        .filter(|r| matches!(&r.record.key, RecordKey::Consumer { kind: ConsumerKey::RegularExpression(_), .. }))
        .count()
}

/// Live state equals the replay of what was written.
fn assert_replays(h: &Harness) {
    let mut fresh = ShardCore::new(test_config(), Box::new(CountingIds::default()));
    for p in &h.sink.payloads {
        fresh.load_payload(p).unwrap();
    }
    assert_eq!(fresh.store(), h.core.store());
}

#[test]
fn a_member_subscribed_by_regex_is_assigned_every_matching_topic() {
    let mut h = Harness::new();
    let r = ok(&mut h, joining_regex("m1", "foo-.*", all_three()));
    assert_eq!(r.member_epoch, 1);
    let got = r.assignment.expect("a join gets its assignment");
    assert_eq!(topics_of(&got), BTreeSet::from([FOO_A, FOO_B]));
    assert_eq!(resolved(&h, "foo-.*"), Some(vec!["foo-a".to_string(), "foo-b".to_string()]));
    let g = h.core.store().consumer_group("grp").unwrap();
    let v = &g.resolved_regexes["foo-.*"];
    assert_eq!((v.version, v.timestamp), (all_three().names_version(), h.now));
    assert_replays(&h);
}

#[test]
fn an_invalid_regex_is_refused_with_kafkas_error_and_nothing_is_written() {
    let mut h = Harness::new();
    let r = send(&mut h, joining_regex("m1", "foo-(", all_three()));
    assert_eq!(r.error, ErrorCode::INVALID_REGULAR_EXPRESSION);
    let msg = r.error_message.unwrap();
    assert!(msg.starts_with("SubscribedTopicRegex `foo-(` is not a valid regular expression: "), "{msg}");
    assert!(h.sink.payloads.is_empty());
}

#[test]
fn names_and_a_regex_together_subscribe_to_their_union() {
    let mut h = Harness::new();
    let req = ConsumerHeartbeatRequest {
        subscribed_topic_names: Some(vec!["bar".into()]),
        ..joining_regex("m1", "foo-a", all_three())
    };
    let r = ok(&mut h, req);
    assert_eq!(topics_of(&r.assignment.unwrap()), BTreeSet::from([FOO_A, BAR]));
}

#[test]
fn a_topic_created_later_is_picked_up_after_the_refresh_interval() {
    let mut h = Harness::new();
    let r = ok(&mut h, joining_regex("m1", "foo-.*", foo_a_and_bar()));
    assert_eq!(topics_of(&r.assignment.unwrap()), BTreeSet::from([FOO_A]));
    // foo-b appears; within the interval the resolution is kept (one
    // refresh per interval, as Kafka batches them).
    h.advance(REGEX_BATCH_REFRESH_INTERVAL_MS / 2);
    let r = ok(&mut h, hb("m1", 1, all_three()));
    assert_eq!((r.member_epoch, r.assignment.clone()), (1, None));
    h.advance(REGEX_BATCH_REFRESH_INTERVAL_MS);
    let r = ok(&mut h, hb("m1", 1, all_three()));
    assert_eq!(r.member_epoch, 2, "the new resolution bumps the group epoch");
    assert_eq!(topics_of(&r.assignment.unwrap()), BTreeSet::from([FOO_A, FOO_B]));
    assert_eq!(resolved(&h, "foo-.*").unwrap(), vec!["foo-a".to_string(), "foo-b".to_string()]);
    // Nothing changes afterwards: no refresh, no record.
    let before = regex_records(&h);
    h.advance(3 * REGEX_BATCH_REFRESH_INTERVAL_MS);
    ok(&mut h, hb("m1", 2, all_three()));
    assert_eq!(regex_records(&h), before);
    assert_replays(&h);
}

#[test]
fn a_deleted_topic_leaves_the_assignment_at_once_and_the_resolution_at_the_refresh() {
    let mut h = Harness::new();
    ok(&mut h, joining_regex("m1", "foo-.*", all_three()));
    // foo-b is deleted: it is no longer in the image, so the subscribed
    // metadata changes and the target drops it right away.
    let r = ok(&mut h, hb("m1", 1, foo_a_and_bar()));
    assert_eq!(group_epoch(&h), 2);
    assert_eq!(topics_of(&r.assignment.unwrap()), BTreeSet::from([FOO_A]), "foo-b is revoked");
    h.advance(REGEX_BATCH_REFRESH_INTERVAL_MS + 1);
    ok(&mut h, hb("m1", 1, foo_a_and_bar()));
    assert_eq!(resolved(&h, "foo-.*").unwrap(), vec!["foo-a".to_string()]);
    assert_replays(&h);
}

#[test]
fn a_regex_shared_by_members_is_resolved_once_and_dropped_with_its_last_member() {
    let mut h = Harness::new();
    ok(&mut h, joining_regex("m1", "foo-.*", all_three()));
    let before = regex_records(&h);
    // m2 brings the same pattern: already resolved, so no new resolution,
    // but the group epoch moves (Kafka: the member's subscription changed).
    let r = ok(&mut h, joining_regex("m2", "foo-.*", all_three()));
    assert_eq!(r.member_epoch, 2);
    assert_eq!(regex_records(&h), before);
    // m1 leaves: the pattern stays; m2 leaves: its record is tombstoned.
    ok(&mut h, hb("m1", -1, all_three()));
    assert!(resolved(&h, "foo-.*").is_some());
    ok(&mut h, hb("m2", -1, all_three()));
    assert_eq!(resolved(&h, "foo-.*"), None);
    assert_replays(&h);
}

#[test]
fn switching_from_a_regex_to_names_clears_the_regex() {
    let mut h = Harness::new();
    ok(&mut h, joining_regex("m1", "foo-.*", all_three()));
    // librdkafka sends an empty regex with its names.
    let req = ConsumerHeartbeatRequest {
        subscribed_topic_names: Some(vec!["bar".into()]),
        subscribed_topic_regex: Some(String::new()),
        ..hb("m1", 1, all_three())
    };
    ok(&mut h, req);
    assert_eq!(group_epoch(&h), 2);
    let g = h.core.store().consumer_group("grp").unwrap();
    assert_eq!(g.members["m1"].metadata.subscribed_topic_regex, None);
    assert!(g.resolved_regexes.is_empty() && g.subscribed_regexes.is_empty());
    // m1 had foo-a and foo-b; the target is now bar only (revoked first).
    assert_eq!(g.target["m1"].keys().copied().collect::<BTreeSet<_>>(), BTreeSet::from([BAR]));
    assert_replays(&h);
}

#[test]
fn an_administrative_leave_of_every_subscriber_to_a_regex_drops_it_once() {
    use crate::coordinator::core::{Request, Response};
    use crate::coordinator::messages::{LeaveGroupRequest, LeaveMember};
    let mut h = Harness::new();
    ok(&mut h, joining_regex("m1", "foo-.*", all_three()));
    ok(&mut h, joining_regex("m2", "foo-.*", all_three()));
    ok(&mut h, joining_regex("m3", "bar", all_three()));
    let epoch = group_epoch(&h);
    let leave = |h: &mut Harness, ids: &[&str]| {
        let members = ids
            .iter()
            .map(|m| LeaveMember { member_id: m.to_string(), group_instance_id: None, reason: None })
            .collect();
        let t = h.send(Request::Leave(LeaveGroupRequest { group_id: "grp".into(), members }));
        match h.take(t) {
            Some(Response::Leave(l)) => assert!(l.members.iter().all(|m| m.error == ErrorCode::NONE), "{l:?}"),
            other => panic!("{other:?}"),
        }
    };
    // Both subscribers of foo-.* go in one request: one epoch bump, and the
    // pattern goes with them; bar's stays with m3.
    leave(&mut h, &["m1", "m2"]);
    assert_eq!(group_epoch(&h), epoch + 1);
    assert_eq!(resolved(&h, "foo-.*"), None);
    let g = h.core.store().consumer_group("grp").unwrap();
    let patterns: Vec<&String> = g.subscribed_regexes.keys().collect();
    assert_eq!(patterns, vec!["bar"]);
    assert_replays(&h);
}

#[test]
fn a_session_expiry_drops_the_regex_of_its_last_member() {
    let mut h = Harness::new();
    ok(&mut h, joining_regex("m1", "foo-.*", all_three()));
    h.advance(46_000);
    assert_eq!(resolved(&h, "foo-.*"), None);
    assert_replays(&h);
}

/// A principal's DESCRIBE permission: every topic except the named ones.
struct AllBut(&'static [&'static str]);

impl super::describable::TopicVisibility for AllBut {
    fn may_describe(&self, topic: &str) -> bool {
        !self.0.contains(&topic)
    }
}

#[test]
fn a_regex_resolves_only_to_topics_the_subscriber_may_describe() {
    // Kafka's filterTopicDescribeAuthorizedTopics: foo-b matches but the
    // member may not DESCRIBE it, so it is neither resolved nor assigned;
    // the record holds what survived, so replay needs no authorizer.
    let mut h = Harness::new();
    let req = ConsumerHeartbeatRequest {
        describable: super::describable::Describable::only(Arc::new(AllBut(&["foo-b"]))),
        ..joining_regex("m1", "foo-.*", all_three())
    };
    let r = ok(&mut h, req);
    assert_eq!(topics_of(&r.assignment.unwrap()), BTreeSet::from([FOO_A]));
    assert_eq!(resolved(&h, "foo-.*"), Some(vec!["foo-a".to_string()]));
    assert_replays(&h);
}
