//! Property tests: for random groups, topics and previous assignments (with
//! stray duplicates and partitions that do not exist), every assignor assigns
//! each subscribed partition exactly once and only to a subscriber, keeps
//! Kafka's balance invariant, gives the same answer twice, and leaves its own
//! answer unchanged when fed it back.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;

use super::tests::{check_valid, feed_back, tid};
use super::*;

#[derive(Debug, Clone)]
struct Case {
    topics: TopicMetadata,
    group: GroupSpec,
}

fn case() -> impl Strategy<Value = Case> {
    let topic_counts = prop::collection::vec(0u32..24, 1..6);
    (topic_counts, 1usize..14, any::<bool>(), any::<u64>()).prop_map(|(counts, members, homogeneous, seed)| {
        // A small deterministic generator keeps shrinking simple.
        let mut state = seed | 1;
        let mut next = move |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound.max(1)
        };
        let ids: Vec<TopicId> = (0..counts.len())
            .map(|i| {
                // Some ids with the top bit set, where Kafka's order differs.
                let hi = if next(2) == 0 { 0x8000_0000_0000_0000u64 } else { 0 } | i as u64;
                Uuid::from_u64_pair(hi, next(1000))
            })
            .collect();
        let topics = TopicMetadata::new(ids.iter().copied().zip(counts.iter().copied()));
        let shared: BTreeSet<TopicId> = ids.iter().copied().filter(|_| next(3) != 0).collect();
        let mut group_members = BTreeMap::new();
        for m in 0..members {
            let subscribed =
                if homogeneous { shared.clone() } else { ids.iter().copied().filter(|_| next(2) == 0).collect() };
            let instance_id = (next(3) == 0).then(|| format!("instance-{}", next(5)));
            group_members.insert(
                format!("member-{}", next(100) * 100 + m as u64),
                MemberSubscriptionAndAssignment {
                    rack_id: None,
                    instance_id,
                    subscribed_topic_ids: subscribed,
                    assignment: SharedAssignment::default(),
                },
            );
        }
        // A previous assignment: each partition to a random member or to
        // nobody, plus strays.
        let names: Vec<String> = group_members.keys().cloned().collect();
        for (t, count) in ids.iter().zip(&counts) {
            for p in 0..*count {
                if next(4) == 0 {
                    continue;
                }
                let owner = &names[next(names.len() as u64) as usize];
                if let Some(m) = group_members.get_mut(owner) {
                    Arc::make_mut(&mut m.assignment).entry(*t).or_default().insert(p as i32);
                }
            }
        }
        if next(4) == 0 {
            let owner = &names[next(names.len() as u64) as usize];
            if let (Some(m), Some(t)) = (group_members.get_mut(owner), ids.first()) {
                Arc::make_mut(&mut m.assignment).entry(*t).or_default().extend([0, 1000, -3]);
            }
        }
        if next(4) == 0 {
            // A topic that no longer exists, still in an assignment.
            let owner = &names[next(names.len() as u64) as usize];
            if let Some(m) = group_members.get_mut(owner) {
                Arc::make_mut(&mut m.assignment).entry(tid(200)).or_default().insert(0);
            }
        }
        let subscription_type = GroupSpec::subscription_type_of(&group_members);
        Case { topics, group: GroupSpec { members: group_members, subscription_type } }
    })
}

/// Partitions per member.
fn sizes(out: &GroupAssignment) -> BTreeMap<&str, usize> {
    out.members.iter().map(|(m, a)| (m.as_str(), a.partitions.values().map(BTreeSet::len).sum())).collect()
}

/// Kafka's balance invariants.
fn check_balance(assignor: &str, c: &Case, out: &GroupAssignment) {
    let sizes = sizes(out);
    let subscribers = |t: &TopicId| -> Vec<&str> {
        c.group.members.iter().filter(|(_, m)| m.subscribed_topic_ids.contains(t)).map(|(id, _)| id.as_str()).collect()
    };
    match (assignor, c.group.subscription_type) {
        ("uniform", SubscriptionType::Homogeneous) => {
            // Every member within one partition of every other.
            let (min, max) = (sizes.values().min(), sizes.values().max());
            if let (Some(min), Some(max)) = (min, max) {
                assert!(max - min <= 1, "homogeneous imbalance {sizes:?}");
            }
        }
        ("uniform", SubscriptionType::Heterogeneous) => {
            // Per topic: a subscriber holding one of its partitions has at
            // most one partition more, in total, than any other subscriber.
            for t in c.topics.partitions.keys() {
                let subs = subscribers(t);
                let least = subs.iter().map(|m| sizes.get(m).copied().unwrap_or(0)).min().unwrap_or(0);
                for m in &subs {
                    let holds = out.members.get(*m).is_some_and(|a| a.partitions.contains_key(t));
                    let size = sizes.get(m).copied().unwrap_or(0);
                    assert!(!holds || size <= least + 1, "topic {t}: {m} has {size}, least {least}: {sizes:?}");
                }
            }
        }
        _ => {
            // range: each topic split evenly over its subscribers.
            for t in c.topics.partitions.keys() {
                let per: Vec<usize> = subscribers(t)
                    .iter()
                    .map(|m| out.members.get(*m).and_then(|a| a.partitions.get(t)).map_or(0, BTreeSet::len))
                    .collect();
                if let (Some(min), Some(max)) = (per.iter().min(), per.iter().max()) {
                    assert!(max - min <= 1, "range topic {t}: {per:?}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn assignors_are_valid_balanced_deterministic_and_stable(c in case()) {
        for a in ASSIGNORS {
            let out = a.assign(&c.group, &c.topics).expect("assigns");
            check_valid(&c.group, &c.topics, &out);
            check_balance(a.name(), &c, &out);
            prop_assert_eq!(&a.assign(&c.group.clone(), &c.topics).expect("assigns"), &out);
            let fed = feed_back(&c.group, &out);
            let again = a.assign(&fed, &c.topics).expect("assigns");
            prop_assert_eq!(&again, &out, "{} does not keep its own answer", a.name());
            for (id, m) in &fed.members {
                // (uniform answers no entries at all when nothing is subscribed)
                let same = again.members.get(id).map_or(again.members.is_empty(), |o| Arc::ptr_eq(&o.partitions, &m.assignment));
                prop_assert!(same, "{} copied the unchanged assignment of {}", a.name(), id);
            }
        }
    }

    #[test]
    fn uniform_homogeneous_moves_only_what_balance_needs(c in case()) {
        // Stickiness: each member keeps min(what it validly holds, its new
        // size), so nothing moves beyond what balance requires.
        prop_assume!(c.group.subscription_type == SubscriptionType::Homogeneous);
        let out = UniformAssignor.assign(&c.group, &c.topics).expect("assigns");
        for id in c.group.members.keys() {
            let now = out.members.get(id).map(|a| a.partitions.clone()).unwrap_or_default();
            let held = valid_held(&c, id);
            let kept = now.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p))).filter(|tp| held.contains(tp)).count();
            let size: usize = now.values().map(BTreeSet::len).sum();
            prop_assert_eq!(kept, held.len().min(size), "{}", id);
        }
    }
}

/// Partitions a member holds that exist, that it subscribes to, and that no
/// earlier member holds: what the assignor counts as its current assignment.
fn valid_held(c: &Case, id: &str) -> BTreeSet<(TopicId, i32)> {
    let mut claimed: BTreeSet<(TopicId, i32)> = BTreeSet::new();
    let mut result = BTreeSet::new();
    for (mid, m) in &c.group.members {
        for (t, ps) in m.assignment.iter() {
            let Some(count) = c.topics.partitions.get(t) else { continue };
            for p in ps {
                let exists = *p >= 0 && (*p as u32) < *count;
                if exists && m.subscribed_topic_ids.contains(t) && claimed.insert((*t, *p)) && mid == id {
                    result.insert((*t, *p));
                }
            }
        }
    }
    result
}
