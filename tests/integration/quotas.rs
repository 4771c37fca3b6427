//! Client quotas over TCP (KIP-219): a client over its request quota is
//! told how long to wait (`throttle_time_ms`) and its connection is not read
//! for that long; other clients are served meanwhile.
//!
//! Nothing here asserts an upper bound on time: the muted connection's next
//! answer can only come *after* the throttle, however slow the machine.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::messages::*;

/// Any work at all exceeds a millionth of a percent of a thread; the
/// throttle is then capped at one window (5 s).
const GREEDY: [&str; 3] = [
    "metrics.listen=\"127.0.0.1:0\"",
    "quotas.window_size_seconds=5",
    "quotas.entities=[{client_id = \"greedy\", request_percentage = 0.000001}]",
];

fn metadata() -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(vec![]))
}

async fn metrics_text(s: &TestServer) -> String {
    let http = s.daemon.as_ref().unwrap().metrics_addr().expect("metrics listener");
    http_get(http, "/metrics").await.1
}

#[tokio::test]
async fn a_client_over_its_request_quota_is_told_to_wait_and_is_not_read_meanwhile() {
    let s = TestServer::start_with(&GREEDY).await;
    let mut greedy = s.client().await;
    greedy.client_id = "greedy".into();
    let mut polite = s.client().await;
    polite.client_id = "polite".into();

    let sent = Instant::now();
    let first = greedy.send(&metadata(), 9).await;
    assert!(first.throttle_time_ms > 0, "over its quota: {}", first.throttle_time_ms);
    assert!(first.throttle_time_ms <= 5000, "a request throttle is capped at one window");
    let throttle = Duration::from_millis(first.throttle_time_ms as u64);

    // The next request is sent at once, as a client that ignores
    // throttle_time_ms would.
    let (_, frame) = greedy.frame(&metadata(), 9);
    greedy.send_raw(&frame).await.unwrap();
    let muted = tokio::spawn(async move {
        let answer = greedy.read_frame().await.expect("answered after the throttle");
        (Instant::now(), answer)
    });

    // Another client is served while the greedy one waits, unthrottled.
    let answer = polite.send(&metadata(), 9).await;
    let polite_at = Instant::now();
    assert_eq!(answer.throttle_time_ms, 0, "a client without a quota is never throttled");

    let (greedy_at, _) = muted.await.unwrap();
    assert!(greedy_at.duration_since(sent) >= throttle, "the throttled connection was read again too early");
    assert!(polite_at < greedy_at, "the other client was answered while the greedy one was muted");

    let m = metrics_text(&s).await;
    assert!(m.contains("kcoord_quota_throttled_requests_total{quota=\"request\"}"), "{m}");
    s.shutdown().await;
}

#[tokio::test]
async fn without_quotas_nobody_is_throttled() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    for _ in 0..20 {
        assert_eq!(c.send(&metadata(), 9).await.throttle_time_ms, 0);
    }
    s.shutdown().await;
}
