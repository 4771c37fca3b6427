//! DescribeGroups and ListGroups (Kafka's `describeGroups`, `listGroups`).

use crate::coordinator::Groups;

use super::group::GroupState;
use crate::coordinator::messages::{
    DescribedGroup, DescribedMember, GroupDetails, GroupSummary, ListGroupsRequest, ListedGroup, MemberDetails,
    OffsetDetails, ShardStats,
};
use crate::coordinator::store::Store;
use crate::error_code::ErrorCode;
use crate::security::acl::ResourceType;

/// Describes one group. Stable groups show each member's metadata for the
/// selected protocol; other states show none, but (as Kafka's new
/// coordinator) still show the stored assignment.
pub fn describe(groups: &Groups, group_id: &str, version: i16, include_ops: bool) -> DescribedGroup {
    let Some(g) = groups.get(group_id) else {
        return if version >= 6 {
            let mut d = DescribedGroup::bare(group_id, ErrorCode::GROUP_ID_NOT_FOUND, "");
            d.error_message = Some(format!("Group {group_id} not found."));
            d
        } else {
            DescribedGroup::bare(group_id, ErrorCode::NONE, GroupState::Dead.as_str())
        };
    };
    let stable = g.is(GroupState::Stable);
    let protocol = g.protocol_name.as_deref();
    DescribedGroup {
        error: ErrorCode::NONE,
        error_message: None,
        group_id: group_id.to_string(),
        state: g.state.as_str().to_string(),
        protocol_type: g.protocol_type.clone().unwrap_or_default(),
        protocol_data: if stable { protocol.unwrap_or_default().to_string() } else { String::new() },
        members: g
            .members
            .values()
            .map(|m| DescribedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable { m.metadata(protocol) } else { Default::default() },
                assignment: m.assignment.clone(),
            })
            .collect(),
        authorized_operations: include_ops.then_some(ResourceType::Group.all_operations()),
    }
}

/// Lists groups matching the (lower-cased) state and type filters.
pub fn list(groups: &Groups, req: &ListGroupsRequest) -> Vec<ListedGroup> {
    let type_ok = req.types_filter.is_empty() || req.types_filter.iter().any(|t| t == "classic");
    if !type_ok {
        return Vec::new();
    }
    let mut out: Vec<ListedGroup> = groups
        .values()
        .filter(|g| {
            req.states_filter.is_empty()
                || req.states_filter.iter().any(|s| *s == g.state.as_str().to_ascii_lowercase())
        })
        .map(|g| ListedGroup {
            group_id: g.group_id.clone(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            state: g.state.as_str().to_string(),
            group_type: "classic".to_string(),
        })
        .collect();
    out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    out
}

/// A group's committed offsets by topic and partition (either group type).
pub fn committed_offsets(store: &Store, group_id: &str) -> Vec<OffsetDetails> {
    let mut offsets: Vec<OffsetDetails> = store
        .offsets(group_id)
        .map(|topics| {
            topics
                .iter()
                .flat_map(|(t, parts)| {
                    parts.iter().map(move |(p, v)| OffsetDetails {
                        topic: t.clone(),
                        partition: *p,
                        offset: v.offset,
                        leader_epoch: v.leader_epoch,
                        metadata: v.metadata.clone(),
                        commit_timestamp: v.commit_timestamp,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    offsets.sort_by(|a, b| (a.topic.as_str(), a.partition).cmp(&(b.topic.as_str(), b.partition)));
    offsets
}

/// One group in full: members, committed offsets and rebalance history.
pub fn details(groups: &Groups, store: &Store, group_id: &str) -> Option<GroupDetails> {
    let g = groups.get(group_id)?;
    let offsets = committed_offsets(store, group_id);
    Some(GroupDetails {
        group_id: g.group_id.clone(),
        state: g.state.as_str().to_string(),
        generation: g.generation_id,
        protocol_type: g.protocol_type.clone(),
        protocol: g.protocol_name.clone(),
        leader: g.leader_id.clone(),
        members: g
            .members
            .values()
            .map(|m| MemberDetails {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                assignment: m.assignment.clone(),
            })
            .collect(),
        offsets,
        rebalances: g.history.entries().cloned().collect(),
        consumer: None,
    })
}

/// Every group in brief.
pub fn summaries(groups: &Groups) -> Vec<GroupSummary> {
    groups
        .values()
        .map(|g| GroupSummary {
            group_id: g.group_id.clone(),
            state: g.state.as_str().to_string(),
            generation: g.generation_id,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: g.protocol_name.clone().unwrap_or_default(),
            members: g.members.len(),
            last_rebalance_cause: g.history.last().map(|r| r.cause.kind().to_string()),
            rebalance_starts_ms: g.history.entries().map(|r| r.started_ms).collect(),
        })
        .collect()
}

/// Counts for metrics.
pub fn stats(groups: &Groups, store: &Store) -> ShardStats {
    let mut by_state: std::collections::BTreeMap<&'static str, usize> = Default::default();
    let mut members = 0;
    for g in groups.values() {
        *by_state.entry(g.state.as_str()).or_default() += 1;
        members += g.members.len();
    }
    ShardStats {
        groups_by_state: by_state.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        members,
        offsets: store.offset_count(),
    }
}
