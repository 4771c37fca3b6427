//! Deleting a topic: the saga that spans the data plane and the
//! coordinator, which is why it lives above both (neither imports the other).
//!
//! The steps: partitions are marked deleted (parked fetches wake up, appends
//! stop) and the catalog entry is moved to the catalog's *being deleted*
//! list in one atomic write (now Metadata stops listing the topic and
//! OffsetCommit refuses it, as in Kafka); then the partition directories
//! are renamed aside (all three are the data plane's
//! [`DataPlane::delete_topic_now`]). Then every group's committed offsets
//! for it are tombstoned, waiting (bounded) for shards that are still
//! loading, and only once every shard has made its tombstones durable is the
//! deletion finished in the catalog, which frees the name; the renamed
//! directories are removed in any case.
//!
//! Why this order: tombstoning first would let a commit slip in between the
//! tombstones and the catalog change; removing the topic first without a
//! durable record (as before) lost the tombstones whenever a shard was
//! loading or the daemon crashed. With the record, the work is never lost:
//! if a shard does not answer in time the DeleteTopics answer is still NONE
//! (the topic *is* deleted) and [`finish_deletions`] retries in the
//! background, also after a restart. It tombstones only topics recorded as
//! being deleted, never merely topics absent from the catalog. While a
//! deletion is unfinished, re-creating the name gets TOPIC_ALREADY_EXISTS
//! ("marked for deletion", Kafka's answer during a deletion), so the
//! tombstones can never hit a new topic's offsets. As in Kafka, a commit
//! checked against the catalog just before the deletion but queued at its
//! shard after the tombstones survives.
//!
//! A crash after the renames leaves directories that the next start removes;
//! a crash before the catalog write leaves the topic, empty, for the client
//! to delete again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::catalog::CatalogError;
use crate::coordinator::Coordinator;
use crate::error_code::ErrorCode;
use crate::topics::admin::{DeleteTopic, DeletedTopic};
use crate::topics::DataPlane;

/// How long a DeleteTopics answer waits for every shard to tombstone the
/// topic's offsets (loading shards included) before leaving the rest to the
/// background: well below clients' request timeouts (30 s by default).
const DELETE_OFFSETS_WAIT: Duration = Duration::from_secs(10);
/// Pause between attempts while a shard cannot tombstone yet.
const DELETE_OFFSETS_RETRY: Duration = Duration::from_millis(200);
/// Pause before the background retries a deletion it could not finish.
const FINISH_DELETIONS_RETRY: Duration = Duration::from_secs(1);

/// Kafka's DeleteTopics (as `ControllerApis.deleteTopics`), then the
/// offsets tombstones.
pub async fn delete_topics(
    plane: &Arc<DataPlane>,
    req: Vec<DeleteTopic>,
    coordinator: &Coordinator,
) -> Vec<DeletedTopic> {
    let mut out = Vec::with_capacity(req.len());
    let mut names: Vec<String> = Vec::new();
    let mut ids: Vec<Uuid> = Vec::new();
    for t in &req {
        match (&t.name, t.id.is_nil()) {
            (None, true) => out.push(DeletedTopic::error(
                None,
                Uuid::nil(),
                ErrorCode::INVALID_REQUEST,
                "Neither topic name nor id were specified.",
            )),
            (Some(n), false) => out.push(DeletedTopic::error(
                Some(n.clone()),
                t.id,
                ErrorCode::INVALID_REQUEST,
                "You may not specify both topic name and topic id.",
            )),
            (Some(n), true) => names.push(n.clone()),
            (None, false) => ids.push(t.id),
        }
    }
    let (names, dup_names) = split_duplicates(names);
    let (ids, dup_ids) = split_duplicates(ids);
    for n in dup_names {
        out.push(DeletedTopic::error(Some(n), Uuid::nil(), ErrorCode::INVALID_REQUEST, "Duplicate topic name."));
    }
    for id in dup_ids {
        out.push(DeletedTopic::error(None, id, ErrorCode::INVALID_REQUEST, "Duplicate topic id."));
    }
    let mut targets: Vec<(String, Uuid, bool)> = names.into_iter().map(|n| (n, Uuid::nil(), false)).collect();
    for id in ids {
        match plane.catalog().get_by_id(&id) {
            Some(info) => targets.push((info.name, id, true)),
            None => out.push(DeletedTopic::error(
                None,
                id,
                ErrorCode::UNKNOWN_TOPIC_ID,
                "This server does not host this topic ID.",
            )),
        }
    }
    for (name, id, by_id) in targets {
        out.push(delete_one(plane, name, id, by_id, coordinator).await);
    }
    out
}

async fn delete_one(
    plane: &Arc<DataPlane>,
    name: String,
    id: Uuid,
    by_id: bool,
    coordinator: &Coordinator,
) -> DeletedTopic {
    let blocking = Arc::clone(plane);
    let n = name.clone();
    let deleted = tokio::task::spawn_blocking(move || blocking.delete_topic_now(&n))
        .await
        .unwrap_or_else(|e| Err(CatalogError { code: ErrorCode::UNKNOWN_SERVER_ERROR, message: e.to_string() }));
    let (info, trash) = match deleted {
        Ok(v) => v,
        Err(e) if e.code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION && by_id => {
            return DeletedTopic::error(
                None,
                id,
                ErrorCode::UNKNOWN_TOPIC_ID,
                "This server does not host this topic ID.",
            );
        }
        Err(e) => return DeletedTopic::error(Some(name), id, e.code, &e.message),
    };
    if !finish_deletion(plane, &info.name, coordinator, Instant::now() + DELETE_OFFSETS_WAIT).await {
        tracing::warn!(topic = %info.name, "committed offsets of the deleted topic are tombstoned in the background");
        plane.wake_deletion_finisher();
    }
    plane.remove_renamed_aside(trash).await;
    tracing::info!(topic = %info.name, id = %info.id, "deleted topic");
    DeletedTopic { name: Some(info.name), id: info.id, error: ErrorCode::NONE, message: None }
}

/// Tombstones every group's committed offsets for deleted topic `name`,
/// retrying until `deadline` while shards load or fail to answer, then
/// finishes the deletion in the catalog. Returns whether it finished.
pub async fn finish_deletion(plane: &DataPlane, name: &str, coordinator: &Coordinator, deadline: Instant) -> bool {
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let loaded = tokio::time::timeout(remaining, coordinator.wait_until_loaded()).await.is_ok();
        if loaded {
            match coordinator.delete_topic_offsets(name).await {
                Ok(e) if e.is_none() => break,
                Ok(e) => tracing::debug!(topic = name, error = %e, "a shard could not tombstone offsets yet"),
                Err(_) => return false,
            }
        }
        if Instant::now() + DELETE_OFFSETS_RETRY >= deadline {
            return false;
        }
        tokio::time::sleep(DELETE_OFFSETS_RETRY).await;
    }
    let catalog = Arc::clone(plane.catalog());
    let n = name.to_string();
    match tokio::task::spawn_blocking(move || catalog.finish_delete(&n)).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::warn!(topic = name, error = %e, "cannot record that the topic's deletion finished");
            false
        }
        Err(_) => false,
    }
}

/// The background side of deletion: finishes every deletion recorded in
/// the catalog (left by a crash, or by a DeleteTopics whose shards did
/// not answer in time), at start-up and whenever DeleteTopics leaves
/// one, retrying every second until done. Ends at shutdown.
pub async fn finish_deletions(plane: &DataPlane, coordinator: &Coordinator) {
    let mut closing = plane.closing();
    loop {
        let mut unfinished = false;
        for t in plane.catalog().deleting() {
            let deadline = Instant::now() + DELETE_OFFSETS_WAIT;
            let finished = tokio::select! {
                done = finish_deletion(plane, &t.name, coordinator, deadline) => done,
                _ = closing.wait_for(|c| *c) => return,
            };
            if finished {
                tracing::info!(topic = %t.name, id = %t.id, "finished deleting topic: committed offsets tombstoned");
            }
            unfinished |= !finished;
        }
        let retry = if unfinished { FINISH_DELETIONS_RETRY } else { Duration::from_secs(3600) };
        tokio::select! {
            _ = plane.deletion_left_unfinished() => {}
            _ = tokio::time::sleep(retry) => {}
            _ = closing.wait_for(|c| *c) => return,
        }
    }
}

/// The values named once, in request order, and those named more than once,
/// in the order of their second mention. Linear: counts first, then one pass.
fn split_duplicates<T: Eq + std::hash::Hash + Clone>(values: Vec<T>) -> (Vec<T>, Vec<T>) {
    let mut counts: HashMap<T, u32> = HashMap::with_capacity(values.len());
    let mut dups = Vec::new();
    for v in &values {
        let c = counts.entry(v.clone()).or_insert(0);
        *c += 1;
        if *c == 2 {
            dups.push(v.clone());
        }
    }
    let once = values.into_iter().filter(|v| counts.get(v) == Some(&1)).collect();
    (once, dups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_noted_once() {
        assert_eq!(split_duplicates(vec!["a", "b", "a", "a", "c"]), (vec!["b", "c"], vec!["a"]));
    }

    #[test]
    fn duplicate_split_of_many_names_keeps_request_order() {
        let mut names: Vec<String> = (0..100_000).map(|i| format!("t{i}")).collect();
        names.push("t7".into());
        names.push("t3".into());
        let (once, dups) = split_duplicates(names);
        assert_eq!(once.len(), 99_998);
        assert_eq!(&once[..3], ["t0", "t1", "t2"]);
        assert_eq!(dups, ["t7", "t3"]);
    }
}
