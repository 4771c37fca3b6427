//! Consumer groups in ListGroups (type `consumer`, Kafka's state names).
//! DescribeGroups answers a consumer group as a group that is not a classic
//! one (Dead, or GROUP_ID_NOT_FOUND from v6), which is what the classic path
//! already does for an id it does not hold.

use crate::coordinator::messages::{ListGroupsRequest, ListedGroup};
use crate::coordinator::store::Store;

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
