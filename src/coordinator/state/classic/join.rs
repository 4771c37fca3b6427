//! JoinGroup (Kafka's `classicGroupJoin`), including KIP-394
//! member-id assignment and KIP-345 static-member replacement.

use crate::coordinator::Groups;

use bytes::Bytes;

use super::group::{ClassicGroup, GroupState, Member, ParkedJoin};
use super::history::Cause;
use super::rebalance::{
    self, complete_join_future, maybe_complete_join_phase, maybe_prepare_rebalance_or_complete_join,
};
use super::validate_existing_member;
use crate::coordinator::core::{CoreConfig, Cx, ReplyTo};
use crate::coordinator::messages::{JoinGroupRequest, JoinGroupResponse, SyncGroupResponse};
use crate::coordinator::records::Record;
use crate::coordinator::timers::Slot;
use crate::error_code::ErrorCode;

fn reply(cx: &mut Cx, token: ReplyTo<JoinGroupResponse>, response: JoinGroupResponse) {
    cx.reply(token, response);
}

/// Serves a JoinGroup that passed [`precheck`]: group creation, then the
/// new-member or existing-member path.
pub fn join_group(groups: &mut Groups, req: JoinGroupRequest, token: ReplyTo<JoinGroupResponse>, cx: &mut Cx) {
    let is_unknown = req.member_id.is_empty();
    let created = !groups.contains_key(&req.group_id);
    if created {
        if !is_unknown {
            return reply(cx, token, JoinGroupResponse::error(ErrorCode::UNKNOWN_MEMBER_ID, req.member_id));
        }
        groups.insert(req.group_id.clone(), ClassicGroup::new(&req.group_id, cx.now));
    }
    let group_id = req.group_id.clone();
    let Some(g) = groups.get_mut(&group_id) else { return };
    let replies_before = cx.out.len();
    let sink_marker = SinkMarker::take(cx);

    if !accept_joining_member(g, &req.member_id, cx.cfg.max_size) {
        rebalance::remove_member(g, &req.member_id, cx);
        reply(cx, token, JoinGroupResponse::error(ErrorCode::GROUP_MAX_SIZE_REACHED, ""));
    } else if is_unknown {
        join_new_member(g, req, token, cx);
    } else {
        join_existing_member(g, req, token, cx);
    }

    // A group created by this request is committed with an "empty" record
    // when the request wrote nothing else (Kafka's newEmptyGroupMetadataRecord).
    if created && !sink_marker.appended_since(cx) {
        let record = Record::group(&g.group_id, g.empty_record());
        if let Err(e) = cx.append(vec![record]) {
            // Undo the creation; the only answer in flight is this request's.
            cx.out.truncate(replies_before);
            groups.remove(&group_id);
            reply(cx, token, JoinGroupResponse::error(e, ""));
        }
    }
}

/// The checks Kafka makes before it looks at the group, whatever its
/// type (see `coordinator::prechecks`): the group id, the session timeout
/// bounds, and (kcoord) strings the group's record could not hold.
pub fn precheck(req: &JoinGroupRequest, cfg: &CoreConfig) -> Option<ErrorCode> {
    if req.group_id.is_empty() {
        return Some(ErrorCode::INVALID_GROUP_ID);
    }
    if req.session_timeout_ms < cfg.min_session_timeout_ms || req.session_timeout_ms > cfg.max_session_timeout_ms {
        return Some(ErrorCode::INVALID_SESSION_TIMEOUT);
    }
    if let Some(field) = unstorable_field(req) {
        // Kafka's GroupMetadata record holds these as int16-length strings:
        // a member the record cannot hold would leave its group unable to
        // complete a rebalance (every SyncGroup failing to write it).
        tracing::debug!(group = %req.group_id, field, "JoinGroup refused: a string is too long for the group record");
        return Some(ErrorCode::INVALID_REQUEST);
    }
    None
}

/// Remembers how many records had been written, to tell whether a request wrote any.
struct SinkMarker(u64);

impl SinkMarker {
    fn take(cx: &Cx) -> Self {
        SinkMarker(cx.appended)
    }

    fn appended_since(&self, cx: &Cx) -> bool {
        cx.appended != self.0
    }
}

/// Kafka's `acceptJoiningMember` (group.max.size).
fn accept_joining_member(g: &ClassicGroup, member_id: &str, max_size: i32) -> bool {
    let max = max_size.max(0) as usize;
    match g.state {
        GroupState::Empty | GroupState::Dead => true,
        GroupState::PreparingRebalance => {
            g.members.get(member_id).is_some_and(|m| m.awaiting_join.is_some()) || g.num_awaiting_join < max
        }
        GroupState::CompletingRebalance | GroupState::Stable => g.has_member(member_id) || g.members.len() < max,
    }
}

/// Longest string Kafka's `__consumer_offsets` records hold (int16 length).
pub const MAX_RECORD_STRING: usize = i16::MAX as usize;

/// The first member string of a JoinGroup that the group's record could not hold.
/// Flexible JoinGroup versions carry compact strings, which may be longer
/// than a record's int16-length strings (the client id, from the request
/// header, never is).
fn unstorable_field(req: &JoinGroupRequest) -> Option<&'static str> {
    // A group id too long for the record key is answered
    // UNKNOWN_SERVER_ERROR by the write itself, before any member joins.
    let too_long = |s: &str| s.len() > MAX_RECORD_STRING;
    if req.group_instance_id.as_deref().is_some_and(too_long) {
        return Some("group_instance_id");
    }
    if too_long(&req.client_id) {
        return Some("client_id");
    }
    if too_long(&req.protocol_type) {
        return Some("protocol_type");
    }
    if req.protocols.iter().any(|p| too_long(&p.name)) {
        return Some("protocol_name");
    }
    None
}

/// Kafka's member id, `prefix + "-" + uuid` (the prefix is the group
/// instance id or the client id), with the prefix cut at a character
/// boundary where the whole would not fit in a record's string. Only ids
/// Kafka itself could not store are shortened; member ids are opaque to
/// clients, which send back whatever they were given.
pub fn new_member_id(prefix: &str, uuid: &str) -> String {
    let room = MAX_RECORD_STRING.saturating_sub(uuid.len() + 1);
    let mut end = prefix.len().min(room);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{}", &prefix[..end], uuid)
}

fn join_new_member(g: &mut ClassicGroup, req: JoinGroupRequest, token: ReplyTo<JoinGroupResponse>, cx: &mut Cx) {
    if g.is(GroupState::Dead) {
        return reply(cx, token, JoinGroupResponse::error(ErrorCode::COORDINATOR_NOT_AVAILABLE, ""));
    }
    if !g.supports_protocols(&req.protocol_type, &req.protocols) {
        return reply(cx, token, JoinGroupResponse::error(ErrorCode::INCONSISTENT_GROUP_PROTOCOL, ""));
    }
    let prefix = req.group_instance_id.as_deref().unwrap_or(&req.client_id);
    let new_id = new_member_id(prefix, &cx.ids.next_uuid());
    if let Some(instance) = req.group_instance_id.clone() {
        match g.static_member_id(&instance).cloned() {
            Some(old_id) => update_static_member(g, req, &instance, old_id, new_id, token, cx),
            None => add_member_then_rebalance_or_complete_join(g, req, new_id, token, cx),
        }
    } else if req.version >= 4 {
        // KIP-394: hand out the id and wait for the member to rejoin with it.
        rebalance::schedule_pending(g, &new_id, req.session_timeout_ms, cx);
        reply(cx, token, JoinGroupResponse::error(ErrorCode::MEMBER_ID_REQUIRED, new_id));
    } else {
        add_member_then_rebalance_or_complete_join(g, req, new_id, token, cx);
    }
}

fn join_existing_member(g: &mut ClassicGroup, req: JoinGroupRequest, token: ReplyTo<JoinGroupResponse>, cx: &mut Cx) {
    let member_id = req.member_id.clone();
    if g.is(GroupState::Dead) {
        return reply(cx, token, JoinGroupResponse::error(ErrorCode::COORDINATOR_NOT_AVAILABLE, member_id));
    }
    if !g.supports_protocols(&req.protocol_type, &req.protocols) {
        return reply(cx, token, JoinGroupResponse::error(ErrorCode::INCONSISTENT_GROUP_PROTOCOL, member_id));
    }
    if g.is_pending_member(&member_id) {
        // A KIP-394 member rejoining with its assigned id. A pending member
        // is never static: Kafka fails such a request with an internal
        // error (an IllegalStateException, answered UNKNOWN_SERVER_ERROR
        // with no member id) and changes nothing.
        if req.group_instance_id.is_some() {
            tracing::warn!(group = %g.group_id, member = %member_id, "JoinGroup with a group instance id for a pending member refused");
            return reply(cx, token, JoinGroupResponse::error(ErrorCode::UNKNOWN_SERVER_ERROR, ""));
        }
        return add_member_then_rebalance_or_complete_join(g, req, member_id, token, cx);
    }
    if let Err(e) = validate_existing_member(g, &member_id, req.group_instance_id.as_deref()) {
        return reply(cx, token, JoinGroupResponse::error(e, member_id));
    }
    let matches = g.members.get(&member_id).is_some_and(|m| m.matches(&req.protocols));
    let changed = Cause::ProtocolChanged { member_id: member_id.clone(), reason: req.reason.clone() };
    match g.state {
        GroupState::PreparingRebalance => update_member_then_rebalance_or_complete_join(g, req, token, cx, changed),
        GroupState::CompletingRebalance if matches => {
            // Same metadata (it probably lost the previous answer): return the current generation.
            let members = if g.is_leader(&member_id) { g.join_members() } else { Vec::new() };
            reply(cx, token, current_generation(g, member_id, members));
        }
        GroupState::CompletingRebalance => update_member_then_rebalance_or_complete_join(g, req, token, cx, changed),
        GroupState::Stable if g.is_leader(&member_id) => {
            // The leader may force a rebalance (e.g. topic metadata changed).
            let cause = Cause::LeaderRejoined { member_id: member_id.clone(), reason: req.reason.clone() };
            update_member_then_rebalance_or_complete_join(g, req, token, cx, cause)
        }
        GroupState::Stable if !matches => update_member_then_rebalance_or_complete_join(g, req, token, cx, changed),
        GroupState::Stable => reply(cx, token, current_generation(g, member_id, Vec::new())),
        GroupState::Empty | GroupState::Dead => {
            reply(cx, token, JoinGroupResponse::error(ErrorCode::UNKNOWN_MEMBER_ID, member_id))
        }
    }
}

fn current_generation(
    g: &ClassicGroup,
    member_id: String,
    members: Vec<crate::coordinator::messages::JoinGroupMember>,
) -> JoinGroupResponse {
    JoinGroupResponse {
        error: ErrorCode::NONE,
        generation_id: g.generation_id,
        protocol_type: g.protocol_type.clone(),
        protocol_name: g.protocol_name.clone(),
        leader: g.leader_id.clone().unwrap_or_default(),
        skip_assignment: false,
        member_id,
        members,
    }
}

/// Kafka's `addMemberThenRebalanceOrCompleteJoin`.
fn add_member_then_rebalance_or_complete_join(
    g: &mut ClassicGroup,
    req: JoinGroupRequest,
    member_id: String,
    token: ReplyTo<JoinGroupResponse>,
    cx: &mut Cx,
) {
    let cause = Cause::MemberJoined {
        member_id: member_id.clone(),
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        reason: req.reason.clone(),
    };
    let member = Member {
        member_id: member_id.clone(),
        group_instance_id: req.group_instance_id,
        client_id: req.client_id,
        client_host: req.client_host,
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        session_timeout_ms: req.session_timeout_ms,
        protocol_type: req.protocol_type,
        protocols: req.protocols,
        assignment: Bytes::new(),
        awaiting_join: Some(ParkedJoin { token, version: req.version }),
        awaiting_sync: None,
        is_new: true,
        heartbeat: Slot::default(),
    };
    if g.is(GroupState::PreparingRebalance) && g.previous_state == GroupState::Empty {
        // Lets the initial rebalance wait a little longer.
        g.new_member_added = true;
    }
    g.add(member);
    // A parked new member cannot heartbeat; bound how long it may wait.
    rebalance::schedule_heartbeat(g, &member_id, cx.cfg.new_member_join_timeout_ms, cx);
    maybe_prepare_rebalance_or_complete_join(g, cx, cause);
}

/// Parks a member's JoinGroup with its new protocols and timeouts.
fn update_member_then_rebalance_or_complete_join(
    g: &mut ClassicGroup,
    req: JoinGroupRequest,
    token: ReplyTo<JoinGroupResponse>,
    cx: &mut Cx,
    cause: Cause,
) {
    // A second JoinGroup while one is parked supersedes it; answer the old
    // one so no connection waits forever (Kafka silently drops it).
    complete_join_future(
        g,
        &req.member_id,
        JoinGroupResponse::error(ErrorCode::REBALANCE_IN_PROGRESS, req.member_id.clone()),
        cx,
    );
    g.update_member(
        &req.member_id,
        req.protocols,
        req.rebalance_timeout_ms,
        req.session_timeout_ms,
        Some(ParkedJoin { token, version: req.version }),
    );
    maybe_prepare_rebalance_or_complete_join(g, cx, cause);
}

/// KIP-345: a static member rejoins with an unknown member id and replaces
/// its previous incarnation (Kafka's `updateStaticMemberThenRebalanceOrCompleteJoin`).
fn update_static_member(
    g: &mut ClassicGroup,
    req: JoinGroupRequest,
    instance: &str,
    old_id: String,
    new_id: String,
    token: ReplyTo<JoinGroupResponse>,
    cx: &mut Cx,
) {
    let leader_before = g.leader_id.clone();
    replace_static_member(g, instance, &old_id, &new_id, cx);
    rebalance::reschedule_heartbeat(g, &new_id, cx);
    let (old_protocols, old_rebalance, old_session) = match g.members.get(&new_id) {
        Some(m) => (m.protocols.clone(), m.rebalance_timeout_ms, m.session_timeout_ms),
        None => return,
    };
    let version = req.version;
    let reason = req.reason.clone();
    g.update_member(
        &new_id,
        req.protocols,
        req.rebalance_timeout_ms,
        req.session_timeout_ms,
        Some(ParkedJoin { token, version }),
    );
    match g.state {
        GroupState::Stable => {
            let selected = g.select_protocol();
            if selected.is_some() && selected == g.protocol_name {
                // Same protocol: persist the new member id without a rebalance.
                let record = Record::group(&g.group_id, g.to_record(None));
                match cx.append(vec![record]) {
                    Err(e) => {
                        tracing::warn!(group = %g.group_id, instance, error = ?e, "failed to persist a static member replacement; reverting");
                        g.update_member(&new_id, old_protocols, old_rebalance, old_session, None);
                        replace_static_member(g, instance, &new_id, &old_id, cx);
                        rebalance::reschedule_heartbeat(g, &old_id, cx);
                        let mut resp = JoinGroupResponse::error(e, "");
                        resp.generation_id = g.generation_id;
                        resp.protocol_type = g.protocol_type.clone();
                        resp.protocol_name = g.protocol_name.clone();
                        resp.leader = g.leader_id.clone().unwrap_or_default();
                        reply(cx, token, resp);
                    }
                    Ok(()) if version >= 9 => {
                        // KIP-814: a static leader keeps its assignment without recomputing it.
                        let is_leader = g.is_leader(&new_id);
                        let members = if is_leader { g.join_members() } else { Vec::new() };
                        let mut resp = current_generation(g, new_id.clone(), members);
                        resp.skip_assignment = is_leader;
                        complete_join_future(g, &new_id, resp, cx);
                    }
                    Ok(()) => {
                        // Below v9 the replaced member is told the old leader id, so a
                        // replaced leader acts as a follower and keeps its assignment.
                        let mut resp = current_generation(g, new_id.clone(), Vec::new());
                        resp.leader = leader_before.unwrap_or_default();
                        complete_join_future(g, &new_id, resp, cx);
                    }
                }
            } else {
                let cause = Cause::ProtocolChanged { member_id: new_id.clone(), reason };
                maybe_prepare_rebalance_or_complete_join(g, cx, cause);
            }
        }
        GroupState::CompletingRebalance => {
            // The leader may already have assigned partitions to the old id.
            let cause = Cause::StaticMemberReplaced {
                instance_id: instance.to_string(),
                old_member_id: old_id,
                new_member_id: new_id,
            };
            rebalance::prepare_rebalance(g, cx, cause);
        }
        GroupState::PreparingRebalance => maybe_complete_join_phase(g, cx),
        GroupState::Empty | GroupState::Dead => {
            tracing::error!(group = %g.group_id, state = ?g.state, "static member replaced in an unexpected state");
        }
    }
}

/// Kafka's `replaceStaticMember`: the old incarnation's parked requests get
/// FENCED_INSTANCE_ID and a new member takes over its data.
fn replace_static_member(g: &mut ClassicGroup, instance: &str, old_id: &str, new_id: &str, cx: &mut Cx) {
    complete_join_future(g, old_id, JoinGroupResponse::error(ErrorCode::FENCED_INSTANCE_ID, old_id), cx);
    rebalance::complete_sync_future(g, old_id, SyncGroupResponse::error(ErrorCode::FENCED_INSTANCE_ID), cx);
    let Some(old) = g.members.swap_remove(old_id) else { return };
    let member = Member {
        member_id: new_id.to_string(),
        group_instance_id: old.group_instance_id,
        client_id: old.client_id,
        client_host: old.client_host,
        rebalance_timeout_ms: old.rebalance_timeout_ms,
        session_timeout_ms: old.session_timeout_ms,
        protocol_type: old.protocol_type,
        protocols: old.protocols,
        assignment: old.assignment,
        awaiting_join: None,
        awaiting_sync: None,
        is_new: false,
        heartbeat: Slot::default(),
    };
    g.members.insert(new_id.to_string(), member);
    if g.is_leader(old_id) {
        g.leader_id = Some(new_id.to_string());
    }
    g.static_members.insert(instance.to_string(), new_id.to_string());
}
