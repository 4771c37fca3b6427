//! Hostile input never kills or hangs the daemon.
//!
//! For every API and version we accept, a minimal valid request is mutated at
//! every byte position so that whatever field sits there (in particular every
//! array length) declares `i32::MAX` elements, or a 5-byte varint of ~4 G for
//! compact encodings. Without the allocation guard, the first such frame makes
//! kafka-protocol reserve hundreds of GB and aborts this test process. Then
//! empty, short, oversized, negative-length and random frames. After each
//! batch a well-formed request on a fresh connection must still be answered.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "Test support code: a failed unwrap, expect or index is the test's verdict."
)]

#[path = "integration/common/mod.rs"]
mod common;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kcoord::server::apis;

#[global_allocator]
static ALLOC: kcoord::alloc_guard::GuardedAllocator = kcoord::alloc_guard::GuardedAllocator;

/// A small valid body for `key` at `version`, with one element in each
/// top-level array so nested arrays are present too.
fn sample_body(key: i16, version: i16) -> Option<Bytes> {
    fn enc<T: Encodable>(m: T, v: i16) -> Option<Bytes> {
        let mut b = BytesMut::new();
        m.encode(&mut b, v).ok()?;
        Some(b.freeze())
    }
    let s = |x: &str| StrBytes::from_string(x.to_string());
    match key {
        0 => enc(
            ProduceRequest::default().with_acks(-1).with_timeout_ms(1000).with_topic_data(vec![
                produce_request::TopicProduceData::default().with_name(TopicName(s("t"))).with_partition_data(vec![
                    produce_request::PartitionProduceData::default().with_index(0).with_records(Some(one_batch())),
                ]),
            ]),
            version,
        ),
        1 => enc(
            FetchRequest::default().with_max_wait_ms(0).with_max_bytes(1 << 20).with_topics(vec![
                fetch_request::FetchTopic::default()
                    .with_topic(TopicName(s("t")))
                    .with_topic_id(if version >= 13 { uuid::Uuid::from_u128(7) } else { uuid::Uuid::nil() })
                    .with_partitions(vec![fetch_request::FetchPartition::default().with_partition_max_bytes(1 << 20)]),
            ]),
            version,
        ),
        2 => enc(
            ListOffsetsRequest::default().with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![list_offsets_request::ListOffsetsPartition::default().with_timestamp(-1)])]),
            version,
        ),
        19 => enc(
            // validate_only and -1 counts, so that mutated requests never
            // create large topics.
            CreateTopicsRequest::default().with_validate_only(true).with_topics(vec![
                create_topics_request::CreatableTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_configs(vec![create_topics_request::CreatableTopicConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(Some(s("1")))]),
            ]),
            version,
        ),
        37 => enc(
            // validate_only, so that mutated requests never grow topics.
            CreatePartitionsRequest::default().with_validate_only(true).with_timeout_ms(1000).with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_count(2)
                    .with_assignments(Some(vec![create_partitions_request::CreatePartitionsAssignment::default()
                        .with_broker_ids(vec![BrokerId(0)])])),
            ]),
            version,
        ),
        20 => enc(
            if version >= 6 {
                DeleteTopicsRequest::default().with_topics(vec![
                    delete_topics_request::DeleteTopicState::default().with_name(Some(TopicName(s("t"))))
                ])
            } else {
                DeleteTopicsRequest::default().with_topic_names(vec![TopicName(s("t"))])
            },
            version,
        ),
        22 => enc(InitProducerIdRequest::default().with_transactional_id(None), version),
        29 => enc(
            DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
            version,
        ),
        30 => enc(
            CreateAclsRequest::default().with_creations(vec![create_acls_request::AclCreation::default()
                .with_resource_type(3)
                .with_resource_name(s("g"))
                .with_resource_pattern_type(3)
                .with_principal(s("User:alice"))
                .with_host(s("*"))
                .with_operation(3)
                .with_permission_type(3)]),
            version,
        ),
        31 => enc(
            DeleteAclsRequest::default().with_filters(vec![delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1)]),
            version,
        ),
        50 => enc(
            DescribeUserScramCredentialsRequest::default()
                .with_users(Some(vec![describe_user_scram_credentials_request::UserName::default().with_name(s("u"))])),
            version,
        ),
        51 => enc(
            AlterUserScramCredentialsRequest::default()
                .with_deletions(vec![alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                    .with_name(s("u"))
                    .with_mechanism(1)])
                .with_upsertions(vec![alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                    .with_name(s("v"))
                    .with_mechanism(2)
                    .with_iterations(4096)
                    .with_salt(Bytes::from_static(b"salt"))
                    .with_salted_password(Bytes::from_static(b"salted"))]),
            version,
        ),
        3 => enc(
            MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s("t"))))
            ])),
            version,
        ),
        10 => enc(
            if version >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g")])
            } else {
                FindCoordinatorRequest::default().with_key(s("g"))
            },
            version,
        ),
        18 => enc(
            ApiVersionsRequest::default().with_client_software_name(s("a")).with_client_software_version(s("1")),
            version,
        ),
        // kafka-protocol stops at v9; v10 names topics by id.
        8 if version >= 10 => Some(topic_ids::commit_body("g", &[(uuid::Uuid::from_u128(7), vec![(0, 0)])]).freeze()),
        9 if version >= 10 => Some(topic_ids::fetch_body("g", Some(&[(uuid::Uuid::from_u128(7), vec![0])])).freeze()),
        8 => enc(
            OffsetCommitRequest::default().with_group_id(GroupId(s("g"))).with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![offset_commit_request::OffsetCommitRequestPartition::default()]),
            ]),
            version,
        ),
        9 => enc(
            if version >= 8 {
                OffsetFetchRequest::default().with_groups(vec![offset_fetch_request::OffsetFetchRequestGroup::default(
                )
                .with_group_id(GroupId(s("g")))
                .with_topics(Some(vec![offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_indexes(vec![0])]))])
            } else {
                OffsetFetchRequest::default().with_group_id(GroupId(s("g"))).with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s("t")))
                        .with_partition_indexes(vec![0]),
                ]))
            },
            version,
        ),
        11 => enc(
            JoinGroupRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_session_timeout_ms(10000)
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(bytes::Bytes::from_static(b"m"))]),
            version,
        ),
        12 => enc(HeartbeatRequest::default().with_group_id(GroupId(s("g"))), version),
        13 => enc(
            if version >= 3 {
                LeaveGroupRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_members(vec![leave_group_request::MemberIdentity::default().with_member_id(s("m"))])
            } else {
                LeaveGroupRequest::default().with_group_id(GroupId(s("g"))).with_member_id(s("m"))
            },
            version,
        ),
        14 => enc(
            SyncGroupRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_protocol_type(if version >= 5 { Some(s("consumer")) } else { None })
                .with_protocol_name(if version >= 5 { Some(s("range")) } else { None })
                .with_assignments(vec![
                    sync_group_request::SyncGroupRequestAssignment::default().with_member_id(s("m"))
                ]),
            version,
        ),
        15 => enc(DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]), version),
        16 => enc(
            ListGroupsRequest::default()
                .with_states_filter(if version >= 4 { vec![s("stable")] } else { vec![] })
                .with_types_filter(if version >= 5 { vec![s("classic")] } else { vec![] }),
            version,
        ),
        17 => enc(SaslHandshakeRequest::default().with_mechanism(s("PLAIN")), version),
        36 => enc(SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0u\0p")), version),
        38 => enc(
            CreateDelegationTokenRequest::default().with_max_lifetime_ms(-1).with_renewers(vec![
                create_delegation_token_request::CreatableRenewers::default()
                    .with_principal_type(s("User"))
                    .with_principal_name(s("bob")),
            ]),
            version,
        ),
        39 => enc(RenewDelegationTokenRequest::default().with_hmac(Bytes::from_static(b"hmac")), version),
        40 => enc(ExpireDelegationTokenRequest::default().with_hmac(Bytes::from_static(b"hmac")), version),
        41 => enc(
            DescribeDelegationTokenRequest::default().with_owners(Some(vec![
                describe_delegation_token_request::DescribeDelegationTokenOwner::default()
                    .with_principal_type(s("User"))
                    .with_principal_name(s("alice")),
            ])),
            version,
        ),
        42 => enc(DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]), version),
        47 => enc(
            OffsetDeleteRequest::default().with_group_id(GroupId(s("g"))).with_topics(vec![
                offset_delete_request::OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![offset_delete_request::OffsetDeleteRequestPartition::default()]),
            ]),
            version,
        ),
        68 => enc(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_member_id(s("m1234567890123456789012"))
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
                .with_topic_partitions(Some(vec![])),
            version,
        ),
        69 => enc(ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]), version),
        _ => None,
    }
}

/// A one-record RecordBatch v2 (its CRC is whatever the mutation leaves).
fn one_batch() -> Bytes {
    let mut b = vec![0u8; 61];
    b[8..12].copy_from_slice(&49i32.to_be_bytes());
    b[16] = 2;
    b[57..61].copy_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&[14, 0, 0, 0, 1, 2, b'v', 0]);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

/// Every API key the hostile suite knows how to build a request for.
const COVERED: &[i16] = &[
    0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 29, 30, 31, 36, 37, 38, 39, 40, 41, 42, 47, 50,
    51, 68, 69,
];

fn frame(key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let support = apis::lookup(key).unwrap();
    let mut f = BytesMut::new();
    f.put_i16(key);
    f.put_i16(version);
    f.put_i32(7);
    f.put_i16(1);
    f.put_u8(b'h');
    if support.is_flexible(version) {
        f.put_u8(0);
    }
    f.extend_from_slice(body);
    let mut out = (f.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&f);
    out
}

/// Body mutations that plant a huge length at `pos`.
fn mutations(body: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for pos in 0..body.len() {
        // Fixed-width i32 length.
        let mut m = body.to_vec();
        for (i, b) in [0x7f, 0xff, 0xff, 0xff].iter().enumerate() {
            if pos + i < m.len() {
                m[pos + i] = *b;
            } else {
                m.push(*b);
            }
        }
        out.push(m);
        // Compact (varint) length replacing one byte.
        let mut m = body[..pos].to_vec();
        m.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        m.extend_from_slice(&body[pos + 1..]);
        out.push(m);
        // i16 string length.
        let mut m = body.to_vec();
        m[pos] = 0x7f;
        if pos + 1 < m.len() {
            m[pos + 1] = 0xff;
        }
        out.push(m);
    }
    out
}

async fn assert_still_serving(s: &TestServer) {
    let mut c = s.client().await;
    let r = c.send(&ApiVersionsRequest::default(), 0).await;
    assert_eq!(r.error_code, 0, "daemon must keep serving");
}

/// Sends frames, reconnecting whenever the server closes a connection.
async fn blast(s: &TestServer, frames: &[Vec<u8>]) {
    let mut c = s.client().await;
    for f in frames {
        if c.send_raw(f).await.is_err() {
            c = s.client().await;
            let _ = c.send_raw(f).await;
        }
        // An answer or a close are both fine. A request that decodes into a
        // valid JoinGroup may legitimately be parked: move on after a moment
        // (liveness is checked from a fresh connection afterwards).
        match tokio::time::timeout(std::time::Duration::from_millis(300), c.read_frame()).await {
            Ok(Ok(_)) => {}
            _ => c = s.client().await,
        }
    }
}

#[test]
fn the_suite_covers_every_advertised_api() {
    let advertised: Vec<i16> = apis::supported().iter().map(|s| s.key).collect();
    assert_eq!(COVERED, advertised.as_slice(), "add the new API to sample_body");
}

/// Every advertised version of every API has a handler: a valid request is
/// answered (JoinGroup and SyncGroup may instead wait for their rebalance),
/// never refused by closing the connection.
#[tokio::test]
async fn every_advertised_version_is_served() {
    let s = TestServer::start().await;
    for support in apis::supported() {
        for v in support.min..=support.max {
            let body = sample_body(support.key, v).expect("sample body");
            let mut c = s.client().await;
            c.send_raw(&frame(support.key, v, &body)).await.unwrap();
            let parks = support.key == 11 || support.key == 14;
            match tokio::time::timeout(std::time::Duration::from_secs(if parks { 1 } else { 30 }), c.read_frame()).await
            {
                Ok(Ok(_)) => {}
                Err(_) if parks => {}
                other => panic!("{} v{v} was not answered: {other:?}", support.name),
            }
        }
    }
}

#[tokio::test]
async fn huge_declared_lengths_in_every_api_do_not_kill_the_daemon() {
    let s = TestServer::start().await;
    for support in apis::supported() {
        let mut frames = Vec::new();
        for v in support.min..=support.max {
            let body = sample_body(support.key, v).expect("sample body");
            for m in mutations(&body) {
                frames.push(frame(support.key, v, &m));
            }
        }
        blast(&s, &frames).await;
        assert_still_serving(&s).await;
    }
}

#[tokio::test]
async fn the_known_29_byte_join_group_frame_does_not_kill_the_daemon() {
    let s = TestServer::start().await;
    // JoinGroup v5: header, then group "", session 0, rebalance 0, member "",
    // instance null, type "", protocols = i32::MAX.
    let mut body = vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0];
    body.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
    let mut f = vec![0, 11, 0, 5, 0, 0, 0, 1, 0xff, 0xff];
    f.extend_from_slice(&body);
    let mut framed = (f.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&f);
    let mut c = s.client().await;
    c.send_raw(&framed).await.unwrap();
    let _ = c.read_frame().await;
    assert_still_serving(&s).await;
}

#[tokio::test]
async fn malformed_frames_close_only_their_connection() {
    let s = TestServer::start_with(&["server.max_request_bytes=1024"]).await;
    let cases: Vec<Vec<u8>> = vec![
        vec![],                                                       // nothing, then EOF
        vec![0, 0, 0, 0],                                             // empty frame
        vec![0, 0, 0, 3, 0, 18, 0],                                   // shorter than a header
        vec![0, 0, 0, 7, 0, 18, 0, 0, 0, 0, 0],                       // no client id
        vec![0xff, 0xff, 0xff, 0xf0],                                 // negative length
        vec![0x7f, 0xff, 0xff, 0xff, 1, 2, 3],                        // far above max_request_bytes
        vec![0, 0, 4, 1],                                             // just above max_request_bytes
        vec![0, 0, 0, 12, 0, 18, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0, 0], // client id longer than the frame
    ];
    for case in &cases {
        let mut c = s.client().await;
        c.send_raw(case).await.unwrap();
        if case.is_empty() {
            c.stream.shutdown().await.ok();
        }
        assert!(c.is_closed().await, "frame {case:?} should close the connection");
        assert_still_serving(&s).await;
    }
}

/// A frame that announces more bytes than it sends must not stall other clients.
#[tokio::test]
async fn a_stalled_partial_frame_does_not_block_others() {
    let s = TestServer::start().await;
    let mut slow = s.client().await;
    slow.send_raw(&[0, 0, 1, 0, 0, 18]).await.unwrap();
    assert_still_serving(&s).await;
}

#[tokio::test]
async fn random_frames_do_not_kill_the_daemon() {
    let s = TestServer::start().await;
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let table = apis::supported();
    let mut frames = Vec::new();
    for _ in 0..3000 {
        let a = &table[(next() % table.len() as u64) as usize];
        let v = a.min + (next() % (a.max - a.min + 1) as u64) as i16;
        let len = (next() % 64) as usize;
        let body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        frames.push(frame(a.key, v, &body));
    }
    blast(&s, &frames).await;
    assert_still_serving(&s).await;
}

use tokio::io::AsyncWriteExt;

/// The 30-byte CreateTopics v3 frame the `session` fuzz target found: its
/// topics array declares 813,923 entries. Kafka refuses such a request
/// before it allocates ("Tried to allocate a collection of size N, but there
/// are only M bytes remaining"); so does kcoord, without committing the
/// 91 MB its decoder asks for.
#[test]
fn an_array_declaring_more_entries_than_its_request_holds_is_refused() {
    // The array count 0x000c6b63, then the 12 bytes the fuzzer left.
    let mut body = Bytes::from_static(b"\x00\x0c\x6b\x63oord-fuzz\x02\x31\x00");
    let err = kcoord::protocol::codec::decode::<CreateTopicsRequest>("CreateTopics", &mut body, 3)
        .expect_err("a request this short cannot hold 813,923 topics");
    assert!(err.reason.contains("more entries than the 16-byte body holds"), "{err}");
}

/// The budget refuses only what no body could hold: a request with tens of
/// thousands of entries, far above the budget's 1 MiB floor, decodes.
#[test]
fn a_large_request_with_every_entry_present_decodes() {
    let topics: Vec<_> = (0..20_000)
        .map(|i| {
            create_topics_request::CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(format!("t{i}"))))
                .with_num_partitions(1)
                .with_replication_factor(1)
        })
        .collect();
    let req = CreateTopicsRequest::default().with_topics(topics);
    let mut body = BytesMut::new();
    req.encode(&mut body, 3).unwrap();
    let decoded =
        kcoord::protocol::codec::decode::<CreateTopicsRequest>("CreateTopics", &mut body.freeze(), 3).unwrap();
    assert_eq!(decoded.topics.len(), 20_000);
}
