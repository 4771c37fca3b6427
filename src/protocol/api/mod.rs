//! One module per Kafka API: its advertised versions and the conversion
//! between kafka-protocol's wire structs and kcoord's own request/response
//! types. Per-version differences live here, in one place per API.

pub mod api_versions;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_groups;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
pub mod txn_offset_commit;

use super::versions::ApiSupport;

/// Every API we serve, in key order. Adding an API means adding its module
/// here *and* a dispatch arm (a test checks every entry is dispatched).
pub const SUPPORTED: &[ApiSupport] = &[
    produce::SUPPORT,
    fetch::SUPPORT,
    list_offsets::SUPPORT,
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
    sasl_handshake::SUPPORT,
    api_versions::SUPPORT,
    create_topics::SUPPORT,
    delete_topics::SUPPORT,
    init_producer_id::SUPPORT,
    describe_acls::SUPPORT,
    create_acls::SUPPORT,
    delete_acls::SUPPORT,
    sasl_authenticate::SUPPORT,
    create_partitions::SUPPORT,
    delete_groups::SUPPORT,
    offset_delete::SUPPORT,
    consumer_group_heartbeat::SUPPORT,
    consumer_group_describe::SUPPORT,
];
