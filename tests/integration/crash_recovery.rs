//! Crash safety of acknowledged commits: clients commit continuously with
//! `storage.fsync = always` while the real daemon binary is killed with
//! SIGKILL at random moments several times. After each restart every
//! acknowledged commit must be fetched back with its metadata, and nothing
//! that was never sent may appear.

use crate::common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;

const GROUPS: usize = 6;
const PARTITIONS: i32 = 4;

struct Daemon {
    child: Child,
    addr: SocketAddr,
}

fn start(dir: &std::path::Path, listen: &str) -> Daemon {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcoord"))
        .args(["--listen", listen, "--data-dir"])
        .arg(dir)
        .args([
            "--topic",
            "t:4",
            "--set",
            "storage.fsync=always",
            "--set",
            "offsets.partitions=4",
            "--log-level",
            "warn",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kcoord");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("read the serving line");
    let addr = line
        .split("serving on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
    Daemon { child, addr }
}

/// Per (group, partition): offsets sent, and the highest acknowledged.
#[derive(Default, Debug)]
struct Ledger {
    sent: HashMap<(usize, i32), Vec<i64>>,
    acked: HashMap<(usize, i32), i64>,
}

fn commit(group: usize, partition: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(sb(&format!("crash-{group}"))))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb("t"))).with_partitions(vec![
            OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)
                .with_committed_metadata(Some(sb(&format!("meta-{offset}")))),
        ])])
}

/// Commits increasing offsets to every partition of one group until the
/// connection breaks; returns the next offset to use.
async fn committer(addr: SocketAddr, group: usize, mut next: i64, ledger: Arc<Mutex<Ledger>>) -> i64 {
    let Ok(mut c) = Client::try_connect(addr).await else { return next };
    loop {
        for p in 0..PARTITIONS {
            let (_, frame) = c.frame(&commit(group, p, next), 8);
            ledger.lock().unwrap().sent.entry((group, p)).or_default().push(next);
            if c.send_raw(&frame).await.is_err() {
                return next + 1;
            }
            let Ok(resp) = c.read_frame().await else { return next + 1 };
            let (_, r) = Client::decode::<OffsetCommitRequest>(resp, 8);
            let error = r.topics[0].partitions[0].error_code;
            if error == 0 {
                let mut l = ledger.lock().unwrap();
                let e = l.acked.entry((group, p)).or_insert(next);
                *e = (*e).max(next);
            } else {
                // Retriable while the shard loads; anything else is a bug.
                assert_eq!(error, 14, "unexpected commit error {error}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            next += 1;
        }
    }
}

async fn check(addr: SocketAddr, ledger: &Ledger) -> usize {
    let mut c = Client::connect(addr).await;
    let mut checked = 0;
    for group in 0..GROUPS {
        let req = OffsetFetchRequest::default().with_group_id(GroupId(sb(&format!("crash-{group}")))).with_topics(
            Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(sb("t")))
                .with_partition_indexes((0..PARTITIONS).collect())]),
        );
        // Right after a restart the shard may still be loading (error 14).
        let mut r = c.send(&req, 7).await;
        let deadline = std::time::Instant::now() + DEADLINE;
        while r.error_code == 14 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            r = c.send(&req, 7).await;
        }
        assert_eq!(r.error_code, 0);
        for p in &r.topics[0].partitions {
            let key = (group, p.partition_index);
            let sent = ledger.sent.get(&key).cloned().unwrap_or_default();
            if let Some(&acked) = ledger.acked.get(&key) {
                assert!(
                    p.committed_offset >= acked,
                    "group {group} partition {}: acknowledged {acked} but fetched {}",
                    p.partition_index,
                    p.committed_offset
                );
                checked += 1;
            }
            if p.committed_offset >= 0 {
                assert!(sent.contains(&p.committed_offset), "fetched {} which was never sent", p.committed_offset);
                assert_eq!(p.metadata.as_deref(), Some(format!("meta-{}", p.committed_offset).as_str()));
            }
        }
    }
    checked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_commits_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start(dir.path(), "127.0.0.1:0");
    let listen = daemon.addr.to_string();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut next: Vec<i64> = vec![0; GROUPS];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut total_checked = 0;
    for round in 0..4 {
        let tasks: Vec<_> =
            (0..GROUPS).map(|g| tokio::spawn(committer(daemon.addr, g, next[g], ledger.clone()))).collect();
        // Let commits flow for a while, then kill without warning.
        tokio::time::sleep(Duration::from_millis(150 + rand(400))).await;
        daemon.child.kill().expect("SIGKILL");
        daemon.child.wait().unwrap();
        for (g, t) in tasks.into_iter().enumerate() {
            next[g] = t.await.unwrap();
        }
        daemon = start(dir.path(), &listen);
        let snapshot = std::mem::take(&mut *ledger.lock().unwrap());
        let acked: usize = snapshot.acked.len();
        let sent: usize = snapshot.sent.values().map(|v| v.len()).sum();
        eprintln!("round {round}: {sent} commits sent, {acked} partitions with acknowledged commits");
        assert!(acked > 0, "round {round}: no commit was acknowledged");
        total_checked += check(daemon.addr, &snapshot).await;
        *ledger.lock().unwrap() = snapshot;
    }
    assert!(total_checked >= GROUPS, "checked {total_checked} partitions");
    daemon.child.kill().ok();
}
