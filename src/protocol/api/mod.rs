//! One module per Kafka API: its advertised versions and the conversion
//! between kafka-protocol's wire structs and kcoord's own request/response
//! types. Per-version differences live here, in one place per API.

pub mod api_versions;
pub mod find_coordinator;
pub mod metadata;

use super::versions::ApiSupport;

/// Every API we serve, in key order. Adding an API means adding its module
/// here *and* a dispatch arm (a test checks every entry is dispatched).
pub const SUPPORTED: &[ApiSupport] = &[
    metadata::SUPPORT,
    find_coordinator::SUPPORT,
    api_versions::SUPPORT,
];
