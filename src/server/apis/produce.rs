//! Produce: records written by the data plane, for the partitions the
//! client may write.

use super::prelude::*;
use crate::protocol::api::produce as wire;

pub struct Produce;

impl Api for Produce {
    const SUPPORT: ApiSupport = wire::SUPPORT;
    const OWNER: Owner = Owner::Topics;

    async fn serve(svc: &Services, ctx: &RequestContext, body: &mut Bytes, out: &mut BytesMut) -> Served {
        let v = ctx.version();
        let mut req = wire::decode(body, v)?;
        let acks = req.acks;
        let produced = match Guard::new(&svc.authorizer, ctx).produce(&mut req) {
            Ok(denied) if denied.is_empty() => data_plane(svc)?.produce(req).await.map_err(RouteError::Other)?,
            // acks=0 has no answer to carry an error: Kafka closes the
            // connection instead, after writing the partitions that
            // were authorized.
            Err(_) if acks == 0 => return Err(RouteError::Other("an acks=0 Produce was not authorized".into())),
            Err(answer) => Some(answer),
            Ok(denied) => {
                let written = data_plane(svc)?.produce(req).await.map_err(RouteError::Other)?;
                if acks == 0 {
                    return Err(RouteError::Other(
                        "an acks=0 Produce named topics the client may not write (the others were written)".into(),
                    ));
                }
                written.map(|mut r| {
                    r.topics.extend(denied);
                    r
                })
            }
        };
        match produced {
            Some(resp) => {
                observe::errors(Self::SUPPORT.name, &resp);
                wire::encode(&resp, v, out)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
