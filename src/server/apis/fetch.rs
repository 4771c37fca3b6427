//! Fetch: records read from the data plane, for the topics the client may
//! read.

use super::prelude::*;
use crate::protocol::api::fetch as wire;

pub struct Fetch;

impl Api for Fetch {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Topics;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let mut req = wire::decode(body, v)?;
        let denied = Guard::new(&svc.authorizer, ctx).fetch(&mut req, &svc.catalog);
        let mut resp = data_plane(svc)?.fetch(req).await;
        resp.topics.extend(denied);
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
