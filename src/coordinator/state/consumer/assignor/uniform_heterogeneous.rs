//! `uniform` when members subscribe to different topics (Kafka's
//! `UniformHeterogeneousAssignmentBuilder`, as reworked by KAFKA-17710).
//!
//! No quota fits every member here, so balance is reached by moves:
//!
//! 1. Each member keeps all its current partitions of the topics it still
//!    subscribes to; other topics are dropped.
//! 2. The partitions nobody holds are handed out topic by topic, each to the
//!    least loaded subscriber of its topic (counting all topics). Topics go
//!    in Kafka's order: most partitions per subscriber first, then fewest
//!    subscribers, then Kafka's `Uuid.compareTo`; this places the hardest
//!    topics while there is most freedom.
//! 3. Topics with two or more subscribers are balanced in the same order:
//!    partitions move from the most to the least loaded subscribers until
//!    their counts differ by at most one. The loop over the topics repeats
//!    until a full round moves nothing, at most 16 rounds (Kafka's
//!    `MAX_ITERATION_COUNT`). With overlapping, non-identical subscriptions
//!    the result can be off by more than one overall (Kafka documents 9/10/11
//!    for three members and two topics); it is balanced per topic.
//!
//! A moved partition is always the highest-numbered partition of the topic
//! that the giving member held when the topic's pass began, as in Kafka.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use super::balancer::Balancer;
use super::{
    assignment_from_owners, kafka_uuid_cmp, subscribed_union, AssignorError, GroupAssignment, GroupSpec,
    SubscribedTopicDescriber, TopicCursor, TopicId, TopicIndex, NO_OWNER,
};

/// Kafka's bound on the rounds of the balancing phase: each round roughly
/// halves the imbalance, and identical subscriptions converge in one.
const MAX_ITERATION_COUNT: usize = 16;

struct Builder {
    index: TopicIndex,
    /// Subscribers of each topic, ascending member index.
    subscribers: Vec<Vec<u32>>,
    /// Owner of each partition of each topic; `NO_OWNER` when unassigned.
    owners: Vec<Vec<u32>>,
    /// Partitions assigned to each member, all topics together.
    sizes: Vec<u32>,
    /// Members whose assignment differs from their input.
    changed: Vec<bool>,
}

/// Assigns a heterogeneous group (non-empty: the caller checks).
pub(super) fn assign(
    group: &GroupSpec,
    topics: &dyn SubscribedTopicDescriber,
) -> Result<GroupAssignment, AssignorError> {
    let member_count = group.members.len();
    if u32::try_from(member_count).map_or(true, |n| n == NO_OWNER) {
        return Err(AssignorError::TooLarge("members"));
    }
    // Every subscribed topic must exist (Kafka checks member by member; the
    // first unknown topic in id order is reported here).
    let index = TopicIndex::new(subscribed_union(group.members.values().map(|m| &m.subscribed_topic_ids)), topics)?;
    if index.ids.is_empty() {
        // Kafka answers an empty map here, not one empty entry per member.
        return Ok(GroupAssignment::default());
    }

    let mut subscribers: Vec<Vec<u32>> = vec![Vec::new(); index.ids.len()];
    let mut cursor = TopicCursor::new(&index.ids);
    let mut previous: Option<&BTreeSet<TopicId>> = None;
    let mut topic_indices: Vec<usize> = Vec::new();
    for (m, member) in group.members.values().enumerate() {
        if previous != Some(&member.subscribed_topic_ids) {
            topic_indices.clear();
            cursor.reset();
            topic_indices.extend(member.subscribed_topic_ids.iter().filter_map(|t| cursor.find(t)));
            previous = Some(&member.subscribed_topic_ids);
        }
        for t in &topic_indices {
            if let Some(list) = subscribers.get_mut(*t) {
                list.push(m as u32);
            }
        }
    }
    let owners = index.counts.iter().map(|n| vec![NO_OWNER; *n as usize]).collect();
    let mut b =
        Builder { index, subscribers, owners, sizes: vec![0; member_count], changed: vec![false; member_count] };

    b.keep_subscribed(group);
    b.assign_unassigned();
    b.balance();
    Ok(assignment_from_owners(group, &b.changed, &b.index, &b.owners))
}

impl Builder {
    /// Step 1: each member keeps its partitions of the topics it subscribes to.
    fn keep_subscribed(&mut self, group: &GroupSpec) {
        for (m, member) in group.members.values().enumerate() {
            let mut dropped = false;
            for (topic_id, partitions) in member.assignment.iter() {
                let t = match self.index.get(topic_id) {
                    Some(t) if member.subscribed_topic_ids.contains(topic_id) => t,
                    _ => {
                        dropped = true;
                        continue;
                    }
                };
                dropped |= partitions.is_empty();
                for p in partitions {
                    let slot = self.index.partition_index(t, *p).and_then(|i| self.owners.get_mut(t)?.get_mut(i));
                    match slot {
                        Some(slot) if *slot == NO_OWNER => {
                            *slot = m as u32;
                            if let Some(size) = self.sizes.get_mut(m) {
                                *size += 1;
                            }
                        }
                        _ => dropped = true,
                    }
                }
            }
            if let Some(c) = self.changed.get_mut(m) {
                *c = dropped;
            }
        }
    }

    /// Kafka's topic order: partitions per subscriber descending (compared as
    /// doubles, as Kafka does), subscriber count ascending, then
    /// `Uuid.compareTo`.
    fn topic_order(&self, a: usize, b: usize) -> Ordering {
        let count = |t: usize| self.index.counts.get(t).copied().unwrap_or(0);
        let subs = |t: usize| self.subscribers.get(t).map_or(0, Vec::len);
        let ratio = |t: usize| f64::from(count(t)) / subs(t).max(1) as f64;
        ratio(b).total_cmp(&ratio(a)).then_with(|| subs(a).cmp(&subs(b))).then_with(|| {
            match (self.index.ids.get(a), self.index.ids.get(b)) {
                (Some(x), Some(y)) => kafka_uuid_cmp(x, y),
                _ => a.cmp(&b),
            }
        })
    }

    fn sorted_topics(&self, mut topics: Vec<usize>) -> Vec<usize> {
        topics.sort_unstable_by(|a, b| self.topic_order(*a, *b));
        topics
    }

    fn move_partition(&mut self, t: usize, p: usize, to: u32) {
        let Some(slot) = self.owners.get_mut(t).and_then(|o| o.get_mut(p)) else { return };
        let from = std::mem::replace(slot, to);
        if let Some(size) = self.sizes.get_mut(from as usize) {
            *size = size.saturating_sub(1);
        }
        if let Some(size) = self.sizes.get_mut(to as usize) {
            *size += 1;
        }
        for m in [from, to] {
            if let Some(c) = self.changed.get_mut(m as usize) {
                *c = true;
            }
        }
    }

    /// Step 2: each unassigned partition goes to the least loaded subscriber.
    fn assign_unassigned(&mut self) {
        let with_unassigned: Vec<usize> =
            (0..self.owners.len()).filter(|t| self.owners.get(*t).is_some_and(|o| o.contains(&NO_OWNER))).collect();
        let mut balancer = Balancer::new();
        for t in self.sorted_topics(with_unassigned) {
            let Some(subscribers) = self.subscribers.get(t) else { continue };
            if subscribers.is_empty() {
                continue;
            }
            balancer.initialize(subscribers, &self.sizes);
            let count = self.owners.get(t).map_or(0, Vec::len);
            for p in 0..count {
                if self.owners.get(t).and_then(|o| o.get(p)) == Some(&NO_OWNER) {
                    let member = balancer.next_least_loaded(&self.sizes);
                    self.move_partition(t, p, member);
                }
            }
        }
    }

    /// Step 3: balance each topic with two or more subscribers, round after
    /// round, until a full round moves nothing or the round limit is hit.
    fn balance(&mut self) {
        let movable: Vec<usize> =
            (0..self.subscribers.len()).filter(|t| self.subscribers.get(*t).is_some_and(|s| s.len() >= 2)).collect();
        if movable.is_empty() {
            return;
        }
        let order = self.sorted_topics(movable);
        let mut scratch = Scratch {
            balancer: Balancer::new(),
            partitions: Vec::new(),
            start: vec![0; self.sizes.len()],
            end: vec![0; self.sizes.len()],
        };
        let mut last_moved: Option<usize> = None;
        for _ in 0..MAX_ITERATION_COUNT {
            for (position, t) in order.iter().enumerate() {
                if last_moved == Some(position) {
                    // A whole round since the last move: nothing more to gain.
                    return;
                }
                let moved = self.balance_topic(*t, &mut scratch);
                if moved > 0 || last_moved.is_none() {
                    last_moved = Some(position);
                }
            }
        }
    }

    /// Moves partitions of topic `t` from its most to its least loaded
    /// subscribers until their loads differ by at most one; returns how many
    /// moved.
    fn balance_topic(&mut self, t: usize, s: &mut Scratch) -> usize {
        let Some(subscribers) = self.subscribers.get(t) else { return 0 };
        // Most topics are balanced already: find out before sorting.
        let loads = subscribers.iter().map(|m| self.sizes.get(*m as usize).copied().unwrap_or(0));
        let (least, most) = loads.fold((u32::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
        if most.saturating_sub(least) <= 1 {
            return 0;
        }
        s.balancer.initialize(subscribers, &self.sizes);
        let Some(owners) = self.owners.get(t) else { return 0 };
        // The topic's partitions grouped by owner, ascending within an owner,
        // and each subscriber's range in that list.
        s.partitions.clear();
        s.partitions.extend((0..owners.len() as u32).map(|p| (owners.get(p as usize).copied().unwrap_or(NO_OWNER), p)));
        s.partitions.sort_unstable();
        for m in subscribers {
            if let (Some(a), Some(b)) = (s.start.get_mut(*m as usize), s.end.get_mut(*m as usize)) {
                *a = 0;
                *b = 0;
            }
        }
        let mut previous = NO_OWNER;
        for (i, (owner, _)) in s.partitions.iter().enumerate() {
            if let (Some(a), Some(b)) = (s.start.get_mut(*owner as usize), s.end.get_mut(*owner as usize)) {
                if *owner != previous {
                    *a = i as u32;
                }
                *b = i as u32 + 1;
            }
            previous = *owner;
        }

        let mut moved = 0;
        while !s.balancer.is_balanced() {
            // A most loaded member that still holds a partition of the topic.
            let giver = loop {
                let Some(m) = s.balancer.next_most_loaded(&self.sizes) else { break None };
                let m = m as usize;
                let start = s.start.get(m).copied().unwrap_or(0);
                let end = s.end.get(m).copied().unwrap_or(0);
                if end <= start {
                    s.balancer.exclude_most_loaded();
                    continue;
                }
                break Some(m);
            };
            let Some(giver) = giver else { break };
            let Some(end) = s.end.get_mut(giver) else { break };
            *end -= 1;
            let Some(&(_, partition)) = s.partitions.get(*end as usize) else { break };
            let taker = s.balancer.next_least_loaded(&self.sizes);
            if s.balancer.is_balanced() {
                break;
            }
            self.move_partition(t, partition as usize, taker);
            moved += 1;
        }
        moved
    }
}

/// Buffers reused across the topics of the balancing phase: sized once, so
/// balancing a topic allocates nothing.
struct Scratch {
    balancer: Balancer,
    /// (owner, partition), sorted.
    partitions: Vec<(u32, u32)>,
    /// Per member: its range `[start, end)` in `partitions`.
    start: Vec<u32>,
    end: Vec<u32>,
}
