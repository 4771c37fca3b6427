//! Moving groups in and out without losing positions.
//!
//! - **Import**: before kcoord first answers a JoinGroup, OffsetCommit or
//!   OffsetFetch for a group it has never seen, it reads the group's
//!   committed offsets from the upstream's coordinator (OffsetFetch for
//!   every topic the upstream has) and writes them as a simple commit, only
//!   if the shard still does not know the group. From then on kcoord is the
//!   group's source of truth. While the upstream cannot be asked, the group
//!   is answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
//! - **Write-through**: offsets kcoord acknowledged are also committed to
//!   the upstream as simple commits (generation -1), by one writer task,
//!   coalesced (latest offset per partition) every
//!   `sidecar.write_through_interval_ms`, retried with back-off, and all
//!   written again every `sidecar.write_through_refresh_ms` so upstream
//!   retention never expires them. Deleted groups and offsets are deleted
//!   upstream too. Lag tools pointed at the brokers keep working, and going
//!   back to the brokers' own coordinator loses nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseTopic;
use kafka_protocol::messages::{
    DeleteGroupsRequest, GroupId, OffsetCommitRequest as WireCommit, OffsetDeleteRequest,
    OffsetDeleteResponse as WireOffsetDelete, OffsetFetchRequest, TopicName,
};
use tokio::sync::{watch, Notify, Semaphore};

use super::deleted_topics::DeletedTopics;
use super::upstream::{ClusterView, Upstream, UpstreamError};
use crate::catalog::Catalog;
use crate::coordinator::core::ImportOutcome;
use crate::coordinator::messages::{
    CommitPartition, CommitTopic, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchGroup,
    OffsetFetchGroupResult, TxnFields,
};
use crate::coordinator::service::{DelegatedDelete, GroupHooks};
use crate::coordinator::{Coordinator, FastMap};
use crate::error_code::ErrorCode;
use crate::protocol::client::{s, ClientError};

/// Groups remembered as imported at most; past it the memory starts over
/// (costing one local check per group, never a second import).
const MAX_KNOWN_GROUPS: usize = 1_000_000;
/// Imports asking the upstream at once.
const IMPORT_CONCURRENCY: usize = 4;
/// Topics per upstream OffsetFetch during an import.
const TOPICS_PER_FETCH: usize = 1000;

/// The settings of import and write-through.
#[derive(Debug, Clone)]
pub struct MirrorSettings {
    pub import: bool,
    pub write_through: bool,
    pub interval: Duration,
    pub refresh: Duration,
    pub backoff: Duration,
    pub backoff_max: Duration,
}

impl MirrorSettings {
    pub fn from_config(c: &crate::config::SidecarConfig) -> Self {
        MirrorSettings {
            import: c.import_offsets,
            write_through: c.write_through,
            interval: Duration::from_millis(c.write_through_interval_ms),
            refresh: Duration::from_millis(c.write_through_refresh_ms),
            backoff: Duration::from_millis(c.retry_backoff_ms),
            backoff_max: Duration::from_millis(c.retry_backoff_max_ms),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Committed {
    pub(super) offset: i64,
    pub(super) leader_epoch: i32,
    pub(super) metadata: Option<String>,
}

/// What the upstream still has to be told, coalesced.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// Latest acknowledged offset per group and partition.
    pub(super) offsets: BTreeMap<String, BTreeMap<(String, i32), Committed>>,
    /// Groups deleted here.
    deleted_groups: BTreeSet<String>,
    /// Offsets deleted here, per group.
    deleted_offsets: BTreeMap<String, BTreeMap<String, BTreeSet<i32>>>,
    /// When the oldest entry was queued.
    since: Option<Instant>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.offsets.is_empty() && self.deleted_groups.is_empty() && self.deleted_offsets.is_empty()
    }

    fn partitions(&self) -> usize {
        self.offsets.values().map(BTreeMap::len).sum()
    }
}

pub struct Mirror {
    pub(super) upstream: Arc<Upstream>,
    pub(super) catalog: Arc<Catalog>,
    settings: MirrorSettings,
    known: Mutex<FastMap<String, ()>>,
    imports: Semaphore,
    pending: Mutex<Pending>,
    wake: Notify,
    /// When the last on-demand topic refresh finished.
    topics_refreshed: tokio::sync::Mutex<Option<Instant>>,
    last_warning: Mutex<Option<Instant>>,
    /// Topics missing from the last complete listing of the upstream.
    deleted: Mutex<DeletedTopics>,
    /// Topics deleted upstream whose offsets are still to be dropped here.
    to_forget: Mutex<BTreeSet<String>>,
    /// Groups whose offsets were delegated to the upstream since start-up:
    /// their offsets are never written through again (a late write-through
    /// could overwrite a newer commit made upstream).
    pub(super) delegated: Mutex<FastMap<String, ()>>,
    /// Held while offsets are sent upstream by the write-through or by a
    /// handover, so that the two never overtake each other.
    pub(super) writer: tokio::sync::Mutex<()>,
}

impl Mirror {
    pub fn new(upstream: Arc<Upstream>, catalog: Arc<Catalog>, settings: MirrorSettings) -> Self {
        Mirror {
            upstream,
            catalog,
            settings,
            known: Mutex::new(FastMap::default()),
            imports: Semaphore::new(IMPORT_CONCURRENCY),
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
            topics_refreshed: tokio::sync::Mutex::new(None),
            last_warning: Mutex::new(None),
            deleted: Mutex::new(DeletedTopics::default()),
            to_forget: Mutex::new(BTreeSet::new()),
            delegated: Mutex::new(FastMap::default()),
            writer: tokio::sync::Mutex::new(()),
        }
    }

    /// Rate limit for warnings about refused write-through: one a minute.
    fn warn_now(&self) -> bool {
        let mut last = self.last_warning.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < Duration::from_secs(60)) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    /// Reads the upstream's brokers and topics; the catalog then holds
    /// exactly the upstream's topics. Topics found deleted upstream are
    /// queued for [`Mirror::take_deleted_topics`].
    pub async fn refresh_catalog(&self) -> Result<ClusterView, UpstreamError> {
        let view = self.upstream.refresh().await?;
        let before: Vec<_> = self.catalog.list().into_iter().map(|t| (t.name, t.id)).collect();
        let after: Vec<_> = view.topics.iter().map(|t| (t.name.clone(), t.id)).collect();
        let topics: Vec<_> = view.topics.iter().map(|t| (t.name.clone(), t.id, t.partitions)).collect();
        self.catalog.mirror(&topics, true);
        let gone = self.deleted.lock().unwrap_or_else(|p| p.into_inner()).observe(&before, &after);
        if !gone.is_empty() {
            // Their offsets must not be written through to a re-created topic.
            let mut p = self.pending();
            for offsets in p.offsets.values_mut() {
                offsets.retain(|(topic, _), _| !gone.contains(topic));
            }
            for topics in p.deleted_offsets.values_mut() {
                topics.retain(|topic, _| !gone.contains(topic));
            }
            drop(p);
            self.to_forget.lock().unwrap_or_else(|p| p.into_inner()).extend(gone);
        }
        Ok(view)
    }

    /// Topics deleted upstream whose committed offsets kcoord must drop.
    pub fn take_deleted_topics(&self) -> Vec<String> {
        std::mem::take(&mut *self.to_forget.lock().unwrap_or_else(|p| p.into_inner())).into_iter().collect()
    }

    /// Drops every group's offsets for topics deleted upstream (as Kafka's
    /// coordinator does when a topic is deleted); a failed drop is retried
    /// after the next refresh.
    pub async fn forget_deleted_topics(&self, coordinator: &Coordinator) {
        for topic in self.take_deleted_topics() {
            match coordinator.delete_topic_offsets(&topic).await {
                Ok(e) if e.is_none() => {
                    tracing::info!(%topic, "topic deleted upstream; its committed offsets were dropped");
                    metrics::counter!("kcoord_sidecar_deleted_topics_total").increment(1);
                }
                result => {
                    tracing::warn!(%topic, ?result, "cannot drop the offsets of a topic deleted upstream; will retry");
                    self.to_forget.lock().unwrap_or_else(|p| p.into_inner()).insert(topic);
                }
            }
        }
    }

    fn is_known(&self, group: &str) -> bool {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).contains_key(group)
    }

    fn mark_known(&self, group: &str) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() >= MAX_KNOWN_GROUPS {
            known.clear();
        }
        known.insert(group.to_string(), ());
    }

    pub(super) fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn import(&self, coordinator: &Coordinator, group: &str) -> Result<(), ErrorCode> {
        if self.is_known(group) {
            return Ok(());
        }
        let _permit = self.imports.acquire().await.map_err(|_| ErrorCode::COORDINATOR_NOT_AVAILABLE)?;
        if self.is_known(group) {
            return Ok(());
        }
        let ask = |topics: Vec<CommitTopic>| OffsetCommitRequest {
            version: 8,
            group_id: group.to_string(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics,
        };
        // A group the shard knows (also from before a restart) is never imported.
        match coordinator.import(ask(Vec::new())).await.map_err(|_| ErrorCode::COORDINATOR_NOT_AVAILABLE)? {
            Ok(ImportOutcome::AlreadyKnown) => {
                self.mark_known(group);
                return Ok(());
            }
            Ok(ImportOutcome::Imported(_)) => {}
            Err(e) => return Err(e),
        }
        let topics = match self.fetch_upstream_offsets(group).await {
            Ok(t) => t,
            Err(e) => {
                metrics::counter!("kcoord_sidecar_imports_total", "result" => "error").increment(1);
                tracing::warn!(%group, error = %e, "cannot import the group's offsets from the upstream yet; answering COORDINATOR_LOAD_IN_PROGRESS");
                return Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
            }
        };
        let count: usize = topics.iter().map(|t| t.partitions.len()).sum();
        match coordinator.import(ask(topics)).await.map_err(|_| ErrorCode::COORDINATOR_NOT_AVAILABLE)? {
            Ok(ImportOutcome::Imported(n)) => {
                let result = if count == 0 { "empty" } else { "imported" };
                metrics::counter!("kcoord_sidecar_imports_total", "result" => result).increment(1);
                metrics::counter!("kcoord_sidecar_imported_offsets_total").increment(n as u64);
                if n > 0 {
                    tracing::info!(%group, offsets = n, "imported the group's committed offsets from the upstream");
                }
            }
            Ok(ImportOutcome::AlreadyKnown) => {}
            Err(e) => return Err(e),
        }
        self.mark_known(group);
        Ok(())
    }

    /// The group's committed offsets on the upstream, for every topic the
    /// upstream has (a null topic list is not answered by every
    /// Kafka-compatible broker, so the topics are named).
    async fn fetch_upstream_offsets(&self, group: &str) -> Result<Vec<CommitTopic>, UpstreamError> {
        let all: Vec<(String, Vec<i32>)> =
            self.catalog.list().into_iter().map(|t| (t.name, (0..t.partitions).collect())).collect();
        let mut out = Vec::new();
        for t in self.upstream_offsets(group, &all, false).await? {
            let partitions: Vec<CommitPartition> = t
                .partitions
                .iter()
                .filter(|p| p.error_code == 0 && p.committed_offset >= 0)
                .map(|p| CommitPartition {
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.metadata.as_ref().map(|m| m.to_string()),
                })
                .collect();
            if !partitions.is_empty() {
                out.push(CommitTopic { name: t.name.0.to_string(), partitions });
            }
        }
        Ok(out)
    }

    /// The upstream coordinator's answer for `group`'s offsets of `topics`
    /// (asked [`TOPICS_PER_FETCH`] topics at a time); `require_stable` asks
    /// it to answer UNSTABLE_OFFSET_COMMIT for offsets a transaction has
    /// not yet committed (v7+). A group-level error is an error.
    pub(super) async fn upstream_offsets(
        &self,
        group: &str,
        topics: &[(String, Vec<i32>)],
        require_stable: bool,
    ) -> Result<Vec<OffsetFetchResponseTopic>, UpstreamError> {
        let mut out = Vec::new();
        for chunk in topics.chunks(TOPICS_PER_FETCH) {
            let req = OffsetFetchRequest::default().with_group_id(GroupId(s(group))).with_topics(Some(
                chunk
                    .iter()
                    .map(|(name, partitions)| {
                        OffsetFetchRequestTopic::default()
                            .with_name(TopicName(s(name)))
                            .with_partition_indexes(partitions.clone())
                    })
                    .collect(),
            ));
            // v1–v7: one group, named topics; `require_stable` only exists
            // from v7 (an upstream without it, before Kafka 2.5, has no
            // UNSTABLE_OFFSET_COMMIT to give either).
            let stable = req.clone().with_require_stable(true);
            let resp = match require_stable {
                true => match self.upstream.call_coordinator(group, &stable, 7, 7).await {
                    Err(UpstreamError::Client { source: ClientError::Unsupported { .. }, .. }) => None,
                    other => Some(other?.1),
                },
                false => None,
            };
            let resp = match resp {
                Some(r) => r,
                None => self.upstream.call_coordinator(group, &req, 1, 7).await?.1,
            };
            if resp.error_code != 0 {
                if (14..=16).contains(&resp.error_code) {
                    self.upstream.forget_coordinator(group);
                }
                return Err(UpstreamError::Kafka { code: resp.error_code, what: format!("OffsetFetch {group}") });
            }
            out.extend(resp.topics);
        }
        Ok(out)
    }

    fn queue_commits(&self, group: &str, topics: &[CommitTopic]) {
        let mut p = self.pending();
        let entry = p.offsets.entry(group.to_string()).or_default();
        for t in topics {
            for c in &t.partitions {
                entry.insert(
                    (t.name.clone(), c.partition),
                    Committed { offset: c.offset, leader_epoch: c.leader_epoch, metadata: c.metadata.clone() },
                );
            }
        }
        p.since.get_or_insert_with(Instant::now);
        drop(p);
        self.wake.notify_one();
    }

    /// Queues every offset kcoord holds, so the upstream's copies are
    /// renewed before its retention expires them.
    async fn queue_everything(&self, coordinator: &Coordinator) {
        let Ok(groups) = coordinator.group_summaries().await else { return };
        for g in groups {
            let Ok(Some(details)) = coordinator.group_details(&g.group_id).await else { continue };
            let mut by_topic: BTreeMap<String, Vec<CommitPartition>> = BTreeMap::new();
            for o in &details.offsets {
                by_topic.entry(o.topic.clone()).or_default().push(CommitPartition {
                    partition: o.partition,
                    offset: o.offset,
                    leader_epoch: o.leader_epoch,
                    metadata: Some(o.metadata.clone()),
                });
            }
            let topics: Vec<CommitTopic> =
                by_topic.into_iter().map(|(name, partitions)| CommitTopic { name, partitions }).collect();
            if !topics.is_empty() {
                self.queue_commits(&g.group_id, &topics);
            }
        }
    }

    /// The write-through task: sends what is pending every interval, backs
    /// off after failures, renews everything every refresh period, and
    /// makes one last bounded attempt at shutdown.
    pub async fn run_write_through(
        self: Arc<Self>,
        coordinator: Arc<dyn AsCoordinator>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        if !self.settings.write_through {
            return;
        }
        let mut backoff = self.settings.backoff;
        let mut next_refresh = tokio::time::Instant::now() + self.settings.refresh;
        loop {
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep_until(next_refresh) => {
                    self.queue_everything(coordinator.coordinator()).await;
                    next_refresh = tokio::time::Instant::now() + self.settings.refresh;
                }
                _ = shutdown.changed() => break,
            }
            // Coalesce what arrives meanwhile.
            tokio::select! {
                _ = tokio::time::sleep(self.settings.interval) => {}
                _ = shutdown.changed() => break,
            }
            if self.flush().await {
                backoff = self.settings.backoff;
            } else {
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.changed() => break,
                }
                backoff = (backoff * 2).min(self.settings.backoff_max);
                self.wake.notify_one();
            }
        }
        let last = tokio::time::timeout(self.upstream.timeout().min(Duration::from_secs(5)), self.flush()).await;
        let left = self.pending().partitions();
        if !matches!(last, Ok(true)) && left > 0 {
            tracing::warn!(partitions = left, "stopping with offsets not yet written through to the upstream");
        }
    }

    /// Sends everything pending once; returns whether all of it went
    /// through (failures are queued again unless something newer was).
    pub async fn flush(&self) -> bool {
        let _writer = self.writer.lock().await;
        let mut batch = std::mem::take(&mut *self.pending());
        {
            let delegated = self.delegated.lock().unwrap_or_else(|p| p.into_inner());
            if !delegated.is_empty() {
                batch.offsets.retain(|group, _| !delegated.contains_key(group));
            }
        }
        let mut ok = true;
        for group in &batch.deleted_groups {
            ok &= self.delete_group_upstream(group).await;
        }
        for (group, topics) in &batch.deleted_offsets {
            ok &= self.delete_offsets_upstream(group, topics).await;
        }
        for (group, offsets) in batch.offsets {
            if let Err(failed) = self.commit_upstream(&group, &offsets).await {
                ok = false;
                let mut p = self.pending();
                let entry = p.offsets.entry(group).or_default();
                for (k, v) in failed {
                    entry.entry(k).or_insert(v);
                }
                p.since =
                    Some(p.since.map_or(batch.since.unwrap_or_else(Instant::now), |s| s.min(batch.since.unwrap_or(s))));
            }
        }
        let p = self.pending();
        metrics::gauge!("kcoord_sidecar_write_through_pending").set(p.partitions() as f64);
        let lag = p.since.filter(|_| !p.is_empty()).map_or(0.0, |s| s.elapsed().as_secs_f64());
        metrics::gauge!("kcoord_sidecar_write_through_lag_seconds").set(lag);
        ok
    }

    /// Commits one group's offsets upstream; returns the ones to retry.
    pub(super) async fn commit_upstream(
        &self,
        group: &str,
        offsets: &BTreeMap<(String, i32), Committed>,
    ) -> Result<(), Vec<((String, i32), Committed)>> {
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for ((topic, partition), c) in offsets {
            topics.entry(topic.as_str()).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(c.offset)
                    .with_committed_leader_epoch(c.leader_epoch)
                    .with_committed_metadata(c.metadata.as_deref().map(s)),
            );
        }
        let req = WireCommit::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(s(""))
            .with_retention_time_ms(-1)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        OffsetCommitRequestTopic::default().with_name(TopicName(s(name))).with_partitions(partitions)
                    })
                    .collect(),
            );
        let all = || offsets.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>();
        // v2–v9: by topic name, with a generation.
        let resp = match self.upstream.call_coordinator(group, &req, 2, 9).await {
            Ok((_, r)) => r,
            Err(e) => {
                metrics::counter!("kcoord_sidecar_write_through_partitions_total", "result" => "retry")
                    .increment(offsets.len() as u64);
                tracing::debug!(%group, error = %e, "write-through failed; will retry");
                return Err(all());
            }
        };
        let mut retry = Vec::new();
        let (mut written, mut dropped) = (0u64, 0u64);
        for t in &resp.topics {
            for p in &t.partitions {
                let key = (t.name.0.to_string(), p.partition_index);
                match ErrorCode(p.error_code) {
                    ErrorCode::NONE => written += 1,
                    e if is_permanent(e) => {
                        dropped += 1;
                        tracing::warn!(%group, topic = %key.0, partition = key.1, error = ?e, "the upstream refuses this offset; not writing it through");
                    }
                    e => {
                        if (14..=16).contains(&e.0) {
                            self.upstream.forget_coordinator(group);
                        } else if self.warn_now() {
                            // e.g. UNKNOWN_MEMBER_ID: the group still has members on the upstream's coordinator.
                            tracing::warn!(%group, topic = %key.0, partition = key.1, error = ?e,
                                "the upstream refuses a write-through commit (does the group still have members there?); retrying");
                        }
                        if let Some(v) = offsets.get(&key) {
                            retry.push((key, v.clone()));
                        }
                    }
                }
            }
        }
        metrics::counter!("kcoord_sidecar_write_through_partitions_total", "result" => "ok").increment(written);
        metrics::counter!("kcoord_sidecar_write_through_partitions_total", "result" => "dropped").increment(dropped);
        metrics::counter!("kcoord_sidecar_write_through_partitions_total", "result" => "retry")
            .increment(retry.len() as u64);
        if retry.is_empty() {
            Ok(())
        } else {
            Err(retry)
        }
    }

    async fn delete_group_upstream(&self, group: &str) -> bool {
        let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(group))]);
        let result = self.upstream.call_coordinator(group, &req, 0, 2).await;
        let code = match &result {
            Ok((_, r)) => r.results.first().map_or(0, |x| x.error_code),
            Err(e) => {
                return self.deletion_failed(group, e, || {
                    self.pending().deleted_groups.insert(group.to_string());
                })
            }
        };
        // Not found upstream: nothing to delete.
        self.deletion_answered(group, code, || {
            self.pending().deleted_groups.insert(group.to_string());
        })
    }

    async fn delete_offsets_upstream(&self, group: &str, topics: &BTreeMap<String, BTreeSet<i32>>) -> bool {
        let requeue = || {
            let mut p = self.pending();
            let entry = p.deleted_offsets.entry(group.to_string()).or_default();
            for (t, parts) in topics {
                entry.entry(t.clone()).or_default().extend(parts);
            }
        };
        let asked = topics.iter().map(|(name, parts)| (name.as_str(), parts.iter().copied()));
        match self.offset_delete_upstream(group, asked).await {
            Ok(r) => self.deletion_answered(group, r.error_code, requeue),
            Err(e) => self.deletion_failed(group, &e, requeue),
        }
    }

    /// Sends an OffsetDelete of `topics` to the upstream's coordinator of `group`.
    pub(super) async fn offset_delete_upstream<'t, P: Iterator<Item = i32>>(
        &self,
        group: &str,
        topics: impl Iterator<Item = (&'t str, P)>,
    ) -> Result<WireOffsetDelete, UpstreamError> {
        let req = OffsetDeleteRequest::default().with_group_id(GroupId(s(group))).with_topics(
            topics
                .map(|(name, parts)| {
                    OffsetDeleteRequestTopic::default().with_name(TopicName(s(name))).with_partitions(
                        parts.map(|p| OffsetDeleteRequestPartition::default().with_partition_index(p)).collect(),
                    )
                })
                .collect(),
        );
        Ok(self.upstream.call_coordinator(group, &req, 0, 0).await?.1)
    }

    fn deletion_answered(&self, group: &str, code: i16, requeue: impl FnOnce()) -> bool {
        match ErrorCode(code) {
            ErrorCode::NONE | ErrorCode::GROUP_ID_NOT_FOUND => true,
            e if (14..=16).contains(&e.0) => {
                self.upstream.forget_coordinator(group);
                requeue();
                false
            }
            e => {
                // e.g. NON_EMPTY_GROUP: consumers still use the upstream's coordinator.
                tracing::warn!(%group, error = ?e, "the upstream refused a deletion; its copy stays");
                metrics::counter!("kcoord_sidecar_write_through_deletions_total", "result" => "refused").increment(1);
                true
            }
        }
    }

    fn deletion_failed(&self, group: &str, e: &UpstreamError, requeue: impl FnOnce()) -> bool {
        if let UpstreamError::Client { source: crate::protocol::client::ClientError::Unsupported { .. }, .. } = e {
            tracing::warn!(%group, error = %e, "the upstream cannot delete groups or offsets; its copy stays");
            metrics::counter!("kcoord_sidecar_write_through_deletions_total", "result" => "unsupported").increment(1);
            return true;
        }
        requeue();
        false
    }
}

/// Errors after which retrying a write-through commit cannot help.
fn is_permanent(e: ErrorCode) -> bool {
    matches!(e.0, 3 | 12 | 24 | 29 | 30 | 35 | 42 | 87)
}

/// Gives the write-through task the coordinator it renews offsets from.
pub trait AsCoordinator: Send + Sync {
    fn coordinator(&self) -> &Coordinator;
}

impl GroupHooks for Mirror {
    fn before_first_use<'a>(
        &'a self,
        coordinator: &'a Coordinator,
        group_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<(), ErrorCode>> + Send + 'a>> {
        Box::pin(async move {
            if !self.settings.import {
                return Ok(());
            }
            self.import(coordinator, group_id).await
        })
    }

    fn first_use_done(&self, group_id: &str) -> bool {
        !self.settings.import || self.is_known(group_id)
    }

    fn committed(&self, group_id: &str, topics: &[CommitTopic]) {
        if self.settings.write_through {
            self.queue_commits(group_id, topics);
        }
    }

    fn group_deleted(&self, group_id: &str) {
        // Deleting a delegated group ends its delegation.
        self.delegated.lock().unwrap_or_else(|p| p.into_inner()).remove(group_id);
        if !self.settings.write_through {
            return;
        }
        let mut p = self.pending();
        p.offsets.remove(group_id);
        p.deleted_offsets.remove(group_id);
        p.deleted_groups.insert(group_id.to_string());
        p.since.get_or_insert_with(Instant::now);
        drop(p);
        self.wake.notify_one();
    }

    fn offsets_deleted(&self, group_id: &str, topics: &[(String, Vec<i32>)]) {
        if !self.settings.write_through {
            return;
        }
        let mut p = self.pending();
        if let Some(pending) = p.offsets.get_mut(group_id) {
            for (t, parts) in topics {
                for part in parts {
                    pending.remove(&(t.clone(), *part));
                }
            }
        }
        let entry = p.deleted_offsets.entry(group_id.to_string()).or_default();
        for (t, parts) in topics {
            entry.entry(t.clone()).or_default().extend(parts.iter().copied());
        }
        p.since.get_or_insert_with(Instant::now);
        drop(p);
        self.wake.notify_one();
    }

    fn delegated_commit<'a>(
        &'a self,
        coordinator: &'a Coordinator,
        req: OffsetCommitRequest,
        txn: Option<TxnFields>,
        hand_over_first: bool,
    ) -> Pin<Box<dyn Future<Output = OffsetCommitResponse> + Send + 'a>> {
        Box::pin(self.forward_commit(coordinator, req, txn, hand_over_first))
    }

    fn delegated_fetch<'a>(
        &'a self,
        coordinator: &'a Coordinator,
        group: OffsetFetchGroup,
        require_stable: bool,
        hand_over_first: bool,
    ) -> Pin<Box<dyn Future<Output = OffsetFetchGroupResult> + Send + 'a>> {
        Box::pin(self.forward_fetch(coordinator, group, require_stable, hand_over_first))
    }

    fn delegated_offset_delete<'a>(
        &'a self,
        coordinator: &'a Coordinator,
        delete: DelegatedDelete,
    ) -> Pin<Box<dyn Future<Output = OffsetDeleteResponse> + Send + 'a>> {
        Box::pin(self.forward_offset_delete(coordinator, delete))
    }

    fn refresh_topics<'a>(&'a self, _topics: Vec<String>) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            let asked = Instant::now();
            // One refresh at a time; callers that waited for one take its result,
            // and unknown topics cannot make refreshes more frequent than the back-off.
            let mut last = self.topics_refreshed.lock().await;
            if let Some(done) = *last {
                if done >= asked || asked.duration_since(done) < self.settings.backoff {
                    return;
                }
            }
            if let Err(e) = self.refresh_catalog().await {
                tracing::debug!(error = %e, "topic refresh for an unknown topic failed");
            }
            *last = Some(Instant::now());
        })
    }
}
