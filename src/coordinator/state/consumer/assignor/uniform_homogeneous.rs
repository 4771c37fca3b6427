//! `uniform` when every member subscribes to the same topics (Kafka's
//! `UniformHomogeneousAssignmentBuilder`, as fixed by KAFKA-18688).
//!
//! Balance comes first: with `P` partitions and `M` members every member ends
//! with `P / M` partitions and `P % M` of them with one more. Within that,
//! each member keeps as much of its current assignment as it can:
//!
//! 1. Partitions nobody holds go to an unassigned list (topic order, then
//!    partition order).
//! 2. Members are visited in order. Each keeps its current partitions of the
//!    subscribed topics up to its quota (`P / M`, plus one while extra slots
//!    remain); what is above the quota is revoked to the end of the unassigned
//!    list, and topics it no longer subscribes to are dropped. A member that
//!    could not even use its extra slot gives the slot back for a later member
//!    that holds more, unless too few members remain to use the slots left.
//!    This is KAFKA-18688: before it, the extra slots went to the first
//!    members in iteration order, which moved partitions even when the
//!    previous assignment was already balanced.
//! 3. Members below their quota take partitions from the unassigned list, in
//!    member order.
//!
//! Linear in members plus partitions; no sorting.

use super::{
    assignment_from_owners, AssignorError, GroupAssignment, GroupSpec, SubscribedTopicDescriber, TopicIndex, NO_OWNER,
};

/// Assigns a homogeneous group (non-empty: the caller checks).
pub(super) fn assign(
    group: &GroupSpec,
    topics: &dyn SubscribedTopicDescriber,
) -> Result<GroupAssignment, AssignorError> {
    // Homogeneous: the first member's subscription is everyone's.
    let Some(first) = group.members.values().next() else { return Ok(GroupAssignment::default()) };
    if first.subscribed_topic_ids.is_empty() {
        // Kafka answers an empty map here, not one empty entry per member.
        return Ok(GroupAssignment::default());
    }
    let index = TopicIndex::new(first.subscribed_topic_ids.iter().copied(), topics)?;
    let member_count = u32::try_from(group.members.len()).map_err(|_| AssignorError::TooLarge("members"))?;
    if member_count == NO_OWNER {
        return Err(AssignorError::TooLarge("members"));
    }
    // Members whose assignment differs from their input: the others get
    // their input map back.
    let mut changed = vec![false; group.members.len()];

    // Who holds what now. The first holder in member order owns a partition;
    // a duplicate or a partition that does not exist is ignored (see the
    // module documentation of `assignor`).
    let mut owners: Vec<Vec<u32>> = index.counts.iter().map(|n| vec![NO_OWNER; *n as usize]).collect();
    for (m, member) in group.members.values().enumerate() {
        let mut dropped = false;
        for (topic_id, partitions) in member.assignment.iter() {
            let Some(t) = index.get(topic_id) else {
                dropped = true;
                continue;
            };
            dropped |= partitions.is_empty();
            for p in partitions {
                match index.partition_index(t, *p).and_then(|i| owners.get_mut(t).and_then(|o| o.get_mut(i))) {
                    Some(slot) if *slot == NO_OWNER => *slot = m as u32,
                    _ => dropped = true,
                }
            }
        }
        if let Some(c) = changed.get_mut(m) {
            *c = dropped;
        }
    }

    // 1. The partitions nobody holds, in topic then partition order.
    let total: u64 = index.counts.iter().map(|n| u64::from(*n)).sum();
    let total = u32::try_from(total).map_err(|_| AssignorError::TooLarge("partitions"))?;
    let mut unassigned: Vec<(u32, u32)> = Vec::new();
    for (t, topic_owners) in owners.iter().enumerate() {
        for (p, owner) in topic_owners.iter().enumerate() {
            if *owner == NO_OWNER {
                unassigned.push((t as u32, p as u32));
            }
        }
    }

    // 2. Keep up to the quota; revoke the rest.
    let min_quota = total / member_count;
    let mut extra_left = total % member_count;
    let mut unfilled: Vec<(u32, u32)> = Vec::new(); // (member, partitions still wanted)
    for (m, member) in group.members.values().enumerate() {
        let m = m as u32;
        let has_extra_slot = extra_left > 0;
        let mut quota = min_quota + u32::from(has_extra_slot);
        for (topic_id, partitions) in member.assignment.iter() {
            let Some(t) = index.get(topic_id) else { continue };
            let Some(topic_owners) = owners.get_mut(t) else { continue };
            for p in partitions {
                let Some(i) = index.partition_index(t, *p) else { continue };
                let Some(slot) = topic_owners.get_mut(i) else { continue };
                if *slot != m {
                    continue;
                }
                if quota > 0 {
                    quota -= 1;
                } else {
                    *slot = NO_OWNER;
                    unassigned.push((t as u32, i as u32));
                    if let Some(c) = changed.get_mut(m as usize) {
                        *c = true;
                    }
                }
            }
        }
        let mut takes_extra = has_extra_slot;
        // `member_count - m` counts this member and the ones after it.
        if quota > 0 && has_extra_slot && member_count - m > extra_left {
            quota -= 1;
            takes_extra = false;
        }
        if quota > 0 {
            unfilled.push((m, quota));
        }
        if takes_extra {
            extra_left -= 1;
        }
    }

    // 3. Fill the members below their quota, in member order.
    let mut next = unassigned.iter();
    for (m, wanted) in unfilled {
        for (t, p) in next.by_ref().take(wanted as usize) {
            if let Some(slot) = owners.get_mut(*t as usize).and_then(|o| o.get_mut(*p as usize)) {
                *slot = m;
            }
            if let Some(c) = changed.get_mut(m as usize) {
                *c = true;
            }
        }
    }
    if next.next().is_some() {
        return Err(AssignorError::PartitionsLeftUnassigned);
    }
    Ok(assignment_from_owners(group, &changed, &index, &owners))
}
