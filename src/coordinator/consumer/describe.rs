//! Consumer groups in ListGroups (type `consumer`, Kafka's state names)
//! and ConsumerGroupDescribe.
//! DescribeGroups answers a consumer group as a group that is not a classic
//! one (Dead, or GROUP_ID_NOT_FOUND from v6), which is what the classic path
//! already does for an id it does not hold.

use super::messages::{
    ConsumerDescribeRequest, DescribedConsumerGroup, DescribedConsumerMember, DescribedTopicPartitions,
};
use super::records::Assignment;
use super::target::Assigners;
use crate::coordinator::messages::{ListGroupsRequest, ListedGroup};
use crate::coordinator::store::Store;
use crate::coordinator::Groups;
use crate::error_code::ErrorCode;

/// The shard's consumer groups matching the request's filters.
pub fn list(store: &Store, req: &ListGroupsRequest) -> Vec<ListedGroup> {
    if !(req.types_filter.is_empty() || req.types_filter.iter().any(|t| t == "consumer")) {
        return Vec::new();
    }
    store
        .consumer_groups()
        .filter_map(|g| {
            let state = g.state().name();
            let wanted =
                req.states_filter.is_empty() || req.states_filter.iter().any(|s| *s == state.to_ascii_lowercase());
            wanted.then(|| ListedGroup {
                group_id: g.group_id.clone(),
                protocol_type: "consumer".to_string(),
                state: state.to_string(),
                group_type: "consumer".to_string(),
            })
        })
        .collect()
}

/// ConsumerGroupDescribe of one group (Kafka's `ConsumerGroup.asDescribedGroup`).
pub fn describe(
    store: &Store,
    classic: &Groups,
    assigners: &Assigners,
    req: &ConsumerDescribeRequest,
) -> DescribedConsumerGroup {
    let Some(g) = store.consumer_group(&req.group_id) else {
        let message = if classic.contains_key(&req.group_id) {
            format!("Group {} is not a consumer group.", req.group_id)
        } else {
            format!("Group {} not found.", req.group_id)
        };
        return DescribedConsumerGroup::error(&req.group_id, ErrorCode::GROUP_ID_NOT_FOUND, Some(message));
    };
    let named = |a: &Assignment| -> Vec<DescribedTopicPartitions> {
        a.iter()
            .map(|(id, ps)| DescribedTopicPartitions {
                topic_id: *id,
                topic_name: req.topics.name_of(id).unwrap_or_default().to_string(),
                partitions: ps.iter().copied().collect(),
            })
            .collect()
    };
    let members = g
        .members
        .values()
        .map(|m| DescribedConsumerMember {
            member_id: m.member_id.clone(),
            instance_id: m.metadata.instance_id.clone(),
            rack_id: m.metadata.rack_id.clone(),
            member_epoch: m.member_epoch,
            client_id: m.metadata.client_id.clone(),
            client_host: m.metadata.client_host.clone(),
            subscribed_topic_names: m.metadata.subscribed_topic_names.clone(),
            subscribed_topic_regex: m.metadata.subscribed_topic_regex.clone(),
            assignment: named(&m.assigned),
            target_assignment: named(&g.target_of(&m.member_id)),
            member_type: if m.metadata.classic_member_metadata.is_some() { 0 } else { 1 },
        })
        .collect();
    DescribedConsumerGroup {
        error: ErrorCode::NONE,
        error_message: None,
        group_id: g.group_id.clone(),
        group_state: g.state().name().to_string(),
        group_epoch: g.group_epoch,
        assignment_epoch: g.assignment_epoch,
        assignor_name: assigners.preferred(g.members.values()).map(|a| a.name().to_string()).unwrap_or_default(),
        members,
    }
}
