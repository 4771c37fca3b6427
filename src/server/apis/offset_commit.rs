//! OffsetCommit: offsets written by the group's shard; partitions the
//! client may not read are answered without it.

use super::prelude::*;
use crate::protocol::api::offset_commit as wire;

pub struct OffsetCommit;

impl Api for OffsetCommit {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let mut req = wire::decode(body, v)?;
        let resp = match Guard::new(&svc.authorizer, ctx).offset_commit(&mut req) {
            Err(answer) => answer,
            Ok(denied) => {
                let mut resp = svc.coordinator.offset_commit(req).await?;
                resp.topics.extend(denied);
                resp
            }
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
