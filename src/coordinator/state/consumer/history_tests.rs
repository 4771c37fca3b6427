//! The consumer-group epoch history under simulated time: each cause is
//! recorded by the scenario that produces it, convergence is timed until the
//! last member reaches the target, and the history keeps only the last
//! `group.rebalance_history` entries.

use std::sync::Arc;

use uuid::Uuid;

use super::history::{Cause, EpochChange, Outcome};
use super::messages::ConsumerHeartbeatRequest;
use super::records::Assignment;
use super::target::TopicImage;
use super::tests::ok;
use crate::coordinator::core::{Details, Request, Response, Summaries};
use crate::coordinator::testkit::{test_config, Harness, T0};

const FOO: Uuid = Uuid::from_bytes([1; 16]);
const BAR: Uuid = Uuid::from_bytes([2; 16]);

fn image(foo_partitions: i32) -> Arc<TopicImage> {
    Arc::new(TopicImage::new([("foo".to_string(), FOO, foo_partitions), ("bar".to_string(), BAR, 3)]))
}

fn joining(member: &str, topics: &[&str], foo_partitions: i32) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        topic_partitions: Some(vec![]),
        ..ConsumerHeartbeatRequest::unchanged("grp", member, 0, image(foo_partitions))
    }
}

/// A heartbeat reporting what the member owns; returns its new epoch and assignment.
fn beat(h: &mut Harness, member: &str, epoch: i32, owned: &Assignment, foo_partitions: i32) -> (i32, Assignment) {
    let req = ConsumerHeartbeatRequest {
        topic_partitions: Some(owned.iter().map(|(t, ps)| (*t, ps.iter().copied().collect())).collect()),
        ..ConsumerHeartbeatRequest::unchanged("grp", member, epoch, image(foo_partitions))
    };
    let r = ok(h, req);
    (r.member_epoch, r.assignment.unwrap_or_else(|| owned.clone()))
}

fn history(h: &Harness) -> Vec<EpochChange> {
    h.core.consumer_history("grp")
}

fn kinds(h: &Harness) -> Vec<&'static str> {
    history(h).iter().map(|e| e.cause.kind()).collect()
}

fn last(h: &Harness) -> EpochChange {
    history(h).pop().expect("an epoch change")
}

/// Two members sharing foo's 6 partitions, converged at epoch 2. Returns
/// what each owns.
fn two_members(h: &mut Harness) -> (Assignment, Assignment) {
    let r = ok(h, joining("m1", &["foo"], 6));
    let mut a1 = r.assignment.unwrap_or_default();
    h.advance(1_000);
    let r = ok(h, joining("m2", &["foo"], 6));
    let mut a2 = r.assignment.unwrap_or_default();
    let mut e2 = r.member_epoch;
    // m1 revokes, then m2 takes what was released.
    let mut e1 = 1;
    for _ in 0..4 {
        h.advance(500);
        (e1, a1) = beat(h, "m1", e1, &a1, 6);
        (e2, a2) = beat(h, "m2", e2, &a2, 6);
    }
    assert_eq!((e1, e2), (2, 2));
    (a1, a2)
}

#[test]
fn a_joining_member_is_recorded_and_the_epoch_converges_when_the_last_member_reaches_the_target() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"], 6));
    let first = last(&h);
    match &first.cause {
        Cause::MemberJoined { member_id, client_id, member_type, replaced_member_id, .. } => {
            assert_eq!((member_id.as_str(), client_id.as_str(), *member_type), ("m1", "client", "consumer"));
            assert_eq!(*replaced_member_id, None);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!((first.group_epoch_before, first.group_epoch), (0, 1));
    assert_eq!((first.outcome, first.convergence_ms), (Outcome::Converged, Some(0)), "one member owns it all at once");

    two_members(&mut h);
    let e = last(&h);
    assert_eq!(kinds(&h), ["member_joined", "member_joined"]);
    assert_eq!((e.group_epoch_before, e.group_epoch, e.members), (1, 2, 2));
    assert_eq!(e.started_ms, T0 + 1_000);
    assert_eq!(e.assigned_ms, Some(T0 + 1_000), "the target is computed in the joining heartbeat");
    assert_eq!(e.outcome, Outcome::Converged);
    // m1 revoked at +1500, m2 took the released partitions at +2000.
    assert_eq!(e.convergence_ms, Some(1_000));
    assert_eq!(e.ended_ms, Some(T0 + 2_000));
}

#[test]
fn partitions_that_grow_are_recorded_as_topic_metadata_changed_with_the_counts() {
    let mut h = Harness::new();
    let (a1, _) = two_members(&mut h);
    h.advance(1_000);
    beat(&mut h, "m1", 2, &a1, 12);
    let e = last(&h);
    match &e.cause {
        Cause::TopicMetadataChanged { resized, created, deleted } => {
            assert_eq!(resized.len(), 1);
            assert_eq!(
                (resized[0].topic.as_str(), resized[0].partitions_before, resized[0].partitions_after),
                ("foo", 6, 12)
            );
            assert!(created.is_empty() && deleted.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!((e.group_epoch, e.outcome), (3, Outcome::InProgress), "m2 has not heartbeated yet");
}

#[test]
fn a_subscription_change_leave_and_session_expiry_are_each_recorded_with_the_member() {
    let mut h = Harness::new();
    let (a1, a2) = two_members(&mut h);
    let req = ConsumerHeartbeatRequest {
        subscribed_topic_names: Some(vec!["foo".into(), "bar".into()]),
        topic_partitions: Some(a1.iter().map(|(t, ps)| (*t, ps.iter().copied().collect())).collect()),
        ..ConsumerHeartbeatRequest::unchanged("grp", "m1", 2, image(6))
    };
    ok(&mut h, req);
    match last(&h).cause {
        Cause::SubscriptionChanged { member_id, topics_before, topics_after, .. } => {
            assert_eq!(member_id, "m1");
            assert_eq!(
                (topics_before, topics_after),
                (vec!["foo".to_string()], vec!["bar".to_string(), "foo".to_string()])
            );
        }
        other => panic!("{other:?}"),
    }
    // m2 leaves for good.
    let _ = a2;
    ok(&mut h, ConsumerHeartbeatRequest::unchanged("grp", "m2", -1, image(6)));
    assert_eq!(last(&h).cause, Cause::MemberLeft { member_ids: vec!["m2".into()] });
    // m1 goes silent: its session (45 s) expires; the group is empty.
    h.advance(46_000);
    let e = last(&h);
    assert_eq!(e.cause, Cause::SessionExpired { member_id: "m1".into() });
    assert_eq!(e.outcome, Outcome::Empty);
    assert_eq!(kinds(&h), ["member_joined", "member_joined", "subscription_changed", "member_left", "session_expired"]);
    let superseded = history(&h).iter().filter(|e| e.outcome == Outcome::Superseded).count();
    assert!(superseded >= 1, "an epoch bumped before its members converged is superseded");
}

#[test]
fn the_history_keeps_only_the_configured_number_of_epochs() {
    let mut cfg = test_config();
    cfg.rebalance_history = 2;
    let mut h = Harness::with(cfg);
    for (i, member) in ["m1", "m2", "m3", "m4"].iter().enumerate() {
        h.advance(10);
        ok(&mut h, joining(member, &["foo"], 6));
        assert_eq!(history(&h).len(), (i + 1).min(2));
    }
    let epochs: Vec<i32> = history(&h).iter().map(|e| e.group_epoch).collect();
    assert_eq!(epochs, [3, 4]);
}

#[test]
fn the_group_view_shows_the_history_and_the_summary_names_the_last_cause() {
    let mut h = Harness::new();
    ok(&mut h, joining("m1", &["foo"], 6));
    let t = h.send(Request::Details(Details { group_id: "grp".into() }));
    let Some(Response::Details(Some(d))) = h.take(t) else { panic!("details of grp") };
    let c = d.consumer.expect("a consumer group");
    assert_eq!(c.rebalances, history(&h));
    assert_eq!(c.rebalances.len(), 1);
    let t = h.send(Request::Summaries(Summaries));
    let Some(Response::Summaries(s)) = h.take(t) else { panic!("summaries") };
    let g = s.iter().find(|g| g.group_id == "grp").expect("grp listed");
    assert_eq!(g.last_rebalance_cause.as_deref(), Some("member_joined"));
}

#[test]
fn a_heartbeat_that_changes_nothing_records_nothing() {
    let mut h = Harness::new();
    let (a1, _) = two_members(&mut h);
    let before = history(&h);
    beat(&mut h, "m1", 2, &a1, 6);
    assert_eq!(history(&h), before);
}
