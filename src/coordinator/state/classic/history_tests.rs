//! The explainable-rebalance history under simulated time: each cause is
//! recorded by the scenario that produces it, a group keeps only its last
//! `group.rebalance_history` rebalances, and every rebalance, however it
//! ends, is logged as one structured line.

use std::sync::{Arc, Mutex, OnceLock};

use super::history::{Cause, Outcome, Rebalance};
use super::tests::{load_group, stable_group, static_group_completing_a_rebalance};
use crate::config::Config;
use crate::coordinator::core::{CoreConfig, Request};
use crate::coordinator::testkit::*;
use crate::error_code::ErrorCode;

fn history(h: &Harness, group: &str) -> Vec<Rebalance> {
    h.core.group(group).map(|g| g.history.entries().cloned().collect()).unwrap_or_default()
}

fn kinds(h: &Harness, group: &str) -> Vec<&'static str> {
    history(h, group).iter().map(|r| r.cause.kind()).collect()
}

/// Rejoins a one-member group and syncs it; returns the new generation.
fn rejoin_and_sync(h: &mut Harness, group: &str, member: &str) -> i32 {
    let t = h.send(Request::Join(Box::new(join(group, member, "c0").build())));
    let generation = h.join_response(t).generation_id;
    let s = h.sync(group, member, generation, &[(member, "a")]);
    assert_eq!(h.sync_response(s).error, ErrorCode::NONE);
    generation
}

#[test]
fn a_member_rejoining_with_another_subscription_is_recorded_as_protocol_changed() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    let mut req = join("g", &ids[1], "c1").metadata(&["t", "u"]).build();
    req.reason = Some("subscription changed".into());
    let t1 = h.send(Request::Join(Box::new(req)));
    let last = history(&h, "g").pop().expect("a rebalance");
    match &last.cause {
        Cause::ProtocolChanged { member_id, reason } => {
            assert_eq!((member_id, reason.as_deref()), (&ids[1], Some("subscription changed")))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!((last.outcome, last.generation_before), (Outcome::InProgress, generation));
    // Once both have rejoined and synced, it is closed as stable.
    let t0 = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    let next = h.join_response(t0).generation_id;
    h.join_response(t1);
    let s1 = h.sync("g", &ids[1], next, &[]);
    let s0 = h.sync("g", &ids[0], next, &[]);
    h.sync_response(s0);
    h.sync_response(s1);
    let last = history(&h, "g").pop().expect("a rebalance");
    assert_eq!((last.outcome, last.generation_after), (Outcome::Stable, Some(generation + 1)));
    assert_eq!(kinds(&h, "g"), ["member_joined", "protocol_changed"]);
}

#[test]
fn a_static_member_replaced_while_completing_a_rebalance_is_recorded_with_both_ids() {
    let mut h = Harness::new();
    let (a, _b) = static_group_completing_a_rebalance(&mut h);
    assert_eq!(h.state("g"), Some("CompletingRebalance"));
    let _ = h.send(Request::Join(Box::new(join("g", "", "a2").instance("ia").build())));
    let e = history(&h, "g");
    assert_eq!(kinds(&h, "g"), ["member_joined", "leader_rejoined", "static_member_replaced"]);
    assert_eq!(e[1].outcome, Outcome::Restarted, "the interrupted rebalance is closed");
    match &e[2].cause {
        Cause::StaticMemberReplaced { instance_id, old_member_id, new_member_id } => {
            assert_eq!((instance_id.as_str(), old_member_id), ("ia", &a));
            assert!(new_member_id.starts_with("ia-") && *new_member_id != a, "{new_member_id}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e[2].outcome, Outcome::InProgress);
}

#[test]
fn a_failed_assignment_write_is_recorded_with_the_error_clients_saw() {
    let mut h = Harness::new();
    let (t0, a) = h.join_dynamic("g", "a", &["range"]);
    let (t1, b) = h.join_dynamic("g", "b", &["range"]);
    let leader = h.join_response(t0).leader;
    h.join_response(t1);
    let follower = if leader == a { b } else { a };
    h.sink.fail_next = 1;
    let sl = h.sync("g", &leader, 1, &[(&leader, "x"), (&follower, "y")]);
    let seen = h.sync_response(sl).error;
    assert_eq!(seen, ErrorCode::NOT_COORDINATOR);
    let e = history(&h, "g");
    assert_eq!(kinds(&h, "g"), ["member_joined", "assignment_write_failed"]);
    assert_eq!(e[0].outcome, Outcome::Restarted);
    assert_eq!(e[1].cause, Cause::AssignmentWriteFailed { error: seen.name().to_string() });
    assert_eq!((e[1].generation_before, e[1].members_before.len()), (1, 2));
}

#[test]
fn a_group_loaded_over_the_max_size_is_recorded_as_over_max_size() {
    let mut cfg = test_config();
    cfg.max_size = 2;
    let mut h = Harness::with(cfg);
    let ids = load_group(&mut h, "g", 3);
    let e = history(&h, "g");
    assert_eq!(kinds(&h, "g"), ["over_max_size"]);
    assert_eq!((e[0].generation_before, &e[0].members_before), (5, &ids));
    assert_eq!(e[0].outcome, Outcome::InProgress);
}

#[test]
fn a_group_remembers_its_last_32_rebalances_by_default() {
    let defaults = CoreConfig::from_config(&Config::default());
    assert_eq!(defaults.rebalance_history, 32);
    let mut h = Harness::with(CoreConfig { initial_rebalance_delay_ms: 0, ..defaults });
    let (ids, mut generation) = stable_group(&mut h, "g", 1);
    for _ in 0..39 {
        generation = rejoin_and_sync(&mut h, "g", &ids[0]);
    }
    assert_eq!(generation, 40);
    let e = history(&h, "g");
    assert_eq!(e.len(), 32);
    let generations: Vec<Option<i32>> = e.iter().map(|r| r.generation_after).collect();
    let newest: Vec<Option<i32>> = (9..=40).map(Some).collect();
    assert_eq!(generations, newest, "the oldest are dropped first");
    assert!(e.iter().all(|r| r.outcome == Outcome::Stable));
}

/// Where the test process's log lines go once [`captured_logs`] ran.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs a process-wide JSON subscriber writing to memory. Global, not
/// per thread: tracing caches whether a log statement is enabled the first
/// time any thread reaches it, so a thread-local subscriber misses lines
/// that another test thread reached first.
fn captured_logs() -> &'static Captured {
    static SINK: OnceLock<Captured> = OnceLock::new();
    SINK.get_or_init(|| {
        let sink = Captured::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt().json().with_writer(move || writer.clone()).finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other test installs a subscriber");
        tracing::callsite::rebuild_interest_cache();
        sink
    })
}

/// The JSON log lines about `group` written so far.
fn logged_for(group: &str) -> Vec<serde_json::Value> {
    let text = String::from_utf8(captured_logs().0.lock().unwrap().clone()).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["fields"]["group"] == group)
        .collect()
}

#[test]
fn every_rebalance_ends_with_one_log_line_restarted_ones_included() {
    captured_logs();
    let g = "logged-group";
    let mut h = Harness::new();
    let (ids, _) = stable_group(&mut h, g, 1);
    // The leader rejoins; before it syncs it changes its subscription,
    // which restarts that rebalance.
    let t = h.send(Request::Join(Box::new(join(g, &ids[0], "c0").build())));
    h.join_response(t);
    let t = h.send(Request::Join(Box::new(join(g, &ids[0], "c0").metadata(&["u"]).build())));
    let generation = h.join_response(t).generation_id;
    let s = h.sync(g, &ids[0], generation, &[]);
    h.sync_response(s);
    h.leave(g, &[(&ids[0], None)]);
    assert_eq!(h.state(g), Some("Empty"));
    let lines = logged_for(g);
    let ended: Vec<(String, String)> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "rebalance ended")
        .map(|l| (l["fields"]["cause"].as_str().unwrap().into(), l["fields"]["outcome"].as_str().unwrap().into()))
        .collect();
    let expected = [
        ("member_joined", "Stable"),
        ("leader_rejoined", "Restarted"),
        ("protocol_changed", "Stable"),
        ("member_left", "Empty"),
    ];
    assert_eq!(ended, expected.map(|(c, o)| (c.to_string(), o.to_string())));
    let first = lines.iter().find(|l| l["fields"]["message"] == "rebalance ended").unwrap();
    for field in ["group", "generation", "detail", "duration_ms", "members_before", "members_after"] {
        assert!(!first["fields"][field].is_null(), "{field} in {first}");
    }
}

#[test]
fn every_rebalance_is_remembered_with_its_cause() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    // The leader forces a rebalance; both rejoin.
    let t0 = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    let t1 = h.send(Request::Join(Box::new(join("g", &ids[1], "c1").build())));
    h.join_response(t0);
    h.join_response(t1);
    let s1 = h.sync("g", &ids[1], generation + 1, &[]);
    let s0 = h.sync("g", &ids[0], generation + 1, &[]);
    h.sync_response(s0);
    h.sync_response(s1);
    // A member leaves; the other keeps heartbeating but never rejoins, so it
    // is removed at the rebalance timeout.
    h.leave("g", &[(&ids[1], None)]);
    for _ in 0..11 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("g", &ids[0], generation + 1), ErrorCode::REBALANCE_IN_PROGRESS);
    }
    h.advance(5_000);
    let g = h.core.group("g").unwrap();
    let e: Vec<_> = g.history.entries().collect();
    let kinds: Vec<&str> = e.iter().map(|r| r.cause.kind()).collect();
    assert_eq!(kinds, vec!["member_joined", "leader_rejoined", "member_left"]);
    assert!(
        matches!(&e[0].cause, Cause::MemberJoined { client_id, client_host, .. } if client_id == "c0" && client_host == "/127.0.0.1")
    );
    assert_eq!(e[0].outcome, Outcome::Stable);
    assert_eq!(e[1].generation_after, Some(generation + 1));
    assert_eq!(e[1].members_before.len(), 2);
    assert_eq!(e[1].members_after.len(), 2);
    assert!(matches!(&e[2].cause, Cause::MemberLeft { member_ids, .. } if member_ids == &vec![ids[1].clone()]));
    assert_eq!(e[2].outcome, Outcome::Empty);
    assert_eq!(e[2].removed_at_rebalance_timeout, vec![ids[0].clone()]);
    assert_eq!(e[2].duration_ms, Some(60_000));
}

#[test]
fn session_expiry_and_pending_sync_timeouts_are_recorded_as_causes() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    for _ in 0..3 {
        h.advance(3_000);
        h.heartbeat("g", &ids[0], generation);
    }
    h.advance(1_000);
    let kinds: Vec<&str> = h.core.group("g").unwrap().history.entries().map(|r| r.cause.kind()).collect();
    assert_eq!(kinds.last(), Some(&"session_expired"));
    // The remaining member rejoins but never syncs.
    let t = h.send(Request::Join(Box::new(join("g", &ids[0], "c0").build())));
    h.join_response(t);
    for _ in 0..12 {
        h.advance(5_000);
        h.heartbeat("g", &ids[0], generation + 1);
    }
    let kinds: Vec<&str> = h.core.group("g").unwrap().history.entries().map(|r| r.cause.kind()).collect();
    assert_eq!(kinds.last(), Some(&"pending_sync_timeout"));
}
