//! The daemon's metrics must not grow with the requests it serves: a
//! histogram sample (every request's duration) is queued by the recorder
//! until it is folded into its buckets, and a daemon nobody scrapes must
//! fold them anyway. Its own process, with the metered allocator, so that
//! the recorder is fresh and the bytes live can be read.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "Test support code: a failed unwrap, expect or index is the test's verdict."
)]

use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: kcoord::alloc_meter::MeteredAllocator = kcoord::alloc_meter::MeteredAllocator;

/// As many request durations as a busy daemon records in a few seconds.
const SAMPLES: usize = 1_000_000;

#[test]
fn request_duration_samples_are_folded_without_a_scrape() {
    kcoord::observability::metrics::install().expect("the recorder installs");
    let histogram = metrics::histogram!("kcoord_request_duration_seconds", "api" => "Heartbeat", "version" => "4");
    histogram.record(0.0001);
    let baseline = kcoord::alloc_meter::live();
    for _ in 0..SAMPLES {
        histogram.record(0.0001);
    }
    let queued = kcoord::alloc_meter::live().saturating_sub(baseline);
    // Unless upkeep ran in between, the samples are queued: several bytes each.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut held = queued;
    while held > 1 << 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        // A sample now and then lets the queue's freed blocks be reclaimed
        // (they are released once no recording thread can still see them).
        histogram.record(0.0001);
        held = kcoord::alloc_meter::live().saturating_sub(baseline);
    }
    assert!(
        held <= 1 << 20,
        "{SAMPLES} request durations still hold {held} bytes (right after recording: {queued}); nothing folded them"
    );
}
