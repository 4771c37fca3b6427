//! Moving one member from its current assignment towards its target:
//! Kafka's `CurrentAssignmentBuilder`.
//!
//! The rule that makes KIP-848 safe without a global barrier: a member
//! first gives up what it must revoke (staying in its epoch, state
//! UNREVOKED_PARTITIONS) and only then gets new partitions, and a partition
//! still owned by another member (its owner epoch is not −1) is withheld
//! (UNRELEASED_PARTITIONS) until that owner lets it go. So no partition is
//! ever owned by two members at once.

use uuid::Uuid;

use super::group::{ConsumerMember, MemberState};
use super::records::Assignment;

/// Why a member cannot be reconciled: it must rejoin (FENCED_MEMBER_EPOCH).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MustRejoin(pub String);

/// Whether `owned` (what the member reported; `None` when it did not say)
/// still holds any partition of `revoking`. Not saying counts as owning.
fn owns_any(owned: Option<&Assignment>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else { return true };
    owned.iter().any(|(topic, parts)| revoking.get(topic).is_some_and(|r| parts.iter().any(|p| r.contains(p))))
}

/// The member's next assignment state (the member itself if nothing moves).
///
/// `partition_epoch` answers who owns a partition now (−1: nobody);
/// `owned` is what the heartbeat reported.
pub fn reconcile(
    member: &ConsumerMember,
    target_epoch: i32,
    target: &Assignment,
    partition_epoch: &dyn Fn(&Uuid, i32) -> i32,
    owned: Option<&Assignment>,
) -> Result<ConsumerMember, MustRejoin> {
    let step = Step { member, target_epoch, target, partition_epoch, owned };
    match member.state {
        MemberState::Stable => {
            if member.member_epoch != target_epoch {
                Ok(step.next(member.member_epoch))
            } else {
                Ok(member.clone())
            }
        }
        MemberState::UnrevokedPartitions => {
            if owns_any(owned, &member.pending_revocation) {
                Ok(member.clone())
            } else {
                // Revocation acknowledged: the member moves past its epoch.
                Ok(step.next(member.member_epoch + 1))
            }
        }
        MemberState::UnreleasedPartitions => Ok(step.next(member.member_epoch)),
        MemberState::Unknown => {
            if owned.is_none_or(|o| !o.is_empty()) {
                return Err(MustRejoin(
                    "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin."
                        .into(),
                ));
            }
            Ok(step.next(target_epoch))
        }
    }
}

struct Step<'a> {
    member: &'a ConsumerMember,
    target_epoch: i32,
    target: &'a Assignment,
    partition_epoch: &'a dyn Fn(&Uuid, i32) -> i32,
    owned: Option<&'a Assignment>,
}

impl Step<'_> {
    /// Kafka's `computeNextAssignment`: keep assigned ∩ target, revoke the
    /// rest, add target partitions that nobody else owns.
    fn next(&self, epoch_if_revoking: i32) -> ConsumerMember {
        let mut keep = Assignment::new();
        let mut revoke = Assignment::new();
        let mut add = Assignment::new();
        let mut unreleased = false;
        let empty = Default::default();
        let topics: std::collections::BTreeSet<&Uuid> = self.target.keys().chain(self.member.assigned.keys()).collect();
        for topic in topics {
            let target = self.target.get(topic).unwrap_or(&empty);
            let current = self.member.assigned.get(topic).unwrap_or(&empty);
            let kept: std::collections::BTreeSet<i32> = current.intersection(target).copied().collect();
            let revoked: std::collections::BTreeSet<i32> = current.difference(&kept).copied().collect();
            let mut adding = std::collections::BTreeSet::new();
            for p in target.difference(&kept) {
                if (self.partition_epoch)(topic, *p) == -1 {
                    adding.insert(*p);
                } else {
                    unreleased = true;
                }
            }
            if !kept.is_empty() {
                keep.insert(*topic, kept);
            }
            if !revoked.is_empty() {
                revoke.insert(*topic, revoked);
            }
            if !adding.is_empty() {
                add.insert(*topic, adding);
            }
        }
        let mut next = self.member.clone();
        if !revoke.is_empty() && owns_any(self.owned, &revoke) {
            next.state = MemberState::UnrevokedPartitions;
            set_epoch(&mut next, epoch_if_revoking);
            next.assigned = keep;
            next.pending_revocation = revoke;
            return next;
        }
        for (topic, parts) in add.iter() {
            keep.entry(*topic).or_default().extend(parts.iter().copied());
        }
        next.state = if unreleased { MemberState::UnreleasedPartitions } else { MemberState::Stable };
        set_epoch(&mut next, self.target_epoch);
        next.assigned = keep;
        next.pending_revocation = Assignment::new();
        next
    }
}

/// Kafka's `updateMemberEpoch`: the old epoch becomes the previous one.
fn set_epoch(m: &mut ConsumerMember, epoch: i32) {
    m.previous_member_epoch = m.member_epoch;
    m.member_epoch = epoch;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn a(pairs: &[(u8, &[i32])]) -> Assignment {
        pairs.iter().filter(|(_, ps)| !ps.is_empty()).map(|(n, ps)| (t(*n), ps.iter().copied().collect())).collect()
    }

    fn member(epoch: i32, state: MemberState, assigned: Assignment, revoking: Assignment) -> ConsumerMember {
        let mut m = ConsumerMember::new("m");
        m.member_epoch = epoch;
        m.previous_member_epoch = epoch - 1;
        m.state = state;
        m.assigned = assigned;
        m.pending_revocation = revoking;
        m
    }

    fn free(_: &Uuid, _: i32) -> i32 {
        -1
    }

    #[test]
    fn a_stable_member_at_the_target_epoch_does_not_move() {
        let m = member(10, MemberState::Stable, a(&[(1, &[0, 1])]), a(&[]));
        assert_eq!(reconcile(&m, 10, &a(&[(1, &[0, 1, 2])]), &free, None).unwrap(), m);
    }

    #[test]
    fn new_free_partitions_are_assigned_with_the_target_epoch() {
        let m = member(10, MemberState::Stable, a(&[(1, &[0, 1])]), a(&[]));
        let n = reconcile(&m, 11, &a(&[(1, &[0, 1, 2]), (2, &[0])]), &free, Some(&a(&[(1, &[0, 1])]))).unwrap();
        assert_eq!((n.member_epoch, n.previous_member_epoch, n.state), (11, 10, MemberState::Stable));
        assert_eq!(n.assigned, a(&[(1, &[0, 1, 2]), (2, &[0])]));
    }

    #[test]
    fn partitions_are_revoked_before_any_is_assigned() {
        let m = member(10, MemberState::Stable, a(&[(1, &[0, 1])]), a(&[]));
        let target = a(&[(1, &[0, 2])]);
        let n = reconcile(&m, 11, &target, &free, Some(&a(&[(1, &[0, 1])]))).unwrap();
        assert_eq!((n.member_epoch, n.state), (10, MemberState::UnrevokedPartitions));
        assert_eq!(n.assigned, a(&[(1, &[0])]));
        assert_eq!(n.pending_revocation, a(&[(1, &[1])]));
        // Still reporting partition 1: no progress.
        assert_eq!(reconcile(&n, 11, &target, &free, Some(&a(&[(1, &[0, 1])]))).unwrap(), n);
        // Not reporting at all counts as still owning.
        assert_eq!(reconcile(&n, 11, &target, &free, None).unwrap(), n);
        // Revoked: moves to the target epoch and gets partition 2.
        let s = reconcile(&n, 11, &target, &free, Some(&a(&[(1, &[0])]))).unwrap();
        assert_eq!((s.member_epoch, s.previous_member_epoch, s.state), (11, 10, MemberState::Stable));
        assert_eq!(s.assigned, target);
    }

    #[test]
    fn a_member_that_already_dropped_the_revoked_partitions_moves_on_at_once() {
        let m = member(10, MemberState::Stable, a(&[(1, &[0, 1])]), a(&[]));
        let n = reconcile(&m, 11, &a(&[(1, &[0])]), &free, Some(&a(&[(1, &[0])]))).unwrap();
        assert_eq!((n.member_epoch, n.state), (11, MemberState::Stable));
        assert_eq!(n.assigned, a(&[(1, &[0])]));
    }

    #[test]
    fn partitions_owned_by_another_member_stay_unreleased_until_revoked() {
        let m = member(10, MemberState::Stable, a(&[(1, &[0])]), a(&[]));
        let target = a(&[(1, &[0, 1, 2])]);
        let owner = |_: &Uuid, p: i32| if p == 2 { 10 } else { -1 };
        let n = reconcile(&m, 11, &target, &owner, Some(&a(&[(1, &[0])]))).unwrap();
        assert_eq!((n.member_epoch, n.state), (11, MemberState::UnreleasedPartitions));
        assert_eq!(n.assigned, a(&[(1, &[0, 1])]));
        // Still owned: the member keeps waiting (Kafka's updateMemberEpoch
        // still moves the previous epoch up to the current one).
        let w = reconcile(&n, 11, &target, &owner, Some(&a(&[(1, &[0, 1])]))).unwrap();
        assert_eq!((w.member_epoch, w.previous_member_epoch, w.state), (11, 11, MemberState::UnreleasedPartitions));
        assert_eq!(w.assigned, n.assigned);
        // Released: assigned, and stable.
        let s = reconcile(&n, 11, &target, &free, Some(&a(&[(1, &[0, 1])]))).unwrap();
        assert_eq!((s.member_epoch, s.state), (11, MemberState::Stable));
        assert_eq!(s.assigned, target);
    }

    #[test]
    fn only_unreleased_partitions_still_move_the_member_to_the_target_epoch() {
        let m = member(10, MemberState::Stable, a(&[(1, &[0])]), a(&[]));
        let owner = |_: &Uuid, p: i32| if p == 1 { 10 } else { -1 };
        let n = reconcile(&m, 11, &a(&[(1, &[0, 1])]), &owner, Some(&a(&[(1, &[0])]))).unwrap();
        assert_eq!((n.member_epoch, n.previous_member_epoch, n.state), (11, 10, MemberState::UnreleasedPartitions));
        assert_eq!(n.assigned, a(&[(1, &[0])]));
    }

    #[test]
    fn a_member_in_an_unknown_state_must_rejoin_unless_it_owns_nothing() {
        let m = member(10, MemberState::Unknown, a(&[(1, &[0])]), a(&[]));
        assert!(reconcile(&m, 11, &a(&[(1, &[0])]), &free, None).is_err());
        assert!(reconcile(&m, 11, &a(&[(1, &[0])]), &free, Some(&a(&[(1, &[0])]))).is_err());
        let n = reconcile(&m, 11, &a(&[(1, &[0])]), &free, Some(&Assignment::new())).unwrap();
        assert_eq!((n.member_epoch, n.state), (11, MemberState::Stable));
    }
}
