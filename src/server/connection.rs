//! One client connection: read frames, serve them concurrently, write the
//! responses strictly in request order.
//!
//! Requests are served as futures in a `FuturesOrdered`: they make progress
//! concurrently (a parked JoinGroup does not stop a later Metadata from being
//! computed), but responses leave in the order requests arrived, which every
//! client checks through correlation ids. At most
//! `server.max_inflight_per_connection` requests are in flight; beyond that
//! we stop reading, and TCP pushes back on the client.
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
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{FuturesOrdered, StreamExt};
use futures_util::FutureExt;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{watch, AcquireError, OwnedSemaphorePermit};
use tokio_util::codec::FramedRead;

use super::dispatch::{self, Outcome};
use super::frame::FrameCodec;
use super::{ListenerInfo, Services};
use crate::sidecar::link::Link;
use crate::sidecar::{Forward, Route, Sidecar};

type Pending = Pin<Box<dyn Future<Output = Outcome> + Send>>;
/// A request's outcome and the frame bytes it held.
type Served = Pin<Box<dyn Future<Output = (Outcome, usize)> + Send>>;
type Permit = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

/// Per-connection write buffer.
const WRITE_BUFFER_BYTES: usize = 8 * 1024;

/// Serves `stream` until the client goes away, a frame is malformed, or the
/// daemon shuts down (then in-flight requests are finished first).
pub async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    listener: ListenerInfo,
    svc: Arc<Services>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let mut frames = FramedRead::new(rd, FrameCodec::new(svc.config.server.max_request_bytes));
    // Coalesces pipelined small responses into few writes; larger responses
    // bypass it. Kept small because every idle connection holds one.
    let mut writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, wr);
    let mut inflight: FuturesOrdered<Served> = FuturesOrdered::new();
    let max_inflight = svc.config.server.max_inflight_per_connection as usize;
    // This connection's request bytes in flight, and its limit.
    let mut inflight_bytes = 0usize;
    let max_inflight_bytes = svc.config.server.max_request_bytes as usize;
    // A frame read while the daemon's budget was spent, waiting for permits.
    let mut parked: Option<(Bytes, Permit)> = None;
    let mut reading = !*shutdown.borrow();
    let mut link: Option<Link> = None;

    loop {
        if !reading && inflight.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            Some((outcome, bytes)) = inflight.next(), if !inflight.is_empty() => {
                inflight_bytes = inflight_bytes.saturating_sub(bytes);
                if !write_outcome(&mut writer, outcome, peer).await {
                    return;
                }
                // Write every response that is already done, then flush once.
                while let Some(Some((outcome, bytes))) = inflight.next().now_or_never() {
                    inflight_bytes = inflight_bytes.saturating_sub(bytes);
                    if !write_outcome(&mut writer, outcome, peer).await {
                        return;
                    }
                }
                if let Err(e) = writer.flush().await {
                    tracing::debug!(%peer, error = %e, "write failed; closing connection");
                    return;
                }
            }
            permit = wait_for_permit(&mut parked), if parked.is_some() => {
                let Some((frame, _)) = parked.take() else { continue };
                let Ok(permit) = permit else { return };
                inflight_bytes += frame.len();
                inflight.push_back(local(&svc, peer, listener, frame, permit));
            }
            frame = frames.next(), if reading && parked.is_none() && inflight.len() < max_inflight
                && inflight_bytes < max_inflight_bytes => {
                match frame {
                    Some(Ok(frame)) => {
                        let route = svc.sidecar.as_ref().map_or(Route::Local, |s| s.route(&frame));
                        match route {
                            Route::Local => {
                                let n = u32::try_from(frame.len()).unwrap_or(u32::MAX);
                                match svc.request_budget.clone().try_acquire_many_owned(n) {
                                    Ok(permit) => {
                                        inflight_bytes += frame.len();
                                        inflight.push_back(local(&svc, peer, listener, frame, permit));
                                    }
                                    Err(tokio::sync::TryAcquireError::NoPermits) => {
                                        tracing::debug!(%peer, bytes = n, "request budget spent; waiting before serving");
                                        let wait = Box::pin(svc.request_budget.clone().acquire_many_owned(n));
                                        parked = Some((frame, wait));
                                    }
                                    Err(tokio::sync::TryAcquireError::Closed) => return,
                                }
                            }
                            Route::Forward(fwd) => {
                                let Some(sidecar) = svc.sidecar.clone() else { return };
                                match forward(&sidecar, &mut link, listener, &frame, fwd).await {
                                    Ok(pending) => inflight.push_back(Box::pin(pending.map(|o| (o, 0)))),
                                    Err(e) => {
                                        // As if the client's broker had gone away.
                                        tracing::info!(%peer, broker = listener.node_id, error = %e, "upstream unreachable; closing the client connection");
                                        return;
                                    }
                                }
                            }
                        }
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
        }
    }
    let _ = writer.shutdown().await;
}

/// Serves a local request, holding its share of the daemon's request budget
/// until it is answered.
fn local(
    svc: &Arc<Services>,
    peer: SocketAddr,
    listener: ListenerInfo,
    frame: Bytes,
    permit: OwnedSemaphorePermit,
) -> Served {
    let svc = svc.clone();
    let len = frame.len();
    Box::pin(async move {
        let outcome = dispatch::handle_frame(svc, peer, listener, frame).await;
        drop(permit);
        (outcome, len)
    })
}

/// Completes when the parked frame's permits are granted (never if none is parked).
async fn wait_for_permit(parked: &mut Option<(Bytes, Permit)>) -> Result<OwnedSemaphorePermit, AcquireError> {
    match parked {
        Some((_, wait)) => wait.await,
        None => std::future::pending().await,
    }
}

/// Sends a frame over the connection's upstream link (opened on first use);
/// returns the future of its answer.
async fn forward(
    sidecar: &Arc<Sidecar>,
    link: &mut Option<Link>,
    listener: ListenerInfo,
    frame: &[u8],
    fwd: Forward,
) -> std::io::Result<Pending> {
    if link.is_none() {
        *link = Some(sidecar.connect(listener.node_id).await?);
    }
    let Some(l) = link.as_mut() else { return Err(std::io::ErrorKind::NotConnected.into()) };
    let answer = match l.send(frame, fwd.correlation, fwd.expects_response).await {
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
            Ok(resp) => match fwd.rewrite {
                None => Outcome::Respond(resp),
                Some(r) => match sidecar.finish(r, fwd.version, resp) {
                    Ok(out) => Outcome::Respond(out),
                    Err(e) => Outcome::Close(format!("cannot rewrite the upstream's answer: {e}")),
                },
            },
        }
    }))
}

/// Writes one outcome; returns false if the connection must close.
async fn write_outcome<W: tokio::io::AsyncWrite + Unpin>(writer: &mut W, outcome: Outcome, peer: SocketAddr) -> bool {
    match outcome {
        Outcome::Respond(bytes) => match writer.write_all(&bytes).await {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "write failed; closing connection");
                false
            }
        },
        Outcome::NoResponse => true,
        Outcome::Close(reason) => {
            tracing::warn!(%peer, %reason, "closing connection");
            let _ = writer.flush().await;
            false
        }
    }
}
