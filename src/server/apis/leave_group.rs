//! LeaveGroup: classic members leaving their group's shard.

use super::prelude::*;
use crate::coordinator::messages::LeaveGroupResponse;
use crate::protocol::api::leave_group as wire;

pub struct LeaveGroup;

impl Api for LeaveGroup {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let req = wire::decode(body, v)?;
        let resp = match Guard::new(&svc.authorizer, ctx).group(Read, &req.group_id) {
            Ok(()) => svc.coordinator.leave_group(req).await?,
            Err(error) => LeaveGroupResponse { error, members: vec![] },
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
