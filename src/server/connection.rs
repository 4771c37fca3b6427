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
//! In sidecar mode, requests kcoord does not serve go over this
//! connection's own link to the upstream broker its listener fronts. They
//! are written upstream as they are read, so the upstream sees them in the
//! client's order (idempotent producers depend on it); their answers take
//! their place in the same ordered queue as local answers.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::stream::{FuturesOrdered, StreamExt};
use futures_util::FutureExt;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_util::codec::FramedRead;

use super::dispatch::{self, Outcome};
use super::frame::FrameCodec;
use super::{ListenerInfo, Services};
use crate::sidecar::link::{Answer, Link};
use crate::sidecar::{Forward, Route, Sidecar};

type Pending = Pin<Box<dyn Future<Output = Outcome> + Send>>;

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
    let mut inflight: FuturesOrdered<Pending> = FuturesOrdered::new();
    let max_inflight = svc.config.server.max_inflight_per_connection as usize;
    let mut reading = !*shutdown.borrow();
    let mut link: Option<Link> = None;

    loop {
        if !reading && inflight.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            Some(outcome) = inflight.next(), if !inflight.is_empty() => {
                if !write_outcome(&mut writer, outcome, peer).await {
                    return;
                }
                // Write every response that is already done, then flush once.
                while let Some(Some(outcome)) = inflight.next().now_or_never() {
                    if !write_outcome(&mut writer, outcome, peer).await {
                        return;
                    }
                }
                if let Err(e) = writer.flush().await {
                    tracing::debug!(%peer, error = %e, "write failed; closing connection");
                    return;
                }
            }
            frame = frames.next(), if reading && inflight.len() < max_inflight => {
                match frame {
                    Some(Ok(frame)) => {
                        let route = if svc.sidecar.is_some() { crate::sidecar::route(&frame) } else { Route::Local };
                        match route {
                            Route::Local => {
                                let svc = svc.clone();
                                inflight.push_back(Box::pin(dispatch::handle_frame(svc, peer, listener, frame)));
                            }
                            Route::Forward(fwd) => {
                                let Some(sidecar) = svc.sidecar.clone() else { return };
                                match forward(&sidecar, &mut link, listener, &frame, fwd).await {
                                    Ok(pending) => inflight.push_back(pending),
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
            }
        }
    }
    let _ = writer.shutdown().await;
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
    let answer = match l.send(frame, fwd.correlation, fwd.expects_response, fwd.rewrite.is_some()).await {
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
            Ok(Answer::Stream(s)) => Outcome::Stream(s),
            Ok(Answer::Whole(resp, held)) => match fwd.rewrite {
                None => Outcome::RespondHolding(resp, held),
                Some(r) => match sidecar.finish(r, fwd.version, resp) {
                    Ok(out) => Outcome::RespondHolding(out, held),
                    Err(e) => Outcome::Close(format!("cannot rewrite the upstream's answer: {e}")),
                },
            },
        }
    }))
}

/// Writes one outcome; returns false if the connection must close.
async fn write_outcome<W: tokio::io::AsyncWrite + Unpin>(writer: &mut W, outcome: Outcome, peer: SocketAddr) -> bool {
    match outcome {
        // The budget share is released once the bytes are handed to the socket.
        Outcome::Respond(bytes) | Outcome::RespondHolding(bytes, _) => match writer.write_all(&bytes).await {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "write failed; closing connection");
                false
            }
        },
        Outcome::Stream(mut s) => {
            // Written as it arrives; a frame cut short cannot be repaired,
            // so the client connection closes.
            let mut written = s.head.len();
            if let Err(e) = writer.write_all(&s.head).await {
                tracing::debug!(%peer, error = %e, "write failed; closing connection");
                return false;
            }
            while let Some(chunk) = s.rest.recv().await {
                written += chunk.len();
                if let Err(e) = writer.write_all(&chunk).await {
                    tracing::debug!(%peer, error = %e, "write failed; closing connection");
                    return false;
                }
            }
            if written != s.len {
                tracing::info!(%peer, "the upstream connection closed in the middle of a response; closing connection");
                let _ = writer.flush().await;
                return false;
            }
            true
        }
        Outcome::NoResponse => true,
        Outcome::Close(reason) => {
            tracing::warn!(%peer, %reason, "closing connection");
            let _ = writer.flush().await;
            false
        }
    }
}
