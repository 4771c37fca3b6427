//! DescribeUserScramCredentials: the credentials file's SCRAM users
//! (`server::user_admin`).

use super::prelude::*;
use crate::protocol::api::describe_user_scram_credentials as wire;

pub struct DescribeUserScramCredentials;

impl Api for DescribeUserScramCredentials {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Users;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let (error, message, results) = crate::server::user_admin::describe(svc, &guard, wire::decode(body, v)?).await;
        wire::encode(error, message, &results, v, out)?;
        Ok(true)
    }
}
