//! ConsumerGroupHeartbeat (KIP-848): a consumer group member's heartbeat,
//! served by its group's shard.

use super::prelude::*;
use crate::coordinator::consumer::messages::ConsumerHeartbeatResponse;
use crate::protocol::api::consumer_group_heartbeat as wire;

pub struct ConsumerGroupHeartbeat;

impl Api for ConsumerGroupHeartbeat {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let mut req = wire::decode(body, v, &ctx.client_id(), &ctx.client_host())?;
        req.describable = guard.describable_topics();
        let resp = match guard.consumer_heartbeat(&req) {
            Ok(()) => svc.coordinator.consumer_group_heartbeat(req).await?,
            Err((e, message)) => ConsumerHeartbeatResponse::error(e, message),
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
