//! The target assignment: what each member should own at an epoch, computed
//! by a server-side assignor (Kafka's `TargetAssignmentBuilder`).
//!
//! The assignors themselves live elsewhere (`consumer::assignor`, Kafka's
//! `uniform` and `range`); this module reaches them only through the
//! [`TargetAssigner`] seam, whose input and output mirror Kafka's
//! `api.assignor` package (GroupSpec, member subscription and assignment,
//! subscribed topic metadata, group assignment), so an adapter from the real
//! `PartitionAssignor` is a few lines. Only the members whose target changed
//! get a record, then the epoch record, as in Kafka.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use uuid::Uuid;

use super::assignor;
use super::group::{ConsumerGroup, ConsumerMember};
use super::records::{Assignment, TargetAssignmentMemberValue, TargetAssignmentMetadataValue};
use crate::coordinator::records::{ConsumerKey, Record, RecordValue};

/// The topics a shard knows (the catalog, or the upstream's metadata in
/// sidecar mode), as an input of the pure core.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicImage {
    by_name: BTreeMap<String, (Uuid, i32)>,
    /// Identifies the set of topic names (see [`TopicImage::names_version`]).
    names_version: i64,
}

impl TopicImage {
    pub fn new(topics: impl IntoIterator<Item = (String, Uuid, i32)>) -> TopicImage {
        let by_name: BTreeMap<String, (Uuid, i32)> = topics.into_iter().map(|(n, id, p)| (n, (id, p))).collect();
        let names_version = super::regex::names_version(by_name.keys().map(String::as_str));
        TopicImage { by_name, names_version }
    }

    /// A stable fingerprint of the set of topic names: what a regular
    /// expression was resolved against (the `Version` of a
    /// ConsumerGroupRegularExpression record). Kafka stores the offset of
    /// its metadata image there; a fingerprint serves the same purpose
    /// ("have topics appeared or gone since?") without a global counter.
    pub fn names_version(&self) -> i64 {
        self.names_version
    }

    /// Every topic name, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<(Uuid, i32)> {
        self.by_name.get(name).copied()
    }

    pub fn name_of(&self, id: &Uuid) -> Option<&str> {
        self.by_name.iter().find(|(_, (i, _))| i == id).map(|(n, _)| n.as_str())
    }
}

/// What the assignor sees of one member (Kafka's
/// `MemberSubscriptionAndAssignmentSpec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpec {
    pub rack_id: Option<String>,
    pub instance_id: Option<String>,
    pub subscribed_topic_ids: BTreeSet<Uuid>,
    /// The member's current target (stickiness).
    pub assignment: Assignment,
}

/// Kafka's `GroupSpec`: every member, and whether all subscribe to the same
/// topics (`SubscriptionType.HOMOGENEOUS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSpec {
    pub members: BTreeMap<String, MemberSpec>,
    pub homogeneous: bool,
}

/// One subscribed topic (Kafka's `SubscribedTopicDescriber`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    pub partitions: i32,
}

/// The subscribed topics that exist, by id.
pub type SubscribedTopics = BTreeMap<Uuid, TopicMeta>;

/// The seam to a server-side assignor: member id → its target. A member
/// missing from the answer gets nothing. An error fails the heartbeat
/// with UNKNOWN_SERVER_ERROR, as Kafka's `PartitionAssignorException`.
pub trait TargetAssigner: Send + Sync {
    fn name(&self) -> &str;
    fn assign(&self, group: &GroupSpec, topics: &SubscribedTopics) -> Result<BTreeMap<String, Assignment>, String>;
}

/// The assignors a shard offers, the first being the default
/// (`group.consumer.assignors`).
#[derive(Clone, Default)]
pub struct Assigners(pub Vec<Arc<dyn TargetAssigner>>);

impl std::fmt::Debug for Assigners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|a| a.name())).finish()
    }
}

/// The server-side assignor called `name`, if kcoord has one: the one
/// place the assignors of `consumer::assignor` (Kafka's `uniform` and
/// `range`) plug in.
pub fn builtin(name: &str) -> Option<Arc<dyn TargetAssigner>> {
    assignor::assignor_by_name(name).map(|a| Arc::new(Builtin(a)) as Arc<dyn TargetAssigner>)
}

/// A `consumer::assignor` assignor seen through the [`TargetAssigner`] seam.
struct Builtin(&'static dyn assignor::PartitionAssignor);

impl TargetAssigner for Builtin {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn assign(&self, group: &GroupSpec, topics: &SubscribedTopics) -> Result<BTreeMap<String, Assignment>, String> {
        let members = group
            .members
            .iter()
            .map(|(id, m)| {
                let spec = assignor::MemberSubscriptionAndAssignment {
                    rack_id: m.rack_id.clone(),
                    instance_id: m.instance_id.clone(),
                    subscribed_topic_ids: m.subscribed_topic_ids.clone(),
                    assignment: Arc::new(m.assignment.clone()),
                };
                (id.clone(), spec)
            })
            .collect();
        let subscription_type = if group.homogeneous {
            assignor::SubscriptionType::Homogeneous
        } else {
            assignor::SubscriptionType::Heterogeneous
        };
        let spec = assignor::GroupSpec { members, subscription_type };
        let described =
            assignor::TopicMetadata::new(topics.iter().map(|(id, t)| (*id, u32::try_from(t.partitions).unwrap_or(0))));
        let out = self.0.assign(&spec, &described).map_err(|e| e.to_string())?;
        Ok(out
            .members
            .into_iter()
            .map(|(id, m)| (id, Arc::try_unwrap(m.partitions).unwrap_or_else(|shared| (*shared).clone())))
            .collect())
    }
}

impl Assigners {
    /// The configured names resolved by [`builtin`]; unknown names are
    /// left out (and logged).
    pub fn configured(names: &[String]) -> Assigners {
        Assigners(
            names
                .iter()
                .filter_map(|n| {
                    let a = builtin(n);
                    if a.is_none() {
                        tracing::debug!(assignor = %n, "no server-side assignor of this name is built in");
                    }
                    a
                })
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn TargetAssigner>> {
        self.0.iter().find(|a| a.name() == name)
    }

    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|a| a.name()).collect()
    }

    /// Kafka's `computePreferredServerAssignor`: the assignor most members
    /// name (ties broken by name, for determinism), else the default.
    pub fn preferred<'a>(
        &'a self,
        members: impl Iterator<Item = &'a ConsumerMember>,
    ) -> Option<&'a Arc<dyn TargetAssigner>> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for m in members {
            if let Some(a) = m.metadata.server_assignor.as_deref() {
                *counts.entry(a).or_insert(0) += 1;
            }
        }
        let best = counts.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(n, _)| *n);
        best.and_then(|n| self.get(n)).or_else(|| self.0.first())
    }
}

/// The outcome of a target computation.
pub struct NewTarget {
    /// TargetAssignmentMember records for changed members, then the
    /// TargetAssignmentMetadata record.
    pub records: Vec<Record>,
    /// The new target of every member in the computation.
    pub targets: BTreeMap<String, Assignment>,
}

/// The members of `group` after replacing or adding `updated` and removing
/// `removed` (a static member's previous id), with the target each starts
/// from: a replacing static member inherits its predecessor's.
pub fn members_after<'a>(
    group: &'a ConsumerGroup,
    updated: &'a ConsumerMember,
    removed: Option<&str>,
) -> BTreeMap<&'a str, (&'a ConsumerMember, Assignment)> {
    let mut out: BTreeMap<&str, (&ConsumerMember, Assignment)> =
        group.members.iter().map(|(id, m)| (id.as_str(), (m, group.target_of(id)))).collect();
    if let Some(r) = removed {
        out.remove(r);
    }
    let start = match (group.target.get(&updated.member_id), removed) {
        (Some(t), _) => t.clone(),
        (None, Some(prev)) => group.target_of(prev),
        (None, None) => Assignment::new(),
    };
    out.insert(updated.member_id.as_str(), (updated, start));
    out
}

/// Computes the target at `epoch` for `members`, and the records that
/// persist it. A member subscribes to its topic names and to what its
/// regular expression resolved to in `regexes` (Kafka's
/// `TargetAssignmentBuilder.withResolvedRegularExpressions`).
pub fn compute(
    group_id: &str,
    epoch: i32,
    previous: &BTreeMap<String, Assignment>,
    members: &BTreeMap<&str, (&ConsumerMember, Assignment)>,
    image: &TopicImage,
    regexes: &super::regex::Resolved,
    assigner: &dyn TargetAssigner,
) -> Result<NewTarget, String> {
    let mut topics = SubscribedTopics::new();
    let mut specs = BTreeMap::new();
    let mut subscriptions: BTreeSet<BTreeSet<Uuid>> = BTreeSet::new();
    for (id, (m, start)) in members {
        let mut ids = BTreeSet::new();
        for name in super::regex::member_topics(m, regexes) {
            if let Some((tid, partitions)) = image.get(name) {
                ids.insert(tid);
                topics.insert(tid, TopicMeta { name: name.clone(), partitions });
            }
        }
        subscriptions.insert(ids.clone());
        specs.insert(
            id.to_string(),
            MemberSpec {
                rack_id: m.metadata.rack_id.clone(),
                instance_id: m.metadata.instance_id.clone(),
                subscribed_topic_ids: ids,
                assignment: start.clone(),
            },
        );
    }
    let spec = GroupSpec { members: specs, homogeneous: subscriptions.len() <= 1 };
    let mut result = assigner.assign(&spec, &topics)?;
    let mut records = Vec::new();
    let mut targets = BTreeMap::new();
    for id in spec.members.keys() {
        let new = result.remove(id).unwrap_or_default();
        let new: Assignment = new.into_iter().filter(|(_, ps)| !ps.is_empty()).collect();
        if previous.get(id) != Some(&new) {
            records.push(Record::consumer(
                group_id,
                ConsumerKey::TargetMember(id.clone()),
                Some(RecordValue::ConsumerTargetMember(TargetAssignmentMemberValue { partitions: new.clone() })),
            ));
        }
        targets.insert(id.clone(), new);
    }
    records.push(target_metadata_record(group_id, epoch));
    Ok(NewTarget { records, targets })
}

/// The record of the epoch the group's target assignment was computed at.
pub fn target_metadata_record(group_id: &str, epoch: i32) -> Record {
    Record::consumer(
        group_id,
        ConsumerKey::TargetMetadata,
        Some(RecordValue::ConsumerTargetMetadata(TargetAssignmentMetadataValue { assignment_epoch: epoch })),
    )
}

#[cfg(test)]
pub mod testing {
    //! A simple deterministic assignor for tests: every partition of every
    //! subscribed topic, in (topic id, partition) order, dealt round-robin
    //! over the members subscribed to its topic, in member id order.
    use super::*;

    pub struct RoundRobin(pub &'static str);

    impl TargetAssigner for RoundRobin {
        fn name(&self) -> &str {
            self.0
        }

        fn assign(&self, group: &GroupSpec, topics: &SubscribedTopics) -> Result<BTreeMap<String, Assignment>, String> {
            let mut out: BTreeMap<String, Assignment> = BTreeMap::new();
            for (tid, meta) in topics {
                let subscribers: Vec<&String> = group
                    .members
                    .iter()
                    .filter(|(_, m)| m.subscribed_topic_ids.contains(tid))
                    .map(|(id, _)| id)
                    .collect();
                if subscribers.is_empty() {
                    continue;
                }
                for p in 0..meta.partitions {
                    let who = subscribers[p as usize % subscribers.len()];
                    out.entry(who.clone()).or_default().entry(*tid).or_default().insert(p);
                }
            }
            Ok(out)
        }
    }

    /// An assignor that always fails.
    pub struct Failing;

    impl TargetAssigner for Failing {
        fn name(&self) -> &str {
            "failing"
        }

        fn assign(&self, _: &GroupSpec, _: &SubscribedTopics) -> Result<BTreeMap<String, Assignment>, String> {
            Err("no".into())
        }
    }

    pub fn assigners() -> Assigners {
        Assigners(vec![Arc::new(RoundRobin("uniform")), Arc::new(RoundRobin("range")), Arc::new(Failing)])
    }
}
