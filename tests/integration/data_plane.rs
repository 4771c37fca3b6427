//! Black-box tests of standalone mode's data plane over TCP: Produce, Fetch,
//! ListOffsets, InitProducerId, CreateTopics and DeleteTopics at every
//! advertised version, durability across restarts, and retention.

use crate::common;
use crate::support;

use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::messages::*;
use support::*;
use uuid::Uuid;

const TOPIC: &str = "dp";

async fn server(extra: &[&str]) -> TestServer {
    let mut settings = vec!["topics.define=[\"dp:2\"]"];
    settings.extend_from_slice(extra);
    TestServer::start_with(&settings).await
}

#[tokio::test]
async fn produce_and_fetch_round_trip_at_every_version() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    let id = topic_id(&mut c, TOPIC).await;
    let mut expected = Vec::new();
    for (i, v) in (3..=10i16).enumerate() {
        let (k, val) = (format!("k{v}"), format!("value at produce v{v}"));
        let (err, base) = produce(&mut c, v, TOPIC, 1, batch(&[(&k, &val), ("x", "y")], 1_000, None)).await;
        assert_eq!((err, base), (0, 2 * i as i64), "produce v{v}");
        expected.push((base, k, val));
        expected.push((base + 1, "x".to_string(), "y".to_string()));
    }
    for v in 4..=16i16 {
        let p = fetch(&mut c, v, TOPIC, id, 1, 0).await;
        assert_eq!(p.error_code, 0, "fetch v{v}");
        assert_eq!(p.high_watermark, 16, "v{v}");
        assert_eq!(p.last_stable_offset, 16, "v{v}: LSO = HWM");
        if v >= 5 {
            assert_eq!(p.log_start_offset, 0, "v{v}");
        }
        if v >= 11 {
            assert_eq!(p.preferred_read_replica.0, -1, "v{v}");
        }
        assert_eq!(p.aborted_transactions.as_deref().map(|a| a.len()), Some(0), "v{v}: read_committed");
        assert_eq!(decode_records(p.records.as_ref().unwrap()), expected, "v{v}");
        // From an offset inside a batch: the whole batch comes back.
        let p = fetch(&mut c, v, TOPIC, id, 1, 5).await;
        assert_eq!(decode_records(p.records.as_ref().unwrap())[0].0, 4, "v{v}");
        // At the end: empty, never null.
        let p = fetch(&mut c, v, TOPIC, id, 1, 16).await;
        assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0), "v{v}");
    }
}

#[tokio::test]
async fn fetch_by_unknown_topic_id_or_name_gets_kafkas_errors() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    for v in [13i16, 16] {
        let p = fetch(&mut c, v, "", Uuid::new_v4(), 0, 0).await;
        assert_eq!(p.error_code, 100, "v{v}: UNKNOWN_TOPIC_ID");
        assert_eq!(p.high_watermark, -1);
        assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0));
    }
    for v in [4i16, 12] {
        let p = fetch(&mut c, v, "nope", Uuid::nil(), 0, 0).await;
        assert_eq!(p.error_code, 3, "v{v}: UNKNOWN_TOPIC_OR_PARTITION");
        let p = fetch(&mut c, v, TOPIC, Uuid::nil(), 7, 0).await;
        assert_eq!(p.error_code, 3, "v{v}: partition out of range");
    }
}

#[tokio::test]
async fn out_of_range_fetch_offsets_get_offset_out_of_range() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    produce(&mut c, 9, TOPIC, 0, batch(&[("a", "1")], 1, None)).await;
    for v in [4i16, 11, 12, 16] {
        let id = topic_id(&mut c, TOPIC).await;
        for offset in [-1, 2, 1_000] {
            let p = fetch(&mut c, v, TOPIC, id, 0, offset).await;
            assert_eq!(p.error_code, 1, "v{v} offset {offset}");
            assert_eq!(p.high_watermark, -1);
        }
        assert_eq!(fetch(&mut c, v, TOPIC, id, 0, 1).await.error_code, 0, "the log end is in range");
    }
}

#[tokio::test]
async fn a_corrupt_crc_gets_corrupt_message_and_old_magic_gets_invalid_record() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    for v in 3..=10i16 {
        let mut b = batch(&[("k", "v")], 1, None).to_vec();
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert_eq!(produce(&mut c, v, TOPIC, 0, b.into()).await.0, 2, "v{v}: CORRUPT_MESSAGE");
        for magic in [0i8, 1] {
            assert_eq!(
                produce(&mut c, v, TOPIC, 0, legacy_batch(magic)).await.0,
                87,
                "v{v} magic {magic}: INVALID_RECORD"
            );
        }
        let two = [batch(&[("a", "1")], 1, None), batch(&[("b", "2")], 1, None)].concat();
        assert_eq!(produce(&mut c, v, TOPIC, 0, two.into()).await.0, 87, "v{v}: two batches");
    }
    // Nothing was stored.
    assert_eq!(list_offset(&mut c, 1, TOPIC, 0, -1).await.2, 0);
}

#[tokio::test]
async fn compressed_batches_of_every_codec_are_stored_as_sent_and_read_back() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    let id = topic_id(&mut c, TOPIC).await;
    let mut sent = Vec::new();
    for (i, codec) in [1u8, 2, 3, 4].into_iter().enumerate() {
        let value = format!("compressed with codec {codec} {}", "z".repeat(200));
        let b = compressed_batch(codec, &[("a", &value), ("b", &value), ("c", &value)], 1_000);
        assert_eq!(produce(&mut c, 7, TOPIC, 0, b.clone()).await, (0, 3 * i as i64), "codec {codec}");
        sent.push(b);
    }
    let p = fetch(&mut c, 12, TOPIC, id, 0, 0).await;
    assert_eq!(p.high_watermark, 12);
    let mut fetched = p.records.unwrap();
    for (i, b) in sent.iter().enumerate() {
        let len = 12 + i32::from_be_bytes(fetched[8..12].try_into().unwrap()) as usize;
        let got = fetched.split_to(len);
        assert_eq!(i64::from_be_bytes(got[..8].try_into().unwrap()), 3 * i as i64);
        assert_eq!(got[16..], b[16..], "batch {i}: the producer's bytes, CRC and compressed records");
    }
}

#[tokio::test]
async fn a_compressed_batch_of_garbage_is_refused_and_changes_nothing() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    let id = topic_id(&mut c, TOPIC).await;
    assert_eq!(produce(&mut c, 3, TOPIC, 0, batch(&[("k", "before")], 1, None)).await, (0, 0));
    // With the count of 2^31 - 1, and with a believable count.
    let huge = gzip_garbage(i32::MAX);
    assert_eq!(huge.len(), 150);
    for v in [3i16, 9, 10] {
        let r = c.send(&produce_request(TOPIC, 0, Some(huge.clone()), -1), v).await;
        let p = &r.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (87, -1), "v{v}: INVALID_RECORD");
        if v >= 8 {
            assert!(p.error_message.as_ref().is_some_and(|m| m.contains("2147483647")), "v{v}: {:?}", p.error_message);
        }
        assert_eq!(produce(&mut c, v, TOPIC, 0, gzip_garbage(2)).await.0, 2, "v{v}: CORRUPT_MESSAGE");
    }
    // Records that do not fill the count, compressed: INVALID_RECORD.
    let two = compressed_batch(4, &[("a", "1"), ("b", "2")], 1);
    let short = with_records(&two, 4, Some(3), &two[61..]);
    assert_eq!(produce(&mut c, 9, TOPIC, 0, short).await.0, 87);
    // Nothing moved: the log end, the data, the next offset.
    assert_eq!(list_offset(&mut c, 1, TOPIC, 0, -1).await.2, 1);
    let p = fetch(&mut c, 12, TOPIC, id, 0, 0).await;
    assert_eq!(p.high_watermark, 1);
    assert_eq!(decode_records(p.records.as_ref().unwrap()), vec![(0, "k".into(), "before".into())]);
    assert_eq!(produce(&mut c, 9, TOPIC, 0, batch(&[("k", "after")], 2, None)).await, (0, 1));
}

#[tokio::test]
async fn produce_to_unknown_topics_and_partitions_is_refused() {
    let s = server(&["topics.auto_create=false"]).await;
    let mut c = s.client().await;
    assert_eq!(produce(&mut c, 9, "missing", 0, batch(&[("a", "1")], 1, None)).await.0, 3);
    assert_eq!(produce(&mut c, 9, TOPIC, 2, batch(&[("a", "1")], 1, None)).await.0, 3);
    let r = c.send(&produce_request(TOPIC, 0, Some(batch(&[("a", "1")], 1, None)), 2), 9).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 21, "INVALID_REQUIRED_ACKS");
}

#[tokio::test]
async fn a_long_polled_fetch_wakes_up_when_data_arrives() {
    let s = server(&[]).await;
    let mut consumer = s.client().await;
    let mut producer = s.client().await;
    let id = topic_id(&mut consumer, TOPIC).await;
    let (_, frame) = consumer.frame(&fetch_request(12, TOPIC, id, 0, 0, 10_000), 12);
    let started = Instant::now();
    consumer.send_raw(&frame).await.unwrap();
    // The fetch is parked: no answer yet.
    assert!(tokio::time::timeout(Duration::from_millis(300), consumer.read_frame()).await.is_err());
    produce(&mut producer, 9, TOPIC, 0, batch(&[("woke", "up")], 1, None)).await;
    let resp = consumer.read_frame().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(9), "answered on the produce, not at max_wait");
    let (_, r) = Client::decode::<FetchRequest>(resp, 12);
    let records = decode_records(r.responses[0].partitions[0].records.as_ref().unwrap());
    assert_eq!(records, vec![(0, "woke".to_string(), "up".to_string())]);
}

#[tokio::test]
async fn an_empty_long_poll_answers_at_max_wait_and_min_bytes_zero_answers_at_once() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    let r = c.send(&fetch_request(11, TOPIC, Uuid::nil(), 0, 0, 200), 11).await;
    assert_eq!(r.responses[0].partitions[0].records.as_ref().map(|r| r.len()), Some(0));
    let r = c.send(&fetch_request(11, TOPIC, Uuid::nil(), 0, 0, 30_000).with_min_bytes(0), 11).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
}

#[tokio::test]
async fn incremental_fetch_sessions_are_not_found() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    let r = c.send(&fetch_request(11, TOPIC, Uuid::nil(), 0, 0, 0).with_session_id(5).with_session_epoch(3), 11).await;
    assert_eq!((r.error_code, r.session_id), (70, 0), "FETCH_SESSION_ID_NOT_FOUND");
    let r = c.send(&fetch_request(11, TOPIC, Uuid::nil(), 0, 0, 0).with_session_epoch(0), 11).await;
    assert_eq!((r.error_code, r.session_id), (0, 0), "a full fetch is answered sessionless");
}

#[tokio::test]
async fn the_first_batch_is_returned_even_above_the_size_limits() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    let big = "x".repeat(5_000);
    produce(&mut c, 9, TOPIC, 0, batch(&[("big", &big)], 1, None)).await;
    produce(&mut c, 9, TOPIC, 0, batch(&[("next", "small")], 1, None)).await;
    let mut req = fetch_request(11, TOPIC, Uuid::nil(), 0, 0, 0).with_max_bytes(10);
    req.topics[0].partitions[0].partition_max_bytes = 10;
    let r = c.send(&req, 11).await;
    let records = decode_records(r.responses[0].partitions[0].records.as_ref().unwrap());
    assert_eq!(records.len(), 1, "exactly one whole batch (KIP-74)");
    assert_eq!(records[0].2, big);
}

#[tokio::test]
async fn acks_zero_gets_no_response_and_the_connection_stays_usable() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    let (_, frame) = c.frame(&produce_request(TOPIC, 0, Some(batch(&[("quiet", "1")], 1, None)), 0), 9);
    c.send_raw(&frame).await.unwrap();
    // The next frame on the wire answers the next request.
    let r = c.send(&ApiVersionsRequest::default(), 0).await;
    assert_eq!(r.error_code, 0);
    let p = fetch(&mut c, 11, TOPIC, Uuid::nil(), 0, 0).await;
    assert_eq!(decode_records(p.records.as_ref().unwrap()).len(), 1);
    // A failed acks=0 write closes the connection, as Kafka does.
    let (_, frame) = c.frame(&produce_request("missing", 0, Some(batch(&[("x", "1")], 1, None)), 0), 9);
    c.send_raw(&frame).await.unwrap();
    assert!(c.is_closed().await);
}

#[tokio::test]
async fn idempotent_retries_are_stored_once_and_sequence_gaps_are_refused() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    let (pid, epoch) = init_producer(&mut c).await;
    let now = kcoord::wall_clock::wall_clock_ms();
    let first = batch(&[("a", "1"), ("b", "2")], now, Some((pid, epoch, 0)));
    assert_eq!(produce(&mut c, 9, TOPIC, 0, first.clone()).await, (0, 0));
    assert_eq!(produce(&mut c, 9, TOPIC, 0, first.clone()).await, (0, 0), "a retry is acknowledged with its offset");
    assert_eq!(produce(&mut c, 9, TOPIC, 0, batch(&[("c", "3")], now, Some((pid, epoch, 5)))).await.0, 45, "gap");
    for seq in 2..8 {
        let (err, _) = produce(&mut c, 9, TOPIC, 0, batch(&[("n", "n")], now, Some((pid, epoch, seq)))).await;
        assert_eq!(err, 0);
    }
    assert_eq!(
        produce(&mut c, 9, TOPIC, 0, first).await.0,
        45,
        "older than the last five: OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka"
    );
    assert_eq!(
        produce(&mut c, 9, TOPIC, 0, batch(&[("z", "z")], now, Some((pid, epoch + 1, 3)))).await.0,
        45,
        "new epoch must start at 0"
    );
    assert_eq!(produce(&mut c, 9, TOPIC, 0, batch(&[("z", "z")], now, Some((pid, epoch + 1, 0)))).await.0, 0);
    assert_eq!(
        produce(&mut c, 9, TOPIC, 0, batch(&[("z", "z")], now, Some((pid, epoch, 8)))).await.0,
        47,
        "fenced epoch"
    );
    assert_eq!(list_offset(&mut c, 7, TOPIC, 0, -1).await.2, 9, "2 + 6 + 1 records stored");
}

#[tokio::test]
async fn init_producer_id_at_every_version() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    let mut seen = Vec::new();
    for v in 0..=4i16 {
        let r = c
            .send(&InitProducerIdRequest::default().with_transactional_id(None).with_transaction_timeout_ms(1000), v)
            .await;
        assert_eq!((r.error_code, r.producer_epoch), (0, 0), "v{v}");
        assert!(!seen.contains(&r.producer_id.0), "v{v}: fresh id");
        seen.push(r.producer_id.0);
        let txn = InitProducerIdRequest::default().with_transactional_id(Some(TransactionalId(sb("tx"))));
        assert_eq!(c.send(&txn, v).await.error_code, 15, "v{v}: no transaction coordinator");
    }
    // v3+: an existing id and epoch get a fresh id (Kafka, null transactional id).
    let req = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_producer_id(ProducerId(seen[0]))
        .with_producer_epoch(0);
    let r = c.send(&req, 3).await;
    assert_eq!(r.error_code, 0);
    assert!(!seen.contains(&r.producer_id.0));
    let half = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_producer_id(ProducerId(seen[0]))
        .with_producer_epoch(-1);
    assert_eq!(c.send(&half, 4).await.error_code, 42, "INVALID_REQUEST");
}

#[tokio::test]
async fn list_offsets_at_every_version() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    produce(&mut c, 9, TOPIC, 0, batch(&[("a", "1"), ("b", "2"), ("c", "3")], 1_000, None)).await;
    produce(&mut c, 9, TOPIC, 0, batch(&[("d", "4"), ("e", "5")], 5_000, None)).await;
    produce(&mut c, 9, TOPIC, 0, batch(&[("f", "6")], 2_000, None)).await;
    for v in 1..=10i16 {
        let epoch = if v >= 4 { 0 } else { -1 };
        assert_eq!(list_offset(&mut c, v, TOPIC, 0, -2).await, (0, -1, 0, epoch), "v{v} earliest");
        assert_eq!(list_offset(&mut c, v, TOPIC, 0, -1).await, (0, -1, 6, epoch), "v{v} latest");
        assert_eq!(list_offset(&mut c, v, TOPIC, 0, 1_001).await, (0, 1_001, 1, epoch), "v{v} by time, inside a batch");
        assert_eq!(list_offset(&mut c, v, TOPIC, 0, 1_500).await, (0, 5_000, 3, epoch), "v{v} by time, next batch");
        assert_eq!(list_offset(&mut c, v, TOPIC, 0, 9_999).await, (0, -1, -1, -1), "v{v} none newer");
        let max = list_offset(&mut c, v, TOPIC, 0, -3).await;
        let earliest_local = list_offset(&mut c, v, TOPIC, 0, -4).await;
        let latest_tiered = list_offset(&mut c, v, TOPIC, 0, -5).await;
        if v >= 7 {
            assert_eq!(max, (0, 5_001, 4, epoch), "v{v} max timestamp");
        } else {
            assert_eq!(max.0, 35, "v{v}: -3 needs v7");
        }
        if v >= 8 {
            assert_eq!(earliest_local, (0, -1, 0, epoch), "v{v} earliest local");
        } else {
            assert_eq!(earliest_local.0, 35, "v{v}: -4 needs v8");
        }
        if v >= 9 {
            assert_eq!(latest_tiered, (0, -1, -1, -1), "v{v} no tiered storage");
        } else {
            assert_eq!(latest_tiered.0, 35, "v{v}: -5 needs v9");
        }
        assert_eq!(list_offset(&mut c, v, TOPIC, 0, -6).await.0, 35, "v{v}: -6 is newer than every version we serve");
        assert_eq!(list_offset(&mut c, v, "nope", 0, -1).await.0, 3, "v{v}");
    }
    // An empty partition.
    assert_eq!(list_offset(&mut c, 7, TOPIC, 1, -3).await, (0, -1, -1, -1));
    assert_eq!(list_offset(&mut c, 7, TOPIC, 1, -1).await, (0, -1, 0, 0));
}

#[tokio::test]
async fn create_topics_errors_and_results_at_every_version() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    for v in 2..=7i16 {
        let name = format!("created-{v}");
        let configs = [("retention.ms", "60000"), ("segment.ms", "3600000")];
        let ok = create_topics(&mut c, v, vec![new_topic(&name, 3, 1, &configs)], false).await;
        assert_eq!(ok[0].error_code, 0, "v{v}: {:?}", ok[0].error_message);
        if v >= 5 {
            assert_eq!((ok[0].num_partitions, ok[0].replication_factor), (3, 1));
            let configs = ok[0].configs.as_ref().unwrap();
            let value = |name: &str| {
                let c = configs.iter().find(|c| c.name.as_str() == name).unwrap();
                (c.value.as_deref().map(str::to_string), c.config_source)
            };
            assert_eq!(value("retention.ms"), (Some("60000".into()), 1), "v{v}: set by the request");
            assert_eq!(value("segment.ms"), (Some("3600000".into()), 1), "v{v}");
            assert_eq!(value("segment.bytes"), (Some("1073741824".into()), 5), "v{v}: Kafka's default");
        }
        if v >= 7 {
            assert_eq!(ok[0].topic_id, topic_id(&mut c, &name).await, "v{v}: the id Metadata reports");
        }
        let cases: Vec<(create_topics_request::CreatableTopic, i16)> = vec![
            (new_topic(&name, 1, 1, &[]), 36),
            (new_topic("zero-parts", 0, 1, &[]), 37),
            (new_topic("two-replicas", 1, 2, &[]), 38),
            (new_topic("zero-replicas", 1, 0, &[]), 38),
            (new_topic("bad/name", 1, 1, &[]), 17),
            (new_topic("bad-config", 1, 1, &[("retention.ms", "soon")]), 40),
            (new_topic("bad-segment-ms", 1, 1, &[("segment.ms", "0")]), 40),
            (new_topic("unknown-config", 1, 1, &[("min.insync.replicas", "2")]), 40),
        ];
        for (topic, want) in cases {
            let n = topic.name.0.to_string();
            let r = create_topics(&mut c, v, vec![topic], false).await;
            assert_eq!(r[0].error_code, want, "v{v} {n}: {:?}", r[0].error_message);
        }
        // Duplicates in one request are refused once.
        let dup = format!("dup-{v}");
        let r = create_topics(&mut c, v, vec![new_topic(&dup, 1, -1, &[]), new_topic(&dup, 1, -1, &[])], false).await;
        assert_eq!(r.iter().map(|t| t.error_code).collect::<Vec<_>>(), vec![42]);
        // validate_only creates nothing; -1 means the defaults.
        let r = create_topics(&mut c, v, vec![new_topic(&format!("dry-{v}"), -1, -1, &[])], true).await;
        assert_eq!(r[0].error_code, 0);
        assert!(!topics(&mut c).await.iter().any(|(n, _)| *n == format!("dry-{v}")));
    }
}

#[tokio::test]
async fn manual_assignments_are_answered_as_a_single_node_kafka_would() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    let assign = |parts: &[(i32, &[i32])]| {
        new_topic("manual", -1, -1, &[]).with_assignments(
            parts
                .iter()
                .map(|(p, b)| {
                    create_topics_request::CreatableReplicaAssignment::default()
                        .with_partition_index(*p)
                        .with_broker_ids(b.iter().map(|&x| BrokerId(x)).collect())
                })
                .collect(),
        )
    };
    let bad_broker = create_topics(&mut c, 5, vec![assign(&[(0, &[0]), (1, &[3])])], false).await;
    assert_eq!(bad_broker[0].error_code, 39, "INVALID_REPLICA_ASSIGNMENT");
    let gap = create_topics(&mut c, 5, vec![assign(&[(0, &[0]), (2, &[0])])], false).await;
    assert_eq!(gap[0].error_code, 39);
    let with_count = create_topics(&mut c, 5, vec![assign(&[(0, &[0])]).with_num_partitions(1)], false).await;
    assert_eq!(with_count[0].error_code, 42);
    let ok = create_topics(&mut c, 5, vec![assign(&[(0, &[0]), (1, &[0])])], false).await;
    assert_eq!((ok[0].error_code, ok[0].num_partitions), (0, 2));
}

#[tokio::test]
async fn delete_topics_round_trip_at_every_version() {
    let s = server(&[]).await;
    let mut c = s.client().await;
    for v in 1..=6i16 {
        let name = format!("gone-{v}");
        create_topics(&mut c, 5, vec![new_topic(&name, 2, 1, &[])], false).await;
        assert_eq!(produce(&mut c, 9, &name, 1, batch(&[("a", "1")], 1, None)).await, (0, 0));
        let r = delete_topics(&mut c, v, &[&name]).await;
        assert_eq!(r[0].error_code, 0, "v{v}");
        assert!(!topics(&mut c).await.iter().any(|(n, _)| *n == name), "v{v}: Metadata stops listing it");
        assert_eq!(produce(&mut c, 9, &name, 1, batch(&[("a", "1")], 1, None)).await.0, 3, "v{v}");
        let r = delete_topics(&mut c, v, &[&name]).await;
        assert_eq!(r[0].error_code, 3, "v{v}: already gone");
        // Re-created under the same name, it starts empty.
        create_topics(&mut c, 5, vec![new_topic(&name, 2, 1, &[])], false).await;
        assert_eq!(produce(&mut c, 9, &name, 1, batch(&[("b", "2")], 1, None)).await, (0, 0), "v{v}");
    }
    // v6 by id.
    let id = topic_id(&mut c, "gone-6").await;
    let by_id = |id: Uuid| {
        DeleteTopicsRequest::default()
            .with_topics(vec![delete_topics_request::DeleteTopicState::default().with_name(None).with_topic_id(id)])
    };
    let r = c.send(&by_id(id), 6).await.responses;
    assert_eq!(
        (r[0].error_code, r[0].topic_id, r[0].name.as_ref().map(|n| n.0.to_string())),
        (0, id, Some("gone-6".into()))
    );
    assert_eq!(c.send(&by_id(Uuid::new_v4()), 6).await.responses[0].error_code, 100, "UNKNOWN_TOPIC_ID");
    let both = DeleteTopicsRequest::default().with_topics(vec![delete_topics_request::DeleteTopicState::default()
        .with_name(Some(TopicName(sb("gone-5"))))
        .with_topic_id(Uuid::new_v4())]);
    assert_eq!(c.send(&both, 6).await.responses[0].error_code, 42);
    let dups = delete_topics(&mut c, 4, &["gone-5", "gone-5"]).await;
    assert_eq!(dups.iter().map(|r| r.error_code).collect::<Vec<_>>(), vec![42]);
}

fn commit_request(topic: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default().with_group_id(GroupId(sb("g"))).with_generation_id_or_member_epoch(-1).with_topics(
        vec![offset_commit_request::OffsetCommitRequestTopic::default()
            .with_name(TopicName(sb(topic)))
            .with_partitions(vec![offset_commit_request::OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])],
    )
}

/// Group g's committed offset for partition 0 of `topic` (-1 if none).
async fn committed(c: &mut Client, topic: &str) -> i64 {
    let req = OffsetFetchRequest::default().with_group_id(GroupId(sb("g"))).with_topics(Some(vec![
        offset_fetch_request::OffsetFetchRequestTopic::default()
            .with_name(TopicName(sb(topic)))
            .with_partition_indexes(vec![0]),
    ]));
    c.send(&req, 5).await.topics[0].partitions[0].committed_offset
}

async fn commit_once_accepted(s: &TestServer, topic: &str, offset: i64) {
    let addr = s.addr;
    eventually("the commit is accepted", || async move {
        let mut c = Client::connect(addr).await;
        (c.send(&commit_request(topic, offset), 2).await.topics[0].partitions[0].error_code == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn deleting_a_topic_drops_its_committed_offsets_also_across_a_restart() {
    let mut s = server(&[]).await;
    let mut c = s.client().await;
    create_topics(&mut c, 5, vec![new_topic("committed", 1, 1, &[])], false).await;
    commit_once_accepted(&s, "committed", 42).await;
    assert_eq!(committed(&mut c, "committed").await, 42);
    assert_eq!(delete_topics(&mut c, 5, &["committed"]).await[0].error_code, 0);
    assert_eq!(committed(&mut c, "committed").await, -1);
    let r = c.send(&commit_request("committed", 43), 2).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 3, "a deleted topic takes no commits");
    drop(c);
    s.restart().await;
    let mut c = s.client().await;
    // Re-created under the same name, the topic has no committed offsets.
    assert_eq!(create_topics(&mut c, 5, vec![new_topic("committed", 1, 1, &[])], false).await[0].error_code, 0);
    assert_eq!(committed(&mut c, "committed").await, -1);
}

#[tokio::test]
async fn a_deletion_interrupted_before_its_offset_tombstones_is_finished_after_a_restart() {
    let mut s = server(&[]).await;
    let mut c = s.client().await;
    create_topics(&mut c, 5, vec![new_topic("interrupted", 1, 1, &[])], false).await;
    commit_once_accepted(&s, "interrupted", 42).await;
    drop(c);
    s.daemon.take().unwrap().shutdown().await;
    // What a crash right after the catalog write of a deletion leaves: the
    // topic recorded as being deleted, its offsets not yet tombstoned.
    let path = s.dir.path().join("topics.json");
    let mut catalog: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let topics = catalog["topics"].as_array_mut().unwrap();
    let at = topics.iter().position(|t| t["name"] == "interrupted").unwrap();
    let topic = topics.remove(at);
    catalog["deleting"] = serde_json::json!([topic]);
    std::fs::write(&path, serde_json::to_vec(&catalog).unwrap()).unwrap();
    s.restart().await;
    let addr = s.addr;
    // The name is free again once the offsets are tombstoned.
    eventually("the deletion finishes", || async move {
        let mut c = Client::connect(addr).await;
        let r = create_topics(&mut c, 5, vec![new_topic("interrupted", 1, 1, &[])], false).await;
        (r[0].error_code == 0).then_some(())
    })
    .await;
    let mut c = s.client().await;
    assert_eq!(committed(&mut c, "interrupted").await, -1);
}

#[tokio::test]
async fn auto_created_topics_can_be_produced_to_at_once() {
    let s = server(&["topics.default_partitions=3"]).await;
    let mut c = s.client().await;
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(sb("auto"))))
        ]))
        .with_allow_auto_topic_creation(true);
    let r = c.send(&req, 9).await;
    assert_eq!((r.topics[0].error_code, r.topics[0].partitions.len()), (0, 3));
    assert_eq!(produce(&mut c, 9, "auto", 2, batch(&[("a", "1")], 1, None)).await, (0, 0));
}

#[tokio::test]
async fn data_and_producer_state_survive_a_restart() {
    let mut s = server(&["storage.fsync=\"always\""]).await;
    let mut c = s.client().await;
    let (pid, epoch) = init_producer(&mut c).await;
    // Recent timestamps: producers idle for a day (by batch time) are forgotten, as in Kafka.
    let now = kcoord::wall_clock::wall_clock_ms();
    let retry = batch(&[("k1", "v1"), ("k2", "v2")], now, Some((pid, epoch, 0)));
    assert_eq!(produce(&mut c, 9, TOPIC, 0, retry.clone()).await, (0, 0));
    assert_eq!(produce(&mut c, 9, TOPIC, 0, batch(&[("k3", "v3")], now + 10, Some((pid, epoch, 2)))).await, (0, 2));
    drop(c);
    s.restart().await;
    let mut c = s.client().await;
    let p = fetch(&mut c, 11, TOPIC, Uuid::nil(), 0, 0).await;
    let keys: Vec<String> = decode_records(p.records.as_ref().unwrap()).into_iter().map(|r| r.1).collect();
    assert_eq!(keys, vec!["k1", "k2", "k3"]);
    assert_eq!(produce(&mut c, 9, TOPIC, 0, retry).await, (0, 0), "still a duplicate after the restart");
    assert_eq!(produce(&mut c, 9, TOPIC, 0, batch(&[("k4", "v4")], now + 20, Some((pid, epoch, 3)))).await, (0, 3));
    assert!(init_producer(&mut c).await.0 > pid, "producer ids are never reused");
    assert_eq!(list_offset(&mut c, 7, TOPIC, 0, -3).await.2, 3);
}

#[tokio::test]
async fn a_partition_of_many_segments_reads_back_whole_after_clean_and_unclean_restarts() {
    let mut s = server(&["topics.segment_bytes=1024"]).await;
    let mut c = s.client().await;
    let payload = "s".repeat(300);
    let mut expected = Vec::new();
    for i in 0..20i64 {
        let key = format!("k{i}");
        assert_eq!(
            produce(&mut c, 9, TOPIC, 0, batch(&[(&key, &payload)], kcoord::wall_clock::wall_clock_ms(), None)).await,
            (0, i)
        );
        expected.push((i, key, payload.clone()));
    }
    drop(c);
    let partition_dir = s.dir.path().join("topics").join(format!("{TOPIC}-0"));
    for clean in [true, false] {
        s.daemon.take().unwrap().shutdown().await;
        assert!(partition_dir.join("clean-shutdown").exists(), "a clean shutdown is recorded");
        if !clean {
            // As after a crash: no record of a clean shutdown.
            std::fs::remove_file(partition_dir.join("clean-shutdown")).unwrap();
        }
        s.restart().await;
        let mut c = s.client().await;
        let mut got = Vec::new();
        while got.len() < expected.len() {
            let p = fetch(&mut c, 11, TOPIC, Uuid::nil(), 0, got.len() as i64).await;
            assert_eq!(p.error_code, 0, "clean: {clean}");
            got.extend(decode_records(p.records.as_ref().unwrap()));
        }
        assert_eq!(got, expected, "clean: {clean}");
        let key = format!("k{}", expected.len());
        let next = expected.len() as i64;
        assert_eq!(
            produce(&mut c, 9, TOPIC, 0, batch(&[(&key, &payload)], kcoord::wall_clock::wall_clock_ms(), None)).await,
            (0, next)
        );
        expected.push((next, key, payload.clone()));
    }
}

#[tokio::test]
async fn retention_deletes_old_segments_and_moves_the_log_start() {
    let s = server(&["topics.segment_bytes=1024", "topics.retention_check_interval_ms=50"]).await;
    let mut c = s.client().await;
    let old = 1_000; // CreateTime in 1970: far beyond any retention.ms below.
    let now = kcoord::wall_clock::wall_clock_ms();
    let payload = "p".repeat(300);
    create_topics(&mut c, 5, vec![new_topic("by-time", 1, 1, &[("retention.ms", "60000")])], false).await;
    create_topics(&mut c, 5, vec![new_topic("by-size", 1, 1, &[("retention.bytes", "2048")])], false).await;
    create_topics(&mut c, 5, vec![new_topic("kept", 1, 1, &[("retention.ms", "-1")])], false).await;
    for i in 0..30 {
        for (t, ts) in [("by-time", old), ("by-size", now), ("kept", old)] {
            assert_eq!(produce(&mut c, 9, t, 0, batch(&[("k", &payload)], ts, None)).await, (0, i), "{t}");
        }
    }
    let addr = s.addr;
    for t in ["by-time", "by-size"] {
        let start = eventually("retention moves the log start", || async move {
            let mut c = Client::connect(addr).await;
            let start = list_offset(&mut c, 1, t, 0, -2).await.2;
            // By time every segment goes, the active one too; by size the newest stay.
            let done = if t == "by-time" { start == 30 } else { start > 0 };
            done.then_some(start)
        })
        .await;
        if t == "by-size" {
            assert!(start < 30, "{t}: the last batches are kept");
        }
        assert_eq!(fetch(&mut c, 11, t, Uuid::nil(), 0, 0).await.error_code, 1, "{t}: below the log start");
        let p = fetch(&mut c, 11, t, Uuid::nil(), 0, start).await;
        assert_eq!(p.error_code, 0, "{t}");
        if start < 30 {
            assert_eq!(decode_records(p.records.as_ref().unwrap())[0].0, start, "{t}");
        }
        assert_eq!(list_offset(&mut c, 1, t, 0, -1).await.2, 30);
    }
    assert_eq!(list_offset(&mut c, 1, "kept", 0, -2).await.2, 0, "retention.ms=-1 keeps everything");
}

#[tokio::test]
async fn time_retention_empties_a_topic_whose_only_segment_is_active_and_produce_continues_at_the_old_end() {
    let mut s = server(&["topics.retention_check_interval_ms=50"]).await;
    let mut c = s.client().await;
    create_topics(&mut c, 5, vec![new_topic("quiet", 1, 1, &[("retention.ms", "60000")])], false).await;
    for i in 0..3 {
        // CreateTime in 1970: older than retention.ms; far too little data to fill a segment.
        assert_eq!(produce(&mut c, 9, "quiet", 0, batch(&[("k", "old")], 1_000, None)).await, (0, i));
    }
    let addr = s.addr;
    eventually("retention deletes the only segment", || async move {
        let mut c = Client::connect(addr).await;
        (list_offset(&mut c, 1, "quiet", 0, -2).await.2 == 3).then_some(())
    })
    .await;
    assert_eq!(list_offset(&mut c, 1, "quiet", 0, -1).await.2, 3, "earliest == latest");
    assert_eq!(fetch(&mut c, 11, "quiet", Uuid::nil(), 0, 0).await.error_code, 1, "OFFSET_OUT_OF_RANGE");
    let p = fetch(&mut c, 11, "quiet", Uuid::nil(), 0, 3).await;
    assert_eq!((p.error_code, p.log_start_offset, p.high_watermark), (0, 3, 3));
    drop(c);
    s.restart().await;
    let mut c = s.client().await;
    assert_eq!(list_offset(&mut c, 1, "quiet", 0, -2).await.2, 3, "the log start survives a restart");
    assert_eq!(list_offset(&mut c, 1, "quiet", 0, -1).await.2, 3);
    let (err, base) =
        produce(&mut c, 9, "quiet", 0, batch(&[("k", "new")], kcoord::wall_clock::wall_clock_ms(), None)).await;
    assert_eq!((err, base), (0, 3), "offsets continue at the old log end, never from 0 again");
    let p = fetch(&mut c, 11, "quiet", Uuid::nil(), 0, 3).await;
    assert_eq!(decode_records(p.records.as_ref().unwrap()), vec![(3, "k".to_string(), "new".to_string())]);
}

#[tokio::test]
async fn segment_ms_closes_a_segment_so_retention_drops_old_batches_and_keeps_new_ones() {
    let s = server(&["topics.retention_check_interval_ms=50"]).await;
    let mut c = s.client().await;
    let configs = [("retention.ms", "60000"), ("segment.ms", "1000")];
    create_topics(&mut c, 5, vec![new_topic("rolled", 1, 1, &configs)], false).await;
    for i in 0..3 {
        assert_eq!(produce(&mut c, 9, "rolled", 0, batch(&[("k", "old")], 1_000, None)).await, (0, i));
    }
    // Newer than the first batch by more than segment.ms: it starts a new segment.
    assert_eq!(
        produce(&mut c, 9, "rolled", 0, batch(&[("k", "new")], kcoord::wall_clock::wall_clock_ms(), None)).await,
        (0, 3)
    );
    let addr = s.addr;
    eventually("retention deletes the closed segment", || async move {
        let mut c = Client::connect(addr).await;
        (list_offset(&mut c, 1, "rolled", 0, -2).await.2 == 3).then_some(())
    })
    .await;
    let p = fetch(&mut c, 11, "rolled", Uuid::nil(), 0, 3).await;
    assert_eq!(decode_records(p.records.as_ref().unwrap()), vec![(3, "k".to_string(), "new".to_string())]);
}

#[tokio::test]
async fn interval_fsync_serves_produce_and_fetch() {
    let s = server(&["storage.fsync=\"interval\"", "storage.fsync_interval_ms=20"]).await;
    let mut c = s.client().await;
    assert_eq!(produce(&mut c, 10, TOPIC, 0, batch(&[("i", "1")], 1, None)).await, (0, 0));
    let p = fetch(&mut c, 12, TOPIC, Uuid::nil(), 0, 0).await;
    assert_eq!((p.high_watermark, decode_records(p.records.as_ref().unwrap()).len()), (1, 1));
}

#[tokio::test]
async fn deleting_a_topic_answers_its_parked_fetches() {
    let s = server(&[]).await;
    let mut admin = s.client().await;
    create_topics(&mut admin, 5, vec![new_topic("doomed", 1, 1, &[])], false).await;
    let mut consumer = s.client().await;
    let (_, frame) = consumer.frame(&fetch_request(11, "doomed", Uuid::nil(), 0, 0, 20_000), 11);
    consumer.send_raw(&frame).await.unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(300), consumer.read_frame()).await.is_err(), "parked");
    assert_eq!(delete_topics(&mut admin, 5, &["doomed"]).await[0].error_code, 0);
    let (_, r) = Client::decode::<FetchRequest>(consumer.read_frame().await.unwrap(), 11);
    assert_eq!(r.responses[0].partitions[0].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
}

#[tokio::test]
async fn partition_directories_no_topic_owns_are_removed_at_start_up() {
    // What a SIGKILL between creating a topic's logs and recording it in the
    // catalog leaves behind, recreated by hand.
    let mut s = server(&[]).await;
    let topics = s.dir.path().join("topics");
    let ghost = topics.join("ghost-0");
    let beyond = topics.join(format!("{TOPIC}-7"));
    let aside = topics.join("dp-0.0123-stray");
    for d in [&ghost, &beyond, &aside] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("00000000000000000000.log"), b"").unwrap();
    }
    s.restart().await;
    assert!(!ghost.exists(), "a topic the catalog does not know");
    assert!(!beyond.exists(), "a partition past the topic's count");
    assert!(aside.exists(), "directories set aside for the operator stay");
    assert!(topics.join(format!("{TOPIC}-0")).exists() && topics.join(format!("{TOPIC}-1")).exists());
    s.shutdown().await;
}
