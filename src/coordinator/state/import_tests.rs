//! The sidecar's import (`Request::Import`): the upstream's offsets are
//! written only for a group this shard has never seen.

use super::core::{DeleteGroup, Import, ImportOutcome, Request, Response};
use super::messages::*;
use super::testkit::Harness;
use crate::error_code::ErrorCode;

/// The upstream's copy of `group`'s offsets on topic "t", offered for import.
pub(super) fn import(h: &mut Harness, group: &str, offsets: &[(i32, i64)]) -> Result<ImportOutcome, ErrorCode> {
    let topics = if offsets.is_empty() {
        vec![]
    } else {
        vec![CommitTopic {
            name: "t".into(),
            partitions: offsets
                .iter()
                .map(|&(partition, offset)| CommitPartition {
                    partition,
                    offset,
                    leader_epoch: 3,
                    metadata: Some("upstream".into()),
                })
                .collect(),
        }]
    };
    let t = h.send(Request::Import(Import(OffsetCommitRequest {
        version: 8,
        group_id: group.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics,
    })));
    match h.take(t) {
        Some(Response::Import(r)) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_new_group_gets_the_upstreams_offsets_with_epoch_and_metadata() {
    let mut h = Harness::new();
    assert_eq!(import(&mut h, "g", &[]), Ok(ImportOutcome::Imported(0)), "asking writes nothing");
    assert_eq!(import(&mut h, "g", &[(0, 10), (1, 20)]), Ok(ImportOutcome::Imported(2)));
    let p = h.fetch("g", "t", 1);
    assert_eq!((p.offset, p.leader_epoch, p.metadata.as_str()), (20, 3, "upstream"));
    // The import is an ordinary durable record: a restart replays it.
    assert_eq!(h.log().len(), 2);
}

#[test]
fn a_group_with_offsets_here_is_never_overwritten_by_an_import() {
    let mut h = Harness::new();
    assert_eq!(h.commit("g", "", -1, "t", 0, 5), ErrorCode::NONE);
    assert_eq!(import(&mut h, "g", &[(0, 99)]), Ok(ImportOutcome::AlreadyKnown));
    assert_eq!(h.fetch("g", "t", 0).offset, 5);
}

#[test]
fn a_group_that_only_joined_here_is_not_imported() {
    let mut h = Harness::new();
    let (token, _member) = h.join_dynamic("g", "c", &["range"]);
    let _ = h.take(token);
    assert_eq!(import(&mut h, "g", &[(0, 99)]), Ok(ImportOutcome::AlreadyKnown));
    assert_eq!(h.fetch("g", "t", 0).offset, -1);
}

#[test]
fn a_group_deleted_here_is_not_brought_back_by_an_import() {
    let mut h = Harness::new();
    assert_eq!(h.commit("g", "", -1, "t", 0, 5), ErrorCode::NONE);
    let t = h.send(Request::Delete(DeleteGroup { group_id: "g".into() }));
    assert_eq!(h.take(t), Some(Response::Delete(ErrorCode::NONE)));
    assert_eq!(import(&mut h, "g", &[(0, 5)]), Ok(ImportOutcome::AlreadyKnown));
    assert_eq!(h.fetch("g", "t", 0).offset, -1);
}
