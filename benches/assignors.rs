//! The server-side assignors alone (no records, no I/O): `uniform` and
//! `range` on 10,000 members, homogeneous and heterogeneous, for a first
//! assignment, a re-assignment after one member leaves, and one after a
//! member joins. Two sizes: 10,000 partitions (100 topics × 100), and
//! Kafka's largest published JMH size, 10 partitions per member (1,000 topics
//! × 100 = 100,000 partitions). Heterogeneous subscriptions follow Kafka's
//! `ServerSideAssignorBenchmark`: members in 5 buckets, each bucket
//! subscribed to its fifth of the topics. Run with
//! `cargo bench --bench assignors`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "Test support code: a failed unwrap, expect or index is the test's verdict."
)]

use std::collections::BTreeSet;
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kcoord::coordinator::consumer::assignor::{
    GroupAssignment, GroupSpec, MemberSubscriptionAndAssignment, PartitionAssignor, RangeAssignor, SubscriptionType,
    TopicMetadata, UniformAssignor,
};
use uuid::Uuid;

const MEMBERS: usize = 10_000;
const BUCKETS: usize = 5;

fn topics(count: usize, partitions: u32) -> (Vec<Uuid>, TopicMetadata) {
    let ids: Vec<Uuid> = (0..count).map(|i| Uuid::from_u64_pair(0x5eed_0000 + i as u64, i as u64 * 7919)).collect();
    let meta = TopicMetadata::new(ids.iter().map(|id| (*id, partitions)));
    (ids, meta)
}

fn group(ids: &[Uuid], subscription_type: SubscriptionType) -> GroupSpec {
    let all: BTreeSet<Uuid> = ids.iter().copied().collect();
    let per_bucket = ids.len().div_ceil(BUCKETS);
    let members_per_bucket = MEMBERS.div_ceil(BUCKETS);
    let members = (0..MEMBERS)
        .map(|m| {
            let subscribed = match subscription_type {
                SubscriptionType::Homogeneous => all.clone(),
                SubscriptionType::Heterogeneous => {
                    let bucket = m / members_per_bucket;
                    ids.iter().skip(bucket * per_bucket).take(per_bucket).copied().collect()
                }
            };
            let member = MemberSubscriptionAndAssignment {
                rack_id: None,
                instance_id: None,
                subscribed_topic_ids: subscribed,
                assignment: Default::default(),
            };
            (format!("member{m}"), member)
        })
        .collect();
    GroupSpec { members, subscription_type }
}

fn with_assignment(g: &GroupSpec, out: &GroupAssignment) -> GroupSpec {
    let mut next = g.clone();
    for (id, m) in next.members.iter_mut() {
        m.assignment = out.members.get(id).map(|a| a.partitions.clone()).unwrap_or_default();
    }
    next
}

fn bench_assignors(c: &mut Criterion) {
    let sizes = [("10k-partitions", 100usize, 100u32), ("100k-partitions", 1_000, 100)];
    let assignors: [&dyn PartitionAssignor; 2] = [&UniformAssignor, &RangeAssignor];
    let mut bench = c.benchmark_group("assignors");
    bench.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for (size, topic_count, partitions) in sizes {
        let (ids, meta) = topics(topic_count, partitions);
        for st in [SubscriptionType::Homogeneous, SubscriptionType::Heterogeneous] {
            let first = group(&ids, st);
            for a in assignors {
                let name = format!("{}/{}/{size}", a.name(), st.name());
                bench.bench_with_input(BenchmarkId::new(name.clone(), "first"), &first, |b, g| {
                    b.iter(|| black_box(a.assign(g, &meta)))
                });
                let Ok(out) = a.assign(&first, &meta) else { continue };
                let assigned = with_assignment(&first, &out);

                let mut leave = assigned.clone();
                leave.members.remove("member4242");
                bench.bench_with_input(BenchmarkId::new(name.clone(), "member-leaves"), &leave, |b, g| {
                    b.iter(|| black_box(a.assign(g, &meta)))
                });

                let mut join = assigned;
                let newcomer = join
                    .members
                    .get("member4242")
                    .map(|m| MemberSubscriptionAndAssignment { assignment: Default::default(), ..m.clone() });
                if let Some(newcomer) = newcomer {
                    join.members.insert("newMember".to_string(), newcomer);
                }
                bench.bench_with_input(BenchmarkId::new(name, "member-joins"), &join, |b, g| {
                    b.iter(|| black_box(a.assign(g, &meta)))
                });
            }
        }
    }
    bench.finish();
}

criterion_group!(benches, bench_assignors);
criterion_main!(benches);
