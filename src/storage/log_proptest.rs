//! Property: whatever was appended, snapshotted and reopened, and however the
//! end of the last segment was torn, opening replays exactly the records that
//! were still intact on disk, up to the end of the last append that survived
//! whole, in order, at their original locations, and never anything else; and the log can then be appended to again. Unless
//! the damage reaches records the manifest recorded as durable (at a reopen,
//! a roll or a snapshot), which no crash can tear: then the open refuses.

use std::path::Path;

use proptest::collection::vec;
use proptest::prelude::*;

use super::log::{Location, Log};
use super::segment::parse_segment_file_name;
use super::test_util::*;

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<Vec<u8>>),
    /// Snapshot whose content is every payload so far, one record each.
    Snapshot,
    Reopen,
}

/// What happens to the end of the last segment file before the final reopen.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Cut this many bytes off the end, as a crash mid-append does.
    Truncate(u64),
    /// Overwrite this many bytes at the end with zeros, as a crash does when
    /// the file size reached the disk but the data did not.
    ZeroTail(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => vec(vec(any::<u8>(), 1..40), 1..5).prop_map(Op::Append),
        1 => Just(Op::Snapshot),
        1 => Just(Op::Reopen),
    ]
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![(0u64..120).prop_map(Damage::Truncate), (0u64..120).prop_map(Damage::ZeroTail),]
}

/// Everything appended, where it went, and the latest snapshot's base.
#[derive(Debug, Default)]
struct Model {
    payloads: Vec<Vec<u8>>,
    locations: Vec<Location>,
    /// Per record: whether it is the last of its append.
    ends_write: Vec<bool>,
    snapshot_base: Option<u64>,
}

impl Model {
    fn append(&mut self, log: &mut Log, batch: &[Vec<u8>]) -> Result<(), TestCaseError> {
        let refs: Vec<&[u8]> = batch.iter().map(|p| p.as_slice()).collect();
        let locations = log.append(&refs).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let indices: Vec<u64> = locations.iter().map(|l| l.index).collect();
        let first = self.payloads.len() as u64;
        prop_assert_eq!(indices, (first..first + batch.len() as u64).collect::<Vec<_>>());
        self.payloads.extend_from_slice(batch);
        self.locations.extend(locations);
        self.ends_write.extend((1..=batch.len()).map(|k| k == batch.len()));
        Ok(())
    }

    /// Checks a replay against the first `end` records of the model.
    fn check(&self, seen: &Replayed, end: u64) -> Result<(), TestCaseError> {
        let base = self.snapshot_base.unwrap_or(0);
        let (snap, rest): (Vec<_>, Vec<_>) = seen.iter().partition(|(l, _)| l.is_snapshot());
        prop_assert!(seen.iter().take(snap.len()).all(|(l, _)| l.is_snapshot()), "snapshot first");
        prop_assert!(snap.iter().all(|(l, _)| l.index == base));
        let snap_payloads: Vec<&[u8]> = snap.iter().map(|(_, p)| p.as_slice()).collect();
        let expected_snap: Vec<&[u8]> = match self.snapshot_base {
            Some(b) => self.payloads.iter().take(b as usize).map(|p| p.as_slice()).collect(),
            None => Vec::new(),
        };
        prop_assert_eq!(snap_payloads, expected_snap);

        let replayed: Vec<(Location, &[u8])> = rest.iter().map(|(l, p)| (*l, p.as_slice())).collect();
        let expected: Vec<(Location, &[u8])> =
            (base..end).map(|i| (self.locations[i as usize], self.payloads[i as usize].as_slice())).collect();
        prop_assert_eq!(replayed, expected);
        Ok(())
    }
}

fn reopen(dir: &Path, segment_bytes: u64) -> Result<(Log, Replayed), TestCaseError> {
    try_open(dir, options(segment_bytes)).map_err(|e| TestCaseError::fail(e.to_string()))
}

/// Damages the last segment file; returns its base and how many of its
/// records are still byte-for-byte intact at its start.
fn damage_last_segment(dir: &Path, model: &Model, damage: Damage) -> (u64, u64) {
    let last = files(dir).iter().filter_map(|n| parse_segment_file_name(n)).max().unwrap();
    let path = segment_path(dir, last);
    let original = std::fs::read(&path).unwrap();
    let mut damaged = original.clone();
    match damage {
        Damage::Truncate(n) => damaged.truncate(original.len().saturating_sub(n as usize)),
        Damage::ZeroTail(n) => {
            let from = original.len().saturating_sub(n as usize);
            damaged[from..].fill(0);
        }
    }
    std::fs::write(&path, &damaged).unwrap();
    // Intact records count only up to the end of the last whole append.
    let intact = model
        .locations
        .iter()
        .zip(&model.ends_write)
        .filter(|(l, _)| l.segment_base == last)
        .take_while(|(l, _)| {
            let range = l.position as usize..l.position as usize + l.frame_len();
            damaged.get(range.clone()).is_some_and(|d| Some(d) == original.get(range))
        })
        .enumerate()
        .filter(|(_, (_, &ends))| ends)
        .last()
        .map_or(0, |(k, _)| k as u64 + 1);
    (last, intact)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn reopening_replays_exactly_the_intact_prefix(
        segment_bytes in 1u64..200,
        ops in vec(op(), 0..12),
        damage in damage(),
        more in vec(vec(any::<u8>(), 1..40), 1..3),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut model = Model::default();
        let (mut log, seen) = reopen(dir, segment_bytes)?;
        prop_assert!(seen.is_empty());

        for op in ops {
            match op {
                Op::Append(batch) => model.append(&mut log, &batch)?,
                Op::Snapshot => {
                    let plan = log.begin_snapshot().unwrap();
                    prop_assert_eq!(plan.base(), model.payloads.len() as u64);
                    let base = plan.base();
                    let done = plan.write(&mut model.payloads.clone().into_iter()).unwrap();
                    log.finish_snapshot(done).unwrap();
                    model.snapshot_base = Some(base);
                    prop_assert_eq!(log.start(), base);
                }
                Op::Reopen => {
                    drop(log);
                    let (reopened, seen) = reopen(dir, segment_bytes)?;
                    model.check(&seen, model.payloads.len() as u64)?;
                    log = reopened;
                }
            }
        }
        drop(log);

        let durable = super::manifest::read(&super::disk::OsFs, dir).unwrap().map_or(0, |m| m.end);
        let (last_base, intact) = damage_last_segment(dir, &model, damage);
        let end = last_base + intact;
        if end < durable {
            let refused = matches!(try_open(dir, options(segment_bytes)), Err(super::error::LogError::Corrupt { .. }));
            prop_assert!(refused, "records below the recorded end {} were cut to {}", durable, end);
            return Ok(());
        }
        let (mut log, seen) = reopen(dir, segment_bytes)?;
        model.check(&seen, end)?;
        prop_assert_eq!((log.end(), log.synced()), (end, end));

        // Forget what was lost, then the log must go on from there.
        model.payloads.truncate(end as usize);
        model.locations.truncate(end as usize);
        model.append(&mut log, &more)?;
        drop(log);
        let (_, seen) = reopen(dir, segment_bytes)?;
        model.check(&seen, model.payloads.len() as u64)?;
    }
}
