//! Start-up and shutdown of the whole daemon.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::catalog::Catalog;
use crate::catalog::NoTopicCreation;
use crate::cluster::{self, BrokerMetadata, Cluster, GroupOwners, NodeInfo};
use crate::config::{Config, Endpoint, SidecarConfig};
use crate::coordinator::service::GroupHooks;
use crate::coordinator::Coordinator;
use crate::observability::lag_history::{self, LagHistory};
use crate::observability::{self, http::HttpState, LogEndOffsets, NoLogEnds};
use crate::security::client::ClientSecurity;
use crate::security::{ListenerSecurity, SecurityRuntime};
use crate::server::limits::{self, ConnectionLimits};
use crate::server::{listener, ListenerInfo, Services};
use crate::sidecar::fronting::{Bound, Fronting, ListenerPlan};
use crate::sidecar::mirror::{AsCoordinator, Mirror, MirrorSettings};
use crate::sidecar::rewrite::NodeEndpoints;
use crate::sidecar::upstream::{format_addr, ClusterView, Upstream};
use crate::sidecar::Sidecar;
use crate::storage::fsutil::DirLock;
use crate::storage::FileCache;
use crate::topics::{DataPlane, DataPlaneSettings};

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
    #[error("sidecar: {0}")]
    Sidecar(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("{0}")]
    OpenFileLimit(String),
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
    addrs: Vec<SocketAddr>,
    node: NodeInfo,
    shutdown: watch::Sender<bool>,
    listeners: Vec<JoinHandle<()>>,
    background: Vec<JoinHandle<()>>,
    services: Arc<Services>,
    metrics_addr: Option<SocketAddr>,
    fatal: mpsc::UnboundedReceiver<String>,
    shutdown_timeout: Duration,
    security: Arc<SecurityRuntime>,
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
        crate::storage::fsutil::create_dir_all_durably(&data_dir).map_err(dd_err)?;
        let lock = DirLock::acquire(&data_dir).map_err(dd_err)?;
        let cluster_id = cluster::load_or_create_cluster_id(&data_dir).map_err(dd_err)?;
        crate::coordinator::layout::check_or_record_shard_count(
            &data_dir.join("coordinator"),
            config.offsets.partitions,
            options.repair,
        )?;
        let journal = crate::storage::journal::open(
            &data_dir,
            config.storage.fsync == crate::config::FsyncPolicy::Always,
            options.repair,
        )
        .map_err(dd_err)?;
        warn_about_allocation_limits();
        let descriptors = crate::descriptors::check_at_startup(&config).map_err(StartError::OpenFileLimit)?;
        if config.sidecar.enabled() {
            return start_sidecar(config, options, lock, cluster_id, descriptors, journal).await;
        }
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

        let specs = config.listener_specs().map_err(StartError::Config)?;
        let (security, per_listener) = SecurityRuntime::build(&config, &specs).await.map_err(StartError::Config)?;
        let mut bound = Vec::with_capacity(specs.len());
        let mut endpoints = Vec::with_capacity(specs.len());
        for (i, (spec, sec)) in specs.iter().zip(per_listener).enumerate() {
            let addr = format_addr(&spec.bind.host, i32::from(spec.bind.port));
            let listener = bind(&addr).await?;
            let local = local_addr(&listener, &addr)?;
            // With an ephemeral port (tests), advertise the port actually bound.
            let advertised =
                spec.advertised.clone().unwrap_or(Endpoint { host: local.ip().to_string(), port: local.port() });
            endpoints.push(advertised);
            let index = u16::try_from(i).map_err(|_| StartError::Config("too many listeners".into()))?;
            bound.push((listener, ListenerInfo { node_id: config.server.node_id, index }, sec));
            tracing::info!(listener = %spec.name, protocol = spec.protocol.name(), addr = %local, "listener bound");
        }
        let first = endpoints.first().cloned().ok_or_else(|| StartError::Config("no listener is configured".into()))?;
        let node = NodeInfo { node_id: config.server.node_id, host: first.host, port: first.port as i32, cluster_id };

        let (fatal_tx, fatal) = mpsc::unbounded_channel();
        let files = FileCache::new(descriptors.segment_files);
        // Partition logs are open before anything is served, so every topic
        // Metadata lists can be produced to and fetched from at once.
        let data_plane = DataPlane::open(
            DataPlaneSettings::from_config(&config, options.repair, files),
            catalog.clone(),
            fatal_tx.clone(),
        )
        .await
        .map_err(|e| StartError::Topic { name: e.topic, message: e.message })?;
        let coordinator =
            Coordinator::start(&config, catalog.clone(), options.repair, fatal_tx, &|_| true, None, journal);
        let config = Arc::new(config);
        let services = Arc::new(Services {
            cluster: Cluster::new(node.clone(), config.topics.auto_create, config.topics.default_partitions)
                .with_max_auto_create(config.topics.max_auto_create_per_request),
            topic_creator: data_plane.clone(),
            catalog,
            coordinator,
            data_plane: Some(data_plane.clone()),
            sidecar: None,
            request_budget: Services::request_budget(&config),
            listener_endpoints: endpoints,
            authorizer: authorizer(&config)?,
            quotas: crate::quota::Quotas::from_config(&config.quotas).map(Arc::new),
            credentials: security.credentials.clone(),
            delegation_tokens: security.tokens.clone(),
            config: config.clone(),
        });
        // Finishes topic deletions a crash or a slow shard left unfinished.
        let finisher = services.clone();
        tokio::spawn(async move { crate::topic_deletion::finish_deletions(&data_plane, &finisher.coordinator).await });
        let max_connections = descriptors.max_connections(services.config.server.max_connections, 1, 0);
        let mut background: Vec<BackgroundTask> = Vec::new();
        if let Some(tokens) = services.delegation_tokens.clone() {
            let every =
                Duration::from_millis(services.config.security.delegation_token_expiry_check_interval_ms as u64);
            background.push(Box::new(move |cx| Box::pin(tokens.sweep_every(every, cx.shutdown))));
        }
        launch(services, bound, node, lock, fatal, background, security, max_connections).await
    }
}

/// The authorizer `[authorizer]` asks for, with its ACL file loaded.
fn authorizer(config: &Config) -> Result<Arc<crate::security::acl::Authorizer>, StartError> {
    let a = crate::security::acl::Authorizer::from_config(&config.authorizer, &config.storage.data_dir)
        .map_err(StartError::Config)?;
    Ok(Arc::new(a))
}

fn warn_about_allocation_limits() {
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
}

async fn bind(addr: &str) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr).await.map_err(|source| StartError::Bind { addr: addr.to_string(), source })
}

fn local_addr(listener: &TcpListener, addr: &str) -> Result<SocketAddr, StartError> {
    listener.local_addr().map_err(|source| StartError::Bind { addr: addr.to_string(), source })
}

/// Starts the HTTP listener (if configured) and the Kafka listeners.
#[allow(clippy::too_many_arguments, reason = "called once, from start-up, with what start-up built")]
async fn launch(
    services: Arc<Services>,
    listeners: Vec<(TcpListener, ListenerInfo, Arc<ListenerSecurity>)>,
    node: NodeInfo,
    lock: DirLock,
    fatal: mpsc::UnboundedReceiver<String>,
    background: Vec<BackgroundTask>,
    security: SecurityRuntime,
    max_connections: u32,
) -> Result<RunningDaemon, StartError> {
    let config = services.config.clone();
    let overrides =
        limits::resolve_overrides(&config.server.max_connections_per_ip_overrides).await.map_err(StartError::Config)?;
    let limits = ConnectionLimits::new(max_connections, config.server.max_connections_per_ip, overrides);
    let (tx, rx) = watch::channel(false);
    let metrics_addr = if config.metrics.listen.is_empty() {
        None
    } else {
        let m_err = |source| StartError::Metrics { addr: config.metrics.listen.clone(), source };
        let http = TcpListener::bind(&config.metrics.listen).await.map_err(m_err)?;
        let bound = http.local_addr().map_err(m_err)?;
        let log_ends: Arc<dyn LogEndOffsets> = match (&services.data_plane, &services.sidecar) {
            (Some(d), _) => d.clone(),
            (None, Some(s)) => s.log_ends.clone(),
            (None, None) => Arc::new(NoLogEnds),
        };
        let lag_history = Arc::new(LagHistory::new(lag_history::Limits::default()));
        tokio::spawn(lag_history::run_sampler(
            lag_history.clone(),
            services.clone(),
            log_ends.clone(),
            Duration::from_millis(config.metrics.lag_sample_interval_ms),
            rx.clone(),
        ));
        let metrics = observability::metrics::install();
        let state = Arc::new(HttpState { services: services.clone(), metrics, log_ends, lag_history });
        tokio::spawn(observability::http::serve(http, state, rx.clone()));
        tracing::info!(addr = %bound, "serving metrics and the group API over HTTP");
        Some(bound)
    };
    // Background work starts once the metrics recorder is installed.
    let mut background: Vec<JoinHandle<()>> = background
        .into_iter()
        .map(|task| tokio::spawn(task(TaskContext { shutdown: rx.clone(), limits: limits.clone() })))
        .collect();
    let mut security = security;
    security.acls = services.authorizer.store().cloned();
    let security = Arc::new(security);
    if security.credentials.is_some() || !security.tls.is_empty() || security.acls.is_some() {
        background.push(tokio::spawn(security.clone().watch_files(rx.clone())));
    }
    let mut addrs = Vec::with_capacity(listeners.len());
    let mut tasks = Vec::with_capacity(listeners.len());
    for (listener, info, sec) in listeners {
        let addr = local_addr(&listener, &config.server.listen)?;
        addrs.push(addr);
        tasks.push(tokio::spawn(listener::run(listener, info, sec, services.clone(), rx.clone(), limits.clone())));
    }
    tracing::info!(addrs = ?addrs, node_id = node.node_id, cluster_id = %node.cluster_id, "kcoord started");
    Ok(RunningDaemon {
        addrs,
        node,
        shutdown: tx,
        listeners: tasks,
        background,
        services,
        metrics_addr,
        fatal,
        shutdown_timeout: Duration::from_millis(config.server.shutdown_timeout_ms),
        security,
        _lock: lock,
    })
}

/// A task that runs until the shutdown signal turns true.
type BackgroundTask = Box<dyn FnOnce(TaskContext) -> BoxFuture + Send>;

/// What a background task gets from [`launch`].
struct TaskContext {
    shutdown: watch::Receiver<bool>,
    /// The connection limits every listener shares (for listeners a task opens).
    limits: Arc<ConnectionLimits>,
}
type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Sidecar mode: learns the upstream's brokers, binds one listener per
/// fronted broker, and serves groups with the upstream as the data plane.
async fn start_sidecar(
    config: Config,
    options: StartOptions,
    lock: DirLock,
    own_cluster_id: String,
    descriptors: crate::descriptors::Budget,
    journal: Option<Arc<crate::storage::Journal>>,
) -> Result<RunningDaemon, StartError> {
    let sc = config.sidecar.clone();
    let upstream_security = ClientSecurity::from_config(&sc.upstream_security)
        .map_err(|e| StartError::Config(format!("sidecar.upstream_security: {e}")))?;
    let upstream =
        Arc::new(Upstream::new(sc.upstream.clone(), Duration::from_millis(sc.request_timeout_ms), upstream_security));
    let view = first_metadata(&upstream, &sc).await?;
    let peers = sc.parsed_peers().map_err(StartError::Sidecar)?;
    let specs = config.listener_specs().map_err(StartError::Config)?;
    let (security, per_listener) = SecurityRuntime::build(&config, &specs).await.map_err(StartError::Config)?;
    let mut nodes = vec![NodeEndpoints::default(); specs.len()];
    let mut listeners = Vec::new();
    let mut fronting = None;
    if peers.is_empty() {
        // One process fronting the whole cluster: each listener binds a
        // port per broker (its port plus the broker's rank by id), and
        // more as brokers join (`sidecar::fronting`).
        let mut plans = Vec::with_capacity(specs.len());
        for (li, (spec, sec)) in specs.iter().zip(&per_listener).enumerate() {
            let index = u16::try_from(li).map_err(|_| StartError::Config("too many listeners".into()))?;
            plans.push(ListenerPlan {
                index,
                bind: spec.bind.clone(),
                advertised: spec.advertised.clone(),
                security: sec.clone(),
            });
        }
        let f = Arc::new(Fronting::new(plans, sc.max_fronted_brokers as usize));
        let ids: std::collections::BTreeSet<i32> = view.brokers.keys().copied().collect();
        if f.over_cap(&ids) || ids.len() > sc.max_fronted_brokers as usize {
            tracing::warn!(
                brokers = ids.len(),
                max = sc.max_fronted_brokers,
                "the upstream has more brokers than sidecar.max_fronted_brokers; fronting the lowest ids"
            );
        }
        for id in f.newcomers(&ids) {
            for b in f.bind(id).await.map_err(StartError::Sidecar)? {
                if let Some(n) = nodes.get_mut(usize::from(b.info.index)) {
                    n.0.insert(id, b.advertised);
                }
                listeners.push((b.listener, b.info, b.security));
            }
        }
        // Listeners in listener order, then broker id order (as before).
        listeners.sort_by_key(|(_, info, _)| (info.index, info.node_id));
        fronting = Some(f);
    } else {
        // One sidecar per broker: this one fronts broker `server.node_id`.
        let me = config.server.node_id;
        if !view.brokers.contains_key(&me) {
            tracing::warn!(node_id = me, brokers = ?view.brokers.keys().collect::<Vec<_>>(),
                "server.node_id names no upstream broker; forwarded requests fail until it appears");
        }
        for (li, (spec, sec)) in specs.iter().zip(&per_listener).enumerate() {
            let index = u16::try_from(li).map_err(|_| StartError::Config("too many listeners".into()))?;
            let addr = format_addr(&spec.bind.host, i32::from(spec.bind.port));
            let l = bind(&addr).await?;
            let bound = local_addr(&l, &addr)?;
            let own = spec.advertised.clone().unwrap_or(Endpoint { host: spec.bind.host.clone(), port: bound.port() });
            for (id, name, ep) in &peers {
                // A bare ID=HOST:PORT names the first listener.
                let here = match name {
                    Some(n) => *n == spec.name,
                    None => li == 0,
                };
                if let Some(n) = nodes.get_mut(li).filter(|_| here) {
                    n.0.insert(*id, (ep.host.clone(), i32::from(ep.port)));
                }
            }
            if let Some(n) = nodes.get_mut(li) {
                n.0.entry(me).or_insert((own.host.clone(), i32::from(own.port)));
            }
            listeners.push((l, ListenerInfo { node_id: me, index }, sec.clone()));
        }
        let ids: std::collections::BTreeSet<i32> = peers.iter().map(|(id, _, _)| *id).collect();
        for (spec, n) in specs.iter().zip(&nodes) {
            if let Some(missing) = ids.iter().find(|id| !n.0.contains_key(id)) {
                return Err(StartError::Sidecar(format!(
                    "sidecar.peers gives no address of node {missing} on listener {} (add {missing}={}://HOST:PORT)",
                    spec.name, spec.name
                )));
            }
        }
    }
    let advertised_host = config.advertised().host;
    let owners = GroupOwners::new(
        nodes
            .first()
            .into_iter()
            .flat_map(|n| n.0.iter())
            .map(|(id, (host, port))| BrokerMetadata { node_id: *id, host: host.clone(), port: *port })
            .collect(),
        config.offsets.partitions,
    );
    let me = config.server.node_id;
    let all_local = peers.is_empty();
    let owns = |shard: u32| all_local || owners.owner_of_shard(shard).is_some_and(|n| n.node_id == me);

    let catalog = Arc::new(Catalog::in_memory(&[]));
    let topics: Vec<_> = view.topics.iter().map(|t| (t.name.clone(), t.id, t.partitions)).collect();
    catalog.mirror(&topics, true);
    let mirror = Arc::new(Mirror::new(upstream.clone(), catalog.clone(), MirrorSettings::from_config(&sc)));
    let (fatal_tx, fatal) = mpsc::unbounded_channel();
    let hooks: Arc<dyn GroupHooks> = mirror.clone();
    let coordinator =
        Coordinator::start(&config, catalog.clone(), options.repair, fatal_tx, &owns, Some(hooks), journal);
    let first = listeners.first().map(|(_, info, _)| info.node_id).unwrap_or(me);
    let (host, port) = nodes.first().and_then(|n| n.0.get(&first)).cloned().unwrap_or((advertised_host, 0));
    let node = NodeInfo { node_id: first, host, port, cluster_id: view.cluster_id.clone().unwrap_or(own_cluster_id) };
    let mut sidecar = Sidecar::new(upstream, mirror.clone(), nodes, catalog.clone(), &sc);
    if let Some(f) = fronting {
        sidecar = sidecar.with_fronting(f);
    }
    let sidecar = Arc::new(sidecar);
    let config = Arc::new(config);
    let services = Arc::new(Services {
        cluster: Cluster::with_owners(node.clone(), false, 1, owners),
        topic_creator: Arc::new(NoTopicCreation),
        catalog,
        coordinator,
        data_plane: None,
        sidecar: Some(sidecar.clone()),
        request_budget: Services::request_budget(&config),
        listener_endpoints: Vec::new(),
        authorizer: authorizer(&config)?,
        quotas: crate::quota::Quotas::from_config(&config.quotas).map(Arc::new),
        credentials: security.credentials.clone(),
        delegation_tokens: None,
        config,
    });
    tracing::info!(upstream = ?sc.upstream, fronted = ?listeners.iter().map(|(_, i, _)| i.node_id).collect::<Vec<_>>(),
        "sidecar mode: serving groups, forwarding the rest upstream");
    let writer_services: Arc<dyn AsCoordinator> = services.clone();
    let refresh_services: Arc<dyn AsCoordinator> = services.clone();
    let log_end_reader = sidecar.clone();
    let follower = sidecar.clone();
    let listener_services = services.clone();
    let background: Vec<BackgroundTask> = vec![
        Box::new(move |cx| Box::pin(log_end_reader.run_log_end_refresh(cx.shutdown))),
        Box::new(move |cx| Box::pin(sidecar.run_metadata_refresh(refresh_services, cx.shutdown))),
        Box::new(move |cx| Box::pin(mirror.run_write_through(writer_services, cx.shutdown))),
        Box::new(move |cx| {
            let rx = cx.shutdown.clone();
            let serve = move |b: Bound| {
                let task = listener::run(
                    b.listener,
                    b.info,
                    b.security,
                    listener_services.clone(),
                    rx.clone(),
                    cx.limits.clone(),
                );
                tokio::spawn(task)
            };
            Box::pin(follower.run_broker_follower(serve, cx.shutdown))
        }),
    ];
    // A client connection holds its own socket and its link upstream; the
    // splice pipes are shared.
    let max_connections =
        descriptors.max_connections(services.config.server.max_connections, 2, crate::sidecar::PIPE_DESCRIPTORS);
    launch(services, listeners, node, lock, fatal, background, security, max_connections).await
}

/// Waits for the upstream's first Metadata, retrying with back-off up to
/// `sidecar.startup_timeout_ms`: its brokers decide the listeners.
async fn first_metadata(upstream: &Upstream, sc: &SidecarConfig) -> Result<ClusterView, StartError> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(sc.startup_timeout_ms);
    let mut backoff = Duration::from_millis(sc.retry_backoff_ms);
    loop {
        match upstream.refresh().await {
            Ok(view) => return Ok(view),
            // Retrying a refused login does not make it succeed.
            Err(
                e @ crate::sidecar::upstream::UpstreamError::Client {
                    source: crate::protocol::client::ClientError::Authentication(_),
                    ..
                },
            ) => {
                return Err(StartError::Sidecar(format!(
                    "the upstream refused kcoord's login (check sidecar.upstream_security): {e}"
                )))
            }
            Err(e) if tokio::time::Instant::now() + backoff >= deadline => {
                return Err(StartError::Sidecar(format!(
                    "the upstream cluster did not answer within sidecar.startup_timeout_ms: {e}"
                )))
            }
            Err(e) => {
                tracing::warn!(error = %e, "waiting for the upstream cluster");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(sc.retry_backoff_max_ms));
            }
        }
    }
}

impl RunningDaemon {
    /// The address the (first) listener is bound to.
    #[allow(clippy::indexing_slicing, reason = "start-up fails unless at least one listener is bound")]
    pub fn local_addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    /// Every listener's address (sidecar mode fronting a whole cluster has
    /// one per upstream broker, in broker id order).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Where the metrics/JSON HTTP listener is bound, if enabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The identity advertised to clients.
    pub fn node(&self) -> &NodeInfo {
        &self.node
    }

    /// The TLS certificate and credentials in use; `reload` reads their
    /// files again (what SIGHUP does).
    pub fn security(&self) -> &Arc<SecurityRuntime> {
        &self.security
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
        if let Some(d) = &self.services.data_plane {
            d.begin_shutdown();
        }
        let deadline = tokio::time::Instant::now() + self.shutdown_timeout;
        for mut listener in self.listeners {
            if tokio::time::timeout_at(deadline, &mut listener).await.is_err() {
                tracing::warn!("connections did not finish within server.shutdown_timeout_ms; closing them");
                listener.abort();
            }
        }
        // Sidecar write-through makes its last (bounded) attempt.
        for mut task in self.background {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
            }
        }
        if let Some(d) = &self.services.data_plane {
            d.close().await;
        }
        tracing::info!("kcoord stopped");
    }
}
