//! Decoding and encoding message bodies with kafka-protocol, safely.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable};

/// A request body that could not be decoded. The connection is closed, as
/// Kafka does for unparseable requests.
#[derive(Debug, thiserror::Error)]
#[error("malformed {api} v{version} request: {reason}")]
pub struct DecodeError {
    pub api: &'static str,
    pub version: i16,
    pub reason: String,
}

/// A response that could not be encoded (a bug: a field set that the
/// negotiated version cannot carry).
#[derive(Debug, thiserror::Error)]
#[error("cannot encode {api} v{version} response: {reason}")]
pub struct EncodeError {
    pub api: &'static str,
    pub version: i16,
    pub reason: String,
}

/// Decodes a body with [`guarded`].
pub fn decode<T: Decodable>(api: &'static str, body: &mut Bytes, version: i16) -> Result<T, DecodeError> {
    let len = body.len();
    guarded(len, || T::decode(body, version)).map_err(|reason| DecodeError { api, version, reason })
}

/// Runs a kafka-protocol decode of a `body_len`-byte body (a request, or
/// an upstream's response). A panic inside the codec is an error, and so is
/// an array that declares more entries than the body holds, whatever the
/// decoder made of it: its reservation was refused
/// ([`crate::alloc_guard::within_decode_budget`]), as Kafka refuses such a
/// request before it allocates.
pub fn guarded<T, E: std::fmt::Display>(body_len: usize, decode: impl FnOnce() -> Result<T, E>) -> Result<T, String> {
    let (decoded, refused) =
        crate::alloc_guard::within_decode_budget(body_len, || catch_unwind(AssertUnwindSafe(decode)));
    if let Some(bytes) = refused {
        return Err(format!(
            "an array declares more entries than the {body_len}-byte body holds (its decoder asked for {bytes} bytes)"
        ));
    }
    match decoded {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("decoder panicked".into()),
    }
}

/// Encodes a body onto `out`.
pub fn encode<T: Encodable>(api: &'static str, msg: &T, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let err = |e: anyhow_like::Error| EncodeError { api, version, reason: e.0 };
    let size = msg.compute_size(version).map_err(|e| err(anyhow_like::Error(e.to_string())))?;
    check_size(api, version, out.len().saturating_add(size))?;
    out.reserve(size);
    msg.encode(out, version).map_err(|e| err(anyhow_like::Error(e.to_string())))
}

tokio::task_local! {
    /// The largest response frame (length prefix included) the request being
    /// served may produce: `server.max_response_bytes`. Set by the dispatcher
    /// around each request; encoders check it before they allocate.
    pub static RESPONSE_LIMIT: usize;
}

/// The largest frame a Kafka length prefix (an i32) can describe.
pub const MAX_FRAME_BYTES: usize = 4 + i32::MAX as usize;

/// The response limit of the request being served (the i32 limit outside a
/// dispatcher, e.g. in unit tests).
pub fn response_limit() -> usize {
    RESPONSE_LIMIT.try_with(|l| *l).unwrap_or(MAX_FRAME_BYTES).min(MAX_FRAME_BYTES)
}

/// Refuses a response that would grow to `total` bytes (length prefix and
/// header included) past the response limit, before it is encoded.
pub fn check_size(api: &'static str, version: i16, total: usize) -> Result<(), EncodeError> {
    let limit = response_limit();
    if total > limit {
        return Err(EncodeError {
            api,
            version,
            reason: format!(
                "the response would take {total} bytes, over the limit of {limit} (server.max_response_bytes)"
            ),
        });
    }
    Ok(())
}

mod anyhow_like {
    /// The codec's errors are `anyhow::Error`; we only keep their text so the
    /// rest of kcoord does not depend on anyhow.
    pub struct Error(pub String);
}

/// Converts a string to kafka-protocol's string type.
pub fn sb(s: impl Into<String>) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.into())
}

/// Converts an optional string.
pub fn osb(s: Option<impl Into<String>>) -> Option<kafka_protocol::protocol::StrBytes> {
    s.map(sb)
}

/// Converts kafka-protocol's string type to an owned String.
pub fn st(s: &kafka_protocol::protocol::StrBytes) -> String {
    s.as_str().to_string()
}
