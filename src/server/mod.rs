//! The network side: listener, connections, framing and dispatch. Knows
//! sockets and frames, nothing about groups.

pub mod connection;
pub mod dispatch;
pub mod frame;
pub mod listener;
pub mod observe;

use std::sync::Arc;

use crate::cluster::{Cluster, TopicCreator};
use crate::config::Config;
use crate::coordinator::Coordinator;
use crate::topics::{Catalog, DataPlane};

/// Everything a request handler may use, shared by all connections.
pub struct Services {
    pub config: Arc<Config>,
    pub cluster: Cluster,
    pub catalog: Arc<Catalog>,
    pub topic_creator: Arc<dyn TopicCreator>,
    pub coordinator: Coordinator,
    /// Standalone mode's topics: Produce, Fetch, ListOffsets, topic admin.
    pub data_plane: Arc<DataPlane>,
}
