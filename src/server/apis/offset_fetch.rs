//! OffsetFetch: committed offsets of each group, from its shard, filtered
//! by what the client may describe. v10 names topics by id (`topic_ids`).

use uuid::Uuid;

use super::prelude::*;
use super::topic_ids as by_id;
use crate::coordinator::messages::{FetchTopic, FetchedPartition, FetchedTopic, OffsetFetchResponse};
use crate::error_code::ErrorCode;
use crate::protocol::api::offset_fetch as wire;

pub struct OffsetFetch;

impl Api for OffsetFetch {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let wire::Decoded { mut req, topic_ids } = wire::decode(body, v)?;
        let by_ids = v >= wire::TOPIC_IDS_FROM;
        // v10: each group's ids resolved; the unknown ones wait for the answer.
        let mut unknown: Vec<Vec<(Uuid, FetchTopic)>> = Vec::new();
        if by_ids {
            for (group, group_ids) in req.groups.iter_mut().zip(topic_ids) {
                let Some(topics) = group.topics.take() else {
                    unknown.push(Vec::new());
                    continue;
                };
                let split =
                    by_id::resolve(svc, topics, group_ids, |t, name| t.name = name, |t| !t.name.is_empty()).await;
                group.topics = Some(split.known);
                unknown.push(split.unknown);
            }
        }
        let plan = guard.offset_fetch(&mut req);
        let served = match req.groups.is_empty() {
            true => OffsetFetchResponse { groups: vec![] },
            false => svc.coordinator.offset_fetch(req).await?,
        };
        let mut resp = guard.offset_fetch_answer(plan, served);
        let answer_ids = match by_ids {
            true => with_ids(svc, &mut resp, unknown),
            false => Vec::new(),
        };
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, &answer_ids, out)?;
        Ok(true)
    }
}

/// A v10 answer's ids, group by group: topics without one left out (as
/// Kafka leaves them out of an every-topic answer), and each unknown id's
/// partitions answered UNKNOWN_TOPIC_ID after the rest, unless the group
/// was refused as a whole.
fn with_ids(svc: &Services, resp: &mut OffsetFetchResponse, unknown: Vec<Vec<(Uuid, FetchTopic)>>) -> Vec<Vec<Uuid>> {
    let mut unknown = unknown.into_iter();
    let mut answer_ids = Vec::with_capacity(resp.groups.len());
    for group in &mut resp.groups {
        let mut group_ids = Vec::with_capacity(group.topics.len());
        group.topics.retain(|t| by_id::id_of(svc, &t.name).map(|id| group_ids.push(id)).is_some());
        for (id, topic) in unknown.next().unwrap_or_default() {
            if !group.error.is_none() {
                break;
            }
            group_ids.push(id);
            let partitions = topic
                .partitions
                .iter()
                .map(|&p| FetchedPartition { error: ErrorCode::UNKNOWN_TOPIC_ID, ..FetchedPartition::none(p) })
                .collect();
            group.topics.push(FetchedTopic { name: String::new(), partitions });
        }
        answer_ids.push(group_ids);
    }
    answer_ids
}
