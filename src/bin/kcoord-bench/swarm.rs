//! Simulated consumer group members, many per connection.
//!
//! Each member runs the classic protocol as a client would: JoinGroup (with
//! the KIP-394 member-id round trip), SyncGroup (the leader assigns nothing
//! but sends an entry per member), and heartbeats to notice rebalances. A
//! connection carries several members with pipelined requests; kcoord serves
//! them concurrently. (Apache Kafka serves one request per connection at a
//! time, so a parked JoinGroup blocks every other member on that connection:
//! use `--members-per-connection 1` against Kafka.)

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::join_all;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kcoord::protocol::client::{s, ClientError, Connection};

/// Where a member is in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    NeedJoin,
    Joining,
    Syncing,
    Stable,
    Left,
}

#[derive(Debug, Clone)]
pub struct Member {
    pub group: String,
    pub id: String,
    pub generation: i32,
    pub phase: Phase,
    /// When the member last got a SyncGroup answer.
    pub synced_at: Option<Instant>,
    /// When the member last sent a JoinGroup.
    pub joined_at: Option<Instant>,
    pub last_heartbeat: Option<Instant>,
}

/// Members shared between connection drivers and the observer.
pub type Members = Arc<Mutex<Vec<Member>>>;

/// A connection and the members it carries.
pub struct Lane {
    pub conn: Connection,
    pub members: Vec<usize>,
    /// Requests written and not yet answered, in order (kept across
    /// `settle` calls: a parked JoinGroup stays pending in between).
    inflight: VecDeque<(i32, Sent)>,
}

pub struct Swarm {
    pub lanes: Vec<Lane>,
    pub members: Members,
    pub versions: Versions,
}

/// Request versions used (the broker's max within what we need).
#[derive(Debug, Clone, Copy)]
pub struct Versions {
    pub join: i16,
    pub sync: i16,
    pub heartbeat: i16,
    pub leave: i16,
    pub commit: i16,
}

pub const SESSION_TIMEOUT_MS: i32 = 30_000;
pub const REBALANCE_TIMEOUT_MS: i32 = 60_000;

/// A minimal ConsumerProtocolSubscription v0 for topic "bench".
fn subscription() -> Bytes {
    Bytes::from_static(b"\x00\x00\x00\x00\x00\x01\x00\x05bench\xff\xff\xff\xff")
}

impl Swarm {
    /// Opens connections for `groups` × `per_group` members, `per_conn` to a
    /// connection, except the last `solo` members, which get one each.
    ///
    /// Members that join an already formed group need their own connection:
    /// their MEMBER_ID_REQUIRED answer must not queue behind the parked
    /// JoinGroups of the members they are about to join (responses come back
    /// in request order), or the rebalance waits for its timeout.
    pub async fn connect(
        bootstrap: &str,
        groups: &[String],
        per_group: usize,
        per_conn: usize,
        solo: usize,
    ) -> Result<Swarm, ClientError> {
        let mut members = Vec::with_capacity(groups.len() * per_group);
        for g in groups {
            for _ in 0..per_group {
                members.push(Member {
                    group: g.clone(),
                    id: String::new(),
                    generation: -1,
                    phase: Phase::NeedJoin,
                    synced_at: None,
                    joined_at: None,
                    last_heartbeat: None,
                });
            }
        }
        let per_conn = per_conn.max(1);
        let shared = members.len().saturating_sub(solo);
        let mut ranges: Vec<(usize, usize)> =
            (0..shared.div_ceil(per_conn)).map(|l| (l * per_conn, ((l + 1) * per_conn).min(shared))).collect();
        ranges.extend((shared..members.len()).map(|i| (i, i + 1)));
        let mut lanes = Vec::with_capacity(ranges.len());
        let mut versions = None;
        for (l, (start, end)) in ranges.into_iter().enumerate() {
            let conn = crate::net::connect(bootstrap, &format!("kcoord-bench-{l}")).await?;
            if versions.is_none() {
                versions = Some(Versions {
                    join: conn.version::<JoinGroupRequest>(4, 5)?,
                    sync: conn.version::<SyncGroupRequest>(0, 3)?,
                    heartbeat: conn.version::<HeartbeatRequest>(0, 3)?,
                    leave: conn.version::<LeaveGroupRequest>(0, 3)?,
                    commit: conn.version::<OffsetCommitRequest>(2, 7)?,
                });
            }
            lanes.push(Lane { conn, members: (start..end).collect(), inflight: VecDeque::new() });
            // Nudge pending accepts along when opening thousands of connections.
            if l % 256 == 255 {
                tokio::task::yield_now().await;
            }
        }
        let versions = versions.ok_or_else(|| ClientError::Decode("no connections".into()))?;
        Ok(Swarm { lanes, members: Arc::new(Mutex::new(members)), versions })
    }

    /// Drives every member until each group is stable: all its active
    /// members synced in the same generation and confirmed by a heartbeat.
    /// Returns how long it took.
    pub async fn settle(&mut self, timeout: Duration) -> Result<Duration, ClientError> {
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let members = self.members.clone();
        let v = self.versions;
        let observer = {
            let stop = stop.clone();
            let members = members.clone();
            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    if is_settled(&members) || start.elapsed() > timeout {
                        stop.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            }
        };
        let drivers = self.lanes.iter_mut().map(|lane| drive(lane, members.clone(), stop.clone(), v));
        let (results, _) = tokio::join!(join_all(drivers), observer);
        for r in results {
            r?;
        }
        if !is_settled(&self.members) {
            return Err(ClientError::Timeout(timeout));
        }
        Ok(start.elapsed())
    }

    /// Marks members to rejoin (as after noticing a rebalance); members
    /// already joining keep their pending JoinGroup.
    pub fn rejoin_all(&self) {
        let mut m = self.members.lock().unwrap_or_else(|p| p.into_inner());
        for x in m.iter_mut() {
            if x.phase != Phase::Left && x.phase != Phase::Joining {
                x.phase = Phase::NeedJoin;
            }
        }
    }

    /// Joins member `mi` as a new member would, outside `settle`: the
    /// KIP-394 round trip for a member id, then the JoinGroup that starts
    /// the rebalance (left pending; `settle` reads its answer).
    pub async fn start_join(&mut self, mi: usize) -> Result<(), ClientError> {
        let v = self.versions;
        let lane = self
            .lanes
            .iter_mut()
            .find(|l| l.members.contains(&mi))
            .ok_or_else(|| ClientError::Decode("no lane".into()))?;
        if !lane.inflight.is_empty() {
            return Err(ClientError::Decode("start_join needs an idle connection".into()));
        }
        let mut m = self.members.lock().unwrap_or_else(|p| p.into_inner())[mi].clone();
        m.id.clear();
        let (corr, frame) = encode(&mut lane.conn, Sent::Join(mi), &m, v)?;
        lane.conn.buffer(&frame).await?;
        lane.conn.flush().await?;
        let (got, r) = lane.conn.read::<JoinGroupRequest>(v.join).await?;
        check(corr, got)?;
        if r.error_code != 79 {
            return Err(ClientError::Decode(format!("expected MEMBER_ID_REQUIRED, got error {}", r.error_code)));
        }
        m.id = r.member_id.to_string();
        let (corr, frame) = encode(&mut lane.conn, Sent::Join(mi), &m, v)?;
        lane.conn.buffer(&frame).await?;
        lane.conn.flush().await?;
        lane.inflight.push_back((corr, Sent::Join(mi)));
        let mut ms = self.members.lock().unwrap_or_else(|p| p.into_inner());
        ms[mi].id = m.id;
        ms[mi].phase = Phase::Joining;
        ms[mi].joined_at = Some(Instant::now());
        Ok(())
    }

    /// Active members with their ids and generations.
    pub fn snapshot(&self) -> Vec<Member> {
        self.members.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

fn is_settled(members: &Members) -> bool {
    let m = members.lock().unwrap_or_else(|p| p.into_inner());
    let mut generation: HashMap<&str, i32> = HashMap::new();
    for x in m.iter() {
        match x.phase {
            Phase::Left => continue,
            Phase::Stable => {}
            _ => return false,
        }
        // Stable means a heartbeat after the sync confirmed the generation.
        if x.last_heartbeat.is_none() || x.last_heartbeat < x.synced_at {
            return false;
        }
        match generation.get(x.group.as_str()) {
            Some(g) if *g != x.generation => return false,
            _ => {
                generation.insert(&x.group, x.generation);
            }
        }
    }
    true
}

/// What a pipelined request was.
#[derive(Debug, Clone, Copy)]
enum Sent {
    Join(usize),
    Sync(usize),
    Heartbeat(usize),
}

impl Sent {
    fn member(self) -> usize {
        match self {
            Sent::Join(i) | Sent::Sync(i) | Sent::Heartbeat(i) => i,
        }
    }
}

/// Runs one connection's members until `stop`.
async fn drive(lane: &mut Lane, members: Members, stop: Arc<AtomicBool>, v: Versions) -> Result<(), ClientError> {
    let mut inflight = std::mem::take(&mut lane.inflight);
    let local: HashMap<usize, usize> = lane.members.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let mut busy: Vec<bool> = vec![false; lane.members.len()];
    for (_, sent) in &inflight {
        if let Some(&li) = local.get(&sent.member()) {
            busy[li] = true;
        }
    }
    loop {
        // Encode the next request of every idle member under the lock, then
        // queue them without it (the lock is never held across an await).
        let mut frames = Vec::new();
        {
            let mut ms = members.lock().unwrap_or_else(|p| p.into_inner());
            for (li, &mi) in lane.members.iter().enumerate() {
                if busy[li] {
                    continue;
                }
                let m = &mut ms[mi];
                let req = match m.phase {
                    Phase::NeedJoin => {
                        m.phase = Phase::Joining;
                        m.joined_at = Some(Instant::now());
                        Some(Sent::Join(mi))
                    }
                    Phase::Stable
                        if !stop.load(Ordering::Relaxed)
                            && m.last_heartbeat.is_none_or(|t| t.elapsed() > Duration::from_millis(100)) =>
                    {
                        Some(Sent::Heartbeat(mi))
                    }
                    _ => None,
                };
                if let Some(sent) = req {
                    let (corr, frame) = encode(&mut lane.conn, sent, m, v)?;
                    frames.push((corr, frame, sent));
                    busy[li] = true;
                }
            }
        }
        let wrote = !frames.is_empty();
        for (corr, frame, sent) in frames {
            lane.conn.buffer(&frame).await?;
            inflight.push_back((corr, sent));
        }
        if wrote {
            lane.conn.flush().await?;
        }
        if inflight.is_empty() {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let (corr, sent) = inflight.pop_front().unwrap_or((0, Sent::Heartbeat(0)));
        let follow_up = handle(&mut lane.conn, corr, sent, &members, v).await?;
        let mi = sent.member();
        let li = local.get(&mi).copied().unwrap_or(0);
        busy[li] = false;
        if let Some((sent, frame, c)) = follow_up {
            lane.conn.buffer(&frame).await?;
            lane.conn.flush().await?;
            inflight.push_back((c, sent));
            busy[li] = true;
        }
    }
}

fn encode(conn: &mut Connection, sent: Sent, m: &Member, v: Versions) -> Result<(i32, Bytes), ClientError> {
    match sent {
        Sent::Join(_) => conn.encode(
            &JoinGroupRequest::default()
                .with_group_id(GroupId(s(&m.group)))
                .with_session_timeout_ms(SESSION_TIMEOUT_MS)
                .with_rebalance_timeout_ms(REBALANCE_TIMEOUT_MS)
                .with_member_id(s(&m.id))
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(subscription())]),
            v.join,
        ),
        Sent::Heartbeat(_) => conn.encode(
            &HeartbeatRequest::default()
                .with_group_id(GroupId(s(&m.group)))
                .with_generation_id(m.generation)
                .with_member_id(s(&m.id)),
            v.heartbeat,
        ),
        Sent::Sync(_) => Err(ClientError::Encode("syncs are built from join answers".into())),
    }
}

/// Reads one answer and updates the member; may return a follow-up request.
async fn handle(
    conn: &mut Connection,
    corr: i32,
    sent: Sent,
    members: &Members,
    v: Versions,
) -> Result<Option<(Sent, Bytes, i32)>, ClientError> {
    match sent {
        Sent::Join(mi) => {
            let (got, r) = conn.read::<JoinGroupRequest>(v.join).await?;
            check(corr, got)?;
            let mut ms = members.lock().unwrap_or_else(|p| p.into_inner());
            let m = &mut ms[mi];
            match r.error_code {
                0 => {
                    m.id = r.member_id.to_string();
                    m.generation = r.generation_id;
                    m.phase = Phase::Syncing;
                    let assignments: Vec<SyncGroupRequestAssignment> = r
                        .members
                        .iter()
                        .map(|x| {
                            SyncGroupRequestAssignment::default()
                                .with_member_id(x.member_id.clone())
                                .with_assignment(Bytes::from_static(b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"))
                        })
                        .collect();
                    let req = SyncGroupRequest::default()
                        .with_group_id(GroupId(s(&m.group)))
                        .with_generation_id(m.generation)
                        .with_member_id(s(&m.id))
                        .with_assignments(assignments);
                    let (c, frame) = conn.encode(&req, v.sync)?;
                    Ok(Some((Sent::Sync(mi), frame, c)))
                }
                79 => {
                    // MEMBER_ID_REQUIRED: rejoin with the id we were given.
                    m.id = r.member_id.to_string();
                    m.phase = Phase::NeedJoin;
                    Ok(None)
                }
                25 => {
                    m.id.clear();
                    m.phase = Phase::NeedJoin;
                    Ok(None)
                }
                _ => {
                    m.phase = Phase::NeedJoin;
                    Ok(None)
                }
            }
        }
        Sent::Sync(mi) => {
            let (got, r) = conn.read::<SyncGroupRequest>(v.sync).await?;
            check(corr, got)?;
            let mut ms = members.lock().unwrap_or_else(|p| p.into_inner());
            let m = &mut ms[mi];
            if r.error_code == 0 {
                m.phase = Phase::Stable;
                m.synced_at = Some(Instant::now());
            } else {
                if r.error_code == 25 {
                    m.id.clear();
                }
                m.phase = Phase::NeedJoin;
            }
            Ok(None)
        }
        Sent::Heartbeat(mi) => {
            let (got, r) = conn.read::<HeartbeatRequest>(v.heartbeat).await?;
            check(corr, got)?;
            let mut ms = members.lock().unwrap_or_else(|p| p.into_inner());
            let m = &mut ms[mi];
            match r.error_code {
                0 => m.last_heartbeat = Some(Instant::now()),
                25 => {
                    m.id.clear();
                    m.phase = Phase::NeedJoin;
                }
                _ => m.phase = Phase::NeedJoin,
            }
            Ok(None)
        }
    }
}

fn check(want: i32, got: i32) -> Result<(), ClientError> {
    if want == got {
        Ok(())
    } else {
        Err(ClientError::Correlation { want, got })
    }
}
