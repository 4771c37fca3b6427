//! A classic group and its members: the data of Kafka's `ClassicGroup` and
//! `ClassicGroupMember`, with the small invariant-keeping operations
//! (add, remove, update, protocol vote, record building). The rebalance
//! algorithms that use them live in the sibling modules.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use indexmap::IndexMap;

use crate::coordinator::core::ReplyTo;
use crate::coordinator::messages::{JoinGroupMember, Protocol};
use crate::coordinator::messages::{JoinGroupResponse, SyncGroupResponse};
use crate::coordinator::records::{GroupValue, MemberValue};
use crate::coordinator::timers::Slot;

/// The five states of a classic group (Kafka's `ClassicGroupState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The wire name (DescribeGroups, ListGroups).
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// States from which a transition to `self` is legal.
    fn valid_previous(self) -> &'static [GroupState] {
        use GroupState::*;
        match self {
            Empty => &[PreparingRebalance],
            PreparingRebalance => &[Stable, CompletingRebalance, Empty],
            CompletingRebalance => &[PreparingRebalance],
            Stable => &[CompletingRebalance],
            Dead => &[Stable, PreparingRebalance, CompletingRebalance, Empty, Dead],
        }
    }
}

/// The consumer protocol type, whose metadata we parse for subscriptions.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// A parked JoinGroup: where to send the answer and the request version
/// (the answer to a static member's rejoin depends on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkedJoin {
    pub token: ReplyTo<JoinGroupResponse>,
    pub version: i16,
}

#[derive(Debug, Clone)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    pub assignment: Bytes,
    pub awaiting_join: Option<ParkedJoin>,
    pub awaiting_sync: Option<ReplyTo<SyncGroupResponse>>,
    /// Joined but not yet through a completed join phase: may expire while parked.
    pub is_new: bool,
    pub heartbeat: Slot,
}

impl Member {
    /// The member's metadata for `protocol` (empty if it does not support it).
    pub fn metadata(&self, protocol: Option<&str>) -> Bytes {
        protocol
            .and_then(|p| self.protocols.iter().find(|x| x.name == p))
            .map(|x| x.metadata.clone())
            .unwrap_or_default()
    }

    /// Same ordered protocols, names and metadata.
    pub fn matches(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }

    pub fn is_static(&self) -> bool {
        self.group_instance_id.is_some()
    }

    /// Kafka's `hasSatisfiedHeartbeat`: new members can expire even while
    /// parked; others are covered while they wait for a join or sync answer.
    pub fn has_satisfied_heartbeat(&self) -> bool {
        if self.is_new {
            false
        } else {
            self.awaiting_join.is_some() || self.awaiting_sync.is_some()
        }
    }
}

/// State of the initial-rebalance delay (Kafka's `InitialDelayedJoin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitialDelay {
    pub delay_ms: i32,
    pub remaining_ms: i32,
}

#[derive(Debug, Clone)]
pub struct ClassicGroup {
    pub group_id: String,
    pub state: GroupState,
    pub previous_state: GroupState,
    pub state_timestamp: Option<i64>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    /// Fast-hashed: every Heartbeat looks its member up.
    pub members: IndexMap<String, Member, foldhash::fast::RandomState>,
    pub static_members: HashMap<String, String>,
    /// KIP-394 members that got MEMBER_ID_REQUIRED, with their session timers.
    pub pending_join_members: HashMap<String, Slot>,
    pub num_awaiting_join: usize,
    pub supported_protocols: HashMap<String, usize>,
    pub pending_sync_members: HashSet<String>,
    pub subscribed_topics: Option<HashSet<String>>,
    pub new_member_added: bool,
    pub join_timer: Slot,
    /// Set while the join timer is the initial-rebalance delay.
    pub initial_delay: Option<InitialDelay>,
    pub sync_timer: Slot,
    /// Generation the pending-sync timer was armed for.
    pub sync_generation: i32,
    /// The last rebalances and why they happened.
    pub history: super::history::History,
}

impl ClassicGroup {
    pub fn new(group_id: &str, now: i64) -> Self {
        ClassicGroup {
            group_id: group_id.to_string(),
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            state_timestamp: Some(now),
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: IndexMap::default(),
            static_members: HashMap::new(),
            pending_join_members: HashMap::new(),
            num_awaiting_join: 0,
            supported_protocols: HashMap::new(),
            pending_sync_members: HashSet::new(),
            subscribed_topics: None,
            new_member_added: false,
            join_timer: Slot::default(),
            initial_delay: None,
            sync_timer: Slot::default(),
            sync_generation: -1,
            history: Default::default(),
        }
    }

    pub fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    /// Moves to `state`, remembering the previous one and when it happened.
    pub fn transition_to(&mut self, state: GroupState, now: i64) {
        debug_assert!(
            state.valid_previous().contains(&self.state),
            "illegal transition {:?} -> {:?} in group {}",
            self.state,
            state,
            self.group_id
        );
        self.previous_state = self.state;
        self.state = state;
        self.state_timestamp = Some(now);
    }

    /// Kafka's `canRebalance`: a rebalance can start from these states.
    pub fn can_rebalance(&self) -> bool {
        GroupState::PreparingRebalance.valid_previous().contains(&self.state)
    }

    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    pub fn is_pending_member(&self, member_id: &str) -> bool {
        self.pending_join_members.contains_key(member_id)
    }

    pub fn static_member_id(&self, instance_id: &str) -> Option<&String> {
        self.static_members.get(instance_id)
    }

    pub fn has_all_members_joined(&self) -> bool {
        self.members.len() == self.num_awaiting_join && self.pending_join_members.is_empty()
    }

    pub fn has_received_sync_from_all_members(&self) -> bool {
        self.pending_sync_members.is_empty()
    }

    /// The group's rebalance timeout: the largest of its members'.
    pub fn rebalance_timeout_ms(&self) -> i32 {
        self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0)
    }

    pub fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
    }

    fn count_protocols(&mut self, protocols: &[Protocol], up: bool) {
        for p in protocols {
            let n = self.supported_protocols.entry(p.name.clone()).or_insert(0);
            if up {
                *n += 1;
            } else {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.supported_protocols.remove(&p.name);
                }
            }
        }
    }

    /// Kafka's `supportsProtocols`: an empty group accepts any non-empty
    /// type and protocol list; otherwise the type must match and one of the
    /// protocols must be supported by every current member.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.is(GroupState::Empty) {
            !protocol_type.is_empty() && !protocols.is_empty()
        } else {
            self.protocol_type.as_deref() == Some(protocol_type)
                && protocols
                    .iter()
                    .any(|p| self.supported_protocols.get(&p.name).copied().unwrap_or(0) == self.members.len())
        }
    }

    /// Adds a member (Kafka's `ClassicGroup.add`). A member added again
    /// under the same id (a replayed record, a rejoin) replaces the old one:
    /// its protocols and its parked join are counted once, not twice, so
    /// that the protocol vote and "everyone has rejoined" stay right.
    pub fn add(&mut self, member: Member) {
        if let Some(old) = self.members.get(&member.member_id) {
            let (protocols, awaiting, instance) =
                (old.protocols.clone(), old.awaiting_join.is_some(), old.group_instance_id.clone());
            self.count_protocols(&protocols, false);
            if awaiting {
                self.num_awaiting_join -= 1;
            }
            if let Some(instance) = instance {
                if self.static_members.get(&instance) == Some(&member.member_id) {
                    self.static_members.remove(&instance);
                }
            }
        }
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        self.count_protocols(&member.protocols.clone(), true);
        if member.awaiting_join.is_some() {
            self.num_awaiting_join += 1;
        }
        self.pending_join_members.remove(&member.member_id);
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members.insert(instance.clone(), member.member_id.clone());
        }
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member (Kafka's `ClassicGroup.remove`); the caller must have
    /// answered its parked requests. Returns the removed member.
    pub fn remove(&mut self, member_id: &str) -> Option<Member> {
        let removed = self.members.swap_remove(member_id);
        if let Some(m) = &removed {
            self.count_protocols(&m.protocols.clone(), false);
            if m.awaiting_join.is_some() {
                self.num_awaiting_join -= 1;
            }
            if let Some(instance) = &m.group_instance_id {
                self.static_members.remove(instance);
            }
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        self.pending_join_members.remove(member_id);
        self.pending_sync_members.remove(member_id);
        removed
    }

    /// Kafka's `updateMember`: new protocols and timeouts, and a new parked join (or none).
    pub fn update_member(
        &mut self,
        member_id: &str,
        protocols: Vec<Protocol>,
        rebalance_timeout_ms: i32,
        session_timeout_ms: i32,
        parked: Option<ParkedJoin>,
    ) {
        let Some(old) = self.members.get(member_id).map(|m| m.protocols.clone()) else { return };
        self.count_protocols(&old, false);
        self.count_protocols(&protocols, true);
        let Some(m) = self.members.get_mut(member_id) else { return };
        m.protocols = protocols;
        m.rebalance_timeout_ms = rebalance_timeout_ms;
        m.session_timeout_ms = session_timeout_ms;
        match (parked.is_some(), m.awaiting_join.is_some()) {
            (true, false) => self.num_awaiting_join += 1,
            (false, true) => self.num_awaiting_join -= 1,
            _ => {}
        }
        m.awaiting_join = parked;
    }

    /// Takes a member's parked join, keeping the awaiting counter right.
    pub fn take_parked_join(&mut self, member_id: &str) -> Option<ParkedJoin> {
        let parked = self.members.get_mut(member_id)?.awaiting_join.take();
        if parked.is_some() {
            self.num_awaiting_join -= 1;
        }
        parked
    }

    /// Kafka's protocol vote: candidates are protocols every member
    /// supports; each member votes for its first candidate; most votes wins.
    /// Kafka breaks ties by HashMap order (unspecified); we break them by the
    /// leader's preference order, then by name, so the result is
    /// deterministic.
    pub fn select_protocol(&self) -> Option<String> {
        let n = self.members.len();
        let candidates: HashSet<&str> =
            self.supported_protocols.iter().filter(|(_, c)| **c == n).map(|(name, _)| name.as_str()).collect();
        if candidates.is_empty() {
            return None;
        }
        let mut votes: HashMap<&str, usize> = HashMap::new();
        for m in self.members.values() {
            if let Some(p) = m.protocols.iter().find(|p| candidates.contains(p.name.as_str())) {
                *votes.entry(p.name.as_str()).or_insert(0) += 1;
            }
        }
        let best = votes.values().copied().max()?;
        let leader_rank = |name: &str| -> usize {
            self.leader_id
                .as_ref()
                .and_then(|l| self.members.get(l))
                .and_then(|m| m.protocols.iter().position(|p| p.name == name))
                .unwrap_or(usize::MAX)
        };
        votes
            .iter()
            .filter(|(_, v)| **v == best)
            .map(|(name, _)| *name)
            .min_by(|a, b| leader_rank(a).cmp(&leader_rank(b)).then_with(|| a.cmp(b)))
            .map(str::to_string)
    }

    /// Kafka's `initNextGeneration`.
    pub fn init_next_generation(&mut self, now: i64) {
        self.generation_id = self.generation_id.wrapping_add(1);
        if !self.members.is_empty() {
            self.protocol_name = self.select_protocol();
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition_to(GroupState::CompletingRebalance, now);
        } else {
            self.protocol_name = None;
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition_to(GroupState::Empty, now);
        }
        self.pending_sync_members.clear();
    }

    /// The union of topics in members' ConsumerProtocolSubscription for the
    /// selected protocol; None if not a consumer group or unparseable.
    pub fn compute_subscribed_topics(&self) -> Option<HashSet<String>> {
        if !self.uses_consumer_protocol() {
            return None;
        }
        let mut topics = HashSet::new();
        for m in self.members.values() {
            let md = m.metadata(self.protocol_name.as_deref());
            for t in crate::protocol::consumer_protocol::subscribed_topics(&md).ok()? {
                topics.insert(t);
            }
        }
        Some(topics)
    }

    /// Kafka's `isSubscribedToTopic`: unknown subscriptions count as
    /// subscribed for consumer groups.
    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match &self.subscribed_topics {
            Some(t) => t.contains(topic),
            None => self.uses_consumer_protocol(),
        }
    }

    /// Member ids, in group order.
    pub fn member_ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    /// The member list the leader receives.
    pub fn join_members(&self) -> Vec<JoinGroupMember> {
        self.members
            .values()
            .map(|m| JoinGroupMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(self.protocol_name.as_deref()),
            })
            .collect()
    }

    /// The GroupMetadataValue for the current state, with `assignment`
    /// overriding members' stored assignments when given.
    pub fn to_record(&self, assignment: Option<&HashMap<String, Bytes>>) -> GroupValue {
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            protocol: self.protocol_name.clone(),
            leader: self.leader_id.clone(),
            current_state_timestamp: self.state_timestamp.unwrap_or(-1),
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: m.metadata(self.protocol_name.as_deref()),
                    assignment: match assignment {
                        Some(a) => a.get(&m.member_id).cloned().unwrap_or_default(),
                        None => m.assignment.clone(),
                    },
                })
                .collect(),
        }
    }

    /// The record Kafka writes when a group is created by a JoinGroup that
    /// wrote nothing else: generation 0, no members, and no protocol type
    /// even if the joining member already gave the group one, as Kafka's `classicGroupJoin` does.
    pub fn empty_record(&self) -> GroupValue {
        GroupValue {
            protocol_type: String::new(),
            generation: 0,
            protocol: None,
            leader: None,
            current_state_timestamp: self.state_timestamp.unwrap_or(-1),
            members: Vec::new(),
        }
    }

    /// Rebuilds a group from its last record (Kafka's `ClassicGroup.fromRecord`):
    /// Stable if it has members, else Empty.
    pub fn from_record(group_id: &str, v: &GroupValue) -> ClassicGroup {
        let mut g = ClassicGroup::new(group_id, 0);
        g.state = if v.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
        g.previous_state = g.state;
        g.generation_id = v.generation;
        g.protocol_type = if v.protocol_type.is_empty() { None } else { Some(v.protocol_type.clone()) };
        g.protocol_name = v.protocol.clone();
        g.leader_id = v.leader.clone();
        g.state_timestamp = if v.current_state_timestamp == -1 { None } else { Some(v.current_state_timestamp) };
        for m in &v.members {
            let member = Member {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: if m.rebalance_timeout == -1 { m.session_timeout } else { m.rebalance_timeout },
                session_timeout_ms: m.session_timeout,
                protocol_type: v.protocol_type.clone(),
                protocols: vec![Protocol {
                    name: v.protocol.clone().unwrap_or_default(),
                    metadata: m.subscription.clone(),
                }],
                assignment: m.assignment.clone(),
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                heartbeat: Slot::default(),
            };
            g.add(member);
        }
        if g.members.is_empty() {
            // `add` sets the type from the first member; an empty group keeps the record's.
            g.protocol_type = if v.protocol_type.is_empty() { None } else { Some(v.protocol_type.clone()) };
        }
        g.leader_id = v.leader.clone().or(g.leader_id);
        g.subscribed_topics = g.compute_subscribed_topics();
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;

    fn member(id: &str, protocols: &[&str]) -> Member {
        Member {
            member_id: id.into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 1000,
            session_timeout_ms: 1000,
            protocol_type: "consumer".into(),
            protocols: protocols.iter().map(|p| Protocol { name: p.to_string(), metadata: Bytes::new() }).collect(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            heartbeat: Slot::default(),
        }
    }

    #[test]
    fn protocol_vote_picks_the_most_preferred_common_protocol() {
        let mut g = ClassicGroup::new("g", 0);
        g.add(member("a", &["range", "roundrobin"]));
        g.add(member("b", &["roundrobin", "range"]));
        g.add(member("c", &["roundrobin", "range", "sticky"]));
        assert_eq!(g.select_protocol().as_deref(), Some("roundrobin"));
    }

    #[test]
    fn protocol_vote_ties_follow_the_leaders_preference() {
        let mut g = ClassicGroup::new("g", 0);
        g.add(member("a", &["range", "roundrobin"]));
        g.add(member("b", &["roundrobin", "range"]));
        assert_eq!(g.leader_id.as_deref(), Some("a"));
        assert_eq!(g.select_protocol().as_deref(), Some("range"));
    }

    #[test]
    fn removing_the_leader_elects_another_member() {
        let mut g = ClassicGroup::new("g", 0);
        g.add(member("a", &["range"]));
        g.add(member("b", &["range"]));
        g.remove("a");
        assert_eq!(g.leader_id.as_deref(), Some("b"));
        g.remove("b");
        assert_eq!(g.leader_id, None);
        assert!(g.supported_protocols.is_empty());
    }

    #[test]
    fn adding_a_member_again_under_its_id_counts_its_protocols_once() {
        let mut g = ClassicGroup::new("g", 0);
        g.add(member("a", &["range"]));
        g.add(member("a", &["range", "roundrobin"]));
        assert_eq!(g.members.len(), 1);
        assert_eq!(g.supported_protocols.get("range"), Some(&1));
        assert_eq!(g.supported_protocols.get("roundrobin"), Some(&1));
        // A second member that supports only "range" can still join: every
        // member supports it. Counted twice, "range" looked supported by
        // more members than the group has and the vote went wrong.
        g.transition_to(GroupState::PreparingRebalance, 0);
        g.add(member("b", &["range"]));
        assert!(g.supports_protocols("consumer", &[Protocol { name: "range".into(), metadata: Bytes::new() }]));
        assert!(!g.supports_protocols("consumer", &[Protocol { name: "roundrobin".into(), metadata: Bytes::new() }]));
        assert_eq!(g.select_protocol().as_deref(), Some("range"));
        g.remove("a");
        g.remove("b");
        assert!(g.supported_protocols.is_empty(), "{:?}", g.supported_protocols);
    }

    fn consumer_group_subscribed_with(metadata: Bytes) -> ClassicGroup {
        let mut g = ClassicGroup::new("g", 0);
        let mut m = member("a", &["range"]);
        m.protocols[0].metadata = metadata;
        g.add(m);
        g.protocol_type = Some("consumer".into());
        g.transition_to(GroupState::PreparingRebalance, 0);
        g.init_next_generation(0);
        g
    }

    #[test]
    fn a_group_knows_the_topics_its_members_subscribe_to() {
        let g = consumer_group_subscribed_with(crate::protocol::consumer_protocol::encode_subscription(&["a", "bc"]));
        assert!(g.is_subscribed_to_topic("bc"));
        assert!(!g.is_subscribed_to_topic("other"));
    }

    #[test]
    fn a_subscription_cut_short_in_its_user_data_subscribes_the_group_to_every_topic() {
        // Kafka parses the user data too; a short buffer there makes it
        // unaware of the subscriptions, so every topic counts as subscribed.
        let whole = crate::protocol::consumer_protocol::encode_subscription(&["a"]);
        let mut cut = bytes::BytesMut::from(&whole[..whole.len() - 4]);
        cut.put_i32(10);
        cut.put_slice(b"short");
        let g = consumer_group_subscribed_with(cut.freeze());
        assert!(g.is_subscribed_to_topic("other"));
    }
}
