//! ApiVersions: the versions this listener advertises (kcoord's own, or in
//! sidecar mode merged with the fronted broker's). An unsupported version
//! never gets here: `dispatch` answers it in the v0 layout (KIP-511).

use super::prelude::*;
use crate::protocol::api::api_versions as wire;

pub struct ApiVersions;

impl Api for ApiVersions {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Cluster;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let table = crate::server::dispatch::advertised(svc, ctx.caller.listener).await.map_err(RouteError::Other)?;
        wire::respond(body, ctx.version(), out, &table)?;
        Ok(true)
    }
}
