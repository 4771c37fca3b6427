//! Scenario tests, after Kafka's `UniformHomogeneousAssignmentBuilderTest`,
//! `UniformHeterogeneousAssignmentBuilderTest`, `RangeAssignorTest` and
//! `CommonAssignorTests` (same situations, written for this module).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::*;

pub(super) fn tid(n: u8) -> TopicId {
    Uuid::from_u128(u128::from(n))
}

pub(super) fn mk(entries: &[(TopicId, &[i32])]) -> Assignment {
    entries.iter().filter(|(_, p)| !p.is_empty()).map(|(t, p)| (*t, p.iter().copied().collect())).collect()
}

fn member(topics: &[TopicId], assignment: Assignment) -> MemberSubscriptionAndAssignment {
    MemberSubscriptionAndAssignment {
        rack_id: None,
        instance_id: None,
        subscribed_topic_ids: topics.iter().copied().collect(),
        assignment: Arc::new(assignment),
    }
}

fn spec(members: Vec<(&str, MemberSubscriptionAndAssignment)>) -> GroupSpec {
    let members: BTreeMap<String, MemberSubscriptionAndAssignment> =
        members.into_iter().map(|(id, m)| (id.to_string(), m)).collect();
    let subscription_type = GroupSpec::subscription_type_of(&members);
    GroupSpec { members, subscription_type }
}

fn meta(topics: &[(TopicId, u32)]) -> TopicMetadata {
    TopicMetadata::new(topics.iter().copied())
}

fn of(out: &GroupAssignment, member: &str) -> Assignment {
    out.members.get(member).map(|m| (*m.partitions).clone()).unwrap_or_default()
}

fn size(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// The next round's input: the same members with `out` as their assignment.
pub(super) fn feed_back(group: &GroupSpec, out: &GroupAssignment) -> GroupSpec {
    let mut next = group.clone();
    for (id, m) in next.members.iter_mut() {
        m.assignment = out.members.get(id).map(|a| a.partitions.clone()).unwrap_or_default();
    }
    next
}

/// Partitions that changed owner between two assignments.
fn moved(before: &GroupAssignment, after: &GroupAssignment) -> usize {
    let owners = |a: &GroupAssignment| -> BTreeMap<(TopicId, i32), String> {
        a.members
            .iter()
            .flat_map(|(m, ma)| {
                ma.partitions.iter().flat_map(move |(t, ps)| ps.iter().map(move |p| ((*t, *p), m.clone())))
            })
            .collect()
    };
    let (b, a) = (owners(before), owners(after));
    b.iter().filter(|(k, m)| a.get(*k).is_some_and(|n| n != *m)).count()
}

/// Whether `member` still has everything it had in `before`.
fn kept_all(before: &GroupAssignment, after: &GroupAssignment, member: &str) -> bool {
    let now = of(after, member);
    of(before, member).iter().all(|(t, ps)| now.get(t).is_some_and(|n| ps.is_subset(n)))
}

/// Every partition of every subscribed topic assigned exactly once, to a
/// subscriber.
pub(super) fn check_valid(group: &GroupSpec, topics: &TopicMetadata, out: &GroupAssignment) {
    let mut seen: BTreeSet<(TopicId, i32)> = BTreeSet::new();
    for (id, ma) in &out.members {
        let m = group.members.get(id).expect("output member is a group member");
        let subscribed: &BTreeSet<TopicId> = match group.subscription_type {
            SubscriptionType::Homogeneous => &group.members.values().next().expect("non-empty").subscribed_topic_ids,
            SubscriptionType::Heterogeneous => &m.subscribed_topic_ids,
        };
        for (t, ps) in ma.partitions.iter() {
            assert!(subscribed.contains(t), "{id} got {t} without subscribing");
            assert!(!ps.is_empty(), "empty topic entry for {id}");
            for p in ps {
                assert!(*p >= 0 && (*p as u32) < topics.partitions[t], "{t}-{p} does not exist");
                assert!(seen.insert((*t, *p)), "{t}-{p} assigned twice");
            }
        }
    }
    let all: BTreeSet<TopicId> = group.members.values().flat_map(|m| m.subscribed_topic_ids.iter().copied()).collect();
    let expected: usize = all.iter().map(|t| topics.partitions[t] as usize).sum();
    assert_eq!(seen.len(), expected, "every subscribed partition is assigned");
}

// ---------------------------------------------------------------- lookup

#[test]
fn lookup_by_name_and_default_is_uniform() {
    assert_eq!(assignor_by_name("uniform").map(|a| a.name()), Some("uniform"));
    assert_eq!(assignor_by_name("range").map(|a| a.name()), Some("range"));
    assert!(assignor_by_name("Uniform").is_none());
    assert!(assignor_by_name("org.apache.kafka.coordinator.group.assignor.UniformAssignor").is_none());
    assert!(assignor_by_name("").is_none());
    assert_eq!(DEFAULT_ASSIGNOR.name(), "uniform");
    assert_eq!(ASSIGNORS.map(|a| a.name()), ["uniform", "range"]);
}

#[test]
fn kafka_uuid_order_is_signed() {
    let high_bit = Uuid::from_u64_pair(0x8000_0000_0000_0000, 0);
    let one = Uuid::from_u64_pair(1, 0);
    assert_eq!(kafka_uuid_cmp(&high_bit, &one), std::cmp::Ordering::Less);
    assert_eq!(high_bit.cmp(&one), std::cmp::Ordering::Greater);
    let low_high_bit = Uuid::from_u64_pair(1, 0x8000_0000_0000_0000);
    assert_eq!(kafka_uuid_cmp(&low_high_bit, &one), std::cmp::Ordering::Less);
}

#[test]
fn java_string_order_is_utf16() {
    // U+FF61 is one UTF-16 unit (0xFF61); U+1F600 starts with the surrogate
    // 0xD83D, so Java puts the emoji first while UTF-8 bytes put it last.
    assert_eq!(java_string_cmp("\u{1F600}", "\u{FF61}"), std::cmp::Ordering::Less);
    assert_eq!("\u{1F600}".cmp("\u{FF61}"), std::cmp::Ordering::Greater);
    assert_eq!(java_string_cmp("a", "b"), std::cmp::Ordering::Less);
}

#[test]
fn subscription_type_is_derived_like_kafka() {
    let g = spec(vec![("a", member(&[tid(1)], mk(&[]))), ("b", member(&[tid(1)], mk(&[])))]);
    assert_eq!(g.subscription_type, SubscriptionType::Homogeneous);
    let g = spec(vec![("a", member(&[tid(1)], mk(&[]))), ("b", member(&[tid(2)], mk(&[])))]);
    assert_eq!(g.subscription_type, SubscriptionType::Heterogeneous);
    assert_eq!(GroupSpec::subscription_type_of(&BTreeMap::new()), SubscriptionType::Homogeneous);
}

// ---------------------------------------------------------------- both

#[test]
fn empty_group_gets_empty_assignment() {
    for a in ASSIGNORS {
        for st in [SubscriptionType::Homogeneous, SubscriptionType::Heterogeneous] {
            let g = GroupSpec { members: BTreeMap::new(), subscription_type: st };
            assert_eq!(a.assign(&g, &meta(&[(tid(1), 3)])), Ok(GroupAssignment::default()));
        }
    }
}

#[test]
fn subscribing_to_an_unknown_topic_fails() {
    let topics = meta(&[(tid(1), 3)]);
    let g = spec(vec![("a", member(&[tid(2)], mk(&[])))]);
    for a in ASSIGNORS {
        assert_eq!(a.assign(&g, &topics), Err(AssignorError::UnknownTopic(tid(2))), "{}", a.name());
    }
    let g = spec(vec![("a", member(&[tid(1)], mk(&[]))), ("b", member(&[tid(1), tid(3)], mk(&[])))]);
    for a in ASSIGNORS {
        assert_eq!(a.assign(&g, &topics), Err(AssignorError::UnknownTopic(tid(3))), "{}", a.name());
    }
}

#[test]
fn racks_are_accepted_and_do_not_change_the_answer() {
    let mut topics = meta(&[(tid(1), 4), (tid(2), 3)]);
    let plain = spec(vec![("a", member(&[tid(1), tid(2)], mk(&[]))), ("b", member(&[tid(1), tid(2)], mk(&[])))]);
    let mut racked = plain.clone();
    for (i, m) in racked.members.values_mut().enumerate() {
        m.rack_id = Some(format!("rack{i}"));
    }
    topics.racks.insert(tid(1), vec![vec!["rack1".into()]; 4]);
    assert_eq!(topics.racks_for_partition(&tid(1), 2), ["rack1".to_string()]);
    assert!(topics.racks_for_partition(&tid(1), 9).is_empty());
    assert!(topics.racks_for_partition(&tid(2), 0).is_empty());
    for a in ASSIGNORS {
        assert_eq!(a.assign(&plain, &topics), a.assign(&racked, &topics));
    }
}

// ---------------------------------------------------------------- uniform, homogeneous

#[test]
fn uniform_one_member_without_subscription_gets_empty_map() {
    let g = spec(vec![("a", member(&[], mk(&[])))]);
    assert_eq!(UniformAssignor.assign(&g, &meta(&[(tid(1), 3)])), Ok(GroupAssignment::default()));
}

#[test]
fn uniform_first_assignment_two_members_two_topics() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 3), (t2, 3)]);
    let g = spec(vec![("a", member(&[t1, t2], mk(&[]))), ("b", member(&[t1, t2], mk(&[])))]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    // Unassigned partitions in topic then partition order, filled in member order.
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 1, 2])]));
    assert_eq!(of(&out, "b"), mk(&[(t2, &[0, 1, 2])]));
    check_valid(&g, &topics, &out);
}

#[test]
fn uniform_more_members_than_partitions() {
    let t1 = tid(1);
    let topics = meta(&[(t1, 2)]);
    let g = spec(vec![("a", member(&[t1], mk(&[]))), ("b", member(&[t1], mk(&[]))), ("c", member(&[t1], mk(&[])))]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    // a gives its extra slot up: the last two members must take the two
    // extra slots (KAFKA-18688). Every member has an entry, even empty.
    assert_eq!(out.members.get("a"), Some(&MemberAssignment::default()));
    assert_eq!(of(&out, "b"), mk(&[(t1, &[0])]));
    assert_eq!(of(&out, "c"), mk(&[(t1, &[1])]));
}

#[test]
fn uniform_rebalances_an_unbalanced_previous_assignment() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 3), (t2, 3)]);
    let g = spec(vec![
        ("a", member(&[t1, t2], mk(&[(t1, &[0, 1, 2]), (t2, &[0, 1])]))),
        ("b", member(&[t1, t2], mk(&[(t2, &[2])]))),
    ]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    // a keeps its first three partitions; the two above quota go to b.
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 1, 2])]));
    assert_eq!(of(&out, "b"), mk(&[(t2, &[0, 1, 2])]));
    check_valid(&g, &topics, &out);
}

#[test]
fn uniform_keeps_a_balanced_assignment_whoever_holds_the_extras() {
    // KAFKA-18688: 7 partitions over 3 members, the extra partition held by
    // the last member. Before the fix the first member claimed the extra slot
    // and a partition moved.
    let t1 = tid(1);
    let topics = meta(&[(t1, 7)]);
    let g = spec(vec![
        ("a", member(&[t1], mk(&[(t1, &[0, 1])]))),
        ("b", member(&[t1], mk(&[(t1, &[2, 3])]))),
        ("c", member(&[t1], mk(&[(t1, &[4, 5, 6])]))),
    ]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    for (id, m) in &g.members {
        assert_eq!(of(&out, id), *m.assignment, "{id} keeps its partitions");
    }
}

#[test]
fn uniform_last_members_must_take_the_remaining_extra_slots() {
    // 5 partitions, 3 members; nobody holds an extra partition, so the extra
    // slots go to the last members, which must take them.
    let t1 = tid(1);
    let topics = meta(&[(t1, 5)]);
    let g = spec(vec![
        ("a", member(&[t1], mk(&[(t1, &[0])]))),
        ("b", member(&[t1], mk(&[(t1, &[1])]))),
        ("c", member(&[t1], mk(&[(t1, &[2])]))),
    ]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0])]));
    assert_eq!(of(&out, "b"), mk(&[(t1, &[1, 3])]));
    assert_eq!(of(&out, "c"), mk(&[(t1, &[2, 4])]));
}

#[test]
fn uniform_partitions_added() {
    let (t1, t2) = (tid(1), tid(2));
    let g = spec(vec![
        ("a", member(&[t1, t2], mk(&[(t1, &[0, 2]), (t2, &[0])]))),
        ("b", member(&[t1, t2], mk(&[(t1, &[1]), (t2, &[1, 2])]))),
    ]);
    let topics = meta(&[(t1, 5), (t2, 5)]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    // Old partitions stay; the four new ones split two and two.
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 2, 3, 4]), (t2, &[0])]));
    assert_eq!(of(&out, "b"), mk(&[(t1, &[1]), (t2, &[1, 2, 3, 4])]));
}

#[test]
fn uniform_member_joins_with_minimal_moves() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 3), (t2, 3)]);
    let g = spec(vec![
        ("a", member(&[t1, t2], mk(&[(t1, &[0, 2]), (t2, &[0])]))),
        ("b", member(&[t1, t2], mk(&[(t1, &[1]), (t2, &[1, 2])]))),
        ("c", member(&[t1, t2], mk(&[]))),
    ]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 2])]));
    assert_eq!(of(&out, "b"), mk(&[(t1, &[1]), (t2, &[1])]));
    assert_eq!(of(&out, "c"), mk(&[(t2, &[0, 2])]));
}

#[test]
fn uniform_member_leaves_and_only_its_partitions_move() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 3), (t2, 3)]);
    let three = spec(vec![
        ("a", member(&[t1, t2], mk(&[]))),
        ("b", member(&[t1, t2], mk(&[]))),
        ("c", member(&[t1, t2], mk(&[]))),
    ]);
    let first = UniformAssignor.assign(&three, &topics).expect("assigns");
    let mut two = feed_back(&three, &first);
    two.members.remove("b");
    let out = UniformAssignor.assign(&two, &topics).expect("assigns");
    check_valid(&two, &topics, &out);
    for id in ["a", "c"] {
        assert!(kept_all(&first, &out, id), "{id} keeps all it had");
        assert_eq!(size(&of(&out, id)), 3);
    }
}

#[test]
fn uniform_topic_removed_from_subscriptions() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 3), (t2, 3)]);
    let g = spec(vec![
        ("a", member(&[t2], mk(&[(t1, &[0, 1]), (t2, &[0, 1])]))),
        ("b", member(&[t2], mk(&[(t1, &[2]), (t2, &[2])]))),
    ]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    assert_eq!(of(&out, "a"), mk(&[(t2, &[0, 1])]));
    assert_eq!(of(&out, "b"), mk(&[(t2, &[2])]));
}

#[test]
fn uniform_ignores_duplicates_and_partitions_that_do_not_exist() {
    let t1 = tid(1);
    let topics = meta(&[(t1, 4)]);
    let g = spec(vec![("a", member(&[t1], mk(&[(t1, &[0, 1, 7, -1])]))), ("b", member(&[t1], mk(&[(t1, &[1, 2])])))]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 1])]));
    assert_eq!(of(&out, "b"), mk(&[(t1, &[2, 3])]));
    let hetero = GroupSpec { subscription_type: SubscriptionType::Heterogeneous, ..g.clone() };
    let out = UniformAssignor.assign(&hetero, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 1])]));
}

#[test]
fn uniform_large_group_is_valid_balanced_and_stable() {
    let topics: Vec<(TopicId, u32)> = (1..=30).map(|i| (tid(i), u32::from(i) * 7 % 23 + 1)).collect();
    let ids: Vec<TopicId> = topics.iter().map(|(t, _)| *t).collect();
    let topics = meta(&topics);
    let names: Vec<String> = (0..47).map(|i| format!("member-{i:03}")).collect();
    let g = spec(names.iter().map(|n| (n.as_str(), member(&ids, mk(&[])))).collect());
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    let sizes: Vec<usize> = out.members.values().map(|m| size(&m.partitions)).collect();
    assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
    // Fed back, a balanced assignment does not move.
    let again = UniformAssignor.assign(&feed_back(&g, &out), &topics).expect("assigns");
    assert_eq!(again, out);
}

#[test]
fn assignment_is_deterministic() {
    let (t1, t2, t3) = (tid(1), tid(2), tid(3));
    let topics = meta(&[(t1, 2), (t2, 5), (t3, 7)]);
    for st in [SubscriptionType::Homogeneous, SubscriptionType::Heterogeneous] {
        let mut g = spec(vec![
            ("A", member(&[t1, t2, t3], mk(&[]))),
            ("B", member(&[t1, t2, t3], mk(&[]))),
            ("C", member(&[t1, t2, t3], mk(&[]))),
        ]);
        g.subscription_type = st;
        for a in ASSIGNORS {
            let first = a.assign(&g, &topics).expect("assigns");
            assert_eq!(a.assign(&g, &topics).expect("assigns"), first);
            // Fed back (Kafka's testReassignmentStickiness), nothing changes.
            assert_eq!(a.assign(&feed_back(&g, &first), &topics).expect("assigns"), first, "{} {st:?}", a.name());
        }
    }
}

#[test]
fn unchanged_assignments_are_handed_back_not_copied() {
    // Kafka's testAssignmentReuse: fed its own answer, an assignor returns the
    // very maps it was given.
    let (t1, t2, t3) = (tid(1), tid(2), tid(3));
    let topics = meta(&[(t1, 2), (t2, 5), (t3, 7)]);
    for st in [SubscriptionType::Homogeneous, SubscriptionType::Heterogeneous] {
        let mut g = spec(vec![
            ("A", member(&[t1, t2, t3], mk(&[]))),
            ("B", member(&[t1, t2, t3], mk(&[]))),
            ("C", member(&[t1, t2, t3], mk(&[]))),
        ]);
        g.subscription_type = st;
        for a in ASSIGNORS {
            let first = a.assign(&g, &topics).expect("assigns");
            let fed = feed_back(&g, &first);
            let second = a.assign(&fed, &topics).expect("assigns");
            for (id, m) in &fed.members {
                let out = &second.members[id].partitions;
                assert!(Arc::ptr_eq(out, &m.assignment), "{} {st:?}: {id} was copied", a.name());
            }
        }
    }
    // A member that loses a partition gets a new map; the others keep theirs.
    let g = spec(vec![("A", member(&[t1], mk(&[(t1, &[0, 1])]))), ("B", member(&[t1], mk(&[])))]);
    let out = UniformAssignor.assign(&g, &meta(&[(t1, 2)])).expect("assigns");
    assert!(!Arc::ptr_eq(&out.members["A"].partitions, &g.members["A"].assignment));
    assert_eq!(of(&out, "A"), mk(&[(t1, &[0])]));
}

// ---------------------------------------------------------------- uniform, heterogeneous

#[test]
fn heterogeneous_members_without_subscriptions_get_empty_map() {
    let g = GroupSpec {
        subscription_type: SubscriptionType::Heterogeneous,
        ..spec(vec![("a", member(&[], mk(&[]))), ("b", member(&[], mk(&[])))])
    };
    assert_eq!(UniformAssignor.assign(&g, &meta(&[(tid(1), 3)])), Ok(GroupAssignment::default()));
}

#[test]
fn heterogeneous_first_assignment_two_members_two_topics() {
    let (t1, t2, t3) = (tid(1), tid(2), tid(3));
    let topics = meta(&[(t1, 3), (t2, 3), (t3, 2)]);
    let g = spec(vec![("a", member(&[t1, t3], mk(&[]))), ("b", member(&[t3], mk(&[])))]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    // t1 (3 per subscriber) goes first, all to a; then t3 goes to b.
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 1, 2])]));
    assert_eq!(of(&out, "b"), mk(&[(t3, &[0, 1])]));
}

#[test]
fn heterogeneous_member_without_subscription_gets_empty_entry() {
    let t1 = tid(1);
    let topics = meta(&[(t1, 3)]);
    let g = spec(vec![("a", member(&[t1], mk(&[]))), ("b", member(&[], mk(&[])))]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 1, 2])]));
    assert_eq!(out.members.get("b"), Some(&MemberAssignment::default()));
}

#[test]
fn heterogeneous_more_members_than_partitions() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 3), (t2, 3)]);
    let g = spec(vec![
        ("a", member(&[t1], mk(&[]))),
        ("b", member(&[t1, t2], mk(&[]))),
        ("c", member(&[t1, t2], mk(&[]))),
        ("d", member(&[t2], mk(&[]))),
        ("e", member(&[t1, t2], mk(&[]))),
        ("f", member(&[t1, t2], mk(&[]))),
        ("g", member(&[t2], mk(&[]))),
    ]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    let sizes: Vec<usize> = out.members.values().map(|m| size(&m.partitions)).collect();
    assert!(sizes.iter().all(|s| *s <= 1), "{sizes:?}");
}

#[test]
fn heterogeneous_rebalances_an_unbalanced_previous_assignment() {
    let (t1, t2, t3) = (tid(1), tid(2), tid(3));
    let topics = meta(&[(t1, 3), (t2, 3), (t3, 2)]);
    let g = spec(vec![
        ("a", member(&[t1, t2], mk(&[(t1, &[0, 1, 2]), (t2, &[0, 1, 2])]))),
        ("b", member(&[t1, t2, t3], mk(&[(t3, &[0, 1])]))),
    ]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    // The topics tie on partitions per subscriber and subscriber count, so
    // t1 (lower id) is balanced first: a gives its highest t1 partitions
    // until both hold four, and t2 is then already balanced.
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0]), (t2, &[0, 1, 2])]));
    assert_eq!(of(&out, "b"), mk(&[(t1, &[1, 2]), (t3, &[0, 1])]));
}

#[test]
fn heterogeneous_member_removed_and_partitions_added() {
    let (t1, t2, t3) = (tid(1), tid(2), tid(3));
    let topics = meta(&[(t1, 4), (t2, 6), (t3, 2)]);
    let g = spec(vec![
        ("a", member(&[t1, t2], mk(&[]))),
        ("b", member(&[t1, t2, t3], mk(&[]))),
        ("c", member(&[t2, t3], mk(&[]))),
    ]);
    let first = UniformAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &first);
    let mut next = feed_back(&g, &first);
    next.members.remove("a");
    let out = UniformAssignor.assign(&next, &topics).expect("assigns");
    check_valid(&next, &topics, &out);
    // a's t1 partitions can only go to b, which then gives one t2
    // partition to c to even out; c keeps everything.
    assert!(kept_all(&first, &out, "c"));
    let b_before = of(&first, "b");
    let b_lost: usize =
        b_before.iter().map(|(t, ps)| ps.difference(&of(&out, "b").get(t).cloned().unwrap_or_default()).count()).sum();
    assert_eq!(b_lost, 1);
    let grown = meta(&[(t1, 8), (t2, 6), (t3, 5)]);
    let out2 = UniformAssignor.assign(&feed_back(&next, &out), &grown).expect("assigns");
    check_valid(&next, &grown, &out2);
    assert!(moved(&out, &out2) <= 2, "growth moves little: {}", moved(&out, &out2));
}

#[test]
fn heterogeneous_topic_removed_from_one_subscription() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 3), (t2, 3)]);
    let g = spec(vec![
        ("a", member(&[t1], mk(&[(t1, &[0, 1]), (t2, &[0, 1])]))),
        ("b", member(&[t1, t2], mk(&[(t1, &[2]), (t2, &[2])]))),
    ]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    // b takes all of t2 (its only subscriber), then gives t1-2 to a.
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 1, 2])]));
    assert_eq!(of(&out, "b"), mk(&[(t2, &[0, 1, 2])]));
}

#[test]
fn heterogeneous_partitions_run_out() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 2), (t2, 1)]);
    let g = spec(vec![
        ("a", member(&[t1], mk(&[(t1, &[0, 1])]))),
        ("b", member(&[t1, t2], mk(&[]))),
        ("c", member(&[t1], mk(&[]))),
    ]);
    let out = UniformAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0])]));
    assert_eq!(of(&out, "b"), mk(&[(t2, &[0])]));
    assert_eq!(of(&out, "c"), mk(&[(t1, &[1])]));
}

// ---------------------------------------------------------------- range

fn static_member(instance: &str, topics: &[TopicId]) -> MemberSubscriptionAndAssignment {
    MemberSubscriptionAndAssignment { instance_id: Some(instance.into()), ..member(topics, mk(&[])) }
}

#[test]
fn range_same_subscriptions_are_co_partitioned() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 3), (t2, 3)]);
    let g = spec(vec![("a", member(&[t1, t2], mk(&[]))), ("b", member(&[t1, t2], mk(&[])))]);
    let out = RangeAssignor.assign(&g, &topics).expect("assigns");
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 1]), (t2, &[0, 1])]));
    assert_eq!(of(&out, "b"), mk(&[(t1, &[2]), (t2, &[2])]));
}

#[test]
fn range_different_subscriptions() {
    let (t1, t2, t3) = (tid(1), tid(2), tid(3));
    let topics = meta(&[(t1, 3), (t2, 3), (t3, 2)]);
    let g =
        spec(vec![("a", member(&[t1, t2], mk(&[]))), ("b", member(&[t3], mk(&[]))), ("c", member(&[t2, t3], mk(&[])))]);
    let out = RangeAssignor.assign(&g, &topics).expect("assigns");
    check_valid(&g, &topics, &out);
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 1, 2]), (t2, &[0, 1])]));
    assert_eq!(of(&out, "b"), mk(&[(t3, &[0])]));
    assert_eq!(of(&out, "c"), mk(&[(t2, &[2]), (t3, &[1])]));
}

#[test]
fn range_more_members_than_partitions_and_empty_entries() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 2), (t2, 1)]);
    let g = spec(vec![
        ("a", member(&[t1, t2], mk(&[]))),
        ("b", member(&[t1, t2], mk(&[]))),
        ("c", member(&[t1, t2], mk(&[]))),
    ]);
    let out = RangeAssignor.assign(&g, &topics).expect("assigns");
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0]), (t2, &[0])]));
    assert_eq!(of(&out, "b"), mk(&[(t1, &[1])]));
    assert_eq!(out.members.get("c"), Some(&MemberAssignment::default()));
    // Unlike uniform, range answers an entry per member with no subscription.
    let g = spec(vec![("a", member(&[], mk(&[]))), ("b", member(&[], mk(&[])))]);
    let out = RangeAssignor.assign(&g, &topics).expect("assigns");
    assert_eq!(out.members.len(), 2);
}

#[test]
fn range_static_members_keep_their_ranges_across_member_ids() {
    let (t1, t2) = (tid(1), tid(2));
    let topics = meta(&[(t1, 3), (t2, 3)]);
    let g = spec(vec![("m-a", static_member("i-b", &[t1, t2])), ("m-b", static_member("i-a", &[t1, t2]))]);
    let out = RangeAssignor.assign(&g, &topics).expect("assigns");
    // Ordered by instance id: i-a (m-b) first.
    assert_eq!(of(&out, "m-b"), mk(&[(t1, &[0, 1]), (t2, &[0, 1])]));
    assert_eq!(of(&out, "m-a"), mk(&[(t1, &[2]), (t2, &[2])]));
    // i-a restarts as m-z: same ranges.
    let g = spec(vec![("m-a", static_member("i-b", &[t1, t2])), ("m-z", static_member("i-a", &[t1, t2]))]);
    let out = RangeAssignor.assign(&g, &topics).expect("assigns");
    assert_eq!(of(&out, "m-z"), mk(&[(t1, &[0, 1]), (t2, &[0, 1])]));
    assert_eq!(of(&out, "m-a"), mk(&[(t1, &[2]), (t2, &[2])]));
}

#[test]
fn range_mixed_static_members_go_first() {
    let t1 = tid(1);
    let topics = meta(&[(t1, 5)]);
    let g = spec(vec![("a", member(&[t1], mk(&[]))), ("b", static_member("z", &[t1])), ("c", member(&[t1], mk(&[])))]);
    let out = RangeAssignor.assign(&g, &topics).expect("assigns");
    assert_eq!(of(&out, "b"), mk(&[(t1, &[0, 1])]));
    assert_eq!(of(&out, "a"), mk(&[(t1, &[2, 3])]));
    assert_eq!(of(&out, "c"), mk(&[(t1, &[4])]));
}

#[test]
fn range_member_added_partition_added_and_subscription_removed() {
    let (t1, t2) = (tid(1), tid(2));
    let g = spec(vec![
        ("a", member(&[t1, t2], mk(&[]))),
        ("b", member(&[t1, t2], mk(&[]))),
        ("c", member(&[t1, t2], mk(&[]))),
    ]);
    let out = RangeAssignor.assign(&g, &meta(&[(t1, 4), (t2, 3)])).expect("assigns");
    assert_eq!(of(&out, "a"), mk(&[(t1, &[0, 1]), (t2, &[0])]));
    assert_eq!(of(&out, "b"), mk(&[(t1, &[2]), (t2, &[1])]));
    assert_eq!(of(&out, "c"), mk(&[(t1, &[3]), (t2, &[2])]));
    // t1 dropped by everyone; its partitions leave the assignment.
    let g = spec(vec![("a", member(&[t2], mk(&[]))), ("b", member(&[t2], mk(&[])))]);
    let out = RangeAssignor.assign(&g, &meta(&[(t1, 4), (t2, 3)])).expect("assigns");
    assert_eq!(of(&out, "a"), mk(&[(t2, &[0, 1])]));
    assert_eq!(of(&out, "b"), mk(&[(t2, &[2])]));
}
