//! The data plane of standalone mode: every partition log of every catalog
//! topic, opened at start-up, plus the background work they need (retention,
//! interval fsync) and an orderly shutdown.
//!
//! The catalog says which topics exist (Metadata, the coordinator and this
//! service all read it); this service owns their data. Topic creation and
//! deletion change both under one lock, with the catalog change and the
//! in-memory map change made together, so a Produce or Fetch never finds a
//! topic in one and not the other.
//!
//! On disk: `data_dir/topics/<topic>-<partition>/` per partition (segment
//! files of the shared storage engine) and `data_dir/topics/producer-ids.json`.
//! Every file operation goes through the partition logs' [`Disk`], so the
//! crash campaigns run all of it on the simulated disk.
//!
//! Topic deletion, as Kafka's: the deletion is committed when the catalog
//! records it (one atomic write; DeleteTopics answers after it), and the
//! partition directories are removed after: renamed aside with the
//! `DELETE_SUFFIX`, then removed. A crash before the catalog write leaves
//! the topic fully present, its data untouched; a crash after it finishes
//! the deletion at the next start, where directories renamed aside and
//! partition directories no catalog topic owns are removed, so a deleted
//! topic never comes back and its data is never served again (also not to a
//! topic created again with its name).
//!
//! A creation that fails after its partition directories exist (the catalog
//! write failed, whose outcome a crash may still decide either way) discards
//! them the same way, but with the renames made durable before anything is
//! removed ([`discard_partition_dirs`]): a directory removed in place can be
//! cut by a crash between its files, and a topic the catalog kept would then
//! not open.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::Duration;

use tokio::sync::{watch, Notify, Semaphore};
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::durability::FatalSender;
use super::limits::TopicLimits;
use super::partition::Partition;
use super::producer_ids::ProducerIdAllocator;
use super::retention::RetentionPolicy;
use crate::catalog::{Catalog, CatalogError, TopicConfig, TopicCreator, TopicInfo};
use crate::config::{Config, FsyncPolicy};
use crate::storage::disk::{Disk, FileSystem};
use crate::storage::{fsutil, FileCache, LogOptions};
use crate::wall_clock::wall_clock_ms;

/// Fetches that may be parked waiting for data at once; beyond this a Fetch
/// is answered with what there is (bounded memory and timers).
pub const MAX_PARKED_FETCHES: usize = 4096;

/// Suffix of a partition directory being deleted.
const DELETE_SUFFIX: &str = "-delete";

/// What the data plane needs from the configuration.
#[derive(Debug, Clone)]
pub struct DataPlaneSettings {
    /// `data_dir/topics`.
    pub root: PathBuf,
    pub fsync: FsyncPolicy,
    pub fsync_interval: Duration,
    /// `topics.retention_ms` / `topics.retention_bytes`.
    pub retention: RetentionPolicy,
    /// `topics.segment_bytes`.
    pub segment_bytes: u64,
    /// `topics.segment_ms`.
    pub segment_ms: i64,
    pub retention_check_interval: Duration,
    pub node_id: i32,
    pub default_partitions: i32,
    /// Truncate corrupt partition logs instead of refusing to start.
    pub repair: bool,
    /// Decompressed bytes one Produce request may make kcoord read to check
    /// its compressed batches: `server.max_request_bytes`, what the request
    /// could have carried uncompressed.
    pub decompress_budget: usize,
    /// The open segment files every partition log shares (bounded).
    pub files: Arc<FileCache>,
    /// `topics.max_topics` / `topics.max_partitions`.
    pub max_topics: u32,
    pub max_partitions: u32,
}

impl DataPlaneSettings {
    /// `files` is the partition logs' segment-file cache, sized by the
    /// start-up check of the open-file limit (`descriptors`).
    pub fn from_config(config: &Config, repair: bool, files: Arc<FileCache>) -> Self {
        DataPlaneSettings {
            root: config.storage.data_dir.join("topics"),
            fsync: config.storage.fsync,
            fsync_interval: Duration::from_millis(config.storage.fsync_interval_ms.max(1)),
            retention: RetentionPolicy {
                retention_ms: config.topics.retention_ms,
                retention_bytes: config.topics.retention_bytes,
            },
            segment_bytes: config.topics.segment_bytes,
            segment_ms: config.topics.segment_ms,
            retention_check_interval: Duration::from_millis(config.topics.retention_check_interval_ms.max(1)),
            node_id: config.server.node_id,
            default_partitions: config.topics.default_partitions,
            repair,
            decompress_budget: config.server.max_request_bytes as usize,
            files,
            max_topics: config.topics.max_topics,
            max_partitions: config.topics.max_partitions,
        }
    }
}

/// The open partitions of one topic.
#[derive(Debug)]
pub struct TopicLogs {
    pub info: TopicInfo,
    pub partitions: Vec<Arc<Partition>>,
}

impl TopicLogs {
    pub fn partition(&self, index: i32) -> Option<&Arc<Partition>> {
        usize::try_from(index).ok().and_then(|i| self.partitions.get(i))
    }
}

/// Why the data plane could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenError {
    pub topic: String,
    pub message: String,
}

/// The standalone data plane. See the module docs.
pub struct DataPlane {
    pub(super) settings: DataPlaneSettings,
    pub(super) catalog: Arc<Catalog>,
    pub(super) topics: RwLock<HashMap<String, Arc<TopicLogs>>>,
    /// Serialises topic creation and deletion.
    admin: Mutex<()>,
    /// Topic and partition totals, checked under `admin`.
    pub(super) limits: TopicLimits,
    pub(super) producer_ids: ProducerIdAllocator,
    pub(super) fatal: FatalSender,
    pub(super) closing: watch::Sender<bool>,
    pub(super) parked: Semaphore,
    /// Woken when a DeleteTopics leaves a deletion for the background.
    pub(super) deletions: Notify,
    background: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for DataPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataPlane").field("root", &self.settings.root).finish_non_exhaustive()
    }
}

pub(super) fn partition_dir(root: &Path, topic: &str, partition: i32) -> PathBuf {
    root.join(format!("{topic}-{partition}"))
}

impl DataPlane {
    /// Opens every partition log of every catalog topic (creating missing
    /// ones), removes directories left by interrupted deletions, and starts
    /// the background tasks.
    pub async fn open(
        settings: DataPlaneSettings,
        catalog: Arc<Catalog>,
        fatal: FatalSender,
    ) -> Result<Arc<DataPlane>, OpenError> {
        let s = settings.clone();
        let c = catalog.clone();
        let (topics, producer_ids) = tokio::task::spawn_blocking(move || open_all(&s, &c)).await.map_err(|e| {
            OpenError { topic: String::new(), message: format!("opening partition logs panicked: {e}") }
        })??;
        let (closing, _) = watch::channel(false);
        let limits = TopicLimits::new(settings.max_topics, settings.max_partitions);
        let plane = Arc::new(DataPlane {
            limits,
            settings,
            catalog,
            topics: RwLock::new(topics),
            admin: Mutex::new(()),
            producer_ids,
            fatal,
            closing,
            parked: Semaphore::new(MAX_PARKED_FETCHES),
            deletions: Notify::new(),
            background: Mutex::new(Vec::new()),
        });
        plane.start_background();
        Ok(plane)
    }

    pub(super) fn admin_lock(&self) -> MutexGuard<'_, ()> {
        self.admin.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn read_topics(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<TopicLogs>>> {
        self.topics.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn write_topics(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<TopicLogs>>> {
        self.topics.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The open topic called `name`.
    pub fn topic(&self, name: &str) -> Option<Arc<TopicLogs>> {
        self.read_topics().get(name).cloned()
    }

    /// The open topic with id `id`.
    pub fn topic_by_id(&self, id: &Uuid) -> Option<Arc<TopicLogs>> {
        let name = self.catalog.get_by_id(id)?.name;
        self.topic(&name).filter(|t| t.info.id == *id)
    }

    /// Every open partition.
    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.read_topics().values().flat_map(|t| t.partitions.iter().cloned()).collect()
    }

    /// The retention settings of a topic: its overrides, else the defaults.
    pub(super) fn policy(&self, config: &TopicConfig) -> RetentionPolicy {
        RetentionPolicy {
            retention_ms: config.retention_ms.unwrap_or(self.settings.retention.retention_ms),
            retention_bytes: config.retention_bytes.unwrap_or(self.settings.retention.retention_bytes),
        }
    }

    pub(super) fn is_closing(&self) -> bool {
        *self.closing.borrow()
    }

    fn start_background(self: &Arc<Self>) {
        let mut tasks = Vec::new();
        let weak = Arc::downgrade(self);
        let every = self.settings.retention_check_interval;
        tasks.push(tokio::spawn(periodically(weak.clone(), every, |plane| async move {
            let now = wall_clock_ms();
            let _ = tokio::task::spawn_blocking(move || plane.retention_pass(now)).await;
        })));
        if self.settings.fsync == FsyncPolicy::Interval {
            let every = self.settings.fsync_interval;
            tasks.push(tokio::spawn(periodically(weak, every, |plane| async move {
                for p in plane.all_partitions() {
                    p.start_sync(&plane.fatal);
                }
            })));
        }
        *self.background.lock().unwrap_or_else(|p| p.into_inner()) = tasks;
    }

    /// One retention round over every partition (blocking: deletes files).
    pub fn retention_pass(&self, now_ms: i64) -> usize {
        let topics: Vec<Arc<TopicLogs>> = self.read_topics().values().cloned().collect();
        let mut deleted = 0;
        for t in topics {
            let policy = self.policy(&t.info.config);
            for p in &t.partitions {
                deleted += p.apply_retention(policy, now_ms);
            }
        }
        deleted
    }

    /// First step of shutdown: parked fetches answer now; nothing new parks.
    pub fn begin_shutdown(&self) {
        self.closing.send_replace(true);
        for p in self.all_partitions() {
            p.data.notify_waiters();
        }
    }

    /// Last step of shutdown, once connections are drained: stops the
    /// background tasks and fsyncs every partition log.
    pub async fn close(&self) {
        self.begin_shutdown();
        for task in self.background.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            task.abort();
        }
        let partitions = self.all_partitions();
        let _ = tokio::task::spawn_blocking(move || partitions.iter().for_each(|p| p.sync_now())).await;
    }

    /// Opens (creating) the logs of partitions `0..count` of a topic.
    pub(super) fn open_partitions(&self, info: &TopicInfo, fresh: bool) -> Result<Vec<Arc<Partition>>, String> {
        open_partitions(&self.settings, info, 0, fresh)
    }

    /// The file system the partition directories are on.
    pub(super) fn disk(&self) -> Disk {
        self.settings.files.disk()
    }

    /// Opens (creating) the logs of partitions `from..count` of a topic:
    /// the partitions CreatePartitions adds.
    pub(super) fn open_partitions_from(
        &self,
        info: &TopicInfo,
        from: i32,
        fresh: bool,
    ) -> Result<Vec<Arc<Partition>>, String> {
        open_partitions(&self.settings, info, from, fresh)
    }
}

/// Runs `f` every `every` until the data plane is gone or closing.
async fn periodically<F, Fut>(plane: Weak<DataPlane>, every: Duration, f: F)
where
    F: Fn(Arc<DataPlane>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let Some(plane) = plane.upgrade() else { return };
        if plane.is_closing() {
            return;
        }
        f(plane).await;
    }
}

fn open_partitions(
    settings: &DataPlaneSettings,
    info: &TopicInfo,
    from: i32,
    fresh: bool,
) -> Result<Vec<Arc<Partition>>, String> {
    let options = LogOptions {
        segment_bytes: info.config.segment_bytes.unwrap_or(settings.segment_bytes),
        repair: settings.repair,
        files: Some(Arc::clone(&settings.files)),
        fs: settings.files.disk(),
        journaled: false,
        batched_writes: false,
    };
    let segment_ms = info.config.segment_ms.unwrap_or(settings.segment_ms);
    let now = wall_clock_ms();
    let fs = settings.files.disk();
    let mut out = Vec::with_capacity(usize::try_from(info.partitions - from).unwrap_or(0));
    for p in from.max(0)..info.partitions {
        let dir = partition_dir(&settings.root, &info.name, p);
        if fresh && fs.is_dir(&dir) {
            // Left by something else (never by us: deletion renames first).
            // A new topic must not inherit it; keep it aside for the operator.
            let stray = dir.with_file_name(format!("{}-{p}.{}-stray", info.name, Uuid::new_v4().simple()));
            tracing::warn!(dir = %dir.display(), moved_to = %stray.display(), "a new topic's partition directory already existed");
            fs.rename(&dir, &stray).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        out.push(Arc::new(Partition::open(&info.name, p, &dir, options.clone(), settings.fsync, segment_ms, now)?));
    }
    Ok(out)
}

type Opened = (HashMap<String, Arc<TopicLogs>>, ProducerIdAllocator);

fn open_all(settings: &DataPlaneSettings, catalog: &Catalog) -> Result<Opened, OpenError> {
    let root = &settings.root;
    let err = |topic: &str, message: String| OpenError { topic: topic.to_string(), message };
    let fs = settings.files.disk();
    fsutil::create_dir_all_durably_on(&*fs, root).map_err(|e| err("", format!("{}: {e}", root.display())))?;
    remove_deleted_dirs(&*fs, root);
    remove_orphan_dirs(&*fs, root, &catalog.list());
    let mut topics = HashMap::new();
    let mut max_pid = -1i64;
    for info in catalog.list() {
        let partitions = open_partitions(settings, &info, 0, false).map_err(|m| err(&info.name, m))?;
        for p in &partitions {
            max_pid = max_pid.max(p.max_producer_id().unwrap_or(-1));
        }
        topics.insert(info.name.clone(), Arc::new(TopicLogs { info, partitions }));
    }
    let ids = ProducerIdAllocator::open(root, max_pid.saturating_add(1))
        .map_err(|e| err("", format!("producer ids: {e}")))?;
    Ok((topics, ids))
}

/// Finishes deletions a crash interrupted: directories renamed with the
/// delete suffix hold data of topics already gone (renamed only once the
/// catalog recorded the deletion).
fn remove_deleted_dirs(fs: &dyn FileSystem, root: &Path) {
    let Ok(entries) = fs.list(root) else { return };
    for name in entries {
        let path = root.join(&name);
        if name.to_str().is_some_and(|n| n.ends_with(DELETE_SUFFIX)) && fs.is_dir(&path) {
            remove_partition_dir(fs, &path);
        }
    }
}

/// Discards the partition directories of a creation (of a topic or of
/// partitions) that failed. Removing one in place could be cut by a crash
/// between its files (the segment gone, its manifest kept), and a catalog
/// write that failed may still have recorded the topic, whose next start
/// would then refuse the half-removed log as damaged. So each is renamed
/// aside first, as a deletion renames them, the renames are made durable,
/// and only then are the directories removed. A crash before that leaves
/// them whole (an empty partition, or one the next start removes as no
/// topic's); after it, directories the next start removes. If the renames
/// cannot be made durable, nothing is removed: the next start does it.
pub(super) fn discard_partition_dirs(fs: &dyn FileSystem, dirs: &[PathBuf]) {
    let mut aside = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let to = trash_name(dir);
        match fs.rename(dir, &to) {
            Ok(()) => aside.push(to),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot set aside the directory of a partition whose creation failed; the next start removes it if no topic owns it")
            }
        }
    }
    let parents: std::collections::BTreeSet<&Path> = aside.iter().filter_map(|d| d.parent()).collect();
    for parent in parents {
        if let Err(e) = fs.sync_dir(parent) {
            tracing::warn!(dir = %parent.display(), error = %e, "cannot fsync the topics directory; the next start removes the partition directories set aside");
            return;
        }
    }
    aside.iter().for_each(|d| remove_partition_dir(fs, d));
}

/// Removes a deleted partition directory (a warning if it cannot: the
/// next start retries).
pub(super) fn remove_partition_dir(fs: &dyn FileSystem, dir: &Path) {
    if let Err(e) = fs.remove_dir_all(dir) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a deleted partition directory");
    }
}

/// Removes partition directories (`<topic>-<partition>`) that no catalog
/// topic owns. A topic's logs are created before the catalog records it, so
/// a crash in between (SIGKILL during auto-creation) leaves them behind;
/// nothing in them was ever acknowledged, since Produce only reaches topics
/// the catalog lists. Each removal is logged. Directories whose names are
/// not partition names (`*-stray`, set aside for the operator) are left.
/// A topic whose deletion the catalog recorded before a crash could rename
/// its directories aside leaves them too: they are removed the same way.
fn remove_orphan_dirs(fs: &dyn FileSystem, root: &Path, known: &[TopicInfo]) {
    let Ok(entries) = fs.list(root) else { return };
    let partitions: HashMap<&str, i32> = known.iter().map(|t| (t.name.as_str(), t.partitions)).collect();
    let mut removed = false;
    for name in entries {
        let path = root.join(&name);
        let Some(name) = name.to_str() else { continue };
        let Some((topic, p)) = name.rsplit_once('-') else { continue };
        let Ok(p) = p.parse::<i32>() else { continue };
        let is_partition = p >= 0 && crate::config::validate_topic_name(topic).is_ok() && fs.is_dir(&path);
        if !is_partition || partitions.get(topic).is_some_and(|n| p < *n) {
            continue;
        }
        match fs.remove_dir_all(&path) {
            Ok(()) => {
                removed = true;
                tracing::warn!(dir = %path.display(), "removed a partition directory no topic owns (left by an interrupted topic creation)");
            }
            Err(e) => {
                tracing::error!(dir = %path.display(), error = %e, "cannot remove a partition directory no topic owns")
            }
        }
    }
    if removed {
        if let Err(e) = fs.sync_dir(root) {
            tracing::warn!(dir = %root.display(), error = %e, "cannot fsync the topics directory");
        }
    }
}

/// A name for a partition directory being deleted (unique, so a topic
/// deleted and re-created twice never collides).
pub(super) fn trash_name(dir: &Path) -> PathBuf {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("partition");
    dir.with_file_name(format!("{name}.{}{DELETE_SUFFIX}", Uuid::new_v4().simple()))
}

impl TopicCreator for DataPlane {
    /// Metadata auto-creation: the catalog entry and the partition logs.
    fn create_topic(&self, name: &str, partitions: i32) -> Result<TopicInfo, CatalogError> {
        self.create_topic_now(name, partitions, TopicConfig::default(), false)
    }
}
