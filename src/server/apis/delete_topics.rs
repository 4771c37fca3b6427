//! DeleteTopics: topics deleted by the data plane, with the groups'
//! offsets for them.

use super::prelude::*;
use crate::protocol::api::delete_topics as wire;

pub struct DeleteTopics;

impl Api for DeleteTopics {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Topics;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let mut topics = wire::decode(body, v)?;
        let denied = Guard::new(&svc.authorizer, ctx).delete_topics(&mut topics, &svc.catalog);
        let mut resp = match topics.is_empty() && !denied.is_empty() {
            true => Vec::new(),
            false => crate::topic_deletion::delete_topics(data_plane(svc)?, topics, &svc.coordinator).await,
        };
        resp.extend(denied);
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
