//! OffsetFetch: committed offsets of each group, from its shard, filtered
//! by what the client may describe.

use super::prelude::*;
use crate::coordinator::messages::OffsetFetchResponse;
use crate::protocol::api::offset_fetch as wire;

pub struct OffsetFetch;

impl Api for OffsetFetch {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let mut req = wire::decode(body, v)?;
        let plan = guard.offset_fetch(&mut req);
        let served = match req.groups.is_empty() {
            true => OffsetFetchResponse { groups: vec![] },
            false => svc.coordinator.offset_fetch(req).await?,
        };
        let resp = guard.offset_fetch_answer(plan, served);
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
