//! The group coordinator, in two layers whose folders show the split:
//!
//! - `state`: the pure state machine of a shard. `core` (`ShardCore`) takes
//!   a request and the time and gives replies, records and timer changes;
//!   `classic` and `consumer` are the two group protocols, `offsets` the
//!   committed offsets, `records` Kafka's `__consumer_offsets` schemas,
//!   `store` the durable state as the fold of those records, `timers` the
//!   deadlines. No tasks, no channels, no clocks, no files: the records it
//!   writes go through the `store::RecordSink` its caller passes in.
//! - `runtime`: what runs that state machine. `service` (`Coordinator`)
//!   routes each group to one of `offsets.partitions` shards (`routing`:
//!   Kafka's `partitionFor`); `shell` (`ShardShell`) holds a core and its log
//!   (`shard_log`) and decides when answers may leave; `shard` is the shell's
//!   tokio task; `clock` the injected time; `layout` the shard count the
//!   data directory was created with.
//!
//! `state` never imports `runtime` (a test in `tests/layers.rs` checks it).
//! The modules the rest of the crate names are re-exported here, so
//! `crate::coordinator::messages` and the like stay the paths to use.

pub mod runtime;
pub mod state;

pub use runtime::{layout, routing, service};
#[cfg(test)]
pub use state::testkit;
pub use state::{
    bounded_history, classic, consumer, core, delegation, messages, offsets, prechecks, records, store, timers,
};

pub use service::{Coordinator, Unavailable};
pub use state::{FastMap, Groups};
