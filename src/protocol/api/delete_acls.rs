//! DeleteAcls (key 31), v1–v3 (v0 was removed in Kafka 4.0).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};

use crate::error_code::ErrorCode;
use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::security::acl::filter::AclFilter;
use crate::security::acl::AclBinding;

pub const SUPPORT: ApiSupport = ApiSupport::new(31, "DeleteAcls", 1, 3, Some(2));

/// Each filter as [`super::describe_acls::decode`] reads one.
pub fn decode(body: &mut Bytes, version: i16) -> Result<Vec<Result<Option<AclFilter>, String>>, DecodeError> {
    let r: DeleteAclsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(r.filters
        .iter()
        .map(|f| {
            AclFilter::from_wire(
                f.resource_type_filter,
                f.resource_name_filter.as_ref().map(st),
                f.pattern_type_filter,
                f.principal_filter.as_ref().map(st),
                f.host_filter.as_ref().map(st),
                f.operation,
                f.permission_type,
            )
        })
        .collect())
}

/// One filter's answer: an error, or the ACLs it deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterResult {
    pub error: ErrorCode,
    pub message: Option<String>,
    pub deleted: Vec<AclBinding>,
}

pub fn encode(results: &[FilterResult], version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = DeleteAclsResponse::default().with_filter_results(
        results
            .iter()
            .map(|f| {
                DeleteAclsFilterResult::default()
                    .with_error_code(f.error.0)
                    .with_error_message(osb(f.message.clone()))
                    .with_matching_acls(
                        f.deleted
                            .iter()
                            .map(|a| {
                                DeleteAclsMatchingAcl::default()
                                    .with_resource_type(a.resource_type.code())
                                    .with_resource_name(sb(a.resource_name.clone()))
                                    .with_pattern_type(a.pattern_type.code())
                                    .with_principal(sb(a.principal.clone()))
                                    .with_host(sb(a.host.clone()))
                                    .with_operation(a.operation.code())
                                    .with_permission_type(a.permission_type.code())
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
