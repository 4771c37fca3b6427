//! Replays the fuzz seeds and minimised crashers (fuzz/seeds/<target>/,
//! fuzz/regressions/<target>/) through the fuzz entry points, so every
//! `cargo test` covers them. Run the fuzzers themselves with
//! `cd fuzz && cargo fuzz run -O -s none <target>` (see docs/testing.md).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "Test support code: a failed unwrap, expect or index is the test's verdict."
)]

use std::path::Path;

#[global_allocator]
static ALLOC: kcoord::alloc_guard::GuardedAllocator = kcoord::alloc_guard::GuardedAllocator;

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut n = 0;
    for kind in ["seeds", "regressions"] {
        let Ok(dir) = std::fs::read_dir(root.join(kind).join(target)) else { continue };
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
