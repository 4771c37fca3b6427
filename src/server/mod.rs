//! The network side: listener, connections, framing and dispatch. Knows
//! sockets and frames, nothing about groups.

pub mod acl_admin;
pub mod apis;
pub mod authorize;
pub mod connection;
pub mod dispatch;
pub mod frame;
mod in_order;
pub mod limits;
pub mod listener;
pub mod observe;
pub mod throttle;
pub mod token_admin;
pub mod user_admin;

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::catalog::TopicCreator;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::coordinator::Coordinator;
use crate::topics::DataPlane;

/// Everything a request handler may use, shared by all connections.
pub struct Services {
    pub config: Arc<Config>,
    pub cluster: Cluster,
    pub catalog: Arc<Catalog>,
    pub topic_creator: Arc<dyn TopicCreator>,
    pub coordinator: Coordinator,
    /// Standalone mode's topics: Produce, Fetch, ListOffsets, topic admin.
    /// `None` in sidecar mode, where the upstream serves them.
    pub data_plane: Option<Arc<DataPlane>>,
    /// Sidecar mode: the upstream cluster and how requests reach it.
    pub sidecar: Option<Arc<crate::sidecar::Sidecar>>,
    /// The daemon's budget of request bytes in flight
    /// (`server.max_inflight_request_bytes`): a request holds permits for
    /// its frame's length until it is answered.
    pub request_budget: Arc<tokio::sync::Semaphore>,
    /// Standalone mode: the address each listener advertises, by
    /// [`ListenerInfo::index`] (Kafka answers Metadata and FindCoordinator
    /// with the addresses of the listener the request came in on). Empty in
    /// sidecar mode, which advertises the fronted brokers' addresses.
    pub listener_endpoints: Vec<crate::config::Endpoint>,
    /// ACLs (`[authorizer]`); disabled, it allows everything. The same in
    /// standalone and sidecar mode.
    pub authorizer: Arc<crate::security::acl::Authorizer>,
    /// Client quotas (`[quotas]`); `None` when none is configured.
    pub quotas: Option<Arc<crate::quota::Quotas>>,
    /// The SASL listeners' credentials, put in force at once when
    /// AlterUserScramCredentials changes the file; `None` without a SASL
    /// listener.
    pub credentials: Option<Arc<crate::security::credentials::CredentialStore>>,
    /// The delegation tokens (standalone, with a secret key).
    pub delegation_tokens: Option<Arc<crate::security::delegation_tokens::DelegationTokens>>,
}

impl Services {
    /// A fresh budget of `server.max_inflight_request_bytes` permits.
    pub fn request_budget(config: &Config) -> Arc<tokio::sync::Semaphore> {
        let bytes = usize::try_from(config.server.max_inflight_request_bytes).unwrap_or(usize::MAX);
        Arc::new(tokio::sync::Semaphore::new(bytes.min(tokio::sync::Semaphore::MAX_PERMITS)))
    }
}

impl Services {
    /// The address this node advertises on `listener`, when it differs by
    /// listener (standalone mode).
    pub fn own_endpoint(&self, listener: ListenerInfo) -> Option<&crate::config::Endpoint> {
        self.listener_endpoints.get(usize::from(listener.index))
    }

    /// Where clients of `listener` reach node `node_id`, when that depends
    /// on the listener: this node's listener address (standalone), or the
    /// sidecar fronting that broker on the same listener (sidecar mode).
    pub fn advertised_node(&self, listener: ListenerInfo, node_id: i32) -> Option<(String, i32)> {
        if let Some(sidecar) = &self.sidecar {
            return sidecar.endpoint(listener, node_id);
        }
        let ep = self.own_endpoint(listener).filter(|_| node_id == self.cluster.node.node_id)?;
        Some((ep.host.clone(), i32::from(ep.port)))
    }
}

impl crate::sidecar::mirror::AsCoordinator for Services {
    fn coordinator(&self) -> &Coordinator {
        &self.coordinator
    }
}

/// Which listener a connection came in on: the broker id it answers for
/// (this node's id; in sidecar mode, the upstream broker it fronts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerInfo {
    pub node_id: i32,
    /// Index into [`Services::listener_endpoints`]: what Metadata and
    /// FindCoordinator advertise to clients of this listener.
    pub index: u16,
}
