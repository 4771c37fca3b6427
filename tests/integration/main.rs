//! The daemon's integration tests, one module per area, in one test binary.
//!
//! One binary rather than one per file: every test binary compiles and links
//! its own copy of the test client and of the daemon code it instantiates
//! (tokio, kafka-protocol's encoders and decoders), which took about 70 s of
//! CPU per file at the `ci` profile; together they build once. Tests that
//! need a process of their own stay separate: `hostile_input` and
//! `fuzz_regressions` install a global allocator, `metrics_memory` measures
//! the process's allocations.
//!
//! Run one area with `cargo test --test integration sidecar::`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "Test support code: a failed unwrap, expect or index is the test's verdict."
)]

mod common;
mod support;

mod authorization;
mod cli;
mod cluster_apis;
mod connection_limits;
mod crash_recovery;
mod create_partitions;
mod data_plane;
mod delegation_tokens;
mod descriptor_limits;
mod group_apis;
mod keystores;
mod observability;
mod quotas;
mod request_bounds;
mod security;
mod sidecar;
mod sidecar_security;
