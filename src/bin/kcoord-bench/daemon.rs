//! Scenarios that run their own kcoord process: recovery time and memory.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kcoord::coordinator::records::{self, OffsetValue, Record};
use kcoord::coordinator::routing::partition_for;
use kcoord::protocol::client::ClientError;
use kcoord::storage::{Log, LogOptions};
use serde_json::json;

use crate::scenarios::{self, Common};
use crate::stats::Report;
use crate::swarm::Swarm;

pub struct Spawned {
    child: Child,
    pub addr: String,
    stderr: PathBuf,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts kcoord on a free loopback port; returns once it prints its address.
pub fn spawn(bin: &Path, data_dir: &Path, extra: &[&str]) -> std::io::Result<Spawned> {
    let stderr = data_dir.with_extension("log");
    let mut child = Command::new(bin)
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(["--log-format", "json", "--log-level", "info"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr)?)
        .spawn()?;
    let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout"))?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr = line
        .split("serving on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .ok_or_else(|| std::io::Error::other(format!("unexpected output: {line:?}")))?
        .to_string();
    Ok(Spawned { child, addr, stderr })
}

/// Starts kcoord in `dir/data` with `storage.fsync=never` and each of
/// `settings` (`key=value`): the memory scenarios measure what the daemon
/// keeps, not what the disk costs.
fn spawn_unsynced(bin: &Path, dir: &Path, settings: &[String]) -> std::io::Result<Spawned> {
    let mut args = vec!["--set".to_string(), "storage.fsync=never".to_string()];
    for s in settings {
        args.push("--set".into());
        args.push(s.clone());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    spawn(bin, &dir.join("data"), &args)
}

impl Spawned {
    /// Resident memory of the daemon, in bytes.
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or(0)
    }

    /// Waits for the "every shard loaded" log line; returns the elapsed
    /// milliseconds the daemon reports.
    pub fn wait_ready(&self, timeout: Duration) -> Option<u64> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            for line in text.lines() {
                if line.contains("group coordinator ready") {
                    let v: serde_json::Value = serde_json::from_str(line).ok()?;
                    return v["fields"]["elapsed_ms"].as_u64();
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

/// Writes `n` offset commit records straight into the shard logs of a fresh
/// data dir (as `shards` coordinator shards), spread over groups of 100
/// partitions each: the same bytes the daemon would have written.
fn write_offsets(dir: &Path, n: u64, shards: u32) -> std::io::Result<()> {
    let root = dir.join("coordinator");
    let mut logs: Vec<Log> = (0..shards)
        .map(|i| {
            Log::open(&root.join(format!("shard-{i:04}")), LogOptions::new(104_857_600, false), &mut |_, _| Ok(()))
                .map_err(std::io::Error::other)
        })
        .collect::<Result<_, _>>()?;
    let mut batch: Vec<Vec<Bytes>> = vec![Vec::new(); shards as usize];
    let now = 1_700_000_000_000i64;
    for i in 0..n {
        let group = format!("recovery-{}", i / 100);
        let shard = partition_for(&group, shards) as usize;
        let rec = Record::offset(
            &group,
            "t",
            (i % 100) as i32,
            OffsetValue {
                offset: i as i64,
                leader_epoch: 0,
                metadata: String::new(),
                commit_timestamp: now,
                expire_timestamp: None,
            },
        );
        batch[shard].push(records::encode(&rec, now).map_err(|e| std::io::Error::other(e.to_string()))?);
        if batch[shard].len() >= 1024 {
            let refs: Vec<&[u8]> = batch[shard].iter().map(|b| b.as_ref()).collect();
            logs[shard].append(&refs)?;
            batch[shard].clear();
        }
    }
    for (i, b) in batch.iter().enumerate() {
        if !b.is_empty() {
            let refs: Vec<&[u8]> = b.iter().map(|x| x.as_ref()).collect();
            logs[i].append(&refs)?;
        }
    }
    for l in &mut logs {
        l.sync()?;
    }
    Ok(())
}

pub async fn recovery(bin: &Path, records_n: u64, shards: u32) -> Result<Report, ClientError> {
    let tmp = tempdir()?;
    let data = tmp.join("data");
    let started = Instant::now();
    write_offsets(&data, records_n, shards)?;
    let write_s = started.elapsed().as_secs_f64();
    let bytes: u64 = dir_size(&data);
    let spawn_at = Instant::now();
    let d = spawn(bin, &data, &["--set", &format!("offsets.partitions={shards}")])?;
    let reported =
        d.wait_ready(Duration::from_secs(600)).ok_or_else(|| ClientError::Timeout(Duration::from_secs(600)))?;
    let wall = spawn_at.elapsed();
    let mut r = Report::new("recovery", json!({"records": records_n, "shards": shards, "log_bytes": bytes}));
    r.metric("load_ms", reported as f64, "ms");
    r.metric("records_per_sec", records_n as f64 / (reported.max(1) as f64 / 1000.0), "1/s");
    r.metric("start_to_ready_ms", wall.as_secs_f64() * 1000.0, "ms");
    r.metric("bytes_per_record_on_disk", bytes as f64 / records_n.max(1) as f64, "B");
    r.metric("rss_after_load_mb", d.rss() as f64 / 1e6, "MB");
    r.metric("generate_s", write_s, "s");
    drop(d);
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(r)
}

pub async fn memory(
    bin: &Path,
    groups: usize,
    members: usize,
    partitions: i32,
    per_conn: usize,
) -> Result<Report, ClientError> {
    if partitions < 1 {
        let why = "memory needs --partitions >= 1: each group is created by its first offset";
        return Err(ClientError::Io(std::io::Error::other(why)));
    }
    let tmp = tempdir()?;
    let d = spawn_unsynced(
        bin,
        &tmp,
        &["group.initial_rebalance_delay_ms=1000".into(), "server.max_connections=100000".into()],
    )?;
    d.wait_ready(Duration::from_secs(60));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let base = d.rss();
    let common = Common {
        bootstrap: d.addr.clone(),
        depth: 16,
        duration: Duration::from_secs(1),
        max_requests: u64::MAX,
        members_per_connection: per_conn,
        settle_timeout: Duration::from_secs(300),
    };
    let names: Vec<String> = (0..groups).map(|i| format!("mem-{i}")).collect();
    // Offsets first, while the groups are Empty: Kafka accepts commits
    // without a member id only then (a Stable group answers UNKNOWN_MEMBER_ID).
    scenarios::ensure_topic(&common.bootstrap, "memtopic", partitions).await?;
    let mut conn = crate::net::connect(&common.bootstrap, "kcoord-bench-mem").await?;
    // Groups: the first offset of each creates it.
    commit_offsets(&mut conn, &names, 0..1).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_groups = d.rss();
    commit_offsets(&mut conn, &names, 1..partitions).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_offsets = d.rss();
    let mut swarm = Swarm::connect(&common.bootstrap, &names, members, per_conn, 0).await?;
    swarm.settle(common.settle_timeout).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_members = d.rss();
    let n_groups = groups as f64;
    let n_members = (groups * members) as f64;
    let n_later_offsets = n_groups * (partitions - 1) as f64;
    let mut r = Report::new(
        "memory",
        json!({"groups": groups, "members": members, "partitions": partitions, "members_per_connection": per_conn}),
    );
    r.metric("rss_base_mb", base as f64 / 1e6, "MB");
    r.metric("rss_final_mb", with_members as f64 / 1e6, "MB");
    // A group is measured with its first offset; that offset's share is
    // taken out when later offsets were measured (with one partition the
    // group's figure includes its only offset).
    let group_and_first = (with_groups.saturating_sub(base)) as f64 / n_groups.max(1.0);
    let mut first_offset = 0.0;
    if partitions > 1 {
        first_offset = (with_offsets.saturating_sub(with_groups)) as f64 / n_later_offsets;
        r.metric("bytes_per_offset", first_offset, "B");
    }
    r.metric("bytes_per_group", (group_and_first - first_offset).max(0.0), "B");
    // Members include their share of the connections carrying them.
    r.metric("bytes_per_member", (with_members.saturating_sub(with_offsets)) as f64 / n_members.max(1.0), "B");
    drop(swarm);
    drop(d);
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(r)
}

/// Resident memory per consumer-protocol member (KIP-848): the daemon's RSS
/// before and after `groups × members` members joined and reconciled, and
/// the same for as many classic members in other groups, in one daemon.
pub async fn consumer_memory(
    bin: &Path,
    groups: usize,
    members: usize,
    per_conn: usize,
) -> Result<Report, ClientError> {
    let tmp = tempdir()?;
    let d = spawn_unsynced(
        bin,
        &tmp,
        &[
            "group.initial_rebalance_delay_ms=1000".into(),
            "server.max_connections=100000".into(),
            format!("group.consumer.max_size={}", members.max(1)),
        ],
    )?;
    d.wait_ready(Duration::from_secs(60));
    let topic = "memtopic";
    scenarios::ensure_topic(&d.addr, topic, members.max(1) as i32).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let base = d.rss();
    let names: Vec<String> = (0..groups).map(|i| format!("cmem-{i}")).collect();
    let lanes = crate::consumer::join(&d.addr, &names, members, per_conn, topic, Duration::from_secs(300)).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_consumer = d.rss();
    let classic_names: Vec<String> = (0..groups).map(|i| format!("kmem-{i}")).collect();
    let mut swarm = Swarm::connect(&d.addr, &classic_names, members, per_conn, 0).await?;
    swarm.settle(Duration::from_secs(300)).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_classic = d.rss();
    let n = (groups * members).max(1) as f64;
    let mut r = Report::new(
        "consumer-memory",
        json!({"groups": groups, "members": members, "partitions": members, "members_per_connection": per_conn}),
    );
    r.metric("rss_base_mb", base as f64 / 1e6, "MB");
    r.metric("rss_final_mb", with_classic as f64 / 1e6, "MB");
    // Members include their share of the connections carrying them.
    let consumer = with_consumer.saturating_sub(base) as f64 / n;
    let classic = with_classic.saturating_sub(with_consumer) as f64 / n;
    r.metric("bytes_per_consumer_member", consumer, "B");
    r.metric("bytes_per_classic_member", classic, "B");
    r.metric("consumer_to_classic_ratio", consumer / classic.max(1.0), "x");
    drop(lanes);
    drop(swarm);
    drop(d);
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(r)
}

/// Members of one KIP-848 group join (one heartbeat at epoch 0) and leave
/// (epoch -1), `batch` at a time, until `members` have come and gone, as a
/// crash-looping or short-lived consumer fleet does. Each leave writes
/// tombstones for the member's records; the resident memory growth per
/// member over the second half of the run (after the allocator and the
/// log's first compactions have warmed up) is what churn costs for good.
pub async fn consumer_churn(bin: &Path, members: usize, batch: usize) -> Result<Report, ClientError> {
    let tmp = tempdir()?;
    let d = spawn_unsynced(
        bin,
        &tmp,
        &[
            "group.initial_rebalance_delay_ms=0".into(),
            "offsets.partitions=1".into(),
            format!("group.consumer.max_size={}", batch.max(1)),
        ],
    )?;
    d.wait_ready(Duration::from_secs(60));
    let topic = "churntopic";
    scenarios::ensure_topic(&d.addr, topic, 8).await?;
    let mut conn = kcoord::protocol::client::Connection::connect_negotiated(&d.addr, "kcoord-bench-churn").await?;
    let v = crate::consumer::version(&conn)?;
    let rounds = members.div_ceil(batch.max(1));
    let started = Instant::now();
    let mut rss_half = 0;
    for round in 0..rounds {
        if round == rounds / 2 {
            rss_half = d.rss();
        }
        let mut joined: Vec<crate::consumer::CMember> =
            (0..batch.max(1)).map(|i| crate::consumer::CMember::new("churn", round * batch + i)).collect();
        for m in &mut joined {
            m.heartbeat(&mut conn, topic, v).await?;
        }
        for m in &mut joined {
            m.leave(&mut conn, v).await?;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let rss_end = d.rss();
    let second_half = (rounds - rounds / 2) * batch.max(1);
    let mut r = Report::new("consumer-churn", json!({"members": rounds * batch.max(1), "batch": batch}));
    r.metric("rss_half_mb", rss_half as f64 / 1e6, "MB");
    r.metric("rss_final_mb", rss_end as f64 / 1e6, "MB");
    r.metric("bytes_per_churned_member", rss_end.saturating_sub(rss_half) as f64 / second_half.max(1) as f64, "B");
    r.metric("members_per_sec", (rounds * batch.max(1)) as f64 / elapsed.max(1e-9), "1/s");
    r.metric("log_bytes", dir_size(&tmp.join("data")) as f64, "B");
    drop(conn);
    drop(d);
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(r)
}

/// Commits offset `p` for partitions `range` of "memtopic" in each group,
/// as a group without members (generation -1).
async fn commit_offsets(
    conn: &mut kcoord::protocol::client::Connection,
    groups: &[String],
    range: std::ops::Range<i32>,
) -> Result<(), ClientError> {
    use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
    use kcoord::protocol::client::s;
    if range.is_empty() {
        return Ok(());
    }
    let v = conn.version::<OffsetCommitRequest>(2, 7)?;
    for g in groups {
        let partitions = range
            .clone()
            .map(|p| OffsetCommitRequestPartition::default().with_partition_index(p).with_committed_offset(p as i64));
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(s(g)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("memtopic")))
                .with_partitions(partitions.collect())]);
        let r = conn.call(&req, v).await?;
        if let Some(p) = r.topics.iter().flat_map(|t| &t.partitions).find(|p| p.error_code != 0) {
            return Err(ClientError::Io(std::io::Error::other(format!(
                "commit to {g} failed with error {}",
                p.error_code
            ))));
        }
    }
    Ok(())
}

fn tempdir() -> std::io::Result<PathBuf> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("kcoord-bench-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn dir_size(p: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                total += dir_size(&path);
            } else if let Ok(m) = e.metadata() {
                total += m.len();
            }
        }
    }
    total
}
