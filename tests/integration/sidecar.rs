//! Sidecar mode over TCP: a standalone kcoord daemon plays the upstream
//! cluster (a plain broker for this purpose), and sidecars in front of it
//! serve the groups. Real clients against a multi-broker upstream are in
//! tests/interop/test_sidecar.py.

use crate::common;
use crate::support;

use common::consumer::join_alone;
use common::{eventually, http_get, sb, Client, TestServer};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;

/// The upstream: a standalone daemon with topic `t` (3 partitions).
async fn upstream() -> TestServer {
    TestServer::start_with(&["topics.define=[\"t:3\"]", "server.node_id=1"]).await
}

/// A sidecar fronting `up` as its only broker (node 1).
async fn sidecar(up: &TestServer, extra: &[&str]) -> TestServer {
    let upstream = format!("sidecar.upstream=[\"{}\"]", up.addr);
    let mut settings = vec![upstream.as_str(), "sidecar.write_through_interval_ms=20"];
    settings.extend_from_slice(extra);
    TestServer::start_with(&settings).await
}

async fn commit(c: &mut Client, group: &str, generation: i32, member: &str, partition: i32, offset: i64) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(sb(member))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb("t"))).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(partition).with_committed_offset(offset),
        ])]);
    c.send(&req, 8).await.topics[0].partitions[0].error_code
}

/// The committed offset of `t`/`partition` for `group`, as `c`'s node answers it.
async fn committed(c: &mut Client, group: &str, partition: i32) -> i64 {
    let req = OffsetFetchRequest::default().with_group_id(GroupId(sb(group))).with_topics(Some(vec![
        OffsetFetchRequestTopic::default().with_name(TopicName(sb("t"))).with_partition_indexes(vec![partition]),
    ]));
    let r = c.send(&req, 7).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    r.topics[0].partitions[0].committed_offset
}

/// Waits until the upstream answers `offset` for `group`'s partition.
async fn upstream_has(up: &TestServer, group: &str, partition: i32, offset: i64) {
    let addr = up.addr;
    eventually(&format!("offset {offset} of {group} upstream"), || async move {
        let mut direct = Client::connect(addr).await;
        (committed(&mut direct, group, partition).await == offset).then_some(())
    })
    .await;
}

async fn describe(c: &mut Client, group: &str) -> describe_groups_response::DescribedGroup {
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(sb(group))]);
    c.send(&req, 5).await.groups.remove(0)
}

#[tokio::test]
async fn metadata_through_a_sidecar_keeps_broker_ids_and_shows_only_the_sidecars_address() {
    let up = upstream().await;
    let sc = sidecar(&up, &[]).await;
    let mut c = sc.client().await;
    for version in [1, 9, 12] {
        let r = c.send(&MetadataRequest::default().with_topics(None), version).await;
        let brokers: Vec<(i32, String, i32)> =
            r.brokers.iter().map(|b| (b.node_id.0, b.host.to_string(), b.port)).collect();
        assert_eq!(brokers, vec![(1, "127.0.0.1".to_string(), i32::from(sc.addr.port()))], "v{version}");
        assert_eq!(r.controller_id.0, 1);
        let t = r.topics.iter().find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some("t")).expect("topic t");
        assert!(t.partitions.iter().all(|p| p.leader_id.0 == 1));
    }
}

#[tokio::test]
async fn api_versions_offer_kcoords_group_apis_and_the_upstreams_data_apis_and_no_transactional_offsets_without_upstream_transactions(
) {
    let up = upstream().await;
    let sc = sidecar(&up, &[]).await;
    let r = sc.client().await.send(&ApiVersionsRequest::default(), 0).await;
    let has = |key: i16| r.api_keys.iter().any(|k| k.api_key == key);
    // KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) are kcoord's own.
    for key in [0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 42, 47, 68, 69] {
        assert!(has(key), "API {key} is advertised");
    }
    // TxnOffsetCommit is delegated to the upstream's coordinator, so it is
    // offered only where the upstream takes it (a standalone kcoord has no
    // transaction coordinator; tests/interop/test_sidecar_transactions.py
    // covers an upstream that has one).
    {
        let key = 28;
        assert!(!has(key), "API {key} is not advertised");
    }
}

#[tokio::test]
async fn groups_are_coordinated_by_the_sidecar_not_the_upstream() {
    let up = upstream().await;
    let sc = sidecar(&up, &["sidecar.write_through=false"]).await;
    let mut c = sc.client().await;
    let fc = c.send(&FindCoordinatorRequest::default().with_key(sb("g")), 2).await;
    assert_eq!((fc.error_code, fc.node_id.0, fc.port), (0, 1, i32::from(sc.addr.port())));
    let (member, generation) = join_alone(&mut c, "g", "t", &[0, 1, 2]).await;
    assert_eq!(commit(&mut c, "g", generation, &member, 0, 42).await, 0);
    assert_eq!(describe(&mut c, "g").await.group_state.as_str(), "Stable");
    // The upstream never saw the group.
    let mut direct = up.client().await;
    assert_eq!(describe(&mut direct, "g").await.group_state.as_str(), "Dead");
    assert_eq!(committed(&mut direct, "g", 0).await, -1);
}

#[tokio::test]
async fn a_group_already_on_the_upstream_resumes_at_its_committed_offsets() {
    let up = upstream().await;
    let mut direct = up.client().await;
    assert_eq!(commit(&mut direct, "old", -1, "", 1, 17).await, 0);
    let sc = sidecar(&up, &["sidecar.write_through=false"]).await;
    let mut c = sc.client().await;
    assert_eq!(committed(&mut c, "old", 1).await, 17);
    // From then on kcoord is the source of truth: a later upstream commit is not imported again.
    assert_eq!(commit(&mut direct, "old", -1, "", 1, 99).await, 0);
    assert_eq!(committed(&mut c, "old", 1).await, 17);
}

#[tokio::test]
async fn committed_offsets_are_written_through_to_the_upstream() {
    let up = upstream().await;
    let sc = sidecar(&up, &[]).await;
    let mut c = sc.client().await;
    let (member, generation) = join_alone(&mut c, "wt", "t", &[0, 1, 2]).await;
    assert_eq!(commit(&mut c, "wt", generation, &member, 2, 5).await, 0);
    assert_eq!(commit(&mut c, "wt", generation, &member, 2, 7).await, 0);
    upstream_has(&up, "wt", 2, 7).await;
}

#[tokio::test]
async fn deleting_a_group_through_the_sidecar_deletes_it_upstream_too() {
    let up = upstream().await;
    let sc = sidecar(&up, &[]).await;
    let mut c = sc.client().await;
    assert_eq!(commit(&mut c, "gone", -1, "", 0, 3).await, 0);
    upstream_has(&up, "gone", 0, 3).await;
    let r = c.send(&DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb("gone"))]), 2).await;
    assert_eq!(r.results[0].error_code, 0);
    upstream_has(&up, "gone", 0, -1).await;
}

#[tokio::test]
async fn committed_offsets_survive_a_sidecar_restart() {
    let up = upstream().await;
    let mut sc = sidecar(&up, &["sidecar.write_through=false"]).await;
    let mut c = sc.client().await;
    assert_eq!(commit(&mut c, "keep", -1, "", 0, 11).await, 0);
    sc.restart().await;
    let mut c = sc.client().await;
    assert_eq!(committed(&mut c, "keep", 0).await, 11);
}

#[tokio::test]
async fn a_commit_to_a_topic_created_upstream_after_start_is_accepted() {
    let up = upstream().await;
    let sc = sidecar(&up, &["sidecar.write_through=false"]).await;
    let mut direct = up.client().await;
    let create = CreateTopicsRequest::default().with_topics(vec![create_topics_request::CreatableTopic::default()
        .with_name(TopicName(sb("late")))
        .with_num_partitions(2)
        .with_replication_factor(1)]);
    assert_eq!(direct.send(&create, 5).await.topics[0].error_code, 0);
    let mut c = sc.client().await;
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb("late"))).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(1).with_committed_offset(4),
            OffsetCommitRequestPartition::default().with_partition_index(2).with_committed_offset(4),
        ])]);
    let r = c.send(&req, 8).await;
    let errors: Vec<(i32, i16)> = r.topics[0].partitions.iter().map(|p| (p.partition_index, p.error_code)).collect();
    assert_eq!(errors, vec![(2, 3), (1, 0)], "partition 2 does not exist, and is answered first as Kafka does");
}

#[tokio::test]
async fn a_v10_commit_by_the_id_of_a_topic_created_upstream_after_start_is_accepted_and_written_through() {
    let up = upstream().await;
    let sc = sidecar(&up, &[]).await;
    let mut direct = up.client().await;
    let created = support::create_topics(&mut direct, 5, vec![support::new_topic("late", 2, 1, &[])], false).await;
    assert_eq!(created[0].error_code, 0);
    let mut c = sc.client().await;
    // The client learns the id from Metadata, which the sidecar forwards.
    let late = common::topic_ids::ids_of(&mut c, &["late"]).await[0];
    assert!(!late.is_nil());
    let answer = common::topic_ids::commit(&mut c, "g", &[(late, vec![(1, 4)])]).await;
    assert_eq!(answer, vec![(late, vec![(1, 0)])]);
    let got = common::topic_ids::fetch(&mut c, "g", Some(&[(late, vec![1])])).await;
    assert_eq!((got.topics[0].0, got.topics[0].1[0].offset), (late, 4));
    // Written through, and readable upstream by the same id.
    eventually("the commit written through", || {
        let addr = up.addr;
        async move {
            let mut direct = Client::connect(addr).await;
            let got = common::topic_ids::fetch(&mut direct, "g", Some(&[(late, vec![1])])).await;
            (got.topics[0].1[0].offset == 4).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn groups_keep_working_while_the_upstream_is_down_and_forwarded_requests_close_the_connection() {
    let up = upstream().await;
    let sc = sidecar(&up, &["sidecar.write_through=false"]).await;
    let mut c = sc.client().await;
    let (member, generation) = join_alone(&mut c, "g", "t", &[0, 1, 2]).await;
    up.shutdown().await;
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_generation_id(generation)
        .with_member_id(sb(&member));
    assert_eq!(c.send(&hb, 4).await.error_code, 0);
    assert_eq!(commit(&mut c, "g", generation, &member, 0, 8).await, 0);
    assert_eq!(committed(&mut c, "g", 0).await, 8);
    // A forwarded request finds no broker: the client sees a broker outage.
    let (_, frame) = c.frame(&MetadataRequest::default().with_topics(None), 9);
    c.send_raw(&frame).await.unwrap();
    assert!(c.is_closed().await);
}

#[tokio::test]
async fn a_new_group_waits_while_the_upstream_cannot_be_asked_for_its_offsets() {
    let up = upstream().await;
    let sc = sidecar(&up, &["sidecar.request_timeout_ms=2000"]).await;
    up.shutdown().await;
    let mut c = sc.client().await;
    let req = OffsetFetchRequest::default().with_group_id(GroupId(sb("new"))).with_topics(None);
    // Retriable: clients keep asking until the upstream is back.
    assert_eq!(c.send(&req, 7).await.error_code, 14);
}

#[tokio::test]
async fn with_one_sidecar_per_broker_each_group_has_one_owner_and_the_others_refuse_it() {
    let up = upstream().await;
    // Two sidecars share the groups; only node 1 has a broker upstream, which
    // does not matter for coordination.
    let a_port = free_port();
    let b_port = free_port();
    let peers = format!("sidecar.peers=[\"1=127.0.0.1:{a_port}\",\"2=127.0.0.1:{b_port}\"]");
    let a_listen = format!("server.listen=\"127.0.0.1:{a_port}\"");
    let b_listen = format!("server.listen=\"127.0.0.1:{b_port}\"");
    let a = sidecar(&up, &[&peers, &a_listen, "server.node_id=1", "sidecar.write_through=false"]).await;
    let b = sidecar(&up, &[&peers, &b_listen, "server.node_id=2", "sidecar.write_through=false"]).await;
    let (mut ca, mut cb) = (a.client().await, b.client().await);

    // Metadata lists both sidecars, node 2 although the upstream has no broker 2.
    let md = ca.send(&MetadataRequest::default().with_topics(None), 9).await;
    let ids: Vec<i32> = md.brokers.iter().map(|b| b.node_id.0).collect();
    assert_eq!(ids, vec![1, 2]);

    let mut owned_by = [Vec::new(), Vec::new()];
    for i in 0..20 {
        let group = format!("group-{i}");
        let fa = ca.send(&FindCoordinatorRequest::default().with_key(sb(&group)), 2).await;
        let fb = cb.send(&FindCoordinatorRequest::default().with_key(sb(&group)), 2).await;
        assert_eq!((fa.node_id, fa.port), (fb.node_id, fb.port), "every node names the same owner");
        let (owner, other) = if fa.node_id.0 == 1 { (&mut ca, &mut cb) } else { (&mut cb, &mut ca) };
        assert_eq!(commit(owner, &group, -1, "", 0, i).await, 0);
        assert_eq!(commit(other, &group, -1, "", 0, i).await, 16, "NOT_COORDINATOR");
        owned_by[(fa.node_id.0 - 1) as usize].push(group);
    }
    assert!(!owned_by[0].is_empty() && !owned_by[1].is_empty(), "both nodes own groups: {owned_by:?}");
    // ListGroups answers only the groups a node owns.
    for (c, owned) in [(&mut ca, &owned_by[0]), (&mut cb, &owned_by[1])] {
        let listed = c.send(&ListGroupsRequest::default(), 4).await;
        let mut ids: Vec<String> = listed.groups.iter().map(|g| g.group_id.to_string()).collect();
        ids.sort();
        let mut want = owned.clone();
        want.sort();
        assert_eq!(ids, want);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn pipelined_forwarded_requests_are_answered_in_order_within_a_small_response_budget() {
    let up = upstream().await;
    // Every Metadata answer is larger than the budget: each goes through alone.
    let sc = sidecar(&up, &["sidecar.max_buffered_response_bytes=1024", "sidecar.write_through=false"]).await;
    let mut c = sc.client().await;
    let mut sent = Vec::new();
    let mut frames = Vec::new();
    for i in 0..50 {
        // Forwarded (Metadata) and local (FindCoordinator) requests interleaved.
        let (corr, frame) = if i % 5 == 4 {
            c.frame(&FindCoordinatorRequest::default().with_key(sb("g")), 2)
        } else {
            c.frame(&MetadataRequest::default().with_topics(None), 9)
        };
        sent.push(corr);
        frames.extend_from_slice(&frame);
    }
    c.send_raw(&frames).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..50 {
        let frame = c.read_frame().await.expect("every request is answered");
        got.push(i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]));
    }
    assert_eq!(got, sent);
}

#[tokio::test]
async fn large_fetches_through_a_sidecar_arrive_byte_for_byte_as_the_upstream_sent_them() {
    let up = upstream().await;
    let sc = sidecar(&up, &["sidecar.write_through=false"]).await;
    let mut direct = Client::connect(up.addr).await;
    // 4 MiB in partition 0: 64 batches of 64 records of 1 KiB.
    let value = "v".repeat(1024);
    let records: Vec<(&str, &str)> = (0..64).map(|_| ("k", value.as_str())).collect();
    for i in 0..64 {
        let (err, _) = support::produce(&mut direct, 9, "t", 0, support::batch(&records, 1000 + i, None)).await;
        assert_eq!(err, 0);
    }
    let id = support::topic_id(&mut direct, "t").await;
    let fetch_from = |offset: i64| {
        let mut req = support::fetch_request(13, "t", id, 0, offset, 0);
        req.topics[0].partitions[0].partition_max_bytes = 8 << 20;
        req
    };
    let offsets = [0, 1000, 4000, 0];
    // What the upstream answers directly, without the correlation id.
    let mut expected = Vec::new();
    for &offset in &offsets {
        let (_, frame) = direct.frame(&fetch_from(offset), 13);
        direct.send_raw(&frame).await.unwrap();
        expected.push(direct.read_frame().await.unwrap().slice(4..));
    }
    assert!(expected[0].len() > 4 << 20, "the first fetch answers every record");
    // Through the sidecar, pipelined and interleaved with local and
    // rewritten answers.
    let mut c = sc.client().await;
    let mut frames = Vec::new();
    let mut fetches = Vec::new();
    for &offset in &offsets {
        let (corr, frame) = c.frame(&fetch_from(offset), 13);
        fetches.push(corr);
        frames.extend_from_slice(&frame);
        frames.extend_from_slice(&c.frame(&MetadataRequest::default().with_topics(None), 9).1);
        frames.extend_from_slice(&c.frame(&FindCoordinatorRequest::default().with_key(sb("g")), 2).1);
    }
    c.send_raw(&frames).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..offsets.len() * 3 {
        let frame = c.read_frame().await.expect("every request is answered");
        let corr = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        if fetches.contains(&corr) {
            got.push(frame.slice(4..));
        }
    }
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert!(g == e, "fetch {i}: {} bytes through the sidecar, {} direct", g.len(), e.len());
    }
}

#[tokio::test]
async fn large_produces_through_a_sidecar_reach_the_upstream_intact_in_order_with_other_requests() {
    let up = upstream().await;
    let sc = sidecar(&up, &["sidecar.write_through=false"]).await;
    let mut c = sc.client().await;
    // Batches of 1 MiB (relayed from the socket) and of one record (read
    // whole), acks=-1 and acks=0, pipelined with local and rewritten requests.
    let value = "v".repeat(1024);
    let big: Vec<(&str, &str)> = (0..1024).map(|_| ("k", value.as_str())).collect();
    let mut frames = Vec::new();
    let mut answered = Vec::new();
    for i in 0..6 {
        let records: &[(&str, &str)] = if i % 2 == 0 { &big } else { &[("k", "small")] };
        let acks = if i == 4 { 0 } else { -1 };
        let (corr, frame) =
            c.frame(&support::produce_request("t", 1, Some(support::batch(records, 1000, None)), acks), 9);
        if acks != 0 {
            answered.push(corr);
        }
        frames.extend_from_slice(&frame);
        let (corr, frame) = c.frame(&MetadataRequest::default().with_topics(None), 9);
        answered.push(corr);
        frames.extend_from_slice(&frame);
        let (corr, frame) = c.frame(&FindCoordinatorRequest::default().with_key(sb("g")), 2);
        answered.push(corr);
        frames.extend_from_slice(&frame);
    }
    c.send_raw(&frames).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..answered.len() {
        let frame = c.read_frame().await.expect("every request that expects an answer gets one");
        got.push(i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]));
    }
    assert_eq!(got, answered);
    // Every batch is in the upstream's log, in order: 3 × 1024 + 3 records.
    let mut direct = Client::connect(up.addr).await;
    let id = support::topic_id(&mut direct, "t").await;
    let mut offset = 0;
    let mut values = Vec::new();
    while offset < 3 * 1024 + 3 {
        let p = support::fetch(&mut direct, 13, "t", id, 1, offset).await;
        let recs = support::decode_records(&p.records.expect("records"));
        assert!(!recs.is_empty(), "stuck at offset {offset}");
        offset = recs.last().unwrap().0 + 1;
        values.extend(recs.into_iter().map(|r| r.2.len()));
    }
    let expected: Vec<usize> = (0..6).flat_map(|i| if i % 2 == 0 { vec![1024; 1024] } else { vec![5] }).collect();
    assert_eq!(values, expected);
}

/// The committed offset of `topic`/0 for `group`, as `c`'s node answers it.
async fn committed_in(c: &mut Client, group: &str, topic: &str) -> i64 {
    let req = OffsetFetchRequest::default().with_group_id(GroupId(sb(group))).with_topics(Some(vec![
        OffsetFetchRequestTopic::default().with_name(TopicName(sb(topic))).with_partition_indexes(vec![0]),
    ]));
    let r = c.send(&req, 7).await;
    r.topics[0].partitions[0].committed_offset
}

#[tokio::test]
async fn offsets_of_a_topic_deleted_upstream_are_dropped_and_others_kept() {
    let up = upstream().await;
    let mut direct = Client::connect(up.addr).await;
    let created = support::create_topics(&mut direct, 5, vec![support::new_topic("doomed", 1, 1, &[])], false).await;
    assert_eq!(created[0].error_code, 0);
    let sc = sidecar(&up, &["sidecar.metadata_refresh_ms=100", "sidecar.write_through=false"]).await;
    let mut c = sc.client().await;
    let commit_to = |topic: &str, offset: i64| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb(topic))).with_partitions(
                vec![OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(offset)],
            )])
    };
    for (topic, offset) in [("doomed", 7), ("t", 9)] {
        let r = c.send(&commit_to(topic, offset), 8).await;
        assert_eq!(r.topics[0].partitions[0].error_code, 0, "{topic}");
    }
    assert_eq!(committed_in(&mut c, "g", "doomed").await, 7);
    assert_eq!(support::delete_topics(&mut direct, 6, &["doomed"]).await[0].error_code, 0);
    let addr = sc.addr;
    eventually("the deleted topic's offset is dropped", || async move {
        let mut c = Client::connect(addr).await;
        (committed_in(&mut c, "g", "doomed").await == -1).then_some(())
    })
    .await;
    assert_eq!(committed_in(&mut c, "g", "t").await, 9, "other topics keep their offsets");
}

#[tokio::test]
async fn the_group_view_shows_lag_against_the_upstreams_log_end_offsets() {
    let up = upstream().await;
    let sc = sidecar(
        &up,
        &[
            "sidecar.write_through=false",
            "sidecar.log_end_refresh_ms=50",
            "metrics.listen=\"127.0.0.1:0\"",
            "metrics.lag_sample_interval_ms=100",
        ],
    )
    .await;
    let http = sc.daemon.as_ref().unwrap().metrics_addr().expect("metrics listener");
    let mut direct = Client::connect(up.addr).await;
    let records = [("k", "v"); 5];
    let (err, _) = support::produce(&mut direct, 9, "t", 1, support::batch(&records, 1000, None)).await;
    assert_eq!(err, 0);
    let mut c = sc.client().await;
    assert_eq!(commit(&mut c, "lagging", -1, "", 1, 2).await, 0);
    // The upstream's partition 1 ends at 5 and the group committed 2.
    let offset = eventually("the group view to show the lag", || async move {
        let (status, body) = http_get(http, "/v1/groups/lagging").await;
        assert_eq!(status, 200, "{body}");
        let view: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let o = view["offsets"].as_array()?.iter().find(|o| o["partition"] == 1)?.clone();
        o["lag"].is_i64().then_some(o)
    })
    .await;
    assert_eq!(
        (offset["offset"].as_i64(), offset["log_end_offset"].as_i64(), offset["lag"].as_i64()),
        (Some(2), Some(5), Some(3))
    );
    // And the lag gauge agrees.
    let (_, metrics) = http_get(http, "/metrics").await;
    assert!(metrics.contains("kcoord_consumer_lag{group=\"lagging\",topic=\"t\",partition=\"1\"} 3"), "{metrics}");
    // The console's data: the sampled total lag in the list, the samples in the view.
    eventually("the groups list to show the sampled total lag", || async move {
        let (_, body) = http_get(http, "/v1/groups").await;
        let list: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let g = list["groups"].as_array()?.iter().find(|g| g["group_id"] == "lagging")?.clone();
        (g["total_lag"] == 3).then_some(())
    })
    .await;
    let (_, body) = http_get(http, "/v1/groups/lagging").await;
    let view: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let o = view["offsets"].as_array().and_then(|os| os.iter().find(|o| o["partition"] == 1)).expect("offset");
    assert!(o["lag_samples"].as_array().is_some_and(|s| s.last().is_some_and(|s| s[1] == 3)), "{view:#}");
    let (status, page) = http_get(http, "/").await;
    assert_eq!(status, 200);
    assert!(page.contains("<title>kcoord console</title>"), "the console is served in sidecar mode too");
}

/// Makes `group` delegated (its offsets kept by the upstream's coordinator)
/// with a member-less TxnOffsetCommit; the standalone upstream has no
/// transactions, so the commit itself fails there, retriably.
async fn delegate(c: &mut Client, group: &str) {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(sb("tx")))
        .with_group_id(GroupId(sb(group)))
        .with_producer_id(ProducerId(1))
        .with_generation_id(-1)
        .with_member_id(sb(""))
        .with_topics(vec![TxnOffsetCommitRequestTopic::default().with_name(TopicName(sb("t"))).with_partitions(vec![
            TxnOffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(1),
        ])]);
    let r = c.send(&req, 3).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 14, "{r:?}");
}

#[tokio::test]
async fn deleting_offsets_of_a_delegated_group_deletes_them_upstream_before_answering() {
    let up = upstream().await;
    // A write-through far slower than the test: only a deletion made before
    // the answer can show upstream.
    let sc = sidecar(&up, &["sidecar.write_through_interval_ms=3600000"]).await;
    let mut c = sc.client().await;
    delegate(&mut c, "dg").await;
    assert_eq!(commit(&mut c, "dg", -1, "", 0, 5).await, 0);
    assert_eq!(commit(&mut c, "dg", -1, "", 1, 6).await, 0);
    let mut direct = up.client().await;
    assert_eq!(committed(&mut direct, "dg", 0).await, 5, "a delegated group's commits go upstream at once");
    let req = OffsetDeleteRequest::default().with_group_id(GroupId(sb("dg"))).with_topics(vec![
        offset_delete_request::OffsetDeleteRequestTopic::default().with_name(TopicName(sb("t"))).with_partitions(vec![
            offset_delete_request::OffsetDeleteRequestPartition::default().with_partition_index(0),
        ]),
    ]);
    let r = c.send(&req, 0).await;
    assert_eq!((r.error_code, r.topics[0].partitions[0].error_code), (0, 0), "{r:?}");
    assert_eq!(committed(&mut direct, "dg", 0).await, -1, "deleted upstream");
    assert_eq!(committed(&mut direct, "dg", 1).await, 6, "only what was asked");
    assert_eq!(committed(&mut c, "dg", 0).await, -1, "and so through the sidecar");
}
