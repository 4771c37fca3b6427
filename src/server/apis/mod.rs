//! The registry of served APIs: one module per API, one line per API in
//! [`REGISTRY`].
//!
//! An API's module holds everything the server knows about it: the versions
//! it serves (its protocol module's [`ApiSupport`]), the service that
//! answers it ([`Owner`]), and [`Api::serve`]: decode with the protocol
//! module, authorize, ask the owner, build the error answer where the
//! owner is not asked, observe, encode. The dispatcher
//! (`server::dispatch`) finds the entry by key; the advertised ApiVersions
//! table ([`supported`]) and `docs/protocol-support.md`'s check are built
//! from the same entries, so an API is advertised exactly when it is served.
//!
//! To add an API: its wire module under `protocol::api`, a module here
//! implementing [`Api`], and its line in [`REGISTRY`] (in key order).

mod alter_user_scram_credentials;
mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delegation_tokens;
mod delete_acls;
mod delete_groups;
mod delete_topics;
mod describe_acls;
mod describe_groups;
mod describe_user_scram_credentials;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod produce;
mod sasl_authenticate;
mod sasl_handshake;
mod screen;
mod sync_group;
mod topic_ids;
mod txn_offset_commit;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};

use super::dispatch::{RequestContext, RouteError};
use super::Services;
use crate::protocol::versions::ApiSupport;

/// Where an API's requests go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The group coordinator (`coordinator::Coordinator`).
    Coordinator,
    /// The cluster view: brokers, coordinators, advertised versions.
    Cluster,
    /// Standalone mode's data plane (`topics::DataPlane`); in sidecar mode
    /// the upstream serves these and they never reach the dispatcher.
    Topics,
    /// The authorizer's ACLs.
    Acls,
    /// The SCRAM users of the credentials file.
    Users,
    /// The delegation tokens.
    Tokens,
    /// The connection itself (SASL outside an exchange).
    Connection,
}

/// The outcome of serving one request: whether a response body was
/// written (Produce with acks=0 writes none).
pub type Served = Result<bool, RouteError>;

/// One Kafka API as the server serves it.
pub trait Api: 'static {
    /// The versions served, from the API's protocol module.
    const SUPPORT: ApiSupport;
    /// Where its requests go.
    const OWNER: Owner;
    /// Served only in sidecar mode (TxnOffsetCommit, admitted by kcoord
    /// and delegated upstream); such an API is not in the standalone table.
    const SIDECAR_ONLY: bool = false;

    /// Decodes `body` at the request's version, serves it and encodes the
    /// answer into `out`.
    fn serve(
        svc: &Services,
        ctx: &RequestContext,
        body: &mut Bytes,
        out: &mut BytesMut,
    ) -> impl Future<Output = Served> + Send;
}

/// How the dispatcher runs an API: a function that boxes the API's future.
///
/// A request's future is moved several times on its way to the heap (into
/// the task-local scope, the connection's request future and its slot),
/// and an async function's future is as large as its largest await point:
/// with Heartbeat, OffsetCommit and OffsetFetch served inside it, every
/// request's future was once 5.3 KB, copied at each of those moves; with
/// all of them boxed it was 0.6 KB (docs/benchmarks.md, "Hot path against
/// the framing limit"). Since Heartbeat's and OffsetCommit's futures shrank
/// to a few hundred bytes, those two run inline again ([`serve`]); every
/// other API's future is boxed.
pub type BoxedServe = for<'a> fn(
    &'a Services,
    &'a RequestContext,
    &'a mut Bytes,
    &'a mut BytesMut,
) -> Pin<Box<dyn Future<Output = Served> + Send + 'a>>;

/// One line of the registry.
#[derive(Clone, Copy)]
pub struct Registered {
    pub support: ApiSupport,
    pub owner: Owner,
    pub sidecar_only: bool,
    pub serve: BoxedServe,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("support", &self.support)
            .field("owner", &self.owner)
            .field("sidecar_only", &self.sidecar_only)
            .finish_non_exhaustive()
    }
}

fn serve_boxed<'a, A: Api>(
    svc: &'a Services,
    ctx: &'a RequestContext,
    body: &'a mut Bytes,
    out: &'a mut BytesMut,
) -> Pin<Box<dyn Future<Output = Served> + Send + 'a>> {
    Box::pin(A::serve(svc, ctx, body, out))
}

/// Serves a request with its API's registry line.
///
/// Heartbeat and OffsetCommit, most of what a busy coordinator serves, run
/// inline: their futures are small (`the_futures_of_heartbeats_and_commits_stay_small`
/// keeps them at 512 bytes or less), and the request's slot in its
/// connection's queue holds them without the allocation every other API's
/// boxed future costs (docs/benchmarks.md, "Commits without copies of
/// their names").
pub async fn serve(
    api: &'static Registered,
    svc: &Services,
    ctx: &RequestContext,
    body: &mut Bytes,
    out: &mut BytesMut,
) -> Served {
    match api.support.key {
        k if k == heartbeat::Heartbeat::SUPPORT.key => heartbeat::Heartbeat::serve(svc, ctx, body, out).await,
        k if k == offset_commit::OffsetCommit::SUPPORT.key => {
            offset_commit::OffsetCommit::serve(svc, ctx, body, out).await
        }
        _ => (api.serve)(svc, ctx, body, out).await,
    }
}

/// The registry line of an API.
const fn line<A: Api>() -> Registered {
    Registered { support: A::SUPPORT, owner: A::OWNER, sidecar_only: A::SIDECAR_ONLY, serve: serve_boxed::<A> }
}

/// Every API kcoord serves, in key order: one line each.
pub static REGISTRY: &[Registered] = &[
    line::<produce::Produce>(),
    line::<fetch::Fetch>(),
    line::<list_offsets::ListOffsets>(),
    line::<metadata::Metadata>(),
    line::<offset_commit::OffsetCommit>(),
    line::<offset_fetch::OffsetFetch>(),
    line::<find_coordinator::FindCoordinator>(),
    line::<join_group::JoinGroup>(),
    line::<heartbeat::Heartbeat>(),
    line::<leave_group::LeaveGroup>(),
    line::<sync_group::SyncGroup>(),
    line::<describe_groups::DescribeGroups>(),
    line::<list_groups::ListGroups>(),
    line::<sasl_handshake::SaslHandshake>(),
    line::<api_versions::ApiVersions>(),
    line::<create_topics::CreateTopics>(),
    line::<delete_topics::DeleteTopics>(),
    line::<init_producer_id::InitProducerId>(),
    line::<txn_offset_commit::TxnOffsetCommit>(),
    line::<describe_acls::DescribeAcls>(),
    line::<create_acls::CreateAcls>(),
    line::<delete_acls::DeleteAcls>(),
    line::<sasl_authenticate::SaslAuthenticate>(),
    line::<create_partitions::CreatePartitions>(),
    line::<delegation_tokens::CreateDelegationToken>(),
    line::<delegation_tokens::RenewDelegationToken>(),
    line::<delegation_tokens::ExpireDelegationToken>(),
    line::<delegation_tokens::DescribeDelegationToken>(),
    line::<delete_groups::DeleteGroups>(),
    line::<offset_delete::OffsetDelete>(),
    line::<describe_user_scram_credentials::DescribeUserScramCredentials>(),
    line::<alter_user_scram_credentials::AlterUserScramCredentials>(),
    line::<consumer_group_heartbeat::ConsumerGroupHeartbeat>(),
    line::<consumer_group_describe::ConsumerGroupDescribe>(),
];

/// The registry line for `key`, sidecar-only APIs included.
pub fn registered(key: i16) -> Option<&'static Registered> {
    REGISTRY.iter().find(|r| r.support.key == key)
}

/// The APIs standalone kcoord serves and advertises, in key order.
pub fn supported() -> &'static [ApiSupport] {
    static TABLE: OnceLock<Vec<ApiSupport>> = OnceLock::new();
    TABLE.get_or_init(|| REGISTRY.iter().filter(|r| !r.sidecar_only).map(|r| r.support).collect())
}

/// The standalone entry for `key`, if kcoord serves it.
pub fn lookup(key: i16) -> Option<&'static ApiSupport> {
    supported().iter().find(|s| s.key == key)
}

/// The standalone ApiVersions table, as (key, min, max).
pub fn own_table() -> Arc<Vec<(i16, i16, i16)>> {
    static TABLE: OnceLock<Arc<Vec<(i16, i16, i16)>>> = OnceLock::new();
    TABLE.get_or_init(|| Arc::new(supported().iter().map(|s| (s.key, s.min, s.max)).collect())).clone()
}

/// Human-readable name of an API key, for logs.
pub fn api_name(key: i16) -> String {
    match registered(key) {
        Some(r) => r.support.name.to_string(),
        None => match kafka_protocol::messages::ApiKey::try_from(key) {
            Ok(k) => format!("{k:?}"),
            Err(_) => format!("ApiKey({key})"),
        },
    }
}

/// What the API modules share.
mod prelude {
    pub(super) use super::{Api, Owner, Served};
    pub(super) use crate::protocol::versions::ApiSupport;
    pub(super) use crate::security::acl::Operation::Read;
    pub(super) use crate::server::authorize::Guard;
    pub(super) use crate::server::dispatch::{RequestContext, RouteError};
    pub(super) use crate::server::{observe, Services};
    pub(super) use bytes::{Bytes, BytesMut};

    /// The standalone data plane; sidecar mode forwards its APIs instead.
    pub(super) fn data_plane(svc: &Services) -> Result<&std::sync::Arc<crate::topics::DataPlane>, RouteError> {
        svc.data_plane.as_ref().ok_or_else(|| RouteError::Other("no data plane in sidecar mode".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future an API's `serve` returns, without calling it.
    fn serve_future_size<A: Api>() -> usize {
        fn size<F, R>(_: F) -> usize
        where
            F: FnOnce(&'static Services, &'static RequestContext, &'static mut Bytes, &'static mut BytesMut) -> R,
        {
            std::mem::size_of::<R>()
        }
        size(|svc, ctx, body, out| A::serve(svc, ctx, body, out))
    }

    /// Each of these futures is built, moved into its box and polled for
    /// every heartbeat and commit, and a byte of it costs on every request:
    /// at 1.5 and 2.6 KB, a tenth of the daemon's CPU went to copying them
    /// (docs/benchmarks.md, "Smaller request futures"). What made them
    /// large was the shard call's state; a rare await kept inline would do
    /// it again.
    #[test]
    fn the_futures_of_heartbeats_and_commits_stay_small() {
        for (name, size) in [
            ("Heartbeat", serve_future_size::<heartbeat::Heartbeat>()),
            ("OffsetCommit", serve_future_size::<offset_commit::OffsetCommit>()),
        ] {
            assert!(size <= 512, "{name}'s future is {size} bytes: box the large, rare await that grew it");
        }
    }

    #[test]
    fn the_registry_is_in_key_order_with_each_key_once() {
        let keys: Vec<i16> = REGISTRY.iter().map(|r| r.support.key).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn the_sidecar_delegates_exactly_the_sidecar_only_apis() {
        let sidecar_only: Vec<ApiSupport> = REGISTRY.iter().filter(|r| r.sidecar_only).map(|r| r.support).collect();
        assert_eq!(sidecar_only, crate::sidecar::versions::DELEGATED);
        assert!(supported().iter().all(|s| !crate::sidecar::versions::DELEGATED.contains(s)));
    }

    #[test]
    fn a_sidecar_answers_every_coordinator_api_itself() {
        for r in REGISTRY.iter().filter(|r| r.owner == Owner::Coordinator) {
            assert!(crate::sidecar::versions::is_local(r.support.key), "{}", r.support.name);
        }
    }

    #[test]
    fn metadata_max_is_never_10_or_11() {
        // librdkafka asserts when Metadata tops out at 10 or 11 (topic ids
        // without the v12 fields it needs).
        let m = lookup(3).unwrap();
        assert!(m.max != 10 && m.max != 11);
    }

    #[test]
    fn advertised_ranges_fit_the_codec() {
        use kafka_protocol::messages::ApiKey;
        for r in REGISTRY {
            let s = r.support;
            let k = ApiKey::try_from(s.key).unwrap();
            let codec = k.valid_versions();
            assert!(
                s.min >= codec.min && s.max <= codec.max,
                "{} {}..{} outside codec {}",
                s.name,
                s.min,
                s.max,
                codec
            );
            // Our flexible boundary must agree with the codec's header choice.
            for v in s.min..=s.max {
                let flex_header = k.request_header_version(v) >= 2;
                assert_eq!(flex_header, s.is_flexible(v), "{} v{}", s.name, v);
            }
        }
    }
}
