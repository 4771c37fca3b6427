//! ConsumerGroupHeartbeat (v0–v1): Kafka's `consumerGroupHeartbeat`,
//! `consumerGroupLeave` and `consumerGroupFenceMember`, and the session and
//! rebalance timers that fence members.
//!
//! Every handler first *plans* from the group as the store holds it (no
//! mutation), producing the records Kafka would write; the records are then
//! appended and replayed, which is the only way the group changes. Timers
//! are armed only after the write succeeded, and are in-memory: on load
//! every member's session is armed afresh (`on_loaded`).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::describable::Describable;
use super::group::{
    metadata_hash, ConsumerGroup, ConsumerMember, MemberState, LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use super::messages::{ConsumerHeartbeatRequest, ConsumerHeartbeatResponse};
use super::migration;
use super::reconcile::reconcile;
use super::records::{Assignment, GroupMetadataValue, MemberMetadataValue};
use super::regex::{self as subscription_regex, Resolved};
use super::target::{self, Assigners, TopicImage};
use crate::coordinator::classic::group::GroupState;
use crate::coordinator::core::Cx;
use crate::coordinator::records::{ConsumerKey, Record, RecordValue};
use crate::coordinator::timers::{Pop, Slot, TimerKey};
use crate::coordinator::{FastMap, Groups};
use crate::error_code::ErrorCode;

/// The first version in which the client must generate its member id (KIP-1082).
const CLIENT_GENERATED_MEMBER_ID_VERSION: i16 = 1;

/// The in-memory side of a shard's consumer groups: what is not durable
/// (timers) or not theirs (assignors, topic metadata).
#[derive(Debug, Default)]
pub struct ConsumerRuntime {
    pub assigners: Assigners,
    /// The latest topic metadata the shard was given.
    pub topics: Arc<TopicImage>,
    /// What the request being served may DESCRIBE (set with `topics`).
    pub describable: Describable,
    timers: FastMap<(String, String), MemberTimers>,
}

/// A member's timers. The rebalance timer remembers the epoch it was armed
/// for: it fences only a member still in that epoch. Classic members (online
/// migration) have no rebalance timer but a join timer (armed when they are
/// told to rejoin) and a sync timer (armed when they joined), as Kafka's.
#[derive(Debug, Default)]
struct MemberTimers {
    session: Slot,
    rebalance: Slot,
    rebalance_epoch: i32,
    join: Slot,
    sync: Slot,
}

/// Which of a member's timers fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberTimer {
    Session,
    Rebalance,
    Join,
    Sync,
}

impl MemberTimer {
    fn key(self, group: &str, member: &str) -> TimerKey {
        let (group, member) = (group.to_string(), member.to_string());
        match self {
            MemberTimer::Session => TimerKey::ConsumerSession { group, member },
            MemberTimer::Rebalance => TimerKey::ConsumerRebalance { group, member },
            MemberTimer::Join => TimerKey::ConsumerJoin { group, member },
            MemberTimer::Sync => TimerKey::ConsumerSync { group, member },
        }
    }

    fn slot(self, t: &mut MemberTimers) -> &mut Slot {
        match self {
            MemberTimer::Session => &mut t.session,
            MemberTimer::Rebalance => &mut t.rebalance,
            MemberTimer::Join => &mut t.join,
            MemberTimer::Sync => &mut t.sync,
        }
    }

    /// Kafka's log line when this timer fences a member.
    fn reason(self) -> &'static str {
        match self {
            MemberTimer::Session => "the member session expired",
            MemberTimer::Rebalance => "it failed to transition from its epoch within the rebalance timeout",
            MemberTimer::Join => "the classic member failed to join within the rebalance timeout",
            MemberTimer::Sync => "the member failed to sync within timeout",
        }
    }
}

/// The session timeout of a member: a classic member's own (from its
/// JoinGroup), else `group.consumer.session_timeout_ms`.
pub fn session_timeout_ms(m: &ConsumerMember, cx: &Cx) -> i32 {
    m.classic_session_timeout_ms().unwrap_or(cx.cfg.consumer.session_timeout_ms)
}

impl ConsumerRuntime {
    pub fn new(assigners: Assigners) -> ConsumerRuntime {
        ConsumerRuntime { assigners, ..Default::default() }
    }

    fn arm(&mut self, which: MemberTimer, group: &str, member: &str, timeout_ms: i32, cx: &mut Cx) {
        let deadline = cx.now + i64::from(timeout_ms.max(0));
        let t = self.timers.entry((group.to_string(), member.to_string())).or_default();
        which.slot(t).schedule(deadline, || which.key(group, member), cx.timers);
    }

    fn cancel(&mut self, which: MemberTimer, group: &str, member: &str) {
        if let Some(t) = self.timers.get_mut(&(group.to_string(), member.to_string())) {
            which.slot(t).cancel();
        }
    }

    pub(super) fn arm_session(&mut self, group: &str, member: &str, timeout_ms: i32, cx: &mut Cx) {
        self.arm(MemberTimer::Session, group, member, timeout_ms, cx);
    }

    fn arm_rebalance(&mut self, group: &str, member: &str, epoch: i32, timeout_ms: i32, cx: &mut Cx) {
        self.arm(MemberTimer::Rebalance, group, member, timeout_ms, cx);
        if let Some(t) = self.timers.get_mut(&(group.to_string(), member.to_string())) {
            t.rebalance_epoch = epoch;
        }
    }

    fn cancel_rebalance(&mut self, group: &str, member: &str) {
        self.cancel(MemberTimer::Rebalance, group, member);
    }

    /// Kafka's `scheduleConsumerGroupJoinTimeoutIfAbsent`.
    pub(super) fn arm_join_if_absent(&mut self, group: &str, member: &str, timeout_ms: i32, cx: &mut Cx) {
        let armed = self.timers.get(&(group.to_string(), member.to_string())).is_some_and(|t| t.join.is_armed());
        if !armed {
            self.arm(MemberTimer::Join, group, member, timeout_ms, cx);
        }
    }

    pub(super) fn cancel_join(&mut self, group: &str, member: &str) {
        self.cancel(MemberTimer::Join, group, member);
    }

    pub(super) fn arm_sync(&mut self, group: &str, member: &str, timeout_ms: i32, cx: &mut Cx) {
        self.arm(MemberTimer::Sync, group, member, timeout_ms, cx);
    }

    pub(super) fn cancel_sync(&mut self, group: &str, member: &str) {
        self.cancel(MemberTimer::Sync, group, member);
    }

    pub(super) fn forget(&mut self, group: &str, member: &str) {
        self.timers.remove(&(group.to_string(), member.to_string()));
    }

    /// Drops every member timer of a group (it became a classic group).
    pub(super) fn forget_group(&mut self, group: &str) {
        self.timers.retain(|(g, _), _| g != group);
    }

    /// Arms every member's session after loading (Kafka's `onLoaded`), and
    /// the rebalance timer of consumer-protocol members waiting for a
    /// revocation.
    pub fn on_loaded(&mut self, cx: &mut Cx) {
        let members: Vec<(String, String, bool, i32, i32)> = cx
            .store
            .consumer_groups()
            .flat_map(|g| {
                g.members.values().map(|m| {
                    let revoking = m.state == MemberState::UnrevokedPartitions && !m.uses_classic_protocol();
                    (g.group_id.clone(), m.member_id.clone(), revoking, m.member_epoch, m.metadata.rebalance_timeout_ms)
                })
            })
            .collect();
        for (g, m, revoking, epoch, timeout) in members {
            let session = cx
                .store
                .consumer_group(&g)
                .and_then(|grp| grp.members.get(&m))
                .map(|mm| session_timeout_ms(mm, cx))
                .unwrap_or(cx.cfg.consumer.session_timeout_ms);
            self.arm_session(&g, &m, session, cx);
            if revoking {
                self.arm_rebalance(&g, &m, epoch, timeout, cx);
            }
        }
    }

    /// One of a member's timers fired: the member is fenced if it still
    /// exists (and, for the rebalance timer, is still in the epoch in which
    /// it was asked to revoke).
    pub fn on_timer(
        &mut self,
        classic: &mut Groups,
        which: MemberTimer,
        group: &str,
        member: &str,
        popped: i64,
        cx: &mut Cx,
    ) {
        let key = (group.to_string(), member.to_string());
        let Some(t) = self.timers.get_mut(&key) else { return };
        let fired = which.slot(t).on_pop(popped, cx.now, || which.key(group, member), cx.timers);
        if fired != Pop::Fire {
            return;
        }
        if which == MemberTimer::Rebalance {
            let epoch = t.rebalance_epoch;
            let still = cx.store.consumer_group(group).and_then(|g| g.members.get(member)).map(|m| m.member_epoch);
            if still != Some(epoch) {
                return;
            }
        }
        tracing::info!(group, member, "member fenced from the consumer group because {}", which.reason());
        self.fence_or_retry(classic, group, member, cx);
    }

    /// Fences on expiry; if the write fails the member is still there, so
    /// its session is armed again rather than left without a timer.
    fn fence_or_retry(&mut self, classic: &mut Groups, group: &str, member: &str, cx: &mut Cx) {
        if let Err(e) = self.fence(classic, group, member, cx) {
            tracing::warn!(group, member, error = %e.name(), "could not fence an expired member; retrying at the next session timeout");
            let timeout = cx
                .store
                .consumer_group(group)
                .and_then(|g| g.members.get(member))
                .map(|m| session_timeout_ms(m, cx))
                .unwrap_or(cx.cfg.consumer.session_timeout_ms);
            self.arm_session(group, member, timeout, cx);
        }
    }

    /// Kafka's `consumerGroupFenceMember`: removes one member (leave, or an
    /// expired timer), as [`Self::fence_members`].
    pub(super) fn fence(
        &mut self,
        classic: &mut Groups,
        group_id: &str,
        member_id: &str,
        cx: &mut Cx,
    ) -> Result<(), ErrorCode> {
        self.fence_members(classic, group_id, &[member_id], cx)
    }

    /// Kafka's `consumerGroupFenceMembers`: removes members of either
    /// protocol, static ones for good: their three records are tombstoned,
    /// so are the patterns only they used, and the group epoch is bumped
    /// once (with the target epoch too when no member is left); or, when
    /// every member left uses the classic protocol and the policy allows
    /// it, the group becomes a classic group (online downgrade). Unknown
    /// ids are skipped.
    pub(super) fn fence_members(
        &mut self,
        classic: &mut Groups,
        group_id: &str,
        member_ids: &[&str],
        cx: &mut Cx,
    ) -> Result<(), ErrorCode> {
        let Some(g) = cx.store.consumer_group(group_id) else { return Ok(()) };
        let mut leaving: Vec<&ConsumerMember> = member_ids.iter().filter_map(|id| g.members.get(*id)).collect();
        leaving.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        leaving.dedup_by(|a, b| a.member_id == b.member_id);
        let Some(first) = leaving.first().map(|m| m.member_id.clone()) else { return Ok(()) };
        let ids: Vec<&str> = leaving.iter().map(|m| m.member_id.as_str()).collect();
        if migration::may_downgrade(g, &ids, cx.cfg) {
            match migration::downgrade(g, &ids, &self.topics, cx.now) {
                Ok(down) => {
                    cx.append(down.records)?;
                    self.forget_group(group_id);
                    migration::install_downgraded(classic, down.group, &first, cx);
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(group = group_id, error = %e, "cannot downgrade the consumer group; removing the members only")
                }
            }
        }
        let mut records: Vec<Record> = ids.iter().flat_map(|id| removal_records(group_id, id)).collect();
        let (regex_records, counts, resolved) = subscription_regex::on_members_removed(g, &leaving);
        records.extend(regex_records);
        let names = subscribed_after(g, &leaving, None, (&counts, &resolved));
        let hash = hash_of(&names, &self.topics);
        let epoch = g.group_epoch + 1;
        records.push(epoch_record(group_id, epoch, hash));
        if leaving.len() == g.members.len() {
            records.push(target::target_metadata_record(group_id, epoch));
        }
        let ids: Vec<String> = ids.into_iter().map(str::to_string).collect();
        cx.append(records)?;
        for id in ids {
            self.forget(group_id, &id);
        }
        Ok(())
    }
}

pub(super) fn removal_records(group_id: &str, member_id: &str) -> Vec<Record> {
    vec![
        Record::consumer(group_id, ConsumerKey::CurrentAssignment(member_id.to_string()), None),
        Record::consumer(group_id, ConsumerKey::TargetMember(member_id.to_string()), None),
        Record::consumer(group_id, ConsumerKey::Member(member_id.to_string()), None),
    ]
}

pub(super) fn epoch_record(group_id: &str, epoch: i32, metadata_hash: i64) -> Record {
    Record::consumer(
        group_id,
        ConsumerKey::Metadata,
        Some(RecordValue::ConsumerMetadata(GroupMetadataValue { epoch, metadata_hash })),
    )
}

pub(super) fn member_record(group_id: &str, m: &ConsumerMember) -> Record {
    Record::consumer(
        group_id,
        ConsumerKey::Member(m.member_id.clone()),
        Some(RecordValue::ConsumerMember(m.metadata.clone())),
    )
}

pub(super) fn current_record(group_id: &str, m: &ConsumerMember) -> Record {
    Record::consumer(
        group_id,
        ConsumerKey::CurrentAssignment(m.member_id.clone()),
        Some(RecordValue::ConsumerCurrentAssignment(m.current_assignment_value())),
    )
}

/// The topic names the group subscribes to once `old` is replaced by
/// `new` (either may be absent) and `also_removed` is gone: by name, or
/// through a pattern (`regexes`: the pattern counts and resolutions after).
pub(super) fn subscribed_after(
    g: &ConsumerGroup,
    removed: &[&ConsumerMember],
    new: Option<&ConsumerMember>,
    regexes: (&std::collections::BTreeMap<String, usize>, &Resolved),
) -> BTreeSet<String> {
    let mut counts = g.subscribed_topics.clone();
    for m in removed {
        for t in m.metadata.subscribed_topic_names.iter().collect::<BTreeSet<_>>() {
            if let Some(n) = counts.get_mut(t) {
                *n = n.saturating_sub(1);
            }
        }
    }
    let mut names: BTreeSet<String> = counts.into_iter().filter(|(_, n)| *n > 0).map(|(t, _)| t).collect();
    if let Some(m) = new {
        names.extend(m.metadata.subscribed_topic_names.iter().cloned());
    }
    names.extend(subscription_regex::regex_topics(regexes.0, regexes.1).into_iter().map(str::to_string));
    names
}

pub(super) fn hash_of(names: &BTreeSet<String>, image: &TopicImage) -> i64 {
    metadata_hash(names.iter().filter_map(|n| image.get(n).map(|(id, p)| (n.as_str(), id, p))))
}

type Refusal = ConsumerHeartbeatResponse;

fn invalid(message: &str) -> Refusal {
    ConsumerHeartbeatResponse::error(ErrorCode::INVALID_REQUEST, message)
}

fn empty_string(s: Option<&str>) -> bool {
    s.is_some_and(str::is_empty)
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid` (4.x), in its
/// order, with its messages.
pub fn validate(req: &ConsumerHeartbeatRequest, assigners: &Assigners) -> Result<(), Refusal> {
    if (req.version >= CLIENT_GENERATED_MEMBER_ID_VERSION
        || req.member_epoch > 0
        || req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH)
        && req.member_id.is_empty()
    {
        return Err(invalid("MemberId can't be empty."));
    }
    if req.group_id.is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    if empty_string(req.instance_id.as_deref()) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if empty_string(req.rack_id.as_deref()) {
        return Err(invalid("RackId can't be empty."));
    }
    if req.member_epoch == 0 {
        if req.rebalance_timeout_ms == -1 {
            return Err(invalid("RebalanceTimeoutMs must be provided in first request."));
        }
        if req.topic_partitions.as_ref().is_none_or(|tp| !tp.is_empty()) {
            return Err(invalid("TopicPartitions must be empty when (re-)joining."));
        }
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return Err(invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            ));
        }
    } else if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        if req.instance_id.is_none() {
            return Err(invalid("InstanceId can't be null."));
        }
    } else if req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        return Err(invalid("MemberEpoch is invalid."));
    }
    // A pattern is compiled (INVALID_REGULAR_EXPRESSION) when it is new to
    // the group, as Kafka 4.x does: see `regex::plan`.
    if let Some(a) = &req.server_assignor {
        if assigners.get(a).is_none() {
            return Err(ConsumerHeartbeatResponse::error(
                ErrorCode::UNSUPPORTED_ASSIGNOR,
                format!("ServerAssignor {a} is not supported. Supported assignors: {}.", assigners.names().join(", ")),
            ));
        }
    }
    Ok(())
}

fn fenced_epoch(received: i32, known: i32, kind: &str) -> Refusal {
    ConsumerHeartbeatResponse::error(
        ErrorCode::FENCED_MEMBER_EPOCH,
        format!(
            "The consumer group member has a {kind} member epoch ({received}) than the one known by the group coordinator ({known}). The member must abandon all its partitions and rejoin."
        ),
    )
}

/// Kafka's `isSubset`: the member owns nothing outside `assigned`.
fn is_subset(owned: Option<&Assignment>, assigned: &Assignment) -> bool {
    let Some(owned) = owned else { return false };
    owned.iter().all(|(t, ps)| match assigned.get(t) {
        Some(a) => ps.iter().all(|p| a.contains(p)),
        None => false,
    })
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`: a lost response is
/// forgiven (the previous epoch with nothing beyond the assignment).
fn check_epoch(m: &ConsumerMember, received: i32, owned: Option<&Assignment>) -> Result<(), Refusal> {
    if received > m.member_epoch {
        return Err(fenced_epoch(received, m.member_epoch, "greater"));
    }
    if received < m.member_epoch && (received != m.previous_member_epoch || !is_subset(owned, &m.assigned)) {
        return Err(fenced_epoch(received, m.member_epoch, "smaller"));
    }
    Ok(())
}

pub(super) fn unknown_member(member_id: &str, group_id: &str) -> Refusal {
    ConsumerHeartbeatResponse::error(
        ErrorCode::UNKNOWN_MEMBER_ID,
        format!("Member {member_id} is not a member of group {group_id}."),
    )
}

pub(super) fn unknown_instance(instance_id: &str) -> Refusal {
    ConsumerHeartbeatResponse::error(ErrorCode::UNKNOWN_MEMBER_ID, format!("Instance id {instance_id} is unknown."))
}

pub(super) fn fenced_instance(member_id: &str, instance_id: &str, owner: &str) -> Refusal {
    ConsumerHeartbeatResponse::error(
        ErrorCode::FENCED_INSTANCE_ID,
        format!("Static member {member_id} with instance id {instance_id} was fenced by member {owner}."),
    )
}

fn not_found(group_id: &str) -> Refusal {
    ConsumerHeartbeatResponse::error(ErrorCode::GROUP_ID_NOT_FOUND, format!("Group {group_id} not found."))
}

fn not_consumer(group_id: &str) -> Refusal {
    ConsumerHeartbeatResponse::error(
        ErrorCode::GROUP_ID_NOT_FOUND,
        format!("Group {group_id} is not a consumer group."),
    )
}

/// Kafka's `Uuid.randomUuid().toString()`: 16 random bytes as URL-safe
/// base64 without padding (22 characters).
pub(super) fn kafka_uuid_string(cx: &mut Cx) -> String {
    let raw = cx.ids.next_uuid();
    let Ok(id) = uuid::Uuid::parse_str(&raw) else { return raw };
    crate::protocol::uuid_string::base64_url(id.as_bytes())
}

/// What a join or heartbeat will do, planned before anything is written.
struct Plan {
    records: Vec<Record>,
    member: ConsumerMember,
    /// A static member replaced by this one (its timers go).
    replaced: Option<String>,
    /// Whether the reconciliation changed the member's assignment state.
    reconciled_changed: bool,
    assignment_changed: bool,
    /// The classic group of the same id is deleted by this write (it was
    /// empty, or it is upgraded to this consumer group).
    drops_classic: bool,
    /// The members of a classic group upgraded by this write (their
    /// sessions are armed with their own timeouts).
    upgraded: Vec<(String, i32)>,
}

/// Serves one ConsumerGroupHeartbeat.
pub fn heartbeat(
    classic: &mut Groups,
    rt: &mut ConsumerRuntime,
    req: ConsumerHeartbeatRequest,
    cx: &mut Cx,
) -> ConsumerHeartbeatResponse {
    rt.topics = req.topics.clone();
    rt.describable = req.describable.clone();
    if let Err(refusal) = validate(&req, &rt.assigners) {
        return refusal;
    }
    if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH || req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        return leave(classic, rt, &req, cx);
    }
    let mut req = req;
    if req.member_id.is_empty() {
        // v0 only (validated above): the coordinator names the member.
        req.member_id = kafka_uuid_string(cx);
    }
    let plan = match plan_heartbeat(classic, rt, &req, cx) {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    if let Err(e) = cx.append(plan.records) {
        return ConsumerHeartbeatResponse {
            error: e,
            error_message: None,
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
    }
    if plan.drops_classic {
        if let Some(mut old) = classic.remove(&req.group_id) {
            // Kafka's `convertToConsumerGroup`: members waiting in a
            // rebalance are told another one is under way, so they rejoin.
            migration::release_parked(&mut old, cx);
        }
    }
    for (member, session) in &plan.upgraded {
        rt.arm_session(&req.group_id, member, *session, cx);
    }
    let m = plan.member;
    if let Some(old) = &plan.replaced {
        rt.forget(&req.group_id, old);
    }
    if plan.reconciled_changed {
        if m.state == MemberState::UnrevokedPartitions {
            rt.arm_rebalance(&req.group_id, &m.member_id, m.member_epoch, m.metadata.rebalance_timeout_ms, cx);
        } else {
            rt.cancel_rebalance(&req.group_id, &m.member_id);
        }
    }
    let session = cx.cfg.consumer.session_timeout_ms;
    rt.arm_session(&req.group_id, &m.member_id, session, cx);
    let full = req.member_epoch == 0
        || (req.rebalance_timeout_ms != -1 && req.subscribed_topic_names.is_some() && req.topic_partitions.is_some());
    ConsumerHeartbeatResponse {
        error: ErrorCode::NONE,
        error_message: None,
        member_id: Some(m.member_id.clone()),
        member_epoch: m.member_epoch,
        heartbeat_interval_ms: cx.cfg.consumer.heartbeat_interval_ms,
        assignment: (full || plan.assignment_changed).then(|| m.assigned.clone()),
    }
}

/// The member as this request leaves it (Kafka's `maybeUpdate*`): fields
/// not sent stay as they were; topic names are kept as a sorted set.
fn updated_member(member: &ConsumerMember, req: &ConsumerHeartbeatRequest) -> ConsumerMember {
    let mut m = member.clone();
    let md: &mut MemberMetadataValue = &mut m.metadata;
    if let Some(i) = &req.instance_id {
        md.instance_id = Some(i.clone());
    }
    if let Some(r) = &req.rack_id {
        md.rack_id = Some(r.clone());
    }
    if req.rebalance_timeout_ms != -1 {
        md.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if let Some(a) = &req.server_assignor {
        md.server_assignor = Some(a.clone());
    }
    if let Some(names) = &req.subscribed_topic_names {
        md.subscribed_topic_names = sorted_topics(names);
    }
    if let Some(r) = &req.subscribed_topic_regex {
        // An empty pattern clears the member's (Kafka keeps "", which it
        // treats as none; kcoord stores none).
        md.subscribed_topic_regex = Some(r.clone()).filter(|r| !r.is_empty());
    }
    md.client_id = req.client_id.clone();
    md.client_host = req.client_host.clone();
    md.classic_member_metadata = None;
    m
}

/// Topic names as kcoord stores a subscription: sorted, without duplicates.
pub(super) fn sorted_topics(names: &[String]) -> Vec<String> {
    let set: BTreeSet<&String> = names.iter().collect();
    set.into_iter().cloned().collect()
}

/// Finds the group (or starts one, or upgrades a classic one), checks size
/// and member, and computes the records of Kafka's three steps.
fn plan_heartbeat(
    classic: &Groups,
    rt: &ConsumerRuntime,
    req: &ConsumerHeartbeatRequest,
    cx: &Cx,
) -> Result<Plan, Refusal> {
    let create = req.member_epoch == 0;
    let mut records = Vec::new();
    let mut drops_classic = false;
    let mut upgraded = Vec::new();
    let fresh;
    let group: &ConsumerGroup = match cx.store.consumer_group(&req.group_id) {
        Some(g) => g,
        None => {
            match classic.get(&req.group_id) {
                None if !create => return Err(not_found(&req.group_id)),
                None => fresh = ConsumerGroup::new(&req.group_id),
                // An empty classic group gives way to the consumer group.
                Some(c) if create && c.state == GroupState::Empty => {
                    records.push(Record::group_tombstone(&req.group_id));
                    drops_classic = true;
                    fresh = ConsumerGroup::new(&req.group_id);
                }
                Some(c) if create && migration::may_upgrade(c, cx.cfg) => {
                    let up = migration::upgrade(c, &rt.topics).map_err(|_| {
                        ConsumerHeartbeatResponse::error(
                            ErrorCode::GROUP_ID_NOT_FOUND,
                            format!(
                                "Cannot upgrade the classic group {} to consumer group because the embedded consumer protocol is malformed.",
                                req.group_id
                            ),
                        )
                    })?;
                    records.extend(up.records);
                    upgraded = up.sessions;
                    drops_classic = true;
                    fresh = up.group;
                }
                Some(_) => return Err(not_consumer(&req.group_id)),
            }
            &fresh
        }
    };
    let max = cx.cfg.consumer.max_size;
    if group.members.len() >= max.max(0) as usize && !group.members.contains_key(&req.member_id) {
        return Err(ConsumerHeartbeatResponse::error(
            ErrorCode::GROUP_MAX_SIZE_REACHED,
            format!("The consumer group has reached its maximum capacity of {max} members."),
        ));
    }
    let owned = req.owned();
    let who = Who { member_id: &req.member_id, instance_id: req.instance_id.as_deref(), epoch: req.member_epoch };
    let (member, replaced) = find_member(group, &who, owned.as_ref(), create, false, &mut records)?;
    let updated = updated_member(&member, req);
    let step = plan_steps(group, rt, &member, updated, replaced.as_deref(), owned.as_ref(), cx.now, &mut records)?;
    Ok(Plan {
        records,
        member: step.member,
        replaced,
        reconciled_changed: step.reconciled_changed,
        assignment_changed: step.assignment_changed,
        drops_classic,
        upgraded,
    })
}

/// The outcome of Kafka's three steps for one member.
pub(super) struct Steps {
    pub member: ConsumerMember,
    pub reconciled_changed: bool,
    pub assignment_changed: bool,
}

/// Kafka's three steps, shared by ConsumerGroupHeartbeat and a classic
/// member's JoinGroup: 1. the member record and the group epoch; 2. the
/// target assignment, recomputed when the group epoch moved past it;
/// 3. reconciliation of the member towards its target.
#[allow(clippy::too_many_arguments, reason = "the steps' inputs are Kafka's; a struct would only rename them")]
pub(super) fn plan_steps(
    group: &ConsumerGroup,
    rt: &ConsumerRuntime,
    member: &ConsumerMember,
    mut updated: ConsumerMember,
    replaced: Option<&str>,
    owned: Option<&Assignment>,
    now: i64,
    records: &mut Vec<Record>,
) -> Result<Steps, Refusal> {
    let replaced_member = replaced.and_then(|id| group.members.get(id));

    // 1. The member and the group epoch.
    // A new group moves away from epoch 0 (Kafka 4.x).
    let mut bump = group.group_epoch == 0;
    if updated.metadata != member.metadata {
        records.push(member_record(&group.group_id, &updated));
        bump |= updated.metadata.subscribed_topic_names != member.metadata.subscribed_topic_names;
    }
    let old = group.members.get(&member.member_id);
    let regexes = subscription_regex::plan(
        group,
        member,
        &updated,
        old,
        replaced_member,
        subscription_regex::Visible { image: &rt.topics, describable: &rt.describable },
        now,
    )
    .map_err(|m| ConsumerHeartbeatResponse::error(ErrorCode::INVALID_REGULAR_EXPRESSION, m))?;
    records.extend(regexes.records);
    bump |= regexes.bump;
    let removed: Vec<&ConsumerMember> = [old, replaced_member].into_iter().flatten().collect();
    let names = subscribed_after(group, &removed, Some(&updated), (&regexes.counts, &regexes.resolved));
    let hash = hash_of(&names, &rt.topics);
    if hash != group.metadata_hash {
        bump = true;
    }
    let mut group_epoch = group.group_epoch;
    if bump {
        group_epoch += 1;
        records.push(epoch_record(&group.group_id, group_epoch, hash));
    }

    // 2. The target assignment, recomputed when the group epoch moved past it.
    let (target_epoch, target) = if group_epoch > group.assignment_epoch {
        let members = target::members_after(group, &updated, replaced);
        let assigner = rt.assigners.preferred(members.values().map(|(m, _)| *m)).ok_or_else(|| {
            ConsumerHeartbeatResponse::error(ErrorCode::UNKNOWN_SERVER_ERROR, "No server assignor is configured.")
        })?;
        let new = target::compute(
            &group.group_id,
            group_epoch,
            &group.target,
            &members,
            &rt.topics,
            &regexes.resolved,
            assigner.as_ref(),
        )
            .map_err(|e| {
                tracing::error!(group = %group.group_id, epoch = group_epoch, error = %e, "failed to compute a target assignment");
                ConsumerHeartbeatResponse::error(
                    ErrorCode::UNKNOWN_SERVER_ERROR,
                    format!("Failed to compute a new target assignment for epoch {group_epoch}: {e}"),
                )
            })?;
        records.extend(new.records);
        (group_epoch, new.targets.get(&updated.member_id).cloned().unwrap_or_default())
    } else {
        let t = match (group.target.get(&updated.member_id), replaced) {
            (Some(t), _) => t.clone(),
            (None, Some(prev)) => group.target_of(prev),
            (None, None) => Assignment::new(),
        };
        (group.assignment_epoch, t)
    };

    // 3. Reconciliation towards the target.
    let mut reconciled_changed = false;
    if !updated.is_reconciled_to(target_epoch) {
        let epoch_of = |t: &uuid::Uuid, p: i32| group.partition_epoch(t, p);
        let next = reconcile(&updated, target_epoch, &target, &epoch_of, owned)
            .map_err(|e| ConsumerHeartbeatResponse::error(ErrorCode::FENCED_MEMBER_EPOCH, e.0))?;
        if next != updated {
            reconciled_changed = true;
            records.push(current_record(&group.group_id, &next));
            updated = next;
        }
    }
    let assignment_changed = updated.assigned != member.assigned;
    Ok(Steps { member: updated, reconciled_changed, assignment_changed })
}

/// Who a request speaks for.
pub(super) struct Who<'a> {
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    /// The member epoch sent (not checked for classic members).
    pub epoch: i32,
}

/// Kafka's `getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember`: the
/// member this request speaks for, and the static member it replaces.
/// `classic`: the request is a classic member's JoinGroup, whose epoch is
/// not checked and which may take over an instance id not yet released.
pub(super) fn find_member(
    group: &ConsumerGroup,
    who: &Who,
    owned: Option<&Assignment>,
    create: bool,
    classic: bool,
    records: &mut Vec<Record>,
) -> Result<(ConsumerMember, Option<String>), Refusal> {
    let existing = group.members.get(who.member_id);
    let Some(instance_id) = who.instance_id else {
        let member = match existing {
            Some(m) => m.clone(),
            None if create => ConsumerMember::new(who.member_id),
            None => return Err(unknown_member(who.member_id, &group.group_id)),
        };
        if !classic {
            check_epoch(&member, who.epoch, owned)?;
        }
        return Ok((member, None));
    };
    let holder = group.static_member(instance_id);
    if create {
        let Some(holder) = holder else {
            let member = existing.cloned().unwrap_or_else(|| ConsumerMember::new(who.member_id));
            return Ok((member, None));
        };
        if !classic && !holder.uses_classic_protocol() && holder.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            return Err(ConsumerHeartbeatResponse::error(
                ErrorCode::UNRELEASED_INSTANCE_ID,
                format!(
                    "Static member {} with instance id {instance_id} cannot join the group because the instance id is owned by {} member.",
                    who.member_id, holder.member_id
                ),
            ));
        }
        // The new member id takes over the departed instance: its
        // subscription and assignments, from epoch 0.
        let mut member = holder.clone();
        member.member_id = who.member_id.to_string();
        member.member_epoch = 0;
        member.previous_member_epoch = 0;
        records.extend(removal_records(&group.group_id, &holder.member_id));
        records.push(member_record(&group.group_id, &member));
        records.push(Record::consumer(
            &group.group_id,
            ConsumerKey::TargetMember(member.member_id.clone()),
            Some(RecordValue::ConsumerTargetMember(super::records::TargetAssignmentMemberValue {
                partitions: group.target_of(&holder.member_id),
            })),
        ));
        records.push(current_record(&group.group_id, &member));
        let replaced = (holder.member_id != member.member_id).then(|| holder.member_id.clone());
        return Ok((member, replaced));
    }
    let Some(holder) = holder else { return Err(unknown_instance(instance_id)) };
    if holder.member_id != who.member_id {
        return Err(fenced_instance(who.member_id, instance_id, &holder.member_id));
    }
    if !classic {
        check_epoch(holder, who.epoch, owned)?;
    }
    Ok((holder.clone(), None))
}

/// Kafka's `consumerGroupLeave`: epoch −1 removes the member; −2 (static
/// only) keeps it, assignment and all, until its session expires.
fn leave(
    classic: &mut Groups,
    rt: &mut ConsumerRuntime,
    req: &ConsumerHeartbeatRequest,
    cx: &mut Cx,
) -> ConsumerHeartbeatResponse {
    let Some(group) = cx.store.consumer_group(&req.group_id) else {
        return if classic.contains_key(&req.group_id) {
            not_consumer(&req.group_id)
        } else {
            not_found(&req.group_id)
        };
    };
    let member = match req.instance_id.as_deref() {
        None => match group.members.get(&req.member_id) {
            Some(m) => m,
            None => return unknown_member(&req.member_id, &req.group_id),
        },
        Some(instance_id) => match group.static_member(instance_id) {
            None => return unknown_instance(instance_id),
            Some(m) if m.member_id != req.member_id => {
                return fenced_instance(&req.member_id, instance_id, &m.member_id)
            }
            Some(m) => m,
        },
    };
    let ok = |epoch| ConsumerHeartbeatResponse {
        error: ErrorCode::NONE,
        error_message: None,
        member_id: Some(req.member_id.clone()),
        member_epoch: epoch,
        heartbeat_interval_ms: 0,
        assignment: None,
    };
    let failed = |e| ConsumerHeartbeatResponse {
        error: e,
        error_message: None,
        member_id: None,
        member_epoch: 0,
        heartbeat_interval_ms: 0,
        assignment: None,
    };
    if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        let mut parked = member.clone();
        parked.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
        parked.pending_revocation = Assignment::new();
        let record = current_record(&req.group_id, &parked);
        tracing::info!(group = %req.group_id, member = %req.member_id, "static member temporarily left the consumer group");
        return match cx.append(vec![record]) {
            Ok(()) => ok(LEAVE_GROUP_STATIC_MEMBER_EPOCH),
            Err(e) => failed(e),
        };
    }
    let member_id = member.member_id.clone();
    tracing::info!(group = %req.group_id, member = %member_id, "member left the consumer group");
    match rt.fence(classic, &req.group_id, &member_id, cx) {
        Ok(()) => ok(LEAVE_GROUP_MEMBER_EPOCH),
        Err(e) => failed(e),
    }
}
