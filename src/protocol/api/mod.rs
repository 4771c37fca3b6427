//! One module per Kafka API: its advertised versions and the conversion
//! between kafka-protocol's wire structs and kcoord's own request/response
//! types. Per-version differences live here, in one place per API.
//!
//! What is served is not decided here: an API is served (and advertised)
//! once its handler is registered in `server::apis`, which names its
//! module's `SUPPORT`.

pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delegation_token;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_groups;
pub mod describe_user_scram_credentials;
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
