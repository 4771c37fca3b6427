//! OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups and offset
//! retention (Kafka's `OffsetMetadataManager`).

use crate::coordinator::Groups;

use super::classic::group::{ClassicGroup, GroupState};
use super::classic::{rebalance, validate_existing_member};
use super::consumer::offsets as consumer_offsets;
use super::consumer::retention as consumer_retention;
use super::core::{Cx, ImportOutcome};
use super::delegation;
use super::messages::*;
use super::records::{OffsetValue, Record};
use crate::error_code::ErrorCode;
use crate::observability::striped::COMMITTED_PARTITIONS;

/// Every partition of the request answered with `error`.
pub fn commit_error_response(req: &OffsetCommitRequest, error: ErrorCode) -> OffsetCommitResponse {
    OffsetCommitResponse {
        topics: req
            .topics
            .iter()
            .map(|t| TopicErrors {
                name: t.name.clone(),
                partitions: t.partitions.iter().map(|p| PartitionError { partition: p.partition, error }).collect(),
            })
            .collect(),
    }
}

/// Which commit a group is asked to accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitKind {
    /// OffsetCommit.
    Plain,
    /// TxnOffsetCommit (sidecar mode, delegated upstream once admitted).
    Transactional,
}

/// Kafka's `ClassicGroup.validateOffsetCommit`: a transactional commit
/// without member id, generation and instance id is accepted in any state
/// (older TxnOffsetCommit versions carry none), and is not held back by a
/// rebalance.
fn validate_commit(g: &ClassicGroup, req: &OffsetCommitRequest, kind: CommitKind) -> Result<(), ErrorCode> {
    let transactional = kind == CommitKind::Transactional;
    if g.is(GroupState::Dead) {
        return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
    }
    if req.generation_id < 0 && g.is(GroupState::Empty) {
        // Admin or manual commit to an empty group: member id is ignored.
        return Ok(());
    }
    if req.generation_id >= 0 || !req.member_id.is_empty() || req.group_instance_id.is_some() {
        validate_existing_member(g, &req.member_id, req.group_instance_id.as_deref())?;
        if req.generation_id != g.generation_id {
            return Err(ErrorCode::ILLEGAL_GENERATION);
        }
    } else if !transactional && !g.is(GroupState::Empty) {
        return Err(ErrorCode::UNKNOWN_MEMBER_ID);
    }
    if !transactional && g.is(GroupState::CompletingRebalance) {
        return Err(ErrorCode::REBALANCE_IN_PROGRESS);
    }
    Ok(())
}

/// Decides whether a commit may be accepted, as Kafka's coordinator does
/// before it writes anything (`OffsetMetadataManager.validateOffsetCommit`
/// and `validateTransactionalOffsetCommit`). An unknown group is created as
/// a simple group (in memory only) for a commit without generation;
/// returns whether it was.
pub fn admit_commit(
    groups: &mut Groups,
    req: &OffsetCommitRequest,
    kind: CommitKind,
    cx: &mut Cx,
) -> Result<bool, ErrorCode> {
    if let Some(g) = cx.store.consumer_group(&req.group_id) {
        return match kind {
            CommitKind::Plain => consumer_offsets::validate_commit(g, req),
            CommitKind::Transactional => consumer_offsets::validate_transactional_commit(g, req),
        }
        .map(|()| false);
    }
    let created = !groups.contains_key(&req.group_id);
    if created {
        if req.generation_id < 0 {
            // A "simple" group: created in memory; only offset records are written.
            tracing::info!(group = %req.group_id, "creating a simple group via a manual offset commit");
            let mut g = ClassicGroup::new(&req.group_id, cx.now);
            g.state_timestamp = None;
            groups.insert(req.group_id.clone(), g);
        } else if kind == CommitKind::Plain && req.version >= 9 {
            return Err(ErrorCode::GROUP_ID_NOT_FOUND);
        } else {
            return Err(ErrorCode::ILLEGAL_GENERATION);
        }
    }
    let Some(g) = groups.get_mut(&req.group_id) else { return Err(ErrorCode::UNKNOWN_SERVER_ERROR) };
    if let Err(e) = validate_commit(g, req, kind) {
        if created {
            groups.remove(&req.group_id);
        }
        return Err(e);
    }
    // A member's commit counts as a heartbeat while Stable or PreparingRebalance.
    if kind == CommitKind::Plain && (g.is(GroupState::Stable) || g.is(GroupState::PreparingRebalance)) {
        rebalance::reschedule_heartbeat(g, &req.member_id, cx);
    }
    Ok(created)
}

/// Java's `String.length()`: UTF-16 code units.
fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Serves an OffsetCommit whose topics and partitions were already checked
/// against the catalog. Takes the request: its topic names move into the
/// answer instead of being copied.
pub fn commit(groups: &mut Groups, req: OffsetCommitRequest, cx: &mut Cx) -> OffsetCommitResponse {
    match admit_commit(groups, &req, CommitKind::Plain, cx) {
        Ok(created) => write_commit(groups, req, created, cx),
        Err(e) => commit_error_response(&req, e),
    }
}

/// Writes a validated commit; `created` names a simple group this commit
/// created, which goes again if nothing could be written.
fn write_commit(groups: &mut Groups, req: OffsetCommitRequest, created: bool, cx: &mut Cx) -> OffsetCommitResponse {
    let now = cx.now;
    let expire_timestamp = (req.retention_time_ms != -1).then(|| now.saturating_add(req.retention_time_ms));
    let max = cx.cfg.metadata_max_bytes.max(0) as usize;
    let OffsetCommitRequest { group_id, topics, .. } = req;
    let mut response = OffsetCommitResponse { topics: Vec::with_capacity(topics.len()) };
    let mut committed = 0u64;
    // Encoded straight from the request: no record per partition first.
    // Every topic and partition gets its place in the answer even after a
    // record fails to encode, since the whole answer then carries the error.
    let written = cx.append_encoded(|encoded| {
        let mut failed = Ok(());
        for t in topics {
            let mut partitions = Vec::with_capacity(t.partitions.len());
            for p in t.partitions {
                let too_large = p.metadata.as_deref().is_some_and(|m| utf16_len(m) > max);
                if too_large {
                    partitions
                        .push(PartitionError { partition: p.partition, error: ErrorCode::OFFSET_METADATA_TOO_LARGE });
                    continue;
                }
                partitions.push(PartitionError { partition: p.partition, error: ErrorCode::NONE });
                if failed.is_err() {
                    continue;
                }
                let value = OffsetValue {
                    offset: p.offset,
                    leader_epoch: p.leader_epoch,
                    metadata: p.metadata.unwrap_or_default(),
                    commit_timestamp: now,
                    expire_timestamp,
                };
                match encoded.push_offset(&group_id, &t.name, p.partition, &value, now) {
                    Ok(()) => committed += 1,
                    Err(e) => failed = Err(e),
                }
            }
            response.topics.push(TopicErrors { name: t.name, partitions });
        }
        failed
    });
    if let Err(e) = written {
        // Nothing was written, so a simple group this commit created does
        // not exist either. Kafka fails the whole request: every partition
        // gets the error, also those refused for their metadata's size.
        if created {
            groups.remove(&group_id);
        }
        for p in response.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            p.error = e;
        }
        return response;
    }
    COMMITTED_PARTITIONS.increment(committed);
    response
}

/// Sidecar import: writes the upstream's committed offsets as a simple
/// commit, but only for a group this shard has never seen, so that an
/// import can never overwrite what kcoord itself acknowledged. A group
/// deleted here (its tombstone still kept) counts as seen: its deletion may
/// not have reached the upstream yet.
pub fn import(groups: &mut Groups, req: &OffsetCommitRequest, cx: &mut Cx) -> Result<ImportOutcome, ErrorCode> {
    if groups.contains_key(&req.group_id)
        || cx.store.consumer_group(&req.group_id).is_some()
        || cx.store.has_offsets(&req.group_id)
        || cx.store.was_deleted(&req.group_id)
        || cx.store.delegation(&req.group_id).is_some()
    {
        return Ok(ImportOutcome::AlreadyKnown);
    }
    if req.topics.is_empty() {
        return Ok(ImportOutcome::Imported(0));
    }
    let simple =
        OffsetCommitRequest { generation_id: -1, member_id: String::new(), group_instance_id: None, ..req.clone() };
    let resp = commit(groups, simple, cx);
    let mut written = 0;
    for p in resp.topics.iter().flat_map(|t| &t.partitions) {
        match p.error {
            ErrorCode::NONE => written += 1,
            // Too large for this node's offsets.metadata_max_bytes: the
            // rest is still imported.
            ErrorCode::OFFSET_METADATA_TOO_LARGE => {}
            other => return Err(other),
        }
    }
    Ok(ImportOutcome::Imported(written))
}

/// Serves OffsetFetch for one group. Unknown groups, topics and partitions
/// answer offset -1, leader epoch -1, metadata "" and no error.
pub fn fetch(groups: &Groups, req: &OffsetFetchGroup, cx: &Cx) -> OffsetFetchGroupResult {
    if let Some(g) = cx.store.consumer_group(&req.group_id) {
        if let Err(error) = consumer_offsets::validate_fetch(g, req) {
            return OffsetFetchGroupResult { group_id: req.group_id.clone(), error, topics: vec![] };
        }
    }
    let known = groups.get(&req.group_id).is_some_and(|g| !g.is(GroupState::Dead))
        || cx.store.consumer_group(&req.group_id).is_some();
    let offsets = if known { cx.store.offsets(&req.group_id) } else { None };
    let value = |v: &OffsetValue, partition: i32| FetchedPartition {
        partition,
        offset: v.offset,
        leader_epoch: v.leader_epoch,
        metadata: v.metadata.clone(),
        error: ErrorCode::NONE,
    };
    let topics = match &req.topics {
        Some(topics) => topics
            .iter()
            .map(|t| {
                let stored = offsets.and_then(|o| o.get(&t.name));
                FetchedTopic {
                    name: t.name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|&p| match stored.and_then(|s| s.get(&p)) {
                            Some(v) => value(v, p),
                            None => FetchedPartition::none(p),
                        })
                        .collect(),
                }
            })
            .collect(),
        None => {
            let mut all: Vec<FetchedTopic> = offsets
                .map(|o| {
                    o.iter()
                        .map(|(name, parts)| {
                            let mut partitions: Vec<FetchedPartition> =
                                parts.iter().map(|(p, v)| value(v, *p)).collect();
                            partitions.sort_by_key(|p| p.partition);
                            FetchedTopic { name: name.clone(), partitions }
                        })
                        .collect()
                })
                .unwrap_or_default();
            all.sort_by(|a, b| a.name.cmp(&b.name));
            all
        }
    };
    OffsetFetchGroupResult { group_id: req.group_id.clone(), error: ErrorCode::NONE, topics }
}

/// Serves OffsetDelete (KIP-496) for topics already checked against the catalog.
pub fn delete_offsets(groups: &mut Groups, req: &OffsetDeleteRequest, cx: &mut Cx) -> OffsetDeleteResponse {
    match subscribed_topics(groups, req, cx) {
        Ok(subscribed) => delete_unsubscribed(req, &subscribed, cx),
        Err(error) => OffsetDeleteResponse { error, topics: vec![] },
    }
}

/// Kafka's checks of an OffsetDelete against the group's state: a group
/// error, or for each requested topic (by position) whether the group
/// subscribes to it (its offsets are then kept, GROUP_SUBSCRIBED_TO_TOPIC).
pub(super) fn subscribed_topics(groups: &Groups, req: &OffsetDeleteRequest, cx: &Cx) -> Result<Vec<bool>, ErrorCode> {
    if let Some(g) = cx.store.consumer_group(&req.group_id) {
        // A consumer group allows it in any state (Kafka's
        // `ConsumerGroup.validateOffsetDelete`), per unsubscribed topic.
        return Ok(req.topics.iter().map(|t| consumer_retention::is_subscribed_to_topic(g, &t.name)).collect());
    }
    let Some(g) = groups.get(&req.group_id) else { return Err(ErrorCode::GROUP_ID_NOT_FOUND) };
    match g.state {
        GroupState::Dead => return Err(ErrorCode::GROUP_ID_NOT_FOUND),
        GroupState::Stable | GroupState::PreparingRebalance | GroupState::CompletingRebalance
            if !g.uses_consumer_protocol() =>
        {
            return Err(ErrorCode::NON_EMPTY_GROUP)
        }
        _ => {}
    }
    Ok(req.topics.iter().map(|t| g.is_subscribed_to_topic(&t.name)).collect())
}

/// Each requested partition answered GROUP_SUBSCRIBED_TO_TOPIC where its
/// topic is subscribed (`subscribed`, by request position), else NONE.
pub(super) fn subscription_errors(req: &OffsetDeleteRequest, subscribed: &[bool]) -> Vec<TopicErrors> {
    req.topics
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let error = if subscribed.get(i).copied().unwrap_or(true) {
                ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC
            } else {
                ErrorCode::NONE
            };
            TopicErrors {
                name: t.name.clone(),
                partitions: t.partitions.iter().map(|&partition| PartitionError { partition, error }).collect(),
            }
        })
        .collect()
}

/// Tombstones the committed offsets of the request's topics the group does
/// not subscribe to (`subscribed`, by request position); the others get
/// GROUP_SUBSCRIBED_TO_TOPIC.
fn delete_unsubscribed(req: &OffsetDeleteRequest, subscribed: &[bool], cx: &mut Cx) -> OffsetDeleteResponse {
    let topics = subscription_errors(req, subscribed);
    let records: Vec<Record> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().filter(|p| p.error.is_none()).map(move |p| (&t.name, p.partition)))
        .filter(|(name, p)| cx.store.offset(&req.group_id, name, *p).is_some())
        .map(|(name, p)| Record::offset_tombstone(&req.group_id, name, p))
        .collect();
    if let Err(e) = cx.append(records) {
        return OffsetDeleteResponse { error: e, topics: vec![] };
    }
    OffsetDeleteResponse { error: ErrorCode::NONE, topics }
}

/// Tombstones for every offset of a group.
pub(super) fn offset_tombstones(group_id: &str, cx: &Cx) -> Vec<Record> {
    let mut out = Vec::new();
    if let Some(topics) = cx.store.offsets(group_id) {
        for (t, parts) in topics {
            for p in parts.keys() {
                out.push(Record::offset_tombstone(group_id, t, *p));
            }
        }
    }
    out
}

/// Serves one group of DeleteGroups: only Empty groups may be deleted; their
/// offsets and the group itself are tombstoned, so the deletion survives a restart.
pub fn delete_group(groups: &mut Groups, group_id: &str, cx: &mut Cx) -> ErrorCode {
    if let Some(g) = cx.store.consumer_group(group_id) {
        // A consumer group can be deleted only once it has no members.
        if !g.members.is_empty() {
            return ErrorCode::NON_EMPTY_GROUP;
        }
        let mut records = offset_tombstones(group_id, cx);
        records.extend(super::consumer::group::tombstones(g));
        records.extend(delegation::end(group_id, cx));
        return match cx.append(records) {
            Ok(()) => {
                tracing::info!(group = group_id, "consumer group deleted");
                ErrorCode::NONE
            }
            Err(e) => e,
        };
    }
    let Some(g) = groups.get(group_id).filter(|g| !g.is(GroupState::Dead)) else {
        // A delegated group whose offsets went upstream may have nothing
        // else here (after a restart): deleting it ends the delegation.
        return match delegation::end(group_id, cx) {
            Some(end) => match cx.append(vec![end, Record::group_tombstone(group_id)]) {
                Ok(()) => ErrorCode::NONE,
                Err(e) => e,
            },
            None => ErrorCode::GROUP_ID_NOT_FOUND,
        };
    };
    match g.state {
        GroupState::Dead => return ErrorCode::GROUP_ID_NOT_FOUND,
        GroupState::Stable | GroupState::PreparingRebalance | GroupState::CompletingRebalance => {
            return ErrorCode::NON_EMPTY_GROUP
        }
        GroupState::Empty => {}
    }
    let mut records = offset_tombstones(group_id, cx);
    records.push(Record::group_tombstone(group_id));
    records.extend(delegation::end(group_id, cx));
    match cx.append(records) {
        Ok(()) => {
            groups.remove(group_id);
            tracing::info!(group = group_id, "group deleted");
            ErrorCode::NONE
        }
        Err(e) => e,
    }
}

/// Topic deletion (Kafka's `onPartitionsDeleted`): tombstones for every group's offsets on the
/// topic. Groups themselves stay (retention removes empty ones later).
pub fn delete_topic_offsets(topic: &str, cx: &mut Cx) -> ErrorCode {
    let mut records = Vec::new();
    let mut groups: Vec<&String> = cx.store.groups_with_offsets().collect();
    groups.sort();
    for g in groups {
        if let Some(parts) = cx.store.offsets(g).and_then(|t| t.get(topic)) {
            let mut ps: Vec<i32> = parts.keys().copied().collect();
            ps.sort_unstable();
            for p in ps {
                records.push(Record::offset_tombstone(g, topic, p));
            }
        }
    }
    match cx.append(records) {
        Ok(()) => ErrorCode::NONE,
        Err(e) => e,
    }
}

/// When an offset's retention starts counting, by offset.
type RetentionBase<'a> = Box<dyn Fn(&OffsetValue) -> i64 + 'a>;

/// Kafka's `OffsetExpirationCondition` for a group: the timestamp each
/// offset's retention counts from, or None if nothing may expire now.
fn expiration_base(g: &ClassicGroup) -> Option<RetentionBase<'_>> {
    match &g.protocol_type {
        Some(_) if g.is(GroupState::Empty) => {
            // Retention starts when the group became empty.
            let since = g.state_timestamp;
            Some(Box::new(move |v: &OffsetValue| since.unwrap_or(v.commit_timestamp)))
        }
        Some(_) if g.uses_consumer_protocol() && g.subscribed_topics.is_some() && g.is(GroupState::Stable) => {
            Some(Box::new(|v: &OffsetValue| v.commit_timestamp))
        }
        Some(_) => None,
        // Simple groups: per commit.
        None => Some(Box::new(|v: &OffsetValue| v.commit_timestamp)),
    }
}

/// The periodic retention pass (KIP-211): expire offsets by Kafka's rules
/// and delete Empty groups left without offsets, classic groups here and
/// consumer groups by `consumer::retention`, in one write.
pub fn expire_offsets(groups: &mut Groups, cx: &mut Cx) {
    let retention = cx.cfg.offsets_retention_ms;
    let now = cx.now;
    let consumer = consumer_retention::expire(cx.store, now, retention);
    let mut records = Vec::new();
    let mut deletable = Vec::new();
    let mut ids: Vec<&String> = groups.keys().collect();
    ids.sort();
    for id in ids {
        let Some(g) = groups.get(id) else { continue };
        let all_expired = match cx.store.offsets(id) {
            None => true,
            Some(topics) => match expiration_base(g) {
                None => false,
                Some(base) => {
                    let mut all = true;
                    for (topic, parts) in topics {
                        if g.is_subscribed_to_topic(topic) {
                            all = false;
                            continue;
                        }
                        for (p, v) in parts {
                            let expired = match v.expire_timestamp {
                                Some(expire) => now >= expire,
                                None => now.saturating_sub(base(v)) >= retention,
                            };
                            if expired {
                                records.push(Record::offset_tombstone(id, topic, *p));
                            } else {
                                all = false;
                            }
                        }
                    }
                    all
                }
            },
        };
        if all_expired && g.is(GroupState::Empty) {
            records.push(Record::group_tombstone(id));
            deletable.push(id.clone());
        }
    }
    records.extend(consumer.records);
    if records.is_empty() {
        return;
    }
    let n = records.len();
    match cx.append(records) {
        Ok(()) => {
            for id in &deletable {
                groups.remove(id);
            }
            let groups_deleted = deletable.len() + consumer.groups_deleted;
            tracing::info!(records = n, groups_deleted, "expired offsets and empty groups");
        }
        Err(e) => tracing::warn!(error = ?e, "failed to write offset expiration records; will retry"),
    }
}
