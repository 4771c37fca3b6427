//! The `kcoord` command line as a user runs it: configuration printing and
//! errors, clean shutdown on SIGTERM, refusing a corrupt log unless
//! `--repair`, the `groups` admin commands, and `users` with the
//! credentials file reloaded by a running daemon.

use crate::common;
use crate::support;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::consumer;
use common::*;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::*;

fn kcoord() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kcoord"))
}

/// Starts the daemon; returns it and the address it printed.
fn start(dir: &Path, extra: &[&str]) -> (Child, String) {
    let (child, line) = start_line(dir, extra);
    let addr =
        line.split("serving on ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or_default().to_string();
    (child, addr)
}

/// Starts the daemon; returns it and the line it printed once serving.
fn start_line(dir: &Path, extra: &[&str]) -> (Child, String) {
    let mut child = kcoord()
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .args(["--log-level", "warn"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kcoord");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout")).read_line(&mut line).expect("read");
    (child, line)
}

fn wait_exit(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn config_prints_the_effective_configuration_as_toml() {
    let out = kcoord()
        .args([
            "config",
            "--set",
            "group.initial_rebalance_delay_ms=0",
            "--topic",
            "orders:6",
            "--listen",
            "127.0.0.1:9999",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("initial_rebalance_delay_ms = 0"), "{text}");
    assert!(text.contains("\"orders:6\""), "{text}");
    assert!(text.contains("listen = \"127.0.0.1:9999\""), "{text}");
    assert!(text.contains("min_session_timeout_ms = 6000"), "{text}");
}

#[test]
fn unknown_configuration_keys_are_rejected_by_name() {
    let out = kcoord().args(["config", "--set", "group.no_such_key=1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("group.no_such_key"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("k.toml");
    std::fs::write(&file, "[offsets]\npartitons = 3\n").unwrap();
    let out = kcoord().arg("config").arg("--config").arg(&file).output().unwrap();
    assert!(String::from_utf8(out.stderr).unwrap().contains("offsets.partitons"));
}

/// Threads of the daemon's runtime (`tokio-rt-worker`, the default name),
/// from /proc.
fn runtime_threads(pid: u32) -> usize {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "tokio-rt-worker")
        .count()
}

#[test]
fn worker_threads_sets_how_many_threads_serve_and_an_absurd_count_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(dir.path(), &["--set", "server.worker_threads=3"]);
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    // Blocking-pool threads share the name while they live (loading the
    // shards starts some; idle, they leave after 10 s): wait for the workers
    // alone.
    let start = Instant::now();
    let mut seen = runtime_threads(child.id());
    while seen != 3 && start.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(50));
        seen = runtime_threads(child.id());
    }
    assert_eq!(seen, 3, "runtime threads with server.worker_threads=3");
    child.kill().unwrap();
    child.wait().unwrap();

    let out = kcoord().args(["config", "--set", "server.worker_threads=100000"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("server.worker_threads"), "{err}");
}

#[test]
fn version_is_printed() {
    let out = kcoord().arg("--version").output().unwrap();
    assert!(String::from_utf8(out.stdout).unwrap().starts_with("kcoord "));
}

#[test]
fn sigterm_shuts_down_cleanly_with_exit_code_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(dir.path(), &[]);
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_exit(&mut child, DEADLINE).expect("exits");
    assert_eq!(status.code(), Some(0));
}

/// Reads `child`'s stderr on a thread; lines arrive on the returned channel.
fn stderr_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing `needle`; returns every line read until then.
fn wait_for_line(lines: &std::sync::mpsc::Receiver<String>, needle: &str) -> String {
    let start = Instant::now();
    let mut seen = String::new();
    while let Some(left) = DEADLINE.checked_sub(start.elapsed()) {
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains(needle) {
                    return seen;
                }
            }
            Err(_) => break,
        }
    }
    panic!("no line containing {needle:?}; stderr so far:\n{seen}");
}

#[test]
fn sighup_reloads_the_log_level_and_sigusr1_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kcoord.toml");
    std::fs::write(&config, "[log]\nlevel = \"warn\"\n").unwrap();
    let mut child = kcoord()
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kcoord");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout")).read_line(&mut line).expect("read");
    assert!(line.contains("serving on"), "{line}");
    let lines = stderr_lines(&mut child);
    std::fs::write(&config, "[log]\nlevel = \"info\"\n").unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    wait_for_line(&lines, "log level reloaded");
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) };
    wait_for_line(&lines, "SIGUSR1 ignored");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait_for_line(&lines, "shutting down");
    let status = wait_exit(&mut child, DEADLINE).expect("exits");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_data_dir_keeps_the_shard_count_it_was_created_with() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _) = start(dir.path(), &["--set", "offsets.partitions=3"]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(wait_exit(&mut child, DEADLINE).expect("exits").code(), Some(0));

    // Another count would place groups on other shards: their offsets would vanish.
    let (mut child, _) = start(dir.path(), &["--set", "offsets.partitions=5"]);
    let status = wait_exit(&mut child, DEADLINE).expect("refuses to start");
    assert_eq!(status.code(), Some(1));
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("offsets.partitions = 3"), "names the recorded count: {err}");

    let (mut child, addr) = start(dir.path(), &["--set", "offsets.partitions=3"]);
    assert!(addr.starts_with("127.0.0.1:"), "starts with the recorded count: {addr}");
    child.kill().ok();
}

#[test]
fn the_metrics_listener_accepts_a_host_name_and_port() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, line) = start_line(dir.path(), &["--metrics-listen", "localhost:0"]);
    let url = line.split("metrics http://").nth(1).and_then(|r| r.split('/').next()).unwrap_or_default().to_string();
    let addr: std::net::SocketAddr = url.parse().unwrap_or_else(|_| panic!("a resolved metrics address in {line:?}"));
    assert!(addr.ip().is_loopback(), "{addr}");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(&mut s, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    child.kill().ok();

    // A value without a port is refused before anything starts, naming the key.
    let out = kcoord().args(["config", "--metrics-listen", "localhost"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("metrics.listen"), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_log_stops_the_daemon_unless_repair_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(dir.path(), &["--topic", "t:1", "--set", "offsets.partitions=1"]);
    {
        let mut c = Client::connect(addr.parse().unwrap()).await;
        for i in 0..20 {
            let req = OffsetCommitRequest::default()
                .with_group_id(GroupId(sb("g")))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb("t"))).with_partitions(
                    vec![OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(i)],
                )]);
            // The shard may still be loading right after start (error 14).
            loop {
                let r = c.send(&req, 8).await;
                if r.topics[0].partitions[0].error_code != 14 {
                    assert_eq!(r.topics[0].partitions[0].error_code, 0);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait_exit(&mut child, DEADLINE).expect("exits");
    // Flip a byte in the middle of the shard's segment.
    let shard = dir.path().join("coordinator").join("shard-0000");
    let segment = std::fs::read_dir(&shard)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .expect("a segment");
    let mut bytes = std::fs::read(&segment).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&segment, &bytes).unwrap();
    // A clean stop retired the node's journal once every shard's own files
    // were durable: nothing is replayed over the damage at the next start.
    let journal: Vec<_> = std::fs::read_dir(dir.path().join("journal")).unwrap().flatten().map(|e| e.path()).collect();
    assert!(journal.is_empty(), "a clean stop leaves no journal to replay: {journal:?}");

    let (mut child, _) = start(dir.path(), &["--set", "offsets.partitions=1"]);
    let status = wait_exit(&mut child, DEADLINE).expect("refuses to keep running");
    assert_eq!(status.code(), Some(1));
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains(segment.file_name().unwrap().to_str().unwrap()), "names the file: {err}");
    assert!(err.contains("--repair"), "tells how to repair: {err}");

    let (mut child, addr) = start(dir.path(), &["--set", "offsets.partitions=1", "--repair"]);
    let mut c = Client::connect(addr.parse().unwrap()).await;
    let fetch = OffsetFetchRequest::default().with_group_id(GroupId(sb("g"))).with_topics(None);
    let r = eventually("the repaired shard to serve", || {
        let fetch = fetch.clone();
        let addr = addr.clone();
        async move {
            let mut c = Client::connect(addr.parse().unwrap()).await;
            let r = c.send(&fetch, 7).await;
            (r.error_code == 0).then_some(r)
        }
    })
    .await;
    // Commits before the corruption survive; the rest were truncated.
    let offset = r.topics.first().map(|t| t.partitions[0].committed_offset).unwrap_or(-1);
    assert!((0..19).contains(&offset), "kept an earlier commit, got {offset}");
    drop(c.send(&ApiVersionsRequest::default(), 0).await);
    child.kill().ok();
}

/// Runs `kcoord groups ARGS --bootstrap ADDR`: (success, stdout, stderr).
fn groups(addr: &str, args: &[&str]) -> (bool, String, String) {
    let out = kcoord().arg("groups").args(args).args(["--bootstrap", addr]).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The whitespace-separated cells of the first output line starting with `first`.
fn row<'a>(out: &'a str, first: &str) -> Vec<&'a str> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no row for {first} in:\n{out}"))
        .split_whitespace()
        .collect()
}

/// 2023-11-14T22:13:20.000Z.
const T: i64 = 1_700_000_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_groups_commands_show_members_and_states_and_shift_or_rewind_offsets_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(dir.path(), &["--topic", "t2:2"]);
    let mut c = Client::connect(addr.parse().unwrap()).await;
    // t2-0: offsets 0-4 stamped T..T+4 ms, offsets 5-9 stamped a second later.
    let five = [("k", "v"); 5];
    eventually("the partition to accept records", || {
        let addr = addr.clone();
        async move {
            let mut c = Client::connect(addr.parse().unwrap()).await;
            let (error, _) = support::produce(&mut c, 9, "t2", 0, support::batch(&five, T, None)).await;
            (error == 0).then_some(())
        }
    })
    .await;
    assert_eq!(support::produce(&mut c, 9, "t2", 0, support::batch(&five, T + 1000, None)).await, (0, 5));

    // The shards of both groups have loaded once DescribeGroups stops answering 14.
    eventually("the coordinator shards to load", || {
        let addr = addr.clone();
        async move {
            let mut c = Client::connect(addr.parse().unwrap()).await;
            let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(sb("live")), GroupId(sb("idle"))]);
            c.send(&req, 5).await.groups.iter().all(|g| g.error_code == 0).then_some(())
        }
    })
    .await;
    // An active consumer in "live"; "idle" has only committed offsets.
    let (member, _) = consumer::join_alone(&mut c, "live", "t2", &[0, 1]).await;
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb("idle")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb("t2"))).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(7),
        ])]);
    assert_eq!(c.send(&commit, 8).await.topics[0].partitions[0].error_code, 0);

    let (ok, out, err) = groups(&addr, &["describe", "--group", "live", "--members"]);
    assert!(ok, "{err}");
    assert_eq!(row(&out, "GROUP"), ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]);
    assert_eq!(row(&out, "live"), ["live", member.as_str(), "/127.0.0.1", "kcoord-test", "2"]);
    let (ok, out, err) = groups(&addr, &["describe", "--group", "live", "--state"]);
    assert!(ok, "{err}");
    assert_eq!(row(&out, "GROUP"), ["GROUP", "COORDINATOR", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]);
    let state = row(&out, "live");
    assert_eq!((state[2], state[3], state[4]), ("range", "Stable", "1"), "{out}");
    let (ok, out, err) = groups(&addr, &["describe", "--group", "idle", "--members"]);
    assert!(ok && out.contains("Consumer group 'idle' has no active members."), "{out}{err}");

    // list --state S keeps only groups in state S.
    let (ok, out, err) = groups(&addr, &["list", "--state", "Stable"]);
    assert!(ok, "{err}");
    assert_eq!(row(&out, "live"), ["live", "Stable"]);
    assert!(!out.contains("idle"), "{out}");
    let (_, out, _) = groups(&addr, &["list", "--state", "Empty"]);
    assert_eq!(row(&out, "idle"), ["idle", "Empty"]);
    assert!(!out.contains("live"), "{out}");

    // --shift-by moves the committed offset, clamped to the log.
    let reset = |args: &[&str]| {
        let mut all = vec!["reset-offsets", "--group", "idle", "--topic"];
        all.extend_from_slice(args);
        groups(&addr, &all)
    };
    let (ok, out, err) = reset(&["t2:0", "--shift-by", "-3", "--execute"]);
    assert!(ok, "{err}");
    assert_eq!(row(&out, "idle"), ["idle", "t2", "0", "4"]);
    let (_, out, _) = reset(&["t2:0", "--shift-by", "100"]);
    assert_eq!(row(&out, "idle")[3], "10", "clamped to the log end: {out}");
    // ... and refuses a partition without a committed offset, as Kafka does.
    let (ok, out, err) = reset(&["t2", "--shift-by", "1", "--execute"]);
    assert!(!ok, "{out}");
    assert!(err.contains("Cannot shift offset for partition t2-1 since there is no current committed offset"), "{err}");
    let (_, out, _) = groups(&addr, &["offsets", "--group", "idle"]);
    assert_eq!(row(&out, "idle")[3], "4", "nothing was committed: {out}");

    // --to-datetime: the first offset stamped at or after the time, in UTC
    // unless a zone is given.
    let (ok, out, err) = reset(&["t2:0", "--to-datetime", "2023-11-14T22:13:20.500", "--execute"]);
    assert!(ok, "{err}");
    assert_eq!(row(&out, "idle")[3], "5", "{out}");
    let (_, out, _) = reset(&["t2:0", "--to-datetime", "2023-11-14T23:13:20.002+01:00"]);
    assert_eq!(row(&out, "idle")[3], "2", "{out}");
    let (_, out, _) = reset(&["t2:0", "--to-datetime", "2030-01-01T00:00:00.000"]);
    assert_eq!(row(&out, "idle")[3], "10", "after every record: the log end: {out}");
    let (_, out, _) = groups(&addr, &["offsets", "--group", "idle"]);
    assert_eq!(row(&out, "idle")[3], "5", "only --execute committed: {out}");

    // --by-duration: the same, counted back from now (Java's Duration syntax).
    let (ok, out, err) = reset(&["t2:0", "--by-duration", "P100000D"]);
    assert!(ok, "{err}");
    assert_eq!(row(&out, "idle")[3], "0", "before every record (and 1970): {out}");
    let (_, out, _) = reset(&["t2:0", "--by-duration", "PT1H"]);
    assert_eq!(row(&out, "idle")[3], "10", "after every record: the log end: {out}");
    let (ok, _, err) = reset(&["t2:0", "--by-duration", "1h"]);
    assert!(!ok && err.contains("invalid --by-duration"), "{err}");
    // --to-current keeps committed offsets; the log end where there is none.
    let (ok, out, err) = reset(&["t2", "--to-current"]);
    assert!(ok, "{err}");
    let rows: Vec<Vec<&str>> =
        out.lines().filter(|l| l.starts_with("idle")).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows, [["idle", "t2", "0", "5"], ["idle", "t2", "1", "0"]], "{out}");

    // An active group's offsets are not reset.
    let (ok, _, err) = groups(&addr, &["reset-offsets", "--group", "live", "--topic", "t2", "--to-earliest"]);
    assert!(!ok && err.contains("current state is Stable"), "{err}");
    child.kill().ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_group_is_listed_with_its_type_and_described_with_epochs_and_target_assignments() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(dir.path(), &["--topic", "t4:4"]);
    let member = "m0aaaaaaaaaaaaaaaaaaaa";
    let hb = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("cg")))
        .with_member_id(sb(member))
        .with_member_epoch(0)
        .with_instance_id(Some(sb("inst-1")))
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(sb("t4"))]))
        .with_topic_partitions(Some(vec![]));
    // The first heartbeats may find the shard still loading.
    let r = eventually("the consumer-protocol member to join", || {
        let (addr, hb) = (addr.clone(), hb.clone());
        async move {
            let mut c = Client::connect(addr.parse().unwrap()).await;
            let r = c.send(&hb, 1).await;
            (r.error_code == 0).then_some(r)
        }
    })
    .await;
    assert_eq!(r.member_epoch, 1);
    // The classic group's shard may still be loading too.
    eventually("the classic group's shard to load", || {
        let addr = addr.clone();
        async move {
            let mut c = Client::connect(addr.parse().unwrap()).await;
            let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(sb("cl"))]);
            c.send(&req, 5).await.groups.iter().all(|g| g.error_code == 0).then_some(())
        }
    })
    .await;
    let mut c = Client::connect(addr.parse().unwrap()).await;
    let (classic_member, _) = consumer::join_alone(&mut c, "cl", "t4", &[0]).await;
    assert!(!classic_member.is_empty());

    let (ok, out, err) = groups(&addr, &["list", "--type"]);
    assert!(ok, "{err}");
    assert_eq!(row(&out, "GROUP"), ["GROUP", "TYPE"]);
    assert_eq!(row(&out, "cg"), ["cg", "Consumer"]);
    assert_eq!(row(&out, "cl"), ["cl", "Classic"]);
    let (ok, out, err) = groups(&addr, &["list", "--type", "consumer", "--state"]);
    assert!(ok, "{err}");
    assert_eq!(row(&out, "cg"), ["cg", "Consumer", "Stable"]);
    assert!(!out.contains("cl "), "{out}");

    let (ok, out, err) = groups(&addr, &["describe", "--group", "cg", "--state", "--verbose"]);
    assert!(ok, "{err}");
    assert_eq!(
        row(&out, "GROUP"),
        ["GROUP", "COORDINATOR", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    );
    let state = row(&out, "cg");
    assert_eq!(&state[2..], ["uniform", "Stable", "1", "1", "1"], "{out}");

    let (ok, out, err) = groups(&addr, &["describe", "--group", "cg", "--members", "--verbose"]);
    assert!(ok, "{err}");
    assert_eq!(
        row(&out, "GROUP"),
        [
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "MEMBER-TYPE",
            "SUBSCRIPTION",
            "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT",
            "TARGET-EPOCH",
            "TARGET-ASSIGNMENT"
        ]
    );
    assert_eq!(
        row(&out, "cg"),
        [
            "cg",
            member,
            "inst-1",
            "/127.0.0.1",
            "kcoord-test",
            "4",
            "consumer",
            "t4",
            "1",
            "t4:0,1,2,3",
            "1",
            "t4:0,1,2,3"
        ]
    );
    // Without --verbose: Kafka's columns and the instance id.
    let (ok, out, _) = groups(&addr, &["describe", "--group", "cg", "--members"]);
    assert!(ok);
    assert_eq!(row(&out, "cg"), ["cg", member, "inst-1", "/127.0.0.1", "kcoord-test", "4"]);
    // The offsets view names the member owning each partition.
    let (ok, out, _) = groups(&addr, &["describe", "--group", "cg"]);
    assert!(ok);
    assert_eq!(out.lines().filter(|l| l.starts_with("cg ") && l.contains(member)).count(), 4, "{out}");
    // A classic group is still described through DescribeGroups.
    let (ok, out, err) = groups(&addr, &["describe", "--group", "cl", "--state", "--verbose"]);
    assert!(ok, "{err}");
    assert_eq!(row(&out, "GROUP"), ["GROUP", "COORDINATOR", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]);
    child.kill().ok();
}

/// Commits `offsets` (partition, offset) of `topic` for `group` without a
/// generation, as an admin tool does; retries while the shard still loads.
async fn simple_commit(addr: &str, group: &str, topic: &str, offsets: &[(i32, i64)], metadata: Option<&str>) {
    let mut c = Client::connect(addr.parse().unwrap()).await;
    let partitions = offsets.iter().map(|&(p, o)| {
        OffsetCommitRequestPartition::default()
            .with_partition_index(p)
            .with_committed_offset(o)
            .with_committed_metadata(metadata.map(sb))
    });
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(sb(topic)))
            .with_partitions(partitions.collect())]);
    loop {
        let r = c.send(&req, 8).await;
        if r.topics[0].partitions.iter().all(|p| p.error_code == 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_offsets_removes_the_named_partitions_offsets_and_reports_each_as_kafka_consumer_groups_does() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(dir.path(), &["--topic", "t3:3", "--topic", "u2:2"]);
    simple_commit(&addr, "del-offsets", "t3", &[(0, 5), (1, 6), (2, 7)], None).await;
    simple_commit(&addr, "del-offsets", "u2", &[(0, 8), (1, 9)], None).await;
    let committed = |out: &str| -> Vec<(String, String)> {
        out.lines()
            .filter(|l| l.starts_with("del-offsets "))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .map(|r| (r[1].to_string(), r[2].to_string()))
            .collect()
    };

    // A whole topic and one partition of another.
    let (ok, out, err) =
        groups(&addr, &["delete-offsets", "--group", "del-offsets", "--topic", "t3", "--topic", "u2:1"]);
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("Request succeed for deleting offsets with topic t3, u2:1 group del-offsets\n"), "{out}");
    assert_eq!(row(&out, "TOPIC"), ["TOPIC", "PARTITION", "STATUS"]);
    for (t, p) in [("t3", "0"), ("t3", "1"), ("t3", "2"), ("u2", "1")] {
        let r: Vec<&str> = out
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|r| r.get(..2) == Some(&[t, p][..]))
            .unwrap();
        assert_eq!(r[2], "Successful", "{out}");
    }
    let (_, out, _) = groups(&addr, &["offsets", "--group", "del-offsets"]);
    assert_eq!(committed(&out), [("u2".to_string(), "0".to_string())], "only u2-0 is left: {out}");

    // A topic that does not exist is reported, not silently skipped.
    let (ok, out, err) = groups(&addr, &["delete-offsets", "--group", "del-offsets", "--topic", "nope"]);
    assert!(!ok, "{out}");
    assert!(err.contains("Encounter some partition level error"), "{err}");
    assert!(
        err.contains("nope") && err.contains("Not Provided") && err.contains("UNKNOWN_TOPIC_OR_PARTITION"),
        "{err}"
    );

    // A group that does not exist.
    let (ok, _, err) = groups(&addr, &["delete-offsets", "--group", "no-such-group", "--topic", "t3:0"]);
    assert!(!ok && err.contains("'no-such-group' does not exist."), "{err}");

    // A group consuming the topic keeps its offsets: the partition says why.
    let mut c = Client::connect(addr.parse().unwrap()).await;
    consumer::join_alone(&mut c, "del-busy", "u2", &[0, 1]).await;
    let (ok, _, err) = groups(&addr, &["delete-offsets", "--group", "del-busy", "--topic", "u2"]);
    assert!(!ok, "{err}");
    assert!(err.contains("GROUP_SUBSCRIBED_TO_TOPIC"), "{err}");
    child.kill().ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_offsets_exports_a_plan_that_from_file_applies_to_one_group_or_several() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(dir.path(), &["--topic", "t2:2"]);
    let ten = [("k", "v"); 10];
    for p in 0..2 {
        eventually("the partition to accept records", || {
            let addr = addr.clone();
            async move {
                let mut c = Client::connect(addr.parse().unwrap()).await;
                let (error, _) = support::produce(&mut c, 9, "t2", p, support::batch(&ten, T, None)).await;
                (error == 0).then_some(())
            }
        })
        .await;
    }
    simple_commit(&addr, "plan-a", "t2", &[(0, 3), (1, 4)], None).await;
    simple_commit(&addr, "plan-b", "t2", &[(0, 5)], None).await;
    let offsets = |group: &str| -> Vec<String> {
        let (_, out, _) = groups(&addr, &["offsets", "--group", group]);
        out.lines()
            .filter(|l| l.split_whitespace().next() == Some(group))
            .map(|l| l.split_whitespace().take(4).collect::<Vec<_>>().join(" "))
            .collect()
    };
    let plan = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };

    // One group's plan is topic,partition,offset; several groups' name theirs.
    let (ok, out, err) =
        groups(&addr, &["reset-offsets", "--group", "plan-a", "--all-topics", "--to-current", "--export"]);
    assert!(ok, "{err}");
    assert_eq!(out, "t2,0,3\nt2,1,4\n");
    let two = ["reset-offsets", "--group", "plan-a", "--group", "plan-b", "--topic", "t2:0", "--to-latest", "--export"];
    let (ok, out, err) = groups(&addr, &two);
    assert!(ok, "{err}");
    assert_eq!(out, "plan-a,t2,0,10\nplan-b,t2,0,10\n");
    let (ok, out, err) = groups(&addr, &["reset-offsets", "--all-groups", "--all-topics", "--to-current", "--export"]);
    assert!(ok, "{err}");
    assert_eq!(out, "plan-a,t2,0,3\nplan-a,t2,1,4\nplan-b,t2,0,5\n");

    // An edited plan applied from a file: its partitions, clamped to the log.
    let edited = plan("a.csv", "t2,0,8\nt2,1,99\n");
    let (ok, out, err) = groups(&addr, &["reset-offsets", "--group", "plan-a", "--from-file", &edited, "--execute"]);
    assert!(ok, "{err}");
    assert_eq!(row(&out, "GROUP"), ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]);
    assert_eq!(offsets("plan-a"), ["plan-a t2 0 8", "plan-a t2 1 10"]);
    // A four-column plan restores several groups, one never seen before too.
    let restore = plan("all.csv", "plan-b,t2,0,2\nplan-new,t2,1,6\n\n");
    let (ok, _, err) = groups(
        &addr,
        &["reset-offsets", "--group", "plan-b", "--group", "plan-new", "--from-file", &restore, "--execute"],
    );
    assert!(ok, "{err}");
    assert_eq!(offsets("plan-b"), ["plan-b t2 0 2"]);
    assert_eq!(offsets("plan-new"), ["plan-new t2 1 6"]);

    // A group the plan leaves out, or one with active members, is not reset,
    // and says why; the others are, and the command fails.
    let mut c = Client::connect(addr.parse().unwrap()).await;
    consumer::join_alone(&mut c, "plan-live", "t2", &[0, 1]).await;
    let three = plan("three.csv", "plan-b,t2,0,1\nplan-live,t2,0,1\n");
    let (ok, out, err) = groups(
        &addr,
        &["reset-offsets", "--group", "plan-b", "--group", "plan-live", "--group", "plan-x", "--from-file", &three],
    );
    assert!(!ok, "{out}");
    assert_eq!(row(&out, "plan-b"), ["plan-b", "t2", "0", "1"]);
    assert!(err.contains("Assignments can only be reset if the group 'plan-live' is inactive"), "{err}");
    assert!(err.contains("No reset plan for group plan-x found"), "{err}");
    assert_eq!(offsets("plan-b"), ["plan-b t2 0 2"], "a dry run");

    // Plans that cannot be used.
    let (ok, _, err) = groups(&addr, &["reset-offsets", "--group", "plan-a", "--topic", "t2:5", "--to-earliest"]);
    assert!(!ok && err.contains("The partitions \"t2-5\" do not exist"), "{err}");
    let bad = plan("bad.csv", "t2,zero,1\n");
    let (ok, _, err) = groups(&addr, &["reset-offsets", "--group", "plan-a", "--from-file", &bad]);
    assert!(!ok && err.contains("line 1") && err.contains("partition"), "{err}");
    let three_columns = plan("one.csv", "t2,0,1\n");
    let (ok, _, err) =
        groups(&addr, &["reset-offsets", "--group", "plan-a", "--group", "plan-b", "--from-file", &three_columns]);
    assert!(!ok && err.contains("exactly one --group"), "{err}");
    child.kill().ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_groups_commands_list_describe_reset_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(dir.path(), &["--topic", "t6:6"]);
    simple_commit(&addr, "cli-group", "t6", &[(0, 7)], Some("note")).await;
    let run = |args: &[&str]| groups(&addr, args);
    let (ok, out, err) = run(&["list"]);
    assert!(ok && out.lines().any(|l| l == "cli-group"), "{out}{err}");
    // kafka-consumer-groups.sh's spelling, before the subcommand, works too.
    let out = kcoord().args(["groups", "--bootstrap-server", &addr, "list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).lines().any(|l| l == "cli-group"), "{out:?}");
    let (ok, out, err) = run(&["list", "--state"]);
    assert!(ok && out.contains("cli-group") && out.contains("Empty"), "{out}{err}");
    let (ok, out, err) = run(&["describe", "--group", "cli-group"]);
    assert!(ok, "{out}{err}");
    let header: Vec<&str> = out.lines().find(|l| l.starts_with("GROUP")).unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    );
    assert!(out.contains("has no active members"), "{out}");
    let row: Vec<&str> = out.lines().find(|l| l.starts_with("cli-group")).unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], &["cli-group", "t6", "0", "7"]);
    let (ok, out, _) = run(&["offsets", "--group", "cli-group"]);
    assert!(ok && out.contains("note"), "{out}");
    // Several groups, named or all of them, one table after another.
    simple_commit(&addr, "cli-other", "t6", &[(1, 3)], None).await;
    let group_rows = |out: &str| -> Vec<String> {
        out.lines().filter(|l| l.starts_with("cli-")).map(|l| l.split_whitespace().take(4).collect()).collect()
    };
    let (ok, out, err) = run(&["describe", "--all-groups"]);
    assert!(ok, "{out}{err}");
    assert_eq!(group_rows(&out), ["cli-groupt607", "cli-othert613"], "{out}");
    assert_eq!(out.matches("GROUP ").count(), 2, "a header per group: {out}");
    let (ok, named, err) = run(&["describe", "--group", "cli-other", "--group", "cli-group"]);
    assert!(ok, "{named}{err}");
    assert_eq!(group_rows(&named), ["cli-othert613", "cli-groupt607"], "in the order given: {named}");
    // Reset: a dry run changes nothing; --execute commits.
    let (ok, out, _) = run(&["reset-offsets", "--group", "cli-group", "--topic", "t6:0", "--to-offset", "0"]);
    assert!(ok && out.contains("NEW-OFFSET") && out.contains("dry run"), "{out}");
    let (_, out, _) = run(&["offsets", "--group", "cli-group"]);
    assert!(out.contains(" 7 "), "{out}");
    let (ok, _, err) = run(&["reset-offsets", "--group", "cli-group", "--topic", "t6:0", "--to-earliest", "--execute"]);
    assert!(ok, "{err}");
    let (_, out, _) = run(&["offsets", "--group", "cli-group"]);
    let row: Vec<&str> = out.lines().find(|l| l.starts_with("cli-group")).unwrap().split_whitespace().collect();
    assert_eq!(row[3], "0", "{out}");
    let (ok, out, _) = run(&["delete", "--group", "cli-group"]);
    assert!(ok && out.contains("was successful"), "{out}");
    let (ok, _, err) = run(&["describe", "--group", "cli-group"]);
    assert!(!ok && err.contains("does not exist"), "{err}");
    child.kill().ok();
}

#[test]
fn users_are_added_listed_and_removed_without_storing_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users.json");
    let run = |args: &[&str], stdin: &str| {
        use std::io::Write;
        let mut child = kcoord()
            .arg("users")
            .args(args)
            .arg("--file")
            .arg(&file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kcoord users");
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(&["add", "alice"], "correct horse battery\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "Added user alice (SCRAM-SHA-256, SCRAM-SHA-512)");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("correct horse"), "{text}");
    let out = run(&["add", "bob", "--mechanism", "SCRAM-SHA-512", "--iterations", "4096"], "pw\n");
    assert!(out.status.success());
    let listed = String::from_utf8(run(&["list"], "").stdout).unwrap();
    assert_eq!(listed, "alice\tSCRAM-SHA-256 (iterations 8192), SCRAM-SHA-512 (iterations 8192)\nbob\tSCRAM-SHA-512 (iterations 4096)\n");
    assert!(run(&["remove", "alice"], "").status.success());
    let out = run(&["remove", "alice"], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("Error: no user alice"));
    let out = run(&["add", "carol", "--iterations", "100"], "pw\n");
    assert!(!out.status.success(), "iterations below Kafka's minimum are refused");
    assert_eq!(String::from_utf8(run(&["list"], "").stdout).unwrap(), "bob\tSCRAM-SHA-512 (iterations 4096)\n");
}

#[test]
fn a_running_daemon_reloads_the_credentials_file_on_sighup_or_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.json");
    let mut child = kcoord()
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--log-format", "json", "--set", "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]"])
        .arg("--set")
        .arg(format!("security.credentials_file=\"{}\"", users.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kcoord");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout")).read_line(&mut line).expect("read");
    assert!(line.contains("serving on"), "{line}");
    let lines = stderr_lines(&mut child);
    wait_for_line(&lines, "\"users\":0");
    kcoord::admin::users::add(&users, "alice", "pw", &[], 4096).unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    wait_for_line(&lines, "\"users\":1");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_exit(&mut child, DEADLINE).expect("exits");
    assert_eq!(status.code(), Some(0));
}
