//! InitProducerId (key 22), v0–v4, for idempotent producers only. v2 is
//! flexible; v3 lets a client send its current id and epoch (Kafka answers a
//! null transactional id with a fresh id regardless); v4 only adds error
//! codes. Transactional ids are not served (see `topics::producer_ids`).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::protocol::codec::{self, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::topics::producer_ids as t;

pub const SUPPORT: ApiSupport = ApiSupport::new(22, "InitProducerId", 0, 4, Some(2));

pub fn decode(body: &mut Bytes, version: i16) -> Result<t::InitProducerIdRequest, DecodeError> {
    let r: InitProducerIdRequest = codec::decode(SUPPORT.name, body, version)?;
    Ok(t::InitProducerIdRequest {
        transactional_id: r.transactional_id.as_ref().map(|id| st(&id.0)),
        producer_id: if version >= 3 { r.producer_id.0 } else { -1 },
        producer_epoch: if version >= 3 { r.producer_epoch } else { -1 },
    })
}

pub fn encode(resp: &t::InitProducerIdResponse, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = InitProducerIdResponse::default()
        .with_error_code(resp.error.0)
        .with_producer_id(ProducerId(resp.producer_id))
        .with_producer_epoch(resp.producer_epoch);
    codec::encode(SUPPORT.name, &r, version, out)
}
