//! Sidecar delegation of a group's offsets to the upstream
//! (`delegation`): TxnOffsetCommit is admitted with Kafka's transactional
//! validation, the group then stays delegated across restarts, and its
//! offsets are handed over once.

use super::core::{CountingIds, DeleteGroup, FetchOffsets, Handover, Import, Request, Response, ShardCore, TxnCommit};
use super::delegation::Admitted;
use super::messages::*;
use super::records::DelegationValue;
use super::testkit::{test_config, Harness};
use crate::error_code::ErrorCode;

fn commit_request(group: &str, member: &str, generation: i32, instance: Option<&str>) -> OffsetCommitRequest {
    OffsetCommitRequest {
        version: 3,
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: instance.map(str::to_string),
        retention_time_ms: -1,
        topics: vec![CommitTopic {
            name: "t".into(),
            partitions: vec![CommitPartition { partition: 0, offset: 42, leader_epoch: -1, metadata: None }],
        }],
    }
}

fn txn_commit(h: &mut Harness, req: OffsetCommitRequest) -> Result<Admitted, ErrorCode> {
    let t = h.send(Request::TxnCommit(TxnCommit(req)));
    match h.take(t) {
        Some(Response::Delegated(r)) => r,
        other => panic!("{other:?}"),
    }
}

/// A stable classic group "g" with one member; returns (member, generation).
fn stable_group(h: &mut Harness) -> (String, i32) {
    let (token, member) = h.join_dynamic("g", "c", &["range"]);
    let generation = h.join_response(token).generation_id;
    let t = h.sync("g", &member, generation, &[(&member, "a")]);
    assert!(matches!(h.take(t), Some(Response::Sync(r)) if r.error.is_none()));
    (member, generation)
}

fn handover(h: &mut Harness, group: &str, done: bool) -> Result<Option<Vec<CommitTopic>>, ErrorCode> {
    let t = h.send(Request::Handover(Handover { group_id: group.into(), done }));
    match h.take(t) {
        Some(Response::Handover(r)) => r,
        other => panic!("{other:?}"),
    }
}

fn rebuild(h: &Harness) -> ShardCore {
    let mut core = ShardCore::new(test_config(), Box::new(CountingIds::default()));
    for p in &h.sink.payloads {
        core.load_payload(p).expect("every written record decodes");
    }
    core
}

#[test]
fn a_member_of_the_current_generation_may_commit_transactionally_and_the_group_becomes_delegated() {
    let mut h = Harness::new();
    let (member, generation) = stable_group(&mut h);
    assert_eq!(h.commit("g", &member, generation, "t", 0, 7), ErrorCode::NONE);
    let admitted = txn_commit(&mut h, commit_request("g", &member, generation, None));
    assert_eq!(admitted, Ok(Admitted { hand_over_first: true }), "kcoord's offset 7 must reach the upstream first");
    assert_eq!(h.core.store().delegation("g"), Some(DelegationValue { handed_over: false }));
    // The transactional offset itself is not written here: the upstream keeps it.
    assert_eq!(h.fetch_delegated("g"), Ok(Admitted { hand_over_first: true }));
}

#[test]
fn transactional_commits_are_refused_as_kafka_refuses_them() {
    let mut h = Harness::new();
    let (member, generation) = stable_group(&mut h);
    assert_eq!(
        txn_commit(&mut h, commit_request("g", &member, generation + 1, None)),
        Err(ErrorCode::ILLEGAL_GENERATION)
    );
    assert_eq!(
        txn_commit(&mut h, commit_request("g", "stranger", generation, None)),
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
    assert_eq!(
        txn_commit(&mut h, commit_request("nobody-knows", "m", 1, None)),
        Err(ErrorCode::ILLEGAL_GENERATION),
        "an unknown group with a generation"
    );
    assert_eq!(h.core.store().delegation("g"), None, "a refused commit delegates nothing");
    assert_eq!(h.core.store().delegation("nobody-knows"), None);
    assert!(h.core.group("nobody-knows").is_none());
}

#[test]
fn a_stale_static_member_is_fenced() {
    let mut h = Harness::new();
    let t = h.send(Request::Join(Box::new(super::testkit::join("s", "", "c").instance("i1").build())));
    let joined = h.join_response(t);
    let t = h.sync("s", &joined.member_id, joined.generation_id, &[(&joined.member_id, "a")]);
    let _ = h.take(t);
    let req = commit_request("s", "old-member-id", joined.generation_id, Some("i1"));
    assert_eq!(txn_commit(&mut h, req), Err(ErrorCode::FENCED_INSTANCE_ID));
}

#[test]
fn a_commit_without_member_or_generation_is_accepted_in_any_state_when_transactional() {
    let mut h = Harness::new();
    stable_group(&mut h);
    // Older TxnOffsetCommit versions carry no member: Kafka accepts them
    // even for a group with members (a plain OffsetCommit would not be).
    assert_eq!(txn_commit(&mut h, commit_request("g", "", -1, None)), Ok(Admitted { hand_over_first: false }));
    assert_eq!(h.commit("h", "", -1, "t", 0, 1), ErrorCode::NONE);
    // An unknown group without generation becomes a simple group, as in Kafka.
    assert_eq!(txn_commit(&mut h, commit_request("new", "", -1, None)), Ok(Admitted { hand_over_first: false }));
    assert_eq!(h.core.store().delegation("new"), Some(DelegationValue { handed_over: true }), "nothing to hand over");
}

#[test]
fn commits_and_fetches_of_a_delegated_group_are_validated_here_and_go_upstream() {
    let mut h = Harness::new();
    let (member, generation) = stable_group(&mut h);
    txn_commit(&mut h, commit_request("g", &member, generation, None)).unwrap();
    let t =
        h.send(Request::Commit(OffsetCommitRequest { version: 8, ..commit_request("g", &member, generation, None) }));
    assert_eq!(h.take(t), Some(Response::Delegated(Ok(Admitted { hand_over_first: false }))));
    let t = h.send(Request::Commit(OffsetCommitRequest { version: 8, ..commit_request("g", &member, 99, None) }));
    assert_eq!(h.take(t), Some(Response::Delegated(Err(ErrorCode::ILLEGAL_GENERATION))));
    assert!(!h.core.store().has_offsets("g"), "nothing of a delegated group's commits is written here");
}

#[test]
fn the_handover_gives_kcoords_offsets_once_and_then_drops_them() {
    let mut h = Harness::new();
    assert_eq!(h.commit("g", "", -1, "t", 1, 11), ErrorCode::NONE);
    assert_eq!(h.commit("g", "", -1, "t", 0, 10), ErrorCode::NONE);
    txn_commit(&mut h, commit_request("g", "", -1, None)).unwrap();
    let offsets = handover(&mut h, "g", false).unwrap().unwrap();
    let got: Vec<(i32, i64)> = offsets[0].partitions.iter().map(|p| (p.partition, p.offset)).collect();
    assert_eq!(got, [(0, 10), (1, 11)]);
    assert_eq!(handover(&mut h, "g", true), Ok(None));
    assert!(!h.core.store().has_offsets("g"));
    assert_eq!(h.core.store().delegation("g"), Some(DelegationValue { handed_over: true }));
    assert_eq!(handover(&mut h, "g", false), Ok(None), "handed over once");
    assert_eq!(h.fetch_delegated("g"), Ok(Admitted { hand_over_first: false }));
}

#[test]
fn delegation_survives_a_restart_and_replay_equals_live() {
    let mut h = Harness::new();
    let (member, generation) = stable_group(&mut h);
    assert_eq!(h.commit("g", &member, generation, "t", 0, 7), ErrorCode::NONE);
    txn_commit(&mut h, commit_request("g", &member, generation, None)).unwrap();
    assert_eq!(rebuild(&h).store(), h.core.store(), "delegated, not yet handed over");
    handover(&mut h, "g", true).unwrap();
    let fresh = rebuild(&h);
    assert_eq!(fresh.store(), h.core.store(), "handed over");
    assert_eq!(fresh.store().delegation("g"), Some(DelegationValue { handed_over: true }));
    let now = h.now;
    let snapshot = h.core.snapshot(now);
    let mut compacted = ShardCore::new(test_config(), Box::new(CountingIds::default()));
    for p in &snapshot {
        compacted.load_payload(p).unwrap();
    }
    assert_eq!(compacted.store(), h.core.store(), "a compaction snapshot keeps the delegation");
}

#[test]
fn deleting_a_delegated_group_ends_its_delegation_and_it_is_never_imported() {
    let mut h = Harness::new();
    assert_eq!(h.commit("g", "", -1, "t", 0, 10), ErrorCode::NONE);
    txn_commit(&mut h, commit_request("g", "", -1, None)).unwrap();
    handover(&mut h, "g", true).unwrap();
    // After a restart the group has nothing here but its delegation.
    let mut h2 = Harness::with_core(rebuild(&h));
    let t =
        h2.send(Request::Import(Import(OffsetCommitRequest { topics: vec![], ..commit_request("g", "", -1, None) })));
    assert!(matches!(h2.take(t), Some(Response::Import(Ok(super::core::ImportOutcome::AlreadyKnown)))));
    let t = h2.send(Request::Delete(DeleteGroup { group_id: "g".into() }));
    assert_eq!(h2.take(t), Some(Response::Delete(ErrorCode::NONE)));
    assert_eq!(h2.core.store().delegation("g"), None);
    assert_eq!(h2.fetch("g", "t", 0).offset, -1, "kcoord serves the group's offsets again");
}

#[test]
fn offset_deletes_of_a_delegated_group_are_checked_against_kcoords_members_and_go_upstream() {
    let mut h = Harness::new();
    let (member, generation) = stable_group(&mut h);
    txn_commit(&mut h, commit_request("g", &member, generation, None)).unwrap();
    let delete = |group: &str| {
        Request::OffsetDelete(OffsetDeleteRequest {
            group_id: group.into(),
            topics: vec![FetchTopic { name: "t".into(), partitions: vec![0, 1] }],
        })
    };
    // Checked as kcoord checks a group it keeps the offsets of.
    let mut twin = Harness::new();
    stable_group(&mut twin);
    let t = twin.send(delete("g"));
    let Some(Response::OffsetDelete(own)) = twin.take(t) else { panic!("not an OffsetDelete answer") };
    let t = h.send(delete("g"));
    assert_eq!(h.take(t), Some(Response::DelegatedDelete(Admitted { hand_over_first: false }, own)));
    // A member-less delegated group (after a restart kcoord may know nothing
    // else of it): every partition may go, the upstream decides.
    txn_commit(&mut h, commit_request("lone", "", -1, None)).unwrap();
    let mut h2 = Harness::with_core(rebuild(&h));
    let written = h2.sink.payloads.len();
    let t = h2.send(delete("lone"));
    let expected = OffsetDeleteResponse {
        error: ErrorCode::NONE,
        topics: vec![TopicErrors {
            name: "t".into(),
            partitions: vec![
                PartitionError { partition: 0, error: ErrorCode::NONE },
                PartitionError { partition: 1, error: ErrorCode::NONE },
            ],
        }],
    };
    assert_eq!(h2.take(t), Some(Response::DelegatedDelete(Admitted { hand_over_first: false }, expected)));
    assert_eq!(h2.sink.payloads.len(), written, "nothing of it is written here");
}

impl Harness {
    fn fetch_delegated(&mut self, group: &str) -> Result<Admitted, ErrorCode> {
        let t = self.send(Request::Fetch(FetchOffsets {
            group: OffsetFetchGroup { group_id: group.into(), member_id: None, member_epoch: -1, topics: None },
            require_stable: true,
        }));
        match self.take(t) {
            Some(Response::Delegated(r)) => r,
            other => panic!("{other:?}"),
        }
    }
}
