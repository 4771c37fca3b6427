//! Entry points for the fuzz targets in `fuzz/`, kept in the library so that
//! a plain `cargo test` (tests/fuzz_regressions.rs) replays the committed
//! seeds and minimised crashers through exactly the same code.

#![allow(
    clippy::indexing_slicing,
    reason = "A fuzz target's oracle: a failed check is the finding, so these harnesses index and assert freely."
)]
#![doc(hidden)]

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;

use crate::coordinator::records;
use crate::server::dispatch::{self, Outcome};
use crate::server::Services;
use crate::storage::{Log, LogOptions};

/// A record payload: decoding never panics, and the borrowed and owned
/// decoders agree.
pub fn records(data: &[u8]) {
    let owned = records::decode(data);
    match records::decode_view(data) {
        Ok(records::RecordView::Other(o)) => assert_eq!(Ok(o), owned),
        Ok(records::RecordView::Offset { .. }) => assert!(owned.is_ok(), "view decoded what owned decoding rejects"),
        Err(_) => assert!(owned.is_err(), "owned decoded what the view rejects"),
    }
}

/// Arbitrary bytes as the only segment of a log: opening never panics, and
/// whatever is replayed is whole records (the frame CRCs held).
pub fn log_recovery(data: &[u8]) {
    let Ok(dir) = tempfile_dir() else { return };
    let seg = dir.join(format!("{:020}.log", 0));
    if std::fs::write(&seg, data).is_err() {
        return;
    }
    let mut count = 0u64;
    let opened = Log::open(&dir, LogOptions::new(1 << 20, false), &mut |loc, payload| {
        assert_eq!(loc.index, count);
        assert_eq!(loc.payload_len as usize, payload.len());
        count += 1;
        Ok(())
    });
    if let Ok(log) = opened {
        assert_eq!(log.end(), count);
    }
    let _ = std::fs::remove_dir_all(&dir);
    closed_segment_headers(data, count);
}

/// The same bytes as a *closed* segment read by headers alone (partition
/// logs at start-up): opening never panics, and what is replayed tiles the
/// file exactly, each record with at most the asked-for prefix.
fn closed_segment_headers(data: &[u8], active_base: u64) {
    const PREFIX: usize = 16;
    let Ok(dir) = tempfile_dir() else { return };
    let written = std::fs::write(dir.join(format!("{:020}.log", 0)), data)
        .and_then(|()| std::fs::write(dir.join(format!("{:020}.log", active_base.max(1))), b""));
    if written.is_err() {
        return;
    }
    let mut next = (0u64, 0u64);
    let replay = crate::storage::Replay::TrustClosed { prefix: PREFIX };
    let opened = Log::open_with(&dir, LogOptions::new(1 << 20, false), replay, &mut |loc, p| {
        assert_eq!((loc.index, loc.position), next);
        assert_eq!(p.len(), (loc.payload_len as usize).min(PREFIX));
        next = (next.0 + 1, loc.position + crate::storage::frame::HEADER_BYTES as u64 + u64::from(loc.payload_len));
        Ok(())
    });
    if let Ok(log) = opened {
        assert_eq!((log.end(), next.1), (next.0, data.len() as u64));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("kcoord-fuzz-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

mod session;
mod session_seeds;

pub use session::{session, sidecar_session};
pub use session_seeds::session_seeds;

struct InProcess {
    runtime: tokio::runtime::Runtime,
    /// The daemon the inputs talk to.
    services: Arc<Services>,
    /// The listener inputs arrive on: its node id is the broker a sidecar
    /// forwards to.
    listener: crate::server::ListenerInfo,
    /// A SASL_PLAINTEXT listener's settings (PLAIN and SCRAM, user `fuzz`,
    /// password `fuzz`) for the `session` targets.
    sasl: Arc<crate::security::ListenerSecurity>,
    _served: crate::RunningDaemon,
    /// A sidecar's upstream, kept running.
    _upstream: Option<crate::RunningDaemon>,
}

/// The in-process standalone daemon the `frame` and `session` targets
/// share, started on first use.
fn daemon() -> Option<&'static InProcess> {
    static D: OnceLock<Option<InProcess>> = OnceLock::new();
    D.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().ok()?;
        // Delegation tokens on, so that the session target's authenticated
        // inputs reach the token APIs' rules and token logins.
        let daemon = runtime.block_on(start_daemon(&["security.delegation_token_secret_key=\"fuzz-key\"".into()]))?;
        Some(InProcess::serving(runtime, daemon, None, 0))
    })
    .as_ref()
}

/// The in-process sidecar the `sidecar_session` target uses, in front of
/// an in-process standalone daemon as its one-broker upstream (broker 1),
/// both on one runtime, started on first use.
fn sidecar_daemon() -> Option<&'static InProcess> {
    static D: OnceLock<Option<InProcess>> = OnceLock::new();
    D.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().ok()?;
        let upstream = runtime.block_on(start_daemon(&["server.node_id=1".into()]))?;
        let sidecar = runtime.block_on(start_daemon(&[
            format!("sidecar.upstream=[\"{}\"]", upstream.local_addr()),
            "sidecar.write_through_interval_ms=20".into(),
        ]))?;
        Some(InProcess::serving(runtime, sidecar, Some(upstream), 1))
    })
    .as_ref()
}

/// The in-process sidecar whose SASL inputs the upstream authenticates
/// (`sidecar.client_authentication = "upstream"`): its upstream has only a
/// SASL_PLAINTEXT listener with user `fuzz` (password `fuzz`), and the
/// sidecar logs in there as `fuzz` for its own work. `sidecar_session`
/// sends a quarter of its inputs here.
fn relaying_sidecar_daemon() -> Option<&'static InProcess> {
    static D: OnceLock<Option<InProcess>> = OnceLock::new();
    D.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().ok()?;
        let users = tempfile_dir().ok()?.join("users.json");
        session::fuzz_credentials().save(&users).ok()?;
        let upstream = runtime.block_on(start_daemon(&[
            "server.node_id=1".into(),
            "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]".into(),
            format!("security.credentials_file=\"{}\"", users.display()),
        ]))?;
        let sidecar = runtime.block_on(start_daemon(&[
            format!("sidecar.upstream=[\"{}\"]", upstream.local_addr()),
            "sidecar.write_through_interval_ms=20".into(),
            "sidecar.client_authentication=\"upstream\"".into(),
            "sidecar.upstream_security.security_protocol=\"SASL_PLAINTEXT\"".into(),
            "sidecar.upstream_security.sasl_mechanism=\"PLAIN\"".into(),
            "sidecar.upstream_security.sasl_username=\"fuzz\"".into(),
            "sidecar.upstream_security.sasl_password=\"fuzz\"".into(),
        ]))?;
        let mut d = InProcess::serving(runtime, sidecar, Some(upstream), 1);
        d.sasl = session::relaying_sasl_listener();
        Some(d)
    })
    .as_ref()
}

/// Ignores SIGPIPE, as the runtime of a Rust binary (the daemon's) does
/// before `main`: a write into a socket or pipe whose reader has gone then
/// fails with EPIPE, which the daemon handles, instead of killing the
/// process. A fuzz target's `main` is libFuzzer's, which leaves SIGPIPE
/// fatal; every in-process daemon starts through here.
fn ignore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler
    // code; it is what std's runtime does at start-up.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

impl InProcess {
    /// Inputs go to `served`, on a listener of broker `node_id`.
    fn serving(
        runtime: tokio::runtime::Runtime,
        served: crate::RunningDaemon,
        upstream: Option<crate::RunningDaemon>,
        node_id: i32,
    ) -> InProcess {
        let services = served.services().clone();
        runtime.block_on(services.coordinator.wait_until_loaded());
        let sasl = session::sasl_listener(services.delegation_tokens.clone());
        InProcess {
            runtime,
            services,
            listener: crate::server::ListenerInfo { node_id, index: 0 },
            sasl,
            _served: served,
            _upstream: upstream,
        }
    }
}

/// Starts a daemon on a fresh data directory with the targets' settings
/// and `extra`. Group timeouts are short so that members left behind by
/// earlier inputs expire quickly instead of holding later rebalances up.
async fn start_daemon(extra: &[String]) -> Option<crate::RunningDaemon> {
    ignore_sigpipe();
    let dir = tempfile_dir().ok()?;
    let mut config = crate::config::ConfigBuilder::new()
        .set("server.listen=\"127.0.0.1:0\"")
        .ok()?
        .set(&format!("storage.data_dir=\"{}\"", dir.display()))
        .ok()?
        .set("storage.fsync=\"never\"")
        .ok()?
        .set("offsets.partitions=2")
        .ok()?
        .set("group.initial_rebalance_delay_ms=0")
        .ok()?
        .set("topics.define=[\"t:2\"]")
        .ok()?
        .set("group.min_session_timeout_ms=10")
        .ok()?
        .set("group.max_session_timeout_ms=200")
        .ok()?
        .set("group.new_member_join_timeout_ms=200")
        .ok()?
        // A deleted group's tombstone stays in memory until a compaction
        // finds it older than the retention; with Kafka's 24 h and
        // compactions every 64 MiB, the groups the inputs delete would
        // pile up for as long as the fuzzer runs, and a rehash of that
        // table would be charged to whichever input set it off. Frequent
        // compactions also put snapshots under the fuzzer.
        .set("offsets.tombstone_retention_ms=1000")
        .ok()?
        .set("offsets.compaction_trigger_bytes=4194304")
        .ok()?;
    for setting in extra {
        config = config.set(setting).ok()?;
    }
    crate::Daemon::start(config.build().ok()?).await.ok()
}

/// A request frame (without its length prefix) through the real dispatch
/// path of an in-process daemon: it must be answered or refused, never
/// panic. Requests that park (JoinGroup, SyncGroup) are abandoned after a
/// moment, as a disconnecting client would.
pub fn frame(data: &[u8]) {
    let Some(d) = daemon() else { return };
    let peer: SocketAddr = ([127, 0, 0, 1], 1).into();
    let frame = Bytes::copy_from_slice(data);
    let services = d.services.clone();
    let outcome = d.runtime.block_on(async move {
        tokio::time::timeout(
            Duration::from_millis(20),
            dispatch::handle_frame(
                services,
                Arc::new(dispatch::Caller::new(
                    peer,
                    crate::server::ListenerInfo { node_id: 0, index: 0 },
                    crate::security::ANONYMOUS.into(),
                )),
                frame,
                std::time::Instant::now(),
            ),
        )
        .await
    });
    if let Ok(Outcome::Encoded(bytes)) = outcome {
        // A response frame always carries its own length and the correlation id.
        assert!(bytes.len() >= 8);
        let len = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        assert_eq!(len as usize, bytes.len() - 4);
    }
}

/// Sidecar mode's own parsing of untrusted bytes: a client's request frame
/// as `sidecar::route` reads it (header, FindCoordinator key type, Produce
/// acks), and an upstream broker's response frame through every address
/// rewrite. The first two bytes pick the rewrite and the version; the rest
/// is the frame. Neither may panic; a rewrite either fails or yields a frame
/// whose length prefix matches.
pub fn sidecar(data: &[u8]) {
    use crate::sidecar::rewrite::{rewrite, NodeEndpoints, Rewrite};
    let [kind, version, rest @ ..] = data else { return };
    let frame = Bytes::copy_from_slice(rest);
    let _ = crate::sidecar::route(&frame);
    let kinds =
        [Rewrite::Metadata, Rewrite::DescribeCluster, Rewrite::FindCoordinator, Rewrite::Produce, Rewrite::Fetch];
    let kind = kinds[*kind as usize % kinds.len()];
    let version = i16::from(*version % 20);
    let mut framed = Vec::with_capacity(rest.len() + 4);
    framed.extend_from_slice(&(rest.len() as u32).to_be_bytes());
    framed.extend_from_slice(rest);
    let nodes = NodeEndpoints([(1, ("kcoord".to_string(), 9092))].into_iter().collect());
    if let Ok(out) = rewrite(kind, version, Bytes::from(framed), &nodes) {
        let len = i32::from_be_bytes([out.frame[0], out.frame[1], out.frame[2], out.frame[3]]);
        assert_eq!(len as usize, out.frame.len() - 4);
    }
}
