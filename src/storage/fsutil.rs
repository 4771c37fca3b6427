//! Small file-system helpers with the durability steps spelled out.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use super::disk::{FileSystem, OpenMode, OsFs};

/// fsyncs a directory so that entries created, renamed or removed in it
/// survive a machine crash.
pub fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    OsFs.sync_dir(dir)
}

/// The directory `path` is in ("." for a bare name).
pub fn parent_dir(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Creates `dir` and its missing parents, fsyncing the parent of each
/// directory it creates so that the new entries survive a machine crash
/// (`create_dir_all` alone leaves them in the page cache: a crash soon
/// after a first start could take the whole data directory, with every
/// record acknowledged in it). Returns whether it created anything.
pub fn create_dir_all_durably(dir: &Path) -> std::io::Result<bool> {
    create_dir_all_durably_on(&OsFs, dir)
}

/// [`create_dir_all_durably`] on any [`FileSystem`].
pub fn create_dir_all_durably_on(fs: &dyn FileSystem, dir: &Path) -> std::io::Result<bool> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|p| !p.as_os_str().is_empty() && !fs.is_dir(p)).collect();
    if missing.is_empty() {
        return Ok(false);
    }
    fs.create_dir_all(dir)?;
    for created in missing.iter().rev() {
        fs.sync_dir(parent_dir(created))?;
    }
    Ok(true)
}

/// Replaces `path` with `bytes` atomically: write a temporary file, fsync it,
/// rename it over the target, fsync the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically_on(&OsFs, path, bytes)
}

/// [`write_atomically`] on any [`FileSystem`].
pub fn write_atomically_on(fs: &dyn FileSystem, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let f = fs.open(&tmp, OpenMode::Create)?;
        f.write_all_at(bytes, 0)?;
        f.sync_all()?;
    }
    fs.rename(&tmp, path)?;
    fs.sync_dir(parent_dir(path))
}

/// An exclusive lock on a data directory, held for the daemon's lifetime, so
/// that two processes never write the same logs.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> std::io::Result<DirLock> {
        let path = dir.join(".lock");
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(&path)?;
        // SAFETY: flock on a valid descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    format!("data directory {} is in use by another kcoord process", dir.display()),
                ));
            }
            return Err(err);
        }
        Ok(DirLock { _file: file })
    }
}

/// A read-modify-write of the small file at `path` (`what` names it in
/// errors) under its edit lock (`<file>.lock`): `load` reads it (a missing
/// file being its empty value), `change` edits a copy, and `save` writes the
/// copy durably if it differs. The ACL file and the credentials file are
/// edited this way by the CLI and the daemon alike, so neither loses the
/// other's edit.
pub fn edit_locked<T: Clone + PartialEq, R>(
    path: &Path,
    what: &str,
    load: impl FnOnce(&Path) -> Result<T, String>,
    save: impl FnOnce(&T, &Path) -> Result<(), String>,
    change: impl FnOnce(&mut T) -> Result<R, String>,
) -> Result<R, String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    }
    let lock_path = path.with_extension("lock");
    let _edit = EditLock::acquire(&lock_path).map_err(|e| format!("{what} lock {}: {e}", lock_path.display()))?;
    let before = load(path)?;
    let mut after = before.clone();
    let result = change(&mut after)?;
    if after != before {
        save(&after, path)?;
    }
    Ok(result)
}

/// An exclusive advisory lock (flock) on a lock file, held until dropped;
/// acquiring it waits for the holder. It serializes read-modify-write edits
/// of a small file between processes, e.g. `kcoord acls add` and the
/// daemon's CreateAcls. flock conflicts between two opens in one process
/// too, so threads are serialized as well. The lock file is never removed:
/// removing it would let two editors lock different files.
#[derive(Debug)]
pub struct EditLock {
    _file: File,
}

impl EditLock {
    pub fn acquire(lock_path: &Path) -> std::io::Result<EditLock> {
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(lock_path)?;
        loop {
            // SAFETY: flock on a valid descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(EditLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.json");
        write_atomically(&p, b"one").unwrap();
        write_atomically(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert!(!p.with_extension("tmp").exists());
    }

    #[test]
    fn a_data_dir_can_be_locked_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = DirLock::acquire(dir.path()).unwrap();
        let err = DirLock::acquire(dir.path()).unwrap_err();
        assert!(err.to_string().contains("in use"), "{err}");
        drop(a);
        DirLock::acquire(dir.path()).unwrap();
    }
}
