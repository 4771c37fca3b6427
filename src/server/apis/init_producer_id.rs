//! InitProducerId: idempotent producers' ids, from the data plane.

use super::prelude::*;
use crate::protocol::api::init_producer_id as wire;
use crate::topics::producer_ids::InitProducerIdResponse;

pub struct InitProducerId;

impl Api for InitProducerId {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Topics;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let req = wire::decode(body, v)?;
        let resp = match Guard::new(&svc.authorizer, ctx).init_producer_id(req.transactional_id.as_deref()) {
            Ok(()) => data_plane(svc)?.init_producer_id(&req),
            Err(error) => InitProducerIdResponse { error, producer_id: -1, producer_epoch: -1 },
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
