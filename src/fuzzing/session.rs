//! The `session` fuzz target: arbitrary bytes as everything a client sends
//! on one connection, served by the real connection code
//! (`server::connection`: framing, SASL state, pipelining, ordered
//! responses) over an in-memory pipe, on the shared in-process daemon.
//!
//! An in-memory pipe rather than a loopback socket: at thousands of
//! connections a second, sockets would exhaust ephemeral ports (TIME_WAIT)
//! and cost a syscall per read; the connection code is the same generic
//! code either way (`connection::serve_in_memory`).
//!
//! The `sidecar_session` target runs the same conversations against a
//! sidecar in front of a second in-process daemon. Its upstream link is a
//! loopback socket, opened by an input's first forwarded request only;
//! Linux reuses loopback TIME_WAIT ports for new connections
//! (`net.ipv4.tcp_tw_reuse` = 2, the default), so ports do not run out.
//!
//! Input: the first byte picks the listener (even: PLAINTEXT; odd:
//! SASL_PLAINTEXT with PLAIN, SCRAM, OAUTHBEARER and GSSAPI); the rest is
//! the byte stream. The
//! oracle, besides "no panic, no abort":
//! - the answers are whole length-prefixed frames, none over
//!   `server.max_response_bytes`;
//! - each carries the correlation id of the next unanswered request, in
//!   request order (only Produce may go unanswered: acks=0); after a v0
//!   SaslHandshake on a SASL listener, raw tokens follow and ids are no
//!   longer checked;
//! - the connection answers everything and closes, or closes, within
//!   [`HANG_LIMIT`]. Only requests that may legitimately wait (JoinGroup,
//!   SyncGroup, Fetch, Produce) may keep it open longer; the client then
//!   goes away after [`QUIET`] without an answer, as a real one would;
//! - the input made the daemon allocate at most [`ALLOCATION_CAP`] bytes
//!   at once, in one allocation or in all together (see
//!   [`crate::alloc_meter`]; checked when the meter is installed).
//!
//! `KCOORD_FUZZ_DEBUG=1` prints how each input ended and what it allocated;
//! `KCOORD_FUZZ_TRACE_ALLOCATIONS=1` prints the stack of every allocation
//! over the cap (on any thread: it may be background work of the daemon).
//! `KCOORD_FUZZ_STALL_SECS=N` has an input still running after N seconds
//! print every thread's stack (with gdb) and abort: libFuzzer's own timeout
//! report carries no stack without the sanitizers.

#![allow(clippy::panic, reason = "A fuzz target's oracle: a failed check is the finding.")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::security::credentials::{CredentialStore, Credentials};
use crate::security::listeners::SecurityProtocol;
use crate::security::sasl::SaslSettings;
use crate::security::scram::ScramMechanism;
use crate::security::ListenerSecurity;
use crate::server::connection::serve_in_memory;

/// How long the client waits, with no byte arriving, before it gives up on
/// a connection whose outstanding requests may legitimately wait.
pub const QUIET: Duration = Duration::from_millis(20);

/// How long a connection may neither answer nor close.
pub const HANG_LIMIT: Duration = Duration::from_secs(10);

/// The most one input may make the daemon allocate (peak live bytes above
/// where they were, or one allocation).
pub const ALLOCATION_CAP: usize = 32 << 20;

/// Bytes the in-memory pipe buffers each way.
const PIPE_BYTES: usize = 64 * 1024;

/// GSSAPI without a KDC: a keytab with a random service key, so every
/// context token an input sends reaches the Kerberos library and fails
/// there. `None` (GSSAPI not offered) where MIT Kerberos is not installed.
fn kerberos_acceptor() -> Option<Arc<crate::security::kerberos::server::KerberosSettings>> {
    let keytab = super::tempfile_dir().ok()?.join("kafka.keytab");
    crate::security::kerberos::write_random_keytab(&keytab, "kafka/127.0.0.1@KCOORD.TEST").ok()?;
    let settings = crate::security::kerberos::server::KerberosSettings::new(
        &keytab.display().to_string(),
        "",
        "kafka",
        &["DEFAULT".into()],
    );
    settings.ok().map(Arc::new)
}

/// The settings of the SASL listener inputs with an odd first byte use:
/// user `fuzz`, password `fuzz`, few PBKDF2 rounds (each PLAIN login runs
/// them), no delay after a failed login.
/// User `fuzz`, password `fuzz`, for PLAIN and both SCRAMs.
pub(super) fn fuzz_credentials() -> Credentials {
    let mut users = Credentials::default();
    users.set_password("fuzz", "fuzz", &[ScramMechanism::Sha256, ScramMechanism::Sha512], 16);
    users
}

/// The SASL listener of a sidecar that relays logins to its upstream.
pub(super) fn relaying_sasl_listener() -> Arc<ListenerSecurity> {
    sasl_plaintext(SaslSettings {
        mechanisms: crate::security::sasl_relay::RELAYABLE.iter().map(|m| m.to_string()).collect(),
        oauth: None,
        kerberos: None,
        relay: Some(crate::security::sasl_relay::RelaySettings { sub_claim: "sub".into() }),
        ..sasl_settings()
    })
}

/// The SASL listener, knowing the daemon's delegation tokens if it has any.
pub(super) fn sasl_listener(
    tokens: Option<Arc<crate::security::delegation_tokens::DelegationTokens>>,
) -> Arc<ListenerSecurity> {
    sasl_plaintext(SaslSettings { tokens, ..sasl_settings() })
}

/// PLAIN, both SCRAMs, unsigned OAUTHBEARER tokens and, where the system
/// has Kerberos, GSSAPI, checked by kcoord itself.
fn sasl_settings() -> SaslSettings {
    let users = fuzz_credentials();
    let kerberos = kerberos_acceptor();
    let mut mechanisms: Vec<String> =
        vec!["PLAIN".into(), "SCRAM-SHA-256".into(), "SCRAM-SHA-512".into(), "OAUTHBEARER".into()];
    if kerberos.is_some() {
        mechanisms.push(crate::security::kerberos::GSSAPI.into());
    }
    SaslSettings {
        mechanisms,
        credentials: Arc::new(CredentialStore::fixed(users, "credentials")),
        max_reauth_ms: 0,
        failure_delay: Duration::ZERO,
        max_receive_bytes: 524_288,
        tokens: None,
        // Unsigned tokens, so that inputs can log in with one.
        oauth: Some(Arc::new(crate::security::oauthbearer::OAuthSettings {
            keys: crate::security::oauthbearer::Keys::Unsecured,
            sub_claim: "sub".into(),
            expected_audience: Vec::new(),
            expected_issuer: None,
            clock_skew_ms: 30_000,
        })),
        kerberos,
        relay: None,
    }
}

fn sasl_plaintext(sasl: SaslSettings) -> Arc<ListenerSecurity> {
    Arc::new(ListenerSecurity {
        name: "SASL_PLAINTEXT".into(),
        protocol: SecurityProtocol::SaslPlaintext,
        tls: None,
        sasl: Some(Arc::new(sasl)),
        handshake_timeout: Duration::from_secs(10),
    })
}

/// One request as the client sent it.
#[derive(Debug, Clone, Copy)]
struct Sent {
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
}

impl Sent {
    /// Requests that may wait for other members, for data or for a disk
    /// write: a connection holding one may stay silent.
    fn may_wait(&self) -> bool {
        matches!(self.api_key, 0 | 1 | 11 | 14)
    }

    /// Requests that may get no answer (Produce with acks=0).
    fn may_go_unanswered(&self) -> bool {
        self.api_key == 0
    }

    /// A v0 SaslHandshake: raw SASL tokens follow, answered without a
    /// response header.
    fn starts_raw_tokens(&self) -> bool {
        self.api_key == 17 && self.api_version == 0
    }
}

/// The request frames of `stream`, as far as its framing is valid.
fn requests(stream: &[u8], max: u32) -> Vec<Sent> {
    let mut out = Vec::new();
    let mut rest = stream;
    while let Some((len, after)) = rest.split_first_chunk::<4>().map(|(l, a)| (i32::from_be_bytes(*l), a)) {
        if len < crate::server::frame::MIN_REQUEST_LEN || len as u32 > max || after.len() < len as usize {
            break;
        }
        let (frame, next) = after.split_at(len as usize);
        out.push(Sent {
            api_key: i16::from_be_bytes([frame[0], frame[1]]),
            api_version: i16::from_be_bytes([frame[2], frame[3]]),
            correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
        });
        rest = next;
    }
    out
}

/// Matches answers to requests as they arrive.
struct Oracle {
    sent: Vec<Sent>,
    /// Where the answers so far may have left the conversation: the first
    /// request not answered yet, and whether raw SASL tokens may be on the
    /// wire (answers are then not matched). More than one when inputs
    /// repeat a correlation id around a Produce that may go unanswered:
    /// an answer with that id may be either request's.
    states: Vec<(usize, bool)>,
    /// Answer bytes not yet split into frames.
    pending: Vec<u8>,
    max_response: usize,
    answers: usize,
}

impl Oracle {
    fn take(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        while let Some(prefix) = self.pending.get(at..at + 4) {
            let len = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
            assert!(len >= 0, "an answer with a negative length prefix {len}");
            let len = len as usize;
            assert!(len + 4 <= self.max_response, "an answer of {len} bytes, over server.max_response_bytes");
            let Some(frame) = self.pending.get(at + 4..at + 4 + len) else { break };
            let frame = frame.to_vec();
            self.answer(&frame);
            at += 4 + len;
        }
        self.pending.drain(..at);
    }

    fn answer(&mut self, frame: &[u8]) {
        self.answers += 1;
        assert!(self.answers <= self.sent.len(), "more answers ({}) than requests ({})", self.answers, self.sent.len());
        if self.states.iter().all(|&(_, raw)| raw) {
            return;
        }
        if frame.len() < 4 {
            // Only a raw token may be that short.
            self.states.retain(|&(_, raw)| raw);
            assert!(!self.states.is_empty(), "an answer of {} bytes has no correlation id", frame.len());
            return;
        }
        let id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let mut next = Vec::new();
        let mut failure = None;
        for &(from, raw) in &self.states {
            if raw {
                next.push((from, raw));
                continue;
            }
            for (at, req) in self.sent.iter().enumerate().skip(from) {
                if req.correlation_id == id {
                    next.push((at + 1, req.starts_raw_tokens()));
                }
                if !req.may_go_unanswered() {
                    if req.correlation_id != id {
                        failure.get_or_insert(format!(
                            "an answer with correlation id {id} where request {} (api key {}) should have been answered",
                            req.correlation_id, req.api_key
                        ));
                    }
                    break;
                }
            }
        }
        next.sort_unstable();
        next.dedup();
        if next.is_empty() {
            let why = failure
                .unwrap_or_else(|| format!("an answer with correlation id {id} matches no request still unanswered"));
            panic!("{why}");
        }
        self.states = next;
    }

    /// Whether an unanswered request may hold the connection silent.
    fn may_wait(&self) -> bool {
        self.states.iter().any(|&(from, raw)| raw || self.sent.iter().skip(from).any(Sent::may_wait))
    }
}

/// How a conversation ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The daemon closed the connection.
    Closed,
    /// The client gave up on requests that may wait.
    GaveUp,
}

/// Runs one input; panics on a finding. Inputs are fed to the shared
/// daemon, so groups and offsets persist from one input to the next.
pub fn session(data: &[u8]) {
    let Some(d) = super::daemon() else { panic!("the in-process daemon did not start") };
    run(d, data);
}

/// The same conversation with a sidecar in front of a one-broker upstream
/// (an in-process standalone daemon): group requests are served by the
/// sidecar, everything else crosses its upstream link (decoded only where
/// answers carry addresses), and the oracle is the same, answers in order
/// included, over local and forwarded requests alike.
///
/// Inputs whose selector byte is 3 mod 4 go to a sidecar that lets its
/// upstream authenticate SASL clients: their SaslHandshake and
/// SaslAuthenticate requests cross the link too.
pub fn sidecar_session(data: &[u8]) {
    let relaying = data.first().is_some_and(|s| s % 4 == 3);
    let d = if relaying { super::relaying_sidecar_daemon() } else { super::sidecar_daemon() };
    let Some(d) = d else { panic!("the in-process sidecar did not start") };
    run(d, data);
}

fn run(d: &super::InProcess, data: &[u8]) {
    let Some((&selector, stream)) = data.split_first() else { return };
    let security = if selector % 2 == 1 { d.sasl.clone() } else { ListenerSecurity::plaintext() };
    let server = &d.services.config.server;
    let first_max = security.sasl.as_ref().map_or(server.max_request_bytes, |s| s.max_receive_bytes);
    let mut oracle = Oracle {
        sent: requests(stream, first_max.min(server.max_request_bytes)),
        states: vec![(0, false)],
        pending: Vec::new(),
        max_response: (server.max_response_bytes as usize).min(crate::protocol::codec::MAX_FRAME_BYTES),
        answers: 0,
    };
    let baseline = crate::alloc_meter::start();
    if std::env::var_os("KCOORD_FUZZ_TRACE_ALLOCATIONS").is_some() {
        crate::alloc_meter::trace_allocations_over(ALLOCATION_CAP);
    }
    let _watched = stall_watch::Input::start();
    let end = d.runtime.block_on(converse(d, security, stream, &mut oracle));
    let used = crate::alloc_meter::read(baseline);
    if std::env::var_os("KCOORD_FUZZ_DEBUG").is_some() {
        eprintln!("session: {end:?}, {} of {} answered, {used:?}", oracle.answers, oracle.sent.len());
    }
    assert!(
        used.largest <= ALLOCATION_CAP && used.peak_growth <= ALLOCATION_CAP,
        "the input made the daemon allocate too much: {used:?} (cap {ALLOCATION_CAP})"
    );
    if end == End::Closed {
        assert!(oracle.pending.is_empty(), "the connection closed in the middle of an answer");
    }
}

async fn converse(d: &super::InProcess, security: Arc<ListenerSecurity>, stream: &[u8], oracle: &mut Oracle) -> End {
    let (client, server) = tokio::io::duplex(PIPE_BYTES);
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let peer: SocketAddr = ([127, 0, 0, 1], 1).into();
    let listener = d.listener;
    let services = d.services.clone();
    let serving =
        tokio::spawn(async move { serve_in_memory(server, peer, listener, &security, services, shutdown).await });
    let (mut rd, mut wr) = tokio::io::split(client);
    let bytes = stream.to_vec();
    let writing = tokio::spawn(async move {
        // The daemon may close before reading everything: not a finding.
        if wr.write_all(&bytes).await.is_ok() {
            let _ = wr.shutdown().await;
        }
        wr
    });
    let started = Instant::now();
    let mut buf = vec![0u8; 16 * 1024];
    let end = loop {
        match tokio::time::timeout(QUIET, rd.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break End::Closed,
            Ok(Ok(n)) => oracle.take(&buf[..n]),
            Err(_) if oracle.may_wait() => break End::GaveUp,
            Err(_) => assert!(
                started.elapsed() < HANG_LIMIT,
                "the connection neither answered nor closed for {HANG_LIMIT:?}: {} of {} requests answered",
                oracle.answers,
                oracle.sent.len()
            ),
        }
    };
    writing.abort();
    serving.abort();
    end
}

/// The opt-in stall watchdog (module documentation).
mod stall_watch {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    /// When the running input started, in milliseconds since [`epoch`]
    /// plus one; 0 while no input runs.
    static STARTED: AtomicU64 = AtomicU64::new(0);

    fn epoch() -> Instant {
        static E: OnceLock<Instant> = OnceLock::new();
        *E.get_or_init(Instant::now)
    }

    fn now_ms() -> u64 {
        epoch().elapsed().as_millis() as u64 + 1
    }

    /// Marks one input as running until dropped.
    pub struct Input;

    impl Input {
        pub fn start() -> Option<Input> {
            static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
            LIMIT
                .get_or_init(|| {
                    let secs = std::env::var("KCOORD_FUZZ_STALL_SECS").ok()?.parse().ok()?;
                    std::thread::spawn(move || watch(secs));
                    Some(secs)
                })
                .as_ref()?;
            STARTED.store(now_ms(), Ordering::Relaxed);
            Some(Input)
        }
    }

    impl Drop for Input {
        fn drop(&mut self) {
            STARTED.store(0, Ordering::Relaxed);
        }
    }

    fn watch(secs: u64) {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let started = STARTED.load(Ordering::Relaxed);
            if started != 0 && now_ms().saturating_sub(started) > secs * 1000 {
                eprintln!("session: an input has run for over {secs} s; every thread's stack follows");
                let _ = std::process::Command::new("gdb")
                    .args(["-p", &std::process::id().to_string(), "-batch", "-ex", "thread apply all bt"])
                    .status();
                std::process::abort();
            }
        }
    }
}
