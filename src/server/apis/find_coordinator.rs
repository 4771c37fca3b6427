//! FindCoordinator: the node coordinating each key, at the address of the
//! listener the request came in on.

use super::prelude::*;
use crate::cluster::CoordinatorAnswer;
use crate::error_code::ErrorCode;
use crate::protocol::api::find_coordinator as wire;
use crate::server::authorize::default_message;

pub struct FindCoordinator;

impl Api for FindCoordinator {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Cluster;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let req = wire::decode(body, v)?;
        let answers = svc.cluster.coordinator_answers(req.key_type, &req.keys, wire::share_allowed(v));
        let answers = answers.map(|a| match guard.coordinator_key(req.key_type, &a.key) {
            Ok(()) => a,
            Err(e) => {
                // v4+ answers per key, without a message.
                let mut denied = CoordinatorAnswer::error(&a.key, e, default_message(e));
                denied.error_message = denied.error_message.filter(|_| v < 4);
                denied
            }
        });
        let answers = answers.map(|mut a| {
            if a.error == ErrorCode::NONE {
                if let Some(ep) = svc.advertised_node(ctx.caller.listener, a.node_id) {
                    (a.host, a.port) = ep;
                }
            }
            a
        });
        let answers = answers.inspect(|a| observe::errors(Self::SUPPORT.name, a));
        wire::encode(answers, v, out)?;
        Ok(true)
    }
}
