//! Moving large frame bodies between the client and the upstream.
//!
//! Fetch answers and Produce requests are most of what a sidecar forwards,
//! by bytes. Copying them through kcoord (read into a buffer, write out of
//! it) costs two memory copies per byte on the same cores as the client and
//! the broker; on the 2-core benchmark machine that held 1 KiB-message
//! fetches at 0.65–0.9 of direct access. On Linux a body is instead moved
//! with splice(2): from one socket into a pipe, and from the pipe into the
//! other socket, so the payload's pages pass between the sockets without
//! being copied through user space. Elsewhere, when no pipe can be had, or
//! when either side is TLS (its bytes must be decrypted and encrypted
//! again), the body is copied through a buffer.
//!
//! Answers: while the client connection moves an answer's body it holds the
//! link's upstream reader (a [`BodyLease`]) and gives it back when the body
//! is complete. A lease dropped before that (the client went away, a write
//! failed) closes the link: the upstream stream is then at an unknown
//! position. Requests: the client connection's framing hands over the head
//! of a large forwarded request, and the rest is relayed from the client
//! socket before the next frame is read (`link::Link::send`).

use std::io;
use std::sync::Mutex;

use tokio::io::{AsyncBufRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

use crate::security::client::stream::SecureRead;
use tokio::sync::oneshot;

/// The sidecar's pipes for splice(2), shared by all connections: a pipe is
/// needed only while a body moves, and is empty again after, so a small pool
/// bounds the descriptors and kernel memory pipes take however many clients
/// are connected. When every pipe is busy, a body is copied instead.
pub struct Pipes {
    idle: Mutex<Vec<pipe::Pipe>>,
    /// Pipes that exist (idle or moving a body).
    made: Mutex<usize>,
    max: usize,
}

impl Pipes {
    pub fn new(max: usize) -> Pipes {
        Pipes { idle: Mutex::new(Vec::new()), made: Mutex::new(0), max }
    }

    fn take(&self) -> Option<pipe::Pipe> {
        if let Some(p) = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Some(p);
        }
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        if *made >= self.max {
            return None;
        }
        let p = pipe::Pipe::new()?;
        *made += 1;
        Some(p)
    }

    /// Returns an empty pipe to the pool.
    fn give(&self, p: pipe::Pipe) {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).push(p);
    }

    /// Drops a pipe that may still hold bytes of a failed transfer.
    fn discard(&self, p: pipe::Pipe) {
        drop(p);
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        *made = made.saturating_sub(1);
    }

    /// Moves the next `n` bytes read from `from` to `to`, spliced through a
    /// pipe if one is free, copied otherwise.
    pub async fn relay(&self, from: &TcpStream, to: &TcpStream, n: usize) -> io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let Some(p) = self.take() else { return copy_into(from, &mut SocketWriter(to), n).await };
        match pipe::splice(&p, from, to, n).await {
            Ok(()) => {
                self.give(p);
                Ok(())
            }
            Err(e) => {
                self.discard(p);
                Err(e)
            }
        }
    }
}

/// What a link's reader hands out and gets back.
pub type Upstream = BufReader<SecureRead>;

/// The right to read the next `remaining` bytes of the upstream stream.
pub struct BodyLease {
    remaining: usize,
    upstream: Upstream,
    pipes: std::sync::Arc<Pipes>,
    back: oneshot::Sender<Upstream>,
}

impl std::fmt::Debug for BodyLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyLease").field("remaining", &self.remaining).finish_non_exhaustive()
    }
}

/// Copy buffer of the fallback path, at most.
const COPY_BYTES: usize = 256 * 1024;

impl BodyLease {
    pub fn new(
        remaining: usize,
        upstream: Upstream,
        pipes: std::sync::Arc<Pipes>,
        back: oneshot::Sender<Upstream>,
    ) -> BodyLease {
        BodyLease { remaining, upstream, pipes, back }
    }

    /// Writes the body to the client and returns the upstream reader to the
    /// link. Any error leaves the client frame cut short: the caller closes
    /// the client connection (and dropping the lease closes the link).
    pub async fn forward(mut self, out: &mut BufWriter<OwnedWriteHalf>) -> io::Result<()> {
        if self.upstream.get_ref().tcp().is_none() {
            return self.forward_copying(out).await;
        }
        // Bytes the reader had already buffered go through user space.
        let buffered = self.upstream.buffer();
        let n = buffered.len().min(self.remaining);
        out.write_all(buffered.get(..n).unwrap_or_default()).await?;
        std::pin::Pin::new(&mut self.upstream).consume(n);
        self.remaining -= n;
        out.flush().await?;
        let Some(up) = self.upstream.get_ref().tcp() else { return Err(io::ErrorKind::Unsupported.into()) };
        self.pipes.relay(up.as_ref(), out.get_ref().as_ref(), self.remaining).await?;
        let _ = self.back.send(self.upstream);
        Ok(())
    }

    /// [`Self::forward`] through a buffer, for a TLS client connection or
    /// a TLS upstream link.
    pub async fn forward_copying<W: AsyncWrite + Unpin>(mut self, out: &mut W) -> io::Result<()> {
        let n = self.remaining as u64;
        let moved = tokio::io::copy(&mut (&mut self.upstream).take(n), out).await?;
        if moved < n {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        out.flush().await?;
        let _ = self.back.send(self.upstream);
        Ok(())
    }
}

/// Copies the next `n` bytes of socket `from` to `to` through a buffer: a
/// TLS link, or (wrapped in [`SocketWriter`]) another socket when no pipe
/// is free.
pub async fn copy_into<W: AsyncWrite + Unpin>(from: &TcpStream, to: &mut W, n: usize) -> io::Result<()> {
    let mut buf = vec![0u8; n.min(COPY_BYTES)];
    let mut left = n;
    while left > 0 {
        let want = left.min(buf.len());
        from.readable().await?;
        let Some(room) = buf.get_mut(..want) else { return Err(io::ErrorKind::InvalidInput.into()) };
        let got = match from.try_read(room) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        to.write_all(buf.get(..got).unwrap_or_default()).await?;
        left -= got;
    }
    Ok(())
}

/// A shared socket as an [`AsyncWrite`]: the relay holds both sockets by
/// reference (their owners keep their halves), and tokio writes through
/// `&TcpStream` only with `try_write`.
pub struct SocketWriter<'a>(pub &'a TcpStream);

impl AsyncWrite for SocketWriter<'_> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        loop {
            std::task::ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return std::task::Poll::Ready(r),
            }
        }
    }

    fn poll_flush(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(target_os = "linux")]
pub mod pipe {
    //! splice(2) between two sockets through a pipe.

    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    use tokio::io::Interest;
    use tokio::net::TcpStream;

    /// Pipe capacity asked for: a fetch answer's worth of pages per
    /// round trip through the pipe. The kernel may grant less (it caps
    /// unprivileged pipes at `/proc/sys/fs/pipe-max-size`).
    const WANTED_CAPACITY: libc::c_int = 1024 * 1024;
    /// Smaller pipes are not used.
    const MIN_CAPACITY: usize = 64 * 1024;

    pub struct Pipe {
        read: OwnedFd,
        write: OwnedFd,
        capacity: usize,
    }

    impl Pipe {
        /// A non-blocking pipe, or `None` if the system refuses one (then
        /// bodies are copied instead).
        pub fn new() -> Option<Pipe> {
            let mut fds = [0 as RawFd; 2];
            // SAFETY: `fds` is a valid array of two descriptors for pipe2 to fill.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
                tracing::warn!(error = %io::Error::last_os_error(), "cannot create a pipe; copying forwarded answers instead");
                return None;
            }
            // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
            let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            // SAFETY: fcntl on a descriptor we own; failure only leaves the default size.
            let granted = unsafe {
                libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, WANTED_CAPACITY);
                libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ)
            };
            // Past the per-user pipe memory limit the kernel grants tiny
            // pipes, through which splicing costs more than copying.
            let capacity = usize::try_from(granted).ok().filter(|&c| c >= MIN_CAPACITY)?;
            Some(Pipe { read, write, capacity })
        }
    }

    /// One splice(2) call; `Ok(0)` is end of input.
    fn splice_once(from: RawFd, to: RawFd, len: usize, more: bool) -> io::Result<usize> {
        let flags = libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK | if more { libc::SPLICE_F_MORE } else { 0 };
        // SAFETY: both descriptors are open for the duration of the call; null
        // offsets are required for pipes and sockets.
        let n = unsafe { libc::splice(from, std::ptr::null_mut(), to, std::ptr::null_mut(), len, flags) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// Moves `n` bytes from socket `up` to socket `down` through `pipe`.
    ///
    /// The pipe is filled only when empty, so a would-block while filling
    /// always means the upstream socket has nothing to read (never that the
    /// pipe is full), and tokio's readiness for it can be cleared safely.
    /// The sockets' own buffers keep both sides busy meanwhile.
    pub async fn splice(pipe: &Pipe, up: &TcpStream, down: &TcpStream, n: usize) -> io::Result<()> {
        let (up_fd, down_fd) = (up.as_raw_fd(), down.as_raw_fd());
        let (pipe_r, pipe_w) = (pipe.read.as_raw_fd(), pipe.write.as_raw_fd());
        let mut remaining = n;
        let mut in_pipe = 0usize;
        while remaining > 0 || in_pipe > 0 {
            if in_pipe == 0 {
                let want = remaining.min(pipe.capacity);
                up.readable().await?;
                match up.try_io(Interest::READABLE, || splice_once(up_fd, pipe_w, want, false)) {
                    Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                    Ok(got) => {
                        remaining -= got.min(remaining);
                        in_pipe += got;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            }
            down.writable().await?;
            match down.try_io(Interest::WRITABLE, || splice_once(pipe_r, down_fd, in_pipe, remaining > 0)) {
                Ok(put) => in_pipe -= put.min(in_pipe),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
pub mod pipe {
    //! No splice(2) here: bodies are copied.

    use std::io;

    use tokio::net::TcpStream;

    pub enum Pipe {}

    impl Pipe {
        pub fn new() -> Option<Pipe> {
            None
        }
    }

    pub async fn splice(pipe: &Pipe, _: &TcpStream, _: &TcpStream, _: usize) -> io::Result<()> {
        match *pipe {}
    }
}
