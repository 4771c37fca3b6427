//! DeleteGroups (key 42), v0–v2.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};

use crate::coordinator::messages as m;
use crate::protocol::codec::{self, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(42, "DeleteGroups", 0, 2, Some(2));

pub fn decode(body: &mut Bytes, version: i16) -> Result<Vec<String>, DecodeError> {
    let r: DeleteGroupsRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(r.groups_names.iter().map(|g| st(&g.0)).collect())
}

pub fn encode(resp: &m::DeleteGroupsResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = DeleteGroupsResponse::default().with_results(
        resp.results
            .iter()
            .map(|(g, e)| DeletableGroupResult::default().with_group_id(GroupId(sb(g.clone()))).with_error_code(e.0))
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
