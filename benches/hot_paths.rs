//! Micro-benchmarks of the hot paths: a Heartbeat and a 10-partition
//! OffsetCommit through decode → shard core → encode; a log append and the
//! replay of one record; Java-hash routing. Run with `cargo bench`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "Test support code: a failed unwrap, expect or index is the test's verdict."
)]

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::{GroupId, HeartbeatRequest, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kcoord::coordinator::core::{CoreConfig, CountingIds, Reply, Request, Response, ShardCore};
use kcoord::coordinator::messages::{JoinGroupRequest, Protocol, SyncGroupRequest};
use kcoord::coordinator::records::{self, OffsetValue, Record};
use kcoord::coordinator::routing::partition_for;
use kcoord::coordinator::store::{MemorySink, Store};
use kcoord::protocol::api::{heartbeat, offset_commit};
use kcoord::storage::{Log, LogOptions};

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A shard with one Stable single-member group "g"; returns (core, member id).
fn stable_shard() -> (ShardCore, MemorySink, String) {
    let cfg = CoreConfig { initial_rebalance_delay_ms: 0, ..CoreConfig::default() };
    let mut core = ShardCore::new(cfg, Box::new(CountingIds::default()));
    let mut sink = MemorySink::default();
    let mut out: Vec<Reply> = Vec::new();
    let now = 1_700_000_000_000;
    core.on_loaded(now, &mut sink, &mut out);
    let join = |member: &str| {
        Request::Join(Box::new(JoinGroupRequest {
            version: 3,
            group_id: "g".into(),
            session_timeout_ms: 30_000,
            rebalance_timeout_ms: 60_000,
            member_id: member.into(),
            group_instance_id: None,
            protocol_type: "consumer".into(),
            protocols: vec![Protocol { name: "range".into(), metadata: Bytes::from_static(b"md") }],
            reason: None,
            client_id: "bench".into(),
            client_host: "/127.0.0.1".into(),
        }))
    };
    core.handle(now, 1, join(""), &mut sink, &mut out);
    core.fire_timers(now, &mut sink, &mut out);
    let member = out
        .iter()
        .find_map(|r| match &r.response {
            Response::Join(j) => Some(j.member_id.clone()),
            _ => None,
        })
        .expect("joined");
    core.handle(
        now,
        2,
        Request::Sync(Box::new(SyncGroupRequest {
            version: 3,
            group_id: "g".into(),
            generation_id: 1,
            member_id: member.clone(),
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![(member.clone(), Bytes::from_static(b"a"))],
        })),
        &mut sink,
        &mut out,
    );
    (core, sink, member)
}

fn encode<T: Encodable>(m: &T, v: i16) -> Bytes {
    let mut b = BytesMut::new();
    m.encode(&mut b, v).unwrap();
    b.freeze()
}

fn bench_heartbeat(c: &mut Criterion) {
    let (mut core, mut sink, member) = stable_shard();
    let body = encode(
        &HeartbeatRequest::default().with_group_id(GroupId(sb("g"))).with_generation_id(1).with_member_id(sb(&member)),
        3,
    );
    let mut out = Vec::with_capacity(4);
    let mut buf = BytesMut::with_capacity(64);
    c.bench_function("heartbeat decode-handle-encode", |b| {
        b.iter(|| {
            let mut body = body.clone();
            let req = heartbeat::decode(&mut body, 3).unwrap();
            core.handle(1_700_000_000_001, 9, Request::Heartbeat(req), &mut sink, &mut out);
            if let Some(Reply { response: Response::Heartbeat(r), .. }) = out.pop() {
                buf.clear();
                heartbeat::encode(&r, 3, &mut buf).unwrap();
            }
        })
    });
}

fn bench_commit(c: &mut Criterion) {
    let (mut core, mut sink, member) = stable_shard();
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_generation_id_or_member_epoch(1)
        .with_member_id(sb(&member))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb("topic"))).with_partitions(
            (0..10)
                .map(|p| {
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(100 + p as i64)
                })
                .collect(),
        )]);
    let body = encode(&req, 8);
    let mut out = Vec::with_capacity(4);
    let mut buf = BytesMut::with_capacity(256);
    c.bench_function("offset commit (10 partitions) decode-handle-encode", |b| {
        b.iter(|| {
            let mut body = body.clone();
            let req = offset_commit::decode(&mut body, 8).unwrap().req;
            core.handle(1_700_000_000_001, 9, Request::Commit(req), &mut sink, &mut out);
            if let Some(Reply { response: Response::Commit(r), .. }) = out.pop() {
                buf.clear();
                offset_commit::encode(&r, 8, &[], &mut buf).unwrap();
            }
            if sink.payloads.len() > 100_000 {
                sink.payloads.clear();
            }
        })
    });
}

fn bench_log(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogOptions::new(64 << 20, false), &mut |_, _| Ok(())).unwrap();
    let payload = records::encode(
        &Record::offset(
            "group",
            "topic",
            3,
            OffsetValue {
                offset: 42,
                leader_epoch: 0,
                metadata: String::new(),
                commit_timestamp: 1,
                expire_timestamp: None,
            },
        ),
        1,
    )
    .unwrap();
    c.bench_function("log append (one record, no fsync)", |b| b.iter(|| log.append(&[&payload[..]]).unwrap()));
    let mut store = Store::new();
    c.bench_function("record decode + replay", |b| {
        b.iter(|| {
            let rec = records::decode(&payload).unwrap();
            store.replay(&rec);
        })
    });
}

fn bench_routing(c: &mut Criterion) {
    c.bench_function("group routing (Java hashCode % 50)", |b| {
        b.iter(|| partition_for(std::hint::black_box("consumer-group-orders-42"), 50))
    });
}

criterion_group!(benches, bench_heartbeat, bench_commit, bench_log, bench_routing);
criterion_main!(benches);
