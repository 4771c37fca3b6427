//! Helpers for the data-plane tests: building record batches with
//! kafka-protocol's (uncompressed) encoder and sending typed Produce, Fetch,
//! ListOffsets and admin requests.
#![allow(dead_code)] // shared by several test modules, each using a part

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use uuid::Uuid;

use crate::common::{sb, Client};

/// A producer identity for idempotent batches: (id, epoch, first sequence).
pub type Producer = Option<(i64, i16, i32)>;

/// An uncompressed RecordBatch v2 of `(key, value)` records, timestamps
/// `ts, ts + 1, ...`.
pub fn batch(records: &[(&str, &str)], ts: i64, producer: Producer) -> Bytes {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let recs: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch unless offset - sequence is constant.
            sequence: seq.wrapping_add(i as i32),
            timestamp: ts + i as i64,
            key: Some(Bytes::copy_from_slice(k.as_bytes())),
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &recs, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .expect("encode batch");
    buf.freeze()
}

/// `batch(records, ts, None)` with its records compressed by `codec`
/// (1 gzip, 2 snappy as one raw block like librdkafka, 3 lz4 frame,
/// 4 zstd), compressed here with the codec crates.
pub fn compressed_batch(codec: u8, records: &[(&str, &str)], ts: i64) -> Bytes {
    use std::io::Write;
    let plain = batch(records, ts, None).to_vec();
    let data = &plain[61..];
    let body = match codec {
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        2 => snap::raw::Encoder::new().compress_vec(data).unwrap(),
        3 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        4 => zstd::encode_all(data, 3).unwrap(),
        _ => panic!("codec {codec}"),
    };
    let attributes = i16::from_be_bytes([plain[21], plain[22]]) | codec as i16;
    with_records(&plain[..61], attributes, None, &body)
}

/// A batch of `header` (61 bytes) with `records` after it, `attributes`
/// and optionally the record count (and last offset delta) replaced, and
/// the length and CRC-32C made to match.
pub fn with_records(header: &[u8], attributes: i16, count: Option<i32>, records: &[u8]) -> Bytes {
    let mut b = header[..61].to_vec();
    b[21..23].copy_from_slice(&attributes.to_be_bytes());
    if let Some(n) = count {
        b[23..27].copy_from_slice(&(n - 1).to_be_bytes());
        b[57..61].copy_from_slice(&n.to_be_bytes());
    }
    b.extend_from_slice(records);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.into()
}

/// Issue 11's batch: 150 bytes, a gzip flag, a random payload, a valid CRC
/// and a record count of 2^31 - 1 (or `count`).
pub fn gzip_garbage(count: i32) -> Bytes {
    let header = batch(&[("k", "v")], 1, None);
    let mut x: u32 = 0x2545_f491;
    let payload: Vec<u8> = (0..89)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 8) as u8
        })
        .collect();
    with_records(&header, 1, Some(count), &payload)
}

/// A legacy MessageSet entry (magic 0 or 1) holding one record, built by
/// hand: offset, size, CRC-32 (IEEE), magic, attributes, [timestamp], key, value.
pub fn legacy_batch(magic: i8) -> Bytes {
    let mut msg = vec![magic as u8, 0];
    if magic == 1 {
        msg.extend_from_slice(&1i64.to_be_bytes());
    }
    msg.extend_from_slice(&(-1i32).to_be_bytes());
    msg.extend_from_slice(&3i32.to_be_bytes());
    msg.extend_from_slice(b"old");
    let crc = kafka_protocol::records::IEEE.checksum(&msg);
    let mut out = Vec::new();
    out.extend_from_slice(&0i64.to_be_bytes());
    out.extend_from_slice(&(4 + msg.len() as i32).to_be_bytes());
    out.extend_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(&msg);
    out.into()
}

/// `(offset, key, value)` of every record in fetched bytes.
pub fn decode_records(bytes: &Bytes) -> Vec<(i64, String, String)> {
    let mut b = bytes.clone();
    let mut out = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut b).expect("decode fetched batches") {
        for r in set.records {
            let s = |x: &Option<Bytes>| x.as_ref().map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default();
            out.push((r.offset, s(&r.key), s(&r.value)));
        }
    }
    out
}

pub fn produce_request(topic: &str, partition: i32, records: Option<Bytes>, acks: i16) -> ProduceRequest {
    ProduceRequest::default().with_acks(acks).with_timeout_ms(30_000).with_topic_data(vec![TopicProduceData::default()
        .with_name(TopicName(sb(topic)))
        .with_partition_data(vec![PartitionProduceData::default().with_index(partition).with_records(records)])])
}

/// Produces one batch with acks=-1; returns (error, base offset).
pub async fn produce(c: &mut Client, version: i16, topic: &str, partition: i32, records: Bytes) -> (i16, i64) {
    let r = c.send(&produce_request(topic, partition, Some(records), -1), version).await;
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// One partition's fetch request; by topic id from v13.
pub fn fetch_request(
    version: i16,
    topic: &str,
    id: Uuid,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
) -> FetchRequest {
    let mut t = FetchTopic::default().with_partitions(vec![FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20)]);
    if version >= 13 {
        t.topic_id = id;
    } else {
        t.topic = TopicName(sb(topic));
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_isolation_level(1)
        .with_topics(vec![t])
}

/// Fetches one partition without waiting; returns its partition data.
pub async fn fetch(
    c: &mut Client,
    version: i16,
    topic: &str,
    id: Uuid,
    partition: i32,
    offset: i64,
) -> fetch_response::PartitionData {
    let r = c.send(&fetch_request(version, topic, id, partition, offset, 0), version).await;
    assert_eq!(r.error_code, 0, "fetch v{version}");
    r.responses[0].partitions[0].clone()
}

/// ListOffsets for one partition; returns (error, timestamp, offset, epoch).
pub async fn list_offset(
    c: &mut Client,
    version: i16,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> (i16, i64, i64, i32) {
    let req =
        ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(sb(topic)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])]);
    let r = c.send(&req, version).await;
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.timestamp, p.offset, p.leader_epoch)
}

pub fn new_topic(name: &str, partitions: i32, replication: i16, configs: &[(&str, &str)]) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(TopicName(sb(name)))
        .with_num_partitions(partitions)
        .with_replication_factor(replication)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| CreatableTopicConfig::default().with_name(sb(k)).with_value(Some(sb(v))))
                .collect(),
        )
}

/// Creates topics; returns each result.
pub async fn create_topics(
    c: &mut Client,
    version: i16,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> Vec<create_topics_response::CreatableTopicResult> {
    let req =
        CreateTopicsRequest::default().with_topics(topics).with_timeout_ms(30_000).with_validate_only(validate_only);
    c.send(&req, version).await.topics
}

/// Deletes topics by name.
pub async fn delete_topics(
    c: &mut Client,
    version: i16,
    names: &[&str],
) -> Vec<delete_topics_response::DeletableTopicResult> {
    let req = if version >= 6 {
        DeleteTopicsRequest::default().with_topics(
            names
                .iter()
                .map(|n| delete_topics_request::DeleteTopicState::default().with_name(Some(TopicName(sb(n)))))
                .collect(),
        )
    } else {
        DeleteTopicsRequest::default().with_topic_names(names.iter().map(|n| TopicName(sb(n))).collect())
    };
    c.send(&req.with_timeout_ms(30_000), version).await.responses
}

/// Topic names and ids in Metadata (v12).
pub async fn topics(c: &mut Client) -> Vec<(String, Uuid)> {
    let r = c.send(&MetadataRequest::default().with_topics(None), 12).await;
    r.topics.iter().map(|t| (t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(), t.topic_id)).collect()
}

pub async fn topic_id(c: &mut Client, name: &str) -> Uuid {
    topics(c).await.into_iter().find(|(n, _)| n == name).map(|(_, id)| id).expect("topic listed")
}

/// A fresh producer id from InitProducerId v4.
pub async fn init_producer(c: &mut Client) -> (i64, i16) {
    let req = InitProducerIdRequest::default().with_transactional_id(None).with_transaction_timeout_ms(60_000);
    let r = c.send(&req, 4).await;
    assert_eq!(r.error_code, 0);
    (r.producer_id.0, r.producer_epoch)
}
