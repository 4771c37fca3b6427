//! OffsetDelete: a group's offsets deleted by its shard, for the topics
//! the client may read.

use super::prelude::*;
use crate::protocol::api::offset_delete as wire;

pub struct OffsetDelete;

impl Api for OffsetDelete {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let mut req = wire::decode(body, v)?;
        let resp = match Guard::new(&svc.authorizer, ctx).offset_delete(&mut req) {
            Err(answer) => answer,
            Ok(denied) => {
                let mut resp = svc.coordinator.offset_delete(req).await?;
                resp.topics.extend(denied);
                resp
            }
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
