//! DescribeUserScramCredentials (key 50), v0 (KIP-554).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse};

use crate::error_code::ErrorCode;
use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::security::scram_users::Described;

pub const SUPPORT: ApiSupport = ApiSupport::new(50, "DescribeUserScramCredentials", 0, 0, Some(0));

/// The users named (None: a null list, which like an empty one means all).
pub fn decode(body: &mut Bytes, version: i16) -> Result<Option<Vec<String>>, DecodeError> {
    let r: DescribeUserScramCredentialsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(r.users.map(|users| users.iter().map(|u| st(&u.name)).collect()))
}

/// A top-level error (the request refused whole) or one result per user.
pub fn encode(
    error: ErrorCode,
    message: Option<String>,
    results: &[Described],
    version: i16,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let r = DescribeUserScramCredentialsResponse::default()
        .with_error_code(error.0)
        .with_error_message(osb(message))
        .with_results(
            results
                .iter()
                .map(|d| {
                    DescribeUserScramCredentialsResult::default()
                        .with_user(sb(&d.user))
                        .with_error_code(d.error.0)
                        .with_error_message(osb(d.message.clone()))
                        .with_credential_infos(
                            d.credentials
                                .iter()
                                .map(|(m, i)| CredentialInfo::default().with_mechanism(*m).with_iterations(*i))
                                .collect(),
                        )
                })
                .collect(),
        );
    codec::encode(SUPPORT.name, &r, version, out)
}
