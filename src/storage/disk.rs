//! The file operations the storage layer and the data plane's small files
//! use, behind two traits, so that tests can run them on a simulated disk
//! ([`super::simdisk`]) that loses what no fsync covered, tears writes and
//! fails on demand, which a real disk under SIGKILL never does (the page
//! cache survives a killed process).
//!
//! The daemon uses [`OsFs`] and `std::fs::File` directly: a handle is one
//! `Arc<dyn DiskFile>` created when a file is opened, and each operation is
//! one indirect call in front of a system call, nothing else.

use std::ffi::OsString;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::segment::millis_since_epoch;

/// An open file, shared between appends, reads and fsyncs on other threads.
pub type FileHandle = Arc<dyn DiskFile>;

/// The file system a log (or a small state file) lives on.
pub type Disk = Arc<dyn FileSystem>;

/// How [`FileSystem::open`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// An existing file, for reading only.
    Read,
    /// An existing file, for reading and writing.
    ReadWrite,
    /// For reading and writing, created if missing and emptied if present.
    Create,
}

/// Operations on directories and whole files. Paths are as for `std::fs`.
pub trait FileSystem: Send + Sync + fmt::Debug {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<FileHandle>;
    /// The whole content of a file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Renames a file or a directory within one directory; a file `to` is
    /// replaced if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes a directory and everything in it. Durable only once the
    /// parent directory is fsynced; a crash before may leave any part.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    fn is_dir(&self, path: &Path) -> bool;
    /// The names of a directory's entries, in no particular order.
    fn list(&self, dir: &Path) -> io::Result<Vec<OsString>>;
    /// fsyncs a directory, so that the entries created, renamed or removed
    /// in it survive a machine crash.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// Operations on an open file. Reads and writes are positional, so that a
/// file can be shared without a cursor.
pub trait DiskFile: Send + Sync + fmt::Debug {
    /// Reads at most `buf.len()` bytes at `offset`; 0 at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// fdatasync: the data and the size, not other metadata.
    fn sync_data(&self) -> io::Result<()>;
    /// fsync.
    fn sync_all(&self) -> io::Result<()>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    fn size(&self) -> io::Result<u64>;
    /// Last modification, in milliseconds since the Unix epoch (0 if unknown).
    fn modified_ms(&self) -> io::Result<u64>;

    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "failed to fill whole buffer")),
                n => {
                    buf = buf.get_mut(n..).unwrap_or_default();
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsFs;

/// The real file system, as a [`Disk`].
pub fn os() -> Disk {
    Arc::new(OsFs)
}

impl FileSystem for OsFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<FileHandle> {
        let mut options = OpenOptions::new();
        options.read(true);
        match mode {
            OpenMode::Read => {}
            OpenMode::ReadWrite => {
                options.write(true);
            }
            OpenMode::Create => {
                options.write(true).create(true).truncate(true);
            }
        }
        Ok(Arc::new(options.open(path)?))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        std::fs::read_dir(dir)?.map(|entry| entry.map(|e| e.file_name())).collect()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

impl DiskFile for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn sync_all(&self) -> io::Result<()> {
        File::sync_all(self)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn modified_ms(&self) -> io::Result<u64> {
        Ok(self.metadata()?.modified().map(millis_since_epoch).unwrap_or(0))
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

/// Writes sequentially from offset 0 through positional writes, for
/// `BufWriter` (snapshots, small state files).
#[derive(Debug)]
pub(crate) struct SequentialWriter<'a> {
    file: &'a dyn DiskFile,
    offset: u64,
}

impl<'a> SequentialWriter<'a> {
    pub fn new(file: &'a dyn DiskFile) -> SequentialWriter<'a> {
        SequentialWriter { file, offset: 0 }
    }
}

impl io::Write for SequentialWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write_all_at(buf, self.offset)?;
        self.offset += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Deletes a file, treating "already gone" as success, so that retrying a
/// half-done cleanup works.
pub(crate) fn remove_if_present(fs: &dyn FileSystem, path: &Path) -> io::Result<()> {
    match fs.remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}
