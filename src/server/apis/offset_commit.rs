//! OffsetCommit: offsets written by the group's shard; partitions the
//! client may not read are answered without it. v10 names topics by id
//! (`topic_ids`).

use uuid::Uuid;

use super::prelude::*;
use super::topic_ids::Ids;
use crate::coordinator::messages::{OffsetCommitRequest, OffsetCommitResponse, PartitionError, TopicErrors};
use crate::error_code::ErrorCode;
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
        let resp = commit(svc, &Guard::new(&svc.authorizer, ctx), req).await?;
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, &[], out)?;
        Ok(true)
    }
}

/// The topics the client may read committed by the coordinator, the
/// others answered TOPIC_AUTHORIZATION_FAILED first, as Kafka's
/// `KafkaApis` adds them to its answer before the coordinator's.
async fn commit(
    svc: &Services,
    guard: &Guard<'_>,
    mut req: OffsetCommitRequest,
) -> Result<OffsetCommitResponse, RouteError> {
    Ok(match guard.offset_commit(&mut req) {
        Err(answer) => answer,
        Ok(denied) if denied.is_empty() => svc.coordinator.offset_commit(req).await?,
        Ok(mut topics) => {
            topics.extend(svc.coordinator.offset_commit(req).await?.topics);
            OffsetCommitResponse { topics }
        }
    })
}

/// v10: the ids resolved first, as Kafka does after checking the group;
/// an unknown id's partitions answered UNKNOWN_TOPIC_ID, first, as Kafka
/// answers what never reaches its coordinator.
async fn by_ids(svc: &Services, ctx: &RequestContext, decoded: wire::Decoded, out: &mut BytesMut) -> Served {
    let v = ctx.version();
    let wire::Decoded { mut req, topic_ids } = decoded;
    let guard = Guard::new(&svc.authorizer, ctx);
    let (resp, answer_ids) = match guard.group(Read, &req.group_id) {
        // Every topic of the request, known or not, carries the group's refusal.
        Err(error) => (crate::coordinator::offsets::commit_error_response(&req, error), topic_ids),
        Ok(()) => {
            let mut ids = Ids::default();
            let split = ids.resolve(svc, std::mem::take(&mut req.topics), topic_ids, |t, name| t.name = name).await;
            req.topics = split.known;
            let mut answer_ids: Vec<Uuid> = Vec::with_capacity(split.unknown.len() + req.topics.len());
            let mut topics = Vec::with_capacity(answer_ids.capacity());
            for (id, topic) in split.unknown {
                answer_ids.push(id);
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| PartitionError { partition: p.partition, error: ErrorCode::UNKNOWN_TOPIC_ID })
                    .collect();
                topics.push(TopicErrors { name: String::new(), partitions });
            }
            for t in commit(svc, &guard, req).await?.topics {
                answer_ids.push(ids.of(&t.name, svc).unwrap_or_default());
                topics.push(t);
            }
            (OffsetCommitResponse { topics }, answer_ids)
        }
    };
    observe::errors(OffsetCommit::SUPPORT.name, &resp);
    wire::encode(&resp, v, &answer_ids, out)?;
    Ok(true)
}
