//! TxnOffsetCommit: sidecar mode only. kcoord's coordinator admits the
//! commit, then delegates it with the group to the upstream's
//! (`coordinator::delegation`); standalone kcoord has no transaction
//! coordinator, neither serves nor advertises it.

use super::prelude::*;
use crate::protocol::api::txn_offset_commit as wire;

pub struct TxnOffsetCommit;

impl Api for TxnOffsetCommit {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;
    const SIDECAR_ONLY: bool = true;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let (mut req, txn) = wire::decode(body, v)?;
        let resp = match Guard::new(&svc.authorizer, ctx).txn_offset_commit(&txn.transactional_id, &mut req) {
            Err(answer) => answer,
            Ok(denied) => {
                let mut resp = svc.coordinator.txn_offset_commit(req, txn).await?;
                resp.topics.extend(denied);
                resp
            }
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
