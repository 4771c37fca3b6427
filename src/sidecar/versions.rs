//! The API versions a sidecar advertises: the upstream broker's, except
//! that kcoord's own versions stand for the APIs it serves itself, APIs
//! whose responses it rewrites are capped at what it can decode, and APIs
//! it must neither serve nor pass on are left out.

use kafka_protocol::messages::ApiKey;

use crate::protocol::api::{
    api_versions, consumer_group_describe, consumer_group_heartbeat, delete_groups, describe_groups, find_coordinator,
    heartbeat, join_group, leave_group, list_groups, offset_commit, offset_delete, offset_fetch, sync_group,
    txn_offset_commit,
};
use crate::protocol::versions::ApiSupport;

/// APIs a sidecar answers itself, with kcoord's coordinator.
pub const LOCAL: &[ApiSupport] = &[
    offset_commit::SUPPORT,
    offset_fetch::SUPPORT,
    find_coordinator::SUPPORT,
    join_group::SUPPORT,
    heartbeat::SUPPORT,
    leave_group::SUPPORT,
    sync_group::SUPPORT,
    describe_groups::SUPPORT,
    list_groups::SUPPORT,
    api_versions::SUPPORT,
    delete_groups::SUPPORT,
    offset_delete::SUPPORT,
    consumer_group_heartbeat::SUPPORT,
    consumer_group_describe::SUPPORT,
];

/// APIs a sidecar answers itself (admitting them with kcoord's
/// coordinator before it delegates them upstream), advertised only where
/// the fronted broker advertises them, at its versions capped at kcoord's:
/// TxnOffsetCommit (`coordinator::delegation`).
pub const DELEGATED: &[ApiSupport] = &[txn_offset_commit::SUPPORT];

/// Whether kcoord answers `api_key` itself in sidecar mode.
pub fn is_local(api_key: i16) -> bool {
    LOCAL.iter().chain(DELEGATED).any(|s| s.key == api_key)
}

/// APIs neither answered nor forwarded:
/// - group protocols kcoord does not serve (the upstream's coordinator
///   must not quietly take over a group kcoord owns): share and streams
///   groups;
/// - broker-to-broker and controller APIs, some of which carry addresses.
pub fn is_withheld(api_key: i16) -> bool {
    if ApiKey::try_from(api_key).is_err() {
        // Unknown to our codec: we could not rewrite it if it carried addresses.
        return true;
    }
    WITHHELD.contains(&api_key)
}

/// The keys of [`is_withheld`], by number (the codec does not name them all).
const WITHHELD: &[i16] = &[
    4,  // LeaderAndIsr
    5,  // StopReplica
    6,  // UpdateMetadata
    7,  // ControlledShutdown
    27, // WriteTxnMarkers
    52, // Vote
    53, // BeginQuorumEpoch
    54, // EndQuorumEpoch
    55, // DescribeQuorum
    56, // AlterPartition
    58, // Envelope
    59, // FetchSnapshot
    62, // BrokerRegistration
    63, // BrokerHeartbeat
    64, // UnregisterBroker
    67, // AllocateProducerIds
    70, // ControllerRegistration
    73, // AssignReplicasToDirs
    76, // ShareGroupHeartbeat
    77, // ShareGroupDescribe
    78, // ShareFetch
    79, // ShareAcknowledge
    80, // AddRaftVoter
    81, // RemoveRaftVoter
    82, // UpdateRaftVoter
    83, // InitializeShareGroupState
    84, // ReadShareGroupState
    85, // WriteShareGroupState
    86, // DeleteShareGroupState
    87, // ReadShareGroupStateSummary
    88, // StreamsGroupHeartbeat
    89, // StreamsGroupDescribe
    90, // DescribeShareGroupOffsets
    91, // AlterShareGroupOffsets
    92, // DeleteShareGroupOffsets
];

/// Highest version advertised for APIs whose responses carry broker
/// addresses: what kcoord can decode and rewrite. Fetch stops at v15: from
/// v16 a response may end with leader hints (KIP-951 NodeEndpoints), so it
/// could only go out once read whole, where below v16 it streams through
/// as it arrives (store-and-forward halved fetch throughput of large
/// responses). Clients then find a moved leader through Metadata, as before
/// KIP-951. Produce answers are small: v10+ hints are rewritten.
fn rewrite_cap(api_key: i16) -> Option<i16> {
    let key = ApiKey::try_from(api_key).ok()?;
    match key {
        ApiKey::Fetch => Some(key.valid_versions().max.min(15)),
        ApiKey::Metadata | ApiKey::DescribeCluster | ApiKey::Produce => Some(key.valid_versions().max),
        _ => None,
    }
}

/// The table for clients of a listener fronting a broker that advertises
/// `upstream` (key, min, max); sorted by key.
pub fn merge(upstream: &[(i16, i16, i16)]) -> Vec<(i16, i16, i16)> {
    let mut out: Vec<(i16, i16, i16)> = Vec::with_capacity(upstream.len() + LOCAL.len());
    for &(key, min, max) in upstream {
        if is_local(key) || is_withheld(key) {
            continue;
        }
        let mut max = rewrite_cap(key).map_or(max, |cap| max.min(cap));
        if key == ApiKey::Metadata as i16 && (max == 10 || max == 11) {
            // librdkafka asserts when Metadata tops out at 10 or 11.
            max = 9;
        }
        if max >= min {
            out.push((key, min, max));
        }
    }
    for s in LOCAL {
        let mut max = s.max;
        if s.key == find_coordinator::SUPPORT.key {
            // Transactional lookups are forwarded at the client's version.
            if let Some(&(_, _, up)) = upstream.iter().find(|(k, _, _)| *k == s.key) {
                max = max.min(up).max(s.min);
            }
        }
        out.push((s.key, s.min, max));
    }
    for s in DELEGATED {
        if let Some(&(_, up_min, up_max)) = upstream.iter().find(|(k, _, _)| *k == s.key) {
            let (min, max) = (up_min.max(s.min), up_max.min(s.max));
            if max >= min {
                out.push((s.key, min, max));
            }
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(table: &[(i16, i16, i16)], key: ApiKey) -> Option<(i16, i16)> {
        table.iter().find(|(k, _, _)| *k == key as i16).map(|&(_, a, b)| (a, b))
    }

    #[test]
    fn group_apis_are_kcoords_even_where_the_upstream_lacks_them() {
        let upstream = [(ApiKey::Produce as i16, 0, 10), (ApiKey::JoinGroup as i16, 0, 2)];
        let t = merge(&upstream);
        assert_eq!(find(&t, ApiKey::JoinGroup), Some((join_group::SUPPORT.min, join_group::SUPPORT.max)));
        assert_eq!(find(&t, ApiKey::DeleteGroups), Some((delete_groups::SUPPORT.min, delete_groups::SUPPORT.max)));
        assert_eq!(find(&t, ApiKey::Produce), Some((0, 10)));
    }

    #[test]
    fn share_streams_and_controller_apis_are_not_advertised() {
        // ShareFetch, StreamsGroupHeartbeat, DescribeQuorum, AddOffsetsToTxn.
        let upstream: Vec<(i16, i16, i16)> = [78, 88, 55, 25].iter().map(|k| (*k, 0, 1)).collect();
        let t = merge(&upstream);
        assert_eq!(t.iter().filter(|(k, _, _)| !is_local(*k)).count(), 1);
        assert!(find(&t, ApiKey::AddOffsetsToTxn).is_some());
    }

    #[test]
    fn transactional_offsets_are_advertised_where_the_upstream_takes_them() {
        assert_eq!(find(&merge(&[]), ApiKey::TxnOffsetCommit), None, "no upstream transactions, no TxnOffsetCommit");
        let t = merge(&[(ApiKey::TxnOffsetCommit as i16, 0, 99)]);
        assert_eq!(find(&t, ApiKey::TxnOffsetCommit), Some((0, txn_offset_commit::SUPPORT.max)));
        let t = merge(&[(ApiKey::TxnOffsetCommit as i16, 0, 3)]);
        assert_eq!(find(&t, ApiKey::TxnOffsetCommit), Some((0, 3)));
        assert!(is_local(ApiKey::TxnOffsetCommit as i16), "admitted by kcoord before it goes upstream");
    }

    #[test]
    fn kip_848_apis_are_kcoords_whatever_the_upstream_advertises() {
        let t = merge(&[(ApiKey::ConsumerGroupHeartbeat as i16, 0, 0)]);
        let hb = consumer_group_heartbeat::SUPPORT;
        assert_eq!(find(&t, ApiKey::ConsumerGroupHeartbeat), Some((hb.min, hb.max)));
        let d = consumer_group_describe::SUPPORT;
        assert_eq!(find(&merge(&[]), ApiKey::ConsumerGroupDescribe), Some((d.min, d.max)));
    }

    #[test]
    fn rewritten_apis_are_capped_and_metadata_never_tops_out_at_10_or_11() {
        let t = merge(&[(ApiKey::Metadata as i16, 0, 11), (ApiKey::Fetch as i16, 4, 99)]);
        assert_eq!(find(&t, ApiKey::Metadata), Some((0, 9)));
        assert_eq!(find(&t, ApiKey::Fetch), Some((4, 15)), "fetches stream, so no leader hints to rewrite");
    }

    #[test]
    fn find_coordinator_tops_out_where_the_upstream_does() {
        let t = merge(&[(ApiKey::FindCoordinator as i16, 0, 3)]);
        assert_eq!(find(&t, ApiKey::FindCoordinator), Some((find_coordinator::SUPPORT.min, 3)));
    }
}
