//! A client connection's byte stream: plain TCP or TLS over TCP, split in
//! a read and a write half. The plain halves are the socket's own, so a
//! sidecar can still splice(2) between plain sockets; TLS halves are not.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{lookup_host, TcpStream};

use super::ClientSecurity;

type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

pub enum SecureRead {
    Plain(OwnedReadHalf),
    Tls(ReadHalf<TlsStream>),
}

pub enum SecureWrite {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<TlsStream>),
}

impl SecureRead {
    /// The socket, when its bytes are the protocol's bytes.
    pub fn tcp(&self) -> Option<&OwnedReadHalf> {
        match self {
            SecureRead::Plain(r) => Some(r),
            SecureRead::Tls(_) => None,
        }
    }
}

impl SecureWrite {
    pub fn tcp(&self) -> Option<&OwnedWriteHalf> {
        match self {
            SecureWrite::Plain(w) => Some(w),
            SecureWrite::Tls(_) => None,
        }
    }
}

/// Connects to `addr` ("host:port") and, for SSL and SASL_SSL, runs the TLS
/// handshake, checking the broker's certificate against `host`. Returns
/// the halves and the address connected to.
pub async fn open(
    addr: &str,
    security: &ClientSecurity,
) -> io::Result<(SecureRead, SecureWrite, std::net::SocketAddr)> {
    let resolved = lookup_host(addr)
        .await?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("cannot resolve {addr}")))?;
    let stream = TcpStream::connect(resolved).await?;
    stream.set_nodelay(true)?;
    let Some(tls) = &security.tls else {
        let (r, w) = stream.into_split();
        return Ok((SecureRead::Plain(r), SecureWrite::Plain(w), resolved));
    };
    let host = host_of(addr);
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
    let connector = tokio_rustls::TlsConnector::from(tls.clone());
    let handshake = connector.connect(name, stream);
    let stream = tokio::time::timeout(security.handshake_timeout, handshake)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("TLS handshake with {addr} timed out")))?
        .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake with {addr}: {e}")))?;
    let (r, w) = tokio::io::split(stream);
    Ok((SecureRead::Tls(r), SecureWrite::Tls(w), resolved))
}

/// The host part of "host:port" or "[v6]:port".
pub(crate) fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

impl AsyncRead for SecureRead {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SecureRead::Plain(r) => Pin::new(r).poll_read(cx, buf),
            SecureRead::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for SecureWrite {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            SecureWrite::Plain(w) => Pin::new(w).poll_write(cx, buf),
            SecureWrite::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            SecureWrite::Plain(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            SecureWrite::Tls(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            SecureWrite::Plain(w) => w.is_write_vectored(),
            SecureWrite::Tls(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SecureWrite::Plain(w) => Pin::new(w).poll_flush(cx),
            SecureWrite::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SecureWrite::Plain(w) => Pin::new(w).poll_shutdown(cx),
            SecureWrite::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_host_is_told_from_the_port() {
        assert_eq!(super::host_of("kafka-1.example.com:9093"), "kafka-1.example.com");
        assert_eq!(super::host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(super::host_of("[::1]:9093"), "::1");
    }
}
