//! DescribeAcls: the ACL file's ACLs matching a filter (`server::acl_admin`).

use super::prelude::*;
use crate::protocol::api::describe_acls as wire;

pub struct DescribeAcls;

impl Api for DescribeAcls {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Acls;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let (error, message, acls) = crate::server::acl_admin::describe(svc, &guard, wire::decode(body, v)?);
        wire::encode(error, message, &acls, v, out)?;
        Ok(true)
    }
}
