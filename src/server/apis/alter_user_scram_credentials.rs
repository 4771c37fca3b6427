//! AlterUserScramCredentials: SCRAM users added to, changed in or removed
//! from the credentials file (`server::user_admin`).

use super::prelude::*;
use crate::protocol::api::alter_user_scram_credentials as wire;

pub struct AlterUserScramCredentials;

impl Api for AlterUserScramCredentials {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Users;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let guard = Guard::new(&svc.authorizer, ctx);
        let (deletions, upsertions) = wire::decode(body, v)?;
        let results = crate::server::user_admin::alter(svc, &guard, deletions, upsertions).await;
        wire::encode(&results, v, out)?;
        Ok(true)
    }
}
