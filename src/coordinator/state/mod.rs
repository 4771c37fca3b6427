//! The pure state machine of a shard: `(state, request, now) -> replies +
//! records + timer changes`. Nothing here owns a task, a channel, a clock
//! or a file; durable state changes only by replaying the records the core
//! appends (`store`), the same fold recovery runs. See `core`.

pub mod bounded_history;
pub mod classic;
pub mod consumer;
pub mod core;
pub mod delegation;
#[cfg(test)]
mod delegation_tests;
#[cfg(test)]
mod import_tests;
pub mod messages;
pub mod offsets;
#[cfg(test)]
mod offsets_tests;
pub mod prechecks;
pub mod records;
#[cfg(test)]
mod replay_tests;
pub mod store;
#[cfg(test)]
pub mod testkit;
pub mod timers;

/// A HashMap with a fast, randomly seeded hasher (foldhash): group, member
/// and topic names are hashed on every request and every replayed record,
/// and SipHash dominated the recovery profile.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A shard's live groups by id.
pub type Groups = FastMap<String, classic::group::ClassicGroup>;
