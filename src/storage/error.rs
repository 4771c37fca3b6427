//! Errors from opening a [`Log`](super::log::Log).
//!
//! Opening is where a log meets whatever a crash, a full disk or a bad sector
//! left behind, so its errors are written for the operator who has to decide
//! what to do: which file, which byte, and how to get going again.

use std::io;
use std::path::{Path, PathBuf};

/// Why a log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file system refused an operation; `path` says on what, because a
    /// bare "permission denied" is useless in a directory of many files.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Damage that a crash cannot explain (or that sits where a crash cannot
    /// have left it), so opening refuses to guess. Records before `offset` are
    /// intact; `--repair` truncates the log there.
    #[error(
        "log file {} is corrupt at byte offset {offset}: {reason}. \
         Run `kcoord serve --repair` to truncate the log at that point \
         (the records after it will be lost)",
        file.display()
    )]
    Corrupt { file: PathBuf, offset: u64, reason: String },

    /// The caller's replay visitor refused a record; opening is abandoned so
    /// that the caller never runs on state it could not rebuild.
    #[error("replaying the log failed: {0}")]
    Visit(String),
}

impl LogError {
    /// Wraps an I/O error with the path it concerns; used as
    /// `.map_err(LogError::io(&path))` so every I/O failure names its file.
    pub(crate) fn io(path: &Path) -> impl FnOnce(io::Error) -> LogError + '_ {
        move |source| LogError::Io { path: path.to_path_buf(), source }
    }
}
