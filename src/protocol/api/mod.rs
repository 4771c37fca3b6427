//! One module per Kafka API: its advertised versions and the conversion
//! between kafka-protocol's wire structs and kcoord's own request/response
//! types. Per-version differences live here, in one place per API.

pub mod api_versions;
pub mod delete_groups;
pub mod describe_groups;
pub mod find_coordinator;
pub mod heartbeat;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod sync_group;

use super::versions::ApiSupport;

/// Every API we serve, in key order. Adding an API means adding its module
/// here *and* a dispatch arm (a test checks every entry is dispatched).
pub const SUPPORTED: &[ApiSupport] = &[
    metadata::SUPPORT,
    offset_commit::SUPPORT,
    offset_fetch::SUPPORT,
    find_coordinator::SUPPORT,
    join_group::SUPPORT,
    heartbeat::SUPPORT,
    leave_group::SUPPORT,
    sync_group::SUPPORT,
    describe_groups::SUPPORT,
    list_groups::SUPPORT,
    api_versions::SUPPORT,
    delete_groups::SUPPORT,
    offset_delete::SUPPORT,
];
