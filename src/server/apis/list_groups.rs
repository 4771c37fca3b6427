//! ListGroups: every shard's groups that the client may describe.

use super::prelude::*;
use crate::protocol::api::list_groups as wire;

pub struct ListGroups;

impl Api for ListGroups {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let listed = svc.coordinator.list_groups(wire::decode(body, v)?).await?;
        let resp = Guard::new(&svc.authorizer, ctx).list_groups_answer(listed);
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
