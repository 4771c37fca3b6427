//! One client connection: read frames, serve them concurrently, write the
//! responses strictly in request order.
//!
//! Requests are served as futures in an [`InOrder`] queue: they make progress
//! concurrently (a parked JoinGroup does not stop a later Metadata from being
//! computed), but responses leave in the order requests arrived, which every
//! client checks through correlation ids. At most
//! `server.max_inflight_per_connection` requests are in flight; beyond that
//! we stop reading, and TCP pushes back on the client.
//!
//! Two timeouts free the places of connections that do nothing useful
//! (`server.connections_max_idle_ms`, Kafka's `connections.max.idle.ms`:
//! nothing in flight and nothing read or written for that long; and
//! `server.partial_request_timeout_ms`: a request that started arriving must
//! finish arriving, and a new connection must send its first request, within
//! that long). They are checked lazily by one timer per connection, re-armed
//! at the earliest moment one of them can be due, so serving requests never
//! touches it.
//!
//! Request memory is bounded twice. Each local request holds permits of the
//! daemon's `server.max_inflight_request_bytes` budget for its frame's
//! length until it is answered; while the budget is spent, the connection
//! stops reading (but keeps writing its answers, so budgets held by finished
//! requests are always given back). And one connection stops reading while
//! its own requests in flight hold `server.max_request_bytes` or more.
//!
//! In sidecar mode, requests kcoord does not serve go over this
//! connection's own link to the upstream broker its listener fronts. They
//! are written upstream as they are read, so the upstream sees them in the
//! client's order (idempotent producers depend on it); their answers take
//! their place in the same ordered queue as local answers.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::Either;
use futures_util::stream::StreamExt;
use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{watch, AcquireError, OwnedSemaphorePermit};
use tokio::time::Instant;
use tokio_util::codec::FramedRead;

use super::dispatch::{self, Caller, Outcome};
use super::frame::{Frame, FrameCodec, FrameError, StreamLarge};
use super::in_order::InOrder;
use super::limits::RateLimitedLog;
use super::{ListenerInfo, Services};
use crate::security::sasl::{Admit, Reply, SaslSession};
use crate::security::ListenerSecurity;
use crate::sidecar::link::{Answer, Link};
use crate::sidecar::{Forward, Route, Sidecar};

type Pending = Pin<Box<dyn Future<Output = Outcome> + Send>>;
/// A request's outcome and the frame bytes it held.
type Served = Pin<Box<dyn Future<Output = (Outcome, usize)> + Send>>;
/// A request in flight: a local request's future is kept inline (its slot
/// in the ordered queue is the only allocation it needs), anything else
/// (forwarded, SASL, closing) is boxed.
type InFlight<L> = Either<L, Served>;
type Permit = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;
/// A frame read while the daemon's request budget was spent: the frame, the
/// wait for its permits, and when it arrived (its time counts from then).
type Parked = (Bytes, Permit, std::time::Instant);

/// Per-connection write buffer.
const WRITE_BUFFER_BYTES: usize = 8 * 1024;

/// The read side of a client connection: a plain TCP socket (whose
/// descriptor a sidecar may splice from) or a TLS stream.
pub trait ClientRead: AsyncRead + Unpin + Send + 'static {
    /// The socket, when bytes can be relayed from it without decryption.
    fn tcp(&self) -> Option<&OwnedReadHalf>;
}

/// The write side of a client connection.
pub trait ClientWrite: AsyncWrite + Unpin + Send + Sized + 'static {
    /// The socket writer, when answers can be spliced into it.
    fn plain(w: &mut BufWriter<Self>) -> Option<&mut BufWriter<OwnedWriteHalf>>;
}

impl ClientRead for OwnedReadHalf {
    fn tcp(&self) -> Option<&OwnedReadHalf> {
        Some(self)
    }
}

impl ClientWrite for OwnedWriteHalf {
    fn plain(w: &mut BufWriter<Self>) -> Option<&mut BufWriter<OwnedWriteHalf>> {
        Some(w)
    }
}

impl ClientRead for tokio::io::ReadHalf<tokio::io::DuplexStream> {
    fn tcp(&self) -> Option<&OwnedReadHalf> {
        None
    }
}

impl ClientWrite for tokio::io::WriteHalf<tokio::io::DuplexStream> {
    fn plain(_: &mut BufWriter<Self>) -> Option<&mut BufWriter<OwnedWriteHalf>> {
        None
    }
}

type TlsStream = tokio_rustls::server::TlsStream<TcpStream>;

impl ClientRead for tokio::io::ReadHalf<TlsStream> {
    fn tcp(&self) -> Option<&OwnedReadHalf> {
        None
    }
}

impl ClientWrite for tokio::io::WriteHalf<TlsStream> {
    fn plain(_: &mut BufWriter<Self>) -> Option<&mut BufWriter<OwnedWriteHalf>> {
        None
    }
}

/// Serves a plaintext connection without authentication (kcoord's
/// original listener; sidecar mode).
pub async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    listener: ListenerInfo,
    svc: Arc<Services>,
    shutdown: watch::Receiver<bool>,
) {
    accept(stream, peer, listener, ListenerSecurity::plaintext(), svc, shutdown).await
}

/// Serves a connection accepted on a listener with `security`: the TLS
/// handshake first (bounded by the listener's handshake timeout), then
/// requests, SASL authentication first where the listener asks for it.
pub async fn accept(
    stream: TcpStream,
    peer: SocketAddr,
    listener: ListenerInfo,
    security: Arc<ListenerSecurity>,
    svc: Arc<Services>,
    shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let auth = Auth::new(&security);
    let deadline = auth.deadline;
    let Some(tls) = &security.tls else {
        let (rd, wr) = stream.into_split();
        return serve_halves(rd, wr, peer, listener, auth, svc, shutdown).await;
    };
    let stream = match tokio::time::timeout_at(deadline, tls.acceptor().accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            metrics::counter!("kcoord_tls_handshake_failures_total").increment(1);
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            metrics::counter!("kcoord_connections_closed_total", "reason" => "handshake_timeout").increment(1);
            tracing::debug!(%peer, "TLS handshake did not finish within security.authentication_timeout_ms");
            return;
        }
    };
    let principal = match tls.principal(stream.get_ref().1.peer_certificates()) {
        Ok(p) => p,
        Err(reason) => {
            // As Kafka: a subject no ssl.principal.mapping.rules rule maps
            // fails the authentication.
            metrics::counter!("kcoord_authentications_total", "mechanism" => "SSL", "result" => "failure").increment(1);
            tracing::info!(%peer, %reason, "TLS client refused: its certificate's subject maps to no principal");
            return;
        }
    };
    let auth = Auth { principal: principal.into(), ..auth };
    let (rd, wr) = tokio::io::split(stream);
    serve_halves(rd, wr, peer, listener, auth, svc, shutdown).await
}

/// Serves a connection whose bytes come over an in-memory pipe, exactly as
/// a plaintext or SASL_PLAINTEXT socket would be served (TLS settings are
/// ignored: the pipe carries the decrypted stream). For the request-path
/// fuzz target (`crate::fuzzing::session`), which runs thousands of
/// connections a second and must not exhaust ports or descriptors.
pub async fn serve_in_memory(
    stream: tokio::io::DuplexStream,
    peer: SocketAddr,
    listener: ListenerInfo,
    security: &ListenerSecurity,
    svc: Arc<Services>,
    shutdown: watch::Receiver<bool>,
) {
    let (rd, wr) = tokio::io::split(stream);
    serve_halves(rd, wr, peer, listener, Auth::new(security), svc, shutdown).await
}

/// A connection's authentication: its principal before SASL (the TLS
/// client certificate's, or anonymous; the [`Caller`] carries it on), and the SASL
/// exchange it must complete by `deadline` (SASL listeners).
struct Auth {
    principal: Arc<str>,
    sasl: Option<SaslSession>,
    deadline: Instant,
    failure_delay: Duration,
}

impl Auth {
    /// A new connection's: anonymous, with the listener's SASL exchange
    /// (if any) to complete within its handshake timeout.
    fn new(security: &ListenerSecurity) -> Auth {
        Auth {
            principal: crate::security::ANONYMOUS.into(),
            sasl: security.sasl.clone().map(SaslSession::new),
            deadline: Instant::now() + security.handshake_timeout,
            failure_delay: security.sasl.as_ref().map(|s| s.failure_delay).unwrap_or_default(),
        }
    }

    fn pending(&self) -> bool {
        self.sasl.as_ref().is_some_and(|s| !s.is_authenticated())
    }
}

/// Serves one connection until the client goes away, a frame is malformed,
/// authentication fails, or the daemon shuts down (then in-flight requests
/// are finished first).
async fn serve_halves<R: ClientRead, W: ClientWrite>(
    rd: R,
    wr: W,
    peer: SocketAddr,
    listener: ListenerInfo,
    mut auth: Auth,
    svc: Arc<Services>,
    mut shutdown: watch::Receiver<bool>,
) {
    let max_request = svc.config.server.max_request_bytes;
    // A sidecar relays the bodies of large forwarded requests (Produce) from
    // the client socket to the upstream instead of reading them into memory.
    let codec = match (&svc.sidecar, rd.tcp()) {
        (Some(_), Some(_)) => FrameCodec::streaming(
            max_request,
            StreamLarge {
                min_len: crate::sidecar::STREAM_REQUESTS_FROM,
                accept: |head| crate::sidecar::route_head(head).is_some(),
            },
        ),
        _ => FrameCodec::new(max_request),
    };
    let mut frames = FramedRead::new(rd, codec);
    let mut caller = Arc::new(Caller::new(peer, listener, auth.principal.clone()));
    // Coalesces pipelined small responses into few writes; larger responses
    // bypass it. Kept small because every idle connection holds one.
    let mut writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, wr);
    let mut inflight: InOrder<InFlight<_>> = InOrder::new();
    let max_inflight = svc.config.server.max_inflight_per_connection as usize;
    // This connection's request bytes in flight, and its limit.
    let mut inflight_bytes = 0usize;
    let max_inflight_bytes = svc.config.server.max_request_bytes as usize;
    // A frame read while the daemon's budget was spent, waiting for permits.
    let mut parked: Option<Parked> = None;
    let mut reading = !*shutdown.borrow();
    let mut link: Option<Link> = None;
    let mut clock = Timeouts::new(&svc.config.server, Instant::now());
    let timer = tokio::time::sleep_until(clock.first_check());
    tokio::pin!(timer);
    let auth_timer = tokio::time::sleep_until(auth.deadline);
    tokio::pin!(auth_timer);
    // A quota's throttle: nothing is read until it ends.
    let mut mute = Mute::default();
    let mute_timer = tokio::time::sleep_until(Instant::now());
    tokio::pin!(mute_timer);
    if let Some(max) = auth.sasl.as_ref().and_then(SaslSession::max_frame) {
        frames.decoder_mut().set_max(max.min(max_request));
    }
    // Large forwarded frames are relayed as they arrive only once the
    // client is authenticated: before that every frame is seen whole.
    frames.decoder_mut().set_streaming(!auth.pending());
    // The upstream authenticates this connection's clients: SASL frames go
    // to it over the link, which is then the client's own login.
    let relayed = auth.sasl.as_ref().is_some_and(SaslSession::relays);
    // A SASL frame to relay once every earlier answer has gone out (the
    // link's answers come in order, and the exchange waits for its own).
    let mut relay_pending: Option<Bytes> = None;

    loop {
        if !reading && inflight.is_empty() {
            break;
        }
        let can_read = reading
            && mute.until.is_none()
            && parked.is_none()
            && inflight.len() < max_inflight
            && inflight_bytes < max_inflight_bytes
            && relay_pending.is_none()
            && !link_draining(&link);
        if !can_read && frames.decoder().activity().partial_since.is_some() {
            frames.decoder_mut().restart_partial_clock(Instant::now());
        }
        tokio::select! {
            biased;
            Some((outcome, bytes)) = inflight.next(), if !inflight.is_empty() => {
                inflight_bytes = inflight_bytes.saturating_sub(bytes);
                if !write_outcome(&mut writer, mute.note(outcome), peer).await {
                    return;
                }
                // Write every response that is already done, then flush once.
                if !write_ready(&mut inflight, &mut inflight_bytes, &mut writer, &mut mute, peer).await {
                    return;
                }
                // With requests still in flight, let the shards run once
                // before flushing: answers they finish meanwhile leave in the
                // same write. A pipelining client then gets its answers in
                // half as many writes, and commits under load went ~20 %
                // faster (docs/benchmarks.md, "One turn for the shards
                // before a flush"); a client waiting for one answer never
                // waits for this.
                if !inflight.is_empty() {
                    tokio::task::yield_now().await;
                    if !write_ready(&mut inflight, &mut inflight_bytes, &mut writer, &mut mute, peer).await {
                        return;
                    }
                }
                if let Some(until) = mute.until {
                    mute_timer.as_mut().reset(until);
                }
                if let Err(e) = writer.flush().await {
                    tracing::debug!(%peer, error = %e, "write failed; closing connection");
                    return;
                }
                clock.last_write = Instant::now();
            }
            () = std::future::ready(()), if relay_pending.is_some() && inflight.is_empty() => {
                let (Some(frame), Some(sasl)) = (relay_pending.take(), auth.sasl.as_mut()) else { continue };
                let (reply, upstream_answered) = relay_sasl(svc.sidecar.as_ref(), &mut link, listener, sasl, frame).await;
                // The upstream delays its own failures already.
                let delay = if upstream_answered { Duration::ZERO } else { auth.failure_delay };
                if !after_sasl_step(reply, sasl, delay, &mut inflight, &mut caller, frames.decoder_mut(), max_request) {
                    reading = false;
                }
            }
            permit = wait_for_permit(&mut parked), if parked.is_some() => {
                let Some((frame, _, arrived)) = parked.take() else { continue };
                let Ok(permit) = permit else { return };
                inflight_bytes += frame.len();
                inflight.push_back(Either::Left(local(&svc, &caller, frame, permit, arrived)));
            }
            frame = frames.next(), if can_read => {
                match frame {
                    Some(Ok(Frame::Head { len, head })) => {
                        clock.first_request_seen = true;
                        // Only an authenticated session streams (`set_streaming`); its
                        // expiry is checked as for whole frames.
                        if let Some(sasl) = auth.sasl.as_ref() {
                            if sasl.admit(&head, Instant::now()) != Admit::Serve {
                                metrics::counter!("kcoord_connections_closed_total", "reason" => "authentication").increment(1);
                                tracing::info!(%peer, "closing connection: a large request without a valid SASL session");
                                break;
                            }
                        }
                        // The codec hands over only heads that route_head accepted.
                        let (Some(sidecar), Some(Route::Forward(fwd))) = (svc.sidecar.clone(), crate::sidecar::route_head(&head)) else { return };
                        let send = Outgoing { head: &head, len, rest_from: frames.get_ref().tcp() };
                        let sent = forward(&sidecar, &mut link, listener, send, fwd, relayed);
                        // The rest of the frame must arrive as a partial frame would have to.
                        let sent = match partial_limit(&svc.config.server) {
                            Some(limit) => tokio::time::timeout(limit, sent).await.unwrap_or_else(|_| {
                                Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the rest of a request did not arrive in time"))
                            }),
                            None => sent.await,
                        };
                        match sent {
                            Ok(pending) => inflight.push_back(Either::Right(Box::pin(pending.map(|o| (o, 0))))),
                            Err(e) => {
                                tracing::info!(%peer, broker = listener.node_id, error = %e, "forwarding a request failed; closing the client connection");
                                return;
                            }
                        }
                    }
                    Some(Ok(Frame::Whole(frame))) => {
                        clock.first_request_seen = true;
                        if let Some(sasl) = auth.sasl.as_mut() {
                            match sasl.admit(&frame, Instant::now()) {
                                Admit::Serve => {}
                                Admit::Close(reason) => {
                                    metrics::counter!("kcoord_connections_closed_total", "reason" => "authentication").increment(1);
                                    tracing::info!(%peer, %reason, "closing connection");
                                    break;
                                }
                                Admit::Sasl if relayed => {
                                    relay_pending = Some(frame);
                                    continue;
                                }
                                Admit::Sasl => {
                                    let reply = sasl.handle(frame, Instant::now()).await;
                                    if !after_sasl_step(reply, sasl, auth.failure_delay, &mut inflight, &mut caller, frames.decoder_mut(), max_request) {
                                        reading = false;
                                    }
                                    continue;
                                }
                            }
                        }
                        let route = if svc.sidecar.is_some() { crate::sidecar::route(&frame) } else { Route::Local };
                        match route {
                            Route::Local => {
                                let n = u32::try_from(frame.len()).unwrap_or(u32::MAX);
                                let arrived = frames.decoder().activity().last_read.map_or_else(std::time::Instant::now, Instant::into_std);
                                match svc.request_budget.clone().try_acquire_many_owned(n) {
                                    Ok(permit) => {
                                        inflight_bytes += frame.len();
                                        inflight.push_back(Either::Left(local(&svc, &caller, frame, permit, arrived)));
                                    }
                                    Err(tokio::sync::TryAcquireError::NoPermits) => {
                                        tracing::debug!(%peer, bytes = n, "request budget spent; waiting before serving");
                                        let wait = Box::pin(svc.request_budget.clone().acquire_many_owned(n));
                                        parked = Some((frame, wait, arrived));
                                    }
                                    Err(tokio::sync::TryAcquireError::Closed) => return,
                                }
                            }
                            Route::Forward(fwd) => {
                                let Some(sidecar) = svc.sidecar.clone() else { return };
                                let send = Outgoing { head: &frame, len: frame.len(), rest_from: None };
                                match forward(&sidecar, &mut link, listener, send, fwd, relayed).await {
                                    Ok(pending) => inflight.push_back(Either::Right(Box::pin(pending.map(|o| (o, 0))))),
                                    Err(e) => {
                                        // As if the client's broker had gone away.
                                        tracing::info!(%peer, broker = listener.node_id, error = %e, "upstream unreachable; closing the client connection");
                                        return;
                                    }
                                }
                            }
                        }
                    }
                    Some(Err(FrameError::Io(e))) => {
                        // The client went away (a reset, a killed process):
                        // not a bad frame, and nothing to warn about.
                        tracing::info!(%peer, error = %e, "closing connection: reading from the client failed");
                        return;
                    }
                    Some(Err(e)) => {
                        tracing::warn!(%peer, error = %e, "closing connection: bad frame");
                        return;
                    }
                    None => reading = false,
                }
            }
            _ = shutdown.changed(), if reading => {
                reading = false;
                // A request still waiting for the budget is dropped unserved.
                parked = None;
            }
            () = &mut mute_timer, if mute.until.is_some() => {
                mute.until = None;
            }
            () = &mut auth_timer, if auth.pending() => {
                metrics::counter!("kcoord_connections_closed_total", "reason" => "handshake_timeout").increment(1);
                tracing::info!(%peer, "closing connection: SASL authentication did not finish within security.authentication_timeout_ms");
                break;
            }
            () = &mut timer, if clock.enabled() => {
                let now = Instant::now();
                let state = State { can_read, idle: inflight.is_empty(), activity: frames.decoder().activity() };
                match clock.check(now, state) {
                    Ok(next) => timer.as_mut().reset(next),
                    Err(reason) => {
                        note_timeout(reason, peer);
                        break;
                    }
                }
            }
        }
    }
    let _ = writer.shutdown().await;
}

/// Writes every answer that is ready, in order, into the buffer; returns
/// false if the connection must close.
async fn write_ready<F, W>(
    inflight: &mut InOrder<F>,
    inflight_bytes: &mut usize,
    writer: &mut BufWriter<W>,
    mute: &mut Mute,
    peer: SocketAddr,
) -> bool
where
    F: Future<Output = (Outcome, usize)>,
    W: ClientWrite,
{
    while let Some(Some((outcome, bytes))) = inflight.next().now_or_never() {
        *inflight_bytes = inflight_bytes.saturating_sub(bytes);
        if !write_outcome(writer, mute.note(outcome), peer).await {
            return false;
        }
    }
    true
}

/// Until when a throttled client is not read (KIP-219: its answer goes out
/// at once, then the connection is muted).
#[derive(Debug, Default)]
struct Mute {
    until: Option<Instant>,
}

impl Mute {
    /// Takes note of an outcome's throttle; returns what to write.
    fn note(&mut self, outcome: Outcome) -> Outcome {
        match outcome {
            Outcome::Throttled(inner, until) => {
                self.until = Some(self.until.map_or(until, |u| u.max(until)));
                *inner
            }
            other => other,
        }
    }
}

/// Serves a local request that arrived at `arrived`, holding its share of
/// the daemon's request budget until it is answered.
fn local(
    svc: &Arc<Services>,
    caller: &Arc<Caller>,
    frame: Bytes,
    permit: OwnedSemaphorePermit,
    arrived: std::time::Instant,
) -> impl Future<Output = (Outcome, usize)> + Send + 'static {
    let svc = svc.clone();
    let caller = caller.clone();
    let len = frame.len();
    async move {
        let outcome = dispatch::handle_frame(svc, caller, frame, arrived).await;
        drop(permit);
        (outcome, len)
    }
}

/// Whether the upstream link must be renewed but still owes answers: the
/// client's next requests wait for it to drain (see `sidecar::link`).
fn link_draining(link: &Option<Link>) -> bool {
    link.as_ref().is_some_and(|l| l.renewal_due(Instant::now()) && !l.owes_nothing())
}

/// Completes when the parked frame's permits are granted (never if none is parked).
async fn wait_for_permit(parked: &mut Option<Parked>) -> Result<OwnedSemaphorePermit, AcquireError> {
    match parked {
        Some((_, wait, _)) => wait.await,
        None => std::future::pending().await,
    }
}

/// A request frame going upstream: `head` is all of it, or (for a large
/// forwarded request) its first bytes, the rest of its `len` bytes still to
/// be read from the client socket `rest_from`.
struct Outgoing<'a> {
    head: &'a [u8],
    len: usize,
    rest_from: Option<&'a OwnedReadHalf>,
}

/// The partial-request timeout, unless turned off.
fn partial_limit(server: &crate::config::ServerConfig) -> Option<Duration> {
    u64::try_from(server.partial_request_timeout_ms).ok().filter(|&ms| ms > 0).map(Duration::from_millis)
}

/// Queues the answer of a SASL step (a failure's after the
/// failed-authentication delay, then the close) and applies the session it
/// leaves: the caller's principal and the frame limits. False: the
/// authentication failed and the connection reads no more.
fn after_sasl_step<L: Future<Output = (Outcome, usize)>>(
    reply: Reply,
    sasl: &SaslSession,
    failure_delay: Duration,
    inflight: &mut InOrder<InFlight<L>>,
    caller: &mut Arc<Caller>,
    codec: &mut FrameCodec,
    max_request: u32,
) -> bool {
    let reading = match reply {
        Reply::Respond(bytes) => {
            inflight.push_back(Either::Right(Box::pin(std::future::ready((Outcome::Respond(bytes), 0)))));
            true
        }
        Reply::Fail { response, reason } => {
            // Kafka answers a failed authentication only after
            // connection.failed.authentication.delay.ms, then closes.
            inflight.push_back(Either::Right(Box::pin(async move {
                tokio::time::sleep(failure_delay).await;
                (response.map_or(Outcome::NoResponse, Outcome::Respond), 0)
            })));
            let close = Outcome::Close(format!("authentication failed: {reason}"));
            inflight.push_back(Either::Right(Box::pin(std::future::ready((close, 0)))));
            false
        }
    };
    if let Some(p) = sasl.principal() {
        *caller = Arc::new(caller.authenticated(p, sasl.is_token_authenticated()));
    }
    codec.set_max(sasl.max_frame().unwrap_or(max_request).min(max_request));
    codec.set_raw_tokens(sasl.expects_raw_tokens());
    codec.set_streaming(sasl.is_authenticated());
    reading
}

/// Relays a SASL frame to the upstream broker over the connection's link
/// (opened, not logged in, for the first) and returns the client's answer
/// (`sidecar.client_authentication = "upstream"`), and whether it is the
/// upstream's.
async fn relay_sasl(
    sidecar: Option<&Arc<Sidecar>>,
    link: &mut Option<Link>,
    listener: ListenerInfo,
    sasl: &mut SaslSession,
    frame: Bytes,
) -> (Reply, bool) {
    let fail = |reason: String| (Reply::Fail { response: None, reason }, false);
    if let Err(reply) = sasl.relay_request(&frame, Instant::now()) {
        return (reply, false);
    }
    let Some(sidecar) = sidecar else { return fail("no upstream to authenticate with".into()) };
    let exchange = async {
        if link.is_none() {
            *link = Some(sidecar.connect(listener.node_id, true).await?);
        }
        let Some(l) = link.as_mut() else { return Err(std::io::ErrorKind::NotConnected.into()) };
        let correlation = crate::protocol::header::peek_prefix(&frame).map_err(std::io::Error::other)?.correlation_id;
        let answer = l.send(&frame, frame.len(), None, correlation, true, true).await?;
        match answer {
            Some(rx) => rx.await.map_err(|_| std::io::Error::from(std::io::ErrorKind::UnexpectedEof)),
            None => Err(std::io::ErrorKind::UnexpectedEof.into()),
        }
    };
    match tokio::time::timeout(sidecar.upstream_timeout(), exchange).await {
        Ok(Ok(Answer::Whole(response, _held))) => {
            let reply = sasl.relay_response(response);
            // A delegation token's login: the client is answered once its
            // owner, the connection's principal, is known.
            let Some(token_id) = sasl.token_awaiting_owner().map(str::to_string) else { return (reply, true) };
            let Reply::Respond(accepted) = reply else { return (reply, true) };
            let owner = match tokio::time::timeout(
                sidecar.upstream_timeout(),
                sidecar.token_owner(listener.node_id, &token_id),
            )
            .await
            {
                Ok(owner) => owner,
                Err(_) => Err("the upstream did not answer DescribeDelegationToken in time".into()),
            };
            // The upstream accepted the login: a failure here is the
            // sidecar's, answered after its own failed-authentication delay.
            let known = owner.is_ok();
            if let Err(reason) = &owner {
                tracing::warn!(
                    token_id,
                    "a delegation-token login relayed upstream fails: its owner is unknown: {reason}"
                );
            }
            (sasl.resolve_token_owner(owner, accepted), known)
        }
        Ok(Ok(Answer::Stream(_))) => fail("the upstream streamed a SASL answer".into()),
        Ok(Err(e)) => {
            *link = None;
            fail(format!("the upstream broker could not be reached to authenticate: {e}"))
        }
        Err(_) => {
            *link = None;
            fail("the upstream broker did not answer the authentication in time".into())
        }
    }
}

/// Sends a frame over the connection's upstream link (opened on first use,
/// unless the client logged in over it: `relayed`); returns the future of
/// its answer.
async fn forward(
    sidecar: &Arc<Sidecar>,
    link: &mut Option<Link>,
    listener: ListenerInfo,
    out: Outgoing<'_>,
    fwd: Forward,
    relayed: bool,
) -> std::io::Result<Pending> {
    // A link whose upstream SASL session is due for renewal is replaced
    // once it owes nothing (reading pauses until then: `link_draining`).
    if link.as_ref().is_some_and(|l| l.renewal_due(Instant::now()) && l.owes_nothing()) {
        *link = None;
    }
    if link.is_none() {
        if relayed {
            // The client's upstream login went with the link; another link
            // would be the sidecar's.
            return Err(std::io::Error::new(std::io::ErrorKind::NotConnected, "the upstream session is gone"));
        }
        *link = Some(sidecar.connect(listener.node_id, false).await?);
    }
    let Some(l) = link.as_mut() else { return Err(std::io::ErrorKind::NotConnected.into()) };
    let sent = l.send(out.head, out.len, out.rest_from, fwd.correlation, fwd.expects_response, fwd.rewrite.is_some());
    let answer = match sent.await {
        Ok(a) => a,
        Err(e) => {
            *link = None;
            return Err(e);
        }
    };
    let Some(answer) = answer else { return Ok(Box::pin(std::future::ready(Outcome::NoResponse))) };
    let sidecar = sidecar.clone();
    Ok(Box::pin(async move {
        match answer.await {
            Err(_) => Outcome::Close("the upstream connection closed".into()),
            Ok(Answer::Stream(s)) => Outcome::Stream(Box::new(s)),
            Ok(Answer::Whole(resp, held)) => match fwd.rewrite {
                None => Outcome::RespondHolding(resp, held),
                Some(r) => match sidecar.finish(r, fwd.version, resp, listener) {
                    Ok(out) => Outcome::RespondHolding(out, held),
                    Err(e) => Outcome::Close(format!("cannot rewrite the upstream's answer: {e}")),
                },
            },
        }
    }))
}

/// Writes one outcome; returns false if the connection must close.
async fn write_outcome<W: ClientWrite>(writer: &mut BufWriter<W>, outcome: Outcome, peer: SocketAddr) -> bool {
    match outcome {
        // The throttle was noted by the caller (`Mute::note`).
        Outcome::Throttled(inner, _) => Box::pin(write_outcome(writer, *inner, peer)).await,
        // The budget share is released once the bytes are handed to the socket.
        Outcome::Respond(bytes) | Outcome::RespondHolding(bytes, _) => write_frame(writer, &bytes, peer).await,
        Outcome::Encoded(bytes) => write_frame(writer, &bytes, peer).await,
        Outcome::Stream(s) => {
            // Written as it arrives; a frame cut short cannot be repaired,
            // so the client connection closes.
            // Spliced into a plain socket; copied into a TLS stream.
            let moved = match writer.write_all(&s.head).await {
                Ok(()) => match W::plain(writer) {
                    Some(plain) => s.body.forward(plain).await,
                    None => s.body.forward_copying(writer).await,
                },
                Err(e) => Err(e),
            };
            match moved {
                Ok(()) => true,
                Err(e) => {
                    tracing::info!(%peer, error = %e, "forwarding an upstream answer failed; closing connection");
                    false
                }
            }
        }
        Outcome::NoResponse => true,
        Outcome::Close(reason) => {
            tracing::warn!(%peer, %reason, "closing connection");
            let _ = writer.flush().await;
            false
        }
    }
}

/// Writes one response frame; returns false if the connection must close.
async fn write_frame<W: ClientWrite>(writer: &mut BufWriter<W>, frame: &[u8], peer: SocketAddr) -> bool {
    match writer.write_all(frame).await {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "write failed; closing connection");
            false
        }
    }
}

/// Why a connection was closed by one of its timeouts (the `reason` label of
/// `kcoord_connections_closed_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimedOut {
    Idle,
    PartialRequest,
}

impl TimedOut {
    pub fn label(self) -> &'static str {
        match self {
            TimedOut::Idle => "idle",
            TimedOut::PartialRequest => "partial_request_timeout",
        }
    }
}

/// What the connection is doing when its timer fires.
#[derive(Debug, Clone, Copy)]
pub struct State {
    /// Reading requests (not shutting down, not at the in-flight limit).
    pub can_read: bool,
    /// No request in flight.
    pub idle: bool,
    pub activity: super::frame::Activity,
}

/// The idle and partial-request timeouts of one connection.
#[derive(Debug, Clone)]
pub struct Timeouts {
    idle: Option<Duration>,
    partial: Option<Duration>,
    /// When the connection was accepted.
    pub started: Instant,
    /// When a response was last written.
    pub last_write: Instant,
    /// Whether a whole request has arrived yet.
    pub first_request_seen: bool,
}

impl Timeouts {
    pub fn new(server: &crate::config::ServerConfig, now: Instant) -> Self {
        let ms = |v: i64| u64::try_from(v).ok().filter(|v| *v > 0).map(Duration::from_millis);
        Timeouts {
            idle: ms(server.connections_max_idle_ms),
            partial: ms(server.partial_request_timeout_ms),
            started: now,
            last_write: now,
            first_request_seen: false,
        }
    }

    pub fn enabled(&self) -> bool {
        self.idle.is_some() || self.partial.is_some()
    }

    /// A condition that begins after `now` cannot be due before
    /// `now + shortest`.
    fn shortest(&self) -> Duration {
        match (self.idle, self.partial) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            // Never polled (`enabled` is false); any far-off instant will do.
            (None, None) => Duration::from_secs(86_400),
        }
    }

    pub fn first_check(&self) -> Instant {
        self.started + self.shortest()
    }

    /// At `now`, in `state`: `Err` if a timeout has expired, otherwise when
    /// to check next (the earliest moment one can expire).
    pub fn check(&self, now: Instant, state: State) -> Result<Instant, TimedOut> {
        let mut next = now + self.shortest();
        if let (Some(limit), true) = (self.partial, state.can_read) {
            let since = if self.first_request_seen { state.activity.partial_since } else { Some(self.started) };
            if let Some(since) = since {
                let due = since + limit;
                if now >= due {
                    return Err(TimedOut::PartialRequest);
                }
                next = next.min(due);
            }
        }
        if let (Some(limit), true) = (self.idle, state.idle) {
            let last = state.activity.last_read.map_or(self.last_write, |r| r.max(self.last_write));
            let due = last + limit;
            if now >= due {
                return Err(TimedOut::Idle);
            }
            next = next.min(due);
        }
        Ok(next)
    }
}

/// Counts a connection closed by a timeout. An idle connection is routine
/// (debug); an incomplete request is logged at INFO, at most once a second
/// for all connections, so that a crowd of stalled sockets cannot flood
/// the log.
fn note_timeout(reason: TimedOut, peer: SocketAddr) {
    static PARTIAL: Mutex<Option<RateLimitedLog>> = Mutex::new(None);
    metrics::counter!("kcoord_connections_closed_total", "reason" => reason.label()).increment(1);
    match reason {
        TimedOut::Idle => tracing::debug!(%peer, "closing idle connection (server.connections_max_idle_ms)"),
        TimedOut::PartialRequest => {
            let mut log = PARTIAL.lock().unwrap_or_else(|e| e.into_inner());
            let log = log.get_or_insert_with(|| RateLimitedLog::new(Duration::from_secs(1)));
            if let Some(closed) = log.note(std::time::Instant::now()) {
                tracing::info!(
                    %peer,
                    closed,
                    "closing connection: no complete request within server.partial_request_timeout_ms (closed counts every such connection since the previous line)"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerConfig;
    use crate::server::frame::Activity;

    fn timeouts(idle_ms: i64, partial_ms: i64, t0: Instant) -> Timeouts {
        let server = ServerConfig {
            connections_max_idle_ms: idle_ms,
            partial_request_timeout_ms: partial_ms,
            ..Default::default()
        };
        Timeouts::new(&server, t0)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn state(can_read: bool, idle: bool, last_read: Option<Instant>, partial_since: Option<Instant>) -> State {
        State { can_read, idle, activity: Activity { last_read, partial_since } }
    }

    #[test]
    fn a_new_connection_must_send_its_first_request_within_the_partial_request_timeout() {
        let t0 = Instant::now();
        let t = timeouts(10_000, 100, t0);
        assert_eq!(t.first_check(), t0 + ms(100));
        assert_eq!(t.check(t0 + ms(50), state(true, true, None, None)), Ok(t0 + ms(100)));
        assert_eq!(t.check(t0 + ms(100), state(true, true, None, None)), Err(TimedOut::PartialRequest));
        // Even if a few bytes arrived meanwhile.
        let s = state(true, true, Some(t0 + ms(90)), Some(t0 + ms(90)));
        assert_eq!(t.check(t0 + ms(100), s), Err(TimedOut::PartialRequest));
    }

    #[test]
    fn an_incomplete_request_is_timed_from_its_first_byte() {
        let t0 = Instant::now();
        let mut t = timeouts(10_000, 100, t0);
        t.first_request_seen = true;
        let s = state(true, true, Some(t0 + ms(500)), Some(t0 + ms(450)));
        assert_eq!(t.check(t0 + ms(500), s), Ok(t0 + ms(550)));
        assert_eq!(t.check(t0 + ms(550), s), Err(TimedOut::PartialRequest));
    }

    #[test]
    fn an_incomplete_request_does_not_count_while_the_connection_is_not_read() {
        let t0 = Instant::now();
        let mut t = timeouts(10_000, 100, t0);
        t.first_request_seen = true;
        let s = state(false, false, Some(t0), Some(t0));
        assert_eq!(t.check(t0 + ms(5000), s), Ok(t0 + ms(5100)));
    }

    #[test]
    fn a_connection_is_idle_after_its_last_read_or_write_with_nothing_in_flight() {
        let t0 = Instant::now();
        let mut t = timeouts(1000, 100, t0);
        t.first_request_seen = true;
        t.last_write = t0 + ms(300);
        let read_at_200 = state(true, true, Some(t0 + ms(200)), None);
        assert_eq!(t.check(t0 + ms(1000), read_at_200), Ok(t0 + ms(1100)));
        assert_eq!(t.check(t0 + ms(1300), read_at_200), Err(TimedOut::Idle));
        let read_at_500 = state(true, true, Some(t0 + ms(500)), None);
        assert_eq!(t.check(t0 + ms(1300), read_at_500), Ok(t0 + ms(1400)));
    }

    #[test]
    fn a_connection_with_a_request_in_flight_is_never_idle() {
        let t0 = Instant::now();
        let mut t = timeouts(1000, 100, t0);
        t.first_request_seen = true;
        let parked = state(true, false, Some(t0), None);
        assert_eq!(t.check(t0 + ms(60_000), parked), Ok(t0 + ms(60_100)));
    }

    #[test]
    fn minus_one_turns_a_timeout_off() {
        let t0 = Instant::now();
        assert!(!timeouts(-1, -1, t0).enabled());
        let t = timeouts(-1, 100, t0);
        assert!(t.enabled());
        let mut t = timeouts(1000, -1, t0);
        assert_eq!(t.check(t0 + ms(500), state(true, true, None, None)), Ok(t0 + ms(1000)));
        t.first_request_seen = true;
        let stalled = state(true, false, Some(t0), Some(t0));
        assert_eq!(t.check(t0 + ms(99_000), stalled), Ok(t0 + ms(100_000)));
    }
}
