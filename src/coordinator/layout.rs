//! The shard count a data directory was created with.
//!
//! A group's shard is `javaHash(group id) % offsets.partitions`, so starting
//! an existing data directory with another shard count would look every
//! group up on the wrong shard: its committed offsets would silently vanish
//! (and reappear if the old count came back). Kafka avoids this by fixing
//! the partition count of `__consumer_offsets` once the topic exists; kcoord
//! records the count in `coordinator/layout.json` on first start and refuses
//! to start with a different one.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::storage::fsutil;

const FILE: &str = "layout.json";

#[derive(Serialize, Deserialize)]
struct Layout {
    shards: u32,
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
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
}

/// Checks `configured` against the count recorded under `coordinator_dir`,
/// recording it (durably) if this is the directory's first start.
pub fn check_or_record_shard_count(coordinator_dir: &Path, configured: u32) -> Result<(), LayoutError> {
    let path = coordinator_dir.join(FILE);
    let io_err = |source| LayoutError::Io { path: path.display().to_string(), source };
    let recorded = match std::fs::read(&path) {
        Ok(bytes) => {
            let layout: Layout = serde_json::from_slice(&bytes)
                .map_err(|e| io_err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())))?;
            Some(layout.shards)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => existing_shard_dirs(coordinator_dir).map_err(io_err)?,
        Err(e) => return Err(io_err(e)),
    };
    match recorded {
        Some(recorded) if recorded != configured => {
            Err(LayoutError::Mismatch { dir: coordinator_dir.display().to_string(), recorded, configured })
        }
        Some(_) if path.exists() => Ok(()),
        _ => {
            std::fs::create_dir_all(coordinator_dir).map_err(io_err)?;
            let bytes = serde_json::to_vec(&Layout { shards: configured }).map_err(|e| io_err(io::Error::other(e)))?;
            fsutil::write_atomically(&path, &bytes).map_err(io_err)
        }
    }
}

/// For a directory without `layout.json`: the shard count implied by the
/// `shard-NNNN` directories already there (highest index + 1), if any.
fn existing_shard_dirs(coordinator_dir: &Path) -> io::Result<Option<u32>> {
    let entries = match std::fs::read_dir(coordinator_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut highest: Option<u32> = None;
    for entry in entries {
        let name = entry?.file_name();
        if let Some(n) = name.to_str().and_then(|n| n.strip_prefix("shard-")).and_then(|n| n.parse::<u32>().ok()) {
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
        check_or_record_shard_count(&coord, 50).unwrap();
        check_or_record_shard_count(&coord, 50).unwrap();
        let err = check_or_record_shard_count(&coord, 10).unwrap_err().to_string();
        assert!(err.contains("offsets.partitions = 50") && err.contains("--set offsets.partitions=50"), "{err}");
    }

    #[test]
    fn shard_directories_without_a_layout_file_fix_the_count() {
        let dir = tempfile::tempdir().unwrap();
        let coord = dir.path().join("coordinator");
        for i in 0..3 {
            std::fs::create_dir_all(coord.join(format!("shard-{i:04}"))).unwrap();
        }
        assert!(check_or_record_shard_count(&coord, 5).is_err());
        check_or_record_shard_count(&coord, 3).unwrap();
        assert!(coord.join(FILE).exists());
    }
}
