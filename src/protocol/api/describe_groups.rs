//! DescribeGroups (key 15), v0–v6.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(15, "DescribeGroups", 0, 6, Some(5));

pub fn decode(body: &mut Bytes, version: i16) -> Result<m::DescribeGroupsRequest, DecodeError> {
    let r: DescribeGroupsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(m::DescribeGroupsRequest {
        version,
        groups: r.groups.iter().map(|g| st(&g.0)).collect(),
        include_authorized_operations: version >= 3 && r.include_authorized_operations,
    })
}

pub fn encode(groups: &[m::DescribedGroup], version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = DescribeGroupsResponse::default().with_groups(
        groups
            .iter()
            .map(|g| {
                let mut d = DescribedGroup::default()
                    .with_error_code(g.error.0)
                    .with_group_id(GroupId(sb(g.group_id.clone())))
                    .with_group_state(sb(g.state.clone()))
                    .with_protocol_type(sb(g.protocol_type.clone()))
                    .with_protocol_data(sb(g.protocol_data.clone()))
                    .with_members(
                        g.members
                            .iter()
                            .map(|x| {
                                let mut mm = DescribedGroupMember::default()
                                    .with_member_id(sb(x.member_id.clone()))
                                    .with_client_id(sb(x.client_id.clone()))
                                    .with_client_host(sb(x.client_host.clone()))
                                    .with_member_metadata(x.metadata.clone())
                                    .with_member_assignment(x.assignment.clone());
                                if version >= 4 {
                                    mm.group_instance_id = osb(x.group_instance_id.clone());
                                }
                                mm
                            })
                            .collect(),
                    );
                if version >= 3 {
                    if let Some(ops) = g.authorized_operations {
                        d.authorized_operations = ops;
                    }
                }
                if version >= 6 {
                    d.error_message = osb(g.error_message.clone());
                }
                d
            })
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
