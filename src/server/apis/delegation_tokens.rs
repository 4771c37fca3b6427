//! CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
//! DescribeDelegationToken: the node's delegation tokens
//! (`server::token_admin`). In sidecar mode the upstream serves them.

use super::prelude::*;
use crate::protocol::api::delegation_token as wire;
use crate::server::token_admin::{self, Change};

pub struct CreateDelegationToken;

impl Api for CreateDelegationToken {
    const SUPPORT: ApiSupport = wire::CREATE;
    const OWNER: Owner = Owner::Tokens;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let answer = token_admin::create(svc, ctx, &guard, wire::decode_create(body, v)?).await;
        wire::encode_create(&answer, v, out)?;
        Ok(true)
    }
}

pub struct RenewDelegationToken;

impl Api for RenewDelegationToken {
    const SUPPORT: ApiSupport = wire::RENEW;
    const OWNER: Owner = Owner::Tokens;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let (hmac, period) = wire::decode_renew(body, v)?;
        let answer = token_admin::renew_or_expire(svc, ctx, Change::Renew, &hmac, period).await;
        wire::encode_renew(answer, v, out)?;
        Ok(true)
    }
}

pub struct ExpireDelegationToken;

impl Api for ExpireDelegationToken {
    const SUPPORT: ApiSupport = wire::EXPIRE;
    const OWNER: Owner = Owner::Tokens;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let (hmac, period) = wire::decode_expire(body, v)?;
        let answer = token_admin::renew_or_expire(svc, ctx, Change::Expire, &hmac, period).await;
        wire::encode_expire(answer, v, out)?;
        Ok(true)
    }
}

pub struct DescribeDelegationToken;

impl Api for DescribeDelegationToken {
    const SUPPORT: ApiSupport = wire::DESCRIBE;
    const OWNER: Owner = Owner::Tokens;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let (error, tokens) = token_admin::describe(svc, ctx, &guard, wire::decode_describe(body, v)?);
        wire::encode_describe(error, &tokens, v, out)?;
        Ok(true)
    }
}
