//! OffsetCommit: offsets written by the group's shard; what Kafka answers
//! before its coordinator (unknown ids, topics the client may not read,
//! unknown partitions) answered first by the screen (`screen`). A request
//! the screen leaves with no partition is answered by the coordinator
//! without its shard, as Kafka answers it without its coordinator. v10
//! names topics by id (`topic_ids`).

use std::future::Future;

use futures_util::FutureExt;
use uuid::Uuid;

use super::prelude::*;
use super::screen::{screen, Answered, Screened};
use super::topic_ids as by_id;
use crate::coordinator::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicErrors};
use crate::coordinator::Unavailable;
use crate::protocol::api::offset_commit as wire;

pub struct OffsetCommit;

impl Api for OffsetCommit {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let req = match wire::decode(body, v)? {
            wire::Decoded { req, .. } if v < wire::TOPIC_IDS_FROM => req,
            // Boxed: the commits of every other version keep their small future.
            decoded => return Box::pin(by_ids(svc, ctx, decoded, out)).await,
        };
        let guard = Guard::new(&svc.authorizer, ctx);
        let resp = match guard.offset_commit(&req) {
            Err(answer) => answer,
            Ok(()) => {
                let (answered, answer) = commit(svc, &guard, req, &[]).await?;
                OffsetCommitResponse { topics: answered.merge_by_name(answer) }
            }
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, &[], out)?;
        Ok(true)
    }
}

/// The screen's answer and the coordinator's, not yet merged. Not an
/// `async fn`: as a chain of two futures, the screen's state and the
/// coordinator call's share their bytes in every commit's future.
fn commit<'a>(
    svc: &'a Services,
    guard: &'a Guard<'a>,
    mut req: OffsetCommitRequest,
    ids: &'a [Uuid],
) -> impl Future<Output = Result<(Answered, Vec<TopicErrors>), Unavailable>> + Send + 'a {
    let topics = std::mem::take(&mut req.topics);
    screen(svc, guard, topics, ids).then(move |Screened { kept, answered }| {
        req.topics = kept;
        svc.coordinator.offset_commit(req).map(|answer| Ok((answered, answer?.topics)))
    })
}

/// v10: the ids resolved first, as Kafka does after checking the group;
/// each answer's topic written with its id.
async fn by_ids(svc: &Services, ctx: &RequestContext, decoded: wire::Decoded, out: &mut BytesMut) -> Served {
    let v = ctx.version();
    let wire::Decoded { mut req, topic_ids } = decoded;
    let guard = Guard::new(&svc.authorizer, ctx);
    let (resp, answer_ids) = match guard.offset_commit(&req) {
        // Every topic of the request, known or not, carries the group's refusal.
        Err(answer) => (answer, topic_ids),
        Ok(()) => {
            by_id::name(svc, &mut req.topics, &topic_ids, |t, name| t.name = name).await;
            let (answered, answer) = commit(svc, &guard, req, &topic_ids).await?;
            let (topics, answer_ids) = answered.merge(answer, |name| by_id::id_of(svc, name).unwrap_or_default());
            (OffsetCommitResponse { topics }, answer_ids)
        }
    };
    observe::errors(OffsetCommit::SUPPORT.name, &resp);
    wire::encode(&resp, v, &answer_ids, out)?;
    Ok(true)
}
