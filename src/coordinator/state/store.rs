//! The durable state of a shard: exactly the fold of its log.
//!
//! Committed offsets and the last GroupMetadata record of each group change
//! only here, by replaying a record. The live path appends a record and then
//! replays that same record; recovery replays the log. So what a client can
//! read back always equals what a restart would rebuild (the classic peer bug
//! this rules out: offsets that change after a restart).

use bytes::Bytes;

use super::consumer::group::{self as consumer_group, ConsumerGroup, ConsumerGroups};
use super::records::{
    self, ConsumerKey, DelegationValue, EncodedRecords, GroupValue, OffsetValue, Record, RecordKey, RecordValue,
    RecordView, StoredRecord,
};
use super::FastMap;
use crate::error_code::ErrorCode;

/// Offsets of one group: topic → partition → value.
pub type GroupOffsets = FastMap<String, FastMap<i32, OffsetValue>>;

/// Where a shard's records go: the shard's log, or memory in tests.
pub trait RecordSink {
    /// Writes encoded records, all or nothing. An error means nothing was
    /// written and the caller must not change any state.
    fn append(&mut self, records: &EncodedRecords) -> Result<(), ErrorCode>;
}

/// A sink that keeps records in memory (tests, benchmarks, simulations).
#[derive(Debug, Default)]
pub struct MemorySink {
    pub payloads: Vec<Bytes>,
    /// Fail this many upcoming appends with KAFKA_STORAGE_ERROR.
    pub fail_next: usize,
}

impl RecordSink for MemorySink {
    fn append(&mut self, records: &EncodedRecords) -> Result<(), ErrorCode> {
        if self.fail_next > 0 {
            self.fail_next -= 1;
            return Err(ErrorCode::KAFKA_STORAGE_ERROR);
        }
        self.payloads.extend(records.iter().map(Bytes::copy_from_slice));
        Ok(())
    }
}

/// Durable state: the latest record per key, plus recent group tombstones.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Store {
    groups: FastMap<String, GroupValue>,
    /// KIP-848 consumer groups: live state is this fold, nothing else.
    consumer: ConsumerGroups,
    offsets: FastMap<String, GroupOffsets>,
    /// Deleted groups and when their tombstone was written, kept for
    /// `offsets.tombstone_retention_ms` because [`Store::was_deleted`]
    /// consults them. Only group tombstones are remembered: a snapshot is
    /// the whole state, so a tombstone carried into one shadows nothing,
    /// and remembering every offset's and KIP-848 member's tombstone made
    /// memory grow with the rate of deletions (a member churn of a few
    /// thousand a second reached gigabytes within the day's retention).
    group_tombstones: FastMap<String, i64>,
    offset_count: usize,
    /// Sidecar mode: groups whose offsets the upstream's coordinator keeps.
    delegated: FastMap<String, DelegationValue>,
}

impl Store {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one record. This is the only way durable state changes.
    pub fn replay(&mut self, stored: &StoredRecord) {
        let key = &stored.record.key;
        match (key, &stored.record.value) {
            (RecordKey::Group { group }, Some(RecordValue::Group(v))) => {
                self.note_group_deletion(group, false, stored.timestamp);
                self.groups.insert(group.clone(), v.clone());
            }
            (RecordKey::Group { group }, None) => {
                self.note_group_deletion(group, true, stored.timestamp);
                self.groups.remove(group);
            }
            (RecordKey::Offset { group, topic, partition }, Some(RecordValue::Offset(v))) => {
                self.put_offset(group, topic, *partition, v);
            }
            (RecordKey::Offset { group, topic, partition }, None) => {
                self.remove_offset(group, topic, *partition);
            }
            (RecordKey::Consumer { group, kind }, value) => {
                // A consumer group's metadata record is the group itself: its
                // tombstone deletes the group, as a GroupMetadata tombstone
                // deletes a classic one.
                if matches!(kind, ConsumerKey::Metadata) {
                    self.note_group_deletion(group, value.is_none(), stored.timestamp);
                }
                consumer_group::replay(&mut self.consumer, group, kind, value.as_ref());
            }
            (RecordKey::Delegation { group }, Some(RecordValue::Delegation(v))) => {
                self.delegated.insert(group.clone(), *v);
            }
            (RecordKey::Delegation { group }, None) => {
                self.delegated.remove(group);
            }
            // A key/value type mismatch cannot be produced by the decoder.
            _ => {}
        }
    }

    /// Remembers a group whose tombstone (classic or consumer) was written
    /// at `timestamp`, or forgets it once a record re-creates the group.
    fn note_group_deletion(&mut self, group: &str, deleted: bool, timestamp: i64) {
        if deleted {
            self.group_tombstones.insert(group.to_string(), timestamp);
        } else if !self.group_tombstones.is_empty() {
            self.group_tombstones.remove(group);
        }
    }

    /// Applies a record decoded as a view; same effect as [`Store::replay`].
    pub fn replay_view(&mut self, view: &RecordView<'_>) {
        match view {
            RecordView::Other(stored) => self.replay(stored),
            RecordView::Offset { group, topic, partition, value, .. } => match value {
                Some(v) => self.put_offset(group, topic, *partition, v),
                None => self.remove_offset(group, topic, *partition),
            },
        }
    }

    /// The offset replay of both record forms. Looks up before inserting,
    /// so replay allocates keys only for new entries.
    fn put_offset(&mut self, group: &str, topic: &str, partition: i32, v: &OffsetValue) {
        let topics = match self.offsets.get_mut(group) {
            Some(t) => t,
            None => self.offsets.entry(group.to_string()).or_default(),
        };
        let parts = match topics.get_mut(topic) {
            Some(p) => p,
            None => topics.entry(topic.to_string()).or_default(),
        };
        if parts.insert(partition, v.clone()).is_none() {
            self.offset_count += 1;
        }
    }

    /// An offset tombstone: the entry goes, and so do emptied maps.
    fn remove_offset(&mut self, group: &str, topic: &str, partition: i32) {
        let Some(topics) = self.offsets.get_mut(group) else { return };
        if let Some(parts) = topics.get_mut(topic) {
            if parts.remove(&partition).is_some() {
                self.offset_count -= 1;
            }
            if parts.is_empty() {
                topics.remove(topic);
            }
        }
        if topics.is_empty() {
            self.offsets.remove(group);
        }
    }

    pub fn consumer_group(&self, group: &str) -> Option<&ConsumerGroup> {
        self.consumer.get(group)
    }

    pub fn consumer_groups(&self) -> impl Iterator<Item = &ConsumerGroup> {
        self.consumer.values()
    }

    pub fn group_record(&self, group: &str) -> Option<&GroupValue> {
        self.groups.get(group)
    }

    pub fn offsets(&self, group: &str) -> Option<&GroupOffsets> {
        self.offsets.get(group)
    }

    pub fn offset(&self, group: &str, topic: &str, partition: i32) -> Option<&OffsetValue> {
        self.offsets.get(group)?.get(topic)?.get(&partition)
    }

    pub fn has_offsets(&self, group: &str) -> bool {
        self.offsets.contains_key(group)
    }

    /// Whether the group (classic or consumer) was deleted recently enough
    /// that its tombstone is still kept (`offsets.tombstone_retention_ms`).
    pub fn was_deleted(&self, group: &str) -> bool {
        !self.group_tombstones.is_empty() && self.group_tombstones.contains_key(group)
    }

    /// Whether (and how far) the group's offsets are delegated to the
    /// upstream (sidecar mode).
    pub fn delegation(&self, group: &str) -> Option<DelegationValue> {
        self.delegated.get(group).copied()
    }

    /// Groups whose offsets are delegated to the upstream.
    pub fn delegated_groups(&self) -> impl Iterator<Item = &String> {
        self.delegated.keys()
    }

    /// Groups with committed offsets.
    pub fn groups_with_offsets(&self) -> impl Iterator<Item = &String> {
        self.offsets.keys()
    }

    pub fn group_records(&self) -> impl Iterator<Item = (&String, &GroupValue)> {
        self.groups.iter()
    }

    pub fn offset_count(&self) -> usize {
        self.offset_count
    }

    pub fn group_record_count(&self) -> usize {
        self.groups.len()
    }

    /// The records that rebuild this state, for a compaction snapshot:
    /// group tombstones younger than `tombstone_retention_ms` (older ones
    /// are forgotten here), then every group record, then every offset. The
    /// order matters for the live groups rebuilt on load: a tombstone must
    /// not come after the values it no longer shadows (a group tombstone
    /// after a later simple commit's offset would delete that group), and
    /// group records (classic, then consumer) come before offsets so that
    /// offsets do not create simple groups in place of real ones.
    pub fn snapshot(&mut self, now: i64, tombstone_retention_ms: i64) -> Vec<Bytes> {
        self.group_tombstones.retain(|_, ts| now.saturating_sub(*ts) < tombstone_retention_ms);
        let mut out = Vec::with_capacity(self.groups.len() + self.offset_count + self.group_tombstones.len());
        // Everything here was decoded from records that were encoded once
        // already, so encoding again cannot fail.
        let mut push = |record: Record, ts: i64| match records::encode(&record, ts) {
            Ok(p) => out.push(p),
            Err(e) => tracing::error!(error = %e, "a stored record no longer encodes"),
        };
        for (group, ts) in &self.group_tombstones {
            push(Record::group_tombstone(group), *ts);
        }
        let mut groups: Vec<_> = self.groups.iter().collect();
        groups.sort_by(|a, b| a.0.cmp(b.0));
        for (g, v) in groups {
            push(Record::group(g, v.clone()), now);
        }
        let mut consumer: Vec<_> = self.consumer.values().collect();
        consumer.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        for g in consumer {
            for (kind, value) in consumer_group::snapshot_records(g) {
                push(Record::consumer(&g.group_id, kind, Some(value)), now);
            }
        }
        for (g, topics) in &self.offsets {
            for (t, parts) in topics {
                for (p, v) in parts {
                    push(Record::offset(g, t, *p, v.clone()), v.commit_timestamp);
                }
            }
        }
        let mut delegated: Vec<_> = self.delegated.iter().collect();
        delegated.sort_by(|a, b| a.0.cmp(b.0));
        for (g, v) in delegated {
            push(Record::delegation(g, Some(*v)), now);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(offset: i64) -> OffsetValue {
        OffsetValue { offset, leader_epoch: -1, metadata: String::new(), commit_timestamp: 1, expire_timestamp: None }
    }

    fn stored(record: Record, timestamp: i64) -> StoredRecord {
        StoredRecord { timestamp, record }
    }

    #[test]
    fn latest_record_per_key_wins_and_tombstones_delete() {
        let mut s = Store::new();
        s.replay(&stored(Record::offset("g", "t", 0, ov(1)), 1));
        s.replay(&stored(Record::offset("g", "t", 0, ov(2)), 2));
        s.replay(&stored(Record::offset("g", "t", 1, ov(3)), 3));
        assert_eq!(s.offset("g", "t", 0).unwrap().offset, 2);
        assert_eq!(s.offset_count(), 2);
        s.replay(&stored(Record::offset_tombstone("g", "t", 0), 4));
        s.replay(&stored(Record::offset_tombstone("g", "t", 1), 4));
        assert!(!s.has_offsets("g"));
        assert_eq!(s.offset_count(), 0);
    }

    #[test]
    fn a_snapshot_rebuilds_the_same_state() {
        let mut s = Store::new();
        s.replay(&stored(Record::offset("g", "t", 0, ov(1)), 1));
        s.replay(&stored(
            Record::group(
                "g",
                GroupValue {
                    protocol_type: "consumer".into(),
                    generation: 3,
                    protocol: None,
                    leader: None,
                    current_state_timestamp: 5,
                    members: vec![],
                },
            ),
            2,
        ));
        s.replay(&stored(Record::offset("h", "t", 0, ov(9)), 3));
        s.replay(&stored(Record::offset_tombstone("h", "t", 0), 100));
        s.replay(&stored(Record::group_tombstone("old"), 10));
        s.replay(&stored(Record::delegation("d", Some(DelegationValue { handed_over: true })), 11));
        s.replay(&stored(Record::delegation("e", Some(DelegationValue { handed_over: false })), 12));
        s.replay(&stored(Record::delegation("e", None), 900));
        s.replay(&stored(Record::group_tombstone("recent"), 500));
        let snap = s.snapshot(1000, 950);
        let mut rebuilt = Store::new();
        for p in &snap {
            rebuilt.replay(&records::decode(p).unwrap());
        }
        assert_eq!(rebuilt, s);
        // The group tombstone written at 10 is older than 950 ms and was
        // dropped; the one written at 500 is kept.
        assert!(!rebuilt.was_deleted("old"));
        assert!(rebuilt.was_deleted("recent"));
        assert_eq!(rebuilt.delegation("d"), Some(DelegationValue { handed_over: true }));
        assert_eq!(rebuilt.delegation("e"), None);
    }

    /// Offsets and KIP-848 members are deleted at the rate clients churn;
    /// nothing reads their tombstones once applied, so none is held in
    /// memory or copied into snapshots. Only a deleted group is remembered,
    /// for as long as the retention says, and re-creating it forgets it.
    #[test]
    fn only_deleted_groups_are_remembered_after_their_tombstones_apply() {
        let mut s = Store::new();
        for i in 0..1000 {
            let member = format!("member-{i}");
            s.replay(&stored(Record::offset("g", "t", i, ov(i as i64)), 1));
            s.replay(&stored(Record::offset_tombstone("g", "t", i), 2));
            s.replay(&stored(Record::consumer("g", ConsumerKey::Member(member.clone()), None), 2));
            s.replay(&stored(Record::consumer("g", ConsumerKey::CurrentAssignment(member), None), 2));
        }
        s.replay(&stored(Record::group_tombstone("gone"), 3));
        assert_eq!(s.group_tombstones.len(), 1);
        assert!(s.was_deleted("gone"));
        let snap = s.snapshot(4, 86_400_000);
        assert_eq!(snap.len(), 1, "only the deleted group's tombstone is carried into the snapshot");
        s.replay(&stored(
            Record::group(
                "gone",
                GroupValue {
                    protocol_type: "consumer".into(),
                    generation: 1,
                    protocol: None,
                    leader: None,
                    current_state_timestamp: 5,
                    members: vec![],
                },
            ),
            5,
        ));
        assert!(!s.was_deleted("gone"));
    }
}
