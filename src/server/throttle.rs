//! Client quotas on the request path: what serving a request cost, charged
//! to its user and client id, and the throttle that follows (KIP-219).
//!
//! As Kafka's brokers do for every API version: the answer leaves at once
//! with `throttle_time_ms` set, and the connection reads nothing more from
//! the client until the throttle is over. A client that honours
//! `throttle_time_ms` waits by itself; one that does not finds its next
//! request unread for that long. Only the offending connection is muted.

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::dispatch::RequestContext;
use crate::quota::{Client, Quotas, Usage};

/// Runs `f`, adding up the time spent inside its polls: the work of
/// serving a request, not the time it waits (a parked JoinGroup, an fsync),
/// which is what Kafka's request quota measures as thread time.
pub async fn busy<F: Future>(f: F) -> (F::Output, Duration) {
    let mut f = std::pin::pin!(f);
    let mut busy = Duration::ZERO;
    let out = std::future::poll_fn(|cx| {
        let start = Instant::now();
        let polled = f.as_mut().poll(cx);
        busy += start.elapsed();
        polled
    })
    .await;
    (out, busy)
}

/// What a served request is charged.
pub struct Served<'a> {
    pub ctx: &'a RequestContext,
    pub busy: Duration,
    pub request_bytes: usize,
    /// Whether an answer is sent (an acks=0 Produce gets none and, as in
    /// Kafka, is charged no request time).
    pub answered: bool,
    pub flexible: bool,
}

/// Charges a served request and writes the throttle into its answer
/// (`body_at`: where the response body starts in `out`); returns until
/// when the connection is muted, if it is throttled.
pub fn charge(quotas: &Quotas, s: Served<'_>, out: &mut BytesMut, body_at: usize) -> Option<tokio::time::Instant> {
    use crate::protocol::api::{fetch, produce};
    let key = s.ctx.header.api_key;
    let answer_bytes = out.len().saturating_sub(body_at) as u64;
    let usage = Usage {
        busy_nanos: s.answered.then(|| u64::try_from(s.busy.as_nanos()).unwrap_or(u64::MAX)),
        produced_bytes: if key == produce::SUPPORT.key { s.request_bytes as u64 } else { 0 },
        fetched_bytes: if key == fetch::SUPPORT.key && s.answered { answer_bytes } else { 0 },
    };
    let client_id = s.ctx.client_id();
    let client = Client::new(&s.ctx.caller.principal, &client_id);
    let throttled = quotas.charge(client, usage);
    let ms = throttled.iter().map(|&(_, ms)| ms).max()?;
    for (kind, _) in &throttled {
        metrics::counter!("kcoord_quota_throttled_requests_total", "quota" => kind.label()).increment(1);
    }
    metrics::histogram!("kcoord_quota_throttle_time_ms").record(ms as f64);
    let ms32 = i32::try_from(ms).unwrap_or(i32::MAX);
    if s.answered {
        if let Some(body) = out.get_mut(body_at..) {
            crate::protocol::throttle::set(key, s.ctx.version(), s.flexible, body, ms32);
        }
    }
    Some(tokio::time::Instant::now() + Duration::from_millis(ms))
}
