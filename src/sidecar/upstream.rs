//! kcoord's own client of the upstream cluster: its brokers and topics
//! (Metadata), the API versions of each broker, and the calls the sidecar
//! makes itself (FindCoordinator, OffsetFetch for import, OffsetCommit for
//! write-through, DeleteGroups, OffsetDelete).
//!
//! One control connection per upstream broker, used by one call at a time;
//! a failed call drops its connection so the next one reconnects. Client
//! traffic never uses these connections (see `link`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest};
use kafka_protocol::protocol::Request;
use uuid::Uuid;

use crate::protocol::client::{s, ClientError, Connection};
use crate::security::client::ClientSecurity;

/// The client id kcoord uses upstream (visible in the brokers' logs).
const CLIENT_ID: &str = "kcoord-sidecar";

/// Groups whose upstream coordinator is remembered at most.
const MAX_CACHED_COORDINATORS: usize = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream broker {addr}: {source}")]
    Client { addr: String, source: ClientError },
    #[error("no upstream broker could be reached (tried {0})")]
    Unreachable(String),
    #[error("upstream broker {0} is not in the upstream's metadata")]
    UnknownBroker(i32),
    #[error("upstream answered error {code} ({what})")]
    Kafka { code: i16, what: String },
}

impl UpstreamError {
    /// Errors that mean "ask again elsewhere": the coordinator moved or is loading.
    pub fn is_coordinator_moved(&self) -> bool {
        matches!(self, UpstreamError::Kafka { code: 14..=16, .. })
    }
}

pub type Result<T> = std::result::Result<T, UpstreamError>;

/// One upstream broker as the upstream advertises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamBroker {
    pub node_id: i32,
    pub addr: String,
}

/// One upstream topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamTopic {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    /// The leader of each partition by index (−1 where none is known).
    pub leaders: Vec<i32>,
}

impl UpstreamTopic {
    /// The topics a Metadata answer describes without error.
    pub fn all_in(resp: &kafka_protocol::messages::MetadataResponse) -> Vec<UpstreamTopic> {
        resp.topics
            .iter()
            .filter(|t| t.error_code == 0)
            .filter_map(|t| {
                let mut leaders = vec![-1; t.partitions.len()];
                for p in &t.partitions {
                    if let Some(slot) = usize::try_from(p.partition_index).ok().and_then(|i| leaders.get_mut(i)) {
                        *slot = p.leader_id.0;
                    }
                }
                Some(UpstreamTopic {
                    name: t.name.as_ref()?.0.to_string(),
                    id: t.topic_id,
                    partitions: i32::try_from(t.partitions.len()).ok()?,
                    leaders,
                })
            })
            .collect()
    }
}

/// What one Metadata call told us.
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    pub brokers: BTreeMap<i32, String>,
    pub cluster_id: Option<String>,
    pub controller_id: i32,
    pub topics: Vec<UpstreamTopic>,
}

type Slot = Arc<tokio::sync::Mutex<Option<Connection>>>;

pub struct Upstream {
    bootstrap: Vec<String>,
    /// TLS and SASL of every connection to the upstream.
    security: ClientSecurity,
    timeout: Duration,
    view: RwLock<ClusterView>,
    connections: Mutex<HashMap<String, Slot>>,
    coordinators: Mutex<HashMap<String, i32>>,
}

impl Upstream {
    pub fn new(bootstrap: Vec<String>, timeout: Duration, security: ClientSecurity) -> Self {
        Upstream {
            bootstrap,
            security,
            timeout,
            view: RwLock::new(ClusterView::default()),
            connections: Mutex::new(HashMap::new()),
            coordinators: Mutex::new(HashMap::new()),
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How connections to the upstream are secured.
    pub fn security(&self) -> &ClientSecurity {
        &self.security
    }

    /// Opens an authenticated connection to `addr`; a refused login is
    /// counted and logged (it usually means wrong upstream credentials).
    pub async fn open(&self, addr: &str, purpose: &'static str) -> std::result::Result<Connection, ClientError> {
        let r = match (&self.security.sasl, purpose) {
            // A client's link needs no ApiVersions of its own without SASL;
            // a link the client authenticates itself logs in as nobody.
            (None, "client") | (_, "relay") => Connection::connect_with(addr, CLIENT_ID, &self.security).await,
            _ => Connection::connect_secure(addr, CLIENT_ID, &self.security).await,
        };
        match &r {
            Ok(_) => metrics::counter!("kcoord_sidecar_upstream_connects_total", "use" => purpose).increment(1),
            Err(ClientError::Authentication(reason)) => {
                metrics::counter!("kcoord_sidecar_upstream_authentication_failures_total").increment(1);
                tracing::error!(%addr, %reason, "the upstream refused kcoord's login: check sidecar.upstream_security");
            }
            Err(_) => {}
        }
        r
    }

    /// The slot's connection, opened (or renewed, when its SASL session
    /// is nearly over) if needed.
    async fn ready<'a>(
        &self,
        guard: &'a mut Option<Connection>,
        addr: &str,
    ) -> std::result::Result<&'a mut Connection, ClientError> {
        if guard.as_ref().is_some_and(|c| c.needs_renewal(tokio::time::Instant::now())) {
            *guard = None;
        }
        if guard.is_none() {
            *guard = Some(self.open(addr, "control").await?);
        }
        guard.as_mut().ok_or_else(|| ClientError::Io(std::io::ErrorKind::NotConnected.into()))
    }

    /// The brokers known from the last Metadata, by id.
    pub fn brokers(&self) -> BTreeMap<i32, String> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).brokers.clone()
    }

    /// The leader of each of `partitions` as the last Metadata had it.
    pub fn leaders_of<'a>(&self, partitions: impl Iterator<Item = (&'a str, i32)>) -> Vec<Option<i32>> {
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        let by_name: HashMap<&str, &UpstreamTopic> = view.topics.iter().map(|t| (t.name.as_str(), t)).collect();
        partitions
            .map(|(topic, partition)| {
                let leaders = &by_name.get(topic)?.leaders;
                leaders.get(usize::try_from(partition).ok()?).copied().filter(|&l| l >= 0)
            })
            .collect()
    }

    /// The address of upstream broker `id`.
    pub fn broker_addr(&self, id: i32) -> Option<String> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).brokers.get(&id).cloned()
    }

    fn slot(&self, addr: &str) -> Slot {
        let mut map = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(addr.to_string()).or_default().clone()
    }

    /// Sends one request to the broker at `addr` at the highest version
    /// both sides support within `min..=max`; returns it with the version.
    pub async fn call_addr<R: Request>(&self, addr: &str, req: &R, min: i16, max: i16) -> Result<(i16, R::Response)> {
        let slot = self.slot(addr);
        let mut guard = slot.lock().await;
        let wrap = |source| UpstreamError::Client { addr: addr.to_string(), source };
        let attempt = async {
            let conn = tokio::time::timeout(self.timeout, self.ready(&mut guard, addr))
                .await
                .map_err(|_| ClientError::Timeout(self.timeout))??;
            let version = conn.version::<R>(min, max)?;
            let resp = conn.call_timeout(req, version, self.timeout).await?;
            Ok::<_, ClientError>((version, resp))
        };
        match attempt.await {
            Ok(r) => Ok(r),
            Err(e) => {
                // The connection may be mid-frame: start afresh next time.
                *guard = None;
                Err(wrap(e))
            }
        }
    }

    /// [`Self::call_addr`] on broker `id`.
    pub async fn call_broker<R: Request>(&self, id: i32, req: &R, min: i16, max: i16) -> Result<(i16, R::Response)> {
        let addr = self.broker_addr(id).ok_or(UpstreamError::UnknownBroker(id))?;
        self.call_addr(&addr, req, min, max).await
    }

    /// The API versions broker `id` advertises, as (key, min, max).
    pub async fn api_versions(&self, id: i32) -> Result<Vec<(i16, i16, i16)>> {
        let addr = self.broker_addr(id).ok_or(UpstreamError::UnknownBroker(id))?;
        let slot = self.slot(&addr);
        let mut guard = slot.lock().await;
        let conn = tokio::time::timeout(self.timeout, self.ready(&mut guard, &addr))
            .await
            .map_err(|_| ClientError::Timeout(self.timeout))
            .and_then(|r| r)
            .map_err(|source| UpstreamError::Client { addr: addr.clone(), source })?;
        Ok(conn.api_versions())
    }

    /// Reads the upstream's brokers and every topic from any broker that
    /// answers (known brokers first, then the bootstrap list), and keeps it.
    pub async fn refresh(&self) -> Result<ClusterView> {
        let mut candidates: Vec<String> = self.brokers().into_values().collect();
        for b in &self.bootstrap {
            if !candidates.contains(b) {
                candidates.push(b.clone());
            }
        }
        let mut last = None;
        for addr in &candidates {
            // v1+: a null topic list means every topic.
            let req = MetadataRequest::default().with_topics(None).with_allow_auto_topic_creation(false);
            match self.call_addr(addr, &req, 1, 12).await {
                Ok((_, resp)) => {
                    let view = ClusterView {
                        brokers: resp
                            .brokers
                            .iter()
                            .map(|b| (b.node_id.0, format_addr(b.host.as_str(), b.port)))
                            .collect(),
                        cluster_id: resp.cluster_id.as_ref().map(|c| c.to_string()),
                        controller_id: resp.controller_id.0,
                        topics: UpstreamTopic::all_in(&resp),
                    };
                    if view.brokers.is_empty() {
                        last = Some(UpstreamError::Unreachable(format!("{addr} listed no brokers")));
                        continue;
                    }
                    *self.view.write().unwrap_or_else(|p| p.into_inner()) = view.clone();
                    metrics::counter!("kcoord_sidecar_metadata_refreshes_total", "result" => "ok").increment(1);
                    return Ok(view);
                }
                Err(e) => {
                    tracing::debug!(%addr, error = %e, "upstream metadata refresh failed");
                    last = Some(e);
                }
            }
        }
        metrics::counter!("kcoord_sidecar_metadata_refreshes_total", "result" => "error").increment(1);
        Err(last.unwrap_or_else(|| UpstreamError::Unreachable(candidates.join(","))))
    }

    /// The upstream broker that coordinates `group` (remembered until
    /// [`Self::forget_coordinator`]).
    pub async fn coordinator_for(&self, group: &str) -> Result<i32> {
        if let Some(id) = self.coordinators.lock().unwrap_or_else(|p| p.into_inner()).get(group) {
            return Ok(*id);
        }
        let brokers = self.brokers();
        let mut last = UpstreamError::Unreachable("no upstream broker is known".into());
        for addr in brokers.values() {
            // v0–3: one key per request, which every broker supports.
            let req = FindCoordinatorRequest::default().with_key(s(group)).with_key_type(0);
            match self.call_addr(addr, &req, 0, 3).await {
                Ok((_, resp)) if resp.error_code == 0 => {
                    let id = resp.node_id.0;
                    let mut cache = self.coordinators.lock().unwrap_or_else(|p| p.into_inner());
                    if cache.len() >= MAX_CACHED_COORDINATORS {
                        cache.clear();
                    }
                    cache.insert(group.to_string(), id);
                    return Ok(id);
                }
                Ok((_, resp)) => {
                    return Err(UpstreamError::Kafka {
                        code: resp.error_code,
                        what: format!("FindCoordinator {group}"),
                    })
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    pub fn forget_coordinator(&self, group: &str) {
        self.coordinators.lock().unwrap_or_else(|p| p.into_inner()).remove(group);
    }

    /// Calls `group`'s upstream coordinator; a "coordinator moved" answer or
    /// a failed connection forgets it, so the next call looks it up again.
    pub async fn call_coordinator<R: Request>(
        &self,
        group: &str,
        req: &R,
        min: i16,
        max: i16,
    ) -> Result<(i16, R::Response)> {
        let id = self.coordinator_for(group).await?;
        let r = self.call_broker(id, req, min, max).await;
        if r.is_err() {
            self.forget_coordinator(group);
        }
        r
    }
}

/// "host:port", with brackets around an IPv6 host.
pub fn format_addr(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
