//! The offsets lifecycle of consumer groups, as Kafka 4.x: OffsetDelete
//! (`ConsumerGroup.validateOffsetDelete` allows it in any state, per topic
//! the group does not subscribe to), offset expiry
//! (`ConsumerGroup.offsetExpirationCondition`: counted from each offset's
//! commit time, for topics the group does not subscribe to, so every offset
//! of an empty group) and the deletion of an empty group left without
//! offsets (`GroupMetadataManager.cleanupGroupMetadata`).
//!
//! "Subscribes to" is the union of the members' topic names and what their
//! regular expressions resolved to (`regex::subscribed_topic_names`).

use std::collections::BTreeSet;

use super::group::{self, ConsumerGroup};
use super::regex;
use crate::coordinator::records::{OffsetValue, Record};
use crate::coordinator::store::Store;

/// Whether `g` subscribes to `topic` (Kafka's `isSubscribedToTopic`).
pub fn is_subscribed_to_topic(g: &ConsumerGroup, topic: &str) -> bool {
    g.subscribed_topics.contains_key(topic)
        || regex::regex_topics(&g.subscribed_regexes, &g.resolved_regexes).contains(topic)
}

/// Kafka's `OffsetExpirationConditionImpl.isOffsetExpired` with the
/// consumer group's base (the commit timestamp).
fn expired(v: &OffsetValue, now: i64, retention_ms: i64) -> bool {
    match v.expire_timestamp {
        Some(expire) => now >= expire,
        None => now.saturating_sub(v.commit_timestamp) >= retention_ms,
    }
}

/// What one retention pass does to the consumer groups.
#[derive(Debug, Default)]
pub struct Expiry {
    /// Offset tombstones, then the tombstones of deleted groups.
    pub records: Vec<Record>,
    pub groups_deleted: usize,
}

/// Kafka's `cleanupExpiredOffsets` + `maybeDeleteGroup` for every consumer
/// group of the shard, in group id order.
pub fn expire(store: &Store, now: i64, retention_ms: i64) -> Expiry {
    let mut out = Expiry::default();
    let mut groups: Vec<&ConsumerGroup> = store.consumer_groups().collect();
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    for g in groups {
        let subscribed: BTreeSet<String> = regex::subscribed_topic_names(g);
        let mut all_expired = true;
        if let Some(topics) = store.offsets(&g.group_id) {
            let mut names: Vec<&String> = topics.keys().collect();
            names.sort();
            for topic in names {
                if subscribed.contains(topic.as_str()) {
                    all_expired = false;
                    continue;
                }
                let Some(parts) = topics.get(topic) else { continue };
                let mut ps: Vec<(&i32, &OffsetValue)> = parts.iter().collect();
                ps.sort_by_key(|(p, _)| **p);
                for (p, v) in ps {
                    if expired(v, now, retention_ms) {
                        out.records.push(Record::offset_tombstone(&g.group_id, topic, *p));
                    } else {
                        all_expired = false;
                    }
                }
            }
        }
        if all_expired && g.members.is_empty() {
            tracing::info!(group = %g.group_id, "deleting the empty consumer group: it has no offsets left");
            out.records.extend(group::tombstones(g));
            out.groups_deleted += 1;
        }
    }
    out
}
