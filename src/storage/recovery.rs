//! Opening a log directory: pick the state to start from, replay it, and
//! clean up what a crash left behind.
//!
//! The rules separate what a crash *can* leave (a torn last record in the
//! active segment, a `.tmp` snapshot, segments a finished snapshot had not yet
//! deleted) from what it cannot (damage in the middle of a file, a missing
//! segment). The first is repaired silently apart from a warning, because it
//! only ever loses records that were never acknowledged as durable. The second
//! stops the daemon with [`LogError::Corrupt`] unless the operator asked for
//! `--repair`, because continuing would silently drop acknowledged records.

use std::path::{Path, PathBuf};

use super::disk::FileSystem;
use super::error::LogError;
use super::frame::Stop;
use super::fsutil::create_dir_all_durably_on;
use super::log::{LogOptions, Replay, Visitor, CLEAN_MARKER};
use super::manifest::{self, Manifest, MANIFEST_FILE, MANIFEST_TMP};
use super::segment::{parse_segment_file_name, segment_file_name, Segment};
use super::snapshot::{self, is_tmp_file_name, parse_snapshot_file_name, snapshot_file_name, SnapshotMeta};

/// What [`recover`] hands to [`Log`](super::log::Log).
#[derive(Debug)]
pub(crate) struct Recovered {
    /// Never empty; the last one is the active segment.
    pub segments: Vec<Segment>,
    /// Index of the next record to append.
    pub end: u64,
    pub snapshot: Option<SnapshotMeta>,
}

/// The directory's files, by kind, sorted by index.
#[derive(Debug, Default)]
struct Listing {
    segments: Vec<u64>,
    snapshots: Vec<u64>,
    tmp: Vec<PathBuf>,
}

/// See [`Log::open`](super::log::Log::open).
pub(crate) fn recover(
    dir: &Path,
    options: &LogOptions,
    replay: Replay,
    visit: &mut Visitor<'_>,
) -> Result<Recovered, LogError> {
    let fs = &*options.fs;
    let mut dir_changed = create_dir(fs, dir)?;
    let mut listing = list(fs, dir)?;
    let recorded = read_manifest(fs, dir, options.repair)?;

    for tmp in &listing.tmp {
        tracing::warn!(file = %tmp.display(), "deleting a temporary file left by an interrupted snapshot");
        fs.remove_file(tmp).map_err(LogError::io(tmp))?;
        dir_changed = true;
    }

    let snapshot = choose_snapshot(fs, dir, &listing, options.repair)?;
    if let Some((file, reason)) = recorded.as_ref().and_then(|m| missing_files(dir, m, snapshot.as_ref(), &listing)) {
        if !options.repair {
            return Err(LogError::Corrupt { file, offset: 0, reason });
        }
        tracing::warn!(file = %file.display(), "repair: {reason}; accepting the loss and starting from what is there");
    }
    let first_index = match &snapshot {
        Some(meta) => meta.base,
        None => listing.segments.first().copied().unwrap_or(0),
    };
    if let Some(meta) = &snapshot {
        // Left over when a crash interrupted finish_snapshot: the snapshot
        // already stands for them.
        for &base in listing.segments.iter().filter(|&&b| b < meta.base) {
            let path = dir.join(segment_file_name(base));
            tracing::info!(file = %path.display(), "deleting a segment covered by snapshot {}", meta.base);
            fs.remove_file(&path).map_err(LogError::io(&path))?;
            dir_changed = true;
        }
        listing.segments.retain(|&b| b >= meta.base);
        for &base in listing.snapshots.iter().filter(|&&b| b < meta.base) {
            let path = dir.join(snapshot_file_name(base));
            fs.remove_file(&path).map_err(LogError::io(&path))?;
            dir_changed = true;
        }
        snapshot::replay(fs, meta, visit)?;
    }

    let clean = take_clean_marker(fs, dir, replay);
    let recovery_point = recorded.as_ref().map(|m| m.end);
    let mut replayed =
        replay_segments(dir, &listing.segments, first_index, options, replay, clean, recovery_point, visit)?;
    dir_changed |= replayed.dir_changed;
    if replayed.segments.is_empty() {
        let segment = Segment::create(fs, dir, replayed.end, options.files.as_ref()).map_err(LogError::io(dir))?;
        replayed.segments.push(segment);
        dir_changed = true;
    }
    if let Some(m) = recorded.as_ref().filter(|m| m.end > replayed.end) {
        let file = replayed.segments.last().map_or_else(|| dir.to_path_buf(), |s| s.path.clone());
        let reason = format!(
            "the log ends at index {} but {MANIFEST_FILE} recorded {} records as durable: {} acknowledged records are missing from the end",
            replayed.end,
            m.end,
            m.end - replayed.end
        );
        if !options.repair {
            return Err(LogError::Corrupt { file, offset: 0, reason });
        }
        tracing::warn!(file = %file.display(), "repair: {reason}; accepting the loss");
    }
    // After a process crash the replayed records may still be only in the
    // page cache; syncing once here lets the log start with synced() == end().
    if let Some(active) = replayed.segments.last() {
        active.file().and_then(|f| f.sync_data()).map_err(LogError::io(&active.path))?;
    }
    if dir_changed {
        fs.sync_dir(dir).map_err(LogError::io(dir))?;
    }
    let found = Manifest::new(
        snapshot.as_ref().map(|m| m.base),
        replayed.segments.iter().map(|s| s.base).collect(),
        replayed.end,
    );
    if recorded.as_ref() != Some(&found) {
        if recorded.is_none() && !listing.segments.is_empty() {
            tracing::info!(
                dir = %dir.display(),
                segments = found.segments.len(),
                end = found.end,
                "no {MANIFEST_FILE} (a data directory from before manifests): recording what was found"
            );
        }
        manifest::write(fs, dir, &found).map_err(LogError::io(&manifest::path(dir)))?;
    }
    Ok(Recovered { segments: replayed.segments, end: replayed.end, snapshot })
}

/// Reads and removes the clean-shutdown marker; returns `(active base,
/// size)` if one was there, could be removed, and a trusting replay will use
/// it. The removal is made durable at
/// once (even if this open fails later), so that a marker can never come
/// back after a crash and vouch for a segment that was cut back by
/// `--repair` and then grew to the same size again: a size match means
/// "unchanged" only while the segment has only ever grown since the marker
/// was written.
fn take_clean_marker(fs: &dyn FileSystem, dir: &Path, replay: Replay) -> Option<(u64, u64)> {
    let path = dir.join(CLEAN_MARKER);
    let text = String::from_utf8(fs.read(&path).ok()?).unwrap_or_default();
    if let Err(e) = fs.remove_file(&path).and_then(|()| fs.sync_dir(dir)) {
        tracing::warn!(file = %path.display(), error = %e, "cannot remove the clean-shutdown marker; not using it");
        return None;
    }
    if replay == Replay::Full {
        return None;
    }
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    match (fields.next(), fields.next(), fields.next()) {
        (Some(Ok(base)), Some(Ok(bytes)), None) => Some((base, bytes)),
        _ => {
            // Possible after a machine crash: the marker is written without fsync.
            tracing::warn!(file = %path.display(), "ignoring an unreadable clean-shutdown marker");
            None
        }
    }
}

/// The directory's manifest, if it has one. An unreadable one (never left by
/// a crash: it is replaced by rename) refuses the open unless repairing.
fn read_manifest(fs: &dyn FileSystem, dir: &Path, repair: bool) -> Result<Option<Manifest>, LogError> {
    match manifest::read(fs, dir) {
        Ok(m) => Ok(m),
        Err(e) if repair => {
            tracing::warn!(file = %manifest::path(dir).display(), error = %e, "repair: ignoring an unreadable manifest");
            Ok(None)
        }
        Err(e) => Err(LogError::io(&manifest::path(dir))(e)),
    }
}

/// The first file `recorded` says the log must have and that is missing:
/// the snapshot (or a newer one), and every segment from the snapshot the
/// log starts from on (older ones a newer snapshot covers may be gone).
fn missing_files(
    dir: &Path,
    recorded: &Manifest,
    snapshot: Option<&SnapshotMeta>,
    listing: &Listing,
) -> Option<(PathBuf, String)> {
    if let Some(base) = recorded.snapshot.filter(|&b| snapshot.is_none_or(|m| m.base < b)) {
        return Some((
            dir.join(snapshot_file_name(base)),
            format!(
                "snapshot {} recorded in {MANIFEST_FILE} is missing: the state it holds (everything before index {base}) would be lost",
                snapshot_file_name(base)
            ),
        ));
    }
    let from = snapshot.map_or(0, |m| m.base);
    let missing: Vec<u64> = recorded
        .segments
        .iter()
        .copied()
        .filter(|&b| b >= from && listing.segments.binary_search(&b).is_err())
        .collect();
    let first = *missing.first()?;
    let names: Vec<String> = missing.iter().take(5).map(|&b| segment_file_name(b)).collect();
    Some((
        dir.join(segment_file_name(first)),
        format!(
            "{} segment(s) recorded in {MANIFEST_FILE} are missing ({}{}): the records they held would be lost",
            missing.len(),
            names.join(", "),
            if missing.len() > names.len() { ", …" } else { "" }
        ),
    ))
}

/// Creates the log directory if needed (durably, every level of it: the
/// simulated-disk tests lost whole logs when only the last level's parent
/// was fsynced); returns whether it did.
fn create_dir(fs: &dyn FileSystem, dir: &Path) -> Result<bool, LogError> {
    create_dir_all_durably_on(fs, dir).map_err(LogError::io(dir))
}

fn list(fs: &dyn FileSystem, dir: &Path) -> Result<Listing, LogError> {
    let mut listing = Listing::default();
    for name in fs.list(dir).map_err(LogError::io(dir))? {
        let Some(name) = name.to_str() else { continue };
        let path = dir.join(name);
        if name == MANIFEST_FILE {
            continue;
        }
        if name == MANIFEST_TMP {
            // An interrupted manifest update: the manifest itself is intact.
            fs.remove_file(&path).map_err(LogError::io(&path))?;
            continue;
        }
        if let Some(base) = parse_segment_file_name(name) {
            listing.segments.push(base);
        } else if let Some(base) = parse_snapshot_file_name(name) {
            listing.snapshots.push(base);
        } else if is_tmp_file_name(name) {
            listing.tmp.push(path);
        } else {
            tracing::debug!(file = %path.display(), "ignoring an unknown file in a log directory");
        }
    }
    listing.segments.sort_unstable();
    listing.snapshots.sort_unstable();
    Ok(listing)
}

/// The newest snapshot that is valid and whose segments are all present, or
/// None to replay segments alone. Falls back to replaying from index 0 when
/// that history is still there, and otherwise refuses (unless repairing),
/// because the state before the oldest segment would be missing.
fn choose_snapshot(
    fs: &dyn FileSystem,
    dir: &Path,
    listing: &Listing,
    repair: bool,
) -> Result<Option<SnapshotMeta>, LogError> {
    let mut first_problem: Option<(PathBuf, u64, String)> = None;
    let mut newest_valid: Option<SnapshotMeta> = None;
    for &base in listing.snapshots.iter().rev() {
        let path = dir.join(snapshot_file_name(base));
        match snapshot::validate(fs, dir, base).map_err(LogError::io(&path))? {
            Ok(meta) if listing.segments.binary_search(&base).is_ok() => {
                if first_problem.is_some() {
                    tracing::warn!(file = %path.display(), "falling back to an older snapshot");
                }
                return Ok(Some(meta));
            }
            Ok(meta) => {
                let reason = format!(
                    "snapshot is valid but segment {} (the records after it) is missing",
                    segment_file_name(base)
                );
                tracing::warn!(file = %path.display(), "{reason}");
                first_problem.get_or_insert((path, 0, reason));
                newest_valid.get_or_insert(meta);
            }
            Err(invalid) => {
                tracing::warn!(file = %path.display(), offset = invalid.offset, "{}", invalid.reason);
                first_problem.get_or_insert((path, invalid.offset, invalid.reason));
            }
        }
    }
    let Some((file, offset, reason)) = first_problem else {
        return Ok(None);
    };
    if listing.segments.first() == Some(&0) {
        tracing::warn!(
            dir = %dir.display(),
            "no usable snapshot; replaying the whole history from index 0 instead"
        );
        return Ok(None);
    }
    if !repair {
        return Err(LogError::Corrupt { file, offset, reason });
    }
    match &newest_valid {
        Some(meta) => tracing::warn!(
            file = %meta.path.display(),
            "repair: starting from this snapshot; records after it that cannot be replayed are dropped"
        ),
        None => tracing::warn!(
            dir = %dir.display(),
            "repair: no valid snapshot; starting from the oldest segment, the state before it is lost"
        ),
    }
    Ok(newest_valid)
}

/// What [`replay_segments`] found.
#[derive(Debug)]
struct Replayed {
    segments: Vec<Segment>,
    end: u64,
    dir_changed: bool,
}

/// Replays segments `bases` (sorted) in order, checking that they are
/// contiguous from `first_index`, truncating a torn tail of the last one, and
/// applying `repair` to anything worse.
///
/// `recovery_point` is the end the manifest recorded as durable (Kafka's
/// recovery point). Damage in the last segment at or after it is truncated
/// whatever its shape, as Kafka does: nothing there was ever covered by a
/// recorded fsync, and a disk that writes unsynced pages back out of order
/// can leave a hole of zeros with later, never-synced frames after it. If
/// any of those frames had been acknowledged, the fsync that covered it
/// would have covered the hole too, so truncating at the first bad frame
/// loses nothing acknowledged. Damage before the recovery point, or in a
/// closed segment (fsynced at its roll), is still refused as corruption.
#[allow(clippy::too_many_arguments, reason = "one private step of `recover`, which owns every argument")]
fn replay_segments(
    dir: &Path,
    bases: &[u64],
    first_index: u64,
    options: &LogOptions,
    replay: Replay,
    clean: Option<(u64, u64)>,
    recovery_point: Option<u64>,
    visit: &mut Visitor<'_>,
) -> Result<Replayed, LogError> {
    let repair = options.repair;
    let fs = &*options.fs;
    let mut replayed = Replayed { segments: Vec::with_capacity(bases.len()), end: first_index, dir_changed: false };
    for (i, &base) in bases.iter().enumerate() {
        let later = bases.get(i + 1..).unwrap_or_default();
        let path = dir.join(segment_file_name(base));
        if base != replayed.end {
            let reason =
                format!("segment starts at index {base} but the records before it end at index {}", replayed.end);
            if !repair {
                return Err(LogError::Corrupt { file: path, offset: 0, reason });
            }
            tracing::warn!(file = %path.display(), dropped_segments = later.len() + 1, "repair: {reason}; deleting it and every later segment");
            delete_segments(fs, dir, bases.get(i..).unwrap_or_default())?;
            replayed.dir_changed = true;
            break;
        }
        let mut segment = Segment::open(fs, dir, base, options.files.as_ref()).map_err(LogError::io(&path))?;
        if let Replay::TrustClosed { prefix } = replay {
            // Closed, so fsynced at its roll; or active and unchanged since
            // its fsync at a clean shutdown: only its headers are read.
            let unchanged = clean == Some((base, segment.bytes));
            if !later.is_empty() || unchanged {
                replayed.end = base.saturating_add(segment.replay_headers(prefix, visit)?);
                replayed.segments.push(segment);
                continue;
            }
        }
        let scan = segment.replay(visit)?;
        replayed.end = base.saturating_add(scan.records);
        match scan.stop {
            Stop::End => replayed.segments.push(segment),
            stop if later.is_empty() && stop.is_torn_tail() => {
                tracing::warn!(
                    file = %path.display(),
                    offset = scan.stop_offset,
                    dropped_bytes = segment.bytes.saturating_sub(scan.stop_offset),
                    "truncating a torn write at the end of the log ({})",
                    stop.describe()
                );
                segment.truncate(scan.stop_offset).map_err(LogError::io(&path))?;
                replayed.segments.push(segment);
            }
            stop if later.is_empty() && recovery_point.is_some_and(|point| replayed.end >= point) => {
                tracing::warn!(
                    file = %path.display(),
                    offset = scan.stop_offset,
                    index = replayed.end,
                    recovery_point = recovery_point.unwrap_or_default(),
                    dropped_bytes = segment.bytes.saturating_sub(scan.stop_offset),
                    "truncating unsynced writes after the recovery point ({}): a crash left them out of order",
                    stop.describe()
                );
                segment.truncate(scan.stop_offset).map_err(LogError::io(&path))?;
                replayed.segments.push(segment);
            }
            stop => {
                let mut reason = stop.describe();
                if !later.is_empty() {
                    reason.push_str(" (in a segment that is not the last one)");
                }
                if !repair {
                    return Err(LogError::Corrupt { file: path, offset: scan.stop_offset, reason });
                }
                tracing::warn!(
                    file = %path.display(),
                    offset = scan.stop_offset,
                    dropped_bytes = segment.bytes.saturating_sub(scan.stop_offset),
                    dropped_segments = later.len(),
                    "repair: {reason}; truncating here and deleting every later segment"
                );
                segment.truncate(scan.stop_offset).map_err(LogError::io(&path))?;
                delete_segments(fs, dir, later)?;
                replayed.dir_changed = true;
                replayed.segments.push(segment);
                break;
            }
        }
    }
    Ok(replayed)
}

fn delete_segments(fs: &dyn FileSystem, dir: &Path, bases: &[u64]) -> Result<(), LogError> {
    for &base in bases {
        let path = dir.join(segment_file_name(base));
        fs.remove_file(&path).map_err(LogError::io(&path))?;
    }
    Ok(())
}
