//! The rebalance machinery shared by every classic API: preparing and
//! completing the join phase (with the initial delay), the pending-sync
//! timeout, session expiry, assignment propagation. Follows Kafka's
//! `GroupMetadataManager` step by step.

use std::collections::HashMap;

use bytes::Bytes;

use super::group::{ClassicGroup, GroupState, InitialDelay};
use super::history::{Cause, Outcome, Rebalance};
use crate::coordinator::core::{Cx, Reply};
use crate::coordinator::messages::{JoinGroupResponse, SyncGroupResponse};
use crate::coordinator::records::Record;
use crate::coordinator::timers::{Pop, TimerKey};
use crate::error_code::ErrorCode;

fn heartbeat_key(group: &str, member: &str) -> TimerKey {
    TimerKey::Heartbeat { group: group.to_string(), member: member.to_string() }
}

/// Arms a member's session timer for `timeout_ms` from now.
pub fn schedule_heartbeat(g: &mut ClassicGroup, member_id: &str, timeout_ms: i32, cx: &mut Cx) {
    let gid = &g.group_id;
    if let Some(m) = g.members.get_mut(member_id) {
        m.heartbeat.schedule(cx.now + timeout_ms as i64, || heartbeat_key(gid, member_id), cx.timers);
    }
}

/// Re-arms a member's session timer with its session timeout.
pub fn reschedule_heartbeat(g: &mut ClassicGroup, member_id: &str, cx: &mut Cx) {
    let timeout = match g.members.get(member_id) {
        Some(m) => m.session_timeout_ms,
        None => return,
    };
    schedule_heartbeat(g, member_id, timeout, cx);
}

/// Arms a KIP-394 pending member's timer.
pub fn schedule_pending(g: &mut ClassicGroup, member_id: &str, timeout_ms: i32, cx: &mut Cx) {
    let gid = g.group_id.clone();
    let slot = g.pending_join_members.entry(member_id.to_string()).or_default();
    slot.schedule(cx.now + timeout_ms as i64, || heartbeat_key(&gid, member_id), cx.timers);
}

fn schedule_join_timer(g: &mut ClassicGroup, delay_ms: i32, initial: Option<InitialDelay>, cx: &mut Cx) {
    g.initial_delay = initial;
    let gid = g.group_id.clone();
    g.join_timer.schedule(cx.now + delay_ms as i64, || TimerKey::Join { group: gid }, cx.timers);
}

/// Answers a member's parked JoinGroup; returns whether one was parked.
pub fn complete_join_future(g: &mut ClassicGroup, member_id: &str, response: JoinGroupResponse, cx: &mut Cx) -> bool {
    match g.take_parked_join(member_id) {
        Some(p) => {
            cx.reply(p.token, response);
            true
        }
        None => false,
    }
}

/// Answers a member's parked SyncGroup; returns whether one was parked.
pub fn complete_sync_future(g: &mut ClassicGroup, member_id: &str, response: SyncGroupResponse, cx: &mut Cx) -> bool {
    match g.members.get_mut(member_id).and_then(|m| m.awaiting_sync.take()) {
        Some(token) => {
            cx.reply(token, response);
            true
        }
        None => false,
    }
}

/// Removes a member after answering whatever it has parked. Kafka answers a
/// parked JoinGroup with UNKNOWN_MEMBER_ID before removing; we also answer
/// a parked SyncGroup the same way, so no request is ever left unanswered.
pub fn remove_member(g: &mut ClassicGroup, member_id: &str, cx: &mut Cx) {
    complete_join_future(g, member_id, JoinGroupResponse::error(ErrorCode::UNKNOWN_MEMBER_ID, ""), cx);
    complete_sync_future(g, member_id, SyncGroupResponse::error(ErrorCode::UNKNOWN_MEMBER_ID), cx);
    if let Some(m) = g.members.get_mut(member_id) {
        m.heartbeat.cancel();
    }
    g.remove(member_id);
}

/// Kafka's `prepareRebalance`.
pub fn prepare_rebalance(g: &mut ClassicGroup, cx: &mut Cx, cause: Cause) {
    if g.is(GroupState::CompletingRebalance) {
        reset_and_propagate_assignment_with_error(g, ErrorCode::REBALANCE_IN_PROGRESS, cx);
    }
    g.sync_timer.cancel();
    g.pending_sync_members.clear();
    let initial = g.is(GroupState::Empty);
    if initial {
        let delay = cx.cfg.initial_rebalance_delay_ms;
        let remaining = (g.rebalance_timeout_ms() - delay).max(0);
        schedule_join_timer(g, delay, Some(InitialDelay { delay_ms: delay, remaining_ms: remaining }), cx);
    }
    g.transition_to(GroupState::PreparingRebalance, cx.now);
    tracing::info!(
        group = %g.group_id,
        generation = g.generation_id,
        members = g.members.len(),
        cause = cause.kind(),
        "preparing to rebalance group"
    );
    metrics::counter!("kcoord_rebalances_total", "cause" => cause.kind()).increment(1);
    let members = g.member_ids();
    if let Some(restarted) = g.history.start(cause, cx.now, g.generation_id, members, cx.cfg.rebalance_history) {
        log_ended(&g.group_id, &restarted);
    }
    if !initial {
        maybe_complete_join_else_schedule(g, cx);
    }
}

fn maybe_complete_join_else_schedule(g: &mut ClassicGroup, cx: &mut Cx) {
    if g.has_all_members_joined() {
        complete_join(g, cx);
    } else {
        let timeout = g.rebalance_timeout_ms();
        schedule_join_timer(g, timeout, None, cx);
    }
}

/// Kafka's `maybePrepareRebalanceOrCompleteJoin`.
pub fn maybe_prepare_rebalance_or_complete_join(g: &mut ClassicGroup, cx: &mut Cx, cause: Cause) {
    if g.can_rebalance() {
        prepare_rebalance(g, cx, cause);
    } else {
        maybe_complete_join_phase(g, cx);
    }
}

/// Kafka's `maybeCompleteJoinPhase`: never during the initial rebalance,
/// whose end is decided by the delay timer alone.
pub fn maybe_complete_join_phase(g: &mut ClassicGroup, cx: &mut Cx) {
    if g.is(GroupState::PreparingRebalance) && g.has_all_members_joined() && g.previous_state != GroupState::Empty {
        complete_join(g, cx);
    }
}

/// Kafka's `maybeElectNewJoinedLeader`.
fn maybe_elect_new_joined_leader(g: &mut ClassicGroup) -> bool {
    let Some(leader) = g.leader_id.clone() else { return false };
    if g.members.get(&leader).is_some_and(|m| m.awaiting_join.is_some()) {
        return true;
    }
    match g.members.values().find(|m| m.awaiting_join.is_some()) {
        Some(m) => {
            tracing::info!(group = %g.group_id, old = %leader, new = %m.member_id, "leader did not rejoin; electing a new leader");
            g.leader_id = Some(m.member_id.clone());
            true
        }
        None => false,
    }
}

/// How long a join phase that no member rejoined waits before it is checked
/// again: the rebalance timeout, as Kafka, or [`MIN_JOIN_EXTENSION_MS`]
/// when that is zero or negative. JoinGroup's rebalance timeout is not
/// validated (in Kafka either), and such a check ran again at the very
/// instant it was armed: the shard fired that timer forever and answered
/// nothing else (found by the `session` fuzz target; Kafka spins on it too,
/// as an endless series of timer events). Only a member joining meanwhile
/// makes the check do anything: rejoins and expired sessions complete the
/// phase on their own.
fn join_extension_ms(rebalance_timeout_ms: i32) -> i32 {
    if rebalance_timeout_ms > 0 {
        rebalance_timeout_ms
    } else {
        MIN_JOIN_EXTENSION_MS
    }
}

/// See [`join_extension_ms`].
pub const MIN_JOIN_EXTENSION_MS: i32 = 1_000;

/// Kafka's `completeClassicGroupJoin`.
pub fn complete_join(g: &mut ClassicGroup, cx: &mut Cx) {
    g.join_timer.cancel();
    g.initial_delay = None;
    let not_rejoined: Vec<String> = g
        .members
        .values()
        .filter(|m| m.awaiting_join.is_none() && !m.is_static())
        .map(|m| m.member_id.clone())
        .collect();
    if !not_rejoined.is_empty() {
        tracing::info!(group = %g.group_id, members = ?not_rejoined, "removing members that did not rejoin in time");
    }
    for id in &not_rejoined {
        remove_member(g, id, cx);
    }
    if !not_rejoined.is_empty() {
        g.history.note_removed(&not_rejoined);
    }
    if g.is(GroupState::Dead) {
        return;
    }
    if !maybe_elect_new_joined_leader(g) && !g.members.is_empty() {
        // Only members that did not rejoin are left (static ones): wait for
        // them to rejoin or for their sessions to expire.
        tracing::warn!(group = %g.group_id, "no member rejoined; extending the join phase");
        let timeout = g.rebalance_timeout_ms();
        schedule_join_timer(g, join_extension_ms(timeout), None, cx);
        return;
    }
    g.init_next_generation(cx.now);
    if g.is(GroupState::Empty) {
        tracing::info!(group = %g.group_id, generation = g.generation_id, "group is now empty");
        let record = Record::group(&g.group_id, g.to_record(Some(&HashMap::new())));
        if let Err(e) = cx.append(vec![record]) {
            // As Kafka: no member waits on this write; a crash before the
            // next rebalance brings the previous generation back.
            tracing::warn!(group = %g.group_id, error = ?e, "failed to write the empty group's metadata");
        }
        finish_rebalance(g, cx.now, Outcome::Empty);
        return;
    }
    tracing::info!(
        group = %g.group_id,
        generation = g.generation_id,
        protocol = g.protocol_name.as_deref().unwrap_or(""),
        members = g.members.len(),
        "join phase complete"
    );
    let leader = g.leader_id.clone().unwrap_or_default();
    let leader_view = g.join_members();
    let ids: Vec<String> = g.members.keys().cloned().collect();
    for id in ids {
        let response = JoinGroupResponse {
            error: ErrorCode::NONE,
            generation_id: g.generation_id,
            protocol_type: g.protocol_type.clone(),
            protocol_name: g.protocol_name.clone(),
            leader: leader.clone(),
            skip_assignment: false,
            member_id: id.clone(),
            members: if id == leader { leader_view.clone() } else { Vec::new() },
        };
        complete_join_future(g, &id, response, cx);
        reschedule_heartbeat(g, &id, cx);
        if let Some(m) = g.members.get_mut(&id) {
            m.is_new = false;
        }
        g.pending_sync_members.insert(id);
    }
    schedule_pending_sync(g, cx);
}

fn schedule_pending_sync(g: &mut ClassicGroup, cx: &mut Cx) {
    g.sync_generation = g.generation_id;
    let timeout = g.rebalance_timeout_ms();
    let gid = g.group_id.clone();
    g.sync_timer.schedule(cx.now + timeout as i64, || TimerKey::Sync { group: gid }, cx.timers);
}

/// Kafka's `removePendingSyncMember`.
pub fn remove_pending_sync_member(g: &mut ClassicGroup, member_id: &str) {
    g.pending_sync_members.remove(member_id);
    match g.state {
        GroupState::Dead | GroupState::Empty | GroupState::PreparingRebalance => g.sync_timer.cancel(),
        GroupState::CompletingRebalance | GroupState::Stable => {
            if g.has_received_sync_from_all_members() {
                g.sync_timer.cancel();
            }
        }
    }
}

/// Kafka's `propagateAssignment`: answers every parked SyncGroup.
pub fn propagate_assignment(g: &mut ClassicGroup, error: ErrorCode, cx: &mut Cx) {
    let (protocol_type, protocol_name) =
        if error.is_none() { (g.protocol_type.clone(), g.protocol_name.clone()) } else { (None, None) };
    let ids: Vec<String> = g.members.keys().cloned().collect();
    for id in ids {
        let Some(m) = g.members.get_mut(&id) else { continue };
        if let Some(token) = m.awaiting_sync.take() {
            if m.assignment.is_empty() && error.is_none() {
                tracing::warn!(group = %g.group_id, member = %id, "sending an empty assignment");
            }
            cx.reply(
                token,
                SyncGroupResponse {
                    error,
                    protocol_type: protocol_type.clone(),
                    protocol_name: protocol_name.clone(),
                    assignment: m.assignment.clone(),
                },
            );
            reschedule_heartbeat(g, &id, cx);
        }
    }
}

/// Clears every assignment and answers parked syncs with `error`.
pub fn reset_and_propagate_assignment_with_error(g: &mut ClassicGroup, error: ErrorCode, cx: &mut Cx) {
    for m in g.members.values_mut() {
        m.assignment = Bytes::new();
    }
    propagate_assignment(g, error, cx);
}

/// Stores the leader's assignment and answers every parked sync.
pub fn set_and_propagate_assignment(g: &mut ClassicGroup, assignment: &HashMap<String, Bytes>, cx: &mut Cx) {
    for m in g.members.values_mut() {
        m.assignment = assignment.get(&m.member_id).cloned().unwrap_or_default();
    }
    propagate_assignment(g, ErrorCode::NONE, cx);
}

/// Ends the rebalance in progress and logs it as one structured line.
pub fn finish_rebalance(g: &mut ClassicGroup, now: i64, outcome: Outcome) {
    let members = g.member_ids();
    let generation = g.generation_id;
    if let Some(r) = g.history.finish(now, generation, members, outcome) {
        metrics::histogram!("kcoord_rebalance_duration_seconds").record(r.duration_ms.unwrap_or(0) as f64 / 1000.0);
        log_ended(&g.group_id, r);
    }
}

/// The one structured line every rebalance gets when it ends, whether every
/// member synced, the group emptied, or another rebalance took over
/// (`restarted`): operators grep one message to see them all.
fn log_ended(group_id: &str, r: &Rebalance) {
    tracing::info!(
        group = %group_id,
        generation = r.generation_after.unwrap_or(r.generation_before),
        cause = r.cause.kind(),
        detail = ?r.cause,
        outcome = ?r.outcome,
        duration_ms = r.duration_ms.unwrap_or(0),
        members_before = r.members_before.len(),
        members_after = r.members_after.len(),
        removed_at_rebalance_timeout = ?r.removed_at_rebalance_timeout,
        "rebalance ended"
    );
}

/// Kafka's `removeMemberAndUpdateClassicGroup` (expiry and similar paths).
pub fn remove_member_and_update_group(g: &mut ClassicGroup, member_id: &str, cx: &mut Cx, cause: Cause) {
    remove_member(g, member_id, cx);
    match g.state {
        GroupState::Stable | GroupState::CompletingRebalance => maybe_prepare_rebalance_or_complete_join(g, cx, cause),
        GroupState::PreparingRebalance if g.has_all_members_joined() => complete_join(g, cx),
        _ => {}
    }
}

/// A member's or pending member's session timer popped.
pub fn on_heartbeat_timer(g: &mut ClassicGroup, member_id: &str, deadline: i64, cx: &mut Cx) {
    let gid = g.group_id.clone();
    if let Some(m) = g.members.get_mut(member_id) {
        if m.heartbeat.on_pop(deadline, cx.now, || heartbeat_key(&gid, member_id), cx.timers) == Pop::Fire {
            expire_member(g, member_id, cx);
        }
        return;
    }
    if let Some(slot) = g.pending_join_members.get_mut(member_id) {
        if slot.on_pop(deadline, cx.now, || heartbeat_key(&gid, member_id), cx.timers) == Pop::Fire {
            expire_pending_member(g, member_id, cx);
        }
    }
}

/// Kafka's `expireClassicGroupMemberHeartbeat` for a known member.
fn expire_member(g: &mut ClassicGroup, member_id: &str, cx: &mut Cx) {
    if g.is(GroupState::Dead) {
        return;
    }
    let Some(m) = g.members.get(member_id) else { return };
    if m.has_satisfied_heartbeat() {
        // Parked in a join or sync: the timer is re-armed when that answer is sent.
        return;
    }
    tracing::info!(group = %g.group_id, member = %member_id, "member session expired; removing it from the group");
    metrics::counter!("kcoord_session_expirations_total").increment(1);
    remove_member_and_update_group(g, member_id, cx, Cause::SessionExpired { member_id: member_id.to_string() });
}

/// A KIP-394 pending member never rejoined within its session timeout.
fn expire_pending_member(g: &mut ClassicGroup, member_id: &str, cx: &mut Cx) {
    if g.is(GroupState::Dead) {
        return;
    }
    tracing::info!(group = %g.group_id, member = %member_id, "pending member removed after session timeout");
    g.remove(member_id);
    if g.is(GroupState::PreparingRebalance) && g.has_all_members_joined() {
        complete_join(g, cx);
    }
}

/// The join timer popped: the initial delay step or the rebalance timeout.
pub fn on_join_timer(g: &mut ClassicGroup, deadline: i64, cx: &mut Cx) {
    let gid = g.group_id.clone();
    if g.join_timer.on_pop(deadline, cx.now, || TimerKey::Join { group: gid }, cx.timers) != Pop::Fire {
        return;
    }
    if !g.is(GroupState::PreparingRebalance) {
        return;
    }
    match g.initial_delay {
        Some(d) if g.new_member_added && d.remaining_ms != 0 => {
            // Kafka's `tryCompleteInitialRebalanceElseSchedule`: a member
            // joined during the last window; wait again, up to the rebalance timeout.
            g.new_member_added = false;
            let delay = cx.cfg.initial_rebalance_delay_ms.min(d.remaining_ms);
            let remaining = (d.remaining_ms - d.delay_ms).max(0);
            schedule_join_timer(g, delay, Some(InitialDelay { delay_ms: delay, remaining_ms: remaining }), cx);
        }
        _ => complete_join(g, cx),
    }
}

/// The pending-sync timer popped (Kafka's `expirePendingSync`).
pub fn on_sync_timer(g: &mut ClassicGroup, deadline: i64, cx: &mut Cx) {
    let gid = g.group_id.clone();
    if g.sync_timer.on_pop(deadline, cx.now, || TimerKey::Sync { group: gid }, cx.timers) != Pop::Fire {
        return;
    }
    if g.sync_generation != g.generation_id {
        return;
    }
    match g.state {
        GroupState::CompletingRebalance | GroupState::Stable if !g.has_received_sync_from_all_members() => {
            let pending: Vec<String> = g.pending_sync_members.iter().cloned().collect();
            tracing::info!(group = %g.group_id, members = ?pending, "removing members that did not sync in time");
            for id in &pending {
                remove_member(g, id, cx);
            }
            prepare_rebalance(g, cx, Cause::PendingSyncTimeout { removed: pending });
        }
        _ => {}
    }
}

/// Kafka's unload: the group becomes Dead and every parked request is
/// answered NOT_COORDINATOR so clients look for the coordinator again.
pub fn unload(g: &mut ClassicGroup, now: i64, out: &mut Vec<Reply>) {
    g.transition_to(GroupState::Dead, now);
    for m in g.members.values_mut() {
        if let Some(p) = m.awaiting_join.take() {
            out.push(p.token.answer(JoinGroupResponse::error(ErrorCode::NOT_COORDINATOR, m.member_id.clone())));
        }
        if let Some(t) = m.awaiting_sync.take() {
            out.push(t.answer(SyncGroupResponse::error(ErrorCode::NOT_COORDINATOR)));
        }
    }
    g.num_awaiting_join = 0;
}
