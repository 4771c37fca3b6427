//! Online migration between a classic group and a consumer group (Kafka's
//! `group.consumer.migration.policy`, KIP-848 "upgrade and downgrade").
//!
//! Upgrade: the first consumer-protocol member of a non-empty classic group
//! turns it into a consumer group (Kafka's `convertToConsumerGroup` and
//! `ConsumerGroup.fromClassicGroup`): the GroupMetadata record is
//! tombstoned and the classic members are written as consumer-group
//! members with their `ClassicMemberMetadata`, each owning (and targeted
//! with) what the classic assignment gave it, Stable in the classic
//! generation. They keep speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup
//! (`classic_member`).
//!
//! Downgrade: when the last consumer-protocol member leaves a group whose
//! other members are all classic, the consumer group is tombstoned and a
//! GroupMetadata record of the classic form is written (Kafka's
//! `convertToClassicGroup` and `ClassicGroup.fromConsumerGroup`): the
//! generation is the group epoch, each member is assigned its target, and a
//! rebalance starts so that every member rejoins.
//!
//! Both are plain records, so a restart replays them like any other.

use std::collections::HashSet;

use bytes::Bytes;
use indexmap::IndexMap;

use super::embedded;
use super::group::{metadata_hash, replay, ConsumerGroup, ConsumerGroups, MemberState};
use super::heartbeat::sorted_topics;
use super::records::{
    ClassicMemberMetadata, CurrentAssignmentValue, GroupMetadataValue, MemberMetadataValue, TargetAssignmentMemberValue,
};
use super::target::TopicImage;
use crate::coordinator::classic::group::{ClassicGroup, GroupState, Member, CONSUMER_PROTOCOL_TYPE};
use crate::coordinator::classic::history::Cause;
use crate::coordinator::classic::rebalance;
use crate::coordinator::core::{CoreConfig, Cx};
use crate::coordinator::messages::{JoinGroupResponse, Protocol, SyncGroupResponse};
use crate::coordinator::records::{ConsumerKey, Record, RecordValue};
use crate::coordinator::timers::Slot;
use crate::coordinator::Groups;
use crate::error_code::ErrorCode;
use crate::protocol::consumer_protocol::{self, Malformed};

/// Kafka's `validateOnlineUpgrade`: the policy allows it, the group uses
/// the consumer protocol type, and it fits `group.consumer.max_size`.
pub fn may_upgrade(c: &ClassicGroup, cfg: &CoreConfig) -> bool {
    let why = if !cfg.consumer.migration_policy.upgrade_enabled() {
        "the online upgrade is disabled"
    } else if !c.uses_consumer_protocol() {
        "the group does not use the consumer embedded protocol"
    } else if c.members.len() > cfg.consumer.max_size.max(0) as usize {
        "the group size exceeds the consumer group maximum size"
    } else {
        return true;
    };
    tracing::info!(group = %c.group_id, "cannot upgrade classic group to consumer group because {why}");
    false
}

/// A classic group converted to a consumer group, before it is written.
pub struct Upgrade {
    /// The GroupMetadata tombstone, then Kafka's `createConsumerGroupRecords`.
    pub records: Vec<Record>,
    /// The consumer group those records make.
    pub group: ConsumerGroup,
    /// Each member with its classic session timeout (to arm its session).
    pub sessions: Vec<(String, i32)>,
}

/// Kafka's `ConsumerGroup.fromClassicGroup` and `createConsumerGroupRecords`.
/// A member that has no assignment yet (it joined during a rebalance)
/// owns nothing; Kafka would refuse the upgrade until the rebalance ends.
pub fn upgrade(c: &ClassicGroup, image: &TopicImage) -> Result<Upgrade, Malformed> {
    let gid = &c.group_id;
    let epoch = c.generation_id;
    let protocol = c.protocol_name.as_deref();
    let mut members = Vec::with_capacity(c.members.len());
    for m in c.members.values() {
        // Before its first rebalance completes, a group has no protocol
        // yet: a member's first protocol speaks for it.
        let metadata = match protocol {
            Some(_) => m.metadata(protocol),
            None => m.protocols.first().map(|p| p.metadata.clone()).unwrap_or_default(),
        };
        let sub = consumer_protocol::parse_subscription(&metadata)?;
        let owned =
            if m.assignment.is_empty() { Vec::new() } else { consumer_protocol::parse_assignment(&m.assignment)? };
        let assigned = embedded::to_assignment(&owned, image);
        let metadata = MemberMetadataValue {
            instance_id: m.group_instance_id.clone(),
            rack_id: sub.rack_id,
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            subscribed_topic_names: sorted_topics(&sub.topics),
            subscribed_topic_regex: None,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            server_assignor: None,
            classic_member_metadata: Some(ClassicMemberMetadata {
                session_timeout_ms: m.session_timeout_ms,
                supported_protocols: m.protocols.iter().map(|p| (p.name.clone(), p.metadata.clone())).collect(),
            }),
        };
        members.push((m.member_id.clone(), metadata, assigned, m.session_timeout_ms));
    }
    let topics: std::collections::BTreeSet<&String> =
        members.iter().flat_map(|(_, md, _, _)| md.subscribed_topic_names.iter()).collect();
    let hash = metadata_hash(topics.iter().filter_map(|n| image.get(n).map(|(id, p)| (n.as_str(), id, p))));

    let mut records = vec![Record::group_tombstone(gid)];
    for (id, md, _, _) in &members {
        records.push(Record::consumer(
            gid,
            ConsumerKey::Member(id.clone()),
            Some(RecordValue::ConsumerMember(md.clone())),
        ));
    }
    records.push(Record::consumer(
        gid,
        ConsumerKey::Metadata,
        Some(RecordValue::ConsumerMetadata(GroupMetadataValue { epoch, metadata_hash: hash })),
    ));
    for (id, _, assigned, _) in &members {
        records.push(Record::consumer(
            gid,
            ConsumerKey::TargetMember(id.clone()),
            Some(RecordValue::ConsumerTargetMember(TargetAssignmentMemberValue { partitions: assigned.clone() })),
        ));
    }
    records.push(super::target::target_metadata_record(gid, epoch));
    for (id, _, assigned, _) in &members {
        records.push(Record::consumer(
            gid,
            ConsumerKey::CurrentAssignment(id.clone()),
            Some(RecordValue::ConsumerCurrentAssignment(CurrentAssignmentValue {
                member_epoch: epoch,
                previous_member_epoch: epoch,
                state: MemberState::Stable.as_i8(),
                assigned: assigned.clone(),
                pending_revocation: Default::default(),
            })),
        ));
    }
    // The group as the store will hold it: the fold of the same records.
    let mut fold = ConsumerGroups::default();
    for r in records.iter().skip(1) {
        if let crate::coordinator::records::RecordKey::Consumer { kind, .. } = &r.key {
            replay(&mut fold, gid, kind, r.value.as_ref());
        }
    }
    let group = fold.remove(gid.as_str()).unwrap_or_else(|| ConsumerGroup::new(gid));
    let sessions = members.into_iter().map(|(id, _, _, s)| (id, s)).collect();
    Ok(Upgrade { records, group, sessions })
}

/// Answers what an upgraded classic group still had parked: Kafka's
/// `completeAllJoinFutures` / `completeAllSyncFutures` with
/// REBALANCE_IN_PROGRESS, so its members rejoin the consumer group.
pub fn release_parked(old: &mut ClassicGroup, cx: &mut Cx) {
    for id in old.member_ids() {
        rebalance::complete_join_future(
            old,
            &id,
            JoinGroupResponse::error(ErrorCode::REBALANCE_IN_PROGRESS, id.clone()),
            cx,
        );
        rebalance::complete_sync_future(old, &id, SyncGroupResponse::error(ErrorCode::REBALANCE_IN_PROGRESS), cx);
        if let Some(m) = old.members.get_mut(&id) {
            m.heartbeat.cancel();
        }
    }
    old.join_timer.cancel();
    old.sync_timer.cancel();
}

/// Kafka's `validateOnlineDowngradeWithFencedMembers`: once `leaving` are
/// gone, members remain and all of them use the classic protocol, the
/// policy allows a downgrade, and they fit `group.max_size`.
pub fn may_downgrade(g: &ConsumerGroup, leaving: &[&str], cfg: &CoreConfig) -> bool {
    // A set: an administrative removal may name every member of a large group.
    let leaving: HashSet<&str> = leaving.iter().copied().collect();
    let staying = g.members.values().filter(|m| !leaving.contains(m.member_id.as_str()));
    let (mut count, mut all_classic) = (0usize, true);
    for m in staying {
        count += 1;
        all_classic &= m.uses_classic_protocol();
    }
    if count == 0 || !all_classic {
        return false;
    }
    let why = if !cfg.consumer.migration_policy.downgrade_enabled() {
        "the online downgrade is disabled"
    } else if count > cfg.max_size.max(0) as usize {
        "its group size is greater than classic group max size"
    } else {
        return true;
    };
    tracing::info!(group = %g.group_id, "cannot downgrade consumer group to classic group because {why}");
    false
}

/// A consumer group converted to a classic group, before it is written.
pub struct Downgrade {
    /// The consumer group's tombstones, then its GroupMetadata record.
    pub records: Vec<Record>,
    /// The classic group those records stand for (Stable, before the
    /// rebalance that `install_downgraded` starts).
    pub group: ClassicGroup,
}

/// Kafka's `ClassicGroup.fromConsumerGroup` without `leaving`: every other
/// member with its classic protocols and timeouts, the protocol the members
/// vote for, and each member's target assignment in the consumer protocol
/// version of its metadata.
pub fn downgrade(g: &ConsumerGroup, leaving: &[&str], image: &TopicImage, now: i64) -> Result<Downgrade, String> {
    let mut c = ClassicGroup::new(&g.group_id, now);
    c.state = GroupState::Stable;
    c.previous_state = GroupState::Stable;
    c.generation_id = g.group_epoch;
    c.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_string());
    let leaving: HashSet<&str> = leaving.iter().copied().collect();
    for m in g.members.values().filter(|m| !leaving.contains(m.member_id.as_str())) {
        let Some(classic) = &m.metadata.classic_member_metadata else {
            return Err(format!("member {} does not use the classic protocol", m.member_id));
        };
        c.add(Member {
            member_id: m.member_id.clone(),
            group_instance_id: m.metadata.instance_id.clone(),
            client_id: m.metadata.client_id.clone(),
            client_host: m.metadata.client_host.clone(),
            rebalance_timeout_ms: m.metadata.rebalance_timeout_ms,
            session_timeout_ms: classic.session_timeout_ms,
            protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
            protocols: classic
                .supported_protocols
                .iter()
                .map(|(name, metadata)| Protocol { name: name.clone(), metadata: metadata.clone() })
                .collect(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            heartbeat: Slot::default(),
        });
    }
    c.protocol_name = c.select_protocol();
    if c.protocol_name.is_none() {
        return Err("the members share no protocol".into());
    }
    c.subscribed_topics = c.compute_subscribed_topics();
    let protocol = c.protocol_name.clone();
    let mut assigned: IndexMap<String, Bytes> = IndexMap::new();
    for m in c.members.values() {
        let version = consumer_protocol::version(&m.metadata(protocol.as_deref()))
            .map_err(|_| "malformed metadata".to_string())?;
        let target = embedded::to_named(&g.target_of(&m.member_id), image);
        assigned.insert(m.member_id.clone(), consumer_protocol::encode_assignment(&target, version));
    }
    for (id, bytes) in assigned {
        if let Some(m) = c.members.get_mut(&id) {
            m.assignment = bytes;
        }
    }
    let mut records = super::group::tombstones(g);
    records.push(Record::group(&g.group_id, c.to_record(None)));
    Ok(Downgrade { records, group: c })
}

/// After the downgrade's records are written: the classic group takes the
/// id, every member's session is armed, and a rebalance starts (Kafka's
/// "Downgrade group X from consumer to classic.").
pub fn install_downgraded(classic: &mut Groups, mut c: ClassicGroup, leaving: &str, cx: &mut Cx) {
    for id in c.member_ids() {
        rebalance::reschedule_heartbeat(&mut c, &id, cx);
    }
    tracing::info!(group = %c.group_id, "downgraded the consumer group to a classic group");
    rebalance::prepare_rebalance(&mut c, cx, Cause::Downgraded { member_id: leaving.to_string() });
    classic.insert(c.group_id.clone(), c);
}
