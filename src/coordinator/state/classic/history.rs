//! Explainable rebalances: every group remembers its last rebalances, each
//! with the event that started it, when it started and ended, and the
//! members before and after. Kafka answers "why did my group rebalance?"
//! only in broker logs; we keep the answer with the group.

use crate::coordinator::bounded_history::{BoundedHistory, Ongoing};

use serde::Serialize;

/// What started a rebalance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cause {
    /// A new member joined (with its client id, host and KIP-800 reason).
    MemberJoined { member_id: String, client_id: String, client_host: String, reason: Option<String> },
    /// Members left with LeaveGroup.
    MemberLeft { member_ids: Vec<String>, reasons: Vec<String> },
    /// A member stopped heartbeating for its session timeout.
    SessionExpired { member_id: String },
    /// The leader rejoined a Stable group (e.g. topic metadata changed).
    LeaderRejoined { member_id: String, reason: Option<String> },
    /// A member rejoined with different protocols or subscription.
    ProtocolChanged { member_id: String, reason: Option<String> },
    /// A static member was replaced while the group was completing a rebalance.
    StaticMemberReplaced { instance_id: String, old_member_id: String, new_member_id: String },
    /// Members never sent SyncGroup within the rebalance timeout.
    PendingSyncTimeout { removed: Vec<String> },
    /// Writing the leader's assignment failed.
    AssignmentWriteFailed { error: String },
    /// After loading, the group had more members than `group.max_size`.
    OverMaxSize,
    /// The group was a consumer group whose last consumer-protocol member
    /// left (online downgrade); its classic members rejoin.
    Downgraded { member_id: String },
}

impl Cause {
    /// A short label (metrics and logs).
    pub fn kind(&self) -> &'static str {
        match self {
            Cause::MemberJoined { .. } => "member_joined",
            Cause::MemberLeft { .. } => "member_left",
            Cause::SessionExpired { .. } => "session_expired",
            Cause::LeaderRejoined { .. } => "leader_rejoined",
            Cause::ProtocolChanged { .. } => "protocol_changed",
            Cause::StaticMemberReplaced { .. } => "static_member_replaced",
            Cause::PendingSyncTimeout { .. } => "pending_sync_timeout",
            Cause::AssignmentWriteFailed { .. } => "assignment_write_failed",
            Cause::OverMaxSize => "over_max_size",
            Cause::Downgraded { .. } => "downgraded",
        }
    }
}

/// How a rebalance ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    InProgress,
    /// Every member got its assignment.
    Stable,
    /// No member was left.
    Empty,
    /// Another rebalance started before this one finished.
    Restarted,
}

/// One rebalance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rebalance {
    pub cause: Cause,
    pub started_ms: i64,
    pub ended_ms: Option<i64>,
    pub duration_ms: Option<i64>,
    pub generation_before: i32,
    pub generation_after: Option<i32>,
    pub members_before: Vec<String>,
    pub members_after: Vec<String>,
    /// Dynamic members removed because they did not rejoin in time.
    pub removed_at_rebalance_timeout: Vec<String>,
    pub outcome: Outcome,
}

/// The last rebalances of a group, newest last.
#[derive(Debug, Clone, Default)]
pub struct History {
    entries: BoundedHistory<Rebalance>,
}

impl Ongoing for Rebalance {
    fn in_progress(&self) -> bool {
        self.outcome == Outcome::InProgress
    }
}

impl History {
    pub fn entries(&self) -> impl Iterator<Item = &Rebalance> {
        self.entries.iter()
    }

    pub fn last(&self) -> Option<&Rebalance> {
        self.entries.last()
    }

    fn current(&mut self) -> Option<&mut Rebalance> {
        self.entries.current()
    }

    /// Starts a rebalance; one still in progress is closed as restarted and
    /// returned, so the caller can report its end like any other.
    pub fn start(
        &mut self,
        cause: Cause,
        now: i64,
        generation: i32,
        members: Vec<String>,
        capacity: usize,
    ) -> Option<Rebalance> {
        let restarted = self.current().map(|r| {
            r.ended_ms = Some(now);
            r.duration_ms = Some(now - r.started_ms);
            r.outcome = Outcome::Restarted;
            r.clone()
        });
        self.entries.push(
            Rebalance {
                cause,
                started_ms: now,
                ended_ms: None,
                duration_ms: None,
                generation_before: generation,
                generation_after: None,
                members_before: members,
                members_after: Vec::new(),
                removed_at_rebalance_timeout: Vec::new(),
                outcome: Outcome::InProgress,
            },
            capacity,
        );
        restarted
    }

    pub fn note_removed(&mut self, removed: &[String]) {
        if let Some(r) = self.current() {
            r.removed_at_rebalance_timeout.extend(removed.iter().cloned());
        }
    }

    /// Closes the rebalance in progress; returns it.
    pub fn finish(&mut self, now: i64, generation: i32, members: Vec<String>, outcome: Outcome) -> Option<&Rebalance> {
        let r = self.current()?;
        r.ended_ms = Some(now);
        r.duration_ms = Some(now - r.started_ms);
        r.generation_after = Some(generation);
        r.members_after = members;
        r.outcome = outcome;
        Some(&*r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_entries_and_closes_restarted_ones() {
        let mut h = History::default();
        assert!(h.start(Cause::OverMaxSize, 0, 0, vec![], 3).is_none(), "nothing to restart");
        for i in 1..5 {
            let restarted = h.start(Cause::OverMaxSize, i * 10, i as i32, vec![], 3).expect("restarts the previous");
            assert_eq!((restarted.outcome, restarted.duration_ms), (Outcome::Restarted, Some(10)));
        }
        let e: Vec<&Rebalance> = h.entries().collect();
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].outcome, Outcome::Restarted);
        assert_eq!(e[2].outcome, Outcome::InProgress);
        let done = h.finish(45, 5, vec!["m".into()], Outcome::Stable).unwrap();
        assert_eq!((done.duration_ms, done.generation_after), (Some(5), Some(5)));
        assert!(h.finish(50, 6, vec![], Outcome::Stable).is_none(), "nothing in progress");
    }
}
