//! The daemon under a low open-file limit (RLIMIT_NOFILE, set for the child
//! process as `ulimit -n` would): topic creation stops at
//! `topics.max_partitions` with Kafka's POLICY_VIOLATION, partition segment
//! files are kept open through a bounded cache so descriptors do not grow
//! with partitions, commits keep working, accept failures on EMFILE are
//! logged and recovered from, and a restart with more partitions on disk
//! than the limit succeeds. Also, in process: Kafka's per-request bound on
//! CreateTopics and the per-request bound on Metadata auto-creation.
//!
//! Waits are conditions bounded by [`DEADLINE`]; nothing asserts timing.

use crate::common;
use crate::support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::*;
use support::{batch, create_topics, new_topic, produce};

/// Kafka's POLICY_VIOLATION and LEADER_NOT_AVAILABLE.
const POLICY_VIOLATION: i16 = 44;
const LEADER_NOT_AVAILABLE: i16 = 5;

/// The open-file limit of the daemon under test: above what 50 shards need
/// (64 reserved + 2 per shard = 164, plus a minimal cache and a few
/// connections), far below the partitions the test creates.
const LIMIT: u64 = 256;
const CAP: usize = 300;

/// A running `kcoord` child and its stderr lines.
struct Daemon {
    child: Child,
    addr: std::net::SocketAddr,
    lines: Receiver<String>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `kcoord` with RLIMIT_NOFILE set to `limit` (soft and hard, so the
/// daemon cannot raise it); None (with stderr) if it exited instead.
fn start(dir: &Path, limit: u64, extra: &[&str]) -> Result<Daemon, String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kcoord"));
    cmd.args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .args(["--log-level", "warn"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn kcoord");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout")).read_line(&mut first).expect("read stdout");
    let Some(addr) = first.split("serving on ").nth(1).and_then(|r| r.split_whitespace().next()) else {
        let _ = child.wait();
        return Err(lines.try_iter().collect::<Vec<_>>().join("\n"));
    };
    let addr = addr.parse().expect("address");
    Ok(Daemon { child, addr, lines })
}

impl Daemon {
    /// Waits for a stderr line containing every needle; returns it.
    fn wait_for_line(&self, needles: &[&str]) -> String {
        let start = Instant::now();
        let mut seen = String::new();
        while let Some(left) = DEADLINE.checked_sub(start.elapsed()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if needles.iter().all(|n| line.contains(n)) => return line,
                Ok(line) => {
                    seen.push_str(&line);
                    seen.push('\n');
                }
                Err(_) => break,
            }
        }
        panic!("no stderr line with {needles:?}; seen:\n{seen}");
    }

    /// Descriptors the daemon holds open now.
    fn open_descriptors(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).map(|d| d.count()).unwrap_or(0)
    }

    fn stop(mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < DEADLINE {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "clean shutdown: {status}");
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the daemon did not stop");
    }
}

fn topic_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("fd-topic-{i}")).collect()
}

/// Metadata v9 naming `names`, allowing auto-creation; (name, error) per topic.
async fn metadata(c: &mut Client, names: &[String]) -> Vec<(String, i16)> {
    let req = MetadataRequest::default().with_allow_auto_topic_creation(true).with_topics(Some(
        names.iter().map(|n| MetadataRequestTopic::default().with_name(Some(TopicName(sb(n))))).collect(),
    ));
    c.send(&req, 9)
        .await
        .topics
        .iter()
        .map(|t| (t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(), t.error_code))
        .collect()
}

/// A simple (generation -1) commit of `topic`-0 by `group`; its error code,
/// retrying while the group's shard is still loading.
async fn commit(c: &mut Client, group: &str, topic: &str, offset: i64) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb(topic))).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(offset),
        ])]);
    let start = Instant::now();
    loop {
        let code = c.send(&req, 8).await.topics[0].partitions[0].error_code;
        if code != 14 || start.elapsed() > DEADLINE {
            return code;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Commits by 100 groups (spread over every shard) all succeed.
async fn commits_succeed(c: &mut Client, topics: &[String], offset: i64) {
    for (i, topic) in topics.iter().enumerate().take(100) {
        assert_eq!(commit(c, &format!("group-{i}"), topic, offset).await, 0, "commit by group-{i}");
    }
}

#[tokio::test]
async fn under_a_low_open_file_limit_creation_stops_at_the_cap_and_commits_produce_and_restarts_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let settings = [
        "--set",
        "topics.max_topics=100000",
        "--set",
        &format!("topics.max_partitions={CAP}"),
        "--set",
        "topics.max_auto_create_per_request=1000",
    ];
    let d = start(dir.path(), LIMIT, &settings).expect("starts under the limit");
    let names = topic_names(CAP + 100);
    let mut c = Client::connect(d.addr).await;

    // One request naming more topics than the cap allows.
    let answers = metadata(&mut c, &names).await;
    let created = answers.iter().filter(|(_, e)| *e == 0).count();
    let refused: Vec<_> = answers.iter().filter(|(_, e)| *e == POLICY_VIOLATION).collect();
    assert_eq!(created, CAP, "topics up to topics.max_partitions are created");
    assert_eq!(refused.len(), 100, "the rest get POLICY_VIOLATION: {answers:?}");
    assert_eq!(refused[0].0, names[CAP]);
    d.wait_for_line(&["WARN", "refusing topic creation", "topics.max_partitions (300)"]);
    let after_creation = d.open_descriptors();
    assert!(after_creation < LIMIT as usize, "{after_creation} descriptors open");

    // CreateTopics past the cap: the same error, with a message.
    let r = create_topics(&mut c, 5, vec![new_topic("one-more", 1, 1, &[])], false).await;
    assert_eq!(r[0].error_code, POLICY_VIOLATION);
    assert!(r[0].error_message.as_ref().unwrap().contains("topics.max_partitions"), "{:?}", r[0].error_message);

    // Every partition stays writable although they cannot all be open at once.
    let created_names = &names[..CAP];
    for topic in created_names {
        let (error, _) = produce(&mut c, 8, topic, 0, batch(&[("k", "v")], 1_000, None)).await;
        assert_eq!(error, 0, "produce to {topic}");
    }
    let after_produce = d.open_descriptors();
    assert!(after_produce < LIMIT as usize, "{after_produce} descriptors open after producing to {CAP} partitions");
    commits_succeed(&mut c, created_names, 1).await;
    println!("descriptors open: {after_creation} after creating {CAP} topics, {after_produce} after producing to each");

    // Restart with more partitions on disk than the open-file limit.
    drop(c);
    d.stop();
    let d = start(dir.path(), LIMIT, &settings).expect("restarts with more partitions than the limit");
    let mut c = Client::connect(d.addr).await;
    let answers = metadata(&mut c, created_names).await;
    assert!(answers.iter().all(|(_, e)| *e == 0), "every topic is back: {answers:?}");
    commits_succeed(&mut c, created_names, 2).await;
    for topic in created_names.iter().rev().take(50) {
        let (error, base) = produce(&mut c, 8, topic, 0, batch(&[("k", "v")], 1_000, None)).await;
        assert_eq!((error, base), (0, 1), "produce to {topic} after the restart");
    }
}

#[tokio::test]
async fn connections_past_what_the_open_file_limit_holds_are_refused_and_the_daemon_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = start(dir.path(), LIMIT, &["--topic", "t:1"]).expect("starts under the limit");
    // A client that was there first keeps being served throughout.
    let mut first = Client::connect(d.addr).await;
    // More connections than the descriptors left for connections: those past
    // the budget are refused like connections past server.max_connections,
    // so the coordinator shards keep the descriptors they need.
    let mut held = Vec::new();
    for _ in 0..LIMIT {
        held.push(tokio::net::TcpStream::connect(d.addr).await.expect("kernel accepts"));
    }
    let line = d.wait_for_line(&["WARN", "refusing connections", "max_connections"]);
    assert!(line.contains("refused"), "{line}");
    let topics = vec!["t".to_string()];
    commits_succeed(&mut first, &topics, 1).await;
    assert!(d.child.try_wait().unwrap().is_none(), "the daemon is still running");
    drop(held);
    // Once they are closed, new clients are served again.
    eventually("a client to be served again", || async {
        let mut c = Client::try_connect(d.addr).await.ok()?;
        let (_, frame) = c.frame(&ApiVersionsRequest::default(), 0);
        c.send_raw(&frame).await.ok()?;
        tokio::time::timeout(std::time::Duration::from_secs(2), c.read_frame()).await.ok()?.ok()
    })
    .await;
    commits_succeed(&mut first, &topics, 2).await;
}

#[test]
fn a_limit_too_low_for_the_coordinator_shards_refuses_the_start_with_what_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    let err = start(dir.path(), 100, &[]).err().expect("refuses to start");
    assert!(err.contains("the open-file limit (RLIMIT_NOFILE) is 100, but kcoord needs at least 188"), "{err}");
}

#[tokio::test]
async fn a_create_topics_needing_more_than_ten_thousand_records_is_refused_whole() {
    let s = TestServer::start().await;
    let mut c = s.client().await;
    let topics = vec![new_topic("big-a", 6000, 1, &[]), new_topic("big-b", 6000, 1, &[]), new_topic("dup", 1, 1, &[])];
    let mut with_dup = topics.clone();
    with_dup.push(new_topic("dup", 1, 1, &[]));
    let r = create_topics(&mut c, 5, with_dup, false).await;
    let codes: Vec<(String, i16)> = r.iter().map(|t| (t.name.to_string(), t.error_code)).collect();
    assert_eq!(
        codes,
        vec![("big-a".into(), POLICY_VIOLATION), ("big-b".into(), POLICY_VIOLATION), ("dup".into(), 42)],
        "Kafka refuses the whole operation; duplicates are the broker's INVALID_REQUEST"
    );
    assert_eq!(r[0].error_message.as_deref(), Some("Unable to perform excessively large batch operation."));
    // Within the bound, the same topic passes (validated only: creating
    // 6,000 partitions is slow and beside the point).
    let r = create_topics(&mut c, 5, vec![new_topic("big-a", 6000, 1, &[])], true).await;
    assert_eq!(r[0].error_code, 0);
}

#[tokio::test]
async fn a_metadata_request_auto_creates_a_bounded_number_of_topics_and_retries_create_the_rest() {
    let s = TestServer::start_with(&["topics.max_auto_create_per_request=2"]).await;
    let mut c = s.client().await;
    let names = topic_names(5);
    let first = metadata(&mut c, &names).await;
    let codes: Vec<i16> = first.iter().map(|(_, e)| *e).collect();
    assert_eq!(codes, vec![0, 0, LEADER_NOT_AVAILABLE, LEADER_NOT_AVAILABLE, LEADER_NOT_AVAILABLE]);
    let second: Vec<i16> = metadata(&mut c, &names).await.iter().map(|(_, e)| *e).collect();
    assert_eq!(second, vec![0, 0, 0, 0, LEADER_NOT_AVAILABLE]);
    let third: Vec<i16> = metadata(&mut c, &names).await.iter().map(|(_, e)| *e).collect();
    assert_eq!(third, vec![0; 5]);
}

#[tokio::test]
async fn auto_creation_past_max_topics_gets_policy_violation() {
    let s = TestServer::start_with(&["topics.max_topics=3"]).await;
    let mut c = s.client().await;
    let names = topic_names(4);
    let codes: Vec<i16> = metadata(&mut c, &names).await.iter().map(|(_, e)| *e).collect();
    assert_eq!(codes, vec![0, 0, 0, POLICY_VIOLATION]);
}
