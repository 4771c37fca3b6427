//! Replays the fuzz seeds and minimised crashers (fuzz/seeds/<target>/,
//! fuzz/regressions/<target>/) through the fuzz entry points, so every
//! `cargo test` covers them, with the same metered allocator as the fuzz
//! targets (the `session` target's allocation cap holds here too). Run the
//! fuzzers themselves with `scripts/fuzz` (see docs/testing.md).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "Test support code: a failed unwrap, expect or index is the test's verdict."
)]

use std::path::Path;

#[global_allocator]
static ALLOC: kcoord::alloc_meter::MeteredAllocator = kcoord::alloc_meter::MeteredAllocator;

/// The allocation meter counts every thread of the process, so the tests
/// here take turns: another target's hostile allocation must not be counted
/// against a `session` input.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn replay(target: &str, run: fn(&[u8])) -> usize {
    replay_from(&[target], target, run)
}

/// Replays the seeds of every target in `seeds_of` and the regressions of
/// `target` through `run`.
fn replay_from(seeds_of: &[&str], target: &str, run: fn(&[u8])) -> usize {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let dirs = seeds_of.iter().map(|t| root.join("seeds").join(t)).chain([root.join("regressions").join(target)]);
    let mut n = 0;
    for dir in dirs {
        let Ok(dir) = std::fs::read_dir(dir) else { continue };
        for entry in dir.flatten() {
            let path = entry.path();
            if path.file_name().is_some_and(|f| f.to_string_lossy().starts_with('.')) {
                continue;
            }
            let data = std::fs::read(&path).unwrap();
            run(&data);
            n += 1;
        }
    }
    n
}

#[test]
fn frame_seeds_and_regressions_replay_cleanly() {
    assert!(replay("frame", kcoord::fuzzing::frame) > 0);
}

#[test]
fn record_seeds_and_regressions_replay_cleanly() {
    assert!(replay("records", kcoord::fuzzing::records) > 0);
}

#[test]
fn log_recovery_seeds_and_regressions_replay_cleanly() {
    assert!(replay("log_recovery", kcoord::fuzzing::log_recovery) > 0);
}

#[test]
fn sidecar_seeds_and_regressions_replay_cleanly() {
    assert!(replay("sidecar", kcoord::fuzzing::sidecar) > 0);
}

#[test]
fn session_seeds_and_regressions_replay_cleanly() {
    assert!(replay("session", kcoord::fuzzing::session) >= kcoord::fuzzing::session_seeds().len());
}

/// The `sidecar_session` target starts from the `session` target's seeds:
/// the same conversations, through a sidecar.
#[test]
fn session_seeds_and_sidecar_regressions_replay_cleanly_through_a_sidecar() {
    let n = replay_from(&["session", "sidecar_session"], "sidecar_session", kcoord::fuzzing::sidecar_session);
    assert!(n >= kcoord::fuzzing::session_seeds().len());
}

/// The committed seeds of the `session` target are the ones
/// `fuzzing::session_seeds` writes; `KCOORD_WRITE_FUZZ_SEEDS=1` rewrites
/// them after a change there.
#[test]
fn session_seeds_are_generated_by_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/session");
    let seeds = kcoord::fuzzing::session_seeds();
    assert_eq!(seeds.len(), 16, "a seed failed to encode");
    if std::env::var_os("KCOORD_WRITE_FUZZ_SEEDS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in &seeds {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    for (name, bytes) in &seeds {
        let committed = std::fs::read(dir.join(name)).unwrap_or_default();
        assert!(&committed == bytes, "fuzz/seeds/session/{name} is stale: rerun with KCOORD_WRITE_FUZZ_SEEDS=1");
    }
}
