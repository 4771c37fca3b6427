//! Start-up and shutdown of the whole daemon.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::cluster::{self, Cluster, NodeInfo};
use crate::config::{Config, Endpoint};
use crate::coordinator::Coordinator;
use crate::observability::{self, http::HttpState};
use crate::server::{listener, Services};
use crate::storage::fsutil::DirLock;
use crate::topics::{Catalog, DataPlane, DataPlaneSettings};

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("data directory {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error("topic {name}: {message}")]
    Topic { name: String, message: String },
    #[error(transparent)]
    ShardLayout(#[from] crate::coordinator::layout::LayoutError),
    #[error("cannot listen for metrics on {addr}: {source}")]
    Metrics { addr: String, source: std::io::Error },
}

/// Options that are not configuration (one-off operator decisions).
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// Truncate coordinator and partition logs at the first corrupt record
    /// instead of refusing to start (`kcoord serve --repair`).
    pub repair: bool,
}

/// Entry point for starting kcoord.
pub struct Daemon;

/// A started daemon.
pub struct RunningDaemon {
    addr: SocketAddr,
    node: NodeInfo,
    shutdown: watch::Sender<bool>,
    listener: JoinHandle<()>,
    services: Arc<Services>,
    metrics_addr: Option<SocketAddr>,
    fatal: mpsc::UnboundedReceiver<String>,
    shutdown_timeout: Duration,
    _lock: DirLock,
}

impl Daemon {
    /// Opens the data dir, binds the listener and starts serving.
    pub async fn start(config: Config) -> Result<RunningDaemon, StartError> {
        Self::start_with(config, StartOptions::default()).await
    }

    pub async fn start_with(config: Config, options: StartOptions) -> Result<RunningDaemon, StartError> {
        let data_dir = config.storage.data_dir.clone();
        let dd_err = |source| StartError::DataDir { path: data_dir.display().to_string(), source };
        std::fs::create_dir_all(&data_dir).map_err(dd_err)?;
        let lock = DirLock::acquire(&data_dir).map_err(dd_err)?;
        let cluster_id = cluster::load_or_create_cluster_id(&data_dir).map_err(dd_err)?;
        crate::coordinator::layout::check_or_record_shard_count(
            &data_dir.join("coordinator"),
            config.offsets.partitions,
        )?;
        let catalog = Arc::new(Catalog::open(&data_dir).map_err(dd_err)?);
        for spec in config.defined_topics() {
            if catalog.is_deleting(&spec.name) {
                // Its name is reserved until the old topic's offsets are gone.
                tracing::warn!(
                    topic = %spec.name,
                    "a configured topic is still being deleted; it is created again at the next start"
                );
                continue;
            }
            catalog
                .ensure(&spec.name, spec.partitions)
                .map_err(|e| StartError::Topic { name: spec.name.clone(), message: e.message })?;
        }

        let listener = TcpListener::bind(&config.server.listen)
            .await
            .map_err(|source| StartError::Bind { addr: config.server.listen.clone(), source })?;
        let addr =
            listener.local_addr().map_err(|source| StartError::Bind { addr: config.server.listen.clone(), source })?;
        // With an ephemeral port (tests), advertise the port actually bound.
        let advertised = if config.server.advertised_listener.is_empty() {
            Endpoint { host: addr.ip().to_string(), port: addr.port() }
        } else {
            config.advertised()
        };
        let node = NodeInfo {
            node_id: config.server.node_id,
            host: advertised.host,
            port: advertised.port as i32,
            cluster_id,
        };
        if crate::alloc_guard::overcommit_mode() == Some(2) {
            tracing::warn!(
                "vm.overcommit_memory is 2: hostile array lengths in requests can abort the process; see docs/operations.md"
            );
        }
        if let Some(limit) = crate::alloc_guard::address_space_limit() {
            tracing::warn!(
                limit_bytes = limit,
                "an address-space limit (ulimit -v / LimitAS) is set: hostile array lengths in requests can abort the process; see docs/operations.md"
            );
        }

        let (fatal_tx, fatal) = mpsc::unbounded_channel();
        // Partition logs are open before anything is served, so every topic
        // Metadata lists can be produced to and fetched from at once.
        let data_plane =
            DataPlane::open(DataPlaneSettings::from_config(&config, options.repair), catalog.clone(), fatal_tx.clone())
                .await
                .map_err(|e| StartError::Topic { name: e.topic, message: e.message })?;
        let coordinator = Coordinator::start(&config, catalog.clone(), options.repair, fatal_tx);
        let config = Arc::new(config);
        let services = Arc::new(Services {
            cluster: Cluster::new(node.clone(), config.topics.auto_create, config.topics.default_partitions),
            topic_creator: data_plane.clone(),
            catalog,
            coordinator,
            data_plane,
            config: config.clone(),
        });
        // Finishes topic deletions a crash or a slow shard left unfinished.
        let finisher = services.clone();
        tokio::spawn(async move { finisher.data_plane.finish_deletions(&finisher.coordinator).await });
        let (tx, rx) = watch::channel(false);
        let metrics_addr = if config.metrics.listen.is_empty() {
            None
        } else {
            let m_err = |source| StartError::Metrics { addr: config.metrics.listen.clone(), source };
            let http = TcpListener::bind(&config.metrics.listen).await.map_err(m_err)?;
            let bound = http.local_addr().map_err(m_err)?;
            let state = Arc::new(HttpState {
                services: services.clone(),
                metrics: observability::metrics::install(),
                log_ends: services.data_plane.clone(),
            });
            tokio::spawn(observability::http::serve(http, state, rx.clone()));
            tracing::info!(addr = %bound, "serving metrics and the group API over HTTP");
            Some(bound)
        };
        let task = tokio::spawn(listener::run(listener, services.clone(), rx));
        tracing::info!(%addr, node_id = node.node_id, cluster_id = %node.cluster_id, "kcoord started");
        Ok(RunningDaemon {
            addr,
            node,
            shutdown: tx,
            listener: task,
            services,
            metrics_addr,
            fatal,
            shutdown_timeout: Duration::from_millis(config.server.shutdown_timeout_ms),
            _lock: lock,
        })
    }
}

impl RunningDaemon {
    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the metrics/JSON HTTP listener is bound, if enabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The identity advertised to clients.
    pub fn node(&self) -> &NodeInfo {
        &self.node
    }

    /// The shared services (for embedding and tests).
    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// Completes when a component failed beyond repair (a corrupt log at
    /// start-up, a failed fsync); the daemon should then stop with an error.
    pub async fn fatal_error(&mut self) -> String {
        self.fatal.recv().await.unwrap_or_else(|| "fatal error channel closed".into())
    }

    /// Stops accepting and reading requests, unloads the coordinator (parked
    /// JoinGroup/SyncGroup get NOT_COORDINATOR, pending writes are made
    /// durable and acknowledged), answers parked fetches, waits for
    /// connections to drain (bounded by `server.shutdown_timeout_ms`), then
    /// fsyncs every partition log.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        self.services.coordinator.shutdown().await;
        self.services.data_plane.begin_shutdown();
        let mut listener = self.listener;
        if tokio::time::timeout(self.shutdown_timeout, &mut listener).await.is_err() {
            tracing::warn!("connections did not finish within server.shutdown_timeout_ms; closing them");
            listener.abort();
        }
        self.services.data_plane.close().await;
        tracing::info!("kcoord stopped");
    }
}
