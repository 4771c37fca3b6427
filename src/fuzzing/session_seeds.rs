//! Seeds of the `session` fuzz target: short, valid conversations a real
//! client could have, written to `fuzz/seeds/session/` by
//! `tests/fuzz_regressions.rs` (which also checks the committed files are
//! the ones this code produces). Generated rather than captured so that
//! they stay readable and are easily extended.

use bytes::{BufMut, Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::messages::create_delegation_token_request::CreatableRenewers;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

/// A conversation being written: the listener byte, then request frames.
struct Conversation {
    bytes: Vec<u8>,
    correlation_id: i32,
}

impl Conversation {
    fn plaintext() -> Self {
        Conversation { bytes: vec![0], correlation_id: 0 }
    }

    fn sasl() -> Self {
        Conversation { bytes: vec![1], correlation_id: 0 }
    }

    /// SASL on a sidecar that relays logins upstream (`sidecar_session`;
    /// the `session` target takes it as any SASL input).
    fn relayed() -> Self {
        Conversation { bytes: vec![3], correlation_id: 0 }
    }

    fn send<R: Request + Encodable>(mut self, req: R, version: i16) -> Option<Self> {
        self.correlation_id += 1;
        let key = ApiKey::try_from(R::KEY).ok()?;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(s("fuzz")));
        let mut body = BytesMut::new();
        header.encode(&mut body, key.request_header_version(version)).ok()?;
        req.encode(&mut body, version).ok()?;
        Some(self.raw(&body))
    }

    /// A request of `api_key` at a flexible `version` whose body is written
    /// by hand (OffsetCommit and OffsetFetch v10, past `kafka-protocol`).
    fn send_flexible_body(mut self, api_key: i16, version: i16, body: &[u8]) -> Option<Self> {
        self.correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(api_key)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(s("fuzz")));
        let mut frame = BytesMut::new();
        header.encode(&mut frame, 2).ok()?;
        frame.extend_from_slice(body);
        Some(self.raw(&frame))
    }

    /// A frame of `body` as it is (a raw SASL token after a v0 handshake).
    fn raw(mut self, body: &[u8]) -> Self {
        self.bytes.put_i32(body.len() as i32);
        self.bytes.extend_from_slice(body);
        self
    }
}

fn s(v: &'static str) -> StrBytes {
    StrBytes::from_static_str(v)
}

fn api_versions() -> ApiVersionsRequest {
    ApiVersionsRequest::default().with_client_software_name(s("kcoord-fuzz")).with_client_software_version(s("1"))
}

fn join(member_id: &'static str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_session_timeout_ms(100)
        .with_rebalance_timeout_ms(100)
        .with_member_id(s(member_id))
        .with_group_instance_id(Some(s("i1")))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(&[0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 0]))])
}

fn commit(group: &'static str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default().with_group_id(GroupId(s(group))).with_generation_id_or_member_epoch(-1).with_topics(
        vec![OffsetCommitRequestTopic::default().with_name(TopicName(s("t"))).with_partitions(vec![
            OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_metadata(Some(s("m"))),
        ])],
    )
}

fn offset_fetch(group: &'static str) -> OffsetFetchRequest {
    OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default().with_group_id(GroupId(s(group)))])
}

/// OffsetCommit v10 of group `s`: partition 0 of two topics by id, one
/// unknown and the nil id (the harness's topic ids are made at start).
#[rustfmt::skip]
const COMMIT_V10: &[u8] = &[
    2, b's', 0xff, 0xff, 0xff, 0xff, 1, 0, // group "s", generation -1, member "", no instance id
    3, // two topics
    0x0f, 0xed, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // an unknown id
    2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 2, b'm', 0, 0, // partition 0 at 5, "m"
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // the nil id
    2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, // partition 0 at 5, metadata ""
    0, // request tags
];

/// OffsetFetch v10: group `s`, every topic (null), then by an unknown id.
#[rustfmt::skip]
const FETCH_V10: &[u8] = &[
    3, // two groups
    2, b's', 0, 0xff, 0xff, 0xff, 0xff, 0, 0, // "s", null member, epoch -1, every topic
    2, b's', 0, 0xff, 0xff, 0xff, 0xff, 2, // "s", one topic
    0x0f, 0xed, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, // partition 0
    1, 0, // require stable, tags
];

fn produce(acks: i16) -> Option<ProduceRequest> {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from_static(b"v")),
        headers: IndexMap::new(),
    };
    let mut batch = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut batch, [&record], &options).ok()?;
    Some(ProduceRequest::default().with_acks(acks).with_timeout_ms(1000).with_topic_data(vec![
        TopicProduceData::default().with_name(TopicName(s("t"))).with_partition_data(vec![
            PartitionProduceData::default().with_index(0).with_records(Some(batch.freeze())),
        ]),
    ]))
}

fn fetch() -> FetchRequest {
    FetchRequest::default().with_max_wait_ms(0).with_max_bytes(1 << 16).with_topics(vec![FetchTopic::default()
        .with_topic(TopicName(s("t")))
        .with_partitions(vec![FetchPartition::default().with_partition(0).with_partition_max_bytes(1 << 16)])])
}

/// PLAIN's token for user `fuzz`, password `fuzz`.
const PLAIN_TOKEN: &[u8] = b"\0fuzz\0fuzz";

/// The seeds, by file name.
pub fn session_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let classic = || {
        Conversation::plaintext()
            .send(api_versions(), 3)?
            .send(FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g")]), 4)?
            .send(join(""), 5)?
            .send(
                SyncGroupRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_generation_id(1)
                    .with_group_instance_id(Some(s("i1")))
                    .with_protocol_type(Some(s("consumer")))
                    .with_protocol_name(Some(s("range"))),
                5,
            )?
            .send(
                HeartbeatRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_generation_id(1)
                    .with_group_instance_id(Some(s("i1"))),
                4,
            )?
            .send(DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]), 5)?
            .send(
                LeaveGroupRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_members(vec![MemberIdentity::default().with_group_instance_id(Some(s("i1")))]),
                4,
            )
    };
    let offsets = || {
        Conversation::plaintext()
            .send(commit("s", 5), 8)?
            .send(offset_fetch("s"), 8)?
            .send(commit("s", 7), 2)?
            .send(OffsetFetchRequest::default().with_group_id(GroupId(s("s"))), 1)?
            .send(ListGroupsRequest::default(), 4)?
            .send(DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("s"))]), 2)
    };
    let offsets_by_topic_id = || {
        Conversation::plaintext()
            .send(commit("s", 5), 8)?
            .send(MetadataRequest::default(), 12)?
            .send_flexible_body(OffsetCommitRequest::KEY, 10, COMMIT_V10)?
            .send_flexible_body(OffsetFetchRequest::KEY, 10, FETCH_V10)
    };
    let data = || {
        Conversation::plaintext()
            .send(MetadataRequest::default(), 9)?
            .send(produce(0)?, 9)?
            .send(produce(1)?, 9)?
            .send(fetch(), 12)?
            .send(
                ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1)])]),
                5,
            )?
            .send(InitProducerIdRequest::default().with_transaction_timeout_ms(1000), 4)
    };
    let consumer_group = || {
        Conversation::plaintext().send(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s("c")))
                .with_member_id(s("fuzz-member-0000000001"))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(100)
                .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
                .with_topic_partitions(Some(vec![])),
            1,
        )
    };
    let sasl_plain_on = |start: fn() -> Conversation| {
        start()
            .send(api_versions(), 3)?
            .send(SaslHandshakeRequest::default().with_mechanism(s("PLAIN")), 1)?
            .send(SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(PLAIN_TOKEN)), 2)?
            .send(MetadataRequest::default(), 12)?
            .send(commit("a", 1), 9)?
            .send(offset_fetch("a"), 9)
    };
    let sasl_raw = || {
        Conversation::sasl()
            .send(SaslHandshakeRequest::default().with_mechanism(s("PLAIN")), 0)
            .map(|c| c.raw(PLAIN_TOKEN))?
            .send(api_versions(), 0)?
            .send(MetadataRequest::default(), 1)
    };
    let sasl_plain = || sasl_plain_on(Conversation::sasl);
    let relayed_sasl_plain = || sasl_plain_on(Conversation::relayed);
    let relayed_sasl_scram_first = || {
        Conversation::relayed().send(SaslHandshakeRequest::default().with_mechanism(s("SCRAM-SHA-512")), 1)?.send(
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"n,,n=fuzz,r=abcdefghijklmnop")),
            2,
        )
    };
    let sasl_scram_first = || {
        Conversation::sasl().send(SaslHandshakeRequest::default().with_mechanism(s("SCRAM-SHA-256")), 1)?.send(
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"n,,n=fuzz,r=abcdefghijklmnop")),
            1,
        )
    };
    // An unsigned token for `fuzz` (the harness accepts "alg":"none"),
    // expiring in 2100, and one that is refused: its error challenge, then
    // the client's %x01.
    let oauth_message = |token: &str| Bytes::from(format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes());
    let sasl_oauthbearer = || {
        // {"alg":"none"} . {"sub":"fuzz","exp":4102444800} .
        let token = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJmdXp6IiwiZXhwIjo0MTAyNDQ0ODAwfQ.";
        Conversation::sasl()
            .send(SaslHandshakeRequest::default().with_mechanism(s("OAUTHBEARER")), 1)?
            .send(SaslAuthenticateRequest::default().with_auth_bytes(oauth_message(token)), 2)?
            .send(commit("o", 1), 9)
    };
    let sasl_oauthbearer_refused = || {
        Conversation::sasl()
            .send(SaslHandshakeRequest::default().with_mechanism(s("OAUTHBEARER")), 1)?
            .send(SaslAuthenticateRequest::default().with_auth_bytes(oauth_message("e30.e30.")), 2)?
            .send(SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(&[1])), 2)
    };
    // A GSSAPI login whose AP-REQ no key opens (the harness's keytab holds
    // a random key): Kafka's authentication error, then the close.
    let sasl_gssapi_refused = || {
        let ap_req =
            Bytes::from_static(b"\x60\x10\x06\x09\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01\x00\x6e\x03\x30\x01\x00");
        Conversation::sasl()
            .send(SaslHandshakeRequest::default().with_mechanism(s("GSSAPI")), 1)?
            .send(SaslAuthenticateRequest::default().with_auth_bytes(ap_req), 2)
    };
    // Delegation tokens (the harness's daemon has a token key): asked for,
    // described, renewed and expired by an authenticated user, and a SCRAM
    // login that names a token.
    let sasl_delegation_tokens = || {
        let renewer = CreatableRenewers::default().with_principal_type(s("User")).with_principal_name(s("bob"));
        Conversation::sasl()
            .send(SaslHandshakeRequest::default().with_mechanism(s("PLAIN")), 1)?
            .send(SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(PLAIN_TOKEN)), 2)?
            .send(CreateDelegationTokenRequest::default().with_renewers(vec![renewer]).with_max_lifetime_ms(-1), 3)?
            .send(DescribeDelegationTokenRequest::default().with_owners(None), 3)?
            .send(RenewDelegationTokenRequest::default().with_hmac(Bytes::from_static(b"hmac")), 2)?
            .send(ExpireDelegationTokenRequest::default().with_hmac(Bytes::from_static(b"hmac")), 2)?
            .send(CreateDelegationTokenRequest::default(), 1)
    };
    let sasl_scram_token_first = || {
        Conversation::sasl().send(SaslHandshakeRequest::default().with_mechanism(s("SCRAM-SHA-512")), 1)?.send(
            SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from_static(b"n,,n=AAAAAAAAAAAAAAAAAAAAAA,r=abcdefghijklmnop,tokenauth=true")),
            2,
        )
    };
    let bad_frame_after_answers = || Some(Conversation::plaintext().send(api_versions(), 0)?.raw(&[0xff; 4]));
    let candidates: [(&'static str, &dyn Fn() -> Option<Conversation>); 16] = [
        ("classic_group", &classic),
        ("offsets", &offsets),
        ("offsets_by_topic_id", &offsets_by_topic_id),
        ("data_plane", &data),
        ("consumer_group", &consumer_group),
        ("sasl_plain", &sasl_plain),
        ("sasl_v0_raw_token", &sasl_raw),
        ("sasl_scram_first_message", &sasl_scram_first),
        ("sasl_oauthbearer", &sasl_oauthbearer),
        ("sasl_oauthbearer_refused", &sasl_oauthbearer_refused),
        ("sasl_gssapi_refused", &sasl_gssapi_refused),
        ("bad_frame_after_answers", &bad_frame_after_answers),
        ("relayed_sasl_plain", &relayed_sasl_plain),
        ("relayed_sasl_scram_first_message", &relayed_sasl_scram_first),
        ("sasl_delegation_tokens", &sasl_delegation_tokens),
        ("sasl_scram_token_first_message", &sasl_scram_token_first),
    ];
    candidates.into_iter().filter_map(|(name, make)| Some((name, make()?.bytes))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::api::{offset_commit, offset_fetch};

    #[test]
    fn the_hand_written_v10_bodies_are_whole_valid_requests() {
        let mut commit = Bytes::from_static(COMMIT_V10);
        let decoded = offset_commit::decode(&mut commit, 10).unwrap();
        assert!(commit.is_empty());
        assert_eq!(decoded.topic_ids, vec![uuid::Uuid::from_u128(0x0fed << 112 | 1), uuid::Uuid::nil()]);
        assert_eq!(decoded.req.topics[0].partitions[0].offset, 5);
        let mut fetch = Bytes::from_static(FETCH_V10);
        let decoded = offset_fetch::decode(&mut fetch, 10).unwrap();
        assert!(fetch.is_empty() && decoded.req.require_stable);
        assert_eq!(decoded.req.groups[0].topics, None);
        assert_eq!(decoded.topic_ids[1], vec![uuid::Uuid::from_u128(0x0fed << 112 | 1)]);
    }
}
