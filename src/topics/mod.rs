//! Topics: the standalone data plane that stores the data of the topics
//! the catalog (`crate::catalog`: names, ids, partition counts, config
//! overrides, persisted in `topics.json`) lists.
//!
//! - `service`: [`DataPlane`], the open partition logs of every topic, its
//!   background tasks (retention, interval fsync) and shutdown.
//! - `partition`: one partition log (the shared `storage::Log`, one Kafka
//!   RecordBatch per record) with its offset index and producer state.
//! - `batch`: RecordBatch v2 header parsing, validation and rewriting;
//!   `record_check`: every record of a produced batch, decompressed.
//! - `producer_state`, `producer_ids`: idempotent producers.
//! - `durability`: group-commit fsync of partition logs.
//! - `retention`: deleting old segments by time and size.
//! - `limits`: the topic and partition totals and Kafka's per-request bound.
//! - `produce`, `fetch`, `list_offsets`, `admin` (CreateTopics, and the
//!   data plane's step of DeleteTopics), `create_partitions`
//!   (CreatePartitions): the request handlers. The whole deletion, which
//!   also tombstones committed offsets, is `crate::topic_deletion`.

pub mod admin;
pub mod batch;
pub mod create_partitions;
pub mod durability;
pub mod fetch;
pub mod limits;
pub mod list_offsets;
pub mod partition;
pub mod produce;
pub mod producer_ids;
pub mod producer_state;
pub mod record_check;
pub mod retention;
pub mod service;

pub use service::{DataPlane, DataPlaneSettings};

#[cfg(test)]
mod crash_sim_tests;
