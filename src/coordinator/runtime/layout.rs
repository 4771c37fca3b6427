//! The shard count a data directory was created with.
//!
//! A group's shard is `javaHash(group id) % offsets.partitions`, so starting
//! an existing data directory with another shard count would look every
//! group up on the wrong shard: its committed offsets would silently vanish
//! (and reappear if the old count came back). Kafka avoids this by fixing
//! the partition count of `__consumer_offsets` once the topic exists; kcoord
//! records the count in `coordinator/layout.json` on first start and refuses
//! to start with a different one.
//!
//! `layout.json` also carries the data directory's format version:
//!
//! - 1 (no `version` field): shard directories were created as shards
//!   loaded, and logs had no manifest.
//! - 2: every shard directory is created before `layout.json` is written,
//!   and every log directory has a `manifest.json` (see
//!   `storage::manifest`). A missing shard directory is then a loss, and
//!   refuses the start unless `--repair` accepts it. A format-1 directory is
//!   migrated at its first start: its shard directories are completed, its
//!   logs get manifests of what is found, and the version is raised.
//! - 3: the data directory may hold `journal/` (`storage::journal`), whose
//!   entries are acknowledged records not yet fsynced in the shards' own
//!   files. A build that ignored it would lose them after a crash, so a
//!   directory of a newer format than this build writes is refused. A
//!   format-2 directory has no journal: raising the version is all its
//!   migration does.
//!
//! Crash safety: `layout.json` is replaced atomically (written aside,
//! fsynced, renamed, directory fsynced), after the shard directories it
//! promises are durable, so after a machine crash it is the old file or the
//! new one, never torn, and never missing once its write returned. Without
//! it, only shard directories holding something fix the count: an empty
//! one holds no group, and is what a first start interrupted by a crash
//! leaves (it once refused the next start with a wrong "created with"
//! count, the shards created so far).

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::storage::disk::{FileSystem, OsFs};
use crate::storage::fsutil;

const FILE: &str = "layout.json";

/// The data directory format this build writes.
pub const FORMAT_VERSION: u32 = 3;

#[derive(Serialize, Deserialize)]
struct Layout {
    shards: u32,
    /// Absent (0) in format 1.
    #[serde(default)]
    version: u32,
}

fn shard_dir(coordinator_dir: &Path, shard: u32) -> std::path::PathBuf {
    coordinator_dir.join(format!("shard-{shard:04}"))
}

/// Why the configured shard count cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error(
        "{dir} was created with offsets.partitions = {recorded}, but {configured} is configured; \
         groups are placed on shards by this number, so it cannot change \
         (start with --set offsets.partitions={recorded})"
    )]
    Mismatch { dir: String, recorded: u32, configured: u32 },
    #[error(
        "{dir} is missing ({missing} of {shards} coordinator shard directories): the groups and offsets it held \
         would be lost; restore it from a copy, or start with --repair to accept the loss"
    )]
    MissingShards { dir: String, missing: usize, shards: u32 },
    #[error(
        "{dir} is in data directory format {found}, written by a newer kcoord; this build reads formats up to \
         {supported}: start the newer build (it may hold acknowledged commits this one would not see)"
    )]
    Newer { dir: String, found: u32, supported: u32 },
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
}

/// Checks `configured` against the count recorded under `coordinator_dir`,
/// recording it (durably) if this is the directory's first start, and checks
/// that every shard directory is there (format 2; `repair` accepts missing
/// ones with a warning, and they start empty).
pub fn check_or_record_shard_count(coordinator_dir: &Path, configured: u32, repair: bool) -> Result<(), LayoutError> {
    check_or_record_shard_count_on(&OsFs, coordinator_dir, configured, repair)
}

/// [`check_or_record_shard_count`] on any [`FileSystem`].
pub fn check_or_record_shard_count_on(
    fs: &dyn FileSystem,
    coordinator_dir: &Path,
    configured: u32,
    repair: bool,
) -> Result<(), LayoutError> {
    let path = coordinator_dir.join(FILE);
    let io_err = |source| LayoutError::Io { path: path.display().to_string(), source };
    let (recorded, version) = match fs.read(&path) {
        Ok(bytes) => {
            let layout: Layout = serde_json::from_slice(&bytes)
                .map_err(|e| io_err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())))?;
            (Some(layout.shards), layout.version.max(1))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => (existing_shard_dirs(fs, coordinator_dir).map_err(io_err)?, 0),
        Err(e) => return Err(io_err(e)),
    };
    if let Some(recorded) = recorded.filter(|&r| r != configured) {
        return Err(LayoutError::Mismatch { dir: coordinator_dir.display().to_string(), recorded, configured });
    }
    if version > FORMAT_VERSION {
        return Err(LayoutError::Newer {
            dir: coordinator_dir.display().to_string(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version >= 2 {
        let missing: Vec<u32> = (0..configured).filter(|&i| !fs.is_dir(&shard_dir(coordinator_dir, i))).collect();
        if let Some(&first) = missing.first() {
            let err = LayoutError::MissingShards {
                dir: shard_dir(coordinator_dir, first).display().to_string(),
                missing: missing.len(),
                shards: configured,
            };
            if !repair {
                return Err(err);
            }
            tracing::warn!("repair: {err}; starting those shards empty");
        }
        sync_entries(fs, coordinator_dir).map_err(io_err)?;
        if version == FORMAT_VERSION {
            return Ok(());
        }
        tracing::info!(
            dir = %coordinator_dir.display(),
            "data directory format {version}: migrating to format {FORMAT_VERSION} (nothing to convert; \
             from now on it may hold a journal, and older builds refuse it)"
        );
        return record(fs, &path, configured).map_err(io_err);
    }
    // First start (version 0) or a format-1 directory: every shard
    // directory first, then the layout that promises them.
    if version == 1 {
        tracing::info!(
            dir = %coordinator_dir.display(),
            "data directory format 1: migrating to format {FORMAT_VERSION} (shard directories completed, manifests written as each log opens)"
        );
    }
    for i in 0..configured {
        // Durably: also the coordinator directory's own entry, which
        // `create_dir_all` plus an fsync of this directory did not cover.
        fsutil::create_dir_all_durably_on(fs, &shard_dir(coordinator_dir, i)).map_err(io_err)?;
    }
    sync_entries(fs, coordinator_dir).map_err(io_err)?;
    record(fs, &path, configured).map_err(io_err)
}

/// Writes `layout.json` for `shards` in this build's format, atomically.
fn record(fs: &dyn FileSystem, path: &Path, shards: u32) -> io::Result<()> {
    let layout = Layout { shards, version: FORMAT_VERSION };
    let bytes = serde_json::to_vec(&layout).map_err(io::Error::other)?;
    fsutil::write_atomically_on(fs, path, &bytes)
}

/// fsyncs the coordinator directory and its parent, so that `layout.json`
/// and the shard directories are durable whatever an earlier start did: one
/// retried after a failed directory fsync finds them there but maybe not
/// durable, and `create_dir_all_durably` fsyncs only what it creates, so a
/// start could return with its layout still at the mercy of a machine crash
/// (the simulated-disk campaign lost an acknowledged layout.json this way).
fn sync_entries(fs: &dyn FileSystem, coordinator_dir: &Path) -> io::Result<()> {
    fs.sync_dir(coordinator_dir)?;
    fs.sync_dir(fsutil::parent_dir(coordinator_dir))
}

/// For a directory without `layout.json`: the shard count implied by the
/// `shard-NNNN` directories already there that hold something (highest
/// index + 1), if any. Empty ones hold no group to misplace (see the
/// module docs).
fn existing_shard_dirs(fs: &dyn FileSystem, coordinator_dir: &Path) -> io::Result<Option<u32>> {
    let entries = match fs.list(coordinator_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut highest: Option<u32> = None;
    for name in entries {
        let Some(n) = name.to_str().and_then(|n| n.strip_prefix("shard-")).and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if fs.list(&coordinator_dir.join(&name)).is_ok_and(|inside| !inside.is_empty()) {
            highest = Some(highest.map_or(n, |h| h.max(n)));
        }
    }
    Ok(highest.map(|h| h + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_start_records_the_count_and_later_starts_must_match_it() {
        let dir = tempfile::tempdir().unwrap();
        let coord = dir.path().join("coordinator");
        check_or_record_shard_count(&coord, 50, false).unwrap();
        check_or_record_shard_count(&coord, 50, false).unwrap();
        let err = check_or_record_shard_count(&coord, 10, false).unwrap_err().to_string();
        assert!(err.contains("offsets.partitions = 50") && err.contains("--set offsets.partitions=50"), "{err}");
    }

    #[test]
    fn shard_directories_without_a_layout_file_fix_the_count() {
        let dir = tempfile::tempdir().unwrap();
        let coord = dir.path().join("coordinator");
        for i in 0..3 {
            std::fs::create_dir_all(coord.join(format!("shard-{i:04}/offsets"))).unwrap();
        }
        assert!(check_or_record_shard_count(&coord, 5, false).is_err());
        check_or_record_shard_count(&coord, 3, false).unwrap();
        assert!(coord.join(FILE).exists());
    }

    #[test]
    fn empty_shard_directories_left_by_an_interrupted_first_start_do_not_fix_the_count() {
        let dir = tempfile::tempdir().unwrap();
        let coord = dir.path().join("coordinator");
        for i in 0..2 {
            std::fs::create_dir_all(shard_dir(&coord, i)).unwrap();
        }
        check_or_record_shard_count(&coord, 4, false).unwrap();
        check_or_record_shard_count(&coord, 4, false).unwrap();
    }

    #[test]
    fn a_missing_shard_directory_refuses_the_start_unless_repairing() {
        let dir = tempfile::tempdir().unwrap();
        let coord = dir.path().join("coordinator");
        check_or_record_shard_count(&coord, 4, false).unwrap();
        assert!((0..4).all(|i| shard_dir(&coord, i).is_dir()), "created before the layout promises them");
        std::fs::remove_dir_all(shard_dir(&coord, 2)).unwrap();
        let err = check_or_record_shard_count(&coord, 4, false).unwrap_err().to_string();
        assert!(err.contains("shard-0002") && err.contains("--repair"), "{err}");
        check_or_record_shard_count(&coord, 4, true).unwrap();
    }

    #[test]
    fn a_format_2_directory_is_raised_to_the_journal_format_and_a_newer_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let coord = dir.path().join("coordinator");
        check_or_record_shard_count(&coord, 2, false).unwrap();
        std::fs::write(coord.join(FILE), br#"{"shards":2,"version":2}"#).unwrap();
        check_or_record_shard_count(&coord, 2, false).unwrap();
        let layout: Layout = serde_json::from_slice(&std::fs::read(coord.join(FILE)).unwrap()).unwrap();
        assert_eq!(layout.version, FORMAT_VERSION);

        std::fs::write(coord.join(FILE), format!(r#"{{"shards":2,"version":{}}}"#, FORMAT_VERSION + 1)).unwrap();
        let err = check_or_record_shard_count(&coord, 2, false).unwrap_err().to_string();
        assert!(err.contains("newer kcoord") && err.contains(&format!("up to {FORMAT_VERSION}")), "{err}");
    }

    #[test]
    fn a_format_1_directory_is_migrated_never_refused() {
        let dir = tempfile::tempdir().unwrap();
        let coord = dir.path().join("coordinator");
        std::fs::create_dir_all(shard_dir(&coord, 0)).unwrap();
        std::fs::write(coord.join(FILE), br#"{"shards":3}"#).unwrap();
        check_or_record_shard_count(&coord, 3, false).unwrap();
        let layout: Layout = serde_json::from_slice(&std::fs::read(coord.join(FILE)).unwrap()).unwrap();
        assert_eq!((layout.shards, layout.version), (3, FORMAT_VERSION));
        assert!((0..3).all(|i| shard_dir(&coord, i).is_dir()));
    }
}

#[cfg(test)]
#[path = "layout_crash_sim_tests.rs"]
mod crash_sim_tests;
