//! CreatePartitions: growing a topic, with the KRaft controller's checks and
//! messages (`ControllerApis.createPartitions`,
//! `ReplicationControlManager.createPartitions`), answered for a one-node
//! cluster.
//!
//! The new partitions' logs are opened first; then the catalog records the
//! new count (an atomic, fsynced write) while the in-memory topic map is
//! held, and the map gets the grown topic in the same critical section, so
//! Metadata never lists a partition that Produce cannot find, and the answer
//! is sent only once the new count is durable. A crash before the catalog
//! write leaves partition directories that the next start removes (they
//! were never acknowledged).
//!
//! Consumer groups follow on their own: the next ConsumerGroupHeartbeat of a
//! group subscribed to the topic sees a new partition count in the topic
//! image, so the group's metadata hash changes, its epoch is bumped and its
//! target assignment recomputed (as in Kafka). Classic groups are left to
//! their clients, which rejoin when their metadata shows more partitions.

use std::collections::HashMap;
use std::sync::Arc;

use super::service::{DataPlane, TopicLogs};
use crate::catalog::{CatalogError, TopicInfo, MAX_PARTITIONS};
use crate::error_code::ErrorCode;

/// One topic of a CreatePartitions request.
#[derive(Debug, Clone)]
pub struct GrowTopic {
    pub name: String,
    /// The new total partition count.
    pub count: i32,
    /// Manual assignment of the new partitions: replica broker ids each.
    pub assignments: Option<Vec<Vec<i32>>>,
}

#[derive(Debug, Clone)]
pub struct CreatePartitionsRequest {
    pub topics: Vec<GrowTopic>,
    pub timeout_ms: i32,
    pub validate_only: bool,
}

/// The answer for one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrownTopic {
    pub name: String,
    pub error: ErrorCode,
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePartitionsResponse {
    pub results: Vec<GrownTopic>,
}

impl GrownTopic {
    fn ok(name: &str) -> GrownTopic {
        GrownTopic { name: name.to_string(), error: ErrorCode::NONE, message: None }
    }

    fn error(name: &str, error: ErrorCode, message: impl Into<String>) -> GrownTopic {
        GrownTopic { name: name.to_string(), error, message: Some(message.into()) }
    }
}

impl From<(&str, CatalogError)> for GrownTopic {
    fn from((name, e): (&str, CatalogError)) -> GrownTopic {
        GrownTopic::error(name, e.code, e.message)
    }
}

fn refuse(code: ErrorCode, message: impl Into<String>) -> CatalogError {
    CatalogError { code, message: message.into() }
}

/// Kafka's `validateManualPartitionAssignment` for one new partition on a
/// one-node cluster whose topics all have one replica.
fn check_assignment(replicas: &[i32], node: i32) -> Result<(), CatalogError> {
    let invalid = |m: String| refuse(ErrorCode::INVALID_REPLICA_ASSIGNMENT, m);
    if replicas.is_empty() {
        return Err(invalid("The manual partition assignment includes an empty replica list.".into()));
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    if let Some(b) = sorted.iter().find(|&&b| b != node) {
        return Err(invalid(format!(
            "The manual partition assignment includes broker {b}, but no such broker is registered."
        )));
    }
    if sorted.len() > 1 {
        return Err(invalid(format!("The manual partition assignment includes the broker {node} more than once.")));
    }
    Ok(())
}

impl DataPlane {
    /// Serves a CreatePartitions request: duplicates first (the broker's
    /// check), then each topic in request order.
    pub async fn create_partitions(self: &Arc<Self>, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
        let mut counts: HashMap<String, usize> = HashMap::with_capacity(req.topics.len());
        for t in &req.topics {
            *counts.entry(t.name.clone()).or_default() += 1;
        }
        let mut results = Vec::with_capacity(req.topics.len());
        let mut reported = std::collections::HashSet::new();
        let mut unique = Vec::with_capacity(req.topics.len());
        for t in req.topics {
            if counts.get(&t.name).copied().unwrap_or(0) > 1 {
                if reported.insert(t.name.clone()) {
                    results.push(GrownTopic::error(&t.name, ErrorCode::INVALID_REQUEST, "Duplicate topic name."));
                }
                continue;
            }
            unique.push(t);
        }
        let plane = Arc::clone(self);
        let validate_only = req.validate_only;
        // The catalog write and the log creation block: one blocking task
        // for the whole request, topics in order.
        let grown = tokio::task::spawn_blocking(move || {
            unique
                .iter()
                .map(|t| match plane.grow_topic_now(t, validate_only) {
                    Ok(_) => GrownTopic::ok(&t.name),
                    Err(e) => GrownTopic::from((t.name.as_str(), e)),
                })
                .collect::<Vec<_>>()
        })
        .await;
        match grown {
            Ok(g) => results.extend(g),
            Err(e) => tracing::error!(error = %e, "CreatePartitions task failed"),
        }
        CreatePartitionsResponse { results }
    }

    /// Grows one topic (blocking): Kafka's checks in its order, the limits,
    /// then the new logs, the catalog and the topic map. With
    /// `validate_only` only the checks run.
    pub fn grow_topic_now(&self, t: &GrowTopic, validate_only: bool) -> Result<TopicInfo, CatalogError> {
        let _admin = self.admin_lock();
        let Some(info) = self.catalog.get(&t.name) else {
            // Kafka throws a bare UnknownTopicOrPartitionException: the
            // error's default message.
            return Err(refuse(
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            ));
        };
        let current = info.partitions;
        if t.count == current {
            return Err(refuse(ErrorCode::INVALID_PARTITIONS, format!("Topic already has {current} partition(s).")));
        }
        if t.count < current {
            return Err(refuse(
                ErrorCode::INVALID_PARTITIONS,
                format!(
                    "The topic {} currently has {current} partition(s); {} would not be an increase.",
                    t.name, t.count
                ),
            ));
        }
        let additional = t.count - current;
        if let Some(assignments) = &t.assignments {
            if i64::try_from(assignments.len()).unwrap_or(i64::MAX) != i64::from(additional) {
                return Err(refuse(
                    ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                    format!(
                        "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
                        assignments.len()
                    ),
                ));
            }
            for replicas in assignments {
                check_assignment(replicas, self.settings.node_id)?;
            }
        }
        if t.count > MAX_PARTITIONS {
            return Err(refuse(
                ErrorCode::INVALID_PARTITIONS,
                format!("Number of partitions must be at most {MAX_PARTITIONS}."),
            ));
        }
        self.limits.check_growth(&self.catalog, &t.name, additional)?;
        let grown = TopicInfo { partitions: t.count, ..info.clone() };
        if validate_only {
            return Ok(grown);
        }
        let dirs: Vec<_> =
            (current..t.count).map(|p| super::service::partition_dir(&self.settings.root, &t.name, p)).collect();
        let fs = self.disk();
        let remove_dirs = || super::service::discard_partition_dirs(&*fs, &dirs);
        let new_logs = match self.open_partitions_from(&grown, current, true) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(topic = %t.name, partitions = t.count, error = %e, "cannot add partitions: their logs could not be opened");
                remove_dirs();
                return Err(refuse(ErrorCode::KAFKA_STORAGE_ERROR, e));
            }
        };
        let mut topics = self.write_topics();
        let Some(old) = topics.get(&t.name).cloned() else {
            drop(topics);
            drop(new_logs);
            remove_dirs();
            return Err(refuse(
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            ));
        };
        match self.catalog.grow(&t.name, t.count) {
            Ok(info) => {
                let mut partitions = old.partitions.clone();
                partitions.extend(new_logs);
                topics.insert(t.name.clone(), Arc::new(TopicLogs { info: info.clone(), partitions }));
                tracing::info!(topic = %t.name, from = current, to = t.count, "added partitions to topic");
                Ok(info)
            }
            Err(e) => {
                tracing::error!(topic = %t.name, partitions = t.count, error = %e.message, "cannot add partitions: the catalog could not record them");
                drop(topics);
                drop(new_logs);
                remove_dirs();
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_assignments_must_name_this_node_once() {
        assert!(check_assignment(&[1], 1).is_ok());
        let e = check_assignment(&[], 1).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_REPLICA_ASSIGNMENT);
        assert_eq!(
            check_assignment(&[2], 1).unwrap_err().message,
            "The manual partition assignment includes broker 2, but no such broker is registered."
        );
        assert_eq!(
            check_assignment(&[1, 1], 1).unwrap_err().message,
            "The manual partition assignment includes the broker 1 more than once."
        );
    }
}
