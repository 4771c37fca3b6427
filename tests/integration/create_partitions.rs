//! CreatePartitions over TCP: a topic grows in the catalog and the data
//! plane, durably, with Kafka's (KRaft controller's) errors.

use crate::common;
use crate::support;

use common::*;
use kafka_protocol::messages::create_partitions_request::{CreatePartitionsAssignment, CreatePartitionsTopic};
use kafka_protocol::messages::*;
use support::*;

fn grow(name: &str, count: i32) -> CreatePartitionsTopic {
    CreatePartitionsTopic::default().with_name(TopicName(sb(name))).with_count(count).with_assignments(None)
}

fn request(topics: Vec<CreatePartitionsTopic>, validate_only: bool) -> CreatePartitionsRequest {
    CreatePartitionsRequest::default().with_topics(topics).with_timeout_ms(30_000).with_validate_only(validate_only)
}

/// (name, error code, message) of each result, in answer order.
async fn send(
    c: &mut Client,
    version: i16,
    topics: Vec<CreatePartitionsTopic>,
    validate_only: bool,
) -> Vec<(String, i16, Option<String>)> {
    let r = c.send(&request(topics, validate_only), version).await;
    r.results
        .iter()
        .map(|x| (x.name.0.to_string(), x.error_code, x.error_message.as_ref().map(|m| m.to_string())))
        .collect()
}

async fn partition_count(c: &mut Client, topic: &str) -> usize {
    let req = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(sb(topic))))
    ]));
    let r = c.send(&req, 12).await;
    r.topics[0].partitions.len()
}

#[tokio::test]
async fn a_topic_grows_at_every_version_and_its_new_partitions_take_data_across_a_restart() {
    let mut s = TestServer::start_with(&["topics.define=[\"g0:1\", \"g1:1\", \"g2:1\", \"g3:1\"]"]).await;
    let mut c = s.client().await;
    for v in 0..=3i16 {
        let topic = format!("g{v}");
        let r = send(&mut c, v, vec![grow(&topic, 3)], false).await;
        assert_eq!(r, vec![(topic.clone(), 0, None)], "v{v}");
        assert_eq!(partition_count(&mut c, &topic).await, 3, "v{v}: Metadata lists the new partitions");
        let (err, base) = produce(&mut c, 9, &topic, 2, batch(&[("k", "v")], 1, None)).await;
        assert_eq!((err, base), (0, 0), "v{v}: the new partition takes data");
    }
    s.restart().await;
    let mut c = s.client().await;
    for v in 0..=3i16 {
        let topic = format!("g{v}");
        assert_eq!(partition_count(&mut c, &topic).await, 3, "the growth is durable");
        let (err, _, end, _) = list_offset(&mut c, 7, &topic, 2, -1).await;
        assert_eq!((err, end), (0, 1), "what the new partition took is durable");
    }
}

#[tokio::test]
async fn invalid_growths_get_kafkas_errors_and_change_nothing() {
    let s = TestServer::start_with(&["topics.define=[\"t:3\", \"u:1\"]"]).await;
    let mut c = s.client().await;
    let r = send(
        &mut c,
        3,
        vec![
            grow("t", 3),
            grow("t2", 4),
            grow("u", 4)
                .with_assignments(Some(vec![CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(0)])])),
        ],
        false,
    )
    .await;
    assert_eq!(
        r,
        vec![
            ("t".into(), 37, Some("Topic already has 3 partition(s).".into())),
            ("t2".into(), 3, Some("This server does not host this topic-partition.".into())),
            (
                "u".into(),
                39,
                Some("Attempted to add 3 additional partition(s), but only 1 assignment(s) were specified.".into())
            ),
        ]
    );
    let r = send(&mut c, 1, vec![grow("t", 2)], false).await;
    assert_eq!(r[0].1, 37, "INVALID_PARTITIONS");
    assert_eq!(r[0].2.as_deref(), Some("The topic t currently has 3 partition(s); 2 would not be an increase."));
    // A duplicate is refused once, before anything else.
    let r = send(&mut c, 2, vec![grow("u", 2), grow("u", 3)], false).await;
    assert_eq!(r, vec![("u".into(), 42, Some("Duplicate topic name.".into()))]);
    // A manual assignment must name this node.
    let bad = grow("u", 2)
        .with_assignments(Some(vec![CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(5)])]));
    let r = send(&mut c, 3, vec![bad], false).await;
    assert_eq!(r[0].1, 39, "INVALID_REPLICA_ASSIGNMENT");
    assert_eq!(partition_count(&mut c, "t").await, 3);
    assert_eq!(partition_count(&mut c, "u").await, 1);
}

#[tokio::test]
async fn validate_only_checks_without_growing_and_the_partition_cap_is_a_policy_violation() {
    let s = TestServer::start_with(&["topics.define=[\"t:2\"]", "topics.max_partitions=4"]).await;
    let mut c = s.client().await;
    let r = send(&mut c, 3, vec![grow("t", 4)], true).await;
    assert_eq!(r, vec![("t".into(), 0, None)]);
    assert_eq!(partition_count(&mut c, "t").await, 2, "validate_only changes nothing");
    let r = send(&mut c, 3, vec![grow("t", 5)], false).await;
    assert_eq!(r[0].1, 44, "POLICY_VIOLATION past topics.max_partitions: {r:?}");
    let manual = grow("t", 3)
        .with_assignments(Some(vec![CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(0)])]));
    assert_eq!(send(&mut c, 3, vec![manual], false).await, vec![("t".into(), 0, None)]);
    assert_eq!(partition_count(&mut c, "t").await, 3);
}
