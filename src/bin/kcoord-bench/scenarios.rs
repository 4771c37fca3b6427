//! The benchmark scenarios.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;
use kcoord::protocol::client::{s, ClientError, Connection};
use serde_json::json;

use crate::by_topic_id;
use crate::load::{self, LaneResult};
use crate::stats::Report;
use crate::swarm::{Member, Phase, Swarm};

pub struct Common {
    pub bootstrap: String,
    pub depth: usize,
    pub duration: Duration,
    pub max_requests: u64,
    pub members_per_connection: usize,
    pub settle_timeout: Duration,
}

fn group_names(prefix: &str, n: usize) -> Vec<String> {
    let run = std::process::id();
    (0..n).map(|i| format!("{prefix}-{run}-{i}")).collect()
}

fn errors_metric(r: &mut Report, res: &LaneResult) {
    let total: u64 = res.errors.values().sum();
    r.metric("errors", total as f64, "count");
    for (code, n) in &res.errors {
        r.metric(&format!("error_{code}"), *n as f64, "count");
    }
}

/// Runs `run` on every lane at once and merges the results; the meter of
/// the daemon's CPU time covers exactly that phase.
async fn run_lanes<F>(swarm: &mut Swarm, run: F) -> Result<(LaneResult, Duration, crate::cpu::Meter), ClientError>
where
    F: AsyncFn(&mut Connection, Vec<Member>) -> Result<LaneResult, ClientError>,
{
    let all = swarm.snapshot();
    let cpu = crate::cpu::Meter::start();
    let start = Instant::now();
    let run = &run;
    let futures = swarm.lanes.iter_mut().map(|lane| {
        let members: Vec<Member> =
            lane.members.iter().map(|i| all[*i].clone()).filter(|m| m.phase != Phase::Left).collect();
        run(&mut lane.conn, members)
    });
    let mut total = LaneResult::default();
    for r in join_all(futures).await {
        total.merge(r?);
    }
    let elapsed = start.elapsed();
    Ok((total, elapsed, cpu))
}

pub async fn heartbeat(c: &Common, groups: usize, members: usize) -> Result<Report, ClientError> {
    let names = group_names("hb", groups);
    let mut swarm = Swarm::connect(&c.bootstrap, &names, members, c.members_per_connection, 0).await?;
    let formed = swarm.settle(c.settle_timeout).await?;
    let v = swarm.versions;
    let (res, elapsed, cpu) = run_lanes(&mut swarm, async |conn: &mut Connection, members: Vec<Member>| {
        let templates = members
            .iter()
            .map(|m| {
                load::template(
                    conn,
                    &HeartbeatRequest::default()
                        .with_group_id(GroupId(s(&m.group)))
                        .with_generation_id(m.generation)
                        .with_member_id(s(&m.id)),
                    v.heartbeat,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        load::run::<HeartbeatRequest>(
            conn,
            &templates,
            v.heartbeat,
            c.depth,
            Instant::now() + c.duration,
            c.max_requests,
            |r| (r.error_code, 1),
        )
        .await
    })
    .await?;
    let mut r = Report::new(
        "heartbeat",
        json!({"groups": groups, "members": members, "connections": swarm.lanes.len(), "pipeline": c.depth, "duration_s": c.duration.as_secs_f64()}),
    );
    let mut lat = res.latencies.clone();
    r.metric("formation_s", formed.as_secs_f64(), "s");
    r.latency("heartbeats", &mut lat, elapsed);
    cpu.report(&mut r, res.latencies.count());
    errors_metric(&mut r, &res);
    if let Some(why) = heartbeat_failure(&res) {
        r.fail(why);
    }
    Ok(r)
}

/// Members of stable groups hear only NONE; any error invalidates the run.
fn heartbeat_failure(res: &LaneResult) -> Option<String> {
    if res.errors.is_empty() {
        return None;
    }
    Some(format!("heartbeats were answered with errors ({}); a stable group answers NONE", error_summary(res)))
}

/// "REBALANCE_IN_PROGRESS × 12, UNKNOWN_MEMBER_ID × 3", by code.
fn error_summary(res: &LaneResult) -> String {
    let mut codes: Vec<(&i16, &u64)> = res.errors.iter().collect();
    codes.sort();
    let named: Vec<String> =
        codes.iter().map(|(c, n)| format!("{} × {n}", kcoord::error_code::ErrorCode(**c).name())).collect();
    named.join(", ")
}

/// Makes sure `topic` has at least `partitions` partitions (CreateTopics
/// when the broker serves it, otherwise the topic must already exist).
pub async fn ensure_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<(), ClientError> {
    let mut conn = crate::net::connect(bootstrap, "kcoord-bench-admin").await?;
    let mv = conn.version::<MetadataRequest>(1, 9)?;
    let md = conn
        .call(
            &MetadataRequest::default()
                .with_topics(Some(vec![
                    metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s(topic))))
                ]))
                .with_allow_auto_topic_creation(false),
            mv,
        )
        .await?;
    if md.topics.first().is_some_and(|t| t.error_code == 0 && t.partitions.len() as i32 >= partitions) {
        return Ok(());
    }
    let cv = conn.version::<CreateTopicsRequest>(2, 5).map_err(|_| {
        ClientError::Decode(format!(
            "topic {topic} with {partitions} partitions is needed (e.g. kcoord --topic {topic}:{partitions})"
        ))
    })?;
    let r = conn
        .call(
            &CreateTopicsRequest::default()
                .with_topics(vec![CreatableTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_num_partitions(partitions)
                    .with_replication_factor(1)])
                .with_timeout_ms(30_000),
            cv,
        )
        .await?;
    match r.topics.first().map(|t| t.error_code) {
        Some(0) | Some(36) => Ok(()),
        other => Err(ClientError::Decode(format!("CreateTopics {topic}: error {other:?}"))),
    }
}

fn commit_request(m: &Member, topic: &str, partitions: i32, metadata: &str, simple: bool) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(&m.group)))
        .with_generation_id_or_member_epoch(if simple { -1 } else { m.generation })
        .with_member_id(s(if simple { "" } else { &m.id }))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(s(topic))).with_partitions(
            (0..partitions)
                .map(|p| {
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(1000 + p as i64)
                        .with_committed_metadata(Some(s(metadata)))
                })
                .collect(),
        )])
}

fn commit_outcome(r: &OffsetCommitResponse) -> (i16, u64) {
    let mut error = 0;
    let mut ok = 0;
    for t in &r.topics {
        for p in &t.partitions {
            if p.error_code == 0 {
                ok += 1;
            } else {
                error = p.error_code;
            }
        }
    }
    (error, ok)
}

/// What a commit scenario commits: `partitions` partitions of `topic` per
/// request, with `metadata_bytes` of metadata each, at `version` when set
/// (v10 names the topic by id).
pub struct CommitLoad<'a> {
    pub partitions: i32,
    pub metadata_bytes: usize,
    pub topic: &'a str,
    pub version: Option<i16>,
}

pub async fn commit(c: &Common, groups: usize, members: usize, load: &CommitLoad<'_>) -> Result<Report, ClientError> {
    let CommitLoad { partitions, metadata_bytes, topic, version } = *load;
    ensure_topic(&c.bootstrap, topic, partitions).await?;
    let names = group_names("commit", groups);
    let mut swarm = Swarm::connect(&c.bootstrap, &names, members, c.members_per_connection, 0).await?;
    swarm.settle(c.settle_timeout).await?;
    let mut v = swarm.versions;
    let mut topic_id = None;
    if let Some(version) = version {
        let mut conn = crate::net::connect(&c.bootstrap, "kcoord-bench-versions").await?;
        v.commit = conn.version::<OffsetCommitRequest>(version, version)?;
        if version >= by_topic_id::VERSION {
            topic_id = Some(by_topic_id::topic_id(&mut conn, topic).await?);
        }
    }
    let metadata = "m".repeat(metadata_bytes);
    let metadata = &metadata;
    let (res, elapsed, cpu) = run_lanes(&mut swarm, async |conn: &mut Connection, members: Vec<Member>| {
        let deadline = Instant::now() + c.duration;
        if let Some(id) = topic_id {
            let templates: Vec<_> =
                members.iter().map(|m| by_topic_id::commit_frame(m, id, partitions, metadata)).collect();
            let header = by_topic_id::RESPONSE_HEADER_VERSION;
            let outcome = by_topic_id::commit_outcome;
            return load::run_raw(conn, &templates, header, c.depth, deadline, c.max_requests, outcome).await;
        }
        let templates = members
            .iter()
            .map(|m| load::template(conn, &commit_request(m, topic, partitions, metadata, false), v.commit))
            .collect::<Result<Vec<_>, _>>()?;
        load::run::<OffsetCommitRequest>(conn, &templates, v.commit, c.depth, deadline, c.max_requests, commit_outcome)
            .await
    })
    .await?;
    let mut r = Report::new(
        "commit",
        json!({"groups": groups, "members": members, "partitions_per_request": partitions, "metadata_bytes": metadata_bytes,
               "version": v.commit, "connections": swarm.lanes.len(), "pipeline": c.depth,
               "duration_s": c.duration.as_secs_f64()}),
    );
    let mut lat = res.latencies.clone();
    r.latency("commits", &mut lat, elapsed);
    cpu.report(&mut r, res.latencies.count());
    r.metric("partitions_per_sec", res.items as f64 / elapsed.as_secs_f64(), "1/s");
    errors_metric(&mut r, &res);
    Ok(r)
}

pub async fn fetch_offsets(
    c: &Common,
    groups: usize,
    partitions: i32,
    connections: usize,
    topic: &str,
) -> Result<Report, ClientError> {
    ensure_topic(&c.bootstrap, topic, partitions).await?;
    let names = group_names("fetch", groups);
    let mut conns = Vec::new();
    for i in 0..connections.max(1) {
        conns.push(crate::net::connect(&c.bootstrap, &format!("kcoord-bench-f{i}")).await?);
    }
    let commit_v = conns[0].version::<OffsetCommitRequest>(2, 7)?;
    let fetch_v = conns[0].version::<OffsetFetchRequest>(1, 7)?;
    // Seed each group with `partitions` committed offsets (simple commits).
    for (i, g) in names.iter().enumerate() {
        let m = Member {
            group: g.clone(),
            id: String::new(),
            generation: -1,
            phase: Phase::Left,
            synced_at: None,
            joined_at: None,
            last_heartbeat: None,
        };
        let conn = &mut conns[i % connections.max(1)];
        let r = conn.call(&commit_request(&m, topic, partitions, "", true), commit_v).await?;
        if commit_outcome(&r).0 != 0 {
            return Err(ClientError::Decode(format!("seeding commit failed: {:?}", commit_outcome(&r))));
        }
    }
    let start = Instant::now();
    let futures = conns.iter_mut().enumerate().map(|(i, conn)| {
        let names = names.clone();
        async move {
            let templates = names
                .iter()
                .enumerate()
                .filter(|(j, _)| j % connections.max(1) == i)
                .map(|(_, g)| {
                    load::template(
                        conn,
                        &OffsetFetchRequest::default().with_group_id(GroupId(s(g))).with_topics(Some(vec![
                            OffsetFetchRequestTopic::default()
                                .with_name(TopicName(s(topic)))
                                .with_partition_indexes((0..partitions).collect()),
                        ])),
                        fetch_v,
                    )
                })
                .collect::<Result<Vec<_>, _>>()?;
            load::run::<OffsetFetchRequest>(
                conn,
                &templates,
                fetch_v,
                c.depth,
                Instant::now() + c.duration,
                c.max_requests,
                |r| {
                    let n: u64 = r.topics.iter().map(|t| t.partitions.len() as u64).sum();
                    (r.error_code, n)
                },
            )
            .await
        }
    });
    let mut res = LaneResult::default();
    for r in join_all(futures).await {
        res.merge(r?);
    }
    let elapsed = start.elapsed();
    let mut r = Report::new(
        "fetch-offsets",
        json!({"groups": groups, "partitions": partitions, "connections": connections, "pipeline": c.depth, "duration_s": c.duration.as_secs_f64()}),
    );
    let mut lat = res.latencies.clone();
    r.latency("fetches", &mut lat, elapsed);
    r.metric("partitions_per_sec", res.items as f64 / elapsed.as_secs_f64(), "1/s");
    errors_metric(&mut r, &res);
    Ok(r)
}

/// Time for M members to form a new group (first join to last sync), then
/// rounds of: one member leaves (or a new one joins), every other member
/// rejoins at once; time until every member has its SyncGroup answer.
pub async fn rebalance(c: &Common, members: usize, change: &str, rounds: usize) -> Result<Report, ClientError> {
    let names = group_names("rebalance", 1);
    let mut swarm = Swarm::connect(&c.bootstrap, &names, members + rounds, c.members_per_connection, rounds).await?;
    // Extra members wait outside the group until a "join" round needs them.
    {
        let mut ms = swarm.members.lock().unwrap_or_else(|p| p.into_inner());
        for m in ms.iter_mut().skip(members) {
            m.phase = Phase::Left;
        }
    }
    let first = swarm.settle(c.settle_timeout).await?;
    let mut control = crate::net::connect(&c.bootstrap, "kcoord-bench-control").await?;
    let mut total = Vec::new();
    let mut after_rejoin = Vec::new();
    for round in 0..rounds {
        let trigger = Instant::now();
        match change {
            "join" => swarm.start_join(members + round).await?,
            _ => leave_one(&mut swarm, round).await?,
        }
        // The others rejoin once the group is rebalancing, as clients do after
        // a heartbeat says so. (Earlier, a follower's JoinGroup would be
        // answered at once in the old generation, and its next request would
        // queue behind the parked JoinGroups on its shared connection.)
        wait_for_state(&mut control, &names[0], "PreparingRebalance", c.settle_timeout).await?;
        swarm.rejoin_all();
        swarm.settle(c.settle_timeout).await?;
        let ms = swarm.snapshot();
        let active: Vec<&Member> = ms.iter().filter(|m| m.phase != Phase::Left).collect();
        let last_sync = active.iter().filter_map(|m| m.synced_at).max().unwrap_or(trigger);
        let last_join = active.iter().filter_map(|m| m.joined_at).max().unwrap_or(trigger);
        total.push(last_sync.duration_since(trigger));
        after_rejoin.push(last_sync.saturating_duration_since(last_join));
    }
    let ms = |v: &[Duration]| {
        let mut v: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let mut r = Report::new(
        "rebalance",
        json!({"members": members, "change": change, "rounds": rounds, "connections": swarm.lanes.len()}),
    );
    r.metric("first_join_ms", first.as_secs_f64() * 1000.0, "ms");
    r.metric("rebalance_median_ms", ms(&total), "ms");
    r.metric("after_last_rejoin_median_ms", ms(&after_rejoin), "ms");
    Ok(r)
}

/// Polls DescribeGroups until `group` is in `state`.
async fn wait_for_state(conn: &mut Connection, group: &str, state: &str, timeout: Duration) -> Result<(), ClientError> {
    let v = conn.version::<DescribeGroupsRequest>(0, 5)?;
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
    let start = Instant::now();
    loop {
        let r = conn.call(&req, v).await?;
        if r.groups.first().is_some_and(|g| g.group_state.as_str() == state) {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(ClientError::Timeout(timeout));
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// Sends LeaveGroup for one active member.
async fn leave_one(swarm: &mut Swarm, round: usize) -> Result<(), ClientError> {
    let (idx, m) = {
        let ms = swarm.members.lock().unwrap_or_else(|p| p.into_inner());
        let active: Vec<(usize, Member)> =
            ms.iter().cloned().enumerate().filter(|(_, m)| m.phase != Phase::Left).collect();
        active[round % active.len()].clone()
    };
    let v = swarm.versions;
    let lane = swarm
        .lanes
        .iter_mut()
        .find(|l| l.members.contains(&idx))
        .ok_or_else(|| ClientError::Decode("no lane".into()))?;
    let req = if v.leave >= 3 {
        LeaveGroupRequest::default()
            .with_group_id(GroupId(s(&m.group)))
            .with_members(vec![MemberIdentity::default().with_member_id(s(&m.id))])
    } else {
        LeaveGroupRequest::default().with_group_id(GroupId(s(&m.group))).with_member_id(s(&m.id))
    };
    lane.conn.call(&req, v.leave).await?;
    let mut ms = swarm.members.lock().unwrap_or_else(|p| p.into_inner());
    ms[idx].phase = Phase::Left;
    Ok(())
}

pub async fn join_storm(c: &Common, groups: usize, members: usize) -> Result<Report, ClientError> {
    let names = group_names("storm", groups);
    let mut swarm = Swarm::connect(&c.bootstrap, &names, members, c.members_per_connection, 0).await?;
    let took = swarm.settle(c.settle_timeout).await?;
    let mut r =
        Report::new("join-storm", json!({"groups": groups, "members": members, "connections": swarm.lanes.len()}));
    r.metric("all_stable_s", took.as_secs_f64(), "s");
    r.metric("groups_per_sec", groups as f64 / took.as_secs_f64(), "1/s");
    r.metric("members_per_sec", (groups * members) as f64 / took.as_secs_f64(), "1/s");
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_run_with_any_error_fails_naming_the_codes() {
        let mut res = LaneResult::default();
        assert_eq!(heartbeat_failure(&res), None);
        res.errors.insert(27, 12);
        res.errors.insert(25, 3);
        let why = heartbeat_failure(&res).expect("fails");
        assert!(why.contains("UNKNOWN_MEMBER_ID × 3, REBALANCE_IN_PROGRESS × 12"), "{why}");
    }
}
