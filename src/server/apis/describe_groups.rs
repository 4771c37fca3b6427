//! DescribeGroups: the classic groups the client may describe, each from
//! its shard.

use super::prelude::*;
use crate::protocol::api::describe_groups as wire;

pub struct DescribeGroups;

impl Api for DescribeGroups {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let mut req = wire::decode(body, v)?;
        let include_ops = req.include_authorized_operations;
        let (allowed, denied) = guard.describable_groups(std::mem::take(&mut req.groups));
        req.groups = allowed;
        let described = match req.groups.is_empty() {
            true => Vec::new(),
            false => svc.coordinator.describe_groups(req).await?,
        };
        let groups = guard.describe_groups_answer(denied, described, include_ops);
        observe::errors(Self::SUPPORT.name, &groups);
        wire::encode(&groups, v, out)?;
        Ok(true)
    }
}
