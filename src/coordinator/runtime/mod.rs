//! What runs the pure state machine (`super::state`): the coordinator
//! service that routes requests to shards, the shard shell that holds a
//! core and its log and releases answers once they are durable, the tokio
//! task around each shell, the injected clock, and the data directory's
//! shard layout. Everything here may own tasks, channels and files; the
//! rules it keeps (fail-stop, acknowledge only durable writes) are in
//! `shell`.

pub mod clock;
#[cfg(test)]
pub mod fake_log;
pub mod layout;
pub mod routing;
pub mod service;
pub mod shard;
pub mod shard_log;
pub mod shell;
#[cfg(test)]
mod shell_tests;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod sim_client;
#[cfg(test)]
mod sim_consumer;
#[cfg(test)]
mod sim_storage;
