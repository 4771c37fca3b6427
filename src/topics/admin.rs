//! CreateTopics and DeleteTopics, with Kafka's (KRaft controller's)
//! validation and error codes, answered for a one-node cluster.
//!
//! Creation: a topic's partition logs are created before its catalog entry,
//! and the catalog entry and the in-memory map change together, so a topic
//! that Metadata lists always has its logs.
//!
//! Deletion: this module holds the data plane's step of it
//! ([`DataPlane::delete_topic_now`]: partitions marked deleted, the catalog
//! entry moved to the catalog's *being deleted* list, directories renamed
//! aside) and DeleteTopics' request and answer types; the whole deletion,
//! which also tombstones every group's committed offsets for the topic, is
//! `crate::topic_deletion`, above both the data plane and the coordinator.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use uuid::Uuid;

use super::limits::{records_for_topic, EXCESSIVE_BATCH_MESSAGE, MAX_RECORDS_PER_USER_OP};
use super::service::{trash_name, DataPlane, TopicLogs};
use crate::catalog::{Catalog, CatalogError, TopicConfig, TopicInfo, MAX_PARTITIONS};
use crate::error_code::ErrorCode;

/// Kafka's defaults for the topic configs kcoord supports, to tell a
/// default (source DEFAULT_CONFIG) from a daemon setting (STATIC_BROKER_CONFIG).
const KAFKA_RETENTION_MS: i64 = 604_800_000;
const KAFKA_RETENTION_BYTES: i64 = -1;
const KAFKA_SEGMENT_BYTES: u64 = 1_073_741_824;
const KAFKA_SEGMENT_MS: i64 = 604_800_000;
/// kcoord's smallest segment (the storage engine's limit on `topics.segment_bytes`).
const MIN_SEGMENT_BYTES: i64 = 1024;

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
    pub fn error(name: Option<String>, id: Uuid, error: ErrorCode, message: &str) -> Self {
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
        let remove_dirs = || super::service::discard_partition_dirs(&*fs, &dirs);
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

    /// Removes the partition directories [`DataPlane::delete_topic_now`]
    /// renamed aside (a warning for any that cannot go: the next start
    /// removes it).
    pub async fn remove_renamed_aside(&self, dirs: Vec<PathBuf>) {
        let fs = self.disk();
        let _ = tokio::task::spawn_blocking(move || {
            for dir in dirs {
                super::service::remove_partition_dir(&*fs, &dir);
            }
        })
        .await;
    }

    /// The catalog whose topics this data plane stores.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Wakes the background task that finishes deletions
    /// (`topic_deletion::finish_deletions`): a DeleteTopics left one.
    pub fn wake_deletion_finisher(&self) {
        self.deletions.notify_one();
    }

    /// Returns when [`DataPlane::wake_deletion_finisher`] was called.
    pub async fn deletion_left_unfinished(&self) {
        self.deletions.notified().await;
    }

    /// Follows shutdown: the value turns true when the data plane closes.
    pub fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.subscribe()
    }
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
}
