//! The authorization layer: what each API checks before (and filters after)
//! the service that owns it, with Kafka's error codes, as `KafkaApis` does.
//! Dispatch builds one [`Guard`] per request (the connection's principal
//! and address) and asks it; the services know nothing of ACLs.
//!
//! With the authorizer disabled every check passes, and "authorized
//! operations" report every operation of the resource type, as Kafka does
//! without an authorizer.

use std::collections::HashMap;
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::cluster::{MetadataRequest, MetadataResponse, TopicMetadata, TopicSelector};
use crate::coordinator::consumer::describable::{Describable, TopicVisibility};
use crate::coordinator::consumer::messages::{ConsumerHeartbeatRequest, DescribedConsumerGroup};
use crate::coordinator::messages as m;
use crate::error_code::ErrorCode;
use crate::security::acl::{Authorizer, Operation, ResourceType, CLUSTER_NAME};

use super::dispatch::RequestContext;

/// One request's view of the authorizer: who asks, from where.
pub struct Guard<'a> {
    authorizer: &'a Arc<Authorizer>,
    principal: &'a str,
    host: &'a str,
}

/// Kafka's `Errors.message()` of the authorization errors, which some
/// error responses carry.
pub fn default_message(error: ErrorCode) -> &'static str {
    match error {
        ErrorCode::GROUP_AUTHORIZATION_FAILED => "Group authorization failed.",
        ErrorCode::TOPIC_AUTHORIZATION_FAILED => "Topic authorization failed.",
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED => "Cluster authorization failed.",
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => "Transactional Id authorization failed.",
        _ => "",
    }
}

impl<'a> Guard<'a> {
    pub fn new(authorizer: &'a Arc<Authorizer>, ctx: &'a RequestContext) -> Guard<'a> {
        Guard { authorizer, principal: &ctx.caller.principal, host: &ctx.caller.host }
    }

    /// Whether the action is allowed; a denial is counted (Kafka logs it,
    /// `logIfDenied`).
    pub fn allows(&self, op: Operation, rt: ResourceType, name: &str) -> bool {
        let allowed = self.quietly_allows(op, rt, name);
        if !allowed {
            metrics::counter!("kcoord_authorization_denials_total", "resource_type" => rt.kafka_name(), "operation" => op.kafka_name())
                .increment(1);
            tracing::debug!(principal = self.principal, host = %self.host, operation = %op, resource = %format!("{rt}:{name}"), "denied");
        }
        allowed
    }

    /// Whether the action is allowed, for filtering a listing (not counted,
    /// Kafka's `logIfDenied = false`).
    pub fn quietly_allows(&self, op: Operation, rt: ResourceType, name: &str) -> bool {
        self.authorizer.authorize(self.principal, self.host, op, rt, name)
    }

    /// `Err(GROUP_AUTHORIZATION_FAILED)` unless `op` on the group is allowed.
    pub fn group(&self, op: Operation, group: &str) -> Result<(), ErrorCode> {
        match self.allows(op, ResourceType::Group, group) {
            true => Ok(()),
            false => Err(ErrorCode::GROUP_AUTHORIZATION_FAILED),
        }
    }

    pub fn topic(&self, op: Operation, topic: &str) -> bool {
        self.allows(op, ResourceType::Topic, topic)
    }

    pub fn cluster(&self, op: Operation, quietly: bool) -> bool {
        match quietly {
            true => self.quietly_allows(op, ResourceType::Cluster, CLUSTER_NAME),
            false => self.allows(op, ResourceType::Cluster, CLUSTER_NAME),
        }
    }

    /// The authorized-operations bit field of a resource.
    pub fn operations(&self, rt: ResourceType, name: &str) -> i32 {
        self.authorizer.authorized_operations(self.principal, self.host, rt, name)
    }

    /// Splits `items` by whether `op` on their topic is allowed (each
    /// distinct topic is checked once).
    fn split_topics<T>(&self, op: Operation, items: Vec<T>, name: impl Fn(&T) -> &str) -> (Vec<T>, Vec<T>) {
        if !self.authorizer.is_enabled() {
            // Everything is allowed: keep the request's vector as it is.
            return (items, Vec::new());
        }
        let mut verdicts: HashMap<String, bool> = HashMap::new();
        items.into_iter().partition(|t| {
            let n = name(t);
            match verdicts.get(n) {
                Some(&v) => v,
                None => {
                    let v = self.topic(op, n);
                    verdicts.insert(n.to_string(), v);
                    v
                }
            }
        })
    }

    // ---- group APIs -------------------------------------------------------

    /// OffsetCommit: READ on the group; `Err` is the whole answer. Each
    /// topic's READ is checked by the screen (`server::apis::screen`).
    pub fn offset_commit(&self, req: &m::OffsetCommitRequest) -> Result<(), m::OffsetCommitResponse> {
        self.group(Operation::Read, &req.group_id)
            .map_err(|e| crate::coordinator::offsets::commit_error_response(req, e))
    }

    /// TxnOffsetCommit (sidecar mode): WRITE on the transactional id, then
    /// what an OffsetCommit needs, as Kafka's KafkaApis checks it.
    pub fn txn_offset_commit(
        &self,
        transactional_id: &str,
        req: &m::OffsetCommitRequest,
    ) -> Result<(), m::OffsetCommitResponse> {
        if !self.allows(Operation::Write, ResourceType::TransactionalId, transactional_id) {
            let error = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            return Err(crate::coordinator::offsets::commit_error_response(req, error));
        }
        self.offset_commit(req)
    }

    /// OffsetDelete: DELETE on the group; `Err` is the whole answer. Each
    /// topic's READ is checked by the screen (`server::apis::screen`).
    pub fn offset_delete(&self, req: &m::OffsetDeleteRequest) -> Result<(), m::OffsetDeleteResponse> {
        self.group(Operation::Delete, &req.group_id).map_err(|error| m::OffsetDeleteResponse { error, topics: vec![] })
    }

    /// OffsetFetch, before the coordinator: DESCRIBE on each group (a
    /// denied group is answered GROUP_AUTHORIZATION_FAILED), DESCRIBE on
    /// each listed topic (a denied topic is answered
    /// TOPIC_AUTHORIZATION_FAILED per partition). Kafka's v8+ multi-group
    /// shape: every group is answered, in request order.
    pub fn offset_fetch(&self, req: &mut m::OffsetFetchRequest) -> OffsetFetchPlan {
        let mut slots = Vec::with_capacity(req.groups.len());
        let mut served = Vec::with_capacity(req.groups.len());
        for mut g in std::mem::take(&mut req.groups) {
            if let Err(error) = self.group(Operation::Describe, &g.group_id) {
                // kcoord's layout of a group error: the requested partitions
                // listed, so that v1 (no group-level error) carries it.
                let request = crate::coordinator::core::FetchOffsets { group: g, require_stable: req.require_stable };
                slots.push(FetchSlot::Denied(request.error_result(error)));
                continue;
            }
            let denied = match g.topics.take() {
                None => None,
                Some(topics) => {
                    let (allowed, denied) = self.split_topics(Operation::Describe, topics, |t| &t.name);
                    g.topics = Some(allowed);
                    Some(denied)
                }
            };
            slots.push(FetchSlot::Served(denied));
            served.push(g);
        }
        req.groups = served;
        OffsetFetchPlan { slots }
    }

    /// OffsetFetch, after the coordinator: the answers put back in request
    /// order, an all-topics answer stripped of the topics the principal may
    /// not describe, a listed answer completed with the denied topics.
    pub fn offset_fetch_answer(&self, plan: OffsetFetchPlan, resp: m::OffsetFetchResponse) -> m::OffsetFetchResponse {
        let mut answers = resp.groups.into_iter();
        let mut groups = Vec::with_capacity(plan.slots.len());
        for slot in plan.slots {
            match slot {
                FetchSlot::Denied(g) => groups.push(g),
                FetchSlot::Served(denied) => {
                    let Some(mut g) = answers.next() else { continue };
                    if g.error == ErrorCode::NONE {
                        match denied {
                            None => g
                                .topics
                                .retain(|t| self.quietly_allows(Operation::Describe, ResourceType::Topic, &t.name)),
                            Some(denied) => g.topics.extend(denied.into_iter().map(|t| {
                                m::FetchedTopic {
                                    partitions: t
                                        .partitions
                                        .iter()
                                        .map(|&p| m::FetchedPartition {
                                            error: ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                                            ..m::FetchedPartition::none(p)
                                        })
                                        .collect(),
                                    name: t.name,
                                }
                            })),
                        }
                    }
                    groups.push(g);
                }
            }
        }
        m::OffsetFetchResponse { groups }
    }

    /// DescribeGroups and ConsumerGroupDescribe: splits the groups by
    /// DESCRIBE; the denied ones are answered first, as Kafka does.
    pub fn describable_groups(&self, groups: Vec<String>) -> (Vec<String>, Vec<String>) {
        groups.into_iter().partition(|g| self.group(Operation::Describe, g).is_ok())
    }

    /// DescribeGroups: the denied groups' answers, then the coordinator's,
    /// with the authorized operations computed from the ACLs when asked.
    pub fn describe_groups_answer(
        &self,
        denied: Vec<String>,
        described: Vec<Arc<m::DescribedGroup>>,
        include_operations: bool,
    ) -> Vec<Arc<m::DescribedGroup>> {
        let mut out: Vec<Arc<m::DescribedGroup>> = denied
            .iter()
            .map(|g| Arc::new(m::DescribedGroup::bare(g, ErrorCode::GROUP_AUTHORIZATION_FAILED, "")))
            .collect();
        if !include_operations || !self.authorizer.is_enabled() {
            out.extend(described);
            return out;
        }
        // A group asked for several times shares one answer: keep it so.
        let mut with_ops: HashMap<*const m::DescribedGroup, Arc<m::DescribedGroup>> = HashMap::new();
        for g in described {
            if g.error != ErrorCode::NONE {
                out.push(g);
                continue;
            }
            let shared = with_ops.entry(Arc::as_ptr(&g)).or_insert_with(|| {
                let mut copy = (*g).clone();
                copy.authorized_operations = Some(self.operations(ResourceType::Group, &g.group_id));
                Arc::new(copy)
            });
            out.push(shared.clone());
        }
        out
    }

    /// ConsumerGroupDescribe: the denied groups' answers, then the
    /// coordinator's.
    pub fn consumer_describe_answer(
        &self,
        denied: Vec<String>,
        described: Vec<DescribedConsumerGroup>,
    ) -> Vec<DescribedConsumerGroup> {
        let mut out: Vec<DescribedConsumerGroup> = denied
            .iter()
            .map(|g| DescribedConsumerGroup::error(g, ErrorCode::GROUP_AUTHORIZATION_FAILED, None))
            .collect();
        out.extend(described);
        out
    }

    /// The authorized operations of a described group (None: not asked, or
    /// the group has an error).
    pub fn group_operations(&self, group: &str, error: ErrorCode, include: bool) -> Option<i32> {
        (include && error == ErrorCode::NONE).then(|| self.operations(ResourceType::Group, group))
    }

    /// ListGroups: every group with DESCRIBE on the cluster, else only the
    /// groups the principal may describe.
    pub fn list_groups_answer(&self, mut resp: m::ListGroupsResponse) -> m::ListGroupsResponse {
        if !self.cluster(Operation::Describe, true) {
            resp.groups.retain(|g| self.quietly_allows(Operation::Describe, ResourceType::Group, &g.group_id));
        }
        resp
    }

    /// DeleteGroups: DELETE on each group; `(allowed, denied answers)`.
    pub fn deletable_groups(&self, groups: Vec<String>) -> (Vec<String>, Vec<(String, ErrorCode)>) {
        let (allowed, denied): (Vec<String>, Vec<String>) =
            groups.into_iter().partition(|g| self.group(Operation::Delete, g).is_ok());
        (allowed, denied.into_iter().map(|g| (g, ErrorCode::GROUP_AUTHORIZATION_FAILED)).collect())
    }

    /// ConsumerGroupHeartbeat: READ on the group, and (Kafka 4.0) DESCRIBE
    /// on every subscribed topic name.
    pub fn consumer_heartbeat(&self, req: &ConsumerHeartbeatRequest) -> Result<(), (ErrorCode, String)> {
        let err = |e: ErrorCode, m: String| Err((e, m));
        if let Err(e) = self.group(Operation::Read, &req.group_id) {
            return err(e, default_message(e).into());
        }
        let denied: Vec<&str> = req
            .subscribed_topic_names
            .iter()
            .flatten()
            .filter(|t| !self.topic(Operation::Describe, t))
            .map(String::as_str)
            .collect();
        match denied.is_empty() {
            true => Ok(()),
            false => err(
                ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                format!("The client is not authorized to describe topics: {}", denied.join(", ")),
            ),
        }
    }

    /// What this requester may DESCRIBE, for the core's resolution of
    /// regular-expression subscriptions (Kafka's
    /// `filterTopicDescribeAuthorizedTopics`): every topic when nothing is
    /// enforced for this principal. Denials are not counted, as Kafka does
    /// not log them there.
    pub fn describable_topics(&self) -> Describable {
        if !self.authorizer.restricts(self.principal) {
            return Describable::all();
        }
        Describable::only(Arc::new(DescribeView {
            authorizer: self.authorizer.clone(),
            principal: self.principal.to_string(),
            host: self.host.to_string(),
        }))
    }

    /// FindCoordinator: DESCRIBE on the group (or the transactional id) of
    /// each key.
    pub fn coordinator_key(&self, key_type: i8, key: &str) -> Result<(), ErrorCode> {
        match key_type {
            crate::cluster::KEY_TYPE_GROUP => self.group(Operation::Describe, key),
            crate::cluster::KEY_TYPE_TRANSACTION => {
                match self.allows(Operation::Describe, ResourceType::TransactionalId, key) {
                    true => Ok(()),
                    false => Err(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                }
            }
            _ => Ok(()),
        }
    }

    // ---- Metadata ---------------------------------------------------------

    /// Metadata, before the cluster answers: topics the principal may not
    /// describe, and unknown topics it may not create when auto-creation
    /// would create them, are taken out of the request; their answers come
    /// back for [`Guard::metadata_answer`].
    pub fn metadata(&self, req: &mut MetadataRequest, catalog: &Catalog, auto_create: bool) -> Vec<TopicMetadata> {
        let TopicSelector::Only(refs) = &mut req.topics else { return Vec::new() };
        if !self.authorizer.is_enabled() {
            return Vec::new();
        }
        let denied_answer = |name: Option<String>, id: uuid::Uuid| TopicMetadata {
            error: ErrorCode::TOPIC_AUTHORIZATION_FAILED,
            name,
            id,
            is_internal: false,
            partitions: vec![],
            authorized_operations: None,
        };
        let mut answers = Vec::new();
        let mut may_create: Option<bool> = None;
        refs.retain(|r| {
            let (name, by_id) = match &r.name {
                Some(n) => (n.clone(), false),
                None => match catalog.get_by_id(&r.id) {
                    Some(t) => (t.name, true),
                    None => return true, // the cluster answers UNKNOWN_TOPIC_ID
                },
            };
            if !self.allows(Operation::Describe, ResourceType::Topic, &name) {
                // Not even whether it exists is told; a topic id is not secret.
                answers.push(match by_id {
                    true => denied_answer(None, r.id),
                    false => denied_answer(Some(name), uuid::Uuid::nil()),
                });
                return false;
            }
            if auto_create && req.allow_auto_topic_creation && catalog.get(&name).is_none() {
                let cluster_create = *may_create.get_or_insert_with(|| self.cluster(Operation::Create, true));
                if !cluster_create && !self.topic(Operation::Create, &name) {
                    answers.push(denied_answer(Some(name), uuid::Uuid::nil()));
                    return false;
                }
            }
            true
        });
        answers
    }

    /// Metadata, after the cluster answered: an all-topics answer without
    /// the topics the principal may not describe, the denied topics' answers
    /// added, and the authorized operations computed from the ACLs.
    pub fn metadata_answer(
        &self,
        req: &MetadataRequest,
        resp: &mut MetadataResponse,
        denied: Vec<TopicMetadata>,
        version: i16,
    ) {
        if !self.authorizer.is_enabled() {
            return;
        }
        if req.topics == TopicSelector::All {
            resp.topics.retain(|t| {
                t.name.as_deref().is_none_or(|n| self.quietly_allows(Operation::Describe, ResourceType::Topic, n))
            });
        }
        if req.include_topic_authorized_operations {
            for t in resp.topics.iter_mut() {
                if let Some(name) = &t.name {
                    t.authorized_operations = Some(self.operations(ResourceType::Topic, name));
                }
            }
        }
        resp.topics.extend(denied);
        if req.include_cluster_authorized_operations && (8..=10).contains(&version) {
            resp.cluster_authorized_operations = Some(match self.cluster(Operation::Describe, false) {
                true => self.operations(ResourceType::Cluster, CLUSTER_NAME),
                false => 0,
            });
        }
    }

    // ---- data plane -------------------------------------------------------

    /// Produce: WRITE on the transactional id (Err: every partition is
    /// answered so), then WRITE on each topic; returns the denied topics'
    /// answers.
    pub fn produce(
        &self,
        req: &mut crate::topics::produce::ProduceRequest,
    ) -> Result<Vec<crate::topics::produce::ProducedTopic>, crate::topics::produce::ProduceResponse> {
        use crate::topics::produce::{ProduceResponse, ProducedPartition, ProducedTopic};
        let answer = |topics: &[crate::topics::produce::ProduceTopic], error: ErrorCode| -> Vec<ProducedTopic> {
            topics
                .iter()
                .map(|t| ProducedTopic {
                    name: t.name.clone(),
                    partitions: t.partitions.iter().map(|p| ProducedPartition::error(p.index, error, None)).collect(),
                })
                .collect()
        };
        if let Some(id) = &req.transactional_id {
            if !self.allows(Operation::Write, ResourceType::TransactionalId, id) {
                return Err(ProduceResponse {
                    topics: answer(&req.topics, ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                });
            }
        }
        let (allowed, denied) = self.split_topics(Operation::Write, std::mem::take(&mut req.topics), |t| &t.name);
        req.topics = allowed;
        let denied = answer(&denied, ErrorCode::TOPIC_AUTHORIZATION_FAILED);
        match req.topics.is_empty() && !denied.is_empty() {
            true => Err(ProduceResponse { topics: denied }),
            false => Ok(denied),
        }
    }

    /// Fetch: READ on each topic (a topic given by id is named from the
    /// catalog; an unknown id is left to the data plane).
    pub fn fetch(
        &self,
        req: &mut crate::topics::fetch::FetchRequest,
        catalog: &Catalog,
    ) -> Vec<crate::topics::fetch::FetchedTopic> {
        use crate::topics::fetch::{FetchedPartition, FetchedTopic};
        if !self.authorizer.is_enabled() {
            return Vec::new();
        }
        let named = |t: &crate::topics::fetch::FetchTopic| match &t.name {
            Some(n) => Some(n.clone()),
            None => catalog.get_by_id(&t.id).map(|i| i.name),
        };
        let mut denied = Vec::new();
        req.topics.retain(|t| {
            let Some(name) = named(t) else { return true };
            if self.topic(Operation::Read, &name) {
                return true;
            }
            denied.push(FetchedTopic {
                name: t.name.clone().unwrap_or_default(),
                id: t.id,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| FetchedPartition::error(p.partition, ErrorCode::TOPIC_AUTHORIZATION_FAILED))
                    .collect(),
            });
            false
        });
        denied
    }

    /// ListOffsets: DESCRIBE on each topic.
    pub fn list_offsets(
        &self,
        req: &mut crate::topics::list_offsets::ListOffsetsRequest,
    ) -> Vec<crate::topics::list_offsets::ListedTopic> {
        use crate::topics::list_offsets::{ListedPartition, ListedTopic};
        let (allowed, denied) = self.split_topics(Operation::Describe, std::mem::take(&mut req.topics), |t| &t.name);
        req.topics = allowed;
        denied
            .into_iter()
            .map(|t| ListedTopic {
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| ListedPartition::error(p.partition, ErrorCode::TOPIC_AUTHORIZATION_FAILED))
                    .collect(),
                name: t.name,
            })
            .collect()
    }

    /// CreateTopics: CREATE on the cluster, or else on each topic.
    pub fn create_topics(
        &self,
        req: &mut crate::topics::admin::CreateTopicsRequest,
    ) -> Vec<crate::topics::admin::CreatedTopic> {
        if self.cluster(Operation::Create, true) {
            return Vec::new();
        }
        let (allowed, denied) = self.split_topics(Operation::Create, std::mem::take(&mut req.topics), |t| &t.name);
        req.topics = allowed;
        denied
            .iter()
            .map(|t| {
                crate::topics::admin::CreatedTopic::error(
                    &t.name,
                    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                    "Authorization failed.",
                )
            })
            .collect()
    }

    /// CreateTopics' answer: a created topic's configs, partition count
    /// and replication factor are shown only with DESCRIBE_CONFIGS on it
    /// (Kafka's ControllerApis); otherwise `topic_config_error_code` says
    /// TOPIC_AUTHORIZATION_FAILED.
    pub fn create_topics_answer(&self, resp: &mut crate::topics::admin::CreateTopicsResponse) {
        for t in resp.topics.iter_mut().filter(|t| t.error == ErrorCode::NONE) {
            if !self.quietly_allows(Operation::DescribeConfigs, ResourceType::Topic, &t.name) {
                t.configs = None;
                t.num_partitions = -1;
                t.replication_factor = -1;
                t.config_error = ErrorCode::TOPIC_AUTHORIZATION_FAILED;
            }
        }
    }

    /// CreatePartitions: ALTER on each topic.
    pub fn create_partitions(
        &self,
        req: &mut crate::topics::create_partitions::CreatePartitionsRequest,
    ) -> Vec<crate::topics::create_partitions::GrownTopic> {
        let (allowed, denied) = self.split_topics(Operation::Alter, std::mem::take(&mut req.topics), |t| &t.name);
        req.topics = allowed;
        denied
            .into_iter()
            .map(|t| crate::topics::create_partitions::GrownTopic {
                name: t.name,
                error: ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                message: Some("The topic authorization is failed.".into()),
            })
            .collect()
    }

    /// DeleteTopics: DESCRIBE and DELETE on each topic; a topic given by id
    /// that the principal may not describe is answered without its name.
    pub fn delete_topics(
        &self,
        topics: &mut Vec<crate::topics::admin::DeleteTopic>,
        catalog: &Catalog,
    ) -> Vec<crate::topics::admin::DeletedTopic> {
        use crate::topics::admin::DeletedTopic;
        if !self.authorizer.is_enabled() {
            return Vec::new();
        }
        // Each topic with its name (from the catalog for one given by id);
        // an unknown id is left to the data plane (UNKNOWN_TOPIC_ID).
        let mut named = Vec::new();
        for t in std::mem::take(topics) {
            let name = t.name.clone().or_else(|| catalog.get_by_id(&t.id).map(|i| i.name));
            match name {
                Some(n) => named.push((t, n)),
                None => topics.push(t),
            }
        }
        let (describable, hidden) = self.split_topics(Operation::Describe, named, |(_, n)| n);
        let (deletable, refused) = self.split_topics(Operation::Delete, describable, |(_, n)| n);
        topics.extend(deletable.into_iter().map(|(t, _)| t));
        let error = ErrorCode::TOPIC_AUTHORIZATION_FAILED;
        let hidden = hidden.into_iter().map(|(t, n)| DeletedTopic {
            name: t.name.is_some().then_some(n),
            id: t.id,
            error,
            message: None,
        });
        let refused = refused.into_iter().map(|(t, n)| DeletedTopic { name: Some(n), id: t.id, error, message: None });
        hidden.chain(refused).collect()
    }

    /// InitProducerId: WRITE on the transactional id, or (idempotent
    /// producer) IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
    pub fn init_producer_id(&self, transactional_id: Option<&str>) -> Result<(), ErrorCode> {
        match transactional_id {
            Some(id) => match self.allows(Operation::Write, ResourceType::TransactionalId, id) {
                true => Ok(()),
                false => Err(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            },
            None => {
                if self.cluster(Operation::IdempotentWrite, true)
                    || self.authorizer.authorize_any(self.principal, self.host, Operation::Write, ResourceType::Topic)
                {
                    Ok(())
                } else {
                    metrics::counter!("kcoord_authorization_denials_total", "resource_type" => "CLUSTER", "operation" => "IDEMPOTENT_WRITE")
                        .increment(1);
                    Err(ErrorCode::CLUSTER_AUTHORIZATION_FAILED)
                }
            }
        }
    }
}

/// What [`Guard::offset_fetch`] decided per requested group.
pub struct OffsetFetchPlan {
    slots: Vec<FetchSlot>,
}

enum FetchSlot {
    Denied(m::OffsetFetchGroupResult),
    /// Sent to the coordinator; `Some(denied topics)` when topics were
    /// listed, `None` for all topics.
    Served(Option<Vec<m::FetchTopic>>),
}

/// A principal's DESCRIBE permission on topics, lent to the core with a
/// request that may resolve regular expressions.
struct DescribeView {
    authorizer: Arc<Authorizer>,
    principal: String,
    host: String,
}

impl TopicVisibility for DescribeView {
    fn may_describe(&self, topic: &str) -> bool {
        self.authorizer.authorize(&self.principal, &self.host, Operation::Describe, ResourceType::Topic, topic)
    }
}
