//! The topic catalog: names, ids and partition counts, persisted in the data dir.
//!
//! A ground-floor module: the coordinator checks commits against it, the
//! data plane (`topics`) opens a log per partition it lists, and the sidecar
//! keeps it as a mirror of the upstream's topics. It depends on neither.
//!
//! Topic ids are generated once and kept forever (clients that fetch by id,
//! e.g. librdkafka with Fetch v13+, reset a partition if its topic id changes).
//! The catalog is a small JSON file rewritten atomically (tmp, fsync, rename,
//! directory fsync) on every change; topic creation and deletion are rare, so
//! a log would buy nothing here.
//!
//! A deleted topic leaves the catalog's list of topics at once (Metadata,
//! Produce, Fetch and OffsetCommit stop seeing it) but stays recorded as
//! *being deleted*, in the same atomic write, until every group's committed
//! offsets for it are tombstoned (`topic_deletion`); until then its name cannot be
//! reused, so the tombstones can never hit offsets of a new topic of the
//! same name, and a crash in between leaves the work recorded for the next
//! start.
//!
//! Each topic also keeps the topic configs given at creation (CreateTopics
//! `retention.ms`, `retention.bytes`, `segment.bytes`, `segment.ms`); only overrides are
//! stored, so a topic without one follows the daemon's `topics.*` defaults.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::validate_topic_name;
use crate::error_code::ErrorCode;
use crate::storage::disk::{self, Disk};
use crate::storage::fsutil;

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    /// Topic config overrides; absent in catalogs written before they existed.
    #[serde(default)]
    pub config: TopicConfig,
}

/// Per-topic overrides of the `topics.*` defaults (Kafka topic configs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfig {
    /// Kafka `retention.ms`; -1 keeps everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<i64>,
    /// Kafka `retention.bytes`; -1 is unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_bytes: Option<i64>,
    /// Kafka `segment.bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_bytes: Option<u64>,
    /// Kafka `segment.ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_ms: Option<i64>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CatalogFile {
    topics: Vec<TopicInfo>,
    /// Deleted topics whose committed offsets may not all be tombstoned yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    deleting: Vec<TopicInfo>,
}

#[derive(Debug, Default)]
struct State {
    by_name: BTreeMap<String, TopicInfo>,
    by_id: HashMap<Uuid, String>,
    deleting: BTreeMap<String, TopicInfo>,
    /// Bumped by every write access, so that views built from the topics
    /// (the consumer groups' topic image) know when to rebuild.
    generation: u64,
}

impl State {
    /// Whether [`Catalog::mirror`] of `topics` would change anything.
    fn mirror_changes(&self, topics: &[(String, Uuid, i32)], complete: bool) -> bool {
        if complete && self.by_name.len() != topics.len() {
            return true;
        }
        topics.iter().any(|(name, id, partitions)| {
            !matches!(self.by_name.get(name), Some(t) if t.id == *id && t.partitions == *partitions)
        })
    }
}

/// Why a topic could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    pub code: ErrorCode,
    pub message: String,
}

impl CatalogError {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CatalogError { code, message: message.into() }
    }
}

/// The set of topics this node leads.
#[derive(Debug)]
pub struct Catalog {
    path: PathBuf,
    /// Where `path` is: the real file system, or a simulated disk in tests.
    fs: Disk,
    state: RwLock<State>,
}

/// The most partitions one topic may have.
pub const MAX_PARTITIONS: i32 = 100_000;

impl Catalog {
    /// Opens (or creates) the catalog file in `data_dir`.
    pub fn open(data_dir: &Path) -> std::io::Result<Catalog> {
        Catalog::open_on(disk::os(), data_dir)
    }

    /// [`Catalog::open`] on the file system `fs`.
    pub fn open_on(fs: Disk, data_dir: &Path) -> std::io::Result<Catalog> {
        let path = data_dir.join("topics.json");
        let mut state = State::default();
        match fs.read(&path) {
            Ok(bytes) => {
                let file: CatalogFile = serde_json::from_slice(&bytes).map_err(|e| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
                })?;
                for t in file.topics {
                    state.by_id.insert(t.id, t.name.clone());
                    state.by_name.insert(t.name.clone(), t);
                }
                for t in file.deleting {
                    state.deleting.insert(t.name.clone(), t);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(Catalog { path, fs, state: RwLock::new(state) })
    }

    /// An in-memory catalog for tests of code that only reads topics.
    pub fn in_memory(topics: &[(&str, i32)]) -> Catalog {
        let mut state = State::default();
        for (name, partitions) in topics {
            let t = TopicInfo {
                name: name.to_string(),
                id: Uuid::new_v4(),
                partitions: *partitions,
                config: TopicConfig::default(),
            };
            state.by_id.insert(t.id, t.name.clone());
            state.by_name.insert(t.name.clone(), t);
        }
        Catalog { path: PathBuf::new(), fs: disk::os(), state: RwLock::new(state) }
    }

    /// Sidecar mode: the catalog mirrors the upstream's topics (in memory).
    /// `complete` replaces every topic (a Metadata answer for all topics);
    /// otherwise the given topics are added or updated.
    pub fn mirror(&self, topics: &[(String, Uuid, i32)], complete: bool) {
        if !self.read().mirror_changes(topics, complete) {
            // Every client Metadata answer lands here: keep the generation.
            return;
        }
        let mut s = self.write();
        if complete {
            s.by_name.clear();
            s.by_id.clear();
        }
        for (name, id, partitions) in topics {
            if let Some(old) = s.by_name.get(name) {
                if old.id == *id && old.partitions == *partitions {
                    continue;
                }
                let old_id = old.id;
                s.by_id.remove(&old_id);
            }
            let t = TopicInfo { name: name.clone(), id: *id, partitions: *partitions, config: TopicConfig::default() };
            if !id.is_nil() {
                s.by_id.insert(*id, name.clone());
            }
            s.by_name.insert(name.clone(), t);
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
        s.generation += 1;
        s
    }

    /// Changes whenever the topics may have: equal generations mean equal
    /// topics.
    pub fn generation(&self) -> u64 {
        self.read().generation
    }

    /// [`Self::list`] with the generation it is the state of.
    pub fn list_at_generation(&self) -> (u64, Vec<TopicInfo>) {
        let s = self.read();
        (s.generation, s.by_name.values().cloned().collect())
    }

    pub fn get(&self, name: &str) -> Option<TopicInfo> {
        self.read().by_name.get(name).cloned()
    }

    pub fn get_by_id(&self, id: &Uuid) -> Option<TopicInfo> {
        let s = self.read();
        s.by_id.get(id).and_then(|n| s.by_name.get(n)).cloned()
    }

    /// The name of the topic with id `id` (the nil id names nothing, even
    /// where a mirrored upstream reports topics without ids).
    pub fn name_of_id(&self, id: &Uuid) -> Option<String> {
        if id.is_nil() {
            return None;
        }
        let s = self.read();
        s.by_id.get(id).filter(|n| s.by_name.contains_key(*n)).cloned()
    }

    /// The id of topic `name`, unless it has none (the nil id of an
    /// upstream without topic ids).
    pub fn id_of(&self, name: &str) -> Option<Uuid> {
        self.read().by_name.get(name).map(|t| t.id).filter(|id| !id.is_nil())
    }

    /// All topics, sorted by name.
    pub fn list(&self) -> Vec<TopicInfo> {
        self.read().by_name.values().cloned().collect()
    }

    /// Topics and partitions held (topics being deleted not counted).
    pub fn totals(&self) -> (u64, u64) {
        let s = self.read();
        let partitions = s.by_name.values().map(|t| u64::try_from(t.partitions.max(0)).unwrap_or(0)).sum();
        (s.by_name.len() as u64, partitions)
    }

    /// Number of partitions of `name`, if it exists.
    pub fn partitions(&self, name: &str) -> Option<i32> {
        self.read().by_name.get(name).map(|t| t.partitions)
    }

    /// Creates a topic with the default config. `validate_only` checks
    /// without creating.
    pub fn create(&self, name: &str, partitions: i32, validate_only: bool) -> Result<TopicInfo, CatalogError> {
        self.create_with(name, partitions, TopicConfig::default(), validate_only)
    }

    /// Creates a topic with config overrides. `validate_only` checks without
    /// creating.
    pub fn create_with(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
        validate_only: bool,
    ) -> Result<TopicInfo, CatalogError> {
        validate_topic_name(name).map_err(|m| CatalogError::new(ErrorCode::INVALID_TOPIC_EXCEPTION, m))?;
        if partitions < 1 {
            return Err(CatalogError::new(
                ErrorCode::INVALID_PARTITIONS,
                "Number of partitions must be larger than 0.",
            ));
        }
        if partitions > MAX_PARTITIONS {
            return Err(CatalogError::new(
                ErrorCode::INVALID_PARTITIONS,
                format!("Number of partitions must be at most {MAX_PARTITIONS}."),
            ));
        }
        let mut s = self.write();
        if s.by_name.contains_key(name) {
            return Err(CatalogError::new(ErrorCode::TOPIC_ALREADY_EXISTS, format!("Topic '{name}' already exists.")));
        }
        if s.deleting.contains_key(name) {
            // Kafka's answer while a deletion is still in progress.
            return Err(CatalogError::new(
                ErrorCode::TOPIC_ALREADY_EXISTS,
                format!("Topic '{name}' is marked for deletion."),
            ));
        }
        if let Some(existing) = s.by_name.keys().find(|n| collides(n, name)) {
            return Err(CatalogError::new(
                ErrorCode::INVALID_TOPIC_EXCEPTION,
                format!("Topic '{name}' collides with existing topic: {existing}"),
            ));
        }
        let info = TopicInfo { name: name.to_string(), id: Uuid::new_v4(), partitions, config };
        if validate_only {
            return Ok(info);
        }
        s.by_id.insert(info.id, info.name.clone());
        s.by_name.insert(info.name.clone(), info.clone());
        if let Err(e) = self.persist(&s) {
            s.by_name.remove(name);
            s.by_id.remove(&info.id);
            return Err(CatalogError::new(ErrorCode::KAFKA_STORAGE_ERROR, format!("cannot persist catalog: {e}")));
        }
        Ok(info)
    }

    /// Makes sure a configured topic exists with at least `partitions`
    /// partitions (partition counts only ever grow, as in Kafka).
    pub fn ensure(&self, name: &str, partitions: i32) -> Result<TopicInfo, CatalogError> {
        {
            let mut s = self.write();
            if let Some(existing) = s.by_name.get(name).cloned() {
                if existing.partitions >= partitions {
                    return Ok(existing);
                }
                let grown = TopicInfo { partitions, ..existing.clone() };
                s.by_name.insert(name.to_string(), grown.clone());
                if let Err(e) = self.persist(&s) {
                    s.by_name.insert(name.to_string(), existing);
                    return Err(CatalogError::new(ErrorCode::KAFKA_STORAGE_ERROR, e.to_string()));
                }
                return Ok(grown);
            }
        }
        self.create(name, partitions, false)
    }

    /// Grows an existing topic to `partitions` partitions (CreatePartitions);
    /// the caller has checked that this is an increase. Persisted before it
    /// returns; on a failed write nothing changes.
    pub fn grow(&self, name: &str, partitions: i32) -> Result<TopicInfo, CatalogError> {
        let mut s = self.write();
        let Some(existing) = s.by_name.get(name).cloned() else {
            return Err(CatalogError::new(
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            ));
        };
        let grown = TopicInfo { partitions: partitions.max(existing.partitions), ..existing.clone() };
        s.by_name.insert(name.to_string(), grown.clone());
        if let Err(e) = self.persist(&s) {
            s.by_name.insert(name.to_string(), existing);
            return Err(CatalogError::new(ErrorCode::KAFKA_STORAGE_ERROR, format!("cannot persist catalog: {e}")));
        }
        Ok(grown)
    }

    /// Removes a topic and records it as being deleted, in one atomic
    /// write; returns it. [`Catalog::finish_delete`] ends the deletion.
    pub fn begin_delete(&self, name: &str) -> Result<TopicInfo, CatalogError> {
        let mut s = self.write();
        let info = s.by_name.remove(name).ok_or_else(|| {
            CatalogError::new(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        })?;
        s.by_id.remove(&info.id);
        s.deleting.insert(info.name.clone(), info.clone());
        if let Err(e) = self.persist(&s) {
            s.deleting.remove(name);
            s.by_id.insert(info.id, info.name.clone());
            s.by_name.insert(info.name.clone(), info);
            return Err(CatalogError::new(ErrorCode::KAFKA_STORAGE_ERROR, e.to_string()));
        }
        Ok(info)
    }

    /// Forgets a deleted topic once its committed offsets are tombstoned,
    /// freeing its name. Finishing an unknown deletion does nothing.
    pub fn finish_delete(&self, name: &str) -> std::io::Result<()> {
        let mut s = self.write();
        let Some(info) = s.deleting.remove(name) else { return Ok(()) };
        if let Err(e) = self.persist(&s) {
            s.deleting.insert(info.name.clone(), info);
            return Err(e);
        }
        Ok(())
    }

    /// Deleted topics whose offsets may still need tombstones, by name.
    pub fn deleting(&self) -> Vec<TopicInfo> {
        self.read().deleting.values().cloned().collect()
    }

    /// Whether `name` is a deleted topic whose deletion is not finished.
    pub fn is_deleting(&self, name: &str) -> bool {
        self.read().deleting.contains_key(name)
    }

    fn persist(&self, s: &State) -> std::io::Result<()> {
        if self.path.as_os_str().is_empty() {
            return Ok(());
        }
        let file = CatalogFile {
            topics: s.by_name.values().cloned().collect(),
            deleting: s.deleting.values().cloned().collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        fsutil::write_atomically_on(&*self.fs, &self.path, &bytes)
    }
}

/// Creates topics on behalf of Metadata auto-creation (implemented by the
/// data plane, which also creates the partition logs).
pub trait TopicCreator: Send + Sync {
    fn create_topic(&self, name: &str, partitions: i32) -> Result<TopicInfo, CatalogError>;
}

/// Sidecar mode: topics are the upstream's, never created here.
pub struct NoTopicCreation;

impl TopicCreator for NoTopicCreation {
    fn create_topic(&self, name: &str, _: i32) -> Result<TopicInfo, CatalogError> {
        Err(CatalogError {
            code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            message: format!("topic {name} is not created by a sidecar"),
        })
    }
}

/// Kafka refuses topics whose names differ only by '.' vs '_' (they collide
/// in metric names).
fn collides(a: &str, b: &str) -> bool {
    a != b && a.replace('.', "_") == b.replace('.', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generation_moves_when_topics_change_and_only_then_for_a_mirror() {
        let c = Catalog::in_memory(&[]);
        let id = Uuid::new_v4();
        let g0 = c.generation();
        c.mirror(&[("t".into(), id, 3)], true);
        let g1 = c.generation();
        assert_ne!(g1, g0);
        // The same listing again (every client Metadata answer) changes nothing.
        c.mirror(&[("t".into(), id, 3)], true);
        c.mirror(&[("t".into(), id, 3)], false);
        assert_eq!(c.generation(), g1);
        c.mirror(&[("t".into(), id, 4)], false);
        let g2 = c.generation();
        assert_ne!(g2, g1);
        c.mirror(&[], true);
        assert_ne!(c.generation(), g2, "a complete listing without t drops it");
        assert_eq!(c.list_at_generation(), (c.generation(), vec![]));
    }

    #[test]
    fn topics_and_ids_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let c = Catalog::open(dir.path()).unwrap();
        let t = c.create("orders", 6, false).unwrap();
        drop(c);
        let c = Catalog::open(dir.path()).unwrap();
        assert_eq!(c.get("orders").unwrap(), t);
        assert_eq!(c.get_by_id(&t.id).unwrap().name, "orders");
        assert_ne!(t.id, Uuid::nil());
    }

    #[test]
    fn duplicate_and_invalid_topics_get_kafkas_errors() {
        let c = Catalog::in_memory(&[]);
        c.create("a.b", 1, false).unwrap();
        assert_eq!(c.create("a.b", 1, false).unwrap_err().code, ErrorCode::TOPIC_ALREADY_EXISTS);
        assert_eq!(c.create("a_b", 1, false).unwrap_err().code, ErrorCode::INVALID_TOPIC_EXCEPTION);
        assert_eq!(c.create("x", 0, false).unwrap_err().code, ErrorCode::INVALID_PARTITIONS);
        assert_eq!(c.create("bad/name", 1, false).unwrap_err().code, ErrorCode::INVALID_TOPIC_EXCEPTION);
        assert!(c.create("v", 1, true).is_ok());
        assert!(c.get("v").is_none());
    }

    #[test]
    fn catalogs_without_configs_still_load_and_configs_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let old = r#"{"topics":[{"name":"a","id":"0b6c9fd3-3c0a-4cde-9c8c-0e6a2f2d6a11","partitions":2}]}"#;
        std::fs::write(dir.path().join("topics.json"), old).unwrap();
        let c = Catalog::open(dir.path()).unwrap();
        assert_eq!(c.get("a").unwrap().config, TopicConfig::default());
        let config = TopicConfig {
            retention_ms: Some(5),
            segment_bytes: Some(2048),
            segment_ms: Some(60_000),
            ..Default::default()
        };
        c.create_with("b", 1, config.clone(), false).unwrap();
        drop(c);
        assert_eq!(Catalog::open(dir.path()).unwrap().get("b").unwrap().config, config);
    }

    #[test]
    fn a_topic_being_deleted_is_gone_but_its_name_is_reserved_until_finished_also_after_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let c = Catalog::open(dir.path()).unwrap();
        let t = c.create("t", 2, false).unwrap();
        assert_eq!(c.begin_delete("t").unwrap(), t);
        assert_eq!((c.get("t"), c.get_by_id(&t.id), c.partitions("t")), (None, None, None));
        assert!(c.list().is_empty());
        drop(c);
        let c = Catalog::open(dir.path()).unwrap();
        assert_eq!(c.deleting(), vec![t]);
        let err = c.create("t", 1, false).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (ErrorCode::TOPIC_ALREADY_EXISTS, "Topic 't' is marked for deletion.")
        );
        c.finish_delete("t").unwrap();
        drop(c);
        let c = Catalog::open(dir.path()).unwrap();
        assert!(c.deleting().is_empty());
        c.create("t", 1, false).unwrap();
        assert_eq!(c.begin_delete("nope").unwrap_err().code, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    }

    #[test]
    fn ensure_only_grows_partition_counts() {
        let c = Catalog::in_memory(&[("t", 4)]);
        assert_eq!(c.ensure("t", 2).unwrap().partitions, 4);
        assert_eq!(c.ensure("t", 8).unwrap().partitions, 8);
        assert_eq!(c.ensure("n", 3).unwrap().partitions, 3);
    }
}
