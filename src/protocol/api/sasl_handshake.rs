//! SaslHandshake (key 17), v0–v1. v0 is followed by raw SASL tokens, v1 by
//! SaslAuthenticate requests (KIP-152).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use crate::error_code::ErrorCode;
use crate::protocol::codec::{self, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(17, "SaslHandshake", 0, 1, None);

/// The mechanism the client asks for.
pub fn decode(body: &mut Bytes, version: i16) -> Result<String, DecodeError> {
    let r: SaslHandshakeRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(st(&r.mechanism))
}

pub fn encode(error: ErrorCode, mechanisms: &[String], version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let resp = SaslHandshakeResponse::default()
        .with_error_code(error.0)
        .with_mechanisms(mechanisms.iter().map(|m| StrBytes::from_string(m.clone())).collect());
    codec::encode(SUPPORT.name, &resp, version, out)
}
