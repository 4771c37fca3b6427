//! Explainable epochs: every KIP-848 consumer group remembers its last
//! group-epoch bumps, each with its cause, when the target assignment for
//! it was computed, and how long its members took to reach it. This is the
//! consumer-group counterpart of the classic groups' rebalance history
//! (`classic::history`), kept with the same bound (`group.rebalance_history`).
//!
//! Like the classic history it is in-memory side data of the live path, not
//! durable state: the group itself changes only by replaying records, and
//! this module only *watches* what an operation did to the group. It is
//! derived from the group as the store holds it before and after each
//! operation (a [`Watch`] taken before, compared after), plus what the
//! operation was (a heartbeat, a leave, which timer); time is the core's
//! injected clock. So the same operations at the same times give the same
//! history, and it never feeds back into the group. A restart starts with
//! an empty history, as for classic groups.
//!
//! The watch costs O(1) per operation (the epochs, the member count, the
//! calling member's subscription). Causes and the set of members still
//! reconciling are computed only when the group epoch moves; then each
//! operation checks only the members it names, so following convergence
//! costs O(log n) per heartbeat.

use std::collections::{BTreeMap, BTreeSet};

use crate::coordinator::bounded_history::{BoundedHistory, Ongoing};
use std::sync::Arc;

use serde::Serialize;

use super::group::ConsumerGroup;
use super::heartbeat::MemberTimer;
use super::target::{Assigners, TopicImage};
use crate::coordinator::core::Request;
use crate::coordinator::store::Store;
use crate::coordinator::{FastMap, Groups};

/// At most this many names (topics, members, patterns) are listed in one
/// cause; the rest are counted in `more`.
pub const MAX_LISTED: usize = 32;

/// Why the group epoch moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cause {
    /// A member joined (a ConsumerGroupHeartbeat with epoch 0, or a classic
    /// member's JoinGroup); a static member may have taken over an instance
    /// id from `replaced_member_id`.
    MemberJoined {
        member_id: String,
        instance_id: Option<String>,
        client_id: String,
        client_host: String,
        /// `consumer` or `classic`.
        member_type: &'static str,
        replaced_member_id: Option<String>,
    },
    /// Members left (epoch −1, or a classic LeaveGroup).
    MemberLeft { member_ids: Vec<String> },
    /// A member stopped heartbeating for its session timeout.
    SessionExpired { member_id: String },
    /// A member was fenced by a timer other than its session: `rebalance_timeout`
    /// (it did not revoke in time), `join_timeout` or `sync_timeout`
    /// (classic members).
    MemberFenced { member_id: String, reason: &'static str },
    /// A member changed its topic names or its regular expression.
    SubscriptionChanged {
        member_id: String,
        topics_before: Vec<String>,
        topics_after: Vec<String>,
        regex_before: Option<String>,
        regex_after: Option<String>,
    },
    /// Regular expressions resolved to other topics (a topic matching one
    /// appeared or disappeared).
    RegexResolved { patterns: Vec<ResolvedPattern> },
    /// Subscribed topics grew, were created or deleted.
    TopicMetadataChanged { resized: Vec<Resized>, created: Vec<String>, deleted: Vec<String> },
    /// The server-side assignor the members prefer changed.
    AssignorChanged { assignor_before: String, assignor_after: String },
    /// A non-empty classic group became this consumer group when its first
    /// consumer-protocol member joined (online upgrade).
    MigratedFromClassic { member_id: String, classic_generation: i32, classic_members: usize },
    /// Nothing the watch saw explains it (e.g. the first change after a
    /// restart, before the topics were known).
    Other,
}

impl Cause {
    /// A short label (metrics, logs, group summaries).
    pub fn kind(&self) -> &'static str {
        match self {
            Cause::MemberJoined { .. } => "member_joined",
            Cause::MemberLeft { .. } => "member_left",
            Cause::SessionExpired { .. } => "session_expired",
            Cause::MemberFenced { .. } => "member_fenced",
            Cause::SubscriptionChanged { .. } => "subscription_changed",
            Cause::RegexResolved { .. } => "regex_resolved",
            Cause::TopicMetadataChanged { .. } => "topic_metadata_changed",
            Cause::AssignorChanged { .. } => "assignor_changed",
            Cause::MigratedFromClassic { .. } => "migrated_from_classic",
            Cause::Other => "other",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedPattern {
    pub pattern: String,
    pub topics: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resized {
    pub topic: String,
    pub partitions_before: i32,
    pub partitions_after: i32,
}

/// How an epoch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Members are still moving to the target.
    InProgress,
    /// Every member reached the target assignment epoch.
    Converged,
    /// The group epoch moved again first.
    Superseded,
    /// No member was left.
    Empty,
}

impl Ongoing for EpochChange {
    fn in_progress(&self) -> bool {
        self.outcome == Outcome::InProgress
    }
}

/// One group-epoch bump.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EpochChange {
    pub cause: Cause,
    pub started_ms: i64,
    pub group_epoch_before: i32,
    pub group_epoch: i32,
    /// The server-side assignor the target is computed with.
    pub assignor: String,
    pub members: usize,
    /// When the target assignment of `group_epoch` was computed (the
    /// assignment epoch reached the group epoch).
    pub assigned_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    /// Start → every member reconciled to the target (only when converged).
    pub convergence_ms: Option<i64>,
    pub outcome: Outcome,
}

/// What an operation is, as far as the history cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// ConsumerGroupHeartbeat (epoch −1 is a leave).
    Heartbeat { member_id: String, instance_id: Option<String>, epoch: i32 },
    /// A classic member's JoinGroup inside a consumer group.
    ClassicJoin { member_id: String, instance_id: Option<String> },
    /// A classic LeaveGroup naming these members.
    ClassicLeave { member_ids: Vec<String> },
    /// SyncGroup or Heartbeat of a classic member.
    ClassicOther { member_id: String },
    /// One of a member's timers fired.
    Timer { which: MemberTimer, member_id: String },
    /// Anything else about the group (DeleteGroups, offsets).
    Other,
}

impl Trigger {
    /// The trigger of a request, if it may change a consumer group.
    fn of(req: &Request) -> Option<(&str, Trigger)> {
        Some(match req {
            Request::ConsumerHeartbeat(r) => (
                &r.group_id,
                Trigger::Heartbeat {
                    member_id: r.member_id.clone(),
                    instance_id: r.instance_id.clone(),
                    epoch: r.member_epoch,
                },
            ),
            Request::Join(r) => (
                &r.group_id,
                Trigger::ClassicJoin { member_id: r.member_id.clone(), instance_id: r.group_instance_id.clone() },
            ),
            Request::Leave(r) => (
                &r.group_id,
                Trigger::ClassicLeave { member_ids: r.members.iter().map(|m| m.member_id.clone()).collect() },
            ),
            Request::Sync(r) => (&r.group_id, Trigger::ClassicOther { member_id: r.member_id.clone() }),
            Request::Heartbeat(r) => (&r.group_id, Trigger::ClassicOther { member_id: r.member_id.clone() }),
            Request::Delete(r) => (&r.group_id, Trigger::Other),
            _ => return None,
        })
    }

    fn member_ids(&self) -> Vec<&str> {
        match self {
            Trigger::Heartbeat { member_id, .. }
            | Trigger::ClassicJoin { member_id, .. }
            | Trigger::ClassicOther { member_id }
            | Trigger::Timer { member_id, .. } => vec![member_id.as_str()],
            Trigger::ClassicLeave { member_ids } => member_ids.iter().map(String::as_str).collect(),
            Trigger::Other => Vec::new(),
        }
    }
}

/// A member's subscription before the operation.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Subscription {
    topics: Vec<String>,
    regex: Option<String>,
}

/// A member the operation names, as it was before.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MemberBefore {
    Absent,
    /// Present; its subscription is kept only when the request carries
    /// one (a steady heartbeat does not, and costs no copy).
    Present(Option<Subscription>),
}

/// The group as it was before one operation: just enough to explain a
/// change of its epoch afterwards.
#[derive(Debug)]
pub struct Watch {
    group_id: String,
    trigger: Trigger,
    /// (group epoch, member count), if the consumer group existed.
    before: Option<(i32, usize)>,
    /// Each member the trigger names, in `Trigger::member_ids` order.
    members: Vec<MemberBefore>,
    /// The member holding the trigger's instance id.
    instance_holder: Option<String>,
    /// A non-empty classic group of the same id: (generation, members).
    classic: Option<(i32, usize)>,
    /// The topic metadata the shard knew before.
    image: Arc<TopicImage>,
}

impl Watch {
    /// Looks at the group a request may change, before it is served.
    /// `None` (and no allocation) when the request cannot touch a consumer
    /// group: no consumer group of that id, and not a ConsumerGroupHeartbeat
    /// that could create one.
    pub fn request(req: &Request, store: &Store, classic: &Groups, image: &Arc<TopicImage>) -> Option<Watch> {
        let req = req.unwrapped();
        let heartbeat = match req {
            Request::ConsumerHeartbeat(r) => {
                Some(r.subscribed_topic_names.is_some() || r.subscribed_topic_regex.is_some())
            }
            _ => None,
        };
        if heartbeat.is_none() && store.consumer_group(req.group_id()?).is_none() {
            return None;
        }
        let (group_id, trigger) = Trigger::of(req)?;
        // A JoinGroup always carries the subscription.
        let subscribes = heartbeat.unwrap_or(matches!(req, Request::Join(_)));
        Some(Watch::before(group_id.to_string(), trigger, subscribes, store, Some(classic), image))
    }

    /// Looks at the group before a timer fires for one of its members.
    pub fn timer(
        group_id: &str,
        which: MemberTimer,
        member: &str,
        store: &Store,
        image: &Arc<TopicImage>,
    ) -> Option<Watch> {
        store.consumer_group(group_id)?;
        let trigger = Trigger::Timer { which, member_id: member.to_string() };
        Some(Watch::before(group_id.to_string(), trigger, false, store, None, image))
    }

    fn before(
        group_id: String,
        trigger: Trigger,
        subscribes: bool,
        store: &Store,
        classic: Option<&Groups>,
        image: &Arc<TopicImage>,
    ) -> Watch {
        let g = store.consumer_group(&group_id);
        let members = trigger
            .member_ids()
            .into_iter()
            .map(|id| match g.and_then(|g| g.members.get(id)) {
                None => MemberBefore::Absent,
                Some(m) => MemberBefore::Present(subscribes.then(|| Subscription {
                    topics: m.metadata.subscribed_topic_names.clone(),
                    regex: m.metadata.subscribed_topic_regex.clone(),
                })),
            })
            .collect();
        let instance = match &trigger {
            Trigger::Heartbeat { instance_id, .. } | Trigger::ClassicJoin { instance_id, .. } => instance_id.as_deref(),
            _ => None,
        };
        let instance_holder = instance.and_then(|i| g.and_then(|g| g.static_member(i))).map(|m| m.member_id.clone());
        let classic = match g {
            Some(_) => None,
            None => classic
                .and_then(|c| c.get(&group_id))
                .filter(|c| !c.members.is_empty())
                .map(|c| (c.generation_id, c.members.len())),
        };
        Watch {
            before: g.map(|g| (g.group_epoch, g.members.len())),
            group_id,
            trigger,
            members,
            instance_holder,
            classic,
            image: image.clone(),
        }
    }
}

/// What one group's history keeps besides its entries: the baselines the
/// next cause is explained against.
#[derive(Debug, Default)]
struct Tracker {
    entries: BoundedHistory<EpochChange>,
    /// Members not yet reconciled to the target of the entry in progress
    /// (`None` until its target assignment is computed).
    waiting: Option<BTreeSet<String>>,
    /// Subscribed topic → partitions (absent: the topic does not exist),
    /// as of the last entry.
    topics: Option<BTreeMap<String, Option<i32>>>,
    /// Pattern → resolved topics, as of the last entry.
    regexes: BTreeMap<String, Vec<String>>,
    assignor: Option<String>,
}

/// The histories of a shard's consumer groups (bounded: one per consumer
/// group, `capacity` entries each).
#[derive(Debug, Default)]
pub struct ConsumerHistories {
    groups: FastMap<String, Tracker>,
}

/// What [`ConsumerHistories::after`] needs besides the watch.
pub struct Seen<'a> {
    pub store: &'a Store,
    pub assigners: &'a Assigners,
    pub topics: &'a TopicImage,
    pub now: i64,
    pub capacity: usize,
}

impl ConsumerHistories {
    /// The group's epoch changes, oldest first.
    pub fn entries(&self, group_id: &str) -> Vec<EpochChange> {
        self.groups.get(group_id).map(|t| t.entries.iter().cloned().collect()).unwrap_or_default()
    }

    /// When each remembered epoch bump started, oldest first.
    pub fn starts(&self, group_id: &str) -> Vec<i64> {
        self.groups.get(group_id).map(|t| t.entries.iter().map(|e| e.started_ms).collect()).unwrap_or_default()
    }

    pub fn last_cause(&self, group_id: &str) -> Option<&'static str> {
        self.groups.get(group_id)?.entries.last().map(|e| e.cause.kind())
    }

    /// Forgets groups that no longer exist as consumer groups.
    pub fn retain_existing(&mut self, store: &Store) {
        self.groups.retain(|g, _| store.consumer_group(g).is_some());
    }

    pub fn clear(&mut self) {
        self.groups.clear();
    }

    /// Compares the group after an operation with its watch: records a new
    /// entry when the group epoch moved, and follows the members towards
    /// the target of the entry in progress.
    pub fn after(&mut self, w: Watch, seen: &Seen) {
        let Some(g) = seen.store.consumer_group(&w.group_id) else {
            // Deleted, or downgraded to a classic group (whose own history
            // records it as `downgraded`).
            self.groups.remove(&w.group_id);
            return;
        };
        if !self.groups.contains_key(&w.group_id) {
            self.groups.insert(w.group_id.clone(), Tracker::default());
        }
        let Some(t) = self.groups.get_mut(&w.group_id) else { return };
        let moved = w.before.is_none_or(|(epoch, _)| epoch != g.group_epoch);
        if moved {
            let cause = explain(&w, g, t, seen);
            // A group upgraded from a classic group continues its generation.
            let before = w.before.map(|(e, _)| e).or(w.classic.map(|(generation, _)| generation)).unwrap_or(0);
            t.start(g, cause, before, seen);
        } else if t.topics.is_none() {
            // First sight of the group (e.g. after a restart): the baseline
            // is what it subscribes to now.
            t.topics = Some(subscribed_partitions(g, seen.topics));
            t.regexes = resolved(g);
        }
        t.follow(g, &w, seen.now);
    }
}

impl Tracker {
    fn start(&mut self, g: &ConsumerGroup, cause: Cause, epoch_before: i32, seen: &Seen) {
        let assignor = preferred(g, seen.assigners);
        if let Some(cur) = self.current() {
            cur.ended_ms = Some(seen.now);
            cur.outcome = Outcome::Superseded;
            let ended = cur.clone();
            log_ended(&g.group_id, &ended);
        }
        metrics::counter!("kcoord_consumer_group_epochs_total", "cause" => cause.kind()).increment(1);
        tracing::info!(
            group = %g.group_id,
            group_epoch = g.group_epoch,
            cause = cause.kind(),
            detail = ?cause,
            "consumer group epoch bumped"
        );
        self.waiting = None;
        self.topics = Some(subscribed_partitions(g, seen.topics));
        self.regexes = resolved(g);
        self.assignor = Some(assignor.clone());
        self.entries.push(
            EpochChange {
                cause,
                started_ms: seen.now,
                group_epoch_before: epoch_before,
                group_epoch: g.group_epoch,
                assignor,
                members: g.members.len(),
                assigned_ms: None,
                ended_ms: None,
                convergence_ms: None,
                outcome: Outcome::InProgress,
            },
            seen.capacity,
        );
    }

    fn current(&mut self) -> Option<&mut EpochChange> {
        self.entries.current()
    }

    /// Follows the entry in progress: the target computed, members
    /// reconciled to it (only those the operation named are looked at,
    /// plus a prune when members went away), the end.
    fn follow(&mut self, g: &ConsumerGroup, w: &Watch, now: i64) {
        let waiting = &mut self.waiting;
        let Some(cur) = self.entries.current() else { return };
        if g.members.is_empty() {
            cur.ended_ms = Some(now);
            cur.outcome = Outcome::Empty;
            *waiting = None;
            log_ended(&g.group_id, cur);
            return;
        }
        if g.assignment_epoch < cur.group_epoch {
            return;
        }
        cur.assigned_ms.get_or_insert(now);
        let target = g.assignment_epoch;
        let set = waiting.get_or_insert_with(|| {
            g.members.values().filter(|m| !m.is_reconciled_to(target)).map(|m| m.member_id.clone()).collect()
        });
        for id in w.trigger.member_ids() {
            if g.members.get(id).is_none_or(|m| m.is_reconciled_to(target)) {
                set.remove(id);
            }
        }
        if w.before.is_some_and(|(_, n)| n > g.members.len()) || set.len() > g.members.len() {
            set.retain(|id| g.members.contains_key(id));
        }
        if set.is_empty() {
            cur.ended_ms = Some(now);
            cur.convergence_ms = Some(now - cur.started_ms);
            cur.outcome = Outcome::Converged;
            *waiting = None;
            metrics::histogram!("kcoord_consumer_group_convergence_seconds")
                .record(cur.convergence_ms.unwrap_or(0) as f64 / 1000.0);
            log_ended(&g.group_id, cur);
        }
    }
}

/// The one structured line every epoch gets when it ends.
fn log_ended(group_id: &str, e: &EpochChange) {
    tracing::info!(
        group = %group_id,
        group_epoch = e.group_epoch,
        cause = e.cause.kind(),
        outcome = ?e.outcome,
        convergence_ms = e.convergence_ms,
        members = e.members,
        "consumer group epoch ended"
    );
}

fn preferred(g: &ConsumerGroup, assigners: &Assigners) -> String {
    assigners.preferred(g.members.values()).map(|a| a.name().to_string()).unwrap_or_default()
}

fn resolved(g: &ConsumerGroup) -> BTreeMap<String, Vec<String>> {
    g.resolved_regexes.iter().map(|(p, v)| (p.clone(), v.topics.clone())).collect()
}

/// The group's subscribed topics and their partition counts in `image`.
fn subscribed_partitions(g: &ConsumerGroup, image: &TopicImage) -> BTreeMap<String, Option<i32>> {
    super::regex::subscribed_topic_names(g)
        .into_iter()
        .map(|n| {
            let p = image.get(&n).map(|(_, p)| p);
            (n, p)
        })
        .collect()
}

fn listed(names: impl IntoIterator<Item = String>) -> Vec<String> {
    names.into_iter().take(MAX_LISTED).collect()
}

/// Why the group epoch moved, from most to least specific: the group was
/// created from a classic group; a member named by the operation joined or
/// went away; it changed its subscription; a pattern resolved differently;
/// subscribed topics changed; the preferred assignor changed.
fn explain(w: &Watch, g: &ConsumerGroup, t: &Tracker, seen: &Seen) -> Cause {
    let member_id = w.trigger.member_ids().first().map(|s| s.to_string()).unwrap_or_default();
    if w.before.is_none() {
        if let Some((generation, members)) = w.classic {
            return Cause::MigratedFromClassic { member_id, classic_generation: generation, classic_members: members };
        }
    }
    let named: Vec<(&str, &MemberBefore)> = w.trigger.member_ids().into_iter().zip(&w.members).collect();
    // A member the operation names joined.
    for (id, before) in &named {
        if **before != MemberBefore::Absent {
            continue;
        }
        // A v0 heartbeat names no member: the coordinator chose its id.
        let joined = if id.is_empty() { None } else { g.members.get(*id) };
        if let Some(m) = joined {
            let replaced = w.instance_holder.clone().filter(|h| h != id && !g.members.contains_key(h));
            return Cause::MemberJoined {
                member_id: m.member_id.clone(),
                instance_id: m.metadata.instance_id.clone(),
                client_id: m.metadata.client_id.clone(),
                client_host: m.metadata.client_host.clone(),
                member_type: if m.uses_classic_protocol() { "classic" } else { "consumer" },
                replaced_member_id: replaced,
            };
        }
    }
    // Members the operation names went away.
    let gone: Vec<String> = named
        .iter()
        .filter(|(id, before)| **before != MemberBefore::Absent && !g.members.contains_key(*id))
        .map(|(id, _)| id.to_string())
        .collect();
    if let Some(first) = gone.first().cloned() {
        return match &w.trigger {
            Trigger::Timer { which: MemberTimer::Session, .. } => Cause::SessionExpired { member_id: first },
            Trigger::Timer { which, .. } => Cause::MemberFenced {
                member_id: first,
                reason: match which {
                    MemberTimer::Rebalance => "rebalance_timeout",
                    MemberTimer::Join => "join_timeout",
                    MemberTimer::Sync => "sync_timeout",
                    MemberTimer::Session => "session_timeout",
                },
            },
            _ => Cause::MemberLeft { member_ids: listed(gone) },
        };
    }
    // A member changed what it subscribes to.
    for (id, before) in &named {
        let (MemberBefore::Present(Some(before)), Some(m)) = (before, g.members.get(*id)) else { continue };
        let after = Subscription {
            topics: m.metadata.subscribed_topic_names.clone(),
            regex: m.metadata.subscribed_topic_regex.clone(),
        };
        if *before != after {
            return Cause::SubscriptionChanged {
                member_id: id.to_string(),
                topics_before: listed(before.topics.clone()),
                topics_after: listed(after.topics),
                regex_before: before.regex.clone(),
                regex_after: after.regex,
            };
        }
    }
    // A pattern resolved to other topics.
    let now_resolved = resolved(g);
    if t.topics.is_some() && now_resolved != t.regexes {
        let patterns: Vec<ResolvedPattern> = now_resolved
            .iter()
            .filter(|(p, topics)| t.regexes.get(*p) != Some(*topics))
            .take(MAX_LISTED)
            .map(|(p, topics)| ResolvedPattern { pattern: p.clone(), topics: listed(topics.iter().cloned()) })
            .collect();
        if !patterns.is_empty() {
            return Cause::RegexResolved { patterns };
        }
    }
    // Subscribed topics grew, appeared or went.
    let baseline = t.topics.clone().or_else(|| (!w.image.is_empty()).then(|| subscribed_partitions(g, &w.image)));
    if let Some(before) = baseline {
        let after = subscribed_partitions(g, seen.topics);
        let (mut resized, mut created, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
        for (topic, p) in &after {
            match (before.get(topic).copied().flatten(), *p) {
                (Some(a), Some(b)) if a != b => {
                    resized.push(Resized { topic: topic.clone(), partitions_before: a, partitions_after: b })
                }
                (None, Some(_)) => created.push(topic.clone()),
                (Some(_), None) => deleted.push(topic.clone()),
                _ => {}
            }
        }
        for (topic, p) in &before {
            if p.is_some() && !after.contains_key(topic) {
                deleted.push(topic.clone());
            }
        }
        if !(resized.is_empty() && created.is_empty() && deleted.is_empty()) {
            resized.truncate(MAX_LISTED);
            return Cause::TopicMetadataChanged { resized, created: listed(created), deleted: listed(deleted) };
        }
    }
    let assignor = preferred(g, seen.assigners);
    if let Some(before) = &t.assignor {
        if *before != assignor {
            return Cause::AssignorChanged { assignor_before: before.clone(), assignor_after: assignor };
        }
    }
    Cause::Other
}
