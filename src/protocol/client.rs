//! A small Kafka client connection, for kcoord's own tools (the load
//! generator and the admin CLI) to talk to kcoord or any Kafka-compatible
//! cluster: typed requests at a chosen version, version negotiation through
//! ApiVersions, and pipelining (several requests written before the answers
//! are read, answers matched in order).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::time::Instant;

use crate::security::client::stream::{self, SecureRead, SecureWrite};
use crate::security::client::ClientSecurity;

/// What can go wrong talking to a broker.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("cannot encode request: {0}")]
    Encode(String),
    #[error("cannot decode response: {0}")]
    Decode(String),
    #[error("response correlation id {got} does not match request {want}")]
    Correlation { want: i32, got: i32 },
    #[error("the broker does not support {api} (versions {min}..{max} needed)")]
    Unsupported { api: String, min: i16, max: i16 },
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("response of {0} bytes exceeds the limit")]
    TooLarge(usize),
    #[error("authentication failed: {0}")]
    Authentication(String),
}

/// The largest response accepted.
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// One connection to a broker (TCP, or TLS over TCP).
pub struct Connection {
    reader: BufReader<SecureRead>,
    writer: BufWriter<SecureWrite>,
    next_correlation: i32,
    client_id: String,
    versions: HashMap<i16, (i16, i16)>,
    pub addr: SocketAddr,
    /// Largest response accepted now (small while authenticating).
    max_response: usize,
    /// When the SASL session the broker limited (KIP-368) should be
    /// renewed, by reconnecting.
    renew_at: Option<Instant>,
}

/// A session is renewed once this share of its lifetime has passed
/// (Kafka's clients re-authenticate between 85% and 95%).
const RENEW_AT_SHARE: f64 = 0.85;

impl Connection {
    /// Connects to `addr` ("host:port") over plain TCP.
    pub async fn connect(addr: &str, client_id: &str) -> Result<Connection, ClientError> {
        Self::connect_with(addr, client_id, &ClientSecurity::plaintext()).await
    }

    /// Connects to `addr`, with TLS where `security` asks for it (SASL
    /// comes after ApiVersions: see [`Self::connect_secure`]).
    pub async fn connect_with(
        addr: &str,
        client_id: &str,
        security: &ClientSecurity,
    ) -> Result<Connection, ClientError> {
        let (r, w, resolved) = stream::open(addr, security).await?;
        Ok(Connection {
            reader: BufReader::with_capacity(64 * 1024, r),
            writer: BufWriter::with_capacity(64 * 1024, w),
            next_correlation: 0,
            client_id: client_id.to_string(),
            versions: HashMap::new(),
            addr: resolved,
            max_response: MAX_RESPONSE_BYTES,
            renew_at: None,
        })
    }

    /// Connects and learns the broker's API versions.
    pub async fn connect_negotiated(addr: &str, client_id: &str) -> Result<Connection, ClientError> {
        Self::connect_secure(addr, client_id, &ClientSecurity::plaintext()).await
    }

    /// Connects (TLS where asked), learns the broker's API versions and
    /// authenticates with SASL where asked, all within the settings'
    /// handshake timeout.
    pub async fn connect_secure(
        addr: &str,
        client_id: &str,
        security: &ClientSecurity,
    ) -> Result<Connection, ClientError> {
        let limit = security.handshake_timeout;
        let setup = async {
            let mut c = Self::connect_with(addr, client_id, security).await?;
            c.negotiate().await?;
            if let Some(login) = &security.sasl {
                c.max_response = crate::security::client::MAX_TOKEN_BYTES;
                let lifetime = crate::security::client::sasl::authenticate(&mut c, login, addr).await?;
                c.max_response = MAX_RESPONSE_BYTES;
                c.renew_at = lifetime.map(|l| Instant::now() + l.mul_f64(RENEW_AT_SHARE));
            }
            Ok(c)
        };
        match tokio::time::timeout(limit, setup).await {
            Ok(r) => r,
            Err(_) => Err(ClientError::Timeout(limit)),
        }
    }

    /// Whether the broker-set SASL session lifetime is nearly over: the
    /// connection should be replaced before the broker closes it.
    pub fn needs_renewal(&self, now: Instant) -> bool {
        self.renew_at.is_some_and(|t| now >= t)
    }

    /// When the session should be renewed, if it has a lifetime.
    pub fn renew_at(&self) -> Option<Instant> {
        self.renew_at
    }

    /// The connection's byte stream, for relaying frames through it (a
    /// sidecar's link). Nothing is buffered after a completed call.
    pub fn into_parts(self) -> (BufReader<SecureRead>, SecureWrite) {
        (self.reader, self.writer.into_inner())
    }

    /// Asks the broker which API versions it serves (ApiVersions v0, which
    /// every broker answers).
    pub async fn negotiate(&mut self) -> Result<(), ClientError> {
        let r = self.call(&ApiVersionsRequest::default(), 0).await?;
        self.versions = r.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
        Ok(())
    }

    /// The broker's API versions as (key, min, max), sorted by key.
    pub fn api_versions(&self) -> Vec<(i16, i16, i16)> {
        let mut v: Vec<(i16, i16, i16)> = self.versions.iter().map(|(k, (lo, hi))| (*k, *lo, *hi)).collect();
        v.sort_unstable();
        v
    }

    /// The highest version of `R` both sides support, within `min..=max`.
    pub fn version<R: Request>(&self, min: i16, max: i16) -> Result<i16, ClientError> {
        let name = ApiKey::try_from(R::KEY).map(|k| format!("{k:?}")).unwrap_or_else(|_| R::KEY.to_string());
        match self.versions.get(&R::KEY) {
            Some(&(lo, hi)) if hi >= min && lo <= max => Ok(hi.min(max)),
            _ => Err(ClientError::Unsupported { api: name, min, max }),
        }
    }

    /// Encodes a request frame (length prefix included); returns its
    /// correlation id.
    pub fn encode<R: Request>(&mut self, req: &R, version: i16) -> Result<(i32, Bytes), ClientError> {
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let correlation = self.next_correlation;
        let key = ApiKey::try_from(R::KEY).map_err(|_| ClientError::Encode(format!("unknown API key {}", R::KEY)))?;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut buf = BytesMut::with_capacity(128);
        buf.put_i32(0);
        header.encode(&mut buf, key.request_header_version(version)).map_err(|e| ClientError::Encode(e.to_string()))?;
        req.encode(&mut buf, version).map_err(|e| ClientError::Encode(e.to_string()))?;
        let len = (buf.len() - 4) as i32;
        crate::be_int::set_i32_at(&mut buf, 0, len);
        Ok((correlation, buf.freeze()))
    }

    /// Writes frames without waiting for answers (pipelining).
    pub async fn write(&mut self, frames: &[Bytes]) -> Result<(), ClientError> {
        for f in frames {
            self.writer.write_all(f).await?;
        }
        self.writer.flush().await?;
        Ok(())
    }

    /// Reads the next response and decodes it as the answer to `R`.
    pub async fn read<R: Request>(&mut self, version: i16) -> Result<(i32, R::Response), ClientError> {
        let header_version = <R::Response as HeaderVersion>::header_version(version);
        let (correlation, mut bytes) = self.read_body(header_version).await?;
        let len = bytes.len();
        let resp =
            super::codec::guarded(len, || R::Response::decode(&mut bytes, version)).map_err(ClientError::Decode)?;
        Ok((correlation, resp))
    }

    /// Reads the next response: its correlation id and its body, undecoded
    /// (for versions past the `kafka-protocol` crate's, which callers read
    /// themselves).
    pub async fn read_body(&mut self, header_version: i16) -> Result<(i32, Bytes), ClientError> {
        let len = self.reader.read_i32().await?;
        if len < 4 || len as usize > self.max_response {
            return Err(ClientError::TooLarge(len.max(0) as usize));
        }
        let mut buf = vec![0u8; len as usize];
        self.reader.read_exact(&mut buf).await?;
        let mut bytes = Bytes::from(buf);
        let len = bytes.len();
        let header = super::codec::guarded(len, || ResponseHeader::decode(&mut bytes, header_version))
            .map_err(ClientError::Decode)?;
        Ok((header.correlation_id, bytes))
    }

    /// Whether a complete response is already buffered (so reading it will
    /// not wait for the network): lets pipelined callers batch their writes.
    pub fn response_buffered(&self) -> bool {
        let b = self.reader.buffer();
        crate::be_int::i32_at(b, 0).is_some_and(|len| len >= 0 && b.len() >= 4 + len as usize)
    }

    /// Writes frames into the send buffer without flushing.
    pub async fn buffer(&mut self, frame: &[u8]) -> Result<(), ClientError> {
        self.writer.write_all(frame).await?;
        Ok(())
    }

    /// Flushes buffered frames to the socket.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        self.writer.flush().await?;
        Ok(())
    }

    /// Sends one request and waits for its answer.
    pub async fn call<R: Request>(&mut self, req: &R, version: i16) -> Result<R::Response, ClientError> {
        let (want, frame) = self.encode(req, version)?;
        self.write(&[frame]).await?;
        let (got, resp) = self.read::<R>(version).await?;
        if got != want {
            return Err(ClientError::Correlation { want, got });
        }
        Ok(resp)
    }

    /// `call` with a deadline.
    pub async fn call_timeout<R: Request>(
        &mut self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, ClientError> {
        tokio::time::timeout(timeout, self.call(req, version)).await.map_err(|_| ClientError::Timeout(timeout))?
    }
}

/// Shorthand for kafka-protocol strings.
pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}
