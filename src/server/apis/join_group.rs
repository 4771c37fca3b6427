//! JoinGroup: joins a classic member to its group's shard (parked there
//! until the rebalance completes).

use super::prelude::*;
use crate::coordinator::messages::JoinGroupResponse;
use crate::protocol::api::join_group as wire;

pub struct JoinGroup;

impl Api for JoinGroup {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let req = wire::decode(body, v, &ctx.client_id(), &ctx.client_host())?;
        let resp = match guard.group(Read, &req.group_id) {
            Ok(()) => svc.coordinator.join_group(req, guard.describable_topics()).await?,
            Err(e) => JoinGroupResponse::error(e, ""),
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
