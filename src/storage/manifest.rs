//! `manifest.json`: what a log directory must hold, so that a file deleted
//! behind kcoord's back is noticed at the next open instead of silently
//! taking acknowledged records with it.
//!
//! File names alone cannot tell a deleted first or last segment, a deleted
//! snapshot, or an active segment cut back on a record boundary from a log
//! that simply never had them. The manifest records the snapshot, every
//! segment and the end index known to be durable, and is rewritten
//! atomically (temporary file, fsync, rename, directory fsync) whenever that
//! set changes: before a segment or snapshot is deleted, after a segment is
//! created (before anything is appended to it), after a snapshot is in
//! place, at every open and at a clean shutdown (which is when the end
//! moves; between those, a crash can only lose records that were never
//! acknowledged, or that the segment still holds). It names files, never
//! reads them: checking it costs a directory listing.
//!
//! A directory without a manifest is one from before manifests (data
//! directory format 1): it is opened as found and gets one.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::disk::FileSystem;
use super::fsutil::write_atomically_on;

pub(crate) const MANIFEST_FILE: &str = "manifest.json";
/// The temporary file of [`write_atomically_on`]; not a snapshot's.
pub(crate) const MANIFEST_TMP: &str = "manifest.tmp";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub version: u32,
    /// Base of the snapshot the log starts from, if any.
    pub snapshot: Option<u64>,
    /// Bases of every segment, in order.
    pub segments: Vec<u64>,
    /// Every record below this index was durable when the manifest was
    /// written.
    pub end: u64,
}

impl Manifest {
    pub fn new(snapshot: Option<u64>, segments: Vec<u64>, end: u64) -> Manifest {
        Manifest { version: 1, snapshot, segments, end }
    }
}

pub(crate) fn path(dir: &Path) -> PathBuf {
    dir.join(MANIFEST_FILE)
}

/// The manifest of `dir`; `Ok(None)` when there is none.
pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> io::Result<Option<Manifest>> {
    match fs.read(&path(dir)) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("unreadable manifest: {e}"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replaces the manifest of `dir` durably.
pub(crate) fn write(fs: &dyn FileSystem, dir: &Path, manifest: &Manifest) -> io::Result<()> {
    let bytes = serde_json::to_vec(manifest).map_err(io::Error::other)?;
    write_atomically_on(fs, &path(dir), &bytes)
}
