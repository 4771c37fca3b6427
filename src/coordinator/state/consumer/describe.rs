//! Consumer groups in ListGroups (type `consumer`, Kafka's state names),
//! ConsumerGroupDescribe and the HTTP group view.
//! DescribeGroups answers a consumer group as a group that is not a classic
//! one (Dead, or GROUP_ID_NOT_FOUND from v6), which is what the classic path
//! already does for an id it does not hold.

use bytes::Bytes;

use super::group::ConsumerGroup;
use super::messages::{
    ConsumerDescribeRequest, DescribedConsumerGroup, DescribedConsumerMember, DescribedTopicPartitions,
};
use super::records::Assignment;
use super::target::{Assigners, TopicImage};
use crate::coordinator::classic::describe::committed_offsets;
use crate::coordinator::messages::{
    ConsumerGroupDetails, GroupDetails, GroupSummary, ListGroupsRequest, ListedGroup, MemberDetails,
};
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
    described(g, assigners, &req.topics)
}

/// A consumer group as ConsumerGroupDescribe shows it, topic ids named
/// from `topics`.
fn described(g: &ConsumerGroup, assigners: &Assigners, topics: &TopicImage) -> DescribedConsumerGroup {
    let named = |a: &Assignment| -> Vec<DescribedTopicPartitions> {
        a.iter()
            .map(|(id, ps)| DescribedTopicPartitions {
                topic_id: *id,
                topic_name: topics.name_of(id).unwrap_or_default().to_string(),
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

/// One consumer group in full for the HTTP view (`/v1/groups/{id}`): what
/// ConsumerGroupDescribe shows, with its committed offsets. Members' session
/// timeout is the group's (`group.consumer.session_timeout_ms`).
pub fn details(
    store: &Store,
    assigners: &Assigners,
    topics: &TopicImage,
    session_timeout_ms: i32,
    group_id: &str,
) -> Option<GroupDetails> {
    let g = store.consumer_group(group_id)?;
    let d = described(g, assigners, topics);
    let members = d
        .members
        .iter()
        .map(|m| MemberDetails {
            member_id: m.member_id.clone(),
            group_instance_id: m.instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            session_timeout_ms,
            rebalance_timeout_ms: g.members.get(&m.member_id).map_or(-1, |x| x.metadata.rebalance_timeout_ms),
            assignment: Bytes::new(),
        })
        .collect();
    Some(GroupDetails {
        group_id: d.group_id,
        state: d.group_state,
        generation: d.group_epoch,
        protocol_type: Some("consumer".to_string()),
        protocol: Some(d.assignor_name.clone()),
        leader: None,
        members,
        offsets: committed_offsets(store, group_id),
        rebalances: Vec::new(),
        consumer: Some(ConsumerGroupDetails {
            group_epoch: d.group_epoch,
            assignment_epoch: d.assignment_epoch,
            assignor: d.assignor_name,
            members: d.members,
            rebalances: Vec::new(),
        }),
    })
}

/// Every consumer group in brief (the group epoch stands for the generation).
pub fn summaries<'a>(store: &'a Store, assigners: &'a Assigners) -> impl Iterator<Item = GroupSummary> + 'a {
    store.consumer_groups().map(move |g| GroupSummary {
        group_id: g.group_id.clone(),
        state: g.state().name().to_string(),
        generation: g.group_epoch,
        protocol_type: "consumer".to_string(),
        protocol: assigners.preferred(g.members.values()).map(|a| a.name().to_string()).unwrap_or_default(),
        members: g.members.len(),
        last_rebalance_cause: None,
        rebalance_starts_ms: Vec::new(),
    })
}
