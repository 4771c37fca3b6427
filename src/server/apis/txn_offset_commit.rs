//! TxnOffsetCommit: sidecar mode only. kcoord's coordinator admits the
//! commit, then delegates it with the group to the upstream's
//! (`coordinator::delegation`); standalone kcoord has no transaction
//! coordinator, neither serves nor advertises it. What Kafka answers
//! before its coordinator is answered by the screen (`screen`).

use super::prelude::*;
use super::screen::{screen, Screened};
use crate::coordinator::messages::OffsetCommitResponse;
use crate::protocol::api::txn_offset_commit as wire;

pub struct TxnOffsetCommit;

impl Api for TxnOffsetCommit {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;
    const SIDECAR_ONLY: bool = true;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let (mut req, txn) = wire::decode(body, v)?;
        let guard = Guard::new(&svc.authorizer, ctx);
        let resp = match guard.txn_offset_commit(&txn.transactional_id, &req) {
            Err(answer) => answer,
            Ok(()) => {
                let Screened { kept, answered } = screen(svc, &guard, std::mem::take(&mut req.topics), &[]).await;
                req.topics = kept;
                // Like Kafka, no coordinator is asked when no partition is left.
                let answer = match req.topics.is_empty() {
                    true => Vec::new(),
                    false => svc.coordinator.txn_offset_commit(req, txn).await?.topics,
                };
                OffsetCommitResponse { topics: answered.merge_by_name(answer) }
            }
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
