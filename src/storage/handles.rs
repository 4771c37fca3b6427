//! A bounded cache of open segment files.
//!
//! Why: a partition log used to hold every one of its segment files open for
//! the daemon's lifetime, so the number of descriptors grew with the number
//! of partitions; past the process's RLIMIT_NOFILE, segment rolls, new
//! connections and even the next start-up failed with EMFILE. Logs opened
//! with a [`FileCache`] instead hold only a [`FileRef`] per segment (its path
//! and a key) and ask the cache for the file when they read, write or fsync
//! it. The cache keeps at most `capacity` files open and closes the least
//! recently used one when it needs a slot, so an idle partition costs no
//! descriptor at all.
//!
//! A file handed out stays open for as long as its caller holds the
//! `Arc<File>` (a fetch copying bytes, a group-commit fsync in flight), even
//! if the cache has dropped it meanwhile: the descriptors in use are the
//! cache's capacity plus the operations in flight, both bounded.
//!
//! fsyncing through a descriptor other than the one that wrote is sound on
//! Linux: `fsync`/`fdatasync` flush the inode's dirty pages whoever wrote
//! them, and since Linux 4.13 a write-back error that no descriptor has
//! reported yet is reported to a descriptor opened after it.
//!
//! Logs opened without a cache (the coordinator's shard logs, a fixed number)
//! keep their files open, as before ([`FileRef::Pinned`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::disk::{self, Disk, FileHandle, OpenMode};
use crate::observability::rate_log::RateLimitedLog;

/// The smallest capacity a cache accepts: below it, a few concurrent appends
/// and fsyncs would evict each other's files on every operation.
pub const MIN_CAPACITY: usize = 8;

/// Whether an error is "out of file descriptors", for the process (EMFILE)
/// or the whole system (ENFILE).
pub fn is_descriptor_exhaustion(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// Opens files for segments on demand and keeps at most `capacity` of them
/// open, least recently used first out. See the module docs.
#[derive(Debug)]
pub struct FileCache {
    capacity: usize,
    /// Where the files are.
    fs: Disk,
    state: Mutex<State>,
    /// Descriptor failures, logged at most once a second.
    exhausted: Mutex<RateLimitedLog>,
}

#[derive(Debug, Default)]
struct State {
    /// Keys of segments that exist; a file asked for by a key not in it (a
    /// segment deleted while a job still referred to it) is opened without
    /// being cached, so that a dead key never holds a slot.
    live: HashSet<u64>,
    next_key: u64,
    open: HashMap<u64, Cached>,
    /// Last use → key, oldest first.
    order: BTreeMap<u64, u64>,
    tick: u64,
}

#[derive(Debug)]
struct Cached {
    file: FileHandle,
    used: u64,
}

impl FileCache {
    /// A cache keeping at most `capacity` files open (at least [`MIN_CAPACITY`]).
    pub fn new(capacity: usize) -> Arc<FileCache> {
        FileCache::on(disk::os(), capacity)
    }

    /// [`FileCache::new`] for files on `fs`.
    pub fn on(fs: Disk, capacity: usize) -> Arc<FileCache> {
        Arc::new(FileCache {
            capacity: capacity.max(MIN_CAPACITY),
            fs,
            state: Mutex::new(State::default()),
            exhausted: Mutex::new(RateLimitedLog::new(Duration::from_secs(1))),
        })
    }

    /// The file system its files are on.
    pub fn disk(&self) -> Disk {
        Arc::clone(&self.fs)
    }

    /// Files this cache keeps open at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Files it holds open now (not counting those only callers still hold).
    pub fn open_files(&self) -> usize {
        self.lock().open.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a segment file that was just opened (or created) by its
    /// owner, and caches the open file. Returns its reference.
    pub fn adopt(self: &Arc<Self>, path: PathBuf, file: FileHandle) -> (FileRef, FileHandle) {
        let mut evicted = Vec::new();
        let key = {
            let mut st = self.lock();
            let key = st.next_key;
            st.next_key += 1;
            st.live.insert(key);
            self.insert(&mut st, key, Arc::clone(&file), &mut evicted);
            key
        };
        drop(evicted);
        (FileRef::Cached { cache: Arc::clone(self), key, path }, file)
    }

    /// The open file of `key`, opening `path` (see [`FileCache::open`]) if
    /// it is not cached.
    fn get(&self, key: u64, path: &Path) -> io::Result<FileHandle> {
        {
            let mut st = self.lock();
            let tick = st.tick + 1;
            if let Some(c) = st.open.get_mut(&key) {
                let old = std::mem::replace(&mut c.used, tick);
                let file = Arc::clone(&c.file);
                st.tick = tick;
                st.order.remove(&old);
                st.order.insert(tick, key);
                return Ok(file);
            }
        }
        metrics::counter!("kcoord_segment_file_opens_total").increment(1);
        let file = self.open(path, false)?;
        let mut evicted = Vec::new();
        {
            let mut st = self.lock();
            if !st.live.contains(&key) {
                return Ok(file);
            }
            if let Some(c) = st.open.get(&key) {
                // Another thread opened it meanwhile: share theirs.
                return Ok(Arc::clone(&c.file));
            }
            self.insert(&mut st, key, Arc::clone(&file), &mut evicted);
        }
        drop(evicted);
        Ok(file)
    }

    /// Opens (with `create`: creates or truncates) a segment file for
    /// reading and writing. On EMFILE/ENFILE the cache gives up half of its
    /// files and tries once more, so that descriptor pressure from elsewhere
    /// in the process (a burst of connections) costs cached files rather
    /// than failures; each exhaustion is counted and logged (rate-limited).
    pub fn open(&self, path: &Path, create: bool) -> io::Result<FileHandle> {
        let mode = if create { OpenMode::Create } else { OpenMode::ReadWrite };
        let attempt = || {
            self.fs.open(path, mode).inspect_err(|e| {
                if is_descriptor_exhaustion(e) {
                    self.note_exhaustion(path, e);
                }
            })
        };
        match attempt() {
            Err(e) if is_descriptor_exhaustion(&e) => {
                self.shrink(self.capacity / 2);
                attempt()
            }
            other => other,
        }
    }

    /// Caches `file` under `key`, moving the evicted files to `evicted` so
    /// that the caller closes them after releasing the lock.
    fn insert(&self, st: &mut State, key: u64, file: FileHandle, evicted: &mut Vec<FileHandle>) {
        st.tick += 1;
        let tick = st.tick;
        if let Some(old) = st.open.insert(key, Cached { file, used: tick }) {
            st.order.remove(&old.used);
            evicted.push(old.file);
        }
        st.order.insert(tick, key);
        while st.open.len() > self.capacity {
            let Some((_, oldest)) = st.order.pop_first() else { break };
            if let Some(c) = st.open.remove(&oldest) {
                evicted.push(c.file);
            }
        }
    }

    /// Closes least recently used files until at most `keep` are cached.
    fn shrink(&self, keep: usize) {
        let mut evicted = Vec::new();
        {
            let mut st = self.lock();
            while st.open.len() > keep {
                let Some((_, oldest)) = st.order.pop_first() else { break };
                if let Some(c) = st.open.remove(&oldest) {
                    evicted.push(c.file);
                }
            }
        }
        drop(evicted);
    }

    /// The segment of `key` is gone: close its file, forget the key.
    fn forget(&self, key: u64) {
        let evicted = {
            let mut st = self.lock();
            st.live.remove(&key);
            let c = st.open.remove(&key);
            if let Some(c) = &c {
                st.order.remove(&c.used);
            }
            c
        };
        drop(evicted);
    }

    /// Counts a descriptor failure and logs it at most once a second.
    pub fn note_exhaustion(&self, path: &Path, err: &io::Error) {
        metrics::counter!("kcoord_descriptor_errors_total", "operation" => "open_segment").increment(1);
        let due = self.exhausted.lock().unwrap_or_else(|p| p.into_inner()).note(Instant::now());
        if let Some(failures) = due {
            tracing::error!(
                file = %path.display(),
                error = %err,
                failures,
                cached_files = self.capacity,
                "out of file descriptors opening a segment file; the cache closes half of its files and tries once more (raise the open-files limit, or lower topics.max_open_segment_files; failures counts every failure since the previous line)"
            );
        }
    }
}

/// How a segment reaches its file: held open, or through a [`FileCache`].
#[derive(Debug, Clone)]
pub enum FileRef {
    /// Open for the segment's lifetime.
    Pinned(FileHandle),
    /// Opened on demand; `key` identifies the segment in `cache`.
    Cached { cache: Arc<FileCache>, key: u64, path: PathBuf },
}

impl FileRef {
    /// The open file (opening it if the cache had closed it).
    pub fn file(&self) -> io::Result<FileHandle> {
        match self {
            FileRef::Pinned(file) => Ok(Arc::clone(file)),
            FileRef::Cached { cache, key, path } => cache.get(*key, path),
        }
    }

    /// Releases the cache slot of a segment that is gone. Only the
    /// segment's owner calls it (clones held by jobs must not).
    pub(crate) fn release(&self) {
        if let FileRef::Cached { cache, key, .. } = self {
            cache.forget(*key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, n: usize) -> Vec<PathBuf> {
        (0..n)
            .map(|i| {
                let p = dir.join(format!("{i}.log"));
                std::fs::write(&p, format!("segment {i}")).unwrap();
                p
            })
            .collect()
    }

    fn read_all(file: &dyn disk::DiskFile) -> String {
        let mut buf = vec![0u8; usize::try_from(file.size().unwrap()).unwrap()];
        file.read_exact_at(&mut buf, 0).unwrap();
        String::from_utf8(buf).unwrap()
    }

    fn adopt(cache: &Arc<FileCache>, path: &Path) -> FileRef {
        cache.adopt(path.to_path_buf(), cache.open(path, false).unwrap()).0
    }

    #[test]
    fn the_cache_never_holds_more_files_than_its_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(MIN_CAPACITY);
        let refs: Vec<FileRef> = files(dir.path(), 50).iter().map(|p| adopt(&cache, p)).collect();
        assert_eq!(cache.open_files(), MIN_CAPACITY);
        for r in refs.iter().rev() {
            let buf = read_all(&*r.file().unwrap());
            assert!(buf.starts_with("segment "));
            assert!(cache.open_files() <= MIN_CAPACITY);
        }
    }

    #[test]
    fn the_least_recently_used_file_is_closed_first() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(MIN_CAPACITY);
        let paths = files(dir.path(), MIN_CAPACITY + 1);
        let refs: Vec<FileRef> = paths[..MIN_CAPACITY].iter().map(|p| adopt(&cache, p)).collect();
        drop(refs[0].file().unwrap());
        // The first is now the most recently used: the next adoption evicts the second.
        let _extra = adopt(&cache, &paths[MIN_CAPACITY]);
        let st = cache.lock();
        let key = |r: &FileRef| match r {
            FileRef::Cached { key, .. } => *key,
            FileRef::Pinned(_) => unreachable!(),
        };
        assert!(st.open.contains_key(&key(&refs[0])));
        assert!(!st.open.contains_key(&key(&refs[1])));
    }

    #[test]
    fn a_released_segment_frees_its_slot_and_is_never_cached_again() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(MIN_CAPACITY);
        let paths = files(dir.path(), 1);
        let r = adopt(&cache, &paths[0]);
        let job = r.clone();
        r.release();
        assert_eq!(cache.open_files(), 0);
        // A job still referring to it can use the file, uncached.
        job.file().unwrap();
        assert_eq!(cache.open_files(), 0);
    }

    #[test]
    fn a_file_handed_out_stays_usable_after_eviction() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(MIN_CAPACITY);
        let paths = files(dir.path(), MIN_CAPACITY + 5);
        let first = adopt(&cache, &paths[0]);
        let held = first.file().unwrap();
        let _rest: Vec<FileRef> = paths[1..].iter().map(|p| adopt(&cache, p)).collect();
        assert_eq!(read_all(&*held), "segment 0");
    }
}
