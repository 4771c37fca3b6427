//! Black-box tests of ApiVersions, Metadata and FindCoordinator over TCP.

use crate::common;

use common::*;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kcoord::server::apis;

fn topic_names(r: &MetadataResponse) -> Vec<String> {
    r.topics.iter().map(|t| t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default()).collect()
}

#[tokio::test]
async fn every_api_versions_version_lists_exactly_what_we_serve() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    for v in 0..=4 {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(sb("kcoord-test"))
            .with_client_software_version(sb("1.0"));
        let r = c.send(&req, v).await;
        assert_eq!(r.error_code, 0, "v{v}");
        let got: Vec<(i16, i16, i16)> = r.api_keys.iter().map(|k| (k.api_key, k.min_version, k.max_version)).collect();
        let want: Vec<(i16, i16, i16)> = apis::supported().iter().map(|s| (s.key, s.min, s.max)).collect();
        assert_eq!(got, want, "v{v}");
    }
}

#[tokio::test]
async fn unsupported_api_versions_version_gets_error_35_in_v0_layout() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    // A hand-made v7 request: header v2 then an empty flexible body.
    let body: &[u8] = &[0, 18, 0, 7, 0, 0, 0, 42, 0, 1, b'x', 0, 1, 1, 0];
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    c.send_raw(&frame).await.unwrap();
    let resp = c.read_frame().await.unwrap();
    assert_eq!(&resp[..4], &42i32.to_be_bytes(), "correlation id, header v0");
    assert_eq!(&resp[4..6], &35i16.to_be_bytes(), "UNSUPPORTED_VERSION");
    let n = i32::from_be_bytes([resp[6], resp[7], resp[8], resp[9]]) as usize;
    assert_eq!(n, apis::supported().len());
    assert_eq!(resp.len(), 10 + 6 * n, "v0 body: no throttle time, no tagged fields");
    // The connection stays usable for the downgraded request.
    let r = c.send(&ApiVersionsRequest::default(), 0).await;
    assert_eq!(r.error_code, 0);
}

#[tokio::test]
async fn invalid_client_software_name_gets_invalid_request() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    for v in 3..=4 {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(sb("bad name!"))
            .with_client_software_version(sb("1.0"));
        let r = c.send(&req, v).await;
        assert_eq!(r.error_code, 42, "v{v}");
    }
}

#[tokio::test]
async fn metadata_at_every_version_lists_this_broker_and_the_catalog() {
    let s = TestServer::start_with(&["topics.define=[\"orders:6\", \"t1:2\"]"]).await;
    let mut c = s.client().await;
    for v in 0..=13i16 {
        let req = if v == 0 {
            MetadataRequest::default().with_topics(Some(vec![]))
        } else {
            MetadataRequest::default().with_topics(None)
        };
        let r = c.send(&req, v).await;
        assert_eq!(r.brokers.len(), 1, "v{v}");
        assert_eq!(r.brokers[0].node_id.0, 0);
        assert_eq!(r.brokers[0].host.to_string(), "127.0.0.1");
        assert_eq!(r.brokers[0].port, s.addr.port() as i32);
        if v >= 1 {
            assert_eq!(r.controller_id.0, 0, "v{v}: the controller is a listed broker");
        }
        if v >= 2 {
            assert_eq!(r.cluster_id.as_ref().map(|c| c.len()), Some(22), "v{v}");
        }
        assert_eq!(topic_names(&r), vec!["orders", "t1"], "v{v}");
        let orders = &r.topics[0];
        assert_eq!(orders.partitions.len(), 6);
        for p in &orders.partitions {
            assert_eq!(p.leader_id.0, 0);
            assert_eq!(p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(), vec![0]);
            assert_eq!(p.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>(), vec![0]);
        }
        if v >= 10 {
            assert!(!orders.topic_id.is_nil(), "v{v}: non-zero topic ids");
        }
    }
}

#[tokio::test]
async fn metadata_empty_list_means_no_topics_and_null_means_all() {
    let s = TestServer::start_with(&["topics.define=[\"a:1\"]"]).await;
    let mut c = s.client().await;
    for v in [1i16, 4, 9, 12, 13] {
        let r = c.send(&MetadataRequest::default().with_topics(Some(vec![])), v).await;
        assert!(r.topics.is_empty(), "v{v}: [] is brokers only");
        let r = c.send(&MetadataRequest::default().with_topics(None), v).await;
        assert_eq!(topic_names(&r), vec!["a"], "v{v}: null is all topics");
    }
}

fn named(name: &str) -> MetadataRequestTopic {
    MetadataRequestTopic::default().with_name(Some(TopicName(sb(name))))
}

#[tokio::test]
async fn unknown_topics_are_unknown_when_auto_creation_is_off() {
    let s = TestServer::start_with(&["topics.auto_create=false"]).await;
    let mut c = s.client().await;
    for v in [1i16, 5, 9, 12, 13] {
        let req =
            MetadataRequest::default().with_topics(Some(vec![named("nope")])).with_allow_auto_topic_creation(true);
        let r = c.send(&req, v).await;
        assert_eq!(r.topics[0].error_code, 3, "v{v}: UNKNOWN_TOPIC_OR_PARTITION");
    }
}

#[tokio::test]
async fn metadata_auto_creates_topics_when_allowed() {
    let s = TestServer::start_with(&["topics.default_partitions=3"]).await;
    let mut c = s.client().await;
    // A request that does not allow creation leaves the topic unknown.
    let req = MetadataRequest::default().with_topics(Some(vec![named("fresh")])).with_allow_auto_topic_creation(false);
    assert_eq!(c.send(&req, 12).await.topics[0].error_code, 3);
    let req = MetadataRequest::default().with_topics(Some(vec![named("fresh")])).with_allow_auto_topic_creation(true);
    let r = c.send(&req, 12).await;
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.topics[0].partitions.len(), 3);
    // Invalid names are rejected, not created.
    let req =
        MetadataRequest::default().with_topics(Some(vec![named("bad/name")])).with_allow_auto_topic_creation(true);
    assert_eq!(c.send(&req, 12).await.topics[0].error_code, 17, "INVALID_TOPIC_EXCEPTION");
}

#[tokio::test]
async fn cluster_id_and_topic_ids_survive_a_restart() {
    let mut s = TestServer::start_with(&["topics.define=[\"keep:2\"]"]).await;
    let before = s.client().await.send(&MetadataRequest::default().with_topics(None), 12).await;
    s.restart().await;
    let after = s.client().await.send(&MetadataRequest::default().with_topics(None), 12).await;
    assert_eq!(before.cluster_id, after.cluster_id);
    assert_eq!(before.topics[0].topic_id, after.topics[0].topic_id);
    // Lookup by id (name null) works from v12.
    let by_id = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(None)
        .with_topic_id(after.topics[0].topic_id)]));
    let r = s.client().await.send(&by_id, 12).await;
    assert_eq!(topic_names(&r), vec!["keep"]);
}

#[tokio::test]
async fn find_coordinator_returns_this_node_at_every_version() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    for v in 0..=3i16 {
        let r = c.send(&FindCoordinatorRequest::default().with_key(sb("my-group")), v).await;
        assert_eq!(r.error_code, 0, "v{v}");
        assert_eq!((r.node_id.0, r.host.to_string(), r.port), (0, "127.0.0.1".to_string(), s.addr.port() as i32));
    }
    for v in 4..=6i16 {
        let req = FindCoordinatorRequest::default().with_coordinator_keys(vec![sb("g1"), sb("g2"), sb("")]);
        let r = c.send(&req, v).await;
        assert_eq!(r.coordinators.len(), 3, "v{v}");
        for (co, key) in r.coordinators.iter().zip(["g1", "g2", ""]) {
            assert_eq!(co.key.to_string(), key);
            assert_eq!(co.error_code, 0);
            assert_eq!(co.node_id.0, 0);
            assert_eq!(co.port, s.addr.port() as i32);
        }
    }
}

#[tokio::test]
async fn find_coordinator_rejects_key_types_we_do_not_coordinate() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    // SHARE below v6 is an invalid request, with Kafka's no-node layout.
    let r = c.send(&FindCoordinatorRequest::default().with_key(sb("g")).with_key_type(2), 3).await;
    assert_eq!((r.error_code, r.node_id.0, r.host.to_string(), r.port), (42, -1, String::new(), -1));
    // No transaction coordinator: not retriable, so a transactional producer
    // fails at once with the message instead of retrying until it times out.
    let r = c.send(&FindCoordinatorRequest::default().with_coordinator_keys(vec![sb("t")]).with_key_type(1), 4).await;
    assert_eq!(r.coordinators[0].error_code, 35);
    assert_eq!(r.coordinators[0].node_id.0, -1);
    let message = r.coordinators[0].error_message.as_deref().map(ToString::to_string).unwrap_or_default();
    assert!(message.contains("does not coordinate transactions"), "{message}");
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let s = TestServer::start_with(&["topics.define=[\"p:3\"]"]).await;
    let mut c = s.client().await;
    let mut sent = Vec::new();
    let mut bytes = Vec::new();
    for i in 0..200 {
        let (corr, frame) = match i % 3 {
            0 => c.frame(&MetadataRequest::default().with_topics(None), 9),
            1 => c.frame(&ApiVersionsRequest::default(), 2),
            _ => c.frame(&FindCoordinatorRequest::default().with_key(sb("g")), 2),
        };
        sent.push(corr);
        bytes.extend_from_slice(&frame);
    }
    c.send_raw(&bytes).await.unwrap();
    for corr in sent {
        let frame = c.read_frame().await.unwrap();
        let got = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        assert_eq!(got, corr);
    }
}

#[tokio::test]
async fn an_unknown_api_closes_only_that_connection() {
    let s = TestServer::start().await;
    let mut bad = s.client().await;
    let mut good = s.client().await;
    // API key 1000 does not exist.
    let body: &[u8] = &[0x03, 0xe8, 0, 0, 0, 0, 0, 1, 0, 0];
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    bad.send_raw(&frame).await.unwrap();
    assert!(bad.is_closed().await);
    let r = good.send(&ApiVersionsRequest::default(), 0).await;
    assert_eq!(r.error_code, 0);
}

/// `docs/protocol-support.md` must list exactly what the registry serves
/// (`server::apis`), under the registry's names, and what a running daemon
/// advertises in ApiVersions.
#[tokio::test]
async fn protocol_support_doc_matches_the_advertised_versions() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol-support.md")).unwrap();
    let mut rows = Vec::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(|c| c.trim()).collect();
        // | Name | key | versions | ...
        if cells.len() > 4 {
            if let Ok(key) = cells[2].parse::<i16>() {
                let (min, max) =
                    cells[3].split_once('–').or_else(|| cells[3].split_once('-')).unwrap_or((cells[3], cells[3]));
                rows.push((
                    key,
                    min.trim().trim_start_matches('v').parse::<i16>().unwrap(),
                    max.trim().trim_start_matches('v').parse::<i16>().unwrap(),
                    cells[1].to_string(),
                ));
            }
        }
    }
    rows.sort();
    let registry: Vec<(i16, i16, i16, String)> =
        apis::supported().iter().map(|s| (s.key, s.min, s.max, s.name.to_string())).collect();
    assert_eq!(rows, registry, "docs/protocol-support.md is out of date");
    let s = TestServer::start().await;
    let advertised = s.client().await.send(&ApiVersionsRequest::default(), 0).await;
    let mut want: Vec<(i16, i16, i16)> =
        advertised.api_keys.iter().map(|k| (k.api_key, k.min_version, k.max_version)).collect();
    want.sort();
    let rows: Vec<(i16, i16, i16)> = rows.into_iter().map(|(k, min, max, _)| (k, min, max)).collect();
    assert_eq!(rows, want, "docs/protocol-support.md differs from the advertised versions");
}
