//! Server-side partition assignors of KIP-848 consumer groups: `uniform`
//! (the default) and `range`, with the interface of Kafka's
//! `org.apache.kafka.coordinator.group.api.assignor` package.
//!
//! The assignors are pure functions of a [`GroupSpec`] (members, their
//! subscriptions and their current target assignment) and of the topic
//! metadata seen through a [`SubscribedTopicDescriber`]. They know nothing of
//! records, epochs or reconciliation: the group state machine feeds them the
//! previous target assignment and turns the answer into records.
//!
//! # Determinism
//!
//! The same input always gives the same output. Kafka iterates hash maps in a
//! few places where the order changes the answer (the member order of the
//! uniform builders, the order of topics and partitions when several choices
//! are equally good). Here every such order is fixed and documented:
//!
//! - members: ascending member id (the `BTreeMap` order of
//!   [`GroupSpec::members`]); the `range` assignor keeps Kafka's own order
//!   (static members by instance id, then dynamic members by member id, both
//!   compared as Java strings);
//! - topics: ascending [`TopicId`], except where Kafka itself orders topics
//!   (the heterogeneous uniform builder sorts by partitions per subscriber,
//!   then subscriber count, then Kafka's signed `Uuid.compareTo`, which
//!   [`kafka_uuid_cmp`] reproduces);
//! - partitions of one topic: ascending.
//!
//! # Racks
//!
//! Members may send a rack and topics may have replica racks, and both are
//! part of this interface as they are of Kafka's. Kafka's current server-side
//! assignors (`UniformHomogeneousAssignmentBuilder`,
//! `UniformHeterogeneousAssignmentBuilder`, `RangeAssignor`) do not read them:
//! the rack-aware variants were removed from the optimized builders, and a
//! rack-aware homogeneous builder (KAFKA-19909) is an open proposal. Matching
//! Kafka, these assignors ignore racks too; the rack fields are carried so
//! that the group records and a future rack-aware assignor need no interface
//! change.
//!
//! # Inputs Kafka never produces
//!
//! Kafka's assignors trust that the current assignment holds each partition
//! at most once and only partitions that exist. A partition number that is
//! negative or not below the topic's partition count, or a second owner of the
//! same partition, is ignored here (the first owner in member order keeps it)
//! instead of being repeated in the output or failing: a replayed log written
//! by an older version can then never make the assignment invalid.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use uuid::Uuid;

mod balancer;
mod range;
mod uniform_heterogeneous;
mod uniform_homogeneous;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use range::RangeAssignor;

/// A topic id: the catalog's and the wire's 16-byte `Uuid`.
pub type TopicId = Uuid;

/// Partitions by topic: what a member is assigned. Sorted containers, so
/// iterating an assignment is deterministic.
pub type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// An assignment shared between the group state, the assignor's input and
/// its output. As in Kafka (which passes immutable maps and returns the same
/// map for a member whose assignment did not change), the assignors hand an
/// unchanged member's input `Arc` back: a rebalance of 10,000 members where
/// one left copies only the assignments that changed, and the caller can
/// tell unchanged members by `Arc::ptr_eq`.
pub type SharedAssignment = Arc<Assignment>;

/// Whether every member subscribes to the same topics (Kafka's
/// `SubscriptionType`). The group computes it and the assignors trust it: it
/// selects the algorithm, and a homogeneous group is assigned by the first
/// member's subscription alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SubscriptionType {
    /// All members subscribe to the same set of topics.
    #[default]
    Homogeneous,
    /// The members' subscriptions differ.
    Heterogeneous,
}

impl SubscriptionType {
    /// Kafka's display name (`Homogeneous` / `Heterogeneous`).
    pub fn name(self) -> &'static str {
        match self {
            SubscriptionType::Homogeneous => "Homogeneous",
            SubscriptionType::Heterogeneous => "Heterogeneous",
        }
    }
}

/// One member as the assignor sees it (Kafka's `MemberSubscription` plus the
/// member's current target assignment).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberSubscriptionAndAssignment {
    /// The rack the member sent, if any. Not used by the current assignors;
    /// see the module documentation.
    pub rack_id: Option<String>,
    /// The static member's `group.instance.id`, if any. `range` places static
    /// members first, ordered by instance id, so a restarted static member
    /// gets its ranges back.
    pub instance_id: Option<String>,
    /// The topics the member subscribes to (existing topics only: names that
    /// do not resolve to a topic id are left out by the caller, as Kafka's
    /// `TargetAssignmentBuilder` does).
    pub subscribed_topic_ids: BTreeSet<TopicId>,
    /// The member's current target assignment; empty for a new member.
    pub assignment: SharedAssignment,
}

/// The input of an assignment: every member, keyed by member id, and the
/// group's subscription type (Kafka's `GroupSpec`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSpec {
    /// Members by member id. The map order is the member order of the
    /// uniform builders.
    pub members: BTreeMap<String, MemberSubscriptionAndAssignment>,
    /// Homogeneous or heterogeneous subscriptions.
    pub subscription_type: SubscriptionType,
}

impl GroupSpec {
    /// The subscription type Kafka derives for these members: homogeneous
    /// when every member subscribes to exactly the same topics (including a
    /// group with no members or no subscriptions).
    pub fn subscription_type_of(members: &BTreeMap<String, MemberSubscriptionAndAssignment>) -> SubscriptionType {
        let mut subscriptions = members.values().map(|m| &m.subscribed_topic_ids);
        match subscriptions.next() {
            Some(first) if subscriptions.any(|s| s != first) => SubscriptionType::Heterogeneous,
            _ => SubscriptionType::Homogeneous,
        }
    }
}

/// Topic metadata as the assignor sees it (Kafka's
/// `SubscribedTopicDescriber`).
pub trait SubscribedTopicDescriber {
    /// The number of partitions of the topic, or `None` if the topic does not
    /// exist (Kafka's `-1`).
    fn num_partitions(&self, topic_id: &TopicId) -> Option<u32>;

    /// The racks of the replicas of one partition; empty when unknown.
    /// Standalone mode has no racks, hence the default. Not used by the
    /// current assignors (see the module documentation).
    fn racks_for_partition(&self, _topic_id: &TopicId, _partition: i32) -> &[String] {
        &[]
    }
}

/// A plain [`SubscribedTopicDescriber`]: partition counts (and optionally
/// replica racks) by topic id. Tests and benchmarks use it, and a caller can
/// fill it from the catalog.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Partition count by topic id.
    pub partitions: BTreeMap<TopicId, u32>,
    /// Replica racks by topic id, then partition index.
    pub racks: BTreeMap<TopicId, Vec<Vec<String>>>,
}

impl TopicMetadata {
    /// Metadata with the given partition counts and no racks.
    pub fn new(partitions: impl IntoIterator<Item = (TopicId, u32)>) -> Self {
        TopicMetadata { partitions: partitions.into_iter().collect(), racks: BTreeMap::new() }
    }
}

impl SubscribedTopicDescriber for TopicMetadata {
    fn num_partitions(&self, topic_id: &TopicId) -> Option<u32> {
        self.partitions.get(topic_id).copied()
    }

    fn racks_for_partition(&self, topic_id: &TopicId, partition: i32) -> &[String] {
        let index = usize::try_from(partition).ok();
        match (self.racks.get(topic_id), index) {
            (Some(racks), Some(i)) => racks.get(i).map(Vec::as_slice).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// One member's new target assignment (Kafka's `MemberAssignment`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberAssignment {
    /// Assigned partitions by topic id. Topics with no partition are absent.
    /// The input `Arc` itself when the member's assignment is unchanged.
    pub partitions: SharedAssignment,
}

/// The assignor's answer: the new target assignment of each member (Kafka's
/// `GroupAssignment`). A member missing from the map has an empty target
/// assignment: like Kafka's uniform builders, `uniform` answers an empty map
/// when no member subscribes to any topic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupAssignment {
    /// Member assignments by member id.
    pub members: BTreeMap<String, MemberAssignment>,
}

/// Why an assignment failed. The caller answers UNKNOWN_SERVER_ERROR, as
/// Kafka does for a `PartitionAssignorException`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssignorError {
    /// A member subscribes to a topic id the metadata does not know.
    #[error("Members are subscribed to topic {0} which doesn't exist in the topic metadata.")]
    UnknownTopic(TopicId),
    /// The builder could not place every partition: a broken invariant, never
    /// expected (Kafka's message).
    #[error("Partitions were left unassigned")]
    PartitionsLeftUnassigned,
    /// More members or partitions than the 32-bit indices the builders use.
    #[error("the group is too large to assign: {0}")]
    TooLarge(&'static str),
}

/// A server-side assignor (Kafka's `ConsumerGroupPartitionAssignor`).
pub trait PartitionAssignor: Send + Sync {
    /// The name members put in `ServerAssignor` (`uniform`, `range`).
    fn name(&self) -> &'static str;

    /// Computes the new target assignment of the group.
    fn assign(
        &self,
        group: &GroupSpec,
        topics: &dyn SubscribedTopicDescriber,
    ) -> Result<GroupAssignment, AssignorError>;
}

/// Kafka's `UniformAssignor`: balanced first, then sticky. Dispatches to the
/// homogeneous builder (a quota split, linear time) or to the heterogeneous
/// one (least-loaded placement, then bounded iterative balancing).
#[derive(Clone, Copy, Debug, Default)]
pub struct UniformAssignor;

/// The name of [`UniformAssignor`].
pub const UNIFORM_ASSIGNOR_NAME: &str = "uniform";
/// The name of [`RangeAssignor`].
pub const RANGE_ASSIGNOR_NAME: &str = "range";

impl PartitionAssignor for UniformAssignor {
    fn name(&self) -> &'static str {
        UNIFORM_ASSIGNOR_NAME
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topics: &dyn SubscribedTopicDescriber,
    ) -> Result<GroupAssignment, AssignorError> {
        if group.members.is_empty() {
            return Ok(GroupAssignment::default());
        }
        match group.subscription_type {
            SubscriptionType::Homogeneous => uniform_homogeneous::assign(group, topics),
            SubscriptionType::Heterogeneous => uniform_heterogeneous::assign(group, topics),
        }
    }
}

/// The built-in assignors in Kafka's `group.consumer.assignors` default order
/// (`uniform`, `range`); the first is the default.
pub static ASSIGNORS: [&dyn PartitionAssignor; 2] = [&UniformAssignor, &RangeAssignor];

/// The assignor used when members name none: the first of Kafka's
/// `group.consumer.assignors` default, `uniform`.
pub static DEFAULT_ASSIGNOR: &dyn PartitionAssignor = &UniformAssignor;

/// The built-in assignor with this name, or `None`: the caller then answers
/// UNSUPPORTED_ASSIGNOR. Names are matched exactly, as Kafka does.
pub fn assignor_by_name(name: &str) -> Option<&'static dyn PartitionAssignor> {
    ASSIGNORS.iter().copied().find(|a| a.name() == name)
}

/// Kafka's `Uuid.compareTo`: the most significant 64 bits, then the least
/// significant, each compared as a *signed* long. It differs from `Uuid`'s
/// byte order when the top bit of either half is set, and Kafka uses it to
/// break ties between topics, so the heterogeneous builder uses it too.
pub fn kafka_uuid_cmp(a: &TopicId, b: &TopicId) -> Ordering {
    let (a_hi, a_lo) = a.as_u64_pair();
    let (b_hi, b_lo) = b.as_u64_pair();
    ((a_hi as i64), (a_lo as i64)).cmp(&((b_hi as i64), (b_lo as i64)))
}

/// Java's `String.compareTo`: lexicographic over UTF-16 code units. It
/// differs from Rust's byte order only between characters above U+FFFF and
/// those in U+E000..=U+FFFF; `range` orders members with it, as Kafka does.
pub fn java_string_cmp(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        return a.cmp(b);
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Marks a partition without an owner in the builders' per-topic owner arrays.
pub(crate) const NO_OWNER: u32 = u32::MAX;

/// The subscribed topics of a builder, indexed: topic `i` is `ids[i]` with
/// `counts[i]` partitions. `ids` is sorted, so lookups are binary searches
/// and the index order is the documented topic order.
pub(crate) struct TopicIndex {
    pub ids: Vec<TopicId>,
    pub counts: Vec<u32>,
}

impl TopicIndex {
    /// Indexes `ids` (sorted, deduplicated), checking that each topic exists.
    pub fn new(
        ids: impl IntoIterator<Item = TopicId>,
        topics: &dyn SubscribedTopicDescriber,
    ) -> Result<TopicIndex, AssignorError> {
        let mut ids: Vec<TopicId> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        let mut counts = Vec::with_capacity(ids.len());
        for id in &ids {
            let n = topics.num_partitions(id).ok_or(AssignorError::UnknownTopic(*id))?;
            // Partition numbers are int32 on the wire.
            counts.push(n.min(i32::MAX as u32));
        }
        Ok(TopicIndex { ids, counts })
    }

    /// The index of a topic, if it is one of the indexed topics.
    pub fn get(&self, id: &TopicId) -> Option<usize> {
        self.ids.binary_search(id).ok()
    }

    /// The partition number as an index into the topic's owner array, if it
    /// exists.
    pub fn partition_index(&self, topic: usize, partition: i32) -> Option<usize> {
        let count = *self.counts.get(topic)?;
        u32::try_from(partition).ok().filter(|p| *p < count).map(|p| p as usize)
    }
}

/// Builds the output from per-topic owner arrays: every member gets an entry
/// (Kafka's builders put every member in the target assignment), with its
/// partitions in topic then partition order. A member not marked `changed`
/// gets its input `Arc` back, untouched. Owners come in runs (a member's
/// partitions of a topic are mostly contiguous), so each run costs one map
/// lookup.
pub(crate) fn assignment_from_owners(
    group: &GroupSpec,
    changed: &[bool],
    index: &TopicIndex,
    owners: &[Vec<u32>],
) -> GroupAssignment {
    let mut built: Vec<Assignment> = vec![Assignment::new(); group.members.len()];
    for (topic, topic_owners) in owners.iter().enumerate() {
        let Some(topic_id) = index.ids.get(topic) else { continue };
        let mut start = 0;
        while start < topic_owners.len() {
            let owner = topic_owners.get(start).copied().unwrap_or(NO_OWNER);
            let run = topic_owners.get(start..).map_or(0, |rest| rest.iter().take_while(|o| **o == owner).count());
            let end = start + run.max(1);
            if changed.get(owner as usize).copied().unwrap_or(false) {
                if let Some(member) = built.get_mut(owner as usize) {
                    member.entry(*topic_id).or_default().extend((start as i32)..(end as i32));
                }
            }
            start = end;
        }
    }
    let members = group
        .members
        .iter()
        .zip(built)
        .zip(changed)
        .map(|(((id, member), partitions), changed)| {
            let partitions = if *changed { Arc::new(partitions) } else { Arc::clone(&member.assignment) };
            (id.clone(), MemberAssignment { partitions })
        })
        .collect();
    GroupAssignment { members }
}

/// Maps a sorted run of topic ids to indices in a sorted id list. Members'
/// subscriptions are sorted sets and usually walk the list in order, so
/// checking the next slot before a binary search makes the lookup O(1) in
/// the common case.
pub(crate) struct TopicCursor<'a> {
    ids: &'a [TopicId],
    next: usize,
}

impl<'a> TopicCursor<'a> {
    pub fn new(ids: &'a [TopicId]) -> Self {
        TopicCursor { ids, next: 0 }
    }

    /// Starts a new ascending walk.
    pub fn reset(&mut self) {
        self.next = 0;
    }

    /// The index of `id`, if present.
    pub fn find(&mut self, id: &TopicId) -> Option<usize> {
        let found = if self.ids.get(self.next) == Some(id) { Some(self.next) } else { self.ids.binary_search(id).ok() };
        if let Some(i) = found {
            self.next = i + 1;
        }
        found
    }
}

/// The union of the members' subscriptions, sorted. Consecutive members
/// with the same subscription are added once, which makes the common cases
/// (groups of identical subscribers) linear.
pub(crate) fn subscribed_union<'a>(sets: impl Iterator<Item = &'a BTreeSet<TopicId>>) -> Vec<TopicId> {
    let mut union: Vec<TopicId> = Vec::new();
    let mut previous: Option<&BTreeSet<TopicId>> = None;
    for set in sets {
        if previous == Some(set) {
            continue;
        }
        union.extend(set.iter().copied());
        previous = Some(set);
    }
    union.sort_unstable();
    union.dedup();
    union
}
