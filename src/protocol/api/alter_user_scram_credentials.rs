//! AlterUserScramCredentials (key 51), v0 (KIP-554).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse};

use crate::protocol::codec::{self, osb, sb, st, DecodeError, EncodeError};
use crate::protocol::versions::ApiSupport;
use crate::security::scram_users::{Altered, Deletion, Upsertion};

pub const SUPPORT: ApiSupport = ApiSupport::new(51, "AlterUserScramCredentials", 0, 0, Some(0));

/// The deletions and upsertions, in request order.
pub fn decode(body: &mut Bytes, version: i16) -> Result<(Vec<Deletion>, Vec<Upsertion>), DecodeError> {
    let r: AlterUserScramCredentialsRequest = codec::decode(SUPPORT.name, body, version)?;
    let deletions = r.deletions.iter().map(|d| Deletion { user: st(&d.name), mechanism: d.mechanism }).collect();
    let upsertions = r
        .upsertions
        .iter()
        .map(|u| Upsertion {
            user: st(&u.name),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        })
        .collect();
    Ok((deletions, upsertions))
}

/// One result per user.
pub fn encode(results: &[Altered], version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
    let r = AlterUserScramCredentialsResponse::default().with_results(
        results
            .iter()
            .map(|a| {
                AlterUserScramCredentialsResult::default()
                    .with_user(sb(&a.user))
                    .with_error_code(a.error.0)
                    .with_error_message(osb(a.message.clone()))
            })
            .collect(),
    );
    codec::encode(SUPPORT.name, &r, version, out)
}
