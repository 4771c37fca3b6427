//! The delegation-token APIs (KIP-48) as Kafka's `KafkaApis` and its
//! controller answer them, over [`DelegationTokens`]:
//!
//! - A token may be asked for, renewed or expired only over an
//!   authenticated connection not itself logged in with a token (Kafka's
//!   `allowTokenRequests`: not PLAINTEXT, not one-way SSL); otherwise
//!   DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.
//! - A token for another owner needs CREATE_TOKENS on that `User`.
//! - Owners and renewers renew and expire a token; they, and whoever may
//!   DESCRIBE the token or DESCRIBE_TOKENS its owner, see it.
//! - Without `security.delegation_token_secret_key`: DELEGATION_TOKEN_AUTH_DISABLED.

use std::sync::Arc;

use super::authorize::Guard;
use super::dispatch::RequestContext;
use super::Services;
use crate::error_code::ErrorCode;
use crate::protocol::api::delegation_token::{Create, Created};
use crate::security::acl::{Operation, ResourceType};
use crate::security::delegation_tokens::{new_token_id, CreateToken, DelegationTokens, TokenInfo};

/// Kafka's principal for connections that did not authenticate.
const ANONYMOUS: &str = "User:ANONYMOUS";

/// The time fields Kafka answers when the broker refuses a request
/// (`DelegationTokenManager.ErrorTimestamp`); its controller answers 0.
const BROKER_REFUSED: i64 = -1;
const CONTROLLER_REFUSED: i64 = 0;

/// Kafka's `allowTokenRequests`. A PLAINTEXT connection and an SSL one
/// without a client certificate are `User:ANONYMOUS` here, as in Kafka.
fn allows_token_requests(ctx: &RequestContext) -> bool {
    !ctx.caller.token_authenticated && &*ctx.caller.principal != ANONYMOUS
}

fn tokens(svc: &Services) -> Result<&Arc<DelegationTokens>, ErrorCode> {
    svc.delegation_tokens.as_ref().ok_or(ErrorCode::DELEGATION_TOKEN_AUTH_DISABLED)
}

pub async fn create(svc: &Services, ctx: &RequestContext, guard: &Guard<'_>, req: Create) -> Created {
    let requester = ctx.caller.principal.to_string();
    let owner = match &req.owner {
        Some((kind, name)) => format!("{kind}:{name}"),
        None => requester.clone(),
    };
    let refuse = |error: ErrorCode, timestamps: i64| Created::Refused {
        error,
        owner: owner.clone(),
        requester: requester.clone(),
        timestamps,
    };
    if !allows_token_requests(ctx) {
        return refuse(ErrorCode::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, BROKER_REFUSED);
    }
    if owner != requester && !guard.allows(Operation::CreateTokens, ResourceType::User, &owner) {
        return refuse(ErrorCode::DELEGATION_TOKEN_AUTHORIZATION_FAILED, BROKER_REFUSED);
    }
    if req.renewers.iter().any(|(kind, _)| kind != "User") {
        return refuse(ErrorCode::INVALID_PRINCIPAL_TYPE, BROKER_REFUSED);
    }
    let store = match tokens(svc) {
        Ok(store) => store,
        Err(e) => return refuse(e, CONTROLLER_REFUSED),
    };
    let ask = CreateToken {
        owner: owner.clone(),
        requester: requester.clone(),
        renewers: req.renewers.iter().map(|(kind, name)| format!("{kind}:{name}")).collect(),
        max_lifetime_ms: req.max_lifetime_ms,
    };
    let now = crate::wall_clock::wall_clock_ms();
    match store.change(move |file, settings| file.create(settings, new_token_id(), ask, now)).await {
        Ok(token) => {
            tracing::info!(token = %token.token_id, owner = %token.owner, requester = %token.requester, "delegation token created");
            let hmac = store.settings().hmac(&token.token_id);
            Created::Token { token, hmac }
        }
        Err(e) => refuse(e, CONTROLLER_REFUSED),
    }
}

/// Which of Renew and Expire.
#[derive(Debug, Clone, Copy)]
pub enum Change {
    Renew,
    Expire,
}

/// RenewDelegationToken or ExpireDelegationToken: the new expiry, or an
/// error with the time Kafka answers with it.
pub async fn renew_or_expire(
    svc: &Services,
    ctx: &RequestContext,
    change: Change,
    hmac: &[u8],
    period_ms: i64,
) -> Result<i64, (ErrorCode, i64)> {
    if !allows_token_requests(ctx) {
        return Err((ErrorCode::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, BROKER_REFUSED));
    }
    let store = tokens(svc).map_err(|e| (e, CONTROLLER_REFUSED))?;
    let principal = ctx.caller.principal.to_string();
    // An HMAC of no token names no id: the change then finds nothing.
    let id = store.token_id(hmac).unwrap_or_default();
    let now = crate::wall_clock::wall_clock_ms();
    store
        .change(move |file, settings| match change {
            Change::Renew => file.renew(settings, &principal, &id, period_ms, now),
            Change::Expire => file.expire(&principal, &id, period_ms, now),
        })
        .await
        .map_err(|e| (e, CONTROLLER_REFUSED))
}

/// DescribeDelegationToken: the tokens of `owners` (None: of everyone)
/// the caller may see, with their HMACs.
pub fn describe(
    svc: &Services,
    ctx: &RequestContext,
    guard: &Guard<'_>,
    owners: Option<Vec<String>>,
) -> (ErrorCode, Vec<(TokenInfo, Vec<u8>)>) {
    if !allows_token_requests(ctx) {
        return (ErrorCode::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, vec![]);
    }
    let store = match tokens(svc) {
        Ok(store) => store,
        Err(e) => return (e, vec![]),
    };
    if owners.as_ref().is_some_and(Vec::is_empty) {
        return (ErrorCode::NONE, vec![]);
    }
    let me = &*ctx.caller.principal;
    let visible = |t: &TokenInfo| {
        // Kafka's DelegationTokenManager.filterToken.
        let asked = owners.as_ref().is_none_or(|owners| owners.iter().any(|o| t.owner_or_renewer(o)));
        asked
            && (t.owner_or_renewer(me)
                || guard.quietly_allows(Operation::Describe, ResourceType::DelegationToken, &t.token_id)
                || guard.quietly_allows(Operation::DescribeTokens, ResourceType::User, &t.owner))
    };
    let snapshot = store.snapshot();
    let tokens = snapshot
        .tokens
        .values()
        .filter(|t| visible(t))
        .map(|t| (t.clone(), store.hmac(&t.token_id).unwrap_or_else(|| store.settings().hmac(&t.token_id))))
        .collect();
    (ErrorCode::NONE, tokens)
}
