//! Seeded crash campaigns on the simulated disk, shared by the storage and
//! data-plane tests: how many seeds to run, and how a failing one reports
//! itself.
//!
//! `KCOORD_SIM_SEEDS=N` runs N seeds instead of each test's default (long
//! campaigns: `scripts/simulate-disk`), from `KCOORD_SIM_SEEDS_FROM`
//! (default 0), so that a campaign can go on where the last one stopped;
//! `KCOORD_SIM_SEED=S` runs seed S alone, to replay a failure.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The seeds a test runs: `default` of them unless the environment says
/// otherwise (see the module docs).
pub(crate) fn seeds(default: u64) -> Vec<u64> {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(seed) = var("KCOORD_SIM_SEED") {
        return vec![seed];
    }
    let from = var("KCOORD_SIM_SEEDS_FROM").unwrap_or(0);
    (from..from.saturating_add(var("KCOORD_SIM_SEEDS").unwrap_or(default))).collect()
}

/// Runs `run(seed)` for every seed of [`seeds`]; a failing seed fails the
/// test with its number and the command that replays it.
pub(crate) fn campaign(name: &str, default: u64, run: impl Fn(u64)) {
    for seed in seeds(default) {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| run(seed))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{name} failed with seed {seed}: {message}\nreplay: KCOORD_SIM_SEED={seed} cargo test --profile ci --lib {name}");
        }
    }
}
