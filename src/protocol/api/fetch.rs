//! Fetch (key 1), v4–v16, sessionless. v4 adds the isolation level, last
//! stable offset and aborted transactions; v5 the log start offset; v7
//! fetch sessions (always answered with session id 0); v9 the current
//! leader epoch; v11 the rack and preferred read replica (always -1); v12 is
//! flexible; from v13 topics are addressed by id (unknown ids:
//! UNKNOWN_TOPIC_ID); v15 moves the replica id into a tagged state; v16 adds
//! node endpoints (only sent with NOT_LEADER errors, so never here).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};

use crate::protocol::codec::{self, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::topics::fetch as t;

pub const SUPPORT: ApiSupport = ApiSupport::new(1, "Fetch", 4, 16, Some(12));

/// First version that addresses topics by id.
const TOPIC_IDS_FROM: i16 = 13;

pub fn decode(body: &mut Bytes, version: i16) -> Result<t::FetchRequest, DecodeError> {
    let r: FetchRequest = codec::decode(SUPPORT.name, body, version)?;
    let by_id = version >= TOPIC_IDS_FROM;
    Ok(t::FetchRequest {
        max_wait_ms: r.max_wait_ms,
        min_bytes: r.min_bytes,
        max_bytes: r.max_bytes,
        isolation_level: r.isolation_level,
        session_id: if version >= 7 { r.session_id } else { 0 },
        session_epoch: if version >= 7 { r.session_epoch } else { -1 },
        topics: r
            .topics
            .iter()
            .map(|topic| t::FetchTopic {
                name: if by_id { None } else { Some(st(&topic.topic.0)) },
                id: if by_id { topic.topic_id } else { uuid::Uuid::nil() },
                partitions: topic
                    .partitions
                    .iter()
                    .map(|p| t::FetchPartition {
                        partition: p.partition,
                        current_leader_epoch: if version >= 9 { p.current_leader_epoch } else { -1 },
                        fetch_offset: p.fetch_offset,
                        partition_max_bytes: p.partition_max_bytes,
                    })
                    .collect(),
            })
            .collect(),
    })
}

pub fn encode(resp: &t::FetchResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let mut r = FetchResponse::default().with_responses(
        resp.topics
            .iter()
            .map(|topic| {
                let mut x = FetchableTopicResponse::default().with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut d = PartitionData::default()
                                .with_partition_index(p.partition)
                                .with_error_code(p.error.0)
                                .with_high_watermark(p.high_watermark)
                                .with_last_stable_offset(p.last_stable_offset)
                                // Kafka: null for read_uncommitted, a list for read_committed.
                                .with_aborted_transactions(resp.read_committed.then(Vec::new))
                                .with_preferred_read_replica(BrokerId(-1))
                                // Never null: librdkafka rejects a null record set.
                                .with_records(Some(p.records.clone()));
                            if version >= 5 {
                                d.log_start_offset = p.log_start_offset;
                            }
                            d
                        })
                        .collect(),
                );
                if version >= TOPIC_IDS_FROM {
                    x.topic_id = topic.id;
                } else {
                    x.topic = TopicName(sb(topic.name.clone()));
                }
                x
            })
            .collect(),
    );
    if version >= 7 {
        r.error_code = resp.error.0;
        r.session_id = resp.session_id;
    }
    codec::encode(SUPPORT.name, &r, version, out)
}
