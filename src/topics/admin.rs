//! CreateTopics and DeleteTopics, with Kafka's (KRaft controller's)
//! validation and error codes, answered for a one-node cluster.
//!
//! Creation: a topic's partition logs are created before its catalog entry,
//! and the catalog entry and the in-memory map change together, so a topic
//! that Metadata lists always has its logs.
//!
//! Deletion: partitions are marked deleted (parked fetches wake up, appends
//! stop), their directories renamed aside, and the catalog entry moved to
//! the catalog's *being deleted* list in one atomic write (now Metadata stops
//! listing the topic and OffsetCommit refuses it, as in Kafka). Then every
//! group's committed offsets for it are tombstoned, waiting (bounded) for
//! shards that are still loading, and only once every shard has made its
//! tombstones durable is the deletion finished in the catalog, which frees
//! the name; the renamed directories are removed in any case.
//!
//! Why this order: tombstoning first would let a commit slip in between the
//! tombstones and the catalog change; removing the topic first without a
//! durable record (as before) lost the tombstones whenever a shard was
//! loading or the daemon crashed. With the record, the work is never lost:
//! if a shard does not answer in time the DeleteTopics answer is still NONE
//! (the topic *is* deleted) and [`DataPlane::finish_deletions`] retries in
//! the background, also after a restart. It tombstones only topics recorded
//! as being deleted, never merely topics absent from the catalog. While a
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
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::catalog::{CatalogError, TopicConfig, TopicInfo, MAX_PARTITIONS};
use super::limits::{records_for_topic, EXCESSIVE_BATCH_MESSAGE, MAX_RECORDS_PER_USER_OP};
use super::service::{trash_name, DataPlane, TopicLogs};
use crate::coordinator::Coordinator;
use crate::error_code::ErrorCode;

/// Kafka's defaults for the topic configs kcoord supports, to tell a
/// default (source DEFAULT_CONFIG) from a daemon setting (STATIC_BROKER_CONFIG).
const KAFKA_RETENTION_MS: i64 = 604_800_000;
const KAFKA_RETENTION_BYTES: i64 = -1;
const KAFKA_SEGMENT_BYTES: u64 = 1_073_741_824;
const KAFKA_SEGMENT_MS: i64 = 604_800_000;
/// kcoord's smallest segment (the storage engine's limit on `topics.segment_bytes`).
const MIN_SEGMENT_BYTES: i64 = 1024;

/// How long a DeleteTopics answer waits for every shard to tombstone the
/// topic's offsets (loading shards included) before leaving the rest to the
/// background: well below clients' request timeouts (30 s by default).
const DELETE_OFFSETS_WAIT: Duration = Duration::from_secs(10);
/// Pause between attempts while a shard cannot tombstone yet.
const DELETE_OFFSETS_RETRY: Duration = Duration::from_millis(200);
/// Pause before the background retries a deletion it could not finish.
const FINISH_DELETIONS_RETRY: Duration = Duration::from_secs(1);

/// DescribeConfigs `ConfigSource` values used in CreateTopics v5+ answers.
pub const SOURCE_TOPIC_CONFIG: i8 = 1;
pub const SOURCE_STATIC_BROKER_CONFIG: i8 = 4;
pub const SOURCE_DEFAULT_CONFIG: i8 = 5;

#[derive(Debug, Clone)]
pub struct CreateTopicsRequest {
    pub topics: Vec<NewTopic>,
    pub validate_only: bool,
}

#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    /// Manual assignment: (partition, replica broker ids).
    pub assignments: Vec<(i32, Vec<i32>)>,
    pub configs: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopicsResponse {
    pub topics: Vec<CreatedTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedTopic {
    pub name: String,
    pub topic_id: Uuid,
    pub error: ErrorCode,
    pub message: Option<String>,
    pub num_partitions: i32,
    pub replication_factor: i16,
    /// The topic's configs (v5+), on success.
    pub configs: Option<Vec<ConfigEntry>>,
    /// Why the configs, partition count and replication factor are not
    /// shown (v5+ `topic_config_error_code`): TOPIC_AUTHORIZATION_FAILED
    /// without DESCRIBE_CONFIGS on the topic, as Kafka.
    pub config_error: ErrorCode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: String,
    pub source: i8,
}

impl CreatedTopic {
    pub fn error(name: &str, error: ErrorCode, message: impl Into<String>) -> Self {
        CreatedTopic {
            name: name.to_string(),
            topic_id: Uuid::nil(),
            error,
            message: Some(message.into()),
            num_partitions: -1,
            replication_factor: -1,
            configs: None,
            config_error: ErrorCode::NONE,
        }
    }
}

/// A topic to delete, by name (id nil) or by id (v6, name None).
#[derive(Debug, Clone)]
pub struct DeleteTopic {
    pub name: Option<String>,
    pub id: Uuid,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletedTopic {
    pub name: Option<String>,
    pub id: Uuid,
    pub error: ErrorCode,
    pub message: Option<String>,
}

impl DeletedTopic {
    fn error(name: Option<String>, id: Uuid, error: ErrorCode, message: &str) -> Self {
        DeletedTopic { name, id, error, message: Some(message.to_string()) }
    }
}

type Invalid = (ErrorCode, String);

fn invalid(code: ErrorCode, message: impl Into<String>) -> Invalid {
    (code, message.into())
}

/// Parses the topic configs kcoord implements; everything else is refused
/// rather than silently ignored.
fn parse_configs(configs: &[(String, Option<String>)]) -> Result<TopicConfig, Invalid> {
    let mut out = TopicConfig::default();
    for (name, value) in configs {
        let Some(value) = value else {
            return Err(invalid(
                ErrorCode::INVALID_REQUEST,
                format!("Null value not supported for topic configs: {name}"),
            ));
        };
        let bad = |why: &str| {
            invalid(ErrorCode::INVALID_CONFIG, format!("Invalid value {value} for configuration {name}: {why}"))
        };
        let number = || value.trim().parse::<i64>().map_err(|_| bad("Not a number of type LONG"));
        match name.as_str() {
            "retention.ms" => {
                let v = number()?;
                if v < -1 {
                    return Err(bad("Value must be at least -1"));
                }
                out.retention_ms = Some(v);
            }
            "retention.bytes" => out.retention_bytes = Some(number()?),
            "segment.bytes" => {
                let v = number()?;
                if !(MIN_SEGMENT_BYTES..=i32::MAX as i64).contains(&v) {
                    return Err(bad(&format!("Value must be between {MIN_SEGMENT_BYTES} and {}", i32::MAX)));
                }
                out.segment_bytes = Some(v as u64);
            }
            "segment.ms" => {
                let v = number()?;
                if v < 1 {
                    return Err(bad("Value must be at least 1"));
                }
                out.segment_ms = Some(v);
            }
            "cleanup.policy" if value == "delete" => {}
            "cleanup.policy" => {
                return Err(invalid(ErrorCode::INVALID_CONFIG, "kcoord supports only cleanup.policy=delete"));
            }
            other => return Err(invalid(ErrorCode::INVALID_CONFIG, format!("Unknown topic config name: {other}"))),
        }
    }
    Ok(out)
}

impl DataPlane {
    /// Kafka's partition-count and replication checks for a one-node cluster;
    /// returns the partition count to create.
    fn check_layout(&self, t: &NewTopic) -> Result<i32, Invalid> {
        let node = self.settings.node_id;
        if !t.assignments.is_empty() {
            if t.replication_factor != -1 {
                return Err(invalid(
                    ErrorCode::INVALID_REQUEST,
                    "A manual partition assignment was specified, but replication factor was not set to -1.",
                ));
            }
            if t.num_partitions != -1 {
                return Err(invalid(
                    ErrorCode::INVALID_REQUEST,
                    "A manual partition assignment was specified, but numPartitions was not set to -1.",
                ));
            }
            for (i, (partition, brokers)) in t.assignments.iter().enumerate() {
                if *partition as i64 != i as i64 {
                    return Err(invalid(
                        ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                        "partitions should be a consecutive 0-based integer sequence",
                    ));
                }
                let mut sorted = brokers.clone();
                sorted.sort_unstable();
                if sorted.is_empty() {
                    return Err(invalid(
                        ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                        "The manual partition assignment includes an empty replica list.",
                    ));
                }
                if let Some(b) = sorted.iter().find(|&&b| b != node) {
                    return Err(invalid(
                        ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                        format!(
                            "The manual partition assignment includes broker {b}, but no such broker is registered."
                        ),
                    ));
                }
                if sorted.len() > 1 {
                    return Err(invalid(
                        ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                        format!("The manual partition assignment includes the broker {node} more than once."),
                    ));
                }
            }
            return i32::try_from(t.assignments.len())
                .map_err(|_| invalid(ErrorCode::INVALID_PARTITIONS, "too many partitions"));
        }
        if t.replication_factor < -1 || t.replication_factor == 0 {
            return Err(invalid(
                ErrorCode::INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ));
        }
        if t.num_partitions < -1 || t.num_partitions == 0 {
            return Err(invalid(
                ErrorCode::INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            ));
        }
        if t.replication_factor > 1 {
            return Err(invalid(
                ErrorCode::INVALID_REPLICATION_FACTOR,
                format!(
                    "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only 1 broker(s) are registered.",
                    rf = t.replication_factor
                ),
            ));
        }
        Ok(if t.num_partitions == -1 { self.settings.default_partitions } else { t.num_partitions })
    }

    /// The configs reported for a topic (CreateTopics v5+).
    fn describe_configs(&self, c: &TopicConfig) -> Vec<ConfigEntry> {
        let d = &self.settings;
        let entry = |name: &str, set: Option<String>, default: String, kafka_default: String| {
            let source = if set.is_some() {
                SOURCE_TOPIC_CONFIG
            } else if default == kafka_default {
                SOURCE_DEFAULT_CONFIG
            } else {
                SOURCE_STATIC_BROKER_CONFIG
            };
            ConfigEntry { name: name.to_string(), value: set.unwrap_or(default), source }
        };
        vec![
            entry("cleanup.policy", None, "delete".into(), "delete".into()),
            entry(
                "retention.bytes",
                c.retention_bytes.map(|v| v.to_string()),
                d.retention.retention_bytes.to_string(),
                KAFKA_RETENTION_BYTES.to_string(),
            ),
            entry(
                "retention.ms",
                c.retention_ms.map(|v| v.to_string()),
                d.retention.retention_ms.to_string(),
                KAFKA_RETENTION_MS.to_string(),
            ),
            entry(
                "segment.bytes",
                c.segment_bytes.map(|v| v.to_string()),
                d.segment_bytes.to_string(),
                KAFKA_SEGMENT_BYTES.to_string(),
            ),
            entry(
                "segment.ms",
                c.segment_ms.map(|v| v.to_string()),
                d.segment_ms.to_string(),
                KAFKA_SEGMENT_MS.to_string(),
            ),
        ]
    }

    pub async fn create_topics(self: &Arc<Self>, req: CreateTopicsRequest) -> CreateTopicsResponse {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for t in &req.topics {
            *counts.entry(t.name.as_str()).or_default() += 1;
        }
        let excessive = self.is_excessive_batch(&req.topics, &counts);
        let mut out = Vec::with_capacity(req.topics.len());
        let mut reported_duplicates = std::collections::HashSet::new();
        for t in &req.topics {
            if counts.get(t.name.as_str()).copied().unwrap_or(0) > 1 {
                if reported_duplicates.insert(t.name.as_str()) {
                    out.push(CreatedTopic::error(&t.name, ErrorCode::INVALID_REQUEST, "Duplicate topic name."));
                }
                continue;
            }
            if excessive {
                out.push(CreatedTopic::error(&t.name, ErrorCode::POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE));
                continue;
            }
            out.push(self.create_one(t, req.validate_only).await);
        }
        CreateTopicsResponse { topics: out }
    }

    /// Whether the topics a CreateTopics would create need more metadata
    /// records than Kafka's controller writes for one operation: then, as in
    /// Kafka, none is created and each gets POLICY_VIOLATION (duplicates
    /// still get INVALID_REQUEST, which Kafka's broker answers before the
    /// controller sees the request; existing topics write no records).
    fn is_excessive_batch(&self, topics: &[NewTopic], counts: &HashMap<&str, usize>) -> bool {
        let records: u64 = topics
            .iter()
            .filter(|t| counts.get(t.name.as_str()).copied().unwrap_or(0) == 1 && self.catalog.get(&t.name).is_none())
            .map(|t| {
                let partitions = match (t.assignments.len(), t.num_partitions) {
                    (0, -1) => self.settings.default_partitions,
                    (0, n) => n,
                    (n, _) => i32::try_from(n).unwrap_or(i32::MAX),
                };
                records_for_topic(partitions, t.configs.len())
            })
            .sum();
        if records <= MAX_RECORDS_PER_USER_OP {
            return false;
        }
        self.limits.note_refusal(
            &format!("{} topics", topics.len()),
            &format!("a CreateTopics needs {records} metadata records, more than Kafka's {MAX_RECORDS_PER_USER_OP} per operation"),
        );
        true
    }

    async fn create_one(self: &Arc<Self>, t: &NewTopic, validate_only: bool) -> CreatedTopic {
        if let Err(e) = crate::config::validate_topic_name(&t.name) {
            return CreatedTopic::error(&t.name, ErrorCode::INVALID_TOPIC_EXCEPTION, e);
        }
        if self.catalog.get(&t.name).is_some() {
            return CreatedTopic::error(
                &t.name,
                ErrorCode::TOPIC_ALREADY_EXISTS,
                format!("Topic '{}' already exists.", t.name),
            );
        }
        let checked = self.check_layout(t).and_then(|n| Ok((n, parse_configs(&t.configs)?)));
        let (partitions, config) = match checked {
            Ok(v) => v,
            Err((code, message)) => return CreatedTopic::error(&t.name, code, message),
        };
        if partitions > MAX_PARTITIONS {
            return CreatedTopic::error(
                &t.name,
                ErrorCode::INVALID_PARTITIONS,
                format!("Number of partitions must be at most {MAX_PARTITIONS}."),
            );
        }
        let plane = Arc::clone(self);
        let name = t.name.clone();
        let created =
            tokio::task::spawn_blocking(move || plane.create_topic_now(&name, partitions, config, validate_only))
                .await
                .unwrap_or_else(|e| {
                    Err(CatalogError { code: ErrorCode::UNKNOWN_SERVER_ERROR, message: e.to_string() })
                });
        match created {
            Ok(info) => CreatedTopic {
                name: info.name.clone(),
                topic_id: info.id,
                error: ErrorCode::NONE,
                message: None,
                num_partitions: info.partitions,
                replication_factor: 1,
                configs: Some(self.describe_configs(&info.config)),
                config_error: ErrorCode::NONE,
            },
            Err(e) => CreatedTopic::error(&t.name, e.code, e.message),
        }
    }

    /// Creates a topic: partition logs first, then the catalog entry and the
    /// map entry together (blocking). Used by CreateTopics and auto-creation.
    pub fn create_topic_now(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
        validate_only: bool,
    ) -> Result<TopicInfo, CatalogError> {
        let _admin = self.admin_lock();
        let probe = self.catalog.create_with(name, partitions, config.clone(), true)?;
        self.limits.check(&self.catalog, name, partitions)?;
        if validate_only {
            return Ok(probe);
        }
        let storage_error = |message: String| CatalogError { code: ErrorCode::KAFKA_STORAGE_ERROR, message };
        let dirs: Vec<PathBuf> =
            (0..partitions).map(|p| super::service::partition_dir(&self.settings.root, name, p)).collect();
        let fs = self.disk();
        let remove_dirs = || {
            for d in &dirs {
                let _ = fs.remove_dir_all(d);
            }
        };
        let logs = match self.open_partitions(&probe, true) {
            Ok(l) => l,
            Err(e) => {
                // Typically the descriptor limit (EMFILE): the client only
                // sees KAFKA_STORAGE_ERROR, so the operator must see why.
                tracing::error!(topic = name, partitions, error = %e, "cannot create topic: its partition logs could not be opened");
                remove_dirs();
                return Err(storage_error(e));
            }
        };
        let mut topics = self.write_topics();
        match self.catalog.create_with(name, partitions, config, false) {
            Ok(info) => {
                topics.insert(name.to_string(), Arc::new(TopicLogs { info: info.clone(), partitions: logs }));
                tracing::info!(topic = name, partitions, id = %info.id, "created topic");
                Ok(info)
            }
            Err(e) => {
                tracing::error!(topic = name, partitions, error = %e.message, "cannot create topic: the catalog could not record it");
                drop(topics);
                drop(logs);
                remove_dirs();
                Err(e)
            }
        }
    }

    /// Kafka's DeleteTopics (as `ControllerApis.deleteTopics`), then the
    /// offsets tombstones.
    pub async fn delete_topics(
        self: &Arc<Self>,
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
            match self.catalog.get_by_id(&id) {
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
            out.push(self.delete_one(name, id, by_id, coordinator).await);
        }
        out
    }

    async fn delete_one(
        self: &Arc<Self>,
        name: String,
        id: Uuid,
        by_id: bool,
        coordinator: &Coordinator,
    ) -> DeletedTopic {
        let plane = Arc::clone(self);
        let n = name.clone();
        let deleted = tokio::task::spawn_blocking(move || plane.delete_topic_now(&n))
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
        if !self.finish_deletion(&info.name, coordinator, Instant::now() + DELETE_OFFSETS_WAIT).await {
            tracing::warn!(topic = %info.name, "committed offsets of the deleted topic are tombstoned in the background");
            self.deletions.notify_one();
        }
        let fs = self.disk();
        let _ = tokio::task::spawn_blocking(move || {
            for dir in trash {
                super::service::remove_partition_dir(&*fs, &dir);
            }
        })
        .await;
        tracing::info!(topic = %info.name, id = %info.id, "deleted topic");
        DeletedTopic { name: Some(info.name), id: info.id, error: ErrorCode::NONE, message: None }
    }

    /// Tombstones every group's committed offsets for deleted topic `name`,
    /// retrying until `deadline` while shards load or fail to answer, then
    /// finishes the deletion in the catalog. Returns whether it finished.
    pub async fn finish_deletion(&self, name: &str, coordinator: &Coordinator, deadline: Instant) -> bool {
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
        let catalog = Arc::clone(&self.catalog);
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
    pub async fn finish_deletions(&self, coordinator: &Coordinator) {
        let mut closing = self.closing.subscribe();
        loop {
            let mut unfinished = false;
            for t in self.catalog.deleting() {
                let deadline = Instant::now() + DELETE_OFFSETS_WAIT;
                let finished = tokio::select! {
                    done = self.finish_deletion(&t.name, coordinator, deadline) => done,
                    _ = closing.wait_for(|c| *c) => return,
                };
                if finished {
                    tracing::info!(topic = %t.name, id = %t.id, "finished deleting topic: committed offsets tombstoned");
                }
                unfinished |= !finished;
            }
            let retry = if unfinished { FINISH_DELETIONS_RETRY } else { Duration::from_secs(3600) };
            tokio::select! {
                _ = self.deletions.notified() => {}
                _ = tokio::time::sleep(retry) => {}
                _ = closing.wait_for(|c| *c) => return,
            }
        }
    }

    /// Removes a topic from the catalog (which records it as being
    /// deleted: the deletion is committed) and the map, then renames its
    /// partition directories aside (blocking). Returns the renamed
    /// directories. See the rule in `service`'s module docs: the directories
    /// are renamed only after the catalog write, since a directory renamed
    /// aside is removed at the next start (it once was renamed first, and a
    /// crash before the catalog write then lost the data of a topic still
    /// there).
    pub fn delete_topic_now(&self, name: &str) -> Result<(TopicInfo, Vec<PathBuf>), CatalogError> {
        let _admin = self.admin_lock();
        let mut topics = self.write_topics();
        let Some(t) = topics.get(name).cloned() else {
            return Err(CatalogError {
                code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                message: "This server does not host this topic-partition.".into(),
            });
        };
        t.partitions.iter().for_each(|p| p.mark_deleted(true));
        let info = match self.catalog.begin_delete(name) {
            Ok(info) => info,
            Err(e) => {
                t.partitions.iter().for_each(|p| p.mark_deleted(false));
                return Err(e);
            }
        };
        topics.remove(name);
        drop(topics);
        let fs = self.disk();
        let mut moved = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let to = trash_name(&p.dir);
            match fs.rename(&p.dir, &to) {
                Ok(()) => moved.push(to),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    // Committed all the same: a topic created again with this
                    // name must not find the directory, and the next start
                    // removes it as one no topic owns.
                    tracing::warn!(dir = %p.dir.display(), error = %e, "cannot rename a deleted partition directory aside; removing it");
                    super::service::remove_partition_dir(&*fs, &p.dir);
                }
            }
        }
        Ok((info, moved))
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

    fn cfg(pairs: &[(&str, Option<&str>)]) -> Result<TopicConfig, Invalid> {
        parse_configs(&pairs.iter().map(|(k, v)| (k.to_string(), v.map(str::to_string))).collect::<Vec<_>>())
    }

    #[test]
    fn supported_topic_configs_parse_and_others_are_refused() {
        let c = cfg(&[
            ("retention.ms", Some("1000")),
            ("retention.bytes", Some("-1")),
            ("segment.bytes", Some("4096")),
            ("segment.ms", Some("60000")),
        ])
        .unwrap();
        let want = TopicConfig {
            retention_ms: Some(1000),
            retention_bytes: Some(-1),
            segment_bytes: Some(4096),
            segment_ms: Some(60_000),
        };
        assert_eq!(c, want);
        assert_eq!(cfg(&[("segment.ms", Some("0"))]).unwrap_err().0, ErrorCode::INVALID_CONFIG);
        assert!(cfg(&[("cleanup.policy", Some("delete"))]).is_ok());
        assert_eq!(cfg(&[("cleanup.policy", Some("compact"))]).unwrap_err().0, ErrorCode::INVALID_CONFIG);
        assert_eq!(cfg(&[("retention.ms", Some("-2"))]).unwrap_err().0, ErrorCode::INVALID_CONFIG);
        assert_eq!(cfg(&[("retention.ms", Some("soon"))]).unwrap_err().0, ErrorCode::INVALID_CONFIG);
        assert_eq!(cfg(&[("segment.bytes", Some("10"))]).unwrap_err().0, ErrorCode::INVALID_CONFIG);
        assert_eq!(cfg(&[("no.such", Some("1"))]).unwrap_err().0, ErrorCode::INVALID_CONFIG);
        assert_eq!(cfg(&[("retention.ms", None)]).unwrap_err().0, ErrorCode::INVALID_REQUEST);
    }

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
