//! ApiVersions (key 18), v0–v4, including the KIP-511 fallback.
//!
//! A client that sends a version we do not support gets error 35 in a
//! *v0-layout* body listing our ranges (kafka-python sends v4 first,
//! librdkafka v3; any other body makes them give up). The response header is
//! always v0.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use crate::error_code::ErrorCode;
use crate::protocol::codec::{self, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(18, "ApiVersions", 0, 4, Some(3));

/// Kafka's rule for v3+ client software name and version:
/// `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
pub fn valid_software_field(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_alphanumeric();
    let inner = |c: u8| c.is_ascii_alphanumeric() || c == b'-' || c == b'.';
    match b {
        [] => false,
        [only] => edge(*only),
        [first, middle @ .., last] => edge(*first) && edge(*last) && middle.iter().all(|&c| inner(c)),
    }
}

fn wire(table: &[(i16, i16, i16)]) -> Vec<ApiVersion> {
    table
        .iter()
        .map(|&(key, min, max)| ApiVersion::default().with_api_key(key).with_min_version(min).with_max_version(max))
        .collect()
}

/// Builds the response body for a supported `version`, advertising `table`.
pub fn respond(
    body: &mut Bytes,
    version: i16,
    out: &mut BytesMut,
    table: &[(i16, i16, i16)],
) -> Result<(), RespondError> {
    let req: ApiVersionsRequest = codec::decode(SUPPORT.name, body, version)?;
    let mut resp = ApiVersionsResponse::default();
    if version >= 3
        && !(valid_software_field(&req.client_software_name) && valid_software_field(&req.client_software_version))
    {
        resp.error_code = ErrorCode::INVALID_REQUEST.0;
    } else {
        resp.api_keys = wire(table);
    }
    if version >= 3 {
        resp.finalized_features_epoch = -1;
    }
    codec::encode(SUPPORT.name, &resp, version, out)?;
    Ok(())
}

/// The KIP-511 answer to an ApiVersions version we do not support: error 35
/// and our ranges, in the v0 layout.
pub fn unsupported_version(out: &mut BytesMut, table: &[(i16, i16, i16)]) -> Result<(), EncodeError> {
    let resp =
        ApiVersionsResponse::default().with_error_code(ErrorCode::UNSUPPORTED_VERSION.0).with_api_keys(wire(table));
    codec::encode(SUPPORT.name, &resp, 0, out)
}

#[derive(Debug, thiserror::Error)]
pub enum RespondError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_names_follow_kafkas_pattern() {
        for ok in ["librdkafka", "confluent-kafka-python", "2.16.1", "a", "kafka-python.x"] {
            assert!(valid_software_field(ok), "{ok}");
        }
        for bad in ["", "-lead", "trail-", "sp ace", "a_b", "ü"] {
            assert!(!valid_software_field(bad), "{bad}");
        }
    }

    #[test]
    fn fallback_body_is_v0_layout() {
        let mut out = BytesMut::new();
        let table = [(12, 0, 4), (18, 0, 4), (68, 0, 1)];
        unsupported_version(&mut out, &table).unwrap();
        // int16 error, int32 count, then 6 bytes per API.
        assert_eq!(&out[..2], &[0, 35]);
        let n = i32::from_be_bytes([out[2], out[3], out[4], out[5]]) as usize;
        assert_eq!(n, table.len());
        assert_eq!(out.len(), 2 + 4 + 6 * n);
    }
}
