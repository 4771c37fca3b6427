//! One request must not cost more than a bounded budget, nor starve others.
//!
//! Each test is a scenario measured against an earlier build (docs/benchmarks.md,
//! "Cost of the hardening"): a
//! small frame that fanned out to a huge amount of memory or work. The tests
//! assert behaviour only: what is answered (Kafka's answer where Kafka
//! answers), what is refused (a closed connection, never a response with a
//! length that does not fit), and that another connection is served while
//! the large request runs. They never assert timings.

use crate::common;

use bytes::Bytes;
use common::consumer::{join, join_request, sync};
use common::*;
use kafka_protocol::messages::*;

/// Elements in the fan-out scenarios.
const MANY: usize = 100_000;

/// A fresh connection gets its ApiVersions answered.
async fn assert_served(s: &TestServer) {
    let mut c = s.client().await;
    let r = c.send(&ApiVersionsRequest::default(), 2).await;
    assert_eq!(r.error_code, 0);
}

/// Sends `req` on a connection of its own, has another connection served
/// while it runs, then returns the big request's response frame (None if the
/// daemon closed the connection instead of answering).
async fn send_while_serving_others<R: kafka_protocol::protocol::Request>(
    s: &TestServer,
    req: &R,
    version: i16,
) -> Option<R::Response> {
    let mut big = s.client().await;
    let (corr, frame) = big.frame(req, version);
    big.send_raw(&frame).await.expect("send");
    assert_served(s).await;
    let resp = big.read_frame().await.ok()?;
    let (got, resp) = Client::decode::<R>(resp, version);
    assert_eq!(got, corr);
    Some(resp)
}

fn group_ids(n: usize, name: impl Fn(usize) -> String) -> Vec<GroupId> {
    (0..n).map(|i| GroupId(sb(&name(i)))).collect()
}

#[tokio::test]
async fn describe_groups_with_many_empty_names_answers_each_and_serves_others() {
    let s = TestServer::start().await;
    let req = DescribeGroupsRequest::default().with_groups(group_ids(MANY, |_| String::new()));
    let r = send_while_serving_others(&s, &req, 5).await.expect("answered");
    // Kafka answers every requested id, duplicates included.
    assert_eq!(r.groups.len(), MANY);
    assert!(r.groups.iter().all(|g| g.group_id.is_empty() && g.group_state.as_str() == "Dead"));
}

#[tokio::test]
async fn describe_groups_with_many_distinct_unknown_groups_answers_each_in_order() {
    let s = TestServer::start().await;
    let req = DescribeGroupsRequest::default().with_groups(group_ids(MANY, |i| format!("g{i}")));
    let r = send_while_serving_others(&s, &req, 6).await.expect("answered");
    assert_eq!(r.groups.len(), MANY);
    assert!(r.groups.iter().enumerate().all(|(i, g)| g.group_id.as_str() == format!("g{i}") && g.error_code == 69));
}

/// A Stable group whose member carries `bytes` of subscription and assignment.
async fn large_group(s: &TestServer, group: &str, bytes: usize) {
    let mut c = s.client().await;
    let mut req = join_request(group, "", &["t"]);
    req.protocols[0].metadata = Bytes::from(vec![7u8; bytes]);
    let j = join(&mut c, req).await;
    assert_eq!(j.error_code, 0, "{j:?}");
    let member = j.member_id.to_string();
    let r = sync(&mut c, group, j.generation_id, &member, &[(&member, Bytes::from(vec![9u8; bytes]))]).await;
    assert_eq!(r.error_code, 0);
}

#[tokio::test]
async fn a_large_group_described_past_the_response_limit_closes_the_connection_only() {
    let s = TestServer::start_with(&["server.max_response_bytes=4194304"]).await;
    large_group(&s, "big", 256 * 1024).await;
    // Twice fits: Kafka's answer, the group twice.
    let mut c = s.client().await;
    let req = DescribeGroupsRequest::default().with_groups(group_ids(2, |_| "big".into()));
    let r = c.send(&req, 5).await;
    assert_eq!(r.groups.len(), 2);
    assert!(r.groups.iter().all(|g| g.members.len() == 1 && g.members[0].member_assignment.len() == 256 * 1024));
    // 140 times (~70 MiB) does not: no answer, the connection closes.
    let req = DescribeGroupsRequest::default().with_groups(group_ids(140, |_| "big".into()));
    assert!(send_while_serving_others(&s, &req, 5).await.is_none());
    assert_served(&s).await;
}

#[tokio::test]
async fn offset_fetch_for_many_groups_answers_each_and_serves_others() {
    let s = TestServer::start().await;
    let groups = (0..MANY)
        .map(|i| offset_fetch_request::OffsetFetchRequestGroup::default().with_group_id(GroupId(sb(&format!("g{i}")))))
        .collect();
    let req = OffsetFetchRequest::default().with_groups(groups);
    let r = send_while_serving_others(&s, &req, 8).await.expect("answered");
    assert_eq!(r.groups.len(), MANY);
    assert!(r.groups.iter().all(|g| g.error_code == 0 && g.topics.is_empty()));
}

#[tokio::test]
async fn find_coordinator_past_the_response_limit_closes_the_connection_only() {
    let s = TestServer::start_with(&["server.max_response_bytes=1048576"]).await;
    let keys = |n: usize| (0..n).map(|i| sb(&format!("g{i}"))).collect::<Vec<_>>();
    let r = send_while_serving_others(&s, &FindCoordinatorRequest::default().with_coordinator_keys(keys(1000)), 4)
        .await
        .expect("answered");
    assert_eq!(r.coordinators.len(), 1000);
    let req = FindCoordinatorRequest::default().with_coordinator_keys(keys(MANY));
    assert!(send_while_serving_others(&s, &req, 4).await.is_none());
}

#[tokio::test]
async fn metadata_naming_one_topic_many_times_answers_it_once() {
    let s = TestServer::start_with(&["topics.define=[\"t:2\"]"]).await;
    let topics = (0..MANY)
        .map(|_| metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(sb("t")))))
        .collect();
    let req = MetadataRequest::default().with_topics(Some(topics)).with_allow_auto_topic_creation(false);
    let r = send_while_serving_others(&s, &req, 9).await.expect("answered");
    assert_eq!(r.topics.len(), 1);
    assert_eq!(r.topics[0].partitions.len(), 2);
}

#[tokio::test]
async fn delete_groups_with_many_names_completes_and_serves_others() {
    let s = TestServer::start().await;
    // Every name twice: answered once each, as before.
    let mut names = group_ids(MANY, |i| format!("g{i}"));
    names.extend(group_ids(MANY, |i| format!("g{i}")));
    let req = DeleteGroupsRequest::default().with_groups_names(names);
    let r = send_while_serving_others(&s, &req, 2).await.expect("answered");
    assert_eq!(r.results.len(), MANY);
    assert!(r.results.iter().all(|g| g.error_code == 69));
}

#[tokio::test]
async fn offset_commit_with_many_unknown_partitions_completes_and_serves_others() {
    let s = TestServer::start_with(&["topics.define=[\"t:2\"]"]).await;
    let partitions = (0..MANY as i32)
        .map(|p| {
            offset_commit_request::OffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(1)
        })
        .collect();
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![offset_commit_request::OffsetCommitRequestTopic::default()
            .with_name(TopicName(sb("t")))
            .with_partitions(partitions)]);
    let r = send_while_serving_others(&s, &req, 8).await.expect("answered");
    let answered = &r.topics[0].partitions;
    assert_eq!(answered.len(), MANY);
    // Partitions 0 and 1 exist and are committed; the rest are unknown and,
    // as Kafka answers them, listed first.
    let order: Vec<(i32, i16)> = answered.iter().map(|p| (p.partition_index, p.error_code)).collect();
    let expected: Vec<(i32, i16)> = (2..MANY as i32).map(|p| (p, 3)).chain([(0, 0), (1, 0)]).collect();
    assert_eq!(order, expected);
}

#[tokio::test]
async fn delete_topics_with_many_names_completes_and_serves_others() {
    let s = TestServer::start().await;
    let mut names: Vec<TopicName> = (0..MANY).map(|i| TopicName(sb(&format!("t{i}")))).collect();
    names.push(TopicName(sb("t0")));
    let req = DeleteTopicsRequest::default().with_topic_names(names).with_timeout_ms(30_000);
    let r = send_while_serving_others(&s, &req, 5).await.expect("answered");
    assert_eq!(r.responses.len(), MANY);
    assert_eq!(r.responses.iter().filter(|t| t.error_code == 42).count(), 1, "t0 named twice");
    assert_eq!(r.responses.iter().filter(|t| t.error_code == 3).count(), MANY - 1);
}

#[tokio::test]
async fn requests_past_the_daemons_request_budget_wait_and_are_all_answered() {
    // A budget of one 2 KiB frame for the whole daemon: pipelined requests
    // from several connections must take turns, never deadlock.
    let s = TestServer::start_with(&["server.max_request_bytes=2048", "server.max_inflight_request_bytes=2048"]).await;
    let mut clients = Vec::new();
    for _ in 0..4 {
        let mut c = s.client().await;
        let mut expected = Vec::new();
        for i in 0..20 {
            let req = DescribeGroupsRequest::default().with_groups(group_ids(50, |j| format!("g{i}-{j}")));
            let (corr, frame) = c.frame(&req, 5);
            c.send_raw(&frame).await.unwrap();
            expected.push(corr);
        }
        clients.push((c, expected));
    }
    for (mut c, expected) in clients {
        for corr in expected {
            let (got, r) = Client::decode::<DescribeGroupsRequest>(c.read_frame().await.expect("answer"), 5);
            assert_eq!((got, r.groups.len()), (corr, 50));
        }
    }
}
