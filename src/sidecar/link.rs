//! One client connection's link to the upstream broker its listener fronts.
//!
//! Forwarded request frames are written upstream byte for byte, in the
//! order the client sent them (the client's correlation ids are kept: the
//! link is this client's alone, so they stay unique). A reader task reads
//! the upstream's responses, which a Kafka broker sends in request order,
//! and hands each to the request waiting for it:
//! - a response that must be rewritten (it carries broker addresses) is
//!   read whole first; such responses are small, and those read but not yet
//!   written to the client hold a share of a per-link budget
//!   (`sidecar.max_buffered_response_bytes`), past which the link stops
//!   reading;
//! - every other response is *streamed*: its length prefix and correlation
//!   id are read, then the client connection takes over the upstream
//!   reader and moves the body to the client as it arrives (`body`, with
//!   splice(2) on Linux), so a 50 MB fetch costs neither 50 MB of memory
//!   nor the time to read it all before its first byte goes out, nor a
//!   copy through kcoord.
//!
//! The link is opened by kcoord's own client ([`crate::protocol::client`]),
//! so it is TLS and SASL-authenticated as `sidecar.upstream_security` says;
//! the client's requests then travel under the sidecar's upstream identity.
//! Bodies are spliced only when both sockets are plain (see `body`). When
//! the upstream limits the SASL session (KIP-368), the link is replaced
//! once its renewal point has passed and every answer it owes has been
//! handed over (the client connection pauses reading until then), so the
//! upstream never sees one client's requests on two connections at once.
//!
//! Backpressure runs both ways: the client connection stops reading while a
//! write upstream waits, and the link stops reading while the client does
//! not take its answers. When the upstream closes or misbehaves, every
//! waiting request fails and the client connection closes, as it would if
//! the client had been connected to that broker directly.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::body::{BodyLease, Pipes, Upstream};
use crate::protocol::client::Connection;
use crate::security::client::stream::SecureWrite;
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// An upstream response, as the client connection receives it.
pub enum Answer {
    /// The whole frame, and its share of the link's buffer budget, held
    /// until the frame is written to the client.
    Whole(Bytes, OwnedSemaphorePermit),
    /// A frame arriving in pieces.
    Stream(Streamed),
}

/// A response whose body is moved to the client as it arrives.
#[derive(Debug)]
pub struct Streamed {
    /// The first bytes (length prefix and correlation id).
    pub head: Bytes,
    /// The rest of the frame, still in the upstream socket (or the link's
    /// read buffer).
    pub body: BodyLease,
}

/// A request waiting for its upstream response.
struct Waiter {
    correlation: i32,
    /// The response is rewritten, so it is needed whole.
    whole: bool,
    reply: oneshot::Sender<Answer>,
}

pub struct Link {
    writer: SecureWrite,
    pipes: Arc<Pipes>,
    /// Answers not yet handed to the client connection.
    owed: Arc<AtomicUsize>,
    /// When the upstream SASL session should be renewed.
    renew_at: Option<Instant>,
    waiters: mpsc::UnboundedSender<Waiter>,
    reader: JoinHandle<()>,
    sent_bytes: metrics::Counter,
    sent_requests: metrics::Counter,
}

/// Limits of one link's reader.
struct ReadLimits {
    max_response_bytes: usize,
    budget: Arc<Semaphore>,
    budget_size: usize,
    owed: Arc<AtomicUsize>,
}

impl Link {
    /// Turns a connection to the upstream broker (connected, negotiated and
    /// authenticated, with nothing in flight) into a link. Whole responses
    /// read but not yet written to the client may hold at most
    /// `max_buffered_bytes` (one larger response at a time is let through
    /// alone).
    pub fn new(conn: Connection, max_response_bytes: usize, max_buffered_bytes: usize, pipes: Arc<Pipes>) -> Link {
        let renew_at = conn.renew_at();
        let (up, writer) = conn.into_parts();
        let (waiters, rx) = mpsc::unbounded_channel();
        let budget_size = max_buffered_bytes.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
        let owed = Arc::new(AtomicUsize::new(0));
        let limits = ReadLimits {
            max_response_bytes,
            budget: Arc::new(Semaphore::new(budget_size)),
            budget_size,
            owed: owed.clone(),
        };
        let reader = tokio::spawn(read_responses(up, rx, limits, pipes.clone()));
        metrics::gauge!("kcoord_sidecar_upstream_connections").increment(1.0);
        Link {
            writer,
            pipes,
            owed,
            renew_at,
            waiters,
            reader,
            sent_bytes: metrics::counter!("kcoord_sidecar_forwarded_bytes_total", "direction" => "upstream"),
            sent_requests: metrics::counter!("kcoord_sidecar_forwarded_requests_total"),
        }
    }

    /// Whether the upstream SASL session is due for renewal.
    pub fn renewal_due(&self, now: Instant) -> bool {
        self.renew_at.is_some_and(|t| now >= t)
    }

    /// Whether every answer this link owes has been handed over.
    pub fn owes_nothing(&self) -> bool {
        self.owed.load(Ordering::Acquire) == 0
    }

    /// Writes one request frame of `len` bytes upstream (the client
    /// connection's framing hands it over without its length prefix).
    /// `head` is the whole frame, or its first bytes when `client` is given:
    /// the rest is then relayed from the client's socket (where it must be
    /// the next bytes) without passing through kcoord's memory. Returns the
    /// receiver of its response (`whole` when the response will be
    /// rewritten), or `None` for a request the broker does not answer
    /// (Produce with acks=0).
    pub async fn send(
        &mut self,
        head: &[u8],
        len: usize,
        client: Option<&OwnedReadHalf>,
        correlation: i32,
        expects_response: bool,
        whole: bool,
    ) -> std::io::Result<Option<oneshot::Receiver<Answer>>> {
        let rx = if expects_response {
            let (reply, rx) = oneshot::channel();
            // Registered before the write, so the reader always finds it.
            self.waiters.send(Waiter { correlation, whole, reply }).map_err(|_| closed())?;
            self.owed.fetch_add(1, Ordering::AcqRel);
            Some(rx)
        } else {
            None
        };
        let prefix = u32::try_from(len).map_err(|_| std::io::Error::other("request frame too large"))?;
        write_frame(&mut self.writer, &prefix.to_be_bytes(), head).await?;
        if let Some(client) = client {
            let rest = len.saturating_sub(head.len());
            match self.writer.tcp() {
                Some(up) => self.pipes.relay(client.as_ref(), up.as_ref(), rest).await?,
                None => super::body::copy_into(client.as_ref(), &mut self.writer, rest).await?,
            }
        }
        // A TLS stream may keep encrypted bytes back when the socket was
        // full; flushing sends them (a no-op on a plain socket).
        self.writer.flush().await?;
        self.sent_bytes.increment(4 + len as u64);
        self.sent_requests.increment(1);
        Ok(rx)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.reader.abort();
        metrics::gauge!("kcoord_sidecar_upstream_connections").decrement(1.0);
    }
}

/// Writes the length prefix and the frame in as few system calls as the
/// socket allows (one, usually), without copying the frame.
async fn write_frame(w: &mut SecureWrite, prefix: &[u8; 4], frame: &[u8]) -> std::io::Result<()> {
    let total = prefix.len() + frame.len();
    let mut written = 0;
    while written < total {
        let n = if written < prefix.len() {
            let slices =
                [std::io::IoSlice::new(prefix.get(written..).unwrap_or_default()), std::io::IoSlice::new(frame)];
            w.write_vectored(&slices).await?
        } else {
            w.write(frame.get(written - prefix.len()..).unwrap_or_default()).await?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        written += n;
    }
    Ok(())
}

fn closed() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the upstream connection is closed")
}

/// Reads exactly `n` more bytes into `buf`'s spare capacity (no zeroing of
/// bytes about to be overwritten); false if the upstream went away.
async fn read_more(rd: &mut Upstream, buf: &mut BytesMut, n: usize) -> bool {
    let target = buf.len() + n;
    buf.reserve(n);
    while buf.len() < target {
        let mut rest = (&mut *rd).take((target - buf.len()) as u64);
        match rest.read_buf(buf).await {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
    }
    true
}

/// Reads response frames and hands them to waiters in order. Returning
/// drops every remaining waiter, which fails their requests.
async fn read_responses(
    mut up: Upstream,
    mut waiters: mpsc::UnboundedReceiver<Waiter>,
    limits: ReadLimits,
    pipes: Arc<Pipes>,
) {
    let received = metrics::counter!("kcoord_sidecar_forwarded_bytes_total", "direction" => "downstream");
    loop {
        // Length prefix and correlation id.
        let mut head = BytesMut::with_capacity(8);
        if !read_more(&mut up, &mut head, 8).await {
            return;
        }
        let (Some(len), Some(correlation)) = (crate::be_int::i32_at(&head, 0), crate::be_int::i32_at(&head, 4)) else {
            return;
        };
        let Ok(len) = usize::try_from(len) else { return };
        if !(4..=limits.max_response_bytes).contains(&len) {
            tracing::warn!(len, "upstream response size out of bounds; closing the link");
            return;
        }
        let Some(waiter) = waiters.recv().await else { return };
        if waiter.correlation != correlation {
            tracing::warn!(
                expected = waiter.correlation,
                got = correlation,
                "upstream answered out of order; closing the link"
            );
            return;
        }
        received.increment(4 + len as u64);
        let remaining = len - 4;
        if waiter.whole {
            let share = (4 + len).min(limits.budget_size) as u32;
            let Ok(held) = limits.budget.clone().acquire_many_owned(share).await else { return };
            let mut frame = BytesMut::with_capacity(4 + len);
            frame.put_slice(&head);
            if !read_more(&mut up, &mut frame, remaining).await {
                return;
            }
            // Counted as handed over before it is, so that the client
            // connection, on seeing the answer, sees the link owing nothing.
            limits.owed.fetch_sub(1, Ordering::AcqRel);
            let _ = waiter.reply.send(Answer::Whole(frame.freeze(), held));
            continue;
        }
        // The client connection moves the body and gives the reader back;
        // if it cannot (it went away), neither can this link go on.
        let (back, returned) = oneshot::channel();
        let body = BodyLease::new(remaining, up, pipes.clone(), back);
        limits.owed.fetch_sub(1, Ordering::AcqRel);
        if waiter.reply.send(Answer::Stream(Streamed { head: head.freeze(), body })).is_err() {
            return;
        }
        match returned.await {
            Ok(reader) => up = reader,
            Err(_) => return,
        }
    }
}
