//! Routes one request frame to the code that serves its API.
//!
//! Each arm decodes with the API's protocol module, calls the service that
//! owns the behaviour, and encodes the answer. The set of arms must match the
//! advertised table (`protocol::api::SUPPORTED`); a test sends every
//! advertised version through here.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use super::authorize::{default_message, Guard};
use super::{observe, ListenerInfo, Services};
use crate::protocol::api::{
    api_versions, consumer_group_describe, consumer_group_heartbeat, create_acls, create_partitions, create_topics,
    delete_acls, delete_groups, delete_topics, describe_acls, describe_groups, fetch, find_coordinator, heartbeat,
    init_producer_id, join_group, leave_group, list_groups, list_offsets, metadata, offset_commit, offset_delete,
    offset_fetch, produce, sasl_authenticate, sasl_handshake, sync_group, txn_offset_commit,
};
use crate::protocol::header::{self, RequestHeader};
use crate::protocol::versions::{self, ApiSupport};
use crate::protocol::{DecodeError, EncodeError};
use crate::security::acl::Operation::Read;

/// What the connection should do with a request's outcome.
#[derive(Debug)]
pub enum Outcome {
    /// Write this frame (length prefix included).
    Respond(Bytes),
    /// Write this frame, then release its share of a memory budget (a
    /// sidecar link's buffered upstream responses).
    RespondHolding(Bytes, tokio::sync::OwnedSemaphorePermit),
    /// Write a forwarded response as its bytes arrive from the upstream.
    Stream(crate::sidecar::link::Streamed),
    /// Send nothing (Produce with acks=0).
    NoResponse,
    /// Close the connection; the reason is logged.
    Close(String),
    /// Do as the inner outcome says, then read nothing more from the
    /// client until the instant given (a quota's throttle, KIP-219).
    Throttled(Box<Outcome>, tokio::time::Instant),
}

/// Who sent a request.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub header: RequestHeader,
    pub peer: SocketAddr,
    pub listener: ListenerInfo,
    /// The authenticated principal (`User:ANONYMOUS` without authentication),
    /// kept for authorization.
    pub principal: Arc<str>,
}

impl RequestContext {
    pub fn version(&self) -> i16 {
        self.header.api_version
    }

    pub fn client_id(&self) -> &str {
        self.header.client_id.as_deref().unwrap_or("")
    }

    /// Kafka's member "client host": Java's `InetAddress.toString()`, i.e.
    /// "/" followed by the address.
    pub fn client_host(&self) -> String {
        format!("/{}", self.peer.ip())
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
        Ok(n) if out.len() <= limit && crate::be_int::set_i32_at(&mut out, 0, n) => Outcome::Respond(out.freeze()),
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

/// Serves one request frame.
pub async fn handle_frame(
    svc: Arc<Services>,
    peer: SocketAddr,
    listener: ListenerInfo,
    principal: Arc<str>,
    mut frame: Bytes,
) -> Outcome {
    let prefix = match header::peek_prefix(&frame) {
        Ok(p) => p,
        Err(e) => return Outcome::Close(e.to_string()),
    };
    if prefix.api_key == api_versions::SUPPORT.key && !api_versions::SUPPORT.supports(prefix.api_version) {
        // KIP-511: answer in the v0 layout so the client can downgrade.
        let table = match advertised(&svc, listener).await {
            Ok(t) => t,
            Err(e) => return Outcome::Close(e),
        };
        let mut out = start_response(prefix.correlation_id, false);
        return match api_versions::unsupported_version(&mut out, &table) {
            Ok(()) => finish_response(out, response_limit(&svc)),
            Err(e) => Outcome::Close(e.to_string()),
        };
    }
    let support: &ApiSupport = match served(&svc, prefix.api_key) {
        Some(s) if s.supports(prefix.api_version) => s,
        Some(s) => {
            return Outcome::Close(format!(
                "unsupported version {} of {} (we serve {}..{})",
                prefix.api_version, s.name, s.min, s.max
            ))
        }
        None => {
            return Outcome::Close(format!(
                "unsupported API {} v{}",
                versions::api_name(prefix.api_key),
                prefix.api_version
            ))
        }
    };
    let started = std::time::Instant::now();
    let request_bytes = frame.len();
    let header = match header::parse_request_header(&mut frame, support.is_flexible(prefix.api_version)) {
        Ok(h) => h,
        Err(e) => {
            observe::request(support, prefix.api_version, started.elapsed());
            observe::closed(support.name, observe::CloseReason::Decode);
            return Outcome::Close(format!("{} request header: {e}", support.name));
        }
    };
    let ctx = RequestContext { header, peer, listener, principal };
    let mut out = start_response(prefix.correlation_id, support.flexible_response_header(prefix.api_version));
    let body_at = out.len();
    let limit = response_limit(&svc);
    let routed = crate::protocol::codec::RESPONSE_LIMIT.scope(limit, route(&svc, &ctx, &mut frame, &mut out));
    // The time spent serving is measured only for quotas: it costs clock
    // reads on every poll.
    let (routed, busy) = match svc.quotas {
        Some(_) => super::throttle::busy(routed).await,
        None => (routed.await, std::time::Duration::ZERO),
    };
    observe::request(support, prefix.api_version, started.elapsed());
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
async fn advertised(svc: &Services, listener: ListenerInfo) -> Result<Arc<Vec<(i16, i16, i16)>>, String> {
    match &svc.sidecar {
        None => Ok(api_versions::own_table()),
        Some(s) => s.api_versions(listener.node_id).await,
    }
}

/// The API entry for `key`: kcoord's table, plus in sidecar mode the APIs
/// it admits and delegates upstream (TxnOffsetCommit).
fn served(svc: &Services, key: i16) -> Option<&'static ApiSupport> {
    if svc.sidecar.is_some() {
        if let Some(s) = crate::sidecar::versions::DELEGATED.iter().find(|s| s.key == key) {
            return Some(s);
        }
    }
    versions::lookup(key)
}

/// The standalone data plane; sidecar mode forwards its APIs instead.
fn data_plane(svc: &Services) -> Result<&Arc<crate::topics::DataPlane>, RouteError> {
    svc.data_plane.as_ref().ok_or_else(|| RouteError::Other("no data plane in sidecar mode".into()))
}

/// Runs the API; returns whether a response body was written.
///
/// The group APIs that clients send all the time are served here; every
/// other API's future is boxed. An async function's future is as large as
/// its largest await point, and each request's future is moved a few times
/// before it settles on the heap: with the data plane and admin APIs
/// inline, those moves were a measurable share of a Heartbeat's cost
/// (docs/benchmarks.md, "Hot path against the framing limit").
async fn route(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Result<bool, RouteError> {
    let v = ctx.version();
    let guard = Guard::new(&svc.authorizer, ctx);
    match ctx.header.api_key {
        k if k == heartbeat::SUPPORT.key => {
            let req = heartbeat::decode(body, v)?;
            let resp = match guard.group(Read, &req.group_id) {
                Ok(()) => svc.coordinator.heartbeat(req).await?,
                Err(error) => crate::coordinator::messages::HeartbeatResponse { error },
            };
            observe::errors(heartbeat::SUPPORT.name, &resp);
            heartbeat::encode(&resp, v, out)?;
        }
        k if k == offset_commit::SUPPORT.key => {
            let mut req = offset_commit::decode(body, v)?;
            let resp = match guard.offset_commit(&mut req) {
                Err(answer) => answer,
                Ok(denied) => {
                    let mut resp = svc.coordinator.offset_commit(req).await?;
                    resp.topics.extend(denied);
                    resp
                }
            };
            observe::errors(offset_commit::SUPPORT.name, &resp);
            offset_commit::encode(&resp, v, out)?;
        }
        k if k == offset_fetch::SUPPORT.key => {
            let mut req = offset_fetch::decode(body, v)?;
            let plan = guard.offset_fetch(&mut req);
            let served = match req.groups.is_empty() {
                true => crate::coordinator::messages::OffsetFetchResponse { groups: vec![] },
                false => svc.coordinator.offset_fetch(req).await?,
            };
            let resp = guard.offset_fetch_answer(plan, served);
            observe::errors(offset_fetch::SUPPORT.name, &resp);
            offset_fetch::encode(&resp, v, out)?;
        }
        _ => return Box::pin(route_other(svc, ctx, body, out)).await,
    }
    Ok(true)
}

/// Runs every API that [`route`] does not serve itself.
async fn route_other(
    svc: &Services,
    ctx: &RequestContext,
    body: &mut Bytes,
    out: &mut BytesMut,
) -> Result<bool, RouteError> {
    let v = ctx.version();
    let guard = Guard::new(&svc.authorizer, ctx);
    match ctx.header.api_key {
        k if k == api_versions::SUPPORT.key => {
            let table = advertised(svc, ctx.listener).await.map_err(RouteError::Other)?;
            api_versions::respond(body, v, out, &table)?
        }
        k if k == produce::SUPPORT.key => {
            let mut req = produce::decode(body, v)?;
            let acks = req.acks;
            let produced = match guard.produce(&mut req) {
                Ok(denied) if denied.is_empty() => data_plane(svc)?.produce(req).await.map_err(RouteError::Other)?,
                // acks=0 has no answer to carry an error: Kafka closes the
                // connection instead, after writing the partitions that
                // were authorized.
                Err(_) if acks == 0 => return Err(RouteError::Other("an acks=0 Produce was not authorized".into())),
                Err(answer) => Some(answer),
                Ok(denied) => {
                    let written = data_plane(svc)?.produce(req).await.map_err(RouteError::Other)?;
                    if acks == 0 {
                        return Err(RouteError::Other(
                            "an acks=0 Produce named topics the client may not write (the others were written)".into(),
                        ));
                    }
                    written.map(|mut r| {
                        r.topics.extend(denied);
                        r
                    })
                }
            };
            match produced {
                Some(resp) => {
                    observe::errors(produce::SUPPORT.name, &resp);
                    produce::encode(&resp, v, out)?
                }
                None => return Ok(false),
            }
        }
        k if k == fetch::SUPPORT.key => {
            let mut req = fetch::decode(body, v)?;
            let denied = guard.fetch(&mut req, &svc.catalog);
            let mut resp = data_plane(svc)?.fetch(req).await;
            resp.topics.extend(denied);
            observe::errors(fetch::SUPPORT.name, &resp);
            fetch::encode(&resp, v, out)?;
        }
        k if k == list_offsets::SUPPORT.key => {
            let mut req = list_offsets::decode(body, v)?;
            let denied = guard.list_offsets(&mut req);
            let mut resp = data_plane(svc)?.list_offsets(&req);
            resp.topics.extend(denied);
            observe::errors(list_offsets::SUPPORT.name, &resp);
            list_offsets::encode(&resp, v, out)?;
        }
        k if k == create_topics::SUPPORT.key => {
            let mut req = create_topics::decode(body, v)?;
            let denied = guard.create_topics(&mut req);
            let mut resp = data_plane(svc)?.create_topics(req).await;
            guard.create_topics_answer(&mut resp);
            resp.topics.extend(denied);
            observe::errors(create_topics::SUPPORT.name, &resp);
            create_topics::encode(&resp, v, out)?;
        }
        k if k == create_partitions::SUPPORT.key => {
            let mut req = create_partitions::decode(body, v)?;
            let denied = guard.create_partitions(&mut req);
            let mut resp = data_plane(svc)?.create_partitions(req).await;
            resp.results.extend(denied);
            observe::errors(create_partitions::SUPPORT.name, &resp);
            create_partitions::encode(&resp, v, out)?;
        }
        k if k == delete_topics::SUPPORT.key => {
            let mut topics = delete_topics::decode(body, v)?;
            let denied = guard.delete_topics(&mut topics, &svc.catalog);
            let mut resp = match topics.is_empty() && !denied.is_empty() {
                true => Vec::new(),
                false => crate::topic_deletion::delete_topics(data_plane(svc)?, topics, &svc.coordinator).await,
            };
            resp.extend(denied);
            observe::errors(delete_topics::SUPPORT.name, &resp);
            delete_topics::encode(&resp, v, out)?;
        }
        k if k == init_producer_id::SUPPORT.key => {
            let req = init_producer_id::decode(body, v)?;
            let resp = match guard.init_producer_id(req.transactional_id.as_deref()) {
                Ok(()) => data_plane(svc)?.init_producer_id(&req),
                Err(error) => {
                    crate::topics::producer_ids::InitProducerIdResponse { error, producer_id: -1, producer_epoch: -1 }
                }
            };
            observe::errors(init_producer_id::SUPPORT.name, &resp);
            init_producer_id::encode(&resp, v, out)?;
        }
        k if k == metadata::SUPPORT.key => {
            let mut req = metadata::decode(body, v)?;
            let denied = guard.metadata(&mut req, &svc.catalog, svc.config.topics.auto_create);
            let mut resp = svc.cluster.metadata(&req, &svc.catalog, svc.topic_creator.as_ref());
            guard.metadata_answer(&req, &mut resp, denied, v);
            if let Some(ep) = svc.own_endpoint(ctx.listener) {
                for b in resp.brokers.iter_mut().filter(|b| b.node_id == svc.cluster.node.node_id) {
                    (b.host, b.port) = (ep.host.clone(), i32::from(ep.port));
                }
            }
            observe::errors(metadata::SUPPORT.name, &resp);
            metadata::encode(&resp, v, out)?;
        }
        k if k == find_coordinator::SUPPORT.key => {
            let req = find_coordinator::decode(body, v)?;
            let answers = svc.cluster.coordinator_answers(req.key_type, &req.keys, find_coordinator::share_allowed(v));
            let answers = answers.map(|a| match guard.coordinator_key(req.key_type, &a.key) {
                Ok(()) => a,
                Err(e) => {
                    // v4+ answers per key, without a message.
                    let mut denied = crate::cluster::CoordinatorAnswer::error(&a.key, e, default_message(e));
                    denied.error_message = denied.error_message.filter(|_| v < 4);
                    denied
                }
            });
            let answers = answers.map(|mut a| {
                if a.error == crate::error_code::ErrorCode::NONE {
                    if let Some(ep) = svc.advertised_node(ctx.listener, a.node_id) {
                        (a.host, a.port) = ep;
                    }
                }
                a
            });
            let answers = answers.inspect(|a| observe::errors(find_coordinator::SUPPORT.name, a));
            find_coordinator::encode(answers, v, out)?;
        }
        k if k == join_group::SUPPORT.key => {
            let req = join_group::decode(body, v, ctx.client_id(), &ctx.client_host())?;
            let resp = match guard.group(Read, &req.group_id) {
                Ok(()) => svc.coordinator.join_group(req, guard.describable_topics()).await?,
                Err(e) => crate::coordinator::messages::JoinGroupResponse::error(e, ""),
            };
            observe::errors(join_group::SUPPORT.name, &resp);
            join_group::encode(&resp, v, out)?;
        }
        k if k == sync_group::SUPPORT.key => {
            let req = sync_group::decode(body, v)?;
            let resp = match guard.group(Read, &req.group_id) {
                Ok(()) => svc.coordinator.sync_group(req).await?,
                Err(e) => crate::coordinator::messages::SyncGroupResponse::error(e),
            };
            observe::errors(sync_group::SUPPORT.name, &resp);
            sync_group::encode(&resp, v, out)?;
        }
        k if k == consumer_group_heartbeat::SUPPORT.key => {
            let mut req = consumer_group_heartbeat::decode(body, v, ctx.client_id(), &ctx.client_host())?;
            req.describable = guard.describable_topics();
            let resp = match guard.consumer_heartbeat(&req) {
                Ok(()) => svc.coordinator.consumer_group_heartbeat(req).await?,
                Err((e, message)) => {
                    crate::coordinator::consumer::messages::ConsumerHeartbeatResponse::error(e, message)
                }
            };
            observe::errors(consumer_group_heartbeat::SUPPORT.name, &resp);
            consumer_group_heartbeat::encode(&resp, v, out)?;
        }
        k if k == consumer_group_describe::SUPPORT.key => {
            let (groups, include_ops) = consumer_group_describe::decode(body, v)?;
            let (allowed, denied) = guard.describable_groups(groups);
            let described = match allowed.is_empty() {
                true => Vec::new(),
                false => svc.coordinator.consumer_group_describe(allowed).await?,
            };
            let resp = guard.consumer_describe_answer(denied, described);
            observe::errors(consumer_group_describe::SUPPORT.name, &resp);
            let ops = |g: &str, e| guard.group_operations(g, e, include_ops);
            consumer_group_describe::encode(&resp, &ops, v, out)?;
        }
        k if k == leave_group::SUPPORT.key => {
            let req = leave_group::decode(body, v)?;
            let resp = match guard.group(Read, &req.group_id) {
                Ok(()) => svc.coordinator.leave_group(req).await?,
                Err(error) => crate::coordinator::messages::LeaveGroupResponse { error, members: vec![] },
            };
            observe::errors(leave_group::SUPPORT.name, &resp);
            leave_group::encode(&resp, v, out)?;
        }
        k if k == txn_offset_commit::SUPPORT.key && svc.sidecar.is_some() => {
            let (mut req, txn) = txn_offset_commit::decode(body, v)?;
            let resp = match guard.txn_offset_commit(&txn.transactional_id, &mut req) {
                Err(answer) => answer,
                Ok(denied) => {
                    let mut resp = svc.coordinator.txn_offset_commit(req, txn).await?;
                    resp.topics.extend(denied);
                    resp
                }
            };
            observe::errors(txn_offset_commit::SUPPORT.name, &resp);
            txn_offset_commit::encode(&resp, v, out)?;
        }
        k if k == offset_delete::SUPPORT.key => {
            let mut req = offset_delete::decode(body, v)?;
            let resp = match guard.offset_delete(&mut req) {
                Err(answer) => answer,
                Ok(denied) => {
                    let mut resp = svc.coordinator.offset_delete(req).await?;
                    resp.topics.extend(denied);
                    resp
                }
            };
            observe::errors(offset_delete::SUPPORT.name, &resp);
            offset_delete::encode(&resp, v, out)?;
        }
        k if k == describe_groups::SUPPORT.key => {
            let mut req = describe_groups::decode(body, v)?;
            let include_ops = req.include_authorized_operations;
            let (allowed, denied) = guard.describable_groups(std::mem::take(&mut req.groups));
            req.groups = allowed;
            let described = match req.groups.is_empty() {
                true => Vec::new(),
                false => svc.coordinator.describe_groups(req).await?,
            };
            let groups = guard.describe_groups_answer(denied, described, include_ops);
            observe::errors(describe_groups::SUPPORT.name, &groups);
            describe_groups::encode(&groups, v, out)?;
        }
        k if k == list_groups::SUPPORT.key => {
            let resp = guard.list_groups_answer(svc.coordinator.list_groups(list_groups::decode(body, v)?).await?);
            observe::errors(list_groups::SUPPORT.name, &resp);
            list_groups::encode(&resp, v, out)?;
        }
        k if k == delete_groups::SUPPORT.key => {
            let (allowed, denied) = guard.deletable_groups(delete_groups::decode(body, v)?);
            let mut resp = match allowed.is_empty() {
                true => crate::coordinator::messages::DeleteGroupsResponse { results: vec![] },
                false => svc.coordinator.delete_groups(allowed).await?,
            };
            resp.results.extend(denied);
            observe::errors(delete_groups::SUPPORT.name, &resp);
            delete_groups::encode(&resp, v, out)?;
        }
        k if k == create_acls::SUPPORT.key => {
            let results = super::acl_admin::create(svc, &guard, create_acls::decode(body, v)?).await;
            create_acls::encode(&results, v, out)?;
        }
        k if k == describe_acls::SUPPORT.key => {
            let (error, message, acls) = super::acl_admin::describe(svc, &guard, describe_acls::decode(body, v)?);
            describe_acls::encode(error, message, &acls, v, out)?;
        }
        k if k == delete_acls::SUPPORT.key => {
            let results = super::acl_admin::delete(svc, &guard, delete_acls::decode(body, v)?).await;
            delete_acls::encode(&results, v, out)?;
        }
        // Reach here only outside a SASL exchange: on a listener without
        // SASL, or after authentication. Kafka's KafkaApis answers both so.
        k if k == sasl_handshake::SUPPORT.key => {
            sasl_handshake::decode(body, v)?;
            sasl_handshake::encode(crate::error_code::ErrorCode::ILLEGAL_SASL_STATE, &[], v, out)?;
        }
        k if k == sasl_authenticate::SUPPORT.key => {
            sasl_authenticate::decode(body, v)?;
            let answer = sasl_authenticate::Answer {
                error: crate::error_code::ErrorCode::ILLEGAL_SASL_STATE,
                message: Some("SaslAuthenticate request received after successful authentication".into()),
                token: Bytes::new(),
                session_lifetime_ms: 0,
            };
            sasl_authenticate::encode(&answer, v, out)?;
        }
        other => return Err(RouteError::Other(format!("no handler for API key {other}"))),
    }
    Ok(true)
}
