//! One client connection's link to the upstream broker its listener fronts.
//!
//! Forwarded request frames are written upstream byte for byte, in the
//! order the client sent them (the client's correlation ids are kept: the
//! link is this client's alone, so they stay unique). A reader task reads
//! the upstream's responses, which a Kafka broker sends in request order,
//! and hands each to the request waiting for it. Backpressure runs both
//! ways: the client connection stops reading while a write upstream waits,
//! and at most `server.max_inflight_per_connection` requests wait for
//! answers. When the upstream closes or misbehaves, every waiting request
//! fails and the client connection closes, as it would if the client had
//! been connected to that broker directly.

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// A request waiting for its upstream response.
struct Waiter {
    correlation: i32,
    reply: oneshot::Sender<Bytes>,
}

pub struct Link {
    writer: OwnedWriteHalf,
    waiters: mpsc::UnboundedSender<Waiter>,
    reader: JoinHandle<()>,
    sent_bytes: metrics::Counter,
    sent_requests: metrics::Counter,
}

impl Link {
    /// Connects to the upstream broker at `addr`.
    pub async fn connect(addr: &str, max_response_bytes: usize) -> std::io::Result<Link> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (rd, writer) = stream.into_split();
        let (waiters, rx) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_responses(rd, rx, max_response_bytes));
        metrics::counter!("kcoord_sidecar_upstream_connects_total", "use" => "client").increment(1);
        metrics::gauge!("kcoord_sidecar_upstream_connections").increment(1.0);
        Ok(Link {
            writer,
            waiters,
            reader,
            sent_bytes: metrics::counter!("kcoord_sidecar_forwarded_bytes_total", "direction" => "upstream"),
            sent_requests: metrics::counter!("kcoord_sidecar_forwarded_requests_total"),
        })
    }

    /// Writes one request frame (without its length prefix, as the client
    /// connection's framing hands it over) upstream. Returns
    /// the receiver of its response, or `None` for a request the broker
    /// does not answer (Produce with acks=0).
    pub async fn send(
        &mut self,
        frame: &[u8],
        correlation: i32,
        expects_response: bool,
    ) -> std::io::Result<Option<oneshot::Receiver<Bytes>>> {
        let rx = if expects_response {
            let (reply, rx) = oneshot::channel();
            // Registered before the write, so the reader always finds it.
            self.waiters.send(Waiter { correlation, reply }).map_err(|_| closed())?;
            Some(rx)
        } else {
            None
        };
        let len = u32::try_from(frame.len()).map_err(|_| std::io::Error::other("request frame too large"))?;
        write_frame(&mut self.writer, &len.to_be_bytes(), frame).await?;
        self.sent_bytes.increment(4 + frame.len() as u64);
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
async fn write_frame(w: &mut OwnedWriteHalf, prefix: &[u8; 4], frame: &[u8]) -> std::io::Result<()> {
    let total = prefix.len() + frame.len();
    let mut written = 0;
    while written < total {
        let n = if written < prefix.len() {
            let slices = [std::io::IoSlice::new(&prefix[written..]), std::io::IoSlice::new(frame)];
            w.write_vectored(&slices).await?
        } else {
            w.write(&frame[written - prefix.len()..]).await?
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

/// Reads response frames and completes waiters in order. Returning drops
/// every remaining waiter, which fails their requests.
async fn read_responses(rd: OwnedReadHalf, mut waiters: mpsc::UnboundedReceiver<Waiter>, max_response_bytes: usize) {
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    let received = metrics::counter!("kcoord_sidecar_forwarded_bytes_total", "direction" => "downstream");
    loop {
        let len = match rd.read_i32().await {
            Ok(n) => n,
            Err(_) => return,
        };
        let Ok(len) = usize::try_from(len) else { return };
        if !(4..=max_response_bytes).contains(&len) {
            tracing::warn!(len, "upstream response size out of bounds; closing the link");
            return;
        }
        let mut frame = BytesMut::with_capacity(4 + len);
        frame.put_u32(len as u32);
        // Read into the spare capacity: no zeroing of what is overwritten anyway.
        while frame.len() < 4 + len {
            let mut rest = (&mut rd).take((4 + len - frame.len()) as u64);
            match rest.read_buf(&mut frame).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        let correlation = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let Some(waiter) = waiters.recv().await else { return };
        if waiter.correlation != correlation {
            tracing::warn!(
                expected = waiter.correlation,
                got = correlation,
                "upstream answered out of order; closing the link"
            );
            return;
        }
        received.increment(frame.len() as u64);
        let _ = waiter.reply.send(frame.freeze());
    }
}
