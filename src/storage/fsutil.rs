//! Small file-system helpers with the durability steps spelled out.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// fsyncs a directory so that entries created, renamed or removed in it
/// survive a machine crash.
pub fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `path` with `bytes` atomically: write a temporary file, fsync it,
/// rename it over the target, fsync the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = path.with_extension("tmp");
    {
        let mut f = OpenOptions::new().create(true).write(true).truncate(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    fsync_dir(dir)
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
