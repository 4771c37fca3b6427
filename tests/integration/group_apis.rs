//! Black-box tests of the group APIs over TCP: every advertised version of
//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
//! OffsetDelete, DescribeGroups, ListGroups and DeleteGroups, their field
//! layouts and error answers, and what survives a restart.

use crate::common;

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use uuid::Uuid;

const TOPICS: &str = "topics.define=[\"t:4\", \"u:2\"]";

/// The shared consumer JoinGroup for topic "t" (`common::consumer`), offering
/// each of `protocols`, with a 30 s rebalance timeout and no reason.
fn join_req(group: &str, member: &str, protocols: &[&str]) -> JoinGroupRequest {
    consumer::join_request(group, member, &["t"]).with_rebalance_timeout_ms(30_000).with_reason(None).with_protocols(
        protocols
            .iter()
            .map(|p| JoinGroupRequestProtocol::default().with_name(sb(p)).with_metadata(consumer::subscription(&["t"])))
            .collect(),
    )
}

/// Joins a new single-member group at `version` and returns (member id, generation).
async fn join_alone(c: &mut Client, group: &str, version: i16) -> (String, i32) {
    let mut r = c.send(&join_req(group, "", &["range"]), version).await;
    if version >= 4 {
        assert_eq!(r.error_code, 79, "v{version}: MEMBER_ID_REQUIRED first");
        let id = r.member_id.to_string();
        r = c.send(&join_req(group, &id, &["range"]), version).await;
    }
    assert_eq!(r.error_code, 0, "v{version}");
    (r.member_id.to_string(), r.generation_id)
}

fn sync_req(group: &str, member: &str, generation: i32, assignments: &[(&str, &'static [u8])]) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id(generation)
        .with_member_id(sb(member))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default().with_member_id(sb(m)).with_assignment(Bytes::from_static(a))
                })
                .collect(),
        )
}

/// A Stable single-member group; returns (member id, generation).
async fn stable_alone(c: &mut Client, group: &str) -> (String, i32) {
    let (id, generation) = join_alone(c, group, 5).await;
    let r = c.send(&sync_req(group, &id, generation, &[(&id, b"assignment")]), 3).await;
    assert_eq!(r.error_code, 0);
    (id, generation)
}

#[tokio::test]
async fn join_group_at_every_version() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    for v in 0..=9i16 {
        let group = format!("join-v{v}");
        let mut r = c.send(&join_req(&group, "", &["range"]), v).await;
        if v >= 4 {
            assert_eq!(r.error_code, 79, "v{v}: MEMBER_ID_REQUIRED");
            assert!(r.member_id.starts_with("kcoord-test-"), "v{v}: id = client id + uuid: {}", r.member_id);
            assert_eq!(r.generation_id, -1);
            let id = r.member_id.to_string();
            r = c.send(&join_req(&group, &id, &["range"]), v).await;
        }
        assert_eq!(r.error_code, 0, "v{v}");
        assert_eq!(r.generation_id, 1);
        assert_eq!(r.leader, r.member_id, "v{v}: the only member leads");
        assert_eq!(r.members.len(), 1, "v{v}: the leader gets the member list");
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
        if v >= 7 {
            assert_eq!(r.protocol_type.as_deref(), Some("consumer"), "v{v}");
        }
        assert!(!r.skip_assignment);
    }
}

#[tokio::test]
async fn join_group_errors_keep_kafkas_layout() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    for v in [1i16, 5, 6, 7, 9] {
        let r = c.send(&join_req("g", "", &["range"]).with_session_timeout_ms(1000), v).await;
        assert_eq!(r.error_code, 26, "v{v}: INVALID_SESSION_TIMEOUT");
        assert_eq!(r.generation_id, -1);
        if v >= 7 {
            assert_eq!(r.protocol_name, None, "v{v}: a missing protocol is null from v7");
        } else {
            assert_eq!(r.protocol_name.as_deref(), Some(""), "v{v}: and empty below");
        }
        let r = c.send(&join_req("", "m", &["range"]), v).await;
        assert_eq!((r.error_code, r.member_id.as_str()), (24, "m"), "v{v}: INVALID_GROUP_ID echoes the member");
        let r = c.send(&join_req("never-created", "m", &["range"]), v).await;
        assert_eq!(r.error_code, 25, "v{v}: UNKNOWN_MEMBER_ID");
    }
    stable_alone(&mut c, "p").await;
    let r = c.send(&join_req("p", "", &["RoundRobinAssigner"]), 5).await;
    assert_eq!(r.error_code, 23, "INCONSISTENT_GROUP_PROTOCOL");
}

#[tokio::test]
async fn two_members_rebalance_and_sync_at_every_sync_version() {
    let s = TestServer::start().await;
    for v in 0..=5i16 {
        let group = format!("sync-v{v}");
        let mut a = s.client().await;
        let mut b = s.client().await;
        let (a_id, _) = stable_alone(&mut a, &group).await;
        // b joins (parked) and a rejoins: one new generation for both.
        let r = b.send(&join_req(&group, "", &["range"]), 5).await;
        let b_id = r.member_id.to_string();
        let (_, b_frame) = b.frame(&join_req(&group, &b_id, &["range"]), 5);
        b.send_raw(&b_frame).await.unwrap();
        let ra = a.send(&join_req(&group, &a_id, &["range"]), 5).await;
        let rb = Client::decode::<JoinGroupRequest>(b.read_frame().await.unwrap(), 5).1;
        assert_eq!((ra.error_code, rb.error_code), (0, 0));
        assert_eq!(ra.generation_id, 2);
        assert_eq!(ra.leader.as_str(), a_id);
        assert_eq!(ra.members.len(), 2);
        assert!(rb.members.is_empty(), "followers get no member list");
        let mut follower = sync_req(&group, &b_id, 2, &[]);
        let mut leader = sync_req(&group, &a_id, 2, &[(&a_id, b"A"), (&b_id, b"B")]);
        if v >= 5 {
            for r in [&mut follower, &mut leader] {
                r.protocol_type = Some(sb("consumer"));
                r.protocol_name = Some(sb("range"));
            }
        }
        // The follower's sync waits for the leader's.
        let (_, f) = b.frame(&follower, v);
        b.send_raw(&f).await.unwrap();
        let rl = a.send(&leader, v).await;
        let rf = Client::decode::<SyncGroupRequest>(b.read_frame().await.unwrap(), v).1;
        assert_eq!((rl.error_code, rf.error_code), (0, 0), "v{v}");
        assert_eq!(&rl.assignment[..], b"A");
        assert_eq!(&rf.assignment[..], b"B");
        if v >= 5 {
            assert_eq!(rf.protocol_type.as_deref(), Some("consumer"));
            assert_eq!(rf.protocol_name.as_deref(), Some("range"));
        }
    }
}

#[tokio::test]
async fn sync_group_v5_without_protocol_fields_is_inconsistent() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    let (id, generation) = join_alone(&mut c, "g", 5).await;
    let r = c.send(&sync_req("g", &id, generation, &[]), 5).await;
    assert_eq!(r.error_code, 23);
    let r = c.send(&sync_req("g", &id, generation + 1, &[]), 3).await;
    assert_eq!(r.error_code, 22, "ILLEGAL_GENERATION");
}

#[tokio::test]
async fn heartbeat_at_every_version() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    let (id, generation) = stable_alone(&mut c, "hb").await;
    for v in 0..=4i16 {
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(sb("hb")))
            .with_generation_id(generation)
            .with_member_id(sb(&id));
        assert_eq!(c.send(&req, v).await.error_code, 0, "v{v}");
        let bad = req.clone().with_member_id(sb("stranger"));
        assert_eq!(c.send(&bad, v).await.error_code, 25, "v{v}");
        let old = req.clone().with_generation_id(generation - 1);
        assert_eq!(c.send(&old, v).await.error_code, 22, "v{v}");
    }
}

#[tokio::test]
async fn static_members_are_fenced_by_instance_id() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    let r = c.send(&join_req("st", "", &["range"]).with_group_instance_id(Some(sb("inst-1"))), 5).await;
    assert_eq!(r.error_code, 0, "static members get no MEMBER_ID_REQUIRED");
    assert!(r.member_id.starts_with("inst-1-"));
    let id = r.member_id.to_string();
    c.send(&sync_req("st", &id, 1, &[(&id, b"x")]), 3).await;
    // A second incarnation takes over; the old one is fenced.
    let r2 = c.send(&join_req("st", "", &["range"]).with_group_instance_id(Some(sb("inst-1"))), 5).await;
    assert_eq!(r2.error_code, 0);
    assert_eq!(r2.generation_id, 1, "no rebalance");
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(sb("st")))
        .with_generation_id(1)
        .with_member_id(sb(&id))
        .with_group_instance_id(Some(sb("inst-1")));
    assert_eq!(c.send(&hb, 3).await.error_code, 82, "FENCED_INSTANCE_ID");
}

#[tokio::test]
async fn leave_group_v0_to_v2_single_member_and_v3_plus_batch() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    for v in 0..=2i16 {
        let group = format!("leave-v{v}");
        let (id, _) = stable_alone(&mut c, &group).await;
        let r = c
            .send(&LeaveGroupRequest::default().with_group_id(GroupId(sb(&group))).with_member_id(sb("nobody")), v)
            .await;
        assert_eq!(r.error_code, 25, "v{v}: the member's error at top level");
        let r =
            c.send(&LeaveGroupRequest::default().with_group_id(GroupId(sb(&group))).with_member_id(sb(&id)), v).await;
        assert_eq!(r.error_code, 0, "v{v}");
        let r = c
            .send(&LeaveGroupRequest::default().with_group_id(GroupId(sb("no-such-group"))).with_member_id(sb(&id)), v)
            .await;
        assert_eq!(r.error_code, 25, "v{v}: unknown group");
    }
    for v in 3..=5i16 {
        let group = format!("leave-v{v}");
        let (id, _) = stable_alone(&mut c, &group).await;
        let req = LeaveGroupRequest::default().with_group_id(GroupId(sb(&group))).with_members(vec![
            MemberIdentity::default().with_member_id(sb(&id)),
            MemberIdentity::default().with_member_id(sb("nobody")),
        ]);
        let r = c.send(&req, v).await;
        assert_eq!(r.error_code, 0, "v{v}");
        let errors: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
        assert_eq!(errors, vec![0, 25], "v{v}");
        let req = req.with_group_id(GroupId(sb("no-such-group")));
        let r = c.send(&req, v).await;
        assert_eq!(r.error_code, 0);
        assert!(r.members.iter().all(|m| m.error_code == 25), "v{v}: unknown group answers per member");
    }
}

fn commit_req(
    group: &str,
    member: &str,
    generation: i32,
    topic: &str,
    partitions: &[(i32, i64, &str)],
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(sb(member))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb(topic))).with_partitions(
            partitions
                .iter()
                .map(|(p, o, m)| {
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(*p)
                        .with_committed_offset(*o)
                        .with_committed_metadata(Some(sb(m)))
                })
                .collect(),
        )])
}

fn fetch_req(group: &str, topic: &str, partitions: &[i32], version: i16) -> OffsetFetchRequest {
    if version >= 8 {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(sb(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(TopicName(sb(topic)))
                .with_partition_indexes(partitions.to_vec())]))])
    } else {
        OffsetFetchRequest::default().with_group_id(GroupId(sb(group))).with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(sb(topic)))
                .with_partition_indexes(partitions.to_vec()),
        ]))
    }
}

/// (partition, offset, leader epoch, metadata, error) from any OffsetFetch version.
fn fetched(r: &OffsetFetchResponse, version: i16) -> Vec<(i32, i64, i32, String, i16)> {
    if version >= 8 {
        r.groups[0]
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| {
                (
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata.as_deref().unwrap_or("").to_string(),
                    p.error_code,
                )
            })
            .collect()
    } else {
        r.topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| {
                (
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata.as_deref().unwrap_or("").to_string(),
                    p.error_code,
                )
            })
            .collect()
    }
}

#[tokio::test]
async fn offset_commit_and_fetch_round_trip_at_every_version() {
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    for v in 2..=9i16 {
        let group = format!("commit-v{v}");
        let mut req = commit_req(&group, "", -1, "t", &[(0, 100 + v as i64, "meta"), (3, 7, "")]);
        if v >= 6 {
            req.topics[0].partitions[0].committed_leader_epoch = 4;
        }
        let r = c.send(&req, v).await;
        let errors: Vec<i16> = r.topics[0].partitions.iter().map(|p| p.error_code).collect();
        assert_eq!(errors, vec![0, 0], "v{v}");
        for fv in [1i16, 2, 5, 7, 8, 9] {
            let f = c.send(&fetch_req(&group, "t", &[0, 1, 3], fv), fv).await;
            let got = fetched(&f, fv);
            let epoch = if fv >= 5 && v >= 6 { 4 } else { -1 };
            assert_eq!(got[0], (0, 100 + v as i64, epoch, "meta".to_string(), 0), "commit v{v} fetch v{fv}");
            assert_eq!(got[1], (1, -1, -1, String::new(), 0), "no commit: -1");
            assert_eq!(got[2].1, 7);
        }
    }
}

#[tokio::test]
async fn offset_fetch_for_all_topics_and_several_groups() {
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    c.send(&commit_req("a", "", -1, "t", &[(1, 11, "")]), 8).await;
    c.send(&commit_req("a", "", -1, "u", &[(0, 12, "")]), 8).await;
    c.send(&commit_req("b", "", -1, "u", &[(1, 21, "")]), 8).await;
    // Topics = null: every committed offset of the group (v2+).
    let r = c.send(&OffsetFetchRequest::default().with_group_id(GroupId(sb("a"))).with_topics(None), 7).await;
    let names: Vec<String> = r.topics.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, vec!["t", "u"]);
    // v8: two groups in one request, including an unknown one.
    let req = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default().with_group_id(GroupId(sb("a"))).with_topics(None),
        OffsetFetchRequestGroup::default().with_group_id(GroupId(sb("b"))).with_topics(None),
        OffsetFetchRequestGroup::default().with_group_id(GroupId(sb("nope"))).with_topics(Some(vec![
            OffsetFetchRequestTopics::default().with_name(TopicName(sb("t"))).with_partition_indexes(vec![0]),
        ])),
    ]);
    let r = c.send(&req, 8).await;
    assert_eq!(r.groups.len(), 3);
    assert_eq!(r.groups[0].topics.len(), 2);
    assert_eq!(r.groups[1].topics[0].partitions[0].committed_offset, 21);
    let unknown = &r.groups[2];
    assert_eq!((unknown.error_code, unknown.topics[0].partitions[0].committed_offset), (0, -1));
}

/// (topic, [(partition, error)]) of a commit answer, in the answer's order.
fn in_answer_order(r: &OffsetCommitResponse) -> Vec<(String, Vec<(i32, i16)>)> {
    r.topics
        .iter()
        .map(|t| (t.name.to_string(), t.partitions.iter().map(|p| (p.partition_index, p.error_code)).collect()))
        .collect()
}

#[tokio::test]
async fn a_topic_named_without_partitions_is_left_out_if_known_and_listed_empty_if_unknown_as_kafka() {
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    let mut req = commit_req("g", "", -1, "t", &[(0, 1, "")]);
    for name in ["u", "missing"] {
        req.topics.push(OffsetCommitRequestTopic::default().with_name(TopicName(sb(name))));
    }
    let r = c.send(&req, 8).await;
    let answer = in_answer_order(&r);
    // Kafka's KafkaApis lists an unknown topic (addPartitions of none) and
    // sends a known one on only with partitions to commit.
    assert_eq!(answer, vec![("missing".into(), vec![]), ("t".into(), vec![(0, 0)])]);
    // Every topic known: the same, without an unknown one to list.
    req.topics.pop();
    let r = c.send(&req, 8).await;
    let names: Vec<&str> = r.topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["t"]);
}

#[tokio::test]
async fn offset_commit_rejects_unknown_topics_and_oversized_metadata_per_partition() {
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    let big = "m".repeat(4097);
    let mut req = commit_req("g", "", -1, "t", &[(0, 1, ""), (9, 1, ""), (1, 1, &big)]);
    req.topics.push(OffsetCommitRequestTopic::default().with_name(TopicName(sb("missing"))).with_partitions(vec![
        OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(5),
    ]));
    let r = c.send(&req, 8).await;
    let errors = in_answer_order(&r);
    // As Kafka's KafkaApis answers: the unknown partitions first, in request
    // order, the coordinator's answers joining their topic after them.
    assert_eq!(errors, vec![("t".into(), vec![(9, 3), (0, 0), (1, 12)]), ("missing".into(), vec![(0, 3)])]);
    // Only unknown partitions: answered without the coordinator.
    let r = c.send(&commit_req("g", "", -1, "missing", &[(0, 1, "")]), 8).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 3);
}

#[tokio::test]
async fn offset_commit_to_an_unknown_group_with_a_generation() {
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    let r = c.send(&commit_req("nope", "m", 1, "t", &[(0, 1, "")]), 8).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 22, "ILLEGAL_GENERATION below v9");
    let r = c.send(&commit_req("nope", "m", 1, "t", &[(0, 1, "")]), 9).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 69, "GROUP_ID_NOT_FOUND from v9");
}

#[tokio::test]
async fn offset_commit_is_validated_against_the_group_state_and_member() {
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    let code = |r: &OffsetCommitResponse| r.topics[0].partitions[0].error_code;

    // CompletingRebalance: a v3 join completes at once and waits for SyncGroup.
    let (id, generation) = join_alone(&mut c, "completing", 3).await;
    let r = c.send(&commit_req("completing", &id, generation, "t", &[(0, 1, "")]), 8).await;
    assert_eq!(code(&r), 27, "REBALANCE_IN_PROGRESS before the assignment is synced");

    let (id, generation) = stable_alone(&mut c, "stable").await;
    let r = c.send(&commit_req("stable", &id, generation + 1, "t", &[(0, 1, "")]), 8).await;
    assert_eq!(code(&r), 22, "ILLEGAL_GENERATION for another generation");
    let r = c.send(&commit_req("stable", "stranger", generation, "t", &[(0, 1, "")]), 8).await;
    assert_eq!(code(&r), 25, "UNKNOWN_MEMBER_ID for a member not in the group");
    let r = c.send(&commit_req("stable", "", -1, "t", &[(0, 1, "")]), 8).await;
    assert_eq!(code(&r), 25, "no generation-less commits to a group with members");
    let r = c.send(&commit_req("stable", &id, generation, "t", &[(0, 7, "")]), 8).await;
    assert_eq!(code(&r), 0);

    // A static member: the instance id with another member id is fenced.
    let mut join = join_req("static", "", &["range"]).with_group_instance_id(Some(sb("inst")));
    let r = c.send(&join, 5).await;
    assert_eq!(r.error_code, 0);
    join.member_id = r.member_id.clone();
    let r = c.send(&sync_req("static", &join.member_id, r.generation_id, &[(&join.member_id, b"a")]), 3).await;
    assert_eq!(r.error_code, 0);
    let fenced = commit_req("static", "not-the-member", 1, "t", &[(0, 1, "")]).with_group_instance_id(Some(sb("inst")));
    let r = c.send(&fenced, 8).await;
    assert_eq!(code(&r), 82, "FENCED_INSTANCE_ID");
}

#[tokio::test]
async fn offset_delete_follows_group_state() {
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    let del = |g: &str, topic: &str| {
        OffsetDeleteRequest::default().with_group_id(GroupId(sb(g))).with_topics(vec![
            OffsetDeleteRequestTopic::default()
                .with_name(TopicName(sb(topic)))
                .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(0)]),
        ])
    };
    assert_eq!(c.send(&del("nope", "t"), 0).await.error_code, 69);
    c.send(&commit_req("simple", "", -1, "t", &[(0, 5, "")]), 8).await;
    let r = c.send(&del("simple", "t"), 0).await;
    assert_eq!((r.error_code, r.topics[0].partitions[0].error_code), (0, 0));
    let f = c.send(&fetch_req("simple", "t", &[0], 8), 8).await;
    assert_eq!(fetched(&f, 8)[0].1, -1);
    let r = c.send(&del("simple", "missing"), 0).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 3, "unknown topic");
}

#[tokio::test]
async fn describe_list_and_delete_groups_at_every_version() {
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    let (id, _) = stable_alone(&mut c, "active").await;
    c.send(&commit_req("idle", "", -1, "t", &[(0, 1, "")]), 8).await;
    for v in 0..=6i16 {
        let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(sb("active")), GroupId(sb("nope"))]);
        let r = c.send(&req, v).await;
        let g = &r.groups[0];
        assert_eq!(
            (g.error_code, g.group_state.as_str(), g.protocol_type.as_str(), g.protocol_data.as_str()),
            (0, "Stable", "consumer", "range"),
            "v{v}"
        );
        assert_eq!(g.members.len(), 1);
        let m = &g.members[0];
        assert_eq!(m.member_id.as_str(), id);
        assert_eq!(m.client_id.as_str(), "kcoord-test");
        assert_eq!(m.client_host.as_str(), "/127.0.0.1");
        assert_eq!(&m.member_assignment[..], b"assignment");
        assert!(!m.member_metadata.is_empty());
        if v >= 3 {
            assert_eq!(g.authorized_operations, i32::MIN, "v{v}: not requested");
        }
        let unknown = &r.groups[1];
        if v >= 6 {
            assert_eq!(unknown.error_code, 69, "v{v}");
            assert!(unknown.error_message.is_some());
        } else {
            assert_eq!((unknown.error_code, unknown.group_state.as_str()), (0, "Dead"), "v{v}");
        }
    }
    for v in 0..=5i16 {
        let r = c.send(&ListGroupsRequest::default(), v).await;
        let mut names: Vec<String> = r.groups.iter().map(|g| g.group_id.to_string()).collect();
        names.sort();
        assert_eq!(names, vec!["active", "idle"], "v{v}: groups without commits are listed too");
        if v >= 4 {
            let r = c.send(&ListGroupsRequest::default().with_states_filter(vec![sb("Stable")]), v).await;
            let names: Vec<String> = r.groups.iter().map(|g| g.group_id.to_string()).collect();
            assert_eq!(names, vec!["active"], "v{v}: states filter");
            assert_eq!(r.groups[0].group_state.as_str(), "Stable");
        }
        if v >= 5 {
            let r = c.send(&ListGroupsRequest::default().with_types_filter(vec![sb("consumer")]), v).await;
            assert!(r.groups.is_empty(), "v{v}: types filter");
            let r = c.send(&ListGroupsRequest::default().with_types_filter(vec![sb("Classic")]), v).await;
            assert_eq!(r.groups.len(), 2);
            assert!(r.groups.iter().all(|g| g.group_type.as_str() == "classic"));
        }
    }
    for v in 0..=2i16 {
        let req = DeleteGroupsRequest::default().with_groups_names(vec![
            GroupId(sb("active")),
            GroupId(sb("nope")),
            GroupId(sb("nope")),
        ]);
        let r = c.send(&req, v).await;
        let results: Vec<(String, i16)> = r.results.iter().map(|x| (x.group_id.to_string(), x.error_code)).collect();
        assert_eq!(results, vec![("active".to_string(), 68), ("nope".to_string(), 69)], "v{v}");
    }
    let r = c.send(&DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb("idle"))]), 2).await;
    assert_eq!(r.results[0].error_code, 0);
    let f = c.send(&fetch_req("idle", "t", &[0], 8), 8).await;
    assert_eq!(fetched(&f, 8)[0].1, -1, "a deleted group's offsets are gone");
}

#[tokio::test]
async fn commits_groups_and_deletions_survive_a_restart() {
    let mut s = TestServer::start_with(&[TOPICS, "storage.fsync=\"always\""]).await;
    let (id, generation) = {
        let mut c = s.client().await;
        let (id, generation) = stable_alone(&mut c, "keep").await;
        let r = c.send(&commit_req("keep", &id, generation, "t", &[(2, 42, "meta-42")]), 8).await;
        assert_eq!(r.topics[0].partitions[0].error_code, 0);
        c.send(&commit_req("gone", "", -1, "t", &[(0, 1, "")]), 8).await;
        let r = c.send(&DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb("gone"))]), 2).await;
        assert_eq!(r.results[0].error_code, 0);
        (id, generation)
    };
    s.restart().await;
    let mut c = s.client().await;
    let f = c.send(&fetch_req("keep", "t", &[2], 8), 8).await;
    assert_eq!(fetched(&f, 8)[0], (2, 42, -1, "meta-42".to_string(), 0));
    // The group comes back Stable with its member and assignment...
    let d =
        c.send(&DescribeGroupsRequest::default().with_groups(vec![GroupId(sb("keep")), GroupId(sb("gone"))]), 5).await;
    assert_eq!(d.groups[0].group_state.as_str(), "Stable");
    assert_eq!(d.groups[0].members[0].member_id.as_str(), id);
    assert_eq!(&d.groups[0].members[0].member_assignment[..], b"assignment");
    assert_eq!(d.groups[1].group_state.as_str(), "Dead", "the deleted group stays deleted");
    // ...its member can keep heartbeating with the same generation...
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(sb("keep")))
        .with_generation_id(generation)
        .with_member_id(sb(&id));
    assert_eq!(c.send(&hb, 3).await.error_code, 0);
    // ...and a member that never returns expires after its session timeout (10 s).
    let state = eventually("the silent member to expire", || {
        let addr = s.addr;
        async move {
            let mut c = Client::connect(addr).await;
            let d = c.send(&DescribeGroupsRequest::default().with_groups(vec![GroupId(sb("keep"))]), 5).await;
            let st = d.groups[0].group_state.to_string();
            (st == "Empty").then_some(st)
        }
    })
    .await;
    assert_eq!(state, "Empty");
}

#[tokio::test]
async fn pipelined_heartbeats_and_a_parked_join_answer_in_order() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    let (id, generation) = stable_alone(&mut c, "pipe").await;
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(sb("pipe")))
        .with_generation_id(generation)
        .with_member_id(sb(&id));
    let mut bytes = Vec::new();
    let mut corrs = Vec::new();
    for _ in 0..50 {
        let (corr, f) = c.frame(&hb, 3);
        corrs.push(corr);
        bytes.extend_from_slice(&f);
    }
    c.send_raw(&bytes).await.unwrap();
    for corr in corrs {
        let (got, r) = Client::decode::<HeartbeatRequest>(c.read_frame().await.unwrap(), 3);
        assert_eq!((got, r.error_code), (corr, 0));
    }
}

#[tokio::test]
async fn a_commit_of_no_partitions_is_answered_without_creating_a_group() {
    // Kafka answers an OffsetCommit with nothing left to commit before it
    // reaches the coordinator: no group appears, nothing is validated.
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    let no_topics = commit_req("ghost", "someone", 7, "t", &[]).with_topics(vec![]);
    let r = c.send(&no_topics, 8).await;
    assert!(r.topics.is_empty());
    let r = c.send(&commit_req("ghost", "someone", 7, "t", &[]), 8).await;
    assert!(r.topics.iter().all(|t| t.partitions.is_empty()));
    let listed = c.send(&ListGroupsRequest::default(), 4).await;
    assert!(listed.groups.iter().all(|g| g.group_id.as_str() != "ghost"), "{listed:?}");
}

#[tokio::test]
async fn a_pending_member_rejoining_with_an_instance_id_is_refused_and_stays_pending() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    let r = c.send(&join_req("pend", "", &["range"]), 5).await;
    assert_eq!(r.error_code, 79, "MEMBER_ID_REQUIRED");
    let pending = r.member_id.to_string();
    let r = c.send(&join_req("pend", &pending, &["range"]).with_group_instance_id(Some(sb("static-1"))), 5).await;
    assert_eq!(
        (r.error_code, r.member_id.as_str()),
        (-1, ""),
        "UNKNOWN_SERVER_ERROR, as Kafka's IllegalStateException"
    );
    // Nothing changed: the member can still join as the dynamic member it was.
    let r = c.send(&join_req("pend", &pending, &["range"]), 5).await;
    assert_eq!((r.error_code, r.member_id.as_str()), (0, pending.as_str()));
}

#[tokio::test]
async fn an_empty_protocol_name_is_answered_as_null_from_join_group_v7() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    for (v, group) in [(6i16, "below-7"), (7, "from-7")] {
        let r = c.send(&join_req(group, "", &[""]), v).await;
        let r = c.send(&join_req(group, r.member_id.as_str(), &[""]), v).await;
        assert_eq!(r.error_code, 0, "v{v}");
        let want = if v >= 7 { None } else { Some("") };
        assert_eq!(r.protocol_name.as_deref(), want, "v{v}");
    }
}

#[tokio::test]
async fn offset_commit_and_fetch_v10_name_topics_by_id() {
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    let ids = topic_ids::ids_of(&mut c, &["t", "u"]).await;
    let (t, u) = (ids[0], ids[1]);
    let answer = topic_ids::commit(&mut c, "by-id", &[(t, vec![(0, 10), (3, 13)]), (u, vec![(1, 21)])]).await;
    assert_eq!(answer, vec![(t, vec![(0, 0), (3, 0)]), (u, vec![(1, 0)])]);

    // By id at v10 and by name at v9, the same offsets.
    let got = topic_ids::fetch(&mut c, "by-id", Some(&[(u, vec![1, 0])])).await;
    let offsets: Vec<(i32, i64, &str, i16)> =
        got.topics[0].1.iter().map(|p| (p.partition, p.offset, p.metadata.as_str(), p.error)).collect();
    assert_eq!((got.error, got.topics[0].0), (0, u));
    assert_eq!(offsets, vec![(1, 21, "by-id", 0), (0, -1, "", 0)]);
    let by_name = fetched(&c.send(&fetch_req("by-id", "t", &[0, 3], 9), 9).await, 9);
    assert_eq!((by_name[0].1, by_name[1].1), (10, 13));

    // Every topic of the group, each by its id.
    let all = topic_ids::fetch(&mut c, "by-id", None).await;
    let mut listed: Vec<(Uuid, Vec<(i32, i64)>)> =
        all.topics.iter().map(|(id, ps)| (*id, ps.iter().map(|p| (p.partition, p.offset)).collect())).collect();
    listed.sort();
    let mut expected = vec![(t, vec![(0, 10), (3, 13)]), (u, vec![(1, 21)])];
    expected.sort();
    assert_eq!(listed, expected);
}

#[tokio::test]
async fn unknown_and_nil_topic_ids_are_answered_unknown_topic_id_beside_the_known_ones() {
    const UNKNOWN_TOPIC_ID: i16 = 100;
    let s = TestServer::start_with(&[TOPICS]).await;
    let mut c = s.client().await;
    let t = topic_ids::ids_of(&mut c, &["t"]).await[0];
    let stranger = Uuid::new_v4();
    let answer = topic_ids::commit(
        &mut c,
        "mixed",
        &[(stranger, vec![(0, 1)]), (t, vec![(0, 5), (9, 5)]), (Uuid::nil(), vec![(2, 1), (3, 1)])],
    )
    .await;
    // What never reached the coordinator first, in request order, then its
    // answer joining its topic, as Kafka's KafkaApis answers.
    assert_eq!(
        answer,
        vec![
            (stranger, vec![(0, UNKNOWN_TOPIC_ID)]),
            (t, vec![(9, 3), (0, 0)]),
            (Uuid::nil(), vec![(2, UNKNOWN_TOPIC_ID), (3, UNKNOWN_TOPIC_ID)]),
        ]
    );
    // Only unknown ids: nothing reaches the coordinator, no group is created.
    let answer = topic_ids::commit(&mut c, "never-made", &[(stranger, vec![(0, 1)])]).await;
    assert_eq!(answer, vec![(stranger, vec![(0, UNKNOWN_TOPIC_ID)])]);
    let listed = c.send(&ListGroupsRequest::default(), 4).await;
    assert!(listed.groups.iter().all(|g| g.group_id.as_str() != "never-made"));

    let got = topic_ids::fetch(&mut c, "mixed", Some(&[(stranger, vec![0]), (t, vec![0])])).await;
    let unknown = topic_ids::Fetched { partition: 0, offset: -1, metadata: String::new(), error: UNKNOWN_TOPIC_ID };
    assert_eq!(got.topics[0].0, t);
    assert_eq!((got.topics[0].1[0].offset, got.topics[0].1[0].error), (5, 0));
    assert_eq!(got.topics[1], (stranger, vec![unknown]));
}
