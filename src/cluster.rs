//! This node's view of the cluster: identity, Metadata and FindCoordinator.
//!
//! kcoord is a one-node cluster: it is the controller, the coordinator of
//! every group and the leader of every topic in its catalog. Clients rely on
//! all three being the same listed broker (librdkafka ≥ 2.10 drops brokers
//! missing from Metadata, kafkajs looks the coordinator up by node id, and
//! kafkajs sends InitProducerId to the controller).

use std::collections::HashSet;
use std::path::Path;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::catalog::{Catalog, TopicCreator, TopicInfo};
use crate::error_code::ErrorCode;
use crate::security::acl::ResourceType;
use crate::storage::fsutil;

/// Who this node is, as advertised to clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub cluster_id: String,
}

#[derive(Serialize, Deserialize)]
struct ClusterFile {
    cluster_id: String,
}

/// Reads the cluster id from the data dir, generating and persisting it on
/// first start. The format is Kafka's: a random UUID in URL-safe base64
/// without padding (22 characters).
pub fn load_or_create_cluster_id(data_dir: &Path) -> std::io::Result<String> {
    load_or_create_cluster_id_on(&crate::storage::disk::OsFs, data_dir)
}

/// [`load_or_create_cluster_id`] on any file system.
pub fn load_or_create_cluster_id_on(
    fs: &dyn crate::storage::disk::FileSystem,
    data_dir: &Path,
) -> std::io::Result<String> {
    let path = data_dir.join("cluster.json");
    match fs.read(&path) {
        Ok(bytes) => {
            let f: ClusterFile = serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
            })?;
            Ok(f.cluster_id)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = crate::protocol::uuid_string::base64_url(Uuid::new_v4().as_bytes());
            let bytes =
                serde_json::to_vec_pretty(&ClusterFile { cluster_id: id.clone() }).map_err(std::io::Error::other)?;
            fsutil::write_atomically_on(fs, &path, &bytes)?;
            Ok(id)
        }
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------
// Metadata

/// Which topics a Metadata request asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicSelector {
    /// Every topic.
    All,
    /// Only these (possibly none: librdkafka's "brokers only" request).
    Only(Vec<TopicRef>),
}

/// A topic named in a Metadata request, by name or (v10+) by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRef {
    pub name: Option<String>,
    pub id: Uuid,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataRequest {
    pub topics: TopicSelector,
    pub allow_auto_topic_creation: bool,
    pub include_cluster_authorized_operations: bool,
    pub include_topic_authorized_operations: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerMetadata {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    pub error: ErrorCode,
    pub index: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    pub error: ErrorCode,
    pub name: Option<String>,
    pub id: Uuid,
    pub is_internal: bool,
    pub partitions: Vec<PartitionMetadata>,
    /// Bit field of allowed ACL operations, when requested.
    pub authorized_operations: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResponse {
    pub brokers: Vec<BrokerMetadata>,
    pub cluster_id: String,
    pub controller_id: i32,
    pub topics: Vec<TopicMetadata>,
    pub cluster_authorized_operations: Option<i32>,
}

/// Which kcoord node coordinates which group: the static rule every node
/// of a sidecar deployment applies alike. Group ids map to shards with
/// Kafka's `partitionFor`; shard `s` belongs to the `s % n`-th of the `n`
/// nodes sorted by node id. A standalone daemon is the one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOwners {
    /// Sorted by node id.
    nodes: Vec<BrokerMetadata>,
    shards: u32,
}

impl GroupOwners {
    pub fn new(mut nodes: Vec<BrokerMetadata>, shards: u32) -> Self {
        nodes.sort_by_key(|n| n.node_id);
        nodes.dedup_by_key(|n| n.node_id);
        GroupOwners { nodes, shards: shards.max(1) }
    }

    /// The node that owns shard `shard` (none when no node is known).
    pub fn owner_of_shard(&self, shard: u32) -> Option<&BrokerMetadata> {
        self.nodes.get(shard as usize % self.nodes.len().max(1))
    }

    /// The node that coordinates `group_id`.
    pub fn owner_of_group(&self, group_id: &str) -> Option<&BrokerMetadata> {
        self.owner_of_shard(crate::coordinator::routing::partition_for(group_id, self.shards))
    }

    pub fn nodes(&self) -> &[BrokerMetadata] {
        &self.nodes
    }
}

/// Answers Metadata and FindCoordinator from the node identity and catalog.
#[derive(Debug)]
pub struct Cluster {
    pub node: NodeInfo,
    auto_create: bool,
    default_partitions: i32,
    /// Topics one Metadata request may auto-create (`topics.max_auto_create_per_request`).
    max_auto_create: u32,
    owners: GroupOwners,
}

/// The default of `topics.max_auto_create_per_request`.
pub const DEFAULT_MAX_AUTO_CREATE: u32 = 100;

/// What is left of one Metadata request's auto-creations.
struct CreationBudget {
    left: u32,
    deferred: u64,
}

impl Cluster {
    /// A standalone node: the coordinator of every group.
    pub fn new(node: NodeInfo, auto_create: bool, default_partitions: i32) -> Self {
        let me = BrokerMetadata { node_id: node.node_id, host: node.host.clone(), port: node.port };
        Self::with_owners(node, auto_create, default_partitions, GroupOwners::new(vec![me], 1))
    }

    /// A node among others that share the groups by `owners`.
    pub fn with_owners(node: NodeInfo, auto_create: bool, default_partitions: i32, owners: GroupOwners) -> Self {
        Cluster { node, auto_create, default_partitions, max_auto_create: DEFAULT_MAX_AUTO_CREATE, owners }
    }

    /// Bounds the topics one Metadata request may auto-create: the work
    /// (directories, files, fsyncs) of one small request must stay small.
    /// Topics past it get LEADER_NOT_AVAILABLE, Kafka's answer for a topic
    /// whose creation has not completed: clients retry Metadata, and each
    /// retry creates the next ones.
    pub fn with_max_auto_create(mut self, max: u32) -> Self {
        self.max_auto_create = max;
        self
    }

    pub fn owners(&self) -> &GroupOwners {
        &self.owners
    }

    fn broker(&self) -> BrokerMetadata {
        BrokerMetadata { node_id: self.node.node_id, host: self.node.host.clone(), port: self.node.port }
    }

    fn topic_metadata(&self, t: &TopicInfo, include_ops: bool) -> TopicMetadata {
        let me = self.node.node_id;
        TopicMetadata {
            error: ErrorCode::NONE,
            name: Some(t.name.clone()),
            id: t.id,
            is_internal: false,
            partitions: (0..t.partitions)
                .map(|p| PartitionMetadata {
                    error: ErrorCode::NONE,
                    index: p,
                    leader: me,
                    leader_epoch: 0,
                    replicas: vec![me],
                    isr: vec![me],
                })
                .collect(),
            authorized_operations: include_ops.then_some(ResourceType::Topic.all_operations()),
        }
    }

    fn error_topic(error: ErrorCode, name: Option<String>, id: Uuid) -> TopicMetadata {
        TopicMetadata { error, name, id, is_internal: false, partitions: vec![], authorized_operations: None }
    }

    /// Answers a Metadata request, auto-creating topics when allowed.
    pub fn metadata(&self, req: &MetadataRequest, catalog: &Catalog, creator: &dyn TopicCreator) -> MetadataResponse {
        let ops = req.include_topic_authorized_operations;
        let topics = match &req.topics {
            TopicSelector::All => catalog.list().iter().map(|t| self.topic_metadata(t, ops)).collect(),
            TopicSelector::Only(refs) => {
                // Kafka answers each distinct topic once (KafkaApis turns the
                // requested topics into a set); kcoord keeps first mentions
                // in request order.
                let mut seen: HashSet<(Option<&str>, Uuid)> = HashSet::with_capacity(refs.len().min(1024));
                let mut out = Vec::new();
                let mut creations = CreationBudget { left: self.max_auto_create, deferred: 0 };
                for r in refs {
                    if seen.insert((r.name.as_deref(), r.id)) {
                        let allow = req.allow_auto_topic_creation.then_some(&mut creations);
                        out.push(self.lookup_topic(r, allow, ops, catalog, creator));
                    }
                }
                if creations.deferred > 0 {
                    metrics::counter!("kcoord_topic_creations_deferred_total").increment(creations.deferred);
                    tracing::warn!(
                        deferred = creations.deferred,
                        max_auto_create_per_request = self.max_auto_create,
                        "a Metadata request named more unknown topics than topics.max_auto_create_per_request; \
                         the others were answered LEADER_NOT_AVAILABLE and are created when the client asks again"
                    );
                }
                out
            }
        };
        MetadataResponse {
            brokers: vec![self.broker()],
            cluster_id: self.node.cluster_id.clone(),
            controller_id: self.node.node_id,
            topics,
            cluster_authorized_operations: req
                .include_cluster_authorized_operations
                .then_some(ResourceType::Cluster.all_operations()),
        }
    }

    /// `creations` is None when the request does not allow auto-creation.
    fn lookup_topic(
        &self,
        r: &TopicRef,
        creations: Option<&mut CreationBudget>,
        ops: bool,
        catalog: &Catalog,
        creator: &dyn TopicCreator,
    ) -> TopicMetadata {
        match &r.name {
            None => match catalog.get_by_id(&r.id) {
                Some(t) => self.topic_metadata(&t, ops),
                None => Self::error_topic(ErrorCode::UNKNOWN_TOPIC_ID, None, r.id),
            },
            Some(name) => {
                if let Some(t) = catalog.get(name) {
                    return self.topic_metadata(&t, ops);
                }
                if crate::config::validate_topic_name(name).is_err() {
                    return Self::error_topic(ErrorCode::INVALID_TOPIC_EXCEPTION, Some(name.clone()), Uuid::nil());
                }
                if let Some(budget) = creations.filter(|_| self.auto_create) {
                    if budget.left == 0 {
                        budget.deferred += 1;
                        return Self::error_topic(ErrorCode::LEADER_NOT_AVAILABLE, Some(name.clone()), Uuid::nil());
                    }
                    budget.left -= 1;
                    match creator.create_topic(name, self.default_partitions) {
                        Ok(t) => return self.topic_metadata(&t, ops),
                        // Raced with another creator: answer with what exists.
                        Err(e) if e.code == ErrorCode::TOPIC_ALREADY_EXISTS => {
                            if let Some(t) = catalog.get(name) {
                                return self.topic_metadata(&t, ops);
                            }
                        }
                        Err(e) => return Self::error_topic(e.code, Some(name.clone()), Uuid::nil()),
                    }
                }
                Self::error_topic(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, Some(name.clone()), Uuid::nil())
            }
        }
    }

    /// Answers FindCoordinator for each key. `share_allowed` is false below
    /// v6, where Kafka rejects the SHARE key type as an invalid request.
    pub fn find_coordinator(&self, key_type: i8, keys: &[String], share_allowed: bool) -> Vec<CoordinatorAnswer> {
        self.coordinator_answers(key_type, keys, share_allowed).collect()
    }

    /// [`Cluster::find_coordinator`], one answer at a time: a batch of a
    /// million keys is encoded as it is answered, never held as answers.
    pub fn coordinator_answers<'a>(
        &'a self,
        key_type: i8,
        keys: &'a [String],
        share_allowed: bool,
    ) -> impl ExactSizeIterator<Item = CoordinatorAnswer> + 'a {
        keys.iter().map(move |key| match key_type {
            KEY_TYPE_GROUP => match self.owners.owner_of_group(key) {
                None => CoordinatorAnswer::error(key, ErrorCode::COORDINATOR_NOT_AVAILABLE, "no node is known"),
                Some(owner) => CoordinatorAnswer {
                    key: key.clone(),
                    node_id: owner.node_id,
                    host: owner.host.clone(),
                    port: owner.port,
                    error: ErrorCode::NONE,
                    // Kafka sends `Errors.NONE.message()`, which is "NONE".
                    error_message: Some("NONE".into()),
                },
            },
            KEY_TYPE_TRANSACTION => CoordinatorAnswer::error(key, ErrorCode::UNSUPPORTED_VERSION, NO_TRANSACTIONS),
            KEY_TYPE_SHARE if !share_allowed => CoordinatorAnswer::error(
                key,
                ErrorCode::INVALID_REQUEST,
                "Requesting SHARE coordinator is not supported for version < 6",
            ),
            KEY_TYPE_SHARE => {
                CoordinatorAnswer::error(key, ErrorCode::INVALID_REQUEST, "kcoord does not coordinate share groups")
            }
            other => CoordinatorAnswer::error(
                key,
                ErrorCode::INVALID_REQUEST,
                &format!("Unknown coordinator type {other} in FindCoordinator request"),
            ),
        })
    }
}

/// Why a standalone kcoord refuses transaction coordinator lookups. The
/// error is not retriable (UNSUPPORTED_VERSION, as Redpanda answers with
/// transactions off): a transactional producer fails at once with this text
/// instead of retrying COORDINATOR_NOT_AVAILABLE until its `max.block.ms`
/// or `transaction.timeout.ms` and then blaming coordinator discovery.
pub const NO_TRANSACTIONS: &str =
    "kcoord does not coordinate transactions: run it as a sidecar (kcoord sidecar) in front of brokers that do";

pub const KEY_TYPE_GROUP: i8 = 0;
pub const KEY_TYPE_TRANSACTION: i8 = 1;
pub const KEY_TYPE_SHARE: i8 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCoordinatorRequest {
    pub key_type: i8,
    pub keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorAnswer {
    pub key: String,
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub error: ErrorCode,
    pub error_message: Option<String>,
}

impl CoordinatorAnswer {
    /// Kafka's error layout: no node (-1, "", -1).
    pub fn error(key: &str, error: ErrorCode, message: &str) -> Self {
        CoordinatorAnswer {
            key: key.to_string(),
            node_id: -1,
            host: String::new(),
            port: -1,
            error,
            error_message: Some(message.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoCreate;
    impl TopicCreator for NoCreate {
        fn create_topic(&self, _: &str, _: i32) -> Result<TopicInfo, crate::catalog::CatalogError> {
            Err(crate::catalog::CatalogError { code: ErrorCode::INVALID_REQUEST, message: String::new() })
        }
    }

    fn cluster() -> Cluster {
        Cluster::new(NodeInfo { node_id: 3, host: "127.0.0.1".into(), port: 9092, cluster_id: "c".into() }, false, 1)
    }

    #[test]
    fn cluster_id_is_generated_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create_cluster_id(dir.path()).unwrap();
        let b = load_or_create_cluster_id(dir.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 22);
    }

    #[test]
    fn metadata_lists_this_node_as_leader_and_controller() {
        let catalog = Catalog::in_memory(&[("t", 2)]);
        let r = cluster().metadata(
            &MetadataRequest {
                topics: TopicSelector::All,
                allow_auto_topic_creation: false,
                include_cluster_authorized_operations: false,
                include_topic_authorized_operations: false,
            },
            &catalog,
            &NoCreate,
        );
        assert_eq!(r.controller_id, 3);
        assert_eq!(r.brokers, vec![BrokerMetadata { node_id: 3, host: "127.0.0.1".into(), port: 9092 }]);
        assert_eq!(r.topics.len(), 1);
        let t = &r.topics[0];
        assert_eq!(t.partitions.len(), 2);
        assert!(t.partitions.iter().all(|p| p.leader == 3 && p.replicas == vec![3] && p.isr == vec![3]));
    }

    #[test]
    fn unknown_topics_get_unknown_topic_or_partition() {
        let catalog = Catalog::in_memory(&[]);
        let r = cluster().metadata(
            &MetadataRequest {
                topics: TopicSelector::Only(vec![
                    TopicRef { name: Some("nope".into()), id: Uuid::nil() },
                    TopicRef { name: None, id: Uuid::new_v4() },
                ]),
                allow_auto_topic_creation: true,
                include_cluster_authorized_operations: false,
                include_topic_authorized_operations: false,
            },
            &catalog,
            &NoCreate,
        );
        assert_eq!(r.topics[0].error, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        assert_eq!(r.topics[1].error, ErrorCode::UNKNOWN_TOPIC_ID);
    }

    #[test]
    fn a_topic_named_many_times_is_answered_once() {
        let catalog = Catalog::in_memory(&[("t", 1)]);
        let id = Uuid::new_v4();
        let mut refs = vec![TopicRef { name: Some("t".into()), id: Uuid::nil() }; 100_000];
        refs.push(TopicRef { name: Some("nope".into()), id: Uuid::nil() });
        refs.push(TopicRef { name: None, id });
        refs.push(TopicRef { name: Some("t".into()), id: Uuid::nil() });
        refs.push(TopicRef { name: None, id });
        let r = cluster().metadata(
            &MetadataRequest {
                topics: TopicSelector::Only(refs),
                allow_auto_topic_creation: false,
                include_cluster_authorized_operations: false,
                include_topic_authorized_operations: false,
            },
            &catalog,
            &NoCreate,
        );
        let names: Vec<_> = r.topics.iter().map(|t| (t.name.clone(), t.error)).collect();
        assert_eq!(
            names,
            [
                (Some("t".to_string()), ErrorCode::NONE),
                (Some("nope".to_string()), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
                (None, ErrorCode::UNKNOWN_TOPIC_ID),
            ]
        );
    }

    #[test]
    fn find_coordinator_answers_groups_with_this_node() {
        let a = cluster().find_coordinator(KEY_TYPE_GROUP, &["g".into()], false);
        assert_eq!(a[0].node_id, 3);
        assert_eq!(a[0].error, ErrorCode::NONE);
        let a = cluster().find_coordinator(KEY_TYPE_SHARE, &["g".into()], false);
        assert_eq!((a[0].error, a[0].node_id, a[0].port), (ErrorCode::INVALID_REQUEST, -1, -1));
        let a = cluster().find_coordinator(KEY_TYPE_TRANSACTION, &["t".into()], true);
        assert_eq!(a[0].error, ErrorCode::UNSUPPORTED_VERSION);
    }
}
