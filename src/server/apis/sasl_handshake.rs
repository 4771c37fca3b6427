//! SaslHandshake outside a SASL exchange: on a listener without SASL, or
//! after authentication (an exchange is the connection's, `security::sasl`).
//! Kafka's KafkaApis answers ILLEGAL_SASL_STATE.

use super::prelude::*;
use crate::error_code::ErrorCode;
use crate::protocol::api::sasl_handshake as wire;

pub struct SaslHandshake;

impl Api for SaslHandshake {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Connection;

    async fn serve(_svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        wire::decode(body, v)?;
        wire::encode(ErrorCode::ILLEGAL_SASL_STATE, &[], v, out)?;
        Ok(true)
    }
}
