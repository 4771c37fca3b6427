//! SyncGroup: a classic member's assignment, from its group's shard (parked
//! there until the leader's arrives).

use super::prelude::*;
use crate::coordinator::messages::SyncGroupResponse;
use crate::protocol::api::sync_group as wire;

pub struct SyncGroup;

impl Api for SyncGroup {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let req = wire::decode(body, v)?;
        let resp = match Guard::new(&svc.authorizer, ctx).group(Read, &req.group_id) {
            Ok(()) => svc.coordinator.sync_group(req).await?,
            Err(e) => SyncGroupResponse::error(e),
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
