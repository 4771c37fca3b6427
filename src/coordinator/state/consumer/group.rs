//! A KIP-848 consumer group as the fold of its records.
//!
//! Kafka's `ConsumerGroup` and `ConsumerGroupMember`, reduced to the data:
//! the group epoch, the target assignment and its epoch, and each member's
//! subscription and current assignment. Nothing here is changed except by
//! [`replay`], which the shard calls for every record it writes and every
//! record it loads, so live state and a restart's state are the same fold.
//! The derived indexes (static members, subscribed topic counts, partition
//! owners) are maintained by the same fold, so a heartbeat never scans the
//! whole group to answer "who owns this partition".

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::records::{
    Assignment, CurrentAssignmentValue, GroupMetadataValue, MemberMetadataValue, PartitionMetadataValue,
    RegularExpressionValue, TargetAssignmentMemberValue,
};
use crate::coordinator::records::{ConsumerKey, RecordValue};
use crate::coordinator::FastMap;

/// The member epoch sent to leave the group for good.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// The member epoch a static member sends to leave temporarily.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// Kafka's `MemberState`: where a member is in its reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemberState {
    /// Owns exactly its target (for its epoch).
    Stable,
    /// Must revoke partitions before it can move on.
    UnrevokedPartitions,
    /// Waits for partitions another member still owns.
    UnreleasedPartitions,
    /// A value written by a newer version; the member is fenced on its
    /// next heartbeat unless it owns nothing.
    Unknown,
}

impl MemberState {
    pub fn from_i8(v: i8) -> MemberState {
        match v {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }

    pub fn as_i8(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => -1,
        }
    }

    /// Kafka's `MemberState.toString()`, as shown by describe tools.
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
            MemberState::Unknown => "unknown",
        }
    }
}

/// Kafka's `ConsumerGroup.ConsumerGroupState` (derived, never stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumerGroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    /// The wire string (ListGroups, DescribeGroups).
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// One member: its subscription (MemberMetadata record) and its current
/// assignment (CurrentMemberAssignment record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMember {
    pub member_id: String,
    pub metadata: MemberMetadataValue,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

impl ConsumerMember {
    /// A member that a record names for the first time: Kafka's defaults.
    pub fn new(member_id: &str) -> ConsumerMember {
        ConsumerMember {
            member_id: member_id.to_string(),
            metadata: MemberMetadataValue { rebalance_timeout_ms: -1, ..Default::default() },
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
        }
    }

    /// Reconciled to `epoch`: Kafka's `isReconciledTo`.
    pub fn is_reconciled_to(&self, epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == epoch
    }

    pub fn instance_id(&self) -> Option<&str> {
        self.metadata.instance_id.as_deref()
    }

    /// A member that joined through JoinGroup (online migration): Kafka's
    /// `useClassicProtocol`.
    pub fn uses_classic_protocol(&self) -> bool {
        self.metadata.classic_member_metadata.is_some()
    }

    /// The session timeout a classic member asked for in its JoinGroup.
    pub fn classic_session_timeout_ms(&self) -> Option<i32> {
        self.metadata.classic_member_metadata.as_ref().map(|c| c.session_timeout_ms)
    }

    /// The name of a classic member's first protocol: the one its JoinGroup
    /// answer names and its SyncGroup must carry.
    pub fn classic_protocol_name(&self) -> Option<&str> {
        let c = self.metadata.classic_member_metadata.as_ref()?;
        c.supported_protocols.first().map(|(name, _)| name.as_str())
    }

    /// The CurrentMemberAssignment value this member's assignment state is.
    pub fn current_assignment_value(&self) -> CurrentAssignmentValue {
        CurrentAssignmentValue {
            member_epoch: self.member_epoch,
            previous_member_epoch: self.previous_member_epoch,
            state: self.state.as_i8(),
            assigned: self.assigned.clone(),
            pending_revocation: self.pending_revocation.clone(),
        }
    }
}

/// A consumer group: the fold of its records plus derived indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroup {
    pub group_id: String,
    pub group_epoch: i32,
    /// Hash of the subscribed topics' metadata when the epoch was written.
    pub metadata_hash: i64,
    /// A ConsumerGroupPartitionMetadata record from a pre-4.1 log, if any.
    pub legacy_partition_metadata: Option<PartitionMetadataValue>,
    pub assignment_epoch: i32,
    /// Sorted by member id, so the assignor sees a deterministic input.
    pub members: BTreeMap<String, ConsumerMember>,
    /// Target assignment per member id (may name members being replaced).
    pub target: BTreeMap<String, Assignment>,
    /// instance id → member id.
    pub static_members: FastMap<String, String>,
    /// topic name → number of members subscribed to it by name.
    pub subscribed_topics: BTreeMap<String, usize>,
    /// regular expression → number of members subscribed to it.
    pub subscribed_regexes: BTreeMap<String, usize>,
    /// What each regular expression resolved to (ConsumerGroupRegularExpression
    /// records); see `consumer::regex`.
    pub resolved_regexes: BTreeMap<String, RegularExpressionValue>,
    /// (topic id, partition) → epoch of the member that owns it (assigned
    /// or pending revocation): Kafka's `currentPartitionEpoch`.
    pub partition_epochs: FastMap<(Uuid, i32), i32>,
}

impl ConsumerGroup {
    pub fn new(group_id: &str) -> ConsumerGroup {
        ConsumerGroup {
            group_id: group_id.to_string(),
            group_epoch: 0,
            metadata_hash: 0,
            legacy_partition_metadata: None,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            static_members: FastMap::default(),
            subscribed_topics: BTreeMap::new(),
            subscribed_regexes: BTreeMap::new(),
            resolved_regexes: BTreeMap::new(),
            partition_epochs: FastMap::default(),
        }
    }

    /// Kafka's group state, derived from epochs and members.
    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self.members.values().any(|m| !m.is_reconciled_to(self.assignment_epoch)) {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    pub fn static_member(&self, instance_id: &str) -> Option<&ConsumerMember> {
        self.static_members.get(instance_id).and_then(|m| self.members.get(m))
    }

    /// The epoch of the member owning a partition, −1 when it is free.
    pub fn partition_epoch(&self, topic: &Uuid, partition: i32) -> i32 {
        self.partition_epochs.get(&(*topic, partition)).copied().unwrap_or(-1)
    }

    /// Kafka's `supportsClassicProtocols`: the consumer protocol type, and
    /// (unless the group is empty) one protocol every classic member has.
    pub fn supports_classic_protocols(&self, protocol_type: &str, names: &[&str]) -> bool {
        if protocol_type != crate::coordinator::classic::group::CONSUMER_PROTOCOL_TYPE {
            return false;
        }
        if self.members.is_empty() {
            return !names.is_empty();
        }
        let classic: Vec<&ConsumerMember> = self.members.values().filter(|m| m.uses_classic_protocol()).collect();
        names.iter().any(|name| {
            classic.iter().all(|m| {
                m.metadata
                    .classic_member_metadata
                    .as_ref()
                    .is_some_and(|c| c.supported_protocols.iter().any(|(n, _)| n == name))
            })
        })
    }

    /// Kafka's `waitingOnUnreleasedPartition`: the member waits for a
    /// partition of its target that another member still owns.
    pub fn waiting_on_unreleased_partition(&self, m: &ConsumerMember) -> bool {
        if m.state != MemberState::UnreleasedPartitions {
            return false;
        }
        let Some(target) = self.target.get(&m.member_id) else { return false };
        target.iter().any(|(topic, parts)| {
            parts
                .iter()
                .any(|p| !m.assigned.get(topic).is_some_and(|a| a.contains(p)) && self.partition_epoch(topic, *p) != -1)
        })
    }

    pub fn target_of(&self, member_id: &str) -> Assignment {
        self.target.get(member_id).cloned().unwrap_or_default()
    }

    fn member_mut(&mut self, member_id: &str) -> &mut ConsumerMember {
        self.members.entry(member_id.to_string()).or_insert_with(|| ConsumerMember::new(member_id))
    }

    fn set_metadata(&mut self, member_id: &str, value: MemberMetadataValue) {
        let (old_topics, old_instance, old_regex) = match self.members.get(member_id) {
            Some(m) => (
                m.metadata.subscribed_topic_names.clone(),
                m.metadata.instance_id.clone(),
                m.metadata.subscribed_topic_regex.clone(),
            ),
            None => (Vec::new(), None, None),
        };
        self.unsubscribe(&old_topics);
        self.count_regex(old_regex.as_deref(), false);
        self.count_regex(value.subscribed_topic_regex.as_deref(), true);
        if let Some(i) = old_instance {
            if self.static_members.get(&i).map(String::as_str) == Some(member_id) {
                self.static_members.remove(&i);
            }
        }
        self.subscribe(&value.subscribed_topic_names);
        if let Some(i) = &value.instance_id {
            self.static_members.insert(i.clone(), member_id.to_string());
        }
        self.member_mut(member_id).metadata = value;
    }

    /// Counts (or uncounts) a member's regular expression; an empty one is
    /// none, as in Kafka.
    fn count_regex(&mut self, regex: Option<&str>, add: bool) {
        let Some(r) = regex.filter(|r| !r.is_empty()) else { return };
        if add {
            *self.subscribed_regexes.entry(r.to_string()).or_insert(0) += 1;
        } else if let Some(n) = self.subscribed_regexes.get_mut(r) {
            *n -= 1;
            if *n == 0 {
                self.subscribed_regexes.remove(r);
            }
        }
    }

    fn subscribe(&mut self, topics: &[String]) {
        for t in distinct(topics) {
            *self.subscribed_topics.entry(t.clone()).or_insert(0) += 1;
        }
    }

    fn unsubscribe(&mut self, topics: &[String]) {
        for t in distinct(topics) {
            if let Some(n) = self.subscribed_topics.get_mut(t) {
                *n -= 1;
                if *n == 0 {
                    self.subscribed_topics.remove(t);
                }
            }
        }
    }

    fn release_partitions(&mut self, member_id: &str) {
        let Some(m) = self.members.get(member_id) else { return };
        for (topic, parts) in m.assigned.iter().chain(m.pending_revocation.iter()) {
            for p in parts {
                // Only release what this member's epoch holds: another
                // member may own it already if records were reordered.
                if self.partition_epochs.get(&(*topic, *p)) == Some(&m.member_epoch) {
                    self.partition_epochs.remove(&(*topic, *p));
                }
            }
        }
    }

    fn set_current(&mut self, member_id: &str, v: CurrentAssignmentValue) {
        self.release_partitions(member_id);
        let m = self.member_mut(member_id);
        m.member_epoch = v.member_epoch;
        m.previous_member_epoch = v.previous_member_epoch;
        m.state = MemberState::from_i8(v.state);
        m.assigned = v.assigned;
        m.pending_revocation = v.pending_revocation;
        let epoch = m.member_epoch;
        let owned: Vec<(Uuid, i32)> = m
            .assigned
            .iter()
            .chain(m.pending_revocation.iter())
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            .collect();
        for k in owned {
            self.partition_epochs.insert(k, epoch);
        }
    }

    fn remove_member(&mut self, member_id: &str) {
        self.release_partitions(member_id);
        if let Some(m) = self.members.remove(member_id) {
            self.unsubscribe(&m.metadata.subscribed_topic_names);
            self.count_regex(m.metadata.subscribed_topic_regex.as_deref(), false);
            if let Some(i) = &m.metadata.instance_id {
                if self.static_members.get(i).map(String::as_str) == Some(member_id) {
                    self.static_members.remove(i);
                }
            }
        }
    }
}

fn distinct(topics: &[String]) -> BTreeSet<&String> {
    topics.iter().collect()
}

/// The shard's consumer groups by id.
pub type ConsumerGroups = FastMap<String, ConsumerGroup>;

fn group_mut<'a>(groups: &'a mut ConsumerGroups, group_id: &str) -> &'a mut ConsumerGroup {
    groups.entry(group_id.to_string()).or_insert_with(|| ConsumerGroup::new(group_id))
}

/// Applies one consumer-group record, as Kafka's `GroupMetadataManager.replay`
/// does: a value creates what it names if missing; a tombstone of something
/// missing does nothing. A value of the wrong type for its key cannot come
/// from the decoder and is ignored.
pub fn replay(groups: &mut ConsumerGroups, group_id: &str, kind: &ConsumerKey, value: Option<&RecordValue>) {
    match (kind, value) {
        (ConsumerKey::Metadata, Some(RecordValue::ConsumerMetadata(GroupMetadataValue { epoch, metadata_hash }))) => {
            let g = group_mut(groups, group_id);
            g.group_epoch = *epoch;
            g.metadata_hash = *metadata_hash;
        }
        (ConsumerKey::Metadata, None) => {
            groups.remove(group_id);
        }
        (ConsumerKey::PartitionMetadata, Some(RecordValue::ConsumerPartitionMetadata(v))) => {
            group_mut(groups, group_id).legacy_partition_metadata = Some(v.clone());
        }
        (ConsumerKey::PartitionMetadata, None) => {
            if let Some(g) = groups.get_mut(group_id) {
                g.legacy_partition_metadata = None;
            }
        }
        (ConsumerKey::Member(m), Some(RecordValue::ConsumerMember(v))) => {
            group_mut(groups, group_id).set_metadata(m, v.clone());
        }
        (ConsumerKey::Member(m), None) => {
            if let Some(g) = groups.get_mut(group_id) {
                g.remove_member(m);
            }
        }
        (ConsumerKey::TargetMetadata, Some(RecordValue::ConsumerTargetMetadata(v))) => {
            group_mut(groups, group_id).assignment_epoch = v.assignment_epoch;
        }
        (ConsumerKey::TargetMetadata, None) => {
            if let Some(g) = groups.get_mut(group_id) {
                g.assignment_epoch = 0;
            }
        }
        (
            ConsumerKey::TargetMember(m),
            Some(RecordValue::ConsumerTargetMember(TargetAssignmentMemberValue { partitions })),
        ) => {
            group_mut(groups, group_id).target.insert(m.clone(), partitions.clone());
        }
        (ConsumerKey::TargetMember(m), None) => {
            if let Some(g) = groups.get_mut(group_id) {
                g.target.remove(m);
            }
        }
        (ConsumerKey::CurrentAssignment(m), Some(RecordValue::ConsumerCurrentAssignment(v))) => {
            group_mut(groups, group_id).set_current(m, v.clone());
        }
        (ConsumerKey::CurrentAssignment(m), None) => {
            // Kafka resets the member to epoch −1 with nothing assigned; the
            // member itself goes with its MemberMetadata tombstone.
            if let Some(g) = groups.get_mut(group_id) {
                if g.members.contains_key(m) {
                    g.set_current(
                        m,
                        CurrentAssignmentValue {
                            member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
                            previous_member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
                            state: MemberState::Stable.as_i8(),
                            assigned: Assignment::new(),
                            pending_revocation: Assignment::new(),
                        },
                    );
                }
            }
        }
        (ConsumerKey::RegularExpression(r), Some(RecordValue::ConsumerRegularExpression(v))) => {
            group_mut(groups, group_id).resolved_regexes.insert(r.clone(), v.clone());
        }
        (ConsumerKey::RegularExpression(r), None) => {
            if let Some(g) = groups.get_mut(group_id) {
                g.resolved_regexes.remove(r);
            }
        }
        _ => {}
    }
}

/// The records that rebuild `g` exactly (compaction snapshot): the group
/// epoch, members, targets, the target epoch, then current assignments.
pub fn snapshot_records(g: &ConsumerGroup) -> Vec<(ConsumerKey, RecordValue)> {
    let mut out = Vec::with_capacity(2 + 3 * g.members.len());
    out.push((
        ConsumerKey::Metadata,
        RecordValue::ConsumerMetadata(GroupMetadataValue { epoch: g.group_epoch, metadata_hash: g.metadata_hash }),
    ));
    if let Some(p) = &g.legacy_partition_metadata {
        out.push((ConsumerKey::PartitionMetadata, RecordValue::ConsumerPartitionMetadata(p.clone())));
    }
    for (id, m) in &g.members {
        out.push((ConsumerKey::Member(id.clone()), RecordValue::ConsumerMember(m.metadata.clone())));
    }
    for (regex, v) in &g.resolved_regexes {
        out.push((ConsumerKey::RegularExpression(regex.clone()), RecordValue::ConsumerRegularExpression(v.clone())));
    }
    for (id, t) in &g.target {
        out.push((
            ConsumerKey::TargetMember(id.clone()),
            RecordValue::ConsumerTargetMember(TargetAssignmentMemberValue { partitions: t.clone() }),
        ));
    }
    out.push((
        ConsumerKey::TargetMetadata,
        RecordValue::ConsumerTargetMetadata(super::records::TargetAssignmentMetadataValue {
            assignment_epoch: g.assignment_epoch,
        }),
    ));
    for (id, m) in &g.members {
        out.push((
            ConsumerKey::CurrentAssignment(id.clone()),
            RecordValue::ConsumerCurrentAssignment(m.current_assignment_value()),
        ));
    }
    out
}

/// The records that delete `g` (Kafka's `createGroupTombstoneRecords`):
/// each member's current assignment, each target, the target epoch, each
/// member, each resolved regular expression, the legacy partition metadata
/// if any, then the group epoch.
pub fn tombstones(g: &ConsumerGroup) -> Vec<crate::coordinator::records::Record> {
    use crate::coordinator::records::Record;
    let id = &g.group_id;
    let mut out = Vec::with_capacity(2 * g.members.len() + g.target.len() + 3);
    for m in g.members.keys() {
        out.push(Record::consumer(id, ConsumerKey::CurrentAssignment(m.clone()), None));
    }
    for m in g.target.keys() {
        out.push(Record::consumer(id, ConsumerKey::TargetMember(m.clone()), None));
    }
    for m in g.members.keys() {
        out.push(Record::consumer(id, ConsumerKey::Member(m.clone()), None));
    }
    out.push(Record::consumer(id, ConsumerKey::TargetMetadata, None));
    for regex in g.resolved_regexes.keys() {
        out.push(Record::consumer(id, ConsumerKey::RegularExpression(regex.clone()), None));
    }
    if g.legacy_partition_metadata.is_some() {
        out.push(Record::consumer(id, ConsumerKey::PartitionMetadata, None));
    }
    out.push(Record::consumer(id, ConsumerKey::Metadata, None));
    out
}

/// kcoord's metadata hash of the subscribed topics (Kafka 4.1's
/// `MetadataHash` plays the same role with its own function): FNV-1a over
/// each topic's name, id and partition count, in name order, so it is
/// stable across restarts and Rust releases. 0 means "no topics".
pub fn metadata_hash<'a>(topics: impl Iterator<Item = (&'a str, Uuid, i32)>) -> i64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let mut any = false;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(PRIME);
        }
    };
    for (name, id, partitions) in topics {
        any = true;
        feed(&(name.len() as u32).to_be_bytes());
        feed(name.as_bytes());
        feed(id.as_bytes());
        feed(&partitions.to_be_bytes());
    }
    if any {
        h as i64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::records::{self, Record, StoredRecord};
    use crate::coordinator::store::Store;

    fn replay_all(store: &mut Store, records: &[Record]) {
        for (i, r) in records.iter().enumerate() {
            store.replay(&StoredRecord { timestamp: i as i64, record: r.clone() });
        }
    }

    #[test]
    fn replaying_records_builds_the_group_and_its_indexes() {
        let mut s = Store::new();
        // Everything but the trailing tombstones.
        let samples = super::super::records::tests::samples();
        replay_all(&mut s, &samples[..8]);
        let g = s.consumer_group("g").unwrap();
        assert_eq!((g.group_epoch, g.metadata_hash, g.assignment_epoch), (8, -42, 7));
        let m = &g.members["m"];
        assert_eq!((m.member_epoch, m.previous_member_epoch, m.state), (7, 6, MemberState::UnrevokedPartitions));
        assert_eq!(g.static_members.get("i").map(String::as_str), Some("m"));
        assert_eq!(g.subscribed_topics.get("a"), Some(&1));
        let t1 = Uuid::from_bytes([1; 16]);
        let t2 = Uuid::from_bytes([2; 16]);
        assert_eq!(g.partition_epoch(&t1, 0), 7);
        assert_eq!(g.partition_epoch(&t2, 3), 7, "pending revocation is still owned");
        assert_eq!(g.partition_epoch(&t1, 1), -1);
        assert_eq!(g.state(), ConsumerGroupState::Assigning, "group epoch 8 > assignment epoch 7");

        // A snapshot rebuilds the same state.
        let snap = s.snapshot(100, 1000);
        let mut rebuilt = Store::new();
        for p in &snap {
            rebuilt.replay(&records::decode(p).unwrap());
        }
        assert_eq!(rebuilt, s);

        // Kafka's removal order: current, target, member tombstones, then the group's.
        replay_all(&mut s, &samples[8..]);
        assert!(s.consumer_group("g").is_none());
    }

    #[test]
    fn removing_a_member_releases_its_partitions_and_subscriptions() {
        let mut s = Store::new();
        let samples = super::super::records::tests::samples();
        replay_all(&mut s, &samples[..8]);
        replay_all(
            &mut s,
            &[
                Record::consumer("g", ConsumerKey::CurrentAssignment("m".into()), None),
                Record::consumer("g", ConsumerKey::TargetMember("m".into()), None),
                Record::consumer("g", ConsumerKey::Member("m".into()), None),
            ],
        );
        let g = s.consumer_group("g").unwrap();
        assert!(g.partition_epochs.is_empty());
        assert!(g.static_members.is_empty());
        assert!(!g.subscribed_topics.contains_key("a"));
        assert_eq!(g.members.len(), 1);
    }
}
