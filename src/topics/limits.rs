//! How many topics and partitions this node holds, and how much one request
//! may create.
//!
//! Why: every partition costs a directory, files, memory for its index and
//! start-up time, and nothing stopped one Metadata request with
//! auto-creation from creating thousands of topics. Kafka bounds this in
//! its controller: one operation may produce at most 10,000 metadata records
//! (`QuorumController.MAX_RECORDS_PER_USER_OP`; a topic is one TopicRecord,
//! one PartitionRecord per partition and one ConfigRecord per config), and
//! past it the whole operation fails with POLICY_VIOLATION, "Unable to
//! perform excessively large batch operation.". kcoord applies that bound
//! to CreateTopics as Kafka does, and adds:
//!
//! - `topics.max_topics` and `topics.max_partitions`, totals past which a
//!   creation is refused with POLICY_VIOLATION (the error of Kafka's
//!   `CreateTopicPolicy`, and what ZooKeeper-mode Kafka put in a Metadata
//!   answer whose auto-creation failed: the creation's own error);
//! - `topics.max_auto_create_per_request`, the topics one Metadata request
//!   may auto-create (see `cluster.rs`).
//!
//! Refusals are logged at WARN, at most once a second with their count.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::catalog::{Catalog, CatalogError};
use crate::error_code::ErrorCode;
use crate::observability::rate_log::RateLimitedLog;

/// Kafka's `QuorumController.MAX_RECORDS_PER_USER_OP`.
pub const MAX_RECORDS_PER_USER_OP: u64 = 10_000;

/// Kafka's message when an operation exceeds [`MAX_RECORDS_PER_USER_OP`].
pub const EXCESSIVE_BATCH_MESSAGE: &str = "Unable to perform excessively large batch operation.";

/// The metadata records Kafka's controller writes to create a topic.
pub fn records_for_topic(partitions: i32, configs: usize) -> u64 {
    1 + u64::try_from(partitions.max(0)).unwrap_or(0) + configs as u64
}

/// The totals a node may hold.
#[derive(Debug)]
pub struct TopicLimits {
    max_topics: u32,
    max_partitions: u32,
    refusals: Mutex<RateLimitedLog>,
}

impl TopicLimits {
    pub fn new(max_topics: u32, max_partitions: u32) -> TopicLimits {
        TopicLimits { max_topics, max_partitions, refusals: Mutex::new(RateLimitedLog::new(Duration::from_secs(1))) }
    }

    /// Whether a topic of `partitions` partitions may be created now. The
    /// caller holds the admin lock, so the totals cannot change meanwhile.
    pub fn check(&self, catalog: &Catalog, name: &str, partitions: i32) -> Result<(), CatalogError> {
        let (topics, held) = catalog.totals();
        let wanted = u64::try_from(partitions.max(0)).unwrap_or(0);
        let reason = if topics >= u64::from(self.max_topics) {
            format!(
                "Unable to create topic {name}: this node holds {topics} topics, the most topics.max_topics ({}) allows.",
                self.max_topics
            )
        } else if held + wanted > u64::from(self.max_partitions) {
            format!(
                "Unable to create topic {name} with {partitions} partition(s): this node holds {held} partitions and \
                 topics.max_partitions ({}) allows {} more.",
                self.max_partitions,
                u64::from(self.max_partitions).saturating_sub(held)
            )
        } else {
            return Ok(());
        };
        self.note_refusal(name, &reason);
        Err(CatalogError { code: ErrorCode::POLICY_VIOLATION, message: reason })
    }

    /// Whether topic `name` may grow by `additional` partitions now
    /// (CreatePartitions); the caller holds the admin lock.
    pub fn check_growth(&self, catalog: &Catalog, name: &str, additional: i32) -> Result<(), CatalogError> {
        let (_, held) = catalog.totals();
        let wanted = u64::try_from(additional.max(0)).unwrap_or(0);
        if held + wanted <= u64::from(self.max_partitions) {
            return Ok(());
        }
        let reason = format!(
            "Unable to add {additional} partition(s) to topic {name}: this node holds {held} partitions and \
             topics.max_partitions ({}) allows {} more.",
            self.max_partitions,
            u64::from(self.max_partitions).saturating_sub(held)
        );
        self.note_refusal(name, &reason);
        Err(CatalogError { code: ErrorCode::POLICY_VIOLATION, message: reason })
    }

    /// Counts a refused creation and logs it at most once a second.
    pub fn note_refusal(&self, topic: &str, reason: &str) {
        metrics::counter!("kcoord_topic_creations_refused_total").increment(1);
        let due = self.refusals.lock().unwrap_or_else(|p| p.into_inner()).note(Instant::now());
        if let Some(refused) = due {
            tracing::warn!(
                topic,
                refused,
                "refusing topic creation: {reason} (refused counts every refusal since the previous line)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_counts_one_record_plus_one_per_partition_and_config() {
        assert_eq!(records_for_topic(3, 2), 6);
        assert_eq!(records_for_topic(-1, 0), 1);
    }

    #[test]
    fn creations_past_the_topic_or_partition_total_are_policy_violations() {
        let catalog = Catalog::in_memory(&[("a", 3), ("b", 2)]);
        let limits = TopicLimits::new(3, 8);
        assert!(limits.check(&catalog, "c", 3).is_ok());
        let err = limits.check(&catalog, "c", 4).unwrap_err();
        assert_eq!(err.code, ErrorCode::POLICY_VIOLATION);
        assert!(err.message.contains("topics.max_partitions (8) allows 3 more"), "{}", err.message);
        let full = Catalog::in_memory(&[("a", 1), ("b", 1), ("c", 1)]);
        let err = limits.check(&full, "d", 1).unwrap_err();
        assert_eq!(err.code, ErrorCode::POLICY_VIOLATION);
        assert!(err.message.contains("topics.max_topics (3)"), "{}", err.message);
    }
}
