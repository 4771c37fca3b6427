//! A simulated classic consumer for the seeded simulation (`sim`): the
//! join → sync → heartbeat loop, commits of the partitions it owns, leaves,
//! and rejoining after errors, lost answers or a coordinator restart, as
//! Kafka's `AbstractCoordinator` does. One request is outstanding at a time.
#![cfg(test)]

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::coordinator::state::core::{Request, Response};
use crate::coordinator::state::messages::*;
use crate::coordinator::state::testkit::join;
use crate::error_code::ErrorCode;

pub const GROUP: &str = "sim";
pub const TOPIC: &str = "t";
pub const PARTITIONS: i32 = 6;
pub const SESSION_MS: i32 = 10_000;
pub const REBALANCE_MS: i32 = 10_000;
pub const HEARTBEAT_MS: i64 = 3_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Must (re)join.
    Idle,
    Joining,
    Syncing,
    Stable,
    /// Crashed or left: sends nothing.
    Gone,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Join,
    Sync,
    Heartbeat,
    Commit { partition: i32, offset: i64 },
}

/// What a client learned from an answer, for the invariants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Learned {
    Nothing,
    /// A JoinGroup succeeded in this generation.
    Joined {
        generation: i32,
    },
    /// SyncGroup gave this consumer (its instance id if static, else its
    /// member id: a restarted static member replaces its old self) these
    /// partitions in this generation.
    Assigned {
        generation: i32,
        member: String,
        partitions: Vec<i32>,
    },
    /// This commit was acknowledged.
    Committed {
        partition: i32,
        offset: i64,
    },
    /// The request was refused with this error.
    Refused(Kind, ErrorCode),
}

pub struct Client {
    pub name: String,
    pub instance: Option<String>,
    pub member: String,
    pub generation: i32,
    pub phase: Phase,
    pub owned: Vec<i32>,
    next_heartbeat: i64,
    /// After a successful join: the SyncGroup to send (the leader's
    /// assignment, or none).
    pending_sync: Option<Vec<(String, Bytes)>>,
    pub waiting: Option<(Kind, oneshot::Receiver<Response>)>,
}

/// Encodes an assignment as the partition numbers, comma-separated (the
/// coordinator does not read assignments).
fn encode(partitions: &[i32]) -> Bytes {
    Bytes::from(partitions.iter().map(i32::to_string).collect::<Vec<_>>().join(","))
}

fn decode(bytes: &[u8]) -> Vec<i32> {
    std::str::from_utf8(bytes).unwrap_or("").split(',').filter_map(|p| p.parse().ok()).collect()
}

impl Client {
    pub fn new(name: String, instance: Option<String>) -> Client {
        Client {
            name,
            instance,
            member: String::new(),
            generation: -1,
            phase: Phase::Idle,
            owned: Vec::new(),
            next_heartbeat: 0,
            pending_sync: None,
            waiting: None,
        }
    }

    /// The request to send now, if any (`commit` asks for a commit of an
    /// owned partition when no heartbeat is due).
    pub fn next_request(&mut self, now: i64, commit: Option<i64>) -> Option<(Kind, Request)> {
        if self.waiting.is_some() {
            return None;
        }
        match self.phase {
            Phase::Idle => {
                self.phase = Phase::Joining;
                let mut b = join(GROUP, &self.member, &self.name).session(SESSION_MS).rebalance(REBALANCE_MS);
                if let Some(i) = &self.instance {
                    b = b.instance(i);
                }
                Some((Kind::Join, Request::Join(Box::new(b.build()))))
            }
            Phase::Stable if now >= self.next_heartbeat => Some((
                Kind::Heartbeat,
                Request::Heartbeat(HeartbeatRequest {
                    group_id: GROUP.into(),
                    generation_id: self.generation,
                    member_id: self.member.clone(),
                    group_instance_id: self.instance.clone(),
                }),
            )),
            Phase::Stable => {
                let offset = commit?;
                let partition = *self.owned.get((offset as usize) % self.owned.len().max(1))?;
                Some((Kind::Commit { partition, offset }, self.commit(partition, offset)))
            }
            Phase::Syncing => {
                let assignments = self.pending_sync.take()?;
                Some((
                    Kind::Sync,
                    Request::Sync(Box::new(SyncGroupRequest {
                        version: 3,
                        group_id: GROUP.into(),
                        generation_id: self.generation,
                        member_id: self.member.clone(),
                        group_instance_id: self.instance.clone(),
                        protocol_type: None,
                        protocol_name: None,
                        assignments,
                    })),
                ))
            }
            Phase::Joining | Phase::Gone => None,
        }
    }

    fn commit(&self, partition: i32, offset: i64) -> Request {
        let at = CommitAt { group: GROUP, topic: TOPIC, version: 8, generation: self.generation };
        commit_request(at, &self.member, self.instance.clone(), partition, offset)
    }

    pub fn leave(&mut self) -> Option<Request> {
        if self.waiting.is_some() || self.member.is_empty() {
            return None;
        }
        self.phase = Phase::Gone;
        Some(Request::Leave(LeaveGroupRequest {
            group_id: GROUP.into(),
            members: vec![LeaveMember {
                member_id: self.member.clone(),
                group_instance_id: self.instance.clone(),
                reason: None,
            }],
        }))
    }

    /// The process dies: everything in memory is lost.
    pub fn crash(&mut self) {
        self.phase = Phase::Gone;
        self.waiting = None;
        self.owned.clear();
    }

    /// The process starts again; a static member keeps its instance id.
    pub fn restart(&mut self) {
        *self = Client::new(self.name.clone(), self.instance.clone());
    }

    /// An answer that will never come (dropped, or the coordinator
    /// restarted): the client times out and rejoins.
    pub fn lost_answer(&mut self) {
        if self.waiting.take().is_some() && self.phase != Phase::Gone {
            self.phase = Phase::Idle;
        }
    }

    fn rejoin(&mut self, error: ErrorCode) {
        if error == ErrorCode::UNKNOWN_MEMBER_ID || error == ErrorCode::FENCED_INSTANCE_ID {
            self.member.clear();
        }
        if self.phase != Phase::Gone {
            self.phase = Phase::Idle;
        }
    }

    /// Handles the answer to the outstanding request if it has come.
    pub fn poll(&mut self, now: i64) -> Learned {
        let Some((kind, rx)) = &mut self.waiting else { return Learned::Nothing };
        let kind = *kind;
        let resp = match rx.try_recv() {
            Ok(r) => r,
            Err(oneshot::error::TryRecvError::Empty) => return Learned::Nothing,
            Err(oneshot::error::TryRecvError::Closed) => {
                self.lost_answer();
                return Learned::Nothing;
            }
        };
        self.waiting = None;
        if self.phase == Phase::Gone {
            return Learned::Nothing;
        }
        match (kind, resp) {
            (Kind::Join, Response::Join(r)) => match r.error {
                ErrorCode::NONE => {
                    self.member = r.member_id.clone();
                    self.generation = r.generation_id;
                    self.phase = Phase::Syncing;
                    let assignments = if r.leader == r.member_id { assign(&r.members) } else { Vec::new() };
                    self.pending_sync = Some(assignments);
                    Learned::Joined { generation: r.generation_id }
                }
                ErrorCode::MEMBER_ID_REQUIRED => {
                    self.member = r.member_id;
                    self.phase = Phase::Idle;
                    Learned::Nothing
                }
                e => {
                    self.rejoin(e);
                    Learned::Refused(kind, e)
                }
            },
            (Kind::Sync, Response::Sync(r)) => match r.error {
                ErrorCode::NONE => {
                    self.owned = decode(&r.assignment);
                    self.phase = Phase::Stable;
                    self.next_heartbeat = now + HEARTBEAT_MS;
                    Learned::Assigned {
                        generation: self.generation,
                        member: self.instance.clone().unwrap_or_else(|| self.member.clone()),
                        partitions: self.owned.clone(),
                    }
                }
                e => {
                    self.rejoin(e);
                    Learned::Refused(kind, e)
                }
            },
            (Kind::Heartbeat, Response::Heartbeat(r)) => {
                if r.error == ErrorCode::NONE {
                    self.next_heartbeat = now + HEARTBEAT_MS;
                    return Learned::Nothing;
                }
                self.rejoin(r.error);
                Learned::Refused(kind, r.error)
            }
            (Kind::Commit { partition, offset }, Response::Commit(r)) => match commit_error(&r) {
                Some(ErrorCode::NONE) => Learned::Committed { partition, offset },
                Some(e) => {
                    if e != ErrorCode::NOT_COORDINATOR && e != ErrorCode::COORDINATOR_LOAD_IN_PROGRESS {
                        self.rejoin(e);
                    }
                    Learned::Refused(kind, e)
                }
                None => Learned::Nothing,
            },
            _ => {
                self.rejoin(ErrorCode::NONE);
                Learned::Nothing
            }
        }
    }
}

/// Where a simulated consumer commits: its group and topic, the
/// OffsetCommit version its protocol needs, and its generation (a KIP-848
/// member's epoch).
#[derive(Debug, Clone, Copy)]
pub struct CommitAt<'a> {
    pub group: &'a str,
    pub topic: &'a str,
    pub version: i16,
    pub generation: i32,
}

/// An OffsetCommit of one partition.
pub fn commit_request(
    at: CommitAt<'_>,
    member: &str,
    instance: Option<String>,
    partition: i32,
    offset: i64,
) -> Request {
    Request::Commit(OffsetCommitRequest {
        version: at.version,
        group_id: at.group.into(),
        generation_id: at.generation,
        member_id: member.into(),
        group_instance_id: instance,
        retention_time_ms: -1,
        topics: vec![CommitTopic {
            name: at.topic.into(),
            partitions: vec![CommitPartition { partition, offset, leader_epoch: -1, metadata: None }],
        }],
    })
}

/// The error of a one-partition OffsetCommit's answer.
pub fn commit_error(r: &OffsetCommitResponse) -> Option<ErrorCode> {
    r.topics.first().and_then(|t| t.partitions.first()).map(|p| p.error)
}

/// The leader's assignment: partitions round-robin over the members in id
/// order.
fn assign(members: &[JoinGroupMember]) -> Vec<(String, Bytes)> {
    let mut ids: Vec<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
    ids.sort_unstable();
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            let mine: Vec<i32> = (0..PARTITIONS).filter(|p| *p as usize % ids.len() == i).collect();
            (id.to_string(), encode(&mine))
        })
        .collect()
}
