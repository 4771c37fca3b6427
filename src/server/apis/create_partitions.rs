//! CreatePartitions: topics grown by the data plane.

use super::prelude::*;
use crate::protocol::api::create_partitions as wire;

pub struct CreatePartitions;

impl Api for CreatePartitions {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Topics;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let mut req = wire::decode(body, v)?;
        let denied = Guard::new(&svc.authorizer, ctx).create_partitions(&mut req);
        let mut resp = data_plane(svc)?.create_partitions(req).await;
        resp.results.extend(denied);
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
