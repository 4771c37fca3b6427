//! KIP-848 consumer groups (ConsumerGroupHeartbeat), Kafka's "modern"
//! rebalance protocol, in which the coordinator computes the assignment.
//!
//! One file per idea: `records` (Kafka's ConsumerGroup* record schemas),
//! `group` (the group and its members as the fold of those records),
//! `reconcile` (Kafka's CurrentAssignmentBuilder), `target` (the target
//! assignment and the seam to the server-side assignors), `heartbeat` (the
//! request: validation, join, heartbeat, leave, fencing and timers),
//! `offsets` (member-epoch checks of OffsetCommit and OffsetFetch),
//! `regex` (regular-expression subscriptions), `retention` (OffsetDelete,
//! offset expiry and deletion of empty groups), `describe` (ListGroups),
//! `history` (the epoch history: each group-epoch bump with its cause),
//! `assignor` (the server-side assignors, `uniform` and `range`),
//! `migration` (online upgrade of a classic group and downgrade back),
//! `classic_member` (classic members' JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup inside a consumer group), `embedded` (the consumer protocol
//! bytes those members exchange).

pub mod assignor;
pub mod classic_member;
pub mod describable;
pub mod describe;
pub mod embedded;
pub mod group;
pub mod heartbeat;
pub mod history;
#[cfg(test)]
mod history_tests;
pub mod messages;
pub mod migration;
#[cfg(test)]
mod migration_tests;
pub mod offsets;
pub mod reconcile;
pub mod records;
pub mod regex;
#[cfg(test)]
mod regex_tests;
pub mod retention;
#[cfg(test)]
mod retention_tests;
pub mod target;
#[cfg(test)]
mod tests;
