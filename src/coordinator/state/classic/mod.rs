//! Kafka's classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, and the group state machine they drive.

pub mod describe;
pub mod group;
pub mod heartbeat;
pub mod history;
pub mod join;
pub mod leave;
pub mod rebalance;
pub mod sync;

#[cfg(test)]
mod history_tests;
#[cfg(test)]
pub(crate) mod tests;

use crate::error_code::ErrorCode;
use group::ClassicGroup;

/// Kafka's `validateExistingMember`: with an instance id, the id must map to
/// this member (else FENCED_INSTANCE_ID, or UNKNOWN_MEMBER_ID if unmapped);
/// without one, the member must exist.
pub fn validate_existing_member(g: &ClassicGroup, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
    match instance_id {
        None => {
            if g.has_member(member_id) {
                Ok(())
            } else {
                Err(ErrorCode::UNKNOWN_MEMBER_ID)
            }
        }
        Some(instance) => match g.static_member_id(instance) {
            None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
            Some(existing) if existing != member_id => {
                tracing::info!(group = %g.group_id, instance, member = member_id, current = %existing, "fencing a stale static member");
                Err(ErrorCode::FENCED_INSTANCE_ID)
            }
            Some(_) => Ok(()),
        },
    }
}
