//! Routes one request frame to the code that serves its API.
//!
//! The frame's API key picks its line in the registry (`server::apis`),
//! whose handler decodes with the API's protocol module, calls the service
//! that owns the behaviour, and encodes the answer. The advertised table is
//! built from the same registry, so every advertised version has a handler.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};

use super::apis::{self, Registered};
use super::{observe, ListenerInfo, Services};
use crate::protocol::api::api_versions;
use crate::protocol::header::{self, RequestHeader};
use crate::protocol::{DecodeError, EncodeError};

/// What the connection should do with a request's outcome.
#[derive(Debug)]
pub enum Outcome {
    /// Write this frame (length prefix included).
    Respond(Bytes),
    /// Write this frame, encoded here: the buffer it was built in, as it
    /// is (freezing it into `Bytes` costs an allocation per request).
    Encoded(BytesMut),
    /// Write this frame, then release its share of a memory budget (a
    /// sidecar link's buffered upstream responses).
    RespondHolding(Bytes, tokio::sync::OwnedSemaphorePermit),
    /// Write a forwarded response as its bytes arrive from the upstream
    /// (boxed: it is large, and every outcome is moved at the size of the
    /// largest).
    Stream(Box<crate::sidecar::link::Streamed>),
    /// Send nothing (Produce with acks=0).
    NoResponse,
    /// Close the connection; the reason is logged.
    Close(String),
    /// Do as the inner outcome says, then read nothing more from the
    /// client until the instant given (a quota's throttle, KIP-219).
    Throttled(Box<Outcome>, tokio::time::Instant),
}

/// Who sends a connection's requests, worked out once per connection (and
/// again when SASL authenticates it) rather than for every request.
#[derive(Debug)]
pub struct Caller {
    pub peer: SocketAddr,
    pub listener: ListenerInfo,
    /// The authenticated principal (`User:ANONYMOUS` without authentication),
    /// kept for authorization.
    pub principal: Arc<str>,
    /// The address ACLs match against: Kafka's `InetAddress.getHostAddress()`,
    /// where an IPv4 client on a dual-stack socket is its IPv4 address.
    pub host: Box<str>,
    /// Logged in with a delegation token (Kafka's
    /// `KafkaPrincipal.tokenAuthenticated`).
    pub token_authenticated: bool,
}

impl Caller {
    pub fn new(peer: SocketAddr, listener: ListenerInfo, principal: Arc<str>) -> Caller {
        Caller {
            peer,
            listener,
            principal,
            host: peer.ip().to_canonical().to_string().into(),
            token_authenticated: false,
        }
    }

    /// The same connection under a new principal, logged in with a
    /// delegation token or not.
    pub fn authenticated(&self, principal: Arc<str>, token_authenticated: bool) -> Caller {
        Caller { principal, host: self.host.clone(), token_authenticated, ..*self }
    }
}

/// Who sent a request.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub header: RequestHeader,
    pub caller: Arc<Caller>,
}

impl RequestContext {
    pub fn version(&self) -> i16 {
        self.header.api_version
    }

    /// The client id ("" for a null one), read leniently as UTF-8.
    pub fn client_id(&self) -> std::borrow::Cow<'_, str> {
        self.header.client_id().unwrap_or_default()
    }

    /// Kafka's member "client host": Java's `InetAddress.toString()`, i.e.
    /// "/" followed by the address.
    pub fn client_host(&self) -> String {
        format!("/{}", self.caller.peer.ip())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
    #[error(transparent)]
    Unavailable(#[from] crate::coordinator::Unavailable),
    #[error("{0}")]
    Other(String),
}

impl RouteError {
    /// How the request metrics label this failure.
    fn close_reason(&self) -> observe::CloseReason {
        match self {
            RouteError::Decode(_) => observe::CloseReason::Decode,
            RouteError::Encode(_) => observe::CloseReason::Encode,
            RouteError::Unavailable(_) => observe::CloseReason::Unavailable,
            RouteError::Other(_) => observe::CloseReason::Internal,
        }
    }
}

impl From<api_versions::RespondError> for RouteError {
    fn from(e: api_versions::RespondError) -> Self {
        match e {
            api_versions::RespondError::Decode(d) => RouteError::Decode(d),
            api_versions::RespondError::Encode(e) => RouteError::Encode(e),
        }
    }
}

/// Starts a response frame: room for the length, then the response header.
pub(crate) fn start_response(correlation_id: i32, flexible: bool) -> BytesMut {
    let mut out = BytesMut::with_capacity(128);
    out.put_i32(0);
    header::write_response_header(&mut out, correlation_id, flexible);
    out
}

/// Fills in the length prefix written by [`start_response`]. A response
/// longer than `limit` (or than an i32 length prefix can describe) is never
/// sent: the connection is closed instead, with a log line.
fn finish_response(mut out: BytesMut, limit: usize) -> Outcome {
    let len = out.len().saturating_sub(4);
    match i32::try_from(len) {
        Ok(n) if out.len() <= limit && crate::be_int::set_i32_at(&mut out, 0, n) => Outcome::Encoded(out),
        _ => Outcome::Close(format!(
            "the response would take {} bytes, over the limit of {limit} (server.max_response_bytes)",
            out.len()
        )),
    }
}

/// Fills in the length prefix of a small frame built with
/// [`start_response`] (`None` if it cannot be described).
pub(crate) fn finish_frame(mut out: BytesMut) -> Option<Bytes> {
    let n = i32::try_from(out.len().saturating_sub(4)).ok()?;
    crate::be_int::set_i32_at(&mut out, 0, n).then(|| out.freeze())
}

/// The response limit for this daemon (`server.max_response_bytes`, at most
/// what an i32 length prefix allows).
fn response_limit(svc: &Services) -> usize {
    (svc.config.server.max_response_bytes as usize).min(crate::protocol::codec::MAX_FRAME_BYTES)
}

/// Serves one request frame, which arrived at `arrived` (when its last
/// bytes were read: the connection's reader notes that once per read, so
/// timing a request costs one clock read, at its answer).
pub async fn handle_frame(svc: Arc<Services>, caller: Arc<Caller>, mut frame: Bytes, arrived: Instant) -> Outcome {
    let prefix = match header::peek_prefix(&frame) {
        Ok(p) => p,
        Err(e) => return Outcome::Close(e.to_string()),
    };
    if prefix.api_key == api_versions::SUPPORT.key && !api_versions::SUPPORT.supports(prefix.api_version) {
        // KIP-511: answer in the v0 layout so the client can downgrade.
        // Boxed: in sidecar mode this may ask the upstream, and that
        // future would otherwise make every request's future 2.6 KB
        // instead of 0.5 KB (see `every_request_future_stays_small`).
        let table = match Box::pin(advertised(&svc, caller.listener)).await {
            Ok(t) => t,
            Err(e) => return Outcome::Close(e),
        };
        let mut out = start_response(prefix.correlation_id, false);
        return match api_versions::unsupported_version(&mut out, &table) {
            Ok(()) => finish_response(out, response_limit(&svc)),
            Err(e) => Outcome::Close(e.to_string()),
        };
    }
    let api = match served(&svc, prefix.api_key) {
        Some(api) if api.support.supports(prefix.api_version) => api,
        Some(api) => {
            let s = api.support;
            return Outcome::Close(format!(
                "unsupported version {} of {} (we serve {}..{})",
                prefix.api_version, s.name, s.min, s.max
            ));
        }
        None => {
            return Outcome::Close(format!(
                "unsupported API {} v{}",
                apis::api_name(prefix.api_key),
                prefix.api_version
            ))
        }
    };
    let support = &api.support;
    let request_bytes = frame.len();
    let header = match header::parse_request_header(&mut frame, support.is_flexible(prefix.api_version)) {
        Ok(h) => h,
        Err(e) => {
            observe::request(support, prefix.api_version, arrived.elapsed());
            observe::closed(support.name, observe::CloseReason::Decode);
            return Outcome::Close(format!("{} request header: {e}", support.name));
        }
    };
    let ctx = RequestContext { header, caller };
    let mut out = start_response(prefix.correlation_id, support.flexible_response_header(prefix.api_version));
    let body_at = out.len();
    let limit = response_limit(&svc);
    let routed = crate::protocol::codec::RESPONSE_LIMIT.scope(limit, route(api, &svc, &ctx, &mut frame, &mut out));
    // The time spent serving is measured only for quotas: it costs clock
    // reads on every poll.
    let (routed, busy) = match svc.quotas {
        // Boxed: inline, the measured future would be a second copy of the
        // request's in this one, which every request would carry.
        Some(_) => Box::pin(super::throttle::busy(routed)).await,
        None => (routed.await, std::time::Duration::ZERO),
    };
    observe::request(support, prefix.api_version, arrived.elapsed());
    let mute = match (&svc.quotas, &routed) {
        (Some(q), Ok(answered)) => {
            let flexible = support.is_flexible(prefix.api_version);
            let served = super::throttle::Served { ctx: &ctx, busy, request_bytes, answered: *answered, flexible };
            super::throttle::charge(q, served, &mut out, body_at)
        }
        _ => None,
    };
    let outcome = match routed {
        Ok(true) => finish_response(out, limit),
        Ok(false) => Outcome::NoResponse,
        Err(e) => {
            observe::closed(support.name, e.close_reason());
            return Outcome::Close(e.to_string());
        }
    };
    match mute {
        Some(until) => Outcome::Throttled(Box::new(outcome), until),
        None => outcome,
    }
}

/// The API versions this listener advertises: kcoord's own, or in sidecar
/// mode the fronted broker's merged with kcoord's.
pub(crate) async fn advertised(svc: &Services, listener: ListenerInfo) -> Result<Arc<Vec<(i16, i16, i16)>>, String> {
    match &svc.sidecar {
        None => Ok(apis::own_table()),
        Some(s) => s.api_versions(listener.node_id).await,
    }
}

/// The registry line for `key`, if this daemon serves it: sidecar-only
/// APIs (TxnOffsetCommit, admitted and delegated upstream) only in sidecar
/// mode.
fn served(svc: &Services, key: i16) -> Option<&'static Registered> {
    apis::registered(key).filter(|api| !api.sidecar_only || svc.sidecar.is_some())
}

/// Runs the API; returns whether a response body was written.
async fn route(
    api: &'static Registered,
    svc: &Services,
    ctx: &RequestContext,
    body: &mut Bytes,
    out: &mut BytesMut,
) -> Result<bool, RouteError> {
    apis::serve(api, svc, ctx, body, out).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future an async function returns, without calling it.
    fn future_size<F, Fut>(_: F) -> usize
    where
        F: FnOnce(Arc<Services>, Arc<Caller>, Bytes, Instant) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// Every request's future is moved several times on its way to the
    /// connection's set of requests in flight (and copied into its heap
    /// slot), so its size is paid per request: an unboxed rare await (the
    /// sidecar's KIP-511 table) once made it 2.6 KB, and commits cost ~8 %
    /// more CPU (docs/benchmarks.md, "Every request's future, again").
    #[test]
    fn every_request_future_stays_small() {
        let size = future_size(handle_frame);
        assert!(size <= 1024, "a request's future is {size} bytes: box the large, rare await that grew it");
    }
}
