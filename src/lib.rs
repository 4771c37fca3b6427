//! kcoord: a Kafka-wire-compatible group coordinator.
//!
//! The daemon is a library first so it can be embedded in a Rust broker or
//! started in-process by tests: [`Daemon::start`] binds the listener and
//! returns a handle whose [`RunningDaemon::shutdown`] stops it cleanly.

pub mod admin;
pub mod alloc_guard;
pub mod alloc_meter;
pub mod be_int;
pub mod catalog;
pub mod cluster;
pub mod config;
pub mod coordinator;
pub mod descriptors;
pub mod error_code;
pub mod fuzzing;
pub mod observability;
pub mod protocol;
pub mod quota;
pub mod security;
pub mod server;
pub mod sidecar;
pub mod storage;
pub mod text;
pub mod topic_deletion;
pub mod topics;
pub mod wall_clock;

mod daemon;

pub use config::Config;
pub use daemon::{Daemon, RunningDaemon, StartError, StartOptions};
pub use error_code::ErrorCode;
