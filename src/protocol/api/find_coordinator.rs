//! FindCoordinator (key 10), v0–v6, including batched keys (v4+, KIP-699).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use crate::cluster::{self, CoordinatorAnswer};
use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;

pub const SUPPORT: ApiSupport = ApiSupport::new(10, "FindCoordinator", 0, 6, Some(3));

pub fn decode(body: &mut Bytes, version: i16) -> Result<cluster::FindCoordinatorRequest, DecodeError> {
    let r: FindCoordinatorRequest = codec::decode(SUPPORT.name, body, version)?;
    let keys = if version >= 4 { r.coordinator_keys.iter().map(st).collect() } else { vec![st(&r.key)] };
    let key_type = if version >= 1 { r.key_type } else { cluster::KEY_TYPE_GROUP };
    Ok(cluster::FindCoordinatorRequest { key_type, keys })
}

/// Whether this version may ask for share coordinators.
pub fn share_allowed(version: i16) -> bool {
    version >= 6
}

pub fn encode(answers: &[CoordinatorAnswer], version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let mut resp = FindCoordinatorResponse::default();
    if version >= 4 {
        resp.coordinators = answers
            .iter()
            .map(|a| {
                Coordinator::default()
                    .with_key(sb(a.key.clone()))
                    .with_node_id(BrokerId(a.node_id))
                    .with_host(sb(a.host.clone()))
                    .with_port(a.port)
                    .with_error_code(a.error.0)
                    .with_error_message(osb(a.error_message.clone()))
            })
            .collect();
    } else if let Some(a) = answers.first() {
        resp.error_code = a.error.0;
        resp.node_id = BrokerId(a.node_id);
        resp.host = sb(a.host.clone());
        resp.port = a.port;
        if version >= 1 {
            resp.error_message = osb(a.error_message.clone());
        }
    }
    codec::encode(SUPPORT.name, &resp, version, out)
}
