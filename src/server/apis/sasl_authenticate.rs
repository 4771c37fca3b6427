//! SaslAuthenticate outside a SASL exchange: on a listener without SASL, or
//! after authentication (an exchange is the connection's, `security::sasl`).
//! Kafka's KafkaApis answers ILLEGAL_SASL_STATE.

use super::prelude::*;
use crate::error_code::ErrorCode;
use crate::protocol::api::sasl_authenticate as wire;

pub struct SaslAuthenticate;

impl Api for SaslAuthenticate {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Connection;

    async fn serve(_svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        wire::decode(body, v)?;
        let answer = wire::Answer {
            error: ErrorCode::ILLEGAL_SASL_STATE,
            message: Some("SaslAuthenticate request received after successful authentication".into()),
            token: Bytes::new(),
            session_lifetime_ms: 0,
        };
        wire::encode(&answer, v, out)?;
        Ok(true)
    }
}
