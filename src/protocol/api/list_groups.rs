//! ListGroups (key 16), v0–v5: states filter from v4 (KIP-518), types
//! filter from v5 (KIP-848).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, sb, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(16, "ListGroups", 0, 5, Some(3));

pub fn decode(body: &mut Bytes, version: i16) -> Result<m::ListGroupsRequest, DecodeError> {
    let r: ListGroupsRequest = codec::decode(SUPPORT.name, body, version)?;
    // Filters compare case-insensitively against lower-cased, trimmed names.
    let norm = |v: &[kafka_protocol::protocol::StrBytes]| v.iter().map(|s| s.trim().to_ascii_lowercase()).collect();
    Ok(m::ListGroupsRequest {
        states_filter: if version >= 4 { norm(&r.states_filter) } else { Vec::new() },
        types_filter: if version >= 5 { norm(&r.types_filter) } else { Vec::new() },
    })
}

pub fn encode(resp: &m::ListGroupsResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = ListGroupsResponse::default().with_error_code(resp.error.0).with_groups(
        resp.groups
            .iter()
            .map(|g| {
                let mut l = ListedGroup::default()
                    .with_group_id(GroupId(sb(g.group_id.clone())))
                    .with_protocol_type(sb(g.protocol_type.clone()));
                if version >= 4 {
                    l.group_state = sb(g.state.clone());
                }
                if version >= 5 {
                    l.group_type = sb(g.group_type.clone());
                }
                l
            })
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
