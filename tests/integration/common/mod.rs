//! Test harness: an in-process daemon on an ephemeral 127.0.0.1 port with a
//! temporary data dir, and a small Kafka client that sends typed requests at
//! any chosen version (kafka-protocol's client side).
#![allow(dead_code)] // also compiled into hostile_input, which uses a part

pub mod consumer;
pub mod topic_ids;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kcoord::config::ConfigBuilder;
use kcoord::{Daemon, RunningDaemon};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Generous deadline for conditions in tests (two shared cores).
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A daemon running inside the test process.
pub struct TestServer {
    pub daemon: Option<RunningDaemon>,
    pub dir: tempfile::TempDir,
    pub addr: SocketAddr,
    settings: Vec<String>,
}

/// Settings every test uses unless it overrides them: fast protocol timers.
pub const TEST_DEFAULTS: &[&str] = &[
    "server.listen=\"127.0.0.1:0\"",
    "group.initial_rebalance_delay_ms=0",
    "storage.fsync=\"never\"",
    "offsets.partitions=8",
];

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(&[]).await
    }

    /// Starts with extra `KEY=VALUE` settings (applied after the defaults).
    pub async fn start_with(settings: &[&str]) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let settings: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
        let daemon = start_daemon(&dir, &settings, None).await;
        let addr = daemon.local_addr();
        TestServer { daemon: Some(daemon), dir, addr, settings }
    }

    /// Stops the daemon cleanly and starts it again on the same data dir and port.
    pub async fn restart(&mut self) {
        if let Some(d) = self.daemon.take() {
            d.shutdown().await;
        }
        let d = start_daemon(&self.dir, &self.settings, Some(self.addr)).await;
        self.addr = d.local_addr();
        self.daemon = Some(d);
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr).await
    }

    pub async fn shutdown(mut self) {
        if let Some(d) = self.daemon.take() {
            d.shutdown().await;
        }
    }
}

/// Starts a daemon with the test defaults and `settings` that must not
/// start; returns why it refused.
/// `kcoord groups list` against `localhost:port` with the client settings
/// file `properties` (Kafka's `--command-config`), off the async runtime.
pub async fn groups_list_with(port: u16, properties: String) -> std::process::Output {
    groups_list_with_env(port, properties, &[]).await
}

/// [`groups_list_with`] with extra environment variables for the CLI.
pub async fn groups_list_with_env(port: u16, properties: String, env: &[(&str, &str)]) -> std::process::Output {
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let bootstrap = format!("localhost:{port}");
        std::process::Command::new(env!("CARGO_BIN_EXE_kcoord"))
            .args(["groups", "list", "--bootstrap", &bootstrap, "--command-config", &properties])
            .envs(env)
            .output()
            .expect("run kcoord groups list")
    })
    .await
    .expect("the CLI's thread")
}

pub async fn start_error(settings: &[String]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = ConfigBuilder::new();
    for s in TEST_DEFAULTS {
        b = b.set(s).unwrap();
    }
    b = b.set(&format!("storage.data_dir=\"{}\"", dir.path().display())).unwrap();
    for s in settings {
        b = b.set(s).unwrap();
    }
    let config = match b.build() {
        Ok(config) => config,
        Err(e) => return e.to_string(),
    };
    match kcoord::Daemon::start(config).await {
        Ok(_) => panic!("the daemon started with {settings:?}"),
        Err(e) => e.to_string(),
    }
}

async fn start_daemon(dir: &tempfile::TempDir, settings: &[String], addr: Option<SocketAddr>) -> RunningDaemon {
    let mut b = ConfigBuilder::new();
    for s in TEST_DEFAULTS {
        b = b.set(s).unwrap();
    }
    b = b.set(&format!("storage.data_dir=\"{}\"", dir.path().display())).unwrap();
    if let Some(a) = addr {
        b = b.set(&format!("server.listen=\"{a}\"")).unwrap();
    }
    for s in settings {
        b = b.set(s).unwrap();
    }
    let config = b.build().expect("test config");
    // A restarted daemon may need a moment for the old port to be free.
    let mut last = None;
    for _ in 0..50 {
        match Daemon::start(config.clone()).await {
            Ok(d) => {
                // Tests start once every coordinator shard has loaded.
                tokio::time::timeout(DEADLINE, d.services().coordinator.wait_until_loaded())
                    .await
                    .expect("coordinator shards did not load");
                return d;
            }
            Err(e) => {
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    panic!("daemon did not start: {last:?}");
}

/// A minimal Kafka client for black-box tests.
pub struct Client {
    pub stream: TcpStream,
    correlation_id: i32,
    pub client_id: String,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        Self::try_connect(addr).await.expect("connect")
    }

    pub async fn try_connect(addr: SocketAddr) -> std::io::Result<Client> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true).ok();
        Ok(Client { stream, correlation_id: 0, client_id: "kcoord-test".into() })
    }

    /// Connects from a chosen local address (any of 127.0.0.0/8 reaches a
    /// daemon on 127.0.0.1), to appear as another client host.
    pub async fn try_connect_from(addr: SocketAddr, local: std::net::IpAddr) -> std::io::Result<Client> {
        let socket = match local {
            std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        socket.bind(SocketAddr::new(local, 0))?;
        let stream = socket.connect(addr).await?;
        stream.set_nodelay(true).ok();
        Ok(Client { stream, correlation_id: 0, client_id: "kcoord-test".into() })
    }

    /// Encodes a request frame (length included) without sending it.
    pub fn frame<R: Request>(&mut self, req: &R, version: i16) -> (i32, Bytes) {
        self.correlation_id += 1;
        let key = ApiKey::try_from(R::KEY).unwrap();
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut body = BytesMut::new();
        header.encode(&mut body, key.request_header_version(version)).unwrap();
        req.encode(&mut body, version).unwrap();
        let mut out = BytesMut::with_capacity(body.len() + 4);
        out.put_i32(body.len() as i32);
        out.extend_from_slice(&body);
        (self.correlation_id, out.freeze())
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Reads one response frame (without its length).
    pub async fn read_frame(&mut self) -> std::io::Result<Bytes> {
        let len = tokio::time::timeout(DEADLINE, self.stream.read_i32())
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no response"))??;
        let mut buf = vec![0u8; len as usize];
        self.stream.read_exact(&mut buf).await?;
        Ok(Bytes::from(buf))
    }

    /// Decodes a response frame for request type `R` at `version`.
    pub fn decode<R: Request>(frame: Bytes, version: i16) -> (i32, R::Response) {
        let mut frame = frame;
        let hv = <R::Response as HeaderVersion>::header_version(version);
        let header = ResponseHeader::decode(&mut frame, hv).unwrap();
        let resp = R::Response::decode(&mut frame, version).unwrap();
        assert_eq!(frame.remaining(), 0, "trailing bytes after response");
        (header.correlation_id, resp)
    }

    /// Sends a request and waits for its response.
    pub async fn send<R: Request>(&mut self, req: &R, version: i16) -> R::Response {
        let (corr, frame) = self.frame(req, version);
        self.send_raw(&frame).await.expect("send");
        let resp = self.read_frame().await.expect("response");
        let (got, resp) = Self::decode::<R>(resp, version);
        assert_eq!(got, corr, "correlation id");
        resp
    }

    /// True if the server closed the connection (reads EOF or reset).
    pub async fn is_closed(&mut self) -> bool {
        let mut buf = [0u8; 1];
        matches!(tokio::time::timeout(DEADLINE, self.stream.read(&mut buf)).await, Ok(Ok(0)) | Ok(Err(_)))
    }
}

/// GET `path` from the daemon's HTTP listener: (status, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.expect("connect to the HTTP listener");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes()).await.expect("send");
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.expect("read");
    let status = buf.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

pub fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Polls `f` until it returns Some, or panics after [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if start.elapsed() > DEADLINE {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
