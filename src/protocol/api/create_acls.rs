//! CreateAcls (key 30), v1–v3 (v0 was removed in Kafka 4.0).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};

use crate::error_code::ErrorCode;
use crate::protocol::codec::{self, osb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::security::acl::filter::binding_from_wire;
use crate::security::acl::AclBinding;

pub const SUPPORT: ApiSupport = ApiSupport::new(30, "CreateAcls", 1, 3, Some(2));

/// Each creation, or why it is invalid (Kafka's INVALID_REQUEST message).
pub fn decode(body: &mut Bytes, version: i16) -> Result<Vec<Result<AclBinding, String>>, DecodeError> {
    let r: CreateAclsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(r.creations
        .iter()
        .map(|c| {
            binding_from_wire(
                c.resource_type,
                st(&c.resource_name),
                c.resource_pattern_type,
                st(&c.principal),
                st(&c.host),
                c.operation,
                c.permission_type,
            )
        })
        .collect())
}

/// One (error, message) per creation, in request order.
pub fn encode(results: &[(ErrorCode, Option<String>)], version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = CreateAclsResponse::default().with_results(
        results
            .iter()
            .map(|(e, m)| AclCreationResult::default().with_error_code(e.0).with_error_message(osb(m.clone())))
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
