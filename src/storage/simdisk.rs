//! A simulated disk: an in-memory [`FileSystem`] that keeps, at a simulated
//! machine crash, only what an fsync covered, so that crash tests can catch
//! a missing or misplaced fsync. A SIGKILLed process never can: the kernel's
//! page cache outlives it and writes everything back.
//!
//! What it models (each choice drawn from one seeded generator, so a seed
//! replays the same run):
//! - file data: every write and truncation is pending until an fsync of
//!   the file (`sync_data` or `sync_all`) makes it durable. At a crash each
//!   pending operation independently survives or not, in the order issued
//!   (so a later write can survive an earlier one that did not: the gap
//!   reads as zeros), or, with [`SimDisk::set_reorder`] off, a prefix of
//!   them survives; the last surviving write may be torn at any byte;
//! - names: creating, renaming and removing a file or creating a directory
//!   is pending until the directory holding the name is fsynced. At a crash
//!   a random prefix of each directory's pending changes survives (a rename
//!   is one change: it never leaves both names or neither). Data and names
//!   are independent: a name can survive without the data written under
//!   it, as on a real file system;
//! - faults, injected with the probabilities in [`Faults`]: EIO or ENOSPC
//!   from a write (after writing a random part of it), a truncation, a
//!   create, an fsync, a rename or a directory fsync. A failed fsync makes
//!   nothing durable.
//!
//! After [`SimDisk::crash`] every handle opened before fails, as the
//! process holding them would be gone. Paths are absolute, under `/`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::disk::{Disk, DiskFile, FileHandle, FileSystem, OpenMode};

/// Probabilities (0.0 to 1.0) of an injected failure per operation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    /// A write (which first writes a random part of its bytes), a
    /// truncation, or the creation of a file.
    pub write: f64,
    /// An fsync of a file.
    pub sync: f64,
    pub rename: f64,
    /// An fsync of a directory.
    pub sync_dir: f64,
}

impl Faults {
    /// No failures.
    pub const NONE: Faults = Faults { write: 0.0, sync: 0.0, rename: 0.0, sync_dir: 0.0 };

    /// The same probability `p` for every kind of operation.
    pub fn all(p: f64) -> Faults {
        Faults { write: p, sync: p, rename: p, sync_dir: p }
    }
}

/// What happened so far, to check that a test exercised what it claims to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    pub crashes: u64,
    pub injected_faults: u64,
    /// Pending file operations a crash discarded.
    pub dropped_writes: u64,
    /// Writes a crash kept only a part of.
    pub torn_writes: u64,
    /// Pending name changes a crash discarded.
    pub dropped_name_changes: u64,
}

/// The simulated disk; clone the [`Disk`] from [`SimDisk::disk`] into the
/// code under test and keep this to crash it or change its faults.
#[derive(Clone)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimDisk").finish_non_exhaustive()
    }
}

/// splitmix64: small, seedable, and enough to pick faults.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    fn up_to(&mut self, max: u64) -> u64 {
        match max.checked_add(1) {
            Some(n) => self.next() % n,
            None => self.next(),
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    File(u64),
    /// A directory, by identity: a renamed directory keeps its entries, and
    /// one removed and created again under the same name is another one.
    Dir(u64),
}

/// The root directory's identity.
const ROOT_DIR: u64 = 0;

/// One atomic change of names in a directory: (name, new node or removal).
type NameChange = Vec<(OsString, Option<Node>)>;

#[derive(Debug, Default)]
struct DirLog {
    /// The entries a crash keeps for sure.
    durable: BTreeMap<OsString, Node>,
    /// Changes since the last fsync of the directory, oldest first.
    pending: Vec<NameChange>,
}

#[derive(Debug, Clone)]
enum DataOp {
    Write { offset: u64, bytes: Vec<u8> },
    SetLen(u64),
}

impl DataOp {
    fn apply(&self, data: &mut Vec<u8>) {
        match self {
            DataOp::Write { offset, bytes } => {
                let start = usize::try_from(*offset).unwrap_or(usize::MAX);
                let end = start.saturating_add(bytes.len());
                if data.len() < end {
                    data.resize(end, 0);
                }
                if let Some(dst) = data.get_mut(start..end) {
                    dst.copy_from_slice(bytes);
                }
            }
            DataOp::SetLen(len) => data.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
        }
    }
}

#[derive(Debug, Default)]
struct Inode {
    /// What reads see.
    data: Vec<u8>,
    /// What a crash keeps for sure.
    durable: Vec<u8>,
    /// Operations since the last fsync, oldest first.
    pending: Vec<DataOp>,
    modified_ms: u64,
}

#[derive(Debug)]
struct State {
    rng: Rng,
    faults: Faults,
    /// Whether a crash may keep a later pending write of a file without an
    /// earlier one (else it keeps a prefix of them).
    reorder: bool,
    /// Bumped by every crash; handles of an older epoch are dead.
    epoch: u64,
    next_ino: u64,
    inodes: HashMap<u64, Inode>,
    next_dir: u64,
    /// The names as the running process sees them.
    names: BTreeMap<PathBuf, Node>,
    /// Every directory's durable entries and pending changes, by identity.
    dirs: BTreeMap<u64, DirLog>,
    /// A logical clock for modification times, so that runs repeat exactly.
    clock_ms: u64,
    stats: SimStats,
}

fn root() -> PathBuf {
    PathBuf::from("/")
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{}: no such file or directory (simulated disk)", path.display()))
}

fn split(path: &Path) -> io::Result<(&Path, &OsStr)> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if path.is_absolute() => Ok((parent, name)),
        _ => Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: not a file path", path.display()))),
    }
}

impl State {
    /// An injected error with probability `p`: EIO or ENOSPC.
    fn fault(&mut self, p: f64) -> Option<io::Error> {
        if !self.rng.chance(p) {
            return None;
        }
        self.stats.injected_faults += 1;
        Some(errno(if self.rng.up_to(1) == 0 { libc::EIO } else { libc::ENOSPC }))
    }

    fn dir_log(&mut self, dir: &Path) -> io::Result<&mut DirLog> {
        match self.names.get(dir) {
            Some(Node::Dir(id)) => {
                let id = *id;
                self.dirs.get_mut(&id).ok_or_else(|| not_found(dir))
            }
            Some(Node::File(_)) => Err(errno(libc::ENOTDIR)),
            None => Err(not_found(dir)),
        }
    }

    fn is_dir(&self, path: &Path) -> bool {
        matches!(self.names.get(path), Some(Node::Dir(_)))
    }

    /// Changes names in `dir` atomically, now and (pending) on disk.
    fn change(&mut self, dir: &Path, change: NameChange) -> io::Result<()> {
        let log = self.dir_log(dir)?;
        log.pending.push(change.clone());
        for (name, node) in change {
            let path = dir.join(name);
            match node {
                Some(node) => self.names.insert(path, node),
                None => self.names.remove(&path),
            };
        }
        Ok(())
    }

    fn file(&self, path: &Path) -> io::Result<u64> {
        match self.names.get(path) {
            Some(Node::File(ino)) => Ok(*ino),
            Some(Node::Dir(_)) => Err(errno(libc::EISDIR)),
            None => Err(not_found(path)),
        }
    }

    fn inode(&mut self, ino: u64) -> io::Result<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or_else(|| io::Error::other("simulated disk: inode vanished"))
    }

    fn tick(&mut self) -> u64 {
        self.clock_ms += 1;
        self.clock_ms
    }

    fn crash(&mut self) {
        self.stats.crashes += 1;
        self.epoch += 1;
        // Names: a prefix of each directory's pending changes.
        let mut dropped_names = 0u64;
        for log in self.dirs.values_mut() {
            let pending = std::mem::take(&mut log.pending);
            let keep = usize::try_from(self.rng.up_to(pending.len() as u64)).unwrap_or(0);
            dropped_names += (pending.len() - keep.min(pending.len())) as u64;
            for (name, node) in pending.into_iter().take(keep).flatten() {
                match node {
                    Some(node) => log.durable.insert(name, node),
                    None => log.durable.remove(&name),
                };
            }
        }
        self.stats.dropped_name_changes += dropped_names;
        // The tree reachable from the root through durable entries.
        let mut names = BTreeMap::new();
        names.insert(root(), Node::Dir(ROOT_DIR));
        let mut reachable = std::collections::HashSet::from([ROOT_DIR]);
        let mut stack = vec![(root(), ROOT_DIR)];
        while let Some((dir, id)) = stack.pop() {
            let Some(log) = self.dirs.get(&id) else { continue };
            for (name, node) in &log.durable {
                let path = dir.join(name);
                names.insert(path.clone(), *node);
                // A directory reachable twice (renamed, both changes
                // durable in different parents) is walked once.
                if let Node::Dir(child) = *node {
                    if reachable.insert(child) {
                        stack.push((path, child));
                    }
                }
            }
        }
        self.dirs.retain(|id, _| reachable.contains(id));
        for id in reachable {
            self.dirs.entry(id).or_default();
        }
        self.names = names;
        // Data: each pending operation survives or not; the last surviving
        // write may be torn.
        let live: std::collections::HashSet<u64> = self
            .names
            .values()
            .filter_map(|n| match n {
                Node::File(ino) => Some(*ino),
                Node::Dir(_) => None,
            })
            .collect();
        self.inodes.retain(|ino, _| live.contains(ino));
        let mut inos: Vec<u64> = self.inodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let Some(inode) = self.inodes.get_mut(&ino) else { continue };
            let pending = std::mem::take(&mut inode.pending);
            let mut kept: Vec<DataOp> = Vec::with_capacity(pending.len());
            let prefix = if self.reorder { pending.len() } else { self.rng.up_to(pending.len() as u64) as usize };
            for (i, op) in pending.into_iter().enumerate() {
                if i < prefix && (!self.reorder || self.rng.up_to(1) == 0) {
                    kept.push(op);
                } else {
                    self.stats.dropped_writes += 1;
                }
            }
            if let Some(DataOp::Write { bytes, .. }) = kept.last_mut() {
                if !bytes.is_empty() && self.rng.up_to(1) == 0 {
                    let len = usize::try_from(self.rng.up_to(bytes.len() as u64 - 1)).unwrap_or(0);
                    bytes.truncate(len);
                    self.stats.torn_writes += 1;
                }
            }
            for op in &kept {
                op.apply(&mut inode.durable);
            }
            inode.data = inode.durable.clone();
        }
    }
}

impl SimDisk {
    /// An empty disk holding only `/`, drawing every choice from `seed`.
    pub fn new(seed: u64) -> SimDisk {
        let mut dirs = BTreeMap::new();
        dirs.insert(ROOT_DIR, DirLog::default());
        let mut names = BTreeMap::new();
        names.insert(root(), Node::Dir(ROOT_DIR));
        SimDisk {
            state: Arc::new(Mutex::new(State {
                rng: Rng(seed),
                faults: Faults::NONE,
                reorder: true,
                epoch: 0,
                next_ino: 1,
                inodes: HashMap::new(),
                next_dir: ROOT_DIR + 1,
                names,
                dirs,
                clock_ms: 1_700_000_000_000,
                stats: SimStats::default(),
            })),
        }
    }

    /// This disk as the [`Disk`] the storage layer takes.
    pub fn disk(&self) -> Disk {
        Arc::new(self.clone())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the probabilities of injected failures from now on.
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// Whether a crash may keep a later unsynced write of a file and drop an
    /// earlier one (the default: disks and write-back reorder), or keeps
    /// only a prefix of them (a file system that writes back in order).
    pub fn set_reorder(&self, reorder: bool) {
        self.lock().reorder = reorder;
    }

    /// A machine crash: keeps what fsyncs covered and a random part of the
    /// rest (see the module docs); every open handle dies.
    pub fn crash(&self) {
        self.lock().crash();
    }

    pub fn stats(&self) -> SimStats {
        self.lock().stats
    }

    /// A number drawn from the disk's generator, in `0..=max`, so that a
    /// test driving the disk needs only one seed.
    pub fn draw(&self, max: u64) -> u64 {
        self.lock().rng.up_to(max)
    }
}

impl FileSystem for SimDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<FileHandle> {
        let mut st = self.lock();
        let ino = match (mode, st.file(path)) {
            (OpenMode::Create, result) => {
                let p = st.faults.write;
                if let Some(err) = st.fault(p) {
                    return Err(err);
                }
                let now = st.tick();
                match result {
                    Ok(ino) => {
                        let inode = st.inode(ino)?;
                        inode.data.clear();
                        inode.pending.push(DataOp::SetLen(0));
                        inode.modified_ms = now;
                        ino
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        let (dir, name) = split(path)?;
                        let ino = st.next_ino;
                        st.change(dir, vec![(name.to_os_string(), Some(Node::File(ino)))])?;
                        st.next_ino += 1;
                        st.inodes.insert(ino, Inode { modified_ms: now, ..Inode::default() });
                        ino
                    }
                    Err(e) => return Err(e),
                }
            }
            (_, result) => result?,
        };
        let file = SimFile { state: Arc::clone(&self.state), ino, epoch: st.epoch, writable: mode != OpenMode::Read };
        Ok(Arc::new(file))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut st = self.lock();
        let ino = st.file(path)?;
        Ok(st.inode(ino)?.data.clone())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.lock();
        let node = *st.names.get(from).ok_or_else(|| not_found(from))?;
        let ((dir, from_name), (to_dir, to_name)) = (split(from)?, split(to)?);
        if dir != to_dir {
            return Err(errno(libc::EXDEV));
        }
        match (node, st.names.get(to)) {
            (Node::Dir(_), Some(_)) => return Err(errno(libc::ENOTEMPTY)),
            (Node::File(_), Some(Node::Dir(_))) => return Err(errno(libc::EISDIR)),
            _ => {}
        }
        let p = st.faults.rename;
        if let Some(err) = st.fault(p) {
            return Err(err);
        }
        st.change(dir, vec![(from_name.to_os_string(), None), (to_name.to_os_string(), Some(node))])?;
        if let Node::Dir(_) = node {
            // The entries below move with the directory (its identity keeps
            // their durable state).
            let below: Vec<PathBuf> = st.names.keys().filter(|p| p.starts_with(from) && *p != from).cloned().collect();
            for old in below {
                if let (Some(node), Ok(rest)) = (st.names.remove(&old), old.strip_prefix(from)) {
                    let new = to.join(rest);
                    st.names.insert(new, node);
                }
            }
        }
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        if !st.is_dir(path) {
            return Err(if st.names.contains_key(path) { errno(libc::ENOTDIR) } else { not_found(path) });
        }
        let (parent, name) = split(path)?;
        // Deepest first, as a real removal must: each removal is a pending
        // change of the directory holding the name.
        let mut below: Vec<PathBuf> = st.names.keys().filter(|p| p.starts_with(path) && *p != path).cloned().collect();
        below.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for entry in below {
            let (dir, entry_name) = split(&entry)?;
            st.change(dir, vec![(entry_name.to_os_string(), None)])?;
        }
        st.change(parent, vec![(name.to_os_string(), None)])
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.file(path)?;
        let (dir, name) = split(path)?;
        st.change(dir, vec![(name.to_os_string(), None)])
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        let mut missing: Vec<&Path> = path.ancestors().take_while(|p| !st.names.contains_key(*p)).collect();
        missing.reverse();
        for dir in missing {
            let (parent, name) = split(dir)?;
            if !st.is_dir(parent) {
                return Err(errno(libc::ENOTDIR));
            }
            let id = st.next_dir;
            st.change(parent, vec![(name.to_os_string(), Some(Node::Dir(id)))])?;
            st.next_dir += 1;
            st.dirs.insert(id, DirLog::default());
        }
        if st.is_dir(path) {
            Ok(())
        } else {
            Err(errno(libc::ENOTDIR))
        }
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.lock().is_dir(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        let st = self.lock();
        if !st.is_dir(dir) {
            return Err(not_found(dir));
        }
        Ok(st
            .names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(OsStr::to_os_string))
            .collect())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.lock();
        let p = st.faults.sync_dir;
        if let Some(err) = st.fault(p) {
            return Err(err);
        }
        let log = st.dir_log(dir)?;
        for (name, node) in std::mem::take(&mut log.pending).into_iter().flatten() {
            match node {
                Some(node) => log.durable.insert(name, node),
                None => log.durable.remove(&name),
            };
        }
        Ok(())
    }
}

/// An open file of a [`SimDisk`].
struct SimFile {
    state: Arc<Mutex<State>>,
    ino: u64,
    epoch: u64,
    writable: bool,
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile").field("ino", &self.ino).field("epoch", &self.epoch).finish()
    }
}

impl SimFile {
    /// The disk, if this handle outlived no crash.
    fn lock(&self) -> io::Result<MutexGuard<'_, State>> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.epoch != self.epoch {
            return Err(io::Error::other("simulated disk: a handle opened before a crash"));
        }
        Ok(st)
    }

    fn modify(&self, op: DataOp) -> io::Result<()> {
        if !self.writable {
            return Err(errno(libc::EBADF));
        }
        let mut st = self.lock()?;
        let p = st.faults.write;
        if let Some(err) = st.fault(p) {
            // A failed write may still have written part of its bytes.
            if let DataOp::Write { offset, bytes } = op {
                let part = usize::try_from(st.rng.up_to(bytes.len() as u64)).unwrap_or(0);
                let op = DataOp::Write { offset, bytes: bytes.get(..part).unwrap_or_default().to_vec() };
                let inode = st.inode(self.ino)?;
                op.apply(&mut inode.data);
                inode.pending.push(op);
            }
            return Err(err);
        }
        let now = st.tick();
        let inode = st.inode(self.ino)?;
        op.apply(&mut inode.data);
        inode.pending.push(op);
        inode.modified_ms = now;
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut st = self.lock()?;
        let p = st.faults.sync;
        if let Some(err) = st.fault(p) {
            return Err(err);
        }
        let inode = st.inode(self.ino)?;
        for op in std::mem::take(&mut inode.pending) {
            op.apply(&mut inode.durable);
        }
        Ok(())
    }
}

impl DiskFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut st = self.lock()?;
        let data = &st.inode(self.ino)?.data;
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(data.len());
        let n = buf.len().min(data.len() - start);
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), data.get(start..start + n)) {
            dst.copy_from_slice(src);
        }
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.modify(DataOp::Write { offset, bytes: buf.to_vec() })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.modify(DataOp::SetLen(len))
    }

    fn size(&self) -> io::Result<u64> {
        let mut st = self.lock()?;
        Ok(st.inode(self.ino)?.data.len() as u64)
    }

    fn modified_ms(&self) -> io::Result<u64> {
        let mut st = self.lock()?;
        Ok(st.inode(self.ino)?.modified_ms)
    }
}

#[cfg(test)]
#[path = "simdisk_tests.rs"]
mod tests;
