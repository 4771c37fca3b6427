//! ConsumerGroupDescribe (KIP-848): the groups the client may describe,
//! each from its shard.

use super::prelude::*;
use crate::protocol::api::consumer_group_describe as wire;

pub struct ConsumerGroupDescribe;

impl Api for ConsumerGroupDescribe {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let (groups, include_ops) = wire::decode(body, v)?;
        let (allowed, denied) = guard.describable_groups(groups);
        let described = match allowed.is_empty() {
            true => Vec::new(),
            false => svc.coordinator.consumer_group_describe(allowed).await?,
        };
        let resp = guard.consumer_describe_answer(denied, described);
        observe::errors(Self::SUPPORT.name, &resp);
        let ops = |g: &str, e| guard.group_operations(g, e, include_ops);
        wire::encode(&resp, &ops, v, out)?;
        Ok(true)
    }
}
