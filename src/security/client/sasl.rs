//! SASL authentication of a client connection, as Kafka's
//! `SaslClientAuthenticator` runs it after ApiVersions: SaslHandshake v1
//! names the mechanism (PLAIN, SCRAM, OAUTHBEARER or GSSAPI), then the
//! tokens travel in SaslAuthenticate requests (v0–v2, the highest the broker advertises). The raw tokens of
//! a v0 handshake (brokers before Kafka 1.0) are not spoken.
//!
//! A broker may give the session a lifetime (KIP-368,
//! `connections.max.reauth.ms`): the caller learns it and renews the
//! session by reconnecting before it ends (see `docs/sidecar.md`).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest};

use super::scram::ScramClient;
use super::{Mechanism, SaslLogin, MAX_TOKEN_BYTES};
use crate::protocol::client::{s, ClientError, Connection};
use crate::security::kerberos::client::{GssapiClient, KerberosLogin};

/// Logs in on `conn` (whose API versions are known), connected to `addr`
/// ("host:port"; GSSAPI names the service by the host). Returns the
/// session lifetime the broker set, if any.
pub async fn authenticate(
    conn: &mut Connection,
    login: &SaslLogin,
    addr: &str,
) -> Result<Option<Duration>, ClientError> {
    let refused = |m: String| ClientError::Authentication(m);
    let name = login.mechanism.name();
    conn.version::<SaslHandshakeRequest>(1, 1)
        .map_err(|_| refused("the broker does not offer SaslHandshake v1 (SASL needs Kafka 1.0 or later)".into()))?;
    let hs = conn.call(&SaslHandshakeRequest::default().with_mechanism(s(name)), 1).await?;
    if hs.error_code != 0 {
        let offered: Vec<&str> = hs.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(refused(format!(
            "the broker does not enable SASL mechanism {name} (it offers {}; error {})",
            offered.join(", "),
            hs.error_code
        )));
    }
    let v = conn.version::<SaslAuthenticateRequest>(0, 2)?;
    let last = match login.mechanism {
        Mechanism::Plain => {
            let token = format!("\0{}\0{}", login.username, login.password);
            exchange(conn, v, token.into_bytes()).await?
        }
        Mechanism::OAuthBearer => {
            let tokens = login.tokens.as_ref().ok_or_else(|| refused("OAUTHBEARER without a token source".into()))?;
            let token = tokens.token().await.map_err(refused)?;
            let first = exchange(conn, v, oauth_initial_response(&token, &login.oauth_extensions)).await?;
            if !first.auth_bytes.is_empty() {
                // An RFC 7628 error challenge: acknowledged with %x01, after
                // which the broker fails the login with its message.
                let challenge = String::from_utf8_lossy(&first.auth_bytes).into_owned();
                exchange(conn, v, vec![1]).await?;
                return Err(refused(format!("the broker refused the token: {challenge}")));
            }
            first
        }
        Mechanism::Gssapi => {
            let kerberos = login.kerberos.clone().ok_or_else(|| refused("GSSAPI without Kerberos settings".into()))?;
            gssapi(conn, v, kerberos, super::stream::host_of(addr).to_string()).await?
        }
        Mechanism::Scram(m) => {
            let mut client =
                ScramClient::new(m, &login.username, &login.password, crate::security::scram::random_nonce());
            if login.delegation_token {
                client = client.delegation_token();
            }
            let first = exchange(conn, v, client.first_message()).await?;
            let fin = client.final_message(&first.auth_bytes).map_err(refused)?;
            let done = exchange(conn, v, fin).await?;
            client.verify_final(&done.auth_bytes).map_err(refused)?;
            done
        }
    };
    Ok(u64::try_from(last.session_lifetime_ms).ok().filter(|&ms| ms > 0).map(Duration::from_millis))
}

/// OAUTHBEARER's first message (RFC 7628 §3.1), as Kafka's
/// `OAuthBearerClientInitialResponse` writes it: no authorization id, the
/// token, then the extensions.
fn oauth_initial_response(token: &str, extensions: &[(String, String)]) -> Vec<u8> {
    let mut message = format!("n,,\u{1}auth=Bearer {token}");
    for (key, value) in extensions {
        message.push_str(&format!("\u{1}{key}={value}"));
    }
    message.push_str("\u{1}\u{1}");
    message.into_bytes()
}

/// Most SaslAuthenticate round trips a GSSAPI login takes: Kerberos needs
/// two for the context and one for the security layer; a broker asking for
/// more is not speaking GSSAPI.
const MAX_GSSAPI_ROUNDS: usize = 8;

/// A Kerberos call run off the async threads: the client and its next token.
type GssapiWork = dyn FnOnce() -> Result<(GssapiClient, Vec<u8>), String> + Send;

/// The GSSAPI exchange; the Kerberos calls (a KDC request at login) run
/// off the async threads.
async fn gssapi(
    conn: &mut Connection,
    v: i16,
    login: KerberosLogin,
    host: String,
) -> Result<SaslAuthenticateResponse, ClientError> {
    let refused = |m: String| ClientError::Authentication(m);
    let blocking = |f: Box<GssapiWork>| async move {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| ClientError::Authentication(format!("the Kerberos login stopped: {e}")))?
            .map_err(ClientError::Authentication)
    };
    let (mut client, mut token) = blocking(Box::new(move || GssapiClient::start(&login, &host))).await?;
    for _ in 0..MAX_GSSAPI_ROUNDS {
        let response = exchange(conn, v, token).await?;
        if client.is_done() {
            return Ok(response);
        }
        let challenge = response.auth_bytes;
        (client, token) = blocking(Box::new(move || {
            let next = client.step(&challenge)?;
            Ok((client, next))
        }))
        .await?;
    }
    Err(refused(format!("the broker's GSSAPI exchange did not end within {MAX_GSSAPI_ROUNDS} round trips")))
}

/// One SaslAuthenticate round trip; a broker error is the broker's message.
async fn exchange(conn: &mut Connection, v: i16, token: Vec<u8>) -> Result<SaslAuthenticateResponse, ClientError> {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let r = conn.call(&req, v).await?;
    if r.error_code != 0 {
        let message = r.error_message.as_ref().map(|m| m.to_string()).unwrap_or_else(|| "authentication failed".into());
        return Err(ClientError::Authentication(format!("{message} (error {})", r.error_code)));
    }
    if r.auth_bytes.len() > MAX_TOKEN_BYTES {
        return Err(ClientError::Authentication(format!(
            "a SASL token of {} bytes from the broker",
            r.auth_bytes.len()
        )));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oauthbearer_message_carries_the_extensions_after_the_token_and_the_server_reads_it() {
        let ext = vec![("logicalCluster".to_string(), "lkc-1".to_string()), ("identityPoolId".into(), "pool-2".into())];
        let message = oauth_initial_response("a.b.c", &ext);
        assert_eq!(
            message,
            b"n,,\x01auth=Bearer a.b.c\x01logicalCluster=lkc-1\x01identityPoolId=pool-2\x01\x01".to_vec()
        );
        let parsed = crate::security::oauthbearer::parse_initial_response(&message).unwrap();
        assert_eq!(parsed.token, "a.b.c");
        assert_eq!(oauth_initial_response("t", &[]), b"n,,\x01auth=Bearer t\x01\x01".to_vec());
    }
}
