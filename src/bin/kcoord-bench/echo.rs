//! The framing limit: what this machine's TCP loopback and the load
//! generator allow, with no coordinator in the way.
//!
//! `echo` serves heartbeat frames without decoding them: it reads each
//! frame's length, copies its correlation id into a fixed Heartbeat answer
//! (error NONE), and writes every answer of a read with one write. It has the
//! daemon's shape (a multi-threaded runtime, a task per connection) but does
//! nothing per request beyond framing, so kcoord's throughput divided by the
//! echo's, measured the same way in one run, says how much of the machine's
//! limit the coordinator reaches. `raw-heartbeat` is its load: heartbeats
//! for no group at all (no formation; kcoord would answer them with errors).

use std::time::Instant;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::*;
use kcoord::protocol::client::{s, ClientError, Connection};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::load::{self, LaneResult};
use crate::stats::Report;

/// The Heartbeat version `raw-heartbeat` sends (the newest; flexible).
pub const RAW_HEARTBEAT_VERSION: i16 = 4;

/// Frames longer than this close the echo connection (heartbeats are tiny).
const MAX_FRAME: usize = 64 * 1024;

/// Serves heartbeat frames on `listen` until the process is stopped. Prints
/// "echo serving on ADDR" once listening.
pub async fn serve(listen: &str) -> Result<(), ClientError> {
    let listener = TcpListener::bind(listen).await?;
    println!("echo serving on {}", listener.local_addr()?);
    accept(listener).await
}

/// Serves every connection `listener` accepts.
async fn accept(listener: TcpListener) -> Result<(), ClientError> {
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            let _ = answer(stream).await;
        });
    }
}

/// Answers every complete frame read, with one write per read.
async fn answer(mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut input = BytesMut::with_capacity(64 * 1024);
    let mut output = BytesMut::with_capacity(64 * 1024);
    loop {
        if stream.read_buf(&mut input).await? == 0 {
            return Ok(());
        }
        while input.len() >= 4 {
            let len = i32::from_be_bytes([input[0], input[1], input[2], input[3]]);
            let Ok(len) = usize::try_from(len) else { return Ok(()) };
            if !(8..=MAX_FRAME).contains(&len) {
                return Ok(());
            }
            if input.len() < 4 + len {
                input.reserve(4 + len - input.len());
                break;
            }
            let frame = input.split_to(4 + len);
            // [len][api key i16][version i16][correlation i32]...
            let version = i16::from_be_bytes([frame[6], frame[7]]);
            put_answer(&mut output, &frame[8..12], version);
        }
        stream.write_all(&output).await?;
        output.clear();
        if input.is_empty() && input.capacity() > 1024 * 1024 {
            input = BytesMut::with_capacity(64 * 1024);
        }
    }
}

/// A Heartbeat answer with error NONE in the layout of `version`.
fn put_answer(out: &mut BytesMut, correlation: &[u8], version: i16) {
    let flexible = version >= 4;
    let body = if version >= 1 { 4 + 2 } else { 2 };
    let len = 4 + body + if flexible { 2 } else { 0 };
    out.put_i32(len);
    out.put_slice(correlation);
    if flexible {
        out.put_u8(0); // header tagged fields
    }
    if version >= 1 {
        out.put_i32(0); // throttle_time_ms
    }
    out.put_i16(0); // error_code
    if flexible {
        out.put_u8(0); // body tagged fields
    }
}

/// Heartbeats over `connections` connections, `depth` in flight on each,
/// without joining any group: the load the echo server answers.
pub async fn raw_heartbeat(c: &crate::scenarios::Common, connections: usize) -> Result<Report, ClientError> {
    let plain = kcoord::security::client::ClientSecurity::plaintext();
    let mut conns = Vec::with_capacity(connections);
    for i in 0..connections {
        conns.push(Connection::connect_with(&c.bootstrap, &format!("kcoord-bench-raw{i}"), &plain).await?);
    }
    let v = RAW_HEARTBEAT_VERSION;
    let cpu = crate::cpu::Meter::start();
    let start = Instant::now();
    let deadline = start + c.duration;
    let lanes = conns.iter_mut().enumerate().map(|(i, conn)| async move {
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(s(&format!("raw-{i}"))))
            .with_generation_id(1)
            .with_member_id(s("raw-member"));
        let templates = vec![load::template(conn, &req, v)?];
        load::run::<HeartbeatRequest>(conn, &templates, v, c.depth, deadline, c.max_requests, |r| (r.error_code, 1))
            .await
    });
    let mut res = LaneResult::default();
    for r in futures_util::future::join_all(lanes).await {
        res.merge(r?);
    }
    let elapsed = start.elapsed();
    let mut r = Report::new(
        "raw-heartbeat",
        json!({"connections": connections, "pipeline": c.depth, "duration_s": c.duration.as_secs_f64()}),
    );
    let mut lat = res.latencies.clone();
    r.latency("heartbeats", &mut lat, elapsed);
    cpu.report(&mut r, res.latencies.count());
    let errors: u64 = res.errors.values().sum();
    r.metric("errors", errors as f64, "count");
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;
    use kafka_protocol::protocol::{Decodable, HeaderVersion};
    use std::time::Duration;

    #[test]
    fn echo_answers_decode_as_heartbeat_responses_at_every_version() {
        for version in 0..=4i16 {
            let mut out = BytesMut::new();
            put_answer(&mut out, &7i32.to_be_bytes(), version);
            let mut b = out.freeze();
            let len = b.get_i32();
            assert_eq!(len as usize, b.len());
            let hv = <HeartbeatResponse as HeaderVersion>::header_version(version);
            let h = ResponseHeader::decode(&mut b, hv).unwrap();
            assert_eq!(h.correlation_id, 7);
            let r = HeartbeatResponse::decode(&mut b, version).unwrap();
            assert_eq!(r.error_code, 0);
            assert!(b.is_empty(), "version {version}");
        }
    }

    #[tokio::test]
    async fn echo_answers_pipelined_heartbeats_in_order() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(accept(listener));
        let plain = kcoord::security::client::ClientSecurity::plaintext();
        let mut conn = Connection::connect_with(&addr, "t", &plain).await.unwrap();
        let req = HeartbeatRequest::default().with_group_id(GroupId(s("g"))).with_member_id(s("m"));
        let templates = vec![load::template(&mut conn, &req, RAW_HEARTBEAT_VERSION).unwrap()];
        let deadline = Instant::now() + Duration::from_secs(60);
        let res = load::run::<HeartbeatRequest>(&mut conn, &templates, RAW_HEARTBEAT_VERSION, 8, deadline, 100, |r| {
            (r.error_code, 1)
        })
        .await
        .unwrap();
        assert_eq!(res.items, 100);
        assert!(res.errors.is_empty());
    }
}
