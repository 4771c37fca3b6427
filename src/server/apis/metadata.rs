//! Metadata: the cluster's brokers and the catalog's topics, with this
//! node at the address of the listener the request came in on.

use super::prelude::*;
use crate::protocol::api::metadata as wire;

pub struct Metadata;

impl Api for Metadata {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Cluster;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let mut req = wire::decode(body, v)?;
        let denied = guard.metadata(&mut req, &svc.catalog, svc.config.topics.auto_create);
        let mut resp = svc.cluster.metadata(&req, &svc.catalog, svc.topic_creator.as_ref());
        guard.metadata_answer(&req, &mut resp, denied, v);
        if let Some(ep) = svc.own_endpoint(ctx.caller.listener) {
            for b in resp.brokers.iter_mut().filter(|b| b.node_id == svc.cluster.node.node_id) {
                (b.host, b.port) = (ep.host.clone(), i32::from(ep.port));
            }
        }
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
