//! DeleteAcls: ACLs removed from the ACL file (`server::acl_admin`).

use super::prelude::*;
use crate::protocol::api::delete_acls as wire;

pub struct DeleteAcls;

impl Api for DeleteAcls {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Acls;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let results = crate::server::acl_admin::delete(svc, &guard, wire::decode(body, v)?).await;
        wire::encode(&results, v, out)?;
        Ok(true)
    }
}
