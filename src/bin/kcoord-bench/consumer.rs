//! KIP-848 scenarios: members that speak ConsumerGroupHeartbeat
//! (`group.protocol=consumer`) as librdkafka does: join with epoch 0 and a
//! client-generated member id, report what they own, take the assignment
//! the coordinator computed, and heartbeat at the interval it asks for
//! (at once after their assignment changed, to acknowledge it).
//!
//! - `consumer-heartbeat`: heartbeats/s of consumer-protocol members and of
//!   classic members, in one run, with their ratio.
//! - `consumer-convergence`: N members while a topic grows (CreatePartitions);
//!   time until every member owns its share of the new partitions.
//! - `consumer-memory` (daemon.rs): resident memory per member.
//! - `consumer-churn` (daemon.rs): resident memory growth per member that
//!   joined and left.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::*;
use kcoord::protocol::client::{s, ClientError, Connection};
use serde_json::json;
use uuid::Uuid;

use crate::load::{self, LaneResult};
use crate::scenarios::{self, Common};
use crate::stats::Report;

/// What a member owns: topic id → partitions.
pub type Owned = BTreeMap<Uuid, BTreeSet<i32>>;

/// One consumer-protocol member.
#[derive(Debug, Clone)]
pub struct CMember {
    pub group: String,
    pub id: String,
    pub epoch: i32,
    pub owned: Owned,
    pub interval_ms: i32,
}

impl CMember {
    pub fn new(group: &str, i: usize) -> CMember {
        // librdkafka generates a UUID-like member id (KIP-1082).
        let id = format!("bench-{}-{i}-{}", std::process::id(), Uuid::new_v4().simple());
        CMember { group: group.to_string(), id, epoch: 0, owned: Owned::new(), interval_ms: 5_000 }
    }

    /// The next heartbeat: a full join at epoch 0, else what it owns.
    fn request(&self, topic: &str) -> ConsumerGroupHeartbeatRequest {
        let r = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(&self.group)))
            .with_member_id(s(&self.id))
            .with_member_epoch(self.epoch);
        if self.epoch == 0 {
            r.with_rebalance_timeout_ms(60_000)
                .with_subscribed_topic_names(Some(vec![TopicName(s(topic))]))
                .with_topic_partitions(Some(Vec::new()))
        } else {
            let owned = self
                .owned
                .iter()
                .map(|(t, ps)| {
                    consumer_group_heartbeat_request::TopicPartitions::default()
                        .with_topic_id(*t)
                        .with_partitions(ps.iter().copied().collect())
                })
                .collect();
            r.with_rebalance_timeout_ms(-1).with_topic_partitions(Some(owned))
        }
    }

    /// Takes the answer in; returns whether the member's assignment or
    /// epoch changed.
    fn apply(&mut self, r: &ConsumerGroupHeartbeatResponse) -> Result<bool, ClientError> {
        if r.error_code != 0 {
            let msg = r.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
            return Err(ClientError::Decode(format!(
                "ConsumerGroupHeartbeat of {} answered {} {msg}",
                self.id,
                kcoord::error_code::ErrorCode(r.error_code).name()
            )));
        }
        let mut changed = r.member_epoch != self.epoch;
        self.epoch = r.member_epoch;
        if r.heartbeat_interval_ms > 0 {
            self.interval_ms = r.heartbeat_interval_ms;
        }
        if let Some(a) = &r.assignment {
            let owned: Owned =
                a.topic_partitions.iter().map(|tp| (tp.topic_id, tp.partitions.iter().copied().collect())).collect();
            changed |= owned != self.owned;
            self.owned = owned;
        }
        Ok(changed)
    }

    pub async fn heartbeat(&mut self, conn: &mut Connection, topic: &str, v: i16) -> Result<bool, ClientError> {
        let r = conn.call(&self.request(topic), v).await?;
        self.apply(&r)
    }

    /// Leaves the group (epoch -1), as a consumer's close does.
    pub async fn leave(&mut self, conn: &mut Connection, v: i16) -> Result<(), ClientError> {
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(&self.group)))
            .with_member_id(s(&self.id))
            .with_member_epoch(-1);
        let r = conn.call(&req, v).await?;
        self.apply(&r)?;
        Ok(())
    }
}

pub fn version(conn: &Connection) -> Result<i16, ClientError> {
    conn.version::<ConsumerGroupHeartbeatRequest>(0, 1)
}

/// Every member of one connection heartbeats once; returns whether any
/// member's epoch or assignment changed.
async fn pass(conn: &mut Connection, members: &mut [CMember], topic: &str) -> Result<bool, ClientError> {
    let v = version(conn)?;
    let mut changed = false;
    for m in members.iter_mut() {
        changed |= m.heartbeat(conn, topic, v).await?;
    }
    Ok(changed)
}

/// Partitions of `topic` that the members own, and whether none is owned twice.
fn coverage(members: &[CMember]) -> (usize, bool) {
    let mut seen = BTreeSet::new();
    let mut disjoint = true;
    for m in members {
        for (t, ps) in &m.owned {
            for p in ps {
                disjoint &= seen.insert((*t, *p));
            }
        }
    }
    (seen.len(), disjoint)
}

/// Joins `groups × members` consumer-protocol members, `per_conn` per
/// connection, and settles them. Returns each connection with its members.
pub async fn join(
    bootstrap: &str,
    groups: &[String],
    members: usize,
    per_conn: usize,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<(Connection, Vec<CMember>)>, ClientError> {
    let all: Vec<CMember> = groups.iter().flat_map(|g| (0..members).map(move |i| CMember::new(g, i))).collect();
    let mut lanes = Vec::new();
    for chunk in all.chunks(per_conn.max(1)) {
        let conn = Connection::connect_negotiated(bootstrap, "kcoord-bench-consumer").await?;
        lanes.push((conn, chunk.to_vec()));
    }
    // Passes of one heartbeat per member (all connections at once) until a
    // pass changes nothing and every group's members share one epoch: each
    // join moves the others' targets, and revocations take a pass each.
    let deadline = Instant::now() + timeout;
    loop {
        let futures = lanes.iter_mut().map(|(conn, ms)| pass(conn, ms, topic));
        let mut changed = false;
        for r in join_all(futures).await {
            changed |= r?;
        }
        let mut epochs: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
        for m in lanes.iter().flat_map(|(_, ms)| ms.iter()) {
            epochs.entry(m.group.as_str()).or_default().insert(m.epoch);
        }
        if !changed && epochs.values().all(|e| e.len() == 1) {
            break;
        }
        if Instant::now() > deadline {
            return Err(ClientError::Timeout(timeout));
        }
    }
    Ok(lanes)
}

/// Steady-state ConsumerGroupHeartbeats: what a reconciled member sends
/// (its epoch, nothing changed), pipelined as the classic scenario does.
async fn consumer_heartbeats(
    c: &Common,
    lanes: &mut [(Connection, Vec<CMember>)],
) -> Result<(LaneResult, Duration), ClientError> {
    let start = Instant::now();
    let futures = lanes.iter_mut().map(|(conn, members)| async move {
        let v = version(conn)?;
        let templates = members
            .iter()
            .map(|m| {
                let req = ConsumerGroupHeartbeatRequest::default()
                    .with_group_id(GroupId(s(&m.group)))
                    .with_member_id(s(&m.id))
                    .with_member_epoch(m.epoch)
                    .with_rebalance_timeout_ms(-1);
                load::template(conn, &req, v)
            })
            .collect::<Result<Vec<_>, _>>()?;
        load::run::<ConsumerGroupHeartbeatRequest>(
            conn,
            &templates,
            v,
            c.depth,
            Instant::now() + c.duration,
            c.max_requests,
            |r| (r.error_code, 1),
        )
        .await
    });
    let mut total = LaneResult::default();
    for r in join_all(futures).await {
        total.merge(r?);
    }
    Ok((total, start.elapsed()))
}

/// Heartbeats/s of consumer-protocol members next to classic members: the
/// classic scenario runs first, then the same number of consumer-protocol
/// members in other groups, each for the same duration on the same daemon.
pub async fn heartbeat_compare(c: &Common, groups: usize, members: usize) -> Result<Report, ClientError> {
    let topic = "kcoord-bench-cg";
    scenarios::ensure_topic(&c.bootstrap, topic, members.max(1) as i32).await?;
    let classic = scenarios::heartbeat(c, groups, members).await?;
    let names: Vec<String> = (0..groups).map(|i| format!("cghb-{}-{i}", std::process::id())).collect();
    let formed = Instant::now();
    let mut lanes = join(&c.bootstrap, &names, members, c.members_per_connection, topic, c.settle_timeout).await?;
    let formed = formed.elapsed();
    let (res, elapsed) = consumer_heartbeats(c, &mut lanes).await?;
    let mut r = Report::new(
        "consumer-heartbeat",
        json!({"groups": groups, "members": members, "connections": lanes.len(), "pipeline": c.depth, "duration_s": c.duration.as_secs_f64()}),
    );
    let classic_rate = classic.metrics.iter().find(|(k, _, _)| k == "heartbeats_per_sec").map_or(0.0, |(_, v, _)| *v);
    for (k, v, unit) in &classic.metrics {
        if k.starts_with("heartbeats_") {
            r.metric(&format!("classic_{k}"), *v, unit);
        }
    }
    let mut lat = res.latencies.clone();
    r.latency("consumer_heartbeats", &mut lat, elapsed);
    let consumer_rate = res.latencies.count() as f64 / elapsed.as_secs_f64().max(1e-9);
    r.metric("consumer_to_classic_ratio", consumer_rate / classic_rate.max(1e-9), "x");
    r.metric("consumer_formation_s", formed.as_secs_f64(), "s");
    let errors: u64 = res.errors.values().sum();
    r.metric("consumer_errors", errors as f64, "count");
    if errors > 0 || classic.failure.is_some() {
        r.fail(format!(
            "heartbeats were answered with errors: consumer {:?}, classic {:?}",
            res.errors, classic.failure
        ));
    }
    Ok(r)
}

/// Grows `topic` to `count` partitions with CreatePartitions.
async fn grow(bootstrap: &str, topic: &str, count: i32) -> Result<(), ClientError> {
    let mut conn = Connection::connect_negotiated(bootstrap, "kcoord-bench-admin").await?;
    let v = conn.version::<CreatePartitionsRequest>(0, 3)?;
    let req = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(TopicName(s(topic)))
            .with_count(count)
            .with_assignments(None)])
        .with_timeout_ms(30_000);
    let r = conn.call(&req, v).await?;
    match r.results.first().map(|x| x.error_code) {
        Some(0) => Ok(()),
        other => Err(ClientError::Decode(format!("CreatePartitions {topic} to {count}: error {other:?}"))),
    }
}

/// N consumer-protocol members of one group share a topic of `from`
/// partitions; the topic grows to `to`; each member keeps heartbeating at
/// the interval the coordinator gives (at once after its assignment
/// changed, as clients acknowledge one). Measures the time from the
/// CreatePartitions answer until every partition is owned by exactly one
/// member and all members are at one epoch past the one before.
pub async fn convergence(c: &Common, members: usize, from: i32, to: i32, rounds: usize) -> Result<Report, ClientError> {
    let mut times = Vec::new();
    let mut join_times = Vec::new();
    let mut interval = 0;
    for round in 0..rounds.max(1) {
        let topic = format!("kcoord-bench-grow-{}-{round}", std::process::id());
        scenarios::ensure_topic(&c.bootstrap, &topic, from).await?;
        let group = format!("cgconv-{}-{round}", std::process::id());
        let joining = Instant::now();
        let lanes = join(&c.bootstrap, std::slice::from_ref(&group), members, 1, &topic, c.settle_timeout).await?;
        join_times.push(joining.elapsed().as_secs_f64());
        let before = lanes.iter().flat_map(|(_, ms)| ms.iter().map(|m| m.epoch)).max().unwrap_or(0);
        let members_now: Vec<CMember> = lanes.iter().flat_map(|(_, ms)| ms.iter().cloned()).collect();
        interval = members_now.first().map_or(0, |m| m.interval_ms);
        let state = Arc::new(Mutex::new(members_now));
        // Members keep heartbeating while the partitions are created (which
        // can take longer than a session on a loaded disk: the catalog, and
        // so the coordinator's topic image, changes only at the end); the
        // clock starts at the answer, where each member's phase is reset.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let phase_start = Arc::new(Mutex::new(None::<Instant>));
        let tasks: Vec<_> = lanes
            .into_iter()
            .enumerate()
            .map(|(i, (conn, ms))| {
                let (state, stop, topic, phase) = (state.clone(), stop.clone(), topic.clone(), phase_start.clone());
                tokio::spawn(run_member(conn, ms.into_iter().next(), i, state, stop, topic, phase))
            })
            .collect();
        grow(&c.bootstrap, &topic, to).await?;
        let start = Instant::now();
        *phase_start.lock().unwrap_or_else(|p| p.into_inner()) = Some(start);
        let deadline = start + c.settle_timeout;
        let converged = loop {
            {
                let ms = state.lock().unwrap_or_else(|p| p.into_inner());
                let (covered, disjoint) = coverage(&ms);
                let epoch = ms.first().map_or(0, |m| m.epoch);
                if covered == to as usize && disjoint && epoch > before && ms.iter().all(|m| m.epoch == epoch) {
                    break Some(start.elapsed());
                }
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in tasks {
            let _ = t.await;
        }
        match converged {
            Some(d) => times.push(d.as_secs_f64()),
            None => return Err(ClientError::Timeout(c.settle_timeout)),
        }
    }
    let mut r = Report::new(
        "consumer-convergence",
        json!({"members": members, "from_partitions": from, "to_partitions": to, "rounds": rounds, "heartbeat_interval_ms": interval}),
    );
    times.sort_by(f64::total_cmp);
    r.metric("convergence_median_s", times[times.len() / 2], "s");
    r.metric("convergence_min_s", times[0], "s");
    r.metric("convergence_max_s", times[times.len() - 1], "s");
    // Members' heartbeats are spread evenly over the interval (member i at
    // i/N of it), so the last one reaches the coordinator (N-1)/N of an
    // interval after the growth: what is left is the coordinator's share.
    let spread = interval as f64 / 1000.0 * (members.saturating_sub(1)) as f64 / members.max(1) as f64;
    r.metric("last_member_first_heartbeat_s", spread, "s");
    join_times.sort_by(f64::total_cmp);
    r.metric("join_median_s", join_times[join_times.len() / 2], "s");
    Ok(r)
}

/// One member's life during the convergence scenario: heartbeat, publish
/// what it owns, wait for the interval unless its assignment just changed.
async fn run_member(
    mut conn: Connection,
    member: Option<CMember>,
    index: usize,
    state: Arc<Mutex<Vec<CMember>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    topic: String,
    phase_start: Arc<Mutex<Option<Instant>>>,
) -> Result<(), ClientError> {
    let Some(mut m) = member else { return Ok(()) };
    let v = version(&conn)?;
    // Members do not heartbeat in lockstep: member i is i/N into its interval.
    let n = state.lock().unwrap_or_else(|p| p.into_inner()).len().max(1) as u64;
    let offset = m.interval_ms.max(1) as u64 * index as u64 / n;
    let mut next = Instant::now() + Duration::from_millis(offset);
    let mut phased = false;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if !phased {
            if let Some(start) = *phase_start.lock().unwrap_or_else(|p| p.into_inner()) {
                next = start + Duration::from_millis(offset);
                phased = true;
            }
        }
        if Instant::now() < next {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        }
        let changed = m.heartbeat(&mut conn, &topic, v).await?;
        if let Some(slot) = state.lock().unwrap_or_else(|p| p.into_inner()).get_mut(index) {
            *slot = m.clone();
        }
        next =
            if changed { Instant::now() } else { Instant::now() + Duration::from_millis(m.interval_ms.max(1) as u64) };
    }
    Ok(())
}
