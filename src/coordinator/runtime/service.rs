//! The coordinator service: routes each request to the shard that owns its
//! group, fans multi-group requests out, and does the checks Kafka's
//! `KafkaApis` does before the coordinator sees a request (topics and
//! partitions must exist for OffsetCommit and OffsetDelete).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{join_all, Either};
use futures_util::{FutureExt, StreamExt, TryStreamExt};
use tokio::sync::{oneshot, Semaphore};

use super::routing::partition_for;
use super::shard::{self, FatalSender, LoadProgress, ShardHandle, ShardMsg, ShardSettings};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::coordinator::state::consumer::describable::Describable;
use crate::coordinator::state::consumer::target::TopicImage;
use crate::coordinator::state::core::{
    Answer, CommitAnswer, CoreConfig, DeleteGroup, DeleteTopicOffsets, DescribeGroup, Details, FetchAnswer,
    FetchOffsets, Handover, Import, ImportOutcome, OffsetDeleteAnswer, Request, Response, ShardCall, Stats, Summaries,
    TxnCommit, WithTopics,
};
use crate::coordinator::state::messages::*;
use crate::coordinator::state::offsets;
use crate::error_code::ErrorCode;

/// The coordinator is gone (shutting down): the caller closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the group coordinator is shutting down")]
pub struct Unavailable;

pub type Result<T> = std::result::Result<T, Unavailable>;

pub struct Coordinator {
    /// Indexed by shard number; `None` for a shard another node owns.
    shards: Vec<Option<ShardHandle>>,
    catalog: Arc<Catalog>,
    progress: Arc<LoadProgress>,
    hooks: Option<Arc<dyn GroupHooks>>,
    /// The consumer groups' topic image and the catalog generation it shows.
    topic_image: std::sync::Mutex<Option<(u64, Arc<TopicImage>)>>,
    /// The settings of the checks made before a request reaches its shard.
    core: CoreConfig,
    /// The node's journal (`storage.fsync = always`), retired at a clean
    /// shutdown.
    journal: Option<Arc<crate::storage::Journal>>,
}

/// What sidecar mode adds around the coordinator: importing a group's
/// offsets from the upstream before kcoord first answers for it, writing
/// committed offsets and deletions through to the upstream, and learning
/// topics kcoord has not heard of yet. Standalone mode has none.
pub trait GroupHooks: Send + Sync {
    /// Completes once `group_id` may be served; an error is answered
    /// instead (COORDINATOR_LOAD_IN_PROGRESS while the upstream is
    /// unreachable, so clients retry).
    fn before_first_use<'a>(
        &'a self,
        coordinator: &'a Coordinator,
        group_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = std::result::Result<(), ErrorCode>> + Send + 'a>>;
    /// Whether `group_id` may be served at once, [`Self::before_first_use`]
    /// having nothing to wait for (its import is done, or not wanted): the
    /// usual case, answered without building and boxing that future.
    fn first_use_done(&self, _group_id: &str) -> bool {
        false
    }
    /// Offsets made durable by an OffsetCommit.
    fn committed(&self, group_id: &str, topics: &[CommitTopic]);
    /// A group deleted by DeleteGroups.
    fn group_deleted(&self, group_id: &str);
    /// Offsets deleted by OffsetDelete.
    fn offsets_deleted(&self, group_id: &str, topics: &[(String, Vec<i32>)]);
    /// Topics that OffsetCommit or OffsetDelete named and the catalog does
    /// not know: completes once the catalog has been refreshed.
    fn refresh_topics<'a>(&'a self, topics: Vec<String>) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
    /// A commit (a TxnOffsetCommit when `txn` is set) that kcoord admitted
    /// for a group whose offsets the upstream keeps: the upstream's answer.
    fn delegated_commit<'a>(
        &'a self,
        coordinator: &'a Coordinator,
        req: OffsetCommitRequest,
        txn: Option<TxnFields>,
        hand_over_first: bool,
    ) -> Pin<Box<dyn Future<Output = OffsetCommitResponse> + Send + 'a>>;
    /// An OffsetFetch that kcoord admitted for a group whose offsets the
    /// upstream keeps: the upstream's answer.
    fn delegated_fetch<'a>(
        &'a self,
        coordinator: &'a Coordinator,
        group: OffsetFetchGroup,
        require_stable: bool,
        hand_over_first: bool,
    ) -> Pin<Box<dyn Future<Output = OffsetFetchGroupResult> + Send + 'a>>;
    /// An OffsetDelete that kcoord checked for a group whose offsets the
    /// upstream keeps: the answer once the upstream deleted them.
    fn delegated_offset_delete<'a>(
        &'a self,
        coordinator: &'a Coordinator,
        delete: DelegatedDelete,
    ) -> Pin<Box<dyn Future<Output = OffsetDeleteResponse> + Send + 'a>>;
}

/// What [`Coordinator::call`] returns: the answer on its way, or (sidecar
/// import first) a boxed wait for it.
type Called<'a, C> = Either<Sent<'a, C>, Pin<Box<dyn Future<Output = Result<<C as ShardCall>::Reply>> + Send + 'a>>>;

/// A request sent to a shard, as its caller awaits the answer.
///
/// Every call to a shard awaits one, so its size is part of every
/// request's future, which is moved and copied several times per request
/// (docs/benchmarks.md, "Smaller request futures"). An `async fn` that
/// awaited the mailbox's `send` kept the request, the message and the wait
/// for room in its state, ~800 bytes; this keeps the way back and, only
/// while a full mailbox makes the request wait, a boxed wait.
enum Sent<'a, C: ShardCall> {
    /// Answered without the shard (another node owns it).
    Answered(Option<Result<C::Reply>>),
    Queued {
        enqueued: Enqueued<'a>,
        reply: oneshot::Receiver<Response>,
    },
}

impl<C: ShardCall> Future for Sent<'_, C> {
    type Output = Result<C::Reply>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        match self.get_mut() {
            // Polled again after it completed: as a stopped shard would.
            Sent::Answered(answer) => Poll::Ready(answer.take().unwrap_or(Err(Unavailable))),
            Sent::Queued { enqueued, reply } => {
                if let Poll::Ready(Err(e)) = enqueued.poll_done(cx) {
                    return Poll::Ready(Err(e));
                }
                if !matches!(enqueued, Enqueued::Done) {
                    return Poll::Pending;
                }
                match Pin::new(reply).poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Ok(response)) => Poll::Ready(Coordinator::answer::<C>(response)),
                    Poll::Ready(Err(_)) => Poll::Ready(Err(Unavailable)),
                }
            }
        }
    }
}

/// Puts `msg` in the shard's mailbox now if it has room (the usual case),
/// or returns the wait for room, boxed.
fn enqueue(shard: &ShardHandle, msg: ShardMsg) -> Enqueued<'_> {
    use tokio::sync::mpsc::error::TrySendError;
    match shard.tx.try_send(msg) {
        Ok(()) => Enqueued::Done,
        Err(TrySendError::Full(msg)) => Enqueued::Waiting(Box::pin(shard.tx.send(msg))),
        Err(TrySendError::Closed(_)) => Enqueued::Closed,
    }
}

type SendWait<'a> =
    Pin<Box<dyn Future<Output = std::result::Result<(), tokio::sync::mpsc::error::SendError<ShardMsg>>> + Send + 'a>>;

/// A message put in a shard's mailbox, or on its way there.
enum Enqueued<'a> {
    Done,
    Waiting(SendWait<'a>),
    /// The shard has stopped.
    Closed,
}

impl Enqueued<'_> {
    /// Ready once the message is in the mailbox.
    fn poll_done(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<()>> {
        use std::task::Poll;
        match self {
            Enqueued::Done => Poll::Ready(Ok(())),
            Enqueued::Closed => Poll::Ready(Err(Unavailable)),
            Enqueued::Waiting(wait) => match wait.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(())) => {
                    *self = Enqueued::Done;
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Err(_)) => {
                    *self = Enqueued::Closed;
                    Poll::Ready(Err(Unavailable))
                }
            },
        }
    }
}

/// An OffsetDelete of a delegated group, as kcoord checked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegatedDelete {
    pub group_id: String,
    /// kcoord's answer: the partitions answered NONE may be deleted upstream
    /// (none when it carries a group error).
    pub checked: OffsetDeleteResponse,
    /// kcoord's offsets of the group must be handed over first.
    pub hand_over_first: bool,
}

impl Coordinator {
    /// Starts one shard per `offsets.partitions` that `owns` accepts, each
    /// loading its log in the background (at most two at a time: the
    /// machine's cores). Requests for the other shards get NOT_COORDINATOR.
    pub fn start(
        config: &Config,
        catalog: Arc<Catalog>,
        repair: bool,
        fatal: FatalSender,
        owns: &dyn Fn(u32) -> bool,
        hooks: Option<Arc<dyn GroupHooks>>,
        journal: Option<Arc<crate::storage::Journal>>,
    ) -> Coordinator {
        // The node's fsync pool, shared with the data plane's partitions
        // (which ask it for fsyncs only once serving, after this).
        crate::storage::SyncScheduler::global().set_threads(config.storage.fsync_threads);
        let root = config.storage.data_dir.join("coordinator");
        let core = CoreConfig::from_config(config);
        let permits = Arc::new(Semaphore::new(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)));
        let progress = Arc::new(LoadProgress::default());
        let shards = (0..config.offsets.partitions)
            .map(|id| {
                owns(id).then(|| {
                    shard::spawn(
                        ShardSettings {
                            id,
                            dir: root.join(format!("shard-{id:04}")),
                            core: core.clone(),
                            fsync: config.storage.fsync,
                            fsync_interval: Duration::from_millis(config.storage.fsync_interval_ms),
                            segment_bytes: config.offsets.segment_bytes,
                            compaction_trigger_bytes: config.offsets.compaction_trigger_bytes,
                            repair,
                            journal: journal.clone(),
                        },
                        config.offsets.shard_mailbox,
                        permits.clone(),
                        fatal.clone(),
                        progress.clone(),
                    )
                })
            })
            .collect();
        Coordinator { shards, catalog, progress, hooks, topic_image: Default::default(), core, journal }
    }

    fn local_shards(&self) -> impl Iterator<Item = &ShardHandle> {
        self.shards.iter().flatten()
    }

    /// Completes once every shard has loaded its log (until then, requests
    /// for a loading shard get COORDINATOR_LOAD_IN_PROGRESS).
    pub async fn wait_until_loaded(&self) {
        self.progress.wait_for(self.local_shards().count()).await;
    }

    /// Shards loaded so far.
    pub fn shards_loaded(&self) -> usize {
        self.progress.loaded()
    }

    /// Shards served by this node.
    pub fn shard_count(&self) -> usize {
        self.local_shards().count()
    }

    fn shard_of(&self, group_id: &str) -> Option<&ShardHandle> {
        let i = partition_for(group_id, self.shards.len() as u32) as usize;
        self.shards.get(i).and_then(Option::as_ref)
    }

    /// Sends `call` to `shard` and returns its answer; a shard another
    /// node owns answers NOT_COORDINATOR, as Kafka's broker does for a
    /// partition it does not lead.
    ///
    /// The answer travels back as a [`Response`](crate::coordinator::state::core::Response) (one channel type for every
    /// call) and is turned back into the call's answer here, the one place
    /// that does. It cannot be of another kind: the shard answers a request
    /// only through a `ReplyTo` made from the request itself, and its error
    /// answers (loading, failed, stopping) come from the call's own
    /// `ShardCall::error`. A mismatch would be a bug in that machinery; it
    /// is logged and the request's connection closed, never answered wrongly.
    async fn call_shard<C: ShardCall>(shard: Option<&ShardHandle>, call: C) -> Result<C::Reply> {
        Self::send::<C>(shard, call.into()).await
    }

    /// [`Self::call_shard`] for a call already turned into its [`Request`].
    ///
    /// Not an `async fn`: the request goes into the shard's mailbox when
    /// this is called, and the future returned holds only the way back,
    /// not the request (see [`Sent`]).
    fn send<C: ShardCall>(shard: Option<&ShardHandle>, req: Request) -> Sent<'_, C> {
        match shard {
            None => Sent::Answered(Some(Self::answer::<C>(req.error_response(ErrorCode::NOT_COORDINATOR)))),
            Some(shard) => {
                let (tx, reply) = oneshot::channel();
                Sent::Queued { enqueued: enqueue(shard, ShardMsg::Request { req, reply: tx }), reply }
            }
        }
    }

    /// The call's answer back out of the response that carried it.
    fn answer<C: ShardCall>(response: Response) -> Result<C::Reply> {
        C::Reply::from_response(response).ok_or_else(|| {
            tracing::error!("a shard answered with the wrong response type");
            Unavailable
        })
    }

    /// Sends a call about one group to its shard, after the checks Kafka
    /// makes before the shard and the sidecar's import for the calls that
    /// read or create the group's offsets. The group is the one the call
    /// names, borrowed from it: callers need not copy its id.
    ///
    /// Not an `async fn`, for the size of every request's future (see
    /// [`Sent`]): the request is in the shard's mailbox when this returns,
    /// except where the sidecar must still import the group's offsets,
    /// which waits in a boxed future.
    fn call<C: ShardCall>(&self, call: C) -> Called<'_, C> {
        if let Some(answer) = call.precheck(&self.core) {
            return Either::Left(Sent::Answered(Some(Ok(answer))));
        }
        let req: Request = call.into();
        let group_id = req.group_id().unwrap_or_default();
        let shard = self.shard_of(group_id);
        match (&self.hooks, shard, C::IMPORTS_FIRST) {
            (Some(hooks), Some(_), true) if !hooks.first_use_done(group_id) => Either::Right(Box::pin(async move {
                let group_id = req.group_id().unwrap_or_default();
                if let Err(error) = hooks.before_first_use(self, group_id).await {
                    return Self::answer::<C>(req.error_response(error));
                }
                Self::send::<C>(shard, req).await
            })),
            _ => Either::Left(Self::send::<C>(shard, req)),
        }
    }

    /// Sidecar mode: the offsets of delegated group `group_id` that kcoord
    /// still has to hand over to the upstream (None once it has).
    pub async fn offsets_to_hand_over(
        &self,
        group_id: &str,
    ) -> Result<std::result::Result<Option<Vec<CommitTopic>>, ErrorCode>> {
        let req = Handover { group_id: group_id.to_string(), done: false };
        Self::call_shard(self.shard_of(group_id), req).await
    }

    /// Sidecar mode: records that the upstream has delegated group
    /// `group_id`'s offsets, which kcoord then drops.
    pub async fn offsets_handed_over(&self, group_id: &str) -> Result<std::result::Result<(), ErrorCode>> {
        let req = Handover { group_id: group_id.to_string(), done: true };
        Ok(Self::call_shard(self.shard_of(group_id), req).await?.map(|_| ()))
    }

    /// Sidecar import: see [`Import`].
    pub async fn import(&self, req: OffsetCommitRequest) -> Result<std::result::Result<ImportOutcome, ErrorCode>> {
        Self::call_shard(self.shard_of(&req.group_id), Import(req)).await
    }

    /// JoinGroup; `describable` is what the requester may DESCRIBE, which
    /// bounds a regular-expression refresh its join may trigger in a
    /// consumer group (online migration).
    pub fn join_group(
        &self,
        req: JoinGroupRequest,
        describable: Describable,
    ) -> impl Future<Output = Result<JoinGroupResponse>> + Send + '_ {
        self.call(self.with_topics(req, describable))
    }

    pub fn sync_group(&self, req: SyncGroupRequest) -> impl Future<Output = Result<SyncGroupResponse>> + Send + '_ {
        // A SyncGroup resolves no regular expression.
        self.call(self.with_topics(req, Describable::all()))
    }

    /// The shard calls of the classic protocol are plain functions, not
    /// `async fn`s: the request is in the shard's mailbox when they return,
    /// and their futures hold only the way back (see [`Sent`]).
    pub fn heartbeat(&self, req: HeartbeatRequest) -> impl Future<Output = Result<HeartbeatResponse>> + Send + '_ {
        self.call(req)
    }

    /// KIP-848 ConsumerGroupHeartbeat, with the catalog's topics as the
    /// metadata the shard resolves subscriptions against. In sidecar mode a
    /// subscription naming topics the catalog does not know refreshes it
    /// from the upstream first (at most once per back-off), so that a member
    /// subscribing to a topic created upstream a moment ago is assigned it
    /// without waiting for the periodic refresh.
    pub async fn consumer_group_heartbeat(
        &self,
        mut req: crate::coordinator::consumer::messages::ConsumerHeartbeatRequest,
    ) -> Result<crate::coordinator::consumer::messages::ConsumerHeartbeatResponse> {
        if let (Some(_), Some(names)) = (&self.hooks, &req.subscribed_topic_names) {
            let unknown: Vec<String> = names.iter().filter(|n| self.catalog.partitions(n).is_none()).cloned().collect();
            if !unknown.is_empty() {
                self.refresh_topics(unknown).await;
            }
        }
        req.topics = self.topic_image();
        self.call(req).await
    }

    /// KIP-848 ConsumerGroupDescribe: each group from its shard, in request
    /// order.
    pub async fn consumer_group_describe(
        &self,
        group_ids: Vec<String>,
    ) -> Result<Vec<crate::coordinator::consumer::messages::DescribedConsumerGroup>> {
        let topics = self.topic_image();
        let calls = group_ids.into_iter().map(|group_id| {
            let shard = self.shard_of(&group_id);
            let r =
                crate::coordinator::consumer::messages::ConsumerDescribeRequest { group_id, topics: topics.clone() };
            Self::call_shard(shard, r)
        });
        fan_out(calls).await
    }

    /// A classic request with the catalog's topics: if its group is a
    /// consumer group (online migration), its member's subscription and
    /// assignment name topics that the group knows by id.
    fn with_topics<C: ShardCall>(&self, inner: C, describable: Describable) -> WithTopics<C> {
        WithTopics { topics: self.topic_image(), describable, inner }
    }

    /// The catalog's topics as the core's topic metadata, rebuilt only
    /// when the catalog's generation moved (a heartbeat would otherwise copy
    /// every topic of a large cluster).
    fn topic_image(&self) -> Arc<TopicImage> {
        let generation = self.catalog.generation();
        let mut cached = self.topic_image.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((g, image)) = cached.as_ref() {
            if *g == generation {
                return image.clone();
            }
        }
        let (generation, topics) = self.catalog.list_at_generation();
        let image = Arc::new(TopicImage::new(topics.into_iter().map(|t| (t.name, t.id, t.partitions))));
        *cached = Some((generation, image.clone()));
        image
    }

    pub fn leave_group(&self, req: LeaveGroupRequest) -> impl Future<Output = Result<LeaveGroupResponse>> + Send + '_ {
        self.call(req)
    }

    /// Names the topics given by id (OffsetCommit and OffsetFetch v10), as
    /// Kafka's `KafkaApis` resolves them from its metadata before the
    /// coordinator sees the request: `set(i, name)` for each of `ids` the
    /// catalog knows, after a refresh from the upstream in sidecar mode
    /// when one is new (a topic created there a moment ago). The nil id,
    /// which Kafka never looks up, names nothing.
    pub async fn name_topics(&self, ids: &[uuid::Uuid], mut set: impl FnMut(usize, String)) {
        // Allocated only when an id names no topic.
        let mut unnamed: Vec<usize> = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            match self.catalog.name_of_id(id) {
                Some(name) => set(i, name),
                None if !id.is_nil() => unnamed.push(i),
                None => {}
            }
        }
        if unnamed.is_empty() || self.hooks.is_none() {
            return;
        }
        self.refresh_topics(Vec::new()).await;
        for i in unnamed {
            if let Some(name) = ids.get(i).and_then(|id| self.catalog.name_of_id(id)) {
                set(i, name);
            }
        }
    }

    /// A commit of partitions the catalog knows: the API layer answers the
    /// others first, as Kafka's `KafkaApis` does (`server::apis::screen`).
    ///
    /// Not an `async fn`, for the size of every commit's future (see
    /// [`Sent`]): the usual commit (standalone mode) is in the shard's
    /// mailbox when this returns, and the future holds only the way back;
    /// anything else runs boxed.
    pub fn offset_commit(
        &self,
        req: OffsetCommitRequest,
    ) -> impl Future<Output = Result<OffsetCommitResponse>> + Send + '_ {
        let usual = self.hooks.is_none() && req.topics.iter().any(|t| !t.partitions.is_empty());
        if usual {
            // What commit_partitions and commit_in_shard would do, without their state.
            Either::Left(self.call(req).map(|answer| written_here(answer?)))
        } else {
            Either::Right(Box::pin(self.commit_partitions(req, None)))
        }
    }

    /// Sidecar mode: a TxnOffsetCommit, admitted here (Kafka's
    /// transactional validation) and then delegated to the upstream's
    /// coordinator with the group (see `delegation`).
    pub async fn txn_offset_commit(&self, req: OffsetCommitRequest, txn: TxnFields) -> Result<OffsetCommitResponse> {
        self.commit_partitions(req, Some(txn)).await
    }

    /// Sidecar mode: asks the upstream about topics a request named that
    /// the catalog does not know (one created there a moment ago), and
    /// completes once the catalog has been refreshed. Standalone, the
    /// catalog is the truth and nothing is asked.
    pub async fn refresh_topics(&self, names: Vec<String>) {
        if let Some(hooks) = &self.hooks {
            hooks.refresh_topics(names).await;
        }
    }

    async fn commit_partitions(
        &self,
        req: OffsetCommitRequest,
        txn: Option<TxnFields>,
    ) -> Result<OffsetCommitResponse> {
        if req.topics.iter().all(|t| t.partitions.is_empty()) {
            // Nothing to commit: Kafka answers at once, without creating
            // the group, validating the member or refreshing its session.
            return Ok(OffsetCommitResponse { topics: vec![] });
        }
        self.commit_in_shard(req, txn).await
    }

    /// A commit of known partitions: written by the shard (and in sidecar
    /// mode written through upstream), or, for a group whose offsets are
    /// delegated, admitted by the shard and committed upstream.
    async fn commit_in_shard(&self, req: OffsetCommitRequest, txn: Option<TxnFields>) -> Result<OffsetCommitResponse> {
        // Sidecar mode needs the request again: to write it through or to send it upstream.
        let kept = self.hooks.as_ref().map(|h| (h, req.clone()));
        let answer = match txn {
            Some(_) => CommitAnswer::Delegated(self.call(TxnCommit(req)).await?),
            None => self.call(req).await?,
        };
        let Some((hooks, mut req)) = kept else { return written_here(answer) };
        match answer {
            CommitAnswer::Written(response) => {
                // Only what the answer acknowledges is written through.
                let acknowledged: HashSet<(&str, i32)> = response
                    .topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions.iter().filter(|p| p.error.is_none()).map(|p| (t.name.as_str(), p.partition))
                    })
                    .collect();
                for t in &mut req.topics {
                    t.partitions.retain(|p| acknowledged.contains(&(t.name.as_str(), p.partition)));
                }
                req.topics.retain(|t| !t.partitions.is_empty());
                if !req.topics.is_empty() {
                    hooks.committed(&req.group_id, &req.topics);
                }
                Ok(response)
            }
            CommitAnswer::Delegated(Ok(admitted)) => {
                Ok(hooks.delegated_commit(self, req, txn, admitted.hand_over_first).await)
            }
            CommitAnswer::Delegated(Err(error)) => Ok(offsets::commit_error_response(&req, error)),
        }
    }

    pub async fn offset_fetch(&self, req: OffsetFetchRequest) -> Result<OffsetFetchResponse> {
        let require_stable = req.require_stable;
        let calls = req.groups.into_iter().map(|group| async move {
            // Sidecar mode may need the request again, to ask the upstream.
            let kept = self.hooks.as_ref().map(|h| (h, group.clone()));
            match (self.call(FetchOffsets { group, require_stable }).await?, kept) {
                (FetchAnswer::Read(r), _) => Ok(r),
                (FetchAnswer::Delegated(Ok(admitted)), Some((hooks, group))) => {
                    Ok(hooks.delegated_fetch(self, group, require_stable, admitted.hand_over_first).await)
                }
                (FetchAnswer::Delegated(Err(error)), Some((_, group))) => {
                    Ok(FetchOffsets { group, require_stable }.error_result(error))
                }
                (FetchAnswer::Delegated(_), None) => Err(not_delegating()),
            }
        });
        let groups = fan_out(calls).await?;
        Ok(OffsetFetchResponse { groups })
    }

    /// Deletes a group's offsets of partitions the catalog knows: the API
    /// layer answers the others, as Kafka's `KafkaApis` does
    /// (`server::apis::screen`).
    pub async fn offset_delete(&self, req: OffsetDeleteRequest) -> Result<OffsetDeleteResponse> {
        let g = req.group_id.clone();
        let (resp, delegated) = match (self.call(req).await?, &self.hooks) {
            (OffsetDeleteAnswer::Deleted(r), _) => (r, false),
            (OffsetDeleteAnswer::Delegated(admitted, checked), Some(hooks)) => {
                let delete =
                    DelegatedDelete { group_id: g.clone(), checked, hand_over_first: admitted.hand_over_first };
                (hooks.delegated_offset_delete(self, delete).await, true)
            }
            (OffsetDeleteAnswer::Delegated(..), None) => return Err(not_delegating()),
        };
        if !resp.error.is_none() {
            return Ok(resp);
        }
        // A delegated group's offsets were deleted upstream already.
        if let (Some(hooks), false) = (&self.hooks, delegated) {
            let deleted: Vec<(String, Vec<i32>)> = resp
                .topics
                .iter()
                .map(|t| {
                    (t.name.clone(), t.partitions.iter().filter(|p| p.error.is_none()).map(|p| p.partition).collect())
                })
                .filter(|(_, p): &(String, Vec<i32>)| !p.is_empty())
                .collect();
            if !deleted.is_empty() {
                hooks.offsets_deleted(&g, &deleted);
            }
        }
        Ok(resp)
    }

    /// Describes each requested group, in request order. As in Kafka, a
    /// group named several times is answered several times; kcoord asks its
    /// shard once and shares that answer (the encoder writes it once and
    /// copies the bytes).
    pub async fn describe_groups(&self, req: DescribeGroupsRequest) -> Result<Vec<Arc<DescribedGroup>>> {
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut distinct: Vec<String> = Vec::new();
        let order: Vec<usize> = req
            .groups
            .iter()
            .map(|g| {
                *index.entry(g.as_str()).or_insert_with(|| {
                    distinct.push(g.clone());
                    distinct.len() - 1
                })
            })
            .collect();
        drop(index);
        let (version, include_authorized_operations) = (req.version, req.include_authorized_operations);
        let calls = distinct.into_iter().map(|group_id| {
            let shard = self.shard_of(&group_id);
            let r = DescribeGroup { group_id, version, include_authorized_operations };
            async move { Ok(Arc::new(Self::call_shard(shard, r).await?)) }
        });
        let described: Vec<Arc<DescribedGroup>> = fan_out(calls).await?;
        Ok(order.into_iter().filter_map(|i| described.get(i).cloned()).collect())
    }

    /// Lists every group of every shard. A shard that cannot answer (still
    /// loading) makes its error the top-level error and the list empty, as
    /// in Kafka: a partial list would look like groups had disappeared.
    /// (The admin CLI retries such answers, as Kafka's AdminClient does.)
    pub async fn list_groups(&self, req: ListGroupsRequest) -> Result<ListGroupsResponse> {
        let calls = self.local_shards().map(|s| Self::call_shard(Some(s), req.clone()));
        let mut error = ErrorCode::NONE;
        let mut groups = Vec::new();
        for r in join_all(calls).await {
            match r? {
                // A shard that is not the coordinator (failed) has no
                // groups to add and is skipped, as Kafka skips a partition
                // it does not lead.
                l if l.error == ErrorCode::NOT_COORDINATOR => {}
                l => {
                    if !l.error.is_none() && error.is_none() {
                        error = l.error;
                    }
                    groups.extend(l.groups);
                }
            }
        }
        if !error.is_none() {
            groups.clear();
        }
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(ListGroupsResponse { error, groups })
    }

    /// Deletes groups (duplicates in the request are answered once).
    pub async fn delete_groups(&self, groups: Vec<String>) -> Result<DeleteGroupsResponse> {
        let mut seen: HashSet<String> = HashSet::with_capacity(groups.len());
        let mut distinct: Vec<String> = Vec::with_capacity(groups.len());
        for g in groups {
            if seen.insert(g.clone()) {
                distinct.push(g);
            }
        }
        drop(seen);
        let calls = distinct.into_iter().map(|group_id| {
            let shard = self.shard_of(&group_id);
            async move {
                let e = Self::call_shard(shard, DeleteGroup { group_id: group_id.clone() }).await?;
                Ok((group_id, e))
            }
        });
        let results = fan_out(calls).await?;
        if let Some(hooks) = &self.hooks {
            for (group_id, _) in results.iter().filter(|(_, e)| e.is_none()) {
                hooks.group_deleted(group_id);
            }
        }
        Ok(DeleteGroupsResponse { results })
    }

    /// Tombstones every group's committed offsets for a deleted topic, on
    /// every shard. Returns the first error, if any.
    pub async fn delete_topic_offsets(&self, topic: &str) -> Result<ErrorCode> {
        let calls =
            self.local_shards().map(|s| Self::call_shard(Some(s), DeleteTopicOffsets { topic: topic.to_string() }));
        let mut error = ErrorCode::NONE;
        for r in join_all(calls).await {
            let e = r?;
            if !e.is_none() && error.is_none() {
                error = e;
            }
        }
        Ok(error)
    }

    /// One group in full (None if unknown).
    pub async fn group_details(&self, group_id: &str) -> Result<Option<Box<GroupDetails>>> {
        self.call(Details { group_id: group_id.to_string() }).await
    }

    /// Every group in brief, sorted by id.
    pub async fn group_summaries(&self) -> Result<Vec<GroupSummary>> {
        let calls = self.local_shards().map(|s| Self::call_shard(Some(s), Summaries));
        let mut out = Vec::new();
        for r in join_all(calls).await {
            out.extend(r?);
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    /// Counts per shard, and each shard's mailbox depth.
    pub async fn shard_stats(&self) -> Result<Vec<(u32, ShardStats, usize)>> {
        let calls = self.local_shards().map(|s| async move {
            let depth = s.tx.max_capacity() - s.tx.capacity();
            (s.id, Self::call_shard(Some(s), Stats).await, depth)
        });
        let mut out = Vec::new();
        for (id, r, depth) in join_all(calls).await {
            out.push((id, r?, depth));
        }
        Ok(out)
    }

    /// Unloads every shard: parked requests get NOT_COORDINATOR, pending
    /// writes are made durable, logs are closed.
    pub async fn shutdown(&self) {
        let waits = self.local_shards().map(|s| async move {
            let (tx, rx) = oneshot::channel();
            s.tx.send(ShardMsg::Shutdown { done: tx }).await.is_ok() && rx.await.unwrap_or(false)
        });
        let durable = join_all(waits).await.into_iter().all(|d| d);
        // Every shard's final fsync put what it wrote in its own files: the
        // journal has nothing left to replay, and a clean restart reads none
        // of it. Otherwise it stays for the next start.
        if let Some(journal) = self.journal.clone() {
            if !durable {
                tracing::warn!("a shard did not stop cleanly; the journal is kept for the next start to replay");
                return;
            }
            match tokio::task::spawn_blocking(move || journal.retire()).await {
                Ok(Ok(())) => tracing::debug!("journal retired"),
                Ok(Err(e)) => tracing::warn!(error = %e, "the journal was not retired"),
                Err(e) => tracing::warn!(error = %e, "retiring the journal failed"),
            }
        }
    }
}

/// Shard calls one request keeps in flight at once. A request naming a
/// million groups then holds a few hundred calls' state, not a million, and
/// a shard's mailbox is shared fairly with other connections' requests.
const FAN_OUT: usize = 256;

/// Runs `calls` with at most [`FAN_OUT`] in flight, answers in call order;
/// stops at the first failure (the coordinator is shutting down).
async fn fan_out<T, F: Future<Output = Result<T>>>(calls: impl Iterator<Item = F>) -> Result<Vec<T>> {
    futures_util::stream::iter(calls).buffered(FAN_OUT).try_collect().await
}

/// A commit's answer where there are no sidecar hooks: written here, since
/// only a sidecar's shard delegates (it alone has hooks).
fn written_here(answer: CommitAnswer) -> Result<OffsetCommitResponse> {
    match answer {
        CommitAnswer::Written(response) => Ok(response),
        CommitAnswer::Delegated(_) => Err(not_delegating()),
    }
}

/// A shard delegated a group's offsets on a node without sidecar hooks:
/// only a sidecar's shards hold delegated groups, so this is a bug; the
/// request's connection is closed rather than answered wrongly.
fn not_delegating() -> Unavailable {
    tracing::error!("a shard answered for a delegated group outside sidecar mode");
    Unavailable
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    /// A shard that answers every ListGroups with `error` and one group.
    fn scripted_shard(id: u32, error: ErrorCode) -> ShardHandle {
        let (tx, mut rx) = mpsc::channel::<ShardMsg>(4);
        tokio::spawn(async move {
            while let Some(msg) = rx.recv().await {
                if let ShardMsg::Request { reply, .. } = msg {
                    let group = ListedGroup {
                        group_id: format!("g{id}"),
                        protocol_type: "consumer".into(),
                        state: "Stable".into(),
                        group_type: "classic".into(),
                    };
                    let _ = reply.send(Response::List(ListGroupsResponse { error, groups: vec![group] }));
                }
            }
        });
        ShardHandle { id, tx }
    }

    /// A shard still loading its log: it answers every request as Kafka's
    /// runtime does then.
    fn loading_shard(id: u32) -> ShardHandle {
        let (tx, mut rx) = mpsc::channel::<ShardMsg>(4);
        tokio::spawn(async move {
            while let Some(msg) = rx.recv().await {
                if let ShardMsg::Request { req, reply } = msg {
                    let _ = reply.send(req.error_response(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS));
                }
            }
        });
        ShardHandle { id, tx }
    }

    fn coordinator(shards: Vec<ShardHandle>) -> Coordinator {
        Coordinator {
            shards: shards.into_iter().map(Some).collect(),
            catalog: Arc::new(Catalog::in_memory(&[])),
            progress: Arc::new(LoadProgress::default()),
            hooks: None,
            topic_image: Default::default(),
            core: CoreConfig::default(),
            journal: None,
        }
    }

    fn list() -> ListGroupsRequest {
        ListGroupsRequest { states_filter: vec![], types_filter: vec![] }
    }

    #[tokio::test]
    async fn list_groups_while_a_shard_loads_is_an_error_without_a_partial_list() {
        let c = coordinator(vec![
            scripted_shard(0, ErrorCode::NONE),
            scripted_shard(1, ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
        ]);
        let r = c.list_groups(list()).await.unwrap();
        assert_eq!(r.error, ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
        assert!(r.groups.is_empty());
    }

    #[tokio::test]
    async fn list_groups_skips_a_shard_that_is_not_the_coordinator() {
        let c = coordinator(vec![scripted_shard(0, ErrorCode::NONE), scripted_shard(1, ErrorCode::NOT_COORDINATOR)]);
        let r = c.list_groups(list()).await.unwrap();
        assert_eq!(r.error, ErrorCode::NONE);
        assert_eq!(r.groups.iter().map(|g| g.group_id.as_str()).collect::<Vec<_>>(), ["g0"]);
    }

    fn join(group: &str, member: &str, session_timeout_ms: i32) -> JoinGroupRequest {
        JoinGroupRequest {
            version: 5,
            group_id: group.into(),
            session_timeout_ms,
            rebalance_timeout_ms: 30_000,
            member_id: member.into(),
            group_instance_id: None,
            protocol_type: "consumer".into(),
            protocols: vec![],
            reason: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    #[tokio::test]
    async fn kafkas_request_checks_are_answered_while_the_shard_loads() {
        let c = coordinator(vec![loading_shard(0)]);
        let r = c.join_group(join("", "m", 10_000), Describable::all()).await.unwrap();
        assert_eq!((r.error, r.member_id.as_str()), (ErrorCode::INVALID_GROUP_ID, "m"));
        let r = c.join_group(join("g", "m", 1), Describable::all()).await.unwrap();
        assert_eq!((r.error, r.member_id.as_str()), (ErrorCode::INVALID_SESSION_TIMEOUT, "m"));
        let sync = SyncGroupRequest {
            version: 5,
            group_id: "g".into(),
            generation_id: 1,
            member_id: "m".into(),
            group_instance_id: None,
            protocol_type: None,
            protocol_name: Some("range".into()),
            assignments: vec![],
        };
        assert_eq!(c.sync_group(sync.clone()).await.unwrap().error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
        let sync = SyncGroupRequest { group_id: String::new(), protocol_type: Some("consumer".into()), ..sync };
        assert_eq!(c.sync_group(sync).await.unwrap().error, ErrorCode::INVALID_GROUP_ID);
        let beat = HeartbeatRequest {
            group_id: String::new(),
            generation_id: 1,
            member_id: "m".into(),
            group_instance_id: None,
        };
        assert_eq!(c.heartbeat(beat).await.unwrap().error, ErrorCode::INVALID_GROUP_ID);
        let leave = LeaveGroupRequest { group_id: String::new(), members: vec![] };
        assert_eq!(c.leave_group(leave).await.unwrap().error, ErrorCode::INVALID_GROUP_ID);
        let delete = OffsetDeleteRequest { group_id: String::new(), topics: vec![] };
        assert_eq!(c.offset_delete(delete).await.unwrap().error, ErrorCode::INVALID_GROUP_ID);
    }

    #[tokio::test]
    async fn a_join_the_loading_shard_refuses_carries_no_member_id() {
        let c = coordinator(vec![loading_shard(0)]);
        let r = c.join_group(join("g", "m", 10_000), Describable::all()).await.unwrap();
        assert_eq!((r.error, r.member_id.as_str()), (ErrorCode::COORDINATOR_LOAD_IN_PROGRESS, ""));
    }

    fn beat(group: &str) -> HeartbeatRequest {
        HeartbeatRequest { group_id: group.into(), generation_id: 1, member_id: "m".into(), group_instance_id: None }
    }

    #[tokio::test]
    async fn a_request_waits_for_room_in_a_full_mailbox_and_is_answered() {
        let (tx, mut rx) = mpsc::channel::<ShardMsg>(1);
        let (earlier, _) = oneshot::channel();
        tx.try_send(ShardMsg::Request { req: beat("g").into(), reply: earlier }).unwrap();
        let c = Arc::new(coordinator(vec![ShardHandle { id: 0, tx }]));
        let call = tokio::spawn({
            let c = c.clone();
            async move { c.heartbeat(beat("g")).await }
        });
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(!call.is_finished(), "answered while the mailbox had no room");
        // The shard drains its mailbox: the earlier message, then the waiting one.
        let mut seen = 0;
        while let Some(ShardMsg::Request { req, reply }) = rx.recv().await {
            seen += 1;
            let _ = reply.send(req.error_response(ErrorCode::REBALANCE_IN_PROGRESS));
            if seen == 2 {
                break;
            }
        }
        assert_eq!(call.await.unwrap().unwrap().error, ErrorCode::REBALANCE_IN_PROGRESS);
    }

    #[tokio::test]
    async fn a_request_to_a_stopped_shard_is_not_answered() {
        let (tx, rx) = mpsc::channel::<ShardMsg>(1);
        drop(rx);
        let c = coordinator(vec![ShardHandle { id: 0, tx }]);
        assert!(c.heartbeat(beat("g")).await.is_err());
        let full = {
            let (tx, rx) = mpsc::channel::<ShardMsg>(1);
            let (earlier, _) = oneshot::channel();
            tx.try_send(ShardMsg::Request { req: beat("g").into(), reply: earlier }).unwrap();
            (tx, rx)
        };
        let c = Arc::new(coordinator(vec![ShardHandle { id: 0, tx: full.0 }]));
        let call = tokio::spawn({
            let c = c.clone();
            async move { c.heartbeat(beat("g")).await }
        });
        tokio::task::yield_now().await;
        // The shard stops while the request waits for room.
        drop(full.1);
        assert!(call.await.unwrap().is_err());
    }
}
