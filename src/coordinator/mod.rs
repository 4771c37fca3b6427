//! The group coordinator.
//!
//! `Coordinator` routes each group to one of `offsets.partitions` shards with
//! Kafka's `partitionFor`. A shard is a single-threaded actor (`shard`) that
//! owns a pure state machine (`core`, `classic`, `offsets`) and its log; the
//! durable state (`store`) changes only by replaying log records (`records`).

pub mod bounded_history;
pub mod classic;
pub mod clock;
pub mod consumer;
pub mod core;
pub mod delegation;
#[cfg(test)]
mod delegation_tests;
#[cfg(test)]
pub mod fake_log;
#[cfg(test)]
mod import_tests;
pub mod layout;
pub mod messages;
pub mod offsets;
#[cfg(test)]
mod offsets_tests;
pub mod prechecks;
pub mod records;
#[cfg(test)]
mod replay_tests;
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
pub mod store;
#[cfg(test)]
pub mod testkit;
pub mod timers;

pub use service::{Coordinator, Unavailable};

/// A HashMap with a fast, randomly seeded hasher (foldhash): group, member
/// and topic names are hashed on every request and every replayed record,
/// and SipHash dominated the recovery profile.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A shard's live groups by id.
pub type Groups = FastMap<String, classic::group::ClassicGroup>;
