//! Steady-state pipelined load: each connection keeps `depth` requests in
//! flight, cycling through pre-encoded request templates (only the
//! correlation id is rewritten per send, so the client spends its CPU on the
//! network, not on encoding), until a deadline or a request budget.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::Request;
use kcoord::protocol::client::{ClientError, Connection};

use crate::stats::Latencies;

/// What one connection achieved.
#[derive(Debug, Default)]
pub struct LaneResult {
    pub latencies: Latencies,
    pub errors: HashMap<i16, u64>,
    pub items: u64,
}

impl LaneResult {
    pub fn merge(&mut self, other: LaneResult) {
        self.latencies.merge(other.latencies);
        for (k, v) in other.errors {
            *self.errors.entry(k).or_insert(0) += v;
        }
        self.items += other.items;
    }
}

/// Encodes a template frame; its correlation id is patched on every send.
pub fn template<R: Request>(conn: &mut Connection, req: &R, version: i16) -> Result<Bytes, ClientError> {
    Ok(conn.encode(req, version)?.1)
}

fn with_correlation(template: &Bytes, correlation: i32) -> BytesMut {
    let mut f = BytesMut::from(&template[..]);
    // [len i32][api key i16][version i16][correlation i32]...
    f[8..12].copy_from_slice(&correlation.to_be_bytes());
    f
}

/// Counts the answer read as `(correlation, outcome)` to the request sent
/// as `(correlation, at)`.
fn count(
    (want, at): (i32, Instant),
    (got, (error, items)): (i32, (i16, u64)),
    result: &mut LaneResult,
) -> Result<(), ClientError> {
    if got != want {
        return Err(ClientError::Correlation { want, got });
    }
    result.latencies.record(at.elapsed());
    if error != 0 {
        *result.errors.entry(error).or_insert(0) += 1;
    }
    result.items += items;
    Ok(())
}

/// Drives one connection. `outcome` returns (error code to count, items
/// served: e.g. partitions committed) for each response.
pub async fn run<R: Request>(
    conn: &mut Connection,
    templates: &[Bytes],
    version: i16,
    depth: usize,
    deadline: Instant,
    max_requests: u64,
    outcome: impl Fn(&R::Response) -> (i16, u64),
) -> Result<LaneResult, ClientError> {
    let outcome = &outcome;
    run_reading(conn, templates, depth, deadline, max_requests, async |conn: &mut Connection| {
        let (correlation, resp) = conn.read::<R>(version).await?;
        Ok((correlation, outcome(&resp)))
    })
    .await
}

/// [`run`] for answers the `kafka-protocol` crate cannot decode: `outcome`
/// reads each response body itself.
pub async fn run_raw(
    conn: &mut Connection,
    templates: &[Bytes],
    header_version: i16,
    depth: usize,
    deadline: Instant,
    max_requests: u64,
    outcome: impl Fn(Bytes) -> Result<(i16, u64), ClientError>,
) -> Result<LaneResult, ClientError> {
    let outcome = &outcome;
    run_reading(conn, templates, depth, deadline, max_requests, async |conn: &mut Connection| {
        let (correlation, body) = conn.read_body(header_version).await?;
        Ok((correlation, outcome(body)?))
    })
    .await
}

/// The pipelined loop of [`run`]; `read` reads the next answer as
/// (correlation id, outcome).
async fn run_reading(
    conn: &mut Connection,
    templates: &[Bytes],
    depth: usize,
    deadline: Instant,
    max_requests: u64,
    read: impl AsyncFn(&mut Connection) -> Result<(i32, (i16, u64)), ClientError>,
) -> Result<LaneResult, ClientError> {
    let mut result = LaneResult::default();
    if templates.is_empty() {
        return Ok(result);
    }
    let mut inflight: VecDeque<(i32, Instant)> = VecDeque::with_capacity(depth);
    let mut next = 0usize;
    let mut correlation: i32 = 1_000_000;
    let mut sent: u64 = 0;
    loop {
        let mut wrote = false;
        while inflight.len() < depth && Instant::now() < deadline && sent < max_requests {
            correlation = correlation.wrapping_add(1);
            let frame = with_correlation(&templates[next % templates.len()], correlation);
            next += 1;
            conn.buffer(&frame).await?;
            inflight.push_back((correlation, Instant::now()));
            sent += 1;
            wrote = true;
        }
        if wrote {
            conn.flush().await?;
        }
        let Some(first) = inflight.pop_front() else { return Ok(result) };
        count(first, read(conn).await?, &mut result)?;
        // Read whatever else already arrived before writing again.
        while conn.response_buffered() {
            let Some(next) = inflight.pop_front() else { break };
            count(next, read(conn).await?, &mut result)?;
        }
    }
}
