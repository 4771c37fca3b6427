//! OffsetDelete: a group's offsets deleted by its shard; what Kafka
//! answers before its coordinator (topics the client may not read,
//! unknown partitions) answered by the screen (`screen`).

use super::prelude::*;
use super::screen::{screen, Screened};
use crate::coordinator::messages::OffsetDeleteResponse;
use crate::protocol::api::offset_delete as wire;

pub struct OffsetDelete;

impl Api for OffsetDelete {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let mut req = wire::decode(body, v)?;
        let guard = Guard::new(&svc.authorizer, ctx);
        let resp = match guard.offset_delete(&req) {
            Err(answer) => answer,
            Ok(()) => {
                let Screened { kept, answered } = screen(svc, &guard, std::mem::take(&mut req.topics), &[]).await;
                req.topics = kept;
                // Unlike a commit, the coordinator is asked even with no
                // partition left: it answers for the group (GROUP_ID_NOT_FOUND,
                // say), and that answer alone, as Kafka's merge takes it.
                let resp = svc.coordinator.offset_delete(req).await?;
                match resp.error.is_none() {
                    true => OffsetDeleteResponse { error: resp.error, topics: answered.merge_by_name(resp.topics) },
                    false => resp,
                }
            }
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
