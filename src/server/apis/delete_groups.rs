//! DeleteGroups: groups deleted by their shards, those the client may
//! delete.

use super::prelude::*;
use crate::coordinator::messages::DeleteGroupsResponse;
use crate::protocol::api::delete_groups as wire;

pub struct DeleteGroups;

impl Api for DeleteGroups {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Coordinator;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let (allowed, denied) = Guard::new(&svc.authorizer, ctx).deletable_groups(wire::decode(body, v)?);
        let mut resp = match allowed.is_empty() {
            true => DeleteGroupsResponse { results: vec![] },
            false => svc.coordinator.delete_groups(allowed).await?,
        };
        resp.results.extend(denied);
        observe::errors(Self::SUPPORT.name, &resp);
        wire::encode(&resp, v, out)?;
        Ok(true)
    }
}
