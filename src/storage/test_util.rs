//! Helpers shared by the storage tests.

use std::path::{Path, PathBuf};

use super::error::LogError;
use super::log::{Location, Log, LogOptions};
use super::segment::segment_file_name;
use super::snapshot::snapshot_file_name;

/// A replayed record: where it was and what it held.
pub(crate) type Replayed = Vec<(Location, Vec<u8>)>;

pub(crate) fn options(segment_bytes: u64) -> LogOptions {
    LogOptions::new(segment_bytes, false)
}

pub(crate) fn repairing(segment_bytes: u64) -> LogOptions {
    LogOptions::new(segment_bytes, true)
}

/// Opens the log and collects everything replayed.
pub(crate) fn try_open(dir: &Path, options: LogOptions) -> Result<(Log, Replayed), LogError> {
    let mut seen = Vec::new();
    let log = Log::open(dir, options, &mut |loc, payload| {
        seen.push((loc, payload.to_vec()));
        Ok(())
    })?;
    Ok((log, seen))
}

pub(crate) fn open(dir: &Path, options: LogOptions) -> (Log, Replayed) {
    try_open(dir, options).unwrap()
}

/// The payloads of a replay, for comparisons.
pub(crate) fn payloads(replayed: &Replayed) -> Vec<Vec<u8>> {
    replayed.iter().map(|(_, p)| p.clone()).collect()
}

/// A distinct, recognisable payload for record `i`.
pub(crate) fn record(i: u64) -> Vec<u8> {
    format!("record-{i:04}").into_bytes()
}

/// Appends records `range` one batch each, returning their locations.
pub(crate) fn append_records(log: &mut Log, range: std::ops::Range<u64>) -> Vec<Location> {
    range.flat_map(|i| log.append(&[&record(i)]).unwrap()).collect()
}

pub(crate) fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(segment_file_name(base))
}

pub(crate) fn snapshot_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(snapshot_file_name(base))
}

/// Sorted names of the files in `dir`, its manifest aside.
pub(crate) fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != super::manifest::MANIFEST_FILE)
        .collect();
    names.sort();
    names
}

/// Overwrites bytes of a file in place, as disk damage would.
pub(crate) fn patch(path: &Path, offset: usize, bytes: &[u8]) {
    let mut content = std::fs::read(path).unwrap();
    content[offset..offset + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, content).unwrap();
}

pub(crate) fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}
