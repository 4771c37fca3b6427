//! CreateAcls: ACLs added to the ACL file (`server::acl_admin`).

use super::prelude::*;
use crate::protocol::api::create_acls as wire;

pub struct CreateAcls;

impl Api for CreateAcls {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Acls;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let results = crate::server::acl_admin::create(svc, &guard, wire::decode(body, v)?).await;
        wire::encode(&results, v, out)?;
        Ok(true)
    }
}
