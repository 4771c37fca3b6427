//! Where a response carries `throttle_time_ms`, so that a quota's throttle
//! can be written into an answer already encoded (quotas are charged for
//! the work of serving a request, which is known only once it is served).

use super::api;

/// Where the field sits in a response body (after the response header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// First field (most APIs).
    First,
    /// After the top-level error code (OffsetDelete).
    AfterErrorCode,
    /// After the error code and the api_keys array (ApiVersions v1+).
    AfterApiKeys,
    /// Last field, before the tagged fields of flexible versions (Produce).
    Last,
}

/// The place of `throttle_time_ms` in `api_key`'s response at `version`,
/// if that version has the field.
fn place(api_key: i16, version: i16) -> Option<Place> {
    use api::*;
    let (since, place) = match api_key {
        k if k == produce::SUPPORT.key => (1, Place::Last),
        k if k == api_versions::SUPPORT.key => (1, Place::AfterApiKeys),
        k if k == offset_delete::SUPPORT.key => (0, Place::AfterErrorCode),
        k if k == sasl_handshake::SUPPORT.key || k == sasl_authenticate::SUPPORT.key => return None,
        k if k == list_offsets::SUPPORT.key => (2, Place::First),
        k if k == metadata::SUPPORT.key || k == offset_commit::SUPPORT.key || k == offset_fetch::SUPPORT.key => {
            (3, Place::First)
        }
        k if k == join_group::SUPPORT.key || k == create_topics::SUPPORT.key => (2, Place::First),
        k if [
            fetch::SUPPORT.key,
            find_coordinator::SUPPORT.key,
            heartbeat::SUPPORT.key,
            leave_group::SUPPORT.key,
            sync_group::SUPPORT.key,
            describe_groups::SUPPORT.key,
            list_groups::SUPPORT.key,
            delete_topics::SUPPORT.key,
        ]
        .contains(&k) =>
        {
            (1, Place::First)
        }
        // Every other API kcoord serves has the field first from v0.
        _ => (0, Place::First),
    };
    (version >= since).then_some(place)
}

/// Writes `ms` into the `throttle_time_ms` of an encoded response `body`;
/// false when the response has no such field (or is not laid out as
/// expected, which is then left alone).
pub fn set(api_key: i16, version: i16, flexible: bool, body: &mut [u8], ms: i32) -> bool {
    let Some(place) = place(api_key, version) else { return false };
    let at = match place {
        Place::First => Some(0),
        Place::AfterErrorCode => Some(2),
        Place::AfterApiKeys => after_api_keys(body, flexible),
        // kcoord's Produce answers carry no tagged fields.
        Place::Last if flexible => body.len().checked_sub(5).filter(|&i| body.get(i + 4) == Some(&0)),
        Place::Last => body.len().checked_sub(4),
    };
    let Some(slot) = at.and_then(|i| body.get_mut(i..i.checked_add(4)?)) else { return false };
    slot.copy_from_slice(&ms.to_be_bytes());
    true
}

/// ApiVersions: error_code, then the api_keys array (key, min, max, and a
/// tagged-field count in flexible versions), then throttle_time_ms.
fn after_api_keys(body: &[u8], flexible: bool) -> Option<usize> {
    let rest = body.get(2..)?;
    let (count, head) = if flexible {
        let (n, used) = unsigned_varint(rest)?;
        (usize::try_from(n).ok()?.checked_sub(1)?, used)
    } else {
        (usize::try_from(i32::from_be_bytes(rest.get(..4)?.try_into().ok()?)).ok()?, 4)
    };
    let entry = if flexible { 7 } else { 6 };
    2usize.checked_add(head)?.checked_add(count.checked_mul(entry)?)
}

fn unsigned_varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(5) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::Encodable;

    const MS: i32 = 0x0102_0304;

    /// Every served version `kafka-protocol` can write (it stops at
    /// OffsetCommit and OffsetFetch v9; v10 keeps the field first).
    fn check<T: Encodable + Default + kafka_protocol::protocol::Message>(key: i16, make: impl Fn(i32) -> T) {
        let s = crate::server::apis::registered(key).unwrap().support;
        for v in s.min..=s.max.min(T::VERSIONS.max) {
            let mut zero = BytesMut::new();
            make(0).encode(&mut zero, v).unwrap();
            let mut want = BytesMut::new();
            make(MS).encode(&mut want, v).unwrap();
            let wrote = set(key, v, s.is_flexible(v), &mut zero, MS);
            assert_eq!(wrote, want != make_bytes(&make, 0, v), "{} v{v}: has the field", s.name);
            assert_eq!(zero, want, "{} v{v}", s.name);
        }
    }

    fn make_bytes<T: Encodable>(make: &impl Fn(i32) -> T, ms: i32, v: i16) -> BytesMut {
        let mut b = BytesMut::new();
        make(ms).encode(&mut b, v).unwrap();
        b
    }

    #[test]
    fn the_throttle_lands_where_kafkas_schema_puts_it() {
        use api::*;
        check(produce::SUPPORT.key, |ms| {
            ProduceResponse::default()
                .with_throttle_time_ms(ms)
                .with_responses(vec![produce_response::TopicProduceResponse::default()
                    .with_partition_responses(vec![Default::default()])])
        });
        check(fetch::SUPPORT.key, |ms| FetchResponse::default().with_throttle_time_ms(ms));
        check(list_offsets::SUPPORT.key, |ms| ListOffsetsResponse::default().with_throttle_time_ms(ms));
        check(metadata::SUPPORT.key, |ms| MetadataResponse::default().with_throttle_time_ms(ms));
        check(offset_commit::SUPPORT.key, |ms| OffsetCommitResponse::default().with_throttle_time_ms(ms));
        check(offset_fetch::SUPPORT.key, |ms| OffsetFetchResponse::default().with_throttle_time_ms(ms));
        check(find_coordinator::SUPPORT.key, |ms| FindCoordinatorResponse::default().with_throttle_time_ms(ms));
        check(join_group::SUPPORT.key, |ms| JoinGroupResponse::default().with_throttle_time_ms(ms));
        check(heartbeat::SUPPORT.key, |ms| HeartbeatResponse::default().with_throttle_time_ms(ms));
        check(leave_group::SUPPORT.key, |ms| LeaveGroupResponse::default().with_throttle_time_ms(ms));
        check(sync_group::SUPPORT.key, |ms| SyncGroupResponse::default().with_throttle_time_ms(ms));
        check(describe_groups::SUPPORT.key, |ms| DescribeGroupsResponse::default().with_throttle_time_ms(ms));
        check(list_groups::SUPPORT.key, |ms| ListGroupsResponse::default().with_throttle_time_ms(ms));
        check(api_versions::SUPPORT.key, |ms| {
            ApiVersionsResponse::default()
                .with_throttle_time_ms(ms)
                .with_api_keys(vec![Default::default(), Default::default()])
                .with_finalized_features_epoch(-1)
        });
        check(create_topics::SUPPORT.key, |ms| CreateTopicsResponse::default().with_throttle_time_ms(ms));
        check(delete_topics::SUPPORT.key, |ms| DeleteTopicsResponse::default().with_throttle_time_ms(ms));
        check(init_producer_id::SUPPORT.key, |ms| InitProducerIdResponse::default().with_throttle_time_ms(ms));
        check(describe_acls::SUPPORT.key, |ms| DescribeAclsResponse::default().with_throttle_time_ms(ms));
        check(create_acls::SUPPORT.key, |ms| CreateAclsResponse::default().with_throttle_time_ms(ms));
        check(delete_acls::SUPPORT.key, |ms| DeleteAclsResponse::default().with_throttle_time_ms(ms));
        check(create_partitions::SUPPORT.key, |ms| CreatePartitionsResponse::default().with_throttle_time_ms(ms));
        check(delete_groups::SUPPORT.key, |ms| DeleteGroupsResponse::default().with_throttle_time_ms(ms));
        check(offset_delete::SUPPORT.key, |ms| OffsetDeleteResponse::default().with_throttle_time_ms(ms));
        check(consumer_group_heartbeat::SUPPORT.key, |ms| {
            ConsumerGroupHeartbeatResponse::default().with_throttle_time_ms(ms)
        });
        check(consumer_group_describe::SUPPORT.key, |ms| {
            ConsumerGroupDescribeResponse::default().with_throttle_time_ms(ms)
        });
        check(txn_offset_commit::SUPPORT.key, |ms| TxnOffsetCommitResponse::default().with_throttle_time_ms(ms));
        check(describe_user_scram_credentials::SUPPORT.key, |ms| {
            DescribeUserScramCredentialsResponse::default().with_throttle_time_ms(ms)
        });
        check(alter_user_scram_credentials::SUPPORT.key, |ms| {
            AlterUserScramCredentialsResponse::default().with_throttle_time_ms(ms)
        });
    }

    #[test]
    fn answers_without_the_field_are_left_alone() {
        let mut body = vec![0u8; 8];
        assert!(!set(api::sasl_handshake::SUPPORT.key, 1, false, &mut body, MS));
        assert!(!set(api::heartbeat::SUPPORT.key, 0, false, &mut body, MS));
        assert_eq!(body, vec![0u8; 8]);
        assert!(!set(api::produce::SUPPORT.key, 3, false, &mut [0u8; 2], MS), "too short");
    }
}
