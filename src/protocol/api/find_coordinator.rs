//! FindCoordinator (key 10), v0–v6, including batched keys (v4+, KIP-699).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::Encodable;

use crate::cluster::{self, CoordinatorAnswer};
use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::protocol::wire::put_uvarint;

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

/// Encodes the answers as they come: from v4 each key's entry is encoded on
/// its own, so a batch of a million keys costs its response bytes, not a
/// million decoded entries besides (kafka-protocol would need the whole
/// response as one struct). The response limit is checked as it grows.
pub fn encode(
    answers: impl ExactSizeIterator<Item = CoordinatorAnswer>,
    version: i16,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let mut answers = answers;
    if version < 4 {
        let mut resp = FindCoordinatorResponse::default();
        if let Some(a) = answers.next() {
            resp.error_code = a.error.0;
            resp.node_id = BrokerId(a.node_id);
            resp.host = sb(a.host);
            resp.port = a.port;
            if version >= 1 {
                resp.error_message = osb(a.error_message);
            }
        }
        return codec::encode(SUPPORT.name, &resp, version, out);
    }
    let err = |reason: String| EncodeError { api: SUPPORT.name, version, reason };
    // v4+ (always flexible): throttle_time_ms, coordinators, tagged fields.
    out.put_i32(0);
    let count = u32::try_from(answers.len()).map_err(|_| err("too many coordinator keys".into()))?;
    put_uvarint(out, count.saturating_add(1));
    for (i, a) in answers.enumerate() {
        let entry = Coordinator::default()
            .with_key(sb(a.key))
            .with_node_id(BrokerId(a.node_id))
            .with_host(sb(a.host))
            .with_port(a.port)
            .with_error_code(a.error.0)
            .with_error_message(osb(a.error_message));
        entry.encode(out, version).map_err(|e| err(e.to_string()))?;
        if i % 1024 == 0 {
            codec::check_size(SUPPORT.name, version, out.len())?;
        }
    }
    put_uvarint(out, 0);
    codec::check_size(SUPPORT.name, version, out.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::ErrorCode;

    fn answer(key: &str, error: ErrorCode) -> CoordinatorAnswer {
        CoordinatorAnswer {
            key: key.into(),
            node_id: 3,
            host: "h".into(),
            port: 9092,
            error,
            error_message: Some("NONE".into()),
        }
    }

    #[test]
    fn batched_answers_encode_exactly_as_the_whole_response_would() {
        let answers: Vec<CoordinatorAnswer> = (0..300)
            .map(|i| answer(&format!("g{i}"), if i % 7 == 0 { ErrorCode::INVALID_REQUEST } else { ErrorCode::NONE }))
            .collect();
        for version in 4..=SUPPORT.max {
            let mut streamed = BytesMut::new();
            codec::RESPONSE_LIMIT
                .sync_scope(usize::MAX, || encode(answers.clone().into_iter(), version, &mut streamed))
                .unwrap();
            let mut whole = FindCoordinatorResponse::default();
            whole.coordinators = answers
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
            let mut expected = BytesMut::new();
            kafka_protocol::protocol::Encodable::encode(&whole, &mut expected, version).unwrap();
            assert_eq!(streamed, expected, "v{version}");
        }
    }
}
