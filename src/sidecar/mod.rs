//! Sidecar mode: kcoord next to the brokers of an existing Kafka-compatible
//! cluster (the *upstream*), serving its consumer groups with the same
//! coordinator as standalone mode and forwarding everything else.
//!
//! - Group APIs (and ApiVersions, and FindCoordinator for groups) are
//!   answered locally (`versions::LOCAL`).
//! - Every other request is forwarded byte for byte over the client's own
//!   link to the broker its listener fronts (`link`); only responses that
//!   carry broker addresses are decoded and rewritten (`rewrite`).
//! - A group's offsets are imported from the upstream before kcoord first
//!   answers for it, and committed offsets are written through to the
//!   upstream (`mirror`).
//! - Topic knowledge (for OffsetCommit validation) is the upstream's
//!   Metadata, refreshed periodically, on an unknown topic, and from every
//!   Metadata response a client receives.

pub mod body;
pub mod delegate;
pub mod deleted_topics;
pub mod fronting;
pub mod link;
pub mod log_ends;
pub mod mirror;
pub mod rewrite;
pub mod token_owners;
pub mod upstream;
pub mod versions;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::sync::{watch, Notify};

use crate::catalog::Catalog;
use crate::protocol::api::{find_coordinator, produce};
use crate::protocol::header;
use mirror::Mirror;
use rewrite::{NodeEndpoints, Rewrite};

/// A broker's advertised API versions: (key, min, max).
type VersionTable = Vec<(i16, i16, i16)>;
use upstream::{ClusterView, Upstream};

/// How a sidecar handles one request frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Answered by kcoord (or refused, for withheld APIs).
    Local,
    /// Sent to the upstream broker.
    Forward(Forward),
}

/// A request that goes upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forward {
    pub version: i16,
    pub correlation: i32,
    pub rewrite: Option<Rewrite>,
    /// False for Produce with acks=0, which brokers do not answer.
    pub expects_response: bool,
}

pub struct Sidecar {
    pub upstream: Arc<Upstream>,
    pub mirror: Arc<Mirror>,
    /// Every kcoord node, by the upstream broker id it fronts, for each
    /// listener by [`crate::server::ListenerInfo::index`]: clients learn the
    /// addresses of the listener they came in on. Nodes are added when one
    /// process fronting the whole cluster gains a broker (`fronting`), never
    /// removed.
    per_listener: RwLock<Arc<Vec<NodeEndpoints>>>,
    /// One process fronting the whole cluster: its listeners per broker.
    pub fronting: Option<Arc<fronting::Fronting>>,
    /// A client's Metadata answer named a broker no node fronts.
    unfronted_broker: Notify,
    /// The upstream's Metadata was read again.
    refreshed: Notify,
    catalog: Arc<Catalog>,
    /// Advertised API versions per fronted broker, learned once.
    tables: Mutex<HashMap<i32, Arc<VersionTable>>>,
    max_response_bytes: usize,
    max_buffered_bytes: usize,
    metadata_refresh: Duration,
    retry_backoff: Duration,
    /// Log end offsets for consumer lag, read from the upstream's leaders.
    pub log_ends: Arc<log_ends::UpstreamLogEnds>,
    log_end_refresh: Duration,
    /// Pipes for splicing bodies between sockets, shared by all links.
    pipes: Arc<body::Pipes>,
    /// The owners of the delegation tokens relayed logins use.
    token_owners: token_owners::TokenOwners,
}

/// Pipes in the splice pool at most: bodies moving at the same time beyond
/// this are copied. 32 pipes of 1 MiB stay within Linux's default per-user
/// pipe memory (`/proc/sys/fs/pipe-user-pages-soft`, 64 MiB).
const PIPE_POOL: usize = 32;
/// Descriptors the splice pool may hold (two per pipe).
pub const PIPE_DESCRIPTORS: u64 = 2 * PIPE_POOL as u64;

/// Forwarded requests at least this large have their body relayed from the
/// client socket to the upstream rather than read into memory first.
pub const STREAM_REQUESTS_FROM: usize = 64 * 1024;

impl Sidecar {
    pub fn new(
        upstream: Arc<Upstream>,
        mirror: Arc<Mirror>,
        per_listener: Vec<NodeEndpoints>,
        catalog: Arc<Catalog>,
        config: &crate::config::SidecarConfig,
    ) -> Self {
        Sidecar {
            upstream,
            mirror,
            per_listener: RwLock::new(Arc::new(per_listener)),
            fronting: None,
            unfronted_broker: Notify::new(),
            refreshed: Notify::new(),
            catalog,
            tables: Mutex::new(HashMap::new()),
            max_response_bytes: config.max_response_bytes as usize,
            max_buffered_bytes: config.max_buffered_response_bytes as usize,
            metadata_refresh: Duration::from_millis(config.metadata_refresh_ms),
            retry_backoff: Duration::from_millis(config.retry_backoff_ms),
            log_ends: Arc::default(),
            log_end_refresh: Duration::from_millis(config.log_end_refresh_ms),
            pipes: Arc::new(body::Pipes::new(PIPE_POOL)),
            token_owners: token_owners::TokenOwners::default(),
        }
    }

    /// The owner of delegation token `token_id`, which a client relayed to
    /// upstream broker `front` just logged in with (`token_owners`).
    pub async fn token_owner(&self, front: i32, token_id: &str) -> Result<String, String> {
        let broker = self.stand_in(front);
        let Some(addr) = self.upstream.broker_addr(broker) else {
            return Err(format!("upstream broker {broker} is not known"));
        };
        self.token_owners.owner(&self.upstream, &addr, token_id).await
    }

    /// The API versions advertised to clients of the listener fronting
    /// upstream broker `front`.
    pub async fn api_versions(&self, front: i32) -> Result<Arc<Vec<(i16, i16, i16)>>, String> {
        if let Some(t) = self.tables.lock().unwrap_or_else(|p| p.into_inner()).get(&front) {
            return Ok(t.clone());
        }
        let upstream = self.upstream.api_versions(self.stand_in(front)).await.map_err(|e| e.to_string())?;
        let table = Arc::new(versions::merge(&upstream));
        self.tables.lock().unwrap_or_else(|p| p.into_inner()).insert(front, table.clone());
        Ok(table)
    }

    /// The upstream broker that answers for `front`: itself while the
    /// upstream's Metadata lists it. When one process fronts the whole
    /// cluster, a broker that left the upstream keeps its listener, and the
    /// listed broker of lowest id stands in for it: it answers Metadata and
    /// the rest as any broker does (NOT_LEADER_OR_FOLLOWER for partitions it
    /// does not lead, which sends clients to the leaders).
    fn stand_in(&self, front: i32) -> i32 {
        if self.fronting.is_none() || self.upstream.broker_addr(front).is_some() {
            return front;
        }
        self.upstream.brokers().into_keys().next().unwrap_or(front)
    }

    /// Opens a client connection's link to upstream broker `front`, logged
    /// in as the sidecar (`sidecar.upstream_security`), or, with `relay`,
    /// not logged in: the client authenticates over it itself
    /// (`sidecar.client_authentication = "upstream"`).
    pub async fn connect(&self, front: i32, relay: bool) -> std::io::Result<link::Link> {
        let addr = match self.upstream.broker_addr(front) {
            Some(a) => a,
            None => {
                // A broker missing from the last Metadata may be back.
                let _ = self.refresh().await;
                let front = self.stand_in(front);
                self.upstream.broker_addr(front).ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("upstream broker {front} is not in the upstream's metadata"),
                    )
                })?
            }
        };
        let purpose = if relay { "relay" } else { "client" };
        let conn = tokio::time::timeout(self.upstream.timeout(), self.upstream.open(&addr, purpose))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, format!("connecting to {addr}")))?
            .map_err(|e| match e {
                crate::protocol::client::ClientError::Io(e) => e,
                other => std::io::Error::other(format!("upstream broker {addr}: {other}")),
            })?;
        Ok(link::Link::new(conn, self.max_response_bytes, self.max_buffered_bytes, self.pipes.clone()))
    }

    /// How long kcoord waits for an upstream answer.
    pub fn upstream_timeout(&self) -> Duration {
        self.upstream.timeout()
    }

    /// The kcoord nodes of every listener (a snapshot).
    fn all_nodes(&self) -> Arc<Vec<NodeEndpoints>> {
        self.per_listener.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Where clients of `listener` reach the kcoord node fronting `node_id`.
    pub fn endpoint(&self, listener: crate::server::ListenerInfo, node_id: i32) -> Option<(String, i32)> {
        let all = self.all_nodes();
        all.get(usize::from(listener.index)).or(all.first())?.get(node_id).cloned()
    }

    /// The upstream broker ids kcoord nodes front.
    pub fn node_ids(&self) -> Vec<i32> {
        self.all_nodes().first().map(|n| n.0.keys().copied().collect()).unwrap_or_default()
    }

    /// Adds a node (a newly fronted broker) with its address per listener.
    fn add_node(&self, id: i32, by_listener: &[(u16, (String, i32))]) {
        let mut guard = self.per_listener.write().unwrap_or_else(|p| p.into_inner());
        let mut all = Vec::clone(&guard);
        for (index, addr) in by_listener {
            if let Some(n) = all.get_mut(usize::from(*index)) {
                n.0.insert(id, addr.clone());
            }
        }
        *guard = Arc::new(all);
    }

    /// Makes this the process that fronts the whole cluster with `fronting`.
    pub fn with_fronting(mut self, fronting: Arc<fronting::Fronting>) -> Self {
        self.fronting = Some(fronting);
        self
    }

    /// Applies a rewrite to a forwarded response (with the addresses of the
    /// listener the client came in on); Metadata answers also teach the
    /// topic catalog.
    pub fn finish(
        &self,
        rewrite: Rewrite,
        version: i16,
        frame: Bytes,
        listener: crate::server::ListenerInfo,
    ) -> Result<Bytes, String> {
        let all = self.all_nodes();
        let nodes = all.get(usize::from(listener.index)).or(all.first()).ok_or("no listener")?;
        let out = rewrite::rewrite(rewrite, version, frame, nodes)?;
        if out.unfronted_brokers && self.fronting.is_some() {
            self.unfronted_broker.notify_one();
        }
        if !out.topics.is_empty() {
            let topics: Vec<_> = out.topics.into_iter().map(|t| (t.name, t.id, t.partitions)).collect();
            self.catalog.mirror(&topics, false);
        }
        Ok(out.frame)
    }

    /// Reads the upstream's brokers and topics and updates the catalog.
    pub async fn refresh(&self) -> Result<ClusterView, upstream::UpstreamError> {
        let view = self.mirror.refresh_catalog().await?;
        self.refreshed.notify_one();
        Ok(view)
    }

    /// One process fronting the whole cluster: binds listeners for the
    /// brokers that appear in the upstream's Metadata until shutdown
    /// (`fronting`), and serves them with `serve`.
    pub async fn run_broker_follower(
        self: Arc<Self>,
        serve: impl Fn(fronting::Bound) -> tokio::task::JoinHandle<()> + Send,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let Some(fronting) = self.fronting.clone() else { return };
        let backoff = self.retry_backoff;
        let mut served = Vec::new();
        let mut warned_cap = false;
        loop {
            let hinted = tokio::select! {
                _ = self.refreshed.notified() => false,
                _ = self.unfronted_broker.notified() => true,
                _ = shutdown.changed() => break,
            };
            let mut brokers: std::collections::BTreeSet<i32> = self.upstream.brokers().into_keys().collect();
            if hinted && fronting.newcomers(&brokers).is_empty() {
                // A client saw a broker kcoord's last Metadata did not have.
                if let Ok(view) = self.mirror.refresh_catalog().await {
                    brokers = view.brokers.into_keys().collect();
                }
            }
            for id in fronting.newcomers(&brokers) {
                match fronting.bind(id).await {
                    Ok(bound) => {
                        let addrs: Vec<_> = bound.iter().map(|b| (b.info.index, b.advertised.clone())).collect();
                        let local: Vec<_> = bound.iter().map(|b| b.local).collect();
                        self.add_node(id, &addrs);
                        served.extend(bound.into_iter().map(&serve));
                        tracing::info!(broker = id, addrs = ?local, "a new upstream broker is fronted");
                    }
                    Err(e) => tracing::error!(broker = id, error = %e, "cannot front a new upstream broker"),
                }
            }
            if fronting.over_cap(&brokers) && !std::mem::replace(&mut warned_cap, true) {
                tracing::warn!(
                    "the upstream has more brokers than sidecar.max_fronted_brokers; the others are left out of Metadata"
                );
            }
            // Client Metadata answers cannot make this loop busier than the back-off.
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = shutdown.changed() => break,
            }
        }
        // The listeners stop with the shutdown signal and drain their connections.
        for task in served {
            let _ = task.await;
        }
    }

    /// Refreshes the upstream's metadata every `sidecar.metadata_refresh_ms`
    /// until shutdown, and drops the offsets of topics deleted upstream.
    pub async fn run_metadata_refresh(
        self: Arc<Self>,
        coordinator: Arc<dyn mirror::AsCoordinator>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.metadata_refresh) => {}
                _ = shutdown.changed() => return,
            }
            if let Err(e) = self.refresh().await {
                tracing::warn!(error = %e, "upstream metadata refresh failed");
            }
            self.mirror.forget_deleted_topics(coordinator.coordinator()).await;
        }
    }

    /// Reads the log ends behind consumer lag every
    /// `sidecar.log_end_refresh_ms` until shutdown.
    pub async fn run_log_end_refresh(self: Arc<Self>, shutdown: watch::Receiver<bool>) {
        self.log_ends.clone().run(self.upstream.clone(), self.log_end_refresh, shutdown).await
    }
}

/// Decides, from the header (and for FindCoordinator the key type, for
/// Produce the acks), where a request goes in sidecar mode.
pub fn route(frame: &Bytes) -> Route {
    let Ok(prefix) = header::peek_prefix(frame) else { return Route::Local };
    let (key, version, correlation) = (prefix.api_key, prefix.api_version, prefix.correlation_id);
    if versions::is_local(key) {
        if key == find_coordinator::SUPPORT.key && is_transaction_lookup(frame, version) {
            let rewrite = Some(Rewrite::FindCoordinator);
            return Route::Forward(Forward { version, correlation, rewrite, expects_response: true });
        }
        return Route::Local;
    }
    if versions::is_withheld(key) {
        return Route::Local;
    }
    let expects_response = !(key == produce::SUPPORT.key && produce_acks(frame, version) == Some(0));
    Route::Forward(Forward { version, correlation, rewrite: Rewrite::for_request(key, version), expects_response })
}

/// Where a request goes, decided from the first bytes of its frame only:
/// `Some` only for a request that is forwarded whatever its remaining bytes
/// are, so that the rest can be relayed without being read into memory.
pub fn route_head(head: &Bytes) -> Option<Route> {
    let prefix = header::peek_prefix(head).ok()?;
    let key = prefix.api_key;
    if versions::is_local(key) || versions::is_withheld(key) {
        return None;
    }
    if key == produce::SUPPORT.key && produce_acks(head, prefix.api_version).is_none() {
        return None;
    }
    Some(route(head))
}

/// Whether a FindCoordinator request asks for transaction coordinators
/// (forwarded) rather than group coordinators (answered locally).
fn is_transaction_lookup(frame: &Bytes, version: i16) -> bool {
    let mut body = frame.clone();
    if header::parse_request_header(&mut body, find_coordinator::SUPPORT.is_flexible(version)).is_err() {
        return false;
    }
    matches!(find_coordinator::decode(&mut body, version), Ok(r) if r.key_type == crate::cluster::KEY_TYPE_TRANSACTION)
}

/// The acks of a Produce request, read without decoding its records.
fn produce_acks(frame: &Bytes, version: i16) -> Option<i16> {
    let flexible = version >= 9;
    let mut body = frame.clone();
    header::parse_request_header(&mut body, flexible).ok()?;
    if version >= 3 {
        // transactional_id: a nullable string.
        let len = if flexible {
            header::read_uvarint(&mut body)? as usize
        } else {
            let n = body.get_i16_checked()?;
            usize::try_from(n).unwrap_or(0) + 1
        };
        let skip = len.saturating_sub(1);
        if body.remaining() < skip {
            return None;
        }
        body.advance(skip);
    }
    body.get_i16_checked()
}

trait GetChecked {
    fn get_i16_checked(&mut self) -> Option<i16>;
}

impl GetChecked for Bytes {
    fn get_i16_checked(&mut self) -> Option<i16> {
        (self.remaining() >= 2).then(|| self.get_i16())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};

    /// A request frame with header v1 (v2 when flexible) and `body`.
    fn request(key: i16, version: i16, flexible: bool, body: &[u8]) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i32(0);
        b.put_i16(key);
        b.put_i16(version);
        b.put_i32(42);
        b.put_i16(3);
        b.put_slice(b"cli");
        if flexible {
            b.put_u8(0);
        }
        b.put_slice(body);
        let len = (b.len() - 4) as i32;
        b[..4].copy_from_slice(&len.to_be_bytes());
        b.freeze().slice(4..)
    }

    #[test]
    fn produce_acks_are_read_for_old_and_flexible_versions() {
        // v2: no transactional id.
        assert_eq!(produce_acks(&request(0, 2, false, &[0, 0, 0, 0, 0, 0]), 2), Some(0));
        // v3: null transactional id (-1), acks 1.
        assert_eq!(produce_acks(&request(0, 3, false, &[0xff, 0xff, 0, 1]), 3), Some(1));
        // v3: transactional id "tx", acks 0.
        assert_eq!(produce_acks(&request(0, 3, false, &[0, 2, b't', b'x', 0, 0]), 3), Some(0));
        // v9: compact null (0), acks -1.
        assert_eq!(produce_acks(&request(0, 9, true, &[0, 0xff, 0xff]), 9), Some(-1));
        // v9: compact "tx" (length + 1 = 3), acks 0.
        assert_eq!(produce_acks(&request(0, 9, true, &[3, b't', b'x', 0, 0]), 9), Some(0));
        // Truncated: unknown, so a response is expected.
        assert_eq!(produce_acks(&request(0, 9, true, &[3, b't']), 9), None);
    }

    #[test]
    fn transaction_lookups_are_told_from_group_lookups() {
        // v1: key "g", key type 0 / 1.
        assert!(!is_transaction_lookup(&request(10, 1, false, &[0, 1, b'g', 0]), 1));
        assert!(is_transaction_lookup(&request(10, 1, false, &[0, 1, b'g', 1]), 1));
        // v0 has no key type: always a group.
        assert!(!is_transaction_lookup(&request(10, 0, false, &[0, 1, b'g']), 0));
    }
}
