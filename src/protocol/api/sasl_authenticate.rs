//! SaslAuthenticate (key 36), v0–v2: one SASL token each way (KIP-152);
//! v1 adds the session lifetime (KIP-368).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;

use crate::error_code::ErrorCode;
use crate::protocol::codec::{self, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(36, "SaslAuthenticate", 0, 2, Some(2));

/// The client's token.
pub fn decode(body: &mut Bytes, version: i16) -> Result<Bytes, DecodeError> {
    let r: SaslAuthenticateRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(r.auth_bytes)
}

/// One answer: the server's token, or an error with its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub error: ErrorCode,
    pub message: Option<String>,
    pub token: Bytes,
    pub session_lifetime_ms: i64,
}

pub fn encode(a: &Answer, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let resp = SaslAuthenticateResponse::default()
        .with_error_code(a.error.0)
        .with_error_message(a.message.clone().map(StrBytes::from_string))
        .with_auth_bytes(a.token.clone())
        .with_session_lifetime_ms(a.session_lifetime_ms);
    codec::encode(SUPPORT.name, &resp, version, out)
}
