//! Classic members inside a consumer group (online migration): JoinGroup,
//! SyncGroup, Heartbeat and LeaveGroup against a consumer group, as Kafka's
//! `classicGroupJoinToConsumerGroup`, `classicGroupSyncToConsumerGroup`,
//! `classicGroupHeartbeatToConsumerGroup` and
//! `classicGroupLeaveToConsumerGroup`.
//!
//! A classic member is a consumer-group member with `ClassicMemberMetadata`
//! (its session timeout and JoinGroup protocols). Its JoinGroup is a
//! heartbeat in disguise: the subscription and owned partitions come from
//! the embedded consumer protocol, the same three steps run (member and
//! group epoch, target assignment, reconciliation), and the answer comes
//! at once with the member epoch as generation; there is no barrier and no
//! leader. SyncGroup hands out the member's current assignment. When its
//! assignment must change, its Heartbeat answers REBALANCE_IN_PROGRESS so
//! that it rejoins: that rejoin is how it reports what it revoked.

use super::embedded;
use super::group::{ConsumerGroup, ConsumerMember, MemberState};
use super::heartbeat::{find_member, kafka_uuid_string, plan_steps, sorted_topics, ConsumerRuntime, Who};
use super::records::ClassicMemberMetadata;
use crate::coordinator::core::Cx;
use crate::coordinator::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    LeaveMemberResult, SyncGroupRequest, SyncGroupResponse,
};
use crate::coordinator::records::Record;
use crate::coordinator::Groups;
use crate::error_code::ErrorCode;
use crate::protocol::consumer_protocol;

/// Kafka's `validateConsumerGroupMember`: the member by id, or by instance
/// id (which must map to this member id).
fn validate_member<'a>(
    g: &'a ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<&'a ConsumerMember, ErrorCode> {
    match instance_id {
        None => g.members.get(member_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID),
        Some(i) => {
            let m = g.static_member(i).ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
            if m.member_id != member_id {
                tracing::info!(group = %g.group_id, instance = i, member = member_id, current = %m.member_id, "fencing a stale static member");
                return Err(ErrorCode::FENCED_INSTANCE_ID);
            }
            Ok(m)
        }
    }
}

/// Kafka's `throwIfMemberDoesNotUseClassicProtocol` and
/// `throwIfGenerationIdUnmatched`.
fn check_classic(m: &ConsumerMember, generation: i32) -> Result<(), ErrorCode> {
    if !m.uses_classic_protocol() {
        tracing::debug!(member = %m.member_id, "member does not use the classic protocol");
        return Err(ErrorCode::UNKNOWN_MEMBER_ID);
    }
    if m.member_epoch != generation {
        return Err(ErrorCode::ILLEGAL_GENERATION);
    }
    Ok(())
}

fn group<'a>(cx: &'a Cx, group_id: &str) -> Result<&'a ConsumerGroup, ErrorCode> {
    cx.store.consumer_group(group_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID)
}

/// Kafka's `classicGroupJoinToConsumerGroup` (the group has members).
pub fn join(rt: &mut ConsumerRuntime, req: &JoinGroupRequest, cx: &mut Cx) -> JoinGroupResponse {
    match try_join(rt, req, cx) {
        Ok(r) => r,
        Err((error, member_id)) => JoinGroupResponse::error(error, member_id),
    }
}

fn try_join(
    rt: &mut ConsumerRuntime,
    req: &JoinGroupRequest,
    cx: &mut Cx,
) -> Result<JoinGroupResponse, (ErrorCode, String)> {
    let fail = |e: ErrorCode| (e, req.member_id.clone());
    let is_unknown = req.member_id.is_empty();
    let member_id = if is_unknown { kafka_uuid_string(cx) } else { req.member_id.clone() };
    let g = group(cx, &req.group_id).map_err(fail)?;
    let max = cx.cfg.consumer.max_size.max(0) as usize;
    if g.members.len() >= max && !g.members.contains_key(&member_id) {
        return Err(fail(ErrorCode::GROUP_MAX_SIZE_REACHED));
    }
    let names: Vec<&str> = req.protocols.iter().map(|p| p.name.as_str()).collect();
    if !g.supports_classic_protocols(&req.protocol_type, &names) {
        tracing::debug!(group = %req.group_id, member = %member_id, "member's protocols are not supported");
        return Err(fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL));
    }
    if is_unknown && req.version >= 4 && req.group_instance_id.is_none() {
        // KIP-394: the member rejoins with this id (nothing is remembered).
        return Err((ErrorCode::MEMBER_ID_REQUIRED, member_id));
    }
    let first = req.protocols.first().ok_or_else(|| fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL))?;
    let sub = consumer_protocol::parse_subscription(&first.metadata).map_err(|_| {
        tracing::warn!(group = %req.group_id, member = %member_id, "malformed embedded consumer protocol in a JoinGroup subscription");
        fail(ErrorCode::UNKNOWN_SERVER_ERROR)
    })?;

    let mut records: Vec<Record> = Vec::new();
    let who = Who { member_id: &member_id, instance_id: req.group_instance_id.as_deref(), epoch: -1 };
    let create = req.group_instance_id.is_none() || is_unknown;
    let (member, replaced) = find_member(g, &who, None, create, true, &mut records).map_err(|r| fail(r.error))?;
    let mut updated = member.clone();
    let md = &mut updated.metadata;
    if let Some(i) = &req.group_instance_id {
        md.instance_id = Some(i.clone());
    }
    if let Some(r) = &sub.rack_id {
        md.rack_id = Some(r.clone());
    }
    if req.rebalance_timeout_ms != -1 {
        md.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    md.subscribed_topic_names = sorted_topics(&sub.topics);
    md.client_id = req.client_id.clone();
    md.client_host = req.client_host.clone();
    md.classic_member_metadata = Some(ClassicMemberMetadata {
        session_timeout_ms: req.session_timeout_ms,
        supported_protocols: req.protocols.iter().map(|p| (p.name.clone(), p.metadata.clone())).collect(),
    });
    let owned = embedded::to_assignment(&sub.owned, &rt.topics);
    let steps = plan_steps(g, rt, &member, updated, replaced.as_deref(), Some(&owned), cx.now, &mut records)
        .map_err(|r| fail(r.error))?;
    cx.append(records).map_err(fail)?;

    let m = steps.member;
    if let Some(old) = &replaced {
        rt.forget(&req.group_id, old);
    }
    rt.cancel_join(&req.group_id, &m.member_id);
    rt.arm_session(&req.group_id, &m.member_id, req.session_timeout_ms, cx);
    rt.arm_sync(&req.group_id, &m.member_id, req.rebalance_timeout_ms, cx);
    tracing::debug!(group = %req.group_id, member = %m.member_id, epoch = m.member_epoch, state = m.state.name(), "classic member joined the consumer group");
    Ok(JoinGroupResponse {
        error: ErrorCode::NONE,
        generation_id: m.member_epoch,
        protocol_type: Some(crate::coordinator::classic::group::CONSUMER_PROTOCOL_TYPE.to_string()),
        protocol_name: Some(first.name.clone()),
        leader: String::new(),
        skip_assignment: false,
        member_id: m.member_id.clone(),
        members: Vec::new(),
    })
}

/// Kafka's `throwIfRebalanceInProgress`: a member behind the group epoch
/// must rejoin, unless it is still revoking (its rejoin is then due after
/// the revocation anyway). Arms its join timer if none is.
fn rebalance_in_progress(
    rt: &mut ConsumerRuntime,
    group_id: &str,
    group_epoch: i32,
    m: &ConsumerMember,
    cx: &mut Cx,
) -> bool {
    if group_epoch > m.member_epoch && m.state != MemberState::UnrevokedPartitions {
        rt.arm_join_if_absent(group_id, &m.member_id, m.metadata.rebalance_timeout_ms, cx);
        return true;
    }
    false
}

/// Kafka's `classicGroupSyncToConsumerGroup`: the member's current
/// assignment, in the consumer protocol version of its first protocol.
pub fn sync(rt: &mut ConsumerRuntime, req: &SyncGroupRequest, cx: &mut Cx) -> SyncGroupResponse {
    match try_sync(rt, req, cx) {
        Ok(r) => r,
        Err(e) => SyncGroupResponse::error(e),
    }
}

fn try_sync(rt: &mut ConsumerRuntime, req: &SyncGroupRequest, cx: &mut Cx) -> Result<SyncGroupResponse, ErrorCode> {
    let g = group(cx, &req.group_id)?;
    if g.members.is_empty() {
        return Err(ErrorCode::UNKNOWN_MEMBER_ID);
    }
    let m = validate_member(g, &req.member_id, req.group_instance_id.as_deref())?;
    check_classic(m, req.generation_id)?;
    let protocol = m.classic_protocol_name().unwrap_or_default().to_string();
    if req.protocol_type.as_deref().is_some_and(|t| t != crate::coordinator::classic::group::CONSUMER_PROTOCOL_TYPE)
        || req.protocol_name.as_deref().is_some_and(|p| p != protocol)
    {
        return Err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    }
    let (group_epoch, m) = (g.group_epoch, m.clone());
    if rebalance_in_progress(rt, &req.group_id, group_epoch, &m, cx) {
        return Err(ErrorCode::REBALANCE_IN_PROGRESS);
    }
    let metadata = m
        .metadata
        .classic_member_metadata
        .as_ref()
        .and_then(|c| c.supported_protocols.first().map(|(_, md)| md.clone()))
        .unwrap_or_default();
    let version = consumer_protocol::version(&metadata).map_err(|_| {
        tracing::error!(group = %req.group_id, member = %m.member_id, "malformed embedded consumer protocol in version deserialization");
        ErrorCode::UNKNOWN_SERVER_ERROR
    })?;
    let assignment = consumer_protocol::encode_assignment(&embedded::to_named(&m.assigned, &rt.topics), version);
    rt.cancel_sync(&req.group_id, &m.member_id);
    let session = m.classic_session_timeout_ms().unwrap_or(cx.cfg.consumer.session_timeout_ms);
    rt.arm_session(&req.group_id, &m.member_id, session, cx);
    Ok(SyncGroupResponse {
        error: ErrorCode::NONE,
        protocol_type: req.protocol_type.clone(),
        protocol_name: req.protocol_name.clone(),
        assignment,
    })
}

/// Kafka's `classicGroupHeartbeatToConsumerGroup`: keeps the session, and
/// answers REBALANCE_IN_PROGRESS when the member must rejoin: the group
/// epoch moved past it, it must revoke, or the partitions it waited for
/// are free.
pub fn heartbeat(rt: &mut ConsumerRuntime, req: &HeartbeatRequest, cx: &mut Cx) -> HeartbeatResponse {
    let error = match try_heartbeat(rt, req, cx) {
        Ok(e) | Err(e) => e,
    };
    HeartbeatResponse { error }
}

fn try_heartbeat(rt: &mut ConsumerRuntime, req: &HeartbeatRequest, cx: &mut Cx) -> Result<ErrorCode, ErrorCode> {
    let g = group(cx, &req.group_id)?;
    let m = validate_member(g, &req.member_id, req.group_instance_id.as_deref())?;
    check_classic(m, req.generation_id)?;
    let rejoin = m.member_epoch < g.group_epoch
        || m.state == MemberState::UnrevokedPartitions
        || (m.state == MemberState::UnreleasedPartitions && !g.waiting_on_unreleased_partition(m));
    let (gid, mid, timeout) = (g.group_id.clone(), m.member_id.clone(), m.metadata.rebalance_timeout_ms);
    let session = m.classic_session_timeout_ms().unwrap_or(cx.cfg.consumer.session_timeout_ms);
    rt.arm_session(&gid, &mid, session, cx);
    if rejoin {
        rt.arm_join_if_absent(&gid, &mid, timeout, cx);
        return Ok(ErrorCode::REBALANCE_IN_PROGRESS);
    }
    Ok(ErrorCode::NONE)
}

/// Kafka's `classicGroupLeaveToConsumerGroup` (since KAFKA-18188): each
/// member named, by member id or, for an administrative removal, by
/// instance id (with member id "", or the holder's id: FENCED_INSTANCE_ID
/// otherwise), is removed whichever protocol it uses; every answer echoes
/// the request's member id and instance id. The members found are fenced
/// together (one epoch bump, or a downgrade).
pub fn leave(
    classic: &mut Groups,
    rt: &mut ConsumerRuntime,
    req: &LeaveGroupRequest,
    cx: &mut Cx,
) -> LeaveGroupResponse {
    let Some(g) = cx.store.consumer_group(&req.group_id) else {
        return LeaveGroupResponse { error: ErrorCode::UNKNOWN_MEMBER_ID, members: vec![] };
    };
    let mut results = Vec::with_capacity(req.members.len());
    let mut leaving: Vec<String> = Vec::new();
    for who in &req.members {
        let found = match who.group_instance_id.as_deref() {
            None => g.members.get(&who.member_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID),
            Some(i) => match g.static_member(i) {
                None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
                Some(m) if !who.member_id.is_empty() && m.member_id != who.member_id => {
                    Err(ErrorCode::FENCED_INSTANCE_ID)
                }
                Some(m) => Ok(m),
            },
        };
        let error = match found {
            Ok(m) => {
                tracing::info!(group = %req.group_id, member = %m.member_id, reason = who.reason.as_deref().unwrap_or("not provided"), "member has left the consumer group through an explicit LeaveGroup request");
                leaving.push(m.member_id.clone());
                ErrorCode::NONE
            }
            Err(error) => error,
        };
        results.push(LeaveMemberResult {
            member_id: who.member_id.clone(),
            group_instance_id: who.group_instance_id.clone(),
            error,
        });
    }
    let ids: Vec<&str> = leaving.iter().map(String::as_str).collect();
    if let Err(error) = rt.fence_members(classic, &req.group_id, &ids, cx) {
        return LeaveGroupResponse { error, members: vec![] };
    }
    LeaveGroupResponse { error: ErrorCode::NONE, members: results }
}
