//! `layout.json` on the simulated disk (see `storage::simdisk`): first
//! starts and format-1 migrations crashed at random points with random I/O
//! failures. After every crash:
//! - `layout.json` is the old file or the new one, byte for byte, never
//!   torn, and never missing or old once a write of it returned;
//! - the directory opens with the count it was created with (also after a
//!   first start that a crash interrupted), and another count is refused
//!   with the message that names the recorded one, never accepted.

use std::path::{Path, PathBuf};

use super::*;
use crate::storage::crash_sim::campaign;
use crate::storage::simdisk::{Faults, SimDisk};

fn read_layout(sim: &SimDisk, coord: &Path) -> Option<Vec<u8>> {
    sim.read(&coord.join(FILE)).ok()
}

#[test]
fn the_layout_file_is_old_or_new_and_the_count_never_changes_across_simulated_crashes() {
    campaign("the_layout_file_is_old_or_new", 100, |seed| {
        let sim = SimDisk::new(seed);
        for round in 0..6 {
            let coord = PathBuf::from(format!("/data/{round}/coordinator"));
            let coord = coord.as_path();
            // The data directory, as the daemon creates it before.
            fsutil::create_dir_all_durably_on(&sim, fsutil::parent_dir(coord)).unwrap();
            let shards = 1 + sim.draw(5) as u32;
            let old = format!(r#"{{"shards":{shards}}}"#).into_bytes();
            let new = serde_json::to_vec(&Layout { shards, version: FORMAT_VERSION }).unwrap();
            // A format-1 directory (one shard directory, an old layout), or
            // a new one.
            let format_1 = sim.draw(1) == 0;
            if format_1 {
                fsutil::create_dir_all_durably_on(&sim, &shard_dir(coord, 0)).unwrap();
                fsutil::write_atomically_on(&sim, &coord.join(FILE), &old).unwrap();
            }
            // Starts under faults, then a crash.
            let mut acked = false;
            for _ in 0..=sim.draw(2) {
                sim.set_faults(if sim.draw(2) == 0 { Faults::NONE } else { Faults::all(0.15) });
                // A wrong count is refused (before any write) once recorded.
                let wrong = read_layout(&sim, coord).is_some() && sim.draw(3) == 0;
                let configured = if wrong { shards + 1 } else { shards };
                match check_or_record_shard_count_on(&sim, coord, configured, false) {
                    Ok(()) => {
                        assert!(!wrong, "round {round}: started with another count than recorded");
                        acked = true;
                    }
                    Err(LayoutError::Mismatch { recorded, .. }) => assert!(wrong && recorded == shards),
                    Err(_) => {}
                }
            }
            for crash in 0..2 {
                sim.crash();
                sim.set_faults(Faults::NONE);
                let layout = read_layout(&sim, coord);
                match layout.as_deref() {
                    Some(bytes) if bytes == new => {}
                    Some(bytes) if bytes == old && format_1 && !acked => {}
                    None if !format_1 && !acked => {}
                    other => panic!(
                        "round {round}, crash {crash}: layout.json is {:?} (acknowledged: {acked})",
                        other.map(String::from_utf8_lossy)
                    ),
                }
                if layout.is_some() {
                    let err = check_or_record_shard_count_on(&sim, coord, shards + 1, false).unwrap_err().to_string();
                    assert!(err.contains(&format!("--set offsets.partitions={shards}")), "round {round}: {err}");
                    assert!(read_layout(&sim, coord) == layout, "round {round}: a refused start changed layout.json");
                }
                check_or_record_shard_count_on(&sim, coord, shards, false)
                    .unwrap_or_else(|e| panic!("round {round}: the directory no longer opens: {e}"));
                acked = true;
            }
        }
    });
}
