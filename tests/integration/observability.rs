//! The metrics and JSON HTTP endpoints against a running daemon: values move
//! as groups rebalance and commit, and the rebalance history says why.

use crate::common;
use crate::support;

use common::consumer;
use common::http_get as get;
use common::*;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::*;

/// The value of a Prometheus sample whose line starts with `prefix`.
fn sample(metrics: &str, prefix: &str) -> Option<f64> {
    metrics.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

/// A sample's value, 0 when the series is absent (not yet recorded).
fn value(metrics: &str, prefix: &str) -> f64 {
    sample(metrics, prefix).unwrap_or(0.0)
}

/// Asserts that each series grew between two scrapes.
fn assert_grew(before: &str, after: &str, series: &[&str]) {
    for s in series {
        assert!(
            value(after, s) > value(before, s),
            "{s} did not grow: {} -> {}\n{after}",
            value(before, s),
            value(after, s)
        );
    }
}

fn lag_of(metrics: &str, group: &str, topic: &str, partition: i32) -> Option<f64> {
    sample(metrics, &format!("kcoord_consumer_lag{{group=\"{group}\",topic=\"{topic}\",partition=\"{partition}\"}}"))
}

#[tokio::test]
async fn metrics_and_group_api_follow_rebalances_and_commits() {
    let s = TestServer::start_with(&[
        "metrics.listen=\"127.0.0.1:0\"",
        "topics.define=[\"t:4\"]",
        // Every write is fsynced, so the fsync histograms move.
        "storage.fsync=\"always\"",
        // Lets a member with a short session expire quickly.
        "group.min_session_timeout_ms=100",
    ])
    .await;
    let http = s.daemon.as_ref().unwrap().metrics_addr().expect("metrics listener");
    let (_, m0) = get(http, "/metrics").await;
    let mut c = s.client().await;

    // One member forms the group and takes every partition.
    let j = consumer::join(&mut c, consumer::join_request("obs", "", &["t"])).await;
    assert_eq!(j.error_code, 0);
    let a = j.member_id.to_string();
    let r = consumer::sync(&mut c, "obs", j.generation_id, &a, &[(&a, consumer::assignment("t", &[0, 1, 2, 3]))]).await;
    assert_eq!(r.error_code, 0);
    let commit = |generation: i32, offsets: &[(i32, i64)]| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("obs")))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(sb(&a))
            .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb("t"))).with_partitions(
                offsets
                    .iter()
                    .map(|(p, o)| {
                        OffsetCommitRequestPartition::default().with_partition_index(*p).with_committed_offset(*o)
                    })
                    .collect(),
            )])
    };
    let committed = c.send(&commit(j.generation_id, &[(0, 0), (1, 0)]), 8).await;
    assert!(committed.topics[0].partitions.iter().all(|p| p.error_code == 0));

    let (status, m1) = get(http, "/metrics").await;
    assert_eq!(status, 200);
    let m = &m1;
    assert!(value(m, "kcoord_requests_total{api=\"JoinGroup\",version=\"8\"}") >= 2.0, "{m}");
    assert!(value(m, "kcoord_request_errors_total{api=\"JoinGroup\",error=\"MEMBER_ID_REQUIRED\"}") >= 1.0);
    assert!(m.contains("kcoord_request_duration_seconds_bucket{api=\"OffsetCommit\",version=\"8\""), "{m}");
    assert_eq!(sample(m, "kcoord_groups{state=\"Stable\",type=\"classic\"}"), Some(1.0), "{m}");
    assert!(value(m, "kcoord_rebalances_total{cause=\"member_joined\"}") >= 1.0);
    assert!(value(m, "kcoord_committed_partitions_total") >= 2.0);
    assert_eq!(sample(m, "kcoord_group_members"), Some(1.0), "{m}");
    assert_eq!(sample(m, "kcoord_committed_offsets"), Some(2.0), "{m}");
    assert!(value(m, "kcoord_connections ") >= 1.0, "{m}");
    assert_grew(
        &m0,
        m,
        &[
            "kcoord_connections_total",
            "kcoord_rebalance_duration_seconds_count",
            "kcoord_log_appends_total",
            "kcoord_log_appended_records_total",
            "kcoord_fsync_duration_seconds_count",
            "kcoord_fsync_batch_records_count",
        ],
    );
    // One mailbox series per shard (TEST_DEFAULTS: offsets.partitions=8).
    let shards =
        (0..8).filter(|i| sample(m, &format!("kcoord_shard_mailbox_depth{{shard=\"{i}\"}}")).is_some()).count();
    assert_eq!(shards, 8, "{m}");

    // The leader rejoins: a second rebalance with its own cause.
    let j2 = consumer::join(&mut c, consumer::join_request("obs", &a, &["t"])).await;
    assert_eq!(j2.generation_id, j.generation_id + 1);
    let r =
        consumer::sync(&mut c, "obs", j2.generation_id, &a, &[(&a, consumer::assignment("t", &[0, 1, 2, 3]))]).await;
    assert_eq!(r.error_code, 0);
    let committed = c.send(&commit(j2.generation_id, &[(2, 0)]), 8).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let (_, m2) = get(http, "/metrics").await;
    assert_eq!(
        sample(&m2, "kcoord_rebalances_total{cause=\"leader_rejoined\"}"),
        Some(value(&m1, "kcoord_rebalances_total{cause=\"leader_rejoined\"}") + 1.0)
    );
    assert_eq!(sample(&m2, "kcoord_committed_offsets"), Some(3.0), "{m2}");
    assert_grew(
        &m1,
        &m2,
        &[
            "kcoord_rebalance_duration_seconds_count",
            "kcoord_log_appends_total",
            "kcoord_log_appended_records_total",
            "kcoord_fsync_duration_seconds_count",
            "kcoord_fsync_batch_records_count",
        ],
    );

    let (status, body) = get(http, "/v1/groups").await;
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let g = v["groups"].as_array().unwrap().iter().find(|g| g["group_id"] == "obs").unwrap();
    assert_eq!(g["state"], "Stable");
    assert_eq!(g["members"], 1);
    assert_eq!(g["last_rebalance_cause"], "leader_rejoined");

    let (status, body) = get(http, "/v1/groups/obs").await;
    assert_eq!(status, 200);
    let d: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(d["generation"], j2.generation_id);
    assert_eq!(d["members"][0]["member_id"], a.as_str());
    assert_eq!(d["members"][0]["client_host"], "/127.0.0.1");
    assert_eq!(d["members"][0]["assignment"][0]["topic"], "t");
    assert_eq!(d["members"][0]["assignment"][0]["partitions"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(d["offsets"].as_array().unwrap().len(), 3);
    assert_eq!(d["offsets"][0]["log_end_offset"], 0, "standalone mode knows the log end");
    assert_eq!(d["offsets"][0]["lag"], 0);
    let history = d["rebalances"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0]["cause"]["kind"], "member_joined");
    assert_eq!(history[0]["cause"]["reason"], "starting up");
    assert_eq!(history[0]["cause"]["client_id"], "kcoord-test");
    assert_eq!(history[0]["outcome"], "stable");
    assert_eq!(history[1]["cause"]["kind"], "leader_rejoined");
    assert_eq!(history[1]["generation_after"], j2.generation_id);

    // Consumer lag follows the log end and the commits (standalone mode).
    assert_eq!(lag_of(&m2, "obs", "t", 0), Some(0.0), "{m2}");
    let five = [("k", "v"); 5];
    assert_eq!(support::produce(&mut c, 9, "t", 0, support::batch(&five, 0, None)).await.0, 0);
    let (_, m3) = get(http, "/metrics").await;
    assert_eq!(lag_of(&m3, "obs", "t", 0), Some(5.0), "records produced, nothing committed: {m3}");
    let committed = c.send(&commit(j2.generation_id, &[(0, 2)]), 8).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let (_, m4) = get(http, "/metrics").await;
    assert_eq!(lag_of(&m4, "obs", "t", 0), Some(3.0), "{m4}");
    assert_eq!(lag_of(&m4, "obs", "t", 1), Some(0.0), "{m4}");

    // A member with a short session that never heartbeats expires.
    let short = consumer::join_request("obs-expiring", "", &["t"]).with_session_timeout_ms(500);
    assert_eq!(consumer::join(&mut c, short).await.error_code, 0);
    // Waited for on the group itself: the counters are the process's, and
    // other tests' sessions expire too.
    let d = eventually("the silent member's session to expire", || async {
        let (_, body) = get(http, "/v1/groups/obs-expiring").await;
        let d: serde_json::Value = serde_json::from_str(&body).ok()?;
        (d["state"] == "Empty").then_some(d)
    })
    .await;
    let (_, expired) = get(http, "/metrics").await;
    assert!(
        value(&expired, "kcoord_session_expirations_total") > value(&m4, "kcoord_session_expirations_total"),
        "{expired}"
    );
    assert!(value(&expired, "kcoord_rebalances_total{cause=\"session_expired\"}") >= 1.0, "{expired}");
    let causes: Vec<&str> =
        d["rebalances"].as_array().unwrap().iter().filter_map(|r| r["cause"]["kind"].as_str()).collect();
    assert_eq!(causes, ["member_joined", "session_expired"], "{d}");

    let (status, _) = get(http, "/v1/groups/no-such-group").await;
    assert_eq!(status, 404);
    let (status, _) = get(http, "/nowhere").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_request_that_closes_its_connection_is_counted_as_a_request_and_an_error() {
    let s = TestServer::start_with(&["metrics.listen=\"127.0.0.1:0\""]).await;
    let http = s.daemon.as_ref().unwrap().metrics_addr().expect("metrics listener");
    let requests = "kcoord_requests_total{api=\"Heartbeat\",version=\"2\"}";
    let errors = "kcoord_request_errors_total{api=\"Heartbeat\",error=\"closed_decode_error\"}";
    let (_, m) = get(http, "/metrics").await;
    let (requests_before, errors_before) = (sample(&m, requests).unwrap_or(0.0), sample(&m, errors).unwrap_or(0.0));

    // A Heartbeat whose body stops half-way: no answer, the connection closes.
    let mut c = s.client().await;
    let req = HeartbeatRequest::default().with_group_id(GroupId(sb("g"))).with_member_id(sb("m"));
    let (_, frame) = c.frame(&req, 2);
    let cut = frame.len() - 6;
    let mut bad = frame[..cut].to_vec();
    bad[..4].copy_from_slice(&((cut - 4) as i32).to_be_bytes());
    c.send_raw(&bad).await.unwrap();
    assert!(c.is_closed().await, "a body that does not decode closes the connection");

    let (_, m) = get(http, "/metrics").await;
    assert_eq!(sample(&m, requests), Some(requests_before + 1.0), "{m}");
    assert_eq!(sample(&m, errors), Some(errors_before + 1.0), "{m}");
    assert!(m.contains("kcoord_request_duration_seconds_bucket{api=\"Heartbeat\",version=\"2\""), "{m}");
}

/// Commits `offset` for each partition of `topic` as a group without members.
async fn commit_offsets(c: &mut Client, group: &str, topic: &str, offsets: &[(i32, i64)]) {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb(topic))).with_partitions(
            offsets
                .iter()
                .map(|(p, o)| {
                    OffsetCommitRequestPartition::default().with_partition_index(*p).with_committed_offset(*o)
                })
                .collect(),
        )]);
    let r = c.send(&req, 8).await;
    assert!(r.topics[0].partitions.iter().all(|p| p.error_code == 0), "{r:?}");
}

fn lag_series(group: &str, partition: i32) -> String {
    format!("kcoord_consumer_lag{{group=\"{group}\",topic=\"lagged\",partition=\"{partition}\"}}")
}

#[tokio::test]
async fn consumer_lag_series_disappear_with_their_offsets_group_and_topic() {
    let s = TestServer::start_with(&["metrics.listen=\"127.0.0.1:0\"", "topics.define=[\"lagged:2\"]"]).await;
    let http = s.daemon.as_ref().unwrap().metrics_addr().expect("metrics listener");
    let mut c = s.client().await;
    let five = [("k", "v"); 5];
    for p in 0..2 {
        assert_eq!(support::produce(&mut c, 9, "lagged", p, support::batch(&five, 0, None)).await.0, 0);
    }
    commit_offsets(&mut c, "lag-a", "lagged", &[(0, 2), (1, 2)]).await;
    commit_offsets(&mut c, "lag-b", "lagged", &[(0, 1)]).await;
    let (_, m) = get(http, "/metrics").await;
    assert_eq!(sample(&m, &lag_series("lag-a", 0)), Some(3.0), "{m}");
    assert_eq!(sample(&m, &lag_series("lag-a", 1)), Some(3.0), "{m}");
    assert_eq!(sample(&m, &lag_series("lag-b", 0)), Some(4.0), "{m}");

    // An offset deleted: its series goes, the group's others stay.
    let delete_offset = OffsetDeleteRequest::default().with_group_id(GroupId(sb("lag-a"))).with_topics(vec![
        offset_delete_request::OffsetDeleteRequestTopic::default().with_name(TopicName(sb("lagged"))).with_partitions(
            vec![offset_delete_request::OffsetDeleteRequestPartition::default().with_partition_index(1)],
        ),
    ]);
    assert_eq!(c.send(&delete_offset, 0).await.error_code, 0);
    let (_, m) = get(http, "/metrics").await;
    assert_eq!(sample(&m, &lag_series("lag-a", 1)), None, "{m}");
    assert_eq!(sample(&m, &lag_series("lag-a", 0)), Some(3.0), "{m}");

    // A group deleted: all of its series go.
    let delete_group = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb("lag-b"))]);
    assert_eq!(c.send(&delete_group, 2).await.results[0].error_code, 0);
    let (_, m) = get(http, "/metrics").await;
    assert_eq!(sample(&m, &lag_series("lag-b", 0)), None, "{m}");

    // The topic deleted: nothing is left.
    assert_eq!(support::delete_topics(&mut c, 6, &["lagged"]).await[0].error_code, 0);
    let (_, m) = get(http, "/metrics").await;
    assert!(!m.contains("topic=\"lagged\""), "{m}");
}

#[tokio::test]
async fn the_group_api_shows_a_consumer_protocol_group_with_epochs_assignments_and_offsets() {
    let s = TestServer::start_with(&["metrics.listen=\"127.0.0.1:0\"", "topics.define=[\"t:4\"]"]).await;
    let http = s.daemon.as_ref().unwrap().metrics_addr().expect("metrics listener");
    let mut c = s.client().await;
    let member = "m0aaaaaaaaaaaaaaaaaaaa";
    let hb = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g848")))
        .with_member_id(sb(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(sb("t"))]))
        .with_topic_partitions(Some(vec![]));
    let r = c.send(&hb, 1).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1), "{r:?}");
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb("g848")))
        .with_generation_id_or_member_epoch(1)
        .with_member_id(sb(member))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb("t"))).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(2).with_committed_offset(0),
        ])]);
    assert_eq!(c.send(&commit, 9).await.topics[0].partitions[0].error_code, 0);

    let (status, body) = get(http, "/v1/groups").await;
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let listed = list["groups"].as_array().unwrap().iter().find(|g| g["group_id"] == "g848").expect("listed").clone();
    assert_eq!((listed["protocol_type"].as_str(), listed["members"].as_i64()), (Some("consumer"), Some(1)), "{listed}");

    let (status, body) = get(http, "/v1/groups/g848").await;
    assert_eq!(status, 200, "{body}");
    let g: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (g["state"].as_str(), g["group_epoch"].as_i64(), g["assignor"].as_str()),
        (Some("Stable"), Some(1), Some("uniform")),
        "{g}"
    );
    let m = &g["members"][0];
    assert_eq!(
        (m["member_id"].as_str(), m["member_epoch"].as_i64(), m["member_type"].as_str()),
        (Some(member), Some(1), Some("consumer"))
    );
    assert_eq!(m["assignment"][0]["topic"], "t");
    assert_eq!(m["assignment"][0]["partitions"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(m["target_assignment"], m["assignment"]);
    let o = &g["offsets"][0];
    assert_eq!((o["partition"].as_i64(), o["offset"].as_i64(), o["lag"].as_i64()), (Some(2), Some(0), Some(0)), "{g}");
    // Its epoch history: the join that created epoch 1, converged at once.
    let e = &g["rebalances"][0];
    assert_eq!(
        (e["cause"]["kind"].as_str(), e["cause"]["member_id"].as_str(), e["group_epoch"].as_i64()),
        (Some("member_joined"), Some(member), Some(1)),
        "{g}"
    );
    assert_eq!((e["outcome"].as_str(), e["convergence_ms"].as_i64()), (Some("converged"), Some(0)), "{g}");
    assert_eq!(listed["last_rebalance_cause"].as_str(), Some("member_joined"), "{listed}");
}
