//! Heartbeat: a classic member's liveness, answered by its group's shard.

use super::prelude::*;
use crate::coordinator::messages::HeartbeatResponse;
use crate::protocol::api::heartbeat as wire;

pub struct Heartbeat;

impl Api for Heartbeat {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let req = wire::decode(body, v)?;
        let resp = match Guard::new(&svc.authorizer, ctx).group(Read, &req.group_id) {
            Ok(()) => svc.coordinator.heartbeat(req).await?,
            Err(error) => HeartbeatResponse { error },
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
