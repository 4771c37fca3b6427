//! `range` (Kafka's server-side `RangeAssignor`): co-partitioning.
//!
//! Members are put in a fixed order: static members first, by instance id,
//! then dynamic members, by member id (both compared as Java strings). Each
//! topic is then cut into contiguous ranges over its subscribers in that
//! order: `P / N` partitions each, and the first `P % N` subscribers one more.
//! When topics have the same partition count and the same subscribers,
//! partition `i` of every topic lands on the same member, which is what
//! joins across co-partitioned topics need.
//!
//! Kafka's current `RangeAssignor` does not read the current assignment: its
//! only stickiness is that order. A static member that restarts under a new
//! member id keeps its place, and so its ranges; a member joining or leaving
//! shifts the ranges of the members after it. Homogeneous and heterogeneous
//! groups differ only in counting subscribers per topic rather than taking
//! the group size. Unlike `uniform`, every member gets an entry, even when
//! nobody subscribes to anything.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{
    java_string_cmp, subscribed_union, Assignment, AssignorError, GroupAssignment, GroupSpec, MemberAssignment,
    MemberSubscriptionAndAssignment, PartitionAssignor, SubscribedTopicDescriber, SubscriptionType, TopicCursor,
    TopicIndex, RANGE_ASSIGNOR_NAME,
};

/// Kafka's server-side `RangeAssignor`; see the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct RangeAssignor;

/// A topic being cut into ranges.
struct TopicRanges {
    partitions: u32,
    subscribers: u32,
    next: u32,
    extra_left: u32,
}

impl TopicRanges {
    /// The next subscriber's range: `P / N` partitions, one more while the
    /// `P % N` extras last.
    fn next_range(&mut self) -> std::ops::Range<u32> {
        let mut quota = self.partitions.checked_div(self.subscribers).unwrap_or(0);
        if self.extra_left > 0 {
            quota += 1;
            self.extra_left -= 1;
        }
        let start = self.next;
        let end = start.saturating_add(quota).min(self.partitions);
        self.next = end;
        start..end
    }
}

/// Whether `current` is exactly these ranges (topic indices ascending, so in
/// the same order as the map's topic ids).
fn same_ranges(current: &Assignment, index: &TopicIndex, ranges: &[(usize, std::ops::Range<u32>)]) -> bool {
    current.len() == ranges.len()
        && current.iter().zip(ranges).all(|((id, set), (t, range))| {
            index.ids.get(*t) == Some(id)
                && set.len() == range.len()
                && set.first().is_some_and(|p| i64::from(*p) == i64::from(range.start))
                && set.last().is_some_and(|p| i64::from(*p) + 1 == i64::from(range.end))
        })
}

/// Static members first by instance id, then dynamic members by member id.
fn member_order(
    a: (&String, &MemberSubscriptionAndAssignment),
    b: (&String, &MemberSubscriptionAndAssignment),
) -> Ordering {
    match (&a.1.instance_id, &b.1.instance_id) {
        // Two static members never share an instance id in a valid group;
        // the member id breaks the tie anyway, for determinism.
        (Some(x), Some(y)) => java_string_cmp(x, y).then_with(|| java_string_cmp(a.0, b.0)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => java_string_cmp(a.0, b.0),
    }
}

impl PartitionAssignor for RangeAssignor {
    fn name(&self) -> &'static str {
        RANGE_ASSIGNOR_NAME
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topics: &dyn SubscribedTopicDescriber,
    ) -> Result<GroupAssignment, AssignorError> {
        let mut members: Vec<(&String, &MemberSubscriptionAndAssignment)> = group.members.iter().collect();
        let Some(first) = members.first().copied() else { return Ok(GroupAssignment::default()) };
        let member_count = u32::try_from(members.len()).map_err(|_| AssignorError::TooLarge("members"))?;
        members.sort_by(|a, b| member_order(*a, *b));

        // Topics with their partition count and subscriber count, indexed
        // in id order.
        let index = match group.subscription_type {
            SubscriptionType::Homogeneous => TopicIndex::new(first.1.subscribed_topic_ids.iter().copied(), topics)?,
            SubscriptionType::Heterogeneous => {
                TopicIndex::new(subscribed_union(members.iter().map(|(_, m)| &m.subscribed_topic_ids)), topics)?
            }
        };
        let mut ranges: Vec<TopicRanges> = index
            .counts
            .iter()
            .map(|partitions| TopicRanges { partitions: *partitions, subscribers: 0, next: 0, extra_left: 0 })
            .collect();
        let mut cursor = TopicCursor::new(&index.ids);
        match group.subscription_type {
            SubscriptionType::Homogeneous => ranges.iter_mut().for_each(|r| r.subscribers = member_count),
            SubscriptionType::Heterogeneous => {
                for (_, member) in &members {
                    cursor.reset();
                    for topic_id in &member.subscribed_topic_ids {
                        if let Some(r) = cursor.find(topic_id).and_then(|t| ranges.get_mut(t)) {
                            r.subscribers += 1;
                        }
                    }
                }
            }
        }
        for r in ranges.iter_mut() {
            r.extra_left = r.partitions.checked_rem(r.subscribers).unwrap_or(0);
        }

        // Homogeneous: every member takes the next range of every topic, so
        // a topic whose partitions are all handed out can be skipped for the
        // remaining members (with 10,000 members and fewer partitions, most
        // members get nothing and cost nothing).
        let mut live: Vec<usize> = (0..ranges.len()).collect();
        let mut out = BTreeMap::new();
        let mut mine: Vec<(usize, std::ops::Range<u32>)> = Vec::new();
        for (member_id, member) in members {
            mine.clear();
            let mut take = |t: usize, mine: &mut Vec<(usize, std::ops::Range<u32>)>| {
                if let Some(r) = ranges.get_mut(t) {
                    let range = r.next_range();
                    if !range.is_empty() {
                        mine.push((t, range));
                    }
                }
            };
            match group.subscription_type {
                SubscriptionType::Homogeneous => {
                    for t in &live {
                        take(*t, &mut mine);
                    }
                    live.retain(|t| ranges.get(*t).is_some_and(|r| r.next < r.partitions));
                }
                SubscriptionType::Heterogeneous => {
                    cursor.reset();
                    for topic_id in &member.subscribed_topic_ids {
                        if let Some(t) = cursor.find(topic_id) {
                            take(t, &mut mine);
                        }
                    }
                }
            }
            // Kafka builds every member's assignment anew; handing back the
            // input map when it is the same saves copying it.
            let partitions = if same_ranges(&member.assignment, &index, &mine) {
                Arc::clone(&member.assignment)
            } else {
                let built: Assignment = mine
                    .iter()
                    .filter_map(|(t, range)| {
                        let id = index.ids.get(*t)?;
                        Some((*id, range.clone().map(|p| p as i32).collect::<BTreeSet<i32>>()))
                    })
                    .collect();
                Arc::new(built)
            };
            out.insert(member_id.clone(), MemberAssignment { partitions });
        }
        Ok(GroupAssignment { members: out })
    }
}
