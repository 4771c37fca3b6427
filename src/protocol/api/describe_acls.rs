//! DescribeAcls (key 29), v1–v3 (v0 was removed in Kafka 4.0).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};

use crate::error_code::ErrorCode;
use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::security::acl::filter::AclFilter;
use crate::security::acl::AclBinding;

pub const SUPPORT: ApiSupport = ApiSupport::new(29, "DescribeAcls", 1, 3, Some(2));

/// The filter (`Ok(None)`: a resource type kcoord keeps no ACLs for), or
/// why it is invalid.
pub fn decode(body: &mut Bytes, version: i16) -> Result<Result<Option<AclFilter>, String>, DecodeError> {
    let r: DescribeAclsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(AclFilter::from_wire(
        r.resource_type_filter,
        r.resource_name_filter.as_ref().map(st),
        r.pattern_type_filter,
        r.principal_filter.as_ref().map(st),
        r.host_filter.as_ref().map(st),
        r.operation,
        r.permission_type,
    ))
}

/// The matching ACLs (sorted), grouped by resource pattern as Kafka does.
pub fn encode(
    error: ErrorCode,
    message: Option<String>,
    acls: &[AclBinding],
    version: i16,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for acl in acls {
        let same = resources.last().is_some_and(|r| {
            r.resource_type == acl.resource_type.code()
                && r.resource_name.as_str() == acl.resource_name
                && r.pattern_type == acl.pattern_type.code()
        });
        if !same {
            resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(acl.resource_type.code())
                    .with_resource_name(sb(acl.resource_name.clone()))
                    .with_pattern_type(acl.pattern_type.code()),
            );
        }
        if let Some(r) = resources.last_mut() {
            r.acls.push(
                AclDescription::default()
                    .with_principal(sb(acl.principal.clone()))
                    .with_host(sb(acl.host.clone()))
                    .with_operation(acl.operation.code())
                    .with_permission_type(acl.permission_type.code()),
            );
        }
    }
    let r = DescribeAclsResponse::default()
        .with_error_code(error.0)
        .with_error_message(osb(message))
        .with_resources(resources);
    codec::encode(SUPPORT.name, &r, version, out)
}
