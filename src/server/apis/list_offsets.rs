//! ListOffsets: offsets by timestamp, from the data plane.

use super::prelude::*;
use crate::protocol::api::list_offsets as wire;

pub struct ListOffsets;

impl Api for ListOffsets {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Topics;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let mut req = wire::decode(body, v)?;
        let denied = Guard::new(&svc.authorizer, ctx).list_offsets(&mut req);
        let mut resp = data_plane(svc)?.list_offsets(&req);
        resp.topics.extend(denied);
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
