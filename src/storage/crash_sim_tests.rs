//! Logs on the simulated disk, crashed at random points of random work
//! with random I/O failures: after every crash the log opens again, holds
//! every record that was reported durable, holds nothing that was not
//! appended, and (for a compacted log) its snapshot plus the records after
//! it rebuild exactly the state those records make.
//!
//! Two kinds of log, as the daemon runs them:
//! - an offsets log (coordinator shard): every file held open, compaction by
//!   snapshot, a clean shutdown that records the end in the manifest;
//! - a partition log: files through a bounded cache, replay from frame
//!   headers of closed segments, retention deleting the oldest segment,
//!   time rolls, a clean-shutdown marker.

use std::collections::BTreeMap;
use std::path::Path;

use super::crash_sim::campaign;
use super::simdisk::{Faults, SimDisk};
use super::{FileCache, Location, Log, LogError, LogOptions, Replay};

const DIR: &str = "/data/coordinator/shard-0000";

/// Steps of work per seed, between which crashes fall.
const STEPS: u32 = 160;

/// Per-operation failure probability while faults are on.
const FAULT_RATE: f64 = 0.04;

/// Bytes of a payload that identify it: what a header-only replay shows.
const ID_BYTES: usize = 16;

/// Record `index`: sets `key` to `value`. Its first [`ID_BYTES`] name it, so
/// that a record replayed at the wrong index, or twice, is noticed.
fn record(index: usize, key: u64, value: u64) -> Vec<u8> {
    format!("{index:0width$}k{key}={value}", width = ID_BYTES).into_bytes()
}

/// A snapshot's record: the live value of `key`.
fn snapshot_record(key: u64, value: u64) -> Vec<u8> {
    format!("{:>width$}k{key}={value}", "snapshot", width = ID_BYTES).into_bytes()
}

fn key_value(payload: &[u8]) -> (u64, u64) {
    let text = std::str::from_utf8(payload.get(ID_BYTES..).unwrap()).unwrap();
    let (key, value) = text.strip_prefix('k').unwrap().split_once('=').unwrap();
    (key.parse().unwrap(), value.parse().unwrap())
}

type State = BTreeMap<u64, u64>;

fn fold<'a>(state: &mut State, payloads: impl IntoIterator<Item = &'a Vec<u8>>) {
    for p in payloads {
        let (k, v) = key_value(p);
        state.insert(k, v);
    }
}

/// What the test knows the log must hold.
#[derive(Debug, Default)]
struct Model {
    /// Every record appended without error, by index.
    records: Vec<Vec<u8>>,
    /// The batch whose failed append could not be cut back (the log was
    /// poisoned): it may or may not be found after the crash.
    maybe: Vec<Vec<u8>>,
    /// Records below this index were reported durable.
    acked: u64,
    /// The first index retention has not deleted.
    start: u64,
    /// Where appends ended: a crash keeps the records of one append
    /// together, so a log ends only at one of these (or where it ended at
    /// the last open).
    write_ends: std::collections::BTreeSet<u64>,
}

impl Model {
    fn expected(&self, index: u64) -> Option<&Vec<u8>> {
        let i = usize::try_from(index).ok()?;
        self.records.get(i).or_else(|| self.maybe.get(i.checked_sub(self.records.len())?))
    }

    /// Checks a reopened log against the model, then makes the model
    /// follow it: everything it holds is durable now.
    fn check(&mut self, log: &Log, seen: &[(Location, Vec<u8>)], compacted: bool) {
        let end = log.end();
        assert!(
            end == self.acked || self.write_ends.contains(&end),
            "the log ends at {end}, in the middle of an append (appends ended at {:?})",
            self.write_ends
        );
        assert!(end >= self.acked, "acknowledged records lost: the log ends at {end}, {} were durable", self.acked);
        assert!(
            end <= (self.records.len() + self.maybe.len()) as u64,
            "the log ends at {end} but only {} records were appended",
            self.records.len()
        );
        if !compacted {
            assert!(log.start() <= self.start, "records at {}..{} vanished", self.start, log.start());
        }
        let mut state = State::new();
        let mut next = log.start();
        for (loc, payload) in seen {
            if loc.is_snapshot() {
                assert!(compacted, "a snapshot in a log that never wrote one");
                fold(&mut state, [payload]);
                continue;
            }
            assert_eq!(loc.index, next, "records are replayed densely and in order");
            let expected = self.expected(loc.index).unwrap();
            assert!(
                expected.starts_with(payload),
                "record {} holds {:?}, appended {:?}",
                loc.index,
                String::from_utf8_lossy(payload),
                String::from_utf8_lossy(expected)
            );
            next += 1;
        }
        assert_eq!(next, end, "the replay ends where the log does");
        let recovered: Vec<Vec<u8>> = (0..end).filter_map(|i| self.expected(i).cloned()).collect();
        if compacted {
            let segments = seen.iter().filter(|(l, _)| !l.is_snapshot()).map(|(_, p)| p);
            fold(&mut state, segments);
            let mut expected = State::new();
            fold(&mut expected, &recovered);
            assert_eq!(state, expected, "snapshot + records after it = the state of every record");
        }
        self.records = recovered;
        self.maybe.clear();
        self.write_ends.clear();
        self.acked = end;
        self.start = log.start();
    }
}

/// One run: a log, the disk it is on, and how it is opened.
struct Run {
    sim: SimDisk,
    options: LogOptions,
    replay: Replay,
    compacted: bool,
    model: Model,
}

impl Run {
    fn new(seed: u64, partition: bool) -> Run {
        let sim = SimDisk::new(seed);
        // Half the seeds: the disk may persist a later unsynced write
        // without an earlier one.
        sim.set_reorder(seed % 2 == 1);
        let files = partition.then(|| FileCache::on(sim.disk(), 8));
        let options = LogOptions {
            segment_bytes: 240,
            repair: false,
            files,
            fs: sim.disk(),
            journaled: false,
            batched_writes: false,
        };
        let replay = if partition { Replay::TrustClosed { prefix: ID_BYTES } } else { Replay::Full };
        Run { sim, options, replay, compacted: !partition, model: Model::default() }
    }

    /// Opens the log and checks it. Opening can fail on an injected fault:
    /// then the machine crashes again and the open is retried, without
    /// faults after a few attempts. It must never be refused as corrupt: on
    /// a disk that reorders write-back, a crash can leave a hole (zeros) in
    /// the unsynced tail of the active segment with later data after it, and
    /// recovery truncates that because it lies after the recovery point.
    fn open(&mut self) -> Log {
        for attempt in 0.. {
            if attempt == 3 {
                self.sim.set_faults(Faults::NONE);
            }
            let mut seen = Vec::new();
            let options = self.options.clone();
            let opened = Log::open_with(Path::new(DIR), options, self.replay, &mut |loc, p| {
                seen.push((loc, p.to_vec()));
                Ok(())
            });
            match opened {
                Ok(log) => {
                    self.model.check(&log, &seen, self.compacted);
                    return log;
                }
                Err(LogError::Io { .. }) if attempt < 3 => self.sim.crash(),
                Err(e) => panic!("the log does not open after a crash: {e}"),
            }
        }
        unreachable!()
    }

    fn crash(&mut self, log: Log) -> Log {
        drop(log);
        self.sim.crash();
        self.open()
    }

    fn append(&mut self, log: &mut Log) -> bool {
        let n = 1 + self.sim.draw(3) as usize;
        let first = self.model.records.len();
        let batch: Vec<Vec<u8>> =
            (first..first + n).map(|i| record(i, self.sim.draw(7), self.sim.draw(1_000_000))).collect();
        let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        match log.append(&refs) {
            Ok(_) => {
                self.model.records.extend(batch);
                self.model.write_ends.insert(self.model.records.len() as u64);
                true
            }
            Err(_) if log.poisoned().is_some() => {
                self.model.write_ends.insert((first + batch.len()) as u64);
                self.model.maybe = batch;
                false
            }
            Err(_) => true,
        }
    }

    /// Group commit; false if the fsync failed (the owner must stop).
    fn sync(&mut self, log: &mut Log) -> bool {
        let Some(job) = log.sync_job() else { return true };
        match job.run() {
            Ok(end) => {
                log.mark_synced(end);
                true
            }
            Err(_) => false,
        }
    }

    /// Compaction as the coordinator runs it; failures are given up on.
    fn snapshot(&mut self, log: &mut Log) {
        let Ok(plan) = log.begin_snapshot() else { return };
        let mut state = State::new();
        fold(&mut state, self.model.records.iter().take(usize::try_from(plan.base()).unwrap()));
        let mut payloads = state.into_iter().map(|(k, v)| snapshot_record(k, v));
        if let Ok(done) = plan.write(&mut payloads) {
            let _ = log.finish_snapshot(done);
        }
    }

    /// Retention as a partition runs it.
    fn retention(&mut self, log: &mut Log) {
        if self.sim.draw(1) == 0 {
            let _ = log.roll_active();
        }
        let _ = log.delete_oldest_segment();
    }

    fn toggle_faults(&mut self) {
        let on = self.sim.draw(1) == 0;
        self.sim.set_faults(if on { Faults::all(FAULT_RATE) } else { Faults::NONE });
    }

    fn run(mut self) -> super::simdisk::SimStats {
        let mut log = self.open();
        let trace = std::env::var_os("KCOORD_SIM_TRACE").is_some();
        for step in 0..STEPS {
            let action = self.sim.draw(19);
            if trace {
                eprintln!(
                    "step {step}: action {action}; end {} synced {} start {} segments {:?}",
                    log.end(),
                    log.synced(),
                    log.start(),
                    log.segments().iter().map(|s| (s.base, s.bytes)).collect::<Vec<_>>()
                );
            }
            let fine = match action {
                0..=8 => self.append(&mut log),
                9..=12 => self.sync(&mut log),
                13..=14 if self.compacted => {
                    self.snapshot(&mut log);
                    true
                }
                13..=14 => {
                    self.retention(&mut log);
                    true
                }
                15 => {
                    // A clean shutdown, then a restart or a crash.
                    let clean = if self.compacted { log.sync_and_record_end() } else { log.sync_and_mark_clean() };
                    if clean.is_ok() && self.sim.draw(1) == 0 {
                        self.model.acked = self.model.acked.max(log.synced());
                        drop(log);
                        log = self.open();
                        continue;
                    }
                    false
                }
                16 => {
                    self.toggle_faults();
                    true
                }
                _ => false,
            };
            // What the log reports durable is what its owner acknowledges.
            self.model.acked = self.model.acked.max(log.synced());
            self.model.start = self.model.start.max(log.start());
            if !fine || log.poisoned().is_some() {
                log = self.crash(log);
            }
        }
        let _ = self.crash(log);
        self.sim.stats()
    }
}

fn campaign_with_stats(name: &str, seeds: u64, partition: bool) {
    let totals = std::sync::Mutex::new(super::simdisk::SimStats::default());
    campaign(name, seeds, |seed| {
        let s = Run::new(seed, partition).run();
        let mut t = totals.lock().unwrap();
        t.crashes += s.crashes;
        t.injected_faults += s.injected_faults;
        t.dropped_writes += s.dropped_writes;
        t.torn_writes += s.torn_writes;
        t.dropped_name_changes += s.dropped_name_changes;
    });
    let t = *totals.lock().unwrap();
    eprintln!("{name}: {t:?}");
    if super::crash_sim::seeds(seeds).len() as u64 >= seeds {
        assert!(t.crashes > seeds && t.injected_faults > 0 && t.torn_writes > 0 && t.dropped_writes > 0, "{t:?}");
        assert!(t.dropped_name_changes > 0, "{t:?}");
    }
}

#[test]
fn an_offsets_log_keeps_every_acknowledged_record_and_its_snapshots_through_simulated_crashes() {
    campaign_with_stats("an_offsets_log_keeps", 150, false);
}

#[test]
fn a_partition_log_keeps_every_acknowledged_record_through_simulated_crashes_and_retention() {
    campaign_with_stats("a_partition_log_keeps", 150, true);
}
