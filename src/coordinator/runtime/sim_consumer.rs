//! A simulated KIP-848 consumer for the seeded simulation (`sim`), as
//! Kafka's `ConsumerMembershipManager` behaves: it joins with epoch 0, then
//! heartbeats at the interval the coordinator gives, always telling what it
//! owns; on an assignment it first gives up the partitions no longer in it
//! (and acknowledges that at once), then takes the new ones; after a lost
//! answer or an error it sends a full heartbeat (subscription, rebalance
//! timeout and owned partitions), whose answer carries the assignment; fenced
//! (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH) it drops everything and rejoins
//! with epoch 0 under the same member id; it leaves with epoch -1, or -2 if
//! static; it commits the partitions it owns at its member epoch. A new
//! process (a restart) has a new member id. One request is outstanding at
//! a time.
#![cfg(test)]

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::oneshot;
use uuid::Uuid;

use super::sim_client::{commit_error, commit_request, CommitAt};
use crate::coordinator::state::consumer::describable::Describable;
use crate::coordinator::state::consumer::group::{LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use crate::coordinator::state::consumer::messages::{ConsumerHeartbeatRequest, ConsumerHeartbeatResponse};
use crate::coordinator::state::consumer::target::TopicImage;
use crate::coordinator::state::core::{Request, Response};
use crate::error_code::ErrorCode;

pub const CGROUP: &str = "sim848";
pub const CTOPIC: &str = "u";
pub const CTOPIC_ID: Uuid = Uuid::from_bytes([7; 16]);
pub const CPARTITIONS: i32 = 6;
pub const CREBALANCE_MS: i32 = 20_000;
/// The pause before retrying after a retriable error.
const RETRY_MS: i64 = 500;
/// The first OffsetCommit version a KIP-848 member may use.
const COMMIT_VERSION: i16 = 9;

/// The topics the coordinator resolves subscriptions against.
pub fn image() -> Arc<TopicImage> {
    Arc::new(TopicImage::new([(CTOPIC.to_string(), CTOPIC_ID, CPARTITIONS)]))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CPhase {
    /// Must (re)join with epoch 0.
    Joining,
    /// In the group: heartbeats and commits.
    Member,
    /// Crashed, left or fatally fenced: sends nothing.
    Gone,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CKind {
    /// A ConsumerGroupHeartbeat sent at this epoch (0: a join).
    Heartbeat {
        epoch: i32,
    },
    Commit {
        partition: i32,
        offset: i64,
    },
}

/// What a consumer learned from an answer, for the invariants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CLearned {
    Nothing,
    /// A heartbeat was answered at `epoch`; the member gave up `revoked`
    /// and took `gained`.
    Heartbeat {
        epoch: i32,
        gained: Vec<i32>,
        revoked: Vec<i32>,
    },
    /// Fenced: it dropped everything and rejoins (or, fenced by its
    /// instance id, stops).
    Fenced(ErrorCode),
    /// A retriable refusal.
    Refused(CKind, ErrorCode),
    Committed {
        partition: i32,
        offset: i64,
    },
    /// What a correct coordinator never answers this client.
    Wrong(String),
}

pub struct Consumer {
    pub name: String,
    pub instance: Option<String>,
    incarnation: u32,
    pub member: String,
    pub epoch: i32,
    /// The highest epoch an answer gave this member id: member epochs only
    /// increase, through fencing and rejoining too (a rejoin gets the
    /// group's epoch).
    pub highest_epoch: i32,
    pub phase: CPhase,
    pub owned: BTreeSet<i32>,
    next_heartbeat: i64,
    /// The next heartbeat is a full one (after a lost answer or an error).
    full: bool,
    pub waiting: Option<(CKind, oneshot::Receiver<Response>)>,
}

impl Consumer {
    pub fn new(name: String, instance: Option<String>) -> Consumer {
        Consumer::incarnation(name, instance, 0)
    }

    fn incarnation(name: String, instance: Option<String>, incarnation: u32) -> Consumer {
        Consumer {
            member: format!("{name}-{incarnation}"),
            name,
            instance,
            incarnation,
            epoch: 0,
            highest_epoch: 0,
            phase: CPhase::Joining,
            owned: BTreeSet::new(),
            next_heartbeat: 0,
            full: true,
            waiting: None,
        }
    }

    fn heartbeat(&self, epoch: i32) -> ConsumerHeartbeatRequest {
        let joining = epoch == 0 || self.full;
        let owned: Vec<i32> = self.owned.iter().copied().collect();
        ConsumerHeartbeatRequest {
            version: 1,
            group_id: CGROUP.into(),
            member_id: self.member.clone(),
            member_epoch: epoch,
            instance_id: self.instance.clone(),
            rack_id: None,
            rebalance_timeout_ms: if joining { CREBALANCE_MS } else { -1 },
            subscribed_topic_names: joining.then(|| vec![CTOPIC.to_string()]),
            subscribed_topic_regex: None,
            server_assignor: None,
            topic_partitions: Some(if owned.is_empty() { Vec::new() } else { vec![(CTOPIC_ID, owned)] }),
            client_id: self.name.clone(),
            client_host: "/127.0.0.1".into(),
            topics: image(),
            describable: Describable::all(),
        }
    }

    /// The request to send now, if any (`commit` asks for a commit of an
    /// owned partition when no heartbeat is due).
    pub fn next_request(&mut self, now: i64, commit: Option<i64>) -> Option<(CKind, Request)> {
        if self.waiting.is_some() || self.phase == CPhase::Gone {
            return None;
        }
        if now >= self.next_heartbeat {
            let epoch = if self.phase == CPhase::Joining { 0 } else { self.epoch };
            return Some((CKind::Heartbeat { epoch }, Request::ConsumerHeartbeat(Box::new(self.heartbeat(epoch)))));
        }
        if self.phase != CPhase::Member {
            return None;
        }
        let offset = commit?;
        let partition = *self.owned.iter().nth((offset as usize) % self.owned.len().max(1))?;
        let at = CommitAt { group: CGROUP, topic: CTOPIC, version: COMMIT_VERSION, generation: self.epoch };
        Some((
            CKind::Commit { partition, offset },
            commit_request(at, &self.member, self.instance.clone(), partition, offset),
        ))
    }

    /// Leaves the group (revoking everything first): epoch -1, or -2 for a
    /// static member, which keeps its place for its session.
    pub fn leave(&mut self) -> Option<Request> {
        if self.waiting.is_some() || self.phase != CPhase::Member {
            return None;
        }
        let epoch = if self.instance.is_some() { LEAVE_GROUP_STATIC_MEMBER_EPOCH } else { LEAVE_GROUP_MEMBER_EPOCH };
        self.phase = CPhase::Gone;
        self.owned.clear();
        let mut req = self.heartbeat(epoch);
        req.topic_partitions = None;
        Some(Request::ConsumerHeartbeat(Box::new(req)))
    }

    /// The process dies: everything in memory is lost.
    pub fn crash(&mut self) {
        self.phase = CPhase::Gone;
        self.waiting = None;
        self.owned.clear();
    }

    /// A new process under the same name (and instance id, if static).
    pub fn restart(&mut self) {
        *self = Consumer::incarnation(self.name.clone(), self.instance.clone(), self.incarnation + 1);
    }

    /// An answer that will never come: the client retries at once.
    pub fn lost_answer(&mut self) {
        if self.waiting.take().is_some() {
            self.next_heartbeat = 0;
            self.full = true;
        }
    }

    fn fence(&mut self) {
        self.owned.clear();
        self.epoch = 0;
        self.phase = CPhase::Joining;
        self.next_heartbeat = 0;
        self.full = true;
    }

    /// Handles the answer to the outstanding request if it has come.
    pub fn poll(&mut self, now: i64) -> CLearned {
        let Some((kind, rx)) = &mut self.waiting else { return CLearned::Nothing };
        let kind = *kind;
        let resp = match rx.try_recv() {
            Ok(r) => r,
            Err(oneshot::error::TryRecvError::Empty) => return CLearned::Nothing,
            Err(oneshot::error::TryRecvError::Closed) => {
                self.lost_answer();
                return CLearned::Nothing;
            }
        };
        self.waiting = None;
        if self.phase == CPhase::Gone {
            return CLearned::Nothing;
        }
        match (kind, resp) {
            (CKind::Heartbeat { .. }, Response::ConsumerHeartbeat(r)) => self.on_heartbeat(now, kind, r),
            (CKind::Commit { partition, offset }, Response::Commit(r)) => match commit_error(&r) {
                Some(ErrorCode::NONE) => CLearned::Committed { partition, offset },
                Some(e) => {
                    if e == ErrorCode::UNKNOWN_MEMBER_ID {
                        self.fence();
                    }
                    CLearned::Refused(kind, e)
                }
                None => CLearned::Wrong("a commit answered without partitions".into()),
            },
            (_, other) => CLearned::Wrong(format!("{kind:?} answered with {other:?}")),
        }
    }

    fn on_heartbeat(&mut self, now: i64, kind: CKind, r: ConsumerHeartbeatResponse) -> CLearned {
        match r.error {
            ErrorCode::NONE => {
                if r.member_epoch < self.highest_epoch {
                    return CLearned::Wrong(format!(
                        "{}'s epoch went back from {} to {}",
                        self.member, self.highest_epoch, r.member_epoch
                    ));
                }
                self.highest_epoch = r.member_epoch;
                self.full = false;
                self.epoch = r.member_epoch;
                self.phase = CPhase::Member;
                self.next_heartbeat = now + i64::from(r.heartbeat_interval_ms.max(1));
                let (mut gained, mut revoked) = (Vec::new(), Vec::new());
                if let Some(assignment) = r.assignment {
                    if assignment.keys().any(|t| *t != CTOPIC_ID) {
                        return CLearned::Wrong(format!("assigned a topic it does not subscribe to: {assignment:?}"));
                    }
                    let new = assignment.get(&CTOPIC_ID).cloned().unwrap_or_default();
                    revoked = self.owned.difference(&new).copied().collect();
                    gained = new.difference(&self.owned).copied().collect();
                    self.owned = new;
                    if !revoked.is_empty() {
                        // Revoked partitions are acknowledged at once.
                        self.next_heartbeat = now;
                    }
                }
                CLearned::Heartbeat { epoch: r.member_epoch, gained, revoked }
            }
            ErrorCode::UNKNOWN_MEMBER_ID | ErrorCode::FENCED_MEMBER_EPOCH | ErrorCode::GROUP_ID_NOT_FOUND => {
                self.fence();
                CLearned::Fenced(r.error)
            }
            ErrorCode::FENCED_INSTANCE_ID => {
                // Fatal for a Kafka consumer: another process took its
                // instance id.
                self.crash();
                CLearned::Fenced(r.error)
            }
            ErrorCode::INVALID_REQUEST | ErrorCode::UNSUPPORTED_ASSIGNOR | ErrorCode::UNSUPPORTED_VERSION => {
                CLearned::Wrong(format!("{kind:?} refused: {:?} {:?}", r.error, r.error_message))
            }
            e => {
                // NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
                // KAFKA_STORAGE_ERROR, UNRELEASED_INSTANCE_ID (the old
                // process's session has not expired yet), …: retry.
                self.next_heartbeat = now + RETRY_MS;
                self.full = true;
                CLearned::Refused(kind, e)
            }
        }
    }
}
