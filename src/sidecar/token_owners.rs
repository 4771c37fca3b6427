//! Who a delegation token belongs to, for clients whose logins a sidecar
//! relays (`sidecar.client_authentication = "upstream"`).
//!
//! A client logging in with a delegation token (SCRAM with
//! `tokenauth=true`, KIP-48) names the token's id, not a user, and the
//! upstream authenticates the token's *owner*: Kafka names such a session
//! `User:<owner>`. The sidecar needs that name for its own decisions (group
//! ACLs, quotas), and reading the id as a user name would let a token's
//! sessions escape the rules written for its owner (a DENY on `User:mallory`
//! would not apply to mallory's token). So once the upstream accepts a token
//! login, the sidecar asks the upstream, under its own login, with
//! DescribeDelegationToken, and fails the login when the answer does not
//! name the token.
//!
//! Kafka answers DescribeDelegationToken with the tokens the asker owns,
//! renews or requested, may DESCRIBE (`DelegationToken` resource), or whose
//! owner it may DESCRIBE_TOKENS (`User` resource); so the sidecar's
//! upstream principal needs one of those ACLs, e.g. DESCRIBE on
//! `DelegationToken:*`. The answer carries each token's HMAC, which the
//! sidecar drops at once.
//!
//! A token's owner never changes, so owners are remembered (at most
//! [`MAX_REMEMBERED`] tokens; the memory starts over when full):
//! re-authentications and other connections of the same token cost no
//! request.

use std::collections::HashMap;
use std::sync::Mutex;

use kafka_protocol::messages::DescribeDelegationTokenRequest;
use kafka_protocol::messages::DescribeDelegationTokenResponse;

use super::upstream::Upstream;

/// Tokens whose owner is remembered at most.
pub const MAX_REMEMBERED: usize = 4096;

/// The owners of the tokens relayed logins used.
#[derive(Default)]
pub struct TokenOwners {
    known: Mutex<HashMap<String, String>>,
}

impl TokenOwners {
    /// The name of the owner of token `token_id`, asking the upstream
    /// broker at `broker` when it is not remembered; `Err` says why it is
    /// not known.
    pub async fn owner(&self, upstream: &Upstream, broker: &str, token_id: &str) -> Result<String, String> {
        if let Some(owner) = self.lock().get(token_id) {
            return Ok(owner.clone());
        }
        // Every token the sidecar may see: the owner is what is unknown.
        let request = DescribeDelegationTokenRequest::default().with_owners(None);
        let (_, answer) =
            upstream.call_addr(broker, &request, 0, 3).await.map_err(|e| format!("DescribeDelegationToken: {e}"))?;
        let owner = owner_in(&answer, token_id)?;
        let mut known = self.lock();
        if known.len() >= MAX_REMEMBERED {
            known.clear();
        }
        known.insert(token_id.to_string(), owner.clone());
        Ok(owner)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The owner's name of token `token_id` in a DescribeDelegationToken
/// answer, or why the answer does not tell.
pub fn owner_in(answer: &DescribeDelegationTokenResponse, token_id: &str) -> Result<String, String> {
    if answer.error_code != 0 {
        return Err(format!(
            "the upstream answered the sidecar's DescribeDelegationToken with {}",
            crate::admin::cluster::error_name(answer.error_code)
        ));
    }
    match answer.tokens.iter().find(|t| t.token_id.as_str() == token_id) {
        // Kafka's session of a token is User:<owner's name>, whatever the
        // owner principal's type.
        Some(token) if !token.principal_name.is_empty() => Ok(token.principal_name.to_string()),
        Some(_) => Err("the upstream names no owner for it".into()),
        None => Err("the upstream did not describe it to the sidecar's login (grant that principal DESCRIBE on \
             DelegationToken resources, or DESCRIBE_TOKENS on the token owners' User resources)"
            .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_delegation_token_response::DescribedDelegationToken;
    use kafka_protocol::protocol::StrBytes;

    fn token(id: &'static str, owner: &'static str) -> DescribedDelegationToken {
        DescribedDelegationToken::default()
            .with_token_id(StrBytes::from_static_str(id))
            .with_principal_type(StrBytes::from_static_str("User"))
            .with_principal_name(StrBytes::from_static_str(owner))
    }

    #[test]
    fn the_owner_is_the_principal_name_of_the_token_with_that_id() {
        let answer =
            DescribeDelegationTokenResponse::default().with_tokens(vec![token("t1", "alice"), token("t2", "bob")]);
        assert_eq!(owner_in(&answer, "t2"), Ok("bob".into()));
        assert_eq!(owner_in(&answer, "t1"), Ok("alice".into()));
    }

    #[test]
    fn a_token_not_described_or_an_error_leaves_the_owner_unknown() {
        let answer = DescribeDelegationTokenResponse::default().with_tokens(vec![token("t1", "alice")]);
        assert!(owner_in(&answer, "t3").unwrap_err().contains("DESCRIBE on DelegationToken"));
        assert!(owner_in(&answer, "T1").is_err(), "ids are compared exactly");
        let refused = DescribeDelegationTokenResponse::default().with_error_code(64);
        assert!(owner_in(&refused, "t1").unwrap_err().contains("DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"));
        let nameless = DescribeDelegationTokenResponse::default().with_tokens(vec![token("t1", "")]);
        assert!(owner_in(&nameless, "t1").is_err());
    }

    /// A broker that answers ApiVersions and DescribeDelegationToken (with
    /// `tokens`) and counts the DescribeDelegationToken requests it gets.
    async fn token_broker(
        tokens: Vec<DescribedDelegationToken>,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use bytes::{BufMut, BytesMut};
        use kafka_protocol::messages::api_versions_response::ApiVersion;
        use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, RequestHeader, ResponseHeader};
        use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let described = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = described.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (tokens, count) = (tokens.clone(), count.clone());
                tokio::spawn(async move {
                    loop {
                        let Ok(len) = socket.read_i32().await else { return };
                        let mut frame = vec![0; len as usize];
                        if socket.read_exact(&mut frame).await.is_err() {
                            return;
                        }
                        let mut body = bytes::Bytes::from(frame);
                        let key = i16::from_be_bytes([body[0], body[1]]);
                        let version = i16::from_be_bytes([body[2], body[3]]);
                        let api = ApiKey::try_from(key).unwrap();
                        let header = RequestHeader::decode(&mut body, api.request_header_version(version)).unwrap();
                        let mut out = BytesMut::new();
                        let reply = ResponseHeader::default().with_correlation_id(header.correlation_id);
                        if api == ApiKey::ApiVersions {
                            reply.encode(&mut out, ApiVersionsResponse::header_version(version)).unwrap();
                            let keys = [(18, 0, 3), (41, 0, 3)].map(|(k, lo, hi)| {
                                ApiVersion::default().with_api_key(k).with_min_version(lo).with_max_version(hi)
                            });
                            ApiVersionsResponse::default()
                                .with_api_keys(keys.to_vec())
                                .encode(&mut out, version)
                                .unwrap();
                        } else {
                            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            reply.encode(&mut out, DescribeDelegationTokenResponse::header_version(version)).unwrap();
                            DescribeDelegationTokenResponse::default()
                                .with_tokens(tokens.clone())
                                .encode(&mut out, version)
                                .unwrap();
                        }
                        let mut framed = BytesMut::new();
                        framed.put_i32(out.len() as i32);
                        framed.extend_from_slice(&out);
                        if socket.write_all(&framed).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, described)
    }

    #[tokio::test]
    async fn an_owner_is_asked_of_the_upstream_once_and_then_remembered() {
        use std::sync::atomic::Ordering::SeqCst;
        let (addr, described) = token_broker(vec![token("t1", "alice"), token("t2", "bob")]).await;
        let upstream = Upstream::new(
            vec![],
            std::time::Duration::from_secs(10),
            crate::security::client::ClientSecurity::plaintext(),
        );
        let owners = TokenOwners::default();
        assert_eq!(owners.owner(&upstream, &addr, "t2").await, Ok("bob".into()));
        assert_eq!(owners.owner(&upstream, &addr, "t2").await, Ok("bob".into()));
        assert_eq!(described.load(SeqCst), 1, "the second login of the token asked nothing");
        assert_eq!(owners.owner(&upstream, &addr, "t1").await, Ok("alice".into()));
        let unknown = owners.owner(&upstream, &addr, "t9").await.unwrap_err();
        assert!(unknown.contains("did not describe it"), "{unknown}");
        assert_eq!(described.load(SeqCst), 3);
    }
}
