//! The delegation-token APIs (KIP-48), at the versions Kafka 4 serves:
//! CreateDelegationToken (key 38) v1–v3, RenewDelegationToken (39) and
//! ExpireDelegationToken (40) v1–v2, DescribeDelegationToken (41) v1–v3;
//! flexible from v2. v3 names a token's owner apart from its requester.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::describe_delegation_token_response::{
    DescribedDelegationToken, DescribedDelegationTokenRenewer,
};
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse, ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest, RenewDelegationTokenResponse,
};

use crate::error_code::ErrorCode;
use crate::protocol::codec::{self, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::security::delegation_tokens::TokenInfo;

pub const CREATE: ApiSupport = ApiSupport::new(38, "CreateDelegationToken", 1, 3, Some(2));
pub const RENEW: ApiSupport = ApiSupport::new(39, "RenewDelegationToken", 1, 2, Some(2));
pub const EXPIRE: ApiSupport = ApiSupport::new(40, "ExpireDelegationToken", 1, 2, Some(2));
pub const DESCRIBE: ApiSupport = ApiSupport::new(41, "DescribeDelegationToken", 1, 3, Some(2));

/// `User:alice` as (type, name); a principal without a type is a user.
pub fn split_principal(principal: &str) -> (&str, &str) {
    principal.split_once(':').unwrap_or(("User", principal))
}

/// A CreateDelegationToken request.
#[derive(Debug, Clone)]
pub struct Create {
    /// v3: the owner the token is for, when not the requester (type, name).
    pub owner: Option<(String, String)>,
    /// (type, name) of each renewer.
    pub renewers: Vec<(String, String)>,
    pub max_lifetime_ms: i64,
}

pub fn decode_create(body: &mut Bytes, version: i16) -> Result<Create, DecodeError> {
    let r: CreateDelegationTokenRequest = codec::decode(CREATE.name, body, version)?;
    let owner = match (r.owner_principal_type, r.owner_principal_name) {
        (t, Some(name)) if !name.is_empty() => Some((t.map(|t| st(&t)).unwrap_or_default(), st(&name))),
        _ => None,
    };
    let renewers = r.renewers.iter().map(|p| (st(&p.principal_type), st(&p.principal_name))).collect();
    Ok(Create { owner, renewers, max_lifetime_ms: r.max_lifetime_ms })
}

/// The answer to CreateDelegationToken: the token, or an error with the
/// owner and requester it was asked for and Kafka's placeholder times
/// (`timestamps`: -1 where the broker refuses, 0 where its controller does).
pub enum Created {
    Token { token: TokenInfo, hmac: Vec<u8> },
    Refused { error: ErrorCode, owner: String, requester: String, timestamps: i64 },
}

/// The requester's fields exist from v3.
const REQUESTER_FROM: i16 = 3;

pub fn encode_create(answer: &Created, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let with_principals = |owner: &str, requester: &str| {
        let (owner, requester) = (split_principal(owner), split_principal(requester));
        let r =
            CreateDelegationTokenResponse::default().with_principal_type(sb(owner.0)).with_principal_name(sb(owner.1));
        match version >= REQUESTER_FROM {
            true => r
                .with_token_requester_principal_type(sb(requester.0))
                .with_token_requester_principal_name(sb(requester.1)),
            false => r,
        }
    };
    let r = match answer {
        Created::Token { token, hmac } => with_principals(&token.owner, &token.requester)
            .with_issue_timestamp_ms(token.issue_ms)
            .with_expiry_timestamp_ms(token.expiry_ms)
            .with_max_timestamp_ms(token.max_ms)
            .with_token_id(sb(&token.token_id))
            .with_hmac(Bytes::copy_from_slice(hmac)),
        Created::Refused { error, owner, requester, timestamps } => with_principals(owner, requester)
            .with_error_code(error.0)
            .with_issue_timestamp_ms(*timestamps)
            .with_expiry_timestamp_ms(*timestamps)
            .with_max_timestamp_ms(*timestamps),
    };
    codec::encode(CREATE.name, &r, version, out)
}

/// Renew and Expire: the token's HMAC and a period.
pub fn decode_renew(body: &mut Bytes, version: i16) -> Result<(Bytes, i64), DecodeError> {
    let r: RenewDelegationTokenRequest = codec::decode(RENEW.name, body, version)?;
    Ok((r.hmac, r.renew_period_ms))
}

pub fn decode_expire(body: &mut Bytes, version: i16) -> Result<(Bytes, i64), DecodeError> {
    let r: ExpireDelegationTokenRequest = codec::decode(EXPIRE.name, body, version)?;
    Ok((r.hmac, r.expiry_time_period_ms))
}

/// The new expiry, or an error with Kafka's placeholder time.
pub fn encode_renew(
    answer: Result<i64, (ErrorCode, i64)>,
    version: i16,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let (error, expiry) = expiry_answer(answer);
    let r = RenewDelegationTokenResponse::default().with_error_code(error.0).with_expiry_timestamp_ms(expiry);
    codec::encode(RENEW.name, &r, version, out)
}

pub fn encode_expire(
    answer: Result<i64, (ErrorCode, i64)>,
    version: i16,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let (error, expiry) = expiry_answer(answer);
    let r = ExpireDelegationTokenResponse::default().with_error_code(error.0).with_expiry_timestamp_ms(expiry);
    codec::encode(EXPIRE.name, &r, version, out)
}

fn expiry_answer(answer: Result<i64, (ErrorCode, i64)>) -> (ErrorCode, i64) {
    match answer {
        Ok(expiry) => (ErrorCode::NONE, expiry),
        Err(refused) => refused,
    }
}

/// The owners asked about, as `Type:name` (None: every owner).
pub fn decode_describe(body: &mut Bytes, version: i16) -> Result<Option<Vec<String>>, DecodeError> {
    let r: DescribeDelegationTokenRequest = codec::decode(DESCRIBE.name, body, version)?;
    Ok(r.owners
        .map(|owners| owners.iter().map(|o| format!("{}:{}", st(&o.principal_type), st(&o.principal_name))).collect()))
}

pub fn encode_describe(
    error: ErrorCode,
    tokens: &[(TokenInfo, Vec<u8>)],
    version: i16,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let described = tokens.iter().map(|(t, hmac)| {
        let (owner, requester) = (split_principal(&t.owner), split_principal(&t.requester));
        let d = DescribedDelegationToken::default().with_principal_type(sb(owner.0)).with_principal_name(sb(owner.1));
        let d = match version >= REQUESTER_FROM {
            true => d
                .with_token_requester_principal_type(sb(requester.0))
                .with_token_requester_principal_name(sb(requester.1)),
            false => d,
        };
        d.with_issue_timestamp(t.issue_ms)
            .with_expiry_timestamp(t.expiry_ms)
            .with_max_timestamp(t.max_ms)
            .with_token_id(sb(&t.token_id))
            .with_hmac(Bytes::copy_from_slice(hmac))
            .with_renewers(
                t.renewers
                    .iter()
                    .map(|r| {
                        let (kind, name) = split_principal(r);
                        DescribedDelegationTokenRenewer::default()
                            .with_principal_type(sb(kind))
                            .with_principal_name(sb(name))
                    })
                    .collect(),
            )
    });
    let r = DescribeDelegationTokenResponse::default().with_error_code(error.0).with_tokens(described.collect());
    codec::encode(DESCRIBE.name, &r, version, out)
}
