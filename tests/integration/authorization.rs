//! ACLs as a Kafka client meets them: SASL users alice and bob, a super
//! user admin, and the error codes and filtered answers Kafka's
//! StandardAuthorizer gives them. The ACL file is written with the same
//! code `kcoord acls` runs, and changed while the daemon runs.

use crate::common;
use crate::support;

use std::path::PathBuf;

use bytes::Bytes;
use common::{eventually, sb, Client, TestServer};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use kafka_protocol::messages::*;
use kcoord::admin::acls::{self, AclArgs};
use kcoord::security::credentials::Credentials;
use kcoord::security::scram::ScramMechanism;

const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// A v4+ JoinGroup that passed authorization: the coordinator asks for a
/// member id.
const MEMBER_ID_REQUIRED: i16 = 79;
const TOPICS: &str = "topics.define=[\"public:2\", \"secret:2\"]";

struct Setup {
    server: TestServer,
    acl_file: PathBuf,
    _dir: tempfile::TempDir,
}

/// A daemon with a SASL_PLAINTEXT listener, users alice, bob and admin
/// (a super user), the authorizer on, and the ACLs `add` writes.
async fn start(acls: Vec<AclArgs>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.json");
    let mut c = Credentials::default();
    for u in ["alice", "bob", "admin"] {
        c.set_password(u, &format!("{u}-secret"), &ScramMechanism::ALL, 4096);
    }
    c.save(&users).unwrap();
    let acl_file = dir.path().join("acls.json");
    for a in acls {
        acls::add(&AclArgs { file: acl_file.clone(), ..a }).unwrap();
    }
    let settings = [
        "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]".to_string(),
        format!("security.credentials_file=\"{}\"", users.display()),
        "security.sasl_enabled_mechanisms=[\"PLAIN\"]".to_string(),
        "authorizer.enabled=true".to_string(),
        "authorizer.super_users=\"User:admin\"".to_string(),
        format!("authorizer.acl_file=\"{}\"", acl_file.display()),
        TOPICS.to_string(),
    ];
    let refs: Vec<&str> = settings.iter().map(String::as_str).collect();
    Setup { server: TestServer::start_with(&refs).await, acl_file, _dir: dir }
}

/// `kcoord acls add --allow-principal User:<user> --operation <op> --<kind> <name>`.
fn allow(user: &str, op: &str, kind: &str, name: &str) -> AclArgs {
    let mut a =
        AclArgs { allow_principals: vec![format!("User:{user}")], operations: vec![op.into()], ..Default::default() };
    match kind {
        "group" => a.groups = vec![name.into()],
        "prefixed-group" => {
            a.groups = vec![name.into()];
            a.resource_pattern_type = Some("prefixed".into());
        }
        "topic" => a.topics = vec![name.into()],
        _ => a.cluster = true,
    }
    a
}

/// The ACLs of most tests: alice may use group g and read topic public;
/// bob may use groups starting "bobs-" and read topic public.
fn usual_acls() -> Vec<AclArgs> {
    vec![
        allow("alice", "Read", "group", "g"),
        allow("alice", "Read", "topic", "public"),
        allow("alice", "Read", "topic", "secret"),
        allow("bob", "Read", "prefixed-group", "bobs-"),
        allow("bob", "Read", "topic", "public"),
    ]
}

async fn login(addr: std::net::SocketAddr, user: &str) -> Client {
    let mut c = Client::connect(addr).await;
    let h = c.send(&SaslHandshakeRequest::default().with_mechanism(sb("PLAIN")), 1).await;
    assert_eq!(h.error_code, 0);
    let token = format!("\0{user}\0{user}-secret");
    let r = c.send(&SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)), 2).await;
    assert_eq!(r.error_code, 0, "{user} logs in");
    c
}

fn join_req(group: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(sb(""))
        .with_protocol_type(sb("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(sb("range"))
            .with_metadata(Bytes::from_static(b"\x00\x00\x00\x00\x00\x01\x00\x06public"))])
}

fn commit_req(group: &str, topics: &[&str]) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(sb(""))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    OffsetCommitRequestTopic::default().with_name(TopicName(sb(t))).with_partitions(vec![
                        OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(7),
                    ])
                })
                .collect(),
        )
}

/// (topic, partition error) of a commit answer, sorted.
fn commit_errors(r: &OffsetCommitResponse) -> Vec<(String, i16)> {
    let mut v: Vec<(String, i16)> =
        r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (t.name.to_string(), p.error_code))).collect();
    v.sort();
    v
}

fn listed_groups(r: &ListGroupsResponse) -> Vec<String> {
    let mut v: Vec<String> = r.groups.iter().map(|g| g.group_id.to_string()).collect();
    v.sort();
    v
}

fn metadata_topics(r: &MetadataResponse) -> Vec<(String, i16)> {
    let mut v: Vec<(String, i16)> =
        r.topics.iter().map(|t| (t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(), t.error_code)).collect();
    v.sort();
    v
}

#[tokio::test]
async fn a_user_without_a_group_acl_gets_group_authorization_failed_and_one_with_it_joins() {
    let s = start(usual_acls()).await;
    let mut bob = login(s.server.addr, "bob").await;
    let r = bob.send(&join_req("g"), 5).await;
    assert_eq!(r.error_code, GROUP_AUTHORIZATION_FAILED);
    assert_eq!((r.generation_id, r.member_id.as_str()), (-1, ""));
    let r = bob.send(&FindCoordinatorRequest::default().with_coordinator_keys(vec![sb("g")]), 4).await;
    assert_eq!(r.coordinators[0].error_code, GROUP_AUTHORIZATION_FAILED);
    assert_eq!(r.coordinators[0].node_id.0, -1);

    let mut alice = login(s.server.addr, "alice").await;
    let r = alice.send(&join_req("g"), 5).await;
    assert_eq!(r.error_code, MEMBER_ID_REQUIRED, "alice's join reaches the group");
    let r = alice.send(&FindCoordinatorRequest::default().with_key(sb("g")), 2).await;
    assert_eq!(r.error_code, 0);
    // bob's prefixed ACL covers any group starting "bobs-".
    let r = bob.send(&join_req("bobs-1"), 5).await;
    assert_eq!(r.error_code, MEMBER_ID_REQUIRED);
    s.server.shutdown().await;
}

#[tokio::test]
async fn a_commit_to_a_topic_the_user_may_not_read_fails_for_that_topic_only() {
    let s = start(usual_acls()).await;
    let mut bob = login(s.server.addr, "bob").await;
    let r = bob.send(&commit_req("bobs-1", &["public", "secret"]), 8).await;
    assert_eq!(commit_errors(&r), vec![("public".into(), 0), ("secret".into(), TOPIC_AUTHORIZATION_FAILED)]);
    let r = bob.send(&commit_req("bobs-1", &["secret"]), 8).await;
    assert_eq!(commit_errors(&r), vec![("secret".into(), TOPIC_AUTHORIZATION_FAILED)]);
    let r = bob.send(&commit_req("g", &["public"]), 8).await;
    assert_eq!(commit_errors(&r), vec![("public".into(), GROUP_AUTHORIZATION_FAILED)]);

    // Fetching: a listed topic he may not describe is answered
    // TOPIC_AUTHORIZATION_FAILED; a group he may not describe,
    // GROUP_AUTHORIZATION_FAILED; every group in request order (v8).
    let group = |g: &str, topics: Option<&[&str]>| {
        OffsetFetchRequestGroup::default().with_group_id(GroupId(sb(g))).with_topics(topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    OffsetFetchRequestTopics::default().with_name(TopicName(sb(t))).with_partition_indexes(vec![0])
                })
                .collect()
        }))
    };
    let req = OffsetFetchRequest::default().with_groups(vec![
        group("g", None),
        group("bobs-1", Some(&["public", "secret"])),
        group("bobs-1", None),
    ]);
    let r = bob.send(&req, 8).await;
    // (group, error, [(topic, offset, error)])
    type GroupAnswer = (String, i16, Vec<(String, i64, i16)>);
    let answers: Vec<GroupAnswer> = r
        .groups
        .iter()
        .map(|g| {
            let mut topics: Vec<(String, i64, i16)> = g
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (t.name.to_string(), p.committed_offset, p.error_code)))
                .collect();
            topics.sort();
            (g.group_id.to_string(), g.error_code, topics)
        })
        .collect();
    assert_eq!(
        answers,
        vec![
            ("g".into(), GROUP_AUTHORIZATION_FAILED, vec![]),
            ("bobs-1".into(), 0, vec![("public".into(), 7, 0), ("secret".into(), -1, TOPIC_AUTHORIZATION_FAILED)]),
            ("bobs-1".into(), 0, vec![("public".into(), 7, 0)]),
        ]
    );
    s.server.shutdown().await;
}

/// (topic, [(partition, error)]) of an answer, in the answer's order.
fn in_answer_order<'a>(topics: impl Iterator<Item = (&'a str, Vec<(i32, i16)>)>) -> Vec<(String, Vec<(i32, i16)>)> {
    topics.map(|(t, ps)| (t.to_string(), ps)).collect()
}

#[tokio::test]
async fn commits_and_offset_deletes_answer_refused_and_unknown_partitions_first_in_request_order_as_kafka() {
    const GROUP_ID_NOT_FOUND: i16 = 69;
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    let mut acls = usual_acls();
    acls.push(allow("bob", "Delete", "prefixed-group", "bobs-"));
    let s = start(acls).await;
    let mut bob = login(s.server.addr, "bob").await;
    let mut commit = commit_req("bobs-3", &["public", "secret"]);
    commit.topics[0].partitions.push(OffsetCommitRequestPartition::default().with_partition_index(9));
    let r = bob.send(&commit, 8).await;
    let answer = in_answer_order(
        r.topics
            .iter()
            .map(|t| (t.name.as_str(), t.partitions.iter().map(|p| (p.partition_index, p.error_code)).collect())),
    );
    // Kafka's KafkaApis answers what its coordinator never sees in request
    // order, then adds the coordinator's answer to the topic it belongs to.
    assert_eq!(
        answer,
        vec![
            ("public".into(), vec![(9, UNKNOWN_TOPIC_OR_PARTITION), (0, 0)]),
            ("secret".into(), vec![(0, TOPIC_AUTHORIZATION_FAILED)]),
        ]
    );

    let delete = |group: &str, topics: &[(&str, &[i32])]| {
        OffsetDeleteRequest::default().with_group_id(GroupId(sb(group))).with_topics(
            topics
                .iter()
                .map(|(t, ps)| {
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(sb(t)))
                        .with_partitions(
                            ps.iter()
                                .map(|&p| {
                                    offset_delete_request::OffsetDeleteRequestPartition::default()
                                        .with_partition_index(p)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
    };
    let deleted = |r: &OffsetDeleteResponse| {
        in_answer_order(
            r.topics
                .iter()
                .map(|t| (t.name.as_str(), t.partitions.iter().map(|p| (p.partition_index, p.error_code)).collect())),
        )
    };
    let r = bob.send(&delete("bobs-3", &[("secret", &[0]), ("public", &[9, 0])]), 0).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(
        deleted(&r),
        vec![
            ("secret".into(), vec![(0, TOPIC_AUTHORIZATION_FAILED)]),
            ("public".into(), vec![(9, UNKNOWN_TOPIC_OR_PARTITION), (0, 0)]),
        ]
    );
    // A group that does not exist is the answer, whatever the topics: the
    // coordinator is asked even when no topic is left for it, and its
    // group error replaces the partitions answered before it.
    let r = bob.send(&delete("bobs-none", &[("secret", &[0])]), 0).await;
    assert_eq!((r.error_code, deleted(&r)), (GROUP_ID_NOT_FOUND, vec![]));
    s.server.shutdown().await;
}

#[tokio::test]
async fn commits_and_fetches_by_topic_id_are_authorized_by_the_topics_names() {
    const UNKNOWN_TOPIC_ID: i16 = 100;
    let s = start(usual_acls()).await;
    let mut admin = login(s.server.addr, "admin").await;
    let ids = common::topic_ids::ids_of(&mut admin, &["public", "secret"]).await;
    let (public, secret, stranger) = (ids[0], ids[1], uuid::Uuid::new_v4());
    let mut bob = login(s.server.addr, "bob").await;
    let offsets = |ids: &[uuid::Uuid]| ids.iter().map(|id| (*id, vec![(0, 7)])).collect::<Vec<_>>();
    let answer = common::topic_ids::commit(&mut bob, "bobs-2", &offsets(&[public, secret, stranger])).await;
    // What never reaches the coordinator first, in request order, as Kafka answers it.
    assert_eq!(
        answer,
        vec![
            (secret, vec![(0, TOPIC_AUTHORIZATION_FAILED)]),
            (stranger, vec![(0, UNKNOWN_TOPIC_ID)]),
            (public, vec![(0, 0)]),
        ]
    );
    // A group he may not read refuses every topic, known or not, by its id.
    let answer = common::topic_ids::commit(&mut bob, "g", &offsets(&[public, stranger])).await;
    assert_eq!(
        answer,
        vec![(public, vec![(0, GROUP_AUTHORIZATION_FAILED)]), (stranger, vec![(0, GROUP_AUTHORIZATION_FAILED)])]
    );

    let listed = [(public, vec![0]), (secret, vec![0]), (stranger, vec![0])];
    let got = common::topic_ids::fetch(&mut bob, "bobs-2", Some(&listed)).await;
    let answers: Vec<(uuid::Uuid, i64, i16)> =
        got.topics.iter().map(|(id, ps)| (*id, ps[0].offset, ps[0].error)).collect();
    assert_eq!(
        answers,
        vec![(public, 7, 0), (secret, -1, TOPIC_AUTHORIZATION_FAILED), (stranger, -1, UNKNOWN_TOPIC_ID)]
    );
    let every = common::topic_ids::fetch(&mut bob, "bobs-2", None).await;
    assert_eq!(every.topics.iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![public]);
    let refused = common::topic_ids::fetch(&mut bob, "g", Some(&listed)).await;
    assert_eq!((refused.error, refused.topics.len()), (GROUP_AUTHORIZATION_FAILED, 0));
    s.server.shutdown().await;
}

#[tokio::test]
async fn list_groups_shows_a_user_only_the_groups_he_may_describe_and_a_super_user_all() {
    let s = start(usual_acls()).await;
    let mut alice = login(s.server.addr, "alice").await;
    assert_eq!(commit_errors(&alice.send(&commit_req("g", &["public"]), 8).await), vec![("public".into(), 0)]);
    let mut bob = login(s.server.addr, "bob").await;
    for g in ["bobs-1", "bobs-2"] {
        assert_eq!(commit_errors(&bob.send(&commit_req(g, &["public"]), 8).await), vec![("public".into(), 0)]);
    }
    let r = bob.send(&ListGroupsRequest::default(), 4).await;
    assert_eq!(listed_groups(&r), vec!["bobs-1", "bobs-2"]);
    let r = alice.send(&ListGroupsRequest::default(), 4).await;
    assert_eq!(listed_groups(&r), vec!["g"]);
    let mut admin = login(s.server.addr, "admin").await;
    let r = admin.send(&ListGroupsRequest::default(), 4).await;
    assert_eq!(listed_groups(&r), vec!["bobs-1", "bobs-2", "g"]);

    // DescribeGroups: the denied group first, then the others with the
    // operations the ACLs allow (bob: READ, and DESCRIBE it implies).
    let req = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(sb("bobs-1")), GroupId(sb("g"))])
        .with_include_authorized_operations(true);
    let r = bob.send(&req, 5).await;
    let got: Vec<(String, i16, i32)> =
        r.groups.iter().map(|g| (g.group_id.to_string(), g.error_code, g.authorized_operations)).collect();
    assert_eq!(
        got,
        vec![("g".into(), GROUP_AUTHORIZATION_FAILED, i32::MIN), ("bobs-1".into(), 0, (1 << 3) | (1 << 8))]
    );
    let r = bob.send(&DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb("g"))]), 2).await;
    assert_eq!(r.results[0].error_code, GROUP_AUTHORIZATION_FAILED);
    s.server.shutdown().await;
}

#[tokio::test]
async fn metadata_hides_topics_a_user_may_not_describe_and_a_super_user_sees_all() {
    let s = start(usual_acls()).await;
    let mut bob = login(s.server.addr, "bob").await;
    let all = MetadataRequest::default().with_topics(None);
    assert_eq!(metadata_topics(&bob.send(&all, 9).await), vec![("public".into(), 0)]);
    let named = |t: &str| MetadataRequestTopic::default().with_name(Some(TopicName(sb(t))));
    let some = MetadataRequest::default().with_topics(Some(vec![named("public"), named("secret")]));
    let r = bob.send(&some, 9).await;
    assert_eq!(metadata_topics(&r), vec![("public".into(), 0), ("secret".into(), TOPIC_AUTHORIZATION_FAILED)]);
    // An unknown topic he may not create is refused, not created.
    let new =
        MetadataRequest::default().with_topics(Some(vec![named("bobs-new")])).with_allow_auto_topic_creation(true);
    assert_eq!(metadata_topics(&bob.send(&new, 9).await), vec![("bobs-new".into(), TOPIC_AUTHORIZATION_FAILED)]);
    let mut admin = login(s.server.addr, "admin").await;
    assert_eq!(metadata_topics(&admin.send(&all, 9).await), vec![("public".into(), 0), ("secret".into(), 0)]);
    s.server.shutdown().await;
}

#[tokio::test]
async fn an_acl_added_to_the_file_takes_effect_without_a_restart() {
    let s = start(usual_acls()).await;
    let mut bob = login(s.server.addr, "bob").await;
    assert_eq!(bob.send(&join_req("g"), 5).await.error_code, GROUP_AUTHORIZATION_FAILED);
    acls::add(&AclArgs { file: s.acl_file.clone(), ..allow("bob", "Read", "group", "g") }).unwrap();
    eventually("bob's new ACL is in force", || {
        let addr = s.server.addr;
        async move {
            let mut bob = login(addr, "bob").await;
            (bob.send(&join_req("g"), 5).await.error_code == MEMBER_ID_REQUIRED).then_some(())
        }
    })
    .await;
    // And a DENY added later wins over the ALLOW.
    let deny = AclArgs {
        file: s.acl_file.clone(),
        deny_principals: vec!["User:bob".into()],
        operations: vec!["All".into()],
        groups: vec!["g".into()],
        ..Default::default()
    };
    acls::add(&deny).unwrap();
    s.server.daemon.as_ref().unwrap().security().reload();
    assert_eq!(bob.send(&join_req("g"), 5).await.error_code, GROUP_AUTHORIZATION_FAILED);
    s.server.shutdown().await;
}

#[tokio::test]
async fn a_broken_acl_file_keeps_the_daemon_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("acls.json");
    std::fs::write(&file, "{ not json").unwrap();
    let config = kcoord::config::ConfigBuilder::new()
        .set(&format!("storage.data_dir=\"{}\"", dir.path().join("data").display()))
        .unwrap()
        .set("server.listen=\"127.0.0.1:0\"")
        .unwrap()
        .set("authorizer.enabled=true")
        .unwrap()
        .set(&format!("authorizer.acl_file=\"{}\"", file.display()))
        .unwrap()
        .build()
        .unwrap();
    let err = kcoord::Daemon::start(config).await.err().expect("refused");
    assert!(err.to_string().contains("ACL file"), "{err}");
}

#[tokio::test]
async fn a_sidecar_authorizes_the_group_apis_it_serves_and_leaves_forwarded_ones_to_the_upstream() {
    let up = TestServer::start_with(&["topics.define=[\"t:3\"]", "server.node_id=1"]).await;
    let dir = tempfile::tempdir().unwrap();
    let acl_file = dir.path().join("acls.json");
    // The sidecar's clients are plaintext: User:ANONYMOUS.
    for a in [allow("ANONYMOUS", "Read", "group", "open"), allow("ANONYMOUS", "Read", "topic", "t")] {
        acls::add(&AclArgs { file: acl_file.clone(), ..a }).unwrap();
    }
    let settings = [
        format!("sidecar.upstream=[\"{}\"]", up.addr),
        "authorizer.enabled=true".to_string(),
        format!("authorizer.acl_file=\"{}\"", acl_file.display()),
    ];
    let refs: Vec<&str> = settings.iter().map(String::as_str).collect();
    let side = TestServer::start_with(&refs).await;
    let mut c = side.client().await;
    assert_eq!(
        commit_errors(&c.send(&commit_req("closed", &["t"]), 8).await),
        vec![("t".into(), GROUP_AUTHORIZATION_FAILED)]
    );
    assert_eq!(commit_errors(&c.send(&commit_req("open", &["t"]), 8).await), vec![("t".into(), 0)]);
    assert_eq!(c.send(&join_req("closed"), 5).await.error_code, GROUP_AUTHORIZATION_FAILED);
    // Metadata is forwarded: the upstream (no authorizer) answers it.
    let all = MetadataRequest::default().with_topics(None);
    assert_eq!(metadata_topics(&c.send(&all, 9).await), vec![("t".into(), 0)]);
    side.shutdown().await;
    up.shutdown().await;
}

fn acl_creation(user: &str, group: &str) -> kafka_protocol::messages::create_acls_request::AclCreation {
    kafka_protocol::messages::create_acls_request::AclCreation::default()
        .with_resource_type(3) // GROUP
        .with_resource_name(sb(group))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(sb(&format!("User:{user}")))
        .with_host(sb("*"))
        .with_operation(3) // READ
        .with_permission_type(3) // ALLOW
}

fn group_filter(group: &str) -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(3)
        .with_resource_name_filter(Some(sb(group)))
        .with_pattern_type_filter(2) // MATCH
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1)
}

#[tokio::test]
async fn acls_created_and_deleted_over_the_wire_take_effect_at_once_and_are_in_the_file() {
    const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    let s = start(usual_acls()).await;
    let mut bob = login(s.server.addr, "bob").await;
    let create = CreateAclsRequest::default().with_creations(vec![acl_creation("bob", "g")]);
    let r = bob.send(&create, 3).await;
    assert_eq!(r.results[0].error_code, CLUSTER_AUTHORIZATION_FAILED, "bob may not alter the cluster");
    assert_eq!(bob.send(&group_filter("g"), 3).await.error_code, CLUSTER_AUTHORIZATION_FAILED);

    let mut admin = login(s.server.addr, "admin").await;
    let bad = acl_creation("bob", "g").with_operation(1); // ANY is a filter, not an operation
    let r = admin.send(&CreateAclsRequest::default().with_creations(vec![acl_creation("bob", "g"), bad]), 3).await;
    let errors: Vec<i16> = r.results.iter().map(|x| x.error_code).collect();
    assert_eq!(errors, vec![0, 42]);
    // Answered once durable: in the file, and in force, without a reload.
    assert!(std::fs::read_to_string(&s.acl_file).unwrap().contains("\"resource_name\": \"g\""));
    assert_eq!(bob.send(&join_req("g"), 5).await.error_code, MEMBER_ID_REQUIRED);

    let r = admin.send(&group_filter("g"), 3).await;
    let principals: Vec<(String, String)> = r
        .resources
        .iter()
        .flat_map(|res| res.acls.iter().map(move |a| (res.resource_name.to_string(), a.principal.to_string())))
        .collect();
    assert_eq!(principals, vec![("g".into(), "User:alice".into()), ("g".into(), "User:bob".into())]);

    let delete = DeleteAclsRequest::default().with_filters(vec![
        kafka_protocol::messages::delete_acls_request::DeleteAclsFilter::default()
            .with_resource_type_filter(3)
            .with_resource_name_filter(Some(sb("g")))
            .with_pattern_type_filter(3)
            .with_principal_filter(Some(sb("User:bob")))
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1),
    ]);
    let r = admin.send(&delete, 3).await;
    assert_eq!(r.filter_results[0].error_code, 0);
    assert_eq!(r.filter_results[0].matching_acls.len(), 1);
    assert_eq!(bob.send(&join_req("g"), 5).await.error_code, GROUP_AUTHORIZATION_FAILED);
    let in_file = kcoord::security::acl::store::AclFile::load(&s.acl_file).unwrap().acls;
    assert!(!in_file.iter().any(|a| a.principal == "User:bob" && a.resource_name == "g"), "{in_file:?}");
    s.server.shutdown().await;
}

#[tokio::test]
async fn without_an_authorizer_the_acl_apis_answer_security_disabled_and_everything_is_allowed() {
    const SECURITY_DISABLED: i16 = 54;
    let server = TestServer::start_with(&[TOPICS]).await;
    let mut c = server.client().await;
    let r = c.send(&CreateAclsRequest::default().with_creations(vec![acl_creation("bob", "g")]), 2).await;
    assert_eq!(r.results[0].error_code, SECURITY_DISABLED);
    assert_eq!(c.send(&group_filter("g"), 2).await.error_code, SECURITY_DISABLED);
    assert_eq!(c.send(&join_req("g"), 5).await.error_code, MEMBER_ID_REQUIRED);
    server.shutdown().await;
}

#[tokio::test]
async fn an_acks0_produce_writes_the_authorized_topics_then_the_connection_closes() {
    let mut acls = usual_acls();
    acls.push(allow("alice", "WRITE", "topic", "public"));
    let s = start(acls).await;
    let mut alice = login(s.server.addr, "alice").await;
    let batch = support::batch(&[("k", "v")], 1_000, None);
    let mut req = support::produce_request("public", 0, Some(batch.clone()), 0);
    let secret = support::produce_request("secret", 0, Some(batch), 0);
    req.topic_data.extend(secret.topic_data);
    let (_, frame) = alice.frame(&req, 9);
    alice.send_raw(&frame).await.unwrap();
    // No answer to carry the error: the connection closes, as in Kafka.
    assert!(alice.is_closed().await, "an acks=0 Produce with a denied topic closes the connection");

    let mut admin = login(s.server.addr, "admin").await;
    let written = support::list_offset(&mut admin, 7, "public", 0, -1).await.2;
    assert_eq!(written, 1, "the authorized partition was written");
    let denied = support::list_offset(&mut admin, 7, "secret", 0, -1).await.2;
    assert_eq!(denied, 0, "the denied one was not");
    s.server.shutdown().await;
}

#[tokio::test]
async fn create_topics_shows_a_new_topics_configs_only_to_a_user_who_may_describe_them() {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let mut acls = usual_acls();
    acls.push(allow("alice", "CREATE", "topic", "new-a"));
    acls.push(allow("alice", "CREATE", "topic", "new-b"));
    acls.push(allow("alice", "DESCRIBE_CONFIGS", "topic", "new-b"));
    let s = start(acls).await;
    let mut alice = login(s.server.addr, "alice").await;
    let topic = |name: &str| {
        CreatableTopic::default().with_name(TopicName(sb(name))).with_num_partitions(3).with_replication_factor(-1)
    };
    let req = CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![topic("new-a"), topic("new-b")]);
    let r = alice.send(&req, 7).await;
    let seen: Vec<(String, i16, i16, i32, bool)> = r
        .topics
        .iter()
        .map(|t| (t.name.to_string(), t.error_code, t.topic_config_error_code, t.num_partitions, t.configs.is_some()))
        .collect();
    assert_eq!(
        seen,
        vec![("new-a".into(), 0, TOPIC_AUTHORIZATION_FAILED, -1, false), ("new-b".into(), 0, 0, 3, true),]
    );
    s.server.shutdown().await;
}
