//! CreateTopics: topics created by the data plane.

use super::prelude::*;
use crate::protocol::api::create_topics as wire;

pub struct CreateTopics;

impl Api for CreateTopics {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Topics;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let mut req = wire::decode(body, v)?;
        let denied = guard.create_topics(&mut req);
        let mut resp = data_plane(svc)?.create_topics(req).await;
        guard.create_topics_answer(&mut resp);
        resp.topics.extend(denied);
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
