//! Connection limits and timeouts over TCP: stalled sockets cannot lock
//! legitimate clients out. Connections past `server.max_connections` or
//! `server.max_connections_per_ip` are closed at once and counted; idle
//! connections and requests that never finish arriving are reaped.
//!
//! Timeouts are short and every wait is bounded by the generous
//! [`DEADLINE`]; nothing asserts how long anything took.

use crate::common;

use std::net::IpAddr;

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Timeouts off, so that only a limit can close a connection.
const NO_TIMEOUTS: [&str; 2] = ["server.connections_max_idle_ms=-1", "server.partial_request_timeout_ms=-1"];

async fn metrics(s: &TestServer) -> String {
    let http = s.daemon.as_ref().unwrap().metrics_addr().expect("metrics listener");
    let mut c = tokio::net::TcpStream::connect(http).await.unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n").await.unwrap();
    let mut buf = String::new();
    c.read_to_string(&mut buf).await.unwrap();
    buf
}

/// A counter's value, 0 while the series does not exist yet. The recorder
/// is shared by every daemon of this test binary, so tests compare before
/// and after rather than expect exact values.
fn counter(metrics: &str, series: &str) -> f64 {
    metrics.lines().find(|l| l.starts_with(series)).and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0.0)
}

/// True if the client gets an answer to ApiVersions.
async fn served(c: &mut Client) -> bool {
    let (_, frame) = c.frame(&ApiVersionsRequest::default(), 0);
    if c.send_raw(&frame).await.is_err() {
        return false;
    }
    c.read_frame().await.is_ok()
}

async fn served_client(s: &TestServer) -> Client {
    let mut c = s.client().await;
    assert!(served(&mut c).await, "a client within the limits is served");
    c
}

/// A connection that sent the first byte of a request and nothing more.
async fn stalled(addr: std::net::SocketAddr, from: IpAddr) -> Client {
    let mut c = Client::try_connect_from(addr, from).await.expect("connect");
    c.send_raw(&[0]).await.expect("send one byte");
    c
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test]
async fn a_connection_past_max_connections_is_closed_at_once_and_counted() {
    let mut settings = vec!["server.max_connections=2", "metrics.listen=\"127.0.0.1:0\""];
    settings.extend(NO_TIMEOUTS);
    let s = TestServer::start_with(&settings).await;
    let series = "kcoord_connections_refused_total{reason=\"max_connections\"}";
    let before = counter(&metrics(&s).await, series);
    let first = served_client(&s).await;
    let _second = served_client(&s).await;

    let mut third = s.client().await;
    assert!(third.is_closed().await, "the third connection is closed by the server");
    assert!(counter(&metrics(&s).await, series) > before);

    // A closed connection frees its place.
    drop(first);
    eventually("a place to free up", || async {
        let mut c = Client::try_connect(s.addr).await.ok()?;
        served(&mut c).await.then_some(())
    })
    .await;
    s.shutdown().await;
}

#[tokio::test]
async fn stalled_sockets_at_the_connection_limit_are_reaped_and_a_client_gets_in() {
    // The scenario, scaled down: every place taken by a socket that
    // sent one byte.
    let s = TestServer::start_with(&[
        "server.max_connections=4",
        "server.partial_request_timeout_ms=300",
        "metrics.listen=\"127.0.0.1:0\"",
    ])
    .await;
    let series = "kcoord_connections_closed_total{reason=\"partial_request_timeout\"}";
    let before = counter(&metrics(&s).await, series);
    let mut attackers = Vec::new();
    for _ in 0..4 {
        attackers.push(stalled(s.addr, ip("127.0.0.1")).await);
    }
    eventually("a legitimate client to be served", || async {
        let mut c = Client::try_connect(s.addr).await.ok()?;
        served(&mut c).await.then_some(())
    })
    .await;
    for a in &mut attackers {
        assert!(a.is_closed().await, "a stalled socket is closed");
    }
    assert!(counter(&metrics(&s).await, series) >= before + 4.0);
    s.shutdown().await;
}

#[tokio::test]
async fn a_connection_that_never_sends_a_request_is_closed() {
    let s = TestServer::start_with(&["server.partial_request_timeout_ms=200"]).await;
    let mut silent = s.client().await;
    assert!(silent.is_closed().await);
    s.shutdown().await;
}

#[tokio::test]
async fn a_request_arriving_slowly_but_within_the_partial_request_timeout_is_served() {
    let s = TestServer::start_with(&["server.partial_request_timeout_ms=30000"]).await;
    let mut c = s.client().await;
    let (_, frame) = c.frame(&ApiVersionsRequest::default(), 0);
    for byte in frame.iter() {
        c.send_raw(&[*byte]).await.unwrap();
        tokio::task::yield_now().await;
    }
    assert!(c.read_frame().await.is_ok());
    s.shutdown().await;
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_connections_max_idle_ms() {
    let s = TestServer::start_with(&["server.connections_max_idle_ms=300", "metrics.listen=\"127.0.0.1:0\""]).await;
    let series = "kcoord_connections_closed_total{reason=\"idle\"}";
    let before = counter(&metrics(&s).await, series);
    let mut c = served_client(&s).await;
    assert!(c.is_closed().await, "an idle connection is closed");
    assert!(counter(&metrics(&s).await, series) > before);
    s.shutdown().await;
}

#[tokio::test]
async fn a_request_in_flight_longer_than_the_idle_timeout_is_answered() {
    // JoinGroup v3 waits out the initial rebalance delay, several idle
    // timeouts long, with nothing read or written meanwhile.
    let s =
        TestServer::start_with(&["server.connections_max_idle_ms=100", "group.initial_rebalance_delay_ms=1500"]).await;
    let mut c = s.client().await;
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(sb("parked")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(sb("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(sb("range"))
            .with_metadata(Bytes::from_static(b"\x00\x00\x00\x00\x00\x01\x00\x01t"))]);
    let resp = c.send(&join, 3).await;
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.generation_id, 1);
    s.shutdown().await;
}

#[tokio::test]
async fn the_per_ip_limit_lets_a_client_from_another_address_in() {
    let mut settings =
        vec!["server.max_connections=10", "server.max_connections_per_ip=2", "metrics.listen=\"127.0.0.1:0\""];
    settings.extend(NO_TIMEOUTS);
    let s = TestServer::start_with(&settings).await;
    let series = "kcoord_connections_refused_total{reason=\"max_connections_per_ip\"}";
    let before = counter(&metrics(&s).await, series);
    // Served, so certainly admitted before the next one connects.
    let mut attackers = Vec::new();
    for _ in 0..2 {
        let mut a = Client::try_connect_from(s.addr, ip("127.0.0.1")).await.unwrap();
        assert!(served(&mut a).await);
        a.send_raw(&[0]).await.unwrap();
        attackers.push(a);
    }
    let mut third = Client::try_connect_from(s.addr, ip("127.0.0.1")).await.unwrap();
    assert!(third.is_closed().await, "a third connection from the same address is closed");
    assert!(counter(&metrics(&s).await, series) > before);

    let mut other = Client::try_connect_from(s.addr, ip("127.0.0.2")).await.unwrap();
    assert!(served(&mut other).await, "a client from another address is served");
    s.shutdown().await;
}

#[tokio::test]
async fn an_override_gives_one_address_its_own_per_ip_limit() {
    let mut settings =
        vec!["server.max_connections_per_ip=1", "server.max_connections_per_ip_overrides=\"127.0.0.2:3,127.0.0.3:0\""];
    settings.extend(NO_TIMEOUTS);
    let s = TestServer::start_with(&settings).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut c = Client::try_connect_from(s.addr, ip("127.0.0.2")).await.unwrap();
        assert!(served(&mut c).await, "the override admits three from 127.0.0.2");
        held.push(c);
    }
    let mut fourth = Client::try_connect_from(s.addr, ip("127.0.0.2")).await.unwrap();
    assert!(fourth.is_closed().await);
    let mut denied = Client::try_connect_from(s.addr, ip("127.0.0.3")).await.unwrap();
    assert!(denied.is_closed().await, "an override of 0 admits nobody from that address");
    let mut one = Client::try_connect_from(s.addr, ip("127.0.0.1")).await.unwrap();
    assert!(served(&mut one).await);
    let mut two = Client::try_connect_from(s.addr, ip("127.0.0.1")).await.unwrap();
    assert!(two.is_closed().await, "other addresses keep the default of 1");
    s.shutdown().await;
}
